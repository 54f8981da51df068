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

import numpy as np

from ..model import Candidate, FieldView, FlagView, HistoryEntry, Observation, Provenance, \
    RetrieveResult, TopicView
from ..history import as_of as value_as_of, is_candidate, is_retraction, order_key
from ..reliability import evidence_states
from ..runtime import topic_summary
from ..state.transition import Transition
from ..units import FieldRef, TopicRef
from .common import field_evidence, field_named, provenance_of
from .forget import restore_field
from .resolution import Directory


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
    if req.topic is not None:
        tid = Directory.of(t).lookup(req.topic)
        ranked: list[tuple[str, float | None]] = [] if tid is None else [(tid, None)]
    elif req.query:
        t.committed.refresh(t.cache, t.services.summarizer)
        found = search(t, req.query, req.k, req.include_archived, t.settings["relevance_floor"])
        ranked = list(_top_k(t, found, req.k))
    else:
        statuses = ("active", "archived") if req.include_archived else ("active",)
        ranked = [(tid, None) for tid in t.committed.most_salient_topics(
            req.k, t.now, t.half_life, statuses)]
    ids = [tid for tid, _ in ranked]
    t.prefetch("Topic", ids)
    t.prefetch_children("HAS_FIELD", ids)
    t.prefetch_children("HAS_ENTRY", [f for tid in ids for f in t.field_ids(tid)])

    selected: list[tuple[str, float | None, list[str]]] = []
    for tid, score in ranked:
        row = t.topic(tid)
        if row is None or (row["status"] == "archived" and not req.include_archived):
            continue
        fids = [fid for fid in _wanted_fields(t, tid, req) if _value_entry(t, fid, req) is not None]
        selected.append((tid, score, fids))
        t.record_access("Topic", tid)
        for fid in fids:
            field = t.field_row(fid)
            assert field is not None
            t.record_access("Field", fid)
            t.emit("retrieved", topic=TopicRef(tid), field=FieldRef(fid, tid, field["name"]),
                   query=req.query)
        if not fids:
            t.emit("retrieved", topic=TopicRef(tid), field=None, query=req.query)

    def finish(t: Transition) -> RetrieveResult:
        views = [topic_view(t, tid, fids, score=score, as_of=req.as_of, history=req.history)
                 for tid, score, fids in selected]
        return RetrieveResult(transition=t.seq, query=req.query, as_of=req.as_of, topics=views)

    return finish


def search(t: Transition, query: str, k: int, include_archived: bool,
           floor: float) -> list[tuple[str, float]]:
    """Fuse BM25 (normalised by the best hit) with embedding cosine over the best candidates
    of each. Returns every candidate above the floor, best first, scores rounded so that equal
    relevance compares equal (the caller breaks ties)."""
    derived = t.committed
    pool = max(50, 10 * k)
    lexical = dict(derived.lexical.search(query, pool, max_df=0.5))
    best = max(lexical.values(), default=0.0)
    qvec = t.services.embedder.embed([query])[0]
    dense = dict(derived.vectors.search(qvec, pool)) \
        if np.any(qvec) and len(derived.vectors) else {}
    scored = []
    for tid in set(lexical) | set(dense):
        if not include_archived and derived.topic_status(tid) == "archived":
            continue
        lex = lexical.get(tid, 0.0) / best if best > 0 else 0.0
        score = round(0.5 * lex + 0.5 * max(dense.get(tid, 0.0), 0.0), 9)
        if score >= floor:
            scored.append((tid, score))
    scored.sort(key=lambda x: (-x[1], x[0]))
    return scored


def _top_k(t: Transition, ranked: list[tuple[str, float]], k: int) -> list[tuple[str, float]]:
    """The k best, equal relevance broken by salience (then id, for determinism)."""
    if len(ranked) <= k:
        return ranked
    cut = ranked[k - 1][1]
    pool = [r for r in ranked if r[1] >= cut]
    t.prefetch("Topic", [tid for tid, _ in pool])

    def salience(tid: str) -> float:
        row = t.topic(tid)
        return 0.0 if row is None else t.salience_now(row)

    pool.sort(key=lambda r: (-r[1], -salience(r[0]), r[0]))
    return pool[:k]


def _wanted_fields(t: Transition, tid: str, req: Request) -> list[str]:
    """Hidden fields stay out of default retrieval; a field asked for by name is an explicit
    lookup, which finds it and, being a read, revives it (C5 then picks another victim)."""
    if req.fields is None:
        return [f for f in t.field_ids(tid)
                if t.get("Field", f)["status"] != "hidden" or req.include_archived]
    named = (field_named(t, tid, name) for name in req.fields)
    fids = list(dict.fromkeys(f for f in named if f is not None))
    for fid in fids:
        if t.get("Field", fid)["status"] == "hidden" and t.get("Topic", tid)["status"] == "active":
            restore_field(t, fid)
    return fids


def _value_entry(t: Transition, fid: str, req: Request) -> dict[str, Any] | None:
    if req.as_of is None:
        return t.current_entry(fid)
    return value_as_of(t.entries(fid), req.as_of, t.observations)


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
                      for o in t.observations(row["id"])],
        labels=list(row["labels"] or []), reason=row["reason"])


def field_view(t: Transition, fid: str, as_of: datetime | None = None, history: bool = False,
               full_history: bool = False) -> FieldView:
    row = t.get("Field", fid)
    entries = t.entries(fid)
    current = t.current_entry(fid) if as_of is None else value_as_of(entries, as_of, t.observations)
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
        history=[history_entry(t, e) for e in shown] if (history or full_history) else None,
        labels=list(row["labels"] or []),
        retracted=current["reason"] or "" if current is not None and is_retraction(current)
        else None)


def candidates(t: Transition, fid: str) -> list[Candidate]:
    """For a contested field: the latest claim of each source, each with its reliability."""
    latest: dict[str, dict[str, Any]] = {}
    for e in t.entries(fid):
        if is_candidate(e):
            best = latest.get(e["source"])
            if best is None or order_key(e) > order_key(best):
                latest[e["source"]] = e
    decay = t.settings["reliability_decay"]
    out = []
    for e in sorted(latest.values(), key=order_key, reverse=True):
        sequence = field_evidence(t, fid, assume_current=e)
        out.append(Candidate(value=json.loads(e["value"]), provenance=provenance(e),
                             valid_at=e["valid_at"],
                             reliability=evidence_states(sequence, decay).reliability))
    return out


def topic_view(t: Transition, tid: str, fids: list[str] | None = None, *, score: float | None = None,
               as_of: datetime | None = None, history: bool = False, full_history: bool = False,
               flags: bool = False) -> TopicView:
    row = t.topic(tid)
    assert row is not None
    fids = t.field_ids(tid) if fids is None else fids
    fields = {}
    for f in fids:
        field = t.field_row(f)
        assert field is not None
        fields[field["name"]] = field_view(t, f, as_of, history, full_history)
    return TopicView(
        id=tid, title=row["title"], aliases=list(row["aliases"] or []), summary=summary(t, tid),
        salience=t.salience_now(row), last_access=row["last_access"], status=row["status"],
        score=score, fields=fields, flags=open_flags(t, tid) if flags else [])


def summary(t: Transition, tid: str) -> str:
    """The topic's summary in the proposed state: the derived one, unless this transition
    changed what it summarises."""
    if tid in t.touched.content:
        return topic_summary(t, tid)
    return t.committed.summary(t.cache, t.services.summarizer, tid)


def open_flags(t: Transition, tid: str) -> list[FlagView]:
    def title(origin: str | None) -> str | None:
        row = None if origin is None else t.topic(origin)
        return None if row is None else row["title"]
    return [FlagView(id=g["id"], origin=g["origin_id"], policy=g["policy"],
                     evidence=json.loads(g["evidence"]), created_at=g["created_at"],
                     origin_title=title(g["origin_id"]))
            for g in t.open_flags(tid)]
