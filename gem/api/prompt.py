"""A recall as a compact text block for a model's prompt, cut to a token budget.

One formatter for the three surfaces (MCP `memory_recall(format="text")`, HTTP
`/v1/retrieve` with `"format": "text"`, `gem query --format text`). Tokens are counted
approximately, as ceil(characters / 4): no tokenizer is bundled, and a budget is a guide,
not a contract with one model's vocabulary.
"""
from __future__ import annotations

import json
import math
from datetime import datetime
from typing import Any

from ..model import StaleMark
from . import schemas as s

DEFAULT_MAX_TOKENS = 800


def tokens(text: str) -> int:
    """The approximate token count of `text` (with its newline): ceil(chars / 4)."""
    return math.ceil((len(text) + 1) / 4)


def _day(t: datetime | None) -> str:
    return "undated" if t is None else t.date().isoformat()


def _value(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)


def _place(place: s.PlaceIn | None, km: float | None) -> str:
    """", at Lisbon office" (or the coordinates), with the distance from a near= point."""
    if place is None:
        return ""
    where = place.name or f"{place.lat:.4f},{place.lon:.4f}"
    return f", at {where}" + (f" ({km:.1f} km away)" if km is not None else "")


def _field(f: s.FieldCard) -> str:
    if f.retracted is not None:
        return f"- {f.name}: none [retracted: {f.retracted}]"
    marks: list[str] = [f.status] if f.status != "active" else []
    if f.contested:
        others = [_value(c.value) for c in f.candidates or () if not c.current]
        marks.append("contested" + (f" with {', '.join(others)}" if others else ""))
    source = f", source {f.provenance.source}" if f.provenance else ""
    mark = f" [{'; '.join(marks)}]" if marks else ""
    where = _place(f.place, f.distance_km)
    return f"- {f.name}: {_value(f.value)} ({_day(f.valid_at)}{source}{where}){mark}"


def _topic(t: s.TopicCard) -> list[str]:
    marks = []
    if t.needs_review:
        changed = sorted({f.because_of for f in t.needs_review if f.because_of})
        marks.append("stale: needs review" + (f", {', '.join(changed)} changed" if changed else ""))
    if t.status != "active":
        marks.append(t.status)
    if t.context_of:
        marks.append(f"context of {t.context_of}")
    head = t.title + (f" [{'; '.join(marks)}]" if marks else "") + ":"
    return [head, *(_field(f) for f in t.fields.values())]


def stale_text(m: StaleMark | s.StaleCard) -> str:
    """What replaced an episode's claim, in a few words (the text format, the dashboard)."""
    said = m.text if isinstance(m, StaleMark) else m.said
    if said is not None:
        return f"stale: contradicted {_day(m.since)}: {said}"
    now = f"retracted ({m.reason})" if m.retracted else f"now {_value(m.value)}"
    return f"stale: {m.topic} {m.field} {now} since {_day(m.since)}"


def _episode(e: s.EpisodeCard) -> str:
    marks = [f"recalled from {e.recalled}"] if e.recalled else []
    marks += [stale_text(m) for m in e.stale]
    mark = "".join(f" [{m}]" for m in marks)
    return f"{e.speaker or 'someone'}, {_day(e.at)}{_place(e.place, e.distance_km)}: {e.text}{mark}"


def render(result: s.RecallResult, max_tokens: int = DEFAULT_MAX_TOKENS) -> str:
    """Topics in rank order (title, then one line per field: value, valid date, source,
    place, marks), then episodes in rank order ("speaker, date: text"). Over `max_tokens`, whole
    lines are kept from the top and a last line says how many more were left out."""
    lines = [line for t in result.topics for line in _topic(t)]
    lines += [_episode(e) for e in result.episodes]
    if not lines:
        return "Nothing in memory matches.\n"
    costs = [tokens(line) for line in lines]
    if sum(costs) <= max_tokens:
        return "\n".join(lines) + "\n"
    kept, used = 0, 0
    while kept < len(lines):
        more = f"… {len(lines) - kept - 1} more"
        if used + costs[kept] + tokens(more) > max_tokens:
            break
        used += costs[kept]
        kept += 1
    return "\n".join([*lines[:kept], f"… {len(lines) - kept} more"]) + "\n"
