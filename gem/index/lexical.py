"""BM25 over text: gem's lexical index, updated incrementally and saved as a snapshot."""
from __future__ import annotations

import itertools
import math
import os
from collections import Counter
from collections.abc import Mapping
from typing import Any

import numpy as np

from gem.errors import InvalidInput
from gem.terms import search_terms
from gem.text import tokens

from . import levels, lexical_file, postings, pruned
from .common import check_doc_id, check_k, id_key, id_keys, ranked
from .packed import packed_of
from .postings import BLOCK, Segment, ranges

# How a LexicalIndex cuts text into terms, by name (the name is saved with a snapshot): the
# resolver's tokens, or search terms (stop words dropped, light stemming; gem/terms.py).
ANALYZERS = {"tokens": tokens, "search": search_terms}

_BUFFER, _FREE = postings.BUFFER, postings.FREE


class LexicalIndex:
    """Okapi BM25 (k1=1.2, b=0.75) over `doc_id -> text`, updated incrementally.

    idf is the Lucene form ln(1 + (N - df + 0.5) / (df + 0.5)), which stays positive for terms
    in more than half the documents (the classic form goes negative there, so a document
    containing a very common query word would rank below one that does not contain it).
    Query terms are deduplicated: "deadline deadline" asks the same thing as "deadline".

    Postings are numpy segments (gem/index/postings.py): a write goes to a small buffer of
    dicts, which becomes a segment when it holds `_BUFFER_POSTINGS` postings; segments merge in
    a binary ladder (a posting is copied O(log n) times) and drop the postings of rewritten
    and removed documents as they do. A document costs ~12 bytes a distinct term, against
    ~100 for the dict entries per (term, document) this index held before.

    A query for the best k (gem/index/pruned.py) scores blocks of postings in descending
    order of the most they can add (a block's largest tf and shortest document bound its
    scores) and each document it meets exactly, from the document's own terms; it stops when the k-th best score found
    exceeds what any document not yet met could reach. Where the blocks show it could not stop
    early (short documents over a small vocabulary: a term's postings score a few values, and
    thousands of documents tie), it makes one pass over the postings instead, summing small
    integer codes of those values (gem/index/levels.py). The result is the exhaustive one, bit
    for bit (same scores, same order, ties by id): every score is summed over the query's terms
    in sorted order, however it was found.

    `save(path, stamp)` writes a snapshot and `LexicalIndex.load(path)` reads one back; a
    loaded index scores bit for bit like the saved one and stays updatable.
    """

    # Postings the write buffer holds before it becomes a segment (~1.5 MB of dicts).
    _BUFFER_POSTINGS = 16384
    # A query whose terms have fewer postings than this is scored exhaustively: reading blocks
    # by their bound costs more per posting than a pass over all of them, and pays only when a
    # pass is long (bench/lexical.py: at 100k documents top-10 p50 4.3 ms pruned against 2-3 ms
    # for a pass; at 1M documents 106 against 360 ms for queries with a very common term).
    _EXHAUSTIVE_BELOW = 1 << 18
    # The share of the query terms' postings a pruned query reads before it gives up for a
    # pass over all of them (reading a block then scoring what it met costs more than a pass).
    _PRUNED_AT_MOST = 0.5
    _BLOCK = BLOCK
    _CODED_FROM = levels.CODED_FROM
    # No merge makes a segment of more live postings than this: a merge runs inside a write,
    # and one of 4M postings takes ~0.5 s; beyond it, segments of this size accumulate.
    _MERGE_AT_MOST = 1 << 22

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
        self._term_id: dict[str, int] = {}
        self._vocab: list[str] = []
        # live documents per term id in segments (the write buffer's are its dicts' sizes)
        self._df = np.zeros(64, dtype=np.int64)
        self._row_of: dict[str, int] = {}
        self._id_of_row: list[str] = []  # "" for a free row
        self._free_rows: list[int] = []
        self._doc_len = np.zeros(16, dtype=np.float64)  # float: scoring reads it as one
        self._owner = np.full(16, _FREE, dtype=np.int32)  # the segment id holding each row
        self._pos = np.zeros(16, dtype=np.int32)  # the row's place in its segment's documents
        # id_keys by row, kept as rows are written: a loaded index's are built by the first
        # query with a large tie (`_id_keys`, None until then). Built there for an index
        # written in this process, they were half of the first query after a bulk load.
        self._keys: np.ndarray | None = np.zeros(16, dtype=np.uint64)
        self._total_len = 0  # an int, so avgdl is exact and independent of update order
        self._segments: list[Segment] = []  # oldest first
        self._next_segment = 0
        # the write buffer: row -> (term ids, tfs), and term id -> {row: tf}
        self._buf_docs: dict[int, tuple[tuple[int, ...], tuple[int, ...]]] = {}
        self._buf_post: dict[int, dict[int, int]] = {}
        self._buf_n = 0

    def __len__(self) -> int:
        return len(self._row_of)

    def __contains__(self, doc_id: object) -> bool:
        return doc_id in self._row_of

    def __iter__(self):
        return iter(list(self._row_of))

    @property
    def rows(self) -> Mapping[str, int]:
        """doc id -> its row, which stays its own until the document is rewritten or removed
        (so other columns about the documents can be kept by row). Read only."""
        return self._row_of

    @property
    def avgdl(self) -> float:
        n = len(self._row_of)
        return self._total_len / n if n else 0.0

    def clear(self) -> None:
        self._reset()

    def _df_of(self, term: str) -> int:
        tid = self._term_id.get(term)
        return 0 if tid is None else self._df_id(tid)

    def _df_id(self, tid: int) -> int:
        p = self._buf_post.get(tid)
        return int(self._df[tid]) + (0 if p is None else len(p))

    # ------------------------------------------------------------------ writes
    def _intern(self, term: str) -> int:
        tid = self._term_id.get(term)
        if tid is None:
            tid = len(self._vocab)
            self._term_id[term] = tid
            self._vocab.append(term)
            if tid >= self._df.shape[0]:
                self._df = np.concatenate((self._df, np.zeros_like(self._df)))
        return tid

    def _new_row(self, doc_id: str) -> int:
        if self._free_rows:
            row = self._free_rows.pop()
            self._id_of_row[row] = doc_id
        else:
            row = len(self._id_of_row)
            self._id_of_row.append(doc_id)
            if row >= self._doc_len.shape[0]:
                n = 2 * self._doc_len.shape[0]
                self._doc_len = np.concatenate((self._doc_len, np.zeros_like(self._doc_len)))
                self._owner = np.concatenate((self._owner,
                                              np.full(n // 2, _FREE, dtype=np.int32)))
                self._pos = np.concatenate((self._pos, np.zeros_like(self._pos)))
        if self._keys is not None:
            if row >= self._keys.shape[0]:
                self._keys = np.concatenate((self._keys, np.zeros_like(self._keys)))
            self._keys[row] = id_key(doc_id)
        return row

    def _id_keys(self) -> np.ndarray:
        if self._keys is None:
            packed = packed_of(self._id_of_row)
            self._keys = id_keys(self._id_of_row) if packed is None else packed.prefix_keys()
        return self._keys

    def upsert(self, doc_id: str, text: str) -> None:
        """Index `text` under doc_id, replacing what was indexed under it before."""
        check_doc_id(doc_id)
        if not isinstance(text, str):
            raise InvalidInput(f"document text must be a str, got {type(text).__name__}")
        counts = Counter(self._terms(text))
        if doc_id in self._row_of:
            self.remove(doc_id)
        row = self._new_row(doc_id)
        self._row_of[doc_id] = row
        known = self._term_id
        tids = tuple([known[t] if t in known else self._intern(t) for t in counts])
        tfs = tuple(counts.values())
        self._buf_docs[row] = (tids, tfs)
        buf = self._buf_post
        for tid, tf in zip(tids, tfs):
            p = buf.get(tid)
            if p is None:
                buf[tid] = {row: tf}
            else:
                p[row] = tf
        length = sum(tfs)
        self._doc_len[row] = length
        self._total_len += length
        self._owner[row] = _BUFFER
        self._buf_n += len(tids)
        if self._buf_n >= self._BUFFER_POSTINGS:
            self._flush()

    def remove(self, doc_id: str) -> None:
        """Forget doc_id; absent ids are ignored, so replaying a removal is harmless."""
        row = self._row_of.pop(doc_id, None)
        if row is None:
            return
        owner = int(self._owner[row])
        seg = None
        if owner == _BUFFER:
            tids, _ = self._buf_docs.pop(row)
            for tid in tids:
                p = self._buf_post[tid]
                del p[row]
                if not p:
                    del self._buf_post[tid]
            self._buf_n -= len(tids)
        else:
            seg = self._segment(owner)
            pos = int(self._pos[row])
            terms = seg.fwd_terms[int(seg.fwd_ptr[pos]):int(seg.fwd_ptr[pos + 1])]
            self._df[terms] -= 1
            seg.live_docs -= 1
            seg.live_postings -= terms.shape[0]
        self._total_len -= int(self._doc_len[row])
        self._doc_len[row] = 0
        self._owner[row] = _FREE
        self._id_of_row[row] = ""
        self._free_rows.append(row)
        if seg is not None:
            self._tidy(seg)

    def _segment(self, seg_id: int) -> Segment:
        for seg in self._segments:
            if seg.id == seg_id:
                return seg
        raise AssertionError(f"no segment {seg_id}")

    def _adopt(self, seg: Segment, replacing: list[Segment]) -> None:
        """Put `seg` where `replacing` were (they hold no live document it lacks)."""
        at = self._segments.index(replacing[0]) if replacing else len(self._segments)
        self._segments[at:at + len(replacing)] = [seg] if seg.live_docs else []
        self._owner[seg.docs] = seg.id
        self._pos[seg.docs] = np.arange(seg.docs.shape[0], dtype=np.int32)

    def _next_id(self) -> int:
        self._next_segment += 1
        return self._next_segment

    def _tidy(self, seg: Segment) -> None:
        """A segment with no live document goes; one mostly dead is rewritten (each posting is
        copied once per halving of its segment, so removals stay O(1) amortised)."""
        if seg.live_docs == 0:
            self._segments.remove(seg)
        elif seg.n_postings > self._BUFFER_POSTINGS and 2 * seg.live_postings < seg.n_postings:
            self._adopt(postings.merge(self._next_id(), seg, None, self._owner, self._doc_len,
                                       self.k1, self.b, self.avgdl), [seg])

    def _flush(self) -> None:
        """The write buffer becomes a segment; then the ladder: while the segment before the
        newest holds no more live postings than it, the two merge (up to `_MERGE_AT_MOST`)."""
        if not self._buf_docs:
            return
        docs = np.fromiter(self._buf_docs, dtype=np.int64, count=len(self._buf_docs))
        entries = list(self._buf_docs.values())
        lengths = np.fromiter(map(len, (t for t, _ in entries)), dtype=np.int64,
                              count=len(entries))
        fwd_ptr = np.zeros(docs.shape[0] + 1, dtype=np.int64)
        np.cumsum(lengths, out=fwd_ptr[1:])
        total = int(fwd_ptr[-1])
        fwd_terms = np.fromiter(itertools.chain.from_iterable(t for t, _ in entries),
                                dtype=np.int32, count=total)
        fwd_tf = np.fromiter(itertools.chain.from_iterable(f for _, f in entries),
                             dtype=np.int64, count=total)
        seg = postings.from_documents(self._next_id(), docs, fwd_ptr, fwd_terms, fwd_tf,
                                      self._doc_len, self.k1, self.b, self.avgdl, self._BLOCK)
        flushed, counts = np.unique(fwd_terms, return_counts=True)
        self._df[flushed] += counts
        self._buf_docs, self._buf_post, self._buf_n = {}, {}, 0
        self._adopt(seg, [])
        segs = self._segments
        while len(segs) >= 2 and segs[-2].live_postings <= segs[-1].live_postings and \
                segs[-2].live_postings + segs[-1].live_postings <= self._MERGE_AT_MOST:
            older, newer = segs[-2], segs[-1]
            self._adopt(postings.merge(self._next_id(), older, newer, self._owner,
                                       self._doc_len, self.k1, self.b, self.avgdl),
                        [older, newer])

    # ------------------------------------------------------------------ queries
    def _query_terms(self, query: str, max_df: float | None) -> list[tuple[int, float]]:
        """(term id, idf) of the query's terms that some document has, sorted by term so that
        each document's score is summed in the same order however the index was built:
        incremental updates and a rebuild then give bit-identical scores."""
        if not isinstance(query, str):
            raise InvalidInput(f"query must be a str, got {type(query).__name__}")
        n_docs = len(self._row_of)
        terms = sorted({t for t in self._terms(query) if self._df_of(t) > 0})
        if max_df is not None:
            rare = [t for t in terms if self._df_of(t) <= max_df * n_docs]
            terms = rare or terms
        out = []
        for t in terms:
            df = self._df_of(t)
            out.append((self._term_id[t], math.log(1.0 + (n_docs - df + 0.5) / (df + 0.5))))
        return out

    def _bm25(self, idf: float | np.ndarray, tf: np.ndarray, dl: np.ndarray,
              avgdl: float) -> np.ndarray:
        """BM25 of one term for postings of tfs `tf` in documents of lengths `dl` (any dtype):
        the one expression every path uses, so that scores and bounds agree bit for bit."""
        k1, b = self.k1, self.b
        tf = tf.astype(np.float64)
        norm = k1 * (1.0 - b + b * (dl.astype(np.float64, copy=False) / avgdl))
        return idf * (tf * (k1 + 1.0)) / (tf + norm)

    def _scores(self, idf: float, tf: np.ndarray, rows: np.ndarray, avgdl: float) -> np.ndarray:
        """BM25 of one term for postings (tf, rows)."""
        return self._bm25(idf, tf, self._doc_len[rows], avgdl)

    def _segment_scores(self, seg: Segment, where: tuple[int, int, int, int], idf: float,
                        avgdl: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(live rows, BM25, values holding every score) of a term's postings in a segment.
        A block whose postings all have its tf and length scores its bound, computed once:
        with short documents over a small vocabulary, nearly every block (and no gather of
        document lengths)."""
        a, e, ba, be = where
        rows = seg.rows[a:e]
        same = seg.blk_same[ba:be]
        mixed = np.flatnonzero(~same)
        bound = self._bm25(idf, seg.blk_tf[ba:be], seg.blk_dl[ba:be], avgdl)
        sizes = np.full(be - ba, seg.block, dtype=np.int64)
        sizes[-1] = e - a - seg.block * (be - ba - 1)
        scores = np.repeat(bound, sizes)
        values = np.unique(bound[same])
        if mixed.shape[0]:
            at = ranges(seg.block * mixed, sizes[mixed])
            scores[at] = self._scores(idf, seg.tf[a:e][at], rows[at], avgdl)
            values = np.concatenate((values, scores[at]))
        rows, scores = self._live(seg, rows, scores)
        return rows.astype(np.intp), scores, values

    def _slices(self, terms: list[tuple[int, float]]
                ) -> list[list[tuple[int, int, int, int] | None]]:
        """Per segment, per query term: where its postings and blocks are, if it has any."""
        ids = np.array([t for t, _ in terms], dtype=np.int32)
        return [seg.slices_of(ids) for seg in self._segments]

    def _buffer_postings(self, tid: int) -> tuple[np.ndarray, np.ndarray]:
        p = self._buf_post.get(tid)
        if p is None:
            return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)
        return (np.fromiter(p.keys(), dtype=np.int64, count=len(p)),
                np.fromiter(p.values(), dtype=np.int64, count=len(p)))

    def _live(self, seg: Segment, rows: np.ndarray, *rest: np.ndarray) -> tuple[np.ndarray, ...]:
        if seg.live_docs == seg.docs.shape[0]:
            return (rows, *rest)
        keep = self._owner[rows] == seg.id
        return (rows[keep], *(a[keep] for a in rest))

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
        if not self._row_of:
            return []
        terms = self._query_terms(query, max_df)
        if not terms or k == 0:
            return []
        # avgdl > 0 here: a term with postings means some document has words.
        avgdl = self._total_len / len(self._row_of)
        if k is None or sum(self._df_id(t) for t, _ in terms) < self._EXHAUSTIVE_BELOW:
            return self._exhaustive(terms, k, avgdl)
        return pruned.top_k(self, terms, k, avgdl)

    def _exhaustive(self, terms: list[tuple[int, float]], k: int | None,
                    avgdl: float) -> list[tuple[str, float]]:
        rows: list[np.ndarray] = []
        scores: list[np.ndarray] = []
        values: list[np.ndarray | None] = []  # None: too many to count levels
        found = self._slices(terms)
        for q, (tid, idf) in enumerate(terms):
            here: list[tuple[Segment, tuple[int, int, int, int]]] = []
            for seg, w in zip(self._segments, found):
                at = w[q]
                if at is not None:
                    here.append((seg, at))
            # one array per term: numpy's calls cost more than their copies here
            if self._df_id(tid) < self._CODED_FROM or 2 * sum(
                    int(np.count_nonzero(seg.blk_same[at[2]:at[3]])) for seg, at in here) < \
                    sum(at[3] - at[2] for _, at in here):
                # few postings, or text of varied lengths (mostly mixed blocks): every posting
                # is scored, all at once
                post: list[tuple[np.ndarray, ...]] = [self._buffer_postings(tid)]
                post += [self._live(seg, seg.rows[at[0]:at[1]], seg.tf[at[0]:at[1]])
                         for seg, at in here]
                # of intp: numpy casts an int32 index array again at each fancy index
                r = np.concatenate([p[0] for p in post]).astype(np.intp, copy=False)
                s = self._scores(idf, np.concatenate([p[1] for p in post]), r, avgdl)
                rows.append(r)
                scores.append(s)
                values.append(s if s.shape[0] <= levels.VALUES else None)
                continue
            buf_rows, tf = self._buffer_postings(tid)
            buf_scores = self._scores(idf, tf, buf_rows, avgdl)
            parts = [(buf_rows.astype(np.intp), buf_scores, buf_scores)]
            parts += [self._segment_scores(seg, at, idf, avgdl) for seg, at in here]
            rows.append(np.concatenate([p[0] for p in parts]))
            scores.append(np.concatenate([p[1] for p in parts]))
            values.append(np.concatenate([p[2] for p in parts]))
        few = sum(r.shape[0] for r in rows) < self._CODED_FROM
        union, total = levels.summed(rows, scores, len(self._id_of_row),
                                     None if few else levels.levels(values))
        return ranked(total, union, self._id_of_row, k, self._id_keys)

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
            df = self._df_of(term)
            weights[term] = math.log(1.0 + (n_docs - df + 0.5) / (df + 0.5))
        total = math.fsum(weights.values())
        out = []
        for doc_id, score in found:
            have = self._term_ids_of(self._row_of[doc_id])
            covered = math.fsum(w for term, w in weights.items()
                                if self._term_id.get(term, -1) in have)
            out.append((doc_id, score, covered / total if total > 0 else 0.0))
        return out

    def sharing_rare_terms(self, doc_id: str, terms: int, max_df: int) -> list[tuple[str, int]]:
        """The other documents holding any of `doc_id`'s `terms` rarest terms (each in 2 to
        `max_df` documents), with how many of those terms each holds, most first, then by id.
        Costs the postings of those few rare terms, never a pass over the index."""
        own = self._row_of.get(doc_id)
        if own is None:
            return []
        rare = sorted((df, self._vocab[tid], tid) for tid in self._term_ids_of(own)
                      if 2 <= (df := self._df_id(tid)) <= max_df)
        shared: dict[int, int] = {}
        for _, _, tid in rare[:terms]:
            for row in self._term_rows(tid).tolist():
                if row != own:
                    shared[row] = shared.get(row, 0) + 1
        found = [(self._id_of_row[row], n) for row, n in shared.items()]
        return sorted(found, key=lambda x: (-x[1], x[0]))

    def _term_rows(self, tid: int) -> np.ndarray:
        """The live rows holding term id `tid`, from the write buffer and every segment."""
        parts = [self._buffer_postings(tid)[0]]
        for seg, where in zip(self._segments, self._slices([(tid, 0.0)])):
            if where[0] is not None:
                a, b = where[0][0], where[0][1]  # type: ignore[index]
                parts.append(self._live(seg, seg.rows[a:b])[0].astype(np.int64, copy=False))
        return np.concatenate(parts)

    def _term_ids_of(self, row: int) -> set[int]:
        owner = int(self._owner[row])
        if owner == _BUFFER:
            return set(self._buf_docs[row][0])
        seg = self._segment(owner)
        pos = int(self._pos[row])
        return set(seg.fwd_terms[int(seg.fwd_ptr[pos]):int(seg.fwd_ptr[pos + 1])].tolist())

    # ------------------------------------------------------------------ snapshots
    def save(self, path: str | os.PathLike, stamp: Mapping[str, Any]) -> None:
        """Write this index to `path` (atomically), with the caller's JSON-able `stamp`
        (gem/index/lexical_file.py)."""
        lexical_file.save(self, path, stamp)

    @classmethod
    def load(cls, path: str | os.PathLike) -> tuple[LexicalIndex, dict[str, Any]]:
        """(index, stamp) from a file written by save(); SnapshotError if it is unusable."""
        return lexical_file.load(cls, path)
