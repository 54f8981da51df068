"""The full audit's sieve (gem/history_columns.py) names every history that the rules of C1,
C2 and C4 find something wrong with, and passes a well-formed one (so the rules themselves
run on few)."""
from __future__ import annotations

from datetime import datetime, timedelta

import pyarrow as pa
import pytest
from hypothesis import given, settings, strategies as st

from gem import history_columns
from gem.conditions import history_violations
from gem.store.queries import batches
from gem.store.queries.batches import HOLDER, batch_rows
from gem.store.schema import TABLES

T0 = datetime(2026, 1, 1)
COLS = TABLES["Entry"].columns


def _entry(field: str, i: int, **over) -> dict:
    row = {c: None for c in COLS}
    row.update(id=f"{field}#e{i}", seq=i, tx=i, field_id=field, origin_field=field,
               value='"v"', valid_at=T0 + timedelta(days=i), asserted_at=T0 + timedelta(days=i),
               recorded_at=T0 + timedelta(days=i), source="user", actor="agent", confidence=0.9,
               polarity="+", status="superseded", active=True, annotations="{}", labels=[])
    row.update(over)
    row[HOLDER] = field
    return row


def _well_formed(field: str, n: int) -> list[dict]:
    rows = [_entry(field, i, superseded_by=f"{field}#e{i + 1}", superseded_tx=i + 1)
            for i in range(n - 1)]
    return rows + [_entry(field, n - 1, status="current")]


def _batch(rows: list[dict]) -> pa.Table:
    schema = batches._schema("Entry", COLS, (HOLDER,))
    return pa.Table.from_pylist(rows, schema=schema).sort_by([(HOLDER, "ascending"),
                                                              ("seq", "ascending")])


def _verdicts(rows: list[dict]) -> tuple[dict[str, bool], dict[str, list]]:
    batch = _batch(rows)
    bounds = history_columns.groups(batch, HOLDER)
    named = history_columns.suspects(batch, bounds)
    holders = batch.column(HOLDER).to_pylist()
    sieve = {holders[int(bounds[g])]: bool(named[g]) for g in range(len(bounds) - 1)}
    found = {}
    for g in range(len(bounds) - 1):
        start, end = int(bounds[g]), int(bounds[g + 1])
        try:
            found[holders[start]] = history_violations(
                holders[start], batch_rows(batch.slice(start, end - start).drop_columns([HOLDER])))
        except TypeError:  # a missing time cannot be ordered: the rules fail, the sieve must name it
            found[holders[start]] = ["unorderable"]
    return sieve, found


def test_well_formed_histories_pass_the_sieve():
    rows = [r for f in range(5) for r in _well_formed(f"t{f}/f", 1 + f)]
    sieve, found = _verdicts(rows)
    assert found == {f"t{f}/f": [] for f in range(5)}
    assert sieve == {f"t{f}/f": False for f in range(5)}


_CHANGES = st.sampled_from([
    ("status", st.sampled_from(["current", "superseded", "retracted", "other", None])),
    ("polarity", st.sampled_from(["+", "-", "?", None])),
    ("superseded_by", st.sampled_from(["", None, "t0/f#e0", "t0/f#e1", "t0/f#e2", "t1/f#e0", "x"])),
    ("confidence", st.sampled_from([0.0, 1.0, 1.5, -0.1, float("nan"), None])),
    ("source", st.sampled_from(["", None, "s"])),
    ("actor", st.sampled_from(["", None, "a"])),
    ("asserted_at", st.sampled_from([T0, T0 + timedelta(days=9), T0 + timedelta(days=1), None])),
    ("recorded_at", st.sampled_from([T0, T0 + timedelta(days=9), None])),
    ("valid_at", st.sampled_from([T0, None])),
    ("seq", st.sampled_from([0, 1, 2, 7, None])),
    ("id", st.sampled_from(["t0/f#e0", "t0/f#e1", "t1/f#e0", "dup"])),
])


def _named_when_wrong(edits) -> list:
    fields = {f"t{f}/f": _well_formed(f"t{f}/f", 3) for f in range(2)}
    for f, i, (column, value) in edits:
        rows = fields[f"t{f}/f"]
        rows[i % len(rows)][column] = value
    rows = [r for rs in fields.values() for r in rs]
    sieve, found = _verdicts(rows)
    for field, violations in found.items():
        if violations:
            assert sieve[field], (field, violations)
    return [v for vs in found.values() for v in vs]


@settings(max_examples=400, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 1), st.integers(0, 3), _CHANGES.flatmap(
    lambda change: st.tuples(st.just(change[0]), change[1]))), max_size=4))
def test_every_history_the_rules_find_wrong_is_named(edits):
    _named_when_wrong(edits)


LATER = T0 + timedelta(days=9)


@pytest.mark.parametrize("edits", [
    [(0, 0, ("status", "other")), (0, 0, ("asserted_at", LATER))],      # a later candidate
    [(0, 0, ("status", "other")), (0, 0, ("recorded_at", LATER)),        # the same statement,
     (0, 0, ("asserted_at", T0 + timedelta(days=2)))],                   # recorded later
    [(0, 2, ("polarity", "-"))],                                         # the current one is no candidate
    [(0, 0, ("polarity", "-")), (0, 0, ("asserted_at", LATER))],         # succeeded by an older one
    [(0, 0, ("superseded_by", "t1/f#e1"))],                              # by one of another field
    [(0, 2, ("superseded_by", "t0/f#e0"))],                              # a current one superseded
    [(0, 2, ("status", "superseded")), (0, 2, ("superseded_by", "t0/f#e1"))],  # no current one
    [(0, 1, ("status", "current"))],                                     # two current ones
    [(0, 0, ("confidence", float("nan")))], [(0, 0, ("source", ""))], [(0, 0, ("valid_at", None))],
    [(0, 0, ("polarity", "?"))],
])
def test_each_rule_broken_alone_is_named(edits):
    assert _named_when_wrong(edits)
