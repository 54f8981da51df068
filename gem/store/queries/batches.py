"""Whole-table reads as Arrow tables: the full audit's reads (1.1M entries and 1M fields at
100k topics).

Read row by row (`Tx.stream`), the engine hands each value to Python on its own: ~8 us a row
of 25 columns, more than everything the audit then does with the row. Read as Arrow, the
engine converts a piece of the table in bulk (~1.3 us a row), and the caller takes from it only
the Python values it needs (gem/rowhash.py hashes the columns as they are). The pieces are
gem/store/queries/pieces.py's. FalkorDB has no Arrow reads: its rows, typed back as every
read types them, are made into one table.

In a batch, timestamps are naive UTC, as kuzu and LadybugDB store them; `batch_rows` gives the
rows as the other reads do (aware UTC).
"""
from __future__ import annotations

from datetime import datetime, timezone
from typing import Any, Iterator, Sequence, get_origin, get_type_hints

import pyarrow as pa
import pyarrow.compute as pc

from ..graph import Tx
from ..schema import TABLES, Row, _base_type
from .forms import _TIMES, _falkor, _rows
from .pieces import table_batches
from .reads import _returns

_TYPES = {str: pa.string(), int: pa.int64(), float: pa.float64(), bool: pa.bool_(),
          datetime: pa.timestamp("us")}
HOLDER = "holder"  # a history batch's column of the field that holds the entry


def _schema(table: str, cols: Sequence[str], extra: Sequence[str] = ()) -> pa.Schema:
    hints = get_type_hints(TABLES[table].row)

    def kind(column: str) -> pa.DataType:
        base = _base_type(hints[column])
        return pa.list_(pa.string()) if get_origin(base) is list else _TYPES[base]
    return pa.schema([(c, pa.string()) for c in extra] + [(c, kind(c)) for c in cols])


def _from_rows(tx: Tx, table: str, cols: Sequence[str], found: list[list[Any]],
               extra: Sequence[str] = ()) -> pa.Table:
    """An Arrow table of rows read one by one (FalkorDB), typed back, times as naive UTC."""
    rows = _rows(tx, table, cols, (values[len(extra):] for values in found))
    times = [c for c in cols if c in _TIMES[table]]
    for values, row in zip(found, rows):
        for c in times:
            if row[c] is not None:
                row[c] = row[c].astimezone(timezone.utc).replace(tzinfo=None)
        row.update(zip(extra, values[:len(extra)]))
    return pa.Table.from_pylist(rows, schema=_schema(table, cols, extra))


def row_batches(tx: Tx, table: str) -> Iterator[pa.Table]:
    """Every row of a table, in stored order, as Arrow tables of a bounded piece each, with
    the schema's columns (gem/store/schema.py) under their names."""
    cols = TABLES[table].columns
    query = f"MATCH (n:{table}) {{WHERE}} RETURN {_returns('n', cols)}"
    if _falkor(tx):
        yield _from_rows(tx, table, cols, tx.run(query.replace("{WHERE}", "")))
        return
    for batch in table_batches(tx, table, query, "n"):
        yield batch.rename_columns(list(cols))


def history_batches(tx: Tx) -> Iterator[pa.Table]:
    """Every field's history, as Arrow tables of whole histories: column `holder` (the field
    that holds the entry) and the entry's columns, sorted by holder and then by `seq`
    (recording order)."""
    cols = TABLES["Entry"].columns
    query = f"MATCH (f:Field)-[:HAS_ENTRY]->(e:Entry) {{WHERE}} RETURN f.id, {_returns('e', cols)}"
    order = [(HOLDER, "ascending"), ("seq", "ascending")]
    if _falkor(tx):
        found = tx.run(query.replace("{WHERE}", ""))
        yield _from_rows(tx, "Entry", cols, found, (HOLDER,)).sort_by(order)
        return
    # sorted here, not by the engine: its sort of a piece cost as much as reading it
    for batch in table_batches(tx, "Field", query, "f"):
        yield batch.rename_columns([HOLDER, *cols]).sort_by(order)


def batch_rows(batch: pa.Table, columns: Sequence[str] | None = None) -> list[Row]:
    """The rows of a batch (of its `columns` only, if given) as the row reads give them:
    times aware UTC, each distinct time one object (see gem/store/graph.py `_rows`)."""
    cols = list(columns or batch.column_names)
    return [dict(zip(cols, values)) for values in zip(*(column_values(batch, c) for c in cols))]


def column_values(batch: pa.Table, column: str) -> list[Any]:
    """One column's values in Python (times aware UTC, each distinct one made once)."""
    values = batch.column(column)
    if not pa.types.is_timestamp(values.type):
        return values.to_pylist()  # type: ignore[no-any-return]
    coded = pc.dictionary_encode(values.cast(pa.timestamp("us")).combine_chunks())
    utc = timezone.utc
    made = [None if t is None else t.replace(tzinfo=utc) for t in coded.dictionary.to_pylist()]
    return [None if i is None else made[i] for i in coded.indices.to_pylist()]
