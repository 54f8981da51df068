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

from .. import history
from ..runtime import PolicyRuntime, action
from ..state.transition import Transition
from ..store.schema import EDGE_KINDS
from ..text import normalise
from ..units import EntryRef, TopicRef, field_id
from .common import add_edge, field_ref, settle_current
from .resolution import Directory


# ---------------------------------------------------------------------- detection (read-only)
def duplicate_pairs(t: Transition, threshold: float) -> list[tuple[str, str]]:
    """Pairs (keep, merge_away) of active topics that name the same thing: the same normalised
    title or alias, or titles whose embeddings are at least `threshold` alike. The older topic
    is kept; a topic merged away is not paired again. Title similarity is compared only for
    titles that changed since the last pass at the same threshold (pairs of unchanged titles
    were compared then), with the exact blocked search of the title index, never an N x N
    matrix."""
    tids = t.topic_ids_where(frozenset({"active"}))
    t.prefetch("Topic", tids)
    rows = [t.get("Topic", tid) for tid in tids]
    owner: dict[str, str] = {}
    pairs: list[tuple[str, str]] = []
    merged: set[str] = set()
    for row in rows:
        tid = row["id"]
        for name in (row["title"], *(row["aliases"] or [])):
            key = normalise(name)
            if key in owner and owner[key] != tid and tid not in merged:
                pairs.append((owner[key], tid))
                merged.add(tid)
            owner.setdefault(key, tid)
    derived = t.committed
    survivors = [r["id"] for r in rows if r["id"] not in merged]
    full = derived.paired_at != threshold
    changed = None if full else [x for x in survivors if x in derived.unpaired]
    if len(survivors) > 1 and (full or changed):
        order = {tid: i for i, tid in enumerate(survivors)}  # creation order: the older is kept
        similar = derived.title_vectors.pairs_above(threshold, ids=survivors, involving=changed)
        for a, b, _ in sorted(similar, key=lambda p: sorted((order[p[0]], order[p[1]]))):
            keep, away = sorted((a, b), key=order.__getitem__)
            if keep not in merged and away not in merged:
                pairs.append((keep, away))
                merged.add(away)
    return pairs


def open_flag_topics(t: Transition) -> list[str]:
    """Flagged topics, in the order of their oldest open flag."""
    tids = t.flagged_topics()
    return sorted(tids, key=lambda x: min(g["seq"] for g in t.open_flags(x)))


# ---------------------------------------------------------------------- repairs
def merge_topics(t: Transition, keep: str, away: str, reason: str = "duplicate") -> None:
    a, b = t.topic(keep), t.topic(away)
    if a is None or b is None or keep == away or b["status"] == "archived":
        return
    for fid in list(t.field_ids(away)):
        name = t.get("Field", fid)["name"]
        target = field_id(keep, name)
        if t.field_row(target) is None:
            t.new_field(keep, name)
            src = t.get("Field", fid)
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
    for table, start, end, _ in list(t.edges_of(away)):
        kind = EDGE_KINDS[table]
        if kind == "derived":
            continue
        new_start, new_end = (keep if start == away else start), (keep if end == away else end)
        t.remove_edge(table, start, end)
        if new_start != new_end:
            add_edge(t, new_start, new_end, kind, source=f"merge:{away}")
    for flag in list(t.flags(away)):
        t.move_child("FLAGS", flag["id"], away, keep)
        t.update("Flag", flag["id"], topic_id=keep)
    t.add_edge("DERIVED_FROM", keep, away, {"reason": reason, "created_at": t.now})
    t.update("Topic", away, status="archived")
    t.touch_topic(away)
    t.touch_topic(keep)
    t.touched.reevaluated.add(keep)
    t.content_changed(keep)
    t.detail.setdefault("merged", []).append([keep, away])
    t.emit("revised", topic=TopicRef(keep), field=None)
    t.emit("archived", topic=TopicRef(away))


def move_entries(t: Transition, src: str, dst: str) -> None:
    """Re-home every entry of field `src` under field `dst`, then settle which is current."""
    t.entries(dst)  # the target's history is loaded before any entry joins it
    for e in list(t.entries(src)):
        t.move_child("HAS_ENTRY", e["id"], src, dst)
        t.update("Entry", e["id"], field_id=dst)
        t.touched.entries[e["id"]] = None
    t.children["HAS_ENTRY"][dst].sort(key=lambda eid: t.entry(eid)["seq"])  # type: ignore[index]
    settle_current(t, dst)
    # An entry can only be superseded by one that is newer in valid time; after interleaving
    # two histories, re-link the ones whose successor moved out of order.
    successor = t.current_entry(dst)
    for e in history.mislinked(t.entries(dst)):
        if successor is not None:
            t.link_successor(e, successor)
    t.touch_field(dst, t.get("Field", dst)["topic_id"])  # type: ignore[index]


def promote_fields(t: Transition, tid: str, names: list[str], title: str) -> str | None:
    """Move `names` out of topic `tid` into a new topic `title` (EXTENDS + DERIVED_FROM)."""
    row = t.topic(tid)
    moving = [n for n in names if t.field_row(field_id(tid, n)) is not None]
    if row is None or not moving or not t.once("promote", tid, title):
        return None
    new = t.new_topic(title, aliases=[])
    Directory.of(t).add(new["id"], title)
    for name in moving:
        src = field_id(tid, name)
        target = t.new_field(new["id"], name)["id"]
        s = t.get("Field", src)
        t.update("Field", target, strength=s["strength"], last_access=s["last_access"])
        move_entries(t, src, target)
        t.update("Field", src, status="hidden", summary=f"promoted to {new['id']}")
        t.touch_field(src, tid)
    t.add_edge("DERIVED_FROM", new["id"], tid, {"reason": "promote", "created_at": t.now})
    add_edge(t, tid, new["id"], "extension", source="promote")
    t.content_changed(tid)
    t.content_changed(new["id"])
    t.emit("topic_created", topic=TopicRef(new["id"]))
    t.detail.setdefault("promoted", []).append([tid, new["id"], moving])
    return new["id"]


def settle_conflicts(t: Transition, fids: list[str]) -> None:
    """Put each conflict to the policies again, on today's evidence: a contested field is
    un-contested first and stays so only if a policy contests it again."""
    for fid in fids:
        t.update("Field", fid, contested=False)
        current = t.current_entry(fid)
        if current is None:
            continue
        f = field_ref(t, fid)
        others = [e for e in t.entries(fid) if e["id"] != current["id"]
                  and e["asserted_at"] == current["asserted_at"] and e["status"] != "retracted"
                  and e["value"] != current["value"]]
        for other in others:
            t.emit("conflict_detected", topic=TopicRef(f.topic_id), field=f,
                   entry=EntryRef(current["id"], fid), other=EntryRef(other["id"], fid))
        t.touch_field(fid, f.topic_id)


def evaluate_flags(t: Transition, tids: list[str], run_policies: Any) -> None:
    """Run the `revised` policies for each flagged topic, then clear its flags (C3)."""
    for tid in tids:
        t.touched.reevaluated.add(tid)
        t.touch_topic(tid)
        t.emit("revised", topic=TopicRef(tid), field=None)
    run_policies(t)
    for tid in tids:
        for flag in t.open_flags(tid):
            t.update("Flag", flag["id"], status="cleared", cleared_at=t.now)
    t.detail["flags_evaluated"] = tids


# ---------------------------------------------------------------------- policy actions
@action("merge")
def _merge(rt: PolicyRuntime, args: list[Any], evidence: dict[str, Any], policy: str) -> None:
    a, b = args
    if isinstance(a, TopicRef) and isinstance(b, TopicRef) and rt.t.once("merge", a.id, b.id):
        keep, away = sorted((a.id, b.id), key=lambda x: rt.t.get("Topic", x)["seq"] if rt.t.topic(x) else 0)
        merge_topics(rt.t, keep, away, reason=f"policy:{policy}")


@action("promote")
def _promote(rt: PolicyRuntime, args: list[Any], evidence: dict[str, Any], policy: str) -> None:
    topic, names, title = args
    if isinstance(topic, TopicRef):
        promote_fields(rt.t, topic.id, [str(n) for n in names], str(title))

