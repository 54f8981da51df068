"""The transition log (what ran, what it touched, which policies fired, the hash chain) and
the audit (C1-C6 over the stored state)."""
from __future__ import annotations

from datetime import datetime
from typing import Any

from ...audit import verify_chain
from ...derived import GENESIS
from ...memory import Memory
from ...units import TopicId
from ..html import badge, card, esc, link, page, scope_input, short, table, when
from .common import AUDITS, PAGE_SIZE, Names, latest_audit, policy_anchor, unit_links, \
    walk_strings, where_of


def topic_param(topic: str | None) -> dict[str, str]:
    """The query parameter naming a topic: `id=` for a `TopicId` (what links carry), `topic=`
    for a title. Ids and titles never share a namespace (a topic may be titled "t2")."""
    if not topic:
        return {}
    return {"id": str(topic)} if isinstance(topic, TopicId) else {"topic": topic}


def _is_title(topic: str | None) -> bool:
    return bool(topic) and not isinstance(topic, TopicId)


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
        names.add(s for p in r["policies"] for s in walk_strings(p.get("evidence")))
        names.add(walk_strings(r["detail"]))
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
                     esc(r["actor"]), unit_links(names, r["units"], 12), _fired(names, r["policies"]),
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
                active="/log", where=where_of(mem),
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


def _detail(names: Names, detail: dict[str, Any]) -> str:
    if not detail:
        return '<span class="muted">—</span>'
    text = short(", ".join(detail), 40)
    return f"<details><summary>{esc(text)}</summary>{names.json(detail)}</details>"


def audit(mem: Memory, full: bool) -> str:
    report = mem.audit(full=full)
    found = mem.recent_transitions(1, details=False)
    AUDITS[mem.path] = (found[0]["hash"] if found else GENESIS, report)
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
    return page("Audit", body, active="/audit", where=where_of(mem),
                subtitle="C1-C6 over the stored state and the log's hash chain.")
