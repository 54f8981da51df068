"""The five baseline memory families of the trajectory benchmark, re-implemented honestly.

Each class follows the documented behaviour of its family (sources and every assumption are
in specs/trajectory-benchmark.md). Where a real system asks an LLM to decide something
(which facts a message holds, whether two facts are duplicates or contradict each other,
which retrieved memory answers the question), the baseline gets a perfect oracle instead:
the generator's own facts, exact matching on (topic, field, value), and a reader that picks
the retrieved statement with the latest stated valid time. The baselines are therefore an
upper bound on their families; whatever they still get wrong comes from the mechanism
(what is stored, what is retrieved, what is evicted, what is never propagated), not from a
weak model.

All of them embed with the same `gem.HashingEmbedder` as gem does.

    AppendOnlyVectorStore   (a) the paper's Figure 1: append every message, top-k cosine,
                                evict the oldest when the store is full
    OverwriteFactStore      (b) Mem0 as published (2025, "v2"): ADD / UPDATE / DELETE / NOOP
                                per extracted fact; UPDATE overwrites, the history table
                                keeps the old text
    AddOnlyFactStore        (c) Mem0's April 2026 algorithm ("v3"): ADD-only extraction,
                                semantic + BM25 + entity-boost retrieval
    BitemporalGraph         (d) Zep / Graphiti: fact edges with valid_at / invalid_at; a new
                                edge invalidates the edges it contradicts, one at a time
    RecencyImportanceMemory (e) Generative Agents retrieval (recency + importance +
                                relevance) over a MemGPT-style bounded active tier that
                                evicts to a searchable archive

One family per module (vector_store, mem0, zep, generative_agents); what they share (the
embedder, BM25, the oracle reader, top-k) is in common.
"""
from .generative_agents import RecencyImportanceMemory
from .mem0 import AddOnlyFactStore, OverwriteFactStore
from .vector_store import AppendOnlyVectorStore
from .zep import BitemporalGraph

__all__ = ["AppendOnlyVectorStore", "OverwriteFactStore", "AddOnlyFactStore", "BitemporalGraph",
           "RecencyImportanceMemory"]
