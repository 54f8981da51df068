"""Retrieve: every read is a write (C6).

Selection reads the committed indexes (retrieval does not change content, so the
state before the transition ranks the same as the proposed one). Each unit returned is
recorded as accessed and announced (`retrieved` for a field, `episode_retrieved` for an
episode); the policies reinforce them, and C6 checks at commit that every accessed unit ended
strictly more salient than it began. The output is built after the policies ran, from the
proposed state, so it shows the salience the caller's read produced.

A free-text query ranks units, fields and episodes, not whole topics (issue 10): lexical
(BM25 over search terms) and vector candidates are fused by reciprocal rank, with the query's
lexical coverage and a small reciprocal-rank vote for salience; `k` counts units. A unit is eligible when its relevance
(the query's idf-weighted lexical coverage and the embedding cosine, each weighted 0.5) is at
least `relevance_floor`; a forgotten one only at `hidden_recall_floor` (a hidden field or
episode) or `recall_floor` (a field of an archived topic), and then it is revived: that is cued
recall. Topics joined to a
ranked topic by an association edge come after the ranked units, as one hop of context.
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Callable

import numpy as np

from ..model import Candidate, EpisodeView, FieldView, FlagView, HistoryEntry, Observation, \
    Provenance, RetrieveResult, TopicView
from ..history import as_of as value_as_of, is_candidate, is_retraction, order_key
from ..places import place_of
from ..reliability import evidence_states
from ..runtime import topic_summary
from ..state.transition import Transition
from ..state.whole import prefetch_stale
from ..timecue import without_cue
from ..units import EpisodeRef, FieldRef, TopicRef, unit_table
from .common import field_evidence, field_named, provenance_of, refers_to
from .forget import restore_episode, restore_field, restore_topic
from . import associate  # noqa: F401 - registers reinforce_associated
from . import near as near_op
from . import stale
from .resolution import Directory
from .spread import Hit, second_stage

# Reciprocal-rank fusion: a unit at rank r (from 0) of a ranking adds weight / (RRF_K + r + 1)
# (60: Cormack et al., 2009), plus COVERAGE_WEIGHT x its lexical coverage of the query (an
# absolute signal the ranks lack: a unit holding every query word beats one holding one rare
# word). Measured on the LoCoMo turns (evidence any@10, all five conversations; the weights in
# bench/locomo.py's notes): BM25 alone 0.672 with both embedders; hashing-256-v2 fused at weight
# 1 0.629, at 0.5 0.645, with coverage 0.666; all-MiniLM-L6-v2 at 1 0.708, at 0.5 with coverage
# 0.725. The hashing embedder mostly repeats what BM25 knows, a semantic one adds to it: 0.5 with
# coverage is the best choice for the second and costs the first little. Salience votes at a
# tenth of the lexical weight: it orders near-equals without outvoting the query.
RRF_K = 60
VECTOR_WEIGHT = 0.5
SALIENCE_WEIGHT = 0.1
COVERAGE_WEIGHT = 0.02
CONTEXT_FIELDS = 3  # fields shown of a topic returned as context


@dataclass(frozen=True)
class Request:
    query: str | None
    topic: str | None
    fields: tuple[str, ...] | None
    as_of: datetime | None
    history: bool
    include_archived: bool
    k: int
    all_fields: bool = False                            # fields="all": every visible field
    between: tuple[datetime, datetime] | None = None    # valid-time window of ranked units
    near: tuple[float, float, float] | None = None      # (lat, lon, km): gem/operators/near.py


def retrieve(t: Transition, req: Request) -> Callable[[Transition], RetrieveResult]:
    if (req.query or req.near) and req.topic is None:
        return _search(t, req)
    if req.topic is not None:
        tid = Directory.of(t).lookup(req.topic)
        ranked: list[tuple[str, float | None]] = [] if tid is None else [(tid, None)]
    else:
        statuses = ("active", "archived") if req.include_archived else ("active",)
        ranked = [(tid, None) for tid in t.committed.most_salient_topics(
            req.k, t.now, t.half_life, statuses)]
    ids = [tid for tid, _ in ranked]
    prefetch_stale(t, ids)
    t.prefetch("Topic", ids)
    t.prefetch_children("HAS_FIELD", ids)
    # The histories read: those shown, and all of a topic's whose summary is out of date (its
    # refresh reads every current value). A field asked for by name of a topic whose summary
    # is current needs its own history only: at 100k topics, reading all ten cost 1.6 ms more.
    t.prefetch_children("HAS_ENTRY", [f for tid in ids for f in _histories_read(t, tid, req)])

    selected: list[tuple[str, float | None, list[str]]] = []
    for tid, score in ranked:
        row = t.topic(tid)
        if row is None or (row["status"] == "archived" and not req.include_archived):
            continue
        fids = [fid for fid in _wanted_fields(t, tid, req) if _value_entry(t, fid, req) is not None]
        selected.append((tid, score, fids))
        _access_topic(t, tid, fids, req.query)

    def finish(t: Transition) -> RetrieveResult:
        views = [topic_view(t, tid, fids, score=score, as_of=req.as_of, history=req.history,
                            review=True)
                 for tid, score, fids in selected]
        return RetrieveResult(transition=t.seq, query=req.query, as_of=req.as_of, topics=views)

    return finish


def _access_topic(t: Transition, tid: str, fids: list[str], query: str | None) -> None:
    t.record_access("Topic", tid)
    for fid in fids:
        field = t.field_row(fid)
        assert field is not None
        t.record_access("Field", fid)
        t.emit("retrieved", topic=TopicRef(tid), field=FieldRef(fid, tid, field["name"]),
               query=query)
    if not fids:
        t.emit("retrieved", topic=TopicRef(tid), field=None, query=query)


def _search(t: Transition, req: Request) -> Callable[[Transition], RetrieveResult]:
    """Unit-level free-text retrieval: rank, group by topic, recall, add context, access."""
    t.committed.refresh_units(t.cache)
    window = window_units(t, req.between, req.near, req.as_of)
    if req.query:
        hits, truncated = rank_units(t, req.query, req.k, req.include_archived, window,
                                     t.settings["relevance_floor"], t.settings["recall_floor"],
                                     t.settings["hidden_recall_floor"], structure=True)
    else:
        assert req.near is not None
        found, truncated = near_op.nearest(t, req.near, req.between, req.k, req.include_archived,
                                           req.as_of)
        hits = [Hit(u, score, 0.0) for u, score in found]
    # what replaced a stale episode joins it only inside the request's window, and k holds
    hits = stale.order(t, hits, req.as_of, req.include_archived, window)
    truncated = truncated or len(hits) > req.k
    hits = hits[:req.k]
    fids = [h.unit for h in hits if unit_table(h.unit) == "Field"]
    eids = [h.unit for h in hits if unit_table(h.unit) == "Episode"]
    tids = list(dict.fromkeys(fid.split("/", 1)[0] for fid in fids))
    prefetch_stale(t, tids)
    t.prefetch("Topic", tids)
    # The hits' topics' fields are read whole (views and context need them), and that read
    # brings the hits' rows too: read first, it saves a lookup per hit (0.3 ms each on kuzu
    # at 100k topics).
    t.prefetch_children("HAS_FIELD", tids)
    t.prefetch("Field", fids)
    t.prefetch("Episode", eids)
    t.prefetch_children("HAS_ENTRY", fids)

    # Cued recall revives what it recalls: every read is a write.
    recalled_topics: dict[str, str] = {}
    for h in hits:
        if h.recalled is None:
            continue
        if unit_table(h.unit) == "Episode":
            restore_episode(t, h.unit)
            continue
        tid = h.unit.split("/", 1)[0]
        if t.get("Topic", tid)["status"] == "archived":
            recalled_topics[tid] = "archived"
            restore_topic(t, tid)
        restore_field(t, h.unit)

    by_unit = {h.unit: h for h in hits}
    groups: dict[str, list[str]] = {}
    for fid in fids:
        if _value_entry(t, fid, req) is not None:
            groups.setdefault(fid.split("/", 1)[0], []).append(fid)
    selected: list[tuple[str, float, list[str], str | None]] = []
    for tid, ranked in groups.items():
        shown = list(ranked)
        if req.all_fields or req.fields is not None:
            extra = [f for f in _wanted_fields(t, tid, req) if f not in shown
                     and _value_entry(t, f, req) is not None]
            shown += extra
        selected.append((tid, max(by_unit[f].score for f in ranked), shown, None))
    selected += _context(t, [tid for tid, *_ in selected], req)

    for tid, _, shown, _ in selected:
        _access_topic(t, tid, shown, req.query)
    episodes = []
    for eid in eids:
        row = t.row("Episode", eid)
        if row is None:
            continue
        t.record_access("Episode", eid)
        t.emit("episode_retrieved", episode=EpisodeRef(eid), query=req.query)
        episodes.append(eid)

    def finish(t: Transition) -> RetrieveResult:
        # the summaries of every returned topic in one embedder call, not one call per topic
        t.committed.refresh(t.cache, t.services.summarizer, [tid for tid, *_ in selected])
        views = []
        for tid, score, shown, context_of in selected:
            view = topic_view(t, tid, shown, score=score, as_of=req.as_of, history=req.history,
                              review=True, hits=by_unit)
            if context_of is not None or tid in recalled_topics:
                view = view.model_copy(update={"context_of": context_of,
                                               "recalled": recalled_topics.get(tid)})
            if context_of is not None:  # its fields came with it, none of them ranked
                view = view.model_copy(update={"fields": {
                    name: f.model_copy(update={"context": True}) for name, f in view.fields.items()}})
            views.append(view)
        result = RetrieveResult(
            transition=t.seq, query=req.query, as_of=req.as_of, topics=views,
            episodes=[episode_view(t, eid, by_unit[eid], req.as_of) for eid in episodes],
            truncated=truncated, between=req.between)
        if req.near is not None:
            result = near_op.with_distances(req.near, result)
        return result

    return finish


def window_units(t: Transition, between: tuple[datetime, datetime] | None,
                 near: tuple[float, float, float] | None,
                 as_of: datetime | None = None) -> set[str] | None:
    """The units inside the request's time window and radius (None: no window, every unit)."""
    allowed: set[str] | None = None
    if between is not None:
        lo, hi = (b.timestamp() for b in between)
        allowed = {u for u, v in t.committed.unit_valid.items() if lo <= v <= hi}
    if near is not None:
        placed = near_op.within(t, near, as_of)
        allowed = set(placed) if allowed is None else allowed & placed.keys()
    return allowed


def rank_units(t: Transition, query: str, k: int, include_archived: bool,
               allowed: set[str] | None, floor: float,
               recall_floor: float, hidden_floor: float | None = None,
               structure: bool = False) -> tuple[list[Hit], bool]:
    """The k best eligible units (fields and episodes), best first, and whether more were
    eligible than k. `allowed`: the request's window (`window_units`; None: every unit). A
    hidden unit needs `hidden_floor` (default: `recall_floor`), a field of an archived topic
    `recall_floor`. `structure`: re-rank by the second stage (gem/operators/spread.py)."""
    derived = t.committed
    pool = max(50, 10 * k)
    # a time cue's words name a time, not what the evidence says: the second stage weighs it
    words = without_cue(query, t.now) if structure else query
    lexical = derived.unit_lexical.search_covering(words, pool, max_df=0.5, ids=allowed)
    qvec = t.services.embedder.embed([query])[0]
    dense: list[tuple[str, float]] = []
    if np.any(qvec) and len(derived.unit_vectors) and (allowed is None or allowed):
        dense = derived.unit_vectors.search(qvec, pool, ids=allowed)
    lex_rank = {u: i for i, (u, _, _) in enumerate(lexical)}
    coverage = {u: c for u, _, c in lexical}
    dense_rank = {u: i for i, (u, _) in enumerate(dense)}
    cosine = dict(dense)

    eligible: list[tuple[str, float, str | None]] = []
    found = list(dict.fromkeys([u for u, _, _ in lexical] + [u for u, _ in dense]))
    states = dict(zip(found, derived.unit_states(found, t.now, t.half_life)))
    for unit, (status, topic_status, _) in states.items():
        if status is None:
            continue
        relevance = round(0.5 * coverage.get(unit, 0.0) + 0.5 * max(cosine.get(unit, 0.0), 0.0), 9)
        forgotten = "archived" if topic_status == "archived" else \
            status if status == "hidden" else None
        if forgotten is not None and not include_archived:
            needed = recall_floor if forgotten == "archived" or hidden_floor is None \
                else hidden_floor
            if relevance >= needed:
                eligible.append((unit, relevance, forgotten))
        elif relevance >= floor:  # a compressed episode its summary matched is revived
            eligible.append((unit, relevance, "compressed" if status == "compressed"
                             and topic_status is None else None))
    if not eligible:
        return [], False
    salience = {u: states[u][2] for u, _, _ in eligible}
    by_salience = sorted(salience, key=lambda u: (-salience[u], u))
    salience_rank = {u: i for i, u in enumerate(by_salience)}

    def fused(unit: str) -> float:
        score = 0.0
        if unit in lex_rank:
            score += 1.0 / (RRF_K + lex_rank[unit] + 1)
        if unit in dense_rank:
            score += VECTOR_WEIGHT / (RRF_K + dense_rank[unit] + 1)
        score += COVERAGE_WEIGHT * coverage.get(unit, 0.0)
        return score + SALIENCE_WEIGHT / (RRF_K + salience_rank[unit] + 1)

    scored = [Hit(u, round(fused(u), 9), rel, recalled) for u, rel, recalled in eligible]
    scored.sort(key=lambda h: (-h.score, -salience[h.unit], h.unit))
    if structure:
        # A unit reached through a turn the query matched is cued by it: a hidden one comes
        # back (and is revived) when the relevance passed on to it reaches the floor a hidden
        # unit needs, as if the query had matched it; archived topics stay for the query alone.
        hidden_needed = recall_floor if hidden_floor is None else hidden_floor

        def admit(unit: str, relevance: float) -> tuple[bool, str | None]:
            if allowed is not None and unit not in allowed:
                return False, None
            status, topic_status = derived.unit_status(unit)
            if topic_status not in (None, "active"):
                return False, None
            if status == "active":
                return True, None
            if status == "compressed" and topic_status is None:  # an episode, revived
                return True, "compressed"
            if status == "hidden" and not include_archived and relevance >= hidden_needed:
                return True, "hidden"
            return status == "hidden" and include_archived, None
        scored = second_stage(t, query, scored, k, admit)
    return scored[:k], len(scored) > k


def _context(t: Transition, ranked: list[str], req: Request
             ) -> list[tuple[str, float, list[str], str | None]]:
    """One hop of association: each topic joined to a ranked topic by an ASSOCIATES edge (and
    not ranked itself) comes after the ranked ones, with a few of its visible fields, most
    salient first. At most k context topics."""
    t.prefetch_edges(ranked)
    seen = set(ranked)
    out: list[tuple[str, float, list[str], str | None]] = []
    for tid in ranked:
        for other in t.associates(tid):
            if other in seen or len(out) >= req.k:
                continue
            seen.add(other)
            row = t.topic(other)
            if row is None or (row["status"] == "archived" and not req.include_archived):
                continue
            fids = [f for f in t.field_ids(other) if t.get("Field", f)["status"] != "hidden"
                    and _value_entry(t, f, req) is not None]
            fids.sort(key=lambda f: (-t.salience_now(t.get("Field", f)), f))
            if fids:
                title = t.get("Topic", tid)["title"]
                out.append((other, 0.0, fids[:CONTEXT_FIELDS], title))
    return out


def _histories_read(t: Transition, tid: str, req: Request) -> list[str]:
    if req.fields is None or t.committed.summary_stale(tid):
        return t.field_ids(tid)
    named = (field_named(t, tid, name) for name in req.fields)
    return [f for f in named if f is not None]


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
    ref = row["ref"]
    # an episode of this scope only: a ref naming another tenant's episode shows nothing of it
    cited = t.row("Episode", ref) if isinstance(ref, str) and unit_table(ref) == "Episode" \
        and ref[:len(ref) - len(ref.rsplit(":", 1)[-1])] == t.prefix else None
    return HistoryEntry(
        episode=None if cited is None else episode_view(t, ref),
        id=row["id"], value=json.loads(row["value"]), valid_at=row["valid_at"],
        asserted_at=row["asserted_at"],
        recorded_at=row["recorded_at"], provenance=provenance(row), status=row["status"],
        superseded_by=row["superseded_by"], active=bool(row["active"]),
        observations=[Observation(provenance=provenance(o), valid_at=o["valid_at"],
                                  recorded_at=o["recorded_at"])
                      for o in t.observations(row["id"])],
        labels=list(row["labels"] or []), reason=row["reason"], place=place_of(row))


def field_view(t: Transition, fid: str, as_of: datetime | None = None, history: bool = False,
               full_history: bool = False) -> FieldView:
    row = t.get("Field", fid)
    entries = t.entries(fid)
    current = t.current_entry(fid) if as_of is None else value_as_of(entries, as_of, t.observations)
    shown = entries if full_history else [e for e in entries if e["active"]]
    rivals = candidates(t, fid) if row["contested"] else None
    judged = rivals is not None and as_of is None and current is not None \
        and not is_retraction(current)
    return FieldView(
        name=row["name"],
        value=None if current is None else json.loads(current["value"]),
        valid_at=None if current is None else current["valid_at"],
        recorded_at=None if current is None else current["recorded_at"],
        provenance=None if current is None else provenance(current),
        salience=t.salience_now(row), last_access=row["last_access"], status=row["status"],
        contested=bool(row["contested"]),
        candidates=rivals,
        reliability=next((c.reliability for c in rivals or () if c.current), None) if judged else None,
        why_current=why_current(t, current, rivals or []) if judged and current else None,
        summary=row["summary"],
        history=[history_entry(t, e) for e in shown] if (history or full_history) else None,
        labels=list(row["labels"] or []),
        retracted=current["reason"] or "" if current is not None and is_retraction(current)
        else None,
        place=place_of(current))


def why_current(t: Transition, current: dict[str, Any], rivals: list[Candidate]) -> str:
    """Why a contested field's value is the current one, for its reader: the history's rule
    (the newest statement is current, gem/history.py) and what the evidence says of it, its
    reliability R against the other candidates' and the denials still standing."""
    mine = next((c for c in rivals if c.current), None)
    r = f"R {mine.reliability:+.2f}" if mine is not None else "R unknown"
    why = (f"current as the newest statement (valid {current['valid_at']:%Y-%m-%d %H:%M}, "
           f"from {current['source']})")
    others = [c for c in rivals if not c.current]
    best = max(others, key=lambda c: c.reliability, default=None)
    if best is not None and mine is not None and best.reliability > mine.reliability:
        why += (f", not as the most reliable: {json.dumps(best.value)} from "
                f"{best.provenance.source} has higher R ({best.reliability:+.2f} against "
                f"{mine.reliability:+.2f})")
    elif best is not None:
        why += (f", and the most reliable ({r} against {best.reliability:+.2f} for "
                f"{json.dumps(best.value)} from {best.provenance.source})")
    denials = [o for o in t.observations(current["id"])
               if o["polarity"] == "-" and o["valid_at"] >= current["asserted_at"]]
    if denials:
        sources = ", ".join(dict.fromkeys(o["source"] for o in denials))
        why += (f"; denied since by {sources}" + (f" ({r})" if best is None else "")
                + ": it stays current until a newer statement")
    elif best is None:
        why += f" ({r})"
    return why


def candidates(t: Transition, fid: str) -> list[Candidate]:
    """For a contested field: the latest claim of each source, each with its reliability
    (`current`: the one the history holds current)."""
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
                             valid_at=e["valid_at"], current=e["status"] == "current",
                             reliability=evidence_states(sequence, decay).reliability))
    return out


def topic_view(t: Transition, tid: str, fids: list[str] | None = None, *, score: float | None = None,
               as_of: datetime | None = None, history: bool = False, full_history: bool = False,
               flags: bool = False, review: bool = False,
               hits: dict[str, Any] | None = None) -> TopicView:
    """`review`: say what retrieval left out (open flags, hidden fields); `hits`: the ranked
    units (gem.operators.retrieve.Hit by unit), whose scores and recall the fields show."""
    row = t.topic(tid)
    assert row is not None
    fids = t.field_ids(tid) if fids is None else fids
    fields = {}
    for f in fids:
        field = t.field_row(f)
        assert field is not None
        view = field_view(t, f, as_of, history, full_history)
        hit = None if hits is None else hits.get(f)
        if hits is not None:
            view = view.model_copy(update={"score": None if hit is None else hit.score,
                                           "recalled": None if hit is None else hit.recalled})
        fields[field["name"]] = view
    hidden = [t.get("Field", f)["name"] for f in t.field_ids(tid)
              if t.get("Field", f)["status"] == "hidden" and f not in fids] if review else []
    return TopicView(
        id=tid, title=row["title"], aliases=list(row["aliases"] or []), summary=summary(t, tid),
        salience=t.salience_now(row), last_access=row["last_access"], status=row["status"],
        score=score, fields=fields, flags=open_flags(t, tid) if flags else [],
        needs_review=open_flags(t, tid) if review else [], hidden_fields=hidden)


def episode_view(t: Transition, eid: str, hit: Hit | None = None,
                 as_of: datetime | None = None) -> EpisodeView:
    row = t.get("Episode", eid)
    return EpisodeView(id=eid, text=row["text"], at=row["at"], speaker=row["speaker"],
                       source=row["source"], recorded_at=row["recorded_at"],
                       salience=t.salience_now(row), status=row["status"],
                       follows=row["follows"], refers_to=refers_to(t, row),
                       score=None if hit is None else hit.score,
                       recalled=None if hit is None else hit.recalled, place=place_of(row),
                       stale=stale.marks(t, row, as_of))


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
    return [FlagView(id=g["id"], origin=title(g["origin_id"]), origin_id=g["origin_id"],
                     policy=g["policy"], evidence=json.loads(g["evidence"]),
                     created_at=g["created_at"])
            for g in t.open_flags(tid)]
