"""The full audit reports its progress (`gem audit --progress`), reads each table once, and
checks a log record's commitment on its stored texts, falling back to its decoded parts."""
from __future__ import annotations

import gem
from conftest import ENGINE
from gem import audit as audit_mod, audit_tables
from gem.cli import main


def _memory(path: str):
    mem = gem.open(path, engine=ENGINE)
    mem.ingest([gem.Fact(f"Topic {i}", f"field {j}", f"value {i}.{j}") for i in range(30)
                for j in range(3)])
    mem.ingest(gem.Fact("Topic 1", "field 1", "changed"))
    return mem


def test_gem_audit_shows_progress_of_the_full_audit(tmp_path, capsys):
    path = str(tmp_path / "m")
    _memory(path).close()
    assert main(["audit", path, "--full", "--progress", "always"]) == 0
    captured = capsys.readouterr()
    assert "audit log: " in captured.err and "audit histories: " in captured.err
    assert "ok" in captured.out.lower()


def test_the_full_audit_reads_the_entries_once_and_finds_a_tampered_one(tmp_path, monkeypatch):
    mem = _memory(str(tmp_path / "m"))
    try:
        scanned: list[str] = []
        stream = audit_tables.row_batches

        def counting(tx, table):
            scanned.append(table)
            return stream(tx, table)

        monkeypatch.setattr(audit_tables, "row_batches", counting)
        assert mem.audit(full=True).ok
        assert "Entry" not in scanned and "Field" in scanned
        with mem._engine.store.transaction() as tx:
            tx.run("MATCH (e:Entry) WHERE e.value = $v SET e.source = 'forged'", {"v": '"value 2.2"'})
        report = mem.audit(full=True)
        assert not report.ok
        assert [v.condition for v in report.violations] == ["state"]
        assert "differs from what transition" in report.violations[0].detail
    finally:
        mem.close()


def test_a_record_whose_stored_texts_are_not_canonical_is_judged_on_its_parts(tmp_path):
    mem = _memory(str(tmp_path / "m"))
    try:
        with mem._engine.store.reading() as tx:
            (row,) = audit_mod.queries.transitions(tx, 1, 2)
        record = audit_mod.decode(row)
        assert audit_mod.record_problem(row["prev_hash"], record, row) is None
        # The same parts written with other whitespace: not the texts that were hashed, the
        # same content: the record still verifies, as it did when only the parts were hashed.
        spaced = {**row, "units": row["units"].replace(",", ", ")}
        assert spaced["units"] != row["units"]
        assert audit_mod.record_problem(row["prev_hash"], audit_mod.decode(spaced), spaced) is None
        forged = {**row, "units": row["units"].replace("t1", "t9")}
        assert audit_mod.record_problem(row["prev_hash"], audit_mod.decode(forged), forged) \
            == "its content does not match its commitment"
    finally:
        mem.close()
