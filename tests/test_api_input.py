"""Every argument of the public API, given a value of the wrong type, is InvalidInput naming
that argument, and changes nothing: no raw TypeError, no engine error without a name
(issue 9: fuzzing found 41 TypeErrors and 42 nameless StoreErrors)."""
from __future__ import annotations

import decimal
from datetime import date, datetime

import pytest
from conftest import ENGINE, T0, snapshot

import gem

WRONG = [None, 5, 1.5, True, b"bytes", [], {}, object(), decimal.Decimal("1"), date(2026, 1, 1),
         datetime(2026, 1, 1)]

# method -> (the valid call as (args, kwargs), the arguments to break: name -> how it is named
# in the message, and the wrong values that are in fact acceptable for it)
CALLS = {
    "ingest": ((gem.Fact("A", "x", 2),), {"actor": "api"}),
    "retrieve": ((), {"query": "x", "topic": "A", "fields": ["x"], "as_of": T0, "history": False,
                      "include_archived": False, "k": 5, "actor": "api"}),
    "link": (("A", "B"), {"kind": "extension", "actor": "api"}),
    "restore": (("A",), {"field": "x", "actor": "api"}),
    "retract": (("A", "x", "wrong"), {"source": "api", "actor": "api"}),
    "inspect": (("A",), {"field": "x"}),
    "history": (("A", "x"), {}),
    "explain": (("A", "x"), {}),
    "forget": ((), {"actor": "maintenance"}),
    "revise": ((), {"actor": "maintenance"}),
    "transitions": ((0,), {}),
    "audit": ((), {"full": False, "expected_head": None}),
    "load_policies": (([],), {"defaults": True, "actor": "api"}),
    # scopes, erasure and the views (issues 12-14)
    "scope": (("acme",), {}),
    "erase": (("A",), {"field": "x", "source": "nobody", "reason": "r", "actor": "api"}),
    "erase_all": ((), {"reason": "r", "actor": "api"}),
    "verify_erasure": ((None,), {}),
    "topics": ((), {"status": "active", "flagged": False, "text": "A", "order": "salience",
                    "offset": 0, "limit": 5}),
    "titles": ((["t1"],), {}),
    "episode_labels": ((["ep1"],), {}),
    "graph": (("A",), {"depth": 1, "limit": 10}),
    "salience_history": (("A",), {}),
    "recent_transitions": ((5,), {"before": None, "topic": "A", "details": True}),
}
# Arguments where None is a value (absent), or a list is one of several accepted forms.
ACCEPTS = {("retrieve", "query"): (None,), ("retrieve", "topic"): (None,),
           ("retrieve", "fields"): (None, []), ("retrieve", "as_of"): (None,),
           ("restore", "field"): (None,), ("inspect", "field"): (None,),
           ("ingest", "facts"): ([],), ("load_policies", "paths"): ([],),
           ("audit", "expected_head"): (None,), ("erase", "field"): (None,),
           ("erase", "source"): (None,), ("topics", "status"): (None,), ("topics", "text"): (None,),
           ("titles", "topic_ids"): ([],), ("episode_labels", "episode_ids"): ([],), ("recent_transitions", "before"): (None,),
           ("recent_transitions", "topic"): (None,)}
PARAMS = {"ingest": ["facts"], "link": ["src", "dst"], "restore": ["topic"],
          "retract": ["topic", "field", "reason"], "inspect": ["topic"],
          "history": ["topic", "field"], "explain": ["topic", "field"], "transitions": ["since"],
          "load_policies": ["paths"], "scope": ["name"], "erase": ["topic"],
          "verify_erasure": ["receipt"], "titles": ["topic_ids"], "episode_labels": ["episode_ids"], "graph": ["topic"],
          "salience_history": ["topic"], "recent_transitions": ["limit"]}


FLAGS = {"history", "include_archived", "full", "defaults", "flagged", "details"}
COUNTS = {"k", "since", "offset", "limit", "depth", "before"}


def accepted(method: str, name: str, value: object) -> bool:
    """Is `value` in fact a right value for this argument?"""
    if any(value is v or (type(value) is type(v) and value == v)
           for v in ACCEPTS.get((method, name), ())):
        return True
    if name in FLAGS:
        return isinstance(value, bool)
    if name in COUNTS:
        return type(value) is int
    return False


def cases():
    for method, (args, kwargs) in CALLS.items():
        named = [(n, i) for i, n in enumerate(PARAMS.get(method, []))] + [(n, None) for n in kwargs]
        for name, position in named:
            wrong = [(i, bad) for i, bad in enumerate(WRONG) if not accepted(method, name, bad)]
            for n, (i, bad) in enumerate(wrong):
                # `-m "not slow"` tries one wrong value per argument; the suite tries them all
                yield pytest.param(method, name, position, bad, id=f"{method}-{name}-{i}",
                                   marks=[pytest.mark.slow] if n else [])


@pytest.fixture(scope="module")
def memory(tmp_path_factory):
    clock = lambda: T0  # noqa: E731 - a fixed, aware clock
    with gem.open(tmp_path_factory.mktemp("api") / "db", clock=clock, engine=ENGINE) as mem:
        mem.ingest([gem.Fact("A", "x", 1), gem.Fact("B", "y", 1)])
        yield mem


@pytest.mark.parametrize("method,name,position,bad", list(cases()))
def test_a_wrong_argument_is_invalid_input_naming_it(memory, method, name, position, bad):
    args, kwargs = CALLS[method]
    args, kwargs = list(args), dict(kwargs)
    if position is None:
        kwargs[name] = bad
    elif position < len(args):
        args[position] = bad
    else:
        args.append(bad)
    if method == "ingest" and name == "facts" and isinstance(bad, (list, dict)):
        bad_facts = [bad]  # a list holding something that is not a Fact
        args[0] = bad_facts
    before = snapshot(memory)
    with pytest.raises(gem.GemError) as info:
        getattr(memory, method)(*args, **kwargs)
    assert isinstance(info.value, (gem.InvalidInput, gem.UnknownUnit)), repr(info.value)
    if isinstance(info.value, gem.InvalidInput):
        assert name.rstrip("s") in str(info.value) or "fact" in str(info.value), str(info.value)
    assert snapshot(memory) == before


@pytest.mark.parametrize("kwargs,named", [
    ({"path": 5}, "path"), ({"path": b"x.db"}, "path"), ({"engine": 5}, "engine"),
    ({"clock": "now"}, "clock"), ({"reviser": 5}, "reviser"), ({"create": "yes"}, "create"),
    ({"defaults": None}, "defaults"), ({"resolver": object()}, "resolver"),
    ({"embedder": object()}, "embedder"), ({"policies": "team.policy"}, "policies"),
    ({"summarizer": 1}, "summarizer"), ({"progress": "bar"}, "progress"),
])
def test_open_refuses_wrong_arguments_by_name(tmp_path, kwargs, named):
    with pytest.raises(gem.InvalidInput, match=named):
        gem.open(**{"path": tmp_path / "db", "engine": ENGINE, **kwargs})
    assert not (tmp_path / "db").exists()


def test_a_reviser_that_answers_wrongly_is_invalid_input_and_changes_nothing(tmp_path):
    clock = lambda: T0  # noqa: E731
    with gem.open(tmp_path / "db", clock=clock, engine=ENGINE,
                  reviser=lambda revision: "April 25") as mem:
        mem.ingest([gem.Fact("A", "x", 1), gem.Fact("B", "y", 1)])
        mem.link("A", "B")
        mem.ingest(gem.Fact("A", "x", 2))
        before = snapshot(mem)
        with pytest.raises(gem.InvalidInput, match=r"reviser \(for .B.\) must return None or a list of gem.Fact, got str"):
            mem.revise()
        assert snapshot(mem) == before
