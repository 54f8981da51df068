"""Maintenance cost: a forget + revise pass at 10k and 100k fields, and the per-commit cost
of checking C1-C6, as a ratio against the same transitions with the checks off.

    python bench/maintenance.py [--engine kuzu|ladybug] [--sizes 10000,100000] [--rounds 300]

A benchmark, not a test: it prints a table and asserts nothing about time.
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from datetime import datetime, timedelta, timezone


class Clock:
    def __init__(self) -> None:
        self.now = datetime(2026, 1, 1, tzinfo=timezone.utc)

    def __call__(self) -> datetime:
        return self.now


def build(gem, path: str, fields: int, engine: str, clock: Clock):
    """`fields` fields over fields/5 topics; a tenth of them updated (two entries), a few
    extension edges and re-explanations, then 45 simulated days so the ladder has work."""
    mem = gem.open(path, clock=clock, engine=engine)
    topics = max(1, fields // 5)
    for b in range(0, fields, 1000):
        mem.ingest([gem.Fact(f"Project {(b + i) % topics}", f"field {(b + i) // topics}",
                             f"value {b + i}") for i in range(min(1000, fields - b))])
        clock.now += timedelta(minutes=10)
    for b in range(0, fields // 10, 1000):
        mem.ingest([gem.Fact(f"Project {(b + i) % topics}", "field 0", f"updated {b + i}")
                    for i in range(min(1000, fields // 10 - b))])
    for i in range(0, min(topics - 1, 200), 2):
        mem.link(f"Project {i}", f"Project {i + 1}")
    mem.ingest([gem.Fact(f"Project {i}", "field 0", f"updated again {i}") for i in range(0, 200, 2)])
    clock.now += timedelta(days=45)
    return mem


def timed_passes(mem) -> tuple[float, float, dict]:
    start = time.perf_counter()
    forgot = mem.forget()
    forget_s = time.perf_counter() - start
    start = time.perf_counter()
    revised = mem.revise()
    revise_s = time.perf_counter() - start
    return forget_s, revise_s, {"attenuated": len(forgot["attenuated"]),
                                "flags": len(revised["flags_evaluated"])}


def check_overhead(gem, engine: str, rounds: int = 300) -> dict:
    """The same workload twice, checks on and off, interleaved in one process."""
    results = {}
    with tempfile.TemporaryDirectory() as d:
        mems = {}
        for mode in ("on", "off"):
            clock = Clock()
            mems[mode] = (build(gem, os.path.join(d, mode), 2000, engine, clock), clock)
            pipeline = gem.pipeline.DEFAULT
            mems[mode][0]._engine.pipeline = pipeline if mode == "on" else pipeline.without("conditions")
        samples = {"on": {"ingest": [], "retrieve": []}, "off": {"ingest": [], "retrieve": []}}
        for i in range(rounds):
            for mode in (("on", "off") if i % 2 else ("off", "on")):
                mem, clock = mems[mode]
                clock.now += timedelta(minutes=1)
                start = time.perf_counter()
                mem.ingest(gem.Fact(f"Project {i % 400}", "field 0", f"round {i}"))
                samples[mode]["ingest"].append(time.perf_counter() - start)
                start = time.perf_counter()
                mem.retrieve(topic=f"Project {(i * 7) % 400}")
                samples[mode]["retrieve"].append(time.perf_counter() - start)
        for mode, (mem, _) in mems.items():
            if mode == "off":
                mem._engine.pipeline = gem.pipeline.DEFAULT
            results[f"audit_{mode}"] = mem.audit().ok
            mem.close()
        for kind in ("ingest", "retrieve"):
            on = statistics.median(samples["on"][kind])
            off = statistics.median(samples["off"][kind])
            results[kind] = (on * 1e3, off * 1e3, on / off)
    return results


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--engine", default="kuzu", choices=["kuzu", "ladybug"])
    parser.add_argument("--sizes", default="10000,100000")
    parser.add_argument("--rounds", type=int, default=300,
                        help="single ingests and retrieves per side of the checks on/off ratio")
    args = parser.parse_args()
    import gem

    print(f"engine: {args.engine}")
    print(f"{'fields':>8} {'build s':>9} {'forget s':>9} {'revise s':>9} {'attenuated':>11} "
          f"{'flags':>6} {'audit':>6}")
    for size in (int(s) for s in args.sizes.split(",")):
        with tempfile.TemporaryDirectory() as d:
            clock = Clock()
            start = time.perf_counter()
            mem = build(gem, os.path.join(d, "m"), size, args.engine, clock)
            built = time.perf_counter() - start
            forget_s, revise_s, counts = timed_passes(mem)
            ok = mem.audit().ok
            mem.close()
        print(f"{size:>8} {built:>9.1f} {forget_s:>9.2f} {revise_s:>9.2f} "
              f"{counts['attenuated']:>11} {counts['flags']:>6} {str(ok):>6}")
    overhead = check_overhead(gem, args.engine, args.rounds)
    print()
    print(f"{'per-commit C1-C6 checks':24} {'on ms':>8} {'off ms':>8} {'on/off':>7}")
    for kind in ("ingest", "retrieve"):
        on, off, ratio = overhead[kind]
        print(f"{kind + ' (median)':24} {on:>8.2f} {off:>8.2f} {ratio:>7.2f}")
    print(f"audits after the runs: on={overhead['audit_on']} off={overhead['audit_off']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
