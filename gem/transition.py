"""One transition of the memory state: the proposed M_{t+1}, as the operators write it.

Every write of every operator and policy action goes through a `Transition`, which
(1) keeps the rows it has read or written in caches that are authoritative for this
transaction, (2) buffers creates and updates and sends them to the store in UNWIND
batches (the batch-ingest fast path), flushing before any query the caches cannot
answer, and (3) records what the postconditions need: touched, changed, flagged and
accessed units, and the policies that fired.
"""
from __future__ import annotations

import base64
import json
from collections import deque
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any, Callable

import numpy as np

from .errors import TransitionRejected
from .salience import decayed_strength, salience_of
from .store import Tx
from .units import EdgeRef, EntryRef, FieldRef, TopicRef, field_id

BATCH = 200  # rows per UNWIND statement; larger batches slow down super-linearly on Kuzu

TOPIC_COLUMNS = ("id", "seq", "title", "aliases", "summary", "embedding", "strength",
                 "last_access", "status", "scope", "created_at", "updated_at", "annotations")
FIELD_COLUMNS = ("id", "topic_id", "name", "strength", "last_access", "status", "contested",
                 "summary", "created_at", "annotations")
ENTRY_COLUMNS = ("id", "seq", "tx", "field_id", "origin_field", "value", "valid_at", "asserted_at",
                 "recorded_at", "source", "actor", "ref", "confidence", "polarity", "status",
                 "superseded_by", "superseded_tx", "active", "annotations")
OBSERVATION_COLUMNS = ("id", "seq", "entry_id", "source", "actor", "ref", "confidence",
                       "polarity", "valid_at", "recorded_at")
FLAG_COLUMNS = ("id", "seq", "tx", "topic_id", "origin_id", "policy", "evidence", "status",
                "created_at", "cleared_at")
# Read lazily: a topic's embedding is large and only `similarity()` reads it back; the
# vector index already holds every committed one.
LAZY = {"embedding"}
# The relationship that owns each kind of child node, so it is created with the child.
OWNING = {"HAS_FIELD", "HAS_ENTRY", "CORROBORATES", "FLAGS"}
CHILD_FIRST = {"CORROBORATES", "FLAGS"}  # (child)-[:REL]->(parent); the others point down

# Topic properties the derived indexes (names, text, vectors, status) are built from.
INDEXED = {"title", "aliases", "summary", "embedding", "status"}
COLUMNS = {"Topic": TOPIC_COLUMNS, "Field": FIELD_COLUMNS, "Entry": ENTRY_COLUMNS,
           "Observation": OBSERVATION_COLUMNS, "Flag": FLAG_COLUMNS}


def encode_vector(vec: np.ndarray) -> str:
    return base64.b64encode(np.asarray(vec, dtype="<f4").tobytes()).decode("ascii")


def decode_vector(text: str | None, dim: int) -> np.ndarray:
    if not text:
        return np.zeros(dim, dtype=np.float32)
    return np.frombuffer(base64.b64decode(text), dtype="<f4").astype(np.float32)


def dumps(value: Any) -> str:
    return json.dumps(value, sort_keys=True, default=_json_default, separators=(",", ":"))


def _json_default(value: Any) -> Any:
    if isinstance(value, datetime):
        return value.isoformat()
    if isinstance(value, timedelta):
        return value.total_seconds()
    if isinstance(value, (TopicRef, EntryRef)):
        return value.id
    if isinstance(value, FieldRef):
        return value.name
    if isinstance(value, EdgeRef):
        return {"kind": value.kind, "source": value.source, "target": value.target}
    if isinstance(value, (set, frozenset, tuple)):
        return sorted(value, key=str) if isinstance(value, (set, frozenset)) else list(value)
    return str(value)


@dataclass
class Event:
    name: str
    bindings: dict[str, Any]
    depth: int


@dataclass
class Fired:
    policy: str
    event: str
    action: str
    args: list[Any]
    evidence: dict[str, Any]


@dataclass
class Counters:
    """Id sequences and the interaction count, carried from transition to transition."""
    topic: int = 0
    entry: int = 0
    observation: int = 0
    flag: int = 0
    interactions: int = 0

    def next(self, kind: str) -> int:
        value = getattr(self, kind) + 1
        setattr(self, kind, value)
        return value


@dataclass
class Touched:
    topics: dict[str, None] = field(default_factory=dict)       # ordered set of topic ids
    fields: dict[str, None] = field(default_factory=dict)
    entries: dict[str, None] = field(default_factory=dict)
    changed_topics: dict[str, None] = field(default_factory=dict)  # a field value was updated
    flagged: dict[str, list[str]] = field(default_factory=dict)    # topic -> flag ids created
    reevaluated: set[str] = field(default_factory=set)
    accessed: dict[tuple[str, str], float] = field(default_factory=dict)  # unit -> strength before
    index_dirty: dict[str, None] = field(default_factory=dict)     # summaries to recompute
    reindex: dict[str, None] = field(default_factory=dict)         # derived indexes to update


class Transition:
    """The proposed next state, with buffered writes over one store transaction."""

    def __init__(self, engine: Any, tx: Tx, op: str, actor: str, now: datetime,
                 counters: Counters) -> None:
        self.engine = engine
        self.tx = tx
        self.op = op
        self.actor = actor
        self.now = now
        self.counters = counters
        self.seq = engine.seq + 1  # the number this transition gets in the log if it commits
        self.settings: dict[str, Any] = {}  # set by the engine once the transition exists
        self.events: deque[Event] = deque()
        self.touched = Touched()
        self.fired: list[Fired] = []
        self.output: Any = None
        self.detail: dict[str, Any] = {}
        self._depth = 0
        self._current_event: Event | None = None
        self._acted: set[tuple] = set()
        # caches: authoritative for this transaction once a row is in them
        self._rows: dict[str, dict[str, dict[str, Any] | None]] = {t: {} for t in COLUMNS}
        self._entries_of: dict[str, list[dict[str, Any]]] = {}
        self._fields_of: dict[str, list[str]] = {}
        self._observations_of: dict[str, list[dict[str, Any]]] = {}
        self._dependents: dict[str, list[str]] = {}
        self._siblings: dict[tuple[str, str], list[str]] = {}
        self._created: set[str] = set()   # ids created in this transaction, flushed or not
        self._observed: set[str] = set()  # entries given observations without loading them
        self._fields_pending: set[str] = set()  # topics given fields without loading them
        self.edges_reset = False                # edges were deleted: cached dependents are void
        self.dependents_dropped: set[str] = set()
        self._cache = engine.cache
        self.new_observations: list[dict[str, Any]] = []
        # write buffers
        self._creates: dict[str, dict[str, dict[str, Any]]] = {t: {} for t in COLUMNS}
        self._sets: dict[tuple[str, str], dict[str, Any]] = {}
        self._owner: dict[str, tuple[str, str, str]] = {}  # pending child -> (rel, table, parent)
        self._rels: dict[str, list[dict[str, Any]]] = {}

    # ------------------------------------------------------------------ settings
    @property
    def half_life(self) -> timedelta:
        return self.settings["half_life"]

    # ------------------------------------------------------------------ reads
    def siblings(self, table: str, keys: list[str]) -> None:
        """Remember a set of units a policy is about to walk (EXISTS x IN active_fields):
        the first cache miss on any of them loads them all in one statement, and likewise
        for their fields (topics) or histories (fields)."""
        group = list(keys)
        children = "Topic.fields" if table == "Topic" else "Field.entries"
        for key in group:
            self._siblings[(table, key)] = group
            self._siblings[(children, key)] = group

    def _group(self, table: str, key: str) -> list[str]:
        group = self._siblings.get((table, key))
        if group is None:
            return [key]
        for k in group:  # one batch per group: later misses go singly
            self._siblings.pop((table, k), None)
        return group

    def row(self, table: str, key: str) -> dict[str, Any] | None:
        if key not in self._rows[table]:
            self.prefetch(table, self._group(table, key))
        return self._rows[table][key]

    def topic(self, tid: str) -> dict[str, Any] | None:
        return self.row("Topic", tid)

    def field_row(self, fid: str) -> dict[str, Any] | None:
        return self.row("Field", fid)

    def entry(self, eid: str) -> dict[str, Any] | None:
        return self.row("Entry", eid)

    # Loaders flush only when a write was made under a unit whose list was never loaded
    # (_fields_pending, _observed); otherwise a cache miss means nothing is pending there.
    def field_ids(self, tid: str) -> list[str]:
        """Ids of the topic's fields, in creation order."""
        if tid not in self._fields_of:
            self.prefetch_fields_of(self._group("Topic.fields", tid))
        return self._fields_of[tid]

    def entries(self, fid: str) -> list[dict[str, Any]]:
        """The field's whole history (active and compressed), in recording order."""
        if fid not in self._entries_of:
            self.prefetch_entries(self._group("Field.entries", fid))
        return self._entries_of[fid]

    def observations(self, eid: str) -> list[dict[str, Any]]:
        if eid not in self._observations_of:
            if eid in self._observed:
                self.flush()  # observations were added to this entry without loading it
            self.prefetch_observations([eid])
        return self._observations_of[eid]

    def prefetch(self, table: str, keys: list[str]) -> None:
        """Load rows by primary key: one statement per key for a few, one scan for many
        (measured: UNWIND into a key match is slower than both on Kuzu and LadybugDB)."""
        cache = self._rows[table]
        missing = []
        committed = self._cache.rows.get(table, {})
        for key in dict.fromkeys(keys):
            if key in cache:
                continue
            if key in committed:
                row = committed[key]
                cache[key] = None if row is None else dict(row)
            else:
                missing.append(key)
        if not missing:
            return
        cols = [c for c in COLUMNS[table] if c not in LAZY]
        returns = ", ".join(f"n.{c}" for c in cols)
        if len(missing) > 16:
            found = self.tx.run(f"MATCH (n:{table}) WHERE n.id IN $ids RETURN {returns}",
                                {"ids": missing})
        else:
            found = [r for key in missing for r in self.tx.run(
                f"MATCH (n:{table} {{id: $id}}) RETURN {returns}", {"id": key})]
        for values in found:
            cache[values[0]] = dict(zip(cols, values))
        for key in missing:
            cache.setdefault(key, None)

    def topic_embedding(self, tid: str) -> str | None:
        row = self.topic(tid)
        if row is not None and "embedding" not in row:
            row["embedding"] = self.tx.scalar("MATCH (n:Topic {id: $id}) RETURN n.embedding",
                                              {"id": tid})
        return None if row is None else row["embedding"]

    def _take(self, table: str, key: str) -> dict[str, Any]:
        """This transaction's copy of a committed row (the cache always holds the rows of
        the lists it holds)."""
        if key not in self._rows[table]:
            self._rows[table][key] = dict(self._cache.rows[table][key])
        return self._rows[table][key]

    def prefetch_fields_of(self, tids: list[str]) -> None:
        missing = [t for t in dict.fromkeys(tids) if t not in self._fields_of]
        if any(t in self._fields_pending for t in missing):
            self.flush()
        for tid in list(missing):
            if tid in self._cache.fields_of and tid not in self._fields_pending:
                self._fields_of[tid] = list(self._cache.fields_of[tid])
                missing.remove(tid)
        for tid in missing:
            self._fields_of[tid] = []
        missing = [t for t in missing if t not in self._created]
        if not missing:
            return
        cols = FIELD_COLUMNS
        cache = self._rows["Field"]
        for values in self._children("Topic", "HAS_FIELD", "Field", cols, missing,
                                     "ORDER BY f.created_at, f.id"):
            row = cache.get(values[1]) or dict(zip(cols, values[1:]))
            cache[row["id"]] = row
            self._fields_of[values[0]].append(row["id"])

    def prefetch_entries(self, fids: list[str]) -> None:
        missing = [f for f in dict.fromkeys(fids) if f not in self._entries_of]
        for fid in list(missing):
            if fid in self._cache.entries_of:
                self._entries_of[fid] = [self._take("Entry", e) for e in self._cache.entries_of[fid]]
                missing.remove(fid)
        for fid in missing:
            self._entries_of[fid] = []
        missing = [f for f in missing if f not in self._created]
        if not missing:
            return
        cols = ENTRY_COLUMNS
        cache = self._rows["Entry"]
        for values in self._children("Field", "HAS_ENTRY", "Entry", cols, missing, "ORDER BY f.seq"):
            row = cache.get(values[1]) or dict(zip(cols, values[1:]))
            cache[row["id"]] = row
            self._entries_of[values[0]].append(row)

    def prefetch_observations(self, eids: list[str]) -> None:
        missing = [e for e in dict.fromkeys(eids) if e not in self._observations_of]
        for eid in list(missing):
            if eid in self._cache.observations_of and eid not in self._observed:
                self._observations_of[eid] = [self._take("Observation", o)
                                              for o in self._cache.observations_of[eid]]
                missing.remove(eid)
        for eid in missing:
            self._observations_of[eid] = []
        missing = [e for e in missing if e not in self._created]
        if not missing:
            return
        cols = OBSERVATION_COLUMNS
        for values in self._children("Entry", "CORROBORATES", "Observation", cols, missing,
                                     "ORDER BY f.seq", reverse=True):
            row = self._rows["Observation"].get(values[1]) or dict(zip(cols, values[1:]))
            self._rows["Observation"][row["id"]] = row
            self._observations_of[values[0]].append(row)

    def dependents(self, tid: str) -> list[str]:
        """Direct EXTENDS successors of a topic in the proposed state."""
        if tid not in self._dependents:
            self.prefetch_dependents([tid])
        return self._dependents[tid]

    def edges_changed(self) -> None:
        """Forget cached dependents after edges were deleted or re-pointed."""
        self._dependents.clear()
        self.edges_reset = True

    def prefetch_dependents(self, tids: list[str]) -> None:
        missing = [t for t in dict.fromkeys(tids) if t not in self._dependents]
        if not self.edges_reset:
            for tid in list(missing):
                if tid in self._cache.dependents and tid not in self.dependents_dropped:
                    self._dependents[tid] = list(self._cache.dependents[tid])
                    missing.remove(tid)
        if not missing:
            return
        self.flush()  # edges may be pending
        for tid in missing:
            self._dependents[tid] = []
        for a, b in self._children("Topic", "EXTENDS", "Topic", ("id",), missing, "ORDER BY f.id"):
            if b not in self._dependents[a]:
                self._dependents[a].append(b)

    def _children(self, parent: str, rel: str, child: str, cols: tuple[str, ...], ids: list[str],
                  order: str, reverse: bool = False) -> list[list[Any]]:
        """Rows (parent id, *child cols) over one relationship, for many parents.

        Measured on Kuzu and LadybugDB: a 1-hop from one key is fast, but UNWIND of many
        keys into a 1-hop scans the whole table; `WHERE p.id IN $ids` scans once for all.
        So a few parents go one statement each, many go in one scanning statement.
        """
        arrow = f"(p:{parent})<-[:{rel}]-(f:{child})" if reverse else \
            f"(p:{parent})-[:{rel}]->(f:{child})"
        returns = "p.id, " + ", ".join(f"f.{c}" for c in cols)
        if len(ids) > 16:
            return self.tx.run(f"MATCH {arrow} WHERE p.id IN $ids RETURN {returns} {order}",
                               {"ids": ids})
        rows: list[list[Any]] = []
        for key in ids:
            rows += self.tx.run(f"MATCH {arrow} WHERE p.id = $id RETURN {returns} {order}",
                                {"id": key})
        return rows

    def current_entry(self, fid: str) -> dict[str, Any] | None:
        for entry in reversed(self.entries(fid)):
            if entry["status"] == "current":
                return entry
        return None

    def query(self, text: str, params: dict[str, Any] | None = None) -> list[list[Any]]:
        """A query over the proposed state that the caches cannot answer."""
        self.flush()
        return self.tx.run(text, params)

    # ------------------------------------------------------------------ salience
    def strength_now(self, row: dict[str, Any]) -> float:
        return decayed_strength(row["strength"] or 0.0, row["last_access"], self.now, self.half_life)

    def salience_now(self, row: dict[str, Any]) -> float:
        return salience_of(self.strength_now(row))

    # ------------------------------------------------------------------ writes
    def create(self, table: str, row: dict[str, Any]) -> dict[str, Any]:
        full = {c: row.get(c) for c in COLUMNS[table]}
        self._created.add(full["id"])
        self._rows[table][full["id"]] = full
        self._creates[table][full["id"]] = full
        return full

    def update(self, table: str, key: str, **props: Any) -> None:
        row = self.row(table, key)
        if row is None:
            raise KeyError(f"{table} {key} does not exist")
        row.update(props)
        if table == "Topic":
            self.touched.topics[key] = None
            if props.keys() & INDEXED:
                self.touched.reindex[key] = None
        if key not in self._creates[table]:
            self._sets.setdefault((table, key), {}).update(props)

    def relate(self, rel: str, src: tuple[str, str], dst: tuple[str, str], **props: Any) -> None:
        if rel == "EXTENDS":
            self._dependents.pop(src[1], None)
            self.dependents_dropped.add(src[1])
        child, parent = (src, dst) if rel in CHILD_FIRST else (dst, src)
        if rel in OWNING and child[1] in self._creates[child[0]] and child[1] not in self._owner:
            # Created with the child, in the statement that creates it: on Kuzu 0.11.3 a
            # relationship between two existing nodes costs ~10x more (see schema.py).
            self._owner[child[1]] = (rel, parent[0], parent[1])
            return
        self._rels.setdefault(f"{rel}|{src[0]}|{dst[0]}", []).append(
            {"a": src[1], "b": dst[1], **props})

    def new_topic(self, title: str, aliases: list[str], scope: str = "default") -> dict[str, Any]:
        n = self.counters.next("topic")
        row = self.create("Topic", {
            "id": f"t{n}", "seq": n, "title": title, "aliases": list(aliases), "summary": title,
            "embedding": None, "strength": 0.0, "last_access": self.now, "status": "active",
            "scope": scope, "created_at": self.now, "updated_at": self.now, "annotations": "{}"})
        self._fields_of[row["id"]] = []
        self.touch_topic(row["id"])
        self.touched.reindex[row["id"]] = None
        return row

    def new_field(self, tid: str, name: str) -> dict[str, Any]:
        fid = field_id(tid, name)
        row = self.create("Field", {
            "id": fid, "topic_id": tid, "name": name, "strength": 0.0, "last_access": self.now,
            "status": "active", "contested": False, "summary": None, "created_at": self.now,
            "annotations": "{}"})
        self._entries_of[fid] = []
        if tid in self._fields_of:
            self._fields_of[tid].append(fid)
        else:
            self._fields_pending.add(tid)  # loading the list later must flush first
        self.relate("HAS_FIELD", ("Topic", tid), ("Field", fid))
        self.touch_field(fid, tid)
        return row

    def new_entry(self, fid: str, value: Any, valid_at: datetime, provenance: dict[str, Any],
                  status: str, superseded_by: str | None = None) -> dict[str, Any]:
        """A new entry of field `fid`; `superseded_by` for one that arrives already superseded."""
        n = self.counters.next("entry")
        row = self.create("Entry", {
            "id": f"e{n}", "seq": n, "tx": self.seq, "field_id": fid, "origin_field": fid,
            "value": dumps(value), "valid_at": valid_at, "asserted_at": valid_at,
            "recorded_at": self.now, "status": status, "superseded_by": superseded_by,
            "superseded_tx": self.seq if superseded_by else None,
            "active": True, "annotations": "{}", **provenance})
        self.entries(fid).append(row)
        self._observations_of[row["id"]] = []
        self.relate("HAS_ENTRY", ("Field", fid), ("Entry", row["id"]))
        self.touched.entries[row["id"]] = None
        return row

    def new_observation(self, eid: str, provenance: dict[str, Any], valid_at: datetime) -> dict:
        n = self.counters.next("observation")
        row = self.create("Observation", {
            "id": f"o{n}", "seq": n, "entry_id": eid, "valid_at": valid_at,
            "recorded_at": self.now, **provenance})
        entry = self.entry(eid)
        if provenance["polarity"] == "+" and valid_at > entry["asserted_at"]:
            # Re-stating a value is a statement at that moment: it outranks anything
            # claimed between its first statement and now (ordering key of the history).
            self.update("Entry", eid, asserted_at=valid_at)
        if eid in self._observations_of:
            self._observations_of[eid].append(row)
        else:
            self._observed.add(eid)
        self.new_observations.append(row)
        self.relate("CORROBORATES", ("Observation", row["id"]), ("Entry", eid))
        self.touched.entries[eid] = None
        return row

    def supersede(self, old: dict[str, Any], new: dict[str, Any]) -> None:
        self.link_successor(old, new, status="superseded")

    def link_successor(self, entry: dict[str, Any], successor: dict[str, Any], **props: Any) -> None:
        """Record which entry took `entry`'s place, and in which transition (by key)."""
        self.update("Entry", entry["id"], superseded_by=successor["id"], superseded_tx=self.seq,
                    **props)
        self.touched.entries[entry["id"]] = None

    def touch_topic(self, tid: str) -> None:
        self.touched.topics[tid] = None

    def touch_field(self, fid: str, tid: str) -> None:
        self.touched.fields[fid] = None
        self.touched.topics[tid] = None

    def mark_summary_dirty(self, tid: str) -> None:
        self.touched.index_dirty[tid] = None

    def reinforce(self, table: str, key: str, amount: float) -> None:
        row = self.row(table, key)
        if row is None:
            return
        self.update(table, key, strength=self.strength_now(row) + max(amount, 0.0),
                    last_access=self.now)

    def record_access(self, table: str, key: str) -> None:
        """Remember the salience a retrieved unit had before this transition (for C6)."""
        unit = (table, key)
        if unit not in self.touched.accessed:
            row = self.row(table, key)
            if row is not None:
                self.touched.accessed[unit] = self.strength_now(row)

    # ------------------------------------------------------------------ flush
    def flush(self) -> None:
        # Rows are grouped by which properties are null: an UNWIND column that is null in
        # every row has no type, and the engines refuse to store it into a typed column.
        for table, rows in self._creates.items():  # parents' tables come first
            groups: dict[tuple, list[dict[str, Any]]] = {}
            for row in rows.values():
                names = tuple(c for c in COLUMNS[table] if row[c] is not None)
                owner = self._owner.pop(row["id"], None)
                values = {c: row[c] for c in names}
                if owner is not None:
                    values["parent_id"] = owner[2]
                groups.setdefault((names, owner and owner[:2]), []).append(values)
            rows.clear()
            for (names, owner), batch in groups.items():
                node = f"(:{table} {{" + ", ".join(f"{c}: r.{c}" for c in names) + "})"
                if owner is None:
                    self._unwind(f"UNWIND $rows AS r CREATE {node}", batch)
                    continue
                rel, parent = owner
                edge = f"{node}-[:{rel}]->(p)" if rel in CHILD_FIRST else f"(p)-[:{rel}]->{node}"
                self._unwind(f"UNWIND $rows AS r MATCH (p:{parent} {{id: r.parent_id}}) "
                             f"CREATE {edge}", batch)
        for key, rows in self._rels.items():
            if not rows:
                continue
            rel, src, dst = key.split("|")
            props = [k for k in rows[0] if k not in ("a", "b")]
            self._unwind(f"UNWIND $rows AS r MATCH (a:{src} {{id: r.a}}), (b:{dst} {{id: r.b}}) "
                         f"CREATE (a)-[:{rel}" + (" {" + ", ".join(f"{p}: r.{p}" for p in props)
                                                    + "}" if props else "") + "]->(b)", rows)
            rows.clear()
        sets: dict[tuple[str, tuple[str, ...], tuple[str, ...]], list[dict[str, Any]]] = {}
        for (table, key), props in self._sets.items():
            values = tuple(sorted(p for p, v in props.items() if v is not None))
            nulls = tuple(sorted(p for p, v in props.items() if v is None))
            sets.setdefault((table, values, nulls), []).append(
                {"id": key, **{p: props[p] for p in values}})
        self._sets.clear()
        for (table, values, nulls), rows in sets.items():
            assignments = [f"n.{p} = r.{p}" for p in values] + [f"n.{p} = NULL" for p in nulls]
            self._unwind(f"UNWIND $rows AS r MATCH (n:{table} {{id: r.id}}) SET "
                         + ", ".join(assignments), rows)

    def _unwind(self, statement: str, rows: list[dict[str, Any]]) -> None:
        if len(rows) <= 16 and " MATCH " in statement:
            # A few rows that match by key go one statement each: UNWIND into a key match
            # scans the table (measured), a plain key match does not.
            single = statement.replace("UNWIND $rows AS r ", "").replace("r.", "$")
            for row in rows:
                self.tx.run(single, row)
            return
        for i in range(0, len(rows), BATCH):
            self.tx.run(statement, {"rows": rows[i:i + BATCH]})

    # ------------------------------------------------------------------ events
    def emit(self, name: str, **bindings: Any) -> None:
        bindings.setdefault("timestamp", self.now)
        self.events.append(Event(name, bindings, self._depth + 1 if self._current_event else 0))

    def run_policies(self) -> None:
        """Evaluate matching policies on the proposed state, FIFO, with a bounded cascade."""
        limit = int(self.settings["cascade_depth"])
        while self.events:
            event = self.events.popleft()
            policies = self.engine.policies_for(event.name)
            if policies and event.depth > limit:
                raise TransitionRejected(
                    "cascade", None,
                    f"policy cascade deeper than cascade_depth={limit} at event {event.name!r}")
            for policy in policies:
                self._current_event, self._depth = event, event.depth
                try:
                    policy.fire(event.bindings, self.engine.runtime(self))
                finally:
                    self._current_event, self._depth = None, 0

    @property
    def current_event(self) -> Event | None:
        return self._current_event

    def once(self, *key: Any) -> bool:
        """True the first time `key` is seen in this transition: actions are idempotent per unit."""
        if key in self._acted:
            return False
        self._acted.add(key)
        return True

    def record_fired(self, fired: Fired) -> None:
        self.fired.append(fired)


Operator = Callable[[Transition], Any]
