"""Governed ingest and retrieve-as-write, on kuzu and ladybug side by side, against the
same writes done ungoverned (raw Cypher, same rows).

    python bench/ingest_retrieve.py [--quick]

The two engines cannot share a process, so each runs in a child process of this one
and the parent prints one table with ratios. A benchmark, not a test: nothing here
asserts a time.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import datetime, timedelta, timezone


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(q * (len(ordered) - 1))))]


def ms(values: list[float]) -> tuple[float, float]:
    return statistics.median(values) * 1e3, pct(values, 0.95) * 1e3


class Clock:
    def __init__(self) -> None:
        self.now = datetime(2026, 1, 1, tzinfo=timezone.utc)

    def __call__(self) -> datetime:
        self.now += timedelta(milliseconds=1)
        return self.now


def facts(gem, n: int, topics: int, offset: int = 0) -> list:
    return [gem.Fact(f"Project {(offset + i) % topics}", f"field {(offset + i) // topics % 5}",
                     f"value {offset + i}", source="bench") for i in range(n)]


def raw_single(store, n: int) -> list[float]:
    """One transaction per fact: find or create topic and field, create the entry."""
    times = []
    for i in range(n):
        start = time.perf_counter()
        with store.transaction() as tx:
            tid, fid = f"raw{i % 50}", f"raw{i % 50}/f{i % 5}"
            if tx.scalar("MATCH (t:Topic {id: $id}) RETURN t.id", {"id": tid}) is None:
                tx.run("CREATE (:Topic {id: $id, title: $id, status: 'active'})", {"id": tid})
            if tx.scalar("MATCH (f:Field {id: $id}) RETURN f.id", {"id": fid}) is None:
                tx.run("MATCH (t:Topic {id: $t}) CREATE (t)-[:HAS_FIELD]->(:Field {id: $f, "
                       "name: $f, status: 'active'})", {"t": tid, "f": fid})
            tx.run("MATCH (f:Field {id: $f}) CREATE (f)-[:HAS_ENTRY]->(:Entry {id: $e, "
                   "value: $v, status: 'current'})", {"f": fid, "e": f"rawe{i}", "v": str(i)})
        times.append(time.perf_counter() - start)
    return times


def raw_batch(store, n: int, batch: int) -> float:
    """Same rows as a governed batch: topics, fields, entries and their edges, UNWIND'ed."""
    start = time.perf_counter()
    for b in range(0, n, batch):
        rows = [{"t": f"rb{(b + i) % 2000}", "f": f"rb{(b + i) % 2000}/f{(b + i) // 2000 % 5}",
                 "e": f"rbe{b + i}", "v": f"value {b + i}"} for i in range(batch)]
        with store.transaction() as tx:
            for i in range(0, len(rows), 200):
                chunk = rows[i:i + 200]
                tx.run("UNWIND $rows AS r MERGE (:Topic {id: r.t})", {"rows": chunk})
                tx.run("UNWIND $rows AS r MATCH (t:Topic {id: r.t}) MERGE (t)-[:HAS_FIELD]->"
                       "(:Field {id: r.f})", {"rows": chunk})
                tx.run("UNWIND $rows AS r MATCH (f:Field {id: r.f}) CREATE (f)-[:HAS_ENTRY]->"
                       "(:Entry {id: r.e, value: r.v, status: 'current'})", {"rows": chunk})
    return n / (time.perf_counter() - start)


def child(engine: str, quick: bool) -> dict:
    import gem
    from gem.store import open_store

    singles = 100 if quick else 400
    batch_total = 3000 if quick else 10000
    sizes = [1000] + ([] if quick else [10000])
    result: dict = {"engine": engine}
    with tempfile.TemporaryDirectory() as d:
        with gem.open(os.path.join(d, "gov.db"), clock=Clock(), engine=engine) as mem:
            times = []
            for f in facts(gem, singles, 50):
                start = time.perf_counter()
                mem.ingest(f)
                times.append(time.perf_counter() - start)
            result["single_gov"] = ms(times)
            start = time.perf_counter()
            for b in range(0, batch_total, 1000):
                mem.ingest(facts(gem, 1000, 2000, offset=b))
            result["batch_gov"] = batch_total / (time.perf_counter() - start)
        raw = open_store(os.path.join(d, "raw.db"), engine)
        result["single_raw"] = ms(raw_single(raw, singles))
        result["batch_raw"] = raw_batch(raw, batch_total, 1000)
        raw.close()
        for size in sizes:
            with gem.open(os.path.join(d, f"r{size}.db"), clock=Clock(), engine=engine) as mem:
                for b in range(0, size, 1000):
                    mem.ingest([gem.Fact(f"Project {b + i}", "deadline", f"day {b + i}")
                                for i in range(1000)])
                times = []
                for i in range(200 if quick else 300):
                    start = time.perf_counter()
                    mem.retrieve(f"deadline of project {i * 7 % size}", k=5)
                    times.append(time.perf_counter() - start)
                result[f"retrieve_{size}"] = ms(times)
                times = []
                for i in range(200 if quick else 300):
                    start = time.perf_counter()
                    mem.retrieve(topic=f"Project {i * 7 % size}", fields=["deadline"])
                    times.append(time.perf_counter() - start)
                result[f"lookup_{size}"] = ms(times)
    return result


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="smaller sizes")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(child(args.child, args.quick)))
        return 0
    results = []
    for engine in ("kuzu", "ladybug"):
        cmd = [sys.executable, __file__, "--child", engine] + (["--quick"] if args.quick else [])
        done = subprocess.run(cmd, capture_output=True, text=True)
        if done.returncode != 0:
            print(f"{engine}: failed\n{done.stderr[-2000:]}", file=sys.stderr)
            continue
        results.append(json.loads(done.stdout.strip().splitlines()[-1]))
    rows = [("single ingest p50 / p95 (ms)", "single_gov", "ms"),
            ("  raw single write p50 / p95 (ms)", "single_raw", "ms"),
            ("batch ingest (facts/s, batches of 1000)", "batch_gov", "rate"),
            ("  raw batch write (facts/s)", "batch_raw", "rate")]
    for key in sorted(k for k in results[0] if k.startswith(("retrieve_", "lookup_"))):
        kind, size = key.split("_")
        label = "free-text retrieve" if kind == "retrieve" else "structured retrieve"
        rows.append((f"{label} @ {int(size):,} topics p50 / p95 (ms)", key, "ms"))
    head = f"{'measure':48}" + "".join(f"{r['engine']:>22}" for r in results)
    print(head)
    print("-" * len(head))
    for label, key, kind in rows:
        cells = []
        for r in results:
            v = r[key]
            cells.append(f"{v[0]:9.2f} / {v[1]:8.2f}" if kind == "ms" else f"{v:20,.0f}")
        print(f"{label:48}" + "".join(f"{c:>22}" for c in cells))
    print("-" * len(head))
    for label, gov, raw, better_low in (("governed/raw single p50", "single_gov", "single_raw", True),
                                        ("governed/raw batch throughput", "batch_gov", "batch_raw", False)):
        cells = []
        for r in results:
            g = r[gov][0] if isinstance(r[gov], list) else r[gov]
            w = r[raw][0] if isinstance(r[raw], list) else r[raw]
            cells.append(f"{(g / w if better_low else w / g):.2f}x slower")
        print(f"{label:48}" + "".join(f"{c:>22}" for c in cells))
    if len(results) == 2:
        k, l = results
        print(f"{'ladybug speed-up on single ingest p50':48}{k['single_gov'][0] / l['single_gov'][0]:>22.2f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
