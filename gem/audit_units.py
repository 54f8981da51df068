"""What the log says of each unit, kept as columns: the full audit's side of the log scan.

The full audit reads the whole log (1.1M entries and 1M fields written, moved and given a
salience at 100k topics) before it reads the rows the log attests. Kept as a dict per unit (a
tuple per write, per ladder move and per salience, a list per salience value), what it learnt
was the audit's peak and a third of its time. Here each record's parts go into Arrow arrays as
they are read (`LogUnits.take`), and `LogUnits.finish` folds them, a column at a time, into one
row per unit: the last write (its record and digest, or a deletion), the ladder moves since it
(the record of the last, the first level and the last) and the salience the stored columns must
hold. `UnitAttester` judges whole batches of stored rows against those columns; only a row
found wrong becomes Python. The rules are `audit.UnitLog`'s, which the incremental audit keeps
(a few records), and tests/test_audit_units.py holds the two to the same verdicts.

Apart from gem/audit.py so that pyarrow (~60 MB resident) is imported only by a process that
runs a full audit.
"""
from __future__ import annotations

from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

_NONE = type(None)
_hash = hash  # (the tests give it collisions)


def _strings(values: list[Any]) -> pa.Array:
    """Digests as Arrow text; a value that is no text (a log written otherwise) is kept as one
    no row hashes to."""
    try:
        return pa.array(values, pa.string())
    except (TypeError, pa.ArrowException):
        return pa.array([v if v is None or v.__class__ is str else "\0" for v in values],
                        pa.string())


def _last(codes: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(each distinct code, the position of its last occurrence)."""
    found, first_of_reversed = np.unique(codes[::-1], return_index=True)
    return found, len(codes) - 1 - first_of_reversed


def _ints(values: Any) -> np.ndarray:
    return np.asarray(values.to_numpy(zero_copy_only=False), dtype=np.int64)


def _flags(values: Any) -> np.ndarray:
    return np.asarray(pc.fill_null(values, False).to_numpy(zero_copy_only=False), dtype=bool)


class LogUnits:
    """Each unit's writes, ladder moves and salience, record after record (`take`), then one
    row per unit (`finish`): `keys`, each one's row found by `codes`, and per row `write_seq` (the last
    record that wrote it, -1 for none), `digest` (what it wrote: null for a deletion),
    `move_seq`, `move_first`, `move_level` (its ladder moves since that write: -1 for none,
    and the levels as numbers into `levels`), `sal_seq`, `sal_strength`, `sal_at` (the salience
    its stored columns must hold: -1 for none)."""

    def __init__(self, salience_seq: int = 0) -> None:
        self.salience_seq = salience_seq
        self._writes: list[tuple[int, pa.Array, pa.Array]] = []
        self._moves: list[tuple[int, pa.Array, pa.Array]] = []
        self._salience: list[tuple[int, pa.Array, pa.Array, pa.Array]] = []
        # a salience value other than [float or null, text or null] (a log written otherwise),
        # by its place among all salience values: compared as it is
        self._odd: dict[int, Any] = {}
        self._values = 0

    def take(self, seq: int, writes: dict[str, Any], moves: list[tuple[str, str]],
             salience: dict[str, Any]) -> None:
        """A record's writes (unit -> digest, None for a deletion), its ladder moves (unit,
        level) and its salience (unit -> [strength, last access])."""
        if writes:
            self._writes.append((seq, pa.array(list(writes), pa.string()),
                                 _strings(list(writes.values()))))
        if moves:
            self._moves.append((seq, pa.array([u for u, _ in moves], pa.string()),
                                pa.array([level for _, level in moves], pa.string())))
        if salience:
            values = list(salience.values())
            strengths = ats = None
            if set(map(type, values)) == {list} and set(map(len, values)) == {2}:
                strengths, ats = [v[0] for v in values], [v[1] for v in values]
                if not set(map(type, strengths)) <= {float, _NONE} or \
                        not set(map(type, ats)) <= {str, _NONE}:
                    strengths = None
            if strengths is None or ats is None:
                self._odd.update(zip(range(self._values, self._values + len(values)), values))
                strengths, ats = [None] * len(values), [None] * len(values)
            self._salience.append((seq, pa.array(list(salience), pa.string()),
                                   pa.array(strengths, pa.float64()), pa.array(ats, pa.string())))
            self._values += len(values)

    def finish(self) -> None:
        parts = (self._writes, self._moves, self._salience)
        every = [p[1] for part in parts for p in part]
        # chunk by chunk (one dictionary for all): the records' keys are not copied into one array
        coded = pc.dictionary_encode(pa.chunked_array(every, pa.string()))
        self.keys: pa.Array = coded.chunk(0).dictionary if coded.num_chunks else \
            pa.array([], pa.string())
        self._index(self.keys)
        codes = np.concatenate([np.asarray(c.indices.to_numpy(zero_copy_only=False), dtype=np.int64)
                                for c in coded.chunks]) if coded.num_chunks else \
            np.zeros(0, dtype=np.int64)
        del coded, every
        sizes = [sum(len(p[1]) for p in part) for part in parts]
        writes = codes[:sizes[0]]
        moves = codes[sizes[0]:sizes[0] + sizes[1]]
        salience = codes[sizes[0] + sizes[1]:]
        # one row more than there are units: the row of a unit the log never named
        self.unnamed = m = len(self.keys)

        def seqs(part: list[Any]) -> np.ndarray:
            return np.repeat(np.array([p[0] for p in part], dtype=np.int64),
                             [len(p[1]) for p in part])

        # the last write of each unit
        write_seqs = seqs(self._writes)
        digests = pa.concat_arrays([p[2] for p in self._writes]) if self._writes else \
            pa.array([], pa.string())
        self.write_seq = np.full(m + 1, -1, dtype=np.int64)
        last = np.full(m + 1, -1, dtype=np.int64)
        found, at = _last(writes)
        self.write_seq[found], last[found] = write_seqs[at], at
        self.digest: pa.Array = digests.take(pa.array(last, mask=last < 0))
        # the ladder moves after it (a move in the record that wrote the unit is attested by
        # the write: the record's writes come first)
        move_seqs = seqs(self._moves)
        levels = pc.dictionary_encode(pa.concat_arrays([p[2] for p in self._moves])) \
            if self._moves else None
        self.levels: list[str] = levels.dictionary.to_pylist() if levels is not None else []
        self.move_seq = np.full(m + 1, -1, dtype=np.int64)
        self.move_first = np.zeros(m + 1, dtype=np.int64)
        self.move_level = np.zeros(m + 1, dtype=np.int64)
        if levels is not None:
            level = _ints(levels.indices)
            kept = move_seqs > self.write_seq[moves]
            units, level, move_seqs = moves[kept], level[kept], move_seqs[kept]
            found, first = np.unique(units, return_index=True)
            self.move_first[found] = level[first]
            found, at = _last(units)
            self.move_seq[found], self.move_level[found] = move_seqs[at], level[at]
        # the salience: a deletion forgets what came before it (a record's salience comes
        # after its writes); up to the seq the stored columns were brought to the latest
        # counts, after it the first
        sal_seqs = seqs(self._salience)
        deleted = np.full(m + 1, -1, dtype=np.int64)
        gone = ~_flags(digests.is_valid()) if len(digests) else np.zeros(0, dtype=bool)
        found, at = _last(writes[gone])
        deleted[found] = write_seqs[gone][at]
        live = sal_seqs >= deleted[salience]
        early = live & (sal_seqs <= self.salience_seq)
        chosen = np.full(m + 1, -1, dtype=np.int64)
        places = np.arange(len(salience), dtype=np.int64)
        found, first = np.unique(salience[live], return_index=True)
        chosen[found] = places[live][first]
        found, at = _last(salience[early])
        chosen[found] = places[early][at]
        self.sal_seq = np.full(m + 1, -1, dtype=np.int64)
        has = chosen >= 0
        self.sal_seq[has] = sal_seqs[chosen[has]]
        pick = pa.array(chosen, mask=~has)
        strengths = pa.concat_arrays([p[2] for p in self._salience]) if self._salience else \
            pa.array([], pa.float64())
        ats = pa.concat_arrays([p[3] for p in self._salience]) if self._salience else \
            pa.array([], pa.string())
        self.sal_strength: pa.Array = strengths.take(pick)
        self.sal_at: pa.Array = ats.take(pick)
        self.sal_odd = {int(r): self._odd[int(chosen[r])] for r in np.flatnonzero(has).tolist()
                        if int(chosen[r]) in self._odd} if self._odd else {}
        self._writes, self._moves, self._salience, self._odd = [], [], [], {}

    def _index(self, keys: pa.Array) -> None:
        """What `codes` looks units up in: their str hashes, sorted (8 bytes a unit, where a dict
        of them held ~130), and a dict of the few units whose hash another unit shares."""
        hashes = np.fromiter(map(_hash, keys.to_pylist()), dtype=np.int64, count=len(keys))
        self._order = np.argsort(hashes, kind="stable")
        self._hashes = hashes[self._order]
        shared = np.flatnonzero(self._hashes[1:] == self._hashes[:-1])
        rows = np.unique(np.concatenate([shared, shared + 1])) if len(shared) else shared
        self._shared = {keys[int(r)].as_py(): int(r) for r in self._order[rows].tolist()}
        self._shared_hashes = np.unique(self._hashes[rows])

    def codes(self, keys: list[str], texts: pa.Array | pa.ChunkedArray | None = None) -> np.ndarray:
        """The row of each unit (`unnamed` for a unit the log never named); `texts`, the keys as
        Arrow already (a batch's column), spares making them again."""
        n, m = len(keys), self.unnamed
        if not m or not n:
            return np.full(n, m, dtype=np.int64)
        hashes = np.fromiter(map(_hash, keys), dtype=np.int64, count=n)
        # searched in hash order: each search starts where the one before ended, and the paths
        # of neighbours share cache lines (a batch's 65k searches in random order, each ~20
        # cache misses into 2M hashes, were a tenth of the full audit)
        order = np.argsort(hashes)
        ordered = hashes[order]
        at = np.minimum(np.searchsorted(self._hashes, ordered), m - 1)
        rows, same = np.empty(n, dtype=np.int64), np.empty(n, dtype=bool)
        rows[order], same[order] = self._order[at], self._hashes[at] == ordered
        named = same & _flags(pc.equal(self.keys.take(pa.array(rows)),
                                       pa.array(keys, pa.string()) if texts is None else texts))
        codes = np.where(named, rows, m)
        if self._shared:  # the first unit of a shared hash was tried: the dict knows them all
            for i in np.flatnonzero(np.isin(hashes, self._shared_hashes)).tolist():
                codes[i] = self._shared.get(keys[i], m)
        return codes


class UnitAttester:
    """Stored rows against what `LogUnits` says their last writer attested, a batch at a time,
    and which units were seen (one the log attests that was never seen is missing)."""

    def __init__(self, units: LogUnits) -> None:
        self.units = units
        self.found: list[tuple[str, str | None, str]] = []
        self.seen = np.zeros(units.unnamed + 1, dtype=bool)
        self.seen_unnamed: set[str] = set()  # seen, and never named by the log
        # (table, first level) -> the statuses a moved row may have been written with
        self.statuses: dict[tuple[str, str], tuple[str, ...]] = {}

    def fresh(self, keys: list[str], codes: np.ndarray) -> np.ndarray:
        """The rows whose unit was not seen before (the first row of a unit twice)."""
        known = codes < self.units.unnamed
        first = np.zeros(len(codes), dtype=bool)
        where = np.flatnonzero(known)
        _, once = np.unique(codes[where], return_index=True)
        first[where[once]] = True
        first &= ~self.seen[codes]
        unnamed: set[str] = set()
        for i in np.flatnonzero(~known).tolist():
            if keys[i] not in self.seen_unnamed and keys[i] not in unnamed:
                unnamed.add(keys[i])
                first[i] = True
        return np.flatnonzero(first)

    def mark(self, keys: list[str], codes: np.ndarray) -> None:
        self.seen[codes] = True
        self.seen_unnamed.update(keys[i] for i in np.flatnonzero(codes == self.units.unnamed).tolist())

    def judge(self, keys: list[str], codes: np.ndarray, digests: pa.Array) -> list[tuple[int, str]]:
        """(row, message) of each row whose digest is not what its unit's last writer attested,
        in row order; every row is seen."""
        self.mark(keys, codes)
        units = self.units
        same = _flags(pc.equal(units.digest.take(pa.array(codes)), digests))
        return [(i, self.message(int(codes[i]))) for i in np.flatnonzero(~same).tolist()]

    def message(self, row: int) -> str:
        """Why a unit's row is not what its last writer attested, given that it is not."""
        units = self.units
        seq = int(units.write_seq[row])
        if seq < 0:
            return "no transition wrote this"
        if not units.digest[row].is_valid:
            return f"transition {seq} deleted this, but it is stored"
        return f"differs from what transition {seq} wrote"

    def check(self, key: str, digest: str) -> None:
        """One row (an edge, a stored policy, the policy files) against its last writer."""
        codes = self.units.codes([key])
        for _, message in self.judge([key], codes, pa.array([digest], pa.string())):
            self.found.append(("state", key, message))

    def missing(self) -> list[tuple[str, str | None, str]]:
        """Units the log attests (written and not deleted since, or moved) that no row holds."""
        units = self.units
        written = units.write_seq >= 0  # (never the unnamed row)
        stored = written & _flags(units.digest.is_valid()) & ~self.seen
        moved = (units.move_seq >= 0) & ~self.seen & ~written
        found = sorted((units.keys[r].as_py(), int(units.write_seq[r]))
                       for r in np.flatnonzero(stored).tolist())
        out: list[tuple[str, str | None, str]] = [
            ("state", key, f"missing: transition {seq} wrote it") for key, seq in found]
        found = sorted((units.keys[r].as_py(), int(units.move_seq[r]))
                       for r in np.flatnonzero(moved).tolist())
        out += [("state", key, f"missing: transition {seq} moved it") for key, seq in found]
        return out
