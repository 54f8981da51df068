"""Every `gem` command, run as a user would: a subprocess on a real database."""
from __future__ import annotations

import contextlib
import io
import json
import os
import subprocess
import sys

import pytest

from gem.cli import main

from conftest import ENGINE
from servers import HANG  # a guard against hangs only (tests/servers.py)

FACTS = [
    {"topic": "Website Redesign", "field": "deadline", "value": "March 15", "source": "chat:1"},
    {"topic": "Website Redesign", "field": "team", "value": ["Alice", "Bob"]},
    {"topic": "Launch Milestones", "field": "launch", "value": "March 20"},
]


def gem(*args: str, stdin: str | None = None, ok: bool = True) -> subprocess.CompletedProcess:
    result = subprocess.run([sys.executable, "-m", "gem", *args], input=stdin, text=True,
                            capture_output=True, timeout=HANG)
    if ok:
        assert result.returncode == 0, result.stderr
    return result


class Ran:
    def __init__(self, returncode: int, stdout: str, stderr: str) -> None:
        self.returncode, self.stdout, self.stderr = returncode, stdout, stderr


def gem_here(*args: str, stdin: str | None = None, ok: bool = True) -> Ran:
    """The same command in this process (the same code without the process start-up):
    for the variants of commands each also run by `gem` in a subprocess."""
    out, err = io.StringIO(), io.StringIO()
    old_stdin = sys.stdin
    sys.stdin = io.StringIO(stdin or "")
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                code = main(list(args))
            except SystemExit as exc:  # argparse
                code = exc.code
    finally:
        sys.stdin = old_stdin
    result = Ran(code, out.getvalue(), err.getvalue())
    if ok:
        assert code == 0, result.stderr
    return result


def jsonl(rows) -> str:
    return "".join((r if isinstance(r, str) else json.dumps(r)) + "\n" for r in rows)


@pytest.fixture
def db(tmp_path):
    path = str(tmp_path / "cli.db")
    assert "created" in gem_here("init", path, "--engine", ENGINE).stdout
    return path


def test_version_and_help():
    assert gem("--version").stdout.strip() == "gem 0.1.0"
    out = gem_here("--help", ok=False).stdout
    for command in ("init", "ingest", "query", "inspect", "history", "explain", "review", "audit",
                    "stats", "log", "link", "restore", "maintain", "serve", "mcp", "demo",
                    "policy", "bench"):
        assert command in out


@pytest.mark.slow
def test_a_session_from_init_to_audit(tmp_path):
    e = ("--engine", ENGINE)
    db = str(tmp_path / "session.db")
    assert "created" in gem("init", db, *e).stdout
    facts = tmp_path / "facts.jsonl"
    facts.write_text(jsonl(FACTS))
    r = gem("ingest", db, str(facts), "--batch", "2", "--progress", "always", *e)
    assert "ingested 3 facts in 2 transitions" in r.stdout and "2 new topics" in r.stdout
    assert "3/3 facts" in r.stderr  # the progress bar
    assert "linked" in gem("link", db, "Website Redesign", "Launch Milestones", *e).stdout
    r = gem_here("ingest", db, "-", "--json", *e,
            stdin=jsonl([{"topic": "website redesign", "field": "deadline", "value": "April 20"}]))
    summary = json.loads(r.stdout)
    assert summary["facts"] == 1 and summary["flagged_topics"] == 1 and summary["new_values"] == 1

    answer = json.loads(gem("query", db, "deadline of the website redesign", "--json", *e).stdout)
    assert answer["topics"][0]["title"] == "Website Redesign"
    assert answer["topics"][0]["fields"]["deadline"]["value"] == "April 20"
    assert "April 20" in gem_here("query", db, "--topic", "Website Redesign", "--field", "deadline", *e).stdout

    view = json.loads(gem("inspect", db, "Launch Milestones", "--json", *e).stdout)
    assert view["needs_review"][0]["because_of"] == "Website Redesign"
    assert "needs review: Website Redesign changed" in gem_here("inspect", db, "Launch Milestones", *e).stdout
    field = json.loads(gem_here("inspect", db, "Website Redesign", "team", "--json", *e).stdout)
    assert field["fields"]["team"]["value"] == ["Alice", "Bob"]

    history = json.loads(gem("history", db, "Website Redesign", "deadline", "--json", *e).stdout)
    assert [(h["value"], h["status"], h["superseded_by"]) for h in history["entries"]] == \
        [("March 15", "superseded", 2), ("April 20", "current", None)]
    assert "replaced by #2" in gem_here("history", db, "Website Redesign", "deadline", *e).stdout
    explained = json.loads(gem("explain", db, "Website Redesign", "deadline", "--json", *e).stdout)
    assert explained["value"] == "April 20" and -1 <= explained["reliability"] <= 1
    assert "reliability R" in gem_here("explain", db, "Website Redesign", "deadline", *e).stdout

    review = json.loads(gem("review", db, "--json", *e).stdout)
    assert [f["topic"] for f in review["flags"]] == ["Launch Milestones"]
    stats = json.loads(gem("stats", db, "--json", *e).stdout)
    assert stats["topics"] == {"active": 2} and stats["entries"] == 4
    assert "active_fields: 3" in gem_here("stats", db, *e).stdout

    log = json.loads(gem("log", db, "--since", "1", "--limit", "2", "--json", *e).stdout)
    assert [r["op"] for r in log["records"]] == ["ingest", "ingest"] and log["next_since"] == 3
    assert "Website Redesign / deadline" in json.dumps(log)
    assert not any(u.startswith("t") and u[1:].isdigit() for r in log["records"] for u in r["units"])
    assert "link" in gem_here("log", db, *e).stdout

    dry = json.loads(gem("maintain", db, "--dry-run", "--json", *e).stdout)
    assert dry["dry_run"] and dry["revise"]["flags_open"] == ["Launch Milestones"]
    assert json.loads(gem_here("review", db, "--json", *e).stdout) == review  # the dry run changed nothing
    ran = gem_here("maintain", db, "--progress", "always", *e)
    assert "run 1" in ran.stdout and "forget: committed: 8/8" in ran.stderr
    assert "nothing was faded" in gem("restore", db, "Launch Milestones", *e).stdout
    assert json.loads(gem_here("restore", db, "Website Redesign", "deadline", "--json", *e).stdout)["changed"] is False

    audit = json.loads(gem("audit", db, "--json", *e).stdout)
    assert audit["ok"] and audit["chain_ok"]
    assert "audit ok" in gem_here("audit", db, *e).stdout


def test_bad_lines_refuse_the_run_or_are_skipped(db, tmp_path):
    e = ("--engine", ENGINE)
    lines = [FACTS[0], "{not json", {"topic": "No value", "field": "x"}, "[1, 2]", "", FACTS[2]]
    r = gem_here("ingest", db, "-", *e, stdin=jsonl(lines), ok=False)
    assert r.returncode == 1
    assert "-:2: not JSON" in r.stderr and "-:3: invalid Fact" in r.stderr
    assert "-:4: not a JSON object" in r.stderr and "nothing was ingested" in r.stderr
    assert json.loads(gem_here("stats", db, "--json", *e).stdout)["entries"] == 0

    r = gem_here("ingest", db, "-", "--skip-bad", "--json", *e, stdin=jsonl(lines))
    summary = json.loads(r.stdout)
    assert summary["facts"] == 2 and summary["skipped_lines"] == 3
    assert "-:2: not JSON" in r.stderr
    assert json.loads(gem_here("stats", db, "--json", *e).stdout)["entries"] == 2


def test_fact_lines_give_times_as_iso_text_with_an_offset_and_may_carry_labels(db):
    e = ("--engine", ENGINE)
    lines = [{"topic": "Ada", "field": "phone", "value": "+44 20 0000", "labels": ["pii"],
              "at": "2026-01-01T09:00:00+01:00"},
             {"topic": "Ada", "field": "role", "value": "analyst", "at": "2026-01-01T09:00:00"}]
    r = gem_here("ingest", db, "-", "--create", "--skip-bad", *e, stdin=jsonl(lines))
    assert "-:2: invalid Fact: at: must be timezone-aware" in r.stderr   # a naive time is refused
    phone = json.loads(gem_here("inspect", db, "Ada", "phone", "--json", *e).stdout)
    assert phone["fields"]["phone"]["labels"] == ["pii"]
    assert phone["fields"]["phone"]["valid_at"] == "2026-01-01T08:00:00Z"


def test_a_rejected_batch_stops_the_run_and_keeps_earlier_batches(tmp_path):
    policy = tmp_path / "tight.policy"
    policy.write_text("SET active_bound = 1\n")
    path = str(tmp_path / "tight.db")
    gem_here("init", path, "--engine", ENGINE, "--policies", str(policy))
    rows = [{"topic": "A", "field": "x", "value": 1},
            {"topic": "C", "field": "z", "value": 3}, {"topic": "C", "field": "w", "value": 4}]
    r = gem_here("ingest", path, "-", "--batch", "1", "--engine", ENGINE, stdin=jsonl(rows[:1]))
    r = gem_here("ingest", path, "-", "--batch", "2", "--json", "--engine", ENGINE,
            stdin=jsonl(rows[1:]), ok=False)
    assert r.returncode == 1
    assert json.loads(r.stdout)["rejected"]["lines"] == [1, 2]
    assert "rejected: C5" in r.stderr and "batches before it are committed" in r.stderr
    assert json.loads(gem_here("stats", path, "--json", "--engine", ENGINE).stdout)["entries"] == 1


def test_missing_paths_are_errors_except_where_creating(tmp_path):
    missing = str(tmp_path / "typo.db")
    for args in (("query", missing, "x"), ("stats", missing), ("inspect", missing, "A"),
                 ("history", missing, "A", "b"), ("explain", missing, "A", "b"),
                 ("audit", missing), ("log", missing), ("review", missing),
                 ("restore", missing, "A"), ("link", missing, "A", "B"), ("maintain", missing),
                 ("serve", missing, "--port", "0"), ("mcp", missing)):
        r = gem_here(*args, "--engine", ENGINE, ok=False)
        assert r.returncode == 1 and "no database at" in r.stderr, args
        assert not os.path.exists(missing), args
    r = gem_here("ingest", missing, "-", "--engine", ENGINE, stdin=jsonl(FACTS[:1]), ok=False)
    assert r.returncode == 1 and not os.path.exists(missing)
    gem_here("ingest", missing, "-", "--create", "--engine", ENGINE, stdin=jsonl(FACTS[:1]))
    assert os.path.exists(missing)
    r = gem_here("init", missing, "--engine", ENGINE, ok=False)
    assert r.returncode == 1 and "already exists" in r.stderr


def test_errors_are_one_line_and_exit_1(db):
    e = ("--engine", ENGINE)
    r = gem_here("history", db, "Nothing", "here", *e, ok=False)
    assert r.returncode == 1 and r.stderr.strip() == "gem: no topic named 'Nothing'"
    r = gem_here("link", db, "A", "B", *e, ok=False)
    assert r.returncode == 1 and "no topic named 'A'" in r.stderr
    r = gem_here("query", db, *e, ok=False)
    assert r.returncode == 1 and "give a query, a topic, or both" in r.stderr
    r = gem_here("query", db, "x", "--as-of", "yesterday", *e, ok=False)
    assert r.returncode == 2  # a usage error


def test_query_takes_a_time_window_and_all_fields(db):
    from datetime import datetime, timezone

    import gem as gem_lib
    with gem_lib.open(db, engine=ENGINE, create=False) as mem:
        mem.ingest([gem_lib.Episode("the plumber comes on tuesday", speaker="Bo",
                                    at=datetime(2026, 3, 2, tzinfo=timezone.utc)),
                    gem_lib.Fact("Kitchen", "budget", "12k", at=datetime(2026, 1, 2, tzinfo=timezone.utc)),
                    gem_lib.Fact("Kitchen", "colour", "oak", at=datetime(2026, 1, 2, tzinfo=timezone.utc))])
    e = ("--engine", ENGINE)
    march = gem_here("query", db, "plumber budget", "--between", "2026-03-01T00:00:00+00:00",
                     "2026-03-31T00:00:00+00:00", "--json", *e).stdout
    found = json.loads(march)
    assert [x["text"] for x in found["episodes"]] == ["the plumber comes on tuesday"]
    assert found["topics"] == []  # the budget was stated in January
    whole = json.loads(gem_here("query", db, "budget", "--all-fields", "--json", *e).stdout)
    assert set(whole["topics"][0]["fields"]) == {"budget", "colour"}
    refused = gem_here("query", db, "budget", "--all-fields", "--field", "x", *e, ok=False)
    assert refused.returncode != 0 and "exclude each other" in refused.stderr


def test_ingest_reads_episodes_beside_facts(db, tmp_path):
    lines = tmp_path / "mixed.jsonl"
    lines.write_text(jsonl([
        {"topic": "Kitchen", "field": "budget", "value": "12k", "at": "2026-01-02T10:00:00+00:00"},
        {"text": "the plumber comes on tuesday", "speaker": "Bo", "source": "chat:9",
         "at": "2026-01-03T10:00:00+00:00"},
        {"text": "no zone", "at": "2026-01-03T10:00:00"}]))
    e = ("--engine", ENGINE)
    refused = gem_here("ingest", db, str(lines), *e, ok=False)
    assert refused.returncode == 1 and "mixed.jsonl:3: invalid Episode: at" in refused.stderr
    ran = gem_here("ingest", db, str(lines), "--skip-bad", *e)
    assert "ingested 2 lines (1 of them episodes)" in ran.stdout
    found = json.loads(gem_here("query", db, "plumber", "--json", *e).stdout)
    assert [(x["speaker"], x["source"]) for x in found["episodes"]] == [("Bo", "chat:9")]


def test_ingest_checks_every_line_against_the_run_s_clock_and_names_the_future_ones(db, tmp_path):
    lines = tmp_path / "said.jsonl"
    lines.write_text(jsonl([
        {"topic": "Kitchen", "field": "budget", "value": "12k", "at": "2026-01-02T10:00:00+00:00"},
        {"text": "the plumber comes on tuesday", "source": "chat:9", "at": "2199-01-03T10:00:00+00:00"},
        {"topic": "Kitchen", "field": "colour", "value": "blue", "at": "2199-01-03T10:00:00+00:00"}]))
    e = ("--engine", ENGINE)
    before = json.loads(gem("stats", db, "--json", *e).stdout)
    refused = gem("ingest", db, str(lines), *e, ok=False)
    assert refused.returncode == 1 and "nothing was ingested" in refused.stderr
    assert f"{lines}:2: at is 2199-01-03T10:00:00+00:00, after the memory's clock" in refused.stderr
    assert f"{lines}:3: at is 2199-01-03T10:00:00+00:00, after the memory's clock" in refused.stderr
    assert json.loads(gem("stats", db, "--json", *e).stdout) == before   # nothing written
    ran = gem("ingest", db, str(lines), "--skip-bad", "--json", *e)
    summary = json.loads(ran.stdout)
    assert (summary["facts"], summary["skipped_lines"], summary["rejected"]) == (1, 2, None)
    assert f"{lines}:2: at is" in ran.stderr and f"{lines}:3: at is" in ran.stderr


def test_ingest_twice_stores_each_episode_once(db, tmp_path):
    lines = tmp_path / "chat.jsonl"
    lines.write_text(jsonl([
        {"text": "the plumber comes on tuesday", "speaker": "Bo", "source": "chat:9",
         "at": "2026-01-03T10:00:00+00:00"},
        {"text": "the plumber comes on tuesday", "speaker": "Bo", "source": "chat:9",
         "at": "2026-01-03T10:00:00+00:00"},
        {"topic": "Kitchen", "field": "budget", "value": "12k", "at": "2026-01-02T10:00:00+00:00"}]))
    e = ("--engine", ENGINE)
    first = json.loads(gem_here("ingest", db, str(lines), "--json", *e).stdout)
    assert (first["episodes"], first["known_episodes"], first["new_values"]) == (2, 1, 1)
    again = gem_here("ingest", db, str(lines), *e)
    assert "(2 of them episodes, 2 already stored)" in again.stdout
    assert "0 new values, 1 corroborations" in again.stdout       # facts corroborate
    found = json.loads(gem_here("query", db, "plumber", "--json", *e).stdout)
    assert [(x["speaker"], x["source"]) for x in found["episodes"]] == [("Bo", "chat:9")]
