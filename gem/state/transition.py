"""One transition: the proposed next state M_{t+1}, computed in memory.

A transition reads committed state through the row cache (batch-loaded by key) and writes
only its own copies of rows. Nothing reaches the engine until the pipeline's last stage
flushes the transition's writes with a few keyed, batched statements inside one engine
transaction. So a transition never reads its own uncommitted writes back from the engine
(kuzu 0.11.3 returns wrong parent/child pairs for uncommitted relationships after a
checkpoint), and a rejected transition has nothing to roll back: the database, the cache
and the derived indexes are exactly as they were.

What the policies and conditions need is recorded as the transition runs: the events to
evaluate, the units touched, changed, flagged and accessed, and the policies that fired.
"""
from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any, Callable, Iterable, Protocol, Sequence

from .. import history
from ..salience import decayed_strength, field_half_life, salience_of
from ..store.schema import EDGE_TABLES, TABLES, Row
from ..units import field_id
from .cache import CHILD_RELS, NODE_TABLES, CommittedCache, Edge
from .events import Event, Fired

if TYPE_CHECKING:
    from ..embed import Embedder
    from ..resolve import Resolver

# Salience columns are written behind (gem/derived/): a transition's log record carries them.
SALIENCE = frozenset({"strength", "last_access"})
SALIENT = frozenset({"Topic", "Field", "Episode"})
# Topic properties the derived indexes (names, title vectors, status) are built from.
INDEXED = frozenset({"title", "aliases", "status"})
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
    def unit_valid(self) -> dict[str, float]: ...  # unit -> valid time (seconds), for `between`
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
                        by_label: dict[str, timedelta | None] | None = None) -> list[str]: ...
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
    reindex: dict[str, None] = field(default_factory=dict)    # topics whose names/status changed
    episodes: dict[str, None] = field(default_factory=dict)   # episodes created or changed


@dataclass(frozen=True)
class Services:
    """The parts of the engine a transition may use besides the state."""
    embedder: "Embedder"
    resolver: "Resolver"
    summarizer: Callable[[str, dict[str, Any]], str]


class Transition:
    """The proposed state: committed rows (through the cache) plus this transition's copies."""

    def __init__(self, cache: CommittedCache, committed: Committed, services: Services, *,
                 op: str, actor: str, now: datetime, counters: Counters, seq: int,
                 settings: dict[str, Any] | None = None, scope: str = "default") -> None:
        self.cache = cache
        self.committed = committed
        self.scope = scope
        # Ids are per scope ("acme:t3"; unprefixed in the default scope): a tenant's ids, and
        # the orders they break ties in, never depend on what another tenant created.
        self.prefix = "" if scope == "default" else f"{scope}:"
        self.services = services
        self.op = op
        self.event = op          # the log's event name (forget runs as "tick", for example)
        self.operator: Callable[["Transition"], Any] = lambda t: None
        self.policies_for: Callable[[str], Sequence[Any]] = lambda name: ()
        self.actor = actor
        self.now = now
        self.counters = counters
        self.seq = seq            # the number this transition gets in the log if it commits
        self.settings: dict[str, Any] = dict(settings or {})
        self.events: deque[Event] = deque()
        self.touched = Touched()
        self.fired: list[Fired] = []
        self.detail: dict[str, Any] = {}
        # progress(step, done, total) for long transitions: the pipeline reports its stages
        # and the policy runtime every 1000th action (a forgetting pass makes thousands).
        self.progress: Callable[[str, int, int], None] | None = None
        self.output: Any = None
        self.log_record: Row | None = None
        self.directory: Any = None  # the resolver's view of names (gem/operators/resolution.py)
        self.current_event: Event | None = None
        self.depth = 0
        self._acted: set[tuple[Any, ...]] = set()
        self._siblings: dict[str, dict[str, _Siblings]] = {}  # table -> key -> its group
        self._faded: dict[str, list[str]] = {}  # field -> committed faded entries (faded_history)
        self._entries_changed: set[str] = set()  # fields whose entries this transition updated
        self._judged_changed: set[str] = set()   # ... in a column the history rules read
        # this transition's copies of rows, lists and edges (what it read or wrote)
        self.rows: dict[str, dict[str, Row | None]] = {t: {} for t in NODE_TABLES}
        self.children: dict[str, dict[str, list[str]]] = {r: {} for r in CHILD_RELS}
        self.edges: dict[str, list[Edge]] = {}
        # its writes, for the flush
        self.created: dict[str, dict[str, Row]] = {t: {} for t in NODE_TABLES}
        self.updated: dict[str, dict[str, Row]] = {t: {} for t in NODE_TABLES}
        self.parent_of: dict[str, str] = {}  # created child -> parent (owning rel made with it)
        self.salience: dict[str, str] = {}   # unit -> table, for units whose salience changed
        self.deleted: dict[str, dict[str, None]] = {t: {} for t in NODE_TABLES}  # erasure only
        self.attested: dict[str, str | None] = {}  # other writes' content hashes (policies)
        self.tombstone: dict[str, Any] | None = None  # what an erasure removed (ids, commitment)
        # deleted keys the record must not name (an erased field's id holds its name); every
        # record that attested them is redacted by the same erasure
        self.unlisted: set[str] = set()
        self.salience_written: list[tuple[str, str, float, Any]] = []  # written behind by the flush
        self.write_behind_now = False  # bring every stored salience column up to date with it
        self.rels_added: dict[str, list[tuple[str, str, Row]]] = {}
        self.rels_removed: dict[str, list[tuple[str, str]]] = {}
        # writes outside the state's own tables (stored policies), made by the flush in the
        # same engine transaction
        self.store_writes: list[Callable[[Any], None]] = []
        # Facts policies dropped (`drop`), by their number in the transition, with why; the
        # engine runs the transition again leaving out `skipping` (those dropped before).
        self.dropped: dict[int, dict[str, Any]] = {}
        self.skipping: frozenset[int] = frozenset()

    # ------------------------------------------------------------------ settings
    @property
    def half_life(self) -> timedelta:
        return self.settings["half_life"]

    # ------------------------------------------------------------------ row reads
    def siblings(self, table: str, keys: Sequence[str]) -> None:
        """Remember a set of units a policy is about to walk (EXISTS x IN active_fields): the
        first miss on any of them loads them all in one statement, and likewise for their
        fields (topics) or histories (fields). (One shared group per key, set in C: a
        forgetting pass at 100k topics walks 1M fields twice.)"""
        group = _Siblings(list(keys), {table, "HAS_FIELD" if table == "Topic" else "HAS_ENTRY"})
        self._siblings.setdefault(table, {}).update(dict.fromkeys(group.keys, group))

    def _group(self, kind: str, key: str) -> list[str]:
        family = self._siblings.get("Topic" if kind in ("Topic", "HAS_FIELD") else
                                    "Field" if kind in ("Field", "HAS_ENTRY") else "")
        group = family.get(key) if family else None
        if group is None or kind not in group.unread:
            return [key]
        group.unread.discard(kind)  # one batch per group and kind: later misses go singly
        return group.keys

    def _uncommitted(self, table: str, key: str) -> bool:
        """Whether the row cannot be in the database: a field of a topic this transition
        creates (a batch of new topics would otherwise look up each of their fields)."""
        return table == "Field" and key.split("/", 1)[0] in self.created["Topic"]

    def prefetch(self, table: str, keys: Iterable[str]) -> None:
        """Load committed rows by key in one statement (those not cached yet)."""
        own = self.rows[table]
        self.cache.load_rows(table, [k for k in keys
                                     if k not in own and not self._uncommitted(table, k)])

    def row(self, table: str, key: str) -> Row | None:
        own = self.rows[table]
        if key in own:
            return own[key]
        if self._uncommitted(table, key):
            own[key] = None
            return None
        if key not in self.cache.rows[table]:
            self.cache.load_rows(table, self._group(table, key))
        committed = self.cache.rows[table].get(key)
        own[key] = None if committed is None else dict(committed)
        return own[key]

    def get(self, table: str, key: str) -> Row:
        """A row the caller knows exists (KeyError otherwise)."""
        row = self.row(table, key)
        if row is None:
            raise KeyError(f"{table} {key} does not exist")
        return row

    def topic(self, tid: str) -> Row | None:
        return self.row("Topic", tid)

    def field_row(self, fid: str) -> Row | None:
        return self.row("Field", fid)

    def entry(self, eid: str) -> Row | None:
        return self.row("Entry", eid)

    # ------------------------------------------------------------------ lists
    def prefetch_children(self, rel: str, parents: Iterable[str]) -> None:
        """Load the child lists (and child rows) of many parents in one statement."""
        own = self.children[rel]
        self.cache.load_children(rel, [p for p in parents if p not in own])

    def child_keys(self, rel: str, parent: str) -> list[str]:
        own = self.children[rel]
        if parent not in own:
            if parent not in self.cache.children[rel]:
                self.cache.load_children(rel, self._group(rel, parent))
            own[parent] = list(self.cache.children[rel][parent])
        return own[parent]

    def field_ids(self, tid: str) -> list[str]:
        """Ids of the topic's fields, in creation order."""
        return self.child_keys("HAS_FIELD", tid)

    def entries(self, fid: str) -> list[Row]:
        """The field's whole history (active and compressed), in recording order."""
        keys = self.child_keys("HAS_ENTRY", fid)
        missing = [k for k in keys if k not in self.rows["Entry"]]
        if missing:
            self.cache.load_rows("Entry", missing)
        return [self.row("Entry", k) for k in keys]  # type: ignore[misc]

    def faded_history(self, fid: str) -> list[Row]:
        """The field's entries still in its active history but no longer current (what
        compression moves out), in recording order, in the proposed state. Unless this
        transition changed the field's entries or its whole history is cached, only those
        entries are read (for the field and the siblings a policy walks with it), not the
        whole history: most fields that fade hold one entry."""
        def whole_history_known(k: str) -> bool:
            return self.history_touched(k) or k in self.cache.children["HAS_ENTRY"]

        if whole_history_known(fid):
            return [e for e in self.entries(fid) if e["active"] and e["status"] != "current"]
        if fid not in self._faded:  # its group holds it, and nothing of the group was read yet
            self._faded.update(self.cache.faded_history(
                [k for k in self._group("HAS_ENTRY", fid)
                 if k not in self._faded and not whole_history_known(k)]))
        return [self.row("Entry", k) for k in self._faded[fid]]  # type: ignore[misc]

    def history_touched(self, fid: str) -> bool:
        """Whether this transition read the field's whole history, or changed any entry of
        it (created, updated, moved and deleted entries all pass through one or the other)."""
        return fid in self.children["HAS_ENTRY"] or fid in self._entries_changed

    def history_judged(self, fid: str) -> bool:
        """Whether C1/C2 must judge the field's history again: the transition read it whole
        or changed an entry in a column the rules read (history.JUDGED). Compression changes
        only `active`: a forgetting pass compressing 100k fields' older entries reads none of
        their histories whole."""
        return fid in self.children["HAS_ENTRY"] or fid in self._judged_changed

    def observations(self, eid: str) -> list[Row]:
        return [self.row("Observation", k) for k in self.child_keys("CORROBORATES", eid)]  # type: ignore[misc]

    def flags(self, tid: str) -> list[Row]:
        """Every flag on the topic (open and cleared), oldest first."""
        return [self.row("Flag", k) for k in self.child_keys("FLAGS", tid)]  # type: ignore[misc]

    def open_flags(self, tid: str) -> list[Row]:
        if tid not in self.children["FLAGS"] and not self.committed.has_open_flags(tid):
            return []  # none committed and none raised here: nothing to read
        return [g for g in self.flags(tid) if g["status"] == "open"]

    def current_entry(self, fid: str) -> Row | None:
        return history.current(self.entries(fid))

    # ------------------------------------------------------------------ edges
    def edges_of(self, tid: str) -> list[Edge]:
        if tid not in self.edges:
            self.edges[tid] = list(self.cache.edges_of(tid)) if self.committed.has_edges(tid) else []
        return self.edges[tid]

    def prefetch_edges(self, tids: Iterable[str]) -> None:
        self.cache.load_edges([t for t in tids if t not in self.edges and self.committed.has_edges(t)])

    def dependents(self, tid: str) -> list[str]:
        """Direct EXTENDS successors of a topic in the proposed state."""
        return sorted(b for table, a, b, _ in self.edges_of(tid) if table == "EXTENDS" and a == tid)

    def associates(self, tid: str) -> list[str]:
        """Topics joined to this one by an ASSOCIATES edge, either way."""
        return sorted({b if a == tid else a for table, a, b, _ in self.edges_of(tid)
                       if table == "ASSOCIATES" and tid in (a, b) and a != b})

    def edge(self, table: str, src: str, dst: str) -> Edge | None:
        for e in self.edges_of(src):
            if e[0] == table and e[1] == src and e[2] == dst:
                return e
        return None

    # ------------------------------------------------------------------ global views
    def _changed_rows(self, table: str) -> dict[str, Row]:
        changed = {k: self.rows[table][k] for k in self.updated[table]}
        changed.update((k, self.rows[table][k]) for k, kind in self.salience.items() if kind == table)
        changed.update(self.created[table])
        return {k: r for k, r in changed.items() if r is not None}

    def _topic_status(self, tid: str) -> str | None:
        row = self.rows["Topic"].get(tid)
        return row["status"] if row is not None else self.committed.topic_status(tid)

    def field_ids_where(self, statuses: frozenset[str], below: float | None = None) -> list[str]:
        """Fields of active topics whose status is in `statuses` (and, with `below`, whose
        salience now is under it), in the proposed state, ordered by id."""
        found = set(self.committed.field_ids_where(statuses, below, self.now, self.half_life,
                                                   self.label_half_life))
        # Membership may differ in the proposed state for the fields this transition changed
        # and for every field of a topic whose status it changed.
        moved: dict[str, Row] = {}
        for tid, row in self._changed_rows("Topic").items():
            if row["status"] != self.committed.topic_status(tid):
                fids = self.committed.fields_of(tid)
                self.prefetch("Field", fids)
                moved.update((fid, self.field_row(fid)) for fid in fids)  # type: ignore[misc]
        changed = self._changed_rows("Field")
        updated, created, salience = self.updated["Field"], self.created["Field"], self.salience
        for fid, row in {**changed, **moved}.items():
            if fid in found and fid not in moved and fid not in created and fid not in salience \
                    and "labels" not in updated.get(fid, ()):
                # Selected as committed, and nothing its salience or its topic's status depends
                # on changed (a forgetting pass's compressed fields, walked again by the next
                # rung): only its own status can take it out.
                if row["status"] not in statuses:
                    found.discard(fid)
                continue
            found.discard(fid)
            if row["status"] in statuses and self._topic_status(row["topic_id"]) == "active" \
                    and (below is None or self.salience_now(row) < below):
                found.add(fid)
        return sorted(found)

    def topic_ids_where(self, statuses: frozenset[str], below: float | None = None) -> list[str]:
        changed = self._changed_rows("Topic")
        found = set(self.committed.topic_ids_where(statuses, below, self.now, self.half_life))
        for tid, row in changed.items():
            found.discard(tid)
            if row["status"] in statuses and (below is None or self.salience_now(row) < below):
                found.add(tid)
        return sorted(found, key=topic_order)

    def active_field_count(self) -> int:
        """Active fields of active topics in the proposed state (the footprint C5 bounds)."""
        count = self.committed.active_field_count()
        fields = self._changed_rows("Field")

        def committed_active(fid: str, tid: str) -> bool:
            return self.committed.field_status(fid) == "active" and \
                self.committed.topic_status(tid) == "active"

        for fid, row in fields.items():
            now_active = row["status"] == "active" and self._topic_status(row["topic_id"]) == "active"
            count += int(now_active) - int(committed_active(fid, row["topic_id"]))
        for tid, row in self._changed_rows("Topic").items():
            if self.committed.topic_status(tid) == row["status"]:
                continue
            for fid in self.committed.fields_of(tid):
                if fid in fields:
                    continue
                now_active = self.committed.field_status(fid) == "active" and row["status"] == "active"
                count += int(now_active) - int(committed_active(fid, tid))
        return count

    def episode_ids_where(self, statuses: frozenset[str], below: float | None = None) -> list[str]:
        """Episodes whose status is in `statuses` (and, with `below`, whose salience now is
        under it), in the proposed state, in creation order."""
        found = set(self.committed.episode_ids_where(statuses, below, self.now, self.half_life))
        for key, row in self._changed_rows("Episode").items():
            found.discard(key)
            if row["status"] in statuses and (below is None or self.salience_now(row) < below):
                found.add(key)
        return sorted(found, key=episode_order)

    def flagged_topics(self) -> list[str]:
        """Topics with open revision flags in the proposed state."""
        found = set(self.committed.flagged_topics())
        # Topics whose flag lists this transition loaded or changed (a merge moves flags away).
        for tid in {g["topic_id"] for g in self._changed_rows("Flag").values()} | set(self.children["FLAGS"]):
            found.discard(tid)
            if self.open_flags(tid):
                found.add(tid)
        return sorted(found, key=topic_order)

    # ------------------------------------------------------------------ salience
    def strength_now(self, row: Row) -> float:
        return decayed_strength(row["strength"] or 0.0, row["last_access"], self.now,
                                self.half_life_of(row))

    def half_life_of(self, row: Row) -> timedelta | None:
        """A unit's half-life: a field's may depend on its labels (gem/salience.py)."""
        labels = row.get("labels") if "topic_id" in row else None
        if not labels:
            return self.half_life
        return field_half_life(labels, self.settings.get("label_half_life"), self.half_life)

    @property
    def label_half_life(self) -> dict[str, timedelta | None] | None:
        return self.settings.get("label_half_life") or None

    def salience_now(self, row: Row) -> float:
        return salience_of(self.strength_now(row))

    # ------------------------------------------------------------------ writes
    def create(self, table: str, row: Row, parent: str | None = None) -> Row:
        """A new row (every column, None where unset). With `parent`, the owning relationship
        from it is created in the same statement as the row."""
        full = {c: row.get(c) for c in TABLES[table].columns}
        key = str(full["id"])
        self.rows[table][key] = full
        self.created[table][key] = full
        for own in LISTS_OF.get(table, ()):
            self.children[own][key] = []
        rel = OWNER_REL.get(table)
        if parent is not None and rel is not None:
            self.parent_of[key] = parent
            self.child_keys(rel, parent).append(key)
        return full

    def update(self, table: str, key: str, **props: Any) -> None:
        row = self.rows[table].get(key) or self.get(table, key)
        row.update(props)
        if table == "Entry":
            self._entries_changed.add(row["field_id"])
            if props.keys() & history.JUDGED:
                self._judged_changed.add(row["field_id"])
        if key in self.created[table]:
            pass  # written whole by the flush
        elif table in SALIENT and props.keys() & SALIENCE:
            # Salience is written behind: the log record carries it (gem/derived/).
            self.salience[key] = table
            rest = {k: v for k, v in props.items() if k not in SALIENCE}
            if rest:
                self.updated[table].setdefault(key, {}).update(rest)
        else:
            self.updated[table].setdefault(key, {}).update(props)
        if table == "Topic":
            self.touched.topics[key] = None
            if props.keys() & INDEXED:
                self.touched.reindex[key] = None
                self.touched.content[key] = None

    def add_edge(self, table: str, src: str, dst: str, props: Row) -> None:
        edge = (table, src, dst, props)
        for end in {src, dst}:
            self.edges_of(end).append(edge)
        self.rels_added.setdefault(table, []).append((src, dst, props))

    def remove_edge(self, table: str, src: str, dst: str) -> None:
        for end in {src, dst}:
            self.edges[end] = [e for e in self.edges_of(end)
                               if not (e[0] == table and e[1] == src and e[2] == dst)]
        added = self.rels_added.get(table, [])
        kept = [x for x in added if not (x[0] == src and x[1] == dst)]
        if len(kept) != len(added):  # made in this transition: it never reaches the engine
            self.rels_added[table] = kept
        else:
            self.rels_removed.setdefault(table, []).append((src, dst))

    def delete(self, table: str, key: str, parent: str | None = None) -> None:
        """Remove a row and its relationships (erasure, the one destructive write). `parent`
        is the row that owns it, whose child list loses it."""
        self.get(table, key)
        self.rows[table][key] = None
        self.created[table].pop(key, None)
        self.updated[table].pop(key, None)
        self.salience.pop(key, None)
        self.deleted[table][key] = None
        if parent is not None and table in OWNER_REL:
            lst = self.child_keys(OWNER_REL[table], parent)
            if key in lst:
                lst.remove(key)
        for own in LISTS_OF.get(table, ()):
            self.children[own][key] = []

    def move_child(self, rel: str, child: str, old_parent: str, new_parent: str) -> None:
        """Re-home a child (an entry to another field, a flag to another topic)."""
        self.child_keys(rel, old_parent).remove(child)
        self.child_keys(rel, new_parent).append(child)
        if child in self.parent_of:  # created in this transition: created under the new parent
            self.parent_of[child] = new_parent
            return
        src_first = rel in ("CORROBORATES", "FLAGS")
        old = (child, old_parent) if src_first else (old_parent, child)
        new = (child, new_parent) if src_first else (new_parent, child)
        added = self.rels_added.get(rel, [])
        if any(a == old[0] and b == old[1] for a, b, _ in added):
            self.rels_added[rel] = [x for x in added if not (x[0] == old[0] and x[1] == old[1])]
        else:
            self.rels_removed.setdefault(rel, []).append(old)
        self.rels_added.setdefault(rel, []).append((new[0], new[1], {}))

    # ------------------------------------------------------------------ units of the state
    def new_topic(self, title: str, aliases: Sequence[str]) -> Row:
        n = self.counters.next("topic")
        row = self.create("Topic", {
            "id": f"{self.prefix}t{n}", "seq": n, "title": title, "aliases": list(aliases), "strength": 0.0,
            "last_access": self.now, "status": "active", "scope": self.scope, "created_at": self.now,
            "annotations": "{}"})
        self.edges[row["id"]] = []
        self.touch_topic(row["id"])
        self.touched.reindex[row["id"]] = None
        self.touched.content[row["id"]] = None
        return row

    def new_field(self, tid: str, name: str) -> Row:
        row = self.create("Field", {
            "id": field_id(tid, name), "topic_id": tid, "name": name, "strength": 0.0,
            "last_access": self.now, "status": "active", "contested": False, "summary": None,
            "created_at": self.now, "annotations": "{}", "labels": []}, parent=tid)
        self.touch_field(row["id"], tid)
        return row

    def new_entry(self, fid: str, value: str, valid_at: datetime, provenance: Row, status: str,
                  superseded_by: str | None = None, labels: Sequence[str] = (),
                  reason: str | None = None, place: Row | None = None) -> Row:
        """A new entry of field `fid` holding JSON `value`; `superseded_by` for one that
        arrives already superseded. The field's labels take in the entry's. `place`: its
        place columns (gem.places.columns)."""
        n = self.counters.next("entry")
        row = self.create("Entry", {
            "id": f"{self.prefix}e{n}", "seq": n, "tx": self.seq, "field_id": fid, "origin_field": fid,
            "value": value, "valid_at": valid_at, "asserted_at": valid_at,
            "recorded_at": self.now, "status": status, "superseded_by": superseded_by,
            "superseded_tx": self.seq if superseded_by else None,
            "active": True, "annotations": "{}", "labels": list(labels), "reason": reason,
            **provenance, **(place or {})}, parent=fid)
        self.touched.entries[row["id"]] = None
        if labels:
            self.add_labels("Field", fid, labels)
        return row

    def add_labels(self, table: str, key: str, labels: Sequence[str]) -> None:
        """Add labels to an entry or a field (a label, once given, stays with its unit: only
        an erasure of what stated it takes it away)."""
        row = self.get(table, key)
        have = list(row["labels"] or [])
        more = [x for x in labels if x not in have]
        if more:
            self.update(table, key, labels=have + more)

    def new_observation(self, eid: str, provenance: Row, valid_at: datetime) -> Row:
        n = self.counters.next("observation")
        row = self.create("Observation", {
            "id": f"{self.prefix}o{n}", "seq": n, "entry_id": eid, "valid_at": valid_at,
            "recorded_at": self.now, **provenance}, parent=eid)
        entry = self.entry(eid)
        assert entry is not None
        if provenance["polarity"] == "+" and valid_at > entry["asserted_at"]:
            # Re-stating a value is a statement at that moment: it outranks anything claimed
            # between its first statement and now (the ordering key of the history).
            self.update("Entry", eid, asserted_at=valid_at)
        self.touched.observations.append(row)
        self.touched.entries[eid] = None
        return row

    def new_flag(self, tid: str, origin: str | None, policy: str | None, evidence: str) -> Row:
        n = self.counters.next("flag")
        row = self.create("Flag", {
            "id": f"{self.prefix}g{n}", "seq": n, "tx": self.seq, "topic_id": tid, "origin_id": origin,
            "policy": policy, "evidence": evidence, "status": "open", "created_at": self.now,
            "cleared_at": None, "cleared_by": None}, parent=tid)
        self.touched.flagged.setdefault(tid, []).append(row["id"])
        self.touch_topic(tid)
        return row

    def new_episode(self, text: str, at: datetime, source: str, actor: str,
                    speaker: str | None, follows: str | None = None,
                    place: Row | None = None) -> Row:
        n = self.counters.next("episode")
        row = self.create("Episode", {
            "id": f"{self.prefix}ep{n}", "seq": n, "tx": self.seq, "text": text, "at": at,
            "recorded_at": self.now, "source": source, "actor": actor, "speaker": speaker,
            "follows": follows,
            "strength": 0.0, "last_access": self.now, "status": "active", "scope": self.scope,
            "annotations": "{}", "cited_by": [], "contradicted_by": None, **(place or {})})
        self.touched.episodes[row["id"]] = None
        return row

    def link_successor(self, entry: Row, successor: Row, **props: Any) -> None:
        """Record which entry took `entry`'s place, and in which transition (by key)."""
        self.update("Entry", entry["id"], superseded_by=successor["id"], superseded_tx=self.seq,
                    **props)
        self.touched.entries[entry["id"]] = None

    def supersede(self, old: Row, new: Row) -> None:
        self.link_successor(old, new, status="superseded")

    def touch_topic(self, tid: str) -> None:
        self.touched.topics[tid] = None

    def touch_field(self, fid: str, tid: str) -> None:
        self.touched.fields[fid] = None
        self.touched.topics[tid] = None

    def content_changed(self, tid: str) -> None:
        """The topic's summary no longer says what it holds (refreshed lazily after commit)."""
        self.touched.content[tid] = None

    def reinforce(self, table: str, key: str, amount: float) -> None:
        row = self.row(table, key)
        if row is None:
            return
        self.update(table, key, strength=self.strength_now(row) + max(amount, 0.0),
                    last_access=self.now)

    def record_access(self, table: str, key: str) -> None:
        """Remember the strength a retrieved unit had before this transition (for C6)."""
        unit = (table, key)
        if unit not in self.touched.accessed:
            row = self.row(table, key)
            if row is not None:
                self.touched.accessed[unit] = self.strength_now(row)

    # ------------------------------------------------------------------ events
    def emit(self, name: str, **bindings: Any) -> None:
        """Announce an event to the policies. One no policy listens to is evaluated by then
        (C2) and bounds no cascade, so it is not queued (a forgetting pass emits one per unit)."""
        if not self.policies_for(name):
            return
        bindings.setdefault("timestamp", self.now)
        depth = self.depth + 1 if self.current_event is not None else 0
        self.events.append(Event(name, bindings, depth))

    def once(self, *key: Any) -> bool:
        """True the first time `key` is seen in this transition: actions are idempotent per unit."""
        if key in self._acted:
            return False
        self._acted.add(key)
        return True

    def record_fired(self, fired: Fired) -> None:
        self.fired.append(fired)


LISTS_OF = {"Topic": ("HAS_FIELD", "FLAGS"), "Field": ("HAS_ENTRY",), "Entry": ("CORROBORATES",)}


@dataclass
class _Siblings:
    """Units a policy walks together, and which of their reads (rows, child lists) are still
    to be made for the whole group."""
    keys: list[str]
    unread: set[str]


def episode_order(eid: str) -> tuple[int, str]:
    """Episodes in creation order (ids are "ep<seq>", after the scope's prefix)."""
    digits = eid.rsplit(":", 1)[-1][2:]
    return (int(digits), eid) if digits.isdigit() else (-1, eid)


def topic_order(tid: str) -> tuple[int, str]:
    """Topics in creation order (ids are "t<seq>", after the scope's prefix)."""
    digits = tid.rsplit(":", 1)[-1][1:]
    return (int(digits), tid) if digits.isdigit() else (-1, tid)
