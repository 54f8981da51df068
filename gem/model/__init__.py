"""The public boundary: what callers pass in and get back (pydantic, validated).

Internals use frozen dataclasses; pydantic stays here so that bad input is rejected
with one clear `InvalidInput` before any transition starts.
"""
from .admin import (TopicSummary, EpisodePage, TopicPage, GraphNode, GraphEdge, Neighbourhood,
                    SaliencePoint, LadderChange, UnitHistory, SalienceHistory, Violation,
                    AuditReport, ErasureReceipt, ErasureCheck)
from .inputs import (MAX_VALUE_DEPTH, MAX_VALUE_BYTES, MAX_LABELS, MAX_LABEL_LENGTH, json_problem,
                     as_utc, MAX_PLACE_NAME, Place, coordinate, as_place, Fact, EARLIEST, LATEST,
                     returned_facts, Episode, checked_time)
from .views import (Provenance, Observation, StaleMark, EpisodeView, HistoryEntry, Candidate,
                    FieldView, FlagView, PendingRevision, TopicView, RetrieveResult, DroppedFact,
                    Resolution, EXCERPT, episode_label, IngestResult, Explanation)

__all__ = [
    "AuditReport", "Candidate", "DroppedFact", "EARLIEST", "EXCERPT", "Episode", "EpisodePage",
    "EpisodeView", "ErasureCheck", "ErasureReceipt", "Explanation", "Fact", "FieldView",
    "FlagView", "GraphEdge", "GraphNode", "HistoryEntry", "IngestResult", "LATEST",
    "LadderChange", "MAX_LABELS", "MAX_LABEL_LENGTH", "MAX_PLACE_NAME", "MAX_VALUE_BYTES",
    "MAX_VALUE_DEPTH", "Neighbourhood", "Observation", "PendingRevision", "Place", "Provenance",
    "Resolution", "RetrieveResult", "SalienceHistory", "SaliencePoint", "StaleMark",
    "TopicPage", "TopicSummary", "TopicView", "UnitHistory", "Violation", "as_place", "as_utc",
    "checked_time", "coordinate", "episode_label", "json_problem", "returned_facts"]
