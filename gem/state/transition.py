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

from datetime import datetime
from itertools import filterfalse
from typing import Any, Sequence

from .. import history
from ..store.schema import TABLES, Row
from ..units import field_id
from .committed import INDEXED, OWNER_REL, SALIENCE, SALIENT
from .events import Event, Fired
from .reads import TransitionReads

# The child lists a created or deleted row of each table owns.
LISTS_OF = {"Topic": ("HAS_FIELD", "FLAGS"), "Field": ("HAS_ENTRY",), "Entry": ("CORROBORATES",)}


class Transition(TransitionReads):
    """The proposed state: committed rows (through the cache) plus this transition's copies."""

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

    def move_statuses(self, table: str, keys: Sequence[str], status: str) -> None:
        """Ladder moves that change these units' status alone, made without reading their rows
        (a forgetting pass moves 100k+): written by key, and a row, should anything read it
        later in this transition, is the committed one with this status (`row`). They are in
        `moved` alone, not in `updated`: what walks the updates (the flush, the record, the
        proposed state's changed rows) walks the few rows changed otherwise, not 1M moves."""
        rows = self.rows[table]  # a created row is in `rows`
        if not rows.keys().isdisjoint(keys):  # rows read: `update` them (one call per move)
            for key in list(filter(rows.__contains__, keys)):
                self.update(table, key, status=status)
            keys = list(filterfalse(rows.__contains__, keys))
        moved = self.moved[table]
        if moved:
            moved.update(dict.fromkeys(keys, status))
        else:  # (the first rung of a pass: no second dict to merge)
            self.moved[table] = dict.fromkeys(keys, status)
        if table == "Topic":  # as `update` of a column no document or summary is made of
            self.touched.topics.update(dict.fromkeys(keys))

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

