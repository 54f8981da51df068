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


# An episode's time must be aware (a naive time could be any zone) and plausible: a year
# outside these bounds is a typo (9999-12-31), not an observation.
EARLIEST = datetime(1900, 1, 1, tzinfo=timezone.utc)
LATEST = datetime(2200, 1, 1, tzinfo=timezone.utc)


class Episode(BaseModel):
    """A raw observation, kept as said: a turn of a conversation, a message, a note.

    `at` is when it was said (aware; default: the memory's clock), `source` where it came from
    (for example the message id), `speaker` who said it. Episodes are searchable next to facts,
    have salience and descend the forgetting ladder; a fact cites the episode it was extracted
    from by its id in `Fact(ref=...)`."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    text: str
    at: datetime | None = None
    source: str = "api"
    speaker: str | None = None
    actor: str = "user"

    def __init__(self, text: Any = None, **kwargs: Any) -> None:
        try:
            super().__init__(text=text, **kwargs)
        except ValidationError as exc:
            raise InvalidInput(_describe(exc, "Episode")) from None

    @field_validator("text", mode="before")
    @classmethod
    def _text(cls, v: Any) -> str:
        if not isinstance(v, str) or not v.strip():
            raise ValueError("must be a non-empty string")
        return v

    @field_validator("source", "actor", mode="before")
    @classmethod
    def _label(cls, v: Any) -> str:
        if not isinstance(v, str) or not v.strip():
            raise ValueError("must be a non-empty string")
        return v.strip()

    @field_validator("speaker", mode="before")
    @classmethod
    def _speaker(cls, v: Any) -> str | None:
        if v is None:
            return None
        if not isinstance(v, str) or not v.strip():
            raise ValueError("must be a non-empty string or None")
        return v.strip()

    @field_validator("at")
    @classmethod
    def _at(cls, v: datetime | None) -> datetime | None:
        return None if v is None else checked_time(v, "at")


def checked_time(value: Any, what: str) -> datetime:
    """An aware datetime within [1900, 2200), in UTC; InvalidInput (ValueError inside pydantic
    validation) for anything else."""
    if not isinstance(value, datetime):
        raise ValueError(f"{what} must be a datetime, got {type(value).__name__}")
    if value.tzinfo is None or value.utcoffset() is None:
        raise ValueError(f"{what} must be timezone-aware (a naive time could be any zone)")
    value = value.astimezone(timezone.utc)
    if not EARLIEST <= value < LATEST:
        raise ValueError(f"{what} {value.isoformat()} is outside [1900, 2200)")
    return value


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


class EpisodeView(BaseModel):
    """An episode as retrieval (or a fact's history) shows it. `recalled` names the ladder
    level a cued recall brought it back from (it is active again now)."""
    model_config = ConfigDict(frozen=True)
    id: str
    text: str
    at: datetime
    speaker: str | None = None
    source: str
    recorded_at: datetime
    salience: float
    status: Literal["active", "hidden"]
    follows: str | None = None        # the episode said just before it (read as its context)
    score: float | None = None
    recalled: str | None = None


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
    episode: EpisodeView | None = None  # the episode its provenance ref names, if any


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
    score: float | None = None       # its rank score when a free-text query returned it
    recalled: str | None = None      # the ladder level a cued recall brought it back from
    context: bool = False            # returned as context (one association hop), not ranked


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
    # What retrieval left out of this topic: its open revision flags and hidden fields.
    needs_review: list[FlagView] = PydField(default_factory=list)
    hidden_fields: list[str] = PydField(default_factory=list)
    recalled: str | None = None       # "archived" when a cued recall revived the topic
    context_of: str | None = None     # set for a topic returned as one hop of context: the
                                      # title of the ranked topic it is associated with


class RetrieveResult(BaseModel):
    model_config = ConfigDict(frozen=True)
    transition: int
    query: str | None = None
    as_of: datetime | None = None
    topics: list[TopicView]
    episodes: list[EpisodeView] = PydField(default_factory=list)
    truncated: bool = False           # more units were above the relevance floor than k
    between: tuple[datetime, datetime] | None = None

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
    episodes: list[str] = PydField(default_factory=list)  # episode ids created, in order
    extracted: int = 0                # facts the extractor returned for those episodes


class Explanation(BaseModel):
    model_config = ConfigDict(frozen=True)
    topic: str
    field: str
    value: Any
    entries: list[HistoryEntry]
    reliability: float
    states: dict[str, float]          # action, inaction, conflict, ignorance
    decay: float


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
