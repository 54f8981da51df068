"""How each engine is asked: chunk sizes, key-lookup forms and typed columns, chosen by
measurement (the notes below); shared by every query module."""
from __future__ import annotations

from datetime import datetime, timezone
from typing import Any, Callable, Iterable, Sequence

from ..graph import Tx
from ..schema import Row, columns_of_type


# The forms below were measured on both engines at 10k, 100k and 1M rows (the engine v2
# issue's notes hold the numbers). In short: kuzu 0.11.3 uses the primary-key index only when the key
# is a statement parameter (one prepared statement per key); a key taken from a row (UNWIND,
# a list, IN) is a scan, cheapest as one hash join (`WITH r, r.id AS k MATCH (n {id: k})`), and
# the rows of a batch cost 3-4x less as parallel lists than as a list of structs (`_columns`;
# LadybugDB ~1.8x less, looked up by index when the key is bound by a WITH, scanned without).
# LadybugDB 0.22 looks up row-driven keys by index (`UNWIND ... MATCH (n {id: r.id})`), but
# not in IN lists, comma patterns or MERGE, which scan on both engines.
# FalkorDB (gem/store/falkor.py) looks keys up by index in every form below, IN lists
# included, and runs a transition's writes as one query: it takes the ladybug forms, and one
# statement for a 1-hop from many parents.
CHUNK = 200          # rows per UNWIND write on ladybug and FalkorDB
READ_CHUNK = 1000    # keys per UNWIND read on ladybug and FalkorDB
JOIN_CHUNK = 5000    # rows per kuzu hash-join write from structs (relationships)
COLUMN_CHUNK = 50_000  # rows per kuzu write from parallel lists (each scans the table once; at
                       # 1M fields a SET: 50k 3.3 us a row, 200k 2.4 us, 5k-row structs 22 us)
KEY_JOIN_CHUNK = 100_000  # keys per kuzu hash-join read: fewer scans of the table (a forgetting
                          # pass reads every field: 40 scans of 200k fields, 8.6 s, became 2,
                          # 0.9 s; updates gained nothing, their cost is per row)


# A row read by its key costs ~0.13 ms on kuzu; a hash join of many keys with the table scans
# it (~0.13 us a row: 130 ms at 1M fields). Measured at 1M fields: 2,000 keys 256-307 ms one
# by one, 110-160 ms joined; 200 keys 30-63 ms against 140-226 ms.
KUZU_ROWS_PER_KEY_LOOKUP = 1000


def _kuzu(tx: Tx) -> bool:
    return tx.engine == "kuzu"


def _columns_form(tx: Tx) -> bool:
    """Batches as parallel lists (`_columns`): on kuzu and LadybugDB (at 1M fields LadybugDB
    set 20k rows in 80 ms from lists, 149 ms from 200-row structs; 10 rows in 0.1 vs 0.2 ms)."""
    return tx.engine in ("kuzu", "ladybug")


def _falkor(tx: Tx) -> bool:
    return tx.engine == "falkordb"


# ---------------------------------------------------------------------- typed columns
# FalkorDB keeps no exact datetime (its localdatetime drops microseconds) and returns a double
# rounded to 15 digits (a salience of 17.878793403559726 comes back as 17.8787934035597, and
# the audit compares it with the log). On an engine with `tx.text_values`, datetime and float
# columns are stored as text (ISO time in UTC; Python's shortest exact float repr) and typed
# back here, from the schema's declaration, so a new column needs no edit.
_TIMES = columns_of_type(datetime)
_FLOATS = columns_of_type(float)


def _as_time(value: Any) -> Any:
    if isinstance(value, str):
        return datetime.fromisoformat(value).replace(tzinfo=timezone.utc)
    return value


def _as_float(value: Any) -> Any:
    return float(value) if isinstance(value, str) else value


def _typing(tx: Tx, name: str, cols: Sequence[str]) -> Callable[[Row], Row] | None:
    """A function that types a row read back (None when the engine needs none)."""
    if not tx.text_values:
        return None
    typed = [(c, _as_time) for c in cols if c in _TIMES[name]] + \
        [(c, _as_float) for c in cols if c in _FLOATS[name]]
    if not typed:
        return None

    def convert(row: Row) -> Row:
        for c, to in typed:
            row[c] = to(row[c])
        return row
    return convert


def _rows(tx: Tx, name: str, cols: Sequence[str], found: Iterable[Sequence[Any]]) -> list[Row]:
    """Rows of table or relationship `name` from returned values, typed back."""
    typed = _typing(tx, name, cols)
    rows = [dict(zip(cols, values)) for values in found]
    return rows if typed is None else [typed(r) for r in rows]


def _for_engine(tx: Tx, name: str, rows: list[Row]) -> list[Row]:
    """Float columns as exact text on an engine with `tx.text_values` (its adapter sends
    datetimes as text itself)."""
    floats = _FLOATS[name] if tx.text_values else ()
    if not floats:
        return rows
    return [{c: repr(float(v)) if c in floats and v is not None else v for c, v in r.items()}
            for r in rows]
