"""Adapters that let agent frameworks use gem as their memory. Each lives in its own module and
needs its framework installed (an extra of the package): `gem.integrations.langgraph`
(`pip install 'gem-memory[langgraph]'`)."""
