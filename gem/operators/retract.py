"""Retract: "that was wrong", with no replacement (mem.retract).

A retraction is a statement, made now, that the field has no value: an entry holding JSON null
(gem/history.py `NO_VALUE`) becomes current, and the retracted entry is marked retracted, so
it is a value at no time (as-of included). Until a later statement, the field shows no current
value in retrieval, `as_of`, `inspect` and `explain`, and C1 holds with the retraction as its
current entry. A fact dated before the retraction is a late fact; one made after it is an
update. The retraction is an update of the topic like any other: `field_updated` (new_value
null), `superseded`, and its dependents are flagged by the policies that flag them (C3).
"""
from __future__ import annotations

from typing import Any

from .. import history
from ..state.transition import Transition
from ..units import EntryRef, FieldRef, TopicRef
from .common import entry_value


def retract(t: Transition, fid: str, reason: str, provenance: dict[str, Any]) -> bool:
    """Retract the field's current value. False when it has none (nothing to retract)."""
    current = t.current_entry(fid)
    if current is None or history.is_retraction(current):
        return False
    field = t.get("Field", fid)
    tid, name = field["topic_id"], field["name"]
    # Never earlier than what it retracts, so it outranks it even if the clock went back.
    valid_at = max(t.now, current["asserted_at"])
    retraction = t.new_entry(fid, history.NO_VALUE, valid_at, provenance, "current",
                             reason=reason)
    t.link_successor(current, retraction, status="retracted", reason=reason)
    if field["contested"]:
        t.update("Field", fid, contested=False)
    t.touch_field(fid, tid)
    t.content_changed(tid)
    t.touched.changed_topics[tid] = None
    t.detail.setdefault("retracted", []).append(
        {"field": fid, "entry": current["id"], "by": retraction["id"], "reason": reason})
    ref = FieldRef(fid, tid, name)
    t.prefetch_edges([tid])
    t.emit("field_updated", topic=TopicRef(tid), field=ref, entry=EntryRef(retraction["id"], fid),
           old_value=entry_value(current), new_value=None, updated_field=name)
    t.emit("superseded", topic=TopicRef(tid), field=ref, entry=EntryRef(current["id"], fid),
           by=EntryRef(retraction["id"], fid))
    return True
