"""The wheel users install: its distribution name is gem's own, and it carries what gem reads
at run time (the grammar, the default policy, the LLM prompts) and the `gem` command."""
from __future__ import annotations

import subprocess
import sys
import zipfile
from email.parser import Parser
from pathlib import Path

import pytest

from servers import HANG

ROOT = Path(__file__).resolve().parents[1]
# `gem` on the package index is an unrelated 3D-maths library (2017) that also imports as `gem`.
NAME = "gem-memory"


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> zipfile.ZipFile:
    out = tmp_path_factory.mktemp("wheel")
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", "-w", str(out),
                    str(ROOT)], check=True, timeout=HANG)
    (built,) = out.glob("*.whl")
    with zipfile.ZipFile(built) as z:
        yield z


def test_the_wheel_is_named_gem_memory(wheel):
    (metadata,) = [n for n in wheel.namelist() if n.endswith(".dist-info/METADATA")]
    fields = Parser().parsestr(wheel.read(metadata).decode())
    assert fields["Name"] == NAME
    extras = set(fields.get_all("Provides-Extra"))
    assert {"server", "ladybug", "falkordb", "semantic", "langgraph", "test"} <= extras
    # extras that pull in others name this distribution, never the unrelated `gem`
    assert not [r for r in fields.get_all("Requires-Dist") if r.startswith("gem[")]


def test_the_wheel_carries_what_gem_reads_at_run_time(wheel):
    names = set(wheel.namelist())
    assert {"gem/_data/grammar/policy.lark", "gem/_data/policies/default.policy",
            "gem/llm/prompts/extract.md", "gem/py.typed"} <= names
    (entry_points,) = [n for n in names if n.endswith(".dist-info/entry_points.txt")]
    assert "gem = gem.cli:main" in wheel.read(entry_points).decode()
