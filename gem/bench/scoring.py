"""The trajectory benchmark's runner and scores: drive one system through the stream turn by
turn (`run_system`), classify each probe, and score the run (`score`), with the failures
and their causes (specs/trajectory-benchmark.md)."""
from __future__ import annotations

import statistics
import time
from collections import Counter
from dataclasses import asdict, dataclass, field
from typing import Any, Callable

from .stream import INGEST_KINDS, Stream, stamp, value_str
from .system import System
from .truth import ProbeTruth, Truth


@dataclass
class ProbeOutcome:
    turn: int
    topic: str
    field: str
    expected: Any
    got: Any
    outcome: str          # correct | stale | miss | wrong
    reason: str
    last_event: str
    provenance: bool


@dataclass
class FlagOutcome:
    turn: int
    changes: list[list[Any]]    # [topic, field, old, new]; lists so JSON round-trips
    expected: list[str]
    got: list[str]


@dataclass
class SystemRun:
    name: str
    family: str
    probes: list[ProbeOutcome] = field(default_factory=list)
    flags: list[FlagOutcome] = field(default_factory=list)
    footprint: list[int] = field(default_factory=list)
    seconds: list[float] = field(default_factory=list)
    kinds: list[str] = field(default_factory=list)
    diagnoses: dict[int, dict[str, Any]] = field(default_factory=dict)
    summary: dict[str, Any] = field(default_factory=dict)
    wall_seconds: float = 0.0


def classify(answer: Any, truth: ProbeTruth) -> str:
    if answer is None:
        return "miss"
    if answer == truth.value:
        return "correct"
    if answer in truth.superseded:
        return "stale"
    return "wrong"


def run_system(stream: Stream, truth: Truth, system: System,
               progress: Callable[[str], None] | None = None) -> SystemRun:
    """Drive one system through the stream and record what it did at every turn."""
    run = SystemRun(system.name, system.family)
    started = time.perf_counter()
    step = max(1, len(stream.turns) // 10)
    for turn, tt in zip(stream.turns, truth.turns):
        system.begin(turn)
        t0 = time.perf_counter()
        answer = None
        if turn.kind == "link":
            system.link(turn)
        elif turn.kind == "query":
            q = turn.query
            assert q is not None
            answer = system.query(q.topic, q.field, q.text)
        else:
            system.ingest(turn)
        dt = time.perf_counter() - t0
        flagged = system.flagged_after_update() if turn.kind in INGEST_KINDS else None
        run.seconds.append(dt)
        run.kinds.append(turn.kind)
        run.footprint.append(system.footprint())
        if flagged is not None and tt.expected_flags is not None:
            run.flags.append(FlagOutcome(turn.index, [list(c) for c in tt.changes],
                                         sorted(tt.expected_flags), sorted(flagged)))
        if tt.probe is not None:
            p = tt.probe
            outcome = classify(answer, p)
            assert turn.query is not None
            complete = system.provenance_complete(p.topic, p.field, p, turn.query.text)
            run.probes.append(ProbeOutcome(turn.index, p.topic, p.field, p.value, answer,
                                           outcome, p.reason, p.last_event, complete))
            if outcome != "correct":
                run.diagnoses[turn.index] = system.diagnose(p.topic, p.field)
        if progress and (turn.index + 1) % step == 0:
            progress(f"  {system.name}: turn {turn.index + 1}/{len(stream.turns)}")
    run.wall_seconds = time.perf_counter() - started
    run.summary = system.summary()
    return run


def _ratio(num: float, den: float) -> float | None:
    return None if den == 0 else num / den


def score(stream: Stream, truth: Truth, run: SystemRun) -> dict[str, Any]:
    """The metrics of one run (definitions in specs/trajectory-benchmark.md)."""
    probes = run.probes
    n_probes = len(probes)
    outcomes = Counter(p.outcome for p in probes)
    expected = sum(len(f.expected) for f in run.flags)
    raised = sum(len(f.got) for f in run.flags)
    hit = sum(len(set(f.expected) & set(f.got)) for f in run.flags)
    ratios = [fp / tt.bound for fp, tt in zip(run.footprint, truth.turns)]
    within = sum(1 for fp, tt in zip(run.footprint, truth.turns) if fp <= tt.bound)
    ms = [s * 1000 for s in run.seconds]
    by_kind: dict[str, list[float]] = {}
    for k, s in zip(run.kinds, ms):
        by_kind.setdefault(k, []).append(s)
    return {
        "probes": n_probes,
        "accuracy": _ratio(outcomes["correct"], n_probes),
        "stale_rate": _ratio(outcomes["stale"], n_probes),
        "miss_rate": _ratio(outcomes["miss"], n_probes),
        "wrong_rate": _ratio(outcomes["wrong"], n_probes),
        "flag_recall": _ratio(hit, expected),
        "flag_precision": _ratio(hit, raised),
        "flags_expected": expected,
        "flags_raised": raised,
        "footprint_final": run.footprint[-1] if run.footprint else 0,
        "footprint_max": max(run.footprint, default=0),
        "footprint_bound_ratio_max": max(ratios, default=0.0),
        "within_bound_share": _ratio(within, len(run.footprint)),
        "provenance_complete": _ratio(sum(p.provenance for p in probes), n_probes),
        "ms_per_turn_mean": statistics.fmean(ms) if ms else 0.0,
        "ms_per_turn_p95": (sorted(ms)[int(0.95 * (len(ms) - 1))] if ms else 0.0),
        "ms_by_kind": {k: round(statistics.fmean(v), 3) for k, v in sorted(by_kind.items())},
    }


def breakdown(run: SystemRun, key: str) -> dict[str, dict[str, Any]]:
    """Accuracy of the probes grouped by `reason` or `last_event`."""
    groups: dict[str, list[ProbeOutcome]] = {}
    for p in run.probes:
        groups.setdefault(getattr(p, key), []).append(p)
    return {k: {"probes": len(v), "accuracy": sum(p.outcome == "correct" for p in v) / len(v),
                "stale": sum(p.outcome == "stale" for p in v),
                "miss": sum(p.outcome == "miss" for p in v)}
            for k, v in sorted(groups.items())}


def failures(run: SystemRun, truth: Truth, stream: Stream, limit: int | None) -> dict[str, Any]:
    """Every failed probe and flag decision (or the first `limit`), with what the truth was."""
    bad = [p for p in run.probes if p.outcome != "correct"]
    flag_bad = [f for f in run.flags if set(f.expected) != set(f.got)]
    over = [i for i, (fp, tt) in enumerate(zip(run.footprint, truth.turns)) if fp > tt.bound]
    cut = (lambda xs: xs) if limit is None else (lambda xs: xs[:limit])
    probes = []
    for p in cut(bad):
        item = asdict(p)
        item["history"] = unit_history(stream, p.topic, p.field, p.turn)
        item["cause"] = cause(p, item["history"], run.diagnoses.get(p.turn, {}))
        if p.turn in run.diagnoses:
            item["system"] = run.diagnoses[p.turn]
        probes.append(item)
    return {
        "probe_failures": len(bad),
        "probes": probes,
        "flag_failures": len(flag_bad),
        "flags": [{**asdict(f), "missing": sorted(set(f.expected) - set(f.got)),
                   "extra": sorted(set(f.got) - set(f.expected))} for f in cut(flag_bad)],
        "over_bound_turns": cut(over),
        "over_bound_count": len(over),
    }


def cause(p: ProbeOutcome, history: list[list[Any]], diagnosis: dict[str, Any]) -> str:
    """A one-line reading of why a probe failed, from the truth side (and, for gem, the
    field's status)."""
    if p.outcome == "miss":
        if diagnosis.get("field_status") == "hidden":
            return "no answer: the field was hidden (attenuated under the C5 bound)"
        if diagnosis.get("topic_status") == "archived":
            return "no answer: the topic was archived"
        return "no answer: nothing about this unit was retrieved (evicted or ranked out)"
    late = [h for h in history if h[1].startswith("late") and h[2] == value_str(p.got)]
    inside = [h for h in history if h[1] == "late:inside-current-run"]
    if p.outcome == "stale" and late:
        note = ("" if not inside else "; the unit had a late fact older than a re-statement "
                "of its current value (turn " + ", ".join(str(h[0]) for h in inside) + ")")
        return f"a late-arriving value (turn {late[-1][0]}) was taken as current{note}"
    if p.outcome == "stale":
        return "an older value was returned instead of the current one"
    return "a value never asserted for this unit was returned"


def unit_history(stream: Stream, topic: str, fld: str, upto: int) -> list[list[Any]]:
    rows = []
    for turn in stream.turns[:upto]:
        for f in turn.facts:
            if f.topic == topic and f.field == fld:
                rows.append([turn.index, f.kind + (f":{f.case}" if f.case else ""),
                             value_str(f.value), stamp(f.at), f.source])
    return rows
