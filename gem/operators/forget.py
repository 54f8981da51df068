"""Forget: the graded, never destructive attenuation ladder (specs/design.md §3).

    compress  a field keeps its current value and a summary record; older entries leave
              the active history (active=false) but stay recoverable with provenance; an
              episode is searched by its summary (its distinct content words,
              gem/derived/documents.py) instead of all its words, and stays in default
              retrieval: what it said is kept whole, and a query that finds it revives it
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

from ..runtime import PolicyRuntime, action
from ..state.transition import Transition
from ..store.schema import Row
from ..units import EpisodeRef, FieldRef, TopicRef
from . import tick_plan  # noqa: F401 - registers the runner of the ladder policies' plans
from .common import field_ref


def forget(t: Transition) -> None:
    """A forgetting pass: the `tick` event lets the ladder policies attenuate what faded."""
    t.emit("tick", now=t.now)


def compress_field(t: Transition, fid: str) -> bool:
    row = t.field_row(fid)
    if row is None or row["status"] != "active":
        return False
    older = t.faded_history(fid)
    # Only `active` changes: not a column C4 reads (conditions.C4_ENTRY_COLUMNS), so the entries
    # keep their committed C4 verdict, as their histories keep C1/C2's (history.JUDGED).
    for e in older:
        t.update("Entry", e["id"], active=False)
    if older:
        first = min(e["valid_at"] for e in older).date().isoformat()
        last = max(e["valid_at"] for e in older).date().isoformat()
        values = ", ".join(json.loads(e["value"]).__repr__() for e in older[-3:])
        summary = (f"{len(older)} earlier value(s) from {first} to {last} compressed "
                   f"(latest: {values}); see history")
        t.update("Field", fid, status="compressed", summary=summary)
    else:  # the status alone: the pass's record attests it without the row's hash (gem/attest.py)
        t.update("Field", fid, status="compressed")
    _attenuated(t, row, "compressed")
    return True


def hide_field(t: Transition, fid: str) -> bool:
    row = t.field_row(fid)
    if row is None or row["status"] == "hidden":
        return False
    t.update("Field", fid, status="hidden")
    t.content_changed(row["topic_id"])
    _attenuated(t, row, "hidden")
    return True


def compress_episode(t: Transition, eid: str) -> bool:
    return _attenuate_episode(t, eid, "compressed", moves_from=("active",))


def hide_episode(t: Transition, eid: str) -> bool:
    return _attenuate_episode(t, eid, "hidden", moves_from=("active", "compressed"))


def _attenuate_episode(t: Transition, eid: str, level: str, moves_from: tuple[str, ...]) -> bool:
    row = t.row("Episode", eid)
    if row is None or row["status"] not in moves_from:
        return False
    t.update("Episode", eid, status=level)
    t.touched.episodes[eid] = None
    record_attenuated(t, eid, level)
    t.emit("attenuated", unit=EpisodeRef(eid), level=level)
    return True


def restore_episode(t: Transition, eid: str) -> bool:
    row = t.row("Episode", eid)
    if row is None or row["status"] == "active":
        return False
    t.update("Episode", eid, status="active")
    t.touched.episodes[eid] = None
    t.emit("restored", unit=EpisodeRef(eid))
    return True


def archive_topic(t: Transition, tid: str) -> bool:
    row = t.topic(tid)
    if row is None or row["status"] == "archived":
        return False
    t.update("Topic", tid, status="archived")
    t.touch_topic(tid)
    record_attenuated(t, tid, "archived")
    t.emit("archived", topic=TopicRef(tid))
    t.emit("attenuated", unit=TopicRef(tid), level="archived")
    return True


def _attenuated(t: Transition, field: Row, level: str) -> None:
    fid = field["id"]
    t.touch_field(fid, field["topic_id"])
    record_attenuated(t, fid, level)
    t.emit("attenuated", unit=FieldRef(fid, field["topic_id"], field["name"]), level=level)


LEVELS = ("compressed", "hidden", "archived")  # the ladder, top down


def record_attenuated(t: Transition, unit: str, level: str) -> None:
    """The log's detail lists what a transition attenuated by level, {level: [unit, ...]}:
    a unit descends the ladder in order within one transition (compressed before hidden), so
    nothing is lost against a list of [unit, level] pairs, which took twice the bytes (a
    pass at 100k topics attenuates 2M units)."""
    t.detail.setdefault("attenuated", {}).setdefault(level, []).append(unit)


def attenuations(detail: dict[str, Any]) -> list[tuple[str, str]]:
    """(unit, level) for each attenuation a log record's detail holds, in ladder order (and
    in the order of a list of pairs, as records written before the grouping hold them)."""
    return [(unit, level) for level, units in attenuated_by_level(detail) for unit in units]


def attenuated_by_level(detail: dict[str, Any]) -> list[tuple[str, list[str]]]:
    """`attenuations` as (level, its units in order) runs, in ladder order."""
    done = detail.get("attenuated") or ()
    if isinstance(done, dict):
        return [(level, done[level]) for level in sorted(done, key=_ladder_order)]
    return [(level, [unit]) for unit, level in done]


def _ladder_order(level: str) -> tuple[int, str]:
    return (LEVELS.index(level), level) if level in LEVELS else (len(LEVELS), level)


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
            t.update("Entry", e["id"], active=True)  # C4 does not read `active` (see above)
    t.update("Field", fid, status="active", summary=None)
    t.content_changed(row["topic_id"])
    f = field_ref(t, fid)
    t.touch_field(fid, f.topic_id)
    t.emit("restored", unit=f)
    return True


def restore(t: Transition, tid: str, fid: str | None) -> bool:
    """Reverse any ladder level: the topic becomes active again, and the named field, or
    without one every field of the topic that holds entries (an archived topic comes back
    whole, not empty; fields a merge or promotion emptied stay hidden)."""
    changed = restore_topic(t, tid)
    if fid is not None:
        return restore_field(t, fid) or changed
    fids = t.field_ids(tid)
    t.prefetch("Field", fids)
    for other in fids:
        if t.child_keys("HAS_ENTRY", other):
            changed = restore_field(t, other) or changed
    return changed


def enforce_bound(t: Transition) -> None:
    """C5: past beta(n), attenuate the least relevant active fields in this same transition.

    Relevance is the mean of the field's salience and its topic's: a field of a topic the user
    keeps coming back to outranks one of a topic mentioned once and never again. Both rise with
    every access, so repeated retrieval only lowers eligibility (C6). Fields this transition
    read or wrote are the ones the caller is using right now and are never the victims. If
    hiding every other field cannot restore the bound, C5 rejects at the conditions stage.
    """
    bound = t.settings.get("active_bound")
    if bound is None:
        return
    excess = t.active_field_count() - int(bound)
    if excess <= 0:
        return
    in_use = set(t.touched.fields) | {key for table, key in t.touched.accessed if table == "Field"}
    # Fields whose relevance differs in the proposed state are ranked from their proposed rows.
    recheck = set(t.updated["Field"]) | set(t.moved["Field"]) | set(t.created["Field"])
    for tid in [*t.updated["Topic"], *t.moved["Topic"]]:
        recheck.update(t.committed.fields_of(tid))
    ranked = t.committed.least_relevant_fields(excess, recheck | in_use, t.now, t.half_life,
                                               t.label_half_life)
    t.prefetch("Field", list(recheck - in_use))
    for fid in recheck - in_use:
        row = t.field_row(fid)
        topic = t.topic(row["topic_id"]) if row is not None else None
        if row is None or topic is None or row["status"] != "active" or topic["status"] != "active":
            continue
        ranked.append(((t.salience_now(row) + t.salience_now(topic)) / 2, fid))
    victims = [fid for _, fid in sorted(ranked)[:excess]]
    for fid in victims:
        hide_field(t, fid)
    t.detail["c5_attenuated"] = victims


# ---------------------------------------------------------------------- policy actions
@action("compress")
def _compress(rt: PolicyRuntime, args: list[Any], evidence: dict[str, Any], policy: str) -> None:
    if isinstance(args[0], FieldRef):
        compress_field(rt.t, args[0].id)
    elif isinstance(args[0], EpisodeRef):
        compress_episode(rt.t, args[0].id)


@action("hide")
def _hide(rt: PolicyRuntime, args: list[Any], evidence: dict[str, Any], policy: str) -> None:
    if isinstance(args[0], FieldRef):
        hide_field(rt.t, args[0].id)
    elif isinstance(args[0], EpisodeRef):
        hide_episode(rt.t, args[0].id)


@action("archive")
def _archive(rt: PolicyRuntime, args: list[Any], evidence: dict[str, Any], policy: str) -> None:
    if isinstance(args[0], TopicRef):
        archive_topic(rt.t, args[0].id)


@action("restore")
def _restore(rt: PolicyRuntime, args: list[Any], evidence: dict[str, Any], policy: str) -> None:
    unit = args[0]
    if isinstance(unit, TopicRef):
        restore(rt.t, unit.id, None)
    elif isinstance(unit, FieldRef):
        restore_topic(rt.t, unit.topic_id)
        restore_field(rt.t, unit.id)
    elif isinstance(unit, EpisodeRef):
        restore_episode(rt.t, unit.id)

