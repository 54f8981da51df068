"""Data integrity on both engines: the failures engine v2 was built to remove.

- kuzu 0.11.3 returns wrong (parent, child) pairs for *uncommitted* relationships read after a
  CHECKPOINT; gem v1 read its own uncommitted writes back, so after a reopen or a rollback a
  batch adding a new field to 17+ existing topics attached one topic's field to every topic
  of the batch. A transition now never reads its own writes from the engine.
- Closing a handle while another thread was inside a call crashed the process.
- Reopening a database several times in one process.
Each test checks every topic's fields against what was ingested, and the derived state and
row cache against the database.
"""
from __future__ import annotations

import subprocess
import sys
import textwrap
import threading

import pytest

import gem
from conftest import ENGINE, memory_location
from gem.testing.consistency import cache_disagreements, derived_disagreements
from servers import HANG  # a guard against hangs only (tests/servers.py)

REJECT_POISON = 'POLICY no-poison ON commit WHEN EXISTS t IN touched WHERE t.title = "Poison" ' \
                'DO reject("poison is refused")\n'


def expected_fields(mem: gem.Memory, want: dict[str, dict[str, object]]) -> list[str]:
    """Every topic holds exactly its own fields and values (nothing of another topic's)."""
    wrong = []
    for title, fields in want.items():
        view = mem.inspect(title)
        if view is None:
            wrong.append(f"{title}: missing")
            continue
        got = {name: f.value for name, f in view.fields.items()}
        if got != fields:
            wrong.append(f"{title}: {got} != {fields}")
    return wrong


def seed(mem: gem.Memory, n: int) -> dict[str, dict[str, object]]:
    mem.ingest([gem.Fact(f"Topic {i}", "base", i) for i in range(n)])
    return {f"Topic {i}": {"base": i} for i in range(n)}


@pytest.mark.parametrize("after", ["reopen", "rejection"])
def test_a_batch_adding_a_new_field_to_many_topics_after_a_checkpoint(tmp_path, clock, after):
    path = memory_location(tmp_path)
    policy = tmp_path / "guard.policy"
    policy.write_text(REJECT_POISON)
    mem = gem.open(path, clock=clock, engine=ENGINE, policies=[str(policy)])
    want = seed(mem, 40)
    if after == "reopen":
        mem.close()
        mem = gem.open(path, clock=clock, engine=ENGINE)
    else:
        with pytest.raises(gem.TransitionRejected):
            mem.ingest([gem.Fact("Topic 1", "base", -1), gem.Fact("Poison", "x", 1)])
    clock.advance(hours=1)
    mem.ingest([gem.Fact(f"Topic {i}", "extra", f"extra of {i}") for i in range(40)])
    for i in range(40):
        want[f"Topic {i}"]["extra"] = f"extra of {i}"
    try:
        assert expected_fields(mem, want) == []
        assert cache_disagreements(mem) == []
        assert derived_disagreements(mem) == []
        assert mem.audit().ok
    finally:
        mem.close()
    with gem.open(path, clock=clock, engine=ENGINE) as again:
        assert expected_fields(again, want) == []
        assert derived_disagreements(again) == []


def test_concurrent_batches_with_rejections_keep_every_topic_its_own(tmp_path, clock):
    policy = tmp_path / "guard.policy"
    policy.write_text(REJECT_POISON)
    path = memory_location(tmp_path)
    mem = gem.open(path, clock=clock, engine=ENGINE, policies=[str(policy)])
    want = seed(mem, 80)
    mem.close()
    mem = gem.open(path, clock=clock, engine=ENGINE)  # a checkpoint, as in the reported runs
    lock = threading.Lock()
    errors: list[BaseException] = []

    def worker(w: int) -> None:
        try:
            for round_ in range(6):
                batch = [gem.Fact(f"Topic {i}", f"w{w}", f"{w}.{round_}.{i}")
                         for i in range(w, 80, 4)]
                if round_ % 3 == 2:  # every third batch is refused whole
                    with pytest.raises(gem.TransitionRejected):
                        mem.ingest(batch + [gem.Fact("Poison", "x", 1)])
                    continue
                mem.ingest(batch)
                with lock:
                    for i in range(w, 80, 4):
                        want[f"Topic {i}"][f"w{w}"] = f"{w}.{round_}.{i}"
        except BaseException as exc:  # the assertion below reports it
            errors.append(exc)

    threads = [threading.Thread(target=worker, args=(w,)) for w in range(4)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    try:
        assert errors == []
        assert expected_fields(mem, want) == []
        assert cache_disagreements(mem) == []
        assert derived_disagreements(mem) == []
        assert mem.audit().ok
    finally:
        mem.close()
    with gem.open(path, clock=clock, engine=ENGINE) as again:
        assert expected_fields(again, want) == []


@pytest.mark.slow
def test_close_and_reopen_many_times_in_one_process(tmp_path, clock):
    path = memory_location(tmp_path)
    want: dict[str, dict[str, object]] = {}
    for cycle in range(8):
        with gem.open(path, clock=clock, engine=ENGINE) as mem:
            mem.ingest([gem.Fact(f"Cycle {cycle}", "note", f"written in cycle {cycle} ✓"),
                        gem.Fact("Shared", f"c{cycle}", cycle)])
            want[f"Cycle {cycle}"] = {"note": f"written in cycle {cycle} ✓"}
            want.setdefault("Shared", {})[f"c{cycle}"] = cycle
        clock.advance(minutes=5)
        with gem.open(path, clock=clock, engine=ENGINE) as mem:
            assert [r["seq"] for r in mem.transitions()][-1] == mem.stats()["transitions"]
            assert mem.audit().ok
            assert expected_fields(mem, want) == []


@pytest.mark.slow
def test_closing_while_another_thread_is_in_a_call_neither_crashes_nor_corrupts(tmp_path):
    """In a subprocess, so that a crash of the engine shows as a failed exit code."""
    script = textwrap.dedent(f"""
        import threading, gem
        path = {memory_location(tmp_path)!r}
        for attempt in range(10):
            mem = gem.open(path, engine={ENGINE!r})
            stop = threading.Event()
            outcomes = []
            def work():
                i = 0
                while not stop.is_set():
                    try:
                        mem.ingest([gem.Fact(f"T{{attempt}}.{{i}}.{{j}}", "x", j) for j in range(20)])
                        mem.retrieve("x")
                    except gem.GemError as exc:
                        outcomes.append(type(exc).__name__)
                        return
                    i += 1
            th = threading.Thread(target=work)
            th.start()
            while not mem.stats()["transitions"] > 2:
                pass
            mem.close()
            stop.set()
            th.join()
            again = gem.open(path, engine={ENGINE!r})
            assert again.audit().ok, again.audit().violations
            again.close()
        print("ok")
    """)
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=HANG)
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.strip().endswith("ok")
