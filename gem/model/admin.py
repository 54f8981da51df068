"""What the administrative reads return: listings, graph, salience history, audit, erasure."""
from __future__ import annotations

from datetime import datetime
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field as PydField

from .views import EpisodeView

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
