"""The pruned search of gem's BM25 index (gem/index/lexical.py): the best k of a query whose
terms have many postings, from the blocks that can still change the answer.

Blocks of postings are read in descending order of the most they can add, each document met
gathering a partial score; the documents that can still reach the k-th best are then scored
exactly from their own terms, so the answer is the exhaustive one bit for bit. Where the
blocks show it could not stop early, it hands over to the index's exhaustive pass.
"""
from __future__ import annotations

import math
from typing import TYPE_CHECKING

import numpy as np

from . import levels
from .common import _kth_largest, ranked
from .postings import ranges

if TYPE_CHECKING:
    from .lexical import LexicalIndex


def top_k(ix: LexicalIndex, terms: list[tuple[int, float]], k: int,
          avgdl: float) -> list[tuple[str, float]]:
    """The best k: blocks are read in descending order of their bound, adding to each
    document met a partial score and a bit per term, until the k-th best partial score
    exceeds the most a document not met yet could reach (the sum over terms of their best
    block left). Then the documents met whose partial score plus the bounds of the terms
    they have not been met in can still reach it are scored exactly."""
    if len(terms) > 62:  # a bit per term in an int64
        return ix._exhaustive(terms, k, avgdl)
    k1, b = ix.k1, ix.b
    idf = np.array([i for _, i in terms], dtype=np.float64)
    # every block of the query's terms: its bound, segment, postings and term
    ub, seg_of, start, end, term_of, same_of = [], [], [], [], [], []
    found = ix._slices(terms)
    for q in range(len(terms)):
        for s, seg in enumerate(ix._segments):
            where = found[s][q]
            if where is None:
                continue
            a, e, ba, be = where
            tf = seg.blk_tf[ba:be].astype(np.float64)
            dl = seg.blk_dl[ba:be].astype(np.float64)
            ub.append(idf[q] * (tf * (k1 + 1.0)) / (tf + k1 * (1.0 - b + b * (dl / avgdl))))
            same_of.append(seg.blk_same[ba:be])
            first = a + seg.block * np.arange(be - ba, dtype=np.int64)
            start.append(first)
            end.append(np.minimum(first + seg.block, e))
            seg_of.append(np.full(be - ba, s, dtype=np.int64))
            term_of.append(np.full(be - ba, q, dtype=np.int64))
    if ub:
        bound = np.concatenate(ub)
        order = np.argsort(-bound, kind="stable")
        bound, seg_b, term_b = bound[order], np.concatenate(seg_of)[order], \
            np.concatenate(term_of)[order]
        start_b, end_b = np.concatenate(start)[order], np.concatenate(end)[order]
        size_b = end_b - start_b
        budget = ix._PRUNED_AT_MOST * int(size_b.sum())
        theta = levels.kth_of_like_blocks(bound, term_b, size_b,
                                          np.concatenate(same_of)[order], k)
        if theta > 0.0 and levels.unmet_below(bound, term_b, size_b, 0, theta) > budget:
            return ix._exhaustive(terms, k, avgdl)
    n = len(ix._id_of_row)
    partial = np.zeros(n, dtype=np.float64)
    bits = np.zeros(n, dtype=np.int64)
    # the write buffer is small: its documents are scored outright, in term order (so
    # exactly), and they have no posting left in any block
    met: list[np.ndarray] = []
    for tid, i in terms:
        rows, tf = ix._buffer_postings(tid)
        met.append(rows[bits[rows] == 0])
        bits[rows] = -1
        partial[rows] += ix._scores(i, tf, rows, avgdl)
    buffered = np.concatenate(met)
    rest = np.zeros(len(terms), dtype=np.float64)  # each term's best block not read
    if ub:
        done, n_blocks, read = 0, bound.shape[0], 0
        batch = max(2, (4 * k) // ix._BLOCK + 1)
        while done < n_blocks:
            read += int((end_b[done:done + batch] - start_b[done:done + batch]).sum())
            if read > budget:
                return ix._exhaustive(terms, k, avgdl)
            upto = min(n_blocks, done + batch)
            batch *= 2
            for s in np.unique(seg_b[done:upto]).tolist():
                seg = ix._segments[s]
                pick = done + np.flatnonzero(seg_b[done:upto] == s)
                lengths = end_b[pick] - start_b[pick]
                at = ranges(start_b[pick], lengths)
                q_of = np.repeat(term_b[pick], lengths)
                rows, tf, q_of = ix._live(seg, seg.rows[at].astype(np.intp), seg.tf[at],
                                            q_of)
                for q in np.unique(q_of).tolist():
                    mine = q_of == q
                    r = rows[mine]  # a row once per term: plain scatters
                    met.append(r[bits[r] == 0])
                    bits[r] |= 1 << q
                    partial[r] += ix._scores(float(idf[q]), tf[mine], r, avgdl)
            done = upto
            rest[:] = 0.0
            left, first = np.unique(term_b[done:], return_index=True)
            rest[left] = bound[done + first]
            if done == n_blocks:
                break
            theta = _kth(partial, met, k)
            if theta > math.fsum(rest.tolist()) * (1.0 + 1e-8):
                # no document left unmet can enter; stop once scoring the ones met that
                # still could costs less than reading the next batch of blocks
                rows = _reaching(partial, bits, met, rest, k)
                nxt = slice(done, done + batch)
                if rows.shape[0] * avgdl <= int((end_b[nxt] - start_b[nxt]).sum()):
                    break
            elif theta > 0.0 and \
                    read + levels.unmet_below(bound, term_b, size_b, done, theta) > budget:
                # even if the k-th best score stayed where it is (it only rises), unmet
                # documents could reach it until past the budget: with scores of a few
                # levels each (short documents), the rule, not the exception
                return ix._exhaustive(terms, k, avgdl)
    rows = _reaching(partial, bits, met, rest, k)
    in_buffer = np.isin(rows, buffered)
    scores = np.empty(rows.shape[0], dtype=np.float64)
    scores[in_buffer] = partial[rows[in_buffer]]
    scores[~in_buffer] = _exact(ix, rows[~in_buffer], terms, avgdl)
    return ranked(scores, rows, ix._id_of_row, k, ix._id_keys)


def _exact(ix: LexicalIndex, rows: np.ndarray, terms: list[tuple[int, float]],
           avgdl: float) -> np.ndarray:
    """The query's BM25 of documents held by segments, from their own terms: each term's
    score as `_scores` gives it, summed in term order (0.0 for a term a document lacks
    leaves a sum unchanged), so equal to the exhaustive sum bit for bit."""
    k1, b = ix.k1, ix.b
    qids = np.array([t for t, _ in terms], dtype=np.int64)
    order = np.argsort(qids)
    sorted_ids = qids[order]
    idf = np.array([i for _, i in terms], dtype=np.float64)
    contrib = np.zeros((len(terms), rows.shape[0]), dtype=np.float64)
    owners = ix._owner[rows]
    for seg in ix._segments:
        mine = np.flatnonzero(owners == seg.id)
        if mine.shape[0] == 0:
            continue
        pos = ix._pos[rows[mine]]
        starts = seg.fwd_ptr[pos]
        lengths = seg.fwd_ptr[pos + 1] - starts
        at = ranges(starts, lengths)
        term = seg.fwd_terms[at]
        loc = np.minimum(np.searchsorted(sorted_ids, term), sorted_ids.shape[0] - 1)
        hit = sorted_ids[loc] == term
        which = np.repeat(mine, lengths)[hit]
        j = order[loc[hit]]
        tf = seg.fwd_tf[at[hit]].astype(np.float64)
        dl = ix._doc_len[rows[which]]
        # `_scores`, with each entry's own idf
        contrib[j, which] = idf[j] * (tf * (k1 + 1.0)) / (tf + k1 * (1.0 - b + b * (dl / avgdl)))
    total = contrib[0].copy()
    for q in range(1, len(terms)):
        total += contrib[q]
    return total


def _reaching(partial: np.ndarray, bits: np.ndarray, met: list[np.ndarray],
              rest: np.ndarray, k: int) -> np.ndarray:
    """The documents met that can still reach the k-th best partial score: their partial
    score plus the best block left of each term they have not been met in (documents of
    the buffer have none left). A margin covers rounding: the partial scores are summed
    in another order than the exact ones."""
    rows = np.concatenate(met)
    theta = _kth(partial, [rows], k)
    reach = partial[rows]
    got = bits[rows]
    for q in np.flatnonzero(rest).tolist():
        reach = reach + np.where(got & (1 << q), 0.0, rest[q])
    return rows[reach * (1.0 + 1e-8) >= theta]


def _kth(partial: np.ndarray, met: list[np.ndarray], k: int) -> float:
    """The k-th best partial score of the documents met (0.0 if fewer than k)."""
    n = sum(m.shape[0] for m in met)
    if n < k:
        return 0.0
    if n == k:
        return float(min(partial[m].min() for m in met if m.shape[0]))
    scores = partial[np.concatenate(met)] if len(met) > 1 else partial[met[0]]
    return float(_kth_largest(scores, k))
