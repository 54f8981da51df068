"""Evidence reliability of a field (specs/design.md §6, after PolyMemDB).

Every observation recorded for a field (entries and corroborations) is evidence for (+) or
against (-) its current value, with a confidence. Newer evidence counts more: the weight of the
i-th of T observations, ordered by time, is c_i * decay^(T - i). Positive and negative evidence
are combined separately by noisy-OR into P+ and P-, and their joint outcomes give four states
(action, inaction, conflict, ignorance) that sum to 1. The reliability R is in [-1, 1]: the
margin of support over refutation, discounted by how much of the mass is conflict or ignorance.

Decay is by position, not by elapsed time: a field observed once a year and one observed once a
minute age the same way per observation. Consequently appending a new observation, even a
positive one, decays all older evidence, and can lower P+ if the new one is weak; that is the
intended "newer evidence replaces older" behaviour.
"""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass
from datetime import datetime

from gem.errors import InvalidInput

__all__ = ["Observation", "EvidenceStates", "evidence_states", "DEFAULT_DECAY"]

# PolyMemDB's demo value; policies may override it per field.
DEFAULT_DECAY = 0.8


def _check_confidence(c: object) -> float:
    if isinstance(c, bool) or not isinstance(c, (int, float)) or not (0.0 <= c <= 1.0):
        raise InvalidInput(f"confidence must be a number in [0, 1], got {c!r}")
    return float(c)


def _check_polarity(p: object) -> str:
    if p not in ("+", "-"):
        raise InvalidInput(f"polarity must be '+' or '-', got {p!r}")
    return p  # type: ignore[return-value]


@dataclass(frozen=True, slots=True)
class Observation:
    """One piece of evidence: supports (+) or refutes (-) the value, with confidence, at a time."""

    polarity: str
    confidence: float
    at: datetime

    def __post_init__(self) -> None:
        _check_polarity(self.polarity)
        object.__setattr__(self, "confidence", _check_confidence(self.confidence))
        if not isinstance(self.at, datetime):
            raise InvalidInput(f"observation time must be a datetime, got {self.at!r}")


@dataclass(frozen=True, slots=True)
class EvidenceStates:
    p_plus: float
    p_minus: float
    action: float
    inaction: float
    conflict: float
    ignorance: float
    reliability: float

    def as_dict(self) -> dict[str, float]:
        return asdict(self)


def evidence_states(
    observations: Sequence[Observation], decay: float = DEFAULT_DECAY
) -> EvidenceStates:
    """P+, P-, the four evidence states and R for a field's evidence sequence.

    Observations are ordered by `at` (ties keep their given order); the newest gets weight
    c * decay^0. With no observations P+ = P- = 0: ignorance is 1 and R is 0.
    Raises InvalidInput unless decay is in (0, 1] and every confidence is in [0, 1].
    """
    if isinstance(decay, bool) or not isinstance(decay, (int, float)) or not (0.0 < decay <= 1.0):
        raise InvalidInput(f"decay must be in (0, 1], got {decay!r}")
    obs = list(observations)
    # Observation validates itself, but duck-typed records (store rows) are accepted too, so
    # the checks are repeated here where the numbers are used.
    for o in obs:
        _check_polarity(o.polarity)
        _check_confidence(o.confidence)
    try:
        obs.sort(key=lambda o: o.at)  # list.sort is stable
    except TypeError as e:
        raise InvalidInput(f"observation times cannot be ordered: {e}") from e
    t = len(obs)
    miss_plus = 1.0  # prod over positives of (1 - w_i)
    miss_minus = 1.0
    for i, o in enumerate(obs, start=1):
        w = float(o.confidence) * decay ** (t - i)
        if o.polarity == "+":
            miss_plus *= 1.0 - w
        else:
            miss_minus *= 1.0 - w
    p_plus = 1.0 - miss_plus
    p_minus = 1.0 - miss_minus
    action = p_plus * (1.0 - p_minus)
    inaction = p_minus * (1.0 - p_plus)
    conflict = p_plus * p_minus
    ignorance = (1.0 - p_plus) * (1.0 - p_minus)
    # Algebraically in [0, 1]; the clamp keeps rounding from flipping R's sign when conflict
    # and ignorance take (almost) all the mass.
    decided = min(1.0, max(0.0, 1.0 - conflict - ignorance))
    r = (action - inaction) * decided
    return EvidenceStates(
        p_plus=p_plus,
        p_minus=p_minus,
        action=action,
        inaction=inaction,
        conflict=conflict,
        ignorance=ignorance,
        reliability=r,
    )
