"""Retrieve: every read is a write (C6).

Selection reads the committed indexes (retrieval does not change content, so the
state before the transition ranks the same as the proposed one). Each topic and
field returned is recorded as accessed and announced with a `retrieved` event; the
policies reinforce them, and C6 checks at commit that every accessed unit ended
strictly more salient than it began. The output is built after the policies ran,
from the proposed state, so it shows the salience the caller's read produced.
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Callable

from ..model import Candidate, FieldView, FlagView, HistoryEntry, Observation, Provenance, \
    RetrieveResult, TopicView
from ..reliability import evidence_states
from ..runtime import field_evidence, provenance_of
from ..transition import Transition
from .forget import restore_field
from .ingest import history_order
from ..units import FieldRef, TopicRef, field_id


@dataclass(frozen=True)
class Request:
    query: str | None
    topic: str | None
    fields: tuple[str, ...] | None
    as_of: datetime | None
    history: bool
    include_archived: bool
    k: int


def retrieve(t: Transition, req: Request) -> Callable[[Transition], RetrieveResult]:
    engine = t.engine
    if req.topic is not None:
        tid = engine.directory(t).lookup(req.topic)
        ranked = [] if tid is None else [(tid, None)]
    elif req.query:
        ranked = _top_k(t, engine.search(req.query, req.k, req.include_archived,
                                         floor=t.settings["relevance_floor"]), req.k)
    else:
        ranked = engine.most_salient(t, req.k, req.include_archived)
    ids = [tid for tid, _ in ranked]
    t.prefetch("Topic", ids)
    t.prefetch_fields_of(ids)
    t.prefetch_entries([f for tid in ids for f in t.field_ids(tid)])

    selected: list[tuple[str, float | None, list[str]]] = []
    for tid, score in ranked:
        row = t.topic(tid)
        if row is None or (row["status"] == "archived" and not req.include_archived):
            continue
        fids = [fid for fid in _wanted_fields(t, tid, req) if _value_entry(t, fid, req) is not None]
        selected.append((tid, score, fids))
        t.record_access("Topic", tid)
        for fid in fids:
            t.record_access("Field", fid)
            t.emit("retrieved", topic=TopicRef(tid), field=FieldRef(fid, tid, t.field_row(fid)["name"]),
                   query=req.query)
        if not fids:
            t.emit("retrieved", topic=TopicRef(tid), field=None, query=req.query)

    def finish(t: Transition) -> RetrieveResult:
        views = [topic_view(t, tid, fids, score=score, as_of=req.as_of, history=req.history)
                 for tid, score, fids in selected]
        return RetrieveResult(transition=0, query=req.query, as_of=req.as_of, topics=views)

    return finish


def _top_k(t: Transition, ranked: list[tuple[str, float]], k: int) -> list[tuple[str, float]]:
    """The k best, equal relevance broken by salience (then id, for determinism)."""
    if len(ranked) <= k:
        return ranked
    cut = ranked[k - 1][1]
    pool = [r for r in ranked if r[1] >= cut]
    t.prefetch("Topic", [tid for tid, _ in pool])
    pool.sort(key=lambda r: (-r[1], -t.salience_now(t.topic(r[0])), r[0]))
    return pool[:k]


def _wanted_fields(t: Transition, tid: str, req: Request) -> list[str]:
    """Hidden fields stay out of default retrieval; a field asked for by name is an explicit
    lookup, which finds it and, being a read, revives it (C5 then picks another victim)."""
    if req.fields is None:
        return [f for f in t.field_ids(tid)
                if t.field_row(f)["status"] != "hidden" or req.include_archived]
    fids = [f for f in (field_id(tid, name) for name in req.fields) if t.field_row(f) is not None]
    for fid in fids:
        if t.field_row(fid)["status"] == "hidden" and t.topic(tid)["status"] == "active":
            restore_field(t, fid)
    return fids


def _value_entry(t: Transition, fid: str, req: Request) -> dict[str, Any] | None:
    if req.as_of is None:
        return t.current_entry(fid)
    return value_as_of(t, t.entries(fid), req.as_of)


def value_as_of(t: Transition, entries: list[dict[str, Any]],
                when: datetime) -> dict[str, Any] | None:
    """The entry that was current at time `when`, by everything known now: among values
    stated by then, the one whose latest statement up to `when` is the latest."""
    best, best_key = None, None
    for e in entries:
        if e["status"] == "retracted" or e["polarity"] != "+" or e["valid_at"] > when:
            continue
        stated = e["valid_at"]
        if e["asserted_at"] > stated:  # re-stated later: count the re-statements up to `when`
            stated = max([stated] + [o["valid_at"] for o in t.observations(e["id"])
                                     if o["polarity"] == "+" and o["valid_at"] <= when])
        key = (stated, e["recorded_at"], e["seq"])
        if best_key is None or key > best_key:
            best, best_key = e, key
    return best


def provenance(row: dict[str, Any]) -> Provenance:
    return Provenance(**provenance_of(row))


def history_entry(t: Transition, row: dict[str, Any]) -> HistoryEntry:
    return HistoryEntry(
        id=row["id"], value=json.loads(row["value"]), valid_at=row["valid_at"],
        asserted_at=row["asserted_at"],
        recorded_at=row["recorded_at"], provenance=provenance(row), status=row["status"],
        superseded_by=row["superseded_by"], active=bool(row["active"]),
        observations=[Observation(provenance=provenance(o), valid_at=o["valid_at"],
                                  recorded_at=o["recorded_at"])
                      for o in t.observations(row["id"])])


def field_view(t: Transition, fid: str, as_of: datetime | None = None, history: bool = False,
               full_history: bool = False) -> FieldView:
    row = t.field_row(fid)
    entries = t.entries(fid)
    current = t.current_entry(fid) if as_of is None else value_as_of(t, entries, as_of)
    shown = entries if full_history else [e for e in entries if e["active"]]
    return FieldView(
        name=row["name"],
        value=None if current is None else json.loads(current["value"]),
        valid_at=None if current is None else current["valid_at"],
        recorded_at=None if current is None else current["recorded_at"],
        provenance=None if current is None else provenance(current),
        salience=t.salience_now(row), last_access=row["last_access"], status=row["status"],
        contested=bool(row["contested"]),
        candidates=candidates(t, fid) if row["contested"] else None,
        summary=row["summary"],
        history=[history_entry(t, e) for e in shown] if (history or full_history) else None)


def candidates(t: Transition, fid: str) -> list[Candidate]:
    """For a contested field: the latest claim of each source, each with its reliability."""
    latest: dict[str, dict[str, Any]] = {}
    for e in t.entries(fid):
        if e["status"] != "retracted" and e["polarity"] == "+":
            best = latest.get(e["source"])
            if best is None or history_order(e) > history_order(best):
                latest[e["source"]] = e
    decay = t.settings["reliability_decay"]
    out = []
    for e in sorted(latest.values(), key=history_order, reverse=True):
        sequence = field_evidence(t, fid, assume_current=e)
        out.append(Candidate(value=json.loads(e["value"]), provenance=provenance(e),
                             valid_at=e["valid_at"],
                             reliability=evidence_states(sequence, decay).reliability))
    return out


def topic_view(t: Transition, tid: str, fids: list[str] | None = None, *, score: float | None = None,
               as_of: datetime | None = None, history: bool = False, full_history: bool = False,
               flags: bool = False) -> TopicView:
    row = t.topic(tid)
    fids = t.field_ids(tid) if fids is None else fids
    return TopicView(
        id=tid, title=row["title"], aliases=list(row["aliases"] or []), summary=row["summary"] or "",
        salience=t.salience_now(row), last_access=row["last_access"], status=row["status"],
        score=score,
        fields={t.field_row(f)["name"]: field_view(t, f, as_of, history, full_history) for f in fids},
        flags=open_flags(t, tid) if flags else [])


def open_flags(t: Transition, tid: str) -> list[FlagView]:
    rows = t.query("MATCH (g:Flag)-[:FLAGS]->(:Topic {id: $id}) WHERE g.status = 'open' "
                   "RETURN g.id, g.origin_id, g.policy, g.evidence, g.created_at ORDER BY g.seq",
                   {"id": tid})
    return [FlagView(id=r[0], origin=r[1], policy=r[2], evidence=json.loads(r[3]), created_at=r[4])
            for r in rows]
