"""A database opens with the engine that made it: `gem.open(path)`, every command, `gem serve`.
Naming the wrong engine is refused with the engine the database was made with."""
from __future__ import annotations

import json
import os
import subprocess
import sys

import httpx
import pytest
from conftest import ENGINE
from servers import start, stop

import gem
from gem.errors import InvalidInput

EMBEDDED = ("kuzu", "ladybug")
pytestmark = pytest.mark.skipif(ENGINE not in EMBEDDED, reason="embedded engines only")


def test_open_detects_the_engine_and_names_it_when_another_is_asked_for(tmp_path):
    path = tmp_path / "m.db"
    with gem.open(path, engine=ENGINE) as mem:
        mem.ingest(gem.Fact("Ada", "email", "ada@example.org"))
    with gem.open(path) as mem:
        assert mem.engine_name == ENGINE and mem.inspect("Ada", "email").value == "ada@example.org"
        with gem.open(path) as again:  # open in this process: the open handle answers
            assert again.engine_name == ENGINE
    other = next(e for e in EMBEDDED if e != ENGINE)
    # Refused before the other engine is loaded (the two cannot share a process).
    with pytest.raises(InvalidInput, match=f"is a database of engine '{ENGINE}', not '{other}': "
                                           f"open it with engine '{ENGINE}', or name no engine"):
        gem.open(path, engine=other)
    assert gem.engine_for(path) == ENGINE and gem.engine_for(tmp_path / "new.db") == "kuzu"
    assert gem.engine_for(None) == "kuzu" and gem.engine_for("redis://localhost:6379/x") == "falkordb"


def gem_cli(*args: str, ok: bool = True, stdin: str | None = None) -> subprocess.CompletedProcess:
    done = subprocess.run([sys.executable, "-m", "gem", *args], capture_output=True, text=True,
                          input=stdin, timeout=300)
    if ok:
        assert done.returncode == 0, done.stderr
    return done


@pytest.mark.skipif(ENGINE != "kuzu", reason="runs once, from the default-engine session")
def test_a_ladybug_database_works_everywhere_without_naming_its_engine(tmp_path):
    """The reported case: `gem query lb.db` said "not a valid Kuzu database file"."""
    pytest.importorskip("ladybug")
    path = str(tmp_path / "lb.db")
    gem_cli("init", path, "--engine", "ladybug")
    facts = "".join(json.dumps(f) + "\n" for f in (
        {"topic": "Website Redesign", "field": "deadline", "value": "March 15"},
        {"topic": "Launch Milestones", "field": "launch", "value": "March 20"}))
    gem_cli("ingest", path, "-", "--progress", "never", stdin=facts)
    assert "March 15" in gem_cli("query", path, "deadline").stdout
    gem_cli("stats", path, "--json")
    assert "March 20" in gem_cli("inspect", path, "Launch Milestones").stdout
    gem_cli("link", path, "Website Redesign", "Launch Milestones")
    gem_cli("maintain", path, "--progress", "never")
    assert gem_cli("audit", path).returncode == 0
    export = tmp_path / "lb.jsonl"
    gem_cli("export", path, str(export), "--progress", "never")
    assert json.loads(export.read_text().splitlines()[0])["engine"] == "ladybug"
    wrong = gem_cli("query", path, "deadline", "--engine", "kuzu", ok=False)
    assert wrong.returncode == 1
    assert f"is a database of engine 'ladybug', not 'kuzu'" in wrong.stderr and "Kuzu" not in wrong.stderr
    # The library, in a process of its own (this one has kuzu loaded).
    script = (f"import gem\nwith gem.open({path!r}, create=False) as mem:\n"
              "    print(mem.engine_name, mem.inspect('Website Redesign', 'deadline').value)\n")
    assert subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          timeout=300, check=True).stdout == "ladybug March 15\n"
    served = start(path, log_dir=str(tmp_path))
    try:
        health = httpx.get(served.url + "/v1/health").json()
        assert health["engine"] == "ladybug" and health["status"] == "ok"
    finally:
        stop(served)
    assert os.path.exists(path)
