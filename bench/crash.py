"""Crash and power-loss tolerance: >= 1,000 SIGKILLs per engine, at seeded random moments of
single ingests, batches, episodes, retrieve-as-write, maintenance, erasure, compaction,
policy loads, recovery itself and `gem serve` under HTTP writes, and simulated power cuts
(gem/testing/crash.py, gem/testing/powerloss.py). After each: the database reopens, audits
clean in full, holds every acknowledged write, and no batch is half there.

    python bench/crash.py [--kills 1000] [--engines kuzu,ladybug] [--seed 1] [--out FILE]
                          [--scenarios "batch,power loss: batch"]

Scenarios run round-robin (`gem serve` and power cuts, which start a Python process each, in
every second and fourth round), so an interrupted run still covers all of them; the table so
far is printed every few rounds, and rewritten to --out. Each engine runs in its own process
(the two cannot share one), both at once. A failure prints its cycle and the seed.
"""
from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
import traceback

# Scenario: run it in rounds where round % every == 0.
EVERY = {"serve": 2, "power loss: single ingest": 4, "power loss: batch": 4}
POWER_LOSS = {"power loss: single ingest": ("single", 1.5), "power loss: batch": ("batch", 1.5)}


def child(engine: str, kills: int, seed: int, only: list[str] | None) -> None:
    """One engine's kill cycles; prints its stats as a JSON line after every round."""
    from gem.testing.crash import Harness

    with tempfile.TemporaryDirectory(prefix=f"gem-crash-{engine}-") as workdir:
        with Harness(engine, workdir, seed=seed,
                     progress=lambda line: print(line, file=sys.stderr, flush=True)) as harness:
            run(harness, engine, kills, only)


def run(harness, engine: str, kills: int, only: list[str] | None) -> None:
    from gem.testing import powerloss
    from gem.testing.crash import SCENARIOS, Stats
    try:
        shim: str | None = powerloss.build_shim(harness.workdir)
    except powerloss.ShimUnavailable as exc:
        print(f"power loss skipped: {exc}", file=sys.stderr, flush=True)
        shim = None
    scenarios = [n for n in [*SCENARIOS, *(POWER_LOSS if shim else ())] if only is None or n in only]
    started = time.perf_counter()
    done, rounds = 0, 0
    while done < kills:
        for name in scenarios:
            if rounds % EVERY.get(name, 1):
                continue
            try:
                if name in POWER_LOSS:
                    powerloss.cycle(harness, name, *POWER_LOSS[name], shim)
                else:
                    harness.run_one(name)
            except Exception as exc:  # the harness's own trouble: reported, and the run goes on
                harness.stats.setdefault(name, Stats()).failures.append(
                    f"harness error in cycle {harness.cycle}: {type(exc).__name__}: {exc}"[:2000])
                print(traceback.format_exc(), file=sys.stderr, flush=True)
        rounds += 1
        done = sum(s.kills for s in harness.stats.values())
        print(json.dumps({"engine": engine, "rounds": rounds, "seconds": time.perf_counter() - started,
                          "stats": {name: {"kills": s.kills, "acked": s.acked, "failures": s.failures,
                                           "recovery": s.recovery, "audit": s.audit,
                                           "inflight": s.inflight}
                                    for name, s in harness.stats.items()}}), flush=True)


def render(latest: dict[str, dict]) -> str:
    from gem.testing.crash import Stats, table
    rows, notes = [], []
    for engine, report in sorted(latest.items()):
        total = sum(s["kills"] for s in report["stats"].values())
        failures = sum(len(s["failures"]) for s in report["stats"].values())
        notes.append(f"{engine}: {total} kills in {report['rounds']} rounds, {report['seconds']:.0f} s, "
                     f"{failures} failures")
        for name, s in report["stats"].items():
            rows.append((engine, name, Stats(s["kills"], list(s["failures"]), s["acked"], s["inflight"],
                                             s["recovery"], s["audit"])))
            notes += [f"FAILURE {engine} {name}: {f}" for f in s["failures"]]
    return table(rows) + "\n\n" + "\n".join(notes)


def _interrupt(*_: object) -> None:
    raise KeyboardInterrupt


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--kills", type=int, default=1000, help="kills per engine (at least)")
    parser.add_argument("--engines", default="kuzu,ladybug")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--scenarios", help="only these (comma-separated names, as in the table)")
    parser.add_argument("--out", help="also write the table (rewritten as it grows) here")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args()
    # SIGTERM ends a run like ^C: each engine's process cleans up and the table so far is
    # printed (a run started in the background ignores SIGINT).
    signal.signal(signal.SIGTERM, _interrupt)
    if args.child:
        child(args.child, args.kills, args.seed, args.scenarios.split(",") if args.scenarios else None)
        return
    env = {**os.environ, "OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1"}
    latest: dict[str, dict] = {}
    lock = threading.Lock()
    children = [subprocess.Popen([sys.executable, __file__, "--child", engine, "--kills", str(args.kills),
                                  "--seed", str(args.seed),
                                  *(["--scenarios", args.scenarios] if args.scenarios else [])], stdout=subprocess.PIPE, text=True, env=env)
                for engine in args.engines.split(",")]

    def collect(process: subprocess.Popen) -> None:
        assert process.stdout is not None
        for line in process.stdout:
            report = json.loads(line)
            with lock:
                latest[report["engine"]] = report
                text = render(latest)
                if args.out:
                    with open(args.out, "w") as f:
                        f.write(text + "\n")
                if report["rounds"] % 10 == 0:
                    print(text + "\n", file=sys.stderr, flush=True)

    readers = [threading.Thread(target=collect, args=(p,)) for p in children]
    for reader in readers:
        reader.start()
    try:
        codes = [p.wait() for p in children]
    except KeyboardInterrupt:
        for p in children:
            p.send_signal(signal.SIGTERM)
        codes = [p.wait() for p in children]
    for reader in readers:
        reader.join()
    print(render(latest) if latest else "no round finished")
    if any(codes):
        sys.exit(f"an engine's run exited with {codes}")


if __name__ == "__main__":
    main()
