"""Stale episodes (issue 27): an episode whose claim a newer fact, or a later episode, replaced.

A fact cites the episode it was found in (`ref`); the episode keeps the ids of the entries
that cite it or that its statements corroborate (`Episode.cited_by`, written by the ingest that
records the fact: entries do not index their `ref`, and a scan of every entry per retrieval
costs ~130 ms at 1M entries). Whether it is stale is then derived when it is read, from those
entries and their fields' histories, not stored as a mark: every way a history changes (a
newer value, a retraction, a revision, a merge, an erasure that brings an older value back, a
re-statement of the old value) is then reflected without a hook in each operator, an erased
value is never copied into a mark that erasure would have to find, and the audit and the
derived state have nothing new to keep consistent. An episode is stale on a field when an entry
it supports is not the field's value (now, or as of the request's time) and that value is a
newer statement of a different value (or a retraction). An episode recorded before
`cited_by` existed reads it as null, "not known" (gem/store/schema.py): what cites it is then
read from the entries and observations (one scan per transition that judges such episodes),
and the first fact that cites it again writes the whole list.

Without an extractor there are no citing facts; a policy may then judge that a later episode
contradicts an earlier one and `mark_stale(e, by)` it (`Episode.contradicted_by`, stored, as
every policy action's effect is). A mark whose later episode is gone (erased) no longer holds.

Ranking: a stale episode comes after the current fact that replaced what it said, which a free
text query returns with it (`order`): "I live in Berlin" never outranks `city: Munich`.
"""
from __future__ import annotations

import json
from datetime import datetime
from typing import Any, Sequence
from weakref import WeakKeyDictionary

from ..history import as_of as value_as_of, is_retraction, order_key
from ..model import StaleMark
from ..state.transition import Transition
from ..store import queries
from ..units import is_episode

# A stale episode's score is set this far below the fact that replaced it (scores are rounded
# to 9 decimals).
BELOW = 1e-9


def own_episode(t: Transition, ref: Any) -> bool:
    """Does `ref` name an episode of this transition's scope (only those are cited)?"""
    return isinstance(ref, str) and is_episode(ref) \
        and ref[:len(ref) - len(ref.rsplit(":", 1)[-1])] == t.prefix


# What cites the episodes of an older database (cited_by null), read once per transition.
_UNLISTED: "WeakKeyDictionary[Transition, dict[str, list[str]]]" = WeakKeyDictionary()


def cited_by(t: Transition, rows: Sequence[dict[str, Any]]) -> dict[str, list[str]]:
    """episode id -> the entries that cite it, for these episode rows: their `cited_by`, or for
    one recorded before it was kept, what the committed entries and observations say."""
    known = _UNLISTED.setdefault(t, {})
    unknown = [r["id"] for r in rows if r.get("cited_by") is None and r["id"] not in known]
    if unknown:
        with t.cache.store.reading() as tx:
            found = queries.citing_entries(tx, unknown)
        known.update({eid: found.get(eid, []) for eid in unknown})
    return {r["id"]: list(r["cited_by"]) if r.get("cited_by") is not None else known[r["id"]]
            for r in rows}


def cite(t: Transition, ref: Any, entry_id: str) -> None:
    """Record on the episode `ref` names that the entry `entry_id` states what it said."""
    if not own_episode(t, ref):
        return
    row = t.row("Episode", ref)
    if row is None:
        return
    listed = cited_by(t, [row])[ref]
    if entry_id in listed and row["cited_by"] is not None:
        return
    t.update("Episode", ref, cited_by=[*listed, *([] if entry_id in listed else [entry_id])])
    t.touched.episodes[ref] = None


def prefetch(t: Transition, episodes: Sequence[str]) -> None:
    """Read what judging these episodes reads in a few statements, not a few per episode:
    their rows, the entries they cite, and those entries' fields, histories and topics."""
    t.prefetch("Episode", episodes)
    rows = [row for eid in episodes if (row := t.row("Episode", eid)) is not None]
    cited = [e for listed in cited_by(t, rows).values() for e in listed]
    if not cited:
        return
    t.prefetch("Entry", cited)
    fids = list(dict.fromkeys(r["field_id"] for e in cited if (r := t.entry(e)) is not None))
    t.prefetch("Field", fids)
    t.prefetch_children("HAS_ENTRY", [f for f in fids if t.field_row(f) is not None])
    t.prefetch("Topic", list(dict.fromkeys(f.split("/", 1)[0] for f in fids)))


def _value_entry(t: Transition, fid: str, as_of: datetime | None) -> dict[str, Any] | None:
    if as_of is None:
        return t.current_entry(fid)
    return value_as_of(t.entries(fid), as_of, t.observations)


def replaced(t: Transition, row: dict[str, Any], as_of: datetime | None = None
             ) -> list[tuple[str, dict[str, Any]]]:
    """(field id, the entry now holding its value) for each field on which a newer statement
    replaced what the episode `row` said, one per field."""
    out: dict[str, dict[str, Any]] = {}
    cited = cited_by(t, [row])[row["id"]]
    t.prefetch("Entry", cited)
    for eid in cited:
        said = t.entry(eid)
        if said is None or said["field_id"] in out or t.field_row(said["field_id"]) is None:
            continue
        now = _value_entry(t, said["field_id"], as_of)
        if now is None or now["id"] == eid or now["value"] == said["value"] \
                or order_key(now) <= order_key(said):
            continue
        out[said["field_id"]] = now
    return list(out.items())


def _contradicting(t: Transition, row: dict[str, Any], as_of: datetime | None,
                   depth: int = 0) -> dict[str, Any] | None:
    """The later episode a policy judged to contradict `row`, if it still exists (and was said
    by `as_of`) and is not itself out of date: a mark holds only while what marked it is
    current. Berlin, then Munich, then Berlin again: the first Berlin episode is stale while
    Munich is current (as of a time between the second and the third), and no longer once
    Munich is contradicted. A policy that marks every earlier episode saying something else
    (the default `stale-when-moved` does, among the speaker's latest 100) then gives the
    right answer with one step: Berlin, Munich, Hamburg marks the first Berlin episode by
    Hamburg (a later mark replaces an earlier one), which is current."""
    later = row.get("contradicted_by")
    found = t.row("Episode", later) if later and own_episode(t, later) else None
    if found is None or (as_of is not None and found["at"] > as_of):
        return None
    return found if depth or _contradicting(t, found, as_of, 1) is None else None


def marks(t: Transition, row: dict[str, Any], as_of: datetime | None = None) -> list[StaleMark]:
    """Why the episode `row` is out of date (empty: it is not)."""
    out = []
    for fid, now in replaced(t, row, as_of):
        field, topic = t.get("Field", fid), t.get("Topic", fid.split("/", 1)[0])
        gone = is_retraction(now)
        out.append(StaleMark(topic=topic["title"], topic_id=topic["id"], field=field["name"],
                             value=None if gone else json.loads(now["value"]),
                             since=now["valid_at"], retracted=gone,
                             reason=now["reason"] if gone else None))
    later = _contradicting(t, row, as_of)
    if later is not None and not out:  # facts that replaced what it said are the precise account
        out.append(StaleMark(episode=later["id"], text=later["text"], since=later["at"]))
    return out


def order(t: Transition, hits: Sequence[Any], as_of: datetime | None,
          include_archived: bool, allowed: set[str] | None = None) -> list[Any]:
    """The ranked units with each stale episode placed just below what replaced what it said
    (the facts, or the later episode that contradicts it); one the query did not rank comes
    with the episode, at its score, so the reader sees the current value beside the
    out-of-date one, if it lies in `allowed` (the request's window; None: anywhere). `hits`
    are retrieve.Hit."""
    by_unit = {h.unit: h for h in hits}
    episodes = [h.unit for h in hits if is_episode(h.unit)]
    prefetch(t, episodes)
    out = dict(by_unit)
    for eid in episodes:
        row = t.row("Episode", eid)
        if row is None:
            continue
        hit = by_unit[eid]
        later = _contradicting(t, row, as_of)
        newer = [fid for fid, _ in replaced(t, row, as_of)] + ([] if later is None else [later["id"]])
        above = []
        for unit in newer:
            if unit not in out:
                if not _visible(t, unit, include_archived) or \
                        (allowed is not None and unit not in allowed):
                    continue
                out[unit] = type(hit)(unit, hit.score, hit.relevance)
            above.append(out[unit].score)
        if above:
            score = min(hit.score, round(min(above) - BELOW, 9))
            out[eid] = type(hit)(eid, score, hit.relevance, hit.recalled)
    ranked = list(out.values())
    ranked.sort(key=lambda h: -h.score)  # stable: ties keep the order rank_units gave them
    return ranked


def _visible(t: Transition, unit: str, include_archived: bool) -> bool:
    """Would default retrieval return this field or episode (a forgotten one only when asked)?"""
    if is_episode(unit):
        episode = t.row("Episode", unit)
        return episode is not None and (include_archived or episode["status"] != "hidden")
    field = t.field_row(unit)
    topic = t.topic(unit.split("/", 1)[0])
    if field is None or topic is None:
        return False
    return include_archived or (field["status"] != "hidden" and topic["status"] == "active")
