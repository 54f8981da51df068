"""Committed rows kept in memory: gem's buffer cache.

A key lookup costs ~0.1-0.5 ms in either engine and a 1-hop from a key ~0.4-2 ms, so a
transition that read its topics, fields and entries from the database every time would spend
most of its budget there. gem is the only writer of its database (another process gets
StoreLocked, and every handle in this process shares this cache), so a committed row stays
valid until gem itself commits a change to it.

The cache holds only committed state. A transition copies what it takes from here and writes
only its copies; rows it loads from the database are committed rows and go into the cache at
once (they are valid whatever the transition's fate). After COMMIT the transition's rows and
lists are absorbed; a rejected transition leaves the cache exactly as it was. Past `limit`
rows the older half is dropped (rows, child lists and edge lists in the order they were loaded
or last written) and refills on demand: a memory larger than the cache keeps its working set
instead of reloading everything after each commit.
"""
from __future__ import annotations

import itertools
from typing import Any, Callable, Iterable, Sequence

from ..store import GraphStore, queries
from ..store.schema import RELS, Row

NODE_TABLES = ("Topic", "Field", "Entry", "Observation", "Flag", "Episode")
CHILD_RELS = ("HAS_FIELD", "HAS_ENTRY", "CORROBORATES", "FLAGS")
Edge = tuple[str, str, str, Row]  # (table, source, target, properties)


def _as_stored(table: str, row: Row) -> Row:
    return row


class CommittedCache:
    """`patch(table, row)` brings a row read from the database up to date with what is not
    stored yet (salience written behind, gem/derived.py)."""

    def __init__(self, store: GraphStore, limit: int = 500_000,
                 patch: Callable[[str, Row], Row] = _as_stored) -> None:
        self.store = store
        self.limit = limit
        self.patch = patch
        self.clear()

    def clear(self) -> None:
        self.rows: dict[str, dict[str, Row | None]] = {t: {} for t in NODE_TABLES}
        # parent key -> child keys in creation order, per owning relationship
        self.children: dict[str, dict[str, list[str]]] = {r: {} for r in CHILD_RELS}
        self.edges: dict[str, list[Edge]] = {}  # topic -> every typed edge touching it

    # ------------------------------------------------------------------ reads
    def load_rows(self, table: str, keys: Iterable[str]) -> None:
        """Make sure these rows are cached (None for keys that do not exist)."""
        cached = self.rows[table]
        missing = [k for k in dict.fromkeys(keys) if k not in cached]
        if not missing:
            return
        with self.store.reading() as tx:
            found = queries.read_rows(tx, table, missing)
        for row in found:
            cached[row["id"]] = self.patch(table, row)
        for key in missing:
            cached.setdefault(key, None)

    def row(self, table: str, key: str) -> Row | None:
        if key not in self.rows[table]:
            self.load_rows(table, [key])
        return self.rows[table][key]

    def load_children(self, rel: str, parents: Iterable[str]) -> None:
        """Make sure these parents' child lists, and the rows of their children, are cached."""
        lists = self.children[rel]
        wanted = list(dict.fromkeys(parents))
        missing = [p for p in wanted if p not in lists]
        child_table = RELS[rel].child
        rows = self.rows[child_table]
        if missing:
            with self.store.reading() as tx:
                found = queries.read_children(tx, rel, missing)
            for key in missing:
                lists[key] = []
            for parent, row in found:
                rows.setdefault(row["id"], self.patch(child_table, row))
                lists[parent].append(row["id"])
        # Eviction drops the older half of each table on its own: a list cached before this call
        # can outlive the rows of its children (rows read by key long before their list was).
        fresh = set(missing)
        self.load_rows(child_table, [k for p in wanted if p not in fresh
                                     for k in lists[p] if k not in rows])

    def faded_history(self, fields: Iterable[str]) -> dict[str, list[str]]:
        """Each field's committed entries that are active but no longer current (keys, in
        recording order; their rows are cached). Not kept as a child list: it is not one."""
        keys = list(dict.fromkeys(fields))
        with self.store.reading() as tx:
            found = queries.read_faded_history(tx, keys)
        lists: dict[str, list[str]] = {fid: [] for fid in keys}
        rows = self.rows["Entry"]
        for fid, row in found:
            rows.setdefault(row["id"], self.patch("Entry", row))
            lists[fid].append(row["id"])
        return lists

    def child_keys(self, rel: str, parent: str) -> list[str]:
        if parent not in self.children[rel]:
            self.load_children(rel, [parent])
        return self.children[rel][parent]

    def load_edges(self, topics: Iterable[str]) -> None:
        missing = [t for t in dict.fromkeys(topics) if t not in self.edges]
        if not missing:
            return
        with self.store.reading() as tx:
            found = queries.read_edges(tx, missing)
        for tid in missing:
            self.edges[tid] = []
        for edge in found:
            _, a, b, _ = edge
            for end in {a, b}:
                if end in self.edges and edge not in self.edges[end]:
                    self.edges[end].append(edge)

    def edges_of(self, tid: str) -> list[Edge]:
        if tid not in self.edges:
            self.load_edges([tid])
        return self.edges[tid]

    # ------------------------------------------------------------------ after a commit
    def absorb(self, rows: dict[str, dict[str, Row]], children: dict[str, dict[str, list[str]]],
               edges: dict[str, list[Edge]]) -> None:
        """Take over a committed transition's rows, child lists and edge lists."""
        for table, changed in rows.items():
            _renew(self.rows[table], changed)
        for rel, lists in children.items():
            _renew(self.children[rel], lists)
        _renew(self.edges, edges)
        if sum(len(r) for r in self.rows.values()) > self.limit:
            self.evict()

    def evict(self) -> None:
        """Drop the older half of every table, child list and edge list."""
        tables: list[dict[str, Any]] = [*self.rows.values(), *self.children.values(), self.edges]
        for kept in tables:
            for key in list(itertools.islice(kept, (len(kept) + 1) // 2)):
                del kept[key]

    def forget(self, table: str, keys: Sequence[str]) -> None:
        for key in keys:
            self.rows[table].pop(key, None)

    def fingerprint(self) -> dict[str, Any]:
        return {"rows": {t: sorted((k, repr(r)) for k, r in rows.items())
                         for t, rows in self.rows.items()},
                "children": {r: sorted((k, tuple(v)) for k, v in lists.items())
                             for r, lists in self.children.items()},
                "edges": sorted((k, repr(sorted(map(repr, v)))) for k, v in self.edges.items())}

    def stats(self) -> dict[str, Any]:
        return {"rows": {t: len(r) for t, r in self.rows.items()}, "limit": self.limit}


def _renew(kept: dict[str, Any], changed: dict[str, Any]) -> None:
    """Write `changed` into `kept` as its newest entries (eviction drops the oldest)."""
    for key in changed:
        kept.pop(key, None)
    kept.update(changed)
