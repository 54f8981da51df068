"""The read side of a transition: committed rows through the cache, overlaid by its own copies.

`TransitionReads` holds a transition's state (its copies of rows, lists and edges, and the
writes it has made) and answers every read the operators, policies and conditions make on the
proposed state; `Transition` (transition.py) adds the writes.
"""
from __future__ import annotations

from collections import deque
from dataclasses import dataclass
from datetime import datetime, timedelta
from itertools import compress, filterfalse
from typing import Any, Callable, Iterable, Sequence

from .. import history
from ..salience import decayed_strength, field_half_life, salience_of
from ..store.schema import Row
from .cache import CHILD_RELS, NODE_TABLES, CommittedCache, Edge
from .events import Event, Fired
from .committed import Committed, Counters, Services, Touched


class TransitionReads:
    """The proposed state, read: committed rows (through the cache) plus this transition's copies."""

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
        self.operator: Callable[[Any], Any] = lambda t: None  # given the Transition itself
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
        self._faded: dict[str, Sequence[str]] = {}  # field -> committed faded entries (faded_history)
        self._entries_changed: set[str] = set()  # fields whose entries this transition updated
        self._judged_changed: set[str] = set()   # ... in a column the history rules read
        # this transition's copies of rows, lists and edges (what it read or wrote)
        self.rows: dict[str, dict[str, Row | None]] = {t: {} for t in NODE_TABLES}
        self.children: dict[str, dict[str, list[str]]] = {r: {} for r in CHILD_RELS}
        self.edges: dict[str, list[Edge]] = {}
        # its writes, for the flush
        self.created: dict[str, dict[str, Row]] = {t: {} for t in NODE_TABLES}
        self.updated: dict[str, dict[str, Row]] = {t: {} for t in NODE_TABLES}
        # units whose status alone moved down the ladder, in bulk, without reading their rows
        # (key -> status; not in `updated`): a row read later is the committed one with it,
        # and an update of its own
        self.moved: dict[str, dict[str, str]] = {t: {} for t in NODE_TABLES}
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
        status = self.moved[table].pop(key, None)
        if status is not None and own[key] is not None:
            own[key]["status"] = status  # type: ignore[index]
            self.updated[table][key] = {"status": status}  # its own now (`move_statuses`)
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
        if self._whole_history_known(fid):
            return [e for e in self.entries(fid) if e["active"] and e["status"] != "current"]
        if fid not in self._faded:  # its group holds it, and nothing of the group was read yet
            self._faded.update(self.cache.faded_history(
                [k for k in self._group("HAS_ENTRY", fid)
                 if k not in self._faded and not self._whole_history_known(k)]))
        return [self.row("Entry", k) for k in self._faded[fid]]  # type: ignore[misc]

    def _whole_history_known(self, fid: str) -> bool:
        return self.history_touched(fid) or fid in self.cache.children["HAS_ENTRY"]

    def with_faded_history(self, fids: Sequence[str]) -> set[str]:
        """Which of these fields have a faded history (`faded_history` is not empty), read for
        all of them in one statement."""
        whole = self.children["HAS_ENTRY"].keys() | self._entries_changed | \
            self.cache.children["HAS_ENTRY"].keys()  # as `_whole_history_known`
        faded = self._faded
        rest = list(filterfalse(whole.__contains__, fids))  # (C-level: a pass asks for 1M)
        unread = list(filterfalse(faded.__contains__, rest)) if faded else rest
        if unread:
            faded.update(self.cache.faded_history(unread))
        found = set(compress(rest, map(faded.__getitem__, rest)))
        if len(rest) != len(fids):
            found.update(k for k in fids if k in whole and self.faded_history(k))
        return found

    def history_touched(self, fid: str) -> bool:
        """Whether this transition read the field's whole history, or changed any entry of
        it (created, updated, moved and deleted entries all pass through one or the other)."""
        return fid in self.children["HAS_ENTRY"] or fid in self._entries_changed

    def histories_judged(self, fids: Iterable[str]) -> list[str]:
        """The fields of `fids` whose history `history_judged` holds for, in their order (one
        C-level filter: a forgetting pass touches 1M fields, few of them judged)."""
        judged = self.children["HAS_ENTRY"].keys() | self._judged_changed
        return list(filter(judged.__contains__, fids))

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
        # (units moved in bulk, their rows not read, are not here: `_moved_in`, `_moved_topics`)
        changed = {k: self.rows[table][k] for k in self.updated[table]}
        changed.update((k, self.rows[table][k]) for k, kind in self.salience.items() if kind == table)
        changed.update(self.created[table])
        return {k: r for k, r in changed.items() if r is not None}

    def _topic_status(self, tid: str) -> str | None:
        row = self.rows["Topic"].get(tid)
        if row is not None:
            return row["status"]
        return self.moved["Topic"].get(tid) or self.committed.topic_status(tid)

    def _moved_topics(self) -> dict[str, str]:
        """Topics whose status this transition changed, with their status now."""
        out = {tid: s for tid, s in self.moved["Topic"].items()
               if s != self.committed.topic_status(tid)}
        out.update((tid, row["status"]) for tid, row in self._changed_rows("Topic").items()
                   if row["status"] != self.committed.topic_status(tid))
        return out

    def _committed_status(self, table: str, key: str) -> str | None:
        if table == "Topic":
            return self.committed.topic_status(key)
        if table == "Field":
            return self.committed.field_status(key)
        return self.committed.unit_status(key)[0]

    def _moved_in(self, table: str, found: set[str], statuses: frozenset[str],
                  keep: Callable[[Row], bool]) -> None:
        """Bring `found` (selected as committed) up to date with the units moved in bulk:
        salience and everything else but the status is as committed, so a selected unit stays
        while its status is in `statuses`; one the committed state did not select is judged on
        its row (`keep`), read, unless its status then was one of `statuses` too (it was left
        out for its salience or its topic's status, which a move of its own does not change)."""
        moved = self.moved[table]
        for status in set(moved.values()):  # by status, in C (a pass's rung moved 1M)
            keys = list(compress(moved, map(status.__eq__, moved.values())))
            if status not in statuses:
                found.difference_update(keys)
                continue
            for key in list(filterfalse(found.__contains__, keys)):
                if self._committed_status(table, key) not in statuses:
                    row = self.row(table, key)  # (takes the key out of `moved`)
                    if row is not None and keep(row):
                        found.add(key)

    def field_ids_where(self, statuses: frozenset[str], below: float | None = None) -> list[str]:
        """Fields of active topics whose status is in `statuses` (and, with `below`, whose
        salience now is under it), in the proposed state, ordered by id."""
        selected = self.committed.field_ids_where(statuses, below, self.now, self.half_life,
                                                  self.label_half_life)  # in id order
        found = set(selected)
        # Membership may differ in the proposed state for the fields this transition changed
        # and for every field of a topic whose status it changed.
        moved: dict[str, Row] = {}
        for tid in self._moved_topics():
            fids = self.committed.fields_of(tid)
            self.prefetch("Field", fids)
            moved.update((fid, self.field_row(fid)) for fid in fids)  # type: ignore[misc]

        def keep(row: Row) -> bool:
            return row["status"] in statuses and self._topic_status(row["topic_id"]) == "active" \
                and (below is None or self.salience_now(row) < below)
        self._moved_in("Field", found, statuses, keep)
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
            if fid not in found and fid not in moved and fid not in created and \
                    fid not in salience and "labels" not in updated.get(fid, ()) and \
                    self.committed.field_status(fid) in statuses:
                continue  # left out for its salience or its topic's status: neither changed
            found.discard(fid)
            if keep(row):
                found.add(fid)
        # In id order: the committed selection's, and the few the proposed state adds merged
        # in (a pass walks 1M fields twice; sorting them cost ~2 s a time at 100k topics).
        ordered = list(filter(found.__contains__, selected))
        if len(ordered) != len(found):
            ordered += found.difference(ordered)
            ordered.sort()
        return ordered

    def topic_ids_where(self, statuses: frozenset[str], below: float | None = None) -> list[str]:
        changed = self._changed_rows("Topic")
        found = set(self.committed.topic_ids_where(statuses, below, self.now, self.half_life))
        def keep(row: Row) -> bool:
            return row["status"] in statuses and (below is None or self.salience_now(row) < below)
        self._moved_in("Topic", found, statuses, keep)
        for tid, row in changed.items():
            found.discard(tid)
            if keep(row):
                found.add(tid)
        return sorted(found, key=topic_order)

    def active_field_count(self) -> int:
        """Active fields of active topics in the proposed state (the footprint C5 bounds)."""
        count = self.committed.active_field_count()
        fields = self._changed_rows("Field")

        def committed_active(fid: str, tid: str) -> bool:
            return self.committed.field_status(fid) == "active" and \
                self.committed.topic_status(tid) == "active"

        moved = self.moved["Field"]
        statuses = {fid: row["status"] for fid, row in fields.items()}
        statuses.update(moved)
        for fid, status in statuses.items():
            tid = fid.split("/", 1)[0]
            now_active = status == "active" and self._topic_status(tid) == "active"
            count += int(now_active) - int(committed_active(fid, tid))
        for tid, status in self._moved_topics().items():
            for fid in self.committed.fields_of(tid):
                if fid in statuses:
                    continue
                now_active = self.committed.field_status(fid) == "active" and status == "active"
                count += int(now_active) - int(committed_active(fid, tid))
        return count

    def episode_ids_where(self, statuses: frozenset[str], below: float | None = None) -> list[str]:
        """Episodes whose status is in `statuses` (and, with `below`, whose salience now is
        under it), in the proposed state, in creation order."""
        found = set(self.committed.episode_ids_where(statuses, below, self.now, self.half_life))

        def keep(row: Row) -> bool:
            return row["status"] in statuses and (below is None or self.salience_now(row) < below)
        self._moved_in("Episode", found, statuses, keep)
        for key, row in self._changed_rows("Episode").items():
            found.discard(key)
            if keep(row):
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
