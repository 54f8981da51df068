"""Revision and forgetting: each repair, each ladder level and its recovery, the Figure 1
failure modes, C5 over a long stream, and the scheduler (issue: Revision and forgetting)."""
from __future__ import annotations

import time
import pytest

import gem
from conftest import ENGINE, T0
from servers import HANG


class ExactOnly:
    """A resolver with the exact-title tier only, to make duplicate topics on purpose."""

    def resolve(self, name, topics):
        return topics.exact(name)


def policy_file(tmp_path, extra: str, name: str = "test.policy") -> str:
    path = tmp_path / name
    path.write_text(extra)
    return str(path)


# ---------------------------------------------------------------------- merge
def test_duplicate_topics_merge_losslessly(tmp_path, clock):
    with gem.open(tmp_path / "db", clock=clock, engine=ENGINE, resolver=ExactOnly()) as mem:
        mem.ingest([gem.Fact("Website Redesign", "deadline", "March 15", at=T0, source="a"),
                    gem.Fact("Launch", "date", "March 20")])
        clock.advance(days=1)
        mem.ingest([gem.Fact("website redesign", "deadline", "April 20", at=clock.now, source="b"),
                    gem.Fact("website redesign", "owner", "Alice", source="b")])
        first, second = [gem.TopicId(t) for t in mem._engine.derived.scope("default").topics.ids
                         if mem.inspect(gem.TopicId(t)).title.lower() == "website redesign"]
        mem.link(second, "Launch")
        entries_before = mem.stats()["entries"]
        sources_before = sorted(h.provenance.source for t in (first, second)
                                for f in mem.inspect(t).fields
                                for h in mem.history(t, f))
        report = mem.revise()
        assert report["merged_ids"] == [(first, second)]
        assert report["merged"] == [("Website Redesign", "website redesign")]
        merged = mem.inspect(first)
        assert merged.status == "active" and "website redesign" in merged.aliases
        assert set(merged.fields) == {"deadline", "owner"}
        history = mem.history(first, "deadline")
        assert [(h.value, h.status) for h in history] == [("March 15", "superseded"),
                                                          ("April 20", "current")]
        assert mem.stats()["entries"] == entries_before
        assert sorted(h.provenance.source for f in merged.fields
                      for h in mem.history(first, f)) == sources_before
        away = mem.inspect(second)
        assert away.status == "archived"          # recoverable, with lineage
        assert mem.link(first, "Launch") is False  # the edge was re-pointed to the survivor
        assert mem.audit().ok


# ---------------------------------------------------------------------- conflicts
def test_unsettled_conflict_is_contested_and_retrieval_shows_both(tmp_path, clock):
    with gem.open(tmp_path / "db", clock=clock, engine=ENGINE) as mem:
        mem.ingest([gem.Fact("Budget", "amount", 100, at=T0, source="finance", confidence=0.9),
                    gem.Fact("Budget", "amount", 120, at=T0, source="sales", confidence=0.9)])
        mem.revise()
        view = mem.inspect("Budget", "amount")
        assert view.contested
        r = mem.retrieve(topic="Budget")
        candidates = r.topics[0].fields["amount"].candidates
        assert {c.value for c in candidates} == {100, 120}
        assert all(-1.0 <= c.reliability <= 1.0 for c in candidates)
        assert mem.audit().ok


def test_a_reliable_value_settles_the_conflict(tmp_path, clock):
    with gem.open(tmp_path / "db", clock=clock, engine=ENGINE) as mem:
        mem.ingest(gem.Fact("Budget", "amount", 100, at=T0, source="finance"))
        for source in ("cfo", "controller", "audit"):
            mem.ingest(gem.Fact("Budget", "amount", 120, at=T0, source=source))
        mem.ingest(gem.Fact("Budget", "amount", 100, at=T0, source="sales", confidence=0.2))
        mem.revise()
        assert mem.inspect("Budget", "amount").value == 120
        assert not mem.inspect("Budget", "amount").contested


# ---------------------------------------------------------------------- dependency repair
def test_revision_leaves_flags_open_until_something_handles_them(mem, clock):
    mem.ingest([gem.Fact("Website Redesign", "deadline", "March 15"),
                gem.Fact("Launch Milestones", "launch", "March 20")])
    mem.link("Website Redesign", "Launch Milestones")
    clock.advance(days=1)
    mem.ingest(gem.Fact("Website Redesign", "deadline", "April 20"))
    seq = mem.stats()["transitions"]
    report = mem.revise()
    launch = mem.inspect("Launch Milestones").id
    assert report["flags_evaluated"] == [] and report["flags_open_ids"] == [launch]
    assert report["flags_open"] == ["Launch Milestones"]
    assert mem.stats()["transitions"] == seq            # nothing could handle them: no transition
    (pending,) = mem.pending_revisions()
    assert (pending.title, pending.values) == ("Launch Milestones", {"launch": "March 20"})
    assert pending.origins == {"Website Redesign": {"deadline": "April 20"}}
    assert pending.flags[0].evidence["updated_field"] == "deadline"


def test_revision_asks_the_reviser_along_extension_edges_only(tmp_path, clock):
    asked = []

    def reviser(revision):
        asked.append(revision.title)
        return []  # "its values still hold": handled, its flags are cleared

    mem = gem.open(tmp_path / "db", clock=clock, engine=ENGINE, reviser=reviser)
    mem.ingest([gem.Fact("Website Redesign", "deadline", "March 15"),
                gem.Fact("Launch Milestones", "launch", "March 20"),
                gem.Fact("Press Release", "date", "March 22"),
                gem.Fact("Brand Colors", "palette", "ocean")])
    mem.link("Website Redesign", "Launch Milestones")
    mem.link("Launch Milestones", "Press Release")
    mem.link("Website Redesign", "Brand Colors", kind="association")
    clock.advance(days=1)
    mem.ingest(gem.Fact("Website Redesign", "deadline", "April 20"))
    assert len(mem.inspect("Launch Milestones").flags) == 1
    assert mem.inspect("Press Release").flags == [] and mem.inspect("Brand Colors").flags == []
    report = mem.revise()
    launch = mem.inspect("Launch Milestones").id
    assert report["flags_evaluated_ids"] == [launch] and asked == ["Launch Milestones"]
    assert report["flags_cleared"] == [("Launch Milestones", "reviser")]
    assert report["flags_cleared_ids"] == [(launch, "reviser")]
    assert mem.inspect("Launch Milestones").flags == []
    assert mem.revise()["flags_evaluated"] == []
    assert mem.audit().ok
    mem.close()


def test_promotion_moves_fields_into_a_new_linked_topic(tmp_path, clock):
    extra = """
POLICY alice-splits-out
ON field_created
WHEN field.name = "alice email"
DO promote(topic, ["alice role", "alice email"], "Alice")
"""
    with gem.open(tmp_path / "db", clock=clock, engine=ENGINE,
                  policies=[policy_file(tmp_path, extra)]) as mem:
        mem.ingest([gem.Fact("Website Redesign", "deadline", "March 15"),
                    gem.Fact("Website Redesign", "alice role", "designer")])
        mem.ingest(gem.Fact("Website Redesign", "alice email", "alice@example.com"))
        alice = mem.inspect("Alice")
        assert alice is not None and set(alice.fields) == {"alice role", "alice email"}
        assert mem.history("Alice", "alice role")[0].value == "designer"
        assert set(mem.retrieve(topic="Website Redesign").topics[0].fields) == {"deadline"}
        clock.advance(days=1)
        r = mem.ingest(gem.Fact("Website Redesign", "deadline", "April 20"))
        assert alice.id in r.flagged_ids and "Alice" in r.flagged  # promoted topics extend their origin
        assert mem.audit().ok


# ---------------------------------------------------------------------- forgetting ladder
LADDER = """
POLICY test-compress
ON tick
WHEN EXISTS f IN active_fields WHERE f.salience < 0.5 AND f.history_length > 1
DO compress(f)

POLICY test-hide
ON tick
WHEN EXISTS f IN active_fields WHERE f.salience < 0.2
DO hide(f)

POLICY test-archive
ON tick
WHEN EXISTS t IN active_topics WHERE t.salience < 0.05
DO archive(t)
"""


def test_each_ladder_level_and_its_recovery(tmp_path, clock):
    with gem.open(tmp_path / "db", clock=clock, engine=ENGINE,
                  policies=[policy_file(tmp_path, LADDER)]) as mem:
        mem.ingest([gem.Fact("Website Redesign", "deadline", "March 15"),
                    gem.Fact("Lunch", "preferences", "sushi")])
        clock.advance(hours=1)
        mem.ingest(gem.Fact("Website Redesign", "deadline", "April 20"))
        clock.advance(days=40)  # one half-life and more: everything faded below 0.5
        mem.forget()
        deadline = mem.inspect("Website Redesign", "deadline")
        assert deadline.status == "compressed" and deadline.value == "April 20"
        assert "compressed" in deadline.summary
        history = mem.history("Website Redesign", "deadline")
        assert [(h.value, h.active) for h in history] == [("March 15", False), ("April 20", True)]
        assert mem.retrieve(topic="Website Redesign", history=True).topics[0] \
            .fields["deadline"].history[0].value == "April 20"
        clock.advance(days=60)
        mem.forget()
        assert mem.inspect("Lunch", "preferences").status == "hidden"
        clock.advance(days=120)
        mem.forget()
        assert mem.inspect("Lunch").status == "archived"
        assert mem.retrieve("sushi restaurant downtown tonight").topics == []  # a weak cue
        assert mem.restore("Lunch", "preferences") is True
        assert mem.inspect("Lunch").status == "active"
        assert mem.inspect("Lunch", "preferences").status == "active"
        assert mem.restore("Website Redesign", "deadline") is True
        assert all(h.active for h in mem.history("Website Redesign", "deadline"))
        with pytest.raises(gem.UnknownUnit):
            mem.restore("Nothing")
        assert mem.audit().ok


# ---------------------------------------------------------------------- Figure 1
def test_figure_1_failure_modes(tmp_path, clock):
    bound = "SET active_bound = 4\n"
    with gem.open(tmp_path / "db", clock=clock, engine=ENGINE,
                  policies=[policy_file(tmp_path, LADDER + bound)]) as mem:
        mem.ingest([gem.Fact("Website Redesign", "deadline", "March 15"),
                    gem.Fact("Website Redesign", "team", "Alice, Bob"),
                    gem.Fact("Lunch", "preferences", "Discussed lunch preferences")])
        clock.advance(days=7)
        # (1) re-explanation: no duplicate entry
        r = mem.ingest(gem.Fact("website redesign", "deadline", "March 15"))
        assert r.new_values == [] and len(mem.history("Website Redesign", "deadline")) == 1
        # (2) the update: April 20 current, March 15 kept as history
        mem.ingest(gem.Fact("Website Redesign", "deadline", "April 20"))
        saliences = []
        for week in range(3):
            clock.advance(days=7)
            answer = mem.retrieve("What is the deadline of the Website Redesign?")
            assert answer.value("Website Redesign", "deadline") == "April 20"
            saliences.append(answer.topics[0].fields["deadline"].salience)
        # (4) each weekly query raised the deadline's salience above its decayed value
        assert saliences == sorted(saliences)
        # (3) capacity pressure: more facts arrive; the unqueried lunch field goes first
        mem.ingest([gem.Fact("Quarterly Report", "due", "June 1"),
                    gem.Fact("Quarterly Report", "owner", "Carol")])
        assert mem.inspect("Lunch", "preferences").status == "hidden"
        assert mem.inspect("Website Redesign", "deadline").status == "active"
        assert mem.retrieve(topic="Website Redesign").value("Website Redesign", "deadline") == "April 20"
        history = [h.value for h in mem.history("Website Redesign", "deadline")]
        assert history == ["March 15", "April 20"]
        assert mem.audit().ok


@pytest.mark.slow
def test_c5_holds_over_a_long_ingest_stream(tmp_path, clock):
    bound = "SET active_bound = 20 + interactions / 10\n"
    with gem.open(tmp_path / "db", clock=clock, engine=ENGINE,
                  policies=[policy_file(tmp_path, bound)]) as mem:
        for i in range(150):
            clock.advance(minutes=30)
            mem.ingest(gem.Fact(f"Topic {i % 40}", f"field {i % 7}", i))
            if i % 10 == 0:
                mem.retrieve(topic="Topic 1")
            stats = mem.stats()
            assert stats["active_fields"] <= stats["active_bound"]
        assert mem.inspect("Topic 1", "field 1").status == "active"  # queried: protected
        assert mem.stats()["fields"].get("hidden", 0) > 0             # attenuated, not deleted
        assert mem.audit().ok


# ---------------------------------------------------------------------- scheduler
def test_scheduled_maintenance_runs_ticks_and_stops_cleanly(db_path, clock):
    with gem.open(db_path, clock=clock, engine=ENGINE) as mem:
        mem.ingest(gem.Fact("Website Redesign", "deadline", "March 15"))
        mem.start_maintenance(every=0.05)
        with pytest.raises(gem.GemError):
            mem.start_maintenance(every=1)
        deadline = time.monotonic() + HANG  # only a guard against a hang: a slow machine waits
        while mem.maintenance_runs < 2 and time.monotonic() < deadline:
            time.sleep(0.02)
        mem.ingest(gem.Fact("Website Redesign", "owner", "Alice"))  # interleaves safely
        mem.stop_maintenance()
        runs = mem.maintenance_runs
        assert runs >= 2 and mem.maintenance_failures == 0
        time.sleep(0.2)
        assert mem.maintenance_runs == runs
        assert any(x["op"] == "forget" and x["event"] == "tick" for x in mem.transitions())
        assert mem.audit().ok
    with pytest.raises(gem.InvalidInput):
        with gem.open(db_path, clock=clock, engine=ENGINE) as mem:
            mem.start_maintenance(every=0)


def test_explain_gives_the_evidence_chain(mem, clock):
    mem.ingest(gem.Fact("Website Redesign", "deadline", "March 15", source="chat:1"))
    clock.advance(days=1)
    mem.ingest(gem.Fact("Website Redesign", "deadline", "April 20", source="chat:2", confidence=0.8))
    mem.ingest(gem.Fact("Website Redesign", "deadline", "April 20", source="email", confidence=0.9))
    e = mem.explain("Website Redesign", "deadline")
    assert e.value == "April 20"
    assert [h.provenance.source for h in e.entries] == ["chat:1", "chat:2"]
    assert e.entries[0].superseded_by == e.entries[1].id
    assert [o.provenance.source for o in e.entries[1].observations] == ["email"]
    assert 0 < e.reliability <= 1 and abs(sum(e.states.values()) - 1) < 1e-9
    with pytest.raises(gem.UnknownUnit):
        mem.explain("Website Redesign", "nope")


# ---------------------------------------------------------------------- progress
def test_long_operations_report_progress_in_order(tmp_path, clock):
    steps: list[tuple[str, int, int]] = []
    with gem.open(tmp_path / "db", clock=clock, engine=ENGINE) as mem:
        facts = [gem.Fact(f"Topic {i}", f"field {j}", i * j) for i in range(150) for j in range(10)]
        mem.ingest(facts, progress=lambda *a: steps.append(a))
        stages = [s for s, _, _ in steps]
        assert stages[0] == "ingest: operator" and stages[-1] == "ingest: committed"
        assert "ingest: flush" in stages
        staged = [d for s, d, _ in steps if s != "ingest: policy actions"]
        assert staged == list(range(len(staged)))  # one report per stage, in order

        steps.clear()
        clock.advance(days=400)  # every field faded: the tick policies see each of them
        report = mem.maintain(progress=lambda *a: steps.append(a))
        assert report["forget"]["attenuated"]
        forget = [s for s in steps if s[0].startswith("forget: ")]
        actions = [s for s in forget if s[0] == "forget: policy actions"]
        assert [done for _, done, _ in actions] == [1000 * (i + 1) for i in range(len(actions))]
        assert actions and all(total == 0 for _, _, total in actions)  # not known in advance
        assert forget[-1] == ("forget: committed", forget[-1][2], forget[-1][2])
        revise = [s for s in steps if s[0].startswith("revise: ")]
        assert revise and revise[-1][1] == revise[-1][2]  # the last repair reports it finished
        assert steps.index(forget[-1]) < steps.index(revise[0])
        assert mem.audit().ok


def test_a_progress_that_is_not_callable_changes_nothing(mem):
    before = mem.stats()
    with pytest.raises(gem.InvalidInput, match="progress"):
        mem.ingest(gem.Fact("A", "b", 1), progress="bar")
    with pytest.raises(gem.InvalidInput, match="progress"):
        mem.maintain(progress=5)
    assert mem.stats() == before


def test_a_records_attenuations_read_in_both_forms():
    """Records list attenuations by level ({level: [unit, ...]}); records written before list
    [unit, level] pairs. Both read as (unit, level) in ladder order: a unit compressed then
    hidden in one pass reads so, whatever order the levels were stored in."""
    from gem.operators.forget import attenuations
    pairs = [("t1/a", "compressed"), ("t2/b", "compressed"), ("t1/a", "hidden"), ("ep3", "hidden"),
             ("t2", "archived")]
    grouped = {"archived": ["t2"], "hidden": ["t1/a", "ep3"], "compressed": ["t1/a", "t2/b"]}
    assert attenuations({"attenuated": grouped}) == pairs
    assert attenuations({"attenuated": [list(p) for p in pairs]}) == pairs
    assert attenuations({}) == []
