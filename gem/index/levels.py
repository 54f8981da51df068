"""BM25 over postings of few score levels: summing a query's per-term scores, and the
estimates from blocks alone that tell a pruned query when a pass costs less.

The sum is per row, over the query's terms in their order (so every path gets the same floats).
A float accumulator indexed by row does it with a gather and a scatter of float64 per posting.
Over short documents from a small vocabulary a term's postings take a few scores only (one per
tf and length: `Segment.blk_same` blocks), and a query's terms then make few combinations: each
row's combination is summed as a small integer code instead (1 or 2 bytes a row, ~4x cheaper
to scatter at 1M rows), and the score of each code is computed once, in term order, from
the terms' scores: equal to the float accumulator's sum bit for bit (x + 0.0 == x, and the
terms are added in the same order).
"""
from __future__ import annotations

from collections.abc import Iterable

import numpy as np

# The most combinations of term scores (each term: absent or one of its scores) summed as codes.
CODES = 1 << 16
# The fewest postings a query sums as codes (below, the float accumulator's fewer numpy calls
# cost less), and a term's postings in a segment scored a block at a time.
CODED_FROM = 1 << 12
# The most candidate scores of one term looked at to count its distinct ones.
VALUES = 1 << 12


def levels(values: list[np.ndarray | None]) -> list[np.ndarray] | None:
    """Each term's distinct scores, ascending, given candidates holding every score of its
    postings (None: too many), if their combinations are at most CODES."""
    out, combos = [], 1
    for v in values:
        if v is None or v.shape[0] > VALUES:
            return None
        distinct = np.unique(v)
        combos *= distinct.shape[0] + 1
        if combos > CODES:
            return None
        out.append(distinct)
    return out


def summed(rows: list[np.ndarray], scores: list[np.ndarray], n: int,
           levels_of: list[np.ndarray] | None) -> tuple[np.ndarray, np.ndarray]:
    """(every row some term's postings hold, its summed score), from each term's postings
    (rows unique within a term, all < n, scores > 0), as codes if `levels_of` is given."""
    if levels_of is not None:
        return _coded(rows, scores, n, levels_of)
    acc = np.zeros(n, dtype=np.float64)
    union = _add_up(acc, rows, scores)
    return union, acc[union]


def _add_up(acc: np.ndarray, rows: list[np.ndarray], steps: Iterable[np.ndarray]) -> np.ndarray:
    """Add each term's steps into `acc` at its rows, in term order; the rows met, each once.
    acc == 0 means "row not met yet" (every step is > 0): no sort-based union, and the gather
    before the add also tells which rows are new."""
    seen: list[np.ndarray] = []
    for r, s in zip(rows, steps):
        if seen:
            before = acc[r]
            seen.append(r[before == 0])
            acc[r] = before + s
        else:
            seen.append(r)
            acc[r] = s
    return seen[0] if len(seen) == 1 else np.concatenate(seen)


def _level(distinct: np.ndarray, scores: np.ndarray) -> np.ndarray:
    """Each score's place among `distinct` (which holds it) + 1: a comparison per other
    level for the few levels of a term's postings, then a search."""
    if distinct.shape[0] > 4:
        return (np.searchsorted(distinct, scores) + 1).astype(np.uint16)
    out = np.ones(scores.shape[0], dtype=np.uint16)
    for v in distinct[1:].tolist():
        out += scores >= v
    return out


def _coded(rows: list[np.ndarray], scores: list[np.ndarray], n: int,
           levels_of: list[np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    base = [lv.shape[0] + 1 for lv in levels_of]  # 0: the term is absent
    dtype = np.uint8 if int(np.prod(base)) <= 256 else np.uint16
    code = np.zeros(n, dtype=dtype)
    radices = [1]
    for b in base:
        radices.append(radices[-1] * b)
    union = _add_up(code, rows, ((_level(lv, s) * radix).astype(dtype)
                                 for s, lv, radix in zip(scores, levels_of, radices)))
    radix = radices[-1]
    # the score of every code, summed over the terms in order as the accumulator would
    every = np.arange(radix, dtype=np.int64)
    total = np.zeros(radix, dtype=np.float64)
    radix = 1
    for lv, b in zip(levels_of, base):
        at = (every // radix) % b
        total = total + np.append(0.0, lv)[at]  # + 0.0 where absent: the sum unchanged
        radix *= b
    return union, total[code[union]]


def unmet_below(bound: np.ndarray, term_b: np.ndarray, size_b: np.ndarray, done: int,
                 theta: float) -> int:
    """The postings of the blocks after `done` (blocks in descending order of `bound`, of terms
    `term_b` and sizes `size_b`) that a pruned query reads before a document it has not met
    can no longer reach `theta`: before the sum over terms of their best block left is below
    it. (A cost estimate: the sum is not the fsum the query stops on.)"""
    at = np.arange(done, bound.shape[0] + 1)
    reach = np.zeros(at.shape[0], dtype=np.float64)
    for q in np.unique(term_b[done:]).tolist():
        mine = done + np.flatnonzero(term_b[done:] == q)
        nxt = np.searchsorted(mine, at)
        reach += np.where(nxt < mine.shape[0], bound[mine[np.minimum(nxt, mine.shape[0] - 1)]],
                          0.0)
    stop = int(np.searchsorted(-reach, -theta / (1.0 + 1e-8), side="right"))
    return int(size_b[done:done + stop].sum())


def kth_of_like_blocks(bound: np.ndarray, term_b: np.ndarray, size_b: np.ndarray,
                        same_b: np.ndarray, k: int) -> float:
    """A guess at the k-th best score, from the blocks alone (as `unmet_below`'s): a term's
    first blocks whose postings all score their bound hold k documents scoring at least it
    (dead postings aside). 0.0 if no term's do."""
    best = 0.0
    for q in np.unique(term_b).tolist():
        mine = np.flatnonzero(term_b == q)
        like = int(np.argmin(same_b[mine])) if not same_b[mine].all() else mine.shape[0]
        reach = np.searchsorted(np.cumsum(size_b[mine[:like]]), k)
        if reach < like:
            best = max(best, float(bound[mine[reach]]))
    return best
