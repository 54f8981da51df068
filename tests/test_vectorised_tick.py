"""A tick policy run as a plan on the derived columns moves exactly the units that per-unit
evaluation moves (gem/policy/vectorise.py, gem/operators/tick_plan.py).

Two memories are built by the same random operations; one runs its tick policies as plans,
the other with the plans taken away (per unit, as before). Their forgetting passes must
report the same moves and log the same record content, pass after pass.
"""
from __future__ import annotations

import dataclasses
import math
import os
import tempfile
from datetime import datetime, timedelta, timezone

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import gem
from conftest import ENGINE
from gem.policy import compiler
from gem.policy.vectorise import per_unit_because

RELATIONS = {"active_fields": ("compress", "hide"), "visible_fields": ("compress", "hide"),
             "active_topics": ("archive",), "active_episodes": ("compress", "hide"),
             "visible_episodes": ("compress", "hide")}
LADDER_OFF = "".join(f"DISABLE POLICY {name}\n" for name in (
    "compress-faded-fields", "hide-faded-fields", "archive-faded-topics",
    "compress-faded-episodes", "hide-faded-episodes"))


FRESH = -math.expm1(-0.5)  # the salience a fact's reinforcement gives a new unit
EXACT = [repr(FRESH), repr(FRESH / 2), repr(FRESH / 4)]


class Clock:
    def __init__(self) -> None:
        self.now = datetime(2026, 1, 1, tzinfo=timezone.utc)

    def __call__(self) -> datetime:
        return self.now


def predicate(relation: str, draw) -> str:
    # Salience straddles the bounds; EXACT is what a unit stated once holds after whole
    # half-lives, where numpy's decay and gem/salience.py's may differ in the last bit.
    bound = draw(st.one_of(st.sampled_from(["0.15", "0.3", "1", "0", "half", "0.1 + 0.2", *EXACT]),
                           st.integers(1, 400).map(lambda n: str(n / 1000))))
    op = draw(st.sampled_from(["<", "<=", ">", ">=", "=", "!="]))
    atoms = [f"x.salience {op} {bound}" if bound != "half" else f"x.salience {op} 0.5 * 1"]
    if relation.endswith("fields"):
        atoms += [f"x.status = \"{draw(st.sampled_from(['active', 'compressed', 'hidden']))}\"",
                  f"\"{draw(st.sampled_from(['pii', 'keep', 'other']))}\" IN x.labels"]
    atoms += [f"{bound if bound != 'half' else '0.5'} > x.salience"]
    depth = draw(st.integers(0, 2))
    expr = draw(st.sampled_from(atoms))
    for _ in range(depth):
        other = draw(st.sampled_from(atoms))
        form = draw(st.sampled_from(["({a}) AND ({b})", "({a}) OR ({b})", "NOT ({a})"]))
        expr = form.format(a=expr, b=other)
    return expr


@st.composite
def scenarios(draw):
    policies = []
    for i in range(draw(st.integers(1, 4))):
        relation = draw(st.sampled_from(sorted(RELATIONS)))
        actions = draw(st.lists(st.sampled_from(RELATIONS[relation]), min_size=1, max_size=2))
        policies.append(f"POLICY p{i} PRIORITY {draw(st.integers(0, 40))}\nON tick\n"
                        f"WHEN EXISTS x IN {relation} WHERE {predicate(relation, draw)}\n"
                        f"DO {', '.join(f'{a}(x)' for a in actions)}\n")
    steps = draw(st.lists(st.tuples(
        st.sampled_from(["ingest", "retrieve", "episode", "wait", "forget"]),
        st.integers(0, 5), st.integers(0, 3), st.sampled_from([(), ("pii",), ("keep",)])),
        min_size=3, max_size=14))
    half_lives = draw(st.sampled_from(["", "SET label_half_life = {pii: 2d, keep: null}\n"]))
    return LADDER_OFF + half_lives + "\n".join(policies), steps


def per_unit(mem) -> None:
    """Take the plans away: every policy is evaluated per unit."""
    shared = mem._engine.shared
    ps = shared.policies
    shared.install(dataclasses.replace(
        ps, policies=tuple(dataclasses.replace(p, plan=None) for p in ps.policies)))


def play(mem, clock: Clock, steps) -> list:
    passes = []
    for kind, a, b, labels in steps:
        if kind == "ingest":
            mem.ingest([gem.Fact(f"Topic {a}", f"field {b}", f"value {a}.{b}.{len(passes)}",
                                 labels=list(labels)),
                        gem.Fact(f"Topic {a + 1}", f"field {b}", f"other {a}", labels=list(labels))])
        elif kind == "retrieve":
            mem.retrieve(topic=f"Topic {a}")
        elif kind == "episode":
            mem.ingest(gem.Episode(text=f"turn {a} {b}", source="chat"))
        elif kind == "wait":
            clock.now += timedelta(days=[1, 30, 7, 60][b]) if a % 2 else timedelta(hours=a * 97 + b)
        else:
            passes.append(forget_pass(mem))
    passes.append(forget_pass(mem))
    return passes


def forget_pass(mem) -> tuple:
    """A forgetting pass: what it reports moving, and its log record's parts."""
    report = mem.forget()
    record = mem.transitions(since=report["transition"] - 1)[-1]
    return (report["level_ids"], record["units"], record["policies"], record["detail"],
            record["writes"], record["salience"])


def both_ways(text: str, steps, check=lambda mem: None) -> list:
    """`steps` played on two memories under the policies `text`: one running the plans, one
    evaluating every policy per unit. `check(mem)` runs on each as it opens."""
    results = []
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "rules.policy")
        with open(path, "w") as f:
            f.write(text)
        for mode in ("plan", "per unit"):
            clock = Clock()
            mem = gem.open(os.path.join(d, mode.replace(" ", "_")), policies=[path], clock=clock,
                           engine=ENGINE)
            try:
                check(mem)
                if mode == "per unit":
                    per_unit(mem)
                results.append(play(mem, clock, steps))
                assert mem.audit(full=True).ok
            finally:
                mem.close()
    return results


@settings(max_examples=int(os.environ.get("GEM_VECTORISED_EXAMPLES", "25")), deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(scenarios())
def test_a_plan_moves_exactly_what_per_unit_evaluation_moves(scenario):
    text, steps = scenario

    def every_generated_policy_has_a_plan(mem) -> None:
        planned = [p.name for p in mem.policies if p.plan is not None]
        assert planned == [p.name for p in mem.policies if p.name[1:].isdigit()]
    results = both_ways(text, steps, every_generated_policy_has_a_plan)
    assert results[0] == results[1]


def test_the_default_ladder_runs_as_plans_and_other_shapes_per_unit():
    ps = compiler.load([])
    planned = {p.name for p in ps if p.plan is not None}
    assert planned == {"compress-faded-fields", "hide-faded-fields", "archive-faded-topics",
                       "compress-faded-episodes", "hide-faded-episodes"}
    odd = compiler.load_text(
        "POLICY a\nON tick\nWHEN EXISTS f IN active_fields WHERE f.history_length > 2\nDO compress(f)\n"
        "POLICY b\nON tick\nWHEN EXISTS f IN active_fields WHERE f.salience < 0.3\nDO compress(f)\n"
        "WITH evidence = {now}\n"
        "POLICY c\nON tick\nWHEN EXISTS f IN active_fields WHERE f.salience < 0.3\n"
        "DO flag_for_revision(f.topic)\n")
    assert [p.plan for p in odd] == [None, None, None]
    from gem.policy.parser import parse_all
    (tree,) = parse_all([("x.policy", "POLICY a\nON tick\nWHEN EXISTS f IN active_fields "
                                      "WHERE f.history_length > 2\nDO compress(f)\n")])
    assert "f.history_length" in (per_unit_because(tree.policies[0]) or "")


def test_units_on_a_bound_and_units_the_pass_changed_are_decided_as_per_unit():
    """Fields stated once sit exactly on FRESH / 2 after one half-life, and the second policy
    walks fields the first one compressed in the same pass."""
    text = LADDER_OFF + "".join(
        f"POLICY p{i} PRIORITY {9 - i}\nON tick\nWHEN EXISTS x IN {rel} WHERE x.salience {op} {b}\n"
        f"DO {act}(x)\n\n"
        for i, (rel, op, b, act) in enumerate([
            ("active_fields", "<=", EXACT[1], "compress"),
            ("visible_fields", "<", EXACT[1], "hide"),
            ("visible_fields", ">=", EXACT[1], "compress"),
            ("active_topics", "<=", EXACT[1], "archive")])) + \
        "POLICY p4\nON tick\nWHEN EXISTS x IN visible_fields WHERE x.status = \"compressed\" " \
        "AND x.salience < 1\nDO hide(x)\n"
    steps = [("ingest", a, b, ()) for a in range(0, 6, 2) for b in range(3)] + \
        [("wait", 1, 1, ()), ("retrieve", 2, 0, ())]
    results = both_ways(text, steps)
    assert results[0][0][0]  # the pass moved units
    assert results[0] == results[1]


def test_policy_explain_says_which_tick_policies_run_vectorised_and_why_others_do_not(tmp_path, capsys):
    from gem.cli import main
    odd = tmp_path / "odd.policy"
    odd.write_text("POLICY odd\nON tick\nWHEN EXISTS f IN active_fields WHERE f.history_length > 3\n"
                   "DO compress(f)\n")
    assert main(["policy", "explain", str(odd)]) == 0
    out = capsys.readouterr().out
    assert "  compress-faded-fields: vectorised, on the salience, status and labels columns" in out
    assert "  odd: per unit (WHERE compares f.history_length the columns do not hold)" in out
