"""A retrieval reads a topic whose summary is out of date in one statement (gem/state/whole.py),
and that changes nothing it returns or caches."""
from __future__ import annotations

import os

import pytest

import gem
from conftest import ENGINE, T0, evict_rows
from gem.state.cache import CommittedCache
from gem.state.whole import load_whole
from gem.store import graph
from gem.store.queries import reads, whole

pytestmark = pytest.mark.skipif(ENGINE != "kuzu", reason="the one-statement read is kuzu's")


def seed(mem, clock):
    mem.ingest([gem.Fact("Website Redesign", "deadline", "March 15", at=T0),
                gem.Fact("Website Redesign", "owner", "Alice", at=T0),
                gem.Fact("Website Redesign", "budget", "40k", at=T0, source="finance"),
                gem.Fact("Lunch", "preferences", "sushi on Fridays", at=T0)])
    clock.advance(days=1)
    mem.ingest([gem.Fact("Website Redesign", "deadline", "April 20"),
                gem.Fact("Website Redesign", "budget", "55k", source="sales"),
                gem.Fact("Lunch", "place", "the corner deli")])
    clock.advance(days=1)
    mem.retract("Website Redesign", "owner", "Alice left")
    mem.ingest(gem.Fact("Website Redesign", "deadline", "May 2"))


def fresh_cache(mem) -> CommittedCache:
    engine = mem._engine
    return CommittedCache(engine.store, patch=engine.cache.patch)


def test_a_topic_read_whole_caches_what_its_three_reads_cache(mem, clock):
    seed(mem, clock)
    derived = mem._engine.derived.scope("default")
    tids = sorted(derived.names.title_of)
    usual, one = fresh_cache(mem), fresh_cache(mem)
    usual.load_rows("Topic", tids)
    usual.load_children("HAS_FIELD", tids)
    usual.load_children("HAS_ENTRY", [f for t in tids for f in usual.children["HAS_FIELD"][t]])
    load_whole(one, tids, derived.fields_of)
    assert set(one.children["HAS_FIELD"]) == set(tids)
    assert one.fingerprint() == usual.fingerprint()
    assert one.nbytes == usual.nbytes == one.measured()


def test_a_topic_whose_fields_differ_from_the_derived_ones_is_left_to_the_usual_reads(mem, clock):
    seed(mem, clock)
    derived = mem._engine.derived.scope("default")
    tid = next(t for t, title in derived.names.title_of.items() if title == "Lunch")
    cache = fresh_cache(mem)
    load_whole(cache, [tid, "no such topic"], lambda t: derived.fields_of(t)[1:])
    assert cache.fingerprint() == fresh_cache(mem).fingerprint()
    assert cache.nbytes == 0


def test_more_topics_than_kuzu_reads_a_topic_at_a_time_are_left_to_the_usual_reads(mem):
    mem.ingest([gem.Fact(f"Topic {i}", "x", i) for i in range(reads.KUZU_FEW_KEYS + 1)])
    derived = mem._engine.derived.scope("default")
    tids = sorted(derived.names.title_of)
    cache = fresh_cache(mem)
    load_whole(cache, tids, derived.fields_of)
    assert cache.nbytes == 0
    load_whole(cache, tids[:reads.KUZU_FEW_KEYS], derived.fields_of)
    assert set(cache.children["HAS_FIELD"]) == set(tids[:reads.KUZU_FEW_KEYS])


def statements(monkeypatch) -> list[str]:
    ran: list[str] = []
    run = graph.Tx.run

    def counted(self, query, params=None):
        ran.append(query)
        return run(self, query, params)
    monkeypatch.setattr(graph.Tx, "run", counted)
    return ran


@pytest.mark.parametrize("request_kind", ["structured", "free text"])
def test_retrieval_reads_a_stale_topic_in_one_statement(tmp_path, clock, monkeypatch, request_kind):
    path = os.path.join(str(tmp_path), "m.db")
    with gem.open(path, clock=clock) as mem, mem._engine.store.lock:  # the worker kept out
        seed(mem, clock)
        derived = mem._engine.derived.scope("default")
        evict_rows(mem, summaries=False)  # as after a reopen: no row cached, nothing pending
        assert all(derived.summary_stale(t) for t in derived.names.title_of)
        ran = statements(monkeypatch)
        if request_kind == "structured":
            mem.retrieve(topic="Website Redesign", fields=["deadline"])
        else:
            mem.retrieve("Website Redesign deadline", k=2)
        reads = [q for q in ran if q.startswith(("MATCH", "UNWIND"))]
        assert reads == [whole._TEXT]


def test_what_a_retrieval_returns_is_the_same_read_whole_or_not(tmp_path, clock, monkeypatch):
    results = []
    for supported in (True, False):
        monkeypatch.setattr(whole, "supported", lambda tx, topics, ok=supported: ok)
        path = os.path.join(str(tmp_path), f"m{supported}.db")
        clock.now = T0
        with gem.open(path, clock=clock) as mem, mem._engine.store.lock:  # summaries stale
            seed(mem, clock)
            evict_rows(mem, summaries=False)
            got = [mem.retrieve(topic="Website Redesign", fields=["deadline"], history=True),
                   mem.retrieve("Lunch place deli", k=3),
                   mem.retrieve("budget deadline redesign", k=5, history=True),
                   mem.retrieve(topic="Lunch")]
            results.append([r.model_dump() for r in got])
    assert results[0] == results[1]
