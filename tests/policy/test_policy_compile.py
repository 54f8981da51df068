"""Compiled policies against a small in-memory implementation of PolicyRuntime."""
from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gem.errors import InvalidInput, PolicyCheckError, PolicySyntaxError
from gem.policy import PolicySet, check, compile, default_policy_path, load, load_sources, load_text, parse
from gem.policy.compiler import equal, member, truth

NOW = datetime(2026, 3, 15, 10, 0, tzinfo=timezone.utc)


@dataclass(eq=False)
class Topic:
    title: str
    salience: float = 0.5
    status: str = "active"
    extends: list = field(default_factory=list)
    associates: list = field(default_factory=list)
    fields: list = field(default_factory=list)
    aliases: list = field(default_factory=lambda: ["Ops-Team"])


@dataclass(eq=False)
class Field:
    name: str
    topic: Topic
    salience: float = 0.5
    status: str = "active"
    value: object = None
    last_access: datetime = NOW


class GraphRuntime:
    """A whole (tiny) memory: topics with EXTENDS / ASSOCIATES edges, a clock, an action log."""

    def __init__(self, topics: list[Topic], interactions: int = 0) -> None:
        self.topics = topics
        self.interactions = interactions
        self.calls: list[tuple] = []
        self.functions: list[str] = []
        self.hints: list[tuple[str, object]] = []

    def attribute(self, obj, name):
        return getattr(obj, name)

    def relation(self, name, bindings, salience_below=None):
        if salience_below is not None:
            self.hints.append((name, salience_below))
        if name == "dependent_topic":
            return list(bindings["topic"].extends)
        if name == "associated_topic":
            return list(bindings["topic"].associates)
        if name == "active_topics":
            return [t for t in self.topics if t.status == "active"]
        if name == "active_fields":
            return [f for t in self.topics for f in t.fields if f.status == "active"]
        if name == "interactions":
            return self.interactions
        raise KeyError(name)

    def function(self, name, args):
        self.functions.append(name)
        if name == "now":
            return NOW
        if name == "age":
            (x,) = args
            return NOW - (x if isinstance(x, datetime) else x.last_access)
        if name == "reliability":
            return 0.25
        raise KeyError(name)

    def act(self, action, args, evidence, policy, span):
        self.calls.append((action, args, evidence, policy, span))


def compiled(text: str, name: str | None = None):
    ps = load_text(text, "t.policy")
    return ps.policies[0] if name is None else next(p for p in ps.policies if p.name == name)


LISTING_1 = """POLICY propagate-on-change
ON field_updated
WHEN EXISTS dependent_topic
DO flag_for_revision(dependent_topic)
WITH evidence = {updated_field, timestamp}
"""


def test_listing_1_flags_extension_dependents_with_evidence_and_not_associates():
    launch, press, brand = Topic("Launch Milestones"), Topic("Press Release"), Topic("Brand Colors")
    site = Topic("Website Redesign", extends=[launch, press], associates=[brand])
    deadline = Field("deadline", site)
    rt = GraphRuntime([site, launch, press, brand])
    policy = compiled(LISTING_1)
    bindings = {"topic": site, "field": deadline, "entry": None, "old_value": "March 15",
                "new_value": "April 20", "updated_field": "deadline", "timestamp": NOW}
    assert policy.fire(bindings, rt) == 2
    assert [(a, args[0].title) for a, args, *_ in rt.calls] == [
        ("flag_for_revision", "Launch Milestones"), ("flag_for_revision", "Press Release")]
    for _, _, evidence, policy_name, span in rt.calls:
        assert evidence == {"evidence": {"updated_field": "deadline", "timestamp": NOW}}
        assert policy_name == "propagate-on-change" and span.line == 4


def test_listing_1_does_nothing_without_extension_dependents():
    site = Topic("Lunch", associates=[Topic("Food")])
    rt = GraphRuntime([site])
    assert compiled(LISTING_1).fire({"topic": site, "updated_field": "x", "timestamp": NOW}, rt) == 0
    assert rt.calls == []


def test_do_runs_once_per_binding_of_nested_exists():
    a, b = Topic("A"), Topic("B")
    a.fields = [Field("x", a, 0.1), Field("y", a, 0.9), Field("z", a, 0.05, status="hidden")]
    b.fields = [Field("w", b, 0.01)]
    rt = GraphRuntime([a, b])
    policy = compiled('POLICY p ON tick WHEN EXISTS t IN active_topics WHERE EXISTS f IN t.fields '
                      'WHERE f.status != "hidden" AND f.salience < 0.2 DO hide(f) WITH owner = t.title')
    assert policy.fire({"now": NOW, "timestamp": NOW}, rt) == 2
    assert [(c[1][0].name, c[2]) for c in rt.calls] == [("x", {"owner": "A"}), ("w", {"owner": "B"})]


def test_when_is_evaluated_before_any_action_of_the_firing():
    topics = [Topic("A", 0.01), Topic("B", 0.02)]

    class Archiving(GraphRuntime):
        def act(self, action, args, evidence, policy, span):
            super().act(action, args, evidence, policy, span)
            args[0].status = "archived"
            self.topics.append(Topic("late", 0.0))  # would be seen if WHEN were lazy

    rt = Archiving(topics)
    policy = compiled("POLICY p ON tick WHEN EXISTS t IN active_topics WHERE t.salience < 0.05 DO archive(t)")
    assert policy.fire({"now": NOW, "timestamp": NOW}, rt) == 2


def test_without_when_each_action_runs_once_and_a_false_when_runs_none():
    t = Topic("A")
    f = Field("x", t)
    rt = GraphRuntime([t])
    p = compiled("POLICY r ON retrieved DO reinforce(field, reinforce_amount), reinforce(topic, 0.25)")
    assert p.fire({"topic": t, "field": f, "query": None, "timestamp": NOW}, rt) == 2
    assert [(c[0], c[1][1]) for c in rt.calls] == [("reinforce", 0.5), ("reinforce", 0.25)]
    p = compiled('POLICY r ON retrieved WHEN query = "never" DO reinforce(field, 1)')
    assert p.fire({"topic": t, "field": f, "query": None, "timestamp": NOW}, rt) == 0


@pytest.mark.parametrize("cond,expected", [
    ("query = null", True),
    ("query != null", False),
    ("field.salience > 0.4 AND field.salience <= 0.5", True),
    ("query < \"a\" OR query >= \"a\"", False),  # ordering against null is false
    ("NOT (query < \"a\")", True),
    ("now() - timestamp < 1h", True),
    ("timestamp - 2h > now() - 3h", True),
    ("age(field) >= 0s", True),
    ("timestamp > 2026-03-14 AND timestamp < 2026-03-15T10:00:01Z", True),
    ("field.name IN {\"x\", \"y\"}", True),
    ("\"ad\" IN topic.title", True),
    ("count(topic.fields) = 1 AND max(1, 2) = 2 AND min(1, 2) = 1 AND abs(-3) = 3", True),
    ("reliability(field) * 4 = 1", True),
    ("1 / 0 = null", True),
    ("field.salience * 2 + 1 = 2", True),
    ("EXISTS t IN active_topics WHERE t.title = \"Road\"", True),
    ("NOT EXISTS t IN active_topics WHERE t.title = \"Nope\"", True),
    ("interactions = 7", True),
    ("1d / 12h = 2 AND 2 * 1h = 120m", True),
    # Names (titles, aliases, field names) are compared by canonical key; other texts exactly.
    ("topic.title = \"road\" AND \"ROAD\" = topic.title AND topic.title = \" road! \"", True),
    ("topic.title != \"road\"", False),
    ("\"ops team\" IN topic.aliases AND field.name IN [\"X\", \"y\"] AND \"R\" IN topic.title", True),
    ("topic.title + \"\" = \"road\"", False),
    ("topic.title = null", False),
    ("lower(topic.title) = \"road\" AND canon(\" Web_Site! \") = \"web site\" AND lower(null) = null", True),
    ("matches(topic.title, \"^Ro\") AND NOT matches(topic.title, \"^ro\")", True),
    ("matches(query, \"x\") = null", True),
])
def test_condition_semantics(cond, expected):
    t = Topic("Road")
    f = Field("x", t)
    t.fields = [f]
    rt = GraphRuntime([t], interactions=7)
    p = compiled(f"POLICY p ON retrieved WHEN {cond} DO contest(field)")
    assert p.fire({"topic": t, "field": f, "query": None, "timestamp": NOW}, rt) == int(expected)


def test_pure_functions_do_not_reach_the_runtime():
    t = Topic("A")
    rt = GraphRuntime([t])
    compiled("POLICY p ON tick WHEN count(active_topics) = 1 AND abs(-1) = 1 DO reject(\"x\")").fire(
        {"now": NOW, "timestamp": NOW}, rt)
    assert rt.functions == [] and len(rt.calls) == 1


def test_records_are_read_by_the_policy_itself():
    t = Topic("A")
    rt = GraphRuntime([t])
    p = compiled('POLICY p ON flagged WHEN evidence.updated_field = "deadline" AND evidence.missing = null '
                 'DO annotate(topic, "why", evidence.timestamp)')
    assert p.fire({"topic": t, "origin": t, "evidence": {"updated_field": "deadline", "timestamp": "T"},
                   "timestamp": NOW}, rt) == 1
    assert rt.calls[0][1] == [t, "why", "T"]


def test_value_helpers():
    assert truth(True) and not truth(1) and not truth(None) and not truth("yes")
    assert equal(None, None) and not equal(True, 1) and equal(1, 1.0)
    assert member("a", ["a"]) and member("a", {"a": 1}) and not member("a", None) and member("b", "abc")


# ---- settings ---------------------------------------------------------------------------------


ANY_POLICY = 'POLICY p ON tick DO reject("x")\n'


def test_settings_compile_to_callables_with_defaults():
    ps = load_text("SET half_life = 2w\nSET active_bound = 100 + 2 * interactions\n" + ANY_POLICY, "s.policy")
    rt = GraphRuntime([], interactions=5)
    assert ps.settings["half_life"](rt) == timedelta(weeks=2)
    assert ps.setting("active_bound", rt) == 110
    assert ps.settings["reinforce_amount"](rt) == 0.5
    assert ps.settings["cascade_depth"](rt) == 8
    assert load_text(ANY_POLICY, "e.policy").settings["active_bound"](rt) is None


def test_policies_read_settings():
    t = Topic("A")
    rt = GraphRuntime([t])
    p = compiled("SET relevance_floor = 0.6\nPOLICY p ON retrieved WHEN field.salience < relevance_floor "
                 "DO reinforce(field, reinforce_amount)")
    assert p.fire({"topic": t, "field": Field("x", t, 0.5), "query": None, "timestamp": NOW}, rt) == 1


# ---- the policy set ---------------------------------------------------------------------------


def test_policies_are_ordered_by_priority_then_name():
    ps = load_text('POLICY b ON tick DO reject("b")\nPOLICY a ON tick DO reject("a")\n'
                   'POLICY z PRIORITY 5 ON tick OR commit DO reject("z")', "o.policy")
    assert [p.name for p in ps.policies] == ["z", "a", "b"]
    assert [p.name for p in ps.triggered_by("commit")] == ["z"]
    assert ps.policies[0].events == frozenset({"tick", "commit"})
    assert ps.policies[0].actions == ("reject",)


def test_source_hash_is_stable_under_formatting_and_changes_with_meaning():
    a = load_text("POLICY p ON tick DO reject(\"x\")").policies[0]
    b = load_text("# note\nPOLICY   p\n  ON tick\n  DO reject( \"x\" )\n").policies[0]
    c = load_text("POLICY p ON tick DO reject(\"y\")").policies[0]
    assert a.source_hash == b.source_hash != c.source_hash
    assert load_text("SET half_life = 1d\n" + ANY_POLICY).hash != load_text("SET half_life = 2d\n" + ANY_POLICY).hash


def test_compile_takes_only_checked_input():
    with pytest.raises(TypeError):
        compile(parse("POLICY p ON tick DO reject(\"x\")"))
    assert isinstance(compile(check(parse("POLICY p ON tick DO reject(\"x\")"))), PolicySet)


def test_load_combines_files_and_their_diagnostics(tmp_path):
    a = tmp_path / "a.policy"
    b = tmp_path / "b.policy"
    a.write_text("POLICY a ON tick DO reject(\"a\")\n")
    b.write_text("POLICY b ON tick DO reject(\"b\")\n")
    assert [p.name for p in load([a, b], defaults=False).policies] == ["a", "b"]
    b.write_text("POLICY a ON tick DO reject(\"b\")\nPOLICY c ON nope DO reject(\"c\")\n")
    with pytest.raises(PolicyCheckError) as info:
        load([a, b], defaults=False)
    assert [d.code for d in info.value.diagnostics] == ["gem_duplicate_policy", "gem_unknown_event"]
    a.write_text("POLICY a ON tick\n")
    b.write_text("POLICY b ON tick WITH x = 1 DO y()\n")
    with pytest.raises(PolicySyntaxError) as info:
        load([b, a])
    assert [(d.file, d.code) for d in info.value.diagnostics] == [
        (str(b), "gem_with_before_do"), (str(a), "gem_missing_do")]
    with pytest.raises(InvalidInput, match="no such policy file"):
        load([tmp_path / "missing.policy"])


def test_load_sources_and_available_actions():
    ps = load_sources([("x.policy", "POLICY p ON tick DO reject(\"x\")")], available_actions={"reject"})
    assert ps.sources[0].file == "x.policy" and len(ps.sources[0].hash) == 64
    with pytest.raises(PolicyCheckError, match="gem_action_unavailable"):
        load_sources([("x.policy", "POLICY p ON tick WHEN EXISTS t IN active_topics DO archive(t)")],
                     available_actions={"reject"})


def test_the_default_policy_compiles_and_reinforces_on_retrieval():
    ps = load([])
    names = [p.name for p in ps.policies]
    assert "propagate-on-change" in names and "reinforce-on-retrieval" in names
    t = Topic("A")
    f = Field("x", t)
    rt = GraphRuntime([t])
    for p in ps.triggered_by("retrieved"):
        p.fire({"topic": t, "field": f, "query": "x", "timestamp": NOW}, rt)
    assert [(c[0], c[1][0]) for c in rt.calls] == [("reinforce", f), ("reinforce", t)]


# ---- composition ------------------------------------------------------------------------------

DEFAULT_NAMES = ["propagate-on-change", "reinforce-on-retrieval", "reinforce-on-ingest", "contest-unreliable-conflict",
                 "compress-faded-fields", "hide-faded-fields", "archive-faded-topics",
                 "reinforce-episodes", "compress-faded-episodes", "hide-faded-episodes",
                 "reinforce-associated-episodes", "stale-when-moved"]


def test_load_composes_the_default_policy_first_unless_told_otherwise(tmp_path):
    mine = tmp_path / "mine.policy"
    mine.write_text("OVERRIDE SET half_life = 7d\nDISABLE POLICY hide-faded-fields\n"
                    'POLICY note-archived ON archived DO annotate(topic, "archived_at", timestamp)\n')
    ps = load([mine])
    assert [s.file for s in ps.sources] == [str(default_policy_path()), str(mine)]
    assert sorted(p.name for p in ps.policies) == sorted(set(DEFAULT_NAMES) - {"hide-faded-fields"} | {"note-archived"})
    rt = GraphRuntime([])
    assert ps.setting("half_life", rt) == timedelta(days=7) and ps.setting("reinforce_amount", rt) == 0.5
    assert ps.warnings == ()
    with pytest.raises(PolicyCheckError, match="gem_nothing_to_override: no earlier file sets 'half_life'"):
        load([mine], defaults=False)


def test_the_default_governance_is_never_silently_dropped(tmp_path):
    assert load([]).hash == load_sources([], defaults=True).hash == load([default_policy_path()], defaults=False).hash
    with pytest.raises(InvalidInput, match="^paths is empty and defaults=False: that would leave no governance"):
        load([], defaults=False)
    with pytest.raises(InvalidInput, match="^sources is empty and defaults=False"):
        load_sources([])
    with pytest.raises(InvalidInput, match="^policies is empty and defaults=False"):
        load_sources([], argument="policies")
    empty = tmp_path / "empty.policy"
    empty.write_text("# nothing yet\n")
    assert load([empty]).hash == load([]).hash  # an empty file adds nothing to the defaults
    with pytest.raises(PolicyCheckError, match="gem_no_policies"):
        load([empty], defaults=False)
    with pytest.raises(InvalidInput, match=r"^paths\[0\] is the default policy, which defaults=True composes first"):
        load([default_policy_path()])
    with pytest.raises(InvalidInput, match=r"^sources\[1\] is the default policy"):
        load_sources([("a.policy", "# a\n"), (str(default_policy_path()), "")], defaults=True)


def test_a_stored_composition_loads_back_to_the_same_set(tmp_path):
    mine = tmp_path / "mine.policy"
    mine.write_text("OVERRIDE POLICY reinforce-on-retrieval ON retrieved DO reinforce(field, 1), reinforce(topic, 1)\n")
    ps = load([mine])
    again = load_sources([(s.file, s.text) for s in ps.sources])  # defaults=False: the sources are the whole set
    assert again.hash == ps.hash and again.sources == ps.sources
    assert load_sources(list(ps.sources)).hash == ps.hash


def test_an_override_compiles_like_the_same_policy_defined_plainly():
    plain = load_text("POLICY reinforce-on-retrieval ON retrieved DO reinforce(field, 1), reinforce(topic, 1)\n"
                      + _FLAGS)
    base = "POLICY reinforce-on-retrieval ON retrieved DO reinforce(topic, 2)\n" + _FLAGS
    over = load_sources([("base.policy", base),
                         ("mine.policy", "OVERRIDE POLICY reinforce-on-retrieval ON retrieved DO "
                                         "reinforce(field, 1), reinforce(topic, 1)\n")])
    p = next(p for p in over.policies if p.name == "reinforce-on-retrieval")
    assert p.source.startswith("POLICY reinforce-on-retrieval\n") and p.span.file == "mine.policy"
    assert over.hash == plain.hash


def test_warnings_come_back_with_the_policy_set():
    ps = load_text("POLICY reads ON retrieved DO reinforce(field, 1), reinforce(topic, 1)\n", "r.policy")
    assert [(w.code, w.severity) for w in ps.warnings] == [("gem_c3_no_propagation", "warning")]
    assert load_text(ANY_POLICY + "POLICY reads ON retrieved DO reinforce(topic, 1)\n" + _FLAGS).warnings == ()


def test_load_sources_refuses_what_is_not_a_list_of_sources():
    with pytest.raises(InvalidInput, match="sources must be a list of policy sources, not one str"):
        load_sources("POLICY p ON tick DO reject(\"x\")")
    with pytest.raises(InvalidInput,
                       match=r"sources\[1\] must be a Source or a \(file, text\) pair of str, got NoneType"):
        load_sources([("a", ANY_POLICY), None])


_FLAGS = "POLICY flags ON field_updated WHEN EXISTS dependent_topic DO flag_for_revision(dependent_topic)\n"


# ---------------------------------------------------------------------- salience pushdown
def test_a_salience_bound_in_where_is_passed_to_the_runtime_and_where_still_decides():
    t = Topic("A", fields=[])
    t.fields = [Field("x", t, salience=0.1), Field("y", t, salience=0.2), Field("z", t, salience=0.9)]
    rt = GraphRuntime([t])
    ps = load_text("POLICY p ON tick WHEN EXISTS f IN active_fields "
                   "WHERE f.status = \"active\" AND f.salience < 0.15 + 0.05 DO compress(f)\n",
                   available_actions={"compress"})
    ps.policies[0].fire({"now": NOW}, rt)
    assert rt.hints == [("active_fields", 0.2)]
    assert [c[1][0].name for c in rt.calls] == ["x"]  # the runtime returned all three


def test_no_bound_is_passed_for_other_comparisons_or_a_bound_naming_the_variable():
    t = Topic("A", fields=[])
    t.fields = [Field("x", t, salience=0.1)]
    for where in ("f.salience > 0.3", "f.salience < f.salience", "NOT f.salience < 0.3",
                  "f.salience < 0.3 OR f.status = \"hidden\""):
        rt = GraphRuntime([t])
        ps = load_text(f"POLICY p ON tick WHEN EXISTS f IN active_fields WHERE {where} DO compress(f)\n",
                       available_actions={"compress"})
        ps.policies[0].fire({"now": NOW}, rt)
        assert rt.hints == [], where


@pytest.mark.slow
@settings(max_examples=150, deadline=None)
@given(st.lists(st.tuples(st.one_of(st.none(), st.floats(0, 1), st.just(0.3), st.text(max_size=2),
                                    st.booleans()),
                          st.sampled_from(["active", "archived"])), max_size=8),
       st.sampled_from(["<", "<=", ">", ">=", "=", "!="]),
       st.sampled_from(["0.3", "null", "interactions / 10", "-1", "0"]))
def test_a_one_comparison_where_binds_exactly_what_the_general_solver_binds(units, op, bound):
    """`EXISTS x IN s WHERE x.attr <op> bound` runs as one loop (gem/policy/evaluate.py
    _attribute_filter); with `AND true` added the general solver runs instead. Same calls,
    same order, whatever the values the runtime hands back (nulls, strings, booleans) and the
    bound (null, computed)."""
    def fire(where: str) -> list:
        topics = [Topic(f"t{i}", salience=s, status=status)  # type: ignore[arg-type]
                  for i, (s, status) in enumerate(units)]
        rt = GraphRuntime(topics, interactions=3)
        compiled(f"POLICY p ON tick WHEN EXISTS t IN active_topics WHERE {where} DO archive(t)"
                 ).fire({"now": NOW, "timestamp": NOW}, rt)
        return [c[1][0].title for c in rt.calls]

    assert fire(f"t.salience {op} {bound}") == fire(f"t.salience {op} {bound} AND true")
