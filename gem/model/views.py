"""What reads and writes return: views of topics, fields, episodes, and results."""
from __future__ import annotations

from datetime import datetime, timezone
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field as PydField

from .inputs import Place


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
        from ..text import name_key
        from ..units import TopicId
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
