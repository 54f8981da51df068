"""Ingest: integrate facts into the existing state (one transition per call).

Where each fact goes in its field's history is decided by gem/history.py (`place`): a new
value appends an entry and nothing is overwritten; re-ingesting the current value
corroborates it; a late-arriving fact is kept in the history, already superseded; a denial
is evidence against a value and never becomes current. This module resolves host topics,
writes what `place` decided and announces it to the policies.
"""
from __future__ import annotations

from datetime import timedelta
from typing import Any, Sequence

from .. import history
from ..model import Episode, Fact
from ..state.transition import Transition
from ..units import EntryRef, EpisodeRef, FieldRef, TopicRef, dumps, field_id
from .common import entry_value
from .forget import restore_field, restore_topic
from .resolution import Directory


def ingest(t: Transition, facts: Sequence[Fact]) -> dict[str, Any]:
    created_topics: list[str] = []
    new_entries: list[str] = []
    corroborations = denials = 0
    hosts = _resolve_hosts(t, facts, created_topics)
    # One statement each for every row the batch will read, instead of one per fact.
    t.prefetch("Topic", list(hosts.values()))
    fids = [field_id(hosts[f.topic], f.field) for f in facts]
    t.prefetch("Field", fids)
    t.prefetch_children("HAS_ENTRY", [fid for fid in fids if t.field_row(fid) is not None])
    for fact, fid in zip(facts, fids):
        tid = hosts[fact.topic]
        topic = t.topic(tid)
        assert topic is not None
        if topic["status"] == "archived":
            restore_topic(t, tid)  # new evidence about an archived topic revives it
        t.touch_topic(tid)
        field = t.field_row(fid)
        if field is None:
            t.new_field(tid, fact.field)
        elif field["status"] != "active":
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
            continue
        t.content_changed(tid)
        if outcome == "created":
            t.emit("field_created", topic=TopicRef(tid), field=fref, entry=eref,
                   new_value=entry_value(entry))
            continue
        old = t.entry(entry["superseded"])
        assert old is not None
        t.touched.changed_topics[tid] = None
        t.emit("field_updated", topic=TopicRef(tid), field=fref, entry=eref,
               old_value=entry_value(old), new_value=entry_value(entry), updated_field=fact.field)
        t.emit("superseded", topic=TopicRef(tid), field=fref, entry=EntryRef(old["id"], fid), by=eref)
        if old["source"] != entry["source"] and old["asserted_at"] == entry["valid_at"]:
            t.emit("conflict_detected", topic=TopicRef(tid), field=fref, entry=eref,
                   other=EntryRef(old["id"], fid))
    t.prefetch_edges(list(t.touched.changed_topics))
    for tid in t.touched.topics:
        t.emit("ingested", topic=TopicRef(tid))
    return {"created_topics": created_topics, "entries": new_entries,
            "corroborations": corroborations, "denials": denials}


# An episode said within this long after the previous one is read in its context: its search
# document includes the previous episode's text ("Yes, in May" answers what was asked just
# before). Measured on LoCoMo turns: evidence any@10 0.666 -> 0.761 with the hashing embedder.
CONVERSATION_GAP = timedelta(minutes=30)


def ingest_with_episodes(t: Transition, facts: Sequence[Fact],
                         episodes: Sequence[tuple[Episode, Sequence[Fact]]]) -> dict[str, Any]:
    """Record each episode, then ingest the facts extracted from it (citing it by its id in
    `ref` and dated when it was said, unless they say otherwise) and `facts`, in this one
    transition."""
    created: list[str] = []
    extracted: list[Fact] = []
    last = t.row("Episode", f"ep{t.counters.episode}") if t.counters.episode else None
    for episode, derived in episodes:
        at = episode.at or t.now
        follows = None
        if last is not None and timedelta(0) <= at - last["at"] <= CONVERSATION_GAP:
            follows = last["id"]
        row = t.new_episode(episode.text, at, episode.source, episode.actor, episode.speaker,
                            follows)
        last = row
        created.append(row["id"])
        t.emit("episode_recorded", episode=EpisodeRef(row["id"]))
        for fact in derived:
            cite: dict[str, Any] = {}
            if fact.ref is None:
                cite["ref"] = row["id"]
            if fact.at is None:
                cite["at"] = at
            extracted.append(fact.model_copy(update=cite) if cite else fact)
    batch = [*extracted, *facts]
    summary: dict[str, Any] = ingest(t, batch) if batch else \
        {"created_topics": [], "entries": [], "corroborations": 0, "denials": 0}
    return {**summary, "episodes": created, "extracted": len(extracted)}


def _resolve_hosts(t: Transition, facts: Sequence[Fact], created: list[str]) -> dict[str, str]:
    """The host topic of each distinct topic name, in order of first mention; a name no
    resolver tier matches becomes a new topic that later names in the batch can match."""
    directory = Directory.of(t)
    names = list(dict.fromkeys(f.topic for f in facts))
    directory.prepare(names)  # embeds and matches every unknown name in one batch
    hosts: dict[str, str] = {}
    for name in names:
        tid = t.services.resolver.resolve(name, directory)
        if tid is None or t.topic(tid) is None:
            tid = t.new_topic(name, aliases=[])["id"]
            directory.add(tid, name)
            created.append(tid)
            t.emit("topic_created", topic=TopicRef(tid))
        hosts[name] = tid
    return hosts


def _record(t: Transition, fid: str, fact: Fact) -> tuple[str, dict[str, Any]]:
    """Write one fact where its field's history rules put it. Returns (outcome, entry); for an
    update the entry carries the id of the one it superseded under "superseded"."""
    provenance = {"source": fact.source, "actor": fact.actor, "ref": fact.ref,
                  "confidence": fact.confidence, "polarity": fact.polarity}
    valid_at = fact.at or t.now
    value = dumps(fact.value)
    entries = t.entries(fid)
    where = history.place(entries, value, fact.polarity, valid_at, t.now)
    if where.target is not None:
        t.new_observation(where.target["id"], provenance, valid_at)
        return where.outcome, where.target
    successor = where.successor["id"] if where.successor is not None else None
    entry = t.new_entry(fid, value, valid_at, provenance, where.status, successor)
    if where.replaces is not None:
        t.supersede(where.replaces, entry)
        field = t.field_row(fid)
        if valid_at > where.replaces["asserted_at"] and field is not None and field["contested"]:
            t.update("Field", fid, contested=False)  # a newer claim ends the old dispute
        return where.outcome, {**entry, "superseded": where.replaces["id"]}
    return where.outcome, entry

