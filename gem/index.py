"""gem's own derived search indexes: BM25 over text and cosine search over embeddings.

The database is the single source of truth (specs/design.md §4): these indexes hold nothing that
cannot be rebuilt from it, are rebuilt when a database is opened and are updated only after a
commit succeeds. They are not thread-safe; the caller serialises writes, as it does for the
database itself.
"""
from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterable
from itertools import repeat

import numpy as np

from gem.errors import InvalidInput
from gem.text import tokens

__all__ = ["LexicalIndex", "VectorIndex"]


def _check_doc_id(doc_id: str) -> None:
    if not isinstance(doc_id, str):
        raise InvalidInput(f"document id must be a str, got {type(doc_id).__name__}")


def _check_k(k: int | None) -> None:
    if k is not None and (isinstance(k, bool) or not isinstance(k, int) or k < 0):
        raise InvalidInput(f"k must be a non-negative int or None, got {k!r}")


def _ranked(
    scores: np.ndarray, rows: np.ndarray, id_of_row: list[str], k: int | None
) -> list[tuple[str, float]]:
    """(id, score) for the best k of scores[j] (belonging to rows[j]), by score desc then id.

    Selection and ordering are done in numpy; only the k winners (plus any rows tied with the
    k-th score, which are needed to break ties by id correctly) become Python objects, and
    Python only sorts the ids inside each run of equal scores.
    """
    n = scores.shape[0]
    if n == 0 or k == 0:
        return []
    if k is not None and k < n:
        kth = np.partition(scores, n - k)[n - k]
        keep = np.flatnonzero(scores >= kth)
        scores, rows = scores[keep], rows[keep]
    order = np.argsort(-scores, kind="stable")
    s = scores[order]
    ids = [id_of_row[r] for r in rows[order].tolist()]
    if s.shape[0] > 1:
        same = s[1:] == s[:-1]
        if same.any():
            starts = np.flatnonzero(np.concatenate(([True], ~same)))
            ends = np.append(starts[1:], s.shape[0])
            for a, b in zip(starts.tolist(), ends.tolist()):
                if b - a > 1:
                    ids[a:b] = sorted(ids[a:b])
    out = list(zip(ids, s.tolist()))
    return out if k is None else out[:k]


class LexicalIndex:
    """Okapi BM25 (k1=1.2, b=0.75) over `doc_id -> text`, updated incrementally.

    idf is the Lucene form ln(1 + (N - df + 0.5) / (df + 0.5)), which stays positive for terms
    in more than half the documents (the classic form goes negative there, so a document
    containing a very common query word would rank below one that does not contain it).
    Query terms are deduplicated: "deadline deadline" asks the same thing as "deadline".

    A query costs time proportional to the postings of its terms, not to the corpus size:
    postings are term -> {row: tf}, document lengths live in a numpy array indexed by row and
    the average length is kept from a running total. The postings of frequent terms are also
    kept as numpy arrays between queries (dropped when the term's postings change), since
    converting a 90k-entry dict per query was half the query time at 100k documents.
    """

    # Rare terms convert in microseconds; caching them as well would duplicate the whole
    # index in memory for no measurable gain.
    _CACHE_MIN_DF = 256

    def __init__(self, k1: float = 1.2, b: float = 0.75) -> None:
        if not (k1 >= 0 and math.isfinite(k1)) or not (0.0 <= b <= 1.0):
            raise InvalidInput(f"BM25 needs k1 >= 0 and b in [0, 1], got k1={k1!r}, b={b!r}")
        self.k1 = float(k1)
        self.b = float(b)
        self._postings: dict[str, dict[int, int]] = {}
        # term -> (rows, tf, doc lengths of those rows); valid while the term's postings are
        # unchanged. A row's length only changes when its document is written, which also
        # touches (and so drops) every term of that document.
        self._arrays: dict[str, tuple[np.ndarray, np.ndarray, np.ndarray]] = {}
        self._row_of: dict[str, int] = {}
        self._id_of_row: list[str] = []  # "" for a free row
        self._free_rows: list[int] = []
        self._terms_of_row: list[Counter[str] | None] = []
        self._doc_len = np.zeros(16, dtype=np.float64)
        self._total_len = 0  # an int, so avgdl is exact and independent of update order

    def __len__(self) -> int:
        return len(self._row_of)

    def __contains__(self, doc_id: object) -> bool:
        return doc_id in self._row_of

    def __iter__(self):
        return iter(list(self._row_of))

    @property
    def avgdl(self) -> float:
        n = len(self._row_of)
        return self._total_len / n if n else 0.0

    def clear(self) -> None:
        self.__init__(self.k1, self.b)

    def upsert(self, doc_id: str, text: str) -> None:
        """Index `text` under doc_id, replacing what was indexed under it before."""
        _check_doc_id(doc_id)
        if not isinstance(text, str):
            raise InvalidInput(f"document text must be a str, got {type(text).__name__}")
        terms = Counter(tokens(text))
        if doc_id in self._row_of:
            self.remove(doc_id)
        if self._free_rows:
            row = self._free_rows.pop()
            self._id_of_row[row] = doc_id
            self._terms_of_row[row] = terms
        else:
            row = len(self._id_of_row)
            self._id_of_row.append(doc_id)
            self._terms_of_row.append(terms)
            if row >= self._doc_len.shape[0]:
                grown = np.zeros(2 * self._doc_len.shape[0], dtype=np.float64)
                grown[: self._doc_len.shape[0]] = self._doc_len
                self._doc_len = grown
        self._row_of[doc_id] = row
        length = sum(terms.values())
        self._doc_len[row] = length
        self._total_len += length
        postings = self._postings
        arrays = self._arrays
        for term, tf in terms.items():
            arrays.pop(term, None)
            p = postings.get(term)
            if p is None:
                postings[term] = {row: tf}
            else:
                p[row] = tf

    def remove(self, doc_id: str) -> None:
        """Forget doc_id; absent ids are ignored, so replaying a removal is harmless."""
        row = self._row_of.pop(doc_id, None)
        if row is None:
            return
        terms = self._terms_of_row[row]
        assert terms is not None
        for term in terms:
            self._arrays.pop(term, None)
            p = self._postings[term]
            del p[row]
            if not p:
                del self._postings[term]
        self._total_len -= int(self._doc_len[row])
        self._doc_len[row] = 0.0
        self._terms_of_row[row] = None
        self._id_of_row[row] = ""
        self._free_rows.append(row)

    def search(self, query: str, k: int | None = None,
               max_df: float | None = None) -> list[tuple[str, float]]:
        """Documents sharing at least one term with the query, by BM25 score desc then id.

        `max_df` (a share of the documents) drops query terms that occur in more documents
        than that, unless every term does: such terms add almost nothing to a score (their
        idf is near zero) but cost a pass over most of the index, and tie every document.
        """
        if not isinstance(query, str):
            raise InvalidInput(f"query must be a str, got {type(query).__name__}")
        _check_k(k)
        n_docs = len(self._row_of)
        if n_docs == 0:
            return []
        # Sorted so that each document's score is summed in the same order however the index
        # was built: incremental updates and a rebuild then give bit-identical scores.
        terms = sorted({t for t in tokens(query) if t in self._postings})
        if not terms:
            return []
        if max_df is not None:
            rare = [t for t in terms if len(self._postings[t]) <= max_df * n_docs]
            terms = rare or terms
        k1, b = self.k1, self.b
        avgdl = self._total_len / n_docs
        # acc is indexed by row, but only the rows in the query's postings are read or written
        # (a large np.zeros is calloc'ed, so untouched pages cost nothing), and a fresh one per
        # call keeps concurrent readers independent. A term's score is always > 0 (Lucene idf
        # > 0, tf >= 1), so acc == 0 means "row not seen yet"; that avoids a sort-based union.
        # avgdl > 0 here: a term with postings means some document has words.
        acc = np.zeros(len(self._id_of_row), dtype=np.float64)
        seen: list[np.ndarray] = []
        for term in terms:
            rows, tf, dl = self._term_arrays(term)
            df = rows.shape[0]
            idf = math.log(1.0 + (n_docs - df + 0.5) / (df + 0.5))
            norm = k1 * (1.0 - b + b * (dl / avgdl))
            term_scores = idf * (tf * (k1 + 1.0)) / (tf + norm)
            if seen:
                seen.append(rows[acc[rows] == 0.0])
            else:
                seen.append(rows)
            # Rows are unique within a term, so fancy-index += is a plain scatter-add. Terms
            # are added in sorted order, so every document's sum is formed in the same order
            # however the index was built.
            acc[rows] += term_scores
        rows = seen[0] if len(seen) == 1 else np.concatenate(seen)
        return _ranked(acc[rows], rows, self._id_of_row, k)

    def _term_arrays(self, term: str) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        cached = self._arrays.get(term)
        if cached is not None:
            return cached
        p = self._postings[term]
        df = len(p)
        rows = np.fromiter(p.keys(), dtype=np.int64, count=df)
        tf = np.fromiter(p.values(), dtype=np.float64, count=df)
        out = (rows, tf, self._doc_len[rows])
        if df >= self._CACHE_MIN_DF:
            self._arrays[term] = out
        return out


class VectorIndex:
    """Cosine search over vectors kept in one contiguous float32 matrix.

    Rows are packed (a removal moves the last row into the hole), so a search is a single
    matrix-vector product over the live rows. Vectors are L2-normalised on the way in and the
    query is normalised too, so the dot product is the cosine even if a caller's embedder is
    slightly off; a zero vector stays zero and is similar to nothing.
    """

    def __init__(self, dim: int) -> None:
        if isinstance(dim, bool) or not isinstance(dim, int) or dim < 1:
            raise InvalidInput(f"VectorIndex dim must be a positive int, got {dim!r}")
        self.dim = dim
        self._m = np.zeros((16, dim), dtype=np.float32)
        self._n = 0
        self._row_of: dict[str, int] = {}
        self._id_of_row: list[str] = []

    def __len__(self) -> int:
        return self._n

    def __contains__(self, doc_id: object) -> bool:
        return doc_id in self._row_of

    def __iter__(self):
        return iter(list(self._id_of_row))

    def clear(self) -> None:
        self.__init__(self.dim)

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
        while cap < n:
            cap *= 2
        grown = np.zeros((cap, self.dim), dtype=np.float32)
        grown[: self._n] = self._m[: self._n]
        self._m = grown

    def upsert(self, doc_id: str, vec) -> None:
        _check_doc_id(doc_id)
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

    def upsert_many(self, doc_ids: Iterable[str], vecs) -> None:
        """Bulk upsert (used when rebuilding from the database): one copy instead of n."""
        ids = list(doc_ids)
        for d in ids:
            _check_doc_id(d)
        m = self._as_unit_rows(vecs, "vectors") if ids else np.zeros((0, self.dim), np.float32)
        if m.shape[0] != len(ids):
            raise InvalidInput(f"{len(ids)} ids but {m.shape[0]} vectors")
        if len(set(ids)) != len(ids):
            # Later duplicates win, as with repeated upsert() calls.
            last = {d: i for i, d in enumerate(ids)}
            keep = sorted(last.values())
            ids, m = [ids[i] for i in keep], m[keep]
        existing = [(i, self._row_of[d]) for i, d in enumerate(ids) if d in self._row_of]
        if existing:
            src, dst = map(list, zip(*existing))
            self._m[dst] = m[src]
        new = [i for i, d in enumerate(ids) if d not in self._row_of]
        if new:
            self._reserve(self._n + len(new))
            self._m[self._n : self._n + len(new)] = m[new]
            for j, i in enumerate(new):
                self._row_of[ids[i]] = self._n + j
                self._id_of_row.append(ids[i])
            self._n += len(new)

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
        self._id_of_row.pop()
        self._m[last] = 0.0
        self._n = last

    def get(self, doc_id: str) -> np.ndarray | None:
        """A copy of the stored (normalised) vector, or None if doc_id is not indexed."""
        row = self._row_of.get(doc_id)
        return None if row is None else self._m[row].copy()

    def _scores(self, vec, ids: Iterable[str] | None) -> tuple[np.ndarray, np.ndarray]:
        q = self._as_unit_rows(vec, "query vector")
        if q.shape[0] != 1:
            raise InvalidInput("search takes one query vector")
        q = q[0]
        if ids is None:
            rows = np.arange(self._n, dtype=np.int64)
            return self._m[: self._n] @ q, rows
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
        if 4 * rows.shape[0] >= self._n:
            # Gathering rows copies them before the product; for a large share of the index
            # the streaming product over all rows is cheaper (measured ~4x at 1k of 1k rows).
            return (self._m[: self._n] @ q)[rows], rows
        return self._m[rows] @ q, rows

    def search(
        self, vec, k: int | None = None, ids: Iterable[str] | None = None
    ) -> list[tuple[str, float]]:
        """Cosine similarity to vec, best first (ties by id), optionally only among `ids`."""
        _check_k(k)
        scores, rows = self._scores(vec, ids)
        return _ranked(scores.astype(np.float64), rows, self._id_of_row, k)

    def most_similar(
        self, vec, threshold: float, ids: Iterable[str] | None = None
    ) -> list[tuple[str, float]]:
        """Every document with cosine >= threshold, best first (ties by id)."""
        if not isinstance(threshold, (int, float)) or math.isnan(threshold):
            raise InvalidInput(f"threshold must be a number, got {threshold!r}")
        scores, rows = self._scores(vec, ids)
        scores = scores.astype(np.float64)
        keep = np.flatnonzero(scores >= threshold)
        return _ranked(scores[keep], rows[keep], self._id_of_row, None)
