"""Governed ingest and retrieve-as-write on kuzu and LadybugDB side by side, against raw
writes of exactly the same rows.

    python bench/ingest_retrieve.py [--quick | --topics 10000 --rounds 300]

For each operation, the governed call (resolution, policies, C1-C6, log, derived upkeep,
flush) is timed, then the same write set is replayed raw into a twin database (every column,
supersessions, salience updates, the log row; one engine transaction; nothing else), the two
interleaved after a warm-up (bench/common.py). A benchmark, not a test: nothing asserts a time.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile

from common import Clock, RawTwin, Recorder, exit_status, ms, side_by_side, timed


def child(engine: str, topics: int, rounds: int) -> dict:
    import gem

    result: dict = {"engine": engine, "topics": topics}
    with tempfile.TemporaryDirectory() as d:
        clock = Clock()
        mem = gem.open(os.path.join(d, "gov.db"), clock=clock, engine=engine)
        recorder = Recorder(mem)
        raw = RawTwin(os.path.join(d, "raw.db"), engine)

        def batch(offset: int, size: int, update: bool) -> list:
            return [gem.Fact(f"Project {(offset + i) % topics}", f"field {i % 5}",
                             f"{'new ' if update else ''}value {offset + i}", source="bench")
                    for i in range(size)]

        # New topics, 1,000 facts per transition (5 fields of 200 topics), then updates of them.
        for key, update in (("batch_new", False), ("batch_update", True)):
            gov = rawt = 0.0
            for b in range(0, topics * 5, 1000):
                facts = [gem.Fact(f"Project {b // 5 + i // 5}", f"field {i % 5}",
                                  f"{'new ' if update else ''}value {b + i}", source="bench")
                         for i in range(1000)]
                gov += timed(lambda: mem.ingest(facts))
                rawt += raw.replay(recorder.take())
            result[key] = (topics * 5 / gov, topics * 5 / rawt)

        def interleaved(op) -> tuple[list[float], list[float]]:
            for i in range(20):  # warm-up
                op(i)
                raw.replay(recorder.take())
            gov, rawt = [], []
            for i in range(rounds):
                gov.append(timed(lambda: op(i)))
                rawt.append(raw.replay(recorder.take()))
            return gov, rawt

        def single(i: int) -> None:
            mem.ingest(gem.Fact(f"Project {i * 7 % topics}", "field 1", f"single {i}"))

        def structured(i: int) -> None:
            mem.retrieve(topic=f"Project {i * 13 % topics}", fields=["field 2"])

        def text(i: int) -> None:
            mem.retrieve(f"field 3 of project {i * 17 % topics}", k=5)

        for key, op in (("single", single), ("structured", structured), ("text", text)):
            gov, rawt = interleaved(op)
            result[key] = (ms(gov), ms(rawt))
        mem.close()
        raw.close()
    return result


def table(results: dict[str, dict]) -> str:
    engines = list(results)
    lines = [f"{'measure':<46}" + "".join(f"{e:>24}" for e in engines), "-" * (46 + 24 * len(engines))]

    def row(label: str, cells: list[str]) -> None:
        lines.append(f"{label:<46}" + "".join(f"{c:>24}" for c in cells))

    for key, label in (("batch_new", "batch ingest, new topics (facts/s)"),
                       ("batch_update", "batch ingest, updates (facts/s)")):
        row(label + " governed", [f"{results[e][key][0]:,.0f}" for e in engines])
        row("  same rows raw", [f"{results[e][key][1]:,.0f}" for e in engines])
        row("  governed / raw time", [f"{results[e][key][1] / results[e][key][0]:.2f}x" for e in engines])
    for key, label in (("single", "single ingest"), ("structured", "structured retrieve"),
                       ("text", "free-text retrieve")):
        row(f"{label} p50 / p95 (ms) governed",
            [f"{results[e][key][0][0]:.2f} / {results[e][key][0][1]:.2f}" for e in engines])
        row("  same rows raw", [f"{results[e][key][1][0]:.2f} / {results[e][key][1][1]:.2f}" for e in engines])
        row("  governed / raw p50", [f"{results[e][key][0][0] / results[e][key][1][0]:.2f}x" for e in engines])
    lines.append("-" * (46 + 24 * len(engines)))
    lines.append(f"topics: {results[engines[0]]['topics']:,}; 5 fields each; batches of 1,000 facts")
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="--topics 1000 --rounds 100")
    parser.add_argument("--topics", type=int, default=None, help="default 10,000")
    parser.add_argument("--rounds", type=int, default=None,
                        help="timed single ingests and retrieves of each kind (default 300)")
    parser.add_argument("--child", choices=["kuzu", "ladybug"])
    parser.add_argument("--engines", default="kuzu,ladybug")
    args = parser.parse_args()
    topics = args.topics or (1000 if args.quick else 10_000)
    rounds = args.rounds or (100 if args.quick else 300)
    if args.child:
        print(json.dumps(child(args.child, topics, rounds)))
        return 0
    extra = ["--topics", str(topics), "--rounds", str(rounds)]
    results = side_by_side(__file__, extra, tuple(args.engines.split(",")))
    print(table(results))
    return exit_status(results, args.engines.split(","))


if __name__ == "__main__":
    sys.exit(main())
