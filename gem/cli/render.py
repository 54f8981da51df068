"""Plain-text renderings of the agent schemas, for people at a terminal."""
from __future__ import annotations

import json
from datetime import datetime
from typing import Any

from ..api import schemas as s


def _v(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False)


def _day(t: datetime | None) -> str:
    return "-" if t is None else t.strftime("%Y-%m-%d %H:%M")


def _where(place: s.PlaceIn | None, km: float | None) -> str:
    if place is None:
        return ""
    named = place.name or f"{place.lat:.5f},{place.lon:.5f}"
    return f" at {named}" + ("" if km is None else f" ({km:.2f} km)")


def _field(f: s.FieldCard, indent: str = "  ") -> list[str]:
    status = "" if f.status == "active" else f" [{f.status}]"
    source = f" (source {f.provenance.source}, valid {_day(f.valid_at)})" if f.provenance else ""
    where = _where(f.place, f.distance_km)
    lines = [f"{indent}{f.name}: {_v(f.value)}{status}{source}{where}  salience {f.salience:.2f}"]
    if f.contested and f.candidates:
        lines.append(f"{indent}  contested between:")
        lines += [f"{indent}    {_v(c.value)} from {c.provenance.source} (R {c.reliability:+.2f})"
                  + (" <- current" if c.current else "") for c in f.candidates]
    if f.why_current:
        lines.append(f"{indent}  why current: {f.why_current}")
    for h in f.history or ():
        lines.append(f"{indent}  #{h.position} {_v(h.value)} {h.status}, valid {_day(h.valid_at)}")
    return lines


def topic(t: s.TopicCard) -> str:
    extra = f", score {t.score:.3f}" if t.score is not None else ""
    lines = [f"{t.title} ({t.status}, salience {t.salience:.2f}{extra})"]
    if t.aliases:
        lines.append(f"  also known as: {', '.join(t.aliases)}")
    for f in t.fields.values():
        lines += _field(f)
    if t.hidden_fields:
        lines.append(f"  hidden fields: {', '.join(t.hidden_fields)}")
    for flag in t.needs_review:
        lines.append(f"  needs review: {flag.because_of or 'a dependency'} changed "
                     f"({flag.policy}, {_day(flag.since)})")
    return "\n".join(lines) + "\n"


def recall(r: s.RecallResult) -> str:
    if not r.topics and not r.episodes:
        return "nothing found\n"
    said = [f"{_day(e.at)} {e.speaker or '?'}: {e.text} ({e.source}"
            + _where(e.place, e.distance_km)
            + (f", recalled from {e.recalled})" if e.recalled else ")") for e in r.episodes]
    return "\n".join([*(topic(t) for t in r.topics), *said]) + ("\n" if said else "")


def history(r: s.HistoryResult) -> str:
    lines = [f"{r.topic} / {r.field}:"]
    for h in r.entries:
        replaced = f", replaced by #{h.superseded_by}" if h.superseded_by else ""
        lines.append(f"  #{h.position} {_v(h.value):20} {h.status:10} valid {_day(h.valid_at)} "
                     f"recorded {_day(h.recorded_at)} source {h.provenance.source}{replaced}")
    return "\n".join(lines) + "\n"


def explain(r: s.ExplainResult) -> str:
    states = ", ".join(f"{k} {v:.2f}" for k, v in r.states.items())
    return (f"{r.topic} / {r.field} = {_v(r.value)}\n"
            f"  reliability R {r.reliability:+.3f} ({states}; decay {r.decay})\n"
            + (f"  contested: {r.why_current}\n" if r.contested and r.why_current else "")
            + history(s.HistoryResult(topic=r.topic, field=r.field, entries=r.entries)))


def review(r: s.ReviewResult) -> str:
    if not r.flags:
        return "no topic needs review\n"
    return "".join(f"{f.topic}: {f.because_of or 'a dependency'} changed "
                   f"({f.policy}, {_day(f.since)}) {_v(f.evidence)}\n" for f in r.flags)


def audit(r: s.AuditResult) -> str:
    checked = ", ".join(f"{c} {n}" for c, n in sorted(r.checked.items()))
    head = (f"audit {'ok' if r.ok else 'FAILED'}: {r.transitions} transitions, hash chain "
            f"{'intact' if r.chain_ok else 'BROKEN'}; units checked: {checked}\n")
    return head + "".join(f"  {v.condition} on {v.unit}: {v.detail}\n" for v in r.violations)


def stats(r: s.StatsResult) -> str:
    def show(value: Any) -> str:
        if isinstance(value, dict):
            return ", ".join(f"{k} {v}" for k, v in sorted(value.items())) or "none"
        return "unbounded" if value is None else str(value)
    return "".join(f"{k}: {show(v)}\n" for k, v in r.model_dump().items())


def log(r: s.LogPage) -> str:
    lines = []
    for x in r.records:
        fired = sorted({p.policy for p in x.policies})
        lines.append(f"{x.seq:6} {x.op:9} {_day(x.at)} {x.actor:12} "
                     f"{', '.join(x.units) or '-'}" + (f"  policies: {', '.join(fired)}" if fired else ""))
    if r.next_since is not None:
        lines.append(f"(more: --since {r.next_since})")
    return "\n".join(lines) + "\n"


def maintain(r: s.MaintainResult, run: int) -> str:
    head = "dry run (nothing changed)" if r.dry_run else f"run {run}"
    lines = [f"{head}: forgot {len(r.forget.attenuated)}, merged {len(r.revise.merged)}, "
             f"settled {len(r.revise.conflicts_settled)} conflicts, "
             f"evaluated flags on {len(r.revise.flags_evaluated)} topics, "
             f"{len(r.revise.flags_open)} still flagged for review"]
    lines += [f"  {c.unit} -> {c.level}" for c in r.forget.attenuated]
    lines += [f"  merged {m.merged} into {m.kept}" for m in r.revise.merged]
    return "\n".join(lines) + "\n"


def ingest_summary(summary: dict[str, Any]) -> str:
    rate = summary["facts"] / summary["seconds"] if summary["seconds"] else 0.0
    known = f", {summary['known_episodes']} already stored" if summary.get("known_episodes") else ""
    what = (f"lines ({summary['episodes']} of them episodes{known})" if summary.get("episodes")
            else "facts")
    return (f"ingested {summary['facts']} {what} in {summary['batches']} transitions "
            f"({summary['seconds']:.2f} s, {rate:,.0f} facts/s): "
            f"{summary['created_topics']} new topics, {summary['new_values']} new values, "
            f"{summary['corroborations']} corroborations, {summary['denials']} denials, "
            f"{summary['flagged_topics']} topics flagged for review"
            + (f"; skipped {summary['skipped_lines']} bad lines" if summary["skipped_lines"] else ""))
