"""The trajectory benchmark's report: all runs and scores, as a text table, JSON and (with
matplotlib) a PNG plot (`write_outputs`)."""
from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from .scoring import SystemRun, breakdown, cause, failures, unit_history
from .stream import Stream
from .truth import Truth


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
            why = cause(p, unit_history(report.stream, p.topic, p.field, p.turn),
                        run.diagnoses.get(p.turn, {}))
            lines.append(f"  turn {p.turn}: {p.topic}.{p.field} expected {p.expected!r} got "
                         f"{p.got!r}: {why}")
        if len(bad) > 15:
            lines.append(f"  ... {len(bad) - 15} more in the JSON")
        for f in fb[:10]:
            lines.append(f"  turn {f.turn}: flags expected {f.expected} got {f.got}")
    lines += ["", f"wall time {report.seconds:.1f}s"]
    return "\n".join(lines)


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
