"""A forgetting pass makes the ladder's status moves in bulk (gem/operators/status_moves.py):
no row of a unit moved by its status alone is read, and the pass must still leave exactly the
store, log, cache, derived state and audit that evaluating every policy per unit leaves; a
pass a condition refuses leaves nothing of its bulk moves behind."""
from __future__ import annotations

import dataclasses
import json
import os

import pytest

import gem
from conftest import ENGINE, T0, Clock, snapshot
from gem.operators.status_moves import STATUS_MOVES
from gem.pipeline import DEFAULT, Stage
from gem.policy.vectorise import STATUS_STEPS
from gem.store import queries
from gem.testing.consistency import cache_disagreements, derived_disagreements

TOPICS, FIELDS = 30, 4


def build(path: str, clock: Clock) -> None:
    """Topics that fade to each level by the pass 200 days on: the first third archived, the
    second hidden, the last compressed; a field of every third topic re-stated (a history to
    fold), a few read again (still active), episodes."""
    with gem.open(path, clock=clock, engine=ENGINE) as mem:
        third = TOPICS // 3
        for start, at in ((0, 0), (third, 150), (2 * third, 170)):
            clock.advance(days=at - (clock.now - T0).days)
            mem.ingest([gem.Fact(f"Project {i}", f"field {j}", f"value {i}.{j}")
                        for i in range(start, start + third) for j in range(FIELDS)])
            mem.ingest([gem.Fact(f"Project {i}", "field 0", f"changed {i}")
                        for i in range(start, start + third, 3)])
        for k in range(6):
            mem.ingest(gem.Episode(text=f"We talked about project {k} on call {k}.", speaker="ana"))
        clock.advance(days=10)
        for i in range(2 * third, TOPICS, 4):
            mem.retrieve(topic=f"Project {i}")
        clock.advance(days=20)


def per_unit(mem: gem.Memory) -> None:
    """Take the plans away: every tick policy is evaluated per unit, its actions through act."""
    shared = mem._engine.shared
    ps = shared.policies
    shared.install(dataclasses.replace(
        ps, policies=tuple(dataclasses.replace(p, plan=None) for p in ps.policies)))


def stored(mem: gem.Memory) -> tuple:
    with mem._engine.store.reading() as tx:
        rows = sorted(tuple(r) for table in ("Topic", "Field", "Episode") for r in tx.run(
            f"MATCH (n:{table}) RETURN n.id, n.status, n.strength, n.last_access"))
        fields = sorted(tuple(r) for r in tx.run("MATCH (f:Field) RETURN f.id, f.summary"))
        entries = sorted(tuple(r) for r in tx.run("MATCH (e:Entry) RETURN e.id, e.active"))
    return rows, fields, entries


@pytest.mark.skipif(ENGINE == "falkordb", reason="two embedded memories built side by side")
@pytest.mark.parametrize("scan", [False, True])
def test_a_pass_over_many_units_leaves_what_per_unit_evaluation_leaves(tmp_path, monkeypatch, scan):
    """`scan`: the faded histories of many fields are read after a scan for the fields that
    hold any (queries.read_faded_history; a pass asks for thousands)."""
    if scan:
        monkeypatch.setattr(queries.reads, "FADED_SCAN_KEYS", 1)
    out = {}
    for mode in ("bulk", "per unit"):
        path = os.path.join(str(tmp_path), mode.replace(" ", "_"))
        clock = Clock()
        build(path, clock)
        with gem.open(path, clock=clock, engine=ENGINE) as mem:  # nothing cached yet
            if mode == "per unit":
                per_unit(mem)
            # Holding the store's lock keeps the deriving worker (gem/derived/pending.py) from
            # reading the moved rows back before the cache is looked at: those reads come after.
            with mem._engine.store.lock:
                report = mem.forget()
                cached = set(mem._engine.cache.rows["Field"])
            record = mem.transitions(since=report["transition"] - 1)[-1]
            folded = set(record["writes"]) & {f"t{i + 1}/field 0" for i in range(TOPICS)}
            moved = {u for u, level in report["level_ids"] if "/" in u} - folded
            assert cache_disagreements(mem) == [] and derived_disagreements(mem) == []
            assert mem.audit(full=True).ok
            out[mode] = (report["level_ids"], {k: record[k] for k in (
                "units", "policies", "detail", "writes", "salience")}, stored(mem))
            # The rows of fields moved by their status alone were never read in bulk.
            assert (cached & moved == set()) if mode == "bulk" else moved <= cached
    levels = {level for _, level in out["bulk"][0]}
    assert {"compressed", "hidden", "archived"} <= levels and folded and moved
    assert out["bulk"] == out["per unit"]


def test_a_pass_a_condition_refuses_leaves_nothing_of_its_bulk_moves(tmp_path):
    """The proposal is broken after the policies moved the units in bulk (an entry loses its
    source: C4), so the conditions refuse the whole pass; C5's count is taken on the set."""
    clock = Clock()
    path = os.path.join(str(tmp_path), "db")
    build(path, clock)
    seen = {}

    def break_c4(t) -> None:
        seen["moved"] = sum(len(m) for m in t.moved.values())
        seen["active"] = t.active_field_count()
        t.update("Entry", "e1", source="")
        t.touched.entries["e1"] = None

    with gem.open(path, clock=clock, engine=ENGINE) as mem:
        before = snapshot(mem)
        mem._engine.pipeline = DEFAULT.insert_after("commit_policies", Stage("break", lambda t, e: break_c4(t)))
        with pytest.raises(gem.TransitionRejected) as refused:
            mem.forget()
        assert refused.value.condition == "C4" and seen["moved"] > 0
        assert snapshot(mem) == before
        mem._engine.pipeline = DEFAULT
        report = mem.forget()
        assert report["level_ids"] and mem.audit(full=True).ok
        # The count of active fields the conditions took, before the commit, is the count after.
        assert seen["active"] == mem._engine.derived.scope("default").active_field_count()


def test_the_bulk_steps_are_the_steps_explain_names():
    assert set(STATUS_MOVES) == STATUS_STEPS


def test_a_policy_listening_to_the_ladder_events_gets_each_move_as_its_event(tmp_path):
    """With a policy ON attenuated the moves run per unit, and that policy sees every one."""
    clock = Clock()
    path = os.path.join(str(tmp_path), "db")
    build(path, clock)
    listen = tmp_path / "listen.policy"
    listen.write_text('POLICY note-level ON attenuated DO annotate(unit, "level", level)\n')
    with gem.open(path, clock=clock, engine=ENGINE, policies=[str(listen)]) as mem:
        report = mem.forget()
        last = {u: level for u, level in report["level_ids"]}  # the last move of each unit
        with mem._engine.store.reading() as tx:
            notes = {k: json.loads(v) for table in ("Topic", "Field", "Episode") for k, v in tx.run(
                f"MATCH (n:{table}) RETURN n.id, n.annotations")}
        assert {"compressed", "hidden", "archived"} <= set(last.values())
        assert {u: notes[u].get("level") for u in last} == last
        assert mem.audit(full=True).ok


@pytest.mark.skipif(ENGINE == "falkordb", reason="counts calls in this process")
def test_a_pass_makes_one_bulk_move_call_per_policy_whatever_folds_between(tmp_path, monkeypatch):
    """Compressions that fold a faded history run per unit; the status moves around them are
    still made by one call per plan, not one per run of units between two folds (a pass at
    20k topics made 38k calls), and the record keeps the per-unit order (test above)."""
    from gem.operators import status_moves
    from gem.state.transition import Transition
    calls = {"move_many": 0, "move_statuses": 0}
    move_many, move_statuses = status_moves.move_many, Transition.move_statuses

    def counted_many(*args, **kwargs):
        calls["move_many"] += 1
        return move_many(*args, **kwargs)

    def counted_statuses(self, *args, **kwargs):
        calls["move_statuses"] += 1
        return move_statuses(self, *args, **kwargs)

    clock = Clock()
    path = os.path.join(str(tmp_path), "db")
    build(path, clock)
    with gem.open(path, clock=clock, engine=ENGINE) as mem:
        plans = sum(1 for p in mem._engine.shared.policies.policies if p.plan is not None)
        monkeypatch.setattr(status_moves, "move_many", counted_many)
        monkeypatch.setattr(Transition, "move_statuses", counted_statuses)
        with mem._engine.store.lock:
            report = mem.forget()
        record = mem.transitions(since=report["transition"] - 1)[-1]
        folded = [u for u in record["writes"] if "/" in u]  # fields hashed: their history folded
        compressed = [u for u, level in report["level_ids"] if level == "compressed" and "/" in u]
        # folds sit between status moves in the order the pass walks the fields
        at = [i for i, u in enumerate(compressed) if u in folded]
        assert len(at) > 1 and at[-1] - at[0] + 1 > len(at)
        assert 0 < calls["move_many"] <= plans and calls["move_statuses"] <= plans
        cache = mem._engine.cache  # the folded rows' renewal costed by what changed in them
        with mem._engine.store.lock:
            assert cache.nbytes == cache.measured()
        assert mem.audit(full=True).ok
