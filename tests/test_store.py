"""The store adapter: schema, transactions, locking (runs on either engine)."""
from __future__ import annotations

import subprocess
import sys
import textwrap
import threading

import pytest

import gem
from conftest import ENGINE
from gem.store import open_store, queries
from gem.store.schema import SCHEMA_VERSION


def test_schema_creation_is_idempotent(db_path):
    for _ in range(2):
        store = open_store(db_path, ENGINE)
        assert queries.ensure_schema(store) == SCHEMA_VERSION
        with store.reading() as tx:
            assert tx.scalar("MATCH (m:Meta {key: 'schema'}) RETURN m.value") == SCHEMA_VERSION
        store.close()


def test_a_database_made_before_a_column_existed_gets_it_at_open(db_path, clock):
    """Columns added to the schema (labels, a retraction's reason, who cleared a flag) are
    added to an older database when it is opened: empty lists and nulls, nothing else moves."""
    with gem.open(db_path, clock=clock, engine=ENGINE) as mem:
        mem.ingest(gem.Fact("A", "x", 1))
    store = open_store(db_path, ENGINE)
    with store.transaction() as tx:  # what a database of the previous schema looks like
        for table, column in (("Entry", "labels"), ("Entry", "reason"), ("Field", "labels"),
                              ("Flag", "cleared_by")):
            tx.run(f"ALTER TABLE {table} DROP {column}")
    store.close()
    with gem.open(db_path, clock=clock, engine=ENGINE) as mem:
        assert mem.inspect("A", "x").labels == [] and mem.history("A", "x")[0].reason is None
        mem.ingest(gem.Fact("A", "x", 2, labels=["pii"]))
        assert mem.inspect("A", "x").labels == ["pii"]
        assert mem.audit(full=True).ok
        mem.compact()  # the added columns survive the export and import of a physical purge
        assert mem.inspect("A", "x").labels == ["pii"] and mem.history("A", "x")[0].reason is None
        assert mem.audit(full=True).ok


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
                              timeout=120)
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
