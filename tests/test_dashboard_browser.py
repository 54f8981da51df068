"""The dashboard in a real browser: Debian's chromium, headless, driven by Playwright through
`executable_path` (no browser download). Three pages, reached by clicking: the overview, a
topic, its graph. Checks what the browser rendered (titles, values, SVG nodes with a size),
that nothing was logged as an error, that no request failed and no dialog opened (the XSS
topic's title must not run), and saves screenshots under bench/out/.

`.ci/run` installs chromium when it is missing; without it this test is skipped, saying so.
"""
from __future__ import annotations

import os
import shutil
from pathlib import Path
from urllib.parse import quote

import pytest

from conftest import ENGINE
from dashboard_story import XSS_TITLE, build
from servers import start, stop

CHROMIUM = os.environ.get("GEM_CHROMIUM") or shutil.which("chromium") or \
    shutil.which("chromium-browser")
OUT = Path(__file__).resolve().parent.parent / "bench" / "out"

pytestmark = [pytest.mark.slow, pytest.mark.skipif(
    CHROMIUM is None, reason="no chromium: Debian's `chromium` is not installed (.ci/run "
                             "installs it with apt-get install -y chromium; or set GEM_CHROMIUM)")]
sync_api = pytest.importorskip("playwright.sync_api",
                               reason="playwright is not installed (pip install '.[test]')")


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    path = str(tmp_path_factory.mktemp("browser") / "story.db")
    build(path, ENGINE)
    server = start(path, "--engine", ENGINE)
    yield server
    stop(server)


@pytest.fixture
def browser_page():
    problems: list[str] = []
    with sync_api.sync_playwright() as p:
        # As root, chromium refuses to start without --no-sandbox.
        args = ["--no-sandbox"] if os.geteuid() == 0 else []
        browser = p.chromium.launch(executable_path=CHROMIUM, headless=True, args=args)
        try:
            page = browser.new_page(viewport={"width": 1280, "height": 900})
            page.on("console", lambda m: problems.append(f"console {m.type}: {m.text}")
                    if m.type in ("error", "warning") else None)
            page.on("pageerror", lambda e: problems.append(f"page error: {e}"))
            page.on("requestfailed", lambda r: problems.append(f"request failed: {r.url}"))
            page.on("response", lambda r: problems.append(f"HTTP {r.status}: {r.url}")
                    if r.status >= 400 else None)
            page.on("dialog", lambda d: (problems.append(f"dialog: {d.message}"), d.dismiss()))
            yield page, problems
        finally:
            browser.close()


def shoot(page, name: str) -> None:
    OUT.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(OUT / f"dashboard-{name}.png"), full_page=True)


def test_three_pages_render_in_a_real_browser(served, browser_page):
    page, problems = browser_page
    page.goto(served.url + "/")
    assert page.title() == "Overview · gem"
    topics = page.locator("table.topics tbody tr")
    assert topics.count() == 6
    # shown as text, not run (in the topic table, and among the recent transitions' units)
    assert page.locator("table.topics").get_by_text(XSS_TITLE, exact=True).is_visible()
    assert page.locator(".stat .n").first.inner_text() == "6"
    shoot(page, "overview")

    page.get_by_role("link", name="Website Redesign", exact=True).first.click()
    page.wait_for_load_state()
    assert page.title() == "Website Redesign · gem"
    deadline = page.locator("#field-deadline")
    assert deadline.locator(".kv .value").first.inner_text() == "April 20"
    timelines = page.locator("svg.timeline")
    assert timelines.count() == 3
    assert deadline.locator("svg.timeline g.entry").count() == 3
    box = deadline.locator("svg.timeline").bounding_box()
    assert box is not None and box["width"] > 300 and box["height"] > 150
    chart = page.locator("svg.chart").first
    assert chart.locator("g.series").count() == 4  # the topic and its three fields
    assert chart.locator("circle").count() >= 4
    shoot(page, "topic")

    page.get_by_role("link", name="neighbourhood").click()
    page.wait_for_load_state()
    assert page.title() == "Graph: Website Redesign · gem"
    nodes = page.locator("svg.network a.node")
    assert nodes.count() == 4
    assert page.locator("svg.network path.edge").count() == 3
    first = nodes.nth(0).locator("circle").bounding_box()
    assert first is not None and first["width"] > 10
    shoot(page, "graph")
    page.locator("svg.network a.node", has_text="Launch Milestones").click()
    page.wait_for_load_state()
    assert page.title() == "Graph: Launch Milestones · gem"  # a click moves the graph

    page.goto(served.url + "/topic?topic=" + quote(XSS_TITLE))  # the XSS topic itself
    assert XSS_TITLE in page.title()
    assert problems == []


def test_the_api_docs_render_offline_in_a_real_browser(served, browser_page):
    page, problems = browser_page
    off_host: list[str] = []
    page.on("request", lambda r: off_host.append(r.url)
            if not r.url.startswith(served.url + "/") else None)
    page.goto(served.url + "/docs")
    assert page.title() == "gem API · gem"
    routes = page.locator("table.routes tbody tr")
    assert routes.count() >= 14
    assert page.locator("table.routes").get_by_text("POST /v1/ingest").is_visible()
    page.locator("table.routes").get_by_text("GET /v1/history").click()
    assert page.locator("section[id='get-/v1/history']").get_by_text("unknown_unit").is_visible()
    shoot(page, "docs")
    assert off_host == [] and problems == []
