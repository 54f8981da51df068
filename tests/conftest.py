"""Shared fixtures: a real database in a temp dir, on the engine GEM_TEST_ENGINE names.

kuzu and ladybug cannot both be loaded in one process (they register the same native
types), so a pytest process tests one engine; test_engines.py runs the store-facing
tests again under the other engine in a subprocess.
"""
from __future__ import annotations

import os
from datetime import datetime, timedelta, timezone

import pytest

import gem
from gem.testing.consistency import cache_disagreements, derived_disagreements

ENGINE = os.environ.get("GEM_TEST_ENGINE", "kuzu")
T0 = datetime(2026, 3, 2, 9, 0, tzinfo=timezone.utc)


class Clock:
    def __init__(self, start: datetime = T0) -> None:
        self.now = start
        self.naive = False  # return the same instant without its zone (which gem refuses)

    def __call__(self) -> datetime:
        return self.now.replace(tzinfo=None) if self.naive else self.now

    def advance(self, **delta: float) -> datetime:
        self.now += timedelta(**delta)
        return self.now


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def db_path(tmp_path):
    return str(tmp_path / "memory.db")


@pytest.fixture
def mem(db_path, clock):
    with gem.open(path=db_path, clock=clock, engine=ENGINE) as m:
        yield m


def snapshot(m: gem.Memory) -> dict:
    """Everything observable about a memory, to compare before/after a refused operation."""
    engine = m._engine
    with engine.store.reading() as tx:
        tables = {}
        for table in ("Topic", "Field", "Entry", "Observation", "Flag", "Policy", "Transition", "Meta",
                      "Episode"):
            tables[table] = sorted(map(repr, tx.run(f"MATCH (n:{table}) RETURN n")))
        for rel in ("HAS_FIELD", "HAS_ENTRY", "CORROBORATES", "FLAGS", "EXTENDS",
                    "ASSOCIATES", "DERIVED_FROM"):
            tables[rel] = sorted(map(repr, tx.run(
                f"MATCH (a)-[r:{rel}]->(b) RETURN a.id, b.id")))
    assert cache_disagreements(m) == []
    assert derived_disagreements(m) == []
    # Summaries are derived lazily: what a reader computes from committed state is not a change.
    with engine.store.lock:
        engine.derived.refresh(engine.cache, engine.services.summarizer)
        engine.derived.refresh_units(engine.cache)
    return {"tables": tables, "derived": engine.derived.fingerprint()}
