"""Salience with lazy decay (specs/design.md §3).

A unit stores a *strength* x >= 0 and the time it was last touched; its salience is
s = 1 - exp(-x), in [0, 1). Reinforcing adds to x, which is s <- s + a(1 - s) with
a = 1 - exp(-amount): the bounded, strictly increasing update of the design. Keeping x
rather than s is what keeps "strictly increasing" true in floating point: s itself
rounds to 1.0 after a few hundred reinforcements at a fixed time, x never does.
Decay is applied on read, s(t) = s * 2^(-(t - t_last) / half_life), so no job
rewrites every row per tick.

A field's half-life may depend on its labels (the setting `label_half_life`, a record of
label -> duration or null): the shortest duration any of its labels is given, else, when one
of its labels is given null, none (it does not fade), else the `half_life` of every unit.
So "pii fades in a week" wins over "keep for ever" on a field that is both.
"""
from __future__ import annotations

import math
from datetime import datetime, timedelta
from typing import Iterable, Mapping

_BELOW_ONE = math.nextafter(1.0, 0.0)


def salience_of(strength: float) -> float:
    return min(-math.expm1(-max(strength, 0.0)), _BELOW_ONE)


def strength_of(salience: float) -> float:
    salience = min(max(salience, 0.0), _BELOW_ONE)
    return -math.log1p(-salience)


def field_half_life(labels: Iterable[str], by_label: Mapping[str, timedelta | None] | None,
                    default: timedelta) -> timedelta | None:
    """The half-life of a field with `labels` (None: it does not fade)."""
    if not by_label:
        return default
    given = [by_label[x] for x in labels if x in by_label]
    durations = [d for d in given if d is not None]
    if durations:
        return min(durations)
    return None if given else default


def decayed_strength(strength: float, last: datetime | None, now: datetime,
                     half_life: timedelta | None) -> float:
    """The strength at `now`, with the design's decay applied to the salience (none without a
    half-life)."""
    if last is None or strength <= 0.0 or now <= last or half_life is None:
        return max(strength, 0.0)
    factor = 2.0 ** (-(now - last) / half_life)
    return -math.log1p(math.expm1(-strength) * factor)  # -ln(1 - s * factor)

