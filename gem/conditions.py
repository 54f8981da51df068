"""The correctness conditions C1-C6 (the GEM paper, section 3.3).

Each condition is one small generator of violations over a set of units. At commit
they run on the units the transition touched (incremental, no scan of the store) and
the first violation rolls the transition back; `audit` runs all six over the whole
state and reports every violation it finds.
"""
from __future__ import annotations

from typing import Any, Iterable, Iterator

from .errors import TransitionRejected
from .operators.ingest import history_order
from .transition import Transition

Violation = tuple[str, str | None, str]


def c1_query_soundness(t: Transition, fids: Iterable[str]) -> Iterator[Violation]:
    """The current value is the latest stated, non-superseded, non-retracted entry."""
    for fid in fids:
        entries = t.entries(fid)
        current = [e for e in entries if e["status"] == "current"]
        candidates = [e for e in entries if e["status"] != "retracted" and e["polarity"] == "+"]
        if not candidates:
            if current:
                yield ("C1", fid, f"entry {current[0]['id']} is current but the field has no "
                                  "positive, unretracted entry")
            continue
        best = max(candidates, key=history_order)
        if len(current) != 1:
            yield ("C1", fid, f"{len(current)} current entries (expected exactly one)")
        elif current[0]["id"] != best["id"]:
            yield ("C1", fid, f"entry {current[0]['id']} is current but {best['id']} has the "
                              "latest valid time")


def c2_transition_soundness(t: Transition, fids: Iterable[str]) -> Iterator[Violation]:
    """Policy evaluation completed, and no superseded value is marked current."""
    if t.events:
        yield ("C2", None, f"{len(t.events)} events left unevaluated by the policies")
    for fid in fids:
        ids = {e["id"]: e for e in t.entries(fid)}
        for e in ids.values():
            if e["status"] == "current" and e["superseded_by"]:
                yield ("C2", e["id"], f"current entry is marked superseded by {e['superseded_by']}")
            if e["status"] == "superseded":
                by = ids.get(e["superseded_by"] or "")
                if by is None:
                    yield ("C2", e["id"], "superseded entry does not link to the entry that "
                                          "superseded it")
                elif history_order(by) < history_order(e):
                    yield ("C2", e["id"], f"superseded by {by['id']}, which is older")


def c3_dependency_consistency(t: Transition) -> Iterator[Violation]:
    """Every EXTENDS dependent of a changed topic is flagged or re-evaluated in this transition."""
    t.prefetch_dependents(list(t.touched.changed_topics))
    for tid in t.touched.changed_topics:
        for dependent in t.dependents(tid):
            if dependent not in t.touched.flagged and dependent not in t.touched.reevaluated:
                yield ("C3", dependent, f"depends on {tid} over an extension edge, which changed, "
                                        "but was neither flagged nor re-evaluated")


def c4_provenance(t: Transition, eids: Iterable[str],
                  observations: Iterable[dict[str, Any]]) -> Iterator[Violation]:
    """Every entry and observation keeps a complete provenance chain."""
    for eid in eids:
        e = t.entry(eid)
        if e is None:
            yield ("C4", eid, "entry vanished")
            continue
        yield from _provenance(e)
        if e["superseded_by"] and t.entry(e["superseded_by"]) is None:
            yield ("C4", eid, f"superseded_by {e['superseded_by']} does not exist")
        field = t.field_row(e["field_id"])
        if field is None or t.topic(field["topic_id"]) is None:
            yield ("C4", eid, "entry is not reachable from a topic")
    for obs in observations:
        yield from _provenance(obs)
        if t.entry(obs["entry_id"]) is None:
            yield ("C4", obs["id"], "observation of an entry that does not exist")


def _provenance(row: dict[str, Any]) -> Iterator[Violation]:
    if not row["source"] or not row["actor"]:
        yield ("C4", row["id"], "provenance lacks a source or an actor")
    if row["confidence"] is None or not 0.0 <= row["confidence"] <= 1.0:
        yield ("C4", row["id"], f"confidence {row['confidence']!r} is outside [0, 1]")
    if row["polarity"] not in ("+", "-"):
        yield ("C4", row["id"], f"polarity {row['polarity']!r} is not + or -")
    if row["valid_at"] is None or row["recorded_at"] is None:
        yield ("C4", row["id"], "valid or recorded time missing")


def c5_bounded_active_state(t: Transition) -> Iterator[Violation]:
    """The active footprint stays within the policy bound beta(n)."""
    bound = t.engine.active_bound(t)
    if bound is None:
        return
    active = active_field_count(t)
    if active > bound:
        yield ("C5", None, f"{active} active fields exceed the bound {bound:g} "
                           f"at n={t.counters.interactions}")


def active_field_count(t: Transition) -> int:
    return t.query("MATCH (x:Topic)-[:HAS_FIELD]->(f:Field) WHERE x.status = 'active' "
                   "AND f.status = 'active' RETURN count(*)")[0][0]


def c6_retrieval_adaptation(t: Transition) -> Iterator[Violation]:
    """Every unit a retrieval accessed ends strictly more salient than it began."""
    for (table, key), before in t.touched.accessed.items():
        row = t.row(table, key)
        after = t.strength_now(row) if row else before
        if not after > before:
            yield ("C6", key, f"{table.lower()} was retrieved but its salience did not rise "
                              "(no policy reinforced it)")


def check_transition(t: Transition) -> None:
    """Run C1-C6 on what this transition touched; the first violation rejects it."""
    fids = list(t.touched.fields)
    for violation in _all(t, fids, list(t.touched.entries), t.new_observations):
        raise TransitionRejected(*violation)


def _all(t: Transition, fids: list[str], eids: list[str],
         observations: list[dict[str, Any]]) -> Iterator[Violation]:
    yield from c1_query_soundness(t, fids)
    yield from c2_transition_soundness(t, fids)
    yield from c3_dependency_consistency(t)
    yield from c4_provenance(t, eids, observations)
    yield from c5_bounded_active_state(t)
    yield from c6_retrieval_adaptation(t)


def audit(t: Transition) -> tuple[dict[str, int], list[Violation]]:
    """All six conditions over the whole state, read through a transition that writes nothing."""
    fids = [r[0] for r in t.query("MATCH (f:Field) RETURN f.id ORDER BY f.id")]
    eids = [r[0] for r in t.query("MATCH (e:Entry) RETURN e.id ORDER BY e.seq")]
    t.prefetch("Topic", [r[0] for r in t.query("MATCH (x:Topic) RETURN x.id")])
    t.prefetch("Field", fids)
    t.prefetch_entries(fids)
    t.prefetch_observations(eids)
    observations = [o for e in eids for o in t.observations(e)]
    violations = list(c1_query_soundness(t, fids))
    violations += c2_transition_soundness(t, fids)
    violations += c3_history(t)
    violations += c4_provenance(t, eids, observations)
    violations += c5_bounded_active_state(t)
    violations += c6_history(t)
    checked = {"C1": len(fids), "C2": len(fids), "C3": _count(t, "MATCH ()-[e:EXTENDS]->() "),
               "C4": len(eids), "C5": 1, "C6": _count(t, "MATCH (x:Transition) WHERE x.op = "
                                                         "'retrieve' ")}
    return checked, violations


def _count(t: Transition, match: str) -> int:
    return t.query(match + "RETURN count(*)")[0][0]


def c3_history(t: Transition) -> Iterator[Violation]:
    """Over the whole trajectory: every update of a topic made in or after the transition
    that created an extension edge from it left a flag on the dependent, made by that same
    transition. An update is a supersession made by the transition that recorded the new
    entry, on the field it was recorded in (entries moved in by a merge were updates of
    another topic then); everything is ordered by transition number, not by time."""
    rows = t.query(
        "MATCH (a:Topic)-[x:EXTENDS]->(b:Topic), (a)-[:HAS_FIELD]->(f:Field)-[:HAS_ENTRY]->"
        "(old:Entry), (f)-[:HAS_ENTRY]->(new:Entry) WHERE old.superseded_by = new.id "
        "AND new.tx >= x.tx AND old.superseded_tx = new.tx AND old.tx < new.tx "
        "AND new.origin_field = f.id "
        "RETURN DISTINCT a.id, b.id, new.tx")
    # A topic is flagged at most once per transition, so one flag answers every update of
    # that transition, whichever topic it names as its origin.
    flags = {(r[0], r[1]) for r in t.query("MATCH (g:Flag)-[:FLAGS]->(b:Topic) RETURN b.id, g.tx")}
    for a, b, tx in rows:
        if (b, tx) not in flags:
            yield ("C3", b, f"update of {a} in transition {tx} did not flag this dependent")


def c6_history(t: Transition) -> Iterator[Violation]:
    """Salience is a lazily decayed strength; each retrieval's own commit check (C6) is the
    proof. Over the stored state we can still check that no unit's strength is negative."""
    for table in ("Topic", "Field"):
        for key, strength in t.query(f"MATCH (n:{table}) WHERE n.strength < 0 "
                                     "RETURN n.id, n.strength"):
            yield ("C6", key, f"negative strength {strength}")
