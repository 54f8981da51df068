"""The dashboard through real HTTP: `gem serve` on 127.0.0.1 (an ephemeral port) over a memory
with something on every page (tests/dashboard_story.py). Pages are read-only, so one server
serves every test of the module; the tour at the end runs a server of its own and checks that
following every link changed nothing in the database or the log."""
from __future__ import annotations

import html
import os
import re
import signal
from collections import deque
from urllib.parse import urlsplit

import httpx
import pytest

import gem
from conftest import ENGINE, snapshot
from dashboard_story import TITLES, XSS_RAW, XSS_SOURCE, XSS_TITLE, XSS_VALUE, build
from servers import HANG, start, stop

HREF = re.compile(r'href="([^"]*)"')


@pytest.fixture(scope="module")
def reports_dir(tmp_path_factory):
    from gem.bench.stream import StreamConfig
    from gem.bench.report import write_outputs
    from gem.bench.trajectory import run_benchmark
    out = tmp_path_factory.mktemp("reports")
    report = run_benchmark(StreamConfig(turns=30, seed=3), ["mem0-v2", "zep"])
    write_outputs(report, out, html=True)
    return out


@pytest.fixture(scope="module")
def served(tmp_path_factory, reports_dir):
    path = str(tmp_path_factory.mktemp("dash") / "story.db")
    build(path, ENGINE)
    server = start(path, "--engine", ENGINE, "--reports", str(reports_dir))
    yield server
    stop(server)


@pytest.fixture(scope="module")
def client(served):
    with httpx.Client(base_url=served.url, timeout=HANG) as c:
        yield c


def get(client: httpx.Client, url: str, expect: int = 200, /, **params) -> str:
    r = client.get(url, params=params or None)
    assert r.status_code == expect, (url, r.status_code, r.text[:500])
    assert r.headers["content-type"].startswith("text/html")
    assert "script-src" not in r.headers["content-security-policy"]  # default-src 'none' covers it
    assert "default-src 'none'" in r.headers["content-security-policy"]
    return r.text


def rows(page: str, table_class: str) -> list[str]:
    body = page.split(f'<table class="{table_class}">', 1)[1].split("</table>", 1)[0]
    return body.split("<tbody>", 1)[1].split("<tr>")[1:]


def test_overview_lists_topics_counts_audit_and_last_transitions(client):
    page = get(client, "/")
    for title in TITLES:
        assert html.escape(title) in page
    assert "5 active · 1 archived" in page
    assert "3 active · 4 compressed · 0 hidden · 1 archived" in page  # fields by ladder level
    assert "topics flagged for revision" in page and 'href="/?flagged=1"' in page
    assert "hash chain intact" in page and '<span class="badge ok">ok</span>' in page
    assert page.count('href="/log?before=') == 10  # the last ten transitions
    listed = rows(page, "topics")
    assert len(listed) == 6 and "Website Redesign" in listed[0]  # the most salient first
    assert "1 open" in next(r for r in listed if "Launch Milestones" in r)
    assert 'class="badge archived"' in next(r for r in listed if "Old Offsite" in r)


def test_overview_filters_and_pages(client):
    assert [t for t in TITLES if html.escape(t) in "".join(rows(get(client, "/", text="vendor"), "topics"))] \
        == ["Vendor Choice"]
    flagged = "".join(rows(get(client, "/", flagged="1"), "topics"))
    assert "Launch Milestones" in flagged and "Website Redesign" not in flagged
    archived = rows(get(client, "/", status="archived"), "topics")
    assert len(archived) == 1 and "Old Offsite" in archived[0]
    by_title = get(client, "/", order="title", offset="1")
    assert "Budget Review" in rows(by_title, "topics")[0]  # the XSS title sorts first ('<')
    assert "← previous" in by_title and "Topics (2-6 of 6)" in by_title
    assert "No topic matches" in get(client, "/", text="no such thing at all")
    assert "order must be one of" in get(client, "/", 422, order="size")


def test_topic_page_shows_fields_history_evidence_and_salience(client):
    page = get(client, "/topic", topic="Website Redesign")
    assert "<title>Website Redesign · gem</title>" in page
    deadline = page.split('id="field-deadline"', 1)[1].split("</section>", 1)[0]
    assert '<span class="value">April 20</span>' in deadline and "chat:2" in deadline
    assert deadline.count('class="badge superseded"') == 2  # March 15, and the late April 1
    assert "April 1" in deadline and "March 15" in deadline
    assert "email:9" in deadline  # the denial, as an observation of April 20
    for state in ("action", "inaction", "conflict", "ignorance"):
        assert f"{state} 0." in deadline
    assert "reliability R = <b" in deadline
    assert deadline.count('<g class="entry ') == 3 and '<g class="observation">' in deadline
    assert page.count('class="timeline"') == 3  # one per field
    owner = page.split('id="field-owner"', 1)[1].split("</section>", 1)[0]
    assert "corroboration of Ana by chat:3" in owner
    assert "Salience and ladder status over time" in page and 'class="chart"' in page
    assert "Open revision flags" not in page
    launch = get(client, "/topic", topic="Launch Milestones")
    assert "Open revision flags" in launch and "propagate-on-change" in launch
    assert "updated_field" in launch and 'href="/topic?id=t2"' in launch  # because of: named
    vendor = get(client, "/topic", topic="vendor choice")
    assert "Contested: the candidates" in vendor and "Acme" in vendor and "Apex" in vendor
    assert vendor.count('class="reliability"') >= 3  # R of each candidate, and of the field
    old = get(client, "/topic", topic="Old Offsite")
    ladder = rows(old.split("Salience and ladder status over time", 1)[1], "")
    topic_steps, venue_steps = ladder[0].split("<td>")[-1], ladder[1].split("<td>")[-1]
    assert '<span class="badge archived">archived</span>' in topic_steps
    assert venue_steps.index("compressed") < venue_steps.index("hidden")
    assert "Not found" in get(client, "/topic", 404, topic="Nothing Like It")
    assert get(client, "/topic", id="t2").count("Website Redesign") > 3  # by id too
    # ids and titles never share a namespace: "t2" as a title names no topic here
    assert "Not found" in get(client, "/topic", 404, topic="t2")


def test_graph_page_draws_typed_edges_as_links(client):
    page = get(client, "/graph", topic="Website Redesign", depth="2")
    assert 'class="edge extension"' in page and 'class="edge association"' in page
    nodes = re.findall(r'<a class="node" href="([^"]+)"', page)
    assert len(nodes) == 4  # itself, Launch Milestones and the XSS topic, then Budget Review
    assert "Vendor Choice" not in page.split("<svg", 1)[1].split("</svg>", 1)[0]
    deeper = get(client, "/graph", topic="Website Redesign", depth="3")
    assert len(re.findall(r'<a class="node"', deeper)) == 5
    moved = get(client, html.unescape(nodes[1]))  # clicking a node centres the graph there
    assert re.search(r"<h1>Graph: (Launch Milestones|Budget Review|&lt;script)", moved)
    assert "Not found" in get(client, "/graph", 404, topic="Nothing Like It")
    assert get(client, "/graph", 422, topic="Website Redesign", depth="9")


def test_log_page_shows_ops_policies_evidence_and_the_chain(client):
    page = get(client, "/log")
    records = rows(page, "log")
    assert len(records) == 18 and records[0].startswith("<td>18</td>")
    assert page.count("<span class=\"ok\" title=") == 18 and "✗" not in page
    assert 'badge intact' not in page and '<span class="badge ok">intact</span>' in page
    update = next(r for r in records if "propagate-on-change" in r)
    assert "flag_for_revision" in update and "updated_field" in update
    assert 'href="/policies#policy-propagate-on-change"' in update
    vendor = rows(get(client, "/log", topic="Vendor Choice"), "log")
    assert {re.search(r'class="badge op">(\w+)<', r).group(1) for r in vendor} == \
        {"ingest", "link", "forget"}
    older = rows(get(client, "/log", before="5"), "log")
    assert [r.split("</td>", 1)[0] for r in older] == ["<td>4", "<td>3", "<td>2", "<td>1"]
    assert "Not found" in get(client, "/log", 404, topic="Nothing Like It")


def test_policies_page_has_sources_and_the_trigger_graph(client):
    page = get(client, "/policies")
    with gem.open(None, engine=ENGINE) as fresh:  # the default governance a new memory gets
        policies = fresh.policies
    for p in policies.policies:
        assert f'id="policy-{p.name}"' in page
        assert f"policy:{p.name}" not in page  # box ids stay internal
    graph = page.split('class="layered"', 1)[1].split("</svg>", 1)[0]
    # one box per policy, and per event: the 7 of facts and topics and 2 of episodes
    assert graph.count('class="box event"') == 9
    assert graph.count('class="box policy"') == len(policies.policies) == 12
    assert 'class="arrow emits"' in graph
    assert "Events and the policies they trigger" in page
    assert html.escape(policies.sources[0].text, quote=True)[:200] in page


def test_audit_page(client):
    assert "No violation." in get(client, "/audit")
    assert "<dd>everything</dd>" in get(client, "/audit", full="1")


def test_reports_are_listed_and_served_self_contained(client, reports_dir):
    page = get(client, "/reports")
    assert 'href="/reports/trajectory-30-seed3.html"' in page
    report = get(client, "/reports/trajectory-30-seed3.html")
    assert report == (reports_dir / "trajectory-30-seed3.html").read_text(encoding="utf-8")
    assert "<svg" in report and "mem0-v2" in report and "<script" not in report
    assert not re.search(r'(src|href)="(https?:)?//', report)  # nothing loaded from elsewhere
    for bad in ("nope.html", "..%2Fstory.db", "trajectory-30-seed3.json", "%2E%2E/story.db"):
        assert client.get(f"/reports/{bad}").status_code == 404


def test_untrusted_text_is_escaped_everywhere(client):
    pages = [get(client, "/"), get(client, "/topic", topic=XSS_TITLE),
             get(client, "/graph", topic=XSS_TITLE, depth="2"), get(client, "/log"),
             get(client, "/log", topic=XSS_TITLE), get(client, "/topic", topic="Website Redesign")]
    for page in pages:
        for raw in XSS_RAW:
            assert raw not in page
        assert "<script" not in page  # the pages carry no script of their own either
    topic = pages[1]
    assert html.escape(XSS_TITLE) in topic and html.escape(XSS_VALUE) in topic
    assert html.escape(XSS_SOURCE) in topic


def crawl(base: str, start_urls: list[str], limit: int = 400) -> dict[str, int]:
    """Every page reachable from `start_urls` through the dashboard's own links."""
    seen: dict[str, int] = {}
    queue = deque(start_urls)
    with httpx.Client(base_url=base, timeout=HANG) as c:
        while queue and len(seen) < limit:
            url = queue.popleft()
            if url in seen:
                continue
            r = c.get(url)
            seen[url] = r.status_code
            if not r.headers.get("content-type", "").startswith("text/html"):
                continue
            for found in HREF.findall(r.text):
                target = html.unescape(found).split("#", 1)[0]
                parts = urlsplit(target)
                if target.startswith("/") and not parts.netloc and \
                        not parts.path.startswith(("/docs", "/v1", "/openapi")):
                    queue.append(target)
    return seen


@pytest.mark.slow
def test_a_tour_of_every_page_changes_nothing(tmp_path, reports_dir):
    path = str(tmp_path / "tour.db")
    build(path, ENGINE)
    with gem.open(path, engine=ENGINE, create=False) as mem:
        before, log = snapshot(mem), mem.transitions()
    server = start(path, "--engine", ENGINE, "--reports", str(reports_dir))
    try:
        seen = crawl(server.url, ["/", "/audit?full=1", "/graph?id=t2&depth=3"])
        assert {status for status in seen.values()} == {200}, \
            {u: s for u, s in seen.items() if s != 200}
        kinds = {urlsplit(u).path for u in seen}
        assert {"/", "/topic", "/graph", "/log", "/policies", "/audit", "/reports",
                "/episodes"} <= kinds
        assert sum(1 for u in seen if u.startswith("/topic")) >= len(TITLES)
        os.kill(server.process.pid, signal.SIGTERM)  # a clean close: salience is written behind
        assert server.process.wait(timeout=HANG) == 0
    finally:
        stop(server)
    with gem.open(path, engine=ENGINE, create=False) as mem:
        assert mem.transitions() == log
        assert snapshot(mem) == before


@pytest.mark.slow
def test_a_scope_is_viewed_on_its_own_and_links_stay_in_it(tmp_path):
    path = str(tmp_path / "scopes.db")
    with gem.open(path, engine=ENGINE) as mem:
        mem.ingest(gem.Fact("Default Plan", "owner", "Dana", source="chat:1"))
        acme = mem.scope("acme")
        acme.ingest([gem.Fact("Acme Launch", "deadline", "May 2", source="chat:2"),
                     gem.Fact("Acme Budget", "amount", 1200, source="chat:2")])
        acme.link("Acme Launch", "Acme Budget", kind="extension")
        acme_launch = acme.inspect("Acme Launch").id
    server = start(path, "--engine", ENGINE)
    try:
        with httpx.Client(base_url=server.url, timeout=HANG) as c:
            home = get(c, "/")
            assert "Default Plan" in home and "Acme Launch" not in home
            assert '<option value="acme">acme</option>' in home  # the header offers the scope
            page = get(c, "/", scope="acme")
            assert "Acme Launch" in page and "Acme Budget" in page and "Default Plan" not in page
            links = [html.unescape(h) for h in HREF.findall(page) if h.startswith("/")
                     and not h.startswith("/docs")]
            assert links and [h for h in links if "scope=acme" not in h] == [], links
            assert 'name="scope" value="acme"' in page  # the filter form keeps the scope
            topic = get(c, "/topic", scope="acme", id=acme_launch)
            assert "May 2" in topic
            get(c, "/topic", 404, id=acme_launch)  # not in the default scope
            drawn = get(c, "/graph", scope="acme", topic="Acme Launch")
            assert "Acme Budget" in drawn
            assert [h for h in HREF.findall(drawn) if h.startswith("/graph")
                    and "scope=acme" not in h] == []  # the nodes' links too
            assert "Default Plan" not in get(c, "/log", scope="acme")
            assert "scope names" in get(c, "/", 422, scope="Not A Scope!")
    finally:
        stop(server)


@pytest.mark.slow
def test_episodes_page_lists_filters_pages_escapes_and_keeps_to_its_scope(tmp_path):
    path = str(tmp_path / "said.db")
    with gem.open(path, engine=ENGINE) as mem:
        mem.ingest([gem.Episode(f"turn {i}: the {'kitchen' if i % 3 == 0 else 'garden'} plan",
                                speaker="Ann" if i % 2 else "Bo", source=f"chat:{i}")
                    for i in range(60)])
        mem.ingest(gem.Episode("<script>alert('said')</script> & more", speaker="<b>Eve</b>"))
        mem.scope("acme").ingest(gem.Episode("acme's secret recipe", speaker="Acme"))
    server = start(path, "--engine", ENGINE)
    try:
        with httpx.Client(base_url=server.url, timeout=HANG) as c:
            first = get(c, "/episodes")
            listed = rows(first, "episodes")
            assert len(listed) == 50 and "&lt;script&gt;" in listed[0]  # newest first, escaped
            assert "<script" not in first and "<b>Eve" not in first
            assert "Episodes (1-50 of 61; 61 active · 0 hidden · 0 compressed)" in first and "older →" in first
            assert "secret recipe" not in first  # another scope's
            older = get(c, "/episodes", offset="50")
            assert len(rows(older, "episodes")) == 11 and "turn 0:" in rows(older, "episodes")[-1]
            kitchen = rows(get(c, "/episodes", text="KITCHEN"), "episodes")
            assert len(kitchen) == 20 and all("kitchen" in r for r in kitchen)
            assert len(rows(get(c, "/episodes", text="ann"), "episodes")) == 30  # the speaker
            assert "No episode matches" in get(c, "/episodes", status="hidden")
            assert "status must be" in get(c, "/episodes", 422, status="gone")
            acme = get(c, "/episodes", scope="acme")
            assert "secret recipe" in acme and "turn 1:" not in acme
    finally:
        stop(server)


def test_the_episodes_and_overview_pages_show_what_remains_after_an_erasure(tmp_path):
    def deadline(episode):
        topic, _, date = episode.text.partition(" is due ")
        return [gem.Fact(topic, "deadline", date, source=episode.source)] if date else []

    path = str(tmp_path / "erased.db")
    with gem.open(path, engine=ENGINE, extractor=deadline) as mem:
        mem.ingest([gem.Episode("Website Redesign is due April 20", source="chat:41"),
                    gem.Episode("Lunch is at the deli", source="chat:42"),
                    gem.Fact("Lunch", "place", "deli")])
        assert mem.erase("Website Redesign", reason="ticket 25").episodes == ["ep1"]
    server = start(path, "--engine", ENGINE)
    try:
        with httpx.Client(base_url=server.url, timeout=30) as c:
            said = get(c, "/episodes")
            assert "Episodes (1-1 of 1; 1 active · 0 hidden · 0 compressed)" in said
            assert [r for r in rows(said, "episodes") if "Lunch is at the deli" in r]
            assert "April 20" not in said
            overview = get(c, "/")
            assert "Lunch" in overview and "Website Redesign" not in overview
            assert "redacted" in get(c, "/log")   # the ingest's record, redacted by the erasure
    finally:
        stop(server)
