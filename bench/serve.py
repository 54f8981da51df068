"""Recall and remember through HTTP and MCP against in-process calls, side by side.

    python bench/serve.py [--topics 200] [--ops 60] [--rounds 4] [--engine kuzu]

One client, one call at a time (closed loop), on 127.0.0.1. The in-process side calls
gem.api.ops on a Memory in this process (the same function the server runs for each
request); HTTP (httpx) and MCP (the SDK's client over streamable HTTP) go to one
`gem serve` subprocess. The two databases are seeded alike. The paths are interleaved
round by round after a warm-up, so machine noise hits them alike; compare the ratios.
"""
from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import statistics
import tempfile
import time

import httpx
from mcp import Client

import gem
from gem.api import ops
from gem.api import schemas as s
from common import start_server

WORDS = ("alpha bravo cobalt delta ember falcon garnet harbor indigo juniper kestrel lumen "
         "meadow nectar onyx pepper quartz raven saffron tundra umber velvet willow xenon "
         "yarrow zephyr").split()


def topic(i: int) -> str:
    return f"{WORDS[i % 26].title()} {WORDS[(i // 26) % 26]} project {i}"


def seed_facts(n: int) -> list[dict]:
    return [{"topic": topic(i), "field": "status", "value": f"phase {i % 7}", "source": "seed"}
            for i in range(n)]


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


async def run(args: argparse.Namespace) -> None:
    scratch = tempfile.mkdtemp(prefix="gem-bench-serve-")
    local_path, served_path = os.path.join(scratch, "local.db"), os.path.join(scratch, "served.db")
    facts = seed_facts(args.topics)
    with gem.open(served_path, engine=args.engine) as mem:
        mem.ingest([gem.Fact(**f) for f in facts])
    proc, url = start_server(served_path, args.engine)
    mem = gem.open(local_path, engine=args.engine)
    mem.ingest([gem.Fact(**f) for f in facts])
    counter = iter(range(10**9))

    def remember_body() -> dict:
        i = next(counter)
        return {"facts": [{"topic": topic(i % args.topics), "field": "status",
                           "value": f"update {i}", "source": "bench"}]}

    def recall_body() -> dict:
        i = next(counter)
        return {"query": f"status of {topic(i % args.topics)}", "k": 3}

    try:
        async with httpx.AsyncClient(base_url=url + "/v1") as http, \
                Client(url + "/mcp", cache=None) as mcp:
            async def in_process(op: str) -> None:
                if op == "remember":
                    ops.remember(mem, [s.FactIn(**f) for f in remember_body()["facts"]])
                else:
                    ops.recall(mem, s.RetrieveRequest(**recall_body()))

            async def over_http(op: str) -> None:
                path, body = ("/ingest", remember_body()) if op == "remember" else ("/retrieve", recall_body())
                (await http.post(path, json=body)).raise_for_status()

            async def over_mcp(op: str) -> None:
                if op == "remember":
                    result = await mcp.call_tool("memory_remember", remember_body())
                else:
                    result = await mcp.call_tool("memory_recall", recall_body())
                assert not result.is_error, result.content

            paths = {"in-process": in_process, "HTTP": over_http, "MCP": over_mcp}
            samples: dict[tuple[str, str], list[float]] = {}
            wall: dict[tuple[str, str], float] = {}
            for round_ in range(args.rounds + 1):  # round 0 is the warm-up
                n = max(5, args.ops // 5) if round_ == 0 else args.ops
                for op in ("recall", "remember"):
                    for name, call in paths.items():
                        times = []
                        started = time.perf_counter()
                        for _ in range(n):
                            t = time.perf_counter()
                            await call(op)
                            times.append(time.perf_counter() - t)
                        if round_:
                            samples.setdefault((op, name), []).extend(times)
                            wall[(op, name)] = wall.get((op, name), 0.0) + time.perf_counter() - started
    finally:
        mem.close()
        proc.terminate()
        proc.wait(timeout=60)
        shutil.rmtree(scratch, ignore_errors=True)

    print(f"gem serve benchmark: {args.engine}, {args.topics} topics, {args.rounds} interleaved rounds "
          f"x {args.ops} calls per path and op, one client, 127.0.0.1")
    print(f"{'op':9} {'path':11} {'req/s':>8} {'p50 ms':>8} {'p95 ms':>8} {'p50 / in-process':>17}")
    for op in ("recall", "remember"):
        base = statistics.median(samples[(op, "in-process")])
        for name in paths:
            xs = samples[(op, name)]
            rate = len(xs) / wall[(op, name)]
            p50 = statistics.median(xs)
            print(f"{op:9} {name:11} {rate:8.1f} {p50 * 1000:8.2f} {percentile(xs, 0.95) * 1000:8.2f} "
                  f"{p50 / base:16.2f}x")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--topics", type=int, default=200)
    parser.add_argument("--ops", type=int, default=60, help="calls per path, op and round")
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument("--engine", default="kuzu", choices=["kuzu", "ladybug"])
    asyncio.run(run(parser.parse_args()))


if __name__ == "__main__":
    main()
