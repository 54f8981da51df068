"""The documentation site builds with `mkdocs build --strict` (mkdocs.yml): every page, the
API reference from the docstrings, and the references docs/hooks.py generates (the command
line from the parsers, the HTTP API from the OpenAPI schema). A broken link, a docstring
mkdocstrings cannot render, or a hook that fails is a warning, and --strict fails on it."""
from __future__ import annotations

import importlib.util
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from servers import HANG

ROOT = Path(__file__).resolve().parents[1]

pytestmark = pytest.mark.skipif(
    importlib.util.find_spec("mkdocs") is None,
    reason="the docs extra is not installed: pip install '.[docs]'")


@pytest.fixture(scope="module")
def site(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("site")
    done = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--quiet",
                           "--config-file", str(ROOT / "mkdocs.yml"), "--site-dir", str(out)],
                          cwd=ROOT, capture_output=True, text=True, timeout=HANG,
                          env={**os.environ, "NO_MKDOCS_2_WARNING": "1"})
    assert done.returncode == 0, done.stdout + done.stderr
    return out


def _text(page: Path) -> str:
    return re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", page.read_text(encoding="utf-8")))


@pytest.mark.slow
def test_the_site_builds_strict_with_every_page(site):
    nav = (ROOT / "mkdocs.yml").read_text(encoding="utf-8")
    sources = re.findall(r":\s+(\S+\.md)$", nav, re.M)
    assert "reference/cli.md" in sources and "reference/policy-language.md" in sources
    for source in sources:  # index.md -> index.html, guides/x.md -> guides/x/index.html
        built = site / source.removesuffix(".md").removesuffix("index") / "index.html"
        assert built.exists(), source
    assert (site / "dashboard-topic.png").exists()


@pytest.mark.slow
def test_the_generated_references_say_what_gem_says(site):
    from gem.cli import COMMANDS
    cli = _text(site / "reference" / "cli" / "index.html")
    for command in COMMANDS:  # every command's --help, generated from its parser
        assert f"usage: gem {command.name}" in cli, command.name
    assert "usage: gem policy check" in cli
    http = _text(site / "reference" / "http" / "index.html")
    for route in ("POST /v1/ingest", "POST /v1/retrieve", "GET /v1/topic", "POST /v1/erase"):
        assert route in http, route
    assert "RetrieveRequest" in http
    api = _text(site / "reference" / "api" / "index.html")
    assert "gem.open" in api and "Open (or create) a memory" in api
    policy = _text(site / "reference" / "policy-language" / "index.html")
    assert "The gem policy language: reference" in policy


@pytest.mark.slow
def test_the_site_fetches_nothing_from_the_internet(site):
    """Offline at view time: no web fonts, no script or stylesheet from another host."""
    for page in site.rglob("*.html"):
        html = page.read_text(encoding="utf-8")
        loads = re.findall(r'<(?:script|link|img)\b[^>]*\b(?:src|href)="(https?:)?//', html)
        assert not loads, f"{page.relative_to(site)} loads from another host"
        assert "fonts.googleapis" not in html and "fonts.gstatic" not in html, page
