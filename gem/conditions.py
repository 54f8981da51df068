"""The correctness conditions C1-C6 (the GEM paper, section 3.3).

Each condition is one small generator of violations. At commit they run on the proposed
state, on the units the transition touched (no scan of the store), and the first violation
rejects the transition; `audit` runs all six over the stored state and reports every
violation it finds. The history rules they check are gem/history.py's.
"""
from __future__ import annotations

from typing import Any, Callable, Iterable, Iterator, Sequence

from . import history
from .errors import TransitionRejected
from .state.transition import Transition
from .store.schema import Row

Violation = tuple[str, str | None, str]


def c1_c2_histories(histories: Iterable[tuple[str, Sequence[Row]]]) -> Iterator[Violation]:
    """C1: the current value is the latest stated, non-retracted entry. C2 (its history part):
    no superseded value is current, and every superseded entry links to a newer successor."""
    for fid, entries in histories:
        for message in history.violations(entries):
            condition, rest = message.split(":", 1)
            if condition == "C1":
                yield ("C1", fid, rest)
            else:
                unit, detail = rest.split(":", 1)
                yield ("C2", unit, detail)


def c2_policies_completed(t: Transition) -> Iterator[Violation]:
    """C2 (its transition part): policy evaluation completed."""
    if t.events:
        yield ("C2", None, f"{len(t.events)} events left unevaluated by the policies")


def c3_dependency_consistency(t: Transition) -> Iterator[Violation]:
    """Every EXTENDS dependent of a changed topic is flagged or re-evaluated in this transition."""
    t.prefetch_edges(t.touched.changed_topics)
    for tid in t.touched.changed_topics:
        for dependent in t.dependents(tid):
            if dependent not in t.touched.flagged and dependent not in t.touched.reevaluated:
                yield ("C3", dependent, f"depends on {tid} over an extension edge, which changed, "
                                        "but was neither flagged nor re-evaluated")


# The entry columns C4 reads (c4_provenance, and `field_id` for reachability). An operator that
# changes an entry in one of them, or creates one, marks it in `Touched.entries`; one that
# changes only others (compression and restoration: `active`) leaves its committed verdict.
C4_ENTRY_COLUMNS = frozenset({"id", "source", "actor", "confidence", "polarity", "valid_at",
                              "recorded_at", "superseded_by", "field_id"})


def c4_provenance(entries: Iterable[Row], observations: Iterable[Row],
                  entry: Callable[[str], Row | None],
                  reachable: Callable[[Row], bool]) -> Iterator[Violation]:
    """Every entry and observation keeps a complete provenance chain."""
    for e in entries:
        yield from _provenance(e)
        if e["superseded_by"] and entry(e["superseded_by"]) is None:
            yield ("C4", e["id"], f"superseded_by {e['superseded_by']} does not exist")
        if not reachable(e):
            yield ("C4", e["id"], "entry is not reachable from a topic")
    for obs in observations:
        yield from _provenance(obs)
        if entry(obs["entry_id"]) is None:
            yield ("C4", obs["id"], "observation of an entry that does not exist")


def history_violations(fid: str, history: list[Row]) -> list[Violation]:
    """C1, C2 and C4 of one field's whole history, as the audit checks it: an entry's
    `superseded_by` must name an entry of the same history."""
    ids = {e["id"] for e in history}
    return [*c1_c2_histories([(fid, history)]),
            *c4_provenance(history, (), lambda eid: {"id": eid} if eid in ids else None,
                           lambda e: True)]


def c4_episodes(episodes: Iterable[Row]) -> Iterator[Violation]:
    """Every episode keeps its text, its provenance (source, actor) and its times."""
    for row in episodes:
        if not row["text"] or not row["source"] or not row["actor"]:
            yield ("C4", row["id"], "episode lacks its text, a source or an actor")
        if row["at"] is None or row["recorded_at"] is None:
            yield ("C4", row["id"], "episode time or recorded time missing")


def _provenance(row: Row) -> Iterator[Violation]:
    if not row["source"] or not row["actor"]:
        yield ("C4", row["id"], "provenance lacks a source or an actor")
    if row["confidence"] is None or not 0.0 <= row["confidence"] <= 1.0:
        yield ("C4", row["id"], f"confidence {row['confidence']!r} is outside [0, 1]")
    if row["polarity"] not in ("+", "-"):
        yield ("C4", row["id"], f"polarity {row['polarity']!r} is not + or -")
    if row["valid_at"] is None or row["recorded_at"] is None:
        yield ("C4", row["id"], "valid or recorded time missing")


def c5_bounded_active_state(active: int, bound: float | None, interactions: int) -> Iterator[Violation]:
    """The active footprint stays within the policy bound beta(n)."""
    if bound is not None and active > bound:
        yield ("C5", None, f"{active} active fields exceed the bound {bound:g} at n={interactions}")


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
    for violation in transition_violations(t):
        raise TransitionRejected(*violation)


def transition_violations(t: Transition) -> Iterator[Violation]:
    # C1 and C2 judge a history by its entries' judged columns alone: a touched field whose
    # entries this transition neither read nor changed in those (a forgetting pass hides or
    # compresses 100k fields and only moves older entries out of the active history) keeps
    # the verdict it had when they were committed.
    fids = t.histories_judged(t.touched.fields)
    t.prefetch_children("HAS_ENTRY", fids)
    yield from c1_c2_histories((fid, t.entries(fid)) for fid in fids)
    yield from c2_policies_completed(t)
    yield from c3_dependency_consistency(t)

    def reachable(e: Row) -> bool:
        field = t.field_row(e["field_id"])
        return field is not None and t.topic(field["topic_id"]) is not None

    entries = [e for e in (t.entry(eid) for eid in t.touched.entries) if e is not None]
    # Their fields, topics and successors in one statement each, not a lookup per entry: a batch
    # or a merge touches thousands of entries whose rows its other stages need not read.
    t.prefetch("Field", {e["field_id"] for e in entries})
    t.prefetch("Entry", {e["superseded_by"] for e in entries if e["superseded_by"]})
    t.prefetch("Topic", {f["topic_id"] for f in (t.field_row(e["field_id"]) for e in entries)
                         if f is not None})
    missing = [("C4", eid, "entry vanished") for eid in t.touched.entries if t.entry(eid) is None]
    yield from missing  # type: ignore[misc]
    yield from c4_provenance(entries, t.touched.observations, t.entry, reachable)
    # An episode moved by its status alone changed no column C4 reads (its row is not read).
    yield from c4_episodes(r for r in (t.row("Episode", k) for k in t.touched.episodes
                                       if k not in t.moved["Episode"]) if r)
    if t.settings.get("active_bound") is not None:
        yield from c5_bounded_active_state(t.active_field_count(), t.settings["active_bound"],
                                           t.counters.interactions)
    yield from c6_retrieval_adaptation(t)


def c3_trajectory(updates: Iterable[tuple[str, str, int]],
                  flags: set[tuple[str, int]]) -> Iterator[Violation]:
    """Over the whole trajectory: every update of a topic made in or after the transition that
    created an extension edge from it left a flag on the dependent, made by that same
    transition (a topic is flagged at most once per transition, so one flag answers every
    update of that transition, whichever topic it names as its origin)."""
    for a, b, tx in updates:
        if (b, tx) not in flags:
            yield ("C3", b, f"update of {a} in transition {tx} did not flag this dependent")


def c6_strengths(rows: Iterable[tuple[str, Any]]) -> Iterator[Violation]:
    """Salience is a lazily decayed strength; each retrieval's own commit check (C6) is the
    proof. Over the stored state we can still check that no unit's strength is negative."""
    for key, strength in rows:
        if strength is not None and strength < 0:
            yield ("C6", key, f"negative strength {strength}")
