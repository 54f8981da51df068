"""Cosine search over embeddings: gem's vector index, exact, or sign codes first above a size."""
from __future__ import annotations

import math
import os
from collections.abc import Iterable, Mapping
from itertools import repeat
from typing import Any

import numpy as np

from gem.errors import InvalidInput
from gem.numeric import single_threaded

from . import vector_file
from .codes import SignCodes
from .common import check_doc_id, check_k, ranked
from .rows import DenseRows, SparseRows, capacity_for
from .snapfile import PackedIds


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


# ---------------------------------------------------------------------- approximate search
#
# Above `approximate_above` vectors, search() stops reading every vector. Each row also has a
# sign code (gem/index/codes.py: 512 bits, 64 bytes). A query computes Hamming distances on
# the codes' first 192 bits for every row (24 MB at 1M rows), on all 512 bits for the 8%
# nearest on those, and the `_pool` rows nearest on all bits (4 sqrt(n): 4000 at 1M rows,
# 1265 at 100k; at least 1024) get products from their exact rows; those candidates are
# ranked exactly. Measured (bench/vectors.py, side by side with 439e89b, which re-scored 2%
# of the rows behind a 256-bit scan; CPU ms p50 of one query, recall@10 of the exact ranking):
# 1M LoCoMo sentences 26.1 -> 10.7 ms (1.000 both), 1M titles of LoCoMo words 24.9 -> 13.0
# (1.000 both), 100k sentences 3.3 -> 2.5 (0.996 -> 0.994), 100k titles 2.7 -> 2.2 (0.996
# both). Re-scoring 2% (20k sparse rows at 1M) had been ~60% of a query. The pool grows with
# sqrt(n), not n: ranked by all 512 bits, the exact top 10 of LoCoMo questions lay within the
# nearest 2000 rows at 100k and at 1M alike (0.999); a harder set (made-up sentences of a
# Zipf vocabulary, 22 of 256 dims set) needed ~2500 rows at 100k and ~8000 at 1M for 0.99,
# 4000 for 0.98. candidate_scale=2 (2000 rows at 1M) measured 8.9 ms and 0.999 on LoCoMo
# sentences. Random unit vectors, where nothing is near, are ranked badly by sign codes:
# 0.73 -> 0.64 of the top 10 at 100k, 0.86 -> 0.66 at 1M (there 2% of the rows bought recall). What a query at 1M rows still
# costs (CPU): the 192-bit scan 3.5 ms, choosing its 8% ~2, their other words ~1, the
# re-score of ~4000 sparse rows ~4.5 (a few cache misses a row: no cheaper in numpy).
#
# Tried before: projected float sketches (80 of 256 principal axes; float16 values scanned as
# float32, 320 bytes a row in memory) found 0.98-0.99 of the top 10 re-scoring 2%, but the
# scan of 1M sketches read 320 MB a query (12.5 ms). An IVF coarse quantiser (k-means lists,
# exact re-rank): text hashed into 256 dimensions forms no clusters, and it reached 0.93-0.96
# recall@10 only when probing 40% of the lists, for no speedup. HNSW graphs (faiss 1.15 and
# usearch 2.26, f32 and i8) on the 1M field vectors of a 100k-topic memory: one core built
# them at 3-10k vectors/s (95-330 s), and even asked for 800 candidates re-ranked exactly
# their top 50 held 0.92-0.97 of the exact top 50.

_BLOCK_ROWS = 16_384  # rows densified (or encoded) at a time: 16 MB at dim 256
_PRODUCT_ELEMENTS = 1 << 22  # float32 scores held at once by blocked products (16 MB)


class VectorIndex:
    """Cosine search over vectors kept exactly, as a float32 matrix or as their non-zero
    entries (gem/index/rows.py: whichever is smaller, decided as vectors arrive).

    Rows are packed (a removal moves the last row into the hole). Vectors are L2-normalised on
    the way in and the query is normalised too, so the dot product is the cosine even if a
    caller's embedder is slightly off; a zero vector stays zero and is similar to nothing.

    Candidates are found with float32 products (float64 sums of sparse rows); every returned
    score is then recomputed in float64 (see _exact_scores), and the candidate set is widened
    by the float32 error bound, so exact searches return exactly the top k of those float64
    scores, bit for bit the same however the index was built, saved or loaded.

    With `approximate_above` set (the default, 20k: an exact scan of 100k sparse rows took
    20-38 ms, of 20k 4-8 ms, sign codes 2-3 ms), search() and search_many() scan sign codes
    first (see above) once the index holds that many vectors, and re-score exactly only the
    rows nearest in code distance: ceil(candidate_scale * sqrt(n)) of them (at least 1024
    and 8 k; with `candidate_share` set, at least that share of the rows too). Below it,
    with ids=, k=None, and in most_similar() and pairs_above(), every row is scored. Codes
    are made for every row when the index reaches the size, and dropped when it falls below
    half of it.
    """

    def __init__(self, dim: int, *, approximate_above: int | None = 20_000,
                 code_bits: int = 512, candidate_scale: float = 4.0,
                 candidate_share: float | None = None) -> None:
        if isinstance(dim, bool) or not isinstance(dim, int) or dim < 1:
            raise InvalidInput(f"VectorIndex dim must be a positive int, got {dim!r}")
        if approximate_above is not None and (
                isinstance(approximate_above, bool) or not isinstance(approximate_above, int)
                or approximate_above < 1):
            raise InvalidInput(f"approximate_above must be a positive int or None, "
                               f"got {approximate_above!r}")
        if isinstance(code_bits, bool) or not isinstance(code_bits, int) or code_bits < 64 \
                or code_bits % 64:
            raise InvalidInput(f"code_bits must be a positive multiple of 64, got {code_bits!r}")
        if isinstance(candidate_scale, bool) or not isinstance(candidate_scale, (int, float)) \
                or not (0.0 < candidate_scale < math.inf):
            raise InvalidInput(f"candidate_scale must be a positive number, got {candidate_scale!r}")
        if candidate_share is not None and (
                isinstance(candidate_share, bool) or not isinstance(candidate_share, (int, float))
                or not (0.0 < candidate_share <= 1.0)):
            raise InvalidInput(f"candidate_share must be in (0, 1] or None, "
                               f"got {candidate_share!r}")
        self.dim = dim
        self.approximate_above = approximate_above
        self.code_bits = code_bits
        self.candidate_scale = float(candidate_scale)
        self.candidate_share = None if candidate_share is None else float(candidate_share)
        self._slack = _float32_slack(dim)
        self._reset()

    def _reset(self) -> None:
        self._rows: DenseRows | SparseRows = SparseRows(self.dim)
        self._cap = 16
        self._n = 0
        self._keys = PackedIds("a vector snapshot")
        self._codes: SignCodes | None = None
        self._mapped = False  # whether rows, codes or ids are still views of a snapshot file

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
        """Whether search() currently scans sign codes first instead of every row."""
        return (self._codes is not None and self.approximate_above is not None
                and self._n >= self.approximate_above)

    @property
    def nbytes(self) -> int:
        """Bytes of the arrays this index holds (rows and codes; not the id mapping)."""
        return self._rows.nbytes + (self._codes.nbytes if self._codes is not None else 0)

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
        if n > self._cap:
            self._cap = capacity_for(self._cap, n)
            self._rows.reserve(self._cap)
            if self._codes is not None:
                self._codes.reserve(self._cap)

    def _store(self, rows: np.ndarray, block: np.ndarray) -> None:
        self._rows.set(rows, block)
        if self._codes is not None:
            self._codes.set(rows, block)
        rows_store = self._rows
        if isinstance(rows_store, SparseRows):
            # Dense vectors (a sentence-transformer's) are cheaper as a matrix: switch once
            # the entries cost 3/4 of one.
            if rows_store.entries * (rows_store.columns.itemsize + 4) + 12 * self._n \
                    >= 3 * self._n * self.dim:
                dense = DenseRows(self.dim, self._cap)
                for a in range(0, self._n, _BLOCK_ROWS):
                    b = min(a + _BLOCK_ROWS, self._n)
                    dense.m[a:b] = rows_store.dense(slice(a, b))
                self._rows = dense
            else:
                rows_store.compact(self._n)

    # ------------------------------------------------------------------ writes
    def _own(self) -> None:
        """Before the first write to an index loaded from a snapshot: copies of what it still
        reads from the file's mapping (rows, codes, ids), so that the mapping goes with them.
        A page of a mapping, once read, stays in the process's RSS while any view of the
        mapping lives, and a write copies the rows anyway (they grow): at 100k topics 287 MB
        of the unit vector file stayed resident beside their copies."""
        if not self._mapped:
            return
        self._mapped = False
        # room for a sixteenth more rows, not the quarter a growth adds (at 100k topics a
        # quarter of the rows and codes is 70 MB before any row needs it)
        self._cap = max(self._cap, self._n + max(16, self._n // 16))
        self._rows.reserve(self._cap)
        self._rows.own()
        if self._codes is not None:
            self._codes.reserve(self._cap)
        if self._keys.packed_now:
            blob, offsets = self._keys.packed()
            self._keys.adopt_packed(blob.copy(), offsets.copy(), self._n)

    def upsert(self, doc_id: str, vec) -> None:
        check_doc_id(doc_id)
        v = self._as_unit_rows(vec, "vector")
        if v.shape[0] != 1:
            raise InvalidInput("upsert takes one vector; use upsert_many for several")
        self._own()
        row = self._row_of.get(doc_id)
        if row is None:
            self._reserve(self._n + 1)
            row = self._n
            self._n += 1
            self._row_of[doc_id] = row
            self._id_of_row.append(doc_id)
        with single_threaded():
            self._store(np.array([row], dtype=np.int64), v)
            self._maybe_encode()

    def upsert_many(self, doc_ids: Iterable[str], vecs) -> None:
        """Bulk upsert (used when rebuilding from the database): one copy instead of n."""
        ids = list(doc_ids)
        for d in ids:
            check_doc_id(d)
        m = self._as_unit_rows(vecs, "vectors") if ids else np.zeros((0, self.dim), np.float32)
        if m.shape[0] != len(ids):
            raise InvalidInput(f"{len(ids)} ids but {m.shape[0]} vectors")
        if ids:
            self._own()
        if len(set(ids)) != len(ids):
            # Later duplicates win, as with repeated upsert() calls.
            last = {d: i for i, d in enumerate(ids)}
            keep = sorted(last.values())
            ids, m = [ids[i] for i in keep], m[keep]
        rows = np.fromiter(map(self._row_of.get, ids, repeat(-1)), dtype=np.int64,
                           count=len(ids))
        new = np.flatnonzero(rows < 0)
        if new.shape[0]:
            self._reserve(self._n + new.shape[0])
            rows[new] = np.arange(self._n, self._n + new.shape[0])
            for i in new.tolist():
                self._row_of[ids[i]] = self._n
                self._id_of_row.append(ids[i])
                self._n += 1
        with single_threaded():
            for a in range(0, len(ids), _BLOCK_ROWS):
                self._store(rows[a : a + _BLOCK_ROWS], m[a : a + _BLOCK_ROWS])
            self._maybe_encode()

    def remove(self, doc_id: str) -> None:
        """Forget doc_id (absent ids are ignored); the last row moves into its place."""
        if self._mapped and doc_id in self._row_of:
            self._own()
        row = self._row_of.pop(doc_id, None)
        if row is None:
            return
        last = self._n - 1
        if row != last:
            moved = self._id_of_row[last]
            self._rows.move(last, row)
            self._id_of_row[row] = moved
            self._row_of[moved] = row
            if self._codes is not None:
                self._codes.move(last, row)
        else:
            self._rows.drop(last)
        self._id_of_row.pop()
        self._n = last
        if isinstance(self._rows, SparseRows):
            self._rows.compact(self._n)
        if (self._codes is not None and self.approximate_above is not None
                and self._n < self.approximate_above // 2):
            self._codes = None  # far below the threshold: exact search, memory back

    def _maybe_encode(self) -> None:
        if self._codes is not None or self.approximate_above is None \
                or self._n < self.approximate_above:
            return
        codes = SignCodes(self.dim, self.code_bits, self._cap)
        for a in range(0, self._n, _BLOCK_ROWS):
            b = min(a + _BLOCK_ROWS, self._n)
            codes.set(slice(a, b), self._rows.dense(slice(a, b)))
        self._codes = codes

    # ------------------------------------------------------------------ reads
    def get(self, doc_id: str) -> np.ndarray | None:
        """A copy of the stored (normalised) vector, or None if doc_id is not indexed."""
        row = self._row_of.get(doc_id)
        return None if row is None else self._rows.dense(np.array([row]))[0].copy()

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
            return self._rows.dots(None, self._n, q), np.arange(self._n, dtype=np.int64)
        if 4 * rows.shape[0] >= self._n and not self._rows.sparse:
            # Gathering rows copies them before the product; for a large share of the index
            # the streaming product over all rows is cheaper (measured ~4x at 1k of 1k rows).
            return self._rows.dots(None, self._n, q)[rows], rows
        return self._rows.dots(rows, self._n, q), rows

    def _finish(self, q: np.ndarray, s32: np.ndarray, rows: np.ndarray, k: int | None,
                threshold: float | None = None) -> list[tuple[str, float]]:
        if threshold is None:
            keep = _near_top(s32, k, self._slack)
        else:
            keep = np.flatnonzero(s32 >= threshold - self._slack)
        rows = rows[keep]
        exact = _exact_scores(self._rows.dense(rows), q.astype(np.float64))
        if threshold is not None:
            hit = exact >= threshold
            exact, rows = exact[hit], rows[hit]
        return ranked(exact, rows, self._id_of_row, k)

    def search(
        self, vec, k: int | None = None, ids: Iterable[str] | None = None
    ) -> list[tuple[str, float]]:
        """Cosine similarity to vec, best first (ties by id), optionally only among `ids`.

        Approximate (sign codes first) when `approximate` is true, k is given and ids is not."""
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
        # at least 1024 rows: re-scoring them costs ~0.2 ms, and a share of a small index is
        # too few for sign codes (0.89 of the top 10 of 2.8k LoCoMo turns at 56 rows)
        share = 0 if self.candidate_share is None else math.ceil(self.candidate_share * self._n)
        return max(8 * k, 1024, math.ceil(self.candidate_scale * math.sqrt(self._n)), share)

    def _approximate_candidates(self, q: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
        assert self._codes is not None
        rows = self._codes.candidates(self._n, q, self._pool(k))
        return self._rows.dots(rows, self._n, q), rows

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
                exact = _exact_scores(self._rows.dense(rows), qs[j].astype(np.float64))
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
            s = self._rows.dense(slice(a, min(a + step, self._n))) @ qs.T  # (rows, queries)
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
        # sparse rows are densified here: O(n x dim) floats for the pass (topic vectors)
        vecs = self._rows.dense(slice(0, self._n) if ids is None else rows)
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
    # A loaded index keeps its ids as the file has them (UTF-8 and offsets) until a row is
    # first asked for by id or an id by row (PackedIds): a resolver that finds no title near
    # needs neither.
    @property
    def _id_of_row(self) -> list[str]:
        return self._keys.ids

    @property
    def _row_of(self) -> dict[str, int]:
        return self._keys.row_of

    def save(self, path: str | os.PathLike, stamp: Mapping[str, Any]) -> None:
        """Write this index to `path` (atomically), with the caller's JSON-able `stamp`.

        Codes are saved too (a loaded index need not recompute them: ~5 s at 1M rows)."""
        vector_file.save(self, path, stamp)

    @classmethod
    def load(cls, path: str | os.PathLike) -> tuple[VectorIndex, dict[str, Any]]:
        """(index, stamp) from a file written by save(); SnapshotError if it is unusable
        (gem/index/vector_file.py)."""
        return vector_file.load(cls, path)
