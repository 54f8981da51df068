"""What both indexes share: argument checks and the ranking of scored rows."""
from __future__ import annotations

import heapq
from collections.abc import Callable

import numpy as np

from gem.errors import InvalidInput


def check_doc_id(doc_id: str) -> None:
    if not isinstance(doc_id, str):
        raise InvalidInput(f"document id must be a str, got {type(doc_id).__name__}")


def check_k(k: int | None) -> None:
    if k is not None and (isinstance(k, bool) or not isinstance(k, int) or k < 0):
        raise InvalidInput(f"k must be a non-negative int or None, got {k!r}")


def _kth_largest(scores: np.ndarray, k: int) -> float:
    """The k-th largest of scores (0 < k < len). BM25 gives a few distinct scores to many rows
    (every document with the same term counts and length ties), and numpy's partition
    degenerates on them: 20 ms for 233k scores of 7 values at 100k topics, a quarter of a
    free-text retrieval. Where the first scores hold few distinct values, the levels are
    peeled from the top instead (two passes each); distinct scores (cosine) are partitioned."""
    if np.unique(scores[:256]).shape[0] <= 64:
        level, above = scores.max(), 0
        for _ in range(16):
            above += int(np.count_nonzero(scores == level))
            if above >= k:
                return level
            level = scores.max(where=scores < level, initial=-np.inf)
    n = scores.shape[0]
    return np.partition(scores, n - k)[n - k]


def id_keys(ids: list[str]) -> np.ndarray:
    """Each id's first 8 bytes of UTF-8 as a big-endian uint64 (zero-padded): key(a) < key(b)
    implies a < b (UTF-8 orders as code points do, and a padded prefix sorts first), so the
    keys pick the smallest ids of a large tie in numpy and only equal keys need the ids."""
    return np.array([i.encode("utf-8", "surrogatepass") for i in ids], dtype="S8").view(">u8").astype(np.uint64)


def id_key(doc_id: str) -> int:
    return int.from_bytes(doc_id.encode("utf-8", "surrogatepass")[:8].ljust(8, b"\0"), "big")


def _smallest_ids(rows: np.ndarray, m: int, id_of_row: list[str],
                  keys: Callable[[], np.ndarray] | None) -> list[str]:
    """The m smallest ids of rows (m < len(rows)). A tie of thousands (BM25) costs a Python
    comparison per id with heapq; with `keys` (id_keys by row), only the rows whose key is at
    most the m-th smallest key are compared."""
    if keys is not None and rows.shape[0] > _KEYED_TIE:
        key = keys()[rows]
        rows = rows[key <= np.partition(key, m - 1)[m - 1]]
    return heapq.nsmallest(m, map(id_of_row.__getitem__, rows.tolist()))


# Tied rows above which `ranked` selects by id keys (heapq over a few hundred ids costs as
# much; a tie of 4k cost 5 ms at 100k field documents). The first use builds the keys of
# every row: ~0.3 s for 1M ids, once.
_KEYED_TIE = 256


def ranked(
    scores: np.ndarray, rows: np.ndarray, id_of_row: list[str], k: int | None,
    keys: Callable[[], np.ndarray] | None = None,
) -> list[tuple[str, float]]:
    """(id, score) for the best k of scores[j] (belonging to rows[j]), by score desc then id.

    Selection and ordering are done in numpy; only the k winners (plus any rows tied with the
    k-th score, which are needed to break ties by id correctly) become Python objects, and
    Python only sorts the ids inside each run of equal scores. `keys` gives `id_keys` by row,
    for ties of thousands.
    """
    n = scores.shape[0]
    if n == 0 or k == 0:
        return []
    tail: list[tuple[str, float]] = []
    if k is not None and k < n:
        kth = _kth_largest(scores, k)
        above = np.flatnonzero(scores > kth)
        if n - above.shape[0] > 4 * k:
            # Many rows tie at the k-th score (BM25 gives every document with the same term
            # counts and length the same score): only the smallest ids among them are kept,
            # without sorting them all.
            tied = rows[scores == kth]
            tail = [(doc, float(kth)) for doc in _smallest_ids(
                tied, k - above.shape[0], id_of_row, keys)]
            keep = above
        else:
            keep = np.flatnonzero(scores >= kth)
        scores, rows = scores[keep], rows[keep]
    order = np.argsort(-scores, kind="stable")
    s = scores[order]
    ids = list(map(id_of_row.__getitem__, rows[order].tolist()))
    if s.shape[0] > 1:
        same = s[1:] == s[:-1]
        if same.any():
            starts = np.flatnonzero(np.concatenate(([True], ~same)))
            ends = np.append(starts[1:], s.shape[0])
            for a, b in zip(starts.tolist(), ends.tolist()):
                if b - a > 1:
                    ids[a:b] = sorted(ids[a:b])
    out = list(zip(ids, s.tolist())) + tail
    return out if k is None else out[:k]


