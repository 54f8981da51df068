"""The audit's row hasher (gem/rowhash.py) gives attest.row_hash's hashes, byte for byte, for
every row: rows of the value types the engine returns take its templates, anything else is
handed to row_hash itself."""
from __future__ import annotations

import math
from datetime import datetime, timedelta, timezone

from hypothesis import given, settings, strategies as st

from gem import attest
from gem.rowhash import RowHasher, hasher
from gem.store.schema import TABLES

HASHED = ("Topic", "Field", "Entry", "Observation", "Flag", "Episode", "Policy")

_zones = st.one_of(st.none(), st.just(timezone.utc),
                   st.integers(-14 * 60, 14 * 60).map(lambda m: timezone(timedelta(minutes=m))),
                   st.integers(-50_000, 50_000).map(lambda s: timezone(timedelta(seconds=s))))
_times = st.builds(lambda dt, tz, fold: dt.replace(tzinfo=tz, fold=fold),
                   st.datetimes(), _zones, st.integers(0, 1))
# What a column can hold as the engine returns it (its type, or null), and what only a caller
# handing in a row of its own could put there.
_engine_values = st.one_of(
    st.none(), st.text(), st.integers(-2**63, 2**63 - 1), st.booleans(),
    st.floats(allow_nan=True, allow_infinity=True), _times, st.lists(st.text(), max_size=3))
_other_values = st.one_of(
    st.integers(), st.tuples(st.text()), st.lists(st.integers(), max_size=2),
    st.dictionaries(st.text(max_size=3), st.integers(), max_size=2), st.sets(st.text(), max_size=2),
    st.lists(st.one_of(st.text(), st.none()), max_size=2), st.timedeltas(),
    st.text().map(lambda s: type("Text", (str,), {})(s)))


def _rows(values: st.SearchStrategy) -> st.SearchStrategy:
    return st.sampled_from(HASHED).flatmap(lambda table: st.tuples(st.just(table), st.fixed_dictionaries(
        {column: values for column in TABLES[table].columns})))


@settings(max_examples=600, deadline=None)
@given(_rows(_engine_values))
def test_a_row_of_engine_values_hashes_as_row_hash_does(case):
    table, row = case
    assert RowHasher(table)(row) == attest.row_hash(table, row)


@settings(max_examples=300, deadline=None)
@given(_rows(st.one_of(_engine_values, _other_values)))
def test_a_row_of_any_values_hashes_as_row_hash_does(case):
    table, row = case
    assert RowHasher(table)(row) == attest.row_hash(table, row)


@settings(max_examples=100, deadline=None)
@given(_rows(_engine_values), st.data())
def test_a_row_with_columns_missing_or_added_hashes_as_row_hash_does(case, data):
    table, row = case
    drop = data.draw(st.sets(st.sampled_from(sorted(row))))
    extra = data.draw(st.dictionaries(st.text(min_size=1), _engine_values, max_size=2))
    changed = {k: v for k, v in row.items() if k not in drop} | extra
    assert RowHasher(table)(changed) == attest.row_hash(table, changed)


def test_one_hasher_learns_many_shapes_of_one_table():
    """Plans are kept per combination of value types: later rows of another shape, then of
    the first again, still hash right."""
    h = hasher("Entry")
    base = {c: "x" for c in TABLES["Entry"].columns}
    shapes = [base, {**base, "seq": 3, "confidence": 0.5, "active": True}, {**base, "labels": []},
              {**base, "labels": ["a", "b"], "reason": ""}, {**base, "place_lat": 0.0, "ref": None},
              {**base, "confidence": math.nan, "valid_at": datetime(2026, 1, 1, tzinfo=timezone.utc)},
              {**base, "active": 1}, {**base, "seq": True}, base]
    for row in shapes * 2:
        assert h(row) == attest.row_hash("Entry", row)


def test_the_full_audit_hashes_stored_rows_through_templates(tmp_path):
    """The audit's rows are of the shapes the templates take (a schema change that sent every
    row to row_hash would keep the audit right and lose its speed unseen)."""
    import gem
    from conftest import ENGINE
    with gem.open(str(tmp_path / "db"), engine=ENGINE) as mem:
        mem.ingest([gem.Fact("Website Redesign", "deadline", "March 15"),
                    gem.Fact("Website Redesign", "owner", "Alice", labels=["pii"])])
        for table in ("Topic", "Field", "Entry"):
            hasher(table)._plans.clear()
        assert mem.audit(full=True).ok
        for table in ("Topic", "Field", "Entry"):
            assert any(plan is not None for plan in hasher(table)._plans.values()), table
