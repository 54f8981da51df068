"""The dashboard's pages, each a function of a `Memory` (and the request's parameters) that
returns a whole HTML document. They use the public, side-effect-free reads only (`topics`,
`episodes`, `inspect`, `explain`, `salience_history`, `graph`, `recent_transitions`,
`titles`, `audit`, `policies`): viewing a page never runs a transition and never reinforces.

`gem serve` runs each on its memory's worker thread (gem/server/dashboard.py).
"""
from __future__ import annotations

import os
import re
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any, Iterable, Sequence
from urllib.parse import quote

from ..api.prompt import stale_text
from ..audit import verify_chain
from ..derived import GENESIS
from ..errors import UnknownUnit
from ..memory import Memory
from ..model import AuditReport, Explanation, HistoryEntry, SalienceHistory, TopicView, UnitHistory
from ..policy import catalogue, compose, explain, parse_all
from ..policy.checker import cascade_edges, unbounded_cycles
from ..salience import decayed_strength, salience_of
from ..units import TopicId
from . import svg
from .html import badge, card, esc, href, link, meter, page, scope_input, short, table, url, \
    value, value_text, when

TOPIC_ID = re.compile(r"^(?:[a-z0-9][a-z0-9_.-]*:)?t\d+$")
FIELD_ID = re.compile(r"^((?:[a-z0-9][a-z0-9_.-]*:)?t\d+)/(.+)$")
EPISODE_ID = re.compile(r"^(?:[a-z0-9][a-z0-9_.-]*:)?ep\d+$")
LADDER_COLOURS = {"active": "#16a34a", "compressed": "#d97706", "hidden": "#64748b",
                  "archived": "#9ca3af"}
STATE_COLOURS = {"action": "#16a34a", "inaction": "#dc2626", "conflict": "#d97706",
                 "ignorance": "#cbd5e1"}
PAGE_SIZE = 50
LIST_LIMIT = 12  # items of a list shown in evidence and details
TIMELINE_LIMIT = 120  # entries drawn on a field's timeline
TABLE_LIMIT = 100  # entries listed under it


def topic_param(topic: str | None) -> dict[str, str]:
    """The query parameter naming a topic: `id=` for a `TopicId` (what links carry), `topic=`
    for a title. Ids and titles never share a namespace (a topic may be titled "t2")."""
    if not topic:
        return {}
    return {"id": str(topic)} if isinstance(topic, TopicId) else {"topic": topic}


def _is_title(topic: str | None) -> bool:
    return bool(topic) and not isinstance(topic, TopicId)


def _where(mem: Memory) -> str:
    return f"{os.path.basename(mem.path)} · {mem.engine_name}"  # a name, never a directory


def field_anchor(name: str) -> str:
    return "field-" + quote(name, safe="")


class Names:
    """Unit ids as readers know them: topic titles, linked to their pages; episodes as who
    said what when."""

    def __init__(self, mem: Memory, ids: Iterable[str] = ()) -> None:
        self.mem = mem
        self.titles: dict[str, str] = {}
        self.episodes: dict[str, str] = {}
        self.add(ids)

    def add(self, units: Iterable[str]) -> None:
        wanted, said = set(), set()
        for unit in units:
            if not isinstance(unit, str):
                continue
            if EPISODE_ID.match(unit):
                if unit not in self.episodes:
                    said.add(unit)
                continue
            match = FIELD_ID.match(unit)
            tid = match.group(1) if match else unit if TOPIC_ID.match(unit) else None
            if tid is not None and tid not in self.titles:
                wanted.add(tid)
        if wanted:
            self.titles.update(self.mem.titles(wanted))
        if said:
            self.episodes.update(self.mem.episode_labels(said))

    def unit(self, unit: str) -> str:
        """A link for a topic or field id, an episode's label; any other text, escaped."""
        if EPISODE_ID.match(unit) and unit in self.episodes:
            return f'<span title="{esc(unit)}">{esc(self.episodes[unit])}</span>'
        if TOPIC_ID.match(unit) and unit in self.titles:
            return link("/topic", self.titles[unit], id=unit)
        match = FIELD_ID.match(unit)
        if match and match.group(1) in self.titles:
            tid, name = match.groups()
            url = href("/topic", id=tid) + "#" + esc(field_anchor(name))
            return f'<a href="{url}">{esc(self.titles[tid])} / {esc(name)}</a>'
        return esc(unit)

    def json(self, data: Any) -> str:
        """A JSON value (evidence, details) with the ids inside it named."""
        if isinstance(data, dict):
            if not data:
                return '<span class="muted">—</span>'
            items = "".join(f"<dt>{esc(k)}</dt><dd>{self.json(v)}</dd>" for k, v in data.items())
            return f'<dl class="kv">{items}</dl>'
        if isinstance(data, list):  # a forgetting pass lists thousands of units: the first few
            shown = ", ".join(self.json(v) for v in data[:LIST_LIMIT]) or "[]"
            more = len(data) - LIST_LIMIT
            return shown + (f' <span class="muted">+{more} more</span>' if more > 0 else "")
        if isinstance(data, str) and (TOPIC_ID.match(data) or FIELD_ID.match(data)
                                      or EPISODE_ID.match(data)):
            return self.unit(data)
        return value(data, 120)


def _walk_strings(data: Any) -> Iterable[str]:
    """The strings inside a JSON value, as far as `Names.json` shows it."""
    if isinstance(data, str):
        yield data
    elif isinstance(data, dict):
        for v in data.values():
            yield from _walk_strings(v)
    elif isinstance(data, list):
        for v in data[:LIST_LIMIT]:
            yield from _walk_strings(v)


# ---------------------------------------------------------------------- overview
@dataclass(frozen=True)
class OverviewQuery:
    """The overview's filters. A scope filter joins these once topics have scopes (issue
    12): one more field here, one more control in `_filters`, one more argument to
    `Memory.topics`."""
    text: str | None = None
    status: str | None = None
    flagged: bool = False
    order: str = "salience"
    offset: int = 0
    limit: int = PAGE_SIZE


def overview(mem: Memory, q: OverviewQuery) -> str:
    listing = mem.topics(status=q.status, flagged=q.flagged, text=q.text or None, order=q.order,
                         offset=q.offset, limit=q.limit)
    recent = mem.recent_transitions(10, details=False)
    audit = latest_audit(mem, recent[0]["hash"] if recent else GENESIS)
    names = Names(mem, (u for r in recent for u in r["units"][:6]))
    fields = listing.field_counts
    stats = "".join([
        _stat(sum(listing.topic_counts.values()), "topics",
              " · ".join(f"{n} {s}" for s, n in listing.topic_counts.items())),
        _stat(sum(fields.values()), "fields",
              svg.stacked([(level, n, LADDER_COLOURS[level]) for level, n in fields.items()],
                          width=150, height=8) + "<br>" +
              " · ".join(f"{n} {level}" for level, n in fields.items())),
        _stat(listing.flagged, "topics flagged for revision",
              link("/", "show them", flagged=1) if listing.flagged else "none open"),
        _stat(recent[0]["seq"] if recent else 0, "transitions", link("/log", "the log")),
        _stat(badge("ok" if audit.ok else f"{len(audit.violations)} violations",
                    "ok" if audit.ok else "bad"), "audit (C1-C6)",
              ("hash chain intact" if audit.chain_ok else '<span class="bad">hash chain broken</span>')
              + " · " + link("/audit", "details")),
    ])
    rows = []
    for t in listing.topics:
        ladder = "".join(f'<i class="{level}" style="width:{100 * n / max(sum(t.fields.values()), 1):.0f}%"></i>'
                         for level, n in t.fields.items() if n)
        counts = " · ".join(f"{n} {level}" for level, n in t.fields.items() if n) or "no fields"
        rows.append([
            link("/topic", t.title, id=t.id),
            badge(t.status),
            meter(t.salience),
            f'<span class="ladder" title="{esc(counts)}">{ladder}</span> '
            f'<span class="muted num">{sum(t.fields.values())}</span>',
            badge(f"{t.open_flags} open", "flag") if t.open_flags else '<span class="muted">—</span>',
            link("/graph", "graph", id=t.id) + " · " + link("/log", "log", id=t.id),
        ])
    shown = f"{q.offset + 1}-{q.offset + len(listing.topics)} of {listing.matching}" \
        if listing.topics else f"0 of {listing.matching}"
    topics = card(f"Topics ({shown})", _filters(q) + (
        table(["topic", "status", "salience", "fields by ladder level", "flags", ""], rows, "topics")
        if rows else '<p class="muted">No topic matches.</p>') + _pager(q, listing.matching))
    last = table(["#", "op", "units"], [
        [link("/log", r["seq"], before=r["seq"] + 1),
         badge(r["op"], "op") + f'<br><span class="muted small">{when(datetime.fromisoformat(r["at"]))} · {esc(r["actor"])}</span>',
         _units(names, r["units"], 3)] for r in recent])
    body = (f'<div class="grid">{stats}</div><div class="cols">{topics}'
            f'{card("Last transitions", last + link("/log", "the whole log →"))}</div>')
    return page("Overview", body, active="/", where=_where(mem),
                subtitle="Topics with their status, salience and open revision flags; the "
                         "forgetting ladder; the audit; the latest transitions.")


def episodes(mem: Memory, text: str | None, status: str | None, offset: int) -> str:
    listing = mem.episodes(text=text, status=status, offset=offset, limit=PAGE_SIZE)
    rows = [[f'<span class="num">{when(e.at)}</span>', esc(e.speaker or "—"),
             esc(short(e.text, 400)) + "".join(f'<div class="muted">{esc(stale_text(m))}</div>'
                                               for m in e.stale),
             esc(e.source), place_text(e.place),
             badge(e.status) + (" " + badge("stale", "superseded") if e.stale else ""),
             meter(e.salience)]
            for e in listing.episodes]
    statuses = "".join(f'<option value="{s}"{" selected" if status == s else ""}>{label}</option>'
                       for s, label in (("", "any status"), ("active", "active"),
                                        ("compressed", "compressed"), ("hidden", "hidden")))
    filters = (f'<form class="filters" method="get" action="/episodes">'
               f'<input type="search" name="text" placeholder="said or speaker contains…" '
               f'value="{esc(text or "")}"><select name="status">{statuses}</select>'
               f'{scope_input()}<button type="submit">Filter</button></form>')
    params = {"text": text or None, "status": status}
    pager = []
    if offset > 0:
        pager.append(link("/episodes", "← newer", offset=max(offset - PAGE_SIZE, 0) or None,
                          **params))
    if offset + PAGE_SIZE < listing.matching:
        pager.append(link("/episodes", "older →", offset=offset + PAGE_SIZE, **params))
    shown = f"{offset + 1}-{offset + len(rows)} of {listing.matching}" if rows \
        else f"0 of {listing.matching}"
    counts = " · ".join(f"{n} {s}" for s, n in listing.counts.items())
    body = card(f"Episodes ({shown}; {counts})", filters + (
        table(["said at", "speaker", "text", "source", "place", "status", "salience"], rows,
              "episodes")
        if rows else '<p class="muted">No episode matches.</p>')
        + (f'<div class="pager">{" ".join(pager)}</div>' if pager else ""))
    return page("Episodes", body, active="/episodes", where=_where(mem),
                subtitle="What was said or observed, kept as said, newest first: the raw tier "
                         "that facts cite. A stale one was replaced by a newer fact (or a later "
                         "episode contradicts it). Hidden episodes faded from default retrieval; a "
                         "query that matches one strongly recalls it.")


# memory path -> (the log head it audited, the report). gem is its database's only writer and
# every change is a transition, so while the head is the same the audit's answer is too; the
# overview and the log show it without re-running it (the Audit page always runs it).
_AUDITS: dict[str, tuple[str, AuditReport]] = {}


def latest_audit(mem: Memory, head: str | None = None) -> AuditReport:
    if head is None:
        found = mem.recent_transitions(1, details=False)
        head = found[0]["hash"] if found else GENESIS
    cached = _AUDITS.get(mem.path)
    if cached is not None and cached[0] == head:
        return cached[1]
    report = mem.audit()
    _AUDITS[mem.path] = (head, report)
    return report


def _stat(n: Any, label: str, extra: str = "") -> str:
    number = n if isinstance(n, str) else esc(n)
    return (f'<div class="stat"><div class="n">{number}</div><div class="l">{esc(label)}</div>'
            f'<div class="l">{extra}</div></div>')


def _filters(q: OverviewQuery) -> str:
    statuses = "".join(f'<option value="{s}"{" selected" if q.status == s else ""}>{label}</option>'
                       for s, label in (("", "any status"), ("active", "active"),
                                        ("archived", "archived")))
    orders = "".join(f'<option value="{o}"{" selected" if q.order == o else ""}>by {o}</option>'
                     for o in ("salience", "title", "recent", "flags"))
    checked = " checked" if q.flagged else ""
    return (f'<form class="filters" method="get" action="/">'
            f'<input type="search" name="text" placeholder="title contains…" '
            f'value="{esc(q.text or "")}"><select name="status">{statuses}</select>'
            f'<label><input type="checkbox" name="flagged" value="1"{checked}> flagged only</label>'
            f'<select name="order">{orders}</select>{scope_input()}'
            f'<button type="submit">Filter</button></form>')


def _pager(q: OverviewQuery, matching: int) -> str:
    params = {"text": q.text or None, "status": q.status, "flagged": 1 if q.flagged else None,
              "order": q.order if q.order != "salience" else None}
    parts = []
    if q.offset > 0:
        parts.append(link("/", "← previous", offset=max(q.offset - q.limit, 0) or None, **params))
    if q.offset + q.limit < matching:
        parts.append(link("/", "next →", offset=q.offset + q.limit, **params))
    return f'<div class="pager">{" ".join(parts)}</div>' if parts else ""


def _units(names: Names, units: Sequence[str], limit: int) -> str:
    shown = [names.unit(u) for u in units[:limit]]
    more = len(units) - limit
    return ", ".join(shown) + (f' <span class="muted">+{more} more</span>' if more > 0 else "")


# ---------------------------------------------------------------------- topic
def topic(mem: Memory, name: str) -> str:
    view = mem.inspect(name)
    if view is None:
        raise UnknownUnit(f"no topic named {name!r}")
    history = mem.salience_history(TopicId(view.id))
    names = Names(mem, [f.origin_id for f in view.flags if f.origin_id] +
                  [s for f in view.flags for s in _walk_strings(f.evidence)] +
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
    return page(view.title, "".join(parts), active="", where=_where(mem),
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


def place_text(place: Any) -> str:
    """A place as the dashboard shows it: its name and coordinates, or a dash."""
    if place is None:
        return '<span class="muted">—</span>'
    point = f'<span class="num">{place.lat:.5f}, {place.lon:.5f}</span>'
    return f'{esc(place.name)} <span class="muted">({point})</span>' if place.name else point


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


# ---------------------------------------------------------------------- graph
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
    return page(f"Graph: {centre.title}", body, active="", where=_where(mem),
                subtitle="Typed edges around a topic; click a node to move there.")


# ---------------------------------------------------------------------- log
def log(mem: Memory, topic_name: str | None, before: int | None, limit: int = PAGE_SIZE) -> str:
    records = mem.recent_transitions(limit + 1, before=before, topic=topic_name or None)
    more = len(records) > limit
    # an erasure removed a redacted record's content: it is shown as a record that touched nothing
    records = [{**r, "units": r["units"] or [], "policies": r["policies"] or [],
                "detail": r["detail"] or ({"redacted": "by an erasure"} if r["redacted"] else {})}
               for r in records[:limit]]
    head = records[0]["hash"] if records and before is None and not topic_name else None
    audit = latest_audit(mem, head)
    names = Names(mem)
    for r in records:
        names.add(r["units"][:12])
        names.add(s for p in r["policies"] for s in _walk_strings(p.get("evidence")))
        names.add(_walk_strings(r["detail"]))
    rows = []
    for i, r in enumerate(records):
        older = records[i + 1] if i + 1 < len(records) else None
        intact = verify_chain([r], start=r["prev_hash"])[0]  # its hash, recomputed
        if not intact:
            linked = '<span class="bad" title="its hash does not match its content">✗</span>'
        elif r["seq"] == 1:
            linked = ('<span class="ok" title="the first record follows the genesis hash">✓</span>'
                      if r["prev_hash"] == GENESIS else '<span class="bad" title="the first record '
                      'does not follow the genesis hash">✗</span>')
        elif older is not None and older["seq"] == r["seq"] - 1:
            linked = (f'<span class="ok" title="prev_hash equals the hash of #{older["seq"]}">✓</span>'
                      if r["prev_hash"] == older["hash"] else
                      f'<span class="bad" title="prev_hash differs from the hash of #{older["seq"]}">✗</span>')
        else:
            linked = '<span class="muted">·</span>'
        chain = f'{linked} <code class="muted" title="{esc(r["hash"])}">{esc(r["hash"][:10])}</code>'
        rows.append([esc(r["seq"]), when(datetime.fromisoformat(r["at"]), True),
                     badge(r["op"], "op") + (f'<br><span class="muted">{esc(r["event"])}</span>'
                                             if r["event"] != r["op"] else ""),
                     esc(r["actor"]), _units(names, r["units"], 12), _fired(names, r["policies"]),
                     _detail(names, r["detail"]), chain])
    verified = "every record" if audit.since == 0 else \
        f"the records after #{audit.since} (the earlier ones at a previous clean audit)"
    status = (f'hash chain: {badge("intact", "ok") if audit.chain_ok else badge("broken", "bad")} '
              f'(the audit recomputed {verified}; ✓ below: the record\'s hash matches its content '
              f'and it names its predecessor\'s hash) · '
              f'conditions: {badge("ok") if audit.ok else badge(f"{len(audit.violations)} violations", "bad")}'
              f' · {link("/audit", "audit")}')
    form = (f'<form class="filters" method="get" action="/log"><input type="search" name="topic" '
            f'placeholder="topic title" value="{esc(topic_name if _is_title(topic_name) else "")}">'
            f'{scope_input()}'
            f'<button type="submit">Filter</button>'
            + (f' {link("/log", "clear")}' if topic_name else "") + "</form>")
    pager = ""
    if more and records:
        pager = f'<div class="pager">{link("/log", "older →", **topic_param(topic_name), before=records[-1]["seq"])}</div>'
    if before is not None:
        pager += f'<div class="pager">{link("/log", "← newest", **topic_param(topic_name))}</div>'
    listing = table(["#", "when", "op", "actor", "units touched", "policies fired (evidence)",
                     "detail", "chain"], rows, "log") if rows else \
        '<p class="muted">No transition matches.</p>'
    title = "Transition log" + (f": {topic_name}" if topic_name else "")
    return page(title, card("Transitions, newest first", f"<p>{status}</p>{form}{listing}{pager}"),
                active="/log", where=_where(mem),
                subtitle="Every commit: what ran, who asked, what it touched, which policies "
                         "fired and why, chained by SHA-256.")


def _fired(names: Names, policies: list[dict[str, Any]]) -> str:
    if not policies:
        return '<span class="muted">—</span>'
    items = []
    for p in policies[:20]:  # runs, as stored: identical consecutive calls are one, with n
        policy, event, action, n = p.get("policy"), p.get("event"), p.get("action"), p.get("n", 1)
        times = f" ×{n}" if n > 1 else ""
        evidence = p.get("evidence") or {}
        head = (f'{_policy_link(policy) if policy else "—"} '
                f'<span class="muted">on {esc(event)} → {esc(action)}{times}</span>')
        items.append(f"<details><summary>{head}</summary>{names.json(evidence)}</details>"
                     if evidence else head)
    more = len(policies) - 20
    return "".join(f"<div>{i}</div>" for i in items) + \
        (f'<span class="muted">+{more} more</span>' if more > 0 else "")


def _policy_link(name: str) -> str:
    return f'<a href="{esc("/policies#" + policy_anchor(name))}">{esc(name)}</a>'


def policy_anchor(name: str) -> str:
    return "policy-" + quote(name, safe="")


def _detail(names: Names, detail: dict[str, Any]) -> str:
    if not detail:
        return '<span class="muted">—</span>'
    text = short(", ".join(detail), 40)
    return f"<details><summary>{esc(text)}</summary>{names.json(detail)}</details>"


# ---------------------------------------------------------------------- policies
def policies(mem: Memory) -> str:
    current = mem.policies
    trees = parse_all([(src.file, src.text) for src in current.sources])
    comp = compose(trees)
    in_force = sorted(comp.policies, key=lambda p: (-p.priority, p.name))
    cycles = unbounded_cycles(cascade_edges(in_force))
    looping = {(e.policy, e.target) for cycle in cycles for e in cycle}
    boxes: list[svg.Box] = []
    arrows: list[svg.Arrow] = []
    # events next to the policies they trigger (by the mean row of those policies)
    row_of = {p.name: i for i, p in enumerate(in_force)}
    listened = sorted({ev for p in in_force for ev in p.events}, key=lambda ev: (
        sum(row_of[p.name] for p in in_force if ev in p.events) /
        sum(1 for p in in_force if ev in p.events), ev))
    for ev in listened:
        event = catalogue.EVENTS.get(ev)
        boxes.append(svg.Box(f"event:{ev}", ev, 0, "event", event.doc if event else "unknown event"))
    actions: dict[str, None] = {}
    emitted: dict[str, None] = {}
    for p in in_force:
        boxes.append(svg.Box(f"policy:{p.name}", p.name + (f" [{p.priority}]" if p.priority else ""),
                             1, "policy", f"POLICY {p.name}: ON {', '.join(p.events)} DO "
                             f"{', '.join(a.name for a in p.actions)}", "#" + policy_anchor(p.name)))
        for ev in p.events:
            arrows.append(svg.Arrow(f"event:{ev}", f"policy:{p.name}", "listens", f"{ev} triggers {p.name}"))
        for a in dict.fromkeys(a.name for a in p.actions):
            actions[a] = None
            arrows.append(svg.Arrow(f"policy:{p.name}", f"action:{a}", "does", f"{p.name} does {a}"))
            sig = catalogue.ACTIONS.get(a)
            for ev in sorted(sig.emits) if sig else ():
                emitted[ev] = None
    for a in actions:
        sig = catalogue.ACTIONS.get(a)
        boxes.append(svg.Box(f"action:{a}", a, 2, "action", sig.doc if sig else "unknown action"))
        for ev in sorted(sig.emits) if sig else ():
            arrows.append(svg.Arrow(f"action:{a}", f"emitted:{ev}", "emits", f"{a} may emit {ev}"))
    for ev in emitted:
        triggers = [p.name for p in in_force if ev in p.events]
        tip = f"{ev} triggers {', '.join(triggers)} (a cascade)" if triggers else \
            f"{ev}: no policy listens"
        boxes.append(svg.Box(f"emitted:{ev}", ev, 3, "emitted", tip, strong=bool(triggers)))
        for name in triggers:
            kind = "loop" if any(target == ev for _, target in looping) else "emits"
            arrows.append(svg.Arrow(f"emitted:{ev}", f"event:{ev}", kind,
                                    f"{ev} cascades into {name}"))
    graph_svg = svg.layered(["event", "policy (priority)", "action", "may emit"], boxes, arrows)
    legend = ('<div class="legend"><span><i class="sw" style="background:#94a3b8"></i>triggers</span>'
              '<span><i class="sw" style="background:#2563eb"></i>does</span>'
              '<span><i class="sw" style="background:#7c3aed"></i>may emit (back to the events: a '
              'cascade)</span><span><i class="sw" style="background:#dc2626"></i>unbounded loop'
              '</span></div>')
    rows = [[f'<a id="{esc(policy_anchor(p.name))}"></a><b>{esc(p.name)}</b>',
             esc(p.priority), esc(", ".join(sorted(p.events))), esc(", ".join(p.actions)),
             f'<code class="muted">{esc(p.source_hash[:12])}</code>',
             f"<details><summary>source</summary><pre>{esc(p.source)}</pre></details>"]
            for p in current.policies]
    sources = "".join(f"<details><summary>{esc(Path(src.file).name)} "
                      f'<span class="muted">{len(src.text.splitlines())} lines · '
                      f'{esc(src.hash[:12])}</span></summary><pre>{esc(src.text)}</pre></details>'
                      for src in current.sources)
    warnings = "".join(f"<li>{esc(w.render())}</li>" for w in current.warnings)
    body = (card("Trigger graph", legend + graph_svg)
            + card(f"Policies in force ({len(current.policies)})",
                   table(["policy", "priority", "events", "actions", "hash", ""], rows)
                   + (f"<h3>Warnings</h3><ul>{warnings}</ul>" if warnings else ""))
            + card("Sources, in composition order", sources)
            + card("gem policy explain", f"<pre>{esc(explain(trees))}</pre>"))
    return page("Policies", body, active="/policies", where=_where(mem),
                subtitle=f"The policy set in force (hash {esc(current.hash[:16])}): which events "
                         "trigger which policies and what may cascade.")


# ---------------------------------------------------------------------- audit
def audit(mem: Memory, full: bool) -> str:
    report = mem.audit(full=full)
    found = mem.recent_transitions(1, details=False)
    _AUDITS[mem.path] = (found[0]["hash"] if found else GENESIS, report)
    names = Names(mem, [v.unit for v in report.violations if v.unit])
    scope = "everything" if report.since == 0 else f"what the transitions after #{report.since} touched"
    head = (f'<dl class="kv"><dt>result</dt><dd>{badge("ok") if report.ok else badge("violations", "bad")}'
            f'</dd><dt>hash chain</dt><dd>{badge("intact", "ok") if report.chain_ok else badge("broken", "bad")}'
            f'</dd><dt>transitions</dt><dd>{esc(report.transitions)}</dd><dt>checked</dt><dd>{esc(scope)}'
            f'</dd></dl><p>{link("/audit", "run a full audit", full=1)}</p>')
    checked = table(["condition", "units checked"],
                    [[esc(c), esc(n)] for c, n in sorted(report.checked.items())])
    violations = table(["condition", "unit", "detail"],
                       [[badge(v.condition, "bad"), names.unit(v.unit) if v.unit else "—",
                         esc(v.detail)] for v in report.violations]) if report.violations else \
        '<p class="muted">No violation.</p>'
    body = '<div class="cols">' + card("Audit", head) + card("Checked", checked) + "</div>" + \
        card("Violations", violations)
    return page("Audit", body, active="/audit", where=_where(mem),
                subtitle="C1-C6 over the stored state and the log's hash chain.")


# ---------------------------------------------------------------------- reports
REPORT_NAME = re.compile(r"^[\w.-]+\.html$")


def report_files(directory: str | None) -> list[Path]:
    if not directory or not os.path.isdir(directory):
        return []
    return sorted((p for p in Path(directory).iterdir()
                   if p.is_file() and REPORT_NAME.match(p.name)),
                  key=lambda p: p.stat().st_mtime, reverse=True)


def reports(directory: str | None, where: str = "") -> str:
    files = report_files(directory)
    # The directory is not named: a page may be shown to tenants, who learn no server path.
    how = ('<p>Write one with <code>gem bench trajectory --html --out DIR</code>; '
           '<code>gem serve --reports DIR</code> says where the dashboard looks.</p>')
    if files:
        rows = [[link(f"/reports/{quote(p.name)}", p.name),
                 when(datetime.fromtimestamp(p.stat().st_mtime, timezone.utc)),
                 f"{p.stat().st_size / 1024:.0f} KB"] for p in files]
        listing = table(["report", "written", "size"], rows)
    else:
        listing = ('<p class="muted">No HTML report in the reports directory.</p>' if directory
                   else '<p class="muted">No reports directory (<code>--reports</code>).</p>')
    return page("Reports", card("Benchmark reports", listing + how), active="/reports", where=where,
                subtitle="Self-contained HTML reports (the trajectory benchmark's plot and tables).")


def error(title: str, message: str, where: str = "") -> str:
    return page(title, card("What happened", f"<p>{esc(message)}</p><p>{link('/', 'overview')}</p>"),
                where=where)


__all__ = ["overview", "OverviewQuery", "topic", "graph", "log", "policies", "audit", "reports",
           "report_files", "error", "PAGE_SIZE"]
