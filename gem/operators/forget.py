"""Forget: the graded, never destructive attenuation ladder (design section 3).

    compress  a field keeps its current value and a summary record; older entries leave
              the active history (active=false) but stay recoverable with provenance
    hide      a field leaves default retrieval
    archive   a topic leaves default retrieval; explicit lookup and restore still work

Which units descend the ladder is decided by policies (`ON tick WHEN ... DO compress(field)`),
from decayed salience, never from age or capacity alone. The C5 bound is the one place the
operator itself picks victims: the least salient active fields, inside the same transition.
`restore` reverses any level.
"""
from __future__ import annotations

import json
from typing import Any

from ..runtime import PolicyRuntime, action, field_ref
from ..transition import Transition
from ..units import FieldRef, TopicRef


def forget(t: Transition) -> None:
    """A forgetting pass: the `tick` event lets the ladder policies attenuate what faded."""
    t.emit("tick", now=t.now)


def compress_field(t: Transition, fid: str) -> bool:
    row = t.field_row(fid)
    if row is None or row["status"] != "active":
        return False
    older = [e for e in t.entries(fid) if e["active"] and e["status"] != "current"]
    for e in older:
        t.update("Entry", e["id"], active=False)
        t.touched.entries[e["id"]] = None
    summary = row["summary"]
    if older:
        first = min(e["valid_at"] for e in older).date().isoformat()
        last = max(e["valid_at"] for e in older).date().isoformat()
        values = ", ".join(json.loads(e["value"]).__repr__() for e in older[-3:])
        summary = (f"{len(older)} earlier value(s) from {first} to {last} compressed "
                   f"(latest: {values}); see history")
    t.update("Field", fid, status="compressed", summary=summary)
    _attenuated(t, fid, "compressed")
    return True


def hide_field(t: Transition, fid: str) -> bool:
    row = t.field_row(fid)
    if row is None or row["status"] == "hidden":
        return False
    t.update("Field", fid, status="hidden")
    t.mark_summary_dirty(row["topic_id"])
    _attenuated(t, fid, "hidden")
    return True


def archive_topic(t: Transition, tid: str) -> bool:
    row = t.topic(tid)
    if row is None or row["status"] == "archived":
        return False
    t.update("Topic", tid, status="archived")
    t.touch_topic(tid)
    t.detail.setdefault("attenuated", []).append([tid, "archived"])
    t.emit("archived", topic=TopicRef(tid))
    t.emit("attenuated", unit=TopicRef(tid), level="archived")
    return True


def _attenuated(t: Transition, fid: str, level: str) -> None:
    f = field_ref(t, fid)
    t.touch_field(fid, f.topic_id)
    t.detail.setdefault("attenuated", []).append([fid, level])
    t.emit("attenuated", unit=f, level=level)


def restore_topic(t: Transition, tid: str) -> bool:
    row = t.topic(tid)
    if row is None or row["status"] == "active":
        return False
    t.update("Topic", tid, status="active")
    t.touch_topic(tid)
    t.emit("restored", unit=TopicRef(tid))
    return True


def restore_field(t: Transition, fid: str) -> bool:
    row = t.field_row(fid)
    if row is None or row["status"] == "active":
        return False
    for e in t.entries(fid):
        if not e["active"]:
            t.update("Entry", e["id"], active=True)
            t.touched.entries[e["id"]] = None
    t.update("Field", fid, status="active", summary=None)
    t.mark_summary_dirty(row["topic_id"])
    f = field_ref(t, fid)
    t.touch_field(fid, f.topic_id)
    t.emit("restored", unit=f)
    return True


def restore(t: Transition, tid: str, fid: str | None) -> bool:
    """Reverse any ladder level: the topic (and, if named, the field) become active again."""
    changed = restore_topic(t, tid)
    if fid is not None:
        changed = restore_field(t, fid) or changed
    return changed


def enforce_bound(t: Transition) -> None:
    """C5: past beta(n), attenuate the least salient active fields in this same transition.

    Fields this transition read or wrote are the ones the caller is using right now and are
    never the victims. If hiding every other field cannot restore the bound, C5 rejects.
    """
    from ..conditions import active_field_count
    bound = t.engine.active_bound(t)
    if bound is None:
        return
    excess = active_field_count(t) - int(bound)
    if excess <= 0:
        return
    rows = t.query("MATCH (x:Topic)-[:HAS_FIELD]->(f:Field) WHERE x.status = 'active' AND "
                   "f.status = 'active' RETURN f.id, f.strength, f.last_access, x.strength, "
                   "x.last_access")
    in_use = set(t.touched.fields) | {key for table, key in t.touched.accessed if table == "Field"}

    def relevance(r: list) -> float:
        # A field's own salience, and that of its topic: a field of a topic the user keeps
        # coming back to outranks one of a topic mentioned once and never again. Both rise
        # with every access, so repeated retrieval still only lowers eligibility (C6).
        field = t.salience_now({"strength": r[1], "last_access": r[2]})
        topic = t.salience_now({"strength": r[3], "last_access": r[4]})
        return (field + topic) / 2

    candidates = sorted((r for r in rows if r[0] not in in_use), key=lambda r: (relevance(r), r[0]))
    victims = [r[0] for r in candidates[:excess]]
    for fid in victims:
        hide_field(t, fid)
    t.detail["c5_attenuated"] = victims


# ---------------------------------------------------------------------- policy actions
@action("compress")
def _compress(rt: PolicyRuntime, args: list[Any], evidence: dict[str, Any], policy: str) -> None:
    if isinstance(args[0], FieldRef):
        compress_field(rt.t, args[0].id)


@action("hide")
def _hide(rt: PolicyRuntime, args: list[Any], evidence: dict[str, Any], policy: str) -> None:
    if isinstance(args[0], FieldRef):
        hide_field(rt.t, args[0].id)


@action("archive")
def _archive(rt: PolicyRuntime, args: list[Any], evidence: dict[str, Any], policy: str) -> None:
    if isinstance(args[0], TopicRef):
        archive_topic(rt.t, args[0].id)


@action("restore")
def _restore(rt: PolicyRuntime, args: list[Any], evidence: dict[str, Any], policy: str) -> None:
    unit = args[0]
    if isinstance(unit, TopicRef):
        restore_topic(rt.t, unit.id)
    elif isinstance(unit, FieldRef):
        restore_topic(rt.t, unit.topic_id)
        restore_field(rt.t, unit.id)

