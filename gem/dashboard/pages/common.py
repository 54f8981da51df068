"""What several dashboard pages share: the ids they recognise, unit names as readers know them,
the latest audit (cached per log head), and the error page."""
from __future__ import annotations

import os
import re
from typing import Any, Iterable, Sequence
from urllib.parse import quote

from ...derived import GENESIS
from ...memory import Memory
from ...model import AuditReport
from ..html import card, esc, href, link, page, value


TOPIC_ID = re.compile(r"^(?:[a-z0-9][a-z0-9_.-]*:)?t\d+$")
FIELD_ID = re.compile(r"^((?:[a-z0-9][a-z0-9_.-]*:)?t\d+)/(.+)$")
EPISODE_ID = re.compile(r"^(?:[a-z0-9][a-z0-9_.-]*:)?ep\d+$")
LADDER_COLOURS = {"active": "#16a34a", "compressed": "#d97706", "hidden": "#64748b",
                  "archived": "#9ca3af"}
PAGE_SIZE = 50
LIST_LIMIT = 12  # items of a list shown in evidence and details


def where_of(mem: Memory) -> str:
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


def walk_strings(data: Any) -> Iterable[str]:
    """The strings inside a JSON value, as far as `Names.json` shows it."""
    if isinstance(data, str):
        yield data
    elif isinstance(data, dict):
        for v in data.values():
            yield from walk_strings(v)
    elif isinstance(data, list):
        for v in data[:LIST_LIMIT]:
            yield from walk_strings(v)


# memory path -> (the log head it audited, the report). gem is its database's only writer and
# every change is a transition, so while the head is the same the audit's answer is too; the
# overview and the log show it without re-running it (the Audit page always runs it).
AUDITS: dict[str, tuple[str, AuditReport]] = {}


def latest_audit(mem: Memory, head: str | None = None) -> AuditReport:
    if head is None:
        found = mem.recent_transitions(1, details=False)
        head = found[0]["hash"] if found else GENESIS
    cached = AUDITS.get(mem.path)
    if cached is not None and cached[0] == head:
        return cached[1]
    report = mem.audit()
    AUDITS[mem.path] = (head, report)
    return report


def unit_links(names: Names, units: Sequence[str], limit: int) -> str:
    shown = [names.unit(u) for u in units[:limit]]
    more = len(units) - limit
    return ", ".join(shown) + (f' <span class="muted">+{more} more</span>' if more > 0 else "")


def policy_anchor(name: str) -> str:
    return "policy-" + quote(name, safe="")


def place_text(place: Any) -> str:
    """A place as the dashboard shows it: its name and coordinates, or a dash."""
    if place is None:
        return '<span class="muted">—</span>'
    point = f'<span class="num">{place.lat:.5f}, {place.lon:.5f}</span>'
    return f'{esc(place.name)} <span class="muted">({point})</span>' if place.name else point


def error(title: str, message: str, where: str = "") -> str:
    return page(title, card("What happened", f"<p>{esc(message)}</p><p>{link('/', 'overview')}</p>"),
                where=where)
