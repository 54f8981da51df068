"""Search documents and vectors of new units are derived after each commit, in bounded steps,
not all at once by the first free-text retrieval after a bulk load (issue 28 item 3)."""
from __future__ import annotations

import gem
from conftest import ENGINE, memory_location
from gem.derived import DerivedState, ScopeState
from gem.testing.consistency import derived_disagreements


def test_after_a_bulk_ingest_nothing_is_left_for_the_first_free_text_retrieval(tmp_path, clock):
    with gem.open(memory_location(tmp_path), clock=clock, engine=ENGINE) as mem:
        mem.ingest([gem.Fact(f"Topic {i}", f"f{j}", f"value {i}.{j}") for i in range(60)
                    for j in range(5)])
        scope = mem._engine.derived.scope("default")
        assert scope.stale_units == {}
        assert len(scope.unit_docs) == 300
        found = mem.retrieve("value 7.3", k=3)
        assert found.topics[0].title == "Topic 7"
        mem.ingest(gem.Fact("Topic 7", "f3", "changed"))  # a rewritten document, derived again
        assert scope.stale_units == {}
        assert "changed" in scope.unit_docs[mem.inspect("Topic 7").id + "/f3"]
        assert derived_disagreements(mem) == []


def test_a_backlog_of_stale_units_drains_a_bounded_step_per_commit(tmp_path, clock,
                                                                    monkeypatch):
    """A rebuild leaves every unit stale: each later commit derives its own units and at most
    UNIT_STEP of the others, so no commit pays for the whole backlog."""
    monkeypatch.setattr(ScopeState, "UNIT_STEP", 7)
    with gem.open(memory_location(tmp_path), clock=clock, engine=ENGINE) as mem:
        mem.ingest([gem.Fact(f"Topic {i}", "f", f"value {i}") for i in range(40)])
        engine = mem._engine
        with engine.store.lock:
            engine.shared.derived = DerivedState.rebuild(engine.store, engine.services.embedder)
        scope = engine.derived.scope("default")
        assert len(scope.stale_units) == 40
        backlog = []
        for i in range(3):
            mem.ingest(gem.Fact(f"New {i}", "f", f"new value {i}"))
            backlog.append(len(scope.stale_units))
        assert backlog == [33, 26, 19]  # each commit: its own unit, then 7 of the backlog
        assert derived_disagreements(mem) == []
        assert mem.retrieve("value 12", k=1).topics[0].title == "Topic 12"
        assert scope.stale_units == {}


def test_after_a_reopen_and_a_bulk_ingest_the_first_free_text_retrieval_derives_a_bounded_few(
        tmp_path, clock, monkeypatch):
    """Reopened, the unit layer stays in the snapshot's files until read. A few new units are
    left for the first reader (a process that only writes does not read the layer); a backlog
    past UNIT_STEP loads it, and from then on each commit derives its units, as on a fresh
    memory: the first free-text retrieval derives at most UNIT_STEP units, not the whole load."""
    monkeypatch.setattr(ScopeState, "UNIT_STEP", 16)
    path = str(tmp_path / "db")
    with gem.open(path, clock=clock, engine=ENGINE) as mem:
        mem.ingest([gem.Fact(f"Topic {i}", "f", f"value {i}") for i in range(30)])
    with gem.open(path, clock=clock, engine=ENGINE) as mem:
        scope = mem._engine.derived.scope("default")
        assert not scope.units_loaded
        mem.ingest([gem.Fact(f"Few {i}", "f", f"few value {i}") for i in range(5)])
        assert not scope.units_loaded and len(scope.stale_units) == 5  # a small backlog waits
        for b in range(8):  # a bulk load of 400 units, in batches
            mem.ingest([gem.Fact(f"Bulk {b * 10 + i}", f"f{j}", f"bulk value {b * 10 + i}.{j}")
                        for i in range(10) for j in range(5)])
        assert len(scope.stale_units) <= ScopeState.UNIT_STEP  # all the first reader derives
        assert mem.retrieve("bulk value 63.2", k=1).topics[0].title == "Bulk 63"
        assert scope.stale_units == {}
        assert len(scope.unit_docs) == 30 + 5 + 400
        assert derived_disagreements(mem) == []
