"""Stale summaries are derived off the read path: the handle's worker derives those its commits
made stale from the row cache, and a backlog (a rebuild, an older snapshot) by reading ranges
of topics whole, so a free-text query no longer reads whole topics to summarise them. What it
derives is what a refresh by key gives (gem/derived/pending.py)."""
from __future__ import annotations

import os
import shutil

import pytest

import gem
from conftest import ENGINE
from gem.derived import documents, state
from gem.derived.pending import Deriver
from gem.store import queries
from gem.testing.consistency import derived_disagreements
from servers import wait_for

pytestmark = pytest.mark.skipif(ENGINE == "falkordb", reason="other processes write a FalkorDB "
                                "memory: its summaries are derived by their readers")


def no_stale_summaries(mem) -> bool:
    return not any(s.stale for s in mem._engine.derived.scopes.values())


def varied(mem, clock) -> None:
    """Topics with what a summary must leave out or pick: a hidden field, a retracted value,
    values revised twice, a topic with no field, and a second scope."""
    mem.ingest([gem.Fact(f"Topic {i}", f"f{j}", f"value {i}.{j}") for i in range(30)
                for j in range(3)])
    mem.ingest(gem.Fact("Empty", "x", 1))
    clock.advance(days=1)
    mem.ingest([gem.Fact("Topic 3", "f1", "revised once"), gem.Fact("Topic 4", "f0", 42)])
    clock.advance(days=1)
    mem.ingest(gem.Fact("Topic 3", "f1", "revised twice"))
    mem.retract("Topic 5", "f2", "no longer true")
    mem.scope("acme").ingest([gem.Fact("Acme deal", "stage", "signed"),
                              gem.Fact("Acme deal", "owner", "Bo")])


def test_the_worker_derives_the_summaries_commits_made_stale(tmp_path, clock):
    with gem.open(str(tmp_path / "db"), clock=clock, engine=ENGINE) as mem:
        varied(mem, clock)
        wait_for(lambda: no_stale_summaries(mem), what="the worker to derive the summaries")
        scope = mem._engine.derived.scope("default")
        tid = mem.inspect("Topic 3").id
        assert "revised twice" in scope.summaries[tid]
        assert "value 5.2" not in scope.summaries[mem.inspect("Topic 5").id]
        assert derived_disagreements(mem) == []


def test_summaries_wait_until_the_memory_is_left_alone(tmp_path, clock, monkeypatch):
    """A summaries step holds the lock and shares the GIL: while a read or a transition runs or
    waits for the lock, the worker derives none (it is seen looking and being told to wait)."""
    steps, told_to_wait = [], []
    step, quiet_in = Deriver._summaries_step, Deriver._quiet_in
    monkeypatch.setattr(Deriver, "_summaries_step",
                        lambda self, *args: steps.append(1) or step(self, *args))

    def counted(self):
        wait = quiet_in(self)
        if wait:
            told_to_wait.append(wait)
        return wait
    monkeypatch.setattr(Deriver, "_quiet_in", counted)
    with gem.open(str(tmp_path / "db"), clock=clock, engine=ENGINE) as mem:
        with mem._engine.deriver.in_use():  # a reader taking its time
            varied(mem, clock)
            wait_for(lambda: len(told_to_wait) >= 3, what="the worker to look for quiet")
            assert steps == [] and not no_stale_summaries(mem)
        wait_for(lambda: no_stale_summaries(mem), what="the worker to derive the summaries")
        assert steps and derived_disagreements(mem) == []


def test_a_rebuilt_memory_has_its_summaries_derived_by_ranges_as_a_refresh_by_key_gives(
        tmp_path, clock, monkeypatch):
    """A rebuild leaves every summary stale; past SUMMARY_KEYS the worker reads the topics a
    range of node offsets at a time, and derives what the by-key refresh of a second rebuild
    does (derived_disagreements compares them)."""
    monkeypatch.setattr(Deriver, "SUMMARY_KEYS", 4)
    monkeypatch.setattr(Deriver, "SUMMARY_RANGE", 7)
    ranges = []
    scanned = state.scanned_summaries

    def counted(tx, lo, hi, *rest):
        ranges.append((lo, hi))
        return scanned(tx, lo, hi, *rest)
    monkeypatch.setattr(state, "scanned_summaries", counted)
    path = str(tmp_path / "db")
    with gem.open(path, clock=clock, engine=ENGINE) as mem:
        varied(mem, clock)
        clock.advance(days=400)
        mem.forget()  # hides and archives: a hidden field leaves its topic's summary
    shutil.rmtree(documents.snapshot_dir(path))  # no snapshot: the next open rebuilds
    with gem.open(path, clock=clock, engine=ENGINE) as mem:
        engine = mem._engine
        assert len(engine.derived.scope("default").stale) == 31
        mem.ingest(gem.Fact("Topic 9", "f0", "after the rebuild"))  # wakes the worker
        wait_for(lambda: no_stale_summaries(mem), what="the worker to derive the backlog")
        assert ranges[0] == (0, 7) and len(ranges) >= 5
        with engine.store.reading() as tx:
            assert ranges[-1][1] <= queries.topic_offset_end(tx) + 7
        assert derived_disagreements(mem) == []
        seven = mem.inspect("Topic 7")
        hidden = [name for name, f in seven.fields.items() if f.status == "hidden"]
        assert hidden, "the pass hid no field: the test needs one"
        assert hidden[0] not in engine.derived.scope("default").summaries[seven.id]


def test_a_memory_with_its_own_summarizer_leaves_summaries_to_their_readers(tmp_path, clock):
    """A summarizer given to gem.open may call a model: it is called only for what is read."""
    calls = []

    def summarize(title, values):
        calls.append(title)
        return f"{title}: {len(values)} values"
    with gem.open(str(tmp_path / "db"), clock=clock, engine=ENGINE, summarizer=summarize) as mem:
        mem.ingest([gem.Fact(f"Topic {i}", "f", f"value {i}") for i in range(20)])
        scope = mem._engine.derived.scope("default")
        wait_for(lambda: not scope.stale_units, what="the worker to derive the units")
        with mem._engine.store.lock:  # the worker's last step is done
            assert len(scope.stale) == 20 and calls == []
        assert mem.retrieve("value 7", k=1).topics[0].summary == "Topic 7: 1 values"
        assert 0 < len(calls) < 20
