"""`gem bench trajectory --html`: the report as one self-contained HTML file.

The plot is inline SVG (drawn by gem.dashboard.svg, so no matplotlib is needed), the tables
are HTML, the text table is kept verbatim; nothing is loaded from anywhere else, so the file
can be mailed, archived, or opened from `gem serve`'s Reports page.
"""
from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..dashboard import svg
from ..dashboard.html import badge, card, document, esc, table

if TYPE_CHECKING:
    from .report import Report

COLOURS = {"gem": "#111827"}


def _pct(x: float | None) -> str:
    return "n/a" if x is None else f"{100 * x:.1f}%"


def render(report: "Report") -> str:
    data: dict[str, Any] = report.to_json(failure_limit=0)
    c = report.stream.config
    turns = len(report.stream.turns)
    names = [run.name for run in report.runs]
    colour = {name: COLOURS.get(name, svg.PALETTE[i % len(svg.PALETTE)]) for i, name in enumerate(names)}

    accuracy = []
    footprint = []
    for name in names:
        series = data["systems"][name]["series"]
        cum = series["cumulative_accuracy"]
        width = 2.6 if name == "gem" else 1.5
        accuracy.append(svg.Series(name, [(i, 100 * a) for i, a in enumerate(cum) if a is not None],
                                   colour[name], width=width))
        footprint.append(svg.Series(name, list(enumerate(series["footprint"])), colour[name],
                                    width=width))
    bound = svg.Series("beta(n)", list(enumerate(data["truth_series"]["bound"])), "#6b7280",
                       dashed=True, width=1.5)
    plot = (svg.legend(accuracy + [bound])
            + svg.line_chart(accuracy, width=1000, height=300, y_min=0, y_max=100,
                             x_range=(0, max(turns - 1, 1)),
                             y_label="current-value accuracy, cumulative (%)", x_label="turn",
                             title="cumulative accuracy over turns")
            + svg.line_chart(footprint + [bound], width=1000, height=300, y_min=0,
                             x_range=(0, max(turns - 1, 1)),
                             y_label="active footprint (units)", x_label="turn",
                             title="active footprint over turns, with the bound beta(n)"))

    head = ["system", "family", "accuracy", "stale", "miss", "flag recall", "flag precision",
            "max footprint / beta", "within beta", "provenance", "ms / turn"]
    rows = []
    for run in report.runs:
        s = report.scores[run.name]
        rows.append([f'<b>{esc(run.name)}</b>', esc(run.family), _pct(s["accuracy"]),
                     _pct(s["stale_rate"]), _pct(s["miss_rate"]), _pct(s["flag_recall"]),
                     _pct(s["flag_precision"]), f'{s["footprint_bound_ratio_max"]:.2f}',
                     _pct(s["within_bound_share"]), _pct(s["provenance_complete"]),
                     f'{s["ms_per_turn_mean"]:.2f}'])
    cases = sorted({p.last_event for run in report.runs for p in run.probes})
    case_rows = []
    for case in cases:
        cells = [esc(case)]
        count = 0
        for run in report.runs:
            ps = [p for p in run.probes if p.last_event == case]
            count = len(ps)
            cells.append(_pct(sum(p.outcome == "correct" for p in ps) / len(ps)) if ps else "n/a")
        case_rows.append([cells[0], esc(count), *cells[1:]])
    gem_runs = [r for r in report.runs if r.name.startswith("gem")]
    audits = "".join(
        f"<p>{esc(r.name)}: audit {badge('ok') if r.summary.get('audit_ok') else badge('failed', 'bad')}, "
        f"{len(r.summary.get('errors', []))} rejected operations</p>" for r in gem_runs)
    summary = (f"<p>{turns} turns, seed {c.seed}, {len(report.stream.projects)} projects; "
               f"beta(n) = {c.bound_base:g} + {c.bound_slope:g}·n; stream: "
               + esc(", ".join(f"{k} {v}" for k, v in report.stream.counts().items()))
               + f"; wall time {report.seconds:.1f} s. Definitions: specs/trajectory-benchmark.md.</p>")
    body = (card("The run", summary + audits)
            + card("Accuracy and footprint over turns", plot)
            + card("Scores", table(head, rows))
            + card("Accuracy by the probed unit's most recent event",
                   table(["case", "probes", *names], case_rows))
            + card("The text table", f"<pre>{esc(report.table())}</pre>"))
    return document(f"gem trajectory benchmark: {turns} turns, seed {c.seed}", body)


def write(report: "Report", path: Path) -> Path:
    path.write_text(render(report), encoding="utf-8")
    return path


__all__ = ["render", "write"]
