"""Revise: repair the state from internal evidence (the paper's rev(Delta)).

Repairs, each its own recorded transition:
  - duplicate topics (same normalised title or alias, or title embeddings at least
    `merge_similarity` apart) are merged losslessly: every entry of both survives,
    interleaved by valid time; aliases are unioned; edges are re-pointed without
    self-loops; the merged-away topic is archived with a DERIVED_FROM link to it;
  - conflicting values (different sources, same valid time) are put to the
    `conflict_detected` policies, which may settle or contest them;
  - dependency repair: every topic with open revision flags is put to the `revised`
    policies (which may propagate further along extension edges, or `clear_flags`), then to
    the caller's reviser, if any, with its flags and current values; the facts it returns
    are applied in the same transition. A flag is cleared only by what handled it (a
    policy's `clear_flags`, or the reviser), and the log says which; a flag nothing handled
    stays open, visible in `mem.pending_revisions()`.
Promotion (moving fields into a new topic) is the `promote` policy action.
"""
from __future__ import annotations

from typing import Any, Callable, Iterable

from .. import history
from ..model import Fact, PendingRevision, returned_facts
from ..runtime import PolicyRuntime, action
from ..state.transition import Transition
from ..store.schema import EDGE_KINDS
from ..text import name_key, tokens
from ..units import EntryRef, TopicRef, field_id
from .common import add_edge, entry_value, field_named, field_ref, settle_current
from .ingest import ingest
from .resolution import Directory
from .retrieve import open_flags

Reviser = Callable[[PendingRevision], "Iterable[Fact] | None"]


# ---------------------------------------------------------------------- detection (read-only)
def duplicate_pairs(t: Transition, threshold: float) -> list[tuple[str, str]]:
    """Pairs (keep, merge_away) of active topics that name the same thing: the same canonical
    key of a title or alias (gem.text.name_key), or titles whose embeddings are at least
    `threshold` alike and that are not made of the same words (such titles differ only in
    symbols, order or repetition: "C#" and "C++" are not duplicates). The older topic
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
            key = name_key(name)
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
        words = {r["id"]: set(tokens(r["title"])) for r in rows}
        similar = derived.title_vectors.pairs_above(threshold, ids=survivors, involving=changed)
        for a, b, _ in sorted(similar, key=lambda p: sorted((order[p[0]], order[p[1]]))):
            if words[a] == words[b]:
                continue
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
        target = field_named(t, keep, name) or field_id(keep, name)
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
    for fid in (src, dst):  # a field's labels are those of its history
        labels = list(dict.fromkeys(x for e in t.entries(fid) for x in e["labels"] or []))
        if labels != list(t.get("Field", fid)["labels"] or []):
            t.update("Field", fid, labels=labels)
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
    found = (field_named(t, tid, n) for n in names) if row is not None else iter(())
    moving = [t.get("Field", fid)["name"] for fid in dict.fromkeys(f for f in found if f)]
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
    un-contested first and stays so only if a policy contests it again (or a denial of its
    current value still stands, history.disputed)."""
    for fid in fids:
        current = t.current_entry(fid)
        # a denial still standing keeps the field contested, whatever the policies say
        standing = current is not None and history.disputed(current, t.observations(current["id"]))
        t.update("Field", fid, contested=standing)
        if current is None or history.is_retraction(current):
            continue
        f = field_ref(t, fid)
        others = [e for e in t.entries(fid) if e["id"] != current["id"]
                  and e["asserted_at"] == current["asserted_at"] and e["status"] != "retracted"
                  and e["value"] != current["value"]]
        for other in others:
            t.emit("conflict_detected", topic=TopicRef(f.topic_id), field=f,
                   entry=EntryRef(current["id"], fid), other=EntryRef(other["id"], fid))
        t.touch_field(fid, f.topic_id)


def pending_revision(t: Transition, tid: str) -> PendingRevision:
    """A flagged topic as a reviser sees it: its open flags, its current values and those of
    the topics whose change flagged it."""
    row = t.get("Topic", tid)
    flags = open_flags(t, tid)
    origins = {}
    for origin in dict.fromkeys(f.origin_id for f in flags if f.origin_id is not None):
        other = t.topic(origin)
        if other is not None:
            origins[other["title"]] = current_values(t, origin)
    return PendingRevision(topic_id=tid, title=row["title"], flags=flags,
                           values=current_values(t, tid), origins=origins)


def current_values(t: Transition, tid: str) -> dict[str, Any]:
    """The current value of each field of the topic that is not hidden and has one."""
    values = {}
    for fid in t.field_ids(tid):
        f = t.get("Field", fid)
        current = t.current_entry(fid)
        if f["status"] != "hidden" and current is not None and not history.is_retraction(current):
            values[f["name"]] = entry_value(current)
    return values


def clear_flags(t: Transition, tid: str, by: str, reason: str | None,
                only: Iterable[str] | None = None) -> list[str]:
    """Clear the topic's open flags (those of `only`, if given) as handled by `by`; the log's
    detail lists each with who cleared it and why."""
    keep = None if only is None else set(only)
    cleared = []
    for flag in t.open_flags(tid):
        if keep is None or flag["id"] in keep:
            t.update("Flag", flag["id"], status="cleared", cleared_at=t.now, cleared_by=by)
            cleared.append(flag["id"])
            t.detail.setdefault("flags_cleared", []).append(
                {"flag": flag["id"], "topic": tid, "by": by, "reason": reason})
    if cleared:
        t.touch_topic(tid)
    return cleared


def evaluate_flags(t: Transition, tids: list[str], run_policies: Any,
                   reviser: Reviser | None = None,
                   answers: dict[str, list[Fact] | None] | None = None) -> None:
    """Dependency repair. Each flagged topic is announced (`revised`) and the policies run;
    then the reviser is asked about each topic a policy did not clear, and the facts it
    answers are recorded here (numbered after each other, so a policy may drop one). A topic
    the reviser answered (even with no facts: "its values still hold") has the flags it had
    cleared; one it declined (None) keeps them. `answers` keeps the reviser's answers across
    a re-run of this transition, so it is asked once per topic."""
    answers = {} if answers is None else answers
    before = {tid: [g["id"] for g in t.open_flags(tid)] for tid in tids}
    for tid in tids:
        t.touched.reevaluated.add(tid)
        t.touch_topic(tid)
        t.emit("revised", topic=TopicRef(tid), field=None)
    run_policies(t)
    if reviser is not None:
        first = 0
        handled = []
        for tid in tids:
            still = {g["id"] for g in t.open_flags(tid)} & set(before[tid])
            if not still:
                continue  # a policy handled it
            if tid not in answers:
                answers[tid] = _ask(reviser, pending_revision(t, tid))
            facts = answers[tid]
            if facts is None:
                continue
            ingest(t, facts, first=first)
            first += len(facts)
            handled.append((tid, still, len(facts)))
            t.detail.setdefault("reviser", []).append({"topic": tid, "facts": len(facts)})
        run_policies(t)
        for tid, still, n in handled:
            clear_flags(t, tid, "reviser", f"the reviser answered with {n} fact(s)", only=still)
    t.detail["flags_evaluated"] = tids


def _ask(reviser: Reviser, revision: PendingRevision) -> list[Fact] | None:
    answer = reviser(revision)
    if answer is None:  # the reviser left this topic to someone else
        return None
    return returned_facts(answer, f"the reviser (for {revision.title!r})",
                          "None or a list of gem.Fact")


# ---------------------------------------------------------------------- policy actions
@action("merge")
def _merge(rt: PolicyRuntime, args: list[Any], evidence: dict[str, Any], policy: str) -> None:
    a, b = args
    if isinstance(a, TopicRef) and isinstance(b, TopicRef) and rt.t.once("merge", a.id, b.id):
        keep, away = sorted((a.id, b.id), key=lambda x: rt.t.get("Topic", x)["seq"] if rt.t.topic(x) else 0)
        merge_topics(rt.t, keep, away, reason=f"policy:{policy}")


@action("clear_flags")
def _clear_flags(rt: PolicyRuntime, args: list[Any], evidence: dict[str, Any],
                 policy: str) -> None:
    topic, reason = args
    if isinstance(topic, TopicRef) and rt.t.topic(topic.id) is not None:
        clear_flags(rt.t, topic.id, f"policy:{policy}", None if reason is None else str(reason))


@action("promote")
def _promote(rt: PolicyRuntime, args: list[Any], evidence: dict[str, Any], policy: str) -> None:
    topic, names, title = args
    if isinstance(topic, TopicRef):
        promote_fields(rt.t, topic.id, [str(n) for n in names], str(title))

