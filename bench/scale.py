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
                    exit_status,
                    ms, rss_mb, rss_now_mb, side_by_side, timed)


def topic_name(t: int) -> str:
    return f"Topic {t} {WORDS[t % len(WORDS)]}"


# The workload, as (topic, field, value) triples and queries, drawn in the same order from the
# same seeded generator by every system's child, so each sees the same facts and queries.

def new_facts(start: int, size: int, fields: int) -> list[tuple[str, str, str]]:
    return [(topic_name(start + i), f"field {j}", f"value {start + i}.{j} {WORDS[(i * 7 + j) % len(WORDS)]}")
            for i in range(size) for j in range(fields)]


def update_facts(rng: random.Random, topics: int, fields: int) -> list[tuple[str, str, str]]:
    """2,000 updates: distinct (topic, field) pairs of existing topics."""
    pairs = rng.sample(range(topics * fields), min(2000, topics * fields))
    return [(topic_name(p // fields), f"field {p % fields}", f"updated {rng.random():.6f}") for p in pairs]


def single_facts(rng: random.Random, topics: int) -> list[tuple[str, str, str]]:
    return [(topic_name(rng.randrange(topics)), "field 1", f"single {i}") for i in range(200)]


def structured_topics(rng: random.Random, topics: int) -> list[str]:
    return [topic_name(rng.randrange(topics)) for _ in range(220)]


FIRST_QUERY = "value 3 stale summaries refresh"


def text_queries(rng: random.Random, topics: int) -> list[str]:
    return [f"value {t}.2 {WORDS[t % len(WORDS)]}" for t in (rng.randrange(topics) for _ in range(220))]


def child(engine: str, sizes: list[int], fields: int, rounds: int) -> dict:
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
                batch = [gem.Fact(*f) for f in new_facts(topics, size, fields)]
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
                batch = [gem.Fact(*f) for f in update_facts(rng, topics, fields)]
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
            # 30 batches (60k facts) by default: enough for the engine's periodic checkpoints
            # (every 6 such batches on LadybugDB at its 16 MiB default, ~2 s each at 100k
            # topics) to be paid in the measured time, not after it.
            row["batch_update"] = updates(rounds, row["update_stages"])
            gov, rawt, engine_share = [], [], []
            for single in single_facts(rng, topics):
                fact = gem.Fact(*single)
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
                [{"topic": t, "fields": ["field 2"]} for t in structured_topics(rng, topics)])
            row["first_text"] = timed(lambda: mem.retrieve(FIRST_QUERY))
            row["text"], row["text_engine"] = retrieves(
                [{"query": q, "k": 5} for q in text_queries(rng, topics)])
            row["audit_full"] = timed(lambda: mem.audit(full=True))
            mem.ingest(gem.Fact(topic_name(1), "field 0", "after the audit"))
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


def peer_child(name: str, sizes: list[int], fields: int, rounds: int) -> dict:
    """The same workload through a peer (bench/peers.py): the same facts and queries in the
    same order, measured the same way; what has no equivalent in the peer is left out."""
    import peers

    out: dict = {"peer": name, "fields": fields, "sizes": {}}
    if not peers.installed(name):
        out["missing"] = True
        return out
    rng = random.Random(7)
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "peer")
        os.mkdir(path)
        opened: list = []
        out["first_open"] = timed(lambda: opened.append(peers.open_peer(name, path)))
        peer = opened[0]
        topics = facts = 0
        batch_topics = max(1, 2000 // fields)
        for n in sizes:
            row: dict = {}
            start = time.perf_counter()
            seconds = 0.0
            done = 0
            while topics < n:
                size = min(batch_topics, n - topics)
                batch = new_facts(topics, size, fields)
                seconds += timed(lambda: peer.add(batch))
                topics += size
                done += len(batch)
            facts += done
            row["batch_new"] = (done / seconds, None)
            row["grow_s"] = time.perf_counter() - start
            seconds, done = 0.0, 0
            for _ in range(rounds):
                batch = update_facts(rng, topics, fields)
                seconds += timed(lambda: peer.add(batch))
                done += len(batch)
            row["batch_update"] = (done / seconds, None)
            single = [timed(lambda: peer.add([fact])) for fact in single_facts(rng, topics)]
            facts += done + len(single)
            row["single"] = (ms(single[20:]), None)
            queried = structured_topics(rng, topics)
            if peer.structured_op:
                row["structured"] = ms([timed(lambda: peer.structured(t, "field 2")) for t in queried][20:])
            row["first_text"] = timed(lambda: peer.search(FIRST_QUERY, 5))
            row["text"] = ms([timed(lambda: peer.search(q, 5)) for q in text_queries(rng, topics)][20:])
            peer.close()
            os.sync()
            row["open"] = timed(lambda: opened.append(peers.open_peer(name, path)))
            peer = opened[-1]
            row["rss_mb"] = rss_mb()
            row["rss_now_mb"] = rss_now_mb()
            row["facts"] = facts
            row["bytes_per_fact"] = disk_bytes(path) / facts
            out["sizes"][str(n)] = row
            print(json.dumps({"progress": n, "peer": name, **row}), file=sys.stderr, flush=True)
        peer.close()
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
    """A column per system and size; "-" where a system has no such measure (a peer has no
    raw twin, engine share, forgetting or audit), "not installed" for a missing peer."""
    cols = [(e, s) for e, r in results.items() for s in (r["sizes"] or [None])]
    width = 22
    head = f"{'measure':<40}" + "".join(
        f"{e + (' @' + f'{int(s):,}' if s else ''):>{width}}" for e, s in cols)
    lines = [head, "-" * len(head)]

    def cell(fn, e: str, s: str | None, first: bool) -> str:
        if s is None:
            return "not installed" if first else "-"
        try:
            return fn(results[e]["sizes"][s])
        except (KeyError, TypeError):
            return "-"

    def row(label: str, fn) -> None:
        first = len(lines) == 2
        lines.append(f"{label:<40}" + "".join(f"{cell(fn, e, s, first):>{width}}" for e, s in cols))

    row("batch ingest, new topics (facts/s)", lambda r: f"{r['batch_new'][0]:,.0f}")
    row("  same rows raw (facts/s)", lambda r: f"{r['batch_new'][1]:,.0f}")
    row("  governed / raw time", lambda r: f"{r['batch_new'][1] / r['batch_new'][0]:.2f}x")
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
    lines += growth(results)
    return "\n".join(lines)


GROWTH = (  # the cost of one operation (seconds per fact for ingests)
    ("batch ingest, new topics", lambda r: 1 / r["batch_new"][0]),
    ("batch ingest, updates", lambda r: 1 / r["batch_update"][0]),
    ("single ingest p50", lambda r: r["single"][0][0]),
    ("structured retrieve p95", lambda r: r["structured"][1]),
    ("free-text retrieve p95", lambda r: r["text"][1]),
    ("forget pass per unit attenuated", lambda r: r["forget"] / max(1, r["attenuated"])),
    ("audit full per fact", lambda r: r["audit_full"] / r["facts"]),
    ("open", lambda r: r["open"]),
    ("RSS peak per fact", lambda r: r["rss_mb"] / r["facts"]),
)


def growth(results: dict[str, dict]) -> list[str]:
    """Each operation's cost at the largest size over its cost at the smallest (target 1.5x
    from 10k to 100k topics)."""
    lines = []
    for e, r in results.items():
        sizes = list(r["sizes"])
        if len(sizes) < 2:
            continue
        small, large = r["sizes"][sizes[0]], r["sizes"][sizes[-1]]
        lines.append(f"\ngrowth {e} {int(sizes[0]):,} -> {int(sizes[-1]):,} topics (cost ratio)")
        for label, cost in GROWTH:
            try:
                lines.append(f"  {label:<38}{cost(large) / cost(small):>10.2f}x")
            except (KeyError, TypeError, ZeroDivisionError):
                continue
    return lines


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="1000,10000,100000")
    parser.add_argument("--fields", type=int, default=10)
    parser.add_argument("--engines", default="kuzu,ladybug")
    parser.add_argument("--updates", type=int, default=30, help="batches of 2,000 updates per size")
    parser.add_argument("--peers", default="mem0,kuzu-memory",
                        help="peer rows (bench/peers.py), '' for none; NAME:N runs NAME only "
                             "up to N topics (mem0 writes ~30 facts/s here)")
    parser.add_argument("--child", choices=["kuzu", "ladybug", "mem0", "kuzu-memory"])
    parser.add_argument("--json", help="also write the results to this file")
    parser.add_argument("--table", nargs="+", metavar="JSON",
                        help="only print the table of results written by --json (one or more runs)")
    args = parser.parse_args()
    if args.table:
        merged: dict = {}
        for name in args.table:
            with open(name) as f:
                for system, result in json.load(f).items():
                    merged[system if system not in merged else f"{system} ({name})"] = result
        print(table(merged))
        return 0
    sizes = [int(s) for s in args.sizes.split(",")]
    peers = dict((p.split(":") + [""])[:2] for p in args.peers.split(",") if p)
    if args.child in peers:
        limit = int(peers[args.child] or sizes[-1])
        print(json.dumps(peer_child(args.child, [s for s in sizes if s <= limit], args.fields,
                                    args.updates)))
        return 0
    if args.child:
        print(json.dumps(child(args.child, sizes, args.fields, args.updates)))
        return 0
    runs = (*filter(None, args.engines.split(",")), *peers)
    results = side_by_side(__file__, ["--sizes", args.sizes, "--fields", str(args.fields),
                                      "--updates", str(args.updates), "--peers", args.peers], runs)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=1)
    print(table(results))
    return exit_status(results, runs)


if __name__ == "__main__":
    sys.exit(main())
