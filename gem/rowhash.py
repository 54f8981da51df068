"""`attest.row_hash` for many rows of one table: the same hashes, for less.

The full audit hashes every stored row (1.1M entries and 1M fields at 100k topics), and
`dumps` spent most of a row's hash on building and sorting a dict and on calling back into
Python for each datetime. A `RowHasher` knows its table's columns in their sorted (canonical)
order and, for each combination of value types a row holds (a handful per table), a format
template with the keys, the nulls and the dropped columns written in once, so a row costs one
`%` of values each encoded by a C function. Only value types whose canonical text it
reproduces exactly (str, int, bool, float, None, datetime, lists of str) take that path; any
other row, or a row whose columns are not exactly its table's, is hashed by
`attest.row_hash` itself (tests/test_rowhash.py holds the two byte-identical).
"""
from __future__ import annotations

import hashlib
import json
import math
from datetime import datetime, timezone
from operator import call, itemgetter
from typing import Any, Callable

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from .attest import ADDED_LATER, PLACE_COLUMNS, WRITTEN_BEHIND, row_hash
from .store.schema import TABLES, Row
from .units import _isoformat  # the remembered text dumps writes: isoformat costs ~1 us aware

_ESC: Callable[[str], str] = json.encoder.encode_basestring_ascii  # what dumps escapes with
_sha256 = hashlib.sha256
_BOOL = {True: "true", False: "false"}.__getitem__
_NONE = type(None)


def _float(value: float) -> str:
    # json writes a non-finite float as NaN or Infinity, float.__repr__ as nan or inf
    if math.isfinite(value):
        return float.__repr__(value)
    return "NaN" if value != value else ("Infinity" if value > 0 else "-Infinity")


def _list(value: list[Any]) -> str:
    return "[" + ",".join(map(_ESC, value)) + "]"  # a non-str item raises: row_hash takes it


# How each value type is written (None: see _NULL).
_ENCODERS: dict[type, Callable[[Any], str]] = {
    str: _ESC, int: int.__repr__, bool: _BOOL, float: _float, datetime: _isoformat,
    list: _list}


def _dropped(key: str) -> Callable[[Any], str]:
    """The encoder of a column left out of the hash when empty (attest.ADDED_LATER): the
    column's whole text, its separator and key included, or nothing."""
    head = "," + key

    def text(value: Any) -> str:
        return head + (_list(value) if value.__class__ is list else _ESC(value)) if value else ""
    return text


# A null column is written into the template; its value still fills a place (every hashed
# column does, so one getter serves every plan), with no text or with "null".
_DROPPED_NULL = {None: ""}.__getitem__
_NULL = {None: "null"}.__getitem__


class RowHasher:
    """`attest.row_hash(table, row)`, for a table of gem/store/schema.py."""

    def __init__(self, table: str) -> None:
        self.table = table
        self.columns = tuple(sorted(TABLES[table].columns))
        behind = WRITTEN_BEHIND if table in ("Topic", "Field", "Episode") else frozenset()
        self.hashed = tuple(c for c in self.columns if c not in behind)
        self._behind = frozenset(behind)
        self._values = itemgetter(*self.hashed)
        # per combination of value types: the template and each value's encoder (None: row_hash)
        self._plans: dict[tuple[type, ...], tuple[str, tuple[Callable[[Any], str], ...]] | None] = {}

    def __call__(self, row: Row) -> str:
        # exactly the table's columns: as many, the hashed ones and the ones written behind
        if len(row) != len(self.columns) or not row.keys() >= self._behind:
            return row_hash(self.table, row)
        try:
            values = self._values(row)
        except KeyError:
            return row_hash(self.table, row)
        kinds = tuple(map(type, values))
        try:
            plan = self._plans[kinds]
        except KeyError:
            plan = self._plans[kinds] = self._plan(kinds)
        if plan is None:
            return row_hash(self.table, row)
        try:
            text = plan[0] % tuple(map(call, plan[1], values))
        except (TypeError, ValueError):
            return row_hash(self.table, row)
        return _sha256(text.encode("utf-8")).hexdigest()[:32]

    def _plan(self, kinds: tuple[type, ...]) -> tuple[str, tuple[Callable[[Any], str], ...]] | None:
        pieces: list[str] = []
        encoders: list[Callable[[Any], str]] = []
        kept = False  # a column always written came before: the next one follows a comma
        for column, kind in zip(self.hashed, kinds):
            key = _ESC(column) + ":"
            comma = "," if kept else ""
            if kind is _NONE and column in (*ADDED_LATER, *PLACE_COLUMNS):
                pieces.append("%s")
                encoders.append(_DROPPED_NULL)
            elif column in ADDED_LATER:
                if not kept or kind not in (str, list):
                    return None  # dropped before any column is kept, it would leave a comma
                pieces.append("%s")
                encoders.append(_dropped(key))
            elif kind is _NONE:
                pieces.append(comma + key.replace("%", "%%") + "%s")
                encoders.append(_NULL)
                kept = True
            elif kind in _ENCODERS:
                quote = '"' if kind is datetime else ""
                pieces.append(comma + key.replace("%", "%%") + quote + "%s" + quote)
                encoders.append(_ENCODERS[kind])
                kept = True
            else:
                return None
        template = self.table.replace("%", "%%") + "\n{" + "".join(pieces) + "}"
        return template, tuple(encoders)


# value.isoformat(), remembered as dumps remembers it: the audit compares each stored salience
# time with the log's text of it, and an aware datetime's isoformat costs ~1 us.
isoformat = _isoformat


_HASHERS: dict[str, RowHasher] = {}


def hasher(table: str) -> RowHasher:
    """The one `RowHasher` of a table (its plans are learnt once per process)."""
    found = _HASHERS.get(table)
    if found is None:
        found = _HASHERS[table] = RowHasher(table)
    return found


# ---------------------------------------------------------------------- whole columns
# The full audit reads its tables as Arrow (gem/store/queries/batches.py) and hashes them a
# column at a time: each column's text (its key, its separator, its values' canonical text) is
# made for every row of a batch at once by Arrow's kernels, the texts of a row are joined, and
# only sha256 runs per row. A row whose text Arrow's kernels cannot write as dumps would (a
# string holding a character dumps escapes other than \ and ": a control or non-ASCII one, or a
# list holding a null) is left to `RowHasher`, as is a table whose first hashed column can be
# left out (the comma before each next column would depend on the row).



def _escaped(values: pa.Array) -> tuple[pa.Array, pa.Array]:
    """(string values as JSON writes them between its quotes, rows whose value needs another
    escape than \\ and ")."""
    other = pc.invert(pc.fill_null(pc.ascii_is_printable(values), True))
    return pc.replace_substring(pc.replace_substring(values, "\\", "\\\\"), '"', '\\"'), other


def _each_distinct(values: pa.Array, text: Callable[[Any], str]) -> pa.Array:
    """`text` of each value, called once per distinct value (a batch holds a few distinct times
    and confidences), null where the value is null."""
    coded = pc.dictionary_encode(values)
    return pc.take(pa.array([text(v) for v in coded.dictionary.to_pylist()], pa.string()),
                   coded.indices)


def _value_texts(values: pa.Array) -> tuple[str, pa.Array, str, pa.Array | None] | None:
    """(text before, each value's canonical text (null where it is null), text after; the
    rows to hash one by one), or None for a type without a column encoder."""
    kind = values.type
    if pa.types.is_string(kind):
        escaped, other = _escaped(values)
        return '"', escaped, '"', other
    if pa.types.is_boolean(kind):
        return "", pc.if_else(values, "true", "false"), "", None
    if pa.types.is_integer(kind):
        return "", pc.cast(values, pa.string()), "", None
    if pa.types.is_floating(kind):  # repr's shortest text, which Arrow's cast does not write
        return "", _each_distinct(values, _float), "", None
    if pa.types.is_timestamp(kind):
        return '"', _each_distinct(values.cast(pa.timestamp("us")),
                                   lambda t: t.replace(tzinfo=timezone.utc).isoformat()), '"', None
    if pa.types.is_list(kind) and pa.types.is_string(kind.value_type):
        flat = values.flatten()
        escaped, other = _escaped(flat)
        quoted = pc.binary_join_element_wise('"', escaped, '"', "")
        bad = pc.filter(pc.list_parent_indices(values), pc.or_(other, pc.is_null(flat)))
        offsets = pc.subtract(values.offsets, values.offsets[0])  # a slice's start at 0
        joined = pc.binary_join(pa.ListArray.from_arrays(offsets, quoted, mask=values.is_null()),
                                ",")
        rows = np.zeros(len(values), dtype=bool)
        rows[bad.to_numpy()] = True
        return "[", joined, "]", pa.array(rows)
    return None


def _empty(values: pa.Array) -> pa.Array:
    """Rows whose value is null or empty (a column added later is left out of the hash then)."""
    if pa.types.is_list(values.type):
        size = pc.list_value_length(values)
    else:
        size = pc.binary_length(values)
    return pc.fill_null(pc.equal(size, 0), True)


def hash_batch(table: str, batch: pa.Table) -> list[str | None] | None:
    """`attest.row_hash(table, row)` of each row of an Arrow batch holding exactly the table's
    columns (timestamps naive UTC, as gem/store/queries/batches.py reads them); None at a row
    to hash one by one, or None for the whole batch when its columns are not the table's or
    are of a type without a column encoder."""
    own = hasher(table)
    if sorted(batch.column_names) != list(own.columns) or not own.hashed or \
            own.hashed[0] in (*ADDED_LATER, *PLACE_COLUMNS):
        return None
    if not batch.num_rows:
        return []
    batch = batch.combine_chunks()
    # the arguments of one join of each row's texts: column texts, and the text between them
    parts: list[Any] = [table + "\n{"]
    alone = np.zeros(batch.num_rows, dtype=bool)
    for i, column in enumerate(own.hashed):
        values = batch.column(column).chunk(0)
        made = _value_texts(values)
        if made is None:
            return None
        before, texts, after, other = made
        if other is not None:
            alone |= other.to_numpy(zero_copy_only=False)
        head = ("," if i else "") + _ESC(column) + ":"
        if column in ADDED_LATER or column in PLACE_COLUMNS:
            if column in ADDED_LATER and not (pa.types.is_string(values.type) or
                                              pa.types.is_list(values.type)):
                return None
            left_out = _empty(values) if column in ADDED_LATER else pc.is_null(values)
            parts += [pc.if_else(left_out, "", pc.binary_join_element_wise(
                head + before, texts, after, ""))]
        elif texts.null_count:
            parts += [head, pc.fill_null(pc.binary_join_element_wise(before, texts, after, ""),
                                         "null")]
        else:
            parts += [head + before, texts, after]
    parts.append("}")
    joined: list[Any] = []
    for part in parts:  # texts between columns as one scalar each
        if isinstance(part, str) and joined and isinstance(joined[-1], str):
            joined[-1] += part
        elif not isinstance(part, str) or part:
            joined.append(part)
    rows = pc.binary_join_element_wise(*joined, "")
    offsets = np.frombuffer(rows.buffers()[1], dtype=np.int32)[rows.offset:rows.offset + len(rows) + 1]
    data = memoryview(rows.buffers()[2])
    sha256 = _sha256
    out: list[str | None] = [sha256(data[a:b]).hexdigest()[:32]
                             for a, b in zip(offsets[:-1].tolist(), offsets[1:].tolist())]
    for i in np.flatnonzero(alone).tolist():
        out[i] = None
    return out
