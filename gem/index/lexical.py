"""BM25 over text: gem's lexical index, updated incrementally and saved as a snapshot."""
from __future__ import annotations

import math
import os
import sys
from collections import Counter
from collections.abc import Mapping
from typing import Any

import numpy as np

from gem.errors import InvalidInput, SnapshotError
from gem.terms import search_terms
from gem.text import tokens

from .common import check_doc_id, check_k, ranked
from .snapfile import encode_strings, read_snapshot_file, snapshot_strings, write_snapshot_file

# How a LexicalIndex cuts text into terms, by name (the name is saved with a snapshot): the
# resolver's tokens, or search terms (stop words dropped, light stemming; gem/terms.py).
ANALYZERS = {"tokens": tokens, "search": search_terms}


class _LoadedPostings:
    """The postings of a LexicalIndex as loaded from a snapshot: read-only CSR arrays.

    Loading keeps them as arrays instead of building one dict entry per (term, document),
    which takes seconds at 100k documents, and writes never convert them: a document written
    after loading has its postings in the index's dicts, and removing a loaded document only
    marks its row dead here (its terms' live document counts drop by one). A term's postings
    are then the live rows of its slice here plus its dict, if any. save() merges both.
    """

    def __init__(self, terms: list[str], term_ptr: np.ndarray, rows: np.ndarray,
                 tf: np.ndarray, row_ptr: np.ndarray, row_terms: np.ndarray) -> None:
        self.terms = terms
        self.index_of = {t: i for i, t in enumerate(terms)}
        self.term_ptr = term_ptr.tolist()
        self.live_df = np.diff(term_ptr)
        self.rows = rows.astype(np.int64)
        self.tf = tf
        self.row_ptr = row_ptr
        self.row_terms = row_terms
        self.dead = np.zeros(row_ptr.shape[0] - 1, dtype=bool)
        self.n_dead = 0

    def df(self, term: str) -> int:
        i = self.index_of.get(term)
        return 0 if i is None else int(self.live_df[i])

    def arrays(self, term: str) -> tuple[np.ndarray, np.ndarray] | None:
        """(rows, tf as float64) of the term's live loaded postings, or None if it has none."""
        i = self.index_of.get(term)
        if i is None or self.live_df[i] == 0:
            return None
        a, b = self.term_ptr[i], self.term_ptr[i + 1]
        rows, tf = self.rows[a:b], self.tf[a:b]
        if self.n_dead:
            live = ~self.dead[rows]
            rows, tf = rows[live], tf[live]
        return rows, tf.astype(np.float64)

    def kill(self, row: int) -> list[str]:
        """Mark a loaded document's row dead; returns its terms."""
        a, b = int(self.row_ptr[row]), int(self.row_ptr[row + 1])
        ids = self.row_terms[a:b]
        self.live_df[ids] -= 1  # a term appears once per row, so this is a plain scatter
        self.dead[row] = True
        self.n_dead += 1
        return [self.terms[i] for i in ids.tolist()]


# Marks a row whose document is still in the loaded postings (see _LoadedPostings).
_ROW_IN_SNAPSHOT: tuple[str, ...] = ("<a row of the loaded postings>",)


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

    `save(path, stamp)` writes a snapshot and `LexicalIndex.load(path)` reads one back; a
    loaded index scores bit for bit like the saved one and stays updatable.
    """

    # Rare terms convert in microseconds; caching them as well would duplicate the whole
    # index in memory for no measurable gain.
    _CACHE_MIN_DF = 256

    def __init__(self, k1: float = 1.2, b: float = 0.75, analyzer: str = "tokens") -> None:
        if not (k1 >= 0 and math.isfinite(k1)) or not (0.0 <= b <= 1.0):
            raise InvalidInput(f"BM25 needs k1 >= 0 and b in [0, 1], got k1={k1!r}, b={b!r}")
        if analyzer not in ANALYZERS:
            raise InvalidInput(f"analyzer must be one of {sorted(ANALYZERS)}, got {analyzer!r}")
        self.k1 = float(k1)
        self.b = float(b)
        self.analyzer = analyzer
        self._terms = ANALYZERS[analyzer]
        self._reset()

    def _reset(self) -> None:
        self._postings: dict[str, dict[int, int]] = {}
        self._loaded: _LoadedPostings | None = None  # terms not in _postings live here
        # term -> (rows, tf, doc lengths of those rows); valid while the term's postings are
        # unchanged. A row's length only changes when its document is written, which also
        # touches (and so drops) every term of that document.
        self._arrays: dict[str, tuple[np.ndarray, np.ndarray, np.ndarray]] = {}
        self._row_of: dict[str, int] = {}
        self._id_of_row: list[str] = []  # "" for a free row
        self._free_rows: list[int] = []
        # Each row's distinct terms (to remove it), as a tuple of the interned strings the
        # postings are keyed by: a Counter and its own copies of the strings took ~0.6 KB a
        # document, most of a unit index's memory at 1M units.
        self._terms_of_row: list[tuple[str, ...] | None] = []
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
        self._reset()

    def _has_term(self, term: str) -> bool:
        return term in self._postings or (self._loaded is not None and self._loaded.df(term) > 0)

    def _df(self, term: str) -> int:
        p = self._postings.get(term)
        return (len(p) if p is not None else 0) + (
            self._loaded.df(term) if self._loaded is not None else 0)

    def upsert(self, doc_id: str, text: str) -> None:
        """Index `text` under doc_id, replacing what was indexed under it before."""
        check_doc_id(doc_id)
        if not isinstance(text, str):
            raise InvalidInput(f"document text must be a str, got {type(text).__name__}")
        terms = Counter(map(sys.intern, self._terms(text)))
        if doc_id in self._row_of:
            self.remove(doc_id)
        if self._free_rows:
            row = self._free_rows.pop()
            self._id_of_row[row] = doc_id
            self._terms_of_row[row] = tuple(terms)
        else:
            row = len(self._id_of_row)
            self._id_of_row.append(doc_id)
            self._terms_of_row.append(tuple(terms))
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
        counted = self._terms_of_row[row]
        assert counted is not None
        if counted is _ROW_IN_SNAPSHOT:
            for term in self._loaded.kill(row):  # type: ignore[union-attr]
                self._arrays.pop(term, None)
        else:
            for term in counted:
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
        check_k(k)
        n_docs = len(self._row_of)
        if n_docs == 0:
            return []
        # Sorted so that each document's score is summed in the same order however the index
        # was built: incremental updates and a rebuild then give bit-identical scores.
        terms = sorted({t for t in self._terms(query) if self._has_term(t)})
        if not terms:
            return []
        if max_df is not None:
            rare = [t for t in terms if self._df(t) <= max_df * n_docs]
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
        return ranked(acc[rows], rows, self._id_of_row, k)

    def search_covering(self, query: str, k: int | None = None, max_df: float | None = None,
                        ids: set[str] | None = None) -> list[tuple[str, float, float]]:
        """search(), with each document's coverage of the query: the idf-weighted share of the
        query's distinct terms the document contains, in [0, 1]. Terms no document has count
        at the highest idf (a query word nothing mentions is not covered), so coverage says
        how much of the question a unit answers on an absolute scale, where BM25 scores only
        compare documents within one query. With `ids`, only those documents are ranked."""
        if ids is not None:
            found = [x for x in self.search(query, None, max_df) if x[0] in ids][:k]
        else:
            found = self.search(query, k, max_df)
        if not found:
            return []
        n_docs = len(self._row_of)
        weights = {}
        for term in sorted(set(self._terms(query))):
            df = self._df(term)
            weights[term] = math.log(1.0 + (n_docs - df + 0.5) / (df + 0.5))
        total = math.fsum(weights.values())
        out = []
        for doc_id, score in found:
            have = self._terms_of_doc(doc_id)
            covered = math.fsum(w for term, w in weights.items() if term in have)
            out.append((doc_id, score, covered / total if total > 0 else 0.0))
        return out

    def sharing_rare_terms(self, doc_id: str, terms: int, max_df: int) -> list[tuple[str, int]]:
        """The other documents holding any of `doc_id`'s `terms` rarest terms (each in 2 to
        `max_df` documents), with how many of those terms each holds, most first, then by id.
        Costs the postings of those few rare terms, never a pass over the index."""
        if doc_id not in self._row_of:
            return []
        dfs = sorted((df, term) for term in self._terms_of_doc(doc_id)
                     if 2 <= (df := self._df(term)) <= max_df)
        shared: dict[int, int] = {}
        own = self._row_of[doc_id]
        for _, term in dfs[:terms]:
            for row in self._term_postings(term)[0].tolist():
                if row != own:
                    shared[row] = shared.get(row, 0) + 1
        found = [(self._id_of_row[row], n) for row, n in shared.items()]
        return sorted(found, key=lambda x: (-x[1], x[0]))

    def _terms_of_doc(self, doc_id: str) -> set[str] | tuple[str, ...]:
        row = self._row_of[doc_id]
        counted = self._terms_of_row[row]
        if counted is _ROW_IN_SNAPSHOT:
            loaded = self._loaded
            assert loaded is not None
            a, b = int(loaded.row_ptr[row]), int(loaded.row_ptr[row + 1])
            return {loaded.terms[i] for i in loaded.row_terms[a:b].tolist()}
        assert counted is not None
        return counted

    def _term_arrays(self, term: str) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        cached = self._arrays.get(term)
        if cached is not None:
            return cached
        rows, tf = self._term_postings(term)
        out = (rows, tf, self._doc_len[rows])
        if rows.shape[0] >= self._CACHE_MIN_DF:
            self._arrays[term] = out
        return out

    def _term_postings(self, term: str) -> tuple[np.ndarray, np.ndarray]:
        """(rows, tf as float64) of a term: loaded rows that are still live, then dict rows."""
        loaded = self._loaded.arrays(term) if self._loaded is not None else None
        p = self._postings.get(term)
        if p is None:
            assert loaded is not None
            return loaded
        df = len(p)
        rows = np.fromiter(p.keys(), dtype=np.int64, count=df)
        tf = np.fromiter(p.values(), dtype=np.float64, count=df)
        if loaded is None:
            return rows, tf
        return np.concatenate((loaded[0], rows)), np.concatenate((loaded[1], tf))

    # ------------------------------------------------------------------ snapshots
    def save(self, path: str | os.PathLike, stamp: Mapping[str, Any]) -> None:
        """Write this index to `path` (atomically), with the caller's JSON-able `stamp`."""
        loaded = self._loaded
        terms = sorted(set(self._postings) | (
            {t for t, i in loaded.index_of.items() if loaded.live_df[i] > 0}
            if loaded is not None else set()))
        rows_of_term, tf_of_term = [], []
        for t in terms:
            rows, tf = self._term_postings(t)
            order = np.argsort(rows, kind="stable")
            rows_of_term.append(rows[order])
            tf_of_term.append(tf[order])
        df = np.fromiter(map(len, rows_of_term), dtype=np.int64, count=len(terms))
        term_ptr = np.zeros(len(terms) + 1, dtype=np.int64)
        np.cumsum(df, out=term_ptr[1:])
        empty = np.zeros(0, dtype=np.int64)
        post_rows = np.concatenate(rows_of_term) if terms else empty
        post_tf = np.concatenate(tf_of_term) if terms else empty
        # The same postings by row (for removals after loading), in term order within a row.
        term_ids = np.repeat(np.arange(len(terms), dtype=np.int64), df)
        by_row = np.argsort(post_rows, kind="stable")
        n_rows = len(self._id_of_row)
        row_ptr = np.zeros(n_rows + 1, dtype=np.int64)
        np.cumsum(np.bincount(post_rows, minlength=n_rows), out=row_ptr[1:])
        ids_utf8, ids_offsets = encode_strings(self._id_of_row)
        terms_utf8, terms_offsets = encode_strings(terms)
        write_snapshot_file(path, "lexical", stamp,
                            {"k1": self.k1, "b": self.b, "analyzer": self.analyzer,
                             "total_len": self._total_len,
                             "rows": n_rows},
                            {"ids_utf8": ids_utf8, "ids_offsets": ids_offsets,
                             "free_rows": np.asarray(self._free_rows, dtype=np.int64),
                             "doc_len": self._doc_len[:n_rows],
                             "terms_utf8": terms_utf8, "terms_offsets": terms_offsets,
                             "term_ptr": term_ptr, "post_rows": post_rows.astype(np.int32),
                             "post_tf": post_tf.astype(np.int32),
                             "row_ptr": row_ptr, "row_terms": term_ids[by_row].astype(np.int32)})

    @classmethod
    def load(cls, path: str | os.PathLike) -> tuple[LexicalIndex, dict[str, Any]]:
        """(index, stamp) from a file written by save(); SnapshotError if it is unusable."""
        stamp, meta, a = read_snapshot_file(path, "lexical")
        try:
            ix = cls(meta["k1"], meta["b"], meta.get("analyzer", "tokens"))
            n_rows = int(meta["rows"])
            ids = snapshot_strings(a, "ids")
            terms = snapshot_strings(a, "terms")
            free = a["free_rows"].tolist()
            term_ptr, post_rows = a["term_ptr"], a["post_rows"]
            row_ptr = a["row_ptr"]
            if not (len(ids) == n_rows == a["doc_len"].shape[0] == row_ptr.shape[0] - 1
                    and term_ptr.shape[0] == len(terms) + 1
                    and term_ptr[-1] == post_rows.shape[0] == a["post_tf"].shape[0]
                    == a["row_terms"].shape[0] == row_ptr[-1]
                    and (post_rows.shape[0] == 0 or (0 <= post_rows.min()
                                                     and post_rows.max() < n_rows
                                                     and 0 <= a["row_terms"].min()
                                                     and a["row_terms"].max() < len(terms)))):
                raise ValueError("array sizes disagree")
            free_set = set(free)
            live = [(d, r) for r, d in enumerate(ids) if r not in free_set]
            ix._row_of = dict(live)
            if len(ix._row_of) != len(live) or len(free_set) != len(free) or any(
                    not 0 <= r < n_rows for r in free):
                raise ValueError("duplicate ids or bad free rows")
            ix._id_of_row = ids
            ix._free_rows = free
            ix._terms_of_row = [_ROW_IN_SNAPSHOT] * n_rows
            for r in free:
                ix._terms_of_row[r] = None
            ix._doc_len = np.zeros(max(16, n_rows), dtype=np.float64)
            ix._doc_len[:n_rows] = a["doc_len"]
            ix._total_len = int(meta["total_len"])
            ix._loaded = _LoadedPostings(terms, term_ptr, post_rows, a["post_tf"], row_ptr,
                                         a["row_terms"])
        except SnapshotError:
            raise
        except (KeyError, ValueError, TypeError) as e:
            raise SnapshotError(f"snapshot {str(path)!r} is inconsistent: {e}") from e
        return ix, stamp

