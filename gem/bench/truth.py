"""The trajectory benchmark's ground truth: C2 (the current value of every unit), C3 (the
dependents to re-evaluate after each update) and C5 (the allowed active footprint), after
every turn of a stream (specs/trajectory-benchmark.md)."""
from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from .stream import FactSpec, Stream


@dataclass(frozen=True)
class Assertion:
    value: Any
    at: datetime          # valid time
    order: int            # recording order (global, strictly increasing)
    source: str
    turn: int
    kind: str
    case: str


class Ledger:
    """The reference model of current values (the C1/C2 rule of the spec).

    The current value of a unit is the value of the assertion with the latest valid time;
    ties go to the assertion recorded last. A re-explanation is an assertion made at the
    time it is said, so it re-affirms the value as of then.
    """

    def __init__(self) -> None:
        self.units: dict[tuple[str, str], list[Assertion]] = {}

    @staticmethod
    def _key(a: Assertion) -> tuple[datetime, int]:
        return (a.at, a.order)

    def add(self, fact: FactSpec, order: int, turn: int) -> tuple[Any, Any] | None:
        """Record a fact. Returns (old, new) when the unit's current value changed to a
        different value (an update in the C3 sense), else None."""
        unit = (fact.topic, fact.field)
        before = self.current(unit)
        self.units.setdefault(unit, []).append(
            Assertion(fact.value, fact.at, order, fact.source, turn, fact.kind, fact.case))
        after = self.current(unit)
        if before is not None and after is not None and after.value != before.value:
            return (before.value, after.value)
        return None

    def ordered(self, unit: tuple[str, str]) -> list[Assertion]:
        return sorted(self.units.get(unit, ()), key=self._key)

    def current(self, unit: tuple[str, str]) -> Assertion | None:
        items = self.units.get(unit)
        return max(items, key=self._key) if items else None

    def run(self, unit: tuple[str, str]) -> list[Assertion]:
        """The trailing run: the latest assertions (in valid-time order) that all carry the
        current value."""
        items = self.ordered(unit)
        if not items:
            return []
        i = len(items) - 1
        while i > 0 and items[i - 1].value == items[-1].value:
            i -= 1
        return items[i:]

    def replaced(self, unit: tuple[str, str]) -> Any:
        """The value the unit held (in valid time) just before its current value: what the
        current answer replaced. None if it never held another value."""
        items = self.ordered(unit)
        run = self.run(unit)
        before = items[:len(items) - len(run)]
        return before[-1].value if before else None

    def values(self, unit: tuple[str, str]) -> set[Any]:
        return {a.value for a in self.units.get(unit, ())}

    def first(self, unit: tuple[str, str]) -> Assertion | None:
        items = self.ordered(unit)
        return items[0] if items else None


@dataclass(frozen=True)
class ProbeTruth:
    topic: str
    field: str
    value: Any
    superseded: frozenset
    sources: frozenset
    replaced: Any
    reason: str
    last_event: str       # kind[:case] of the unit's most recently recorded assertion


@dataclass(frozen=True)
class TurnTruth:
    n: int                               # interactions after this turn
    bound: float                         # beta(n)
    units: int                           # distinct units asserted so far
    changes: tuple[tuple[str, str, Any, Any], ...] = ()  # (topic, field, old, new)
    expected_flags: frozenset | None = None              # ingest turns only (C3)
    probe: ProbeTruth | None = None


@dataclass(frozen=True)
class Truth:
    turns: tuple[TurnTruth, ...]
    extension_edges: tuple[tuple[str, str, int], ...]    # (src, dst, turn linked)


def ground_truth(stream: Stream) -> Truth:
    """Replay the stream through the reference model and record, after every turn, what
    each of C2, C3 and C5 demands."""
    ledger = Ledger()
    dependents: dict[str, set[str]] = {}
    edges: list[tuple[str, str, int]] = []
    out: list[TurnTruth] = []
    n = 0
    order = 0
    for turn in stream.turns:
        if turn.interaction:
            n += 1
        bound = stream.config.bound(n)
        if turn.kind == "link":
            assert turn.link is not None
            if turn.link.kind == "extension":
                dependents.setdefault(turn.link.src, set()).add(turn.link.dst)
                edges.append((turn.link.src, turn.link.dst, turn.index))
            out.append(TurnTruth(n, bound, len(ledger.units)))
            continue
        if turn.kind == "query":
            q = turn.query
            assert q is not None
            unit = (q.topic, q.field)
            cur = ledger.current(unit)
            assert cur is not None, f"turn {turn.index} asks about an unknown unit {unit}"
            last = max(ledger.units[unit], key=lambda a: a.order)
            probe = ProbeTruth(
                q.topic, q.field, cur.value,
                superseded=frozenset(ledger.values(unit) - {cur.value}),
                sources=frozenset(a.source for a in ledger.run(unit)),
                replaced=ledger.replaced(unit), reason=q.reason,
                last_event=last.kind + (f":{last.case}" if last.case else ""))
            out.append(TurnTruth(n, bound, len(ledger.units), probe=probe))
            continue
        changes = []
        for fact in turn.facts:
            order += 1
            changed = ledger.add(fact, order, turn.index)
            if changed is not None:
                changes.append((fact.topic, fact.field, changed[0], changed[1]))
        flags: set[str] = set()
        for topic, _, _, _ in changes:
            flags |= dependents.get(topic, set())
        out.append(TurnTruth(n, bound, len(ledger.units), tuple(changes), frozenset(flags)))
    return Truth(tuple(out), tuple(edges))
