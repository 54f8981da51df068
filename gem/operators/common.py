"""State-level primitives that operators and policy actions share.

Each applies one rule of the model to a transition's proposed state; the rules themselves
(what is current, what a fact does to a history) live in gem/history.py.
"""
from __future__ import annotations

import json
from datetime import datetime
from typing import Any

from .. import history
from ..errors import InvalidInput
from ..reliability import Observation as EvidenceObservation
from ..state.transition import Transition
from ..store.schema import EDGE_TABLES, Row
from ..text import name_key
from ..timecue import refers_to as words_refer_to
from ..units import EdgeRef, FieldRef, TopicRef, field_id


def entry_value(row: Row) -> Any:
    return json.loads(row["value"])


def refers_to(t: Transition, episode: Row) -> datetime | None:
    """The day an episode refers to: the valid time given to a fact found in it (an
    extractor's date: a fact that gives none is valid when the episode was said), else the
    day its own words name ('yesterday', read against when it was said), else None."""
    cited = [e for e in episode.get("cited_by") or ()]
    t.prefetch("Entry", cited)
    for eid in cited:
        entry = t.entry(eid)
        if entry is not None and entry["ref"] == episode["id"] and entry["valid_at"] != episode["at"]:
            return entry["valid_at"]
    return words_refer_to(episode["text"], episode["at"])


def provenance_of(row: Row) -> dict[str, Any]:
    return {k: row[k] for k in ("source", "actor", "ref", "confidence", "polarity")}


def field_ref(t: Transition, fid: str) -> FieldRef:
    row = t.field_row(fid)
    assert row is not None, fid
    return FieldRef(fid, row["topic_id"], row["name"])


def field_named(t: Transition, tid: str, name: str) -> str | None:
    """The id of topic `tid`'s field called `name`: exactly so, else the oldest whose name has
    the same canonical key (field names normalise like titles: "Dog name", "dog name" and
    "dog-name" are one field, shown as it was first written)."""
    fid = field_id(tid, name)
    if t.field_row(fid) is not None:
        return fid
    key = name_key(name)
    for other in t.field_ids(tid):
        row = t.field_row(other)
        if row is not None and name_key(row["name"]) == key:
            return other
    return None


def settle_current(t: Transition, fid: str) -> Row | None:
    """Make the history's best entry current and supersede any other current one by it."""
    plan = history.settle(t.entries(fid))
    if plan.best is None:
        return None
    if plan.promote:
        t.update("Entry", plan.best["id"], status="current", superseded_by=None, superseded_tx=None)
        t.touched.entries[plan.best["id"]] = None
    for entry in plan.demote:
        t.supersede(entry, plan.best)
    return plan.best


def field_evidence(t: Transition, fid: str,
                   assume_current: Row | None = None) -> list[EvidenceObservation]:
    """The evidence sequence F of the field's current value (specs/design.md §6).

    Observations of the same value count with their own polarity. Observations of another
    value count against it only when they claim the same or a later time than its latest
    statement: an older value that was superseded is history, not a contradiction.
    `assume_current` assesses a candidate of a contested field instead of the current value.
    """
    current = assume_current or t.current_entry(fid)
    if current is None or history.is_retraction(current):
        return []  # no current value: nothing to be evidence for
    sequence = []
    for entry in t.entries(fid):
        same = entry["value"] == current["value"]
        for obs in [entry, *t.observations(entry["id"])]:
            if same:
                polarity = obs["polarity"]
            elif obs["polarity"] == "+" and obs["valid_at"] >= current["asserted_at"]:
                polarity = "-"
            else:
                continue
            sequence.append(EvidenceObservation(polarity, float(obs["confidence"]), obs["valid_at"]))
    return sequence


def add_edge(t: Transition, src: str, dst: str, kind: str, source: str) -> bool:
    """Create a typed edge unless it already exists. Returns True if created."""
    if kind not in EDGE_TABLES or kind == "derived":
        raise InvalidInput(f"edge kind must be 'extension' or 'association', got {kind!r}")
    if src == dst:
        raise InvalidInput("an edge must join two different topics")
    table = EDGE_TABLES[kind]
    if t.edge(table, src, dst) is not None or not t.once("edge", kind, src, dst):
        return False
    t.add_edge(table, src, dst, {"tx": t.seq, "created_at": t.now, "source": source,
                                 "actor": t.actor})
    t.touch_topic(src)
    t.touch_topic(dst)
    t.emit("linked", edge=EdgeRef(kind, src, dst), source=TopicRef(src), target=TopicRef(dst),
           kind=kind)
    return True
