"""The `gem` command.

argparse, not a CLI library: it is in the standard library, the policy and benchmark
tools already mount their sub-parsers on it, and nothing here needs more than it gives
(the progress bar is twenty lines). Every command is declared once, in COMMANDS.

Exit codes: 0 success; 1 an error gem reports (bad input, unknown topic, a rejected
transition, audit violations, a locked or missing database); 2 usage errors;
3 `gem serve` when another server already serves the database.
"""
from __future__ import annotations

import argparse
import os
import sys
from dataclasses import dataclass
from typing import Callable

from .. import __version__
from . import commands, install, reads, serving, transfer, writes
from .demo import SimulatedClock, demo

__all__ = ["main", "demo", "SimulatedClock", "COMMANDS"]


@dataclass(frozen=True)
class Command:
    name: str
    help: str
    add_arguments: Callable[[argparse.ArgumentParser], None]
    run: Callable[[argparse.Namespace], int]


def _demo_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--path", default=None, help="database path (default: a temporary one)")
    p.add_argument("--engine", default="kuzu", choices=["kuzu", "ladybug"])


COMMANDS: list[Command] = [
    Command("demo", "tell the paper's Figure 1 story end to end", _demo_arguments,
            lambda a: demo(path=a.path, engine=a.engine)),
    Command("init", "create a database", writes.init_arguments, writes.init),
    Command("ingest", "ingest facts from a JSONL file (one fact per line) or stdin",
            writes.ingest_arguments, writes.ingest),
    Command("query", "retrieve by text and/or topic (a transition: reinforces what it returns)",
            reads.query_arguments, reads.query),
    Command("inspect", "show a topic or one field as stored (changes nothing)",
            reads.inspect_arguments, reads.inspect),
    Command("history", "a field's full value history", reads.history_arguments, reads.history),
    Command("explain", "the evidence behind a field's value and its reliability",
            reads.explain_arguments, reads.explain),
    Command("review", "topics with open revision flags", reads.review_arguments, reads.review),
    Command("audit", "check C1-C6 and the log's hash chain (exit 1 on violations)",
            reads.audit_arguments, reads.audit),
    Command("stats", "sizes of the state", reads.stats_arguments, reads.stats),
    Command("log", "the transition log", reads.log_arguments, reads.log),
    Command("link", "add an edge between two topics", writes.link_arguments, writes.link),
    Command("restore", "undo the forgetting of a topic or field", writes.restore_arguments,
            writes.restore),
    Command("maintain", "run forget + revise on a database", writes.maintain_arguments,
            writes.maintain),
    Command("export", "write a whole database as JSON Lines (lossless: rows, edges, policies, log)",
            transfer.export_arguments, transfer.export),
    Command("import", "load a `gem export` file into a new database (audited before it appears)",
            transfer.import_arguments, transfer.import_),
    Command("serve", "serve a database over HTTP (/v1) and MCP (/mcp)",
            serving.serve_arguments, serving.serve),
    Command("mcp", "MCP over stdio for desktop clients (bridged to `gem serve`)",
            serving.mcp_arguments, serving.mcp),
    # `gem mcp install ...` (main routes it here: `gem mcp PATH` takes any PATH)
    Command("mcp install", "add gem to a desktop client's MCP configuration (or print it)",
            install.install_arguments, install.install),
]


class _Parser(argparse.ArgumentParser):
    """Options may come before, between or after a command's positionals: plain argparse
    fills an optional positional (`query PATH [TEXT]`) at the first option it meets, so
    `gem query PATH -k 2 "text"` left TEXT unread. A command's parser therefore parses
    intermixed; one that holds subcommands (`gem`, `gem policy`) cannot, and needs not."""

    _intermixing = False

    def parse_known_args(self, args=None, namespace=None):  # type: ignore[override]
        if self._intermixing or any(isinstance(a, argparse._SubParsersAction) for a in self._actions):
            return super().parse_known_args(args, namespace)
        # parse_known_intermixed_args calls parse_known_args itself: this flag ends the recursion.
        self._intermixing = True
        try:
            return self.parse_known_intermixed_args(args, namespace)
        finally:
            self._intermixing = False


def build_parser() -> tuple[argparse.ArgumentParser, dict[str, Callable[[argparse.Namespace], int]]]:
    parser = _Parser(prog="gem", description="Governed Evolving Memory")
    parser.add_argument("--version", action="version", version=f"gem {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    runners: dict[str, Callable[[argparse.Namespace], int]] = {}
    for command in COMMANDS:
        command.add_arguments(sub.add_parser(command.name, help=command.help,
                                             description=command.help))
        runners[command.name] = command.run
    from ..bench import add_bench_parser, run_bench
    from ..policy.cli import add_policy_parser, run_policy
    add_policy_parser(sub)
    runners["policy"] = run_policy
    add_bench_parser(sub)
    runners["bench"] = run_bench
    return parser, runners


def main(argv: list[str] | None = None) -> int:
    parser, runners = build_parser()
    argv = sys.argv[1:] if argv is None else list(argv)
    if argv[:2] == ["mcp", "install"]:  # a database named install: `gem mcp ./install`
        argv = ["mcp install", *argv[2:]]
    args = parser.parse_args(argv)
    try:
        return commands.guarded(runners[args.command], args)
    except BrokenPipeError:
        # Whoever read the output stopped (`gem export db | head`): stop quietly, and keep the
        # interpreter from complaining again when it flushes stdout at exit.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 1


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())

