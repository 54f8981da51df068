"""Stale episodes (issue 27 item 4): an episode whose claim a newer fact replaced is marked
stale, with the newer value and since when, ranked below that fact, and shown as such in
results, the compact text format and the dashboard."""
from __future__ import annotations

from datetime import datetime, timedelta

import pytest
from conftest import ENGINE, T0, memory_location

import gem
from gem.api import ops, prompt
from gem.api import schemas as s
from gem.testing.consistency import cache_disagreements, citation_disagreements, \
    derived_disagreements

BERLIN_AT = T0 - timedelta(days=30)
MUNICH_AT = T0 - timedelta(days=2)


def where_they_live(episode: gem.Episode) -> list[gem.Fact]:
    """A stand-in for an LLM extractor: 'I live in X' -> Fact(speaker, city, X)."""
    text = episode.text.rstrip(".")
    for says in ("I live in ", "I moved to "):
        if text.startswith(says):
            return [gem.Fact(episode.speaker or "someone", "city", text[len(says):],
                             source=episode.source)]
    return []


def berlin_then_munich(mem: gem.Memory, munich_as_episode: bool = True) -> None:
    mem.ingest(gem.Episode("I live in Berlin.", at=BERLIN_AT, source="chat:1", speaker="Alex"))
    if munich_as_episode:
        mem.ingest(gem.Episode("I moved to Munich.", at=MUNICH_AT, source="chat:2",
                               speaker="Alex"))
    else:
        mem.ingest(gem.Fact("Alex", "city", "Munich", at=MUNICH_AT, source="profile"))


@pytest.fixture
def lives(db_path, clock):
    with gem.open(db_path, clock=clock, engine=ENGINE, extractor=where_they_live) as mem:
        yield mem


def _by_text(result: gem.RetrieveResult) -> dict[str, gem.EpisodeView]:
    return {e.text: e for e in result.episodes}


def test_an_episode_whose_fact_was_superseded_is_marked_stale_with_the_newer_value(lives):
    berlin_then_munich(lives, munich_as_episode=False)
    r = lives.retrieve("where does Alex live, Berlin?")
    berlin = _by_text(r)["I live in Berlin."]
    (mark,) = berlin.stale
    assert (mark.topic, mark.field, mark.value, mark.since, mark.retracted) == \
        ("Alex", "city", "Munich", MUNICH_AT, False)
    assert r.value("Alex", "city") == "Munich"
    assert lives.audit(full=True).ok


def test_a_current_episode_is_not_stale_and_the_newer_episode_is_not_either(lives):
    berlin_then_munich(lives)
    episodes = _by_text(lives.retrieve("Alex live Berlin Munich moved", k=10))
    assert episodes["I moved to Munich."].stale == []
    assert [m.value for m in episodes["I live in Berlin."].stale] == ["Munich"]
    lives.ingest(gem.Episode("I live in Munich.", at=MUNICH_AT + timedelta(hours=1),
                             source="chat:3", speaker="Alex"))  # corroborates: not stale
    episodes = _by_text(lives.retrieve("Alex live Berlin Munich moved", k=10))
    assert episodes["I live in Munich."].stale == [] and episodes["I moved to Munich."].stale == []


def test_no_stale_episode_is_ranked_above_the_fact_that_superseded_it(lives):
    berlin_then_munich(lives)
    for query in ("I live in Berlin", "Berlin", "where does Alex live", "Alex city"):
        r = lives.retrieve(query, k=5)
        for e in r.episodes:
            for mark in e.stale:
                (topic,) = [t for t in r.topics if t.id == mark.topic_id]
                fact = topic.fields[mark.field]
                assert fact.value == "Munich" and fact.score is not None
                assert e.score is not None and e.score < fact.score, query
        assert any(e.stale for e in r.episodes) or "Berlin" not in query


def test_the_fact_comes_with_a_stale_episode_the_query_ranked_alone(lives):
    berlin_then_munich(lives, munich_as_episode=False)
    r = lives.retrieve("Berlin", k=2)  # only the episode says Berlin
    (berlin,) = r.episodes
    assert berlin.stale and r.value("Alex", "city") == "Munich"
    assert berlin.score < r.topics[0].fields["city"].score
    # k holds: with room for one unit, the current value is it, and more were relevant
    r = lives.retrieve("Berlin", k=1)
    assert r.episodes == [] and r.value("Alex", "city") == "Munich" and r.truncated


def test_a_retracted_fact_leaves_its_episode_stale_with_no_value(lives, clock):
    lives.ingest(gem.Episode("I live in Berlin.", at=BERLIN_AT, source="chat:1", speaker="Alex"))
    assert _by_text(lives.retrieve("Berlin"))["I live in Berlin."].stale == []
    clock.advance(hours=1)
    assert lives.retract("Alex", "city", "Alex never said where they live")
    (mark,) = _by_text(lives.retrieve("Berlin"))["I live in Berlin."].stale
    assert mark.retracted and mark.value is None and mark.reason == "Alex never said where they live"
    assert mark.since == T0 + timedelta(hours=1)
    lives.ingest(gem.Fact("Alex", "city", "Berlin", source="profile"))  # said again: current again
    assert _by_text(lives.retrieve("Berlin"))["I live in Berlin."].stale == []


def test_a_revision_that_supersedes_the_fact_marks_the_episode(db_path, clock):
    with gem.open(db_path, clock=clock, engine=ENGINE, extractor=where_they_live,
                  reviser=lambda revision: [gem.Fact("Alex", "city", "Munich")]) as mem:
        mem.ingest([gem.Episode("I live in Berlin.", at=BERLIN_AT, source="chat:1", speaker="Alex"),
                    gem.Fact("Acme", "office", "Berlin")])
        mem.link("Acme", "Alex")
        clock.advance(hours=1)
        mem.ingest(gem.Fact("Acme", "office", "Munich"))
        assert _by_text(mem.retrieve("I live in Berlin"))["I live in Berlin."].stale == []
        mem.revise()
        (mark,) = _by_text(mem.retrieve("I live in Berlin"))["I live in Berlin."].stale
        assert (mark.field, mark.value) == ("city", "Munich")
        assert mem.audit(full=True).ok


def test_erasing_the_superseding_fact_makes_the_episode_current_again(lives):
    berlin_then_munich(lives, munich_as_episode=False)
    assert _by_text(lives.retrieve("Berlin"))["I live in Berlin."].stale
    receipt = lives.erase("Alex", "city", source="profile", reason="asked to forget the move")
    assert _by_text(lives.retrieve("Berlin"))["I live in Berlin."].stale == []
    assert lives.retrieve("Berlin").value("Alex", "city") == "Berlin"
    assert lives.verify_erasure(receipt).ok and lives.audit(full=True).ok
    assert derived_disagreements(lives) == [] and cache_disagreements(lives) == []


def test_as_of_before_the_move_the_episode_is_not_stale(lives):
    berlin_then_munich(lives)
    r = lives.retrieve("I live in Berlin", as_of=MUNICH_AT - timedelta(days=1))
    assert _by_text(r)["I live in Berlin."].stale == []


def test_the_mark_survives_reopening_and_history_shows_it(tmp_path, clock):
    path = memory_location(tmp_path)
    with gem.open(path, clock=clock, engine=ENGINE, extractor=where_they_live) as mem:
        berlin_then_munich(mem)
    with gem.open(path, clock=clock, engine=ENGINE, extractor=where_they_live) as mem:
        old, new = mem.history("Alex", "city")
        assert old.episode is not None and old.episode.stale[0].value == "Munich"
        assert new.episode is not None and new.episode.stale == []
        listed = {e.text: e for e in mem.episodes().episodes}
        assert listed["I live in Berlin."].stale and not listed["I moved to Munich."].stale
        assert mem.audit(full=True).ok


def test_the_text_format_and_the_wire_card_mark_a_stale_episode(lives):
    berlin_then_munich(lives)
    card = ops.recall(lives, s.RetrieveRequest(query="I live in Berlin, moved to Munich", k=5))
    (berlin,) = [e for e in card.episodes if e.text == "I live in Berlin."]
    assert berlin.stale and berlin.stale[0].value == "Munich"
    assert berlin.stale[0].model_dump(mode="json")["since"].startswith(MUNICH_AT.date().isoformat())
    text = prompt.render(card)
    (line,) = [x for x in text.splitlines() if "I live in Berlin." in x]
    assert line.endswith(f"[stale: Alex city now Munich since {MUNICH_AT.date().isoformat()}]")
    assert text.index("city: Munich") < text.index("I live in Berlin.")
    assert "stale" not in [x for x in text.splitlines() if "I moved to Munich." in x][0]
    assert "stale" in s.EpisodeCard.model_json_schema()["properties"]


# ---- without an extractor: the default policy's rule and the mark_stale action ----------


def _said(mem: gem.Memory, text: str, at, speaker: str | None = "Alex", source: str = "chat"):
    return mem.ingest(gem.Episode(text, at=at, source=source, speaker=speaker)).episode_ids[0]


def test_without_an_extractor_the_default_rule_marks_an_episode_a_later_one_contradicts(mem):
    berlin = _said(mem, "I live in Berlin.", BERLIN_AT)
    munich = _said(mem, "I moved to Munich.", MUNICH_AT)
    r = mem.retrieve("I live in Berlin", k=5)
    (mark,) = _by_text(r)["I live in Berlin."].stale
    assert (mark.episode, mark.text, mark.since) == (munich, "I moved to Munich.", MUNICH_AT)
    assert _by_text(r)["I moved to Munich."].stale == []
    ranked = [e.id for e in r.episodes]
    assert ranked.index(munich) < ranked.index(berlin)  # it came with it, ranked above
    (line,) = [x for x in prompt.render(ops.recall(mem, s.RetrieveRequest(query="I live in Berlin")))
               .splitlines() if "Berlin" in x]
    assert line.endswith(f"[stale: contradicted {MUNICH_AT.date().isoformat()}: I moved to Munich.]")
    assert mem.audit(full=True).ok
    assert derived_disagreements(mem) == [] and cache_disagreements(mem) == []


@pytest.mark.parametrize("earlier, later, speakers", [
    ("I live in Berlin.", "I live in Berlin.", ("Alex", "Alex")),      # the same place
    ("I live in Berlin.", "I moved to Munich.", ("Alex", "Sam")),      # someone else moved
    ("I live in Berlin.", "I moved to Munich.", (None, None)),         # whose, unknown
    ("I live in Berlin.", "My sister moved to Munich.", ("Alex", "Alex")),
    ("I live in Berlin and work in Munich.", "I moved to Munich.", ("Alex", "Alex")),
    ("I lived in Berlin.", "I moved to Munich.", ("Alex", "Alex")),    # already past
    ("I live in Berlin.", "I moved to Munich last year, then back.", ("Alex", "Alex")),
])
def test_the_default_rule_leaves_alone_what_is_not_plainly_a_contradiction(mem, earlier, later,
                                                                             speakers):
    _said(mem, earlier, BERLIN_AT, speaker=speakers[0])
    _said(mem, later, MUNICH_AT, speaker=speakers[1], source="chat:2")
    assert all(e.stale == [] for e in mem.episodes().episodes)


def test_an_earlier_episode_said_after_does_not_mark_and_a_batch_is_judged_in_order(mem, tmp_path):
    _said(mem, "I moved to Munich.", MUNICH_AT)
    _said(mem, "I live in Berlin.", BERLIN_AT)   # told later, said before: it is the old one
    listed = {e.text: e for e in mem.episodes().episodes}
    assert listed["I moved to Munich."].stale == [] and listed["I live in Berlin."].stale == []
    with gem.open(memory_location(tmp_path, "batch"), clock=lambda: T0, engine=ENGINE) as other:
        other.ingest([gem.Episode("I live in Paris.", at=BERLIN_AT, speaker="Alex"),
                      gem.Episode("I moved to Rome.", at=MUNICH_AT, speaker="Alex")])
        listed = {e.text: e for e in other.episodes().episodes}
        assert [m.text for m in listed["I live in Paris."].stale] == ["I moved to Rome."]


def test_erasing_the_contradicting_episode_lifts_the_mark(mem):
    _said(mem, "I live in Berlin.", BERLIN_AT)
    _said(mem, "I moved to Munich.", MUNICH_AT, source="chat:2")
    assert {e.text: e for e in mem.episodes().episodes}["I live in Berlin."].stale
    mem.ingest(gem.Fact("Alex", "note", "x", source="chat:2"))
    receipt = mem.erase("Alex", source="chat:2", reason="forget that chat")
    (berlin,) = mem.episodes().episodes
    assert berlin.stale == [] and mem.verify_erasure(receipt).ok and mem.audit(full=True).ok


def test_mark_stale_refuses_an_episode_that_was_not_said_later(tmp_path, clock):
    policy = tmp_path / "backwards.policy"
    policy.write_text("POLICY backwards\nON episode_recorded\n"
                      "WHEN EXISTS e IN said_before\nDO mark_stale(episode, e)\n")
    with gem.open(memory_location(tmp_path), clock=clock, engine=ENGINE, policies=[policy]) as mem:
        _said(mem, "first", BERLIN_AT)
        with pytest.raises(gem.TransitionRejected, match="mark_stale"):
            _said(mem, "second", MUNICH_AT)
        assert [e.text for e in mem.episodes().episodes] == ["first"]


@pytest.mark.parametrize("pattern, code", [('"in \\\\w+"', "gem_invalid_regex"),
                                           ('"in (\\\\w+"', "gem_invalid_regex"),
                                           ("episode.text", "gem_invalid_regex")])
def test_capture_needs_a_literal_pattern_with_a_group(tmp_path, pattern, code):
    policy = tmp_path / "bad.policy"
    policy.write_text(f"POLICY bad\nON episode_recorded\nWHEN capture(episode.text, {pattern}) != null\n"
                      "DO hide(episode)\n")
    with pytest.raises(gem.PolicyCheckError) as caught:
        gem.policy.load([policy])
    assert code in str(caught.value)


def test_the_dashboard_s_episodes_page_shows_a_stale_episode_and_what_replaced_it(lives):
    from gem.dashboard import pages
    berlin_then_munich(lives)
    page = pages.episodes(lives, None, None, 0)
    (berlin,) = [r for r in page.split("<tr")[1:] if "I live in Berlin." in r]
    (munich,) = [r for r in page.split("<tr")[1:] if "I moved to Munich." in r]
    assert f"stale: Alex city now Munich since {MUNICH_AT.date().isoformat()}" in berlin
    assert 'class="badge superseded">stale<' in berlin
    assert "stale" not in munich


@pytest.mark.skipif(ENGINE == "falkordb", reason="tests/servers.py finds a served memory by the "
                    "endpoint file beside an embedded database")
def test_http_and_mcp_recall_show_a_stale_episode_with_no_internal_id(tmp_path):
    import asyncio
    import json
    import re

    import httpx
    from mcp import Client
    from servers import HANG, start, stop

    path = memory_location(tmp_path)
    with gem.open(path, engine=ENGINE) as mem:  # no extractor: the default rule marks it
        _said(mem, "I live in Berlin.", BERLIN_AT)
        _said(mem, "I moved to Munich.", MUNICH_AT, source="chat:2")
    server = start(path, "--engine", ENGINE, log_dir=str(tmp_path))
    try:
        with httpx.Client(base_url=server.url, timeout=HANG) as c:
            body = c.post("/v1/retrieve", json={"query": "I live in Berlin"}).json()
            (berlin,) = [e for e in body["episodes"] if e["text"] == "I live in Berlin."]
            (mark,) = berlin["stale"]
            assert (mark["said"], mark["topic"], mark["value"], mark["retracted"]) == \
                ("I moved to Munich.", None, None, False)
            assert datetime.fromisoformat(mark["since"]) == MUNICH_AT
            assert [e["text"] for e in body["episodes"]][:2] == ["I moved to Munich.", "I live in Berlin."]
            text = c.post("/v1/retrieve", json={"query": "I live in Berlin", "format": "text"})
            assert "[stale: contradicted" in text.text
            schema = c.get("/openapi.json").json()["components"]["schemas"]
            assert "stale" in schema["EpisodeCard"]["properties"] and "StaleCard" in schema

        async def recall() -> dict:
            async with Client(server.endpoint.mcp_url, cache=None) as client:
                result = await client.call_tool("memory_recall", {"query": "I live in Berlin"})
                return result.structured_content
        found = asyncio.run(recall())
        (berlin,) = [e for e in found["episodes"] if e["text"] == "I live in Berlin."]
        assert [m["said"] for m in berlin["stale"]] == ["I moved to Munich."]
        assert not re.search(r'"ep\d+"', json.dumps(found))
    finally:
        stop(server)


def test_berlin_munich_berlin_marks_the_first_berlin_only_while_munich_is_current(mem):
    berlin = _said(mem, "I live in Berlin.", BERLIN_AT)
    munich = _said(mem, "I moved to Munich.", MUNICH_AT, source="chat:2")
    back_at = MUNICH_AT + timedelta(days=1)
    back = _said(mem, "I moved to Berlin.", back_at, source="chat:3")
    listed = {e.id: e for e in mem.episodes().episodes}
    assert listed[berlin].stale == [] and listed[back].stale == []
    assert [m.episode for m in listed[munich].stale] == [back]
    # as of a time when Munich was current, the first Berlin episode was out of date
    r = mem.retrieve("I live in Berlin moved Munich", k=5, as_of=MUNICH_AT + timedelta(hours=1))
    marks = {e.id: [m.episode for m in e.stale] for e in r.episodes}
    assert marks[berlin] == [munich] and marks[munich] == []
    r = mem.retrieve("I live in Berlin moved Munich", k=5)
    marks = {e.id: [m.episode for m in e.stale] for e in r.episodes}
    assert marks[berlin] == [] and marks[munich] == [back]


def test_berlin_munich_hamburg_keeps_the_first_berlin_stale(mem):
    berlin = _said(mem, "I live in Berlin.", BERLIN_AT)
    _said(mem, "I moved to Munich.", MUNICH_AT, source="chat:2")
    hamburg = _said(mem, "I moved to Hamburg.", MUNICH_AT + timedelta(days=1), source="chat:3")
    listed = {e.id: e for e in mem.episodes().episodes}
    assert [m.episode for m in listed[berlin].stale] == [hamburg]


def test_an_episode_recorded_before_cited_by_existed_is_marked_stale_too(db_path, clock):
    """A database written before `Episode.cited_by`: the column comes back null ("not known")
    at open, and what cites its episodes is read from the entries."""
    from gem.store import open_store
    with gem.open(db_path, clock=clock, engine=ENGINE, extractor=where_they_live) as mem:
        mem.ingest(gem.Episode("I live in Berlin.", at=BERLIN_AT, source="chat:1", speaker="Alex"))
    if ENGINE == "falkordb":
        pytest.skip("FalkorDB has no columns to drop")
    store = open_store(db_path, ENGINE)
    with store.transaction() as tx:  # what a database written before cited_by looks like
        tx.run("ALTER TABLE Episode DROP cited_by")
    store.close()
    with gem.open(db_path, clock=clock, engine=ENGINE, extractor=where_they_live) as mem:
        # (the log here attests the list the column held: the audit holds again once a
        # transition writes it, below; a database of that gem never attested one)
        (berlin,) = mem.episodes().episodes
        assert berlin.stale == []
        mem.ingest(gem.Fact("Alex", "city", "Munich", at=MUNICH_AT, source="profile"))
        r = mem.retrieve("where does Alex live, Berlin?")
        (mark,) = _by_text(r)["I live in Berlin."].stale
        assert (mark.field, mark.value) == ("city", "Munich")
        # a fact citing it again writes the whole list: the first citation is kept
        mem.ingest(gem.Episode("I live in Berlin.", at=BERLIN_AT, source="chat:1", speaker="Alex"))
        mem.ingest(gem.Fact("Alex", "home", "Berlin", at=BERLIN_AT, source="chat:1",
                            ref=berlin.id))
        (berlin,) = [e for e in mem.episodes().episodes if e.id == berlin.id]
        assert [m.value for m in berlin.stale] == ["Munich"]
        assert citation_disagreements(mem) == [] and mem.audit(full=True).ok
