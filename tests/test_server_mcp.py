"""MCP with the SDK's own client: over streamable HTTP against `gem serve`, and over stdio
against `gem mcp` (two clients on one path at once, through one auto-started server)."""
from __future__ import annotations

import asyncio
import json
import re
import sys

import pytest
from mcp import Client, StdioServerParameters

import gem
from gem.server.endpoint import endpoint_file, read_endpoint
from conftest import ENGINE
from servers import HANG, kill_group, start, stop, wait_for

TOOLS = {"memory_remember", "memory_recall", "memory_inspect", "memory_history", "memory_explain",
         "memory_link", "memory_restore", "memory_review", "memory_maintain", "memory_status",
         "memory_forget", "memory_retract"}
ID = re.compile(r'"[teg]\d+(/[^"]*)?"')  # an internal id as a whole JSON string


def _without_ids(data):
    """`data` without the fields that carry ids alongside the names (`*_ids`, `id`)."""
    if isinstance(data, dict):
        return {k: _without_ids(v) for k, v in data.items()
                if not (k in ("id", "ids") or k.endswith(("_id", "_ids")))}
    if isinstance(data, list):
        return [_without_ids(v) for v in data]
    return data


def _readable(result) -> dict:
    assert not result.is_error, result.content
    text = json.dumps(_without_ids(result.structured_content))
    assert not ID.search(text), f"internal id in {text}"
    return result.structured_content


async def _conversation(client: Client) -> None:
    listed = await client.list_tools()
    assert {t.name for t in listed.tools} == TOOLS
    for tool in listed.tools:
        assert tool.description and tool.output_schema and tool.title
    remember = _readable(await client.call_tool("memory_remember", {"facts": [
        {"topic": "Website Redesign", "field": "deadline", "value": "March 15", "source": "chat:1"},
        {"topic": "Launch Milestones", "field": "launch", "value": "March 20"}]}))
    assert remember["created_topics"] == ["Website Redesign", "Launch Milestones"]
    link = _readable(await client.call_tool("memory_link", {
        "from_topic": "Website Redesign", "to_topic": "Launch Milestones"}))
    assert link["created"]
    update = _readable(await client.call_tool("memory_remember", {"facts": [
        {"topic": "Website Redesign", "field": "deadline", "value": "April 20", "source": "chat:2"}]}))
    assert update["flagged"] == ["Launch Milestones"] and update["flagged_ids"] == ["t2"]
    recall = _readable(await client.call_tool("memory_recall", {
        "query": "deadline of the website redesign", "include_history": True}))
    deadline = recall["topics"][0]["fields"]["deadline"]
    assert deadline["value"] == "April 20" and deadline["provenance"]["source"] == "chat:2"
    assert [h["value"] for h in deadline["history"]] == ["March 15", "April 20"]
    block = await client.call_tool("memory_recall", {"topic": "Launch Milestones",
                                                     "format": "text", "max_tokens": 200})
    assert block.content[0].text.startswith(
        "Launch Milestones [stale: needs review, Website Redesign changed]:\n- launch: March 20")
    assert _readable(block)["topics"][0]["title"] == "Launch Milestones"
    inspect = _readable(await client.call_tool("memory_inspect", {"topic": "Launch Milestones"}))
    assert inspect["needs_review"][0]["because_of"] == "Website Redesign"
    history = _readable(await client.call_tool("memory_history", {
        "topic": "Website Redesign", "field": "deadline"}))
    assert history["entries"][0]["superseded_by"] == 2
    explain = _readable(await client.call_tool("memory_explain", {
        "topic": "Website Redesign", "field": "deadline"}))
    assert explain["value"] == "April 20"
    review = _readable(await client.call_tool("memory_review", {}))
    assert [f["topic"] for f in review["flags"]] == ["Launch Milestones"]
    dry = _readable(await client.call_tool("memory_maintain", {"dry_run": True}))
    assert dry["dry_run"] and dry["revise"]["flags_open"] == ["Launch Milestones"]
    assert _readable(await client.call_tool("memory_review", {}))["flags"]  # nothing changed
    done = _readable(await client.call_tool("memory_maintain", {}))  # for real by default
    assert not done["dry_run"] and done["forget"]["transition"] > 0
    restore = _readable(await client.call_tool("memory_restore", {"topic": "Launch Milestones"}))
    assert restore["changed"] is False
    status = _readable(await client.call_tool("memory_status", {}))
    assert status["audit"]["ok"] and "propagate-on-change" in status["policies"]

    said = _readable(await client.call_tool("memory_remember", {"episodes": [
        {"text": "Ann said the launch party is at the harbour", "speaker": "Ann",
         "at": "2026-01-05T10:00:00+00:00", "place": {"lat": 38.7, "lon": -9.14}}]}))
    assert len(said["episodes"]) == len(said["episode_ids"]) == 1
    heard = _readable(await client.call_tool("memory_recall", {
        "query": "launch party harbour",
        "between": ["2026-01-01T00:00:00+00:00", "2026-01-31T00:00:00+00:00"]}))
    assert heard["episodes"][0]["speaker"] == "Ann"
    near = _readable(await client.call_tool("memory_recall", {"near": [38.7, -9.14, 1]}))
    assert near["episodes"][0]["place"] == {"lat": 38.7, "lon": -9.14, "name": None}
    failed = await client.call_tool("memory_remember", {})
    assert failed.is_error and "at least one fact or episode" in failed.content[0].text

    failed = await client.call_tool("memory_history", {"topic": "Nope", "field": "x"})
    assert failed.is_error and "no topic named 'Nope'" in failed.content[0].text
    failed = await client.call_tool("memory_remember", {"facts": []})
    assert failed.is_error

    prompts = (await client.list_prompts()).prompts
    assert [(p.name, p.title) for p in prompts] == [("use_memory", "Use gem's memory")]
    told = (await client.get_prompt("use_memory")).messages
    assert told[0].role == "user"
    for tool in ("memory_recall", "memory_remember", "memory_retract", "memory_forget"):
        assert tool in told[0].content.text
    resources = {str(r.uri) for r in (await client.list_resources()).resources}
    assert resources == {"gem://policies"}
    templates = {t.uri_template for t in (await client.list_resource_templates()).resource_templates}
    assert templates == {"gem://log{?limit}"}  # a template: only templates see the caller's key
    policies = (await client.read_resource("gem://policies")).contents[0].text
    assert "POLICY propagate-on-change" in policies
    log = json.loads((await client.read_resource("gem://log")).contents[0].text)
    assert [r["op"] for r in log][:3] == ["policy", "ingest", "link"]
    assert "Website Redesign / deadline" in json.dumps(log) and not ID.search(json.dumps(log))
    newest = json.loads((await client.read_resource("gem://log?limit=2")).contents[0].text)
    assert newest == log[-2:]
    await _forget_and_retract(client, listed.tools)


async def _forget_and_retract(client: Client, tools) -> None:
    hints = {t.name: t.annotations for t in tools}
    assert hints["memory_forget"].destructive_hint and not hints["memory_forget"].read_only_hint
    assert not hints["memory_retract"].destructive_hint
    _readable(await client.call_tool("memory_remember", {"facts": [
        {"topic": "Home Address", "field": "street", "value": "Elm St 4", "source": "chat:7"},
        {"topic": "Home Address", "field": "city", "value": "Oslo", "source": "chat:7"},
        {"topic": "Home Address", "field": "floor", "value": 3, "source": "chat:8"},
        {"topic": "Home Address", "field": "zip", "value": "0150", "source": "crm:1"}]}))
    said = _readable(await client.call_tool("memory_forget", {
        "topic": "Home Address", "source": "crm:1", "reason": "the CRM export was not consented"}))
    assert said["source"] == "crm:1" and said["entries_erased"] == 1 and not said["topic_erased"]
    kept = _readable(await client.call_tool("memory_inspect", {"topic": "Home Address"}))
    assert kept["fields"]["city"]["value"] == "Oslo" and \
        kept["fields"].get("zip", {}).get("value") is None
    retracted = _readable(await client.call_tool("memory_retract", {
        "topic": "home address", "field": "floor", "reason": "the user lives on the ground floor"}))
    assert retracted == {"changed": True, "topic": "Home Address", "field": "floor",
                         "reason": "the user lives on the ground floor"}
    floor = _readable(await client.call_tool("memory_inspect", {"topic": "Home Address",
                                                                "field": "floor"}))
    assert floor["fields"]["floor"]["value"] is None and floor["fields"]["floor"]["retracted"]
    again = _readable(await client.call_tool("memory_retract", {
        "topic": "Home Address", "field": "floor", "reason": "still wrong"}))
    assert again["changed"] is False
    field = _readable(await client.call_tool("memory_forget", {
        "topic": "Home Address", "field": "street", "reason": "user request"}))
    assert field["topic"] == "Home Address" and not field["topic_erased"]
    assert field["fields_erased"] == 1 and field["entries_erased"] == 1 and field["salt"]
    left = _readable(await client.call_tool("memory_inspect", {"topic": "Home Address"}))
    assert "street" not in left["fields"] and left["fields"]["city"]["value"] == "Oslo"
    whole = _readable(await client.call_tool("memory_forget", {
        "topic": "Home Address", "reason": "user request"}))
    assert whole["topic_erased"] and whole["topic_ids"]
    gone = await client.call_tool("memory_inspect", {"topic": "Home Address"})
    assert gone.is_error and "no topic named" in gone.content[0].text
    failed = await client.call_tool("memory_forget", {"topic": "Home Address", "reason": "again"})
    assert failed.is_error and "no topic named" in failed.content[0].text


@pytest.mark.slow
def test_streamable_http_against_gem_serve(tmp_path):
    server = start(str(tmp_path / "http.db"), "--create", "--engine", ENGINE)
    try:
        async def main():
            async with Client(server.endpoint.mcp_url, cache=None) as client:
                await _conversation(client)
        asyncio.run(main())
    finally:
        stop(server)


@pytest.mark.slow
def test_two_stdio_clients_share_one_auto_started_server(tmp_path):
    path = str(tmp_path / "stdio.db")
    gem.open(path, engine=ENGINE).close()
    params = StdioServerParameters(command=sys.executable, args=[
        "-m", "gem", "mcp", path, "--engine", ENGINE, "--idle-exit", "2"])
    seen: list[int] = []

    async def client(name: str, other: str, both_stored: asyncio.Event, stored: list) -> set:
        async with Client(params, cache=None) as c:
            endpoint = read_endpoint(path)
            seen.append(endpoint.pid)
            _readable(await c.call_tool("memory_remember", {"facts": [
                {"topic": f"Notes of {name}", "field": "author", "value": name}]}))
            stored.append(name)
            if len(stored) == 2:
                both_stored.set()
            await asyncio.wait_for(both_stored.wait(), timeout=HANG)  # both sessions are open now
            found = _readable(await c.call_tool("memory_recall", {"topic": f"Notes of {other}"}))
            return {t["title"] for t in found["topics"]}

    async def main():
        event, stored = asyncio.Event(), []
        return await asyncio.gather(client("Ann", "Bob", event, stored),
                                    client("Bob", "Ann", event, stored))
    try:
        assert asyncio.run(main()) == [{"Notes of Bob"}, {"Notes of Ann"}]
        assert len(set(seen)) == 1  # one server for both
        # Both clients are gone: the auto-started server exits by itself (--idle-exit 2).
        wait_for(lambda: not endpoint_file(path).exists(), timeout=HANG,
                 what="the auto-started server to exit after its last client")
        with gem.open(path, engine=ENGINE, create=False) as mem:
            assert mem.audit().ok
    finally:
        for pid in set(seen):
            kill_group(pid)


@pytest.mark.slow
def test_stdio_bridges_to_a_running_server(tmp_path):
    path = str(tmp_path / "bridged.db")
    server = start(path, "--create", "--engine", ENGINE)
    try:
        params = StdioServerParameters(command=sys.executable,
                                       args=["-m", "gem", "mcp", path, "--engine", ENGINE])

        async def main():
            async with Client(params, cache=None) as client:
                await _conversation(client)
        asyncio.run(main())
        assert server.process.poll() is None  # a server started by hand is never stopped by bridges
        assert read_endpoint(path).pid == server.process.pid
    finally:
        stop(server)


@pytest.mark.slow
def test_a_bridge_ends_when_its_server_dies(tmp_path):
    from mcp import MCPError
    path = str(tmp_path / "dies.db")
    server = start(path, "--create", "--engine", ENGINE)
    params = StdioServerParameters(command=sys.executable,
                                   args=["-m", "gem", "mcp", path, "--engine", ENGINE])

    async def main():
        async with Client(params, cache=None) as client:
            await client.list_tools()
            stop(server)  # killed, not stopped cleanly
            try:
                await asyncio.wait_for(client.call_tool("memory_status", {}), timeout=HANG)
            except MCPError as exc:
                return str(exc)
        return None
    try:
        assert asyncio.run(main()) == "Connection closed"
    finally:
        stop(server)
