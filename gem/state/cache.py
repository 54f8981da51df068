"""Committed rows kept in memory: gem's buffer cache.

A key lookup costs ~0.1-0.5 ms in either engine and a 1-hop from a key ~0.4-2 ms, so a
transition that read its topics, fields and entries from the database every time would spend
most of its budget there. gem is the only writer of its database (another process gets
StoreLocked, and every handle in this process shares this cache), so a committed row stays
valid until gem itself commits a change to it.

The cache holds only committed state. A transition copies what it takes from here and writes
only its copies; rows it loads from the database are committed rows and go into the cache at
once (they are valid whatever the transition's fate). After COMMIT the transition's rows and
lists are absorbed; a rejected transition leaves the cache exactly as it was. Past `budget`
bytes the older half is dropped (rows, child lists and edge lists in the order they were loaded
or last written) and refills on demand: a memory larger than the cache keeps its working set
instead of reloading everything after each commit. The budget is in bytes, not rows: a row is
a dict of ~20 Python objects, ~1.3 KB, so 500k rows (the bound this cache had) held ~0.7 GB,
most of the RSS of a 10k-topic memory whose database pages are a fifth of that.
"""
from __future__ import annotations

import itertools
import sys
from typing import Any, Callable, Iterable, Sequence

from ..store import GraphStore, queries
from ..store.schema import RELS, Row

NODE_TABLES = ("Topic", "Field", "Entry", "Observation", "Flag", "Episode")
CHILD_RELS = ("HAS_FIELD", "HAS_ENTRY", "CORROBORATES", "FLAGS")
Edge = tuple[str, str, str, Row]  # (table, source, target, properties)


# What the cache holds at most after a commit. Measured at 10k topics (100k fields, side by
# side, one run each on a loaded 2-core VM): free-text retrieval p50 / p95 136 / 316 ms with the
# old 500k-row bound (~180 MB of rows, all of them), 67 / 269 ms with 160 MiB, 226 / 572 ms with
# 64 MiB (its hits' topics were read from the engine again). A memory of any size stays within it.
# The count is conservative: a value shared by many rows (a status, a time, None) is counted in
# each, so at 10k topics the 141 MB counted held 97 MB of objects, the largest part of the RSS
# gem's own state holds. bench/footprint.py at 10k topics, side by side in one run (loaded 2-core
# VM), 160 / 64 / 32 MiB: RSS after a trim 566 / 511 / 495 MB (untrimmed 641 / 596 / 598),
# free-text p50 55 / 48 / 59 ms, p95 106 / 85 / 92 ms, structured p50 42 / 38 / 32 ms: the
# engine's reads of the rows a smaller cache lost cost less than the noise. Below 64 MiB the
# untrimmed RSS no longer falls.
DEFAULT_BUDGET = 64 << 20


def _as_stored(table: str, row: Row) -> Row:
    return row


def row_bytes(key: str, row: Row | None) -> int:
    """What a cached row costs: its key, its dict and the values in it (a list value's items,
    aliases and labels, are short strings and left out)."""
    if row is None:
        return sys.getsizeof(key)
    return sys.getsizeof(key) + sys.getsizeof(row) + sum(map(sys.getsizeof, row.values()))


def list_bytes(key: str, items: list[Any]) -> int:
    """What a cached child or edge list costs: its key and its list (the child ids are the
    keys of their rows; an edge's tuple is counted with the list)."""
    return sys.getsizeof(key) + sys.getsizeof(items) + 120 * len(items) * (
        1 if not items or isinstance(items[0], str) else 2)


class CommittedCache:
    """`patch(table, row)` brings a row read from the database up to date with what is not
    stored yet (salience written behind, gem/derived/)."""

    def __init__(self, store: GraphStore, budget: int = DEFAULT_BUDGET,
                 patch: Callable[[str, Row], Row] = _as_stored) -> None:
        self.store = store
        self.budget = budget
        self.patch = patch
        self.clear()

    def clear(self) -> None:
        # What everything cached costs (row_bytes, list_bytes), kept as entries come and go.
        self.nbytes = 0
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
            if key not in cached:
                cached[key] = None
            self.nbytes += row_bytes(key, cached[key])

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
                if row["id"] not in rows:
                    rows[row["id"]] = self.patch(child_table, row)
                    self.nbytes += row_bytes(row["id"], row)
                lists[parent].append(row["id"])
            self.nbytes += sum(list_bytes(key, lists[key]) for key in missing)
        # Eviction drops the older half of each table on its own: a list cached before this call
        # can outlive the rows of its children (rows read by key long before their list was).
        fresh = set(missing)
        self.load_rows(child_table, [k for p in wanted if p not in fresh
                                     for k in lists[p] if k not in rows])

    def faded_history(self, fields: Iterable[str]) -> dict[str, Sequence[str]]:
        """Each field's committed entries that are active but no longer current (keys, in
        recording order; their rows are cached). Not kept as a child list: it is not one.
        The fields without any (most: a pass at 100k topics asks for 1M, ~12k hold some)
        share one empty tuple."""
        lists: dict[str, Sequence[str]] = dict.fromkeys(fields, ())
        with self.store.reading() as tx:
            found = queries.read_faded_history(tx, list(lists))
        held: dict[str, list[str]] = {}
        rows = self.rows["Entry"]
        for fid, row in found:
            if row["id"] not in rows:
                rows[row["id"]] = self.patch("Entry", row)
                self.nbytes += row_bytes(row["id"], row)
            held.setdefault(fid, []).append(row["id"])
        lists.update(held)
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
        self.nbytes += sum(list_bytes(tid, self.edges[tid]) for tid in missing)

    def edges_of(self, tid: str) -> list[Edge]:
        if tid not in self.edges:
            self.load_edges([tid])
        return self.edges[tid]

    # ------------------------------------------------------------------ after a commit
    def absorb(self, rows: dict[str, dict[str, Row]], children: dict[str, dict[str, list[str]]],
               edges: dict[str, list[Edge]], moved: dict[str, dict[str, str]] | None = None) -> None:
        """Take over a committed transition's rows, child lists and edge lists, and the new
        status of rows it moved without reading them (`moved`: table -> key -> status)."""
        for table, statuses in (moved or {}).items():
            cached = self.rows[table]
            for key in cached.keys() & statuses.keys():  # most moved rows were never read
                row, status = cached[key], statuses[key]
                if row is not None:
                    self.nbytes += sys.getsizeof(status) - sys.getsizeof(row["status"])
                    row["status"] = status
        for table, changed in rows.items():
            self.nbytes += _renew(self.rows[table], changed, row_bytes, _row_change)
        for rel, lists in children.items():
            self.nbytes += _renew(self.children[rel], lists, list_bytes)
        self.nbytes += _renew(self.edges, edges, list_bytes)
        while self.nbytes > self.budget and self.evict():
            pass

    def evict(self) -> bool:
        """Drop the older half of every table, child list and edge list (False: nothing left)."""
        dropped = False
        tables: list[tuple[dict[str, Any], Callable[[str, Any], int]]] = [
            *((rows, row_bytes) for rows in self.rows.values()),
            *((lists, list_bytes) for lists in self.children.values()), (self.edges, list_bytes)]
        for kept, cost in tables:
            for key in list(itertools.islice(kept, (len(kept) + 1) // 2)):
                self.nbytes -= cost(key, kept.pop(key))
                dropped = True
        return dropped

    def forget(self, table: str, keys: Sequence[str]) -> None:
        for key in keys:
            if key in self.rows[table]:
                self.nbytes -= row_bytes(key, self.rows[table].pop(key))

    def measured(self) -> int:
        """What everything cached costs, counted again from scratch (what `nbytes` keeps)."""
        lists: list[dict[str, list[Any]]] = [*self.children.values(), self.edges]
        return (sum(row_bytes(k, r) for rows in self.rows.values() for k, r in rows.items())
                + sum(list_bytes(k, v) for kept in lists for k, v in kept.items()))

    def fingerprint(self) -> dict[str, Any]:
        return {"rows": {t: sorted((k, repr(r)) for k, r in rows.items())
                         for t, rows in self.rows.items()},
                "children": {r: sorted((k, tuple(v)) for k, v in lists.items())
                             for r, lists in self.children.items()},
                "edges": sorted((k, repr(sorted(map(repr, v)))) for k, v in self.edges.items())}

    def stats(self) -> dict[str, Any]:
        return {"rows": {t: len(r) for t, r in self.rows.items()}, "bytes": self.nbytes,
                "budget": self.budget}


def _renew(kept: dict[str, Any], changed: dict[str, Any], cost: Callable[[str, Any], int],
           change: Callable[[Any, Any], int | None] = lambda old, new: None) -> int:
    """Write `changed` into `kept` as its newest entries (eviction drops the oldest); returns
    the change in bytes (`change(old, new)`: the difference of their costs, when it can tell
    it cheaper than costing both)."""
    delta = 0
    for key, value in changed.items():
        if key in kept:
            old = kept.pop(key)
            diff = change(old, value)
            delta += cost(key, value) - cost(key, old) if diff is None else diff
        else:
            delta += cost(key, value)
    kept.update(changed)
    return delta


def _row_change(old: Row | None, new: Row | None) -> int | None:
    """row_bytes(new) - row_bytes(old) for a transition's copy of a cached row: only the values
    it replaced differ (a forgetting pass renews 100k+ rows, each changed in a column or two)."""
    if old is None or new is None or len(old) != len(new):
        return None
    size, diff = sys.getsizeof, sys.getsizeof(new) - sys.getsizeof(old)
    for column, value in new.items():
        was = old.get(column, _ABSENT)
        if value is not was:
            if was is _ABSENT:
                return None
            diff += size(value) - size(was)
    return diff


_ABSENT = object()
