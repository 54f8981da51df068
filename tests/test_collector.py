"""The cyclic collector is paused around gem's large builds and left as the caller had it."""
from __future__ import annotations

import gc

import pytest

import gem
from gem.collector import paused_gc


@pytest.fixture
def collector():
    was = gc.isenabled()
    yield
    gc.enable() if was else gc.disable()


def test_the_collector_is_paused_inside_and_restored_after(collector):
    gc.enable()
    with paused_gc():
        assert not gc.isenabled()
        with paused_gc():
            assert not gc.isenabled()
        assert not gc.isenabled()                # an inner block does not end the pause
    assert gc.isenabled()


def test_a_caller_that_disabled_the_collector_keeps_it_disabled(collector):
    gc.disable()
    with paused_gc():
        pass
    assert not gc.isenabled()


def test_transitions_and_reads_leave_the_collector_enabled_even_when_they_fail(tmp_path, clock, collector):
    gc.enable()
    seen = []
    with gem.open(str(tmp_path / "db"), clock=clock) as mem:
        mem.ingest(gem.Fact("Lunch", "place", "the canteen"))
        mem._engine.read(lambda t: seen.append(gc.isenabled()))
        assert gc.isenabled()
        with pytest.raises(gem.GemError):
            mem.restore("No such topic")
        assert gc.isenabled()
    assert seen == [False]                       # paused while the read ran
