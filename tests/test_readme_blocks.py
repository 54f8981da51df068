"""Every fenced block of README.md runs as written, section by section, in order.

- python: each block in a fresh namespace (a reader copies one block: it must import what it
  uses), in the section's working directory, in this process;
- sh: with bash -e, in the section's working directory, the venv's bin first on PATH and HOME
  a directory of the section's own (`~/agent.db` lands there); ports the README names are
  swapped for free ones. Setup commands (making and activating a venv) are not run, and
  `pip install` is not run but must name extras that pyproject.toml declares. What a block
  leaves running in the background is killed by its process group when the section ends;
- policy: saved under the file name the text before it gives (`team.policy`) and checked by
  `gem policy check`; json: parsed.

A block that cannot run here is listed in NOT_RUN with the reason; keep that list short.
"""
from __future__ import annotations

import json
import os
import re
import shlex
import signal
import socket
import subprocess
import sys
import tomllib
from dataclasses import dataclass
from pathlib import Path

import pytest

from servers import HANG

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
BIN = os.path.dirname(sys.executable)
PORTS = ("8765",)  # ports the runnable blocks name; each run gets free ones instead

# (section, a text the block contains) -> why it is not run here
NOT_RUN = {
    ("Quickstart", "python -m pytest"): "it runs the whole test suite, this test included",
    ("Deploying beyond one process", ""): "its blocks need a FalkorDB server between them; "
    "tests/test_falkordb.py::test_the_readme_deploying_section_runs_as_written runs them as "
    "written (ports filled in), waiting for the server the first block starts",
}


@dataclass(frozen=True)
class Block:
    section: str
    language: str
    text: str
    line: int          # of the opening fence
    before: str        # the section's prose before the block


def blocks() -> list[Block]:
    found, section, prose = [], "", []
    lines = README.read_text(encoding="utf-8").splitlines()
    n = 0
    while n < len(lines):
        line = lines[n]
        if line.startswith("## "):
            section, prose = line[3:].strip(), []
        elif line.startswith("```"):
            language, start, body = line[3:].strip(), n + 1, []
            n += 1
            while not lines[n].startswith("```"):
                body.append(lines[n])
                n += 1
            found.append(Block(section, language, "\n".join(body) + "\n", start, "\n".join(prose)))
        else:
            prose.append(line)
        n += 1
    return found


def not_run(block: Block) -> str | None:
    for (section, containing), why in NOT_RUN.items():
        if block.section == section and containing in block.text:
            return why
    return None


def sections() -> list[str]:
    return list(dict.fromkeys(b.section for b in blocks()))


def test_every_block_is_of_a_kind_this_test_runs_and_the_not_run_list_is_current():
    assert {b.language for b in blocks()} <= {"python", "sh", "policy", "json"}
    for section, containing in NOT_RUN:
        assert any(b.section == section and containing in b.text for b in blocks()), \
            f"NOT_RUN names a block that is gone: {section}: {containing!r}"


def _free_port() -> str:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return str(s.getsockname()[1])


EXTRAS = set(tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"])
SETUP = re.compile(r"^(python3? -m venv \S+|\. \S+/bin/activate|source \S+/bin/activate)$")


def _runnable(command: str, where: str) -> str:
    """The part of a command line that runs here: setup steps dropped, `pip install` checked
    (its extras exist) and dropped."""
    kept = []
    for part in (p.strip() for p in command.split("&&")):
        if part.startswith("pip install"):
            for target in shlex.split(part.split("#", 1)[0])[2:]:
                extras = re.fullmatch(r"\.(?:\[([\w,-]+)\])?", target)
                assert extras, f"{where}: pip installs {target!r}, not this checkout"
                unknown = set((extras.group(1) or "").split(",")) - EXTRAS - {""}
                assert not unknown, f"{where}: no extra {sorted(unknown)} in pyproject.toml"
        elif not SETUP.match(part):
            kept.append(part)
    return " && ".join(kept)


@pytest.mark.slow
@pytest.mark.parametrize("section", sections())
def test_the_readme_section_runs_as_written(section, tmp_path, monkeypatch):
    work, home = tmp_path / "work", tmp_path / "home"
    work.mkdir()
    home.mkdir()
    ports = {port: _free_port() for port in PORTS}
    env = {**os.environ, "HOME": str(home), "PATH": BIN + os.pathsep + os.environ["PATH"]}
    groups: list[int] = []
    monkeypatch.chdir(work)
    ran = 0
    try:
        for block in (b for b in blocks() if b.section == section):
            where = f"README.md:{block.line} ({section})"
            if not_run(block):
                continue
            ran += 1
            if block.language == "json":
                json.loads(block.text)
            elif block.language == "policy":
                names = re.findall(r"`([\w.-]+\.policy)`", block.before)
                file = work / (names[-1] if names else "block.policy")
                file.write_text(block.text, encoding="utf-8")
                done = subprocess.run([sys.executable, "-m", "gem", "policy", "check", str(file)],
                                      capture_output=True, text=True, timeout=HANG)
                assert done.returncode == 0, f"{where}: {done.stdout}{done.stderr}"
            elif block.language == "python":
                exec(compile(block.text, where, "exec"), {"__name__": "__main__"})
            else:
                script = "\n".join(_runnable(line, where) for line in
                                   block.text.replace("\\\n", " ").splitlines())
                script = re.sub(r"\b(\d{4})\b", lambda m: ports.get(m.group(1), m.group(1)), script)
                log = tmp_path / f"block-{block.line}.log"
                with open(log, "wb") as out:
                    shell = subprocess.Popen(["bash", "-e", "-c", script], cwd=work, env=env,
                                             stdin=subprocess.DEVNULL, stdout=out, stderr=out,
                                             start_new_session=True)
                groups.append(shell.pid)
                code = shell.wait(timeout=HANG)
                assert code == 0, f"{where} exited {code}:\n{log.read_text()}"
    finally:
        for group in groups:  # what a block left running (gem serve &): its whole group
            try:
                os.killpg(group, signal.SIGKILL)
            except ProcessLookupError:
                pass
    if ran == 0:
        pytest.skip("; ".join(sorted({not_run(b) or "" for b in blocks() if b.section == section})))
