"""A transition whose write set is its log record alone (a retrieval: salience is written
behind) commits it as one auto-committed statement, as atomic and durable as BEGIN ... COMMIT."""
from __future__ import annotations

import os

import pytest

import gem
from conftest import ENGINE
from gem.errors import StoreError
from gem.store import graph
from gem.testing import powerloss
from gem.testing.crash import Harness


def spy(monkeypatch, name: str) -> list[str]:
    """Record each use of GraphStore.<name> (it still runs)."""
    used: list[str] = []
    real = getattr(graph.GraphStore, name)

    def recorded(self, *args, **kwargs):
        used.append(name)
        return real(self, *args, **kwargs)
    monkeypatch.setattr(graph.GraphStore, name, recorded)
    return used


@pytest.mark.skipif(ENGINE == "falkordb", reason="a FalkorDB write set is one query anyway")
def test_a_retrieval_commits_its_log_record_alone_and_an_ingest_in_a_transaction(
        tmp_path, clock, monkeypatch):
    path = os.path.join(str(tmp_path), "m.db")
    with gem.open(path, clock=clock, engine=ENGINE) as mem:
        mem.ingest(gem.Fact("Website Redesign", "deadline", "March 15"))
        transactions, statements = spy(monkeypatch, "transaction"), spy(monkeypatch, "statement")
        seq = mem.head()["seq"]
        mem.retrieve(topic="Website Redesign", fields=["deadline"])
        mem.retrieve("deadline of the redesign", k=2)
        assert (transactions, statements) == ([], ["statement", "statement"])
        mem.ingest(gem.Fact("Website Redesign", "deadline", "April 20"))
        assert transactions == ["transaction"]
        head = mem.head()
    with gem.open(path, clock=clock, engine=ENGINE) as mem:
        assert mem.head() == head
        assert [r["op"] for r in mem.transitions(seq)] == ["retrieve", "retrieve", "ingest"]
        assert mem.audit(full=True).ok


@pytest.mark.skipif(ENGINE == "falkordb", reason="the embedded store's one-statement write set")
def test_a_one_statement_write_set_refuses_a_second_write(tmp_path):
    store = graph.GraphStore(os.path.join(str(tmp_path), "s.db"), ENGINE)
    try:
        store._conn.execute("CREATE NODE TABLE K(k STRING, PRIMARY KEY(k))")
        with pytest.raises(StoreError, match="second write"):
            with store.statement() as tx:
                tx.write("CREATE (:K {k: $k})", {"k": "a"})
                tx.write("CREATE (:K {k: $k})", {"k": "b"})
        with store.reading() as tx:
            assert tx.run("MATCH (n:K) RETURN n.k") == [["a"]]
    finally:
        store.close()


@pytest.fixture
def shim(tmp_path):
    try:
        return powerloss.build_shim(str(tmp_path))
    except powerloss.ShimUnavailable as exc:
        pytest.skip(str(exc))


@pytest.mark.slow
@pytest.mark.skipif(ENGINE == "falkordb", reason="cuts the power of an embedded database")
def test_a_power_cut_keeps_every_acknowledged_retrieval_under_strict_posix(tmp_path, shim):
    """The auto-committed record is synced as a COMMIT is, and a log file it creates (the
    first write after a clean close) has its name synced too."""
    harness = Harness(ENGINE, str(tmp_path / "work"), seed=5)
    os.makedirs(harness.workdir)
    while harness.stats.get("strict") is None or harness.stats["strict"].acked < 2:
        powerloss.cycle(harness, "strict", "retrieve", 1.5, shim, strict=True)
        assert harness.stats["strict"].kills < 10, "no retrieval was acknowledged in 10 runs"
    assert harness.stats["strict"].failures == []
