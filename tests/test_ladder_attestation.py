"""What the log attests of a forgetting pass: a unit whose status alone moved down the ladder is
attested by the pass's record (`detail.attenuated` names it and its level), not by hashing its
row again (gem/attest.py). The audit must still find a status edited behind gem's back, full
and incremental, and a log written before this (every moved row hashed) must still verify,
and go on verifying as new passes move the units its records wrote."""
from __future__ import annotations

import json
import os
from datetime import timedelta
from pathlib import Path

import pytest

import gem
from conftest import ENGINE
from gem.store import open_store

V1_LOG = Path(__file__).parent / "fixtures" / "ladder_log_v1.jsonl"


def faded_memory(path: str, clock) -> gem.Memory:
    """Topics with fields (one with a history), episodes, and 60 idle days: the ladder moves
    fields (compressed then hidden), an episode and topics (archived)."""
    mem = gem.open(path, clock=clock, engine=ENGINE)
    mem.ingest([gem.Fact(f"Project {i}", f"field {j}", f"value {i}.{j}") for i in range(4)
                for j in range(3)])
    mem.ingest(gem.Episode(text="We moved the launch to May.", speaker="ana"))
    clock.advance(days=1)
    mem.ingest(gem.Fact("Project 0", "field 0", "updated"))
    clock.advance(days=90)
    return mem


def records(mem: gem.Memory) -> list[dict]:
    return mem.recent_transitions(limit=1000)


def test_a_pass_attests_status_moves_by_its_record_and_names_every_unit(tmp_path, clock):
    with faded_memory(str(tmp_path / "db"), clock) as mem:
        report = mem.forget()
        record = records(mem)[0]
        assert record["op"] == "forget"
        moved = {unit for unit, _ in report["level_ids"]}
        named = {u for units in record["detail"]["attenuated"].values() for u in units}
        assert moved == named and {"t2", "t2/field 1", "ep1"} <= moved
        # The field with a history changed its summary and its entries: hashed as before.
        assert "t1/field 0" in record["writes"]
        # The others moved in status alone: not hashed again.
        assert not {"t2", "t2/field 1", "ep1"} & set(record["writes"])
        assert mem.audit(full=True).ok


def _edit(path: str, statement: str) -> None:
    store = open_store(path, ENGINE)
    with store.transaction() as tx:
        tx.run(statement)
    store.close()


EDITS = {
    "a hidden field made active": ("MATCH (f:Field {id: 't2/field 1'}) SET f.status = 'active'",
                                       "t2/field 1"),
    "a hidden episode made active": ("MATCH (e:Episode {id: 'ep1'}) SET e.status = 'active'", "ep1"),
    "an archived topic made active": ("MATCH (t:Topic {id: 't3'}) SET t.status = 'active'", "t3"),
    "a moved field's other column": ("MATCH (f:Field {id: 't2/field 2'}) SET f.name = 'forged'",
                                     "t2/field 2"),
    "a moved topic renamed": ("MATCH (t:Topic {id: 't2'}) SET t.title = 'Forged'", "t2"),
}


@pytest.mark.parametrize("edit", sorted(EDITS))
@pytest.mark.parametrize("audit", ["full", "incremental"])
def test_a_status_edited_behind_gems_back_is_found(tmp_path, clock, edit, audit):
    path = str(tmp_path / "db")
    with faded_memory(path, clock) as mem:
        assert mem.audit(full=True).ok  # the clean audit an incremental one starts from
        levels = dict(mem.forget()["level_ids"])
        assert {"t2/field 1", "t2/field 2", "ep1", "t2", "t3"} <= levels.keys()
        head = mem.head()
    statement, unit = EDITS[edit]
    _edit(path, statement)
    with gem.open(path, clock=clock, engine=ENGINE) as mem:
        if audit == "incremental":
            # the reopened memory has no clean audit of its own: give it the one before the pass
            mem._engine.derived.audit_checkpoint = (head["seq"] - 1, records(mem)[1]["hash"])
        report = mem.audit(full=audit == "full", expected_head=head)
    if audit == "incremental" and edit in ("a moved field's other column", "a moved topic renamed"):
        # A unit the later records only moved is checked by its status there (its row's hash
        # is in a record before the clean audit): the full audit is the one that finds this.
        assert report.since > 0
        return
    assert not report.ok
    assert unit in {v.unit for v in report.violations}, report.violations


def test_a_log_written_before_still_verifies_and_new_passes_move_its_units(tmp_path, clock):
    """tests/fixtures/ladder_log_v1.jsonl was exported by gem as of 4b5d922 (two forgetting
    passes, every moved row hashed in their records): 6 topics of 3 fields, 3 fields updated,
    2 episodes; compressed after 14 days, hidden after 54."""
    path = str(tmp_path / "db")
    gem.import_jsonl(str(V1_LOG), path, engine=ENGINE)  # the import audits it in full
    clock.now = clock.now.replace(year=2026, month=6)
    with gem.open(path, clock=clock, engine=ENGINE) as mem:
        assert mem.audit(full=True).ok
        before = {r["seq"] for r in records(mem)}
        report = mem.forget()
        # rows the old records hashed (compressed, with that status) move on in status alone
        assert ("t5/field 0", "hidden") in report["level_ids"]
        assert ("t5", "archived") in report["level_ids"]
        record = records(mem)[0]
        assert record["seq"] not in before and "t5/field 0" not in record["writes"]
        assert mem.audit(full=True).ok
        mem.restore("Project 4")  # t5: a restore writes the rows whole again
        assert mem.audit(full=True).ok
        head = mem.head()
    _edit(path, "MATCH (f:Field {id: 't4/field 0'}) SET f.status = 'compressed'")
    with gem.open(path, clock=clock, engine=ENGINE) as mem:
        report = mem.audit(full=True, expected_head=head)
    assert "t4/field 0" in {v.unit for v in report.violations}


def test_a_restored_unit_is_hashed_whole_again(tmp_path, clock):
    with faded_memory(str(tmp_path / "db"), clock) as mem:
        mem.forget()
        mem.restore("Project 2")  # t3
        record = records(mem)[0]
        assert {"t3", "t3/field 1"} <= set(record["writes"])
        assert mem.audit(full=True).ok


def _ladder_state(mem: gem.Memory) -> tuple:
    with mem._engine.store.reading() as tx:
        statuses = sorted(tuple(r) for table in ("Topic", "Field", "Episode")
                          for r in tx.run(f"MATCH (n:{table}) RETURN n.id, n.status"))
        entries = sorted(tuple(r) for r in tx.run("MATCH (e:Entry) RETURN e.id, e.active"))
    return statuses, entries, mem.head()


@pytest.mark.parametrize("failure", ["rejected", "engine error in the flush"])
def test_a_failed_pass_leaves_the_store_exactly_as_it_was(tmp_path, clock, monkeypatch, failure):
    from gem.store import queries
    from gem.testing.consistency import cache_disagreements, derived_disagreements
    path = str(tmp_path / "db")
    policy = tmp_path / "refuse.policy"
    policy.write_text('POLICY refuse-forgetting ON commit WHEN op = "forget" DO reject("not now")\n')
    with faded_memory(path, clock) as mem:
        if failure == "rejected":
            mem.load_policies([str(policy)])
        before = _ladder_state(mem)
        if failure == "rejected":
            with pytest.raises(gem.TransitionRejected):
                mem.forget()
        else:
            def broken(tx, row):  # the last statement of the flush: the updates went before it
                raise RuntimeError("the disk went away")
            monkeypatch.setattr(queries, "append_transition", broken)
            with pytest.raises(RuntimeError):
                mem.forget()
            monkeypatch.undo()
        assert _ladder_state(mem) == before
        assert cache_disagreements(mem) == [] and derived_disagreements(mem) == []
        assert mem.audit(full=True).ok
