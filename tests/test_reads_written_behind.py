"""A retrieval that changes nothing but salience holds its log record until the next commit
(gem/readlog.py): the process sees its reinforcement at once, a write or a close commits it,
and a crash loses at most those reads, never a write, and leaves a log that audits clean."""
from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import pytest

import gem
from gem.readlog import ReadLog
from gem.store import queries

from conftest import ENGINE, T0
from servers import wait_for

pytestmark = pytest.mark.skipif(ENGINE == "falkordb",
                                reason="where other processes write, every read commits at once")


def _stored_head(mem) -> int:
    with mem._engine.store.reading() as tx:
        return queries.log_head(tx)


def _held(mem) -> int:
    return len(mem._engine.shared.reads.records)


def _strength(mem, topic: str, field: str) -> float:
    return mem.inspect(topic, field).salience


def _run_and_kill(script: str) -> dict:
    """Run `script` in a child process that SIGKILLs itself at its end, after printing one
    JSON line."""
    done = subprocess.run([sys.executable, "-c", textwrap.dedent(script) + textwrap.dedent("""
        import os, signal
        os.kill(os.getpid(), signal.SIGKILL)
    """)], capture_output=True, text=True, timeout=600)
    assert done.returncode == -9, done.stderr[-2000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_a_read_sees_the_reinforcement_of_the_read_before_it_before_anything_is_committed():
    with gem.open(engine=ENGINE, clock=lambda: T0) as mem:
        mem.ingest([gem.Fact("Alice", "city", "Paris"), gem.Fact("Bob", "city", "Rome")])
        committed = _stored_head(mem)
        first = mem.retrieve(topic="Alice").topics[0].fields["city"].salience
        second = mem.retrieve(topic="Alice").topics[0].fields["city"].salience
        third = mem.retrieve("Paris").topics[0].fields["city"].salience
        assert first < second < third
        assert _held(mem) == 3 and _stored_head(mem) == committed  # no engine transaction
        assert _strength(mem, "Alice", "city") == third


def test_a_write_commits_the_reads_held_before_it_in_its_own_transaction():
    with gem.open(engine=ENGINE, clock=lambda: T0) as mem:
        mem.ingest(gem.Fact("Alice", "city", "Paris"))
        mem.retrieve(topic="Alice")
        mem.retrieve(topic="Alice")
        mem.ingest(gem.Fact("Bob", "city", "Rome"))
        assert _held(mem) == 0
        assert [r["op"] for r in mem.transitions()][-3:] == ["retrieve", "retrieve", "ingest"]
        assert mem.audit(full=True).ok


def test_reads_then_close_persist_their_reinforcement(tmp_path):
    path = str(tmp_path / "memory.db")
    with gem.open(path, engine=ENGINE, clock=lambda: T0) as mem:
        mem.ingest(gem.Fact("Alice", "city", "Paris"))
        before = _strength(mem, "Alice", "city")
        for _ in range(3):
            mem.retrieve(topic="Alice")
        reinforced = _strength(mem, "Alice", "city")
        seq = mem._engine.seq
        assert reinforced > before and _held(mem) == 3
    with gem.open(path, engine=ENGINE, clock=lambda: T0) as mem:
        assert _strength(mem, "Alice", "city") == reinforced
        assert mem.head()["seq"] == seq
        assert [r["op"] for r in mem.transitions()][-3:] == ["retrieve"] * 3
        assert mem.audit(full=True).ok


def test_reads_then_a_kill_lose_no_write_and_leave_a_verifiable_audit(tmp_path):
    """The kill loses the held reads (their reinforcement and their records), nothing else:
    the acknowledged head is the last write's, the database opens without `accept_head`, and
    the log audits clean in full; the reads' seqs are given to the next transitions."""
    path = str(tmp_path / "memory.db")
    seen = _run_and_kill(f"""
        import json, gem
        from datetime import datetime, timezone
        T0 = datetime.fromisoformat({T0.isoformat()!r})
        mem = gem.open({path!r}, engine={ENGINE!r}, clock=lambda: T0)
        mem.ingest([gem.Fact("Alice", "city", "Paris"), gem.Fact("Bob", "city", "Rome")])
        written = mem.inspect("Alice", "city").salience
        head = {{"seq": mem._engine.seq, "hash": mem._engine.derived.hash}}
        for _ in range(4):
            mem.retrieve(topic="Alice")
        mem.retrieve("Rome")
        print(json.dumps({{"head": head, "written": written, "held": len(mem._engine.shared.reads.records),
                           "read": mem.inspect("Alice", "city").salience}}))
    """)
    assert seen["held"] == 5 and seen["read"] > seen["written"]
    with gem.open(path, engine=ENGINE, clock=lambda: T0) as mem:
        assert mem.head() == seen["head"]
        assert mem.inspect("Alice", "city").value == "Paris"
        assert mem.inspect("Bob", "city").value == "Rome"
        assert _strength(mem, "Alice", "city") == seen["written"]
        assert mem.audit(full=True, expected_head=seen["head"]).ok
        mem.ingest(gem.Fact("Carol", "city", "Oslo"))
        assert mem.head()["seq"] == seen["head"]["seq"] + 1
        assert mem.audit(full=True).ok


def test_a_head_names_committed_records_only(tmp_path):
    """`head()` commits the reads held before it: kept outside the database, it still
    matches the log after a kill."""
    path = str(tmp_path / "memory.db")
    seen = _run_and_kill(f"""
        import json, gem
        from datetime import datetime, timezone
        T0 = datetime.fromisoformat({T0.isoformat()!r})
        mem = gem.open({path!r}, engine={ENGINE!r}, clock=lambda: T0)
        mem.ingest(gem.Fact("Alice", "city", "Paris"))
        mem.retrieve(topic="Alice")
        mem.retrieve(topic="Alice")
        head = mem.head()
        mem.retrieve(topic="Alice")  # held again, lost by the kill
        print(json.dumps({{"head": head, "salience": mem.inspect("Alice", "city").salience}}))
    """)
    with gem.open(path, engine=ENGINE, clock=lambda: T0) as mem:
        assert mem.head() == seen["head"]
        assert [r["op"] for r in mem.transitions()][-2:] == ["retrieve", "retrieve"]
        assert _strength(mem, "Alice", "city") < seen["salience"]
        assert mem.audit(full=True, expected_head=seen["head"]).ok


def test_a_write_after_reads_survives_a_kill_with_the_reads(tmp_path):
    path = str(tmp_path / "memory.db")
    seen = _run_and_kill(f"""
        import json, gem
        from datetime import datetime, timezone
        T0 = datetime.fromisoformat({T0.isoformat()!r})
        mem = gem.open({path!r}, engine={ENGINE!r}, clock=lambda: T0)
        mem.ingest(gem.Fact("Alice", "city", "Paris"))
        mem.retrieve(topic="Alice")
        mem.retrieve(topic="Alice")
        mem.ingest(gem.Fact("Bob", "city", "Rome"))
        print(json.dumps({{"seq": mem._engine.seq, "salience": mem.inspect("Alice", "city").salience}}))
    """)
    with gem.open(path, engine=ENGINE, clock=lambda: T0) as mem:
        assert mem.head()["seq"] == seen["seq"]
        assert [r["op"] for r in mem.transitions()][-3:] == ["retrieve", "retrieve", "ingest"]
        assert _strength(mem, "Alice", "city") == seen["salience"]
        assert mem.audit(full=True).ok


def test_held_reads_are_committed_at_the_bound(monkeypatch):
    monkeypatch.setattr(ReadLog, "LIMIT", 3)
    with gem.open(engine=ENGINE, clock=lambda: T0) as mem:
        mem.ingest(gem.Fact("Alice", "city", "Paris"))
        committed = _stored_head(mem)
        for _ in range(3):
            mem.retrieve(topic="Alice")
        assert _held(mem) == 3 and _stored_head(mem) == committed
        mem.retrieve(topic="Alice")  # the fourth commits with the three before it
        assert _held(mem) == 0 and _stored_head(mem) == committed + 4


def test_held_reads_are_committed_once_reads_stop(monkeypatch):
    monkeypatch.setattr(ReadLog, "IDLE", 0.05)
    with gem.open(engine=ENGINE, clock=lambda: T0) as mem:
        mem.ingest(gem.Fact("Alice", "city", "Paris"))
        mem.retrieve(topic="Alice")
        mem.retrieve(topic="Alice")
        wait_for(lambda: _held(mem) == 0, what="the idle timer to commit the reads")
        assert _stored_head(mem) == mem._engine.seq


def test_sync_commits_the_held_reads_as_the_log_the_audit_checks():
    with gem.open(engine=ENGINE, clock=lambda: T0) as mem:
        mem.ingest([gem.Fact("Alice", "city", "Paris"), gem.Fact("Bob", "city", "Rome")])
        mem.retrieve(topic="Alice")
        mem.retrieve("Rome", k=2)
        mem.retrieve(topic="Bob", fields=["city"])
        mem.sync()
        assert _held(mem) == 0 and _stored_head(mem) == mem._engine.seq
        report = mem.audit(full=True)
        assert report.ok, report.violations


def test_an_erasure_redacts_the_records_of_reads_held_before_it():
    with gem.open(engine=ENGINE, clock=lambda: T0) as mem:
        mem.ingest([gem.Fact("Alice", "city", "Paris"), gem.Fact("Bob", "city", "Rome")])
        mem.retrieve(topic="Alice")
        receipt = mem.erase("Alice", reason="asked to")
        check = mem.verify_erasure(receipt)
        assert check.ok, check
        assert len(receipt.redacted) >= 2  # the ingest's record and the read's
        assert mem.audit(full=True).ok
