"""Retrieval is a transition: C1 on its output, C6 on the salience it leaves behind."""
from __future__ import annotations

from datetime import timedelta

import gem
from conftest import T0, snapshot


def seed(mem, clock):
    mem.ingest([gem.Fact("Website Redesign", "deadline", "March 15", at=T0),
                gem.Fact("Website Redesign", "owner", "Alice", at=T0),
                gem.Fact("Lunch", "preferences", "sushi on Fridays", at=T0)])
    clock.advance(days=7)
    mem.ingest(gem.Fact("Website Redesign", "deadline", "April 20"))


def test_default_retrieval_never_shows_a_superseded_value(mem, clock):
    seed(mem, clock)
    r = mem.retrieve("What is the deadline of the Website Redesign?")
    assert r.value("Website Redesign", "deadline") == "April 20"
    dumped = r.model_dump_json()
    assert "March 15" not in dumped
    assert r.topics[0].fields["deadline"].history is None


def test_history_is_shown_only_when_asked(mem, clock):
    seed(mem, clock)
    r = mem.retrieve(topic="Website Redesign", fields=["deadline"], history=True)
    history = r.topics[0].fields["deadline"].history
    assert [h.value for h in history] == ["March 15", "April 20"]
    assert history[0].provenance.source == "api"


def test_salience_rises_strictly_with_each_retrieval_at_a_fixed_time(mem, clock):
    seed(mem, clock)
    seen = [mem.inspect("Website Redesign", "deadline").salience]
    topic_seen = [mem.inspect("Website Redesign").salience]
    for _ in range(3):
        mem.retrieve(topic="Website Redesign", fields=["deadline"])
        seen.append(mem.inspect("Website Redesign", "deadline").salience)
        topic_seen.append(mem.inspect("Website Redesign").salience)
    assert seen[0] < seen[1] < seen[2] < seen[3] < 1.0
    assert topic_seen[0] < topic_seen[1] < topic_seen[2] < topic_seen[3]
    # the field that was not asked for was not touched
    owner = mem.inspect("Website Redesign", "owner")
    assert owner.last_access == T0 + timedelta(days=0) or owner.last_access < clock.now


def test_retrieval_output_shows_the_salience_it_produced(mem, clock):
    seed(mem, clock)
    r = mem.retrieve(topic="Website Redesign", fields=["deadline"])
    assert r.topics[0].fields["deadline"].salience == mem.inspect("Website Redesign", "deadline").salience


def test_as_of_returns_what_was_current_then(mem, clock):
    seed(mem, clock)
    then = mem.retrieve(topic="Website Redesign", as_of=T0 + timedelta(days=1))
    assert then.value("Website Redesign", "deadline") == "March 15"
    now = mem.retrieve(topic="Website Redesign", as_of=clock.now)
    assert now.value("Website Redesign", "deadline") == "April 20"
    before = mem.retrieve(topic="Website Redesign", as_of=T0 - timedelta(days=1))
    assert before.topics[0].fields == {}


def test_unrelated_queries_return_and_reinforce_nothing(mem, clock):
    seed(mem, clock)
    before = mem.inspect("Lunch", "preferences").salience
    r = mem.retrieve("quantum chromodynamics lattice")
    assert r.topics == []
    assert mem.inspect("Lunch", "preferences").salience == before


def test_inspect_history_and_explain_are_side_effect_free(mem, clock):
    seed(mem, clock)
    before = snapshot(mem)
    mem.inspect("Website Redesign")
    mem.inspect("Website Redesign", "deadline")
    mem.history("Website Redesign", "deadline")
    mem.explain("Website Redesign", "deadline")
    mem.stats()
    mem.audit()
    assert snapshot(mem) == before
    assert mem.inspect("Nope") is None and mem.inspect("Website Redesign", "nope") is None


def test_retrieval_counts_as_an_interaction_and_is_logged(mem, clock):
    seed(mem, clock)
    n = mem.stats()["interactions"]
    r = mem.retrieve("deadline")
    assert mem.stats()["interactions"] == n + 1
    record = mem.transitions()[-1]
    assert record["op"] == "retrieve" and record["seq"] == r.transition
    assert any(p["action"] == "reinforce" for p in record["policies"])


def test_hidden_fields_and_archived_topics_need_include_archived(mem, clock):
    seed(mem, clock)
    engine = mem._engine
    from gem.operators.forget import archive_topic, hide_field
    engine.run("forget", lambda t: hide_field(t, mem.inspect("Website Redesign").id + "/owner"))
    engine.run("forget", lambda t: archive_topic(t, mem.inspect("Lunch").id))
    r = mem.retrieve(topic="Website Redesign")
    assert "owner" not in r.topics[0].fields
    assert mem.retrieve(topic="Lunch").topics == []
    assert mem.retrieve("sushi restaurant downtown tonight").topics == []  # a weak cue
    assert mem.retrieve(topic="Lunch", include_archived=True).value("Lunch", "preferences")
    assert "owner" in mem.retrieve(topic="Website Redesign", include_archived=True).topics[0].fields
    assert mem.inspect("Website Redesign", "owner").status == "hidden"
    # Asking for a hidden field by name is an explicit lookup: it answers and revives it.
    named = mem.retrieve(topic="Website Redesign", fields=["owner"])
    assert named.value("Website Redesign", "owner") == "Alice"
    assert mem.inspect("Website Redesign", "owner").status == "active"
    assert mem.restore("Lunch") is True
    assert mem.retrieve(topic="Lunch").value("Lunch", "preferences") == "sushi on Fridays"


def test_fields_of_a_topic_returned_as_association_context_are_marked_as_context(mem):
    from gem.api import ops, schemas
    mem.ingest([gem.Fact("Website Redesign", "deadline", "April 20"),
                gem.Fact("Website Redesign", "owner", "Ana"),
                gem.Fact("Design Agency", "contact", "Mia at studio nine")])
    mem.link("Website Redesign", "Design Agency", kind="association")
    r = mem.retrieve("website redesign deadline", k=1)
    ranked, context = r.topics
    assert (ranked.title, ranked.context_of) == ("Website Redesign", None)
    assert [(n, f.context) for n, f in ranked.fields.items()] == [("deadline", False)]
    assert ranked.fields["deadline"].score is not None
    assert (context.title, context.context_of) == ("Design Agency", "Website Redesign")
    assert [(n, f.context, f.score) for n, f in context.fields.items()] == [("contact", True, None)]
    # the wire (HTTP and MCP) carries both
    card = ops.recall(mem, schemas.RetrieveRequest(query="website redesign deadline", k=1))
    ranked_card, context_card = card.topics
    assert ranked_card.context_of is None and not ranked_card.fields["deadline"].context
    assert context_card.context_of == "Website Redesign" and context_card.fields["contact"].context
    assert mem.inspect("Design Agency").fields["contact"].context is False  # read directly
