"""A free-text query looks up its candidates' statuses and salience all at once
(`ScopeState.unit_states`): it answers as the lookups one unit at a time do, on a memory as it
was written and on one reopened from its snapshot, whose tables keep their ids packed."""
from __future__ import annotations

from datetime import timedelta

import pytest

import gem
from conftest import ENGINE
from gem.operators.forget import archive_topic, hide_field


def _states_agree(mem: gem.Memory, clock) -> set[str | None]:
    derived = mem._engine.derived.scope(mem.scope_name)
    fields = [f"{mem.inspect(f'Topic {i}').id}/{name}" for i in range(6)
              for name in ("deadline", "owner")]
    episodes = [e.id for e in mem.episodes().episodes]
    absent = [fields[0] + "x", fields[0].split("/")[0] + "9/deadline", episodes[0] + "9"]
    keys = [*fields[::-1], *absent, *episodes, fields[3]]  # a candidate may come twice
    half_life = timedelta(days=9)
    got = derived.unit_states(keys, clock.now, half_life)
    expect = [(*derived.unit_status(k), derived.unit_salience(k, clock.now, half_life))
              for k in keys]
    assert got == expect
    return {s for status, topic_status, _ in got for s in (status, topic_status)}


@pytest.mark.parametrize("reopen", [False, True])
def test_unit_states_at_once_answer_as_one_unit_at_a_time(db_path, clock, reopen):
    mem = gem.open(db_path, clock=clock, engine=ENGINE)
    try:
        mem.ingest([gem.Fact(f"Topic {i}", name, f"{name} {i}") for i in range(6)
                    for name in ("deadline", "owner")])
        mem.ingest([gem.Episode(f"we talked about topic {i}", speaker="Ana") for i in range(3)])
        engine = mem._engine
        engine.run("forget", lambda t: hide_field(t, mem.inspect("Topic 1").id + "/owner"))
        engine.run("forget", lambda t: archive_topic(t, mem.inspect("Topic 2").id))
        clock.advance(days=3)
        mem.retrieve("deadline 4", k=2)  # some units more salient than others
        clock.advance(days=1)
        if reopen:
            mem.close()
            mem = gem.open(db_path, clock=clock, engine=ENGINE)
        statuses = _states_agree(mem, clock)
        tables = mem._engine.derived.scope(mem.scope_name)
        assert tables.fields._keys.packed_now == (reopen and ENGINE != "falkordb")
        assert {"active", "hidden", "archived", None} <= statuses
    finally:
        mem.close()
