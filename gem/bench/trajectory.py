"""The trajectory benchmark: ground truth at three levels over an adversarial stream.

GEM's research agenda (the paper, section 5, "Correctness and Evaluation") asks for a
workload with ground truth for the current value of every unit over time (C2), the
dependent units that must be re-evaluated after each update (C3) and the allowed active
footprint at each interaction count (C5). This module builds one and scores systems on it:

    generate(StreamConfig(turns=500, seed=0))  -> Stream        a seeded adversarial stream
    ground_truth(stream)                       -> Truth         C2 / C3 / C5 after every turn
    run_system(stream, truth, system)          -> SystemRun     one system, turn by turn
    score(stream, truth, run)                  -> dict          the metrics of one run
    run_benchmark(config, systems)             -> Report        all of it, plus table/JSON/PNG

The definition (what every turn kind means, the truth rules, each metric, each baseline
and its sources) is specs/trajectory-benchmark.md. Everything is offline and
deterministic: the stream depends only on (turns, seed), every system uses the same
`gem.HashingEmbedder`, and simulated time advances by a fixed step per turn.

Here: the systems, `run_benchmark` and the command line. gem as a system under test is
gem_system.py; running and scoring one system, scoring.py; the report (table, JSON, PNG),
report.py; the HTML report, trajectory_html.py.
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import Callable, Sequence

from . import baselines
from .gem_system import GemSystem
from .generator import generate
from .report import Report, write_outputs
from .scoring import run_system, score
from .stream import StreamConfig
from .system import System
from .truth import ground_truth


SYSTEM_ORDER = ("gem", "vector-store", "mem0-v2", "mem0-v3", "zep", "ga-memgpt")


def make_systems(config: StreamConfig, names: Sequence[str] | None = None, *,
                 gem_engine: str = "kuzu", gem_maintain_every: int = 0) -> list[System]:
    factories: dict[str, Callable[[], System]] = {
        "gem": lambda: GemSystem(config, engine=gem_engine, maintain_every=gem_maintain_every),
        "vector-store": lambda: baselines.AppendOnlyVectorStore(config),
        "mem0-v2": lambda: baselines.OverwriteFactStore(config),
        "mem0-v3": lambda: baselines.AddOnlyFactStore(config),
        "zep": lambda: baselines.BitemporalGraph(config),
        "ga-memgpt": lambda: baselines.RecencyImportanceMemory(config),
    }
    names = list(names or SYSTEM_ORDER)
    unknown = [n for n in names if n not in factories]
    if unknown:
        raise ValueError(f"unknown system(s) {unknown}; choose from {list(factories)}")
    return [factories[n]() for n in names]


def run_benchmark(config: StreamConfig, systems: Sequence[str] | None = None, *,
                  gem_engine: str = "kuzu", gem_maintain_every: int = 0,
                  progress: Callable[[str], None] | None = None) -> Report:
    started = time.perf_counter()
    stream = generate(config)
    truth = ground_truth(stream)
    runs = []
    for system in make_systems(config, systems, gem_engine=gem_engine,
                               gem_maintain_every=gem_maintain_every):
        if progress:
            progress(f"running {system.name} ...")
        try:
            runs.append(run_system(stream, truth, system, progress))
        finally:
            system.close()
    scores = {run.name: score(stream, truth, run) for run in runs}
    return Report(stream, truth, runs, scores, time.perf_counter() - started)


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--turns", type=int, default=500, help="stream length (default 500)")
    p.add_argument("--seed", type=int, default=0, help="generator seed (default 0)")
    p.add_argument("--out", default="bench/out", help="output directory (default bench/out/)")
    p.add_argument("--systems", default=",".join(SYSTEM_ORDER),
                   help=f"comma-separated subset of {','.join(SYSTEM_ORDER)}")
    p.add_argument("--bound-base", type=float, default=StreamConfig.bound_base,
                   help="beta(n) = base + slope * n (default 40)")
    p.add_argument("--bound-slope", type=float, default=StreamConfig.bound_slope,
                   help="beta(n) = base + slope * n (default 0.1)")
    p.add_argument("--gem-engine", default="kuzu", choices=["kuzu", "ladybug"])
    p.add_argument("--gem-maintain-every", type=int, default=0, metavar="K",
                   help="run gem's maintenance (forget + revise) every K interactions "
                        "(default 0: never; only the C5 bound attenuates)")
    p.add_argument("--html", action="store_true",
                   help="also write a self-contained HTML report (inline SVG plot), which "
                        "`gem serve --reports DIR` lists on the dashboard")
    p.add_argument("--quiet", action="store_true", help="no progress lines on stderr")


def run(args: argparse.Namespace) -> int:
    config = StreamConfig(turns=args.turns, seed=args.seed, bound_base=args.bound_base,
                          bound_slope=args.bound_slope)
    systems = [s.strip() for s in args.systems.split(",") if s.strip()]
    progress = None if args.quiet else (lambda m: print(m, file=sys.stderr, flush=True))
    try:
        report = run_benchmark(config, systems, gem_engine=args.gem_engine,
                               gem_maintain_every=args.gem_maintain_every, progress=progress)
    except ValueError as exc:
        print(f"gem bench trajectory: {exc}", file=sys.stderr)
        return 2
    print(report.table())
    written = write_outputs(report, Path(args.out), html=args.html)
    for kind, where in written.items():
        print(f"{kind}: {where}")
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m gem.bench.trajectory",
                                     description="gem's trajectory benchmark")
    add_arguments(parser)
    return run(parser.parse_args(argv))


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
