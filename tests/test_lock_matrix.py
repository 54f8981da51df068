"""A database has one owner process, whatever that owner does (issue 25).

Each case runs an operation in the process that owns a database (a real `gem serve`, or this
test process through the library) and then checks that the owner still holds the engine's own
POSIX lock on the database file (closing any descriptor of that file in the owner drops it),
that opening the database from a real second process still fails with StoreLocked (gem's own
lock, a flock on `<db>.gem-head`), and that the log's sequence numbers are 1..n with no gap.
"""
from __future__ import annotations

import asyncio
import html
import json
import os
import re
import signal
import subprocess
import sys
import textwrap

import httpx
import pytest
from mcp import Client, StdioServerParameters

import gem
from conftest import ENGINE
from gem.api import ops
from servers import start, stop

EMBEDDED = pytest.mark.skipif(ENGINE == "falkordb", reason="an embedded database's lock")
pytestmark = EMBEDDED


def second_process_open(path: str, owner: int) -> str:
    """What `gem.open(path)` does in another process: 'LOCKED <path>' or 'OPENED'; asserts
    first that the owner (pid) still holds the engine's own lock on the database file."""
    assert engine_lock_held(path, owner), f"the engine's own lock on {path} is gone"
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


def engine_lock_held(path: str, pid: int) -> bool:
    """Whether process `pid` holds a POSIX lock on the database file (/proc/locks: read
    without opening the file; an engine's read-only open is no test, LadybugDB's takes no
    lock). Where there is no /proc/locks, gem's lock is what is checked."""
    if not os.path.exists("/proc/locks"):
        return True
    inode = str(os.stat(path).st_ino)
    with open("/proc/locks") as f:
        for line in f:
            parts = line.split()
            if "->" in parts:  # a waiter, not a holder
                continue
            if parts[1] == "POSIX" and parts[4] == str(pid) and parts[5].rsplit(":", 1)[-1] == inode:
                return True
    return False


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
        assert second_process_open(path, server.process.pid) == f"LOCKED {path}"
        done = httpx.post(f"{server.url}/v1/maintain", json={"dry_run": True}, timeout=300)
        assert done.status_code == 200 and done.json()["dry_run"], done.text
        assert second_process_open(path, server.process.pid) == f"LOCKED {path}"
        stored = httpx.post(f"{server.url}/v1/ingest", json={"facts": [
            {"topic": "Website Redesign", "field": "deadline", "value": "March 15"}]})
        assert stored.status_code == 200, stored.text
        assert_gapless(served_log(server.url))
    finally:
        stop(server)
    with gem.open(path, engine=ENGINE, create=False) as mem:
        assert mem.inspect("Website Redesign") is not None


def test_copy_database_copies_the_committed_state_without_touching_the_owners_lock(tmp_path):
    path, copy = str(tmp_path / "db.kz"), str(tmp_path / "copy.kz")
    with gem.open(path, engine=ENGINE) as mem:
        mem.ingest(gem.Fact("Website Redesign", "deadline", "March 15"))
        mem.copy_database(copy)
        assert engine_lock_held(path, os.getpid())
        with pytest.raises(gem.InvalidInput, match="already exists"):
            mem.copy_database(copy)
        with pytest.raises(gem.InvalidInput, match="already exists"):
            mem.copy_database(path)
        head = mem.head()
        with gem.open(copy, engine=ENGINE, create=False) as twin:
            assert twin.head() == head and twin.audit(full=True).ok
            assert twin.inspect("Website Redesign").fields["deadline"].value == "March 15"


# ---------------------------------------------------------------------- the matrix
# Every case runs in order on one owner per kind (a lock, once lost, stays lost: the case
# that lost it fails, and so do the ones after it).
SEED = [{"topic": "Website Redesign", "field": "deadline", "value": "March 15", "source": "chat:1"},
        {"topic": "Launch Milestones", "field": "launch", "value": "March 20", "source": "chat:1"}]
HREF = re.compile(r'href="(/[^"#]*)"')


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    path = str(tmp_path_factory.mktemp("matrix") / "served.kz")
    server = start(path, "--create", "--engine", ENGINE)
    try:
        with httpx.Client(base_url=server.url, timeout=300) as c:
            assert c.post("/v1/ingest", json={"facts": SEED}).status_code == 200
            assert c.post("/v1/link", json={"from_topic": "Website Redesign",
                                            "to_topic": "Launch Milestones"}).status_code == 200
            changed = {**SEED[0], "value": "April 20", "source": "chat:2"}
            assert c.post("/v1/ingest", json={"facts": [changed]}).status_code == 200
        yield path, server
    finally:
        stop(server)


def crawl(url: str) -> list[str]:
    """Every dashboard page reachable from the overview (each link followed once)."""
    seen, queue = set(), ["/"]
    with httpx.Client(base_url=url, timeout=300) as c:
        while queue and len(seen) < 200:
            page = queue.pop(0)
            if page in seen:
                continue
            seen.add(page)
            r = c.get(page)
            assert r.status_code in (200, 404), (page, r.status_code, r.text[:300])
            if r.headers.get("content-type", "").startswith("text/html"):
                queue += [html.unescape(h) for h in HREF.findall(r.text)
                          if not h.startswith(("/v1/", "/mcp", "/reports/"))]
    return sorted(seen)


async def _mcp_maintain(url: str) -> dict:
    async with Client(url, cache=None) as client:
        result = await client.call_tool("memory_maintain", {"dry_run": True})
        assert not result.is_error, result.content
        return result.structured_content


async def _stdio_session(path: str) -> None:
    params = StdioServerParameters(command=sys.executable,
                                   args=["-m", "gem", "mcp", path, "--engine", ENGINE])
    async with Client(params, cache=None) as client:
        status = await client.call_tool("memory_status", {})
        assert not status.is_error and status.structured_content["audit"]["ok"]


def _sigterm_a_bridge(path: str) -> None:
    """A `gem mcp` client process attached to the server, ended by SIGTERM mid-session."""
    bridge = subprocess.Popen([sys.executable, "-m", "gem", "mcp", path, "--engine", ENGINE],
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                              stderr=subprocess.DEVNULL, start_new_session=True)
    try:
        hello = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {},
            "clientInfo": {"name": "matrix", "version": "0"}}}
        bridge.stdin.write((json.dumps(hello) + "\n").encode())
        bridge.stdin.flush()
        assert b'"id":1' in bridge.stdout.readline().replace(b" ", b"")  # attached
        bridge.send_signal(signal.SIGTERM)
        bridge.wait(timeout=120)
    finally:
        if bridge.poll() is None:
            os.killpg(bridge.pid, signal.SIGKILL)
            bridge.wait(timeout=30)


SERVED_CASES = {
    "dry-run maintain over HTTP": lambda path, url: httpx.post(
        f"{url}/v1/maintain", json={"dry_run": True}, timeout=300).raise_for_status(),
    "dry-run maintain over MCP": lambda path, url: asyncio.run(_mcp_maintain(url + "/mcp")),
    "maintain": lambda path, url: httpx.post(f"{url}/v1/maintain", json={},
                                             timeout=300).raise_for_status(),
    "incremental audit": lambda path, url: httpx.get(f"{url}/v1/audit",
                                                     timeout=300).raise_for_status(),
    "full audit": lambda path, url: httpx.get(f"{url}/v1/audit", params={"full": True},
                                              timeout=300).raise_for_status(),
    "every dashboard page": lambda path, url: crawl(url),
    "gem mcp attach and detach": lambda path, url: asyncio.run(_stdio_session(path)),
    "SIGTERM of a gem mcp client": lambda path, url: _sigterm_a_bridge(path),
}


@pytest.mark.slow
@pytest.mark.parametrize("case", list(SERVED_CASES))
def test_a_served_database_stays_locked_and_gapless(served, case):
    path, server = served
    SERVED_CASES[case](path, server.url)
    assert second_process_open(path, server.process.pid) == f"LOCKED {path}"
    before = served_log(server.url)
    stored = httpx.post(f"{server.url}/v1/ingest", timeout=300, json={"facts": [
        {"topic": "Matrix", "field": "after", "value": case, "source": "test"}]})
    assert stored.status_code == 200, stored.text
    after = served_log(server.url)
    assert_gapless(after)
    assert after[-1] == stored.json()["transition"] and len(after) > len(before)


@pytest.fixture(scope="module")
def owned(tmp_path_factory):
    folder = tmp_path_factory.mktemp("owned")
    path = str(folder / "owned.kz")
    with gem.open(path, engine=ENGINE) as mem:
        mem.ingest([gem.Fact(**f) for f in SEED])
        mem.link("Website Redesign", "Launch Milestones")
        yield path, mem, str(folder)


def _second_handle(path: str, mem: gem.Memory) -> None:
    """Another handle in the owner: it commits, and its close writes the snapshot."""
    other = gem.open(path, engine=ENGINE)
    other.ingest(gem.Fact("Website Redesign", "owner", "Ann"))
    other.close()
    assert os.path.isdir(path + ".gem-derived")


OWNED_CASES = {
    "dry-run maintain": lambda path, mem, folder: ops.maintain(mem, dry_run=True),
    "maintain": lambda path, mem, folder: ops.maintain(mem),
    "export": lambda path, mem, folder: mem.export(os.path.join(folder, "export.jsonl")),
    "compact": lambda path, mem, folder: mem.compact(),
    "incremental audit": lambda path, mem, folder: mem.audit(),
    "full audit": lambda path, mem, folder: mem.audit(full=True),
    "a second handle commits and closes (snapshot write)": lambda path, mem, folder:
        _second_handle(path, mem),
    "copy_database": lambda path, mem, folder: mem.copy_database(os.path.join(folder, "copy.kz")),
}


@pytest.mark.slow
@pytest.mark.parametrize("case", list(OWNED_CASES))
def test_a_database_a_library_owns_stays_locked_and_gapless(owned, case):
    path, mem, folder = owned
    OWNED_CASES[case](path, mem, folder)
    assert second_process_open(path, os.getpid()) == f"LOCKED {path}"
    result = mem.ingest(gem.Fact("Matrix", "after", case))
    seqs = [r["seq"] for r in mem.transitions()]
    assert_gapless(seqs)
    assert seqs[-1] == result.transition
