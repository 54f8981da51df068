"""The postings of gem's BM25 index as numpy segments: immutable, merged in a binary ladder.

A segment holds the documents of some rows twice over: by term (the postings, each term's
cut into blocks of BLOCK with the block's largest tf and shortest document, so a query can
bound what a block can add without reading it) and by row (each document's terms and tfs,
to score a candidate exactly and to remove a document). A posting of row r in segment s
counts only while `owner[r] == s.id`: rewriting or removing a document never touches a
segment, it changes `owner`, and merges drop the dead postings.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

# `owner` of a row whose document is in a LexicalIndex's write buffer, and of a free row.
BUFFER, FREE = -1, -2

# Postings per block: the unit a query skips or scores. Small blocks bound tighter; each block
# costs 8 bytes and a term's last block is partly empty.
BLOCK = 128


def ranges(starts: np.ndarray, lengths: np.ndarray) -> np.ndarray:
    """The indexes starts[i] .. starts[i] + lengths[i] - 1 for every i, concatenated."""
    total = int(lengths.sum())
    if total == 0:
        return np.zeros(0, dtype=np.int64)
    ends = np.cumsum(lengths)
    offsets = np.repeat(starts - (ends - lengths), lengths)
    return offsets + np.arange(total, dtype=np.int64)


def by_impact(term: np.ndarray, tf: np.ndarray, dl: np.ndarray, k1: float, b: float,
              avgdl: float) -> np.ndarray:
    """The order that groups postings by term (ascending) and, within a term, puts them in
    descending order of what they score now (to 20 bits), so that a term's blocks hold
    postings of like score and bound them tightly. Stable: postings of one term already in
    that order (merged runs) sort in time linear in their number of runs."""
    f = tf.astype(np.float64)
    impact = f / (f + k1 * (1.0 - b + b * dl / max(avgdl, 1e-9)))
    level = np.minimum((impact * (1 << 20)).astype(np.int64), (1 << 20) - 1)
    return np.argsort((term.astype(np.int64) << 20) | ((1 << 20) - 1 - level), kind="stable")


def tf_dtype(tf: np.ndarray) -> type:
    return np.uint16 if tf.shape[0] == 0 or int(tf.max()) < 1 << 16 else np.int32


@dataclass(eq=False)
class Segment:
    """Postings by term (`terms` sorted, `ptr` into `rows`/`tf`, blocks per term via
    `blk_ptr`) and documents by position (`docs`: their rows, `fwd_ptr` into
    `fwd_terms`/`fwd_tf`). Only `live_docs` and `live_postings` change after it is built."""

    id: int
    terms: np.ndarray       # int32, sorted term ids with postings here
    ptr: np.ndarray         # int64, len(terms) + 1
    rows: np.ndarray        # int32
    tf: np.ndarray          # uint16 or int32
    blk_ptr: np.ndarray     # int64, len(terms) + 1: each term's blocks
    blk_tf: np.ndarray      # the block's largest tf
    blk_dl: np.ndarray      # int32, the block's shortest document
    blk_same: np.ndarray    # bool: every posting of the block has that tf and length (so
    #                         its score is the block's bound: short documents, most blocks)
    docs: np.ndarray        # int32 rows, in the order of the forward index
    fwd_ptr: np.ndarray     # int64, len(docs) + 1
    fwd_terms: np.ndarray   # int32
    fwd_tf: np.ndarray      # uint16 or int32
    live_docs: int
    live_postings: int
    block: int              # postings per block

    @property
    def n_postings(self) -> int:
        return self.rows.shape[0]

    def slices_of(self, terms: np.ndarray) -> list[tuple[int, int, int, int] | None]:
        """For each term id (int32): (first posting, end, first block, end block), or None."""
        at = np.searchsorted(self.terms, terms)
        found = at < self.terms.shape[0]
        found[found] = self.terms[at[found]] == terms[found]
        out: list[tuple[int, int, int, int] | None] = [None] * terms.shape[0]
        i = at[found]
        for j, a, e, ba, be in zip(np.flatnonzero(found).tolist(), self.ptr[i].tolist(),
                                   self.ptr[i + 1].tolist(), self.blk_ptr[i].tolist(),
                                   self.blk_ptr[i + 1].tolist()):
            out[j] = (a, e, ba, be)
        return out


def build(seg_id: int, terms: np.ndarray, ptr: np.ndarray, rows: np.ndarray, tf: np.ndarray,
          docs: np.ndarray, fwd_ptr: np.ndarray, fwd_terms: np.ndarray, fwd_tf: np.ndarray,
          doc_len: np.ndarray, block: int = BLOCK) -> Segment:
    """A segment of live postings already grouped by term (`terms` sorted)."""
    df = np.diff(ptr)
    n_blocks = (df + block - 1) // block
    blk_ptr = np.zeros(terms.shape[0] + 1, dtype=np.int64)
    np.cumsum(n_blocks, out=blk_ptr[1:])
    # each block's first posting: its term's start plus BLOCK times its rank in the term
    rank = np.arange(int(blk_ptr[-1]), dtype=np.int64) - np.repeat(blk_ptr[:-1], n_blocks)
    starts = np.repeat(ptr[:-1], n_blocks) + rank * block
    dt = tf_dtype(tf)
    blk_tf: np.ndarray
    blk_dl: np.ndarray
    if starts.shape[0]:
        dl = doc_len[rows]
        blk_tf = np.maximum.reduceat(tf, starts).astype(dt)
        blk_dl = np.minimum.reduceat(dl, starts).astype(np.int32)
        same = (np.minimum.reduceat(tf, starts) == blk_tf) & \
            (np.maximum.reduceat(dl, starts) == blk_dl)
    else:
        blk_tf, blk_dl = np.zeros(0, dtype=dt), np.zeros(0, dtype=np.int32)
        same = np.zeros(0, dtype=bool)
    return Segment(seg_id, terms.astype(np.int32), ptr.astype(np.int64), rows.astype(np.int32),
                   tf.astype(dt), blk_ptr, blk_tf, blk_dl, same, docs.astype(np.int32),
                   fwd_ptr.astype(np.int64), fwd_terms.astype(np.int32),
                   fwd_tf.astype(tf_dtype(fwd_tf)), int(docs.shape[0]), int(rows.shape[0]), block)


def from_documents(seg_id: int, docs: np.ndarray, fwd_ptr: np.ndarray, fwd_terms: np.ndarray,
                   fwd_tf: np.ndarray, doc_len: np.ndarray, k1: float, b: float,
                   avgdl: float, block: int = BLOCK) -> Segment:
    """A segment of documents given by row; each term's postings in descending order of what
    they would score now (so its blocks hold postings of like score and bound tightly)."""
    lengths = np.diff(fwd_ptr)
    rows = np.repeat(docs, lengths)
    order = by_impact(fwd_terms, fwd_tf, doc_len[rows], k1, b, avgdl)
    t = fwd_terms[order]
    terms, ptr = group(t)
    return build(seg_id, terms, ptr, rows[order], fwd_tf[order], docs, fwd_ptr, fwd_terms,
                 fwd_tf, doc_len, block)


def group(sorted_terms: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(distinct terms, start of each and the end) of a sorted array of term ids."""
    n = sorted_terms.shape[0]
    if n == 0:
        return np.zeros(0, dtype=np.int32), np.zeros(1, dtype=np.int64)
    first = np.flatnonzero(np.concatenate(([True], sorted_terms[1:] != sorted_terms[:-1])))
    return sorted_terms[first], np.append(first, n).astype(np.int64)


def _live(seg: Segment, owner: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray,
                                                    np.ndarray, np.ndarray, np.ndarray]:
    """(live postings per term of the segment's `terms`, their rows, tfs; live docs, their
    term counts, the index of their forward entries) of a segment."""
    rows, tf = seg.rows, seg.tf
    counts = np.diff(seg.ptr)
    doc_keep = owner[seg.docs] == seg.id
    if seg.live_docs < seg.docs.shape[0]:
        keep = owner[rows] == seg.id
        rows, tf = rows[keep], tf[keep]
        counts = np.add.reduceat(keep, seg.ptr[:-1]) if counts.shape[0] else counts
    lengths = np.diff(seg.fwd_ptr)[doc_keep]
    fwd = ranges(seg.fwd_ptr[:-1][doc_keep], lengths)
    return counts.astype(np.int64), rows, tf, seg.docs[doc_keep], lengths, fwd


def merge(seg_id: int, older: Segment, newer: Segment | None, owner: np.ndarray,
          doc_len: np.ndarray, k1: float, b: float, avgdl: float) -> Segment:
    """The live postings of two segments (or of one) as one segment, each term's in impact
    order (`by_impact`; the two segments' runs are each in that order already)."""
    empty = np.zeros(0, dtype=np.int64)
    ca, ra, fa, da, la, xa = _live(older, owner)
    ta = older.terms
    if newer is None:
        tb, cb, rb, fb, db, lb, xb = (empty,) * 7
    else:
        tb = newer.terms
        cb, rb, fb, db, lb, xb = _live(newer, owner)
    terms = np.union1d(ta[ca > 0], tb[cb > 0]).astype(np.int32)
    # each segment's terms' places among the merged terms (a term left without a live
    # posting has a count of 0, so where it lands does not matter)
    ia = np.minimum(np.searchsorted(terms, ta), max(terms.shape[0] - 1, 0))
    ib = np.minimum(np.searchsorted(terms, tb), max(terms.shape[0] - 1, 0))
    count_a = np.zeros(terms.shape[0] + 1, dtype=np.int64)  # + 1: ia is 0 when no terms
    count_b = np.zeros(terms.shape[0] + 1, dtype=np.int64)
    count_a[ia[ca > 0]] = ca[ca > 0]
    count_b[ib[cb > 0]] = cb[cb > 0]
    ptr = np.zeros(terms.shape[0] + 1, dtype=np.int64)
    np.cumsum((count_a + count_b)[:-1], out=ptr[1:])
    # a posting's place: its term's start plus its rank among its segment's postings of the
    # term, after the older segment's ones for the newer
    pa = np.repeat(ptr[ia] - (np.cumsum(ca) - ca), ca) + np.arange(ra.shape[0])
    pb = np.repeat(ptr[ib] + count_a[ib] - (np.cumsum(cb) - cb), cb) + \
        np.arange(rb.shape[0])
    n = int(ptr[-1])
    dt = np.int32 if (older.tf.dtype == np.int32 or (newer is not None and
                                                     newer.tf.dtype == np.int32)) else np.uint16
    rows = np.empty(n, dtype=np.int32)
    tf = np.empty(n, dtype=dt)
    rows[pa], rows[pb] = ra, rb
    tf[pa], tf[pb] = fa, fb
    order = by_impact(np.repeat(np.arange(terms.shape[0]), np.diff(ptr)), tf, doc_len[rows],
                      k1, b, avgdl)
    rows, tf = rows[order], tf[order]
    fwd_ptr = np.zeros(da.shape[0] + db.shape[0] + 1, dtype=np.int64)
    np.cumsum(np.concatenate((la, lb)), out=fwd_ptr[1:])
    fwd_terms = older.fwd_terms[xa] if newer is None else np.concatenate(
        (older.fwd_terms[xa], newer.fwd_terms[xb]))
    fwd_tf = older.fwd_tf[xa] if newer is None else np.concatenate(
        (older.fwd_tf[xa], newer.fwd_tf[xb]))
    return build(seg_id, terms, ptr, rows, tf, np.concatenate((da, db)), fwd_ptr, fwd_terms,
                 fwd_tf, doc_len, older.block)
