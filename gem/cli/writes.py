"""The commands that write to a database: init, ingest (facts from JSON Lines, in batches),
link, restore, maintain."""
from __future__ import annotations

import argparse
import json
import os
import sys
import time
from datetime import datetime, timezone
from typing import Any, Iterator, TextIO

from ..api import ops
from ..api import schemas as s
from ..errors import InvalidInput, TransitionRejected
from . import render
from .commands import _emit, _path, _progress_wanted, _step_printer, opened, positive_int


# ---------------------------------------------------------------------- init
def init_arguments(p: argparse.ArgumentParser) -> None:
    _path(p)
    p.add_argument("--policies", nargs="+", metavar="FILE",
                   help="policy files to govern it (default: policies/default.policy)")


def init(args: argparse.Namespace) -> int:
    if args.engine == "falkordb":
        from ..store import falkor_database
        database = falkor_database(args.path)
        try:
            if database.exists():
                raise InvalidInput(f"a memory already exists at {database.url}")
        finally:
            database.close()
    elif os.path.exists(args.path):
        raise InvalidInput(f"{args.path!r} already exists")
    with opened(args, create=True) as mem:
        names = [p.name for p in mem.policies.policies]
        print(f"created {mem.path} ({mem.engine_name} engine, {len(names)} policies)")
    return 0


# ---------------------------------------------------------------------- ingest
def ingest_arguments(p: argparse.ArgumentParser) -> None:
    _path(p)
    p.add_argument("file", metavar="FILE.jsonl", help="one fact per line as a JSON object with "
                   "topic, field, value (and optionally at, source, actor, ref, confidence, "
                   "polarity, place {lat, lon, name}); '-' reads stdin")
    p.add_argument("--create", action="store_true", help="create the database if it is missing")
    p.add_argument("--batch", type=positive_int, default=500, help="facts per transition (default 500)")
    p.add_argument("--skip-bad", action="store_true",
                   help="skip lines that are not valid facts (default: refuse the whole run)")
    p.add_argument("--actor", default="cli", help="recorded in the transition log")
    p.add_argument("--progress", choices=["auto", "always", "never"], default="auto",
                   help="progress bar on stderr (auto: when stderr is a terminal)")
    p.add_argument("--json", action="store_true", help="print the summary as JSON")


class Progress:
    """A one-line progress bar on a stream, redrawn at most ten times a second."""

    def __init__(self, total: int, stream: TextIO, enabled: bool) -> None:
        self.total, self.stream, self.enabled = total, stream, enabled
        self.start = time.monotonic()
        self._drawn = 0.0

    def update(self, done: int, final: bool = False) -> None:
        now = time.monotonic()
        if not self.enabled or (not final and now - self._drawn < 0.1):
            return
        self._drawn = now
        width = 30
        filled = int(width * done / self.total) if self.total else width
        rate = done / max(now - self.start, 1e-9)
        self.stream.write(f"\r[{'#' * filled}{'.' * (width - filled)}] {done}/{self.total} facts "
                          f"{rate:,.0f}/s")
        if final:
            self.stream.write("\n")
        self.stream.flush()


def _parse_facts(lines: Iterator[str]) -> tuple[list[tuple[int, Any]], list[tuple[int, str]]]:
    import gem
    facts: list[tuple[int, Any]] = []
    bad: list[tuple[int, str]] = []
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            obj = json.loads(line)
        except ValueError as exc:
            bad.append((number, f"not JSON: {exc}"))
            continue
        if not isinstance(obj, dict):
            bad.append((number, "not a JSON object"))
            continue
        try:
            # `at` is ISO 8601 text in both: model_validate_json parses it, nothing else
            if "text" in obj and "topic" not in obj:  # an episode: something said, kept as said
                facts.append((number, gem.Episode.model_validate_json(line)))
            else:
                facts.append((number, gem.Fact.model_validate_json(line)))
        except (InvalidInput, TypeError) as exc:
            bad.append((number, str(exc)))
    return facts, bad


def _not_future(facts: list[tuple[int, Any]], bad: list[tuple[int, str]]
                ) -> tuple[list[tuple[int, Any]], list[tuple[int, str]]]:
    """The lines dated after now are bad lines too. Every transition of this run takes the
    later of the clock and the log's last time, never earlier than now: a line that passes
    here passes there, and none fails a batch halfway through the run."""
    from ..operators.ingest import future_time
    now = datetime.now(timezone.utc)
    kept = []
    for number, item in facts:
        problem = future_time("at", item.at, now)
        if problem is None:
            kept.append((number, item))
        else:
            bad.append((number, problem))
    return kept, sorted(bad)


def ingest(args: argparse.Namespace) -> int:
    """Every line is checked before anything is written: a bad line refuses the whole
    run (nothing ingested) unless --skip-bad. Each batch is one transition; if one is
    rejected, the batches before it stay committed and the run stops there."""
    try:
        if args.file == "-":
            facts, bad = _parse_facts(iter(sys.stdin))
        else:
            with open(args.file, encoding="utf-8") as handle:
                facts, bad = _parse_facts(handle)
    except OSError as exc:
        raise InvalidInput(f"cannot read {args.file!r}: {exc.strerror}") from None
    except UnicodeDecodeError as exc:
        raise InvalidInput(f"{args.file!r} is not UTF-8: {exc.reason}") from None
    facts, bad = _not_future(facts, bad)
    for number, message in bad[:20]:
        print(f"{args.file}:{number}: {message}", file=sys.stderr)
    if len(bad) > 20:
        print(f"... and {len(bad) - 20} more bad lines", file=sys.stderr)
    if bad and not args.skip_bad:
        print(f"gem ingest: refused: {len(bad)} bad line(s); nothing was ingested "
              "(--skip-bad ingests the good ones)", file=sys.stderr)
        return 1
    summary: dict[str, Any] = {"facts": 0, "episodes": 0, "known_episodes": 0, "batches": 0,
                               "created_topics": 0, "new_values": 0, "corroborations": 0,
                               "denials": 0, "flagged_topics": 0,
                               "skipped_lines": len(bad), "rejected": None}
    progress = Progress(len(facts), sys.stderr,
                        args.progress == "always" or (args.progress == "auto" and sys.stderr.isatty()))
    with opened(args, create=args.create) as mem:
        start = time.monotonic()
        for i in range(0, len(facts), args.batch):
            chunk = facts[i:i + args.batch]
            try:
                result = mem.ingest([fact for _, fact in chunk], actor=args.actor)
            except TransitionRejected as exc:
                progress.update(summary["facts"], final=True)
                summary["rejected"] = {"lines": [chunk[0][0], chunk[-1][0]],
                                       "error": ops.describe_rejection(mem, exc).message}
                break
            summary["facts"] += len(chunk)
            summary["episodes"] += len(result.episodes) + len(result.known_episodes)
            summary["known_episodes"] += len(result.known_episodes)
            summary["batches"] += 1
            summary["created_topics"] += len(result.created_topics)
            summary["new_values"] += len(result.new_values)
            summary["corroborations"] += result.corroborations
            summary["denials"] += result.denials
            summary["flagged_topics"] += len(result.flagged)
            progress.update(summary["facts"])
        else:
            progress.update(summary["facts"], final=True)
        summary["seconds"] = round(time.monotonic() - start, 3)
    if args.json:
        print(json.dumps(summary, indent=2))
    else:
        print(render.ingest_summary(summary))
    if summary["rejected"]:
        lines = summary["rejected"]["lines"]
        print(f"gem ingest: the batch of lines {lines[0]}-{lines[1]} was rejected: "
              f"{summary['rejected']['error']}; batches before it are committed", file=sys.stderr)
        return 1
    return 0


# ---------------------------------------------------------------------- writes
def link_arguments(p: argparse.ArgumentParser) -> None:
    _path(p)
    p.add_argument("src", metavar="FROM_TOPIC")
    p.add_argument("dst", metavar="TO_TOPIC")
    p.add_argument("--kind", default="extension", choices=["extension", "association"])
    p.add_argument("--json", action="store_true")


def link(args: argparse.Namespace) -> int:
    with opened(args) as mem:
        result = ops.link(mem, s.LinkRequest(from_topic=args.src, to_topic=args.dst,
                                             kind=args.kind, actor="cli"))
    _emit(args, result, lambda r: f"{r.from_topic} -[{r.kind}]-> {r.to_topic}: "
                                  f"{'linked' if r.created else 'already linked'}\n")
    return 0


def restore_arguments(p: argparse.ArgumentParser) -> None:
    _path(p)
    p.add_argument("topic", metavar="TOPIC")
    p.add_argument("field", metavar="FIELD", nargs="?")
    p.add_argument("--json", action="store_true")


def restore(args: argparse.Namespace) -> int:
    with opened(args) as mem:
        result = ops.restore(mem, s.RestoreRequest(topic=args.topic, field=args.field, actor="cli"))
    what = result.topic + (f" / {result.field}" if result.field else "")
    _emit(args, result, lambda r: f"{what}: {'restored' if r.changed else 'nothing was faded'}\n")
    return 0


def maintain_arguments(p: argparse.ArgumentParser) -> None:
    _path(p)
    p.add_argument("--count", type=positive_int, default=1, help="how many runs (default 1)")
    p.add_argument("--dry-run", action="store_true",
                   help="run on a copy of the database and report; change nothing")
    p.add_argument("--json", action="store_true")
    p.add_argument("--progress", choices=["auto", "always", "never"], default="auto",
                   help="progress on stderr (auto: when stderr is a terminal)")


def maintain(args: argparse.Namespace) -> int:
    show = _step_printer(_progress_wanted(args))
    with opened(args) as mem:
        for i in range(1 if args.dry_run else args.count):
            result = ops.maintain(mem, dry_run=args.dry_run, actor="cli", progress=show)
            if args.progress_shown:
                sys.stderr.write("\n")
            _emit(args, result, lambda r: render.maintain(r, i + 1))
    return 0


