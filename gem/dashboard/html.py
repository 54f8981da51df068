"""HTML building blocks: escaping, links, formatting, the page shell and its stylesheet.

Everything a page shows that came from the memory (titles, values, sources, policy text,
evidence) is untrusted and goes through `esc` (text and attribute values alike). Pages carry
no script at all, and `gem serve` sends them with a Content-Security-Policy that forbids
scripts, so a value that slipped through unescaped still could not run.
"""
from __future__ import annotations

import json
from contextlib import contextmanager
from contextvars import ContextVar
from datetime import datetime, timezone
from html import escape
from typing import Any, Iterable, Iterator, Sequence
from urllib.parse import urlencode

# No scripts, no external anything: styles and images inline only.
CSP = ("default-src 'none'; style-src 'unsafe-inline'; img-src data:; "
       "form-action 'self'; base-uri 'none'; frame-ancestors 'none'")


def esc(value: Any) -> str:
    return escape(str(value), quote=True)


# The scope a page is rendered for, and the scopes there are to choose from. Every link and
# form on the page has to carry the scope, so it is the rendering's context rather than an
# argument threaded through every helper; `viewing` sets it around one page.
_SCOPE: ContextVar[str | None] = ContextVar("dashboard_scope", default=None)
_SCOPES: ContextVar[Sequence[str]] = ContextVar("dashboard_scopes", default=())
# What the header says the memory is, when the renderer decides it (the server: a file name
# for a local admin, no name at all for a tenant); None: what the page passes.
_WHERE: ContextVar[str | None] = ContextVar("dashboard_where", default=None)


@contextmanager
def viewing(scope: str | None, scopes: Sequence[str], where: str | None = None) -> Iterator[None]:
    """Render the pages inside for `scope` (None: the default scope), offering `scopes`, with
    `where` in the header if given."""
    tokens = _SCOPE.set(scope), _SCOPES.set(scopes), _WHERE.set(where)
    try:
        yield
    finally:
        _SCOPE.reset(tokens[0])
        _SCOPES.reset(tokens[1])
        _WHERE.reset(tokens[2])


def scope_input() -> str:
    """The hidden input a GET form needs to stay in the scope being viewed."""
    scope = _SCOPE.get()
    return f'<input type="hidden" name="scope" value="{esc(scope)}">' if scope else ""


def url(path: str, /, **params: Any) -> str:
    """A URL with query parameters (None values left out). Links stay in the scope being
    viewed."""
    if "scope" not in params:
        params["scope"] = _SCOPE.get()
    given = {k: v for k, v in params.items() if v is not None and v is not False}
    return path + ("?" + urlencode(given) if given else "")


def href(path: str, /, **params: Any) -> str:
    """`url(...)` escaped for an attribute."""
    return esc(url(path, **params))


def link(path: str, label: Any, cls: str | None = None, tip: str | None = None, /,
         **params: Any) -> str:
    """<a> to `path` with query `params` (any names: the others are positional only)."""
    klass = f' class="{esc(cls)}"' if cls else ""
    hint = f' title="{esc(tip)}"' if tip else ""
    return f'<a href="{href(path, **params)}"{klass}{hint}>{esc(label)}</a>'


def topic_link(tid: str, title: str, path: str = "/topic") -> str:
    return link(path, title, id=tid)


def when(moment: datetime | None, seconds: bool = False) -> str:
    """A time in UTC, short, with the exact ISO time as a tooltip."""
    if moment is None:
        return '<span class="muted">—</span>'
    utc = moment.astimezone(timezone.utc)
    text = utc.strftime("%Y-%m-%d %H:%M:%S" if seconds else "%Y-%m-%d %H:%M")
    return f'<time datetime="{esc(utc.isoformat())}" title="{esc(utc.isoformat())}">{esc(text)}</time>'


def value_text(value: Any) -> str:
    """A stored JSON value as a reader would write it (strings without quotes)."""
    if isinstance(value, str):
        return value
    return json.dumps(value, ensure_ascii=False, sort_keys=True)


def value(value: Any, limit: int = 80) -> str:
    text = value_text(value)
    if len(text) <= limit:
        return f'<span class="value">{esc(text)}</span>'
    return f'<span class="value" title="{esc(text)}">{esc(text[:limit - 1])}…</span>'


def short(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[:limit - 1] + "…"


def badge(text: str, kind: str | None = None, title: str | None = None) -> str:
    tip = f' title="{esc(title)}"' if title else ""
    return f'<span class="badge {esc(kind or text)}"{tip}>{esc(text)}</span>'


def meter(fraction: float, label: str | None = None, kind: str = "salience") -> str:
    """A small horizontal bar for a value in [0, 1]."""
    pct = max(0.0, min(1.0, fraction)) * 100
    text = label if label is not None else f"{fraction:.2f}"
    return (f'<span class="nowrap"><span class="meter {esc(kind)}" title="{esc(text)}"><span '
            f'style="width:{pct:.1f}%"></span></span> <span class="num">{esc(text)}</span></span>')


def table(head: Iterable[str], rows: Iterable[Iterable[str]], cls: str = "") -> str:
    """Cells are HTML already (the caller escaped them); head cells are plain text."""
    th = "".join(f"<th>{esc(h)}</th>" for h in head)
    body = "".join("<tr>" + "".join(f"<td>{c}</td>" for c in row) + "</tr>" for row in rows)
    return f'<table class="{esc(cls)}"><thead><tr>{th}</tr></thead><tbody>{body}</tbody></table>'


def card(title: str, body: str, cls: str = "", anchor: str | None = None,
         extra: str = "") -> str:
    ident = f' id="{esc(anchor)}"' if anchor else ""
    return (f'<section class="card {esc(cls)}"{ident}><h2>{esc(title)}{extra}</h2>'
            f'{body}</section>')


NAV = (("/", "Overview"), ("/episodes", "Episodes"), ("/log", "Log"), ("/policies", "Policies"), ("/audit", "Audit"),
       ("/reports", "Reports"), ("/docs", "API"))


def page(title: str, body: str, *, active: str = "/", subtitle: str = "",
         where: str = "") -> str:
    on = ' class="on"'
    nav = "".join(f'<a href="{href(path) if path != "/docs" else path}"'
                  f'{on if path == active else ""}>{esc(name)}</a>' for path, name in NAV)
    sub = f'<p class="subtitle">{subtitle}</p>' if subtitle else ""
    shown = _WHERE.get()
    where = where if shown is None else shown
    return (
        '<!doctype html><html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f'<title>{esc(title)} · gem</title><style>{STYLE}</style></head><body>'
        f'<header class="top"><a class="brand" href="{href("/")}">gem</a><nav>{nav}</nav>'
        f'{_scope_picker()}<span class="where">{esc(where)}</span></header>'
        f'<main><h1>{esc(title)}</h1>{sub}{body}</main>'
        '<footer>Read-only: viewing changes nothing (no transition, no reinforcement).</footer>'
        '</body></html>')


def _scope_picker() -> str:
    """A GET form choosing the scope (shown once there is more than the default scope)."""
    scopes, current = list(_SCOPES.get()), _SCOPE.get() or "default"
    if not scopes or scopes == ["default"]:
        return ""
    if current not in scopes:
        scopes.append(current)
    options = "".join(f'<option value="{esc(s)}"{" selected" if s == current else ""}>'
                      f'{esc(s)}</option>' for s in sorted(scopes))
    return (f'<form class="scope" method="get" action="/"><label>scope '
            f'<select name="scope">{options}</select></label>'
            f'<button type="submit">View</button></form>')


def document(title: str, body: str) -> str:
    """A standalone page (a report file): the same look, no navigation."""
    return ('<!doctype html><html lang="en"><head><meta charset="utf-8">'
            '<meta name="viewport" content="width=device-width, initial-scale=1">'
            f'<title>{esc(title)}</title><style>{STYLE}</style></head><body>'
            f'<main><h1>{esc(title)}</h1>{body}</main></body></html>')


STYLE = """
:root{--ink:#1f2430;--muted:#6b7280;--bg:#f5f6f8;--card:#fff;--line:#e3e6ea;--accent:#2563eb;
--active:#16a34a;--compressed:#d97706;--hidden:#64748b;--archived:#9ca3af;--flag:#dc2626;
--ext:#2563eb;--assoc:#0d9488;--derived:#7c3aed}
*{box-sizing:border-box}
body{margin:0;font:14px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;color:var(--ink);
background:var(--bg)}
a{color:var(--accent);text-decoration:none}a:hover{text-decoration:underline}
header.top{display:flex;align-items:center;gap:18px;padding:10px 24px;background:#111827;color:#e5e7eb}
header.top form.scope{margin-left:auto;color:#cbd5e1;font-size:13px}
header.top form.scope select,header.top form.scope button{font-size:12px;margin-left:4px}
header.top .brand{color:#fff;font-weight:700;font-size:18px;letter-spacing:.5px}
header.top nav a{color:#cbd5e1;margin-right:14px}header.top nav a.on{color:#fff;font-weight:600}
header.top .where{margin-left:12px;color:#94a3b8;font-size:12px}
main{max-width:1180px;margin:0 auto;padding:18px 24px 40px}
h1{font-size:22px;margin:6px 0 4px}h2{font-size:15px;margin:0 0 10px}
h3{font-size:14px;margin:14px 0 6px}
.subtitle{color:var(--muted);margin:0 0 14px}
footer{color:var(--muted);font-size:12px;text-align:center;padding:16px}
.card{background:var(--card);border:1px solid var(--line);border-radius:8px;padding:14px 16px;
margin:0 0 14px}
.grid{display:grid;grid-template-columns:repeat(auto-fit,minmax(170px,1fr));gap:12px;margin-bottom:14px}
.stat{background:var(--card);border:1px solid var(--line);border-radius:8px;padding:10px 14px}
.stat .n{font-size:22px;font-weight:650}.stat .l{color:var(--muted);font-size:12px}
.cols{display:grid;grid-template-columns:3fr 2fr;gap:14px}
td time,.nowrap{white-space:nowrap}
svg.network{display:block;margin:0 auto}
.small{font-size:12px}
.cols.even{grid-template-columns:1fr 1.25fr}
@media (max-width:900px){.cols,.cols.even{grid-template-columns:1fr}}
table{border-collapse:collapse;width:100%}
th{text-align:left;font-weight:600;color:var(--muted);font-size:12px;border-bottom:1px solid var(--line);
padding:5px 8px}
td{border-bottom:1px solid #f0f1f3;padding:5px 8px;vertical-align:top}
tr:hover td{background:#fafbfc}
.muted{color:var(--muted)}.num{font-variant-numeric:tabular-nums}
.value{font-family:ui-monospace,SFMono-Regular,Menlo,monospace;font-size:13px;background:#f3f4f6;
padding:1px 5px;border-radius:4px;word-break:break-word}
.badge{display:inline-block;padding:1px 7px;border-radius:10px;font-size:11px;font-weight:600;
background:#eef2f7;color:#334155;margin-right:3px}
.badge.active,.badge.current,.badge.ok{background:#dcfce7;color:#166534}
.badge.compressed{background:#fef3c7;color:#92400e}.badge.hidden{background:#e2e8f0;color:#334155}
.badge.archived,.badge.superseded{background:#f3f4f6;color:#6b7280}
.badge.retracted,.badge.flag,.badge.bad,.badge.contested{background:#fee2e2;color:#991b1b}
.badge.extension{background:#dbeafe;color:#1e40af}.badge.association{background:#ccfbf1;color:#115e59}
.badge.derived{background:#ede9fe;color:#5b21b6}
.meter{display:inline-block;width:70px;height:8px;background:#eef0f3;border-radius:4px;
vertical-align:middle;overflow:hidden}
.meter span{display:block;height:100%;background:var(--accent)}
.meter.reliability span{background:var(--active)}
.ladder{display:inline-flex;height:8px;width:70px;border-radius:4px;overflow:hidden;background:#eef0f3;
vertical-align:middle}
.ladder i{display:block;height:100%}
.ladder .active{background:var(--active)}.ladder .compressed{background:var(--compressed)}
.ladder .hidden{background:var(--hidden)}.ladder .archived{background:var(--archived)}
form.filters{display:flex;flex-wrap:wrap;gap:8px;align-items:center;margin-bottom:10px}
form.filters input,form.filters select{font:inherit;padding:4px 8px;border:1px solid var(--line);
border-radius:6px;background:#fff}
form.filters button{font:inherit;padding:4px 12px;border:0;border-radius:6px;background:var(--accent);
color:#fff}
.pager{display:flex;gap:12px;margin-top:10px;align-items:center}
pre{background:#0f172a;color:#e2e8f0;padding:12px;border-radius:6px;overflow:auto;font-size:12.5px;
line-height:1.4}
details summary{cursor:pointer;color:var(--accent)}
.field{border-left:3px solid var(--active)}.field.compressed{border-left-color:var(--compressed)}
.field.hidden{border-left-color:var(--hidden)}.field.contested{border-left-color:var(--flag)}
.kv{display:grid;grid-template-columns:max-content 1fr;gap:3px 14px;margin:6px 0 10px}
.kv dt{color:var(--muted)}.kv dd{margin:0}
svg{max-width:100%;height:auto;font-family:system-ui,-apple-system,"Segoe UI",Roboto,sans-serif}
svg a:hover circle,svg a:hover rect{stroke-width:3}
.legend{font-size:12px;color:var(--muted);margin:4px 0 8px}
.legend span{margin-right:12px}
.sw{display:inline-block;width:18px;height:3px;vertical-align:middle;margin-right:4px}
.ok{color:var(--active)}.bad{color:var(--flag)}
"""

__all__ = ["esc", "href", "link", "topic_link", "when", "value", "value_text", "short", "badge",
           "meter", "table", "card", "page", "document", "CSP", "STYLE"]
