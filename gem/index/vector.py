"""Cosine search over embeddings: gem's vector index, exact, or projected sketches above a size."""
from __future__ import annotations

import math
import os
from collections.abc import Iterable, Mapping
from itertools import repeat
from typing import Any

import numpy as np

from gem.errors import InvalidInput, SnapshotError
from gem.numeric import single_threaded

from .common import check_doc_id, check_k, ranked
from .snapfile import encode_strings, read_snapshot_file, snapshot_strings, write_snapshot_file


def _float32_slack(dim: int) -> float:
    """A bound on |float32 BLAS dot - exact dot| for two vectors of (about) unit norm.

    Any float32 summation order (blocked, FMA, SIMD lanes) of dim products stays within
    gamma_dim * sum|x_i q_i| <= gamma_dim * |x| |q| of the exact value, gamma_n = n u / (1 - n u),
    u = 2^-24 (Higham, Accuracy and Stability of Numerical Algorithms, 3.1). The 1% and 1e-12
    cover norms that are 1 only to float32 precision and the float64 recomputation.
    """
    g = dim * 2.0**-24
    return 1.01 * g / (1.0 - g) + 1e-12


_EXACT_BLOCK = 8192  # rows recomputed in float64 at a time (16 MB at dim 256)


def _exact_scores(m32: np.ndarray, q64: np.ndarray) -> np.ndarray:
    """Cosines recomputed in float64.

    A float32 product is exact in float64 and each row is summed on its own (numpy's pairwise
    sum along one contiguous row), so a document's score depends only on its vector and the
    query: not on where its row sits, how many rows are scored with it, or which BLAS kernel
    ran. BLAS float32 products do not have that property (measured: the same row scores
    differently by position), which is why every score gem returns comes from here.
    """
    out = np.empty(m32.shape[0], dtype=np.float64)
    for a in range(0, m32.shape[0], _EXACT_BLOCK):
        block = m32[a : a + _EXACT_BLOCK].astype(np.float64)
        block *= q64
        out[a : a + block.shape[0]] = block.sum(axis=1)
    return out


def _near_top(s32: np.ndarray, k: int | None, slack: float) -> np.ndarray:
    """Positions in s32 (float32 scores) that can still be in the exact top k.

    The k-th best float32 score is at most `slack` above the exact score of k documents, so
    anything more than 2 * slack below it is beaten by k documents whatever the rounding.
    """
    n = s32.shape[0]
    if k is None or k >= n:
        return np.arange(n)
    kth = np.partition(s32, n - k)[n - k]
    return np.flatnonzero(s32 >= kth - 2.0 * slack)


def _check_threshold(threshold: object) -> float:
    if isinstance(threshold, bool) or not isinstance(threshold, (int, float)) or math.isnan(
            threshold):
        raise InvalidInput(f"threshold must be a number, got {threshold!r}")
    return float(threshold)


# ---------------------------------------------------------------------- projected scan
#
# Above `approximate_above` vectors, search() stops reading every full vector. Each vector
# also has a short "sketch": its coordinates on the top `sketch_dim` principal axes of the
# stored vectors (eigenvectors of the uncentred second-moment matrix of a fixed-seed sample,
# so dot products of sketches approximate dot products of vectors). A query scores every
# sketch (5/16 of the bytes of a full scan by default), the best `candidate_share` of the
# rows are re-scored with their full vectors, and those candidates are ranked exactly.
# Measured at 100k HashingEmbedder vectors of titles and of sentences, 80 of 256 axes and 2%
# re-scored found 0.98-0.99 of the exact top 10 (64 axes / 3%: 0.96-0.97) in half the time
# of the full scan (the scan is memory-bound: 80 floats a row are read instead of 256); at
# 1M, 0.99+ in 18-20 ms against 34 ms. An IVF coarse quantiser (k-means lists, exact re-rank)
# was built and measured first: text hashed into 256 dimensions forms no clusters, and it
# reached 0.93-0.96 recall@10 only when probing 40% of the lists, for no speedup. HNSW graphs
# (faiss 1.15 and usearch 2.26, f32 and i8) were measured on the 1M field vectors of a 100k-topic
# memory: one core built them at 3-10k vectors/s (95-330 s), and even asked for 800
# candidates re-ranked exactly their top 50 held 0.92-0.97 of the exact top 50 (sketches: 0.996,
# in 20 ms against their 1.7-2.6 ms).

_SKETCH_SEED = 20240229
_SKETCH_SAMPLE = 20_000  # rows sampled to find the axes (a 256 x 256 product per 1k rows)
_PRODUCT_ELEMENTS = 1 << 22  # float32 scores held at once by blocked products (16 MB)


def _principal_axes(vecs: np.ndarray, n_axes: int) -> np.ndarray:
    """(dim, n_axes) float32: the top axes of a fixed-seed sample of the rows of vecs."""
    rng = np.random.default_rng(_SKETCH_SEED)
    n = vecs.shape[0]
    sample = vecs if n <= _SKETCH_SAMPLE else vecs[np.sort(rng.choice(n, _SKETCH_SAMPLE,
                                                                      replace=False))]
    x = sample.astype(np.float64)
    moments = x.T @ x
    values, axes = np.linalg.eigh(moments)  # ascending; ties keep eigh's order
    return np.ascontiguousarray(axes[:, ::-1][:, :n_axes]).astype(np.float32)


def _packed_rows(m: np.ndarray) -> dict[str, np.ndarray]:
    """A float32 matrix as it is saved: whole, or its non-zero entries row by row when that is
    smaller. A hashing embedder's vector of a field's value has ~45 non-zero components of
    256: 5 bytes each (column and value) instead of 1 KB a row, and still exactly the same
    float32 values once unpacked."""
    n, dim = m.shape
    column_type = np.uint8 if dim <= 1 << 8 else np.uint16 if dim <= 1 << 16 else np.int32
    counts = np.zeros(n, dtype=np.int32)
    step = max(1, _PRODUCT_ELEMENTS // dim)
    for a in range(0, n, step):
        # by bit pattern: a -0.0 is kept, so the rows come back bit for bit
        counts[a : a + step] = np.count_nonzero(m[a : a + step].view(np.int32), axis=1)
    nnz = int(counts.sum())
    if nnz * (np.dtype(column_type).itemsize + 4) + 4 * n >= m.nbytes:
        return {"vectors": m}
    columns = np.empty(nnz, dtype=column_type)
    values = np.empty(nnz, dtype=np.float32)
    at = 0
    for a in range(0, n, step):
        block = m[a : a + step]
        rows, cols = np.nonzero(block.view(np.int32))  # row-major: columns ascend in a row
        columns[at : at + cols.shape[0]] = cols
        values[at : at + cols.shape[0]] = block[rows, cols]
        at += cols.shape[0]
    return {"row_nonzeros": counts, "columns": columns, "values": values}


def _unpacked_rows(a: dict[str, np.ndarray], n: int, dim: int) -> np.ndarray:
    """The matrix `_packed_rows` saved (at least 16 rows: an index's smallest capacity)."""
    if "vectors" in a:
        vectors = a["vectors"]
        if vectors.shape != (n, dim):
            raise ValueError("vector matrix and ids disagree")
        if n >= 16:  # adopted, not copied: the next insert grows it as any index grows
            return vectors
        m = np.zeros((16, dim), dtype=np.float32)
        m[:n] = vectors
        return m
    counts, columns, values = a["row_nonzeros"], a["columns"], a["values"]
    if counts.shape != (n,) or columns.shape != values.shape or columns.ndim != 1 \
            or values.dtype != np.float32 or int(counts.sum(dtype=np.int64)) != columns.shape[0] \
            or (n and int(counts.min()) < 0) or (columns.shape[0] and int(columns.max()) >= dim):
        raise ValueError("the packed vector rows do not fit the matrix")
    m = np.zeros((max(n, 16), dim), dtype=np.float32)
    ends = np.cumsum(counts, dtype=np.int64)
    step = max(1, _PRODUCT_ELEMENTS // dim)
    for a0 in range(0, n, step):
        a1 = min(a0 + step, n)
        lo, hi = (int(ends[a0 - 1]) if a0 else 0), int(ends[a1 - 1]) if a1 else 0
        rows = np.repeat(np.arange(a0, a1, dtype=np.int64), counts[a0:a1])
        m[rows, columns[lo:hi]] = values[lo:hi]
    return m


def _half_if_exact(m: np.ndarray) -> np.ndarray:
    """m as float16 if that holds every value exactly (sketches: see _Sketches.set), else m
    (sketches loaded from a snapshot written before they were rounded)."""
    half = m.astype(np.float16)
    step = max(1, _PRODUCT_ELEMENTS // max(1, m.shape[1]))
    for a in range(0, m.shape[0], step):
        if not np.array_equal(half[a : a + step].astype(np.float32), m[a : a + step]):
            return m
    return half


class _Sketches:
    """The projected rows of a VectorIndex, in the same row order as its matrix."""

    def __init__(self, axes: np.ndarray, trained_at: int, capacity: int) -> None:
        self.axes = axes
        self.trained_at = trained_at  # index size when the axes were found
        self.rows = np.zeros((capacity, axes.shape[1]), dtype=np.float32)

    def reserve(self, capacity: int) -> None:
        if capacity > self.rows.shape[0]:
            grown = np.zeros((capacity, self.rows.shape[1]), dtype=np.float32)
            grown[: self.rows.shape[0]] = self.rows
            self.rows = grown

    def set(self, rows, vecs: np.ndarray) -> None:
        # Rounded to half precision (relative error 2^-11, far below what tells candidates
        # apart; sketch values are projections of unit vectors, so within [-1, 1]) and held
        # as float32 for the scan: saved as float16 they take half the bytes, and a loaded
        # index still holds exactly these values.
        self.rows[rows] = (vecs @ self.axes).astype(np.float16)

    def candidates(self, n: int, q: np.ndarray, pool: int) -> np.ndarray:
        """The `pool` rows whose sketches score best against q, in row order."""
        s = self.rows[:n] @ (q @ self.axes)
        if pool >= n:
            return np.arange(n, dtype=np.int64)
        return np.sort(np.argpartition(s, n - pool)[n - pool :]).astype(np.int64)


class VectorIndex:
    """Cosine search over vectors kept in one contiguous float32 matrix.

    Rows are packed (a removal moves the last row into the hole). Vectors are L2-normalised on
    the way in and the query is normalised too, so the dot product is the cosine even if a
    caller's embedder is slightly off; a zero vector stays zero and is similar to nothing.

    Candidates are found with float32 products; every returned score is then recomputed in
    float64 (see _exact_scores), and the candidate set is widened by the float32 error bound,
    so exact searches return exactly the top k of those float64 scores, bit for bit the same
    however the index was built, saved or loaded.

    With `approximate_above` set (the default), search() and search_many() score projected
    sketches first (see above) once the index holds that many vectors, and re-score only the
    best `candidate_share` of the rows with full vectors; below it, with ids=, k=None, and
    in most_similar() and pairs_above(), every row is scored in full. The axes are found
    when the index first reaches the size and again each time it doubles (one 256 x 256
    eigendecomposition and one projection of every row: ~0.1 s at 100k vectors).
    """

    def __init__(self, dim: int, *, approximate_above: int | None = 100_000,
                 sketch_dim: int | None = None, candidate_share: float = 0.02) -> None:
        if isinstance(dim, bool) or not isinstance(dim, int) or dim < 1:
            raise InvalidInput(f"VectorIndex dim must be a positive int, got {dim!r}")
        if approximate_above is not None and (
                isinstance(approximate_above, bool) or not isinstance(approximate_above, int)
                or approximate_above < 1):
            raise InvalidInput(f"approximate_above must be a positive int or None, "
                               f"got {approximate_above!r}")
        if sketch_dim is None:
            sketch_dim = max(1, min(dim, (5 * dim) // 16))  # 80 of 256
        if isinstance(sketch_dim, bool) or not isinstance(sketch_dim, int) or not (
                1 <= sketch_dim <= dim):
            raise InvalidInput(f"sketch_dim must be an int in [1, {dim}], got {sketch_dim!r}")
        if isinstance(candidate_share, bool) or not isinstance(candidate_share, (int, float)) \
                or not (0.0 < candidate_share <= 1.0):
            raise InvalidInput(f"candidate_share must be in (0, 1], got {candidate_share!r}")
        self.dim = dim
        self.approximate_above = approximate_above
        self.sketch_dim = sketch_dim
        self.candidate_share = float(candidate_share)
        self._slack = _float32_slack(dim)
        self._reset()

    def _reset(self) -> None:
        self._m = np.zeros((16, self.dim), dtype=np.float32)
        self._n = 0
        self._row_of: dict[str, int] = {}
        self._id_of_row: list[str] = []
        self._sketches: _Sketches | None = None

    def __len__(self) -> int:
        return self._n

    def __contains__(self, doc_id: object) -> bool:
        return doc_id in self._row_of

    def __iter__(self):
        return iter(list(self._id_of_row))

    def clear(self) -> None:
        self._reset()

    @property
    def approximate(self) -> bool:
        """Whether search() currently scores sketches first instead of every full row."""
        return (self._sketches is not None and self.approximate_above is not None
                and self._n >= self.approximate_above)

    def _as_unit_rows(self, vecs, what: str) -> np.ndarray:
        a = np.asarray(vecs, dtype=np.float64)
        if a.ndim == 1:
            a = a[None, :]
        if a.ndim != 2 or a.shape[1] != self.dim:
            raise InvalidInput(f"{what} must have {self.dim} components, got shape {np.shape(vecs)}")
        if not np.all(np.isfinite(a)):
            raise InvalidInput(f"{what} contains NaN or infinity")
        norms = np.linalg.norm(a, axis=1, keepdims=True)
        np.divide(a, norms, out=a, where=norms > 0)
        return a.astype(np.float32)

    def _reserve(self, n: int) -> None:
        cap = self._m.shape[0]
        if n <= cap:
            return
        # A quarter more at a time, not twice: doubling left up to half of the matrix and its
        # sketches empty (at 30k topics 214k of 524k rows, ~280 MB), for copies that cost
        # ~1 s in all over a million inserts.
        while cap < n:
            cap = max(cap + 16, cap * 5 // 4)
        grown = np.zeros((cap, self.dim), dtype=np.float32)
        grown[: self._n] = self._m[: self._n]
        self._m = grown
        if self._sketches is not None:
            self._sketches.reserve(cap)

    # ------------------------------------------------------------------ writes
    def upsert(self, doc_id: str, vec) -> None:
        check_doc_id(doc_id)
        v = self._as_unit_rows(vec, "vector")
        if v.shape[0] != 1:
            raise InvalidInput("upsert takes one vector; use upsert_many for several")
        row = self._row_of.get(doc_id)
        if row is None:
            self._reserve(self._n + 1)
            row = self._n
            self._n += 1
            self._row_of[doc_id] = row
            self._id_of_row.append(doc_id)
        self._m[row] = v[0]
        with single_threaded():
            if self._sketches is not None:
                self._sketches.set(row, self._m[row])
            self._maybe_train()

    def upsert_many(self, doc_ids: Iterable[str], vecs) -> None:
        """Bulk upsert (used when rebuilding from the database): one copy instead of n."""
        ids = list(doc_ids)
        for d in ids:
            check_doc_id(d)
        m = self._as_unit_rows(vecs, "vectors") if ids else np.zeros((0, self.dim), np.float32)
        if m.shape[0] != len(ids):
            raise InvalidInput(f"{len(ids)} ids but {m.shape[0]} vectors")
        if len(set(ids)) != len(ids):
            # Later duplicates win, as with repeated upsert() calls.
            last = {d: i for i, d in enumerate(ids)}
            keep = sorted(last.values())
            ids, m = [ids[i] for i in keep], m[keep]
        changed: list[int] = []
        existing = [(i, self._row_of[d]) for i, d in enumerate(ids) if d in self._row_of]
        if existing:
            src, dst = map(list, zip(*existing))
            self._m[dst] = m[src]
            changed += dst
        new = [i for i, d in enumerate(ids) if d not in self._row_of]
        if new:
            self._reserve(self._n + len(new))
            self._m[self._n : self._n + len(new)] = m[new]
            for j, i in enumerate(new):
                self._row_of[ids[i]] = self._n + j
                self._id_of_row.append(ids[i])
            changed += range(self._n, self._n + len(new))
            self._n += len(new)
        with single_threaded():
            if self._sketches is not None and changed:
                rows = np.asarray(changed, dtype=np.int64)
                self._sketches.set(rows, self._m[rows])
            self._maybe_train()

    def remove(self, doc_id: str) -> None:
        """Forget doc_id (absent ids are ignored); the last row moves into its place."""
        row = self._row_of.pop(doc_id, None)
        if row is None:
            return
        last = self._n - 1
        if row != last:
            moved = self._id_of_row[last]
            self._m[row] = self._m[last]
            self._id_of_row[row] = moved
            self._row_of[moved] = row
            if self._sketches is not None:
                self._sketches.rows[row] = self._sketches.rows[last]
        self._id_of_row.pop()
        self._m[last] = 0.0
        self._n = last
        if (self._sketches is not None and self.approximate_above is not None
                and self._n < self.approximate_above // 2):
            self._sketches = None  # far below the threshold: exact search, memory back

    def _maybe_train(self) -> None:
        if self.approximate_above is None or self._n < self.approximate_above:
            return
        if self._sketches is not None and self._n < 2 * self._sketches.trained_at:
            return
        self._train()

    def _train(self) -> None:
        n = self._n
        sketches = _Sketches(_principal_axes(self._m[:n], self.sketch_dim), n,
                             self._m.shape[0])
        step = max(1, _PRODUCT_ELEMENTS // self.sketch_dim)
        for a in range(0, n, step):
            sketches.set(slice(a, min(a + step, n)), self._m[a : min(a + step, n)])
        self._sketches = sketches

    # ------------------------------------------------------------------ reads
    def get(self, doc_id: str) -> np.ndarray | None:
        """A copy of the stored (normalised) vector, or None if doc_id is not indexed."""
        row = self._row_of.get(doc_id)
        return None if row is None else self._m[row].copy()

    def _query(self, vec) -> np.ndarray:
        q = self._as_unit_rows(vec, "query vector")
        if q.shape[0] != 1:
            raise InvalidInput("search takes one query vector")
        return q[0]

    def _rows_of(self, ids: Iterable[str]) -> np.ndarray:
        if isinstance(ids, str):
            raise InvalidInput("ids must be a collection of ids, not a single str")
        # map() with a default runs the dict lookups in C; ids not in the index (e.g. topics
        # that have no embedding) map to -1 and are skipped rather than treated as errors.
        found = np.fromiter(map(self._row_of.get, ids, repeat(-1)), dtype=np.int64)
        rows = np.sort(found[found >= 0])
        if rows.shape[0] > 1:
            # Duplicates in ids must not give duplicate results. (np.unique does the same
            # but costs ~7x more on 1k ids in numpy 2.)
            rows = rows[np.concatenate(([True], rows[1:] != rows[:-1]))]
        return rows

    def _float32_scores(self, q: np.ndarray, rows: np.ndarray | None
                        ) -> tuple[np.ndarray, np.ndarray]:
        if rows is None:
            return self._m[: self._n] @ q, np.arange(self._n, dtype=np.int64)
        if 4 * rows.shape[0] >= self._n:
            # Gathering rows copies them before the product; for a large share of the index
            # the streaming product over all rows is cheaper (measured ~4x at 1k of 1k rows).
            return (self._m[: self._n] @ q)[rows], rows
        return self._m[rows] @ q, rows

    def _finish(self, q: np.ndarray, s32: np.ndarray, rows: np.ndarray, k: int | None,
                threshold: float | None = None) -> list[tuple[str, float]]:
        if threshold is None:
            keep = _near_top(s32, k, self._slack)
        else:
            keep = np.flatnonzero(s32 >= threshold - self._slack)
        rows = rows[keep]
        exact = _exact_scores(self._m[rows], q.astype(np.float64))
        if threshold is not None:
            hit = exact >= threshold
            exact, rows = exact[hit], rows[hit]
        return ranked(exact, rows, self._id_of_row, k)

    def search(
        self, vec, k: int | None = None, ids: Iterable[str] | None = None
    ) -> list[tuple[str, float]]:
        """Cosine similarity to vec, best first (ties by id), optionally only among `ids`.

        Approximate (sketches first) when `approximate` is true, k is given and ids is not."""
        check_k(k)
        q = self._query(vec)
        if isinstance(ids, str):
            raise InvalidInput("ids must be a collection of ids, not a single str")
        if self._n == 0 or k == 0:
            return []
        with single_threaded():
            if ids is None and k is not None and self.approximate:
                s32, rows = self._approximate_candidates(q, k)
            else:
                s32, rows = self._float32_scores(q, None if ids is None else self._rows_of(ids))
            return self._finish(q, s32, rows, k)

    def _pool(self, k: int) -> int:
        return max(8 * k, math.ceil(self.candidate_share * self._n))

    def _approximate_candidates(self, q: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
        assert self._sketches is not None
        rows = self._sketches.candidates(self._n, q, self._pool(k))
        return self._m[rows] @ q, rows

    def most_similar(
        self, vec, threshold: float, ids: Iterable[str] | None = None
    ) -> list[tuple[str, float]]:
        """Every document with cosine >= threshold, best first (ties by id). Always exact."""
        threshold = _check_threshold(threshold)
        q = self._query(vec)
        if isinstance(ids, str):
            raise InvalidInput("ids must be a collection of ids, not a single str")
        if self._n == 0:
            return []
        with single_threaded():
            s32, rows = self._float32_scores(q, None if ids is None else self._rows_of(ids))
            return self._finish(q, s32, rows, None, threshold)

    def search_many(self, vecs, k: int) -> list[list[tuple[str, float]]]:
        """search(v, k) for each row v of vecs, as one blocked matrix product.

        Exact searches share one pass over the rows (float32 scores of at most ~4M (row,
        query) pairs are held at once); approximate ones run per query.
        """
        if isinstance(k, bool) or not isinstance(k, int) or k < 0:
            raise InvalidInput(f"k must be a non-negative int, got {k!r}")
        arr = np.asarray(vecs, dtype=np.float64)
        if arr.ndim != 2:
            raise InvalidInput(f"search_many takes a 2-d array of query vectors, got shape "
                               f"{arr.shape}")
        qs = self._as_unit_rows(arr, "query vectors")
        n_q = qs.shape[0]
        if self._n == 0 or k == 0 or n_q == 0:
            return [[] for _ in range(n_q)]
        with single_threaded():
            if self.approximate:
                return [self._finish(q, *self._approximate_candidates(q, k), k) for q in qs]
            hit_rows, hit_queries = self._near_top_many(qs, k)
            order = np.lexsort((hit_rows, hit_queries))
            hit_rows, hit_queries = hit_rows[order], hit_queries[order]
            bounds = np.searchsorted(hit_queries, np.arange(n_q + 1)).tolist()
            out = []
            for j in range(n_q):
                rows = hit_rows[bounds[j] : bounds[j + 1]]
                exact = _exact_scores(self._m[rows], qs[j].astype(np.float64))
                out.append(ranked(exact, rows, self._id_of_row, k))
            return out

    def _near_top_many(self, qs: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
        """(row, query) pairs that can be in the exact top k of their query (see _near_top).

        The k best float32 scores seen so far are kept per query; a row is kept if it is
        within 2 * slack of the k-th of them after its block. The running k-th only rises,
        so every row of the final top k passes when its block is scanned.
        """
        n_q = qs.shape[0]
        step = max(256, _PRODUCT_ELEMENTS // n_q)
        best = np.full((0, n_q), -np.inf, dtype=np.float32)
        rows_out, queries_out = [], []
        for a in range(0, self._n, step):
            s = self._m[a : min(a + step, self._n)] @ qs.T  # (rows, queries)
            both = np.concatenate([best, s])
            if both.shape[0] > k:
                best = np.partition(both, both.shape[0] - k, axis=0)[both.shape[0] - k :]
            else:
                best = both
            kth = best.min(axis=0) if best.shape[0] >= k else np.full(n_q, -np.inf, np.float32)
            r, c = np.nonzero(s >= kth - 2.0 * self._slack)
            rows_out.append(r + a)
            queries_out.append(c)
        return np.concatenate(rows_out), np.concatenate(queries_out)

    def pairs_above(self, threshold: float, ids: Iterable[str] | None = None,
                    involving: Iterable[str] | None = None,
                    block: int = 1024) -> list[tuple[str, str, float]]:
        """Every pair of documents with cosine >= threshold, optionally only pairs among
        `ids`, and only pairs with at least one side in `involving` (e.g. the topics changed
        since the last pass: O(len(involving) x N) instead of O(N^2)).

        Exact: pairs are found with blocked float32 products (block x block at a time, so
        memory stays O(block^2) whatever the size), widened by the float32 error bound and
        confirmed in float64. Returns (a, b, score) with a < b, best first, then by a, b.
        """
        threshold = _check_threshold(threshold)
        if threshold <= 0.0:
            raise InvalidInput("pairs_above needs a threshold > 0 (at or below 0, every pair "
                               "of unrelated documents qualifies)")
        if isinstance(block, bool) or not isinstance(block, int) or block < 1:
            raise InvalidInput(f"block must be a positive int, got {block!r}")
        if isinstance(ids, str) or isinstance(involving, str):
            raise InvalidInput("ids and involving must be collections of ids, not a str")
        rows = np.arange(self._n, dtype=np.int64) if ids is None else self._rows_of(ids)
        vecs = self._m[: self._n] if ids is None else self._m[rows]
        n = rows.shape[0]
        # Positions (into rows) that may be the first member of a pair, in order.
        if involving is None:
            firsts = np.arange(n, dtype=np.int64)
        else:
            firsts = np.flatnonzero(np.isin(rows, self._rows_of(involving)))
        is_first = np.zeros(n, dtype=bool)
        is_first[firsts] = True
        cut = threshold - self._slack
        left, right = [], []
        with single_threaded():
            for a in range(0, firsts.shape[0], block):
                pa = firsts[a : a + block]
                xa = vecs[pa]
                # A pair of two firsts is taken once, from its lower position; seconds at
                # positions before every first of this block can only pair with non-firsts.
                start = 0 if involving is not None else int(pa[0])
                for b in range(start, n, block):
                    pb = np.arange(b, min(b + block, n))
                    s = xa @ vecs[b : b + block].T
                    if b <= pa[-1] and is_first[b : b + block].any():
                        s[is_first[pb][None, :] & (pb[None, :] <= pa[:, None])] = -np.inf
                    i, j = np.nonzero(s >= cut)
                    left.append(pa[i])
                    right.append(pb[j])
        if not left:
            return []
        i, j = np.concatenate(left), np.concatenate(right)
        exact = np.empty(i.shape[0], dtype=np.float64)
        for c in range(0, i.shape[0], _EXACT_BLOCK):
            x = vecs[i[c : c + _EXACT_BLOCK]].astype(np.float64)
            x *= vecs[j[c : c + _EXACT_BLOCK]]
            exact[c : c + x.shape[0]] = x.sum(axis=1)
        hit = exact >= threshold
        ids_of = self._id_of_row
        out = []
        for x, y, score in zip(rows[i[hit]].tolist(), rows[j[hit]].tolist(),
                               exact[hit].tolist()):
            a_id, b_id = ids_of[x], ids_of[y]
            out.append((a_id, b_id, score) if a_id < b_id else (b_id, a_id, score))
        out.sort(key=lambda p: (-p[2], p[0], p[1]))
        return out

    # ------------------------------------------------------------------ snapshots
    def save(self, path: str | os.PathLike, stamp: Mapping[str, Any]) -> None:
        """Write this index to `path` (atomically), with the caller's JSON-able `stamp`.

        Sketches are saved too (as float16: their values are), so a loaded index picks exactly
        the same candidates."""
        n = self._n
        ids_utf8, ids_offsets = encode_strings(self._id_of_row)
        arrays: dict[str, np.ndarray] = {"ids_utf8": ids_utf8, "ids_offsets": ids_offsets,
                                         **_packed_rows(self._m[:n])}
        meta: dict[str, Any] = {"dim": self.dim, "rows": n,
                                "approximate_above": self.approximate_above,
                                "sketch_dim": self.sketch_dim,
                                "candidate_share": self.candidate_share,
                                "sketches_trained_at": None}
        if self._sketches is not None:
            meta["sketches_trained_at"] = self._sketches.trained_at
            arrays["sketch_axes"] = self._sketches.axes
            arrays["sketches"] = _half_if_exact(self._sketches.rows[:n])
        write_snapshot_file(path, "vector", stamp, meta, arrays)

    @classmethod
    def load(cls, path: str | os.PathLike) -> tuple[VectorIndex, dict[str, Any]]:
        """(index, stamp) from a file written by save(); SnapshotError if it is unusable."""
        stamp, meta, a = read_snapshot_file(path, "vector")
        try:
            ix = cls(int(meta["dim"]), approximate_above=meta["approximate_above"],
                     sketch_dim=meta["sketch_dim"], candidate_share=meta["candidate_share"])
            n = int(meta["rows"])
            ids = snapshot_strings(a, "ids")
            if len(ids) != n:
                raise ValueError("vector matrix and ids disagree")
            row_of = dict(zip(ids, range(n)))
            if len(row_of) != n:
                raise ValueError("duplicate ids")
            ix._m = _unpacked_rows(a, n, ix.dim)
            ix._n, ix._row_of, ix._id_of_row = n, row_of, ids
            if meta["sketches_trained_at"] is not None:
                axes, rows = a["sketch_axes"], a["sketches"]
                if axes.shape != (ix.dim, ix.sketch_dim) or rows.shape != (n, ix.sketch_dim):
                    raise ValueError("sketches do not match the vectors")
                if rows.dtype not in (np.float16, np.float32):
                    raise ValueError("sketches are neither float16 nor float32")
                sketches = _Sketches(axes.copy(), int(meta["sketches_trained_at"]), 0)
                sketches.rows = rows.astype(np.float32, copy=False)
                sketches.reserve(ix._m.shape[0])
                ix._sketches = sketches
        except SnapshotError:
            raise
        except (KeyError, ValueError, TypeError, InvalidInput) as e:
            raise SnapshotError(f"snapshot {str(path)!r} is inconsistent: {e}") from e
        return ix, stamp
