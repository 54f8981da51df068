"""The trajectory benchmark: ground truth at three levels over an adversarial stream.

GEM's research agenda (the paper, section 5, "Correctness and Evaluation") asks for a
workload with ground truth for the current value of every unit over time (C2), the
dependent units that must be re-evaluated after each update (C3) and the allowed active
footprint at each interaction count (C5). This module builds one and scores systems on it:

    generate(StreamConfig(turns=500, seed=0))  -> Stream        a seeded adversarial stream
    ground_truth(stream)                       -> Truth         C2 / C3 / C5 after every turn
    run_system(stream, truth, system)          -> SystemRun     one system, turn by turn
    score(stream, truth, run)                  -> dict          the metrics of one run
    run_benchmark(config, systems)             -> Report        all of it, plus table/JSON/PNG

The definition (what every turn kind means, the truth rules, each metric, each baseline
and its sources) is specs/trajectory-benchmark.md. Everything is offline and
deterministic: the stream depends only on (turns, seed), every system uses the same
`gem.HashingEmbedder`, and simulated time advances by a fixed step per turn.
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from collections import Counter
from dataclasses import asdict, dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any, Callable, Sequence

from . import baselines
from .generator import generate
from .stream import INGEST_KINDS, Stream, StreamConfig, Turn, stamp, value_str
from .system import Provenance, System
from .truth import ProbeTruth, Truth, ground_truth

class GemSystem(System):
    """gem with its default policies plus the benchmark's C5 bound."""

    name = "gem"
    family = "governed evolving memory (this project)"

    def __init__(self, config: StreamConfig, *, engine: str = "kuzu",
                 extra_policies: str = "", maintain_every: int = 0,
                 name: str | None = None, path: str | None = None) -> None:
        """`path`: where the memory lives (None: a temporary embedded database; with engine
        "falkordb", a server's URL without a name is a temporary memory on it)."""
        super().__init__()
        import gem
        self._gem = gem
        if name:
            self.name = name
        self._dir = tempfile.TemporaryDirectory(prefix="gem-bench-")
        bound = Path(self._dir.name) / "trajectory-bound.policy"
        bound.write_text("# the trajectory benchmark's C5 bound\n" + config.bound_policy()
                         + extra_policies, encoding="utf-8")
        self.policy_files = [str(bound)]  # composed on the default governance
        self.mem = gem.open(path=path, policies=self.policy_files,
                            embedder=gem.HashingEmbedder(), clock=lambda: self.now,
                            engine=engine)
        self.config = config
        self.maintain_every = maintain_every
        self._turns = 0
        self._flagged: set[str] = set()
        self.errors: list[dict[str, Any]] = []
        self.bound_mismatches: list[dict[str, Any]] = []
        self._turn = -1

    def begin(self, turn: Turn) -> None:
        super().begin(turn)
        self._turn = turn.index

    def ingest(self, turn: Turn) -> None:
        gem = self._gem
        facts = [gem.Fact(f.topic, f.field, f.value, at=f.at, source=f.source, actor="user",
                          ref=f"turn-{turn.index}") for f in turn.facts]
        self._flagged = set()
        try:
            result = self.mem.ingest(facts)
        except gem.GemError as exc:
            self.errors.append({"turn": turn.index, "op": "ingest", "error": type(exc).__name__,
                                "detail": str(exc)})
            return
        self._flagged = set(result.flagged)
        self._maintain()

    def _maintain(self) -> None:
        self._turns += 1
        if self.maintain_every and self._turns % self.maintain_every == 0:
            try:
                self.mem.maintain()
            except self._gem.GemError as exc:
                self.errors.append({"turn": self._turn, "op": "maintain",
                                    "error": type(exc).__name__, "detail": str(exc)})

    def link(self, turn: Turn) -> None:
        assert turn.link is not None
        try:
            self.mem.link(turn.link.src, turn.link.dst, kind=turn.link.kind)
        except self._gem.GemError as exc:
            self.errors.append({"turn": turn.index, "op": "link", "error": type(exc).__name__,
                                "detail": str(exc)})

    def query(self, topic: str, field: str, text: str) -> Any:
        try:
            result = self.mem.retrieve(topic=topic, fields=[field])
        except self._gem.GemError as exc:
            self.errors.append({"turn": self._turn, "op": "retrieve",
                                "error": type(exc).__name__, "detail": str(exc)})
            return None
        finally:
            self._maintain()
        return result.value(topic, field)

    def flagged_after_update(self) -> set[str]:
        return set(self._flagged)

    def footprint(self) -> int:
        stats = self.mem.stats()
        want = self.config.bound(self.n)
        got = stats.get("active_bound")
        if stats.get("interactions") != self.n or got is None or abs(got - want) > 1e-9:
            self.bound_mismatches.append({"turn": self._turn, "n": self.n,
                                          "gem_interactions": stats.get("interactions"),
                                          "beta": want, "gem_active_bound": got})
        return int(stats["active_fields"])

    def provenance(self, topic: str, field: str, text: str | None = None) -> Provenance | None:
        try:
            history = self.mem.history(topic, field)
            view = self.mem.inspect(topic, field)
        except self._gem.GemError:
            return None
        if view is None:
            return None
        # In order of statement: a re-stated value counts from its latest statement.
        entries = sorted((h for h in history if h.status != "retracted"
                          and h.provenance.polarity == "+"), key=lambda h: (h.asserted_at, h.recorded_at))
        current = [i for i, h in enumerate(entries) if h.status == "current"]
        if not current:
            return None
        i = current[0]
        cur = entries[i]
        older = [h for h in entries[:i] if h.value != cur.value]
        # The source of the latest statement: the entry's own, or a later re-statement's.
        statements = [(cur.valid_at, cur.provenance.source)] + [
            (o.valid_at, o.provenance.source) for o in cur.observations
            if o.provenance.polarity == "+"]
        source = max(statements, key=lambda s: s[0])[1]
        return Provenance(cur.value, source, older[-1].value if older else None)

    def diagnose(self, topic: str, field: str) -> dict[str, Any]:
        out: dict[str, Any] = {}
        try:
            tv = self.mem.inspect(topic)
            fv = self.mem.inspect(topic, field)
            out["topic_status"] = None if tv is None else tv.status
            if fv is not None:
                out.update(field_status=fv.status, salience=round(fv.salience, 4),
                           contested=fv.contested, stored_current=fv.value)
            out["history"] = [(h.value, h.valid_at.isoformat(), h.status, h.provenance.source,
                               len(h.observations)) for h in self.mem.history(topic, field)]
        except self._gem.GemError as exc:
            out["error"] = str(exc)
        return out

    def summary(self) -> dict[str, Any]:
        audit = self.mem.audit()
        stats = self.mem.stats()
        return {"errors": self.errors, "bound_mismatches": self.bound_mismatches[:20],
                "bound_mismatch_count": len(self.bound_mismatches),
                "audit_ok": audit.ok, "audit_violations": [v.model_dump() for v in audit.violations][:20],
                "stats": {k: v for k, v in stats.items() if k != "topics"},
                "policies": [p.name for p in self.mem.policies.policies],
                "maintain_every": self.maintain_every}

    def close(self) -> None:
        self.mem.close()
        self._dir.cleanup()


# ---------------------------------------------------------------------------- running
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
        item["history"] = _unit_history(stream, p.topic, p.field, p.turn)
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


def _unit_history(stream: Stream, topic: str, fld: str, upto: int) -> list[list[Any]]:
    rows = []
    for turn in stream.turns[:upto]:
        for f in turn.facts:
            if f.topic == topic and f.field == fld:
                rows.append([turn.index, f.kind + (f":{f.case}" if f.case else ""),
                             value_str(f.value), stamp(f.at), f.source])
    return rows


# ---------------------------------------------------------------------------- report
SYSTEM_ORDER = ("gem", "vector-store", "mem0-v2", "mem0-v3", "zep", "ga-memgpt")


def make_systems(config: StreamConfig, names: Sequence[str] | None = None, *,
                 gem_engine: str = "kuzu", gem_maintain_every: int = 0) -> list[System]:
    factories: dict[str, Callable[[], System]] = {
        "gem": lambda: GemSystem(config, engine=gem_engine, maintain_every=gem_maintain_every),
        "vector-store": lambda: baselines.AppendOnlyVectorStore(config),
        "mem0-v2": lambda: baselines.OverwriteFactStore(config),
        "mem0-v3": lambda: baselines.AddOnlyFactStore(config),
        "zep": lambda: baselines.BitemporalGraph(config),
        "ga-memgpt": lambda: baselines.RecencyImportanceMemory(config),
    }
    names = list(names or SYSTEM_ORDER)
    unknown = [n for n in names if n not in factories]
    if unknown:
        raise ValueError(f"unknown system(s) {unknown}; choose from {list(factories)}")
    return [factories[n]() for n in names]


@dataclass
class Report:
    stream: Stream
    truth: Truth
    runs: list[SystemRun]
    scores: dict[str, dict[str, Any]]
    seconds: float

    def table(self) -> str:
        return format_table(self)

    def to_json(self, failure_limit: int | None = 200) -> dict[str, Any]:
        c = self.stream.config
        systems = {}
        for run in self.runs:
            cum, correct, seen = [], 0, 0
            probe_at = {p.turn: p for p in run.probes}
            for i in range(len(self.stream.turns)):
                if i in probe_at:
                    seen += 1
                    correct += probe_at[i].outcome == "correct"
                cum.append(None if seen == 0 else correct / seen)
            limit = None if run.name.startswith("gem") else failure_limit
            systems[run.name] = {
                "family": run.family,
                "scores": self.scores[run.name],
                "by_reason": breakdown(run, "reason"),
                "by_last_event": breakdown(run, "last_event"),
                "series": {"footprint": run.footprint, "cumulative_accuracy": cum},
                "failures": failures(run, self.truth, self.stream, limit),
                "details": run.summary,
                "wall_seconds": run.wall_seconds,
            }
        return {
            "benchmark": "gem trajectory benchmark",
            "spec": "specs/trajectory-benchmark.md",
            "config": asdict(c),
            "bound": f"beta(n) = {c.bound_base:g} + {c.bound_slope:g} * n",
            "stream": {"turns": len(self.stream.turns), "projects": list(self.stream.projects),
                       "hot_facts": [list(u) for u in self.stream.hot],
                       "links": [asdict(l) for l in self.stream.links],
                       "kinds": self.stream.counts(),
                       "units": self.truth.turns[-1].units if self.truth.turns else 0,
                       "interactions": self.truth.turns[-1].n if self.truth.turns else 0,
                       "updates_with_dependents": sum(1 for t in self.truth.turns
                                                      if t.expected_flags),
                       "flags_expected": sum(len(t.expected_flags or ()) for t in self.truth.turns)},
            "truth_series": {"bound": [t.bound for t in self.truth.turns],
                             "n": [t.n for t in self.truth.turns],
                             "probe_turns": [i for i, t in enumerate(self.truth.turns) if t.probe]},
            "systems": systems,
            "seconds": self.seconds,
        }


def _pct(x: float | None) -> str:
    return "n/a" if x is None else f"{100 * x:5.1f}%"


def format_table(report: Report) -> str:
    c = report.stream.config
    t = report.truth.turns[-1]
    counts = report.stream.counts()
    lines = [
        f"gem trajectory benchmark: {len(report.stream.turns)} turns, seed {c.seed}, "
        f"{len(report.stream.projects)} projects, {t.units} units, n={t.n} interactions, "
        f"beta(n) = {c.bound_base:g} + {c.bound_slope:g}*n",
        "stream: " + ", ".join(f"{k} {v}" for k, v in counts.items()),
        f"probes: {sum(1 for x in report.truth.turns if x.probe)}; updates with dependents: "
        f"{sum(1 for x in report.truth.turns if x.expected_flags)} "
        f"({sum(len(x.expected_flags or ()) for x in report.truth.turns)} expected flags)",
        "",
    ]
    head = ("system", "accuracy", "stale", "miss", "flag R", "flag P", "max fp/beta",
            "within beta", "provenance", "ms/turn")
    rows = []
    for run in report.runs:
        s = report.scores[run.name]
        rows.append((run.name, _pct(s["accuracy"]), _pct(s["stale_rate"]), _pct(s["miss_rate"]),
                     _pct(s["flag_recall"]), _pct(s["flag_precision"]),
                     f"{s['footprint_bound_ratio_max']:.2f}", _pct(s["within_bound_share"]),
                     _pct(s["provenance_complete"]), f"{s['ms_per_turn_mean']:.2f}"))
    widths = [max(len(str(r[i])) for r in (head, *rows)) for i in range(len(head))]
    fmt = lambda r: "  ".join(str(v).ljust(w) if i == 0 else str(v).rjust(w)
                              for i, (v, w) in enumerate(zip(r, widths)))
    lines.append(fmt(head))
    lines.append("  ".join("-" * w for w in widths))
    lines += [fmt(r) for r in rows]
    # accuracy by the unit's last event, the adversarial cases side by side
    cases = sorted({p.last_event for run in report.runs for p in run.probes})
    if cases:
        lines += ["", "accuracy by the probed unit's most recent event (probes per case):"]
        head2 = ("case", "probes", *[run.name for run in report.runs])
        rows2 = []
        for case in cases:
            per = []
            count = 0
            for run in report.runs:
                ps = [p for p in run.probes if p.last_event == case]
                count = len(ps)
                per.append(_pct(sum(p.outcome == "correct" for p in ps) / len(ps)) if ps else "n/a")
            rows2.append((case, str(count), *per))
        w2 = [max(len(str(r[i])) for r in (head2, *rows2)) for i in range(len(head2))]
        f2 = lambda r: "  ".join(str(v).ljust(w) if i == 0 else str(v).rjust(w)
                                 for i, (v, w) in enumerate(zip(r, w2)))
        lines.append(f2(head2))
        lines += [f2(r) for r in rows2]
    for run in report.runs:
        if not run.name.startswith("gem"):
            continue
        bad = [p for p in run.probes if p.outcome != "correct"]
        fb = [f for f in run.flags if set(f.expected) != set(f.got)]
        over = sum(1 for fp, tt in zip(run.footprint, report.truth.turns) if fp > tt.bound)
        lines += ["", f"{run.name}: {len(bad)} failed probes, {len(fb)} wrong flag sets, "
                      f"{over} turns over beta(n), {len(run.summary.get('errors', []))} rejected "
                      f"operations, audit {'ok' if run.summary.get('audit_ok') else 'FAILED'}"]
        for p in bad[:15]:
            why = cause(p, _unit_history(report.stream, p.topic, p.field, p.turn),
                        run.diagnoses.get(p.turn, {}))
            lines.append(f"  turn {p.turn}: {p.topic}.{p.field} expected {p.expected!r} got "
                         f"{p.got!r}: {why}")
        if len(bad) > 15:
            lines.append(f"  ... {len(bad) - 15} more in the JSON")
        for f in fb[:10]:
            lines.append(f"  turn {f.turn}: flags expected {f.expected} got {f.got}")
    lines += ["", f"wall time {report.seconds:.1f}s"]
    return "\n".join(lines)


def run_benchmark(config: StreamConfig, systems: Sequence[str] | None = None, *,
                  gem_engine: str = "kuzu", gem_maintain_every: int = 0,
                  progress: Callable[[str], None] | None = None) -> Report:
    started = time.perf_counter()
    stream = generate(config)
    truth = ground_truth(stream)
    runs = []
    for system in make_systems(config, systems, gem_engine=gem_engine,
                               gem_maintain_every=gem_maintain_every):
        if progress:
            progress(f"running {system.name} ...")
        try:
            runs.append(run_system(stream, truth, system, progress))
        finally:
            system.close()
    scores = {run.name: score(stream, truth, run) for run in runs}
    return Report(stream, truth, runs, scores, time.perf_counter() - started)


def write_outputs(report: Report, out: Path, html: bool = False) -> dict[str, Path | str]:
    """Write the table, the JSON and (if matplotlib is installed) the PNG into `out`; with
    `html`, also a self-contained HTML report (gem/bench/trajectory_html.py)."""
    out.mkdir(parents=True, exist_ok=True)
    c = report.stream.config
    stem = f"trajectory-{len(report.stream.turns)}-seed{c.seed}"
    written: dict[str, Path | str] = {}
    table_path = out / f"{stem}.txt"
    table_path.write_text(report.table() + "\n", encoding="utf-8")
    written["table"] = table_path
    json_path = out / f"{stem}.json"
    json_path.write_text(json.dumps(report.to_json(), indent=1, default=_json_default) + "\n",
                         encoding="utf-8")
    written["json"] = json_path
    png = plot(report, out / f"{stem}.png")
    written["png"] = png
    if html:
        from . import trajectory_html
        written["html"] = trajectory_html.write(report, out / f"{stem}.html")
    return written


def _json_default(x: Any) -> Any:
    if isinstance(x, datetime):
        return x.isoformat()
    if isinstance(x, (set, frozenset)):
        return sorted(x, key=str)
    return str(x)


def plot(report: Report, path: Path) -> Path | str:
    """Accuracy and footprint over turns. Returns the path, or why no PNG was written."""
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return ("no PNG: matplotlib is not installed (it is the optional `bench` extra: "
                "pip install 'gem-memory[bench]')")
    data = report.to_json(failure_limit=0)
    turns = list(range(len(report.stream.turns)))
    fig, (ax1, ax2) = plt.subplots(2, 1, figsize=(10, 8), sharex=True)
    for run in report.runs:
        series = data["systems"][run.name]["series"]
        acc = series["cumulative_accuracy"]
        xs = [i for i, a in zip(turns, acc) if a is not None]
        ax1.plot(xs, [100 * acc[i] for i in xs], label=run.name, linewidth=2 if run.name == "gem" else 1.2)
        ax2.plot(turns, series["footprint"], label=run.name, linewidth=2 if run.name == "gem" else 1.2)
    ax2.plot(turns, [t.bound for t in report.truth.turns], "k--", label="beta(n)")
    ax1.set_ylabel("current-value accuracy, cumulative (%)")
    ax1.set_ylim(0, 105)
    ax1.legend(loc="lower left", fontsize=8)
    ax1.grid(alpha=0.3)
    ax2.set_ylabel("active footprint (units)")
    ax2.set_xlabel("turn")
    ax2.legend(loc="upper left", fontsize=8)
    ax2.grid(alpha=0.3)
    c = report.stream.config
    fig.suptitle(f"gem trajectory benchmark: {len(turns)} turns, seed {c.seed}")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


# ---------------------------------------------------------------------------- CLI
def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--turns", type=int, default=500, help="stream length (default 500)")
    p.add_argument("--seed", type=int, default=0, help="generator seed (default 0)")
    p.add_argument("--out", default="bench/out", help="output directory (default bench/out/)")
    p.add_argument("--systems", default=",".join(SYSTEM_ORDER),
                   help=f"comma-separated subset of {','.join(SYSTEM_ORDER)}")
    p.add_argument("--bound-base", type=float, default=StreamConfig.bound_base,
                   help="beta(n) = base + slope * n (default 40)")
    p.add_argument("--bound-slope", type=float, default=StreamConfig.bound_slope,
                   help="beta(n) = base + slope * n (default 0.1)")
    p.add_argument("--gem-engine", default="kuzu", choices=["kuzu", "ladybug"])
    p.add_argument("--gem-maintain-every", type=int, default=0, metavar="K",
                   help="run gem's maintenance (forget + revise) every K interactions "
                        "(default 0: never; only the C5 bound attenuates)")
    p.add_argument("--html", action="store_true",
                   help="also write a self-contained HTML report (inline SVG plot), which "
                        "`gem serve --reports DIR` lists on the dashboard")
    p.add_argument("--quiet", action="store_true", help="no progress lines on stderr")


def run(args: argparse.Namespace) -> int:
    config = StreamConfig(turns=args.turns, seed=args.seed, bound_base=args.bound_base,
                          bound_slope=args.bound_slope)
    systems = [s.strip() for s in args.systems.split(",") if s.strip()]
    progress = None if args.quiet else (lambda m: print(m, file=sys.stderr, flush=True))
    try:
        report = run_benchmark(config, systems, gem_engine=args.gem_engine,
                               gem_maintain_every=args.gem_maintain_every, progress=progress)
    except ValueError as exc:
        print(f"gem bench trajectory: {exc}", file=sys.stderr)
        return 2
    print(report.table())
    written = write_outputs(report, Path(args.out), html=args.html)
    for kind, where in written.items():
        print(f"{kind}: {where}")
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m gem.bench.trajectory",
                                     description="gem's trajectory benchmark")
    add_arguments(parser)
    return run(parser.parse_args(argv))


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
