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


# Limits on one fact's value: deeper nesting is refused before anything walks it recursively
# (json, the summariser), and a value is a fact about a topic, not a document store.
MAX_VALUE_DEPTH = 64
MAX_VALUE_BYTES = 256 * 1024   # of its canonical JSON, UTF-8
MAX_LABELS = 32
MAX_LABEL_LENGTH = 64


def json_problem(value: Any) -> str | None:
    """Why `value` is not a JSON value gem stores exactly as given, or None when it is.

    Only the JSON types themselves are accepted (dict with str keys, list, str, int, float,
    bool), nothing that would come back as something else: no tuple (a list), no int or bool
    key (a string), no subclass such as an Enum, no NaN or infinity, nothing nested deeper than
    MAX_VALUE_DEPTH. Walked without recursion, so no value can exhaust the stack.
    """
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        kind = type(item)
        if kind in (str, int, bool) or item is None:
            continue
        if kind is float:
            if not math.isfinite(item):
                return f"{item!r} is not a JSON number"
            continue
        if kind not in (list, dict):
            return f"{kind.__name__} is not a JSON type (use a list, a dict with str keys, a " \
                   "str, an int, a float or a bool)"
        if depth > MAX_VALUE_DEPTH:
            return f"it is nested deeper than {MAX_VALUE_DEPTH} levels"
        if kind is dict:
            for key in item:
                if type(key) is not str:
                    return f"object key {key!r} is a {type(key).__name__}, not a string"
            stack.extend((v, depth + 1) for v in item.values())
        else:
            stack.extend((v, depth + 1) for v in item)
    return None


def _json_value(value: Any) -> Any:
    problem = json_problem(value)
    if problem is not None:
        raise ValueError(f"must be a JSON value: {problem}")
    text = json.dumps(value, sort_keys=True, allow_nan=False, separators=(",", ":"))
    if len(text.encode("utf-8")) > MAX_VALUE_BYTES:
        raise ValueError(f"must be at most {MAX_VALUE_BYTES} bytes as JSON")
    return json.loads(text)


def as_utc(value: datetime, what: str = "time") -> datetime:
    """An aware datetime, converted to UTC. A naive one is refused: which zone it meant is
    exactly what gem cannot know (`datetime.now()` is local time), and guessing UTC would
    shift it silently."""
    if not isinstance(value, datetime):
        raise InvalidInput(f"{what} must be a datetime, got {type(value).__name__}")
    if value.tzinfo is None or value.utcoffset() is None:
        raise InvalidInput(f"{what} must be timezone-aware (a naive datetime could be any "
                           f"zone): use datetime.now(timezone.utc) or .replace(tzinfo=...), "
                           f"got {value.isoformat()}")
    return value.astimezone(timezone.utc)


MAX_PLACE_NAME = 200


class Place(BaseModel):
    """Where something was said or held true: a point (`lat` in [-90, 90], `lon` in
    [-180, 180], degrees, finite numbers) and an optional `name` ("Lisbon office"). A fact's
    place stays with the entry it states (one place per statement); an episode has its own.
    `retrieve(near=(lat, lon, km))` finds units within `km` of a point (gem/places.py)."""

    model_config = ConfigDict(frozen=True, extra="forbid", strict=True)

    lat: float
    lon: float
    name: str | None = None

    def __init__(self, lat: Any = None, lon: Any = None, **kwargs: Any) -> None:
        try:
            super().__init__(lat=lat, lon=lon, **kwargs)
        except ValidationError as exc:
            raise InvalidInput(_describe(exc, "Place")) from None

    @field_validator("lat", mode="before")
    @classmethod
    def _lat(cls, v: Any) -> float:
        return coordinate(v, 90.0)

    @field_validator("lon", mode="before")
    @classmethod
    def _lon(cls, v: Any) -> float:
        return coordinate(v, 180.0)

    @field_validator("name", mode="before")
    @classmethod
    def _place_name(cls, v: Any) -> str | None:
        if v is None:
            return None
        name = _name(v)
        if len(name) > MAX_PLACE_NAME:
            raise ValueError(f"must be at most {MAX_PLACE_NAME} characters")
        return name


def coordinate(v: Any, bound: float) -> float:
    """A latitude (bound 90) or longitude (bound 180) in degrees: a finite int or float within
    [-bound, bound]; ValueError otherwise (no text, no bool)."""
    if type(v) not in (int, float):
        raise ValueError(f"must be an int or a float, got {_kind(v)}")
    if not math.isfinite(v) or not -bound <= v <= bound:
        raise ValueError(f"must be a finite number within [{-bound:g}, {bound:g}], got {v!r}")
    return float(v)


def as_place(v: Any) -> "Place | None":
    """A Place from a Place, a (lat, lon) or (lat, lon, name) pair, or a {lat, lon, name}
    mapping; None stays None."""
    if v is None or isinstance(v, Place):
        return v
    try:
        if isinstance(v, (tuple, list)) and len(v) in (2, 3):
            return Place(v[0], v[1], **({"name": v[2]} if len(v) == 3 else {}))
        if isinstance(v, dict):
            return Place(**v)
    except InvalidInput as exc:  # reported under the field that holds the place
        raise ValueError(str(exc).removeprefix("invalid Place: ")) from None
    raise ValueError(f"must be a gem.Place, (lat, lon), (lat, lon, name) or "
                     f"{{lat, lon, name}}, got {type(v).__name__}")


class Fact(BaseModel):
    """One observation: `topic`'s `field` has `value`, as of `at`, according to `source`.

    Nothing is coerced (strict): `confidence` is an int or float, `at` an aware datetime, the
    names are str, and `value` a JSON value that reads back exactly as given. `labels` say
    what kind of value it is ("pii", "secret"): they stay with the entry and its field, and
    policies read them (`entry.labels`, `field.labels`).
    """

    model_config = ConfigDict(frozen=True, extra="forbid", strict=True)

    topic: str
    field: str
    value: Any
    at: datetime | None = None
    source: str = "api"
    actor: str = "user"
    ref: str | None = None
    confidence: float = 1.0
    polarity: Literal["+", "-"] = "+"
    labels: tuple[str, ...] = ()
    place: Place | None = None

    def __init__(self, topic: str | None = None, field: str | None = None, value: Any = None,
                 **kwargs: Any) -> None:
        try:
            super().__init__(topic=topic, field=field, value=value, **kwargs)
        except ValidationError as exc:
            raise InvalidInput(_describe(exc, "Fact")) from None

    @classmethod
    def model_validate_json(cls, json_data: str | bytes | bytearray, **kwargs: Any) -> "Fact":
        """A Fact from its JSON (`model_dump(mode="json")`): JSON has no datetime, so `at` is
        ISO 8601 text there, with its offset; everything else is checked as always."""
        return cls(**_json_fields(json_data, "Fact"))

    @field_validator("topic", "field", "source", "actor", mode="before")
    @classmethod
    def _non_empty(cls, v: Any) -> str:
        return _name(v)

    @field_validator("ref", mode="before")
    @classmethod
    def _text_or_none(cls, v: Any) -> str | None:
        if v is not None and type(v) is not str:
            raise ValueError(f"must be a string or None, got {type(v).__name__}")
        return v

    @field_validator("value")
    @classmethod
    def _json(cls, v: Any) -> Any:
        if v is None:
            raise ValueError("must not be null (use polarity '-' to deny a value)")
        return _json_value(v)

    @field_validator("confidence", mode="before")
    @classmethod
    def _unit_interval(cls, v: Any) -> float:
        if type(v) not in (int, float):
            raise ValueError(f"must be an int or a float, got {type(v).__name__}")
        if math.isnan(v) or not 0.0 <= v <= 1.0:
            raise ValueError("must be within [0, 1]")
        return float(v)

    @field_validator("at", mode="before")
    @classmethod
    def _utc(cls, v: Any) -> datetime | None:
        return None if v is None else _aware_utc(v)

    @field_validator("place", mode="before")
    @classmethod
    def _place(cls, v: Any) -> Place | None:
        return as_place(v)

    @field_validator("labels", mode="before")
    @classmethod
    def _labels(cls, v: Any) -> tuple[str, ...]:
        if isinstance(v, (str, bytes)) or not isinstance(v, (list, tuple)):
            raise ValueError(f"must be a list of strings, got {type(v).__name__}")
        out: list[str] = []
        for x in v:
            if type(x) is not str or not x.strip():
                raise ValueError(f"each label must be a non-empty string, got {x!r}")
            label = x.strip()
            if len(label) > MAX_LABEL_LENGTH:
                raise ValueError(f"a label is at most {MAX_LABEL_LENGTH} characters")
            if label not in out:
                out.append(label)
        if len(out) > MAX_LABELS:
            raise ValueError(f"at most {MAX_LABELS} labels")
        return tuple(out)


def _json_fields(json_data: str | bytes | bytearray, what: str) -> dict[str, Any]:
    """The arguments of a Fact or an Episode from its JSON, `at` parsed from its ISO 8601 text
    (the one place text becomes a time: JSON has no other way to write one)."""
    try:
        data = json.loads(json_data)
    except ValueError as exc:
        raise InvalidInput(f"invalid {what} JSON: {exc}") from None
    if not isinstance(data, dict):
        raise InvalidInput(f"a {what}'s JSON is an object, got {type(data).__name__}")
    if isinstance(data.get("at"), str):
        try:
            data["at"] = datetime.fromisoformat(data["at"])
        except ValueError:
            raise InvalidInput(f"invalid {what}: at: not an ISO 8601 time: {data['at']!r}") from None
    return data


def _kind(v: Any) -> str:
    return repr(v) if isinstance(v, str) else type(v).__name__


# The checks Fact and Episode share, so that both take exactly the same input: nothing is
# coerced (no text or epoch number for a time, no str subclass for a name).
def _name(v: Any) -> str:
    """A name (topic, field, source, actor, speaker): a non-empty str, stripped."""
    if type(v) is not str or not v.strip():
        raise ValueError(f"must be a non-empty string, got {_kind(v)}")
    return v.strip()


def _aware_utc(v: Any) -> datetime:
    """A time: an aware datetime, in UTC."""
    if not isinstance(v, datetime):
        raise ValueError(f"must be a datetime, got {type(v).__name__}")
    if v.tzinfo is None or v.utcoffset() is None:
        raise ValueError("must be timezone-aware (a naive datetime could be any zone)")
    return v.astimezone(timezone.utc)


# An episode's time must be aware (a naive time could be any zone) and plausible: a year
# outside these bounds is a typo (9999-12-31), not an observation.
EARLIEST = datetime(1900, 1, 1, tzinfo=timezone.utc)
LATEST = datetime(2200, 1, 1, tzinfo=timezone.utc)


def returned_facts(answer: Any, who: str, expected: str = "a list of gem.Fact") -> list[Fact]:
    """The facts a caller's callable (the extractor, the reviser) returned: one gem.Fact or a
    list of them; anything else is InvalidInput naming `who`."""
    if isinstance(answer, Fact):
        return [answer]
    if answer is None or isinstance(answer, (str, bytes, dict)) or not hasattr(answer, "__iter__"):
        raise InvalidInput(f"{who} must return {expected}, got {type(answer).__name__}")
    facts = list(answer)
    for i, fact in enumerate(facts):
        if not isinstance(fact, Fact):
            raise InvalidInput(f"{who} returned a {type(fact).__name__} as item {i}, "
                               "not a gem.Fact")
    return facts


class Episode(BaseModel):
    """A raw observation, kept as said: a turn of a conversation, a message, a note.

    `at` is when it was said (aware; default: the memory's clock), `source` where it came from
    (for example the message id), `speaker` who said it. Episodes are searchable next to facts,
    have salience and descend the forgetting ladder; a fact cites the episode it was extracted
    from by its id in `Fact(ref=...)`."""

    model_config = ConfigDict(frozen=True, extra="forbid", strict=True)

    text: str
    at: datetime | None = None
    source: str = "api"
    speaker: str | None = None
    actor: str = "user"
    place: Place | None = None

    def __init__(self, text: Any = None, **kwargs: Any) -> None:
        try:
            super().__init__(text=text, **kwargs)
        except ValidationError as exc:
            raise InvalidInput(_describe(exc, "Episode")) from None

    @classmethod
    def model_validate_json(cls, json_data: str | bytes | bytearray, **kwargs: Any) -> "Episode":
        """An Episode from its JSON (`model_dump(mode="json")`), `at` as ISO 8601 text."""
        return cls(**_json_fields(json_data, "Episode"))

    @field_validator("text", mode="before")
    @classmethod
    def _text(cls, v: Any) -> str:
        if type(v) is not str or not v.strip():
            raise ValueError(f"must be a non-empty string, got {_kind(v)}")
        return v  # kept as said

    @field_validator("source", "actor", mode="before")
    @classmethod
    def _label(cls, v: Any) -> str:
        return _name(v)

    @field_validator("speaker", mode="before")
    @classmethod
    def _speaker(cls, v: Any) -> str | None:
        return None if v is None else _name(v)

    @field_validator("at", mode="before")
    @classmethod
    def _at(cls, v: Any) -> datetime | None:
        # a fact's rule, and a plausible year: an episode is something said, not a date
        return None if v is None else checked_time(_aware_utc(v), "at")

    @field_validator("place", mode="before")
    @classmethod
    def _place(cls, v: Any) -> Place | None:
        return as_place(v)


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
        parts.append(f"{loc}: {err['msg'].removeprefix('Value error, ')}")
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


class StaleMark(BaseModel):
    """Why an episode is out of date. A newer fact replaced what it said: `field` of `topic` is
    now `value`, stated for `since` (`retracted`: withdrawn, no value now, `reason` why); or a
    policy judged that a later `episode` (saying `text`, at `since`) contradicts it."""
    model_config = ConfigDict(frozen=True)
    since: datetime
    topic: str | None = None
    topic_id: str | None = None
    field: str | None = None
    value: Any = None
    retracted: bool = False
    reason: str | None = None
    episode: str | None = None
    text: str | None = None


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
    status: Literal["active", "compressed", "hidden"]
    follows: str | None = None        # the episode said just before it (read as its context)
    refers_to: datetime | None = None  # an extracted fact's date, else the day its words name
    score: float | None = None
    recalled: str | None = None
    place: Place | None = None
    distance_km: float | None = None  # from the point of a `near=` retrieval
    stale: list[StaleMark] = PydField(default_factory=list)  # empty: nothing replaced what it said


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
    labels: list[str] = PydField(default_factory=list)
    reason: str | None = None   # why it was retracted; for a retraction (value None), why
    place: Place | None = None  # where its first statement placed it


class Candidate(BaseModel):
    """One of the values of a contested field, with its evidence reliability."""
    model_config = ConfigDict(frozen=True)
    value: Any
    provenance: Provenance
    valid_at: datetime
    reliability: float
    current: bool = False            # the value the history holds current


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
    labels: list[str] = PydField(default_factory=list)   # of every entry of its history
    retracted: str | None = None   # the reason, when its value was retracted (value is None)
    # A contested field (now, not as_of): the evidence reliability R of its current value, and
    # why that value is current (the newest statement) whatever R says.
    reliability: float | None = None
    why_current: str | None = None
    place: Place | None = None         # the place of its current value's entry
    distance_km: float | None = None   # from the point of a `near=` retrieval


class FlagView(BaseModel):
    """An open revision flag: the topic whose change raised it (`origin`, by title; None when
    nothing did, or it is gone), the policy and its evidence."""
    model_config = ConfigDict(frozen=True)
    id: str
    origin: str | None
    origin_id: str | None
    policy: str | None
    evidence: dict[str, Any]
    created_at: datetime


class PendingRevision(BaseModel):
    """A topic with open revision flags: why (each flag's origin, policy and evidence) and
    what it holds now. `mem.pending_revisions()` lists them, and a reviser is called with one
    per flagged topic."""
    model_config = ConfigDict(frozen=True)
    title: str
    topic_id: str
    flags: list[FlagView]
    values: dict[str, Any]              # the current value of each visible field
    origins: dict[str, dict[str, Any]]  # each origin topic's title -> its current values


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
    near: tuple[float, float, float] | None = None   # (lat, lon, km) of a `near=` retrieval

    def value(self, topic: str, field: str) -> Any:
        """The current value of `field` on the topic titled (or aliased) `topic` (names as
        the memory matches them: exactly or by canonical key; a `gem.TopicId` by id), else
        None."""
        from .text import name_key
        from .units import TopicId
        for t in self.topics:
            if isinstance(topic, TopicId):
                found = t.id == topic
            else:
                want = name_key(topic)
                found = any(name_key(n) == want for n in (t.title, *t.aliases))
            if found:
                f = t.fields.get(field)
                if f is None:
                    key = name_key(field)
                    f = next((v for k, v in t.fields.items() if name_key(k) == key), None)
                return None if f is None else f.value
        return None


class DroppedFact(BaseModel):
    """A fact a policy left out of an ingest (`drop`), and why. Its value is not repeated."""
    model_config = ConfigDict(frozen=True)
    fact: int                         # its index in the batch
    topic: str
    field: str
    reason: str
    policy: str


class Resolution(BaseModel):
    """A topic name that found a topic under another spelling: by canonical key
    (`normalised`), or by similarity of titles or a caller's resolver, which also made it an
    alias of that topic (`alias_added`)."""
    model_config = ConfigDict(frozen=True)
    name: str
    topic: str                        # the title of the topic it found
    topic_id: str
    tier: Literal["normalised", "similarity", "resolver"]
    score: float | None               # cosine of the name and the title, when both embed
    alias_added: bool


EXCERPT = 60   # characters of an episode's text that name it


def episode_label(speaker: str | None, source: str, at: datetime, text: str) -> str:
    """An episode as a reader knows it: who said what, when ("Ana, 2026-03-02 09:00: Let's
    ship..."); the speaker, else the source."""
    flat = " ".join(text.split())
    excerpt = flat if len(flat) <= EXCERPT else flat[:EXCERPT - 1].rstrip() + "…"
    return f"{speaker or source}, {at.astimezone(timezone.utc):%Y-%m-%d %H:%M}: {excerpt}"


class IngestResult(BaseModel):
    """What an ingest did: the one result shape of `mem.ingest`, of `POST /v1/ingest` and of
    the MCP tool `memory_remember` (both send its `model_dump(mode="json")`).

    Everything is named for its reader: topics by title, a new value as "Title / field", an
    episode as "speaker, time: excerpt". Each such list has the internal ids alongside, in the
    same order, in the field of the same name ending in `_ids` (`flagged` and `flagged_ids`),
    for tooling (`mem.inspect(gem.TopicId(i))`); a model reading the result needs none of them.
    """
    model_config = ConfigDict(frozen=True)
    transition: int
    topics: list[str]                 # titles of the topics touched, in first-touch order
    topic_ids: list[str]
    created_topics: list[str]         # titles of the topics this ingest created
    created_topic_ids: list[str]
    new_values: list[str]             # "Title / field" of each value recorded as a new entry
    entry_ids: list[str]              # those entries' ids
    corroborations: int               # re-statements added to an existing entry
    denials: int = 0                  # denials (polarity "-") added to an existing entry
    flagged: list[str]                # titles of the topics flagged for revision by policies
    flagged_ids: list[str]
    episodes: list[str] = PydField(default_factory=list)      # "speaker, time: excerpt", in order
    episode_ids: list[str] = PydField(default_factory=list)
    known_episodes: list[str] = PydField(default_factory=list)  # stored ones the batch repeated
    known_episode_ids: list[str] = PydField(default_factory=list)
    extracted: int = 0                # facts the extractor returned for those episodes
    dropped: list[DroppedFact] = PydField(default_factory=list)   # facts a policy left out
    resolved: list[Resolution] = PydField(default_factory=list)


class Explanation(BaseModel):
    model_config = ConfigDict(frozen=True)
    topic: str                        # its title
    topic_id: str
    field: str
    value: Any
    entries: list[HistoryEntry]
    reliability: float
    states: dict[str, float]          # action, inaction, conflict, ignorance
    decay: float
    contested: bool = False
    why_current: str | None = None    # for a contested field: why its value is current


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


class EpisodePage(BaseModel):
    """A page of episodes, newest first (filtered by text and status), and the totals."""
    model_config = ConfigDict(frozen=True)
    episodes: list[EpisodeView]
    matching: int                     # episodes that pass the filters (all pages)
    offset: int
    limit: int
    counts: dict[str, int]            # every episode of the scope by status: active, hidden


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
    half_life_seconds: float | None = None  # its own (a field's labels, `label_half_life`);
                                            # None: it does not fade


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
    episodes: list[str] = PydField(default_factory=list)  # the episodes that said it
    # the erased names and values no surviving unit holds, as "<length>:<words>:<salted hash>"
    # (the salt is `salt`): what verify_erasure looks for in every stored and derived string
    marks: list[str] = PydField(default_factory=list)
    commitment: str
    salt: str


class ErasureCheck(BaseModel):
    """`verify_erasure`: whether what a receipt says was erased is gone, and what is not."""
    model_config = ConfigDict(frozen=True)
    ok: bool
    problems: list[str]
