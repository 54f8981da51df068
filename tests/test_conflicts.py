"""Conflicts a reader must see: a denial of the current value contests the field, and a
contested field says why its value is the current one (the newest statement, with the
evidence reliability R of each candidate), in inspect, explain, retrieval and the dashboard."""
from __future__ import annotations

from datetime import timedelta

import gem
from conftest import T0
from gem.api import ops
from gem.cli import render
from gem.dashboard import pages
from gem.dashboard.html import esc


def test_a_denial_of_the_current_value_contests_it(mem, clock):
    mem.ingest(gem.Fact("Website Redesign", "deadline", "March 15", source="pm"))
    clock.advance(days=1)
    mem.ingest(gem.Fact("Website Redesign", "deadline", "March 15", source="client",
                        polarity="-", confidence=0.9))
    view = mem.inspect("Website Redesign", "deadline")
    assert view.value == "March 15" and view.contested       # current, but disputed
    assert view.reliability is not None and view.reliability < 0
    assert "denied" in view.why_current and "client" in view.why_current
    assert mem.explain("Website Redesign", "deadline").why_current == view.why_current
    mem.revise()                                              # the dispute stands
    assert mem.inspect("Website Redesign", "deadline").contested
    clock.advance(days=1)
    mem.ingest(gem.Fact("Website Redesign", "deadline", "March 15", source="pm"))
    after = mem.inspect("Website Redesign", "deadline")       # a newer statement answers it
    assert not after.contested and after.why_current is None
    mem.revise()
    assert not mem.inspect("Website Redesign", "deadline").contested
    assert mem.audit(full=True).ok


def test_a_denial_older_than_the_current_statement_or_of_another_value_contests_nothing(mem, clock):
    mem.ingest(gem.Fact("Budget", "amount", 100, source="finance"))
    mem.ingest(gem.Fact("Budget", "amount", 90, source="sales", polarity="-"))   # never held
    mem.ingest(gem.Fact("Budget", "amount", 100, source="sales", polarity="-",
                        at=T0 - timedelta(days=3)))                             # before it was said
    assert not mem.inspect("Budget", "amount").contested


def _contested(mem, clock) -> None:
    # one valid time, two sources: the newer statement is the less reliable one
    mem.ingest(gem.Fact("Budget", "amount", 100, at=T0, source="finance"))
    clock.advance(hours=1)
    mem.ingest(gem.Fact("Budget", "amount", 120, at=T0, source="rumour", confidence=0.3))


def test_a_contested_field_says_why_its_less_reliable_value_is_current(mem, clock):
    _contested(mem, clock)
    view = mem.inspect("Budget", "amount")
    assert view.contested and view.value == 120
    by_value = {c.value: c for c in view.candidates}
    assert by_value[120].current and not by_value[100].current
    assert by_value[100].reliability > by_value[120].reliability == view.reliability
    why = view.why_current
    assert "newest" in why and "100" in why and "finance" in why and "higher" in why
    explained = mem.explain("Budget", "amount")
    assert explained.contested and explained.why_current == why
    recalled = mem.retrieve(topic="Budget").topics[0].fields["amount"]
    assert recalled.why_current == why and recalled.reliability == view.reliability
    card = ops.inspect(mem, "Budget").fields["amount"]
    assert card.why_current == why and [c.current for c in card.candidates] == \
        [c.current for c in view.candidates]
    assert why in render.topic(ops.inspect(mem, "Budget"))
    assert why in render.explain(ops.explain(mem, "Budget", "amount"))
    assert esc(why) in pages.topic(mem, "Budget")


def test_an_uncontested_field_needs_no_reason(mem, clock):
    mem.ingest(gem.Fact("Budget", "amount", 100, source="finance"))
    view = mem.inspect("Budget", "amount")
    assert not view.contested and view.why_current is None and view.reliability is None
    assert mem.explain("Budget", "amount").why_current is None
