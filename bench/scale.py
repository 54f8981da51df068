"""How gem's cost grows with the size of a memory: 1k, 10k, 100k topics (10 fields each, so
up to 1M entries), on kuzu and LadybugDB side by side.

    python bench/scale.py [--sizes 1000,10000,100000] [--fields 10] [--engines kuzu,ladybug]

One child process per engine grows one memory through the sizes. At each size it measures,
per operation: batch ingest creating topics and updating them (facts/s), single-fact ingest,
structured and free-text retrieve (p50/p95), a forgetting pass after 45 idle days (everything
faded: the cost per unit it attenuates) and the pass right after it (nothing left: the cost of
finding what faded), opening the database (snapshot current), a full and an incremental
audit, the process's RSS and the bytes on disk per fact. Batches and single ingests are compared
with raw writes of exactly the same rows (bench/common.py), interleaved; ingests, retrieves and
forgetting passes also show the time they spent in the engine (every statement they sent, reads
included, BEGIN and COMMIT): the share no change to gem's own code removes.
A benchmark, not a test: nothing asserts a time.
"""
from __future__ import annotations

import argparse
import json
import os
import random
import sys
import tempfile
import time

from common import (GOVERNANCE_STAGES, Clock, EngineTime, RawTwin, Recorder, StageTime, disk_bytes,
                    ms, rss_mb, rss_now_mb, side_by_side, timed)


def child(engine: str, sizes: list[int], fields: int) -> dict:
    import gem
    from gem.derived import snapshot_dir

    rng = random.Random(7)
    out: dict = {"engine": engine, "fields": fields, "sizes": {}}
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "gov.db")
        clock = Clock()
        mem = gem.open(path, clock=clock, engine=engine)
        recorder, engine_time = Recorder(mem), EngineTime(mem)
        stage_time = StageTime(mem)
        raw = RawTwin(os.path.join(d, "raw.db"), engine)
        topics = facts = 0
        batch_topics = max(1, 2000 // fields)

        def stages(into: dict, raw_seconds: float) -> None:
            """Seconds per stage over these batches, in the engine, and the raw writes'."""
            for name, seconds in stage_time.take().items():
                into[name] = into.get(name, 0.0) + seconds
            into["engine"] = into.get("engine", 0.0) + engine_time.take()
            into["raw"] = into.get("raw", 0.0) + raw_seconds

        def grow_to(n: int, into: dict) -> tuple[float, float]:
            nonlocal topics, facts
            gov = rawt = 0.0
            done = 0
            stage_time.take()
            engine_time.take()
            while topics < n:
                size = min(batch_topics, n - topics)
                batch = [gem.Fact(f"Topic {topics + i} {WORDS[(topics + i) % len(WORDS)]}",
                                  f"field {j}", f"value {topics + i}.{j} {WORDS[(i * 7 + j) % len(WORDS)]}")
                         for i in range(size) for j in range(fields)]
                gov += timed(lambda: mem.ingest(batch))
                replayed = raw.replay(recorder.take())
                rawt += replayed
                stages(into, replayed)
                topics += size
                facts += len(batch)
                done += len(batch)
            return done / gov, done / rawt

        def updates(rounds: int, into: dict) -> tuple[float, float]:
            nonlocal facts
            gov = rawt = 0.0
            done = 0
            stage_time.take()
            engine_time.take()
            for _ in range(rounds):
                # 2,000 updates: distinct (topic, field) pairs of existing topics
                pairs = rng.sample(range(topics * fields), min(2000, topics * fields))
                batch = [gem.Fact(f"Topic {p // fields} {WORDS[p // fields % len(WORDS)]}",
                                  f"field {p % fields}", f"updated {rng.random():.6f}") for p in pairs]
                gov += timed(lambda: mem.ingest(batch))
                replayed = raw.replay(recorder.take())
                rawt += replayed
                stages(into, replayed)
                facts += len(batch)
                done += len(batch)
            return done / gov, done / rawt

        for n in sizes:
            row: dict = {}
            start = time.perf_counter()
            row["new_stages"], row["update_stages"] = {}, {}
            row["batch_new"] = grow_to(n, row["new_stages"])
            row["grow_s"] = time.perf_counter() - start
            # 30 batches (60k facts): enough for the engine's periodic checkpoints (every 6 such
            # batches on LadybugDB at its 16 MiB default, ~2 s each at 100k topics) to be paid
            # in the measured time, not after it.
            row["batch_update"] = updates(30, row["update_stages"])
            gov, rawt, engine_share = [], [], []
            for i in range(200):
                t = rng.randrange(topics)
                fact = gem.Fact(f"Topic {t} {WORDS[t % len(WORDS)]}", "field 1", f"single {i}")
                engine_time.take()
                gov.append(timed(lambda: mem.ingest(fact)))
                engine_share.append(engine_time.take())
                rawt.append(raw.replay(recorder.take()))
                facts += 1
            row["single"] = (ms(gov[20:]), ms(rawt[20:]))
            row["single_engine"] = ms(engine_share[20:])

            def retrieves(requests: list[dict]) -> tuple[tuple[float, float], tuple[float, float]]:
                """Governed p50/p95 and the engine's share of the same calls."""
                gov, engine_share = [], []
                for request in requests:
                    engine_time.take()
                    gov.append(timed(lambda: mem.retrieve(**request)))
                    engine_share.append(engine_time.take())
                recorder.take()
                return ms(gov[20:]), ms(engine_share[20:])

            row["structured"], row["structured_engine"] = retrieves(
                [{"topic": f"Topic {t} {WORDS[t % len(WORDS)]}", "fields": ["field 2"]}
                 for t in (rng.randrange(topics) for _ in range(220))])
            row["first_text"] = timed(lambda: mem.retrieve("value 3 stale summaries refresh"))
            row["text"], row["text_engine"] = retrieves(
                [{"query": f"value {t}.2 {WORDS[t % len(WORDS)]}", "k": 5}
                 for t in (rng.randrange(topics) for _ in range(220))])
            row["audit_full"] = timed(lambda: mem.audit(full=True))
            mem.ingest(gem.Fact("Topic 1 " + WORDS[1], "field 0", "after the audit"))
            row["audit_since"] = timed(lambda: mem.audit())
            raw.replay(recorder.take())
            mem.close()
            raw.reopen()
            # The two closes leave GBs for the kernel to write back at 100k topics (checkpoints,
            # the snapshot); an open timed during that measured the disk: 3.6 s, 0.7 s after it.
            os.sync()
            opened: list = []
            row["open"] = timed(lambda: opened.append(gem.open(path, clock=clock, engine=engine)))
            mem = opened[0]
            recorder, engine_time = Recorder(mem), EngineTime(mem)
            stage_time = StageTime(mem)
            clock.advance(days=45)
            for key in ("forget", "forget_again"):
                report: dict = {}
                engine_time.take()
                row[key] = timed(lambda: report.update(mem.forget()))
                row[key + "_engine"] = engine_time.take()
                row["attenuated" + key[len("forget"):]] = len(report["levels"])
            raw.replay(recorder.take())  # not compared in time; the twin holds the same rows
            row["rss_mb"] = rss_mb()
            row["rss_now_mb"] = rss_now_mb()
            row["facts"] = facts
            mem.close()
            raw.reopen()
            row["bytes_per_fact"] = disk_bytes(path) / facts
            row["derived_bytes_per_fact"] = disk_bytes(snapshot_dir(path)) / facts
            row["raw_bytes_per_fact"] = disk_bytes(raw.path) / facts
            mem = gem.open(path, clock=clock, engine=engine)
            recorder, engine_time = Recorder(mem), EngineTime(mem)
            stage_time = StageTime(mem)
            out["sizes"][str(n)] = row
            print(json.dumps({"progress": n, **row}), file=sys.stderr, flush=True)
        mem.close()
        raw.close()
    return out


WORDS = ("alpha", "budget", "launch", "design", "review", "hiring", "roadmap", "pricing", "audit",
         "migration", "onboarding", "security", "analytics", "support", "research", "partner")


def governance(stages: dict) -> str:
    """Policies, C5's bound, C1-C6 and the log, against the raw writes of the same rows."""
    return f"{sum(stages.get(s, 0.0) for s in GOVERNANCE_STAGES) / stages['raw']:.2f}x"


def writing(stages: dict) -> str:
    """The operator (the proposed state) and the flush (its writes), against the raw writes."""
    return f"{stages['operator'] / stages['raw']:.2f}x / {stages['flush'] / stages['raw']:.2f}x"


def table(results: dict[str, dict]) -> str:
    cols = [(e, s) for e, r in results.items() for s in r["sizes"]]
    width = 22
    head = f"{'measure':<40}" + "".join(f"{e + ' @' + f'{int(s):,}':>{width}}" for e, s in cols)
    lines = [head, "-" * len(head)]

    def row(label: str, fn) -> None:
        lines.append(f"{label:<40}" + "".join(f"{fn(results[e]['sizes'][s]):>{width}}" for e, s in cols))

    row("batch ingest, new topics (facts/s)", lambda r: f"{r['batch_new'][0]:,.0f}")
    row("  same rows raw (facts/s)", lambda r: f"{r['batch_new'][1]:,.0f}")
    row("batch ingest, updates (facts/s)", lambda r: f"{r['batch_update'][0]:,.0f}")
    row("  same rows raw (facts/s)", lambda r: f"{r['batch_update'][1]:,.0f}")
    row("  governed / raw time", lambda r: f"{r['batch_update'][1] / r['batch_update'][0]:.2f}x")
    for kind in ("new", "update"):
        row(f"  {kind}: governance stages / raw time", lambda r, k=kind: governance(r[f"{k}_stages"]))
        row(f"  {kind}: operator / flush / raw time", lambda r, k=kind: writing(r[f"{k}_stages"]))
        row(f"  {kind}: in the engine / raw time",
            lambda r, k=kind: f"{r[f'{k}_stages']['engine'] / r[f'{k}_stages']['raw']:.2f}x")
    row("single ingest p50 / p95 ms", lambda r: f"{r['single'][0][0]:.2f} / {r['single'][0][1]:.2f}")
    row("  same rows raw p50 / p95 ms", lambda r: f"{r['single'][1][0]:.2f} / {r['single'][1][1]:.2f}")
    row("  in the engine p50 / p95 ms", lambda r: f"{r['single_engine'][0]:.2f} / {r['single_engine'][1]:.2f}")
    row("structured retrieve p50 / p95 ms", lambda r: f"{r['structured'][0]:.2f} / {r['structured'][1]:.2f}")
    row("  in the engine p50 / p95 ms",
        lambda r: f"{r['structured_engine'][0]:.2f} / {r['structured_engine'][1]:.2f}")
    row("free-text retrieve p50 / p95 ms", lambda r: f"{r['text'][0]:.2f} / {r['text'][1]:.2f}")
    row("  in the engine p50 / p95 ms", lambda r: f"{r['text_engine'][0]:.2f} / {r['text_engine'][1]:.2f}")
    row("  first after growth (refresh) s", lambda r: f"{r['first_text']:.2f}")
    row("  first / later p50", lambda r: f"{r['first_text'] * 1e3 / r['text'][0]:.1f}x")
    row("forget pass s (units attenuated)", lambda r: f"{r['forget']:.2f} ({r['attenuated']:,})")
    row("  in the engine s", lambda r: f"{r['forget_engine']:.2f}")
    row("  per unit attenuated us", lambda r: f"{r['forget'] / max(1, r['attenuated']) * 1e6:.0f}")
    row("  next pass ms (units attenuated)",
        lambda r: f"{r['forget_again'] * 1e3:.1f} ({r['attenuated_again']:,})")
    row("    in the engine ms", lambda r: f"{r['forget_again_engine'] * 1e3:.1f}")
    row("open, snapshot current s", lambda r: f"{r['open']:.2f}")
    row("audit full s / since last s", lambda r: f"{r['audit_full']:.2f} / {r['audit_since']:.3f}")
    row("RSS MB, peak / now", lambda r: f"{r['rss_mb']:,.0f} / {r['rss_now_mb']:,.0f}")
    row("  peak per fact KB", lambda r: f"{r['rss_mb'] * 1024 / r['facts']:.2f}")
    row("bytes on disk per fact", lambda r: f"{r['bytes_per_fact']:,.0f}")
    row("  of them derived files (snapshot)", lambda r: f"{r['derived_bytes_per_fact']:,.0f}")
    row("  same rows raw (no snapshot)", lambda r: f"{r['raw_bytes_per_fact']:,.0f}")
    row("facts", lambda r: f"{r['facts']:,}")
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="1000,10000,100000")
    parser.add_argument("--fields", type=int, default=10)
    parser.add_argument("--engines", default="kuzu,ladybug")
    parser.add_argument("--child", choices=["kuzu", "ladybug"])
    parser.add_argument("--json", help="also write the results to this file")
    args = parser.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    if args.child:
        print(json.dumps(child(args.child, sizes, args.fields)))
        return 0
    results = side_by_side(__file__, ["--sizes", args.sizes, "--fields", str(args.fields)],
                           tuple(args.engines.split(",")))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=1)
    print(table(results))
    return 0


if __name__ == "__main__":
    sys.exit(main())
