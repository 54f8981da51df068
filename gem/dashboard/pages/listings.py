"""The listings: the overview (topics with their status, salience and flags; the ladder, the
audit, the latest transitions) and the episodes."""
from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from ...api.prompt import stale_text
from ...derived import GENESIS
from ...memory import Memory
from .. import svg
from ..html import badge, card, esc, link, meter, page, scope_input, short, table, when
from .common import LADDER_COLOURS, PAGE_SIZE, Names, latest_audit, place_text, unit_links, \
    where_of


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
         unit_links(names, r["units"], 3)] for r in recent])
    body = (f'<div class="grid">{stats}</div><div class="cols">{topics}'
            f'{card("Last transitions", last + link("/log", "the whole log →"))}</div>')
    return page("Overview", body, active="/", where=where_of(mem),
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
    return page("Episodes", body, active="/episodes", where=where_of(mem),
                subtitle="What was said or observed, kept as said, newest first: the raw tier "
                         "that facts cite. A stale one was replaced by a newer fact (or a later "
                         "episode contradicts it). Hidden episodes faded from default retrieval; a "
                         "query that matches one strongly recalls it.")


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
