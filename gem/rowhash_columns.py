"""`attest.row_hash` of a whole Arrow batch of one table's rows, a column at a time.

Apart from gem/rowhash.py so that pyarrow (~60 MB resident) is imported only by a process that
runs a full audit (gem/audit_tables.py), not by every process that opens a memory.
"""
from __future__ import annotations

from datetime import timezone
from typing import Any, Callable

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from .attest import ADDED_LATER, PLACE_COLUMNS
from .rowhash import _ESC, _float, _sha256, hasher

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
    # Each replacement copies every text; most columns hold neither character (a byte search of
    # the texts' buffer, all of it even for a slice, says so for a tenth of a replacement).
    data = values.buffers()[2]
    texts = b"" if data is None else data.to_pybytes()
    if b"\\" in texts:
        values = pc.replace_substring(values, "\\", "\\\\")
    if b'"' in texts:
        values = pc.replace_substring(values, '"', '\\"')
    return values, other


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
