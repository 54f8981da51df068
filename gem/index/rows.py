"""The exact float32 rows of a VectorIndex: a dense matrix, or only the non-zero entries.

A hashing embedder's vector of a field's value has ~20-45 non-zero components of 256 (measured
on LoCoMo turns, questions and titles: mean 21-23, p95 32-42): kept as (column, value) that
is 5 bytes a component, ~150-250 bytes a row with growth room instead of 1 KB (a scan of every
row sums each row's extent where it lies, in storage order: 3x faster than gathering the
extents). A dense embedder's rows stay in a matrix. Both give back exactly the float32 values
stored (by bit pattern: a -0.0 is kept), so
every score recomputed from them (vector.exact_scores) is the one a dense matrix gives.
"""
from __future__ import annotations

import numpy as np

_BLOCK_ELEMENTS = 1 << 22  # entries gathered or densified at a time (16-32 MB)


def capacity_for(cap: int, size: int) -> int:
    """cap grown a quarter at a time until it holds size: doubling left up to half of a
    matrix empty (at 30k topics 214k of 524k rows, ~280 MB) for copies that cost ~1 s in all
    over a million inserts."""
    while cap < size:
        cap = max(cap + 16, cap * 5 // 4)
    return cap


def _grown(a: np.ndarray, size: int) -> np.ndarray:
    """a with room for `size` entries along its last axis."""
    if size <= a.shape[-1]:
        return a
    out = np.zeros((*a.shape[:-1], capacity_for(a.shape[-1], size)), dtype=a.dtype)
    out[..., : a.shape[-1]] = a
    return out


class DenseRows:
    """Rows in one contiguous float32 matrix (row-major, capacity grows a quarter at a time)."""

    sparse = False

    def __init__(self, dim: int, capacity: int = 16) -> None:
        self.dim = dim
        self.m = np.zeros((capacity, dim), dtype=np.float32)

    def reserve(self, capacity: int) -> None:
        if capacity > self.m.shape[0]:
            grown = np.zeros((capacity, self.dim), np.float32)
            grown[: self.m.shape[0]] = self.m
            self.m = grown

    def own(self) -> None:
        """A copy of the matrix if it is still a view (of a loaded snapshot's mapping)."""
        if self.m.base is not None:
            self.m = self.m.copy()

    def set(self, rows: np.ndarray, block: np.ndarray) -> None:
        self.m[rows] = block

    def move(self, src: int, dst: int) -> None:
        self.m[dst] = self.m[src]
        self.m[src] = 0.0

    def drop(self, row: int) -> None:
        self.m[row] = 0.0

    def dense(self, rows: np.ndarray | slice) -> np.ndarray:
        return self.m[rows]

    def dots(self, rows: np.ndarray | None, n: int, q: np.ndarray) -> np.ndarray:
        """float32 products with q (within vector._float32_slack of the exact cosines)."""
        return self.m[:n] @ q if rows is None else self.m[rows] @ q

    def saved(self, n: int) -> dict[str, np.ndarray]:
        return {"vectors": self.m[:n]}

    @property
    def nbytes(self) -> int:
        return self.m.nbytes


class SparseRows:
    """Each row's non-zero entries, as an extent (start, count) of two flat arrays.

    An entry costs 5 bytes (column, value): no array says which row an entry belongs to (4
    more bytes an entry, 20 MB at 10k topics; a scan of every row sums each extent in storage
    order instead). A new or changed row is appended at the end; the entries it had become
    garbage (value zeroed, so a sum over a stretch of entries adds 0.0 for them), and once
    garbage is a quarter of the entries the live ones are copied out in row order (amortised
    O(1) a write, at most ~1.6x the live entries held). A removal moves the last row's extent
    into the hole, as the dense matrix moves the last row.
    """

    sparse = True

    def __init__(self, dim: int, capacity: int = 16) -> None:
        self.dim = dim
        column_type = np.uint8 if dim <= 1 << 8 else np.uint16 if dim <= 1 << 16 else np.int32
        self.columns = np.zeros(64, dtype=column_type)
        self.values = np.zeros(64, dtype=np.float32)
        self.used = 0
        self.garbage = 0
        self.start = np.zeros(capacity, dtype=np.int64)
        self.count = np.zeros(capacity, dtype=np.int32)

    def reserve(self, capacity: int) -> None:
        if capacity > self.start.shape[0]:
            self.start = np.concatenate([self.start, np.zeros(capacity - self.start.shape[0],
                                                              dtype=np.int64)])
            self.count = np.concatenate([self.count, np.zeros(capacity - self.count.shape[0],
                                                              dtype=np.int32)])

    def own(self) -> None:
        """Copies of the entries (a loaded row set's are views of its snapshot's mapping),
        with room for a few writes: a sixteenth, not the quarter a growth adds (at 100k topics
        a quarter is 50 MB before any row needs it)."""
        room = self.columns.shape[0] + max(1024, self.columns.shape[0] // 16)
        for name in ("columns", "values"):
            a = getattr(self, name)
            copy = np.zeros(room, dtype=a.dtype)
            copy[: a.shape[0]] = a
            setattr(self, name, copy)

    @property
    def entries(self) -> int:
        return self.used - self.garbage

    def set(self, rows: np.ndarray, block: np.ndarray) -> None:
        rows = np.atleast_1d(np.asarray(rows, dtype=np.int64))
        block = np.ascontiguousarray(block, dtype=np.float32).reshape(rows.shape[0], self.dim)
        self.garbage += int(self.count[rows].sum())
        self.values[self._entries(rows)[0]] = 0.0
        at = self.used
        starts, counts = [], []
        step = max(1, _BLOCK_ELEMENTS // self.dim)
        for a in range(0, rows.shape[0], step):
            part = block[a : a + step]
            r, c = np.nonzero(part.view(np.int32))  # by bit pattern; row-major order
            counts.append(np.bincount(r, minlength=part.shape[0]).astype(np.int32))
            self.columns = _grown(self.columns, at + c.shape[0])
            self.values = _grown(self.values, at + c.shape[0])
            self.columns[at : at + c.shape[0]] = c
            self.values[at : at + c.shape[0]] = part[r, c]
            starts.append(at + np.cumsum(counts[-1], dtype=np.int64) - counts[-1])
            at += c.shape[0]
        self.used = at
        if starts:
            self.start[rows] = np.concatenate(starts)
            self.count[rows] = np.concatenate(counts)

    def move(self, src: int, dst: int) -> None:
        self.drop(dst)
        self.start[dst], self.count[dst] = self.start[src], self.count[src]
        self.start[src] = self.count[src] = 0

    def drop(self, row: int) -> None:
        a, c = int(self.start[row]), int(self.count[row])
        self.values[a : a + c] = 0.0
        self.garbage += c
        self.start[row] = self.count[row] = 0

    def compact(self, n: int) -> None:
        """Copy the live entries out in row order once garbage is a quarter of all entries."""
        if self.garbage <= max(1024, self.used // 4):
            return
        idx, counts = self._entries(np.arange(n, dtype=np.int64))
        self.columns = self.columns[idx]
        self.values = self.values[idx]
        self.used, self.garbage = idx.shape[0], 0
        self.start[:n] = np.cumsum(counts, dtype=np.int64) - counts

    def _entries(self, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Positions of the rows' entries (row after row) and each row's count."""
        counts = self.count[rows]
        ends = np.cumsum(counts, dtype=np.int64)
        total = int(ends[-1]) if ends.shape[0] else 0
        idx = np.repeat(self.start[rows] - (ends - counts), counts) + np.arange(total)
        return idx, counts

    def _blocks(self, rows: np.ndarray):
        """rows in consecutive blocks of at most ~_BLOCK_ELEMENTS entries (or one row)."""
        ends = np.cumsum(self.count[rows], dtype=np.int64)
        total = int(ends[-1]) if ends.shape[0] else 0
        cuts = np.searchsorted(ends, np.arange(_BLOCK_ELEMENTS, total, _BLOCK_ELEMENTS))
        bounds = sorted({0, rows.shape[0], *(int(c) + 1 for c in cuts)})
        for a, b in zip(bounds, bounds[1:]):
            yield a, rows[a:b]

    def dense(self, rows: np.ndarray | slice) -> np.ndarray:
        if isinstance(rows, slice):
            rows = np.arange(rows.start or 0, rows.stop, dtype=np.int64)
        rows = np.atleast_1d(np.asarray(rows, dtype=np.int64))
        out = np.zeros((rows.shape[0], self.dim), dtype=np.float32)
        idx, counts = self._entries(rows)
        out[np.repeat(np.arange(rows.shape[0]), counts), self.columns[idx]] = self.values[idx]
        return out

    def dots(self, rows: np.ndarray | None, n: int, q: np.ndarray) -> np.ndarray:
        """Products with q summed in float64 over each row's non-zero entries: within
        ~1e-13 of the exact cosines, far inside the float32 slack the callers allow."""
        q64 = q.astype(np.float64)
        if rows is None:  # every extent in storage order (3x faster than gathering them)
            out = np.zeros(n, dtype=np.float64)
            order = np.flatnonzero(self.count[:n])  # a zero vector's row has no extent
            order = order[np.argsort(self.start[order], kind="stable")]
            first = self.start[order]
            end = first + self.count[order]
            # chunks of rows whose extents (and the garbage between them, which adds 0.0)
            # span about _BLOCK_ELEMENTS entries
            cuts = np.searchsorted(first, np.arange(_BLOCK_ELEMENTS, self.used, _BLOCK_ELEMENTS))
            bounds = sorted({0, order.shape[0], *cuts.tolist()})
            for a, b in zip(bounds, bounds[1:]):
                lo, hi = int(first[a]), int(end[b - 1])
                products = self.values[lo:hi] * q64[self.columns[lo:hi]]
                out[order[a:b]] = np.add.reduceat(products, first[a:b] - lo)
            return out
        out = np.zeros(rows.shape[0], dtype=np.float64)
        for a, part in self._blocks(rows):
            idx, counts = self._entries(part)
            if not idx.shape[0]:
                continue
            products = self.values[idx] * q64[self.columns[idx]]
            # each row's products are consecutive: one reduceat, no array of owners (a
            # row without entries would get the next row's first product: it stays 0.0)
            firsts = np.cumsum(counts, dtype=np.int64) - counts
            has = counts > 0
            out[a : a + part.shape[0]][has] = np.add.reduceat(products, firsts[has])
        return out

    def saved(self, n: int) -> dict[str, np.ndarray]:
        """The snapshot arrays of vector._packed_rows: counts, then entries in row order."""
        idx, counts = self._entries(np.arange(n, dtype=np.int64))
        return {"row_nonzeros": counts.astype(np.int32), "columns": self.columns[idx],
                "values": self.values[idx]}

    @classmethod
    def loaded(cls, dim: int, counts: np.ndarray, columns: np.ndarray, values: np.ndarray,
               capacity: int) -> SparseRows:
        rows = cls(dim, capacity)
        column_type = rows.columns.dtype
        rows.columns = columns.astype(column_type, copy=False)
        rows.values = values.astype(np.float32, copy=False)
        rows.used = int(columns.shape[0])
        n = counts.shape[0]
        rows.count[:n] = counts
        rows.start[:n] = np.cumsum(counts, dtype=np.int64) - counts
        return rows

    @property
    def nbytes(self) -> int:
        return (self.columns.nbytes + self.values.nbytes + self.start.nbytes + self.count.nbytes)
