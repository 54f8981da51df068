"""What agents send and read: the request and response bodies of the HTTP API, the MCP
tools' input and output schemas, and `--json` output of the CLI.

Everything here names topics by title and fields by name (`t12`, `e5` mean nothing to a
language model): internal ids appear only alongside the names, in fields named `id` or ending
in `_ids`, for tooling. Entries in a history are numbered by position. The result of
remembering is `gem.IngestResult` itself, the one shape of Python, HTTP and MCP. Descriptions are written for the model that reads
the schema.
"""
from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any, Literal

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, model_validator

from ..model import IngestResult, Observation, Provenance

JsonValue = Any  # any JSON value; gem rejects what json.dumps cannot write


class _Wire(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


def _iso_time(v: Any) -> Any:
    """A stored time arrives as ISO 8601 text (JSON has no other way to write one), parsed
    here and nowhere else; a number is refused, not read as an epoch (nothing is coerced)."""
    if v is None or isinstance(v, datetime):
        return v
    if not isinstance(v, str):
        raise ValueError("must be ISO 8601 text with an offset (2026-03-01T08:00:00+00:00), "
                         f"got {type(v).__name__}")
    try:
        return datetime.fromisoformat(v)
    except ValueError:
        raise ValueError(f"not an ISO 8601 time: {v!r}") from None


WireTime = Annotated[datetime | None, BeforeValidator(_iso_time)]


# ---------------------------------------------------------------------- requests
class PlaceIn(_Wire):
    """Where something was stated or said: a point in degrees, and optionally its name."""
    lat: float = Field(description="Latitude in degrees, -90..90.")
    lon: float = Field(description="Longitude in degrees, -180..180.")
    name: str | None = Field(None, description="What the place is called, e.g. 'Lisbon office'.")


class FactIn(_Wire):
    """One thing learned: `topic`'s `field` has `value`."""
    topic: str = Field(description="The topic's title, e.g. 'Website Redesign'. An existing topic "
                                   "is matched by title, alias or a close spelling.")
    field: str = Field(description="The attribute, e.g. 'deadline'.")
    value: JsonValue = Field(description="The value: a string, number, boolean, list or object.")
    at: WireTime = Field(None, description="When the value became true (ISO 8601); "
                                                  "default: now.")
    source: str = Field("agent", description="Where it came from, e.g. 'chat:2024-05-01' or a URL.")
    actor: str = Field("agent", description="Who stated it.")
    ref: str | None = Field(None, description="Optional pointer into the source (message id, page).")
    confidence: float = Field(1.0, ge=0.0, le=1.0, description="How sure the source is, 0..1.")
    polarity: Literal["+", "-"] = Field("+", description="'-' denies the value instead of stating it.")
    labels: list[str] = Field(default_factory=list, description=(
        "What kind of value this is, e.g. ['pii']: kept with it, and policies may act on it "
        "(forget it sooner, refuse to store it)."))
    place: PlaceIn | None = Field(None, description=(
        "Where it was stated: kept with the value; recall with near=[lat, lon, km] finds it."))


class EpisodeIn(_Wire):
    """Something said or observed, kept as said (a turn of a conversation, a message, a note):
    searchable next to facts, and fading like them unless recalled."""
    text: str = Field(description="What was said, verbatim.")
    at: WireTime = Field(None, description="When it was said (ISO 8601 with an offset); "
                                                  "default: now.")
    source: str = Field("agent", description="Where it came from, e.g. a message id.")
    speaker: str | None = Field(None, description="Who said it.")
    actor: str = Field("agent", description="Who recorded it.")
    place: PlaceIn | None = Field(None, description="Where it was said.")


class IngestRequest(_Wire):
    facts: list[FactIn] = Field(default_factory=list, description="Facts to remember.")
    episodes: list[EpisodeIn] = Field(default_factory=list, description=(
        "Raw observations to keep as said; facts and episodes are one transition."))
    actor: str = Field("api", description="Recorded in the transition log.")

    @model_validator(mode="after")
    def _something(self) -> "IngestRequest":
        if not self.facts and not self.episodes:
            raise ValueError("give at least one fact or episode")
        return self


class RetrieveRequest(_Wire):
    query: str | None = Field(None, description="Free text, e.g. 'deadline of the website redesign'.")
    topic: str | None = Field(None, description="A topic title to read directly.")
    fields: list[str] | Literal["all"] | None = Field(None, description=(
        "A list: these fields of each topic returned (hidden ones included); 'all': every "
        "visible field of each topic a query found; default: the fields the query matched."))
    as_of: datetime | None = Field(None, description="Answer as of this time (ISO 8601).")
    between: tuple[datetime, datetime] | None = Field(None, description=(
        "[start, end]: only values and episodes whose time lies in this window."))
    near: tuple[float, float, float] | None = Field(None, description=(
        "[lat, lon, km]: only values and episodes stated within km of this point; without a "
        "query, those nearest first."))
    k: int = Field(5, ge=1, le=100, description="At most this many units (fields and episodes) for a query; topics otherwise.")
    history: bool = Field(False, description="Include each field's value history.")
    include_archived: bool = Field(False, description="Also search archived topics.")
    actor: str = Field("api", description="Recorded in the transition log.")
    format: Literal["json", "text"] = Field("json", description=(
        "'text': a compact block for a prompt (text/plain), cut to max_tokens by rank."))
    max_tokens: int = Field(800, ge=16, description=(
        "The budget of format 'text', in tokens counted as ceil(characters / 4)."))


class LinkRequest(_Wire):
    from_topic: str = Field(description="Title of the topic the link starts from.")
    to_topic: str = Field(description="Title of the topic it points to.")
    kind: Literal["extension", "association"] = Field(
        "extension", description="'extension': a change to from_topic may require one to "
                                 "to_topic (it gets flagged for review); 'association': related.")
    actor: str = "api"


class RestoreRequest(_Wire):
    topic: str = Field(description="Title of the topic to bring back.")
    field: str | None = Field(None, description="Only this field of it.")
    actor: str = "api"


class EraseRequest(_Wire):
    topic: str = Field(description="Title of the topic to erase (or erase from).")
    field: str | None = Field(None, description="Only this field of it.")
    source: str | None = Field(None, description=(
        "Only what this source said (in the topic, or in `field`)."))
    reason: str = Field(description=(
        "Why (kept in the tombstone): never put the erased content in it."))
    actor: str = Field("api", description="Recorded in the transition log.")


class RetractRequest(_Wire):
    topic: str = Field(description="The topic's title.")
    field: str = Field(description="The field whose current value was wrong.")
    reason: str = Field(description="Why it was wrong (kept with the retracted value).")
    source: str = Field("api", description="Who says it was wrong.")
    actor: str = Field("api", description="Recorded in the transition log.")


class MaintainRequest(_Wire):
    dry_run: bool = Field(False, description="Report what forgetting and revision would do, "
                                             "changing nothing.")
    actor: str = "maintenance"


# ---------------------------------------------------------------------- pieces
class CandidateCard(_Wire):
    value: JsonValue
    provenance: Provenance
    valid_at: datetime
    reliability: float = Field(description="Evidence reliability R in [-1, 1].")
    current: bool = Field(False, description="The value the field holds now.")


class FieldCard(_Wire):
    name: str
    value: JsonValue = None
    valid_at: datetime | None = None
    recorded_at: datetime | None = None
    provenance: Provenance | None = None
    status: Literal["active", "compressed", "hidden"]
    salience: float
    contested: bool = Field(False, description="Sources disagree; see candidates.")
    candidates: list[CandidateCard] | None = None
    history: list["HistoryItem"] | None = None
    labels: list[str] = Field(default_factory=list)
    retracted: str | None = Field(None, description="Why its value was retracted (it has none).")
    reliability: float | None = Field(None, description=(
        "Contested fields: evidence reliability R of the current value, in [-1, 1]."))
    why_current: str | None = Field(None, description=(
        "Contested fields: why the value is current (the newest statement) and what the "
        "evidence says against it."))
    context: bool = Field(False, description=(
        "Returned as context of an associated topic (see the topic's context_of), not because "
        "it matched the query."))
    place: PlaceIn | None = Field(None, description="Where its current value was stated.")
    distance_km: float | None = Field(None, description="From the point of a near= recall.")


class ReviewFlag(_Wire):
    """A topic flagged for revision: something it depends on changed."""
    topic: str = Field(description="Title of the topic that may be out of date.")
    because_of: str | None = Field(None, description="Title of the topic whose change raised it.")
    policy: str | None = Field(None, description="The policy that raised it.")
    evidence: dict[str, Any] = Field(default_factory=dict)
    since: datetime


class TopicCard(_Wire):
    title: str
    aliases: list[str] = Field(default_factory=list)
    summary: str
    status: Literal["active", "archived"]
    salience: float
    score: float | None = Field(None, description="Retrieval score, when retrieved by a query.")
    fields: dict[str, FieldCard]
    hidden_fields: list[str] = Field(default_factory=list, description=(
        "Fields faded out of default recall; ask for them by name to read (and revive) them."))
    needs_review: list[ReviewFlag] = Field(default_factory=list)
    context_of: str | None = Field(None, description=(
        "Set when the topic is returned as context: the title of the matching topic it is "
        "associated with."))


class HistoryItem(_Wire):
    position: int = Field(description="1-based position in the history, oldest valid time first.")
    value: JsonValue
    status: Literal["current", "superseded", "retracted"]
    valid_at: datetime
    asserted_at: datetime
    recorded_at: datetime
    provenance: Provenance
    superseded_by: int | None = Field(None, description="Position of the entry that replaced it.")
    active: bool = True
    observations: list[Observation] = Field(default_factory=list)
    labels: list[str] = Field(default_factory=list)
    reason: str | None = Field(None, description="Why it was retracted.")
    place: PlaceIn | None = Field(None, description="Where it was stated.")


class UnitChange(_Wire):
    unit: str = Field(description="'Topic' or 'Topic / field'.")
    level: str


class MergedPair(_Wire):
    kept: str
    merged: str


# ---------------------------------------------------------------------- results
# The result of remembering is `gem.IngestResult` itself: one shape for Python, HTTP, MCP.
RememberResult = IngestResult


class StaleCard(_Wire):
    since: datetime = Field(description="When what replaced it holds from.")
    topic: str | None = Field(None, description="The topic of the fact that replaced it.")
    field: str | None = Field(None, description="That fact's field.")
    value: JsonValue = Field(None, description="The field's value now (null if retracted).")
    retracted: bool = Field(False, description="The fact it said was withdrawn, with no value now.")
    reason: str | None = Field(None, description="Why it was retracted.")
    said: str | None = Field(None, description=(
        "What a later episode said that contradicts it (when no fact replaced it)."))


class EpisodeCard(_Wire):
    text: str
    at: datetime = Field(description="When it was said or observed.")
    speaker: str | None = None
    source: str
    score: float | None = Field(None, description="Retrieval score.")
    recalled: str | None = Field(None, description=(
        "The forgetting level a strong match brought it back from (it is active again)."))
    place: PlaceIn | None = Field(None, description="Where it was said.")
    distance_km: float | None = Field(None, description="From the point of a near= recall.")
    stale: list[StaleCard] = Field(default_factory=list, description=(
        "Why it is out of date (empty: it is not): a newer fact replaced what it said (the "
        "topic and field, the value now, since when; `retracted` if withdrawn), or a later "
        "episode contradicts it. A stale episode is ranked below the fact that replaced it."))


class RecallResult(_Wire):
    transition: int
    query: str | None = None
    as_of: datetime | None = None
    topics: list[TopicCard]
    episodes: list[EpisodeCard] = Field(default_factory=list, description=(
        "Raw observations (turns, messages) a text query ranked, best first."))
    truncated: bool = Field(False, description="More was relevant than k.")
    near: tuple[float, float, float] | None = None


class HistoryResult(_Wire):
    topic: str
    field: str
    entries: list[HistoryItem]


class ExplainResult(_Wire):
    topic: str
    field: str
    value: JsonValue
    reliability: float = Field(description="Evidence reliability R in [-1, 1].")
    states: dict[str, float] = Field(description="action, inaction, conflict, ignorance.")
    decay: float
    contested: bool = False
    why_current: str | None = Field(None, description="For a contested field: why its value is current.")
    entries: list[HistoryItem]


class LinkResult(_Wire):
    created: bool = Field(description="False if the link already existed.")
    from_topic: str
    to_topic: str
    kind: str


class RestoreResult(_Wire):
    changed: bool = Field(description="False if nothing was faded.")
    topic: str
    field: str | None = None


class EraseResult(_Wire):
    """The receipt of an erasure: what went, by name, with the ids alongside. With `salt`
    and the erased content its holder can later show what was erased (keep it private)."""
    transition: int
    at: datetime
    topic: str = Field(description="Title of the topic erased (or erased from).")
    field: str | None = None
    source: str | None = None
    reason: str
    topic_erased: bool = Field(description="The whole topic is gone.")
    fields_erased: int
    entries_erased: int
    observations_erased: int
    episodes_erased: int
    redacted_log_records: list[int] = Field(description="Log records whose content was removed.")
    topic_ids: list[str]
    field_ids: list[list[str]] = Field(description="[topic id, salted hash of the field id].")
    entry_ids: list[str]
    observation_ids: list[str]
    episode_ids: list[str]
    commitment: str = Field(description="Salted commitment to the erased content.")
    salt: str


class RetractResult(_Wire):
    changed: bool = Field(description="False if the field had no current value to retract.")
    topic: str
    field: str
    reason: str


class ReviewResult(_Wire):
    flags: list[ReviewFlag]


class ForgetReport(_Wire):
    transition: int | None = None
    attenuated: list[UnitChange]


class ReviseReport(_Wire):
    merged: list[MergedPair]
    conflicts_settled: list[str]
    flags_evaluated: list[str]
    flags_cleared: list[str] = Field(default_factory=list,
                                     description="Topics whose flags a policy or the reviser handled.")
    flags_open: list[str] = Field(default_factory=list,
                                  description="Topics still flagged: for the agent to review.")


class MaintainResult(_Wire):
    dry_run: bool
    forget: ForgetReport
    revise: ReviseReport


class ViolationView(_Wire):
    condition: str
    unit: str | None
    detail: str


class AuditResult(_Wire):
    ok: bool
    chain_ok: bool
    transitions: int
    since: int = Field(0, description="0: the whole state was audited; n: what the transitions "
                                      "after n (the last clean audit) touched.")
    checked: dict[str, int]
    violations: list[ViolationView]


class StatsResult(_Wire):
    topics: dict[str, int] = Field(description="Topics by status.")
    fields: dict[str, int] = Field(description="Fields by status.")
    active_fields: int
    entries: int
    active_entries: int
    interactions: int
    active_bound: int | None = Field(None, description="The C5 bound on active fields, if set.")
    transitions: int
    episodes: dict[str, int] = Field(default_factory=dict, description="Episodes by status.")
    llm: dict[str, int] = Field(default_factory=dict, description=(
        "Model calls the hooks reported over the log (calls, cached, prompt_tokens, "
        "completion_tokens); empty if none."))


class PolicyFired(_Wire):
    policy: str
    event: str | None = None
    action: str | None = None
    evidence: dict[str, Any] = Field(default_factory=dict)


class LogRecord(_Wire):
    seq: int
    op: str
    event: str | None = None
    at: datetime
    actor: str
    units: list[str]
    policies: list[PolicyFired]
    detail: dict[str, Any]
    hash: str


class LogPage(_Wire):
    records: list[LogRecord]
    next_since: int | None = Field(None, description="Pass as `since` for the next page.")


class PolicySource(_Wire):
    file: str
    text: str


class PoliciesResult(_Wire):
    names: list[str]
    hash: str
    sources: list[PolicySource]


class MaintenanceInfo(_Wire):
    every_seconds: float | None = None
    runs: int = 0
    failures: int = 0


class StatusResult(_Wire):
    path: str | None = Field(description="The database's file name (the URL without password "
                             "on FalkorDB); none on a server with API keys.")
    engine: str
    stats: StatsResult
    audit: AuditResult
    policies: list[str]
    maintenance: MaintenanceInfo | None = None


class Health(_Wire):
    status: Literal["ok", "starting", "waiting_for_lock", "stopping"]
    path: str | None = Field(description="The database's file name (the URL without password "
                             "on FalkorDB); none on a server with API keys.")
    engine: str
    pid: int
    version: str
    busy: str | None = Field(None, description="The call running now, if any.")
    detail: str | None = None


class ErrorBody(_Wire):
    error: str = Field(description="invalid_input, unknown_unit, transition_rejected, store_locked, "
                                   "not_ready, payload_too_large, unauthorized, not_found (no such "
                                   "route), method_not_allowed or internal.")
    message: str
    condition: str | None = None
    unit: str | None = None
    detail: Any = None


FieldCard.model_rebuild()
