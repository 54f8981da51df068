"""Which histories of an Arrow batch can break C1, C2 or C4: the full audit's sieve.

The full audit checks every field's history (1M at 100k topics) with gem/history.py's rules and
gem/conditions.py's provenance checks, which read Python rows, a history at a time. Nearly every
history passes. Here the same rules are asked of a whole batch at once, as column arithmetic,
in the conservative direction: a history they could fail on (or cannot be compared in, such as
one missing a time) is named, and the audit checks only those histories with the rules
themselves, which write the messages. A history not named passes them: every rule below is
implied by the rules it stands for, never the other way round.

The batch is gem/store/queries/batches.py's history batch: column `holder`, the entry's columns,
sorted by holder and then `seq`.
"""
from __future__ import annotations

from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc


def _flags(values: Any) -> np.ndarray:
    return np.asarray(values.to_numpy(zero_copy_only=False), dtype=bool)


def _empty(values: pa.Array) -> np.ndarray:
    """Null or "" (what `not value` is in the rules)."""
    return _flags(pc.fill_null(pc.equal(pc.binary_length(values), 0), True))


def _equal(values: pa.Array, text: str) -> np.ndarray:
    return _flags(pc.fill_null(pc.equal(values, text), False))


def _ints(values: pa.Array) -> np.ndarray:
    if pa.types.is_timestamp(values.type):
        values = values.cast(pa.int64())
    return np.asarray(pc.fill_null(values, 0).to_numpy(zero_copy_only=False), dtype=np.int64)


def _at_least(a: tuple[np.ndarray, ...], b: tuple[np.ndarray, ...]) -> np.ndarray:
    """a >= b, lexicographically (history.order_key: asserted_at, recorded_at, seq)."""
    out = a[-1] >= b[-1]
    for x, y in zip(a[-2::-1], b[-2::-1]):
        out = (x > y) | ((x == y) & out)
    return out


def groups(batch: pa.Table, holder: str) -> np.ndarray:
    """Where each history starts in the batch, and its end (the last item)."""
    holders = batch.column(holder).combine_chunks()
    if not len(holders):
        return np.zeros(1, dtype=np.int64)
    changed = _flags(pc.not_equal(holders.slice(1), holders.slice(0, len(holders) - 1)))
    return np.concatenate(([0], np.flatnonzero(changed) + 1, [len(holders)]))


def suspects(batch: pa.Table, bounds: np.ndarray) -> np.ndarray:
    """For each history of the batch (`bounds`: from `groups`), whether it may break a rule."""
    n, starts = batch.num_rows, bounds[:-1]
    if not n:
        return np.zeros(0, dtype=bool)
    group = np.repeat(np.arange(len(starts)), np.diff(bounds))
    col = {name: batch.column(name).combine_chunks() for name in
           ("id", "seq", "status", "polarity", "superseded_by", "asserted_at", "recorded_at",
            "valid_at", "source", "actor", "confidence")}
    # C4, an entry's own provenance (conditions._provenance)
    confidence = np.asarray(pc.fill_null(pc.cast(col["confidence"], pa.float64()), np.nan)
                            .to_numpy(zero_copy_only=False), dtype=np.float64)
    bad = _empty(col["source"]) | _empty(col["actor"]) | ~((confidence >= 0.0) & (confidence <= 1.0))
    bad |= ~_flags(pc.fill_null(pc.is_in(col["polarity"], pa.array(["+", "-"])), False))
    times = ("asserted_at", "recorded_at", "valid_at", "seq")
    for name in times:  # a missing time breaks C4, or cannot be ordered: the rules decide
        bad |= _flags(col[name].is_null())
    current, superseded = _equal(col["status"], "current"), _equal(col["status"], "superseded")
    candidate = ~_equal(col["status"], "retracted") & _equal(col["polarity"], "+")
    if col["status"].null_count:
        bad |= _flags(col["status"].is_null())
    key = tuple(_ints(col[name]) for name in ("asserted_at", "recorded_at", "seq"))
    # C2 and C4: what an entry names as its successor is an entry of its history, and not older
    named = ~_empty(col["superseded_by"])
    bad |= current & named
    # an entry twice: the rules decide (unique costs a third of count_distinct)
    if len(pc.unique(col["id"])) != n:
        return np.ones(len(starts), dtype=bool)
    where = np.asarray(pc.fill_null(pc.index_in(col["superseded_by"], value_set=col["id"]), -1)
                       .to_numpy(zero_copy_only=False), dtype=np.int64)
    found = (where >= 0) & (group[np.maximum(where, 0)] == group)
    bad |= (named | superseded) & ~found
    successor = tuple(k[np.maximum(where, 0)] for k in key)
    bad |= superseded & found & ~_at_least(successor, key)
    # C1: one current entry, the latest candidate; none when there is no candidate
    currents = np.bincount(group, weights=current, minlength=len(starts))
    candidates = np.bincount(group, weights=candidate, minlength=len(starts))
    out = np.bincount(group, weights=bad, minlength=len(starts)) > 0
    out |= (candidates > 0) & (currents != 1)
    out |= (candidates == 0) & (currents > 0)
    one = np.flatnonzero(current)
    marked = np.full(len(starts), -1, dtype=np.int64)
    marked[group[one]] = one  # the current entry of a history with exactly one
    mine = marked[group]
    held = mine >= 0
    rival = held & candidate & (np.arange(n) != mine) & \
        _at_least(key, tuple(k[np.maximum(mine, 0)] for k in key))
    out |= np.bincount(group, weights=rival, minlength=len(starts)) > 0
    out |= np.bincount(group, weights=held & current & ~candidate, minlength=len(starts)) > 0
    return out
