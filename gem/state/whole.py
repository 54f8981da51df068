"""Topics read whole into the row cache: one statement a topic instead of three.

A retrieval that reads a topic whose summary is out of date reads all of it (its row, its
fields, every field's history: the summary's refresh reads every current value), and a
free-text retrieval read it in three statements, one of them twice (the hits' histories in the
second stage, the rest for the summary). `load_whole` reads each such topic in one statement
(gem/store/queries/whole.py) and caches exactly what the three reads would have: rows already cached
stay as they are, lists go in in the same order. It trusts the statement only when the fields
it returned are the fields the derived state knows of the topic (a field without entries is
not returned by it); otherwise it leaves the topic to the usual reads.
"""
from __future__ import annotations

from typing import Callable, Iterable

from ..store.queries import whole
from .cache import CommittedCache, list_bytes, row_bytes
from .reads import TransitionReads


def load_whole(cache: CommittedCache, tids: Iterable[str],
               fields_of: Callable[[str], list[str]]) -> None:
    """Cache the rows, field lists and histories of these topics (those whose field list is
    not cached yet), a statement each."""
    lists = cache.children["HAS_FIELD"]
    wanted = [t for t in dict.fromkeys(tids) if t not in lists]
    if not wanted:
        return
    with cache.store.reading() as tx:
        if not whole.supported(tx, len(wanted)):
            return
        found = {tid: whole.read_topic_whole(tx, tid) for tid in wanted}
    rows, histories = cache.rows, cache.children["HAS_ENTRY"]
    for tid, got in found.items():
        if got is None:
            continue
        topic, fields, entries = got
        fids = [f["id"] for f in fields]
        if sorted(fids) != sorted(fields_of(tid)):
            continue
        for table, row in (("Topic", topic), *(("Field", f) for f in fields),
                           *(("Entry", e) for fid in fids for e in entries[fid])):
            if row["id"] not in rows[table]:
                rows[table][row["id"]] = cache.patch(table, row)
                cache.nbytes += row_bytes(row["id"], row)
        lists[tid] = fids
        cache.nbytes += list_bytes(tid, fids)
        for fid in fids:
            if fid not in histories:
                histories[fid] = [e["id"] for e in entries[fid]]
                cache.nbytes += list_bytes(fid, histories[fid])


def prefetch_stale(t: TransitionReads, tids: Iterable[str]) -> None:
    """Read whole, a statement each, the committed topics among `tids` whose summary is out
    of date: a retrieval that returns one reads all of it to refresh the summary."""
    load_whole(t.cache, [x for x in tids if x not in t.created["Topic"]
                         and t.committed.summary_stale(x)], t.committed.fields_of)
