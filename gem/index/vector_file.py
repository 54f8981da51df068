"""The snapshot file of a VectorIndex: its ids, its rows (whole or sparse, whichever is
smaller) and its sign codes."""
from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

import numpy as np

from gem.errors import InvalidInput, SnapshotError
from gem.numeric import single_threaded

from .codes import SignCodes
from .rows import DenseRows, SparseRows
from .snapfile import read_snapshot_file, write_snapshot_file

_BLOCK_ROWS = 16_384  # rows packed at a time: 16 MB at dim 256


def _packed_rows(m: np.ndarray) -> dict[str, np.ndarray]:
    """A float32 matrix as it is saved: whole, or its non-zero entries row by row when that is
    smaller (5 bytes a component, column and value, instead of 4 a column of the row)."""
    n, dim = m.shape
    rows = SparseRows(dim, n)
    for a in range(0, n, _BLOCK_ROWS):
        rows.set(np.arange(a, min(a + _BLOCK_ROWS, n)), m[a : a + _BLOCK_ROWS])
    return _smaller(rows, n, m)


def _smaller(rows: SparseRows, n: int, dense: np.ndarray | None = None) -> dict[str, np.ndarray]:
    if rows.entries * (rows.columns.itemsize + 4) + 4 * n >= n * rows.dim * 4:
        return {"vectors": rows.dense(slice(0, n)) if dense is None else dense}
    return rows.saved(n)


def _loaded_rows(a: dict[str, np.ndarray], n: int, dim: int, capacity: int
                 ) -> DenseRows | SparseRows:
    """The rows `_packed_rows` saved, dense or sparse as they were saved."""
    if "vectors" in a:
        vectors = a["vectors"]
        if vectors.shape != (n, dim):
            raise ValueError("vector matrix and ids disagree")
        dense = DenseRows(dim, 0)
        # adopted, not copied, when it has room enough: the next insert grows it as any index
        dense.m = vectors if n >= capacity else np.zeros((capacity, dim), dtype=np.float32)
        if n < capacity:
            dense.m[:n] = vectors
        return dense
    counts, columns, values = a["row_nonzeros"], a["columns"], a["values"]
    if counts.shape != (n,) or columns.shape != values.shape or columns.ndim != 1 \
            or values.dtype != np.float32 or int(counts.sum(dtype=np.int64)) != columns.shape[0] \
            or (n and int(counts.min()) < 0) or columns.dtype.kind not in "iu":
        raise ValueError("the packed vector rows do not fit the matrix")
    # read only if their type can name a column past the last: reading the columns made them
    # resident (40 MB of mapped pages at 100k topics that a query reads a few of)
    if columns.shape[0] and np.iinfo(columns.dtype).max >= dim and (
            int(columns.max()) >= dim or int(columns.min()) < 0):
        raise ValueError("the packed vector rows do not fit the matrix")
    return SparseRows.loaded(dim, counts.astype(np.int32), columns, values, max(n, capacity))


def save(ix: Any, path: str | os.PathLike, stamp: Mapping[str, Any]) -> None:
    """Write this index to `path` (atomically), with the caller's JSON-able `stamp`.

    Codes are saved too (a loaded index need not recompute them: ~5 s at 1M rows)."""
    n = ix._n
    ids_utf8, ids_offsets = ix._keys.packed()
    rows = ix._rows
    saved = _smaller(rows, n) if isinstance(rows, SparseRows) else _packed_rows(rows.m[:n])
    arrays: dict[str, np.ndarray] = {"ids_utf8": ids_utf8, "ids_offsets": ids_offsets,
                                     **saved}
    meta: dict[str, Any] = {"dim": ix.dim, "rows": n,
                            "approximate_above": ix.approximate_above,
                            "code_bits": ix.code_bits,
                            "candidate_scale": ix.candidate_scale,
                            "candidate_share": ix.candidate_share}
    if ix._codes is not None:
        arrays["codes"] = ix._codes.words[:, :n].view(np.int64)  # same bits
    write_snapshot_file(path, "vector", stamp, meta, arrays)


def load(cls: Any, path: str | os.PathLike) -> tuple[Any, dict[str, Any]]:
    """(index, stamp) from a file written by save(); SnapshotError if it is unusable.

    A file written before sign codes (with float sketches) is read: its sketches are
    ignored and codes are made from the rows. One written before candidate_scale (whose
    candidate_share was the old default, 2% of the rows re-scored) gets today's defaults."""
    stamp, meta, a = read_snapshot_file(path, "vector")
    try:
        ix = cls(int(meta["dim"]), approximate_above=meta["approximate_above"],
                 code_bits=int(meta.get("code_bits", 512)),
                 **({"candidate_scale": meta["candidate_scale"],
                     "candidate_share": meta["candidate_share"]}
                    if "candidate_scale" in meta else {}))
        n = int(meta["rows"])
        ix._keys.adopt_packed(a["ids_utf8"], a["ids_offsets"], n)
        ix._cap = max(n, 16)
        ix._rows = _loaded_rows(a, n, ix.dim, ix._cap)
        ix._n = n
        if "codes" in a:
            words = a["codes"]
            if words.dtype != np.int64 or words.shape != (ix.code_bits // 64, n):
                raise ValueError("codes do not match the vectors")
            codes = SignCodes(ix.dim, ix.code_bits, 0)
            words = words.view(np.uint64)
            codes.words = words if n >= ix._cap else np.zeros((words.shape[0], ix._cap),
                                                              dtype=np.uint64)
            if n < ix._cap:
                codes.words[:, :n] = words
            ix._codes = codes
        ix._mapped = True
        with single_threaded():
            ix._maybe_encode()
    except SnapshotError:
        raise
    except (KeyError, ValueError, TypeError, InvalidInput) as e:
        raise SnapshotError(f"snapshot {str(path)!r} is inconsistent: {e}") from e
    return ix, stamp
