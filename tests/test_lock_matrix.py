"""A database has one owner process, whatever that owner does (issue 25).

Each case runs an operation in the process that owns a database (a real `gem serve`, or this
test process through the library) and then checks, from a real second process, that opening
the database still fails with StoreLocked, and that the log's sequence numbers are 1..n with
no gap. Closing any descriptor of a file drops every POSIX lock the process holds on it (the
engine's own lock included): gem's owner lock is a flock on `<db>.gem-head`, which only the
owner's exit or close releases.
"""
from __future__ import annotations

import subprocess
import sys
import textwrap

import httpx
import pytest

import gem
from conftest import ENGINE
from servers import start, stop

EMBEDDED = pytest.mark.skipif(ENGINE == "falkordb", reason="an embedded database's lock")
pytestmark = EMBEDDED


def second_process_open(path: str) -> str:
    """What `gem.open(path)` does in another process: 'LOCKED <path>' or 'OPENED'."""
    code = textwrap.dedent(f"""
        import gem
        try:
            gem.open({path!r}, engine={ENGINE!r}, create=False).close()
        except gem.StoreLocked as exc:
            print("LOCKED", exc.path)
        else:
            print("OPENED")
    """)
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


def assert_gapless(seqs: list[int]) -> None:
    assert seqs == list(range(1, len(seqs) + 1)), seqs


def served_log(url: str) -> list[int]:
    seqs, since = [], 0
    while True:
        page = httpx.get(f"{url}/v1/log", params={"since": since, "limit": 500}).json()
        seqs += [r["seq"] for r in page["records"]]
        if page["next_since"] is None:
            return seqs
        since = page["next_since"]


def test_a_dry_run_maintain_keeps_the_served_database_locked(tmp_path):
    path = str(tmp_path / "db.kz")
    gem.open(path, engine=ENGINE).close()
    server = start(path, "--engine", ENGINE)
    try:
        assert second_process_open(path) == f"LOCKED {path}"
        done = httpx.post(f"{server.url}/v1/maintain", json={"dry_run": True}, timeout=300)
        assert done.status_code == 200 and done.json()["dry_run"], done.text
        assert second_process_open(path) == f"LOCKED {path}"
        stored = httpx.post(f"{server.url}/v1/ingest", json={"facts": [
            {"topic": "Website Redesign", "field": "deadline", "value": "March 15"}]})
        assert stored.status_code == 200, stored.text
        assert_gapless(served_log(server.url))
    finally:
        stop(server)
    with gem.open(path, engine=ENGINE, create=False) as mem:
        assert mem.inspect("Website Redesign") is not None
