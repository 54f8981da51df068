"""gem's benchmarks, mounted by the main CLI as `gem bench <name>`.

    gem bench trajectory [--turns N] [--seed S] [--out DIR]

The CLI calls `add_bench_parser(subparsers)` to add the `bench` command and
`run_bench(args)` to run it. The modules are imported lazily so `gem --help` stays fast.
"""
from __future__ import annotations

import argparse
import sys
from typing import Any, Sequence

__all__ = ["add_bench_parser", "run_bench", "main"]


def add_bench_parser(subparsers: Any) -> argparse.ArgumentParser:
    """Add `bench` (with its sub-commands) to the main parser's subparsers."""
    from .trajectory import add_arguments
    bench = subparsers.add_parser("bench", help="run a benchmark (trajectory)")
    inner = bench.add_subparsers(dest="bench_command", required=True)
    p = inner.add_parser(
        "trajectory",
        help="gem and five baseline memories on an adversarial stream with ground truth "
             "for C2, C3 and C5 (specs/trajectory-benchmark.md)")
    add_arguments(p)
    return bench


def run_bench(args: argparse.Namespace) -> int:
    """Run the benchmark `args.bench_command` selected; returns the exit code."""
    if args.bench_command == "trajectory":
        from .trajectory import run
        return run(args)
    print(f"gem bench: unknown benchmark {args.bench_command!r}", file=sys.stderr)
    return 2


def main(argv: Sequence[str] | None = None) -> int:
    """`python -m gem.bench.trajectory` style entry without the main CLI."""
    parser = argparse.ArgumentParser(prog="gem")
    add_bench_parser(parser.add_subparsers(dest="command", required=True))
    return run_bench(parser.parse_args(argv))
