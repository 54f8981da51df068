"""Inline SVG drawings, server-side: line charts, the bitemporal timeline of a field, stacked
bars, a node-link neighbourhood and a layered trigger graph.

Plain strings, no script: tooltips are SVG <title> elements, clicks are SVG <a> links. Every
text and attribute that can come from the memory is escaped here (`esc`), so callers pass
raw strings. Times are drawn on linear scales of seconds since the epoch.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Sequence

from .html import esc, short

PALETTE = ("#2563eb", "#16a34a", "#d97706", "#7c3aed", "#0d9488", "#dc2626", "#db2777",
           "#4b5563", "#65a30d", "#0891b2")
STATUS_FILL = {"active": "#dbeafe", "archived": "#e5e7eb"}
EDGE_STYLE = {  # colour, dash, arrow, curvature
    "extension": ("#2563eb", "", True, 0.0),
    "association": ("#0d9488", "6 4", False, 0.18),
    "derived": ("#7c3aed", "2 3", True, -0.18),
}
Point = tuple[float | datetime, float]


def seconds(x: float | datetime) -> float:
    return x.timestamp() if isinstance(x, datetime) else float(x)


def _f(x: float) -> str:
    return f"{x:.1f}"


class Scale:
    """Linear map from [lo, hi] to [a, b]; an empty domain is widened around its value."""

    def __init__(self, lo: float, hi: float, a: float, b: float) -> None:
        if hi <= lo:
            pad = abs(lo) * 0.05 or 1.0
            lo, hi = lo - pad, hi + pad
        self.lo, self.hi, self.a, self.b = lo, hi, a, b

    def __call__(self, v: float | datetime) -> float:
        return self.a + (seconds(v) - self.lo) / (self.hi - self.lo) * (self.b - self.a)


def nice_ticks(lo: float, hi: float, n: int = 5) -> list[float]:
    if hi <= lo:
        return [lo]
    raw = (hi - lo) / max(n, 1)
    mag = 10 ** math.floor(math.log10(raw))
    step = next(m * mag for m in (1, 2, 2.5, 5, 10) if m * mag >= raw)
    first = math.ceil(lo / step - 1e-9) * step
    out, k = [], 0
    while first + k * step <= hi + step * 1e-9:
        out.append(round(first + k * step, 12))
        k += 1
    return out


_DAY = 86400.0
TIME_STEPS = (1, 5, 15, 30, 60, 300, 900, 1800, 3600, 3 * 3600, 6 * 3600, 12 * 3600, _DAY,
              2 * _DAY, 7 * _DAY, 14 * _DAY, 30 * _DAY, 91 * _DAY, 182 * _DAY, 365 * _DAY,
              2 * 365 * _DAY, 5 * 365 * _DAY, 10 * 365 * _DAY, 50 * 365 * _DAY)


def time_ticks(lo: float, hi: float, n: int = 6) -> list[tuple[float, str]]:
    """Ticks at round UTC times (multiples of the step since the epoch), labelled by scale."""
    span = max(hi - lo, 1.0)
    step = next((s for s in TIME_STEPS if span / s <= n), TIME_STEPS[-1])
    fmt = "%H:%M:%S" if step < 60 else "%m-%d %H:%M" if step < _DAY else \
        "%Y-%m-%d" if step < 365 * _DAY else "%Y"
    first = math.ceil(lo / step) * step
    out = []
    k = 0
    while first + k * step <= hi:
        at = first + k * step
        out.append((at, datetime.fromtimestamp(at, timezone.utc).strftime(fmt)))
        k += 1
    return out


@dataclass(frozen=True)
class Series:
    name: str
    points: Sequence[Point]
    colour: str | None = None
    dashed: bool = False
    width: float = 1.8
    markers: Sequence[Point] = ()     # points to mark with a dot (stored values, say)


@dataclass(frozen=True)
class Marker:
    """A vertical line at `x` with a short label and a tooltip (an event on a time axis)."""
    x: float | datetime
    label: str
    tip: str
    colour: str = "#9ca3af"


def line_chart(series: Sequence[Series], *, width: int = 640, height: int = 240,
               x_time: bool = False, y_min: float | None = None, y_max: float | None = None,
               x_range: tuple[float | datetime, float | datetime] | None = None,
               y_label: str = "", x_label: str = "", y_format: str = "{:g}",
               markers: Sequence[Marker] = (), title: str = "") -> str:
    left, right, top, bottom = 52, 14, 14, 40
    xs = [seconds(x) for s in series for x, _ in s.points] + [seconds(m.x) for m in markers]
    ys = [y for s in series for _, y in s.points]
    if x_range is not None:
        x_lo, x_hi = seconds(x_range[0]), seconds(x_range[1])
    else:
        x_lo, x_hi = (min(xs), max(xs)) if xs else (0.0, 1.0)
    y_lo = y_min if y_min is not None else (min(ys) if ys else 0.0)
    y_hi = y_max if y_max is not None else (max(ys) if ys else 1.0)
    sx = Scale(x_lo, x_hi, left, width - right)
    sy = Scale(y_lo, y_hi, height - bottom, top)
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {width} {height}" '
           f'width="{width}" height="{height}" role="img" class="chart">']
    if title:
        out.append(f"<title>{esc(title)}</title>")
    out.append(f'<rect x="{left}" y="{top}" width="{width - left - right}" '
               f'height="{height - top - bottom}" fill="#fff" stroke="#e5e7eb"/>')
    for y in nice_ticks(sy.lo, sy.hi, 4):
        py = sy(y)
        out.append(f'<line x1="{left}" x2="{width - right}" y1="{_f(py)}" y2="{_f(py)}" '
                   f'stroke="#f0f1f3"/><text x="{left - 6}" y="{_f(py + 4)}" font-size="10" '
                   f'text-anchor="end" fill="#6b7280">{esc(y_format.format(y))}</text>')
    x_ticks = time_ticks(sx.lo, sx.hi) if x_time else \
        [(x, f"{x:g}") for x in nice_ticks(sx.lo, sx.hi, 6)]
    for x, label in x_ticks:
        px = sx(x)
        out.append(f'<line x1="{_f(px)}" x2="{_f(px)}" y1="{top}" y2="{height - bottom}" '
                   f'stroke="#f0f1f3"/><text x="{_f(px)}" y="{height - bottom + 14}" '
                   f'font-size="10" text-anchor="middle" fill="#6b7280">{esc(label)}</text>')
    for m in markers:
        px = sx(m.x)
        out.append(f'<g><title>{esc(m.tip)}</title><line x1="{_f(px)}" x2="{_f(px)}" y1="{top}" '
                   f'y2="{height - bottom}" stroke="{esc(m.colour)}" stroke-dasharray="3 3"/>'
                   f'<text x="{_f(px + 3)}" y="{top + 10}" font-size="10" '
                   f'fill="{esc(m.colour)}">{esc(short(m.label, 18))}</text></g>')
    for i, s in enumerate(series):
        colour = s.colour or PALETTE[i % len(PALETTE)]
        dash = ' stroke-dasharray="5 4"' if s.dashed else ""
        path = " ".join(f"{'M' if k == 0 else 'L'}{_f(sx(px))},{_f(sy(py))}"
                        for k, (px, py) in enumerate(s.points))
        out.append(f'<g class="series"><title>{esc(s.name)}</title>')
        if path:
            out.append(f'<path d="{path}" fill="none" stroke="{esc(colour)}" '
                       f'stroke-width="{s.width}"{dash}/>')
        for mx, my in s.markers:
            out.append(f'<circle cx="{_f(sx(mx))}" cy="{_f(sy(my))}" r="2.6" fill="{esc(colour)}"/>')
        out.append("</g>")
    if y_label:
        out.append(f'<text x="12" y="{_f((top + height - bottom) / 2)}" font-size="11" '
                   f'fill="#6b7280" text-anchor="middle" transform="rotate(-90 12 '
                   f'{_f((top + height - bottom) / 2)})">{esc(y_label)}</text>')
    if x_label:
        out.append(f'<text x="{_f((left + width - right) / 2)}" y="{height - 6}" font-size="11" '
                   f'fill="#6b7280" text-anchor="middle">{esc(x_label)}</text>')
    out.append("</svg>")
    return "".join(out)


def legend(series: Sequence[Series]) -> str:
    items = []
    for i, s in enumerate(series):
        colour = s.colour or PALETTE[i % len(PALETTE)]
        style = f"background:{colour}" if not s.dashed else \
            f"background:repeating-linear-gradient(90deg,{colour} 0 5px,transparent 5px 8px)"
        items.append(f'<span><i class="sw" style="{esc(style)}"></i>{esc(s.name)}</span>')
    return f'<div class="legend">{"".join(items)}</div>'


# ---------------------------------------------------------------------- the bitemporal timeline
@dataclass(frozen=True)
class Span:
    """One history entry: valid from `valid_from` until `valid_to` (None: still), believed
    from `recorded_from` until `recorded_to` (None: still)."""
    label: str
    status: str                       # current | superseded | retracted
    valid_from: datetime
    valid_to: datetime | None
    recorded_from: datetime
    recorded_to: datetime | None
    tip: str
    active: bool = True               # False: compressed out of the active history


@dataclass(frozen=True)
class Mark:
    """An observation of an entry: a corroboration (+) or a denial (-)."""
    valid: datetime
    recorded: datetime
    polarity: str
    tip: str
    of: int                           # the index of its span


SPAN_STYLE = {"current": ("#2563eb", "#dbeafe"), "superseded": ("#6b7280", "#f3f4f6"),
              "retracted": ("#dc2626", "#fee2e2")}


def bitemporal(spans: Sequence[Span], marks: Sequence[Mark], now: datetime, *, width: int = 660,
               height: int = 230, labels: int = 10) -> str:
    """Valid time (x) against recorded time (y): each entry a rectangle over the time it held
    and the time it was believed; open ends run to the edge. Observations are dots (+) and
    crosses (-) at their own times, tied to their entry."""
    left, right, top, bottom = 14, 14, 16, 44
    xs = [seconds(s.valid_from) for s in spans] + [seconds(s.valid_to) for s in spans if s.valid_to] + \
        [seconds(m.valid) for m in marks]
    ys = [seconds(s.recorded_from) for s in spans] + \
        [seconds(s.recorded_to) for s in spans if s.recorded_to] + [seconds(m.recorded) for m in marks]
    # The history's own time range: open ends (the current value, still believed) run to the
    # edge rather than stretching the drawing to today.
    x_lo, x_hi = min(xs), max(xs)
    y_lo, y_hi = min(ys), max(ys)
    pad_x = (x_hi - x_lo) * 0.12 or _DAY
    pad_y = (y_hi - y_lo) * 0.12 or _DAY
    sx = Scale(x_lo - pad_x, x_hi + pad_x, left, width - right)
    sy = Scale(y_lo - pad_y, y_hi + pad_y, height - bottom, top)
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {width} {height}" '
           f'width="{width}" height="{height}" role="img" class="timeline">',
           f'<rect x="{left}" y="{top}" width="{width - left - right}" '
           f'height="{height - top - bottom}" fill="#fff" stroke="#e5e7eb"/>']
    for x, label in time_ticks(sx.lo, sx.hi, 5):
        px = sx(x)
        out.append(f'<line x1="{_f(px)}" x2="{_f(px)}" y1="{top}" y2="{height - bottom}" '
                   f'stroke="#f0f1f3"/><text x="{_f(px)}" y="{height - bottom + 13}" '
                   f'font-size="10" text-anchor="middle" fill="#6b7280">{esc(label)}</text>')
    for y, label in time_ticks(sy.lo, sy.hi, 4):
        py = sy(y)
        out.append(f'<line x1="{left}" x2="{width - right}" y1="{_f(py)}" y2="{_f(py)}" '
                   f'stroke="#f0f1f3"/><text x="{left + 3}" y="{_f(py - 2)}" font-size="9" '
                   f'fill="#9ca3af">{esc(label)}</text>')
    if seconds(now) <= sy.hi:
        now_y = sy(now)
        out.append(f'<line x1="{left}" x2="{width - right}" y1="{_f(now_y)}" y2="{_f(now_y)}" '
                   f'stroke="#9ca3af" stroke-dasharray="2 3"/><text x="{width - right - 3}" '
                   f'y="{_f(now_y - 3)}" font-size="9" text-anchor="end" fill="#6b7280">now</text>')
    else:
        out.append(f'<text x="{width - right - 3}" y="{top + 10}" font-size="9" text-anchor="end" '
                   f'fill="#6b7280">open ends continue to now ({esc(now.strftime("%Y-%m-%d"))}) ↗</text>')
    anchors = []
    placed: list[tuple[float, float, float]] = []  # labels drawn: (x, baseline y, width)
    labelled = set(sorted(range(len(spans)), key=lambda i: (spans[i].status != "current", -i))[:labels])
    for i, s in enumerate(spans):
        stroke, fill = SPAN_STYLE.get(s.status, SPAN_STYLE["superseded"])
        x0 = sx(s.valid_from)
        x1 = width - right if s.valid_to is None else max(sx(s.valid_to), x0 + 3)
        y0 = sy(s.recorded_from)
        y1 = top if s.recorded_to is None else min(sy(s.recorded_to), y0 - 3)
        dash = "" if s.active else ' stroke-dasharray="4 3"'
        anchors.append((x0, y0))
        out.append(f'<g class="entry {esc(s.status)}"><title>{esc(s.tip)}</title>')
        if s.status == "retracted":
            out.append(_cross(x0, y0, 5, stroke, 2.2))
        else:
            out.append(f'<rect x="{_f(x0)}" y="{_f(y1)}" width="{_f(max(x1 - x0, 3))}" '
                       f'height="{_f(max(y0 - y1, 3))}" fill="{fill}" fill-opacity="0.75" '
                       f'stroke="{stroke}" stroke-width="1.3"{dash}/>'
                       f'<circle cx="{_f(x0)}" cy="{_f(y0)}" r="4" fill="{stroke}"/>')
        if i in labelled:
            text = short(s.label, 28)
            w = 6.2 * len(text)
            lx = min(x0 + 6, width - right - w - 4)  # near the right edge: to the left instead
            ly = _free_spot(placed, lx, y0 - 5, w, top + 10)
            out.append(f'<text x="{_f(lx)}" y="{_f(ly)}" font-size="11" '
                       f'fill="{stroke}">{esc(text)}</text>')
        out.append("</g>")
    for m in marks:
        px, py = sx(m.valid), sy(m.recorded)
        colour = "#16a34a" if m.polarity == "+" else "#dc2626"
        out.append(f'<g class="observation"><title>{esc(m.tip)}</title>')
        if 0 <= m.of < len(anchors):
            ax, ay = anchors[m.of]
            out.append(f'<line x1="{_f(ax)}" y1="{_f(ay)}" x2="{_f(px)}" y2="{_f(py)}" '
                       f'stroke="{colour}" stroke-opacity="0.35" stroke-dasharray="2 2"/>')
        if m.polarity == "+":
            out.append(f'<circle cx="{_f(px)}" cy="{_f(py)}" r="3.5" fill="#fff" '
                       f'stroke="{colour}" stroke-width="2"/>')
        else:
            out.append(_cross(px, py, 4, colour, 2))
        out.append("</g>")
    mid = (top + height - bottom) / 2
    out.append(f'<text x="{_f((left + width - right) / 2)}" y="{height - 8}" font-size="11" '
               f'fill="#6b7280" text-anchor="middle">valid time →</text>'
               f'<text x="{width - 4}" y="{_f(mid)}" font-size="11" fill="#6b7280" '
               f'text-anchor="middle" transform="rotate(-90 {width - 4} {_f(mid)})">'
               f'recorded time →</text></svg>')
    return "".join(out)


def _free_spot(placed: list[tuple[float, float, float]], x: float, y: float, w: float,
               ceiling: float) -> float:
    """A baseline near `y` where a label of width `w` at `x` overlaps no label drawn yet
    (tried below, then above); the spot is remembered."""
    def clear(at: float) -> bool:
        return all(abs(at - py) >= 12 or x + w <= px or px + pw <= x for px, py, pw in placed)
    spot = next((at for k in range(8) for at in (y + 12 * k, y - 12 * k)
                 if at >= ceiling and clear(at)), y)
    placed.append((x, spot, w))
    return spot


def _cross(x: float, y: float, r: float, colour: str, w: float) -> str:
    return (f'<path d="M{_f(x - r)},{_f(y - r)}L{_f(x + r)},{_f(y + r)}M{_f(x - r)},{_f(y + r)}'
            f'L{_f(x + r)},{_f(y - r)}" stroke="{colour}" stroke-width="{w}"/>')


# ---------------------------------------------------------------------- bars
def stacked(parts: Sequence[tuple[str, float, str]], *, width: int = 360, height: int = 20) -> str:
    """One bar split in proportion to the values, each part labelled in its tooltip."""
    total = sum(max(v, 0.0) for _, v, _ in parts) or 1.0
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {width} {height}" '
           f'width="{width}" height="{height}" role="img" class="stacked">']
    x = 0.0
    for label, v, colour in parts:
        w = max(v, 0.0) / total * width
        out.append(f'<rect x="{_f(x)}" y="0" width="{_f(w)}" height="{height}" fill="{esc(colour)}">'
                   f'<title>{esc(label)}: {v:.3f}</title></rect>')
        x += w
    out.append("</svg>")
    return "".join(out)


def reliability(r: float, *, width: int = 220, height: int = 26) -> str:
    """R in [-1, 1] on its axis: red below zero, green above."""
    pad = 8
    s = Scale(-1.0, 1.0, pad, width - pad)
    zero, at = s(0.0), s(max(-1.0, min(1.0, r)))
    colour = "#16a34a" if r >= 0 else "#dc2626"
    return (f'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {width} {height}" '
            f'width="{width}" height="{height}" role="img" class="reliability">'
            f'<title>R = {r:.3f}</title>'
            f'<rect x="{pad}" y="7" width="{width - 2 * pad}" height="6" rx="3" fill="#eef0f3"/>'
            f'<rect x="{_f(min(zero, at))}" y="7" width="{_f(abs(at - zero))}" height="6" '
            f'fill="{colour}"/><line x1="{_f(zero)}" x2="{_f(zero)}" y1="4" y2="16" stroke="#6b7280"/>'
            f'<text x="{pad}" y="{height - 1}" font-size="9" fill="#9ca3af">-1</text>'
            f'<text x="{_f(zero)}" y="{height - 1}" font-size="9" fill="#9ca3af" '
            f'text-anchor="middle">0</text><text x="{width - pad}" y="{height - 1}" font-size="9" '
            f'fill="#9ca3af" text-anchor="end">1</text></svg>')


# ---------------------------------------------------------------------- the neighbourhood
@dataclass(frozen=True)
class Node:
    id: str
    label: str
    depth: int
    weight: float                     # in [0, 1]: the radius grows with it (salience)
    status: str
    flagged: bool
    url: str
    tip: str


@dataclass(frozen=True)
class Edge:
    kind: str                         # extension | association | derived
    source: str
    target: str
    tip: str


def network(nodes: Sequence[Node], edges: Sequence[Edge], *, width: int = 780,
            height: int = 540) -> str:
    """Rings around the centre (depth 0), one per depth; a node sits in the sector of the
    node that reached it, so the branches of the walk stay apart."""
    cx, cy = width / 2, height / 2
    depth = max((n.depth for n in nodes), default=0)
    ring = (min(width, height) / 2 - 50) / max(depth, 1)
    pos: dict[str, tuple[float, float]] = {}
    angle: dict[str, float] = {}
    neighbours: dict[str, list[str]] = {}
    for e in edges:
        neighbours.setdefault(e.source, []).append(e.target)
        neighbours.setdefault(e.target, []).append(e.source)
    by_depth: dict[int, list[Node]] = {}
    for n in nodes:
        by_depth.setdefault(n.depth, []).append(n)
    for d in sorted(by_depth):
        ring_nodes = by_depth[d]
        if d == 0:
            for n in ring_nodes:
                pos[n.id], angle[n.id] = (cx, cy), 0.0
            continue

        def parent_angle(n: Node) -> float:
            found = [angle[p] for p in neighbours.get(n.id, []) if p in angle]
            return min(found) if found else 0.0
        ring_nodes = sorted(ring_nodes, key=lambda n: (parent_angle(n), n.label.casefold(), n.id))
        k = len(ring_nodes)
        offset = -math.pi / 2 + (math.pi / k if d > 1 else 0.0)
        for i, n in enumerate(ring_nodes):
            a = offset + 2 * math.pi * i / k
            # alternate radii a little on crowded rings so labels do not collide
            r = ring * d + (12 if (k > 10 and i % 2) else 0)
            angle[n.id] = (a + math.pi / 2) % (2 * math.pi)
            pos[n.id] = (cx + r * math.cos(a), cy + r * math.sin(a))
    radius = {n.id: 7 + 11 * max(0.0, min(1.0, n.weight)) + (4 if n.depth == 0 else 0) for n in nodes}
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {width} {height}" '
           f'width="{width}" height="{height}" role="img" class="network"><defs>']
    for kind, (colour, _, arrow, _) in EDGE_STYLE.items():
        if arrow:
            out.append(f'<marker id="arrow-{kind}" viewBox="0 0 10 10" refX="9" refY="5" '
                       f'markerWidth="7" markerHeight="7" orient="auto-start-reverse">'
                       f'<path d="M0,0L10,5L0,10z" fill="{colour}"/></marker>')
    out.append('</defs><rect width="100%" height="100%" fill="#fff"/>')
    for d in range(1, depth + 1):
        out.append(f'<circle cx="{_f(cx)}" cy="{_f(cy)}" r="{_f(ring * d)}" fill="none" '
                   f'stroke="#f0f1f3"/>')
    for e in edges:
        if e.source not in pos or e.target not in pos:
            continue
        colour, dash, arrow, bend = EDGE_STYLE.get(e.kind, EDGE_STYLE["association"])
        (x1, y1), (x2, y2) = pos[e.source], pos[e.target]
        dx, dy = x2 - x1, y2 - y1
        dist = math.hypot(dx, dy) or 1.0
        ux, uy = dx / dist, dy / dist
        sx, sy = x1 + ux * radius[e.source], y1 + uy * radius[e.source]
        tx, ty = x2 - ux * (radius[e.target] + 2), y2 - uy * (radius[e.target] + 2)
        mx, my = (sx + tx) / 2 - uy * bend * dist, (sy + ty) / 2 + ux * bend * dist
        marker = f' marker-end="url(#arrow-{e.kind})"' if arrow else ""
        dashed = f' stroke-dasharray="{dash}"' if dash else ""
        out.append(f'<path class="edge {esc(e.kind)}" d="M{_f(sx)},{_f(sy)}Q{_f(mx)},{_f(my)} '
                   f'{_f(tx)},{_f(ty)}" fill="none" stroke="{colour}" stroke-width="1.8"'
                   f'{dashed}{marker}><title>{esc(e.tip)}</title></path>')
    bold = ' font-weight="600"'
    for n in nodes:
        x, y = pos[n.id]
        r = radius[n.id]
        fill = STATUS_FILL.get(n.status, "#e5e7eb")
        stroke = "#dc2626" if n.flagged else ("#1e3a8a" if n.depth == 0 else "#2563eb")
        if n.status == "archived" and not n.flagged:
            stroke = "#9ca3af"
        out.append(f'<a class="node" href="{esc(n.url)}"><title>{esc(n.tip)}</title>'
                   f'<circle cx="{_f(x)}" cy="{_f(y)}" r="{_f(r)}" fill="{fill}" '
                   f'stroke="{stroke}" stroke-width="{3 if n.depth == 0 else 2}"/>'
                   f'<text x="{_f(x)}" y="{_f(y + r + 13)}" font-size="11.5" text-anchor="middle" '
                   f'fill="#1f2430"{bold if n.depth == 0 else ""}>'
                   f'{esc(short(n.label, 26))}</text></a>')
    out.append("</svg>")
    return "".join(out)


# ---------------------------------------------------------------------- the trigger graph
@dataclass(frozen=True)
class Box:
    id: str
    label: str
    column: int
    kind: str                         # event | policy | action | emitted
    tip: str
    url: str | None = None
    strong: bool = False              # drawn emphasised (an emitted event that triggers policies)


@dataclass(frozen=True)
class Arrow:
    source: str
    target: str
    kind: str                         # listens | does | emits | loop
    tip: str = ""


BOX_STYLE = {"event": ("#e0f2fe", "#0369a1"), "policy": ("#dbeafe", "#1e40af"),
             "action": ("#dcfce7", "#166534"), "emitted": ("#f3e8ff", "#6b21a8")}
ARROW_STYLE = {"listens": ("#94a3b8", ""), "does": ("#2563eb", ""), "emits": ("#7c3aed", "4 3"),
               "loop": ("#dc2626", "5 3")}


def layered(headers: Sequence[str], boxes: Sequence[Box], arrows: Sequence[Arrow], *,
            width: int = 980, row: int = 30) -> str:
    """Columns of boxes joined by curves from one column's right side to the next's left."""
    columns = len(headers)
    col_w = width / columns
    box_w = col_w - 36
    rows: dict[int, list[Box]] = {}
    for b in boxes:
        rows.setdefault(b.column, []).append(b)
    n = max((len(v) for v in rows.values()), default=1)
    height = 40 + n * row + 10
    where: dict[str, tuple[float, float]] = {}
    for c, items in rows.items():
        y0 = 40 + (n - len(items)) * row / 2
        for i, b in enumerate(items):
            where[b.id] = (c * col_w + 18, y0 + i * row)
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {width} {height}" '
           f'width="{width}" height="{height}" role="img" class="layered"><defs>']
    for kind, (colour, _) in ARROW_STYLE.items():
        out.append(f'<marker id="head-{kind}" viewBox="0 0 10 10" refX="9" refY="5" markerWidth="6" '
                   f'markerHeight="6" orient="auto"><path d="M0,0L10,5L0,10z" fill="{colour}"/></marker>')
    out.append("</defs>")
    for c, head in enumerate(headers):
        out.append(f'<text x="{_f(c * col_w + 18)}" y="20" font-size="12" font-weight="600" '
                   f'fill="#6b7280">{esc(head)}</text>')
    h = row - 8
    for a in arrows:
        if a.source not in where or a.target not in where:
            continue
        (x1, y1), (x2, y2) = where[a.source], where[a.target]
        colour, dash = ARROW_STYLE.get(a.kind, ARROW_STYLE["listens"])
        sx, sy = x1 + box_w, y1 + h / 2
        tx, ty = x2, y2 + h / 2
        if tx <= sx:  # a loop back to an earlier column: round the boxes underneath
            low = height - 6
            d = f"M{_f(sx)},{_f(sy)}C{_f(sx + 30)},{_f(low)} {_f(tx - 30)},{_f(low)} {_f(tx)},{_f(ty)}"
        else:
            mid = (sx + tx) / 2
            d = f"M{_f(sx)},{_f(sy)}C{_f(mid)},{_f(sy)} {_f(mid)},{_f(ty)} {_f(tx - 2)},{_f(ty)}"
        dashed = f' stroke-dasharray="{dash}"' if dash else ""
        out.append(f'<path class="arrow {esc(a.kind)}" d="{d}" fill="none" stroke="{colour}" '
                   f'stroke-width="1.5"{dashed} marker-end="url(#head-{a.kind})">'
                   f'<title>{esc(a.tip)}</title></path>')
    for b in boxes:
        x, y = where[b.id]
        fill, ink = BOX_STYLE.get(b.kind, BOX_STYLE["event"])
        stroke = "#dc2626" if b.kind == "emitted" and b.strong else ink
        rect = (f'<rect x="{_f(x)}" y="{_f(y)}" width="{_f(box_w)}" height="{h}" rx="5" '
                f'fill="{fill}" stroke="{stroke}" stroke-width="{2 if b.strong else 1}"/>'
                f'<text x="{_f(x + 8)}" y="{_f(y + h / 2 + 4)}" font-size="11.5" fill="{ink}">'
                f'{esc(short(b.label, int(box_w / 7)))}</text>')
        body = f'<g class="box {esc(b.kind)}"><title>{esc(b.tip)}</title>{rect}</g>'
        out.append(f'<a href="{esc(b.url)}">{body}</a>' if b.url else body)
    out.append("</svg>")
    return "".join(out)


__all__ = ["Series", "Marker", "line_chart", "legend", "Span", "Mark", "bitemporal", "stacked",
           "reliability", "Node", "Edge", "network", "Box", "Arrow", "layered", "PALETTE",
           "EDGE_STYLE", "nice_ticks", "time_ticks", "Scale"]
