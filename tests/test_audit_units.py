"""The full audit keeps what the log says of each unit as columns (gem/audit_units.py); the
incremental audit keeps the same as dicts (audit.UnitLog). Both must say the same of every unit,
whatever the records: writes, deletions, ladder moves before and after them, salience before
and after the position the stored columns were brought to, and salience values of any shape."""
from __future__ import annotations

import os
import shutil

import pyarrow as pa
from hypothesis import given, settings, strategies as st

import gem
from conftest import ENGINE
from gem import audit_units
from gem.audit import UnitLog
from gem.audit_units import LogUnits, UnitAttester
from gem.store import open_store

UNITS = ["t0", "t1", "t2", "t10", "t11", "t100"]
LEVELS = ["compressed", "hidden", "archived"]
DIGESTS = ["a" * 32, "b" * 32, "0123456789abcdef" * 2, "ABC", None]
SALIENCE = st.one_of(
    st.tuples(st.floats(allow_nan=False, width=32), st.sampled_from(["2026-01-01T00:00:00+00:00",
                                                                      "2026-01-02T00:00:00+00:00"])).map(list),
    st.sampled_from([[None, None], [1, "x"], [0.5], "odd", [True, "2026-01-01T00:00:00+00:00"]]))
RECORD = st.tuples(st.dictionaries(st.sampled_from(UNITS), st.sampled_from(DIGESTS), max_size=4),
                   st.lists(st.tuples(st.sampled_from(UNITS), st.sampled_from(LEVELS)), max_size=4),
                   st.dictionaries(st.sampled_from(UNITS), SALIENCE, max_size=4))


@settings(max_examples=300, deadline=None)
@given(st.lists(RECORD, max_size=8), st.integers(0, 9), st.booleans())
def test_the_columns_say_what_the_dicts_say_of_every_unit(records, salience_seq, collide):
    """(`collide`: units are found by their str hash, and a few share one.)"""
    if collide:
        audit_units._hash = lambda key: len(key) // 2
    try:
        _agree(records, salience_seq)
    finally:
        audit_units._hash = hash


def _agree(records, salience_seq):
    dicts, columns = UnitLog(salience_seq), LogUnits(salience_seq)
    for seq, (writes, moves, salience) in enumerate(records, start=1):
        dicts.take(seq, writes, moves, salience)
        columns.take(seq, writes, moves, salience)
    columns.finish()
    assert columns.codes(["t9", "t999"]).tolist() == [columns.unnamed] * 2  # named by no record
    # a batch's id column handed in as Arrow finds the same rows
    asked = [*UNITS, "t9"]
    assert columns.codes(asked, pa.chunked_array([pa.array(asked)])).tolist() == \
        columns.codes(asked).tolist()
    for unit, row in zip(UNITS, columns.codes(UNITS).tolist()):
        written = dicts.latest.get(unit)
        assert (None if columns.write_seq[row] < 0 else
                (int(columns.write_seq[row]), columns.digest[row].as_py())) == written
        moved = dicts.ladder.get(unit)
        assert (None if columns.move_seq[row] < 0 else
                (int(columns.move_seq[row]), columns.levels[columns.move_first[row]],
                 columns.levels[columns.move_level[row]])) == moved
        salient = dicts.salience.get(unit)
        value = columns.sal_odd.get(row, [columns.sal_strength[row].as_py(), columns.sal_at[row].as_py()])
        assert (None if columns.sal_seq[row] < 0 else (int(columns.sal_seq[row]), value)) == salient
    # what no row holds is missing, by the same rule as the dicts'
    attester = UnitAttester(columns)
    missing = [(u, f"missing: transition {dicts.latest[u][0]} wrote it") for u in sorted(dicts.latest)
               if dicts.latest[u][1] is not None]
    missing += [(u, f"missing: transition {dicts.ladder[u][0]} moved it") for u in sorted(dicts.ladder)
                if u not in dicts.latest]
    assert [(unit, text) for _, unit, text in attester.missing()] == missing


def _copy(path: str, dest: str) -> str:
    folder, name = os.path.split(path)
    for entry in os.listdir(folder):
        if entry.startswith(name):
            src = os.path.join(folder, entry)
            (shutil.copytree if os.path.isdir(src) else shutil.copy2)(src, os.path.join(dest, entry))
    return os.path.join(dest, name)


def test_the_full_audit_finds_a_tampered_record_a_moved_row_and_a_salience_column(tmp_path):
    """A forgetting pass leaves rows attested by their ladder moves and salience by the log;
    edits of a record's part, of a moved row and of a stored strength are each named."""
    from conftest import Clock
    clock = Clock()
    path = str(tmp_path / "db")
    with gem.open(path, clock=clock, engine=ENGINE) as mem:
        mem.ingest([gem.Fact(f"Topic {i}", f"field {j}", f"value {i}.{j}")
                    for i in range(20) for j in range(3)])
        mem.retrieve(topic="Topic 3")
        clock.advance(days=45)
        mem.forget()
        head = mem.head()
        assert mem.audit(full=True, expected_head=head).ok
    os.makedirs(tmp_path / "copy")
    copy = _copy(path, str(tmp_path / "copy"))
    store = open_store(copy, ENGINE)
    with store.transaction() as tx:
        moved = [r[0] for r in tx.run("MATCH (f:Field) WHERE f.status <> 'active' RETURN f.id ORDER BY f.id")]
        record = int(tx.scalar("MATCH (x:Transition) WHERE x.op = 'retrieve' RETURN min(x.seq)"))
        assert len(moved) >= 2
        tx.run(f"MATCH (f:Field {{id: '{moved[0]}'}}) SET f.status = 'active'")
        tx.run(f"MATCH (f:Field {{id: '{moved[1]}'}}) SET f.name = 'forged'")
        tx.run("MATCH (t:Topic {id: 't1'}) SET t.strength = 0.123")
        tx.run(f"MATCH (x:Transition {{seq: {record}}}) SET x.detail = '{{\"forged\": 1}}'")
    store.close()
    with gem.open(copy, clock=clock, engine=ENGINE) as mem:
        report = mem.audit(full=True, expected_head=head)
    named = {(v.condition, v.unit): v.detail for v in report.violations}
    assert not report.chain_ok and ("log", str(record)) in named
    assert "is not what transition" in named[("state", moved[0])]
    assert named[("state", moved[1])].startswith("differs from what transition")
    assert named[("state", "t1")].startswith("stored salience [0.123, ")
