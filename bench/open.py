"""Opening a memory whose snapshot is current, this tree's code against an earlier revision's,
on the same database, side by side in one run (issue 28 item 6: open <= 1 s at 100k topics).

    python bench/open.py [--topics 10000] [--baseline main] [--opens 3] [--keep DIR]

The memory is N topics of 10 fields (scale.py's shape), built once by the baseline (a memory
stores its policies, and later code reads older ones) and closed, so its snapshot is current.
Each open runs in a fresh process (the parser, the imports and the snapshot all cold, as for a
user), alternating baseline and this tree, and prints the wall and CPU time of `gem.open`
alone; one more open per side runs under cProfile for the top of its profile. Both sides open
a copy of the same database: an open may rewrite nothing, but a close may write a snapshot.
Each side first opens its copy once and saves its snapshot again, so that it opens a snapshot
in its own format. A benchmark, not a test: nothing asserts a time.

Measured (7 opens a side, best and median; the shared 2-core VM at load 3-7), main (5147e9d)
against the parser loaded from its tables and the snapshot's ids, names, touched-by lists and
summary index kept unread until first used: 10k topics, CPU 0.47 / 0.51 -> 0.16 / 0.22 s,
wall 0.93 / 1.22 -> 0.33 / 0.58 s; 30k topics, CPU 0.55 / 0.63 -> 0.18 / 0.21 s, wall
1.19 / 1.36 -> 0.36 / 0.49 s. Per topic (best CPU, 10k -> 30k): 4.3 -> ~1 us.
"""
from __future__ import annotations

import argparse
import cProfile
import io
import json
import os
import pstats
import sys
import tempfile
import time

from common import build_once, checkout, copy_db, run_child

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)


def build(path: str, topics: int, fields: int = 10) -> None:
    import gem
    with gem.open(path) as mem:
        for start in range(0, topics, 500):
            size = min(500, topics - start)
            mem.ingest([gem.Fact(f"Topic {start + i}", f"field {j}", f"value {start + i}.{j}")
                        for i in range(size) for j in range(fields)])
        # a free-text query derives every summary and search document, as a memory in use
        # has them: the snapshot then holds the summaries' indexes and the unit layer
        mem.retrieve("value 1.1", k=5)


def child(path: str, profile: bool) -> dict:
    """Open `path` once (timed, or profiled), then check the state is there and close."""
    import gem
    from gem.text import name_key
    out: dict = {}
    prof = cProfile.Profile() if profile else None
    start, cpu = time.perf_counter(), time.process_time()
    if prof is not None:
        prof.enable()
    mem = gem.open(path)
    if prof is not None:
        prof.disable()
    out["open_s"], out["open_cpu"] = time.perf_counter() - start, time.process_time() - cpu
    try:  # the state is all there (a check that changes nothing: the next open is the same)
        scope = mem._engine.derived.scope("default")
        out["topics"] = len(scope.topics)
        assert scope.names.key_holders(name_key("Topic 0")) and scope.topics.row_of
    finally:
        mem.close()
    if prof is not None:
        text = io.StringIO()
        pstats.Stats(prof, stream=text).sort_stats("cumulative").print_stats(15)
        out["profile"] = text.getvalue()
    return out


def resave(path: str) -> dict:
    """Open `path` and save its snapshot again at close: each side then opens a snapshot in
    its own format, as a memory it has used."""
    import gem
    mem = gem.open(path)
    mem._engine.derived.saved_mark = None
    mem.close()
    return {}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--topics", type=int, default=10_000)
    parser.add_argument("--baseline", default="main")
    parser.add_argument("--opens", type=int, default=3)
    parser.add_argument("--keep", help="build the memory here once and reuse it on later runs")
    parser.add_argument("--no-profile", action="store_true")
    parser.add_argument("--child")
    parser.add_argument("--profile", action="store_true")
    parser.add_argument("--build")
    parser.add_argument("--resave")
    args = parser.parse_args()
    if args.child:
        print(json.dumps(child(args.child, args.profile)))
        return 0
    if args.resave:
        print(json.dumps(resave(args.resave)))
        return 0
    if args.build:
        build(args.build, args.topics)
        return 0
    with tempfile.TemporaryDirectory() as d:
        old_code = checkout(args.baseline, os.path.join(d, "baseline"))
        base = os.path.join(args.keep or d, f"open{args.topics}", "m.db")
        build_once(__file__, base, old_code, ["--topics", str(args.topics)])
        sides = [("baseline", old_code), ("this tree", ROOT)]
        dbs = {name: copy_db(base, os.path.join(d, "db-" + name.replace(" ", ""))) for name, _ in sides}
        for name, code in sides:
            run_child(__file__, code, ["--resave", dbs[name]])
        results: dict[str, list[dict]] = {name: [] for name, _ in sides}
        profiles: dict[str, str] = {}
        for r in range(args.opens):
            for name, code in sides if r % 2 == 0 else sides[::-1]:
                results[name].append(run_child(__file__, code, ["--child", dbs[name]]))
                print(name, results[name][-1], file=sys.stderr, flush=True)
        if not args.no_profile:
            for name, code in sides:
                profiles[name] = run_child(__file__, code, ["--child", dbs[name], "--profile"])["profile"]
    for name, text in profiles.items():
        print(f"--- {name}: cProfile of one open, top 15 by cumulative time", file=sys.stderr)
        print(text, file=sys.stderr)
    print(f"{args.topics} topics, {args.opens} opens each in a fresh process (best, median)")
    print(f"{'':10} {'open s':>8} {'median':>8} {'cpu s':>8} {'median':>8}")
    for name, runs in results.items():
        walls = sorted(x["open_s"] for x in runs)
        cpus = sorted(x["open_cpu"] for x in runs)
        print(f"{name:10} {walls[0]:>8.3f} {walls[len(walls) // 2]:>8.3f} "
              f"{cpus[0]:>8.3f} {cpus[len(cpus) // 2]:>8.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
