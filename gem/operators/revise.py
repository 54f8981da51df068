"""Revise: repair the state from internal evidence (the paper's rev(Delta)).

Repairs, each its own recorded transition:
  - duplicate topics (same normalised title or alias, or title embeddings at least
    `merge_similarity` apart) are merged losslessly: every entry of both survives,
    interleaved by valid time; aliases are unioned; edges are re-pointed without
    self-loops; the merged-away topic is archived with a DERIVED_FROM link to it;
  - conflicting values (different sources, same valid time) are put to the
    `conflict_detected` policies, which may settle or contest them;
  - dependency repair: every open revision flag is evaluated (`revised` policies run
    for its topic, which may propagate further along extension edges) and cleared only
    once evaluated (C3).
Promotion (moving fields into a new topic) is the `promote` policy action.
"""
from __future__ import annotations

from typing import Any

import numpy as np

from ..runtime import PolicyRuntime, action, add_edge, field_ref
from ..text import normalise
from ..transition import Transition
from ..units import EDGE_TABLES, EntryRef, TopicRef, field_id
from .ingest import history_order, settle_current


# ---------------------------------------------------------------------- detection (read-only)
def duplicate_pairs(t: Transition, threshold: float) -> list[tuple[str, str]]:
    """Pairs (keep, merge_away) of active topics that name the same thing; older one kept."""
    rows = t.query("MATCH (x:Topic) WHERE x.status = 'active' RETURN x.id, x.seq, x.title, "
                   "x.aliases ORDER BY x.seq")
    owner: dict[str, str] = {}
    pairs: list[tuple[str, str]] = []
    merged: set[str] = set()
    for tid, _, title, aliases in rows:
        for name in (title, *(aliases or [])):
            key = normalise(name)
            if key in owner and owner[key] != tid and tid not in merged:
                pairs.append((owner[key], tid))
                merged.add(tid)
            owner.setdefault(key, tid)
    survivors = [r for r in rows if r[0] not in merged]
    if len(survivors) > 1:
        vecs = t.engine.embedder.embed([r[2] for r in survivors])
        sims = vecs @ vecs.T
        for i in range(len(survivors)):
            if survivors[i][0] in merged:
                continue
            for j in np.nonzero(sims[i, i + 1:] >= threshold)[0]:
                other = survivors[i + 1 + int(j)][0]
                if other not in merged:
                    pairs.append((survivors[i][0], other))
                    merged.add(other)
    return pairs


def conflicting_fields(t: Transition) -> list[str]:
    """Fields whose current value is contradicted by another source at the same valid time."""
    rows = t.query(
        "MATCH (f:Field)-[:HAS_ENTRY]->(a:Entry), (f)-[:HAS_ENTRY]->(b:Entry) "
        "WHERE a.status = 'current' AND b.id <> a.id AND b.status <> 'retracted' "
        "AND b.asserted_at = a.asserted_at AND b.value <> a.value AND b.source <> a.source "
        "AND f.status <> 'hidden' RETURN DISTINCT f.id ORDER BY f.id")
    return [r[0] for r in rows]


def open_flag_topics(t: Transition) -> list[str]:
    return [r[0] for r in t.query(
        "MATCH (g:Flag)-[:FLAGS]->(x:Topic) WHERE g.status = 'open' "
        "RETURN x.id, min(g.seq) AS first ORDER BY first")]


# ---------------------------------------------------------------------- repairs
def merge_topics(t: Transition, keep: str, away: str, reason: str = "duplicate") -> None:
    a, b = t.topic(keep), t.topic(away)
    if a is None or b is None or keep == away or b["status"] == "archived":
        return
    for fid in list(t.field_ids(away)):
        name = t.field_row(fid)["name"]
        target = field_id(keep, name)
        if t.field_row(target) is None:
            t.new_field(keep, name)
            src = t.field_row(fid)
            t.update("Field", target, strength=src["strength"], last_access=src["last_access"],
                     status="active" if src["status"] == "hidden" else src["status"],
                     summary=src["summary"], contested=src["contested"])
        move_entries(t, fid, target)
        t.update("Field", fid, status="hidden", summary=f"merged into {keep}")
        t.touch_field(fid, away)
    aliases = list(dict.fromkeys([*(a["aliases"] or []), b["title"], *(b["aliases"] or [])]))
    aliases = [x for x in aliases if x != a["title"]]
    t.update("Topic", keep, aliases=aliases, strength=max(t.strength_now(a), t.strength_now(b)),
             last_access=t.now)
    for kind, table in EDGE_TABLES.items():
        if kind == "derived":
            continue
        for src, dst in t.query(f"MATCH (x:Topic)-[r:{table}]->(y:Topic) WHERE x.id = $b OR "
                                f"y.id = $b RETURN x.id, y.id", {"b": away}):
            new_src, new_dst = (keep if src == away else src), (keep if dst == away else dst)
            t.query(f"MATCH (x:Topic {{id: $s}})-[r:{table}]->(y:Topic {{id: $d}}) DELETE r",
                    {"s": src, "d": dst})
            t.edges_changed()
            if new_src != new_dst:
                add_edge(t, new_src, new_dst, kind, source=f"merge:{away}")
    t.query("MATCH (g:Flag)-[r:FLAGS]->(:Topic {id: $b}) WITH g, r DELETE r",
            {"b": away})
    for (gid,) in t.query("MATCH (g:Flag) WHERE g.topic_id = $b RETURN g.id", {"b": away}):
        t.update("Flag", gid, topic_id=keep)
        t.relate("FLAGS", ("Flag", gid), ("Topic", keep))
    t.relate("DERIVED_FROM", ("Topic", keep), ("Topic", away), reason=reason, created_at=t.now)
    t.update("Topic", away, status="archived")
    t.touch_topic(away)
    t.touch_topic(keep)
    t.touched.reevaluated.add(keep)
    t.mark_summary_dirty(keep)
    t.detail.setdefault("merged", []).append([keep, away])
    t.emit("revised", topic=TopicRef(keep), field=None)
    t.emit("archived", topic=TopicRef(away))


def move_entries(t: Transition, src: str, dst: str) -> None:
    """Re-home every entry of field `src` under field `dst`, then settle which is current."""
    moving = list(t.entries(src))
    target = t.entries(dst)  # loaded before any entry is re-linked, so none is listed twice
    for e in moving:
        t.query("MATCH (:Field {id: $f})-[r:HAS_ENTRY]->(:Entry {id: $e}) DELETE r",
                {"f": src, "e": e["id"]})
        t.update("Entry", e["id"], field_id=dst)
        t.relate("HAS_ENTRY", ("Field", dst), ("Entry", e["id"]))
        t.touched.entries[e["id"]] = None
    t.entries(src).clear()
    target.extend(moving)
    target.sort(key=lambda e: e["seq"])
    settle_current(t, dst)
    # An entry can only be superseded by one that is newer in valid time; after
    # interleaving two histories, re-link the ones whose successor moved out of order.
    order = sorted((e for e in t.entries(dst) if e["status"] == "superseded"), key=history_order)
    by_id = {e["id"]: e for e in t.entries(dst)}
    for e in order:
        by = by_id.get(e["superseded_by"] or "")
        if by is None or history_order(by) < history_order(e):
            t.link_successor(e, t.current_entry(dst))
    t.touch_field(dst, t.field_row(dst)["topic_id"])


def promote_fields(t: Transition, tid: str, names: list[str], title: str) -> str | None:
    """Move `names` out of topic `tid` into a new topic `title` (EXTENDS + DERIVED_FROM)."""
    row = t.topic(tid)
    moving = [n for n in names if t.field_row(field_id(tid, n)) is not None]
    if row is None or not moving or not t.once("promote", tid, title):
        return None
    new = t.new_topic(title, aliases=[])
    t.engine.directory(t).add(new["id"], title)
    for name in moving:
        src = field_id(tid, name)
        target = t.new_field(new["id"], name)["id"]
        s = t.field_row(src)
        t.update("Field", target, strength=s["strength"], last_access=s["last_access"])
        move_entries(t, src, target)
        t.update("Field", src, status="hidden", summary=f"promoted to {new['id']}")
        t.touch_field(src, tid)
    t.relate("DERIVED_FROM", ("Topic", new["id"]), ("Topic", tid), reason="promote",
             created_at=t.now)
    add_edge(t, tid, new["id"], "extension", source="promote")
    t.mark_summary_dirty(tid)
    t.mark_summary_dirty(new["id"])
    t.emit("topic_created", topic=TopicRef(new["id"]))
    t.detail.setdefault("promoted", []).append([tid, new["id"], moving])
    return new["id"]


def settle_conflicts(t: Transition, fids: list[str]) -> None:
    """Put each conflict to the policies again, on today's evidence: a contested field is
    un-contested first and stays so only if a policy contests it again."""
    for fid in fids:
        t.update("Field", fid, contested=False)
        current = t.current_entry(fid)
        f = field_ref(t, fid)
        others = [e for e in t.entries(fid) if e["id"] != current["id"]
                  and e["asserted_at"] == current["asserted_at"] and e["status"] != "retracted"
                  and e["value"] != current["value"]]
        for other in others:
            t.emit("conflict_detected", topic=TopicRef(f.topic_id), field=f,
                   entry=EntryRef(current["id"], fid), other=EntryRef(other["id"], fid))
        t.touch_field(fid, f.topic_id)


def evaluate_flags(t: Transition, tids: list[str]) -> None:
    """Run the `revised` policies for each flagged topic, then clear its flags (C3)."""
    for tid in tids:
        t.touched.reevaluated.add(tid)
        t.touch_topic(tid)
        t.emit("revised", topic=TopicRef(tid), field=None)
    t.run_policies()
    for (gid,) in t.query("MATCH (g:Flag) WHERE g.status = 'open' AND g.topic_id IN $ids "
                          "RETURN g.id", {"ids": tids}):
        t.update("Flag", gid, status="cleared", cleared_at=t.now)
    t.detail["flags_evaluated"] = tids


# ---------------------------------------------------------------------- policy actions
@action("merge")
def _merge(rt: PolicyRuntime, args: list[Any], evidence: dict[str, Any], policy: str) -> None:
    a, b = args
    if isinstance(a, TopicRef) and isinstance(b, TopicRef) and rt.t.once("merge", a.id, b.id):
        keep, away = sorted((a.id, b.id), key=lambda x: rt.t.topic(x)["seq"] if rt.t.topic(x) else 0)
        merge_topics(rt.t, keep, away, reason=f"policy:{policy}")


@action("promote")
def _promote(rt: PolicyRuntime, args: list[Any], evidence: dict[str, Any], policy: str) -> None:
    topic, names, title = args
    if isinstance(topic, TopicRef):
        promote_fields(rt.t, topic.id, [str(n) for n in names], str(title))

