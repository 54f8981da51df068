"""Committed rows kept in memory between transitions: gem's buffer cache.

Kuzu answers a key lookup in ~0.1-0.5 ms and a 1-hop from a key in ~0.4-2 ms, so a
retrieval that read its topics, fields and entries from the database every time would
spend most of its budget there. gem is the only writer of its database (another
process gets StoreLocked, other handles in this process are detected by the store's
commit count), so rows a committed transition read or wrote stay valid until gem
itself changes them. A transition copies what it takes from here (its writes never
touch committed rows), and only after COMMIT does it hand its rows back. A rollback
simply drops them. Past `limit` rows the cache is emptied and refills on demand.
"""
from __future__ import annotations

from typing import Any

TABLES = ("Topic", "Field", "Entry", "Observation")


class StateCache:
    def __init__(self, limit: int = 1_000_000) -> None:
        self.limit = limit
        self.clear()

    def clear(self) -> None:
        self.rows: dict[str, dict[str, dict[str, Any] | None]] = {t: {} for t in TABLES}
        self.entries_of: dict[str, list[str]] = {}       # field -> entry ids
        self.fields_of: dict[str, list[str]] = {}        # topic -> field ids
        self.observations_of: dict[str, list[str]] = {}  # entry -> observation ids
        self.dependents: dict[str, list[str]] = {}       # topic -> EXTENDS targets

    def absorb(self, t: Any) -> None:
        """Take over a committed transition's rows and lists."""
        if t.edges_reset:
            self.dependents.clear()
        for tid in t.dependents_dropped:
            self.dependents.pop(tid, None)
        for table in TABLES:
            self.rows[table].update(t._rows[table])
        for fid, rows in t._entries_of.items():
            self.entries_of[fid] = [e["id"] for e in rows]
        for tid, ids in t._fields_of.items():
            self.fields_of[tid] = list(ids)
        for tid in t._fields_pending:
            if tid not in t._fields_of:
                self.fields_of.pop(tid, None)
        for eid, rows in t._observations_of.items():
            self.observations_of[eid] = [o["id"] for o in rows]
        for eid in t._observed:
            if eid not in t._observations_of:
                self.observations_of.pop(eid, None)
        for tid, ids in t._dependents.items():
            self.dependents[tid] = list(ids)
        if sum(len(r) for r in self.rows.values()) > self.limit:
            self.clear()
