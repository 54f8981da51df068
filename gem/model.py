"""The public boundary: what callers pass in and get back (pydantic, validated).

Internals use frozen dataclasses; pydantic stays here so that bad input is rejected
with one clear `InvalidInput` before any transition starts.
"""
from __future__ import annotations

import json
import math
from datetime import datetime, timezone
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field as PydField, ValidationError, field_validator

from .errors import InvalidInput


def _json_value(value: Any) -> Any:
    try:
        text = json.dumps(value, sort_keys=True, allow_nan=False)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"value must be JSON-serialisable: {exc}") from exc
    return json.loads(text)


def as_utc(value: datetime, what: str = "time") -> datetime:
    """Aware datetimes are converted to UTC; naive ones are taken to be UTC already."""
    if not isinstance(value, datetime):
        raise InvalidInput(f"{what} must be a datetime, got {type(value).__name__}")
    if value.tzinfo is None:
        return value.replace(tzinfo=timezone.utc)
    return value.astimezone(timezone.utc)


class Fact(BaseModel):
    """One observation: `topic`'s `field` has `value`, as of `at`, according to `source`."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    topic: str
    field: str
    value: Any
    at: datetime | None = None
    source: str = "api"
    actor: str = "user"
    ref: str | None = None
    confidence: float = 1.0
    polarity: Literal["+", "-"] = "+"

    def __init__(self, topic: str | None = None, field: str | None = None, value: Any = None,
                 **kwargs: Any) -> None:
        try:
            super().__init__(topic=topic, field=field, value=value, **kwargs)
        except ValidationError as exc:
            raise InvalidInput(_describe(exc, "Fact")) from None

    @field_validator("topic", "field", "source", "actor")
    @classmethod
    def _non_empty(cls, v: str) -> str:
        if not isinstance(v, str) or not v.strip():
            raise ValueError("must be a non-empty string")
        return v.strip()

    @field_validator("value")
    @classmethod
    def _json(cls, v: Any) -> Any:
        if v is None:
            raise ValueError("must not be null (use polarity '-' to deny a value)")
        return _json_value(v)

    @field_validator("confidence")
    @classmethod
    def _unit_interval(cls, v: float) -> float:
        if math.isnan(v) or not 0.0 <= v <= 1.0:
            raise ValueError("must be within [0, 1]")
        return float(v)

    @field_validator("at")
    @classmethod
    def _utc(cls, v: datetime | None) -> datetime | None:
        return None if v is None else as_utc(v, "at")


def _describe(exc: ValidationError, what: str) -> str:
    parts = []
    for err in exc.errors():
        loc = ".".join(str(p) for p in err["loc"]) or what
        parts.append(f"{loc}: {err['msg']}")
    return f"invalid {what}: " + "; ".join(parts)


class Provenance(BaseModel):
    model_config = ConfigDict(frozen=True)
    source: str
    actor: str
    ref: str | None = None
    confidence: float
    polarity: Literal["+", "-"]


class Observation(BaseModel):
    """A corroboration (or denial) recorded against an entry."""
    model_config = ConfigDict(frozen=True)
    provenance: Provenance
    valid_at: datetime
    recorded_at: datetime


class HistoryEntry(BaseModel):
    model_config = ConfigDict(frozen=True)
    id: str
    value: Any
    valid_at: datetime
    asserted_at: datetime             # its latest statement (re-statements move it forward)
    recorded_at: datetime
    provenance: Provenance
    status: Literal["current", "superseded", "retracted"]
    superseded_by: str | None = None
    active: bool = True  # False once compression moved it out of the active history
    observations: list[Observation] = PydField(default_factory=list)


class Candidate(BaseModel):
    """One of the values of a contested field, with its evidence reliability."""
    model_config = ConfigDict(frozen=True)
    value: Any
    provenance: Provenance
    valid_at: datetime
    reliability: float


class FieldView(BaseModel):
    model_config = ConfigDict(frozen=True)
    name: str
    value: Any = None
    valid_at: datetime | None = None
    recorded_at: datetime | None = None
    provenance: Provenance | None = None
    salience: float
    last_access: datetime | None = None
    status: Literal["active", "compressed", "hidden"]
    contested: bool = False
    candidates: list[Candidate] | None = None
    summary: str | None = None
    history: list[HistoryEntry] | None = None


class FlagView(BaseModel):
    model_config = ConfigDict(frozen=True)
    id: str
    origin: str | None
    policy: str | None
    evidence: dict[str, Any]
    created_at: datetime


class TopicView(BaseModel):
    model_config = ConfigDict(frozen=True)
    id: str
    title: str
    aliases: list[str]
    summary: str
    salience: float
    last_access: datetime | None = None
    status: Literal["active", "archived"]
    score: float | None = None
    fields: dict[str, FieldView]
    flags: list[FlagView] = PydField(default_factory=list)


class RetrieveResult(BaseModel):
    model_config = ConfigDict(frozen=True)
    transition: int
    query: str | None = None
    as_of: datetime | None = None
    topics: list[TopicView]

    def value(self, topic: str, field: str) -> Any:
        """The current value of `field` on the topic titled (or aliased) `topic`, else None."""
        from .text import normalise
        want = normalise(topic)
        for t in self.topics:
            if t.id == topic or normalise(t.title) == want or want in (normalise(a) for a in t.aliases):
                f = t.fields.get(field)
                return None if f is None else f.value
        return None


class IngestResult(BaseModel):
    model_config = ConfigDict(frozen=True)
    transition: int
    topics: list[str]                 # topic ids touched, in first-touch order
    created_topics: list[str]
    entries: list[str]                # entries created
    corroborations: int               # re-statements added to an existing entry
    denials: int = 0                  # denials (polarity "-") added to an existing entry
    flagged: list[str]                # topics flagged for revision by policies


class Explanation(BaseModel):
    model_config = ConfigDict(frozen=True)
    topic: str
    field: str
    value: Any
    entries: list[HistoryEntry]
    reliability: float
    states: dict[str, float]          # action, inaction, conflict, ignorance
    decay: float


# -- administrative views (Memory.topics, .graph, .salience_history): side-effect free reads
class TopicSummary(BaseModel):
    """One row of a topic listing: what the overview shows without loading the topic."""
    model_config = ConfigDict(frozen=True)
    id: str
    title: str
    status: Literal["active", "archived"]
    salience: float
    fields: dict[str, int]            # fields per ladder level: active, compressed, hidden
    open_flags: int


class TopicPage(BaseModel):
    """A page of topics (filtered and ordered) and the totals of the whole state."""
    model_config = ConfigDict(frozen=True)
    topics: list[TopicSummary]
    matching: int                     # topics that pass the filters (all pages)
    offset: int
    limit: int
    topic_counts: dict[str, int]      # every topic by status: active, archived
    field_counts: dict[str, int]      # every field by ladder level: active, compressed, hidden,
                                      # archived (a field of an archived topic)
    flagged: int                      # topics with open revision flags


class GraphNode(BaseModel):
    model_config = ConfigDict(frozen=True)
    id: str
    title: str
    status: Literal["active", "archived"]
    salience: float
    depth: int                        # edges from the centre
    open_flags: int


class GraphEdge(BaseModel):
    model_config = ConfigDict(frozen=True)
    kind: Literal["extension", "association", "derived"]
    source: str
    target: str
    created_at: datetime | None = None
    transition: int | None = None     # the transition that made it (derived edges: None)
    detail: str | None = None         # who made it (source), or why (a derived edge's reason)


class Neighbourhood(BaseModel):
    """The topics within `depth` typed edges of a topic, and the edges between them."""
    model_config = ConfigDict(frozen=True)
    centre: str
    depth: int
    nodes: list[GraphNode]
    edges: list[GraphEdge]
    truncated: bool                   # more topics were in reach than the limit allowed


class SaliencePoint(BaseModel):
    """A unit's stored salience after a change: strength x at `at` (s = 1 - e^-x)."""
    model_config = ConfigDict(frozen=True)
    at: datetime
    transition: int | None            # None: the stored row (its last change)
    strength: float
    salience: float


class LadderChange(BaseModel):
    model_config = ConfigDict(frozen=True)
    at: datetime
    transition: int
    op: str
    status: str                       # compressed | hidden | archived | active (restored)


class UnitHistory(BaseModel):
    model_config = ConfigDict(frozen=True)
    unit: str                         # the topic id, or "<topic id>/<field name>"
    field: str | None                 # None for the topic itself
    created_at: datetime
    status: str                       # now
    salience: float                   # now, decayed
    points: list[SaliencePoint]
    ladder: list[LadderChange]


class SalienceHistory(BaseModel):
    """Salience and ladder status of a topic and its fields over time, read from the log
    (whose records carry every salience change) and the stored rows."""
    model_config = ConfigDict(frozen=True)
    topic: str
    now: datetime
    half_life_seconds: float
    units: list[UnitHistory]


class Violation(BaseModel):
    model_config = ConfigDict(frozen=True)
    condition: str
    unit: str | None
    detail: str


class AuditReport(BaseModel):
    model_config = ConfigDict(frozen=True)
    ok: bool
    checked: dict[str, int]           # condition -> units checked
    violations: list[Violation]
    transitions: int
    chain_ok: bool
    since: int = 0                    # 0: everything was audited; n: what transitions after n touched


class ErasureReceipt(BaseModel):
    """What an erasure gives its caller: which units went (ids; a field's name only as a
    salted hash), which log records were redacted, and the salted commitment of the erased
    content. The `salt` is held only here: with it, and the content, its holder can show what
    was erased; without it the database's commitment reveals nothing."""
    model_config = ConfigDict(frozen=True)
    transition: int
    scope: str
    at: datetime
    reason: str
    topics: list[str]
    fields: list[list[str]]           # [topic id, salted hash of the field id]
    entries: list[str]
    observations: list[str]
    redacted: list[int]               # log records whose content was removed
    commitment: str
    salt: str


class ErasureCheck(BaseModel):
    """`verify_erasure`: whether what a receipt says was erased is gone, and what is not."""
    model_config = ConfigDict(frozen=True)
    ok: bool
    problems: list[str]
