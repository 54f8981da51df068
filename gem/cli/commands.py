"""What the commands on a database share: errors as exit codes, opening the database, the
arguments every command takes, and progress on stderr. The commands live by group beside it:
gem/cli/reads.py, writes.py, transfer.py, serving.py. Read commands print text, or with --json
the same schemas the HTTP API and MCP tools return (gem.api.schemas: titles, never ids)."""
from __future__ import annotations

import argparse
import dataclasses
import json
import math
import os
import sys
import time
from contextlib import contextmanager
from datetime import datetime
from typing import Any, Callable, Iterator, TextIO

from pydantic import BaseModel

from ..errors import GemError, InvalidInput, StoreLocked

ENGINES = ["kuzu", "ladybug", "falkordb"]


# ---------------------------------------------------------------------- shared
def guarded(run: Callable[[argparse.Namespace], int], args: argparse.Namespace) -> int:
    """gem's typed errors become one line on stderr and exit code 1. A command on a database
    given no --engine runs on the engine that made it (kuzu for a new one)."""
    try:
        if isinstance(getattr(args, "path", None), str) and hasattr(args, "engine"):
            from ..memory import engine_for
            args.engine = engine_for(args.path, args.engine)
        return run(args)
    except StoreLocked as exc:
        print(f"gem: {exc}{_served_by(exc.path)}", file=sys.stderr)
    except GemError as exc:
        print(f"gem: {exc}", file=sys.stderr)
    return 1


def _served_by(path: str) -> str:
    try:
        from ..server.endpoint import read_endpoint
    except ImportError:  # pragma: no cover - the server extra is not installed
        return ""
    endpoint = read_endpoint(path)
    if endpoint is None:
        return ""
    return (f"; it is served by `gem serve` (pid {endpoint.pid}) at {endpoint.url}: "
            f"use its API (/v1, /mcp) or stop it")


@contextmanager
def opened(args: argparse.Namespace, *, create: bool = False) -> Iterator[Any]:
    import gem
    if args.engine != "falkordb" and not create and not os.path.exists(args.path):
        raise InvalidInput(f"no database at {args.path!r} (create one with `gem init`)")
    with gem.open(args.path, engine=args.engine, create=create,
                  policies=getattr(args, "policies", None) or None) as mem:
        yield mem


def _path(p: argparse.ArgumentParser) -> None:
    p.add_argument("path", metavar="PATH", help="the database (with --engine falkordb, the "
                                                "memory's URL redis://HOST:PORT/NAME)")
    p.add_argument("--engine", choices=ENGINES,
                   help="default: the engine that made the database (kuzu for a new one)")


def _read(p: argparse.ArgumentParser) -> None:
    _path(p)
    p.add_argument("--json", action="store_true", help="print JSON (the HTTP API's schema)")


def _emit(args: argparse.Namespace, result: BaseModel, text: Callable[[Any], str],
          out: TextIO | None = None) -> None:
    out = out or sys.stdout
    if args.json:
        out.write(result.model_dump_json(indent=2) + "\n")
    else:
        out.write(text(result))


def _number(kind: str, parse: Callable[[str], Any], ok: Callable[[Any], bool]) -> Callable[[str], Any]:
    """An argparse type: a number out of range is a usage error (exit 2) naming the option,
    not a command that silently does nothing (`maintain --count 0`)."""
    def convert(text: str) -> Any:
        try:
            value = parse(text)
        except ValueError:
            value = None
        if value is None or not ok(value):
            raise argparse.ArgumentTypeError(f"must be {kind}, got {text if value is not None else repr(text)}")
        return value
    convert.__name__ = kind.replace(" ", "_")  # argparse names the type in some messages
    return convert


positive_int = _number("a positive integer", int, lambda n: n >= 1)
non_negative_int = _number("a non-negative integer", int, lambda n: n >= 0)
port_number = _number("a port number in [0, 65535]", int, lambda n: 0 <= n <= 65535)
positive_float = _number("a positive number", float, lambda x: math.isfinite(x) and x > 0)
non_negative_float = _number("a non-negative number", float, lambda x: math.isfinite(x) and x >= 0)


def _time(value: str) -> datetime:
    try:
        return datetime.fromisoformat(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not an ISO 8601 time: {value!r}") from None



# ---------------------------------------------------------------------- progress
def _step_printer(enabled: bool) -> Callable[[str, int, int], None] | None:
    """progress(step, done, total) as one line on stderr, redrawn in place."""
    if not enabled:
        return None
    last = [0.0]

    def show(step: str, done: int, total: int) -> None:
        now = time.monotonic()
        if now - last[0] < 0.1 and done != total:
            return
        last[0] = now
        of = f"/{total}" if total else ""
        sys.stderr.write(f"\r{step}: {done}{of}\033[K")
        sys.stderr.flush()
    return show


def _progress_wanted(args: argparse.Namespace) -> bool:
    wanted = args.progress == "always" or (args.progress == "auto" and sys.stderr.isatty())
    args.progress_shown = wanted
    return wanted


def _report(args: argparse.Namespace, verb: str, report: Any, out: TextIO) -> None:
    if args.progress_shown:
        sys.stderr.write("\n")
    if args.json:
        out.write(json.dumps(dataclasses.asdict(report), indent=2) + "\n")
    else:
        head = f", head #{report.head['seq']} {report.head['hash'][:12]}" if report.head else ""
        out.write(f"{verb} {report.records} records ({report.transitions} transitions{head}); "
                  f"sha256 {report.sha256[:16]}\n")
