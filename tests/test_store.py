"""The store adapter: schema, transactions, locking (runs on either engine)."""
from __future__ import annotations

import subprocess
import sys
import textwrap
import threading

import pytest

import gem
from conftest import ENGINE
from gem.store import graph, open_store, queries
from gem.store.schema import SCHEMA_VERSION
from servers import HANG  # a guard against hangs only (tests/servers.py)

# The embedded adapter's own interface; tests/test_falkordb.py tests FalkorDB's write sets.
EMBEDDED = pytest.mark.skipif(ENGINE == "falkordb", reason="the embedded engines' adapter "
                              "(open_store, one writer process per database file)")


@EMBEDDED
def test_schema_creation_is_idempotent(db_path):
    for _ in range(2):
        store = open_store(db_path, ENGINE)
        assert queries.ensure_schema(store) == SCHEMA_VERSION
        with store.reading() as tx:
            assert tx.scalar("MATCH (m:Meta {key: 'schema'}) RETURN m.value") == SCHEMA_VERSION
        store.close()


@pytest.mark.slow
@EMBEDDED
def test_a_database_made_before_a_column_existed_gets_it_at_open(db_path, clock):
    """Columns added to the schema (labels, a retraction's reason, who cleared a flag, the
    entries citing an episode and what contradicts it) are added to an older database when it
    is opened: empty lists and nulls, nothing else moves."""
    with gem.open(db_path, clock=clock, engine=ENGINE) as mem:
        mem.ingest([gem.Fact("A", "x", 1), gem.Episode("A is 1", source="chat", at=clock.now)])
    store = open_store(db_path, ENGINE)
    with store.transaction() as tx:  # what a database of the previous schema looks like
        for table, column in (("Entry", "labels"), ("Entry", "reason"), ("Field", "labels"),
                              ("Flag", "cleared_by"), ("Episode", "cited_by"),
                              ("Episode", "contradicted_by")):
            tx.run(f"ALTER TABLE {table} DROP {column}")
    store.close()
    with gem.open(db_path, clock=clock, engine=ENGINE) as mem:
        assert mem.inspect("A", "x").labels == [] and mem.history("A", "x")[0].reason is None
        assert [e.stale for e in mem.episodes().episodes] == [[]]
        mem.ingest(gem.Fact("A", "x", 2, labels=["pii"]))
        assert mem.inspect("A", "x").labels == ["pii"]
        assert mem.audit(full=True).ok
        mem.compact()  # the added columns survive the export and import of a physical purge
        assert mem.inspect("A", "x").labels == ["pii"] and mem.history("A", "x")[0].reason is None
        assert mem.audit(full=True).ok


@EMBEDDED
def test_transaction_commits_or_rolls_back_whole(db_path):
    store = open_store(db_path, ENGINE)
    queries.ensure_schema(store)
    with store.transaction() as tx:
        tx.run("CREATE (:Meta {key: 'a', value: $v})", {"v": "1"})
    with pytest.raises(gem.StoreError):
        with store.transaction() as tx:
            tx.run("CREATE (:Meta {key: 'b', value: $v})", {"v": "2"})
            tx.run("CREATE (:Meta {key: 'a', value: $v})", {"v": "dup"})  # primary key clash
    with store.reading() as tx:
        keys = sorted(r[0] for r in tx.run("MATCH (m:Meta) RETURN m.key"))
    assert keys == ["a", "schema"]
    store.close()


@EMBEDDED
def test_a_held_engine_error_does_not_keep_a_closed_database_alive(db_path):
    """LadybugDB 0.22: an exception's traceback holds a prepared statement, which kept the
    closed database alive; its shutdown after a reopen overwrote the new database's writes."""
    held = []
    for cycle in range(12):
        store = open_store(db_path, ENGINE)
        queries.ensure_schema(store)
        with store.transaction() as tx:
            tx.run("CREATE (:Meta {key: $k, value: $v})", {"k": f"k{cycle}", "v": f"v{cycle} ✓"})
        with pytest.raises(gem.StoreError) as info:
            with store.reading() as tx:
                tx.run("MATCH (m:Meta {key: $k}) RETURN m.nope", {"k": "k0"})
        held.append(info.value)
        store.close()
        if len(held) > 3:
            held.pop(0)  # freed after the next reopen, as a caller's old error would be
    store = open_store(db_path, ENGINE)
    with store.reading() as tx:
        rows = dict(tx.run("MATCH (m:Meta) WHERE m.key STARTS WITH 'k' RETURN m.key, m.value"))
    store.close()
    assert rows == {f"k{c}": f"v{c} ✓" for c in range(12)}


@EMBEDDED
def test_values_never_enter_query_text(db_path):
    store = open_store(db_path, ENGINE)
    queries.ensure_schema(store)
    nasty = "x'}) DETACH DELETE (n) //"
    with store.transaction() as tx:
        tx.run("CREATE (:Meta {key: $k, value: $v})", {"k": nasty, "v": nasty})
    with store.reading() as tx:
        assert tx.scalar("MATCH (m:Meta {key: $k}) RETURN m.value", {"k": nasty}) == nasty
    store.close()


def test_handles_in_one_process_share_the_database_and_writers_wait(db_path, clock):
    a = gem.open(db_path, clock=clock, engine=ENGINE)
    b = gem.open(db_path, clock=clock, engine=ENGINE)
    errors = []

    def write(m, name):
        try:
            for i in range(10):
                m.ingest(gem.Fact(name, f"f{i}", i))
        except Exception as exc:  # pragma: no cover - the assertion reports it
            errors.append(exc)

    threads = [threading.Thread(target=write, args=(m, n)) for m, n in ((a, "A"), (b, "B"))]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    assert errors == []
    b.close()
    # Engine state was derived per handle; a fresh open sees everything both wrote.
    a.close()
    with gem.open(db_path, clock=clock, engine=ENGINE) as c:
        assert c.stats()["active_fields"] == 20
        assert c.audit().ok


@EMBEDDED
def test_a_second_process_gets_store_locked(db_path, clock):
    with gem.open(db_path, clock=clock, engine=ENGINE):
        code = textwrap.dedent(f"""
            import gem, sys
            try:
                gem.open({db_path!r}, engine={ENGINE!r})
            except gem.StoreLocked as exc:
                print("LOCKED", exc.path)
                sys.exit(0)
            sys.exit(1)
        """)
        done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                              timeout=HANG)
        assert done.returncode == 0, done.stderr
        assert done.stdout.split() == ["LOCKED", db_path]


def test_reopen_keeps_state_policies_and_chain(db_path, clock):
    with gem.open(db_path, clock=clock, engine=ENGINE) as m:
        m.ingest(gem.Fact("Website Redesign", "deadline", "March 15"))
        clock.advance(days=1)
        m.ingest(gem.Fact("Website Redesign", "deadline", "April 20"))
        names = [p.name for p in m.policies.policies]
        seq = m.transitions()[-1]["seq"]
    with gem.open(db_path, clock=clock, engine=ENGINE) as m:
        assert [p.name for p in m.policies.policies] == names
        assert m.retrieve("website redesign deadline").value("Website Redesign", "deadline") == "April 20"
        assert m.transitions()[-1]["seq"] == seq + 1
        assert m.audit().ok


@pytest.mark.skipif(ENGINE != "kuzu", reason="loading kuzu after ladybug would crash the run")
def test_the_two_engines_cannot_share_a_process():
    other = "ladybug" if ENGINE == "kuzu" else "kuzu"
    with pytest.raises(gem.InvalidInput, match="one engine per process"):
        gem.open(engine=other)


def test_unknown_engine_is_invalid_input():
    with pytest.raises(gem.InvalidInput):
        gem.open(engine="sqlite")


@pytest.mark.slow
@EMBEDDED
def test_a_small_max_db_size_lets_more_than_fifteen_databases_open_in_one_process(tmp_path):
    """Each embedded database reserves max_db_size of address space (8 TiB by default, so the
    16th of a process fails to map): with 1 GiB each, 18 are open at once and all work."""
    mems = []
    try:
        for i in range(18):
            mems.append(gem.open(tmp_path / f"db{i}", engine=ENGINE, buffer_pool_size=64 << 20,
                                 max_db_size=1 << 30))
            mems[-1].ingest(gem.Fact("Website Redesign", "owner", f"team {i}"))
        assert [m.inspect("Website Redesign", "owner").value for m in mems] == \
            [f"team {i}" for i in range(18)]
    finally:
        for m in mems:
            m.close()


@EMBEDDED
@pytest.mark.parametrize("sized_pool", [False, True])
def test_the_engine_checkpoints_its_log_at_gems_threshold_unless_the_pool_is_sized(tmp_path,
                                                                                     sized_pool):
    """64 MiB on LadybugDB, where it made update batches at 100k topics 1.4x faster
    (gem/store/graph.py); the engine's own 16 MiB elsewhere and for a pool the caller sized."""
    engine_default = 16 << 20
    options = {"buffer_pool_size": 64 << 20} if sized_pool else {}
    with gem.open(tmp_path / "db", engine=ENGINE, **options) as mem:
        with mem._engine.store.reading() as tx:
            [[value]] = tx.run("CALL current_setting('checkpoint_threshold') RETURN *")
    expected = engine_default if sized_pool else {"ladybug": 64 << 20}.get(ENGINE, engine_default)
    assert int(value) == expected


@EMBEDDED
@pytest.mark.parametrize("asked", [None, 32 << 20])
def test_the_buffer_pool_is_bounded_unless_the_caller_sizes_it(tmp_path, asked):
    """The engine's own default (80% of the RAM) costs 8 bytes per page at open and lets the
    cached pages grow to most of the machine: gem's default is 1 GiB (a quarter of a smaller
    RAM), and the caller's size wins (gem/store/graph.py)."""
    from gem.store.graph import DEFAULT_BUFFER_POOL
    assert DEFAULT_BUFFER_POOL is not None and DEFAULT_BUFFER_POOL <= 1 << 30
    options = {} if asked is None else {"buffer_pool_size": asked}
    with gem.open(tmp_path / "db", engine=ENGINE, **options) as mem:
        mem.ingest(gem.Fact("Website Redesign", "owner", "team"))
        used = mem._engine.store.opened_with.get("buffer_pool_size")
        assert mem.inspect("Website Redesign", "owner").value == "team"
    assert used == (DEFAULT_BUFFER_POOL if asked is None else asked)


@EMBEDDED
@pytest.mark.parametrize("asked", [None, 64 << 20])
def test_compact_opens_the_new_database_with_the_same_buffer_pool(tmp_path, monkeypatch, asked):
    """compact() imports into a new database and reopens it: both with the pool the memory
    was opened with."""
    options = {} if asked is None else {"buffer_pool_size": asked}
    with gem.open(tmp_path / "db", engine=ENGINE, **options) as mem:
        mem.ingest(gem.Fact("Website Redesign", "owner", "team"))
        module = mem._engine.store._shared.module
        opened: list[dict] = []

        class Recording(module.Database):
            def __init__(self, path, **kwargs):
                opened.append(kwargs)
                super().__init__(path, **kwargs)

        monkeypatch.setattr(module, "Database", Recording)
        mem.compact()
        assert mem.inspect("Website Redesign", "owner").value == "team"
    assert len(opened) == 2
    from gem.store.graph import DEFAULT_BUFFER_POOL
    assert [o.get("buffer_pool_size") for o in opened] == [asked or DEFAULT_BUFFER_POOL] * 2


@EMBEDDED
@pytest.mark.parametrize("options, problem", [
    ({"max_db_size": 3 << 29}, "power of 2"),
    ({"max_db_size": 0}, "positive number of bytes"),
    ({"buffer_pool_size": -1}, "positive number of bytes"),
    ({"buffer_pool_size": "16MB"}, "positive number of bytes"),
])
def test_bad_database_sizes_are_invalid_input_and_create_nothing(tmp_path, options, problem):
    with pytest.raises(gem.InvalidInput, match=problem):
        gem.open(tmp_path / "db", engine=ENGINE, **options)
    assert not (tmp_path / "db").exists()



# Settings of gem/store/queries/reads.py that force each form of a one-hop read, per engine. kuzu:
# (KUZU_FEW_KEYS, KUZU_ROWS_PER_KEYED_READ, KUZU_IN_LIST_KEYS, KUZU_CHILD_ROWS_PER_KEYED_READ,
# KUZU_CHILD_ROWS_PER_TOPIC_READ); owned children have a parent column, so the IN list and the
# parents' hash join read typed edges only. LadybugDB: lookups of the parents, or the join with
# the children's parent column.
_KUZU_FORM = ("KUZU_FEW_KEYS", "KUZU_ROWS_PER_KEYED_READ", "KUZU_IN_LIST_KEYS",
              "KUZU_CHILD_ROWS_PER_KEYED_READ", "KUZU_CHILD_ROWS_PER_TOPIC_READ")
FORMS = {
    "kuzu": {"per key": dict(zip(_KUZU_FORM, (4, 1, 0, 1, 1))),
             "in list": dict(zip(_KUZU_FORM, (0, 10**9, 10**9, 10**9, 10**9))),
             "hash join": dict(zip(_KUZU_FORM, (0, 10**9, 0, 10**9, 10**9)))},
    "ladybug": {"per key": {"LADYBUG_CHILD_ROWS_PER_KEYED_READ": 0},
                "child column join": {"LADYBUG_CHILD_ROWS_PER_KEYED_READ": 10**9}},
}


@pytest.mark.slow
@pytest.mark.skipif(ENGINE not in FORMS, reason="the embedded engines' statement forms")
@pytest.mark.parametrize("form", sorted(FORMS.get(ENGINE, {})))
def test_every_statement_form_of_a_one_hop_read_returns_the_same_rows(db_path, clock, monkeypatch,
                                                                      form):
    """Which form reads a 1-hop from many parents depends on the table's size (on kuzu per
    key, per topic for a field's entries, an IN list, a hash join with the parents or with
    the children's parent column; on LadybugDB lookups of the parents or the join with the
    parent column); each returns what the others do, every parent's children in creation
    order, also after a merge moved entries and flags to other owners."""
    class ExactOnly:  # makes a duplicate topic, which revise() merges
        def resolve(self, name, topics):
            return topics.exact(name)

    with gem.open(db_path, clock=clock, resolver=ExactOnly(), engine=ENGINE) as mem:
        for round_ in range(3):
            mem.ingest([gem.Fact(f"Topic {i}", f"f{j}", f"v{round_}.{i}.{j}")
                        for i in range(70) for j in range(3)])
        mem.link("Topic 1", "Topic 2")
        mem.link("Topic 3", "Topic 1", kind="association")
        mem.ingest([gem.Fact("Launch plan", "owner", "Ann"), gem.Fact("Launch plan", "f0", "x")])
        clock.advance(days=1)
        mem.ingest([gem.Fact("launch plan", "owner", "Bob", source="b"),
                    gem.Fact("launch plan", "f9", "y", source="b")])
        assert len(mem.revise()["merged"]) == 1  # entries moved to the survivor's fields
        store = mem._engine.store

        def read(settings: dict[str, int]) -> dict[str, object]:
            with monkeypatch.context() as patch:
                for name, value in settings.items():
                    patch.setattr(queries.reads, name, value)
                with store.reading() as tx:
                    fields = [r[0] for r in tx.run("MATCH (f:Field) RETURN f.id")]
                    topics = [r[0] for r in tx.run("MATCH (t:Topic) RETURN t.id")]
                    entries = [r[0] for r in tx.run("MATCH (e:Entry) RETURN e.id")]
                    out: dict[str, object] = {}
                    for rel, parents in (("HAS_ENTRY", fields), ("HAS_FIELD", topics),
                                         ("FLAGS", topics), ("CORROBORATES", entries)):
                        grouped: dict[str, list[str]] = {}
                        for parent, row in queries.read_children(tx, rel, parents):
                            grouped.setdefault(parent, []).append(repr(row))
                        out[rel] = grouped
                    out["edges"] = sorted(repr(e) for e in queries.read_edges(tx, topics))
                    faded: dict[str, list[str]] = {}
                    for parent, row in queries.read_faded_history(tx, fields):
                        faded.setdefault(parent, []).append(repr(row))
                    out["faded"] = faded
                    return out
        baseline = read(FORMS[ENGINE]["per key"])
        assert baseline["faded"] == {
            fid: kept for fid, rows in baseline["HAS_ENTRY"].items()  # type: ignore[union-attr]
            if (kept := [r for r in rows if "'active': True" in r and "'status': 'current'" not in r])}
        assert len(baseline["faded"]) >= 210
        assert len(baseline["HAS_FIELD"]) == 72
        assert sum(len(v) for v in baseline["HAS_ENTRY"].values()) == 634
        assert len(baseline["edges"]) >= 3
        assert read(FORMS[ENGINE][form]) == baseline


@pytest.mark.skipif(ENGINE != "kuzu", reason="kuzu's statement forms")
def test_a_field_asked_for_alone_of_its_topic_has_its_entries_read_by_its_own_key(
        db_path, clock, monkeypatch):
    """Read through its topic, a field's entries cost the topic's other fields' too (a
    free-text query reads its top fields' histories, mostly one field a topic): a topic with
    one field asked for is read by the field's key, one with several through the topic, and
    both return what reading every topic's fields through it does."""
    with gem.open(db_path, clock=clock, engine=ENGINE) as mem:
        mem.ingest([gem.Fact(f"Topic {i}", f"f{j}", f"v{i}.{j}") for i in range(6)
                    for j in range(3)])
        clock.advance(days=1)
        mem.ingest([gem.Fact(f"Topic {i}", "f0", f"w{i}") for i in range(6)])
        store = mem._engine.store
        with store.reading() as tx:
            fields = sorted(r[0] for r in tx.run("MATCH (f:Field) RETURN f.id"))
        by_topic: dict[str, list[str]] = {}
        for fid in fields:
            by_topic.setdefault(fid.split("/", 1)[0], []).append(fid)
        tids = sorted(by_topic)
        asked = [by_topic[tid][0] for tid in tids[:4]] + by_topic[tids[4]][:2]
        monkeypatch.setattr(queries.reads, "KUZU_CHILD_ROWS_PER_TOPIC_READ", 1)

        def read(per_topic_from: int) -> tuple[list[tuple[str, str]], list[str]]:
            ran: list[str] = []
            run = graph.Tx.run
            with monkeypatch.context() as patch:
                patch.setattr(queries.reads, "KUZU_FIELDS_PER_TOPIC_READ", per_topic_from)
                patch.setattr(graph.Tx, "run", lambda self, q, p=None: ran.append(q) or run(self, q, p))
                with store.reading() as tx:
                    found = [(parent, row["id"]) for parent, row in
                             queries.read_children(tx, "HAS_ENTRY", asked)]
            return sorted(found, key=lambda x: x[0]), ran

        found, ran = read(queries.reads.KUZU_FIELDS_PER_TOPIC_READ)
        assert sum("p.id = $id" in q for q in ran) == 4
        assert sum("Topic {id: $t}" in q for q in ran) == 1
        through_topics, ran = read(1)
        assert all("Topic {id: $t}" in q for q in ran) and len(ran) == 5
        assert found == through_topics and len(found) == 11


def test_a_faded_history_read_returns_what_filtering_the_whole_history_does(db_path, clock):
    """On every engine and for each way of reading many parents (one, a few, past the
    per-statement chunk): the entries still active but no longer current, in order."""
    with gem.open(db_path, clock=clock, engine=ENGINE) as mem:
        for round_ in range(3):
            mem.ingest([gem.Fact(f"Topic {i}", f"f{j}", f"v{round_ if j else 0}.{i}.{j}")
                        for i in range(45) for j in range(2)])
            clock.advance(days=1)
        store = mem._engine.store
        with store.reading() as tx:
            fields = sorted(r[0] for r in tx.run("MATCH (f:Field) RETURN f.id"))
            for keys in (fields[:1], fields[:5], fields[:64], fields):
                whole = [(p, r["id"]) for p, r in queries.read_children(tx, "HAS_ENTRY", keys)
                         if r["active"] and r["status"] != "current"]
                faded = [(p, r["id"]) for p, r in queries.read_faded_history(tx, keys)]
                assert sorted(faded) == sorted(whole) and len(whole) == len(keys) // 2 * 2
                by_field: dict[str, list[str]] = {}
                for p, eid in faded:
                    by_field.setdefault(p, []).append(eid)
                assert all(ids == [e for p, e in whole if p == fid] for fid, ids in by_field.items())


@EMBEDDED
def test_batched_creates_and_updates_store_exactly_the_values_given(db_path):
    """Batches go through each engine's many-row forms (on kuzu: parallel lists, a value every
    row shares as one parameter); every column must read back as written: per-row and shared
    values, nulls, lists (empty, shared, varied), an int given for a float column, times."""
    from datetime import datetime, timedelta, timezone
    from gem.store.schema import RELS

    store = open_store(db_path, ENGINE)
    queries.ensure_schema(store)
    t0 = datetime(2026, 3, 1, 12, 0, 0, 123456, tzinfo=timezone.utc)
    topic = {"id": "t1", "seq": 1, "title": "T", "aliases": [], "strength": 1.0, "last_access": t0,
             "status": "active", "scope": "default", "created_at": t0, "annotations": "{}"}
    fields = [{"id": f"t1/f{i}", "topic_id": "t1", "name": f"f{i}", "strength": i,  # int: float column
               "last_access": t0 + timedelta(seconds=i), "status": "active", "contested": i % 2 == 0,
               "summary": None if i % 3 else f"s{i}", "created_at": t0, "annotations": "{}",
               "labels": [] if i % 4 else ["x", f"l{i}"]} for i in range(12)]
    entries = [{"id": f"t1/f{i}#e", "seq": i, "tx": 1, "field_id": f"t1/f{i}", "origin_field": f"t1/f{i}",
                "value": f'"v{i}"', "valid_at": t0, "asserted_at": t0, "recorded_at": t0 + timedelta(days=i),
                "source": "s", "actor": "a", "ref": None, "confidence": 1, "polarity": "+",
                "status": "current", "superseded_by": None, "superseded_tx": None, "active": True,
                "annotations": "{}", "labels": [], "reason": None,
                "place_lat": None if i % 3 else 38.7 + i, "place_lon": None if i % 3 else -9 - i,
                "place_name": None if i % 2 else f"p{i}"} for i in range(12)]
    with store.transaction() as tx:
        queries.create_rows(tx, "Topic", [topic])
        queries.create_rows(tx, "Field", [dict(f) for f in fields], RELS["HAS_FIELD"],
                            {f["id"]: "t1" for f in fields})
        queries.create_rows(tx, "Entry", [dict(e) for e in entries], RELS["HAS_ENTRY"],
                            {e["id"]: e["field_id"] for e in entries})
    updates = [(f["id"], {"status": "hidden", "summary": None, "strength": 2.5 + i,
                          "labels": ["y"] if i % 2 else []}) for i, f in enumerate(fields[:8])]
    with store.transaction() as tx:
        queries.update_rows(tx, "Field", updates)
        queries.update_rows(tx, "Entry", [(e["id"], {"active": False}) for e in entries[:5]])
    for f, (_, change) in zip(fields, updates):
        f.update(change)
    for e in entries[:5]:
        e["active"] = False
    with store.reading() as tx:
        stored_fields = {r["id"]: r for r in queries.read_rows(tx, "Field", [f["id"] for f in fields])}
        stored_entries = {r["id"]: r for _, r in queries.read_children(tx, "HAS_ENTRY",
                                                                     [f["id"] for f in fields])}
    for row in fields:
        assert stored_fields[row["id"]] == {**row, "strength": float(row["strength"])}
        assert isinstance(stored_fields[row["id"]]["strength"], float)
    assert stored_entries == {e["id"]: {**e, "confidence": 1.0} for e in entries}
    store.close()
