"""The "Use it from an agent" guide's examples work as written (paths and port filled in)."""
from __future__ import annotations

import asyncio
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from mcp import Client, StdioServerParameters

import gem
from conftest import ENGINE
from servers import HANG, kill_group, start, stop

GUIDE = Path(__file__).resolve().parents[1] / "docs" / "guides" / "agent-mcp.md"


def _section() -> str:
    return GUIDE.read_text(encoding="utf-8")


def _block(language: str, containing: str) -> str:
    for body in re.findall(rf"```{language}\n(.*?)```", _section(), re.S):
        if containing in body:
            return body
    raise AssertionError(f"no ```{language} block with {containing!r}")


@pytest.mark.slow
def test_the_desktop_client_config(tmp_path):
    db = str(tmp_path / "agent.db")
    gem.open(db, engine=ENGINE).close()
    config = json.loads(_block("json", "mcpServers"))["mcpServers"]["gem"]
    command = shutil.which("gem", path=os.path.dirname(sys.executable)) or shutil.which("gem")
    assert command, "the gem script is installed beside this Python"
    args = [db if a == "/absolute/path/to/agent.db" else a for a in config["args"]] + ["--engine", ENGINE]
    assert config["command"] == "/absolute/path/to/.venv/bin/gem"
    pids = set()

    async def main():
        async with Client(StdioServerParameters(command=command, args=args), cache=None) as client:
            pids.add(json.loads(Path(db + ".gem-endpoint.json").read_text())["pid"])
            tools = {t.name for t in (await client.list_tools()).tools}
            assert "memory_recall" in tools
    try:
        asyncio.run(main())
    finally:
        for pid in pids:
            kill_group(pid)


@pytest.mark.slow
def test_the_curl_example(tmp_path):
    if shutil.which("curl") is None:  # pragma: no cover - curl is on the CI machine
        raise AssertionError("curl is needed to run the guide's example")
    db = str(tmp_path / "agent.db")
    server = start(db, "--create", "--engine", ENGINE)
    try:
        lines = _block("sh", "curl").replace("\\\n", " ").splitlines()
        curls = [line.replace("8765", str(server.endpoint.port)) for line in lines if line.startswith("curl")]
        outputs = [json.loads(subprocess.run(c, shell=True, capture_output=True, text=True,
                                             timeout=HANG, check=True).stdout) for c in curls]
        assert outputs[0]["created_topics"] == ["Website Redesign"]
        assert outputs[1]["topics"][0]["fields"]["deadline"]["value"] == "April 20"
    finally:
        stop(server)


def test_the_keys_file_example_is_a_valid_keys_file(tmp_path):
    from gem.server.keys import Keys
    where = tmp_path / "keys.json"
    where.write_text(_block("json", '"*"'))
    assert sorted(Keys.read(where).by_key.values()) == ["*", "acme", "globex"]
