"""The unit layer's documents and valid times, kept by the row of each unit's lexical entry."""
import sys

import numpy as np
import pytest

from gem.derived.tables import UnitIndexes
from gem.derived.unit_columns import UnitColumns
from gem.embed import HashingEmbedder


def test_documents_and_valid_times_follow_each_unit_through_rewrites_and_removals():
    units = UnitIndexes(HashingEmbedder())
    model: dict[str, tuple[str, float]] = {}
    rng = np.random.default_rng(5)
    for step in range(600):
        unit = f"t{int(rng.integers(0, 80))}/f{int(rng.integers(0, 3))}"
        if rng.random() < 0.25:
            units.drop(unit)
            model.pop(unit, None)
        else:
            doc = (f"value {step} of {unit}", float(step) * 1.5)
            units.put(unit, *doc)
            model[unit] = doc
    assert set(units.docs) == set(units.valid) == set(model) == set(units.lexical)
    assert len(units.docs) == len(model)
    for unit, (text, valid) in model.items():
        assert unit in units.docs and units.docs[unit] == text
        assert units.valid[unit] == valid and type(units.valid[unit]) is float
    assert dict(units.valid.items()) == {u: v for u, (_, v) in model.items()}
    assert dict(units.docs.items()) == {u: t for u, (t, _) in model.items()}
    assert "t999/f0" not in units.docs and units.valid.get("t999/f0") is None
    with pytest.raises(KeyError):
        units.docs["t999/f0"]


def test_columns_hold_no_object_per_valid_time():
    units = UnitIndexes(HashingEmbedder())
    for i in range(2000):
        units.put(f"t{i}/f0", f"value {i}", float(i))
    # one float64 a unit (two dicts keyed by unit and a float object each: ~170 bytes)
    assert units.columns.times.nbytes + sys.getsizeof(units.columns.texts) < 2000 * 24


def test_snapshot_columns_must_hold_exactly_the_units_of_the_index():
    units = UnitIndexes(HashingEmbedder())
    for i in range(5):
        units.put(f"t{i}/f0", f"value {i}", float(i))
    ids = [f"t{i}/f0" for i in range(5)]
    fresh = UnitColumns(units.lexical)
    fresh.load(ids[::-1], [f"value {i}" for i in range(5)][::-1], np.arange(5.0)[::-1])
    assert fresh.docs["t3/f0"] == "value 3" and fresh.valid["t3/f0"] == 3.0
    for bad_ids in (ids[:4], [*ids[:4], "t9/f0"], [*ids[:4], ids[0]]):
        with pytest.raises(ValueError):
            UnitColumns(units.lexical).load(bad_ids, ["x"] * len(bad_ids),
                                            np.zeros(len(bad_ids)))
