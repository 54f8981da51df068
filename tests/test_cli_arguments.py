"""How `gem` reads its command line: options anywhere, numbers in range (no database needed
for most; the three reported cases run on a real one)."""
from __future__ import annotations

import argparse
import contextlib
import io
import json
import sys

import pytest
from conftest import ENGINE

from gem.cli import build_parser, main

FACTS = [{"topic": "Website Redesign", "field": "deadline", "value": "March 15"},
         {"topic": "Launch Milestones", "field": "launch", "value": "March 20"}]


def run(*args: str, stdin: str = "") -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    saved, sys.stdin = sys.stdin, io.StringIO(stdin)
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                code = main(list(args))
            except SystemExit as exc:  # argparse
                code = int(exc.code or 0)
    finally:
        sys.stdin = saved
    return code, out.getvalue(), err.getvalue()


@pytest.fixture
def db(tmp_path):
    path = str(tmp_path / "cli.db")
    rows = "".join(json.dumps(r) + "\n" for r in FACTS)
    code, _, err = run("ingest", path, "-", "--create", "--engine", ENGINE, "--progress", "never", stdin=rows)
    assert code == 0, err
    return path


def test_query_takes_k_and_json_before_its_text(db):
    code, out, err = run("query", db, "-k", "2", "deadline", "--engine", ENGINE)
    assert code == 0 and "deadline" in out, err
    code, out, err = run("query", db, "--json", "deadline", "--engine", ENGINE)
    assert code == 0, err
    assert [t["title"] for t in json.loads(out)["topics"]][:1] == ["Website Redesign"]


def test_export_takes_json_before_its_file(db, tmp_path):
    target = tmp_path / "out.jsonl"
    code, out, err = run("export", db, "--json", str(target), "--engine", ENGINE, "--progress", "never")
    assert code == 0, err
    report = json.loads(out)
    assert report["records"] > 0 and f'"records":{report["records"]}' in target.read_text().splitlines()[-1]


# ---- the sweep: every command, every option, before, between and after the positionals ----


def _leaf_parsers(parser: argparse.ArgumentParser, prefix: tuple[str, ...] = ()):
    subs = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    if not subs:
        yield prefix, parser
        return
    for name, sub in subs[0].choices.items():
        yield from _leaf_parsers(sub, prefix + (name,))


def _value(action: argparse.Action) -> list[str]:
    """Command-line words giving `action` a valid value."""
    if action.nargs == 0:
        return []
    if action.choices:
        one = str(list(action.choices)[-1])  # the last choice: never the default here
    elif getattr(action.type, "__name__", "") == "_time":
        one = "2026-03-01T00:00:00+00:00"
    elif action.metavar == "LAT,LON,KM":
        one = "38.7,-9.1,3"
    elif action.type not in (None, str):
        one = "3"  # valid for every numeric option
    else:
        one = "V"
    if isinstance(action.nargs, int):
        return [one] * action.nargs
    return [one]


def _option_words(action: argparse.Action) -> list[str]:
    flag = action.option_strings[-1]
    words = _value(action)
    if action.nargs in ("+", "*"):
        return [f"{flag}={words[0]}"]  # an explicit value: a list option would swallow PATH
    return [flag, *words]


def _positionals(parser: argparse.ArgumentParser) -> list[str]:
    words = []
    for i, a in enumerate(a for a in parser._actions if not a.option_strings):
        words += [f"P{i}.policy"] if a.nargs == "+" else [next(iter(a.choices or [f"P{i}"]))]
    return words


SKIP = {"help", "version"}
LEAVES = [(prefix, p) for prefix, p in _leaf_parsers(build_parser()[0])]


@pytest.mark.parametrize("prefix,parser", LEAVES, ids=[" ".join(p) for p, _ in LEAVES])
def test_every_option_may_come_before_between_or_after_the_positionals(prefix, parser):
    top = build_parser()[0]
    positionals = _positionals(parser)
    options = [a for a in parser._actions if a.option_strings and a.dest not in SKIP]
    assert options, prefix
    for action in options:
        words = _option_words(action)
        after = top.parse_args([*prefix, *positionals, *words])
        places = [[*prefix, *words, *positionals]]
        places += [[*prefix, *positionals[:i], *words, *positionals[i:]] for i in range(1, len(positionals))]
        for argv in places:
            assert top.parse_args(argv) == after, argv
        assert getattr(after, action.dest) != action.default, (prefix, action.dest)


# ---- numbers in range ---------------------------------------------------------------------


@pytest.mark.parametrize("argv,message", [
    (["maintain", "P", "--count", "0"], "--count: must be a positive integer, got 0"),
    (["maintain", "P", "--count", "-2"], "--count: must be a positive integer, got -2"),
    (["ingest", "P", "-", "--batch", "0"], "--batch: must be a positive integer, got 0"),
    (["query", "P", "x", "-k", "0"], "-k: must be a positive integer, got 0"),
    (["log", "P", "--limit", "0"], "--limit: must be a positive integer, got 0"),
    (["log", "P", "--since", "-1"], "--since: must be a non-negative integer, got -1"),
    (["log", "P", "--since", "x"], "--since: must be a non-negative integer, got 'x'"),
    (["serve", "P", "--port", "70000"], "--port: must be a port number in [0, 65535], got 70000"),
    (["serve", "P", "--max-body", "0"], "--max-body: must be a positive integer, got 0"),
    (["serve", "P", "--maintain-every", "0"], "--maintain-every: must be a positive number, got 0"),
    (["serve", "P", "--idle-exit", "-1"], "--idle-exit: must be a positive number, got -1"),
    (["serve", "P", "--idle-exit", "nan"], "--idle-exit: must be a positive number, got nan"),
    (["serve", "P", "--lock-timeout", "-1"], "--lock-timeout: must be a non-negative number, got -1"),
    (["mcp", "P", "--idle-exit", "0"], "--idle-exit: must be a positive number, got 0"),
])
def test_numbers_out_of_range_are_usage_errors(argv, message, tmp_path):
    code, out, err = run(*argv)
    assert code == 2 and out == ""
    assert err.rstrip().endswith(f"argument {message}"), err
