"""gem.AsyncMemory on a real database: awaitable calls, all on one worker thread."""
from __future__ import annotations

import asyncio
import inspect
import threading

import pytest

import gem
from gem.aio import _NOT_DELEGATED, DELEGATED
from conftest import ENGINE


def test_every_public_memory_method_is_offered():
    public = {name for name, value in vars(gem.Memory).items()
              if callable(value) and not name.startswith("_")}
    assert public == set(DELEGATED) | set(_NOT_DELEGATED)
    for name in DELEGATED:
        assert inspect.iscoroutinefunction(getattr(gem.AsyncMemory, name))
        assert (inspect.signature(getattr(gem.AsyncMemory, name))
                == inspect.signature(getattr(gem.Memory, name)))


def test_gather_runs_everything_on_one_worker_thread(db_path, clock):
    async def main():
        async with await gem.AsyncMemory.open(db_path, clock=clock, engine=ENGINE) as mem:
            loop_thread = threading.get_ident()
            facts = [gem.Fact(f"Topic {i}", "value", i, source=f"s{i}") for i in range(12)]
            ticks = 0

            async def heartbeat():
                nonlocal ticks
                while True:
                    ticks += 1
                    await asyncio.sleep(0)

            beat = asyncio.create_task(heartbeat())
            results = await asyncio.gather(
                *(mem.ingest(f) for f in facts),
                *(mem.run(lambda m: threading.get_ident()) for _ in range(5)))
            ingests, threads = results[:12], results[12:]
            # the loop kept running while the engine worked
            assert ticks > len(facts)
            beat.cancel()
            assert len(set(threads)) == 1 and loop_thread not in threads
            assert sorted(r.transition for r in ingests) == sorted(set(r.transition for r in ingests))
            reads = await asyncio.gather(*(mem.retrieve(topic=f"Topic {i}", fields=["value"])
                                           for i in range(12)))
            assert [r.value(f"Topic {i}", "value") for i, r in enumerate(reads)] == list(range(12))
            view, history, stats, audit = await asyncio.gather(
                mem.inspect("Topic 3"), mem.history("Topic 3", "value"), mem.stats(), mem.audit())
            assert view.title == "Topic 3" and history[0].value == 3
            assert stats["topics"]["active"] == 12 and audit.ok
            log = await mem.transitions()
            assert [r["op"] for r in log].count("ingest") == 12
    asyncio.run(main())


def test_errors_and_close(db_path, clock):
    async def main():
        mem = await gem.AsyncMemory.open(db_path, clock=clock, engine=ENGINE)
        with pytest.raises(gem.UnknownUnit):
            await mem.history("nothing", "here")
        with pytest.raises(gem.InvalidInput):
            await mem.ingest([])
        await mem.close()
        with pytest.raises(gem.GemError):
            await mem.stats()
        await mem.close()  # closing twice is fine
    asyncio.run(main())


def test_open_refuses_a_missing_path_without_create(tmp_path):
    async def main():
        with pytest.raises(gem.InvalidInput, match="no database"):
            await gem.AsyncMemory.open(tmp_path / "missing.db", create=False, engine=ENGINE)
    asyncio.run(main())


def test_scheduled_maintenance_runs_on_the_worker(db_path, clock):
    async def main():
        async with await gem.AsyncMemory.open(db_path, clock=clock, engine=ENGINE) as mem:
            await mem.ingest(gem.Fact("A", "x", 1))
            mem.start_maintenance(every=0.01)
            with pytest.raises(gem.GemError, match="already running"):
                mem.start_maintenance(every=1)
            while mem.maintenance_runs < 2:
                await asyncio.sleep(0.01)
            await mem.stop_maintenance()
            runs = mem.maintenance_runs
            assert not mem.maintenance_running
            ops = [r["op"] for r in await mem.transitions()]
            assert ops.count("forget") >= runs
            with pytest.raises(gem.InvalidInput):
                mem.start_maintenance(every=0)
    asyncio.run(main())
