"""`gem export` and `gem import`: a whole database as JSON Lines (gem/transfer.py)."""
from __future__ import annotations

import argparse
import sys

from .commands import _path, _progress_wanted, _report, _step_printer, opened


# ---------------------------------------------------------------------- export / import
def export_arguments(p: argparse.ArgumentParser) -> None:
    _path(p)
    p.add_argument("file", metavar="FILE.jsonl", nargs="?", default="-",
                   help="where to write (default '-': stdout, the summary then goes to stderr)")
    p.add_argument("--json", action="store_true", help="print the summary as JSON")
    p.add_argument("--progress", choices=["auto", "always", "never"], default="auto",
                   help="progress on stderr (auto: when stderr is a terminal)")


def export(args: argparse.Namespace) -> int:
    show = _step_printer(_progress_wanted(args))
    with opened(args) as mem:
        if args.file == "-":
            report = mem.export(sys.stdout, progress=show)
            sys.stdout.flush()
            _report(args, "exported", report, sys.stderr)
        else:
            report = mem.export(args.file, progress=show)
            _report(args, "exported", report, sys.stdout)
    return 0


def import_arguments(p: argparse.ArgumentParser) -> None:
    _path(p)
    p.add_argument("file", metavar="FILE.jsonl", help="a `gem export` file; '-' reads stdin")
    p.add_argument("--json", action="store_true", help="print the summary as JSON")
    p.add_argument("--progress", choices=["auto", "always", "never"], default="auto",
                   help="progress on stderr (auto: when stderr is a terminal)")


def import_(args: argparse.Namespace) -> int:
    import gem
    show = _step_printer(_progress_wanted(args))
    source = sys.stdin if args.file == "-" else args.file
    report = gem.import_jsonl(source, args.path, engine=args.engine, progress=show)
    _report(args, "imported", report, sys.stdout)
    return 0
