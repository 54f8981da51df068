"""Every fenced block of README.md and of the documentation (docs/**/*.md) runs as written,
section by section (a page's `#` or `##` heading), in order.

- python: each block in a fresh namespace (a reader copies one block: it must import what it
  uses), in the section's working directory, in this process;
- sh: with bash -e, in the section's working directory, the venv's bin first on PATH and HOME
  a directory of the section's own (`~/agent.db` lands there); ports the pages name are
  swapped for free ones. Setup commands (making and activating a venv) are not run, and
  `pip install` is not run but must name extras that pyproject.toml declares. What a block
  leaves running in the background is killed by its process group when the section ends;
- policy: saved under the file name the text before it gives (`team.policy`) and checked by
  `gem policy check`; json: parsed.

A block that calls a model (`GEM_LLM_BASE_URL`) runs against tests/llm_server.py's recorded
endpoint. A block of the README that is also, word for word, a block of a docs page runs there
only (the README repeats the getting-started page). A block that cannot run here is listed in
NOT_RUN with the reason; keep that list short.
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

from llm_server import FixtureServer
from servers import HANG

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
PAGES = [README, *sorted((ROOT / "docs").rglob("*.md"))]
BIN = os.path.dirname(sys.executable)
PORTS = ("8765",)  # ports the runnable blocks name; each run gets free ones instead

# (page, section, a text the block contains) -> why it is not run here
NOT_RUN = {
    ("docs/guides/container.md", "Run it in a container", ""):
    "its blocks need a container runtime; tests/test_container.py runs the image's command as "
    "written, and builds and serves the image when docker or podman answers",
    ("docs/getting-started.md", "Getting started", "python -m pytest"):
    "it runs the whole test suite, this test included",
    ("README.md", "Documentation", "mkdocs build"): "it builds the site from a checkout; "
    "tests/test_docs.py runs the same build (--strict) into a temporary directory",
    ("docs/guides/falkordb.md", "Deploying beyond one process (FalkorDB)", ""):
    "its blocks need a FalkorDB server between them; "
    "tests/test_falkordb.py::test_the_docs_deploying_section_runs_as_written runs them as "
    "written (ports filled in), waiting for the server the first block starts",
}
LLM_MODEL = "test-model"  # the model tests/fixtures/llm/ recorded answers for


@dataclass(frozen=True)
class Block:
    page: str          # relative to the repository: README.md, docs/guides/langgraph.md
    section: str
    language: str
    text: str
    line: int          # of the opening fence
    before: str        # the section's prose before the block


def page_blocks(page: Path) -> list[Block]:
    found: list[Block] = []
    section, prose = "", []
    name = page.relative_to(ROOT).as_posix()
    lines = page.read_text(encoding="utf-8").splitlines()
    n = 0
    while n < len(lines):
        line = lines[n]
        if line.startswith(("# ", "## ")):
            section, prose = line.split(" ", 1)[1].strip(), []
        elif line.startswith("```"):
            language, start, body = line[3:].strip(), n + 1, []
            n += 1
            while not lines[n].startswith("```"):
                body.append(lines[n])
                n += 1
            found.append(Block(name, section, language, "\n".join(body) + "\n", start,
                               "\n".join(prose)))
        else:
            prose.append(line)
        n += 1
    return found


def blocks() -> list[Block]:
    return [b for page in PAGES for b in page_blocks(page)]


def not_run(block: Block) -> str | None:
    for (page, section, containing), why in NOT_RUN.items():
        if block.page == page and block.section == section and containing in block.text:
            return why
    if block.page == "README.md":
        for other in blocks():
            if other.page != "README.md" and other.text == block.text:
                return f"the same block runs in {other.page} ({other.section})"
    return None


def sections() -> list[tuple[str, str]]:
    return list(dict.fromkeys((b.page, b.section) for b in blocks()))


def test_every_block_is_of_a_kind_this_test_runs_and_the_not_run_list_is_current():
    assert {b.language for b in blocks()} <= {"python", "sh", "policy", "json"}
    for page, section, containing in NOT_RUN:
        assert any(b.page == page and b.section == section and containing in b.text
                   for b in blocks()), f"NOT_RUN names a block that is gone: {page}: {section}: {containing!r}"


def test_the_readme_stays_short_and_its_quickstart_is_what_ci_runs():
    """The README is what a newcomer reads first: under 200 lines, the rest is in docs/. Its
    test command is the one .ci/run runs."""
    assert len(README.read_text(encoding="utf-8").splitlines()) < 200
    ci = (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    quick = [b.text for b in page_blocks(README) if b.section == "Quickstart"]
    assert len(quick) == 2 and quick[0].rstrip().endswith("&& gem demo")
    assert quick[1].rstrip().endswith("&& python -m pytest -q")
    assert "\npython -m pytest -q\n" in ci
    # The extras the README's test command installs are the ones CI installs, so a newcomer's
    # run skips no test that CI runs.
    readme_extras = re.search(r"pip install '\.\[([^\]]*)\]'", quick[1]).group(1)
    ci_extras = re.search(r'pip install --quiet "\.\[([^\]]*)\]"', ci).group(1)
    assert readme_extras == ci_extras


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


@pytest.fixture
def llm_endpoint(monkeypatch):
    """A block that reads GEM_LLM_BASE_URL gets the recorded endpoint (tests/test_llm.py)."""
    server = FixtureServer()
    monkeypatch.setenv("GEM_LLM_BASE_URL", server.url)
    monkeypatch.setenv("GEM_LLM_MODEL", LLM_MODEL)
    try:
        yield server
    finally:
        server.stop()
    assert server.unknown == [], f"requests with no recorded answer: {server.unknown}"
    assert server.count() > 0, "the block never called the model"


@pytest.mark.slow
@pytest.mark.parametrize("page,section", sections(), ids=[f"{p}::{s}" for p, s in sections()])
def test_the_docs_section_runs_as_written(page, section, tmp_path, monkeypatch, request):
    work, home = tmp_path / "work", tmp_path / "home"
    work.mkdir()
    home.mkdir()
    ports = {port: _free_port() for port in PORTS}
    env = {**os.environ, "HOME": str(home), "PATH": BIN + os.pathsep + os.environ["PATH"]}
    groups: list[int] = []
    monkeypatch.chdir(work)
    ran = 0
    mine = [b for b in blocks() if b.page == page and b.section == section]
    if any("GEM_LLM_BASE_URL" in b.text for b in mine):
        request.getfixturevalue("llm_endpoint")
    try:
        for block in mine:
            where = f"{page}:{block.line} ({section})"
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
        pytest.skip("; ".join(sorted({not_run(b) or "" for b in mine})))
