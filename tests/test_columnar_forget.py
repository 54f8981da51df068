"""A forgetting pass walks its units in id order from a kept row order (SalienceTable.rows_by_id),
and the units it moves in bulk live in `Transition.moved` alone: the flush writes them by status,
together with any salience written behind for them (gem/pipeline.py `write`)."""
from __future__ import annotations

import os
import random

import pytest

import gem
from conftest import ENGINE, Clock
from gem.derived.state import DerivedState
from gem.derived.tables import FIELD_STATUS, SalienceTable
from gem.testing.consistency import cache_disagreements, derived_disagreements
from test_bulk_forget import per_unit, stored


def test_rows_by_id_stay_in_id_order_as_rows_are_added_and_emptied():
    rng = random.Random(7)
    table = SalienceTable(FIELD_STATUS)
    ids = [f"t{rng.randrange(500)}/field {i}" for i in range(300)]
    for key in ids:
        table.put(key, 1.0, None, "active")

    def live_order() -> list[str]:
        return [table.ids[r] for r in table.rows_by_id().tolist() if table.ids[r]]

    assert live_order() == sorted(table.row_of)
    for key in [f"t{rng.randrange(500)}/late {i}" for i in range(50)]:  # merged in, not resorted
        table.put(key, 1.0, None, "active")
    for key in rng.sample(sorted(table.row_of), 20):
        table.remove(key)
    assert live_order() == sorted(table.row_of)
    keep = table.mask(("active",))
    keep[::3] = False
    assert table.ids_where(keep, by_id=True) == sorted(table.ids[r] for r in keep.nonzero()[0])
    assert table.ids_where(keep) == [table.ids[r] for r in keep.nonzero()[0]]


def build(path: str, clock: Clock) -> None:
    """Topics that all fade by the pass, one field of every third re-stated (a fold)."""
    with gem.open(path, clock=clock, engine=ENGINE) as mem:
        mem.ingest([gem.Fact(f"Project {i}", f"field {j}", f"value {i}.{j}")
                    for i in range(12) for j in range(3)])
        mem.ingest([gem.Fact(f"Project {i}", "field 0", f"changed {i}") for i in range(0, 12, 3)])


@pytest.mark.skipif(ENGINE == "falkordb", reason="two embedded memories built side by side")
def test_moved_units_whose_salience_is_written_behind_get_both_in_the_store(tmp_path, monkeypatch):
    out = {}
    for mode in ("bulk", "per unit"):
        path = os.path.join(str(tmp_path), mode.replace(" ", "_"))
        clock = Clock()
        build(path, clock)
        with gem.open(path, clock=clock, engine=ENGINE) as mem:
            if mode == "per unit":
                per_unit(mem)
            clock.advance(days=2)
            for i in range(0, 12, 2):  # their salience pending, to be written behind
                mem.retrieve(topic=f"Project {i}")
            clock.advance(days=400)
            pending = set(mem._engine.derived.pending_salience)
            with monkeypatch.context() as m:
                m.setattr(DerivedState, "WRITE_BEHIND_UNITS", 1)  # this pass writes them
                with mem._engine.store.lock:
                    report = mem.forget()
            moved = {u for u, _ in report["level_ids"]}
            assert pending & moved and not mem._engine.derived.pending_salience
            assert cache_disagreements(mem) == [] and derived_disagreements(mem) == []
            assert mem.audit(full=True).ok
            record = mem.transitions(since=report["transition"] - 1)[-1]
            out[mode] = (report["level_ids"], {k: record[k] for k in (
                "units", "policies", "detail", "writes", "salience")}, stored(mem))
    assert out["bulk"] == out["per unit"]
