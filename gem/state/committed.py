"""What a transition reads besides rows (the committed derived state), and the services it is given."""
from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any, Callable, Iterable, Mapping, Protocol, Sequence

from ..store.schema import EDGE_TABLES, Row
from .cache import CommittedCache

if TYPE_CHECKING:
    from ..embed import Embedder
    from ..resolve import Resolver

# Salience columns are written behind (gem/derived/): a transition's log record carries them.
SALIENCE = frozenset({"strength", "last_access"})
SALIENT = frozenset({"Topic", "Field", "Episode"})
# Topic properties the name directory, the title vectors and every field's search document
# are built from. Status is not one: queries read it as they run, and the salience tables take
# it from the transition (a forgetting pass that archived 100k topics re-derived 1M field
# documents, 390 s, when it was).
INDEXED = frozenset({"title", "aliases"})
# The child table each owning relationship leads to, and back.
CHILD_TABLE = {"HAS_FIELD": "Field", "HAS_ENTRY": "Entry", "CORROBORATES": "Observation",
               "FLAGS": "Flag"}
OWNER_REL = {table: rel for rel, table in CHILD_TABLE.items()}
EDGE_RELS = tuple(EDGE_TABLES.values())


class Committed(Protocol):
    """What a transition reads of the committed derived state (gem/derived/): names, and
    the global views no key lookup can answer. The transition adds its own changes on top."""

    names: Any          # NameDirectory
    title_vectors: Any  # VectorIndex
    lexical: Any        # LexicalIndex over topic summaries
    vectors: Any        # VectorIndex over topic summaries
    @property
    def unit_lexical(self) -> Any: ...  # LexicalIndex over units (fields and episodes)
    @property
    def unit_vectors(self) -> Any: ...  # VectorIndex over units
    @property
    def unit_valid(self) -> Mapping[str, float]: ...  # unit -> valid time (seconds), for `between`
    unpaired: dict[str, None]   # titles duplicate detection has not compared yet
    touched_by: dict[str, Any]  # topic -> the log records that touched it
    paired_at: float | None     # the threshold it last compared them at
    said: dict[bytes, str] | None  # each episode's identity (said_key) -> its id; None: not built
    places: Any         # PlaceGrid of placed units (gem/places.py); None: not built

    def topic_status(self, tid: str) -> str | None: ...
    def has_edges(self, tid: str) -> bool: ...
    def has_open_flags(self, tid: str) -> bool: ...
    def field_status(self, fid: str) -> str | None: ...
    def fields_of(self, tid: str) -> list[str]: ...
    def summary_stale(self, tid: str) -> bool: ...
    def field_ids_where(self, statuses: frozenset[str], below: float | None, now: datetime,
                        half_life: timedelta,
                        by_label: dict[str, timedelta | None] | None = None) -> list[str]: ...  # by id
    def topic_ids_where(self, statuses: frozenset[str], below: float | None, now: datetime,
                        half_life: timedelta) -> list[str]: ...
    def active_field_count(self) -> int: ...
    def flagged_topics(self) -> list[str]: ...
    def least_relevant_fields(self, n: int, exclude: set[str], now: datetime,
                              half_life: timedelta,
                              by_label: dict[str, timedelta | None] | None = None
                              ) -> list[tuple[float, str]]: ...
    def most_salient_topics(self, k: int, now: datetime, half_life: timedelta,
                            statuses: Sequence[str]) -> list[str]: ...
    def episode_ids_where(self, statuses: frozenset[str], below: float | None, now: datetime,
                          half_life: timedelta) -> list[str]: ...
    def unit_status(self, key: str) -> tuple[str | None, str | None]: ...
    def unit_columns(self, table: str, ids: Sequence[str], now: datetime, half_life: timedelta,
                     by_label: dict[str, timedelta | None] | None = None
                     ) -> tuple[Any, list[str], list[tuple[str, ...]]]: ...
    def unit_salience(self, key: str, now: datetime, half_life: timedelta) -> float: ...
    def unit_states(self, keys: Sequence[str], now: datetime, half_life: timedelta
                    ) -> list[tuple[str | None, str | None, float]]: ...
    def refresh_units(self, cache: CommittedCache) -> None: ...
    def summary(self, cache: CommittedCache, summarizer: Callable[[str, dict[str, Any]], str],
                tid: str) -> str: ...
    def refresh(self, cache: CommittedCache, summarizer: Callable[[str, dict[str, Any]], str],
                only: Iterable[str] | None = None) -> None: ...


@dataclass
class Counters:
    """Id sequences and the interaction count, carried from transition to transition."""
    topic: int = 0
    entry: int = 0
    observation: int = 0
    flag: int = 0
    interactions: int = 0
    episode: int = 0

    def next(self, kind: str) -> int:
        value = getattr(self, kind) + 1
        setattr(self, kind, value)
        return value


@dataclass
class Touched:
    topics: dict[str, None] = field(default_factory=dict)       # ordered set of topic ids
    fields: dict[str, None] = field(default_factory=dict)
    entries: dict[str, None] = field(default_factory=dict)      # for C4: created, or changed
                                                                #   in a column C4 reads
    observations: list[Row] = field(default_factory=list)       # observations created
    changed_topics: dict[str, None] = field(default_factory=dict)  # a field value was updated
    flagged: dict[str, list[str]] = field(default_factory=dict)    # topic -> flag ids created
    reevaluated: set[str] = field(default_factory=set)
    accessed: dict[tuple[str, str], float] = field(default_factory=dict)  # unit -> strength before
    content: dict[str, None] = field(default_factory=dict)    # topics whose summary is stale
    reindex: dict[str, None] = field(default_factory=dict)    # topics whose names changed
    episodes: dict[str, None] = field(default_factory=dict)   # episodes created or changed


@dataclass(frozen=True)
class Services:
    """The parts of the engine a transition may use besides the state."""
    embedder: "Embedder"
    resolver: "Resolver"
    summarizer: Callable[[str, dict[str, Any]], str]
