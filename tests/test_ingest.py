"""Field-history semantics of ingest, one rule per test (issue: Engine core)."""
from __future__ import annotations

from datetime import timedelta

import pytest

import gem
from conftest import T0


def fact(value, field="deadline", topic="Website Redesign", **kw):
    return gem.Fact(topic, field, value, **kw)


def test_new_value_appends_and_keeps_the_old_one(mem, clock):
    mem.ingest(fact("March 15", source="chat:1"))
    clock.advance(days=7)
    r = mem.ingest(fact("April 20", source="chat:2"))
    history = mem.history("Website Redesign", "deadline")
    assert [h.value for h in history] == ["March 15", "April 20"]
    old, new = history
    assert old.status == "superseded" and old.superseded_by == new.id == r.entry_ids[0]
    assert old.provenance.source == "chat:1" and new.status == "current"
    assert mem.inspect("Website Redesign", "deadline").value == "April 20"


def test_reingesting_the_current_value_corroborates_instead_of_duplicating(mem, clock):
    mem.ingest(fact("March 15"))
    before = mem.inspect("Website Redesign", "deadline").salience
    r = mem.ingest(fact("March 15", source="chat:again"))
    assert r.entry_ids == r.new_values == [] and r.corroborations == 1
    history = mem.history("Website Redesign", "deadline")
    assert len(history) == 1
    assert [o.provenance.source for o in history[0].observations] == ["chat:again"]
    assert mem.inspect("Website Redesign", "deadline").salience > before


def test_late_arriving_fact_is_history_not_current(mem, clock):
    mem.ingest(fact("April 20", at=T0))
    r = mem.ingest(fact("March 15", at=T0 - timedelta(days=10)))
    assert mem.inspect("Website Redesign", "deadline").value == "April 20"
    late = [h for h in mem.history("Website Redesign", "deadline") if h.id == r.entry_ids[0]][0]
    assert late.status == "superseded" and late.value == "March 15"
    assert late.superseded_by is not None


def test_current_is_latest_valid_time_ties_broken_by_recording(mem, clock):
    clock.advance(days=2)  # every valid time below is in the past
    mem.ingest(fact("A", at=T0))
    clock.advance(hours=1)
    mem.ingest(fact("B", at=T0))  # same valid time, recorded later: wins
    assert mem.inspect("Website Redesign", "deadline").value == "B"
    clock.advance(hours=1)
    mem.ingest(fact("C", at=T0 + timedelta(days=1)))
    clock.advance(hours=1)
    mem.ingest(fact("D", at=T0 + timedelta(hours=12)))  # older valid time than C
    assert mem.inspect("Website Redesign", "deadline").value == "C"
    statuses = {h.value: h.status for h in mem.history("Website Redesign", "deadline")}
    assert statuses == {"A": "superseded", "B": "superseded", "C": "current", "D": "superseded"}


def test_a_denial_is_evidence_and_never_becomes_current(mem):
    mem.ingest(fact("March 15"))
    mem.ingest(fact("March 15", polarity="-", source="skeptic", confidence=0.9))
    assert mem.inspect("Website Redesign", "deadline").value == "March 15"
    r = mem.ingest(fact("May 1", polarity="-"))
    assert mem.inspect("Website Redesign", "deadline").value == "March 15"
    denied = [h for h in mem.history("Website Redesign", "deadline") if h.id in r.entry_ids]
    assert denied[0].status == "retracted"
    assert mem.explain("Website Redesign", "deadline").states["conflict"] > 0


def test_summary_and_embedding_follow_current_values(mem, clock):
    mem.ingest(fact("March 15"))
    assert "March 15" in mem.inspect("Website Redesign").summary
    clock.advance(days=1)
    mem.ingest(fact("April 20"))
    summary = mem.inspect("Website Redesign").summary
    assert "April 20" in summary and "March 15" not in summary
    hit = mem.retrieve("April 20 deadline")
    assert hit.topics and hit.topics[0].title == "Website Redesign"


def test_extension_dependents_are_flagged_with_evidence_association_ones_are_not(mem, clock):
    mem.ingest([fact("March 15"), fact("March 20", topic="Launch Milestones", field="launch"),
                fact("Ocean", topic="Brand Colors", field="palette")])
    mem.link("Website Redesign", "Launch Milestones", "extension")
    mem.link("Website Redesign", "Brand Colors", "association")
    clock.advance(days=7)
    r = mem.ingest(fact("April 20"))
    milestones = mem.inspect("Launch Milestones")
    assert r.flagged == ["Launch Milestones"]
    assert [mem.inspect(gem.TopicId(t)).title for t in r.flagged_ids] == r.flagged
    assert len(milestones.flags) == 1
    flag = milestones.flags[0]
    assert flag.evidence["updated_field"] == "deadline"
    assert flag.evidence["timestamp"] == clock.now.isoformat()
    assert (flag.origin, flag.origin_id) == ("Website Redesign", mem.inspect("Website Redesign").id)
    assert mem.inspect("Brand Colors").flags == []


def test_a_list_of_facts_is_one_transition(mem):
    before = len(mem.transitions())
    r = mem.ingest([fact(str(i), field=f"f{i}") for i in range(50)])
    assert len(mem.transitions()) == before + 1
    assert len(r.entry_ids) == 50 and r.transition == mem.transitions()[-1]["seq"]


def test_batch_sees_its_own_topics(mem):
    r = mem.ingest([fact("x", topic="Alpha Project"), fact("y", field="owner", topic="alpha project")])
    assert len(r.created_topics) == 1
    assert set(mem.inspect("Alpha Project").fields) == {"deadline", "owner"}


@pytest.mark.parametrize("bad", [
    dict(topic="", field="f", value=1),
    dict(topic="t", field="  ", value=1),
    dict(topic="t", field="f", value=None),
    dict(topic="t", field="f", value=object()),
    dict(topic="t", field="f", value=float("nan")),
    dict(topic="t", field="f", value=1, confidence=1.5),
    dict(topic="t", field="f", value=1, confidence=float("nan")),
    dict(topic="t", field="f", value=1, polarity="?"),
    dict(topic="t", field="f", value=1, at="yesterday"),
    dict(topic="t", field="f", value=1, colour="red"),
])
def test_bad_facts_raise_invalid_input(bad):
    with pytest.raises(gem.InvalidInput):
        gem.Fact(**bad)


def test_bad_input_changes_nothing(mem):
    from conftest import snapshot
    mem.ingest(fact("March 15"))
    before = snapshot(mem)
    with pytest.raises(gem.InvalidInput):
        mem.ingest([fact("April 20"), "not a fact"])
    with pytest.raises(gem.InvalidInput):
        mem.ingest([])
    with pytest.raises(gem.InvalidInput):
        mem.retrieve(k=0)
    assert snapshot(mem) == before


def test_naive_times_are_refused_not_taken_as_utc():
    naive = T0.replace(tzinfo=None)
    with pytest.raises(gem.InvalidInput, match="at: must be timezone-aware"):
        gem.Fact("t", "f", 1, at=naive)
