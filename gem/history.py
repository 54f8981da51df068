"""The field-history rules, in one place, on plain rows.

A field's history is a list of entry rows (gem/store/schema.py EntryRow). Updates append;
nothing is overwritten. The rules:

- The **current value** is the latest-stated, non-retracted, positive entry: entries are
  ordered by their latest statement (`asserted_at`, which re-statements move forward), then
  by recording time, then by sequence number.
- A **new value** dated at or after the current value's latest statement supersedes it.
- A **late-arriving fact** (dated before the current value's latest statement) is kept in the
  history, already superseded by the next newer entry.
- **Re-stating** the current value adds an observation to its entry instead of a new entry;
  so does replaying a historical fact with its original time.
- A **denial** (polarity "-") is evidence against a value: it is an observation of the entry
  it denies, or, for a value never stated, a retracted entry of its own. It never becomes
  current.
- A current value is **disputed** when a denial of it is as recent as its latest statement:
  its field is contested (it stays current: a denial is evidence, and R shows its weight); a
  newer statement of the value answers the denial and ends the dispute.
- The value **as of** a time is judged by everything known now: among values stated by then,
  the one whose latest statement up to that time is the latest.

Ingest, revision, the policy actions, the conditions C1/C2 and retrieval all call these
functions; none restates a rule.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Callable, Iterable, Literal, Sequence

Entry = dict[str, Any]
Observations = Callable[[str], Sequence[dict[str, Any]]]


# A retraction (mem.retract) is a statement that the field has no value from its time on: an
# entry holding JSON null, which no fact can hold (Fact refuses a null value).
NO_VALUE = "null"


def is_retraction(entry: Entry) -> bool:
    return bool(entry["value"] == NO_VALUE)


def order_key(entry: Entry) -> tuple[datetime, datetime, int]:
    """Precedence in a history: the latest statement wins, ties go to the latest recording."""
    return (entry["asserted_at"], entry["recorded_at"], entry["seq"])


def is_candidate(entry: Entry) -> bool:
    """Can this entry be a current value? (positive and not retracted)"""
    return entry["status"] != "retracted" and entry["polarity"] == "+"


def best(entries: Iterable[Entry]) -> Entry | None:
    """The entry that must be current, or None when no entry can be."""
    return max((e for e in entries if is_candidate(e)), key=order_key, default=None)


def current(entries: Iterable[Entry]) -> Entry | None:
    """The entry marked current (the last one, should a broken history have several)."""
    found = None
    for e in entries:
        if e["status"] == "current":
            found = e
    return found


@dataclass(frozen=True)
class Settlement:
    """What must change for a history to satisfy the rules: one entry to mark current, the
    entries that lose that status (each superseded by `best`)."""
    best: Entry | None
    promote: bool                  # best is not marked current yet
    demote: tuple[Entry, ...]      # entries marked current that are not best


def settle(entries: Sequence[Entry]) -> Settlement:
    top = best(entries)
    if top is None:
        return Settlement(None, False, ())
    demote = tuple(e for e in entries if e is not top and e["status"] == "current"
                   and is_candidate(e))
    return Settlement(top, top["status"] != "current", demote)


def disputed(entry: Entry, observations: Iterable[dict[str, Any]]) -> bool:
    """Is this value denied by a statement as recent as its own latest one? (A denial that a
    newer statement of the value answered is history, not a dispute.)"""
    return any(o["polarity"] == "-" and o["valid_at"] >= entry["asserted_at"]
               for o in observations)


def next_newer(entries: Iterable[Entry], valid_at: datetime, now: datetime) -> Entry | None:
    """The candidate that follows a statement made at `valid_at` and recorded `now`."""
    after = [e for e in entries if is_candidate(e) and order_key(e) > (valid_at, now, math.inf)]
    return min(after, key=order_key, default=None)


Outcome = Literal["created", "updated", "late", "corroborated", "denied", "denial observed"]


@dataclass(frozen=True)
class Placement:
    """Where one fact goes in a field's history.

    created / updated / late / denied: a new entry (its status follows from the outcome;
    `replaces` is the current entry an update supersedes, `successor` the entry a late fact
    is superseded by); corroborated / denial observed: an observation of `target`.
    """
    outcome: Outcome
    target: Entry | None = None      # the entry observed
    replaces: Entry | None = None    # the current entry an update supersedes
    successor: Entry | None = None   # the entry a late fact is superseded by

    @property
    def status(self) -> str:
        return {"created": "current", "updated": "current", "late": "superseded",
                "denied": "retracted"}[self.outcome]


def place(entries: Sequence[Entry], value: str, polarity: str, valid_at: datetime,
          now: datetime) -> Placement:
    """Decide where a fact (JSON `value`, stated at `valid_at`, recorded `now`) goes."""
    if polarity == "-":
        same = [e for e in entries if e["value"] == value]
        if same:
            return Placement("denial observed", target=same[-1])
        return Placement("denied")
    present = current(entries)
    if present is not None and present["value"] == value:
        return Placement("corroborated", target=present)
    for e in entries:
        if e["value"] == value and e["valid_at"] == valid_at and e["status"] != "retracted":
            return Placement("corroborated", target=e)  # a replayed historical fact
    if present is None:
        return Placement("created")
    if (valid_at, now) >= (present["asserted_at"], present["recorded_at"]):
        return Placement("updated", replaces=present)
    return Placement("late", successor=next_newer(entries, valid_at, now))


def as_of(entries: Iterable[Entry], when: datetime, observations: Observations) -> Entry | None:
    """The entry that was current at `when`, by everything known now: among values stated by
    then, the one whose latest statement up to `when` is the latest."""
    chosen, chosen_key = None, None
    for e in entries:
        if not is_candidate(e) or e["valid_at"] > when:
            continue
        stated = e["valid_at"]
        if e["asserted_at"] > stated:  # re-stated later: count the re-statements up to `when`
            stated = max([stated] + [o["valid_at"] for o in observations(e["id"])
                                     if o["polarity"] == "+" and o["valid_at"] <= when])
        key = (stated, e["recorded_at"], e["seq"])
        if chosen_key is None or key > chosen_key:
            chosen, chosen_key = e, key
    return chosen


def chronological(entries: Iterable[Entry]) -> list[Entry]:
    """A history as people read it: by valid time, then recording."""
    return sorted(entries, key=lambda e: (e["valid_at"], e["recorded_at"], e["seq"]))


def mislinked(entries: Sequence[Entry]) -> list[Entry]:
    """Superseded entries whose successor is missing or older than they are (after two
    histories were interleaved by a merge, for example), oldest first."""
    by_id = {e["id"]: e for e in entries}
    out = []
    for e in sorted((e for e in entries if e["status"] == "superseded"), key=order_key):
        by = by_id.get(e["superseded_by"] or "")
        if by is None or order_key(by) < order_key(e):
            out.append(e)
    return out


# The columns `violations` reads. A change to any other column of an entry (compression's
# `active`, annotations) leaves a history's verdict as it was, so C1/C2 need not judge it again
# (gem/state/transition.py `history_judged`); tests/test_history.py holds this to the code.
JUDGED = frozenset({"id", "status", "polarity", "asserted_at", "recorded_at", "seq",
                    "superseded_by"})


def violations(entries: Sequence[Entry]) -> list[str]:
    """What breaks the rules in one history (conditions C1 and C2), as messages."""
    out = []
    marked = [e for e in entries if e["status"] == "current"]
    top = best(entries)
    if top is None:
        if marked:
            out.append(f"C1:entry {marked[0]['id']} is current but the field has no positive, "
                       "unretracted entry")
    elif len(marked) != 1:
        out.append(f"C1:{len(marked)} current entries (expected exactly one)")
    elif marked[0]["id"] != top["id"]:
        out.append(f"C1:entry {marked[0]['id']} is current but {top['id']} has the latest valid time")
    by_id = {e["id"]: e for e in entries}
    for e in entries:
        if e["status"] == "current" and e["superseded_by"]:
            out.append(f"C2:{e['id']}:current entry is marked superseded by {e['superseded_by']}")
        if e["status"] == "superseded":
            by = by_id.get(e["superseded_by"] or "")
            if by is None:
                out.append(f"C2:{e['id']}:superseded entry does not link to the entry that "
                           "superseded it")
            elif order_key(by) < order_key(e):
                out.append(f"C2:{e['id']}:superseded by {by['id']}, which is older")
    return out
