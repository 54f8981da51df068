"""The side-effect-free views the dashboard reads: topic listings, neighbourhoods, salience and
ladder status over time, the newest log records, titles. Each is checked against what the
operators did, and for changing nothing."""
from __future__ import annotations

import pytest

import gem
from conftest import ENGINE, snapshot
from gem.audit import verify_chain


@pytest.fixture
def story(mem, clock):
    mem.ingest([gem.Fact("Website Redesign", "deadline", "March 15", source="chat:1"),
                gem.Fact("Website Redesign", "owner", "Ana", source="chat:1"),
                gem.Fact("Launch Milestones", "launch", "March 20"),
                gem.Fact("Budget Review", "amount", 1200)])
    mem.link("Website Redesign", "Launch Milestones", kind="extension")
    mem.link("Launch Milestones", "Budget Review", kind="association")
    clock.advance(days=1)
    mem.ingest(gem.Fact("Website Redesign", "deadline", "April 20", source="chat:2"))
    mem.retrieve(topic="Website Redesign")
    return mem


def test_topics_lists_status_salience_ladder_and_flags(story):
    page = story.topics()
    assert [t.title for t in page.topics][0] == "Website Redesign"  # the most salient first
    by_title = {t.title: t for t in page.topics}
    assert by_title["Launch Milestones"].open_flags == 1
    assert by_title["Website Redesign"].fields == {"active": 2, "compressed": 0, "hidden": 0}
    assert page.topic_counts == {"active": 3, "archived": 0}
    assert page.field_counts == {"active": 4, "compressed": 0, "hidden": 0, "archived": 0}
    assert page.flagged == 1 and page.matching == 3
    saliences = [t.salience for t in page.topics]
    assert saliences == sorted(saliences, reverse=True)
    assert [t.title for t in story.topics(flagged=True).topics] == ["Launch Milestones"]
    assert [t.title for t in story.topics(text="budget").topics] == ["Budget Review"]
    assert [t.title for t in story.topics(order="title").topics] == \
        ["Budget Review", "Launch Milestones", "Website Redesign"]
    assert [t.title for t in story.topics(order="recent").topics][0] == "Budget Review"
    second = story.topics(order="title", offset=1, limit=1)
    assert [t.title for t in second.topics] == ["Launch Milestones"] and second.matching == 3
    assert story.topics(status="archived").topics == []


def test_topics_counts_follow_the_ladder(story, clock):
    clock.advance(days=400)
    story.forget()
    page = story.topics(status="archived")
    assert page.topic_counts["archived"] == page.matching > 0
    assert page.field_counts["archived"] > 0


@pytest.mark.parametrize("bad", [{"status": "gone"}, {"order": "size"}, {"limit": 0},
                                 {"offset": -1}, {"limit": True}])
def test_topics_refuses_bad_arguments(story, bad):
    with pytest.raises(gem.InvalidInput):
        story.topics(**bad)


def test_graph_walks_typed_edges_both_ways(story):
    one = story.graph("Website Redesign")
    assert {n.title: n.depth for n in one.nodes} == {"Website Redesign": 0, "Launch Milestones": 1}
    assert [(e.kind, e.transition is not None) for e in one.edges] == [("extension", True)]
    two = story.graph("Website Redesign", depth=2)
    assert {n.title for n in two.nodes} == {"Website Redesign", "Launch Milestones", "Budget Review"}
    assert sorted(e.kind for e in two.edges) == ["association", "extension"]
    from_budget = story.graph("Budget Review", depth=2)  # walked against the edges' direction
    assert len(from_budget.nodes) == 3 and not from_budget.truncated
    capped = story.graph("Launch Milestones", depth=1, limit=2)
    assert len(capped.nodes) == 2 and capped.truncated
    with pytest.raises(gem.UnknownUnit):
        story.graph("Nothing Like It")
    with pytest.raises(gem.InvalidInput):
        story.graph("Website Redesign", depth=0)


def test_salience_history_follows_the_log(story, clock):
    history = story.salience_history("Website Redesign")
    units = {u.field: u for u in history.units}
    assert set(units) == {None, "deadline", "owner"}
    topic = units[None]
    logged = [p.transition for p in topic.points if p.transition is not None]
    assert logged == sorted(logged) and len(logged) >= 2  # the update and the retrieval
    assert all(0 <= p.salience < 1 for p in topic.points)
    assert topic.salience == pytest.approx(story.inspect("Website Redesign").salience)
    clock.advance(days=400)
    story.forget()
    story.restore("Website Redesign", "deadline")
    later = {u.field: u for u in story.salience_history("Website Redesign").units}
    levels = [c.status for c in later["deadline"].ladder]
    assert levels[-1] == "active" and len(levels) >= 2 and later["deadline"].status == "active"
    assert later["owner"].ladder and later["owner"].ladder[-1].status == later["owner"].status


def test_recent_transitions_newest_first_and_by_topic(story):
    everything = story.transitions()
    newest = story.recent_transitions(3)
    assert [r["seq"] for r in newest] == [r["seq"] for r in everything[::-1][:3]]
    assert newest[0]["hash"] == everything[-1]["hash"] and "salience" in newest[0]
    assert verify_chain(newest[::-1], start=newest[-1]["prev_hash"])[0]  # as stored and hashed
    heads = story.recent_transitions(3, details=False)
    assert [{k: r[k] for k in h} for r, h in zip(newest, heads)] == heads
    assert set(heads[0]) == {"seq", "op", "event", "at", "actor", "units", "prev_hash", "hash"}
    older = story.recent_transitions(2, before=newest[-1]["seq"])
    assert [r["seq"] for r in older] == [newest[-1]["seq"] - 1, newest[-1]["seq"] - 2]
    about = story.recent_transitions(50, topic="Budget Review")
    assert [r["op"] for r in about] == ["link", "ingest"]
    launch = story.recent_transitions(50, topic="Launch Milestones")
    assert "ingest" in [r["op"] for r in launch]  # the update that flagged it
    with pytest.raises(gem.UnknownUnit):
        story.recent_transitions(topic="Nothing Like It")


def test_recent_transitions_keep_policy_calls_in_runs(story, clock):
    clock.advance(days=400)
    story.forget()
    stored = story.recent_transitions(1)[0]["policies"]
    listed = story.transitions()[-1]["policies"]
    assert sum(p.get("n", 1) for p in stored) == len(listed) > len(stored)


def test_a_topic_id_that_prefixes_another_is_not_confused(mem):
    mem.ingest([gem.Fact(f"Distinct subject number {i}", "note", f"n{i}") for i in range(12)])
    t1 = mem.topics(order="recent").topics[-1]
    assert t1.id == "t1"
    assert {r["seq"] for r in mem.recent_transitions(50, topic=gem.TopicId("t1"))} == {2}
    mem.ingest(gem.Fact(mem.titles(["t11"])["t11"], "note", "again"))
    assert [r["seq"] for r in mem.recent_transitions(50, topic=gem.TopicId("t1"))] == [2]
    with pytest.raises(gem.UnknownUnit):  # a plain string is a title, and no topic is titled t1
        mem.recent_transitions(50, topic="t1")


def test_views_change_nothing(story):
    before = snapshot(story)
    story.topics(order="title", text="re")
    story.graph("Website Redesign", depth=3)
    story.salience_history("Launch Milestones")
    story.recent_transitions(10, topic="Website Redesign")
    story.titles(["t1", "t2", "nope"])
    assert snapshot(story) == before


def test_episodes_are_listed_newest_first_per_scope_and_bad_arguments_change_nothing(mem, clock):
    mem.ingest([gem.Episode(f"note {i} on the {'roof' if i % 2 else 'door'}", speaker="Ann")
                for i in range(5)])
    mem.scope("acme").ingest(gem.Episode("acme's own note"))
    listing = mem.episodes()
    assert [e.text for e in listing.episodes][:2] == ["note 4 on the door", "note 3 on the roof"]
    assert (listing.matching, listing.counts) == (5, {"active": 5, "hidden": 0, "compressed": 0})
    roof = mem.episodes(text="ROOF", limit=1)
    assert roof.matching == 2 and [e.text for e in roof.episodes] == ["note 3 on the roof"]
    assert [e.id for e in mem.scope("acme").episodes().episodes] == ["acme:ep1"]
    before = snapshot(mem)
    for bad in ({"status": "archived"}, {"text": 3}, {"offset": -1}, {"limit": 0},
                {"limit": True}):
        with pytest.raises(gem.InvalidInput):
            mem.episodes(**bad)
    assert snapshot(mem) == before  # listing reinforces nothing


def test_listings_leave_out_erased_topics_and_episodes(story):
    story.ingest([gem.Episode("Lunch on Friday is at the deli", source="chat:9"),
                  gem.Fact("Website Redesign", "venue", "the deli", source="chat:9")])
    story.erase("Budget Review", reason="asked to")
    story.erase("Website Redesign", source="chat:9", reason="asked to")  # the episode
    page = story.topics()
    assert sorted(t.title for t in page.topics) == ["Launch Milestones", "Website Redesign"]
    assert page.matching == 2 and page.topic_counts == {"active": 2, "archived": 0}
    for order in ("salience", "flags", "title", "recent"):
        assert len(story.topics(order=order).topics) == 2
    assert story.episodes().matching == 0 and story.episodes().episodes == []


def test_listings_leave_out_what_was_erased(db_path):
    """Found by the kill harness (a reopen read the first page after a compaction): an erased
    unit's row stays in the derived tables, matched by no status, and the listings showed it
    (IndexError when it ranked on the page)."""
    with gem.open(db_path, engine=ENGINE) as mem:
        mem.ingest([gem.Fact("Gone", "x", 1, source="s:1"), gem.Episode("gone was said", source="s:1")])
        for _ in range(3):
            mem.retrieve(topic="Gone")  # the most salient topic: first on the page
        mem.ingest([gem.Fact("Keep", "y", 2), gem.Episode("keep was said", source="s:2")])
        mem.erase("Gone", source="s:1", reason="test")  # the field, and the episodes of s:1
        mem.erase("Gone", reason="test")
        for order in ("salience", "title", "recent", "flags"):
            page = mem.topics(order=order)
            assert [t.title for t in page.topics] == ["Keep"] and page.matching == 1
        assert [e.text for e in mem.episodes().episodes] == ["keep was said"]
        assert mem.episodes(text="said").matching == 1
