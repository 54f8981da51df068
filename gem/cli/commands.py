"""The commands on a database. Read commands print text, or with --json the same
schemas the HTTP API and MCP tools return (gem.api.schemas: titles, never ids)."""
from __future__ import annotations

import argparse
import dataclasses
import json
import logging
import math
import os
import sys
import time
from contextlib import contextmanager
from datetime import datetime, timezone
from typing import Any, Callable, Iterator, TextIO

from pydantic import BaseModel

from ..api import ops, prompt
from ..api import schemas as s
from ..errors import GemError, InvalidInput, StoreLocked, TransitionRejected
from ..llm import options as llm_options
from . import render

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


# ---------------------------------------------------------------------- export / import
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


def _report(args: argparse.Namespace, verb: str, report: Any, out: TextIO) -> None:
    if args.progress_shown:
        sys.stderr.write("\n")
    if args.json:
        out.write(json.dumps(dataclasses.asdict(report), indent=2) + "\n")
    else:
        head = f", head #{report.head['seq']} {report.head['hash'][:12]}" if report.head else ""
        out.write(f"{verb} {report.records} records ({report.transitions} transitions{head}); "
                  f"sha256 {report.sha256[:16]}\n")


def export_arguments(p: argparse.ArgumentParser) -> None:
    _path(p)
    p.add_argument("file", metavar="FILE.jsonl", nargs="?", default="-",
                   help="where to write (default '-': stdout, the summary then goes to stderr)")
    p.add_argument("--json", action="store_true", help="print the summary as JSON")
    p.add_argument("--progress", choices=["auto", "always", "never"], default="auto",
                   help="progress on stderr (auto: when stderr is a terminal)")


def _progress_wanted(args: argparse.Namespace) -> bool:
    wanted = args.progress == "always" or (args.progress == "auto" and sys.stderr.isatty())
    args.progress_shown = wanted
    return wanted


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


# ---------------------------------------------------------------------- serving
def serve_arguments(p: argparse.ArgumentParser) -> None:
    _path(p)
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=port_number, default=8765, help="0 picks a free port (default 8765)")
    p.add_argument("--policies", nargs="+", metavar="FILE", help="load these policy files")
    p.add_argument("--maintain-every", type=positive_float, metavar="SECONDS",
                   help="run maintenance (forget + revise) this often")
    p.add_argument("--create", action="store_true", help="create the database if it is missing")
    p.add_argument("--idle-exit", type=positive_float, metavar="SECONDS",
                   help="exit after this long with no request and no `gem mcp` attached")
    p.add_argument("--lock-timeout", type=non_negative_float, default=10.0, metavar="SECONDS",
                   help="wait this long for another process to release the database")
    p.add_argument("--max-body", type=positive_int, default=1 << 20, metavar="BYTES",
                   help="refuse larger request bodies with 413 (default 1 MiB)")
    p.add_argument("--log-level", default="INFO", choices=["DEBUG", "INFO", "WARNING", "ERROR"])
    p.add_argument("--reports", default="bench/out", metavar="DIR",
                   help="the dashboard's Reports page lists the HTML reports in DIR "
                        "(default bench/out, where `gem bench trajectory --html` writes)")
    p.add_argument("--keys", metavar="FILE",
                   help='API keys: a JSON object {"KEY": "scope"} ("*": every scope); each '
                        "request then needs `Authorization: Bearer KEY` and sees its scope only")
    llm_options.add_arguments(p)


def _logging(level: str) -> None:
    logging.basicConfig(stream=sys.stderr, level=getattr(logging, level),
                        format="%(asctime)s %(name)s %(levelname)s %(message)s")


def serve(args: argparse.Namespace) -> int:
    try:
        from ..server.runner import serve as run
        from ..server.service import ServeConfig
    except ImportError as exc:  # pragma: no cover - depends on the install
        raise InvalidInput(f"gem serve needs the server extra: pip install 'gem-memory[server]' ({exc})")
    from ..server.keys import Keys
    keys = Keys.read(args.keys) if args.keys else None
    _logging(args.log_level)
    if keys is None and args.host not in ("127.0.0.1", "localhost", "::1"):
        logging.getLogger("gem.server").warning(
            "listening on %s without --keys: whoever reaches it can read and change the memory",
            args.host)
    return run(ServeConfig(
        path=args.path, engine=args.engine, create=args.create, host=args.host, port=args.port,
        policies=tuple(args.policies) if args.policies else None,
        maintain_every=args.maintain_every, idle_exit=args.idle_exit,
        lock_timeout=args.lock_timeout, max_body=args.max_body, reports=args.reports, keys=keys,
        hooks=tuple(llm_options.hooks(args).items())))


def mcp_arguments(p: argparse.ArgumentParser) -> None:
    _path(p)
    p.add_argument("--idle-exit", type=positive_float, default=60.0, metavar="SECONDS",
                   help="a server this command starts exits this long after its last client "
                        "(default 60)")
    p.add_argument("--key", default=os.environ.get("GEM_API_KEY"),
                   help="the API key to present to a server started with --keys "
                        "(default: $GEM_API_KEY)")
    llm_options.add_arguments(p)  # for the server it starts: `gem serve` takes the same


def mcp(args: argparse.Namespace) -> int:
    try:
        from ..server.bridge import run_bridge
    except ImportError as exc:  # pragma: no cover - depends on the install
        raise InvalidInput(f"gem mcp needs the server extra: pip install 'gem-memory[server]' ({exc})")
    if args.engine == "falkordb":
        raise InvalidInput("gem mcp starts or finds the one server of a database path; for a "
                           "FalkorDB memory run `gem serve URL --engine falkordb` (as many as "
                           "you like) and point the MCP client at its /mcp")
    llm_options.hooks(args)  # refuse bad model options here, not in a server's log
    _logging("WARNING")
    return run_bridge(args.path, args.engine, args.idle_exit, key=args.key,
                      serve_args=llm_options.serve_arguments(args))
