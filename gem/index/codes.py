"""Sign codes: a few bits a vector whose Hamming distances estimate angles, for a fast first pass.

Bit j of a vector's code is whether its product with the j-th column of a fixed-seed Gaussian
matrix is >= 0 (sign random projections, Charikar 2002): two vectors at angle t differ in
each bit with probability t / pi, so the Hamming distance orders rows by estimated angle.
The matrix needs no training (no axes to find, nothing that depends on which rows were seen
when): a row's code is a function of its vector alone, so a rebuilt, a loaded and a grown
index hold the same codes. Words are stored column by column, so one query scans each word's
array of all rows contiguously (XOR and popcount: 8 bytes a row a word).

Measured on 100k HashingEmbedder vectors (bench/vectors.py has the tables), re-scoring the 2%
of rows nearest in Hamming distance found 0.96 of the exact top 10 of LoCoMo questions among
sentences with 256 bits and 0.997 with 512 (titles: 0.997 / 1.0). Weighting each bit by the
query's projection would beat plain Hamming distance at 256 bits, but costs a table lookup a
byte a row in numpy (and by the variance of each estimator, it ranks near-duplicates worse
than Hamming does); more bits cost one more word scanned.

Ranked by all 512 bits, the exact top 10 of LoCoMo questions among 1M LoCoMo sentences lay
within the nearest 2000 rows (0.999), so a query re-scores few rows; what costs recall is
scanning fewer bits first (candidates()).
"""
from __future__ import annotations

import numpy as np

_SEED = 20261201

if hasattr(np, "bitwise_count"):  # numpy >= 2.0
    def _count_into(words: np.ndarray, out: np.ndarray) -> None:
        np.bitwise_count(words, out=out)
else:  # pragma: no cover - numpy 1.26
    _BYTE_BITS = np.array([bin(i).count("1") for i in range(256)], dtype=np.uint8)

    def _count_into(words: np.ndarray, out: np.ndarray) -> None:
        out[...] = _BYTE_BITS[words.view(np.uint8)].reshape(-1, 8).sum(axis=1, dtype=np.uint8)


def _projection(dim: int, bits: int) -> np.ndarray:
    # PCG64 and its Gaussian sampler give the same numbers on every platform; no LAPACK
    # (an orthogonalisation would be BLAS-dependent in its last bits).
    return np.random.default_rng(_SEED).standard_normal((dim, bits)).astype(np.float32)


class SignCodes:
    """Codes of the rows of a VectorIndex, in its row order: (bits // 64, capacity) uint64."""

    # Words scanned for every row (192 bits, 24 bytes a row: their distances fit a uint8),
    # and the share of rows nearest on them whose other words are compared too (at least
    # 4 x the pool). Measured (bench/vectors.py; exact top 10 kept when re-scoring 4000 rows
    # by all 512 bits): at 1M rows LoCoMo sentences and titles kept 1.000 behind 3 words
    # keeping 5-8%, 0.992 behind 2 words keeping 10%; at 100k titles kept 0.997 behind 3
    # words keeping 8% (0.995 behind 4 words keeping 5%, 0.977 behind 2 keeping 10%). The
    # prefix, not the pool, limits recall. 3 words cost 3.5 ms at 1M rows, 4 words 5.7.
    FIRST_WORDS = 3
    FIRST_SHARE = 0.08

    def __init__(self, dim: int, bits: int, capacity: int) -> None:
        self.bits = bits
        self.projection = _projection(dim, bits)
        self.words = np.zeros((bits // 64, capacity), dtype=np.uint64)

    def reserve(self, capacity: int) -> None:
        if capacity > self.words.shape[1]:
            grown = np.zeros((self.words.shape[0], capacity), dtype=np.uint64)
            grown[:, : self.words.shape[1]] = self.words
            self.words = grown

    def encode(self, block: np.ndarray) -> np.ndarray:
        """(bits // 64, rows) uint64 codes of float32 rows. A float32 product this close to 0
        that its sign depends on the BLAS kernel flips one bit: a distance off by one."""
        signs = np.atleast_2d(block) @ self.projection >= 0
        packed = np.packbits(signs, axis=1, bitorder="little")
        return np.ascontiguousarray(packed).view("<u8").T

    def set(self, rows, block: np.ndarray) -> None:
        self.words[:, rows] = self.encode(block)

    def move(self, src: int, dst: int) -> None:
        self.words[:, dst] = self.words[:, src]

    def candidates(self, n: int, q: np.ndarray, pool: int) -> np.ndarray:
        """At least `pool` rows nearest to q in Hamming distance (every row at the cut-off
        distance is taken: no tie is broken by position), in row order.

        All rows are scored on the first FIRST_WORDS words; the FIRST_SHARE of them nearest
        on those (at least 4 * pool) on the rest too."""
        if pool >= n:
            return np.arange(n, dtype=np.int64)
        qw = self.encode(q)[:, 0]
        first = min(self.FIRST_WORDS, qw.shape[0])
        d = _distance(self.words[:first, :n], qw[:first])
        if first == qw.shape[0]:
            return _nearest(d, pool)
        rows = _nearest(d, max(4 * pool, int(self.FIRST_SHARE * n)))
        rest = _distance(self.words[first:], qw[first:], rows)
        rest += d[rows]
        return rows[_nearest(rest, pool)]

    @property
    def nbytes(self) -> int:
        return self.words.nbytes


def _distance(words: np.ndarray, qw: np.ndarray, rows: np.ndarray | None = None) -> np.ndarray:
    """Hamming distances of each column of `words` (of columns `rows`, if given) to the query
    words: uint8 up to 3 words (at most 192), uint16 above. Temporaries are reused word after
    word: at 1M rows a fresh 8 MB array a word cost page faults worth as much as the XOR; and
    the rows are taken a word at a time into them (gathering all words of 80k rows at 1M cost
    more than their distances)."""
    n = words.shape[1] if rows is None else rows.shape[0]
    d = np.zeros(n, dtype=np.uint8 if words.shape[0] <= 3 else np.uint16)
    x = np.empty(n, dtype=np.uint64)
    bits = np.empty(n, dtype=np.uint8)
    for j in range(words.shape[0]):
        if rows is None:
            np.bitwise_xor(words[j], qw[j], out=x)
        else:
            np.take(words[j], rows, out=x)
            np.bitwise_xor(x, qw[j], out=x)
        _count_into(x, bits)
        np.add(d, bits, out=d)
    return d


_SAMPLE_STEP = 16  # _nearest guesses its cut-off from every 16th distance


def _nearest(d: np.ndarray, pool: int) -> np.ndarray:
    """Positions of the smallest distances: every one up to the smallest cut-off that takes at
    least `pool` (a histogram of distances instead of a partial sort of them).

    Over many rows the cut-off is first guessed from a sample, a little wide; the histogram
    of only the rows within the guess gives the same cut-off as one of all rows whenever they
    are `pool` or more (else every row is counted)."""
    n = d.shape[0]
    if pool >= n:
        return np.arange(n, dtype=np.int64)
    if n >= 64 * _SAMPLE_STEP:
        sample = np.cumsum(np.bincount(d[::_SAMPLE_STEP]))
        guess = int(np.searchsorted(sample, 1.25 * pool / _SAMPLE_STEP + 64))
        rows = np.flatnonzero(d <= guess)
        if rows.shape[0] >= pool:
            near = d[rows]
            cut = int(np.searchsorted(np.cumsum(np.bincount(near)), pool))
            return rows[near <= cut]
    cut = int(np.searchsorted(np.cumsum(np.bincount(d)), pool))
    return np.flatnonzero(d <= cut)
