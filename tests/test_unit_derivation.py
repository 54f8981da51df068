"""Search documents and vectors of new units are derived off the commit path: a commit leaves
them pending, the handle's worker derives them in bounded steps, and every reader of the unit
layer drains what is still pending first, so it reads what a rebuild gives (issue 28 item 3).
Holding the store's lock keeps the worker out: a test that holds it sees the pending work."""
from __future__ import annotations

import threading

import pytest

import gem
from conftest import ENGINE, memory_location
from gem.derived import DerivedState, ScopeState
from gem.derived.pending import Deriver
from gem.testing.consistency import derived_disagreements
from servers import wait_for

embedded = pytest.mark.skipif(ENGINE == "falkordb", reason="other processes write a FalkorDB "
                              "memory: its commits derive their units themselves")

REJECT_POISON = 'POLICY no-poison ON commit WHEN EXISTS t IN touched WHERE t.title = "Poison" ' \
                'DO reject("poison is refused")\n'


def derive_threads(path: str) -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name == f"gem-derive {path}"]


@embedded
def test_the_worker_derives_what_a_bulk_ingest_left_pending(tmp_path, clock):
    with gem.open(memory_location(tmp_path), clock=clock, engine=ENGINE) as mem:
        scope = mem._engine.derived.scope("default")
        with mem._engine.store.lock:
            mem.ingest([gem.Fact(f"Topic {i}", f"f{j}", f"value {i}.{j}") for i in range(60)
                        for j in range(5)])
            assert len(scope.stale_units) == 300  # the commit derived none of them
        wait_for(lambda: not scope.stale_units, what="the worker to derive the pending units")
        assert len(scope.unit_docs) == 300
        assert mem.retrieve("value 7.3", k=3).topics[0].title == "Topic 7"
        mem.ingest(gem.Fact("Topic 7", "f3", "changed"))  # a rewritten document, derived again
        wait_for(lambda: not scope.stale_units, what="the worker to derive the changed unit")
        assert "changed" in scope.unit_docs[mem.inspect("Topic 7").id + "/f3"]
        assert derived_disagreements(mem) == []


def test_a_query_drains_the_pending_work_and_reads_what_a_rebuild_gives(tmp_path, clock):
    with gem.open(memory_location(tmp_path), clock=clock, engine=ENGINE) as mem:
        engine = mem._engine
        scope = engine.derived.scope("default")
        with engine.store.lock:
            mem.ingest([gem.Fact(f"Topic {i}", "f", f"value {i}") for i in range(40)])
            mem.ingest(gem.Fact("Topic 12", "f", "rewritten twelve"))
            if ENGINE != "falkordb":
                assert len(scope.stale_units) == 40
            assert mem.retrieve("rewritten twelve", k=1).topics[0].title == "Topic 12"
            assert scope.stale_units == {}  # the query derived all of it, in one batch
            rebuilt = DerivedState.rebuild(engine.store, engine.services.embedder)
            rebuilt.refresh_units(engine.cache)
            assert scope.fingerprint()["unit_docs"] == rebuilt.scope("default").fingerprint()["unit_docs"]
            assert derived_disagreements(mem) == []


@embedded
def test_a_commit_derives_what_the_worker_left_past_the_backlog(tmp_path, clock, monkeypatch):
    """A rebuild leaves every unit pending; with the worker kept out (a caller committing back
    to back), each commit derives the excess over BACKLOG, oldest first, so no first reader
    pays for more than BACKLOG."""
    monkeypatch.setattr(Deriver, "BACKLOG", 7)
    with gem.open(memory_location(tmp_path), clock=clock, engine=ENGINE) as mem:
        engine = mem._engine
        with engine.store.lock:
            mem.ingest([gem.Fact(f"Topic {i}", "f", f"value {i}") for i in range(40)])
            assert len(engine.derived.scope("default").stale_units) == 7
            engine.shared.derived = DerivedState.rebuild(engine.store, engine.services.embedder)
            scope = engine.derived.scope("default")
            assert len(scope.stale_units) == 40
            backlog = []
            for i in range(3):
                mem.ingest(gem.Fact(f"New {i}", "f", f"new value {i}"))
                backlog.append(len(scope.stale_units))
            assert backlog == [7, 7, 7]
            assert list(scope.stale_units)[-1] == "t43/f"  # the newest wait, the oldest went
        assert derived_disagreements(mem) == []
        assert mem.retrieve("value 12", k=1).topics[0].title == "Topic 12"
        assert scope.stale_units == {}


def test_a_rejected_transition_leaves_no_pending_work(tmp_path, clock):
    policy = tmp_path / "guard.policy"
    policy.write_text(REJECT_POISON)
    with gem.open(memory_location(tmp_path), clock=clock, engine=ENGINE,
                  policies=[str(policy)]) as mem:
        engine = mem._engine
        mem.ingest([gem.Fact(f"Topic {i}", "f", f"value {i}") for i in range(5)])
        scope = engine.derived.scope("default")
        with engine.store.lock:
            scope.refresh_units(engine.cache)
            docs = dict(scope.unit_docs)
            with pytest.raises(gem.TransitionRejected):
                mem.ingest([gem.Fact("Topic 1", "f", "never written"), gem.Fact("Poison", "x", 1)])
            assert scope.stale_units == {}
            assert dict(scope.unit_docs) == docs
        assert derived_disagreements(mem) == []


def test_close_with_pending_work_saves_a_snapshot_that_reopens_to_the_same_answers(
        tmp_path, clock):
    """Reopened, the unit layer stays in the snapshot's files until read, and a few new units
    wait for its first reader (no worker starts). Closed so, the snapshot lists them as
    pending; reopened again, the first query derives them and answers as before the close."""
    path = str(tmp_path / "db")
    with gem.open(path, clock=clock, engine=ENGINE) as mem:
        mem.ingest([gem.Fact(f"Topic {i}", "f", f"value {i}") for i in range(30)])
    with gem.open(path, clock=clock, engine=ENGINE) as mem:
        scope = mem._engine.derived.scope("default")
        mem.ingest([gem.Fact(f"Few {i}", "f", f"few value {i}") for i in range(5)])
        assert not scope.units_loaded and len(scope.stale_units) == 5
        assert not mem._engine.deriver.running
    with gem.open(path, clock=clock, engine=ENGINE) as mem:
        scope = mem._engine.derived.scope("default")
        assert len(scope.stale_units) == 5
        found = mem.retrieve("few value 3", k=1)
        assert found.topics[0].title == "Few 3"
        assert scope.stale_units == {} and len(scope.unit_docs) == 35
        assert derived_disagreements(mem) == []


@embedded
def test_a_bulk_load_into_a_reopened_memory_is_derived_by_the_worker(tmp_path, clock):
    """Past UNIT_STEP pending units the worker reads the saved layer and derives them."""
    path = str(tmp_path / "db")
    with gem.open(path, clock=clock, engine=ENGINE) as mem:
        mem.ingest([gem.Fact(f"Topic {i}", "f", f"value {i}") for i in range(30)])
    with gem.open(path, clock=clock, engine=ENGINE) as mem:
        scope = mem._engine.derived.scope("default")
        mem.ingest([gem.Fact(f"Bulk {i}", f"f{j}", f"bulk value {i}.{j}")
                    for i in range(ScopeState.UNIT_STEP // 5 + 1) for j in range(5)])
        wait_for(lambda: not scope.stale_units, what="the worker to derive the bulk load")
        assert scope.units_loaded
        assert mem.retrieve("bulk value 33.2", k=1).topics[0].title == "Bulk 33"
        assert derived_disagreements(mem) == []


@embedded
def test_close_stops_the_worker_and_leaves_nothing_pending_in_a_loaded_layer(tmp_path, clock):
    path = str(tmp_path / "db")
    mem = gem.open(path, clock=clock, engine=ENGINE)
    mem.ingest([gem.Fact(f"Topic {i}", f"f{j}", f"value {i}.{j}") for i in range(100)
                for j in range(5)])
    assert mem._engine.deriver.running and derive_threads(path)
    mem.close()
    assert not mem._engine.deriver.running and derive_threads(path) == []
    with gem.open(path, clock=clock, engine=ENGINE) as again:
        assert again._engine.derived.scope("default").stale_units == {}
        assert again.retrieve("value 42.3", k=1).topics[0].title == "Topic 42"
        assert derived_disagreements(again) == []


@embedded
def test_closing_while_holding_the_lock_does_not_wait_for_the_worker_forever(tmp_path, clock):
    path = str(tmp_path / "db")
    mem = gem.open(path, clock=clock, engine=ENGINE)
    with mem._engine.store.lock:
        mem.ingest([gem.Fact(f"Topic {i}", "f", f"value {i}") for i in range(50)])
        assert mem._engine.deriver.running  # woken, and waiting for this lock
        mem.close()
    assert derive_threads(path) == []
    with gem.open(path, clock=clock, engine=ENGINE) as again:
        assert again.retrieve("value 42", k=1).topics[0].title == "Topic 42"
        assert derived_disagreements(again) == []


def test_archiving_topics_leaves_their_fields_search_documents_alone(tmp_path, clock):
    """A ladder step changes a unit's status alone, which queries read as they run: archiving
    a topic changes no document of its fields and no summary, so a forgetting pass that
    archives a memory's faded topics derives nothing again (at 100k topics it re-derived 1M
    documents, 390 s, on the pass's commit)."""
    with gem.open(memory_location(tmp_path), clock=clock, engine=ENGINE) as mem:
        engine = mem._engine
        mem.ingest([gem.Fact(f"Topic {i}", f"f{j}", f"value {i}.{j}") for i in range(20)
                    for j in range(3)])
        scope = engine.derived.scope("default")
        with engine.store.lock:
            scope.refresh_units(engine.cache)
            scope.refresh(engine.cache, engine.services.summarizer)
            clock.advance(days=365)
            report = mem.forget()
            assert ("Topic 7", "archived") in report["levels"]
            assert all(mem.inspect(f"Topic {i}").status == "archived" for i in range(20))
            assert scope.stale_units == {}
            assert scope.stale == {}
        assert mem.retrieve("value 7.2", k=1, include_archived=True).topics[0].title == "Topic 7"
        assert derived_disagreements(mem) == []
