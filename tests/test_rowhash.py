"""The audit's row hasher (gem/rowhash.py) gives attest.row_hash's hashes, byte for byte, for
every row: rows of the value types the engine returns take its templates, anything else is
handed to row_hash itself; and so does its column hasher, for the Arrow batches the full audit
reads."""
from __future__ import annotations

import math
from datetime import datetime, timedelta, timezone
from typing import get_origin, get_type_hints

import pyarrow as pa
from hypothesis import given, settings, strategies as st

from gem import attest
from gem.rowhash import RowHasher, hasher
from gem.rowhash_columns import hash_batch
from gem.store.queries import batches
from gem.store.queries.batches import batch_rows
from gem.store.schema import TABLES, _base_type

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


def _typed(annotation):
    """What the engine returns for a column of this declared type: the type, or null."""
    base = _base_type(annotation)
    if get_origin(base) is list:
        return st.one_of(st.none(), st.lists(st.one_of(st.text(), st.text(alphabet=" -~"),
                                                       st.none()), max_size=3))
    return st.one_of(st.none(), {
        str: st.one_of(st.text(), st.text(alphabet=st.characters(min_codepoint=32, max_codepoint=126))),
        int: st.integers(-2**63, 2**63 - 1), bool: st.booleans(),
        float: st.one_of(st.floats(allow_nan=True, allow_infinity=True), st.sampled_from([0.0, 1.0, 0.9])),
        datetime: st.datetimes()}[base])


def _batches(table):
    hints = get_type_hints(TABLES[table].row)
    return st.lists(st.fixed_dictionaries({c: _typed(hints[c]) for c in TABLES[table].columns}),
                    min_size=1, max_size=6)


@settings(max_examples=300, deadline=None)
@given(st.sampled_from(HASHED).flatmap(lambda table: st.tuples(st.just(table), _batches(table))))
def test_a_batch_hashed_a_column_at_a_time_hashes_as_row_hash_does(case):
    """Arrow batches as the full audit reads them (gem/store/queries/batches.py: times naive
    UTC), hashed a column at a time: each row's hash is row_hash's of the row as the row reads
    give it, or None (hashed one by one) only where a text holds what dumps escapes as \\u."""
    table, rows = case
    batch = pa.Table.from_pylist(rows, schema=batches._schema(table, TABLES[table].columns))
    digests = hash_batch(table, batch)
    assert digests is not None and len(digests) == len(rows)
    for digest, row, stored in zip(digests, batch_rows(batch), rows):
        plain = all(v is None or not isinstance(v, (str, list)) or
                    all(isinstance(t, str) and t.isascii() and t.isprintable()
                        for t in (v if isinstance(v, list) else [v])) for v in stored.values())
        assert digest == (attest.row_hash(table, row) if plain else digest)
        assert (digest is None) == (not plain)


def test_the_full_audit_hashes_stored_rows_a_column_at_a_time(tmp_path):
    """The audit's batches are of the columns and types the column hasher takes (a schema
    change that sent every row to be hashed one by one would keep the audit right and lose its
    speed unseen), and a row it leaves (a non-ASCII text) is hashed one by one, to the same
    hash: a tampered one is still found."""
    import gem
    from conftest import ENGINE
    with gem.open(str(tmp_path / "db"), engine=ENGINE) as mem:
        mem.ingest([gem.Fact("Website Redesign", "deadline", "March 15"),
                    gem.Fact("Website Redesign", "owner", "Alice", labels=["pii"]),
                    gem.Fact("Café \"Zoë\"", "note", "line one\nline two \\ é")])
        assert mem.audit(full=True).ok
        with mem._engine.store.reading() as tx:
            for table in ("Topic", "Field"):
                for batch in batches.row_batches(tx, table):
                    digests = hash_batch(table, batch)
                    assert digests is not None
                    for digest, row in zip(digests, batch_rows(batch)):
                        assert digest in (None, attest.row_hash(table, row))
                        assert (digest is None) == ("é" in row["id"] or "é" in repr(row))
            (batch,) = batches.history_batches(tx)
            entries = batch.drop_columns([batches.HOLDER])
            digests = hash_batch("Entry", entries)
            rows = batch_rows(entries)
            assert [d is None for d in digests] == ["é" in r["value"] for r in rows]
            assert [d for d in digests if d] == [attest.row_hash("Entry", r) for r in rows
                                                 if "é" not in r["value"]]
        with mem._engine.store.transaction() as tx:
            tx.run("MATCH (e:Entry) WHERE e.value CONTAINS 'line one' SET e.source = 'forged'")
        report = mem.audit(full=True)
        assert [(v.condition, v.detail.split(" transition")[0]) for v in report.violations] == \
            [("state", "differs from what")]
