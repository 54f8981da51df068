"""Each dashboard page's render time at 10k topics: the page function in this process and the
same page over HTTP from `gem serve`, side by side (the target is <= 100 ms a page).

    python bench/dashboard.py [--topics 10000] [--rounds 7] [--history 300] [--engine kuzu|ladybug]

The database: `--topics` topics of three fields each (ingested in batches), every 50th topic
linked to the next two (extension, association) and a hub topic linked to 40 others, a topic
whose field has `--history` values (updates, corroborations, denials), as many single ingests
and retrievals spread over simulated weeks, and one forgetting pass. The in-process and HTTP runs
are interleaved round by round after a warm-up, so machine noise hits both alike. The first
overview in a process also runs the first (full) audit, so it is reported on its own.

A benchmark, not a test: it prints a table and asserts nothing about time.
"""
from __future__ import annotations

import argparse
import gc
import json
import os
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import datetime, timedelta, timezone
from urllib.parse import urlencode

import httpx

import gem
from gem.dashboard import pages
from common import start_server

WORDS = ("alpha bravo cobalt delta ember falcon garnet harbor indigo juniper kestrel lumen "
         "meadow nectar onyx pepper quartz raven saffron tundra umber velvet willow xenon "
         "yarrow zephyr").split()


def title(i: int) -> str:
    return f"{WORDS[i % 26].title()} {WORDS[(i // 26) % 26]} {WORDS[(i // 676) % 26]} project {i}"


class Clock:
    def __init__(self) -> None:
        self.now = datetime.now(timezone.utc) - timedelta(days=60)

    def __call__(self) -> datetime:
        return self.now


def build(path: str, n: int, engine: str, history: int) -> dict[str, str]:
    clock = Clock()
    rnd = random.Random(7)
    with gem.open(path, clock=clock, engine=engine) as mem:
        for b in range(0, n, 500):
            mem.ingest([gem.Fact(title(i), name, f"{name} {i % 11}", source="seed")
                        for i in range(b, min(n, b + 500)) for name in ("status", "owner", "budget")])
            clock.now += timedelta(minutes=20)
        listing = mem.topics(order="recent", limit=n + 1).topics[::-1]
        ids = [gem.TopicId(t.id) for t in listing]  # an id names a topic only as a TopicId
        names = {t.id: t.title for t in listing}
        for i in range(0, len(ids) - 2, 50):
            mem.link(ids[i], ids[i + 1])
            mem.link(ids[i], ids[i + 2], kind="association")
        hub, busy = ids[len(ids) // 2], ids[len(ids) // 3]
        for other in rnd.sample(ids, 40):
            if other != hub:
                mem.link(hub, other, kind=rnd.choice(["extension", "association"]))
        for k in range(history):  # a long history: updates, corroborations, denials
            clock.now += timedelta(hours=2)
            kind = k % 5
            value = f"phase {k}" if kind < 3 else f"phase {k - 1}"
            mem.ingest(gem.Fact(names[busy], "status", value, source=f"chat:{k % 7}",
                                polarity="-" if kind == 4 else "+", confidence=0.6 + 0.4 * (k % 2)))
        for k in range(history):
            clock.now += timedelta(hours=1)
            tid = rnd.choice(ids)
            if k % 2:
                mem.ingest(gem.Fact(names[tid], "status", f"moved {k}", source=f"chat:{k}"))
            else:
                mem.retrieve(topic=tid)
        clock.now += timedelta(days=12)
        mem.forget()
        stats = mem.stats()
    print(f"built: {stats['topics']} topics, {stats['fields']} fields, {stats['entries']} entries, "
          f"{stats['transitions']} transitions", file=sys.stderr)
    return {"hub": hub, "busy": busy, "hub_title": names[hub]}


def cpu_seconds(pid: int) -> float:
    """CPU time of every thread of a process so far (ns precision, from the scheduler). The
    machine is shared: wall times include waiting for a core, CPU times do not."""
    total = 0
    for tid in os.listdir(f"/proc/{pid}/task"):
        try:
            with open(f"/proc/{pid}/task/{tid}/schedstat") as f:
                total += int(f.read().split()[0])
        except OSError:  # the thread ended meanwhile
            pass
    return total / 1e9


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--topics", type=int, default=10_000)
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--history", type=int, default=300,
                    help="values of the busy topic's field, and single operations after them")
    ap.add_argument("--engine", default="kuzu", choices=["kuzu", "ladybug"])
    ap.add_argument("--build", metavar="PATH", help=argparse.SUPPRESS)  # the child that builds
    args = ap.parse_args()
    if args.build:
        print(json.dumps(build(args.build, args.topics, args.engine, args.history)))
        return
    scratch = tempfile.mkdtemp(prefix="gem-bench-dashboard-")
    path = os.path.join(scratch, "dash.db")
    # Built by a child process: this one measures without the builder's garbage around.
    done = subprocess.run([sys.executable, __file__, "--build", path, "--topics", str(args.topics),
                           "--engine", args.engine, "--history", str(args.history)],
                          capture_output=True, text=True, check=True)
    sys.stderr.write(done.stderr)
    where = json.loads(done.stdout.strip().splitlines()[-1])
    hub, busy = gem.TopicId(where["hub"]), gem.TopicId(where["busy"])
    # The server needs a database of its own (a served path is locked): a copy, with its
    # derived snapshot, taken before anything reads either.
    served_path = os.path.join(scratch, "served.db")
    for suffix in ("", ".wal"):
        if os.path.exists(path + suffix):
            shutil.copy2(path + suffix, served_path + suffix)
    shutil.copytree(path + ".gem-derived", served_path + ".gem-derived")
    # (name, page function on a Memory, the same page's URL)
    views = [
        ("overview", lambda m: pages.overview(m, pages.OverviewQuery()), "/"),
        ("overview, title filter", lambda m: pages.overview(m, pages.OverviewQuery(text="alpha")),
         "/?text=alpha"),
        ("overview, by title, page 3", lambda m: pages.overview(
            m, pages.OverviewQuery(order="title", offset=100)), "/?order=title&offset=100"),
        (f"topic ({args.history}-value field)", lambda m: pages.topic(m, busy),
         f"/topic?id={busy}"),
        ("graph, hub, depth 2", lambda m: pages.graph(m, hub, 2), f"/graph?id={hub}&depth=2"),
        ("log", lambda m: pages.log(m, None, None), "/log"),
        ("log, one topic", lambda m: pages.log(m, busy, None), "/log?" + urlencode({"id": busy})),
        ("policies", pages.policies, "/policies"),
        ("audit", lambda m: pages.audit(m, False), "/audit"),
    ]
    local: dict[str, list[float]] = {name: [] for name, _, _ in views}
    local_cpu: dict[str, list[float]] = {name: [] for name, _, _ in views}
    remote: dict[str, list[float]] = {name: [] for name, _, _ in views}
    remote_cpu: dict[str, list[float]] = {name: [] for name, _, _ in views}
    size: dict[str, int] = {}
    with gem.open(path, engine=args.engine, create=False) as mem:
        t0 = time.perf_counter()
        pages.overview(mem, pages.OverviewQuery())
        first_local = time.perf_counter() - t0
    proc, url = start_server(served_path, args.engine)
    try:
        with httpx.Client(base_url=url, timeout=120) as client, \
                gem.open(path, engine=args.engine, create=False) as mem:
            gc.freeze()  # as gem serve does once its memory is open (gem/server/runner.py)
            t0 = time.perf_counter()
            first = client.get("/")
            first_remote = time.perf_counter() - t0
            assert first.status_code == 200
            for _, fn, link in views:  # warm-up
                fn(mem)
                assert client.get(link).status_code == 200, link
            for _ in range(args.rounds):
                for name, fn, link in views:
                    t0, c0 = time.perf_counter(), time.process_time()
                    html = fn(mem)
                    local[name].append(time.perf_counter() - t0)
                    local_cpu[name].append(time.process_time() - c0)
                    t0, c0 = time.perf_counter(), cpu_seconds(proc.pid)
                    r = client.get(link)
                    remote[name].append(time.perf_counter() - t0)
                    remote_cpu[name].append(cpu_seconds(proc.pid) - c0)
                    size[name] = len(r.content)
                    assert r.status_code == 200 and len(html) > 0
    finally:
        proc.terminate()
        proc.wait(timeout=120)
        shutil.rmtree(scratch, ignore_errors=True)

    def med(values: list[float]) -> str:
        return f"{statistics.median(values) * 1e3:7.1f}"

    load = os.getloadavg()[0]
    print(f"\ngem dashboard pages at {args.topics} topics ({args.engine}), {args.rounds} rounds, "
          f"median milliseconds; target <= 100 ms a page. Load average {load:.1f} on "
          f"{os.cpu_count()} cores: wall times include waiting for a core, CPU times do not "
          "(the server's: every thread of the gem serve process during the request).")
    print(f"{'page':28s} {'in-process':>16s} {'HTTP (gem serve)':>17s} {'KB':>5s}  <=100ms")
    print(f"{'':28s} {'wall':>7s} {'CPU':>8s} {'wall':>8s} {'srv CPU':>8s}")
    print(f"{'first overview (full audit)':28s} {first_local * 1e3:7.1f} {'':8s} "
          f"{first_remote * 1e3:8.1f} {'':8s} {len(first.content) / 1024:5.0f}")
    for name, _, _ in views:
        ok = "yes" if statistics.median(remote[name]) <= 0.1 else \
            "CPU yes" if statistics.median(remote_cpu[name]) <= 0.1 else "NO"
        print(f"{name:28s} {med(local[name])} {med(local_cpu[name]):>8s} {med(remote[name]):>8s} "
              f"{med(remote_cpu[name]):>8s} {size[name] / 1024:5.0f}  {ok}")


if __name__ == "__main__":
    main()
