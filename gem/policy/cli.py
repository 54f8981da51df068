"""`gem policy check | fmt | explain`, mounted by the main `gem` command.

`check` and `explain` work on the composition a memory would run: the default policy,
then the files in order (`--no-defaults`: the files alone). `fmt` works file by file.

Exit codes: 0 clean (warnings allowed unless --strict); 1 diagnostics (check), a
warning under --strict, files that would change (fmt --check) or a file that does
not parse; 2 usage errors and unreadable files.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import TextIO

from ..errors import InvalidInput, PolicyError
from .checker import check
from .explain import explain
from .fmt import fmt
from .parser import parse_all
from .sources import Source, default_sources, is_default_policy, read_sources

EXIT_OK, EXIT_DIAGNOSTICS, EXIT_USAGE = 0, 1, 2


def add_policy_parser(subparsers) -> argparse.ArgumentParser:
    p = subparsers.add_parser("policy", help="check, format and explain .policy files")
    sub = p.add_subparsers(dest="policy_command", required=True)
    c = sub.add_parser("check", help="check the default policy and FILEs composed in order; "
                                     "diagnostics and warnings go to stderr")
    c.add_argument("files", nargs="+", metavar="FILE")
    c.add_argument("--no-defaults", action="store_true",
                   help="check the files alone, without the default policy before them")
    c.add_argument("--strict", action="store_true", help="exit 1 on warnings too")
    f = sub.add_parser("fmt", help="rewrite policy files in canonical form")
    f.add_argument("files", nargs="+", metavar="FILE")
    f.add_argument("--check", action="store_true", help="change nothing; exit 1 if a file would change")
    e = sub.add_parser("explain", help="which events trigger which policies, what can cascade, "
                                       "how the files compose")
    e.add_argument("files", nargs="+", metavar="FILE")
    e.add_argument("--no-defaults", action="store_true",
                   help="explain the files alone, without the default policy before them")
    return p


def run_policy(args: argparse.Namespace, out: TextIO | None = None, err: TextIO | None = None) -> int:
    out = out or sys.stdout
    err = err or sys.stderr
    command = args.policy_command
    defaults = command in ("check", "explain") and not args.no_defaults
    try:
        sources = read_sources(args.files, argument=None)
    except InvalidInput as exc:
        print(f"gem policy: {exc}", file=err)
        return EXIT_USAGE
    except PolicyError as exc:  # a file that is not UTF-8
        _print(exc.diagnostics, err)
        return EXIT_DIAGNOSTICS
    if defaults:
        for s in sources:
            if is_default_policy(s.file):
                print(f"gem policy: {s.file} is the default policy, which is composed first already: "
                      "leave it out, or use --no-defaults", file=err)
                return EXIT_USAGE
        sources = default_sources() + sources
    if command == "check":
        return _check(sources, len(args.files), defaults, args.strict, out, err)
    if command == "fmt":
        return _fmt(sources, args.check, out, err)
    if command == "explain":
        trees, rc = _parse_all(sources, err)
        if rc:
            return rc
        out.write(explain(trees))
        return EXIT_OK
    print(f"gem policy: unknown command {command!r}", file=err)  # pragma: no cover - argparse refuses it
    return EXIT_USAGE


def _parse_all(sources: list[Source], err: TextIO):
    try:
        return parse_all([(s.file, s.text) for s in sources]), EXIT_OK
    except PolicyError as exc:
        _print(exc.diagnostics, err)
        return [], EXIT_DIAGNOSTICS


def _print(diagnostics, err: TextIO, what: str = "problem") -> None:
    for d in diagnostics:
        print(d.render(), file=err)
    n = len(diagnostics)
    print(f"{n} {what}{'s' if n != 1 else ''} found", file=err)


def _check(sources: list[Source], n_files: int, defaults: bool, strict: bool, out: TextIO, err: TextIO) -> int:
    trees, rc = _parse_all(sources, err)
    if rc:
        return rc
    try:
        checked = check(trees)
    except PolicyError as exc:
        _print(exc.diagnostics, err)
        return EXIT_DIAGNOSTICS
    if checked.warnings:
        _print(checked.warnings, err, "warning")
        if strict:
            return EXIT_DIAGNOSTICS
    n_policies = len(checked.policies)
    files = f"{n_files} file{'s' if n_files != 1 else ''}" + (" on the default policy" if defaults else "")
    warned = f", {len(checked.warnings)} warning{'s' if len(checked.warnings) != 1 else ''}" \
        if checked.warnings else ""
    print(f"ok: {files}, {n_policies} polic{'ies' if n_policies != 1 else 'y'} in force{warned}", file=out)
    return EXIT_OK


def _fmt(sources: list[Source], check_only: bool, out: TextIO, err: TextIO) -> int:
    trees, rc = _parse_all(sources, err)
    if rc:
        return rc
    changed = []
    for source, tree in zip(sources, trees):
        new = fmt(tree)
        if new == source.text:
            continue
        changed.append(source.file)
        if check_only:
            print(f"would reformat {source.file}", file=out)
        else:
            Path(source.file).write_text(new, encoding="utf-8")
            print(f"reformatted {source.file}", file=out)
    if check_only and changed:
        return EXIT_DIAGNOSTICS
    return EXIT_OK


def main(argv: list[str] | None = None) -> int:
    """`python -m gem.policy.cli ...`: the same commands without the rest of gem's CLI."""
    parser = argparse.ArgumentParser(prog="gem")
    add_policy_parser(parser.add_subparsers(dest="command", required=True))
    return run_policy(parser.parse_args(argv))


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
