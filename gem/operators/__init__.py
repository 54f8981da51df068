"""The four state-level operators (ingest, revise, forget, retrieve), one module each."""
