"""API keys on `gem serve --keys`: no key 401; a key sees its own scope only, and another
scope's topic is "not found" exactly as a topic that does not exist (HTTP, MCP, dashboard)."""
from __future__ import annotations

import asyncio
import base64
import json
import re
import subprocess
import sys

import httpx
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client

import gem
from conftest import ENGINE
from gem.server.keys import Keys, presented_key
from servers import HANG, start, stop

ACME, GLOBEX, OPERATOR = "acme-key-0123456789abcdef", "globex-key-0123456789abcd", "operator-key-0123456789ab"
SCOPED_ID = '"(?:acme|globex):'


def _keys_file(tmp_path, data) -> str:
    where = tmp_path / "keys.json"
    where.write_text(json.dumps(data) if not isinstance(data, str) else data)
    return str(where)


@pytest.mark.parametrize("data, message", [
    ({}, "at least one key"),
    ([ACME], "JSON object"),
    ({"short": "acme"}, "key #1 must be at least 16"),
    ({ACME: "Not A Scope"}, "key #1 maps to 'Not A Scope'"),
    ({ACME: "acme", "has a space in it ok?": "acme"}, "key #2"),
    ("{not json", "not a JSON keys file"),
])
def test_a_bad_keys_file_is_refused_without_printing_keys(tmp_path, data, message):
    with pytest.raises(gem.InvalidInput, match=message) as info:
        Keys.read(_keys_file(tmp_path, data))
    assert ACME not in str(info.value)


def test_keys_are_read_from_bearer_and_basic_headers():
    basic = base64.b64encode(f"anyone:{ACME}".encode())
    assert presented_key({b"authorization": f"Bearer {ACME}".encode()}) == ACME
    assert presented_key({b"authorization": b"Basic " + basic}) == ACME
    assert presented_key({b"authorization": b"Basic !!!"}) is None
    assert presented_key({}) is None
    keys = Keys({ACME: "acme"})
    assert keys.scope_of(ACME) == "acme" and keys.scope_of(GLOBEX) is None


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    folder = tmp_path_factory.mktemp("keys")
    keys = _keys_file(folder, {ACME: "acme", GLOBEX: "globex", OPERATOR: "*"})
    server = start(str(folder / "keys.db"), "--create", "--engine", ENGINE, "--keys", keys)
    yield server
    stop(server)


def _client(served, key: str | None) -> httpx.Client:
    headers = {"Authorization": f"Bearer {key}"} if key else {}
    return httpx.Client(base_url=served.url, headers=headers, timeout=HANG)


def _remember(c: httpx.Client, topic: str, field: str, value: str) -> None:
    r = c.post("/v1/ingest", json={"facts": [{"topic": topic, "field": field, "value": value,
                                              "source": "chat"}]})
    assert r.status_code == 200, r.text


def test_no_key_or_an_unknown_key_is_401_and_health_stays_open(served):
    with _client(served, None) as c:
        assert c.get("/v1/health").status_code == 200
        for method, url in [("GET", "/v1/stats"), ("POST", "/v1/ingest"), ("POST", "/mcp"),
                            ("GET", "/"), ("GET", "/topic?topic=x")]:
            r = c.request(method, url, json={} if method == "POST" else None)
            assert r.status_code == 401, (url, r.text)
            assert r.json()["error"] == "unauthorized"
            assert r.headers["www-authenticate"].startswith("Bearer" if url.startswith(("/v1", "/mcp"))
                                                           else "Basic")
    with _client(served, "x" * 24) as c:
        assert c.get("/v1/stats").status_code == 401


def test_each_key_sees_its_own_scope_only(served):
    with _client(served, ACME) as a, _client(served, GLOBEX) as b:
        _remember(a, "Acme Launch", "deadline", "May 2")
        _remember(b, "Globex Plan", "owner", "Gil")
        assert a.get("/v1/topic", params={"topic": "Acme Launch"}).status_code == 200
        other = b.get("/v1/topic", params={"topic": "Acme Launch"})
        missing = b.get("/v1/topic", params={"topic": "Acme Lunch"})
        assert other.status_code == missing.status_code == 404
        assert other.json()["message"].replace("Launch", "X") == missing.json()["message"].replace("Lunch", "X")
        recalled = b.post("/v1/retrieve", json={"query": "acme launch deadline"}).json()
        assert "Acme" not in json.dumps(recalled)
        assert b.get("/v1/stats").json()["topics"] == {"active": 1}
        log = b.get("/v1/log").json()["records"]
        assert log and all("Acme" not in json.dumps(r) for r in log)
        assert a.get("/v1/audit", params={"full": True}).json()["ok"]
        for body in (a.get("/v1/log").text, b.get("/v1/review").text):
            assert not re.search(SCOPED_ID, body), body  # titles, never scoped ids


def test_the_dashboard_asks_a_browser_for_the_key_and_confines_it(served):
    basic = httpx.BasicAuth("me", GLOBEX)
    with httpx.Client(base_url=served.url, auth=basic, timeout=HANG) as c:
        _remember(c, "Globex Plan", "budget", "12k")  # Basic works for the API too
        page = c.get("/")
        assert page.status_code == 200 and "Globex Plan" in page.text and "Acme" not in page.text
        assert c.get("/", params={"scope": "acme"}).status_code == 404
        assert c.get("/", params={"scope": "nowhere"}).status_code == 404  # the same answer
    with _client(served, OPERATOR) as op:
        _remember(_client(served, ACME), "Acme Launch", "owner", "Ana")
        chosen = op.get("/", params={"scope": "acme"}).text
        assert "Acme Launch" in chosen and "Globex Plan" not in chosen
        assert '<option value="globex">globex</option>' in op.get("/").text


@pytest.mark.slow
def test_mcp_tools_run_in_the_scope_of_the_key(served):
    async def conversation(key: str) -> tuple[dict, bool, list]:
        http = create_mcp_http_client(headers={"Authorization": f"Bearer {key}"})
        async with Client(streamable_http_client(served.endpoint.mcp_url, http_client=http),
                          cache=None) as client:
            await client.call_tool("memory_remember", {"facts": [
                {"topic": "Acme Roadmap", "field": "phase", "value": "beta", "source": "mcp"}]})
            seen = await client.call_tool("memory_inspect", {"topic": "Acme Roadmap"})
            hidden = await client.call_tool("memory_inspect", {"topic": "Globex Plan"})
            log = json.loads((await client.read_resource("gem://log")).contents[0].text)
            return seen.structured_content, hidden.is_error, log

    seen, hidden, log = asyncio.run(conversation(ACME))
    assert seen["title"] == "Acme Roadmap" and hidden
    assert log and "Globex" not in json.dumps(log)
    with _client(served, GLOBEX) as b:
        assert b.get("/v1/topic", params={"topic": "Acme Roadmap"}).status_code == 404


def test_a_tenant_erases_and_retracts_only_in_its_scope(served):
    with _client(served, ACME) as a, _client(served, GLOBEX) as b:
        for c in (a, b):
            _remember(c, "Shared Name", "owner", "Sam")
            _remember(c, "Shared Name", "budget", "9k")
        r = a.post("/v1/retract", json={"topic": "Shared Name", "field": "budget",
                                        "reason": "wrong figure"})
        assert r.status_code == 200 and r.json()["changed"], r.text
        r = a.post("/v1/erase", json={"topic": "Shared Name", "reason": "tenant asked"})
        assert r.status_code == 200 and r.json()["topic_erased"], r.text
        assert not re.search(SCOPED_ID, json.dumps({k: v for k, v in r.json().items()
                                                    if not k.endswith("_ids")}))
        assert a.get("/v1/topic", params={"topic": "Shared Name"}).status_code == 404
        kept = b.get("/v1/topic", params={"topic": "Shared Name"}).json()
        assert kept["fields"]["owner"]["value"] == "Sam"
        assert kept["fields"]["budget"]["value"] == "9k"  # the retraction was acme's
        # another scope's topic is as unknown to erase as one that never existed
        assert a.post("/v1/erase", json={"topic": "Globex Plan", "reason": "x"}).status_code == 404

    async def forget(key: str) -> bool:
        http = create_mcp_http_client(headers={"Authorization": f"Bearer {key}"})
        async with Client(streamable_http_client(served.endpoint.mcp_url, http_client=http),
                          cache=None) as client:
            return (await client.call_tool("memory_forget", {"topic": "Shared Name",
                                                             "reason": "asked"})).is_error
    assert asyncio.run(forget(ACME))  # nothing left in acme's scope
    assert not asyncio.run(forget(GLOBEX))
    with _client(served, GLOBEX) as b:
        assert b.get("/v1/topic", params={"topic": "Shared Name"}).status_code == 404


@pytest.mark.slow
def test_the_stdio_bridge_needs_the_key_of_a_keyed_server(served):
    done = subprocess.run([sys.executable, "-m", "gem", "mcp", served.endpoint.path,
                           "--engine", ENGINE], input="", capture_output=True, text=True,
                          timeout=HANG, env={**__import__("os").environ, "GEM_API_KEY": ""})
    assert done.returncode == 1 and "needs an API key" in done.stderr


def test_a_dry_run_maintain_reports_the_scope_of_the_key(served):
    with _client(served, ACME) as a, _client(served, GLOBEX) as b:
        _remember(a, "Acme Website", "deadline", "June 1")
        _remember(a, "Acme Rollout", "launch", "June 9")
        linked = a.post("/v1/link", json={"from_topic": "Acme Website", "to_topic": "Acme Rollout"})
        assert linked.status_code == 200, linked.text
        _remember(a, "Acme Website", "deadline", "July 1")  # flags what depends on it
        dry = a.post("/v1/maintain", json={"dry_run": True}, timeout=300).json()
        assert dry["dry_run"] and len(dry["revise"]["flags_open"]) == 1, dry
        other = b.post("/v1/maintain", json={"dry_run": True}, timeout=300).json()
        assert other["dry_run"] and other["revise"]["flags_open"] == [], other
        assert "Acme Rollout" in [f["topic"] for f in a.get("/v1/review").json()["flags"]]
        done = a.post("/v1/maintain", json={}, timeout=300).json()  # what the dry run foretold
        assert not done["dry_run"] and done["revise"] == dry["revise"], (done, dry)
