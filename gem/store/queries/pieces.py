"""Whole-table reads in pieces the buffer pool holds.

An embedded engine (kuzu, LadybugDB) holds a query's whole result, and its sort, in its buffer
pool before the first row comes back, so one statement that reads a whole table needs a pool as
large as the table and fails with "the buffer pool is full" past it (the full audit's sorted
read of the log and its histories did, at 1k topics, in a 40 MiB pool). These reads ask for one
range of a key at a time, in the one read transaction of their caller: node offsets for a
table's rows (`offset(id(n))`, in stored order), sequence numbers for the log (in log order).
A range filter does not spare the engine the scan (kuzu 0.11.3 and LadybugDB read every
returned column of every row, then filter: ~0.2-0.4 s per piece at 400k-1M rows), so pieces
are as large as the pool allows: a sixteenth of it each (an Arrow piece's rows weighed by
their bytes: `VALUE_BYTES`). FalkorDB has no buffer pool (and no
`offset`): it reads in one statement.
"""
from __future__ import annotations

from typing import Any, Iterator, Sequence

from ..graph import Tx
from .forms import _falkor

# What a piece may take of the pool, and the pool assumed when the engine's own default
# (most of the RAM) sizes it. A returned row of a wide table (an entry) takes up to ~1 KB of
# the pool; a log record holds the hashes of every row its transition wrote, from ~1 KB (one
# fact) to MBs (a batch), so log pieces are cut by the records' sizes (asked first, for a
# window of records at a time), and its text is counted twice (the sort copies it).
POOL_SHARE = 16
UNSIZED_POOL = 1 << 30
ROW_BYTES = 1024
# What the pool holds of a returned value beyond its text: an Arrow piece's own bytes are its
# texts, and the engine keeps a fixed slot per value besides (strings and lists 16 bytes, held
# twice while the piece is converted). An entry of 24 columns (~220 bytes of Arrow) comes to
# ~1 KB; a field of 11 (~90) to ~440, so a field's piece can hold twice as many rows: each piece
# is one more scan of the whole table (the range filters after reading), and a full audit at 1M
# fields read them in 16.
VALUE_BYTES = 32


def piece_bytes_of(pool: int | None) -> int:
    return (pool or UNSIZED_POOL) // POOL_SHARE


def piece_bytes(tx: Tx) -> int:
    return piece_bytes_of(tx.pool)


def _spans(tx: Tx, table: str) -> Iterator[tuple[int, int]]:
    """Ranges [lo, hi) of node offsets of `table`, each as large as the rows the one before
    brought allow (the caller sends how many it brought, or their bytes as rows of ROW_BYTES):
    a range's span adapts to the rows (a history's entries come with its field), at most
    doubling from one to the next."""
    top = tx.scalar(f"MATCH (n:{table}) RETURN max(offset(id(n)))")
    if top is None:
        return
    budget = max(1, piece_bytes(tx) // ROW_BYTES)
    low, span = 0, budget
    while low <= top:
        rows = yield low, low + span
        low += span
        span = max(1, min(2 * span, span * budget // rows if rows else 2 * span))


def _ranged(query: str, var: str) -> str:
    return query.replace("{WHERE}", f"WHERE offset(id({var})) >= $lo AND offset(id({var})) < $hi")


def table_pieces(tx: Tx, table: str, query: str, var: str, params: dict[str, Any] | None = None,
                 times: Sequence[int] | None = None) -> Iterator[list[Any]]:
    """The rows of `query` (MATCH ... {WHERE} RETURN ...: `{WHERE}` is where the range goes),
    a range of offsets of node `var` of `table` at a time."""
    params = dict(params or {})
    if _falkor(tx):
        yield from tx.stream(query.replace("{WHERE}", ""), params, times)
        return
    text, spans = _ranged(query, var), _spans(tx, table)
    span = next(spans, None)
    while span is not None:
        rows = 0
        for row in tx.stream(text, {**params, "lo": span[0], "hi": span[1]}, times):
            rows += 1
            yield row
        span = _next(spans, rows)


def table_batches(tx: Tx, table: str, query: str, var: str) -> Iterator[Any]:
    """`table_pieces` on kuzu and LadybugDB, each piece one Arrow table converted by the
    engine in bulk (FalkorDB has no Arrow reads: gem/store/queries/batches.py reads its rows)."""
    text, spans = _ranged(query, var), _spans(tx, table)
    span = next(spans, None)
    while span is not None:
        batch = tx.arrow(text, {"lo": span[0], "hi": span[1]})
        yield batch
        span = _next(spans, _weight(batch))


def _weight(batch: Any) -> int:
    """A piece's rows counted as rows of ROW_BYTES each in the pool: what the next span's
    size is judged by."""
    held = batch.nbytes + VALUE_BYTES * batch.num_columns * batch.num_rows
    return -(-held // ROW_BYTES)


def _next(spans: Any, rows: int) -> tuple[int, int] | None:
    try:
        return spans.send(rows)  # type: ignore[no-any-return]
    except StopIteration:
        return None


def seq_pieces(tx: Tx, table: str, returns: str, times: Sequence[int] | None = None
               ) -> Iterator[list[Any]]:
    """`RETURN {returns}` of every row (`n`) of `table` in order of its `seq` (unique within
    its `scope`: rows of several scopes with one number come in any order), a range of numbers
    at a time (a sort of the whole table needs a pool as large as it)."""
    text = f"MATCH (n:{table}) WHERE n.seq >= $lo AND n.seq < $hi RETURN {returns} ORDER BY n.seq"
    if _falkor(tx):
        yield from tx.stream(f"MATCH (n:{table}) RETURN {returns} ORDER BY n.seq", None, times)
        return
    row = tx.one(f"MATCH (n:{table}) RETURN min(n.seq), max(n.seq), count(DISTINCT n.scope)")
    if row is None or row[0] is None:
        return
    low, high = int(row[0]), int(row[1])
    span = max(1, piece_bytes(tx) // ROW_BYTES // max(1, int(row[2])))  # a row per scope a number
    while low <= high:
        yield from tx.stream(text, {"lo": low, "hi": low + span}, times)
        low += span


def log_pieces(tx: Tx, returns: str, where: str = "", params: dict[str, Any] | None = None,
               weigh: Sequence[str] = (), times: Sequence[int] | None = None
               ) -> Iterator[list[Any]]:
    """`RETURN {returns}` of the log records (`x`) that pass `where`, in log order, in pieces
    whose `weigh` columns' text takes half a piece of the pool."""
    params = dict(params or {})
    cond = f" AND ({where})" if where else ""
    text = (f"MATCH (x:Transition) WHERE x.seq >= $lo AND x.seq < $hi{cond} "
            f"RETURN {returns} ORDER BY x.seq")
    if _falkor(tx):
        yield from tx.stream(text.replace("x.seq >= $lo AND x.seq < $hi", "true"), params, times)
        return
    row = tx.one("MATCH (x:Transition) RETURN min(x.seq), max(x.seq)")
    if row is None or row[0] is None:
        return
    low, high = int(row[0]), int(row[1])
    size = " + ".join(f"size(x.{c})" for c in weigh) or "0"
    sizes = f"MATCH (x:Transition) WHERE x.seq >= $lo AND x.seq < $hi{cond} RETURN x.seq, {size}"
    budget = piece_bytes(tx) // 2
    window = max(1, piece_bytes(tx) // 64)  # (seq, size) rows of ~64 bytes in the pool
    while low <= high:
        end = min(high + 1, low + window)
        start, held = low, 0
        for seq, n in sorted(tx.run(sizes, {**params, "lo": low, "hi": end})):
            if held and held + (n or 0) > budget:
                yield from tx.stream(text, {**params, "lo": start, "hi": seq}, times)
                start, held = seq, 0
            held += n or 0
        yield from tx.stream(text, {**params, "lo": start, "hi": end}, times)
        low = end
