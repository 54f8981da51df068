"""GemStore, LangGraph's long-term memory store on gem (gem/integrations/langgraph.py).

LangGraph ships no conformance suite for stores (langgraph-checkpoint-conformance covers
checkpointers only), so the documented BaseStore contract is checked here, and a random
sequence of operations is run against GemStore and LangGraph's own InMemoryStore, which must
agree on every answer. Then gem's side of the mapping: fields with histories, reads that are
writes (search) or not (get), delete as erasure; and a graph that uses the store."""
from __future__ import annotations

import asyncio
import json
import random
from datetime import timedelta

import pytest

pytest.importorskip("langgraph.store.base",
                    reason="needs the langgraph extra: pip install 'gem-memory[langgraph]'")

from langgraph.store.base import (GetOp, InvalidNamespaceError, ListNamespacesOp,  # noqa: E402
                                  MatchCondition, PutOp, SearchOp)
from langgraph.store.memory import InMemoryStore  # noqa: E402

import gem  # noqa: E402
from conftest import ENGINE, T0  # noqa: E402
from gem.integrations.langgraph import KEY_RESOLVER, GemStore  # noqa: E402


@pytest.fixture
def store(db_path, clock):
    with gem.open(path=db_path, clock=clock, engine=ENGINE, resolver=KEY_RESOLVER) as m:
        yield GemStore(m)


def ops_logged(store: GemStore) -> list[str]:
    return [r["op"] for r in store.memory.transitions()]


# ---------------------------------------------------------------------- the BaseStore contract
def test_put_then_get_gives_the_value_back_with_its_times(store, clock):
    value = {"food": "pizza", "visits": 3, "ratio": 0.5, "ok": True,
             "tags": ["a", {"b": [1, None]}], "nested": {"x": {"y": "z"}}}
    store.put(("users", "alice"), "prefs", value)
    item = store.get(("users", "alice"), "prefs")
    assert item.value == value and item.key == "prefs" and item.namespace == ("users", "alice")
    assert item.created_at == item.updated_at == T0
    clock.advance(minutes=5)
    store.put(("users", "alice"), "prefs", value)  # the same value again: an update
    again = store.get(("users", "alice"), "prefs")
    assert again.value == value
    assert (again.created_at, again.updated_at) == (T0, T0 + timedelta(minutes=5))
    assert store.get(("users", "alice"), "other") is None
    assert store.get(("users", "bob"), "prefs") is None


def test_a_put_replaces_the_value_and_none_means_no_such_key(store, clock):
    store.put(("a",), "k", {"x": 1, "y": 2, "z": 3})
    clock.advance(minutes=1)
    store.put(("a",), "k", {"x": 10, "z": None})
    item = store.get(("a",), "k")
    assert item.value == {"x": 10}
    assert item.updated_at == T0 + timedelta(minutes=1)
    store.put(("a",), "k", {"y": 5})
    assert store.get(("a",), "k").value == {"y": 5}


def test_namespaces_are_isolated_and_listed_with_any_labels(store):
    spaces = [("users", "alice"), ("users", "Alice@Example"), ("users", "alice", "notes"),
              ("docs",), ("Ünïcode labels", "with spaces"), ("x" * 80,)]
    for i, ns in enumerate(spaces):
        store.put(ns, "k", {"n": i})
    for i, ns in enumerate(spaces):
        assert store.get(ns, "k").value == {"n": i}
    assert store.list_namespaces() == sorted(spaces)
    assert store.list_namespaces(prefix=("users",)) == sorted(spaces[:3])
    assert store.list_namespaces(prefix=("users", "alice")) == \
        [("users", "alice"), ("users", "alice", "notes")]
    assert store.list_namespaces(suffix=("notes",)) == [("users", "alice", "notes")]
    assert store.list_namespaces(max_depth=1) == sorted({ns[:1] for ns in spaces})
    assert store.list_namespaces(limit=2, offset=1) == sorted(spaces)[1:3]
    assert store.memory.scope("lg.users.alice").inspect("k") is not None  # readable scopes


def test_a_prefix_matches_whole_labels(store):
    store.put(("users",), "k", {"n": 1})
    store.put(("users2",), "k", {"n": 2})
    store.put(("users", "a"), "k", {"n": 3})
    found = store.search(("users",))
    assert sorted((i.namespace, i.value["n"]) for i in found) == \
        [(("users",), 1), (("users", "a"), 3)]
    assert len(store.search(())) == 3


def test_delete_removes_the_item_and_its_namespace_when_empty(store):
    store.put(("a",), "k", {"x": 1})
    store.put(("a",), "j", {"x": 2})
    store.delete(("a",), "k")
    assert store.get(("a",), "k") is None
    assert [i.key for i in store.search(("a",))] == ["j"]
    store.delete(("a",), "j")
    assert store.list_namespaces() == [] and store.search(()) == []
    before = len(ops_logged(store))
    store.delete(("a",), "missing")  # deleting what is not there does nothing
    assert len(ops_logged(store)) == before
    store.put(("a",), "k", {"x": 3})  # a new item, with a new history
    assert store.memory.scope("lg.a").history("k", "x")[0].value == 3


def test_search_filters_pages_and_orders_by_namespace_and_key(store):
    for i in range(7):
        store.put(("docs", f"part{i % 2}"), f"doc{i}",
                  {"n": i, "kind": "odd" if i % 2 else "even", "meta": {"lang": "en", "v": i}})
    everything = store.search(("docs",), limit=100)
    assert [(i.namespace[1], i.key) for i in everything] == \
        sorted((f"part{i % 2}", f"doc{i}") for i in range(7))
    pages = [store.search(("docs",), limit=3, offset=o) for o in (0, 3, 6)]
    assert [i.key for page in pages for i in page] == [i.key for i in everything]
    assert all(i.score is None for i in everything)

    def keys(**filter):
        return sorted(i.key for i in store.search(("docs",), filter=filter, limit=100))
    assert keys(kind="odd") == ["doc1", "doc3", "doc5"]
    assert keys(n={"$gt": 4}) == ["doc5", "doc6"]
    assert keys(n={"$gte": 4, "$lt": 6}) == ["doc4", "doc5"]
    assert keys(n={"$lte": 0}) == ["doc0"]
    assert keys(n={"$ne": 3}, kind="odd") == ["doc1", "doc5"]
    assert keys(n={"$eq": 2}) == ["doc2"]
    assert keys(meta={"lang": "en", "v": 1}) == ["doc1"]
    assert keys(kind={"$gt": 1}) == []  # not a number: no order comparison matches
    assert keys(missing="x") == []


def test_a_query_ranks_items_and_gives_scores(store):
    store.put(("mem",), "diet", {"text": "Alice is vegetarian and loves pasta"})
    store.put(("mem",), "job", {"text": "Alice works as a nurse at night"})
    store.put(("mem", "bob"), "pet", {"text": "Bob has a dog called Rex"})
    found = store.search(("mem",), query="what food does alice love?")
    assert found[0].key == "diet" and found[0].score > 0
    assert [i.key for i in store.search(("mem",), query="dog Rex")][:1] == ["pet"]
    assert store.search(("mem", "bob"), query="pasta") == []
    assert [i.key for i in store.search(("mem",), query="Alice", filter={"text": {
        "$ne": "Alice works as a nurse at night"}})] == ["diet"]
    assert len(store.search(("mem",), query="Alice", limit=1)) == 1


def test_bad_input_is_refused_and_changes_nothing(store):
    store.put(("a",), "user_1", {"name": "Ann"})
    before = (ops_logged(store), store.list_namespaces(), store.get(("a",), "user_1").value)
    for namespace in [(), ("langgraph", "x"), ("a.b",), ("",), ("a", 3)]:
        with pytest.raises(InvalidNamespaceError):
            store.batch([PutOp(namespace, "k", {"x": 1})])
    with pytest.raises(InvalidNamespaceError):
        store.batch([GetOp(("a.b",), "k")])
    refused = [
        (("a",), "User 1", {"name": "Bo"}),  # another spelling of user_1: one gem topic
        (("a",), "user_1", {"Name": "Bo"}),  # another spelling of the field name
        (("a",), "k", {"name": "x", "NAME": "y"}),
        (("a",), "k", {}), (("a",), "k", {"x": None}), (("a",), "k", ["x"]),
        (("a",), "k", {"": 1}), (("a",), "k", {" x": 1}), (("a",), "", {"x": 1}),
        (("a",), " k", {"x": 1}), (("a",), "k", {3: 1}), (("a",), "k", {"x": object()}),
    ]
    for namespace, key, value in refused:
        with pytest.raises(gem.InvalidInput):
            store.batch([PutOp(namespace, key, value)])
    for op in [SearchOp(("a",), filter={"x": {"$regex": "a"}}), SearchOp(("a",), limit=-1),
               SearchOp(("a",), offset=-1), SearchOp(("a",), query=3),
               ListNamespacesOp(max_depth=0),
               ListNamespacesOp(match_conditions=(MatchCondition("middle", ("a",)),))]:
        with pytest.raises(gem.InvalidInput):
            store.batch([op])
    assert (ops_logged(store), store.list_namespaces(), store.get(("a",), "user_1").value) == \
        before


def test_a_memory_that_matches_names_by_similarity_is_refused(db_path, clock):
    with gem.open(path=db_path, clock=clock, engine=ENGINE) as m:
        with pytest.raises(gem.InvalidInput, match="KEY_RESOLVER"):
            GemStore(m)
    with pytest.raises(gem.InvalidInput):
        GemStore.open(db_path, resolver=KEY_RESOLVER)


def test_similar_keys_stay_separate_items(store):
    store.put(("a",), "preference", {"x": 1})
    store.put(("a",), "preferences", {"x": 2})  # the default resolver would merge them
    assert store.get(("a",), "preference").value == {"x": 1}
    assert store.get(("a",), "preferences").value == {"x": 2}


def test_the_async_api_does_the_same(store):
    async def story():
        await store.aput(("a",), "k", {"x": 1})
        got = await store.aget(("a",), "k")
        found = await store.asearch(("a",))
        names = await store.alist_namespaces()
        await store.adelete(("a",), "k")
        return got.value, [i.key for i in found], names, await store.aget(("a",), "k")
    assert asyncio.run(story()) == ({"x": 1}, ["k"], [("a",)], None)


def test_a_batch_runs_its_operations_in_order(store):
    results = store.batch([PutOp(("a",), "k", {"x": 1}), GetOp(("a",), "k"),
                           PutOp(("a",), "k", None), GetOp(("a",), "k"),
                           ListNamespacesOp()])
    assert results[0] is None and results[1].value == {"x": 1}
    assert results[2:] == [None, None, []]


# ---------------------------------------------------------------------- against InMemoryStore
def test_random_operations_agree_with_langgraphs_in_memory_store(store):
    ref = InMemoryStore()
    rnd = random.Random(7)
    spaces = [("u", "a"), ("u", "b"), ("u", "a", "x"), ("v",), ("U", "Mixed Case")]
    keys = ["k1", "k2", "memo-3", "Note"]

    def value():
        out = {name: rnd.choice([rnd.randint(0, 9), f"s{rnd.randint(0, 3)}", [1, 2],
                                 {"d": rnd.randint(0, 2)}, None])
               for name in rnd.sample(["a", "b", "c", "d"], rnd.randint(1, 4))}
        out["a"] = rnd.randint(0, 9)  # never empty
        return out

    def searched(s, prefix, filter):
        return sorted((i.namespace, i.key, json.dumps(i.value, sort_keys=True))
                      for i in s.search(prefix, filter=filter, limit=1000))
    for step in range(120):
        ns, key = rnd.choice(spaces), rnd.choice(keys)
        kind = rnd.random()
        if kind < 0.45:
            v = value()
            store.put(ns, key, v)
            ref.put(ns, key, {k: x for k, x in v.items() if x is not None})
        elif kind < 0.55:
            store.delete(ns, key)
            ref.delete(ns, key)
        elif kind < 0.75:
            mine, theirs = store.get(ns, key), ref.get(ns, key)
            assert (mine and (mine.value, mine.key, mine.namespace)) == \
                (theirs and (theirs.value, theirs.key, theirs.namespace)), step
        elif kind < 0.9:
            prefix = ns[:rnd.randint(0, len(ns))]
            filter = rnd.choice([None, {"a": {"$gt": 4}}, {"b": "s1"}, {"c": {"d": 1}},
                                 {"a": {"$lte": 3}, "b": {"$ne": 2}}, {"d": [1, 2]}])
            assert searched(store, prefix, filter) == searched(ref, prefix, filter), step
        else:
            condition = rnd.choice([{}, {"prefix": ("u",)}, {"suffix": ("a",)},
                                    {"prefix": ("u", "*", "x")}, {"max_depth": 1}])
            assert store.list_namespaces(**condition) == ref.list_namespaces(**condition), step


# ---------------------------------------------------------------------- gem's side of it
def test_each_key_of_a_value_is_a_field_with_a_history(store, clock):
    store.put(("users", "alice"), "profile", {"city": "Lisbon", "job": "nurse"})
    clock.advance(days=1)
    store.put(("users", "alice"), "profile", {"city": "Porto", "job": "nurse"})
    clock.advance(days=1)
    store.put(("users", "alice"), "profile", {"city": "Porto"})
    scope = store.memory.scope("lg.users.alice")
    assert [(e.value, e.status) for e in scope.history("profile", "city")] == \
        [("Lisbon", "superseded"), ("Porto", "current")]
    assert scope.history("profile", "city")[-1].provenance.source == "langgraph"
    job = scope.history("profile", "job")
    assert [(e.value, e.status) for e in job] == [("nurse", "retracted"), (None, "current")]
    assert job[-1].reason == "not in the value LangGraph put"
    assert len(job[0].observations) == 1  # the second put corroborated it
    assert store.memory.audit(full=True).ok


def test_get_reinforces_nothing_and_search_reinforces_what_it_returns(store, clock):
    store.put(("a",), "k", {"x": "apples"})
    store.put(("a",), "j", {"x": "pears"})
    scope = store.memory.scope("lg.a")
    clock.advance(days=3)
    before = ops_logged(store)
    salience = scope.inspect("k").salience
    store.get(("a",), "k")
    assert ops_logged(store) == before and scope.inspect("k").salience == salience
    store.search(("a",), query="apples")
    assert ops_logged(store) == [*before, "retrieve"]
    assert scope.inspect("k").salience > salience
    untouched = scope.inspect("j").salience
    store.search(("a",), filter={"x": "apples"})  # without a query: only what it returns
    assert scope.inspect("j").salience == untouched


def test_search_leaves_out_what_forgetting_hid_and_get_still_has_it(store, clock):
    store.put(("a",), "k", {"kept": "often read", "faded": "never read"})
    scope = store.memory.scope("lg.a")
    for _ in range(12):  # read one field, and let the other decay
        clock.advance(days=7)
        scope.retrieve(topic="k", fields=["kept"])
        scope.maintain()
    assert scope.inspect("k").fields["faded"].status == "hidden"
    assert store.search(("a",))[0].value == {"kept": "often read"}
    assert store.get(("a",), "k").value == {"kept": "often read", "faded": "never read"}


def test_delete_is_an_erasure(store):
    store.put(("a",), "secret", {"pin": "4321"})
    store.delete(("a",), "secret")
    record = store.memory.scope("lg.a").transitions()[-1]
    assert record["op"] == "erase"
    assert store.memory.scope("lg.a").inspect("secret") is None
    assert "4321" not in repr(store.memory.scope("lg.a").transitions())
    assert store.memory.audit(full=True).ok


# ---------------------------------------------------------------------- an agent
def test_a_graph_reads_and_writes_its_memory_through_the_store(db_path):
    from typing import TypedDict

    from langgraph.graph import END, START, StateGraph
    from langgraph.store.base import BaseStore

    class State(TypedDict):
        user: str
        said: str
        answer: str

    def remember(state: State, *, store: BaseStore) -> dict:
        ns = ("users", state["user"])
        seen = store.get(ns, "profile")
        count = seen.value["visits"] + 1 if seen else 1
        store.put(ns, "profile", {"visits": count, "last_said": state["said"]})
        return {"answer": f"visit {count}; before you said: "
                          f"{seen.value['last_said'] if seen else 'nothing'}"}

    graph = StateGraph(State)
    graph.add_node("remember", remember)
    graph.add_edge(START, "remember")
    graph.add_edge("remember", END)
    with GemStore.open(db_path, engine=ENGINE) as store:
        app = graph.compile(store=store)
        assert app.invoke({"user": "ann", "said": "hi"})["answer"] == \
            "visit 1; before you said: nothing"
    with GemStore.open(db_path, engine=ENGINE) as store:  # a new process, the same memory
        app = graph.compile(store=store)
        assert app.invoke({"user": "ann", "said": "bye"})["answer"] == \
            "visit 2; before you said: hi"
        assert [e.value for e in store.memory.scope("lg.users.ann").history(
            "profile", "last_said")] == ["hi", "bye"]


def test_a_key_a_policy_drops_is_left_out_and_logged(tmp_path, db_path, clock, caplog):
    policy = tmp_path / "no-passwords.policy"
    policy.write_text('POLICY no-passwords\nON field_created OR field_updated OR corroborated '
                      'OR recorded\nWHEN field.name = "password"\n'
                      'DO drop(entry, "passwords are not stored")\n')
    with gem.open(path=db_path, clock=clock, engine=ENGINE, resolver=KEY_RESOLVER,
                  policies=[str(policy)]) as m:
        store = GemStore(m)
        with caplog.at_level("WARNING", logger="gem"):
            store.put(("a",), "login", {"user": "ann", "password": "hunter2"})
        assert store.get(("a",), "login").value == {"user": "ann"}
        assert "password (passwords are not stored)" in caplog.text


@pytest.mark.skipif(ENGINE != "kuzu", reason="the guide's example opens the default engine")
def test_the_guide_example_runs_as_written():
    import re
    from pathlib import Path
    guide = Path(__file__).resolve().parents[1] / "docs" / "guides" / "langgraph.md"
    block = re.findall(r"```python\n(.*?)```", guide.read_text(encoding="utf-8"), re.S)[0]
    scope: dict = {}
    exec(compile(block, str(guide), "exec"), scope)
    assert scope["GemStore"] is GemStore  # it ran, not skipped


def test_namespaces_with_any_labels_read_back_after_reopening(db_path):
    odd = ("Users", "ann@example", "x" * 70)
    with GemStore.open(db_path, engine=ENGINE) as store:
        store.put(odd, "k", {"n": 1})
        store.put(("plain",), "k", {"n": 2})
        assert store.scope_of(odd).startswith("lg-") and store.scope_of(("plain",)) == "lg.plain"
    with GemStore.open(db_path, engine=ENGINE) as store:
        assert store.list_namespaces() == [("Users", "ann@example", "x" * 70), ("plain",)]
        assert [i.namespace for i in store.search(("Users",))] == [odd]


def test_concurrent_async_calls_each_take_effect(store):
    async def story():
        await asyncio.gather(*(store.aput(("a", f"n{i % 3}"), f"k{i}", {"i": i})
                               for i in range(12)))
        return await asyncio.gather(*(store.aget(("a", f"n{i % 3}"), f"k{i}")
                                      for i in range(12)))
    assert [item.value for item in asyncio.run(story())] == [{"i": i} for i in range(12)]
    assert store.memory.audit(full=True).ok
