"""The row cache's byte budget: what it counts against what it holds (gem/state/cache.py)."""
from __future__ import annotations

import sys

import gem
from conftest import ENGINE, evict_rows, memory_location
from gem.state.cache import DEFAULT_BUDGET


def held_bytes(*roots) -> int:
    """The bytes of every distinct object reachable from `roots` through dicts, lists and
    tuples (what the cache's rows, child lists and edge lists really hold)."""
    seen: set[int] = set()
    total, stack = 0, list(roots)
    while stack:
        o = stack.pop()
        if id(o) in seen:
            continue
        seen.add(id(o))
        total += sys.getsizeof(o)
        if isinstance(o, dict):
            stack.extend(o.keys())
            stack.extend(o.values())
        elif isinstance(o, (list, tuple)):
            stack.extend(o)
    return total


def test_a_memory_opened_with_the_defaults_bounds_its_row_cache_at_the_default_budget(tmp_path, clock):
    with gem.open(memory_location(tmp_path), clock=clock, engine=ENGINE) as mem:
        assert mem._engine.cache.budget == DEFAULT_BUDGET


def test_the_row_cache_never_counts_less_than_the_objects_it_holds(tmp_path, clock):
    """The budget bounds real memory only if the count does not undercount it: rows written by
    transitions (which share values) and rows read back from the engine (which do not), with
    their child and edge lists, each hold at most what the cache counts for them."""
    with gem.open(memory_location(tmp_path), clock=clock, engine=ENGINE) as mem:
        cache = mem._engine.cache
        mem.ingest([gem.Fact(f"Topic {i}", f"field {j}", f"value {i}.{j} of the topic")
                    for i in range(40) for j in range(5)])
        mem.ingest(gem.Fact("Topic 1", "field 2", "a newer value"))
        mem.link("Topic 1", "Topic 2")
        assert cache.nbytes == cache.measured()
        written = held_bytes(cache.rows, cache.children, cache.edges) - held_bytes(
            {t: {} for t in cache.rows}, {r: {} for r in cache.children}, {})
        assert 0 < written <= cache.nbytes
        evict_rows(mem)
        for i in range(0, 40, 3):
            mem.retrieve(topic=f"Topic {i}", fields="all", history=True)
        mem.retrieve("value of the topic", k=10)
        assert cache.nbytes == cache.measured()
        read = held_bytes(cache.rows, cache.children, cache.edges) - held_bytes(
            {t: {} for t in cache.rows}, {r: {} for r in cache.children}, {})
        assert 0 < read <= cache.nbytes
