"""The dashboard's page functions on a Memory in this process, and its drawing helpers: the
cases the served story does not reach (a long history, a memory that moves on between two
views, degenerate time ranges)."""
from __future__ import annotations

import re
from datetime import datetime, timezone

import pytest

import gem
from conftest import snapshot
from gem.dashboard import pages, svg
from gem.dashboard.pages.common import LIST_LIMIT
from gem.dashboard.pages.topics import TABLE_LIMIT, TIMELINE_LIMIT


def test_a_long_history_is_drawn_newest_first_and_capped(mem, clock):
    for k in range(TIMELINE_LIMIT + 30):
        clock.advance(hours=1)
        mem.ingest(gem.Fact("Long Story", "chapter", f"chapter {k}", source=f"s{k % 3}"))
    page = pages.topic(mem, "Long Story")
    field = page.split('id="field-chapter"', 1)[1]
    assert f"The newest {TIMELINE_LIMIT} of {TIMELINE_LIMIT + 30} entries" in field
    assert field.count('<g class="entry ') == TIMELINE_LIMIT
    assert f"The newest {TABLE_LIMIT} of" in field
    assert f"chapter {TIMELINE_LIMIT + 29}" in field and ">chapter 0<" not in field


def test_the_overview_and_log_audit_again_once_the_memory_moved_on(mem):
    mem.ingest(gem.Fact("First", "x", 1))
    assert "the audit recomputed every record" in pages.log(mem, None, None)
    assert "the audit recomputed every record" in pages.log(mem, None, None)  # same head
    seq = mem.recent_transitions(1)[0]["seq"]
    mem.ingest(gem.Fact("Second", "y", 2))
    assert f"the records after #{seq} " in pages.log(mem, None, None)
    assert "Second" in pages.overview(mem, pages.OverviewQuery())


@pytest.mark.parametrize("n", [30, 60])
def test_long_evidence_lists_are_cut(mem, clock, n):
    """A forgetting pass's record lists every unit it attenuated, by level: the page shows
    the first few of each list, however many there are."""
    mem.ingest([gem.Fact(f"Faded subject number {i}", "note", i) for i in range(n)])
    clock.advance(days=400)
    mem.forget()
    page = pages.log(mem, None, None)
    assert re.search(r"\+\d+ more", page)
    # each list cut at LIST_LIMIT: the ingest's units, and the pass's units and three levels
    assert page.count("Faded subject number") <= 5 * LIST_LIMIT


def test_every_page_function_changes_nothing(mem, clock):
    mem.ingest([gem.Fact("Alpha", "a", 1), gem.Fact("Beta", "b", 2)])
    mem.link("Alpha", "Beta")
    clock.advance(days=1)
    mem.ingest(gem.Fact("Alpha", "a", 3))
    before = snapshot(mem)
    for render in (lambda: pages.overview(mem, pages.OverviewQuery(order="flags")),
                   lambda: pages.topic(mem, "Alpha"), lambda: pages.graph(mem, "Beta", 3),
                   lambda: pages.log(mem, "Alpha", None), lambda: pages.policies(mem),
                   lambda: pages.episodes(mem, "alpha", None, 0),
                   lambda: pages.audit(mem, True)):
        assert render().startswith("<!doctype html>")
    assert snapshot(mem) == before


def test_a_topic_page_shows_labels_retractions_and_links_by_id(mem, clock):
    """Governance on the page: a field's labels, a retracted value with its reason; and a topic
    titled like an id is its own page, never the topic with that id."""
    mem.ingest([gem.Fact("Ada", "email", "ada@example.org", labels=["pii"]),
                gem.Fact("Ada", "phone", "555-0100"), gem.Fact("t1", "x", "titled t1")])
    clock.advance(days=1)
    assert mem.retract("Ada", "phone", "a wrong number")
    page = pages.topic(mem, "Ada")
    email = page.split('id="field-email"', 1)[1].split("</section>", 1)[0]
    assert '<span class="badge label">pii</span>' in email
    phone = page.split('id="field-phone"', 1)[1].split("</section>", 1)[0]
    assert "retracted: a wrong number" in phone
    assert 'href="/graph?id=t1"' in page and 'href="/log?id=t1"' in page  # Ada is t1
    titled = pages.topic(mem, "t1")  # the title
    assert "titled t1" in titled and "ada@example.org" not in titled
    assert "ada@example.org" in pages.topic(mem, gem.TopicId("t1"))  # the id
    assert 'href="/log?id=t1&amp;before=' in pages.log(mem, gem.TopicId("t1"), None, limit=1)


def test_ticks_and_scales_survive_empty_and_odd_ranges():
    assert svg.nice_ticks(0, 1, 5) == [0, 0.2, 0.4, 0.6, 0.8, 1.0]
    assert svg.nice_ticks(3, 3) == [3]
    scale = svg.Scale(5, 5, 0, 100)  # an empty domain is widened, not divided by zero
    assert 0 < scale(5) < 100
    t = datetime(2026, 3, 2, 9, tzinfo=timezone.utc).timestamp()
    day = svg.time_ticks(t, t + 86400 * 10)
    assert 2 <= len(day) <= 6 and all(re.match(r"\d{4}-\d\d-\d\d$", label) for _, label in day)
    assert svg.time_ticks(t, t + 50)  # seconds
    years = svg.time_ticks(t - 86400 * 365 * 30, t)
    assert all(re.match(r"\d{4}$", label) for _, label in years)


def test_a_one_entry_timeline_and_a_lone_node_draw():
    now = datetime(2026, 3, 2, 9, tzinfo=timezone.utc)
    one = svg.bitemporal([svg.Span("v", "current", now, None, now, None, "tip")], [], now)
    assert one.count("<rect") == 2 and "nan" not in one
    lone = svg.network([svg.Node("t1", "Alone", 0, 0.5, "active", False, "/graph?topic=t1", "tip")], [])
    assert lone.count('class="node"') == 1 and "nan" not in lone
    chart = svg.line_chart([svg.Series("s", [(now, 0.5)])], x_time=True)
    assert "nan" not in chart
