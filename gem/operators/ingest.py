"""Ingest: integrate facts into the existing state (one transition per call).

History semantics (issue "Engine core"): a new value appends an entry and nothing is
overwritten; re-ingesting the current value corroborates it instead of duplicating
it; a late-arriving fact (older valid time than the current entry) is kept in the
history but does not become current; the current value is the non-retracted entry
with the latest valid time, ties broken by the latest recording.
"""
from __future__ import annotations

import math
from typing import Any, Sequence

from ..model import Fact
from ..runtime import entry_value
from .forget import restore_field, restore_topic
from ..transition import Transition, dumps
from ..units import EntryRef, FieldRef, TopicRef, field_id


def history_order(entry: dict[str, Any]) -> tuple:
    """The order of precedence in a field's history: the latest statement wins, ties go to
    the latest recording."""
    return (entry["asserted_at"], entry["recorded_at"], entry["seq"])


def settle_current(t: Transition, fid: str) -> dict[str, Any] | None:
    """Make the latest valid, non-retracted, positive entry current; supersede the rest."""
    candidates = [e for e in t.entries(fid)
                  if e["status"] != "retracted" and e["polarity"] == "+"]
    if not candidates:
        return None
    best = max(candidates, key=history_order)
    for entry in candidates:
        if entry is best:
            if entry["status"] != "current":
                t.update("Entry", entry["id"], status="current", superseded_by=None)
                t.touched.entries[entry["id"]] = None
        elif entry["status"] == "current":
            t.supersede(entry, best)
    return best


def ingest(t: Transition, facts: Sequence[Fact]) -> dict[str, Any]:
    created_topics: list[str] = []
    new_entries: list[str] = []
    corroborations = denials = 0
    hosts = _resolve_hosts(t, facts, created_topics)
    # One statement each for every row the batch will read, instead of one per fact.
    t.prefetch("Topic", list(hosts.values()))
    fids = [field_id(hosts[f.topic], f.field) for f in facts]
    t.prefetch("Field", fids)
    t.prefetch_entries([fid for fid in fids if t.field_row(fid) is not None])
    for fact, fid in zip(facts, fids):
        tid = hosts[fact.topic]
        if t.topic(tid)["status"] == "archived":
            restore_topic(t, tid)  # new evidence about an archived topic revives it
        t.touch_topic(tid)
        if t.field_row(fid) is None:
            t.new_field(tid, fact.field)
        elif t.field_row(fid)["status"] != "active":
            restore_field(t, fid)
        t.touch_field(fid, tid)
        outcome, entry = _record(t, fid, fact)
        fref = FieldRef(fid, tid, fact.field)
        eref = EntryRef(entry["id"], fid)
        if outcome == "corroborated":
            corroborations += 1
            t.emit("corroborated", topic=TopicRef(tid), field=fref, entry=eref)
            continue
        if outcome == "denial observed":
            denials += 1
            t.emit("recorded", topic=TopicRef(tid), field=fref, entry=eref)
            continue
        new_entries.append(entry["id"])
        if outcome in ("late", "denied"):
            t.emit("recorded", topic=TopicRef(tid), field=fref, entry=eref)
        elif outcome == "created":
            t.emit("field_created", topic=TopicRef(tid), field=fref, entry=eref,
                   new_value=entry_value(entry))
        elif outcome.startswith("updated"):
            old = t.entry(outcome.split(":", 1)[1])
            t.touched.changed_topics[tid] = None
            t.emit("field_updated", topic=TopicRef(tid), field=fref, entry=eref,
                   old_value=entry_value(old), new_value=entry_value(entry),
                   updated_field=fact.field)
            t.emit("superseded", topic=TopicRef(tid), field=fref,
                   entry=EntryRef(old["id"], fid), by=eref)
            if old["source"] != entry["source"] and old["asserted_at"] == entry["valid_at"]:
                t.emit("conflict_detected", topic=TopicRef(tid), field=fref, entry=eref,
                       other=EntryRef(old["id"], fid))
        t.mark_summary_dirty(tid)
    t.prefetch_dependents(list(t.touched.changed_topics))
    for tid in t.touched.topics:
        t.emit("ingested", topic=TopicRef(tid))
    return {"created_topics": created_topics, "entries": new_entries,
            "corroborations": corroborations, "denials": denials}


def _resolve_hosts(t: Transition, facts: Sequence[Fact], created: list[str]) -> dict[str, str]:
    """The host topic of each distinct topic name, in order of first mention; a name no
    resolver tier matches becomes a new topic that later names in the batch can match."""
    directory = t.engine.directory(t)
    hosts: dict[str, str] = {}
    for fact in facts:
        if fact.topic in hosts:
            continue
        tid = t.engine.resolver.resolve(fact.topic, directory)
        if tid is None or (tid not in t.engine.status and t.topic(tid) is None):
            tid = t.new_topic(fact.topic, aliases=[])["id"]
            directory.add(tid, fact.topic)
            created.append(tid)
            t.emit("topic_created", topic=TopicRef(tid))
        hosts[fact.topic] = tid
    return hosts


def _record(t: Transition, fid: str, fact: Fact) -> tuple[str, dict[str, Any]]:
    """Write one fact into the field's history. Returns (outcome, entry)."""
    provenance = {"source": fact.source, "actor": fact.actor, "ref": fact.ref,
                  "confidence": fact.confidence, "polarity": fact.polarity}
    valid_at = fact.at or t.now
    value = dumps(fact.value)
    entries = t.entries(fid)
    current = t.current_entry(fid)
    if fact.polarity == "-":
        # A denial is evidence against a value; it never becomes current itself.
        same = [e for e in entries if e["value"] == value]
        if same:
            target = same[-1]
            t.new_observation(target["id"], provenance, valid_at)
            return "denial observed", target
        return "denied", t.new_entry(fid, fact.value, valid_at, provenance, "retracted")
    if current is not None and current["value"] == value:
        t.new_observation(current["id"], provenance, valid_at)
        return "corroborated", current
    for e in entries:
        if e["value"] == value and e["valid_at"] == valid_at and e["status"] != "retracted":
            t.new_observation(e["id"], provenance, valid_at)  # a replayed historical fact
            return "corroborated", e
    if current is None:
        return "created", t.new_entry(fid, fact.value, valid_at, provenance, "current")
    if (valid_at, t.now) >= (current["asserted_at"], current["recorded_at"]):
        entry = t.new_entry(fid, fact.value, valid_at, provenance, "current")
        t.supersede(current, entry)
        if valid_at > current["asserted_at"] and t.field_row(fid)["contested"]:
            t.update("Field", fid, contested=False)  # a newer claim ends the old dispute
        return f"updated:{current['id']}", entry
    # Late-arriving: older than the current value's latest statement; recorded in the
    # history, superseded by the next newer entry.
    newer = min((e for e in entries if e["status"] != "retracted" and e["polarity"] == "+"
                 and history_order(e) > (valid_at, t.now, math.inf)), key=history_order)
    return "late", t.new_entry(fid, fact.value, valid_at, provenance, "superseded", newer["id"])

