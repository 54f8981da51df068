"""A topic's page (its fields, their histories on a bitemporal timeline, evidence and
reliability, salience over time) and its neighbourhood graph."""
from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any, Sequence

from ...errors import UnknownUnit
from ...memory import Memory
from ...model import Explanation, HistoryEntry, SalienceHistory, TopicView, UnitHistory
from ...salience import decayed_strength, salience_of
from ...units import TopicId
from .. import svg
from ..html import badge, card, esc, link, meter, page, table, url, value, value_text, when
from .common import LADDER_COLOURS, Names, field_anchor, place_text, walk_strings, where_of


STATE_COLOURS = {"action": "#16a34a", "inaction": "#dc2626", "conflict": "#d97706",
                 "ignorance": "#cbd5e1"}
TIMELINE_LIMIT = 120  # entries drawn on a field's timeline
TABLE_LIMIT = 100  # entries listed under it


def topic(mem: Memory, name: str) -> str:
    view = mem.inspect(name)
    if view is None:
        raise UnknownUnit(f"no topic named {name!r}")
    history = mem.salience_history(TopicId(view.id))
    names = Names(mem, [f.origin_id for f in view.flags if f.origin_id] +
                  [s for f in view.flags for s in walk_strings(f.evidence)] +
                  [f.provenance.ref for f in view.fields.values() if f.provenance and f.provenance.ref])
    explained = {fname: mem.explain(TopicId(view.id), fname) for fname in view.fields}
    # the fields with the most going on first: contested, then the longest histories
    order = sorted(view.fields, key=lambda f: (not view.fields[f].contested,
                                               -len(explained[f].entries), f))
    head = (f'<dl class="kv"><dt>status</dt><dd>{badge(view.status)}</dd>'
            f'<dt>salience</dt><dd>{meter(view.salience)}</dd>'
            f'<dt>aliases</dt><dd>{esc(", ".join(view.aliases)) or "—"}</dd>'
            f'<dt>summary</dt><dd>{esc(view.summary)}</dd>'
            f'<dt>see</dt><dd>{link("/graph", "neighbourhood", id=view.id)} · '
            f'{link("/log", "transitions", id=view.id)}</dd></dl>')
    summary = table(["field", "current value", "status", "entries", "source", "reliability R"], [
        [f'<a href="#{esc(field_anchor(f))}">{esc(f)}</a>',
         value(view.fields[f].value, 60) if view.fields[f].value is not None else "—",
         badge(view.fields[f].status) + (badge("contested") if view.fields[f].contested else ""),
         esc(len(explained[f].entries)),
         _source(view.fields[f].provenance),
         f'<span class="num">{explained[f].reliability:.2f}</span> '
         f'{svg.reliability(explained[f].reliability, width=120, height=22)}']
        for f in order]) if order else '<p class="muted">This topic has no fields.</p>'
    parts = [f'<div class="cols">{card("Fields", summary)}{card("Topic", head)}</div>']
    if view.flags:
        rows = [[names.unit(f.origin_id) if f.origin_id else "—", esc(f.policy or "—"),
                 when(f.created_at), names.json(f.evidence)] for f in view.flags]
        parts.append(card("Open revision flags", table(["because of", "policy", "since",
                                                        "evidence"], rows), "flags"))
    parts.append(_salience_card(history, view))
    for fname in order:  # an explanation's entries are the field's whole history
        parts.append(_field_card(fname, view.fields[fname], explained[fname].entries,
                                 explained[fname], history.now, names))
    return page(view.title, "".join(parts), active="", where=where_of(mem),
                subtitle=f"{len(view.fields)} field{'s' if len(view.fields) != 1 else ''} · "
                         f'id <code class="id">{esc(view.id)}</code>')


def _source(provenance: Any) -> str:
    return "—" if provenance is None else esc(provenance.source)


def _curve(u: UnitHistory, start: datetime, now: datetime) -> svg.Series:
    """The stored points, each decaying (as gem decays salience on read, with the unit's own
    half-life) until the next: sampled about every 1/200 of the chart's span, so a long history
    stays a short path."""
    points: list[svg.Point] = []
    hl = None if u.half_life_seconds is None else timedelta(seconds=u.half_life_seconds)
    step = max((now - start) / 200, timedelta(seconds=1))
    ordered = sorted(u.points, key=lambda p: (p.at, p.transition or 1 << 62))
    for i, p in enumerate(ordered):
        end = ordered[i + 1].at if i + 1 < len(ordered) else now
        points.append((p.at, p.salience))
        samples = min(8, int((end - p.at) / step)) if end > p.at else 0
        for k in range(1, samples + 1):
            at = p.at + (end - p.at) * k / samples
            points.append((at, salience_of(decayed_strength(p.strength, p.at, at, hl))))
    return svg.Series(u.field or "topic", points, colour=None if u.field else "#111827",
                      width=1.4 if u.field else 2.6, markers=[(p.at, p.salience) for p in ordered])


def _salience_card(history: SalienceHistory, view: TopicView) -> str:
    units = history.units
    topic_unit = [u for u in units if u.field is None]
    fields = sorted((u for u in units if u.field is not None), key=lambda u: -u.salience)[:8]
    start = min([u.created_at for u in units] + [p.at for u in units for p in u.points])
    series = [_curve(u, start, history.now) for u in topic_unit + fields]
    for i, s in enumerate(series[1:]):
        series[i + 1] = svg.Series(s.name, s.points, svg.PALETTE[i % len(svg.PALETTE)], s.dashed,
                                   s.width, s.markers)
    changes: dict[datetime, list[tuple[str, Any]]] = {}
    for u in units:
        for c in u.ladder:
            changes.setdefault(c.at, []).append((u.field or "the topic", c))
    markers = []
    for at, found in sorted(changes.items()):
        levels = sorted({c.status for _, c in found})
        label = levels[0] if len(levels) == 1 else "ladder"
        markers.append(svg.Marker(at, f"{label} ({len(found)})" if len(found) > 1 else
                                  f"{found[0][0]}: {label}",
                                  "\n".join(f"transition {c.transition} ({c.op}): {unit} became "
                                            f"{c.status}" for unit, c in found),
                                  LADDER_COLOURS.get(levels[0], "#6b7280")))
    chart = svg.line_chart(series, x_time=True, y_min=0.0, y_max=1.0, y_label="salience",
                           width=1100, height=260,
                           x_range=(start, history.now), markers=markers, y_format="{:.1f}",
                           title=f"salience over time of {view.title} and its fields")
    rows: list[list[str]] = []
    for u in units:
        steps = ", ".join(f"{badge(c.status)} {when(c.at)} (#{c.transition} {esc(c.op)})"
                          for c in u.ladder) or '<span class="muted">never attenuated</span>'
        rows.append([esc(u.field) if u.field else "<b>the topic</b>", badge(u.status),
                     meter(u.salience), esc(len(u.points)), steps])
    note = (f'<p class="muted">From the transition log (each record carries the salience it '
            f'changed) and the stored rows; between changes salience decays with the current '
            f'half-life ({history.half_life_seconds / 86400:g} days, or the one a field\'s labels '
            f'give it under label_half_life).</p>')
    return card("Salience and ladder status over time", svg.legend(series) + chart + note +
                table(["unit", "status now", "salience now", "changes logged", "ladder"], rows))


def _spans(entries: Sequence[HistoryEntry]) -> tuple[list[svg.Span], list[svg.Mark]]:
    by_id = {e.id: e for e in entries}
    spans, marks = [], []
    for i, e in enumerate(entries):
        after = by_id.get(e.superseded_by) if e.superseded_by else None
        if e.status == "current":
            valid_to, recorded_to = None, None
        else:
            valid_to = after.valid_at if after is not None and after.valid_at > e.valid_at else e.valid_at
            recorded_to = after.recorded_at if after is not None and after.recorded_at > e.recorded_at \
                else e.recorded_at
        p = e.provenance
        tip = (f"{value_text(e.value)} — {e.status}{'' if e.active else ' (compressed)'}\n"
               f"valid {e.valid_at.isoformat()} · recorded {e.recorded_at.isoformat()}\n"
               f"source {p.source} · actor {p.actor} · confidence {p.confidence:g} · polarity {p.polarity}")
        spans.append(svg.Span(value_text(e.value), e.status, e.valid_at, valid_to, e.recorded_at,
                              recorded_to, tip, e.active))
        for o in e.observations:
            kind = "corroboration" if o.provenance.polarity == "+" else "denial"
            marks.append(svg.Mark(o.valid_at, o.recorded_at, o.provenance.polarity,
                                  f"{kind} of {value_text(e.value)} by {o.provenance.source} "
                                  f"(confidence {o.provenance.confidence:g})\nvalid "
                                  f"{o.valid_at.isoformat()} · recorded {o.recorded_at.isoformat()}",
                                  i))
    return spans, marks


def _field_card(name: str, fv: Any, entries: list[HistoryEntry], explained: Explanation,
                now: datetime, names: Names) -> str:
    p = fv.provenance
    prov = "—" if p is None else (
        f'{esc(p.source)} <span class="muted">actor</span> {esc(p.actor)}'
        f'{" <span class=muted>ref</span> " + names.unit(p.ref) if p.ref else ""} '
        f'<span class="muted">confidence</span> {p.confidence:g} '
        f'<span class="muted">polarity</span> {esc(p.polarity)}')
    current = value(fv.value, 200) if fv.value is not None else "—"
    if fv.retracted is not None:  # mem.retract: no value now, and why
        current += f' <span class="muted">retracted: {esc(fv.retracted)}</span>'
    if fv.why_current:  # contested: why this value is current, and what R says of it
        current += f'<br><span class="muted">{esc(fv.why_current)}</span>'
    kv = (f'<dl class="kv"><dt>current value</dt><dd>{current}</dd>'
          + (f'<dt>labels</dt><dd>{" ".join(badge(x, "label") for x in fv.labels)}</dd>' if fv.labels else "")
          + (f'<dt>place</dt><dd>{place_text(fv.place)}</dd>' if fv.place else "")
          + f'<dt>valid at</dt><dd>{when(fv.valid_at, True)}</dd>'
          f'<dt>recorded at</dt><dd>{when(fv.recorded_at, True)}</dd>'
          f'<dt>provenance</dt><dd>{prov}</dd>'
          f'<dt>salience</dt><dd>{meter(fv.salience)}</dd>'
          + (f'<dt>compressed</dt><dd>{esc(fv.summary)}</dd>' if fv.summary else "") + "</dl>")
    states = explained.states
    evidence = (f'<h3>Evidence (decay {explained.decay:g})</h3>'
                + svg.stacked([(s, states.get(s, 0.0), STATE_COLOURS[s]) for s in STATE_COLOURS])
                + '<div class="legend">' + "".join(
                    f'<span><i class="sw" style="background:{STATE_COLOURS[s]}"></i>{esc(s)} '
                    f'{states.get(s, 0.0):.3f}</span>' for s in STATE_COLOURS) + "</div>"
                + f'<div>reliability R = <b class="num">{explained.reliability:.3f}</b> '
                  f'{svg.reliability(explained.reliability)}</div>')
    contested = ""
    if fv.contested and fv.candidates:
        rows = [[value(c.value) + (" " + badge("current") if c.current else ""),
                 esc(c.provenance.source), when(c.valid_at),
                 f'<span class="num">{c.reliability:.3f}</span> {svg.reliability(c.reliability, width=140)}']
                for c in fv.candidates]
        contested = "<h3>Contested: the candidates</h3>" + table(
            ["value", "source", "valid at", "reliability R"], rows)
    drawn = entries[-TIMELINE_LIMIT:]  # the newest: a long history stays readable (and quick)
    spans, marks = _spans(drawn)
    timeline = ("<h3>History: valid time against recorded time</h3>" +
                (f'<p class="muted">The newest {len(drawn)} of {len(entries)} entries.</p>'
                 if len(drawn) < len(entries) else "") +
                svg.bitemporal(spans, marks, now, width=620, height=250) +
                '<div class="legend"><span><i class="sw" style="background:#2563eb"></i>current'
                '</span><span><i class="sw" style="background:#6b7280"></i>superseded</span>'
                '<span><i class="sw" style="background:#dc2626"></i>retracted (×)</span>'
                '<span>○ corroboration · <span class="bad">×</span> denial</span>'
                '<span>dashed: compressed</span></div>') if spans else ""
    shown = entries[-TABLE_LIMIT:]
    rows = []
    for k, e in enumerate(shown, len(entries) - len(shown) + 1):
        obs = [f'{badge("+" if o.provenance.polarity == "+" else "−", "ok" if o.provenance.polarity == "+" else "bad")}'
               f'{esc(o.provenance.source)} {when(o.recorded_at)}' for o in e.observations]
        rows.append([esc(k), value(e.value), badge(e.status) + ("" if e.active else badge("compressed"))
                     + (f'<br><span class="muted">{esc(e.reason)}</span>' if e.reason else ""),
                     when(e.valid_at), when(e.recorded_at),
                     esc(e.provenance.source) + (f'<br>{place_text(e.place)}' if e.place else ""),
                     f"{e.provenance.confidence:g}", esc(e.provenance.polarity),
                     "<br>".join(obs) or '<span class="muted">—</span>'])
    more = f'<p class="muted">The newest {len(shown)} of {len(entries)} entries (all of them: ' \
        f'GET /v1/history).</p>' if len(shown) < len(entries) else ""
    entries_table = "<details open><summary>Entries</summary>" + more + table(
        ["#", "value", "status", "valid at", "recorded at", "source", "conf.", "pol.",
         "observations"], rows) + "</details>"
    badges = badge(fv.status) + (badge("contested") if fv.contested else "")
    cls = "field " + ("contested" if fv.contested else fv.status)
    body = (f'<div class="cols even"><div>{kv}{evidence}{contested}</div><div>{timeline}</div></div>'
            f'{entries_table}')
    return card(name, body, cls, anchor=field_anchor(name), extra=" " + badges)


def graph(mem: Memory, name: str, depth: int) -> str:
    nb = mem.graph(name, depth=depth, limit=60)
    centre = next(n for n in nb.nodes if n.depth == 0)
    titles = {n.id: n.title for n in nb.nodes}
    nodes = [svg.Node(n.id, n.title, n.depth, n.salience, n.status, n.open_flags > 0,
                      url("/graph", id=n.id, depth=depth),
                      f"{n.title}\n{n.status} · salience {n.salience:.2f} · "
                      f"{n.open_flags} open flag(s)\nclick to centre the graph here")
             for n in nb.nodes]
    edges = [svg.Edge(e.kind, e.source, e.target,
                      f"{titles.get(e.source, e.source)} —{e.kind}→ {titles.get(e.target, e.target)}"
                      + (f" (transition {e.transition})" if e.transition is not None else ""))
             for e in nb.edges]
    depths = " ".join(link("/graph", f"depth {d}", "on" if d == depth else None, id=centre.id,
                           depth=d) for d in (1, 2, 3))
    legend = ('<div class="legend"><span><i class="sw" style="background:#2563eb"></i>extension '
              '(EXTENDS: changes propagate)</span><span><i class="sw" style="background:repeating-'
              'linear-gradient(90deg,#0d9488 0 5px,transparent 5px 8px)"></i>association '
              '(ASSOCIATES: retrieval context)</span><span><i class="sw" style="background:repeating-'
              'linear-gradient(90deg,#7c3aed 0 2px,transparent 2px 4px)"></i>derived (DERIVED_FROM: '
              'lineage)</span><span>red ring: open flags · grey: archived · size: salience</span></div>')
    drawing = svg.network(nodes, edges) if nb.edges else \
        svg.network(nodes, edges) + '<p class="muted">No typed edge touches this topic.</p>'
    note = '<p class="muted">More topics were in reach than the 60 drawn.</p>' if nb.truncated else ""
    node_rows = [[link("/topic", n.title, id=n.id), esc(n.depth), badge(n.status),
                  meter(n.salience), badge(f"{n.open_flags} open", "flag") if n.open_flags else "—"]
                 for n in sorted(nb.nodes, key=lambda n: (n.depth, n.title.casefold()))]
    edge_rows = [[badge(e.kind), link("/topic", titles.get(e.source, e.source), id=e.source),
                  link("/topic", titles.get(e.target, e.target), id=e.target),
                  esc(e.transition if e.transition is not None else "—"), when(e.created_at),
                  esc(e.detail or "—")] for e in nb.edges]
    body = (card(f"Within {depth} edge{'s' if depth > 1 else ''} of {centre.title}",
                 f"<p>{depths} · {link('/topic', 'topic page', id=centre.id)}</p>{legend}"
                 f"{drawing}{note}")
            + '<div class="cols">'
            + card("Edges", table(["kind", "from", "to", "transition", "made", "by / why"], edge_rows)
                   if edge_rows else '<p class="muted">none</p>')
            + card("Topics", table(["topic", "depth", "status", "salience", "flags"], node_rows))
            + "</div>")
    return page(f"Graph: {centre.title}", body, active="", where=where_of(mem),
                subtitle="Typed edges around a topic; click a node to move there.")
