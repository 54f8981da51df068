"""Scopes (tenants): every unit belongs to one, and nothing one scope does changes what another
sees — values, order, scores, salience, statuses, ids — checked as a property."""
from __future__ import annotations

import os
import tempfile
from datetime import datetime, timedelta, timezone

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import gem
from conftest import ENGINE, Clock, memory_location
from gem.testing.consistency import cache_disagreements, derived_disagreements


def test_scopes_hold_their_own_topics_under_the_same_titles(mem, clock):
    a, b = mem.scope("acme"), mem.scope("globex")
    a.ingest(gem.Fact("Website Redesign", "deadline", "March 15"))
    b.ingest(gem.Fact("Website Redesign", "deadline", "June 1"))
    assert a.retrieve(topic="Website Redesign").value("Website Redesign", "deadline") == "March 15"
    assert b.retrieve(topic="Website Redesign").value("Website Redesign", "deadline") == "June 1"
    assert mem.retrieve(topic="Website Redesign").topics == []      # the default scope is empty
    assert a.inspect("Website Redesign").id == "acme:t1" and b.inspect("Website Redesign").id == "globex:t1"
    assert b.inspect("acme:t1") is None and mem.inspect("acme:t1") is None   # ids stay in their scope
    assert [t.title for t in a.retrieve("deadline").topics] == ["Website Redesign"]
    assert a.stats()["topics"] == {"active": 1} and mem.stats()["topics"] == {}
    assert [r["scope"] for r in b.transitions()] == ["globex", "globex"]  # ingest, retrieve
    if ENGINE == "falkordb":  # each scope's log is in its own graph: the root lists its own
        assert set(r["scope"] for r in mem.transitions()) == {"default"}
    else:
        assert set(r["scope"] for r in mem.transitions()) == {"default", "acme", "globex"}
    assert mem.scopes() == ["acme", "default", "globex"]
    report = mem.audit(full=True)
    assert report.ok
    assert derived_disagreements(mem) == [] and cache_disagreements(mem) == []


def test_an_empty_scope_reads_as_empty_and_bad_names_are_refused(mem):
    empty = mem.scope("nobody-yet")
    assert empty.inspect("x") is None and empty.stats()["topics"] == {}
    assert "nobody-yet" not in mem.scopes()           # reads create nothing
    assert empty.retrieve("anything").topics == []    # a retrieval is a write: it counts (n = 1)
    assert "nobody-yet" in mem.scopes() and empty.stats()["interactions"] == 1
    for bad in ("", "Upper", "a/b", "a:b", "x" * 65, None, 3):
        with pytest.raises(gem.InvalidInput):
            mem.scope(bad)
    with pytest.raises(gem.InvalidInput, match="policies govern every scope"):
        empty.load_policies([])


def test_each_scope_counts_its_own_interactions_and_bound(tmp_path, clock):
    bound = tmp_path / "bound.policy"
    bound.write_text("SET active_bound = 2 + interactions\n")
    with gem.open(memory_location(tmp_path), clock=clock, engine=ENGINE, policies=[str(bound)]) as mem:
        a, b = mem.scope("a"), mem.scope("b")
        for i in range(6):
            a.retrieve("x")                            # a's n grows, b's does not
        b.ingest([gem.Fact("T", f"f{i}", i) for i in range(3)])   # b's n=1: bound 3
        b.ingest([gem.Fact("U", f"f{i}", i) for i in range(2)])   # n=2: bound 4, one hidden
        assert b.stats()["interactions"] == 2 and b.stats()["active_fields"] == 4
        assert b.stats()["fields"]["hidden"] == 1                  # (with a's n, nothing would be)
        assert a.stats()["interactions"] == 6
        assert mem.audit(full=True).ok


def test_policies_are_global_and_can_read_the_scope(tmp_path, clock):
    guard = tmp_path / "guard.policy"
    guard.write_text('POLICY sandbox-is-read-only ON commit WHEN scope = "sandbox" AND op = "ingest" '
                     'DO reject("the sandbox scope is read-only")\n')
    with gem.open(memory_location(tmp_path), clock=clock, engine=ENGINE, policies=[str(guard)]) as mem:
        mem.scope("work").ingest(gem.Fact("A", "x", 1))
        with pytest.raises(gem.TransitionRejected, match="read-only"):
            mem.scope("sandbox").ingest(gem.Fact("A", "x", 1))


def test_scopes_survive_reopening_and_a_rebuild(tmp_path, clock):
    path = memory_location(tmp_path)
    with gem.open(path, clock=clock, engine=ENGINE) as mem:
        for name in ("a", "b"):
            mem.scope(name).ingest([gem.Fact("Shared Title", "v", name), gem.Fact(f"Only {name}", "v", 1)])
        mem.scope("b").retrieve("shared title")
    with gem.open(path, clock=clock, engine=ENGINE) as mem:
        assert mem.scopes() == ["a", "b", "default"]
        assert mem.scope("a").inspect("Shared Title").fields["v"].value == "a"
        assert mem.scope("b").ingest(gem.Fact("New", "v", 1)).created_topic_ids == ["b:t3"]
        assert derived_disagreements(mem) == []


# ---------------------------------------------------------------------- no leakage, as a property
TITLES = ["Website Redesign", "Budget", "Launch Plan"]
FIELDS = ["deadline", "owner"]
VALUES = ["March 15", "April 20", "Alice", "Bob", "launch", "deadline budget"]

b_step = st.one_of(
    st.tuples(st.just("ingest"), st.sampled_from(TITLES), st.sampled_from(FIELDS), st.sampled_from(VALUES)),
    st.tuples(st.just("text"), st.sampled_from(["deadline", "budget owner", "launch", "alice"])),
    st.tuples(st.just("topic"), st.sampled_from(TITLES)),
    st.tuples(st.just("advance"), st.integers(1, 40)),
    st.tuples(st.just("forget")),
    st.tuples(st.just("revise")),
)
a_step = st.one_of(
    st.tuples(st.just("ingest"), st.sampled_from(TITLES + ["Deadline Budget Launch", "Alice"]),
              st.sampled_from(FIELDS + ["deadline budget"]), st.sampled_from(VALUES)),
    st.tuples(st.just("text"), st.sampled_from(["deadline", "budget", "alice launch"])),
    st.tuples(st.just("topic"), st.sampled_from(TITLES)),
    st.tuples(st.just("forget")),
    st.tuples(st.just("link"), st.sampled_from(TITLES), st.sampled_from(TITLES)),
)


def _without_positions(value):
    """What a scope's caller sees, minus transition numbers (positions in the one global log)."""
    if isinstance(value, dict):
        return {k: _without_positions(v) for k, v in value.items() if k != "transition"}
    if isinstance(value, list):
        return [_without_positions(v) for v in value]
    return value


def _do(mem: gem.Memory, clock: Clock, step: tuple) -> object:
    kind = step[0]
    try:
        if kind == "ingest":
            return mem.ingest(gem.Fact(step[1], step[2], step[3])).model_dump(mode="json")
        if kind == "text":
            return mem.retrieve(step[1], k=3).model_dump(mode="json")
        if kind == "topic":
            return mem.retrieve(topic=step[1]).model_dump(mode="json")
        if kind == "advance":
            clock.advance(days=step[1])
            return None
        if kind == "forget":
            return mem.forget()
        if kind == "revise":
            return mem.revise()
        if kind == "link":
            return mem.link(step[1], step[2]) if step[1] != step[2] else None
    except gem.GemError as exc:
        return f"{type(exc).__name__}: {exc}"
    raise AssertionError(kind)


def _run(b_steps, a_bursts) -> list:
    # A directory per example, removed with it: hypothesis runs many examples per test, and
    # left behind they filled the disk of a machine that runs the suite often.
    clock = Clock(datetime(2026, 3, 2, 9, tzinfo=timezone.utc))
    seen = []
    with tempfile.TemporaryDirectory(prefix="gem-leak-") as d, \
            gem.open(memory_location(d), clock=clock, engine=ENGINE) as mem:
        a, b = mem.scope("a"), mem.scope("b")
        for i, step in enumerate(b_steps):
            for other in a_bursts.get(i, ()):
                _do(a, clock, other) if other[0] != "advance" else None
            seen.append(_without_positions(_do(b, clock, step)))
            seen.append(_without_positions({"inspect": [(v.model_dump(mode="json") if v else None)
                                                        for v in map(b.inspect, TITLES)],
                                            "stats": {k: v for k, v in b.stats().items()}}))
        assert mem.audit(full=True).ok
    return seen


@pytest.mark.slow
@settings(max_examples=int(os.environ.get("GEM_LEAK_EXAMPLES", "12")), deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(b_steps=st.lists(b_step, min_size=1, max_size=10),
       a_bursts=st.dictionaries(st.integers(0, 9), st.lists(a_step, min_size=1, max_size=4), max_size=5))
def test_what_a_scope_sees_does_not_depend_on_another_scope(b_steps, a_bursts):
    alone = _run(b_steps, {})
    beside = _run(b_steps, a_bursts)
    assert beside == alone


def test_a_ranking_never_depends_on_another_scopes_words(tmp_path, clock):
    """Document frequencies are per scope: flooding A with a word does not make it rarer or
    commoner in B, so B's scores and order are exactly what they were."""
    def scores(flood: bool) -> list:
        with gem.open(memory_location(tmp_path, f"db-{flood}"), clock=Clock(clock.now), engine=ENGINE) as mem:
            b = mem.scope("b")
            b.ingest([gem.Fact("Budget", "note", "quarterly budget review"),
                      gem.Fact("Roadmap", "note", "quarterly roadmap and budget"),
                      gem.Fact("Hiring", "note", "hiring plan")])
            if flood:
                mem.scope("a").ingest([gem.Fact(f"Budget {i}", "note", "budget budget budget")
                                       for i in range(50)])
            return [(t.title, t.score) for t in b.retrieve("budget review", k=3).topics]
    assert scores(True) == scores(False)
