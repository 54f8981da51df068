"""`gem mcp install CLIENT PATH`: a client's MCP configuration written (merged, backed up) or
printed, with absolute paths; HOME is a temp dir, so no real configuration is touched."""
from __future__ import annotations

import json
import os
import sys

import pytest

import gem
from test_cli import gem_here


@pytest.fixture
def home(tmp_path, monkeypatch):
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    work = tmp_path / "project"
    work.mkdir()
    monkeypatch.chdir(work)
    gem.open(str(work / "agent.db"), engine="kuzu").close()  # any engine: only paths are written
    return tmp_path


def _launches_gem(server: dict, database: str) -> None:
    assert os.path.isabs(server["command"]) and server["args"][-2:] == ["mcp", database]
    if server["args"][0] == "-m":  # no `gem` script: this Python runs the module
        assert server["command"] == sys.executable
    else:
        assert os.access(server["command"], os.X_OK)


@pytest.mark.skipif(sys.platform != "linux", reason="the Linux location of Claude Desktop's file")
def test_claude_desktop_config_is_merged_and_the_old_one_kept(home):
    config = home / "home" / ".config" / "Claude" / "claude_desktop_config.json"
    config.parent.mkdir(parents=True)
    before = {"mcpServers": {"files": {"command": "npx", "args": ["fs"]}}, "theme": "dark"}
    config.write_text(json.dumps(before))
    done = gem_here("mcp", "install", "claude-desktop", "agent.db")
    assert str(config) in done.stdout
    written = json.loads(config.read_text())
    database = str(home / "project" / "agent.db")
    assert written["theme"] == "dark" and written["mcpServers"]["files"] == before["mcpServers"]["files"]
    _launches_gem(written["mcpServers"]["gem"], database)
    backups = [p for p in config.parent.iterdir() if p.name.endswith(".bak")]
    assert len(backups) == 1 and json.loads(backups[0].read_text()) == before


def test_cursor_and_vscode_get_their_own_shapes(home):
    gem_here("mcp", "install", "cursor", "agent.db", "--name", "memory")
    cursor = json.loads((home / "home" / ".cursor" / "mcp.json").read_text())
    database = str(home / "project" / "agent.db")
    _launches_gem(cursor["mcpServers"]["memory"], database)
    gem_here("mcp", "install", "vscode", "agent.db", "--engine", "kuzu")
    vscode = json.loads((home / "project" / ".vscode" / "mcp.json").read_text())
    server = vscode["servers"]["gem"]
    assert server["type"] == "stdio" and server["args"][-2:] == ["--engine", "kuzu"]
    assert server["args"][-4:-2] == ["mcp", database]
    assert not list((home / "project" / ".vscode").glob("*.bak"))  # nothing was there before


def test_print_writes_nothing(home):
    printed = json.loads(gem_here("mcp", "install", "--print", "agent.db").stdout)
    _launches_gem(printed["mcpServers"]["gem"], str(home / "project" / "agent.db"))
    vscode = json.loads(gem_here("mcp", "install", "vscode", "agent.db", "--print").stdout)
    assert vscode["servers"]["gem"]["type"] == "stdio"
    assert not (home / "home").exists() and not (home / "project" / ".vscode").exists()


def test_a_broken_config_or_a_missing_database_changes_nothing(home):
    config = home / "home" / ".cursor" / "mcp.json"
    config.parent.mkdir(parents=True)
    config.write_text("{not json")
    refused = gem_here("mcp", "install", "cursor", "agent.db", ok=False)
    assert refused.returncode == 1 and "is not JSON" in refused.stderr
    assert config.read_text() == "{not json" and os.listdir(config.parent) == ["mcp.json"]
    config.write_text(json.dumps({"mcpServers": []}))
    refused = gem_here("mcp", "install", "cursor", "agent.db", ok=False)
    assert refused.returncode == 1 and "not a JSON object" in refused.stderr
    refused = gem_here("mcp", "install", "cursor", "nowhere.db", ok=False)
    assert refused.returncode == 1 and "no database at" in refused.stderr
    refused = gem_here("mcp", "install", "agent.db", ok=False)
    assert refused.returncode == 1 and "name the client" in refused.stderr
    assert json.loads(config.read_text()) == {"mcpServers": []}
