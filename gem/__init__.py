"""gem: Governed Evolving Memory for AI agents.

    import gem
    with gem.open() as mem:
        mem.ingest(gem.Fact("Website Redesign", "deadline", "March 15"))
        mem.retrieve("deadline of the website redesign").value("Website Redesign", "deadline")
"""
__version__ = "0.1.0"  # first: modules below read it while this package is importing

from .embed import Embedder, HashingEmbedder, MiniLMEmbedder
from .embed_numpy import NumpyMiniLMEmbedder
from .errors import (GemError, InvalidInput, LostCommits, PolicyCheckError, PolicyError,
                     PolicySyntaxError,
                     StoreError, StoreLocked, TransitionRejected, UnknownUnit,
                     WriteConflict)
from .aio import AsyncMemory
from .memory import Memory, engine_for, import_jsonl, open
from .model import (AuditReport, DroppedFact, Episode, EpisodeView, Explanation, Fact, FieldView,
                    FlagView, HistoryEntry, IngestResult, PendingRevision, Place, Provenance, Resolution,
                    RetrieveResult, StaleMark, TopicView)
from .resolve import Resolver, TieredResolver
from .transfer import TransferReport
from .extraction import ExtractionContext, KnownTopic
from . import llm
from .units import TopicId

__all__ = [
    "open", "engine_for", "import_jsonl", "Memory", "TransferReport", "AsyncMemory", "Fact",
    "Episode", "EpisodeView", "Place", "Embedder", "HashingEmbedder", "MiniLMEmbedder",
    "NumpyMiniLMEmbedder", "Resolver", "TieredResolver",
    "GemError", "InvalidInput", "UnknownUnit", "StoreLocked", "StoreError", "LostCommits",
    "TransitionRejected", "WriteConflict",
    "PolicyError", "PolicySyntaxError", "PolicyCheckError",
    "AuditReport", "Explanation", "FieldView", "HistoryEntry", "IngestResult", "Provenance",
    "RetrieveResult", "TopicView", "TopicId", "PendingRevision", "FlagView", "DroppedFact",
    "Resolution", "StaleMark", "ExtractionContext", "KnownTopic", "llm",
]
