"""`gem policy check | fmt | explain`, mounted by the main `gem` command.

Exit codes: 0 clean; 1 diagnostics (check), files that would change (fmt --check)
or a file that does not parse; 2 usage errors and unreadable files.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import TextIO

from ..errors import PolicyError
from .checker import check
from .explain import explain
from .fmt import fmt
from .parser import parse_all

EXIT_OK, EXIT_DIAGNOSTICS, EXIT_USAGE = 0, 1, 2


def add_policy_parser(subparsers) -> argparse.ArgumentParser:
    p = subparsers.add_parser("policy", help="check, format and explain .policy files")
    sub = p.add_subparsers(dest="policy_command", required=True)
    c = sub.add_parser("check", help="parse and check policy files together; diagnostics go to stderr")
    c.add_argument("files", nargs="+", metavar="FILE")
    f = sub.add_parser("fmt", help="rewrite policy files in canonical form")
    f.add_argument("files", nargs="+", metavar="FILE")
    f.add_argument("--check", action="store_true", help="change nothing; exit 1 if a file would change")
    e = sub.add_parser("explain", help="which events trigger which policies, and what can cascade")
    e.add_argument("files", nargs="+", metavar="FILE")
    return p


def run_policy(args: argparse.Namespace, out: TextIO | None = None, err: TextIO | None = None) -> int:
    out = out or sys.stdout
    err = err or sys.stderr
    texts = []
    for name in args.files:
        try:
            texts.append((name, Path(name).read_text(encoding="utf-8")))
        except FileNotFoundError:
            print(f"gem policy: no such file: {name}", file=err)
            return EXIT_USAGE
        except (OSError, UnicodeDecodeError) as exc:
            print(f"gem policy: cannot read {name}: {exc}", file=err)
            return EXIT_USAGE
    command = args.policy_command
    if command == "check":
        return _check(texts, out, err)
    if command == "fmt":
        return _fmt(texts, args.check, out, err)
    if command == "explain":
        trees, rc = _parse_all(texts, err)
        if rc:
            return rc
        out.write(explain(trees))
        return EXIT_OK
    print(f"gem policy: unknown command {command!r}", file=err)  # pragma: no cover - argparse refuses it
    return EXIT_USAGE


def _parse_all(texts, err: TextIO):
    try:
        return parse_all(texts), EXIT_OK
    except PolicyError as exc:
        _print(exc.diagnostics, err)
        return [], EXIT_DIAGNOSTICS


def _print(diagnostics, err: TextIO) -> None:
    for d in diagnostics:
        print(d.render(), file=err)
    n = len(diagnostics)
    print(f"{n} problem{'s' if n != 1 else ''} found", file=err)


def _check(texts, out: TextIO, err: TextIO) -> int:
    trees, rc = _parse_all(texts, err)
    if rc:
        return rc
    try:
        checked = check(trees)
    except PolicyError as exc:
        _print(exc.diagnostics, err)
        return EXIT_DIAGNOSTICS
    n_files, n_policies = len(trees), len(checked.policies)
    print(f"ok: {n_files} file{'s' if n_files != 1 else ''}, {n_policies} "
          f"polic{'ies' if n_policies != 1 else 'y'}", file=out)
    return EXIT_OK


def _fmt(texts, check_only: bool, out: TextIO, err: TextIO) -> int:
    trees, rc = _parse_all(texts, err)
    if rc:
        return rc
    changed = []
    for (name, text), tree in zip(texts, trees):
        new = fmt(tree)
        if new == text:
            continue
        changed.append(name)
        if check_only:
            print(f"would reformat {name}", file=out)
        else:
            Path(name).write_text(new, encoding="utf-8")
            print(f"reformatted {name}", file=out)
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
