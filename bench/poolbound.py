"""A large memory with the default (bounded) buffer pool: what fails, RSS, open time.

    python bench/poolbound.py --topics 100000 --engine kuzu [--keep DIR] [--updates 30]

scale.py's workload on one engine, gem alone in the process (no raw twin): grow to N topics
of 10 fields in batches of 2,000 facts, update batches of 2,000, a full audit, then, in a fresh
process, the first free-text retrieve after the open, 8 more and 8 structured ones (wall and CPU
ms each), and 45 days later a forgetting pass and a full audit again; each step prints a JSON line (seconds, the
process's peak and current RSS, or the error a step failed with). The memory is kept in DIR
(built once; without --keep it lives in a temporary directory removed at the end), and each open is timed in a fresh process, three times. A benchmark, not a
test: nothing asserts a time.

Measured (kuzu, 100k topics, 1.1M entries, default pool 1 GiB, shared 2-core box at load 8-12):
grow 3,512 s, 30 update batches 478 s, forget 97 s, full audit 129 s (ok), none failed; RSS
peak 3.1 GB through the updates, 3.6 GB in the audit, 10.4 GB in the first free-text retrieve
after the forgetting pass (218 s: the derived search documents, not the pool); opens (snapshot
current) 4.4-6.0 s, RSS 460-570 MB after open. Where an open goes (cProfile, 4.6 s): loading the
derived snapshot 3.8 s (gem/snapshot.py: string decoding, salience tables, ids), the log check
0.43 s (the highest entry id), preparing statements 0.29 s, the engine's Database 0.19 s; the
policy parser's first build, 0.95 s, before it (strict, with interegular installed).
"""
from __future__ import annotations

import argparse
import json
import os
import random
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import Clock, rss_mb, rss_now_mb  # noqa: E402
from scale import new_facts, topic_name, update_facts  # noqa: E402


def say(step: str, **values: object) -> None:
    print(json.dumps({"step": step, "rss_peak_mb": round(rss_mb()), "rss_now_mb": round(rss_now_mb()),
                      **values}), flush=True)


def step(name: str, fn) -> bool:
    start = time.perf_counter()
    try:
        fn()
    except Exception as exc:  # a bench reports what failed and goes on to what it can still do
        say(name, failed=f"{type(exc).__name__}: {str(exc)[:400]}", s=round(time.perf_counter() - start, 2))
        return False
    say(name, s=round(time.perf_counter() - start, 2))
    return True


def build(path: str, engine: str, topics: int, updates: int) -> None:
    import gem
    clock = Clock()
    with gem.open(path, engine=engine, clock=clock) as mem:
        say("opened", pool=mem._engine.store.opened_with.get("buffer_pool_size"))

        def grow() -> None:
            for start in range(0, topics, 200):
                mem.ingest([gem.Fact(*f) for f in new_facts(start, min(200, topics - start), 10)])
                if start % 10_000 == 0:
                    say("grow", topics=start)

        rng = random.Random(7)
        step("grow", grow)
        step("updates", lambda: [mem.ingest([gem.Fact(*f) for f in update_facts(rng, topics, 10)])
                                 for _ in range(updates)])
        step("audit_full", lambda: print(mem.audit(full=True).ok, file=sys.stderr))
    say("closed")


QUERIES = ("budget review", "launch design 7", "value 12 pricing", "roadmap audit", "alpha hiring",
           "security partner 3", "value 99 review", "support analytics")


def latencies(name: str, calls: list) -> None:
    """Wall and CPU ms of each call, in order (the first after an open pays what it loads)."""
    wall, cpu = [], []
    for call in calls:
        start, used = time.perf_counter(), time.process_time()
        call()
        wall.append(round(1000 * (time.perf_counter() - start), 1))
        cpu.append(round(1000 * (time.process_time() - used), 1))
    say(name, wall_ms=wall, cpu_ms=cpu)


def later(path: str, engine: str, topics: int) -> None:
    import gem
    clock = Clock()
    start, used = time.perf_counter(), time.process_time()
    with gem.open(path, engine=engine, clock=clock) as mem:
        say("open", s=round(time.perf_counter() - start, 3), cpu=round(time.process_time() - used, 3))
        step("first_free_text", lambda: mem.retrieve("value 3 alpha", k=5))
        latencies("free_text", [lambda q=q: mem.retrieve(q, k=5) for q in QUERIES])
        latencies("structured", [lambda i=i: mem.retrieve(topic=topic_name(i * 997 % topics),
                                                          fields=["field 1"]) for i in range(8)])
        clock.advance(days=45)
        step("forget", mem.forget)
        step("audit_full_after_forget", lambda: print(mem.audit(full=True).ok, file=sys.stderr))
        step("retrieve", lambda: mem.retrieve("value 3 alpha", k=5))
    say("closed")


def open_once(path: str, engine: str) -> None:
    import gem
    start = time.perf_counter()
    mem = gem.open(path, engine=engine)
    seconds = time.perf_counter() - start
    say("open", s=round(seconds, 3), pool=mem._engine.store.opened_with.get("buffer_pool_size"))
    mem.close()


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--topics", type=int, default=100_000)
    p.add_argument("--engine", default="kuzu")
    p.add_argument("--updates", type=int, default=30)
    p.add_argument("--keep", help="build the memory here once and reuse it on later runs")
    p.add_argument("--child", choices=["build", "later", "open"])
    args = p.parse_args()
    if args.keep is None and args.child is None:
        with tempfile.TemporaryDirectory() as keep:
            args.keep = keep
            return run(args)
    return run(args)


def run(args: argparse.Namespace) -> int:
    path = os.path.join(args.keep, "memory.db")
    if args.child == "build":
        build(path, args.engine, args.topics, args.updates)
    elif args.child == "later":
        later(path, args.engine, args.topics)
    elif args.child == "open":
        open_once(path, args.engine)
    else:
        os.makedirs(args.keep, exist_ok=True)
        me = [sys.executable, __file__, "--topics", str(args.topics), "--engine", args.engine,
              "--updates", str(args.updates), "--keep", args.keep, "--child"]
        if not os.path.exists(path):
            subprocess.run([*me, "build"], check=False)
        os.sync()
        for _ in range(3):
            subprocess.run([*me, "open"], check=False)
        subprocess.run([*me, "later"], check=False)
        for _ in range(2):
            subprocess.run([*me, "open"], check=False)
    return 0


if __name__ == "__main__":
    sys.exit(main())
