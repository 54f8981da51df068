"""The commands that read a database: query (a retrieval, so a transition), and the
administrative reads that change nothing (inspect, history, explain, review, audit, stats, log)."""
from __future__ import annotations

import argparse
import sys

from ..api import ops, prompt
from ..api import schemas as s
from ..errors import InvalidInput
from . import render
from .commands import (_emit, _progress_wanted, _read, _step_printer, _time, non_negative_int,
                       opened, positive_int)


# ---------------------------------------------------------------------- reads
def _near(text: str) -> tuple[float, float, float]:
    """--near LAT,LON,KM (ranges are checked by the retrieval, which names what is wrong)."""
    parts = text.split(",")
    try:
        if len(parts) != 3:
            raise ValueError
        lat, lon, km = (float(p) for p in parts)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected LAT,LON,KM in degrees and km, got {text!r}") \
            from None
    return lat, lon, km


def query_arguments(p: argparse.ArgumentParser) -> None:
    _read(p)
    p.add_argument("text", nargs="?", help="free-text query")
    p.add_argument("--topic", help="a topic title to read directly")
    p.add_argument("--field", action="append", dest="fields", metavar="FIELD",
                   help="only this field (repeatable; hidden fields included)")
    p.add_argument("--all-fields", action="store_true",
                   help="every visible field of each topic the query found")
    p.add_argument("--as-of", type=_time, help="answer as of this ISO 8601 time")
    p.add_argument("--between", type=_time, nargs=2, metavar=("START", "END"),
                   help="only values and episodes whose time lies in this window (ISO 8601)")
    p.add_argument("--near", type=_near, metavar="LAT,LON,KM",
                   help="only values and episodes stated within KM of the point (without a "
                        "query: those nearest first)")
    p.add_argument("-k", type=positive_int, default=5,
                   help="at most this many results: fields and episodes (default 5)")
    p.add_argument("--history", action="store_true", help="include each field's history")
    p.add_argument("--include-archived", action="store_true")
    p.add_argument("--prompt", action="store_true",
                   help="print a compact block for a model's prompt (the API's format 'text'), "
                        "cut to --max-tokens by rank")
    p.add_argument("--max-tokens", type=positive_int, default=prompt.DEFAULT_MAX_TOKENS,
                   help="the budget of --prompt, tokens counted as ceil(chars/4) "
                        f"(default {prompt.DEFAULT_MAX_TOKENS})")


def query(args: argparse.Namespace) -> int:
    if args.all_fields and args.fields:
        raise InvalidInput("--all-fields and --field exclude each other")
    if args.prompt and args.json:
        raise InvalidInput("--prompt and --json exclude each other")
    if args.max_tokens < 16:
        raise InvalidInput("--max-tokens must be at least 16")
    request = s.RetrieveRequest(query=args.text, topic=args.topic,
                                fields="all" if args.all_fields else args.fields,
                                as_of=args.as_of, k=args.k, history=args.history,
                                include_archived=args.include_archived, actor="cli",
                                between=None if args.between is None else tuple(args.between),
                                near=args.near,
                                format="text" if args.prompt else "json",
                                max_tokens=args.max_tokens)
    with opened(args) as mem:
        result = ops.recall(mem, request)
    if args.prompt:
        sys.stdout.write(prompt.render(result, args.max_tokens))
    else:
        _emit(args, result, render.recall)
    return 0


def inspect_arguments(p: argparse.ArgumentParser) -> None:
    _read(p)
    p.add_argument("topic", metavar="TOPIC")
    p.add_argument("field", metavar="FIELD", nargs="?")


def inspect(args: argparse.Namespace) -> int:
    with opened(args) as mem:
        _emit(args, ops.inspect(mem, args.topic, args.field), render.topic)
    return 0


def history_arguments(p: argparse.ArgumentParser) -> None:
    _read(p)
    p.add_argument("topic", metavar="TOPIC")
    p.add_argument("field", metavar="FIELD")


def history(args: argparse.Namespace) -> int:
    with opened(args) as mem:
        _emit(args, ops.history(mem, args.topic, args.field), render.history)
    return 0


explain_arguments = history_arguments


def explain(args: argparse.Namespace) -> int:
    with opened(args) as mem:
        _emit(args, ops.explain(mem, args.topic, args.field), render.explain)
    return 0


def review_arguments(p: argparse.ArgumentParser) -> None:
    _read(p)


def review(args: argparse.Namespace) -> int:
    with opened(args) as mem:
        _emit(args, ops.review(mem), render.review)
    return 0


def audit_arguments(p: argparse.ArgumentParser) -> None:
    _read(p)
    p.add_argument("--full", action="store_true",
                   help="audit the whole state even when a clean audit is on record")
    p.add_argument("--progress", choices=["auto", "always", "never"], default="auto",
                   help="progress on stderr (auto: when stderr is a terminal)")


def audit(args: argparse.Namespace) -> int:
    show = _step_printer(_progress_wanted(args))
    with opened(args) as mem:
        result = ops.audit(mem, args.full, progress=show)
    if args.progress_shown:
        sys.stderr.write("\n")
    _emit(args, result, render.audit)
    return 0 if result.ok else 1


stats_arguments = review_arguments


def stats(args: argparse.Namespace) -> int:
    with opened(args) as mem:
        _emit(args, ops.stats(mem), render.stats)
    return 0


def log_arguments(p: argparse.ArgumentParser) -> None:
    _read(p)
    p.add_argument("--since", type=non_negative_int, default=0, help="transitions after this seq")
    p.add_argument("--limit", type=positive_int, default=100, help="at most this many (default 100)")


def log(args: argparse.Namespace) -> int:
    with opened(args) as mem:
        _emit(args, ops.log(mem, args.since, args.limit), render.log)
    return 0


