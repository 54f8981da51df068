"""fmt round trips, explain, and the `gem policy` commands with their exit codes."""
from __future__ import annotations

import argparse
import io
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from strategies import exprs, files

from gem.policy import ast as A
from gem.policy import compose, default_policy_path, explain, fmt, parse
from gem.policy.cli import add_policy_parser, run_policy
from gem.policy.fmt import fmt_expr

REPO = Path(__file__).resolve().parents[2]
POLICY_FILES = sorted((REPO / "policies").glob("*.policy"))


# ---- fmt ------------------------------------------------------------------------------------


@pytest.mark.parametrize("path", POLICY_FILES, ids=lambda p: p.name)
def test_fmt_round_trips_and_is_idempotent_on_every_shipped_policy(path):
    tree = parse(path.read_text(), str(path))
    text = fmt(tree)
    assert parse(text, str(path)) == tree
    assert fmt(parse(text)) == text


def test_the_shipped_default_policy_is_already_canonical_and_starts_with_listing_1():
    text = default_policy_path().read_text()
    assert fmt(parse(text)) == text
    assert ("POLICY propagate-on-change\nON field_updated\nWHEN EXISTS dependent_topic\n"
            "DO flag_for_revision(dependent_topic)\nWITH evidence = {updated_field, timestamp}\n") in text
    assert parse(text).policies[0].name == "propagate-on-change"


@pytest.mark.slow
@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(files)
def test_parse_fmt_round_trip_on_generated_trees(tree):
    assert parse(fmt(tree), "gen") == tree


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(exprs)
def test_fmt_expr_round_trip_on_generated_expressions(e):
    assert parse(f"SET x = {fmt_expr(e)}").settings[0].expr == e


def test_canonical_layout_keeps_comments():
    src = ("# head\nPOLICY  p PRIORITY 2 ON tick   OR commit WHEN (a AND b) OR NOT (c) DO x( 1 ,2 ) "
           "WITH k = {\"z z\": 1, y: -(-1)}  # tail\nSET half_life=30d\n# end\n")
    assert fmt(parse(src)) == (
        "SET half_life = 30d\n"
        "\n"
        "# head\n"
        "POLICY p PRIORITY 2\n"
        "ON tick OR commit\n"
        "WHEN a AND b OR NOT c\n"
        "DO x(1, 2)\n"
        'WITH k = {"z z": 1, y: - -1}  # tail\n'
        "\n"
        "# end\n"
    )


def test_canonical_layout_of_a_composing_file():
    src = ("# faster\nOVERRIDE   POLICY archive-faded-topics ON tick "
           "WHEN EXISTS t IN active_topics WHERE t.salience < 0.1 DO archive(t)\n"
           "DISABLE POLICY hide-faded-fields  # never hide\n"
           "OVERRIDE SET half_life=7d\nDISABLE POLICY compress-faded-fields\n")
    text = fmt(parse(src))
    assert text == (
        "OVERRIDE SET half_life = 7d\n"
        "\n"
        "DISABLE POLICY hide-faded-fields  # never hide\n"
        "DISABLE POLICY compress-faded-fields\n"
        "\n"
        "# faster\n"
        "OVERRIDE POLICY archive-faded-topics\n"
        "ON tick\n"
        "WHEN EXISTS t IN active_topics WHERE t.salience < 0.1\n"
        "DO archive(t)\n"
    )
    assert parse(text) == parse(src) and fmt(parse(text)) == text
    assert fmt(parse("DISABLE POLICY a\n")) == "DISABLE POLICY a\n"


def test_fmt_parenthesises_only_where_needed():
    assert fmt_expr(parse("SET x = (a + b) * (c - (d - e))").settings[0].expr) == "(a + b) * (c - (d - e))"
    assert fmt_expr(A.Attr(A.Binary("+", A.Name("a"), A.Name("b")), "c")) == "(a + b).c"
    assert fmt_expr(A.Compare("<", A.Compare("<", A.Name("a"), A.Name("b")), A.Name("c"))) == "(a < b) < c"
    ew = A.Exists("x", None, A.Name("c"))
    assert fmt_expr(A.Binary("AND", A.Name("a"), ew)) == "a AND EXISTS x WHERE c"
    assert fmt_expr(A.Binary("AND", ew, A.Name("a"))) == "(EXISTS x WHERE c) AND a"


# ---- explain --------------------------------------------------------------------------------


def test_explain_names_triggers_cascades_loops_and_settings():
    text = explain(parse(
        "SET half_life = 7d\n"
        "POLICY spread ON flagged WHEN EXISTS dependent_topic DO propagate(dependent_topic)\n"
        "POLICY watch PRIORITY 3 ON field_updated WHEN EXISTS dependent_topic DO flag_for_revision(dependent_topic)\n"
        "POLICY odd ON nope DO frobnicate()\n"))
    assert "  field_updated\n    -> watch [priority 3]: WHEN EXISTS dependent_topic DO flag_for_revision" in text
    assert "  nope  (unknown event)" in text
    assert "  watch: flag_for_revision -> flagged -> spread" in text
    assert "  odd: frobnicate (unknown action)" in text
    assert "  bounded: 'spread' -[propagate]-> flagged acts on an element of dependent_topic" in text
    assert "  half_life = 7d\n" in text and "  reinforce_amount = 0.5 (default)" in text


def test_explain_lists_composition_problems_instead_of_raising():
    text = explain(parse("DISABLE POLICY nope\nPOLICY r ON retrieved DO reinforce(topic, 1)", "m.policy"))
    assert ("Composition problems (gem policy check reports them):\n"
            "  m.policy:1:16: gem_nothing_to_disable: no earlier file defines policy 'nope'\n") in text
    assert ("  C6 needs a policy that reinforces on 'retrieved': r\n"
            "  C3 needs a policy that flags dependents on 'field_updated': none (warning gem_c3_no_propagation)\n"
            ) in text


@pytest.mark.slow
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(files, max_size=3))
def test_explain_and_compose_never_raise_on_any_composition_of_parsed_trees(trees):
    comp = compose(trees)
    in_force = {p.name for p in comp.policies}
    for f in trees[1:]:
        # what a later file DISABLEs without redefining it later is never in force
        for d in f.disables:
            if not any(p.name == d.name for g in trees[trees.index(f):] for p in g.policies):
                assert d.name not in in_force
    assert isinstance(explain(trees), str)


def test_explain_shows_unbounded_loops():
    text = explain(parse("POLICY a ON flagged DO flag_for_revision(topic)"))
    assert "  UNBOUNDED: 'a' -[flag_for_revision]-> flagged -> 'a'" in text


# ---- CLI --------------------------------------------------------------------------------------


def run(*argv: str) -> tuple[int, str, str]:
    parser = argparse.ArgumentParser(prog="gem")
    add_policy_parser(parser.add_subparsers(dest="command", required=True))
    out, err = io.StringIO(), io.StringIO()
    rc = run_policy(parser.parse_args(["policy", *argv]), out, err)
    return rc, out.getvalue(), err.getvalue()


THREE_MISTAKES = """POLICY p
ON field_updatd
WHEN EXISTS dependent_topic
DO flag_for_revison(dependent_topic)

POLICY q
ON retrieved
DO reinforce(field, old_value)
"""


def test_check_clean_file_exits_0():
    rc, out, err = run("check", "--no-defaults", str(default_policy_path()))
    assert (rc, out, err) == (0, "ok: 1 file, 12 policies in force\n", "")


def test_check_composes_the_default_policy_first(tmp_path):
    mine = tmp_path / "mine.policy"
    mine.write_text("OVERRIDE SET half_life = 7d\nDISABLE POLICY hide-faded-fields\n")
    assert run("check", str(mine)) == (0, "ok: 1 file on the default policy, 11 policies in force\n", "")
    rc, out, err = run("check", "--no-defaults", str(mine))
    assert (rc, out) == (1, "")
    assert err.startswith(f"{mine}:1:14: gem_nothing_to_override: no earlier file sets 'half_life'\n")
    assert err.endswith("2 problems found\n")
    rc, out, err = run("check", str(default_policy_path()))
    assert (rc, out) == (2, "")
    assert err == (f"gem policy: {default_policy_path()} is the default policy, which is composed first already: "
                   "leave it out, or use --no-defaults\n")


def test_check_prints_warnings_and_fails_on_them_only_when_strict(tmp_path):
    mine = tmp_path / "mine.policy"
    mine.write_text("# reads are not reinforced here\nDISABLE POLICY reinforce-on-retrieval\n")
    rc, out, err = run("check", str(mine))
    assert (rc, out) == (0, "ok: 1 file on the default policy, 11 policies in force, 1 warning\n")
    assert err == (
        f"{mine}:2:16: warning: gem_c6_no_reinforcement: no policy reinforces on 'retrieved', so C6 will reject "
        "every retrieval that returns something\n"
        "DISABLE POLICY reinforce-on-retrieval\n"
        "               ^^^^^^^^^^^^^^^^^^^^^^\n"
        "hint: this took 'reinforce-on-retrieval', the last policy that reinforced on 'retrieved', out of force\n"
        "1 warning found\n"
    )
    rc, out, strict_err = run("check", "--strict", str(mine))
    assert (rc, out, strict_err) == (1, "", err)


def test_check_three_mistakes_prints_three_caret_diagnostics_and_exits_1(tmp_path):
    path = tmp_path / "three.policy"
    path.write_text(THREE_MISTAKES)
    rc, out, err = run("check", str(path))
    assert rc == 1 and out == ""
    assert err == (
        f"{path}:2:4: gem_unknown_event: unknown event 'field_updatd'\n"
        "ON field_updatd\n"
        "   ^^^^^^^^^^^^\n"
        "hint: did you mean 'field_updated'?\n"
        f"{path}:4:4: gem_unknown_action: unknown action 'flag_for_revison'\n"
        "DO flag_for_revison(dependent_topic)\n"
        "   ^^^^^^^^^^^^^^^^\n"
        "hint: did you mean 'flag_for_revision'? actions: annotate, archive, clear_flags, compress, contest, drop, flag_for_revision, hide, link, mark_stale, merge, promote, propagate, reinforce, reinforce_associated, reject, restore, set_salience, supersede\n"
        f"{path}:8:21: gem_out_of_scope: 'old_value' is not bound by event 'retrieved'\n"
        "DO reinforce(field, old_value)\n"
        "                    ^^^^^^^^^\n"
        "hint: 'old_value' is bound by: field_updated\n"
        "3 problems found\n"
    )


def test_check_syntax_errors_exit_1_and_missing_files_exit_2(tmp_path):
    bad = tmp_path / "bad.policy"
    bad.write_text("POLICY p ON tick WITH a = 1 DO x()\n")
    rc, _, err = run("check", str(bad))
    assert rc == 1 and "gem_with_before_do" in err
    rc, _, err = run("check", str(tmp_path / "nope.policy"))
    assert rc == 2 and err == f"gem policy: no such policy file: {tmp_path / 'nope.policy'}\n"


def test_every_command_reports_a_file_that_is_not_utf8_as_a_diagnostic(tmp_path):
    bad = tmp_path / "bad.policy"
    bad.write_bytes(b"# caf\xe9\n")
    for command in ("check", "fmt", "explain"):
        rc, out, err = run(command, str(bad))
        assert (rc, out) == (1, "")
        assert err.startswith(f"{bad}:1:6: gem_not_utf8: the file is not UTF-8: byte 0xe9 (invalid continuation byte)")
    assert bad.read_bytes() == b"# caf\xe9\n"


def test_check_checks_files_together(tmp_path):
    a, b = tmp_path / "a.policy", tmp_path / "b.policy"
    a.write_text('POLICY same ON tick DO reject("a")\n')
    b.write_text('POLICY same ON tick DO reject("b")\n')
    assert run("check", str(a))[0] == 0
    rc, _, err = run("check", str(a), str(b))
    assert rc == 1 and "gem_duplicate_policy: policy 'same' is already defined at" in err
    b.write_text('OVERRIDE POLICY same ON tick DO reject("b")\n')
    assert run("check", str(a), str(b))[:2] == (0, "ok: 2 files on the default policy, 13 policies in force\n")


def test_fmt_rewrites_in_place_and_check_mode_reports(tmp_path):
    path = tmp_path / "x.policy"
    path.write_text("POLICY   p ON tick DO reject( \"x\" )")
    rc, out, _ = run("fmt", "--check", str(path))
    assert (rc, out) == (1, f"would reformat {path}\n")
    assert path.read_text() == "POLICY   p ON tick DO reject( \"x\" )"
    rc, out, _ = run("fmt", str(path))
    assert (rc, out) == (0, f"reformatted {path}\n")
    assert path.read_text() == 'POLICY p\nON tick\nDO reject("x")\n'
    assert run("fmt", "--check", str(path)) == (0, "", "")


def test_fmt_refuses_files_that_do_not_parse(tmp_path):
    path = tmp_path / "x.policy"
    path.write_text("POLICY p ON tick\n")
    rc, _, err = run("fmt", str(path))
    assert rc == 1 and "gem_missing_do" in err
    assert path.read_text() == "POLICY p ON tick\n"


def test_explain_command(tmp_path):
    rc, out, _ = run("explain", "--no-defaults", str(default_policy_path()))
    assert rc == 0 and "field_updated\n    -> propagate-on-change" in out
    assert "Files, composed" not in out


def test_explain_composes_the_default_policy_first_as_check_does(tmp_path):
    team = tmp_path / "team.policy"
    team.write_text("OVERRIDE SET half_life = 14d\nDISABLE POLICY hide-faded-fields\n")
    assert run("check", str(team))[0] == 0
    rc, out, _ = run("explain", str(team))
    assert rc == 0 and "Composition problems" not in out
    assert f"  {default_policy_path()}: 4 settings, 12 policies\n" in out
    assert "  half_life = 14d (OVERRIDE in team.policy)\n" in out
    # --no-defaults explains the file alone, as check --no-defaults checks it alone.
    assert run("check", "--no-defaults", str(team))[0] == 1
    rc, out, _ = run("explain", "--no-defaults", str(team))
    assert rc == 0 and "gem_nothing_to_override: no earlier file sets 'half_life'" in out


def test_explain_shows_the_composed_trigger_graph(tmp_path):
    mine = tmp_path / "mine.policy"
    mine.write_text("OVERRIDE SET half_life = 7d\nDISABLE POLICY hide-faded-fields\n"
                    "OVERRIDE POLICY archive-faded-topics PRIORITY 10\nON tick\n"
                    "WHEN EXISTS t IN active_topics WHERE t.salience < 0.01\nDO archive(t)\n")
    rc, out, _ = run("explain", str(mine))
    default = default_policy_path()
    assert rc == 0
    assert out.startswith(
        "Files, composed in this order:\n"
        f"  {default}: 4 settings, 12 policies\n"
        f"  {mine}: 1 setting, 1 policy, 1 disable\n"
        "Changes to earlier files:\n"
        f"  {mine}:1:14: OVERRIDE SET half_life (set at {default}:4:5)\n"
        f"  {mine}:2:16: DISABLE POLICY hide-faded-fields (defined at {default}:55:8)\n"
        f"  {mine}:3:17: OVERRIDE POLICY archive-faded-topics (defined at {default}:60:8)\n")
    assert ("  tick\n"
            "    -> compress-faded-episodes [priority 30] (default.policy): WHEN EXISTS e IN active_episodes "
            "WHERE e.salience < 0.15 DO compress\n"
            "    -> compress-faded-fields [priority 30] (default.policy): WHEN EXISTS f IN active_fields "
            "WHERE f.salience < 0.3 DO compress\n"
            "    -> hide-faded-episodes [priority 20] (default.policy): WHEN EXISTS e IN visible_episodes "
            "WHERE e.salience < 0.05 DO hide\n"
            "    -> archive-faded-topics [priority 10] (mine.policy): WHEN EXISTS t IN active_topics "
            "WHERE t.salience < 0.01 DO archive\n") in out
    assert ("Correctness conditions that need a policy:\n"
            "  C6 needs a policy that reinforces on 'retrieved': reinforce-on-retrieval\n"
            "  C3 needs a policy that flags dependents on 'field_updated': propagate-on-change\n") in out
    assert "  half_life = 7d (OVERRIDE in mine.policy)\n" in out
    rc, _, err = run("explain", str(default))
    assert rc == 2 and "leave it out, or use --no-defaults" in err


def test_usage_errors_exit_2():
    with pytest.raises(SystemExit) as info:
        run("frobnicate")
    assert info.value.code == 2


@pytest.mark.slow
def test_the_gem_command_mounts_policy(tmp_path):
    path = tmp_path / "three.policy"
    path.write_text(THREE_MISTAKES)
    code = "import sys; from gem.cli import main; sys.exit(main(sys.argv[1:]))"
    r = subprocess.run([sys.executable, "-c", code, "policy", "check", str(path)],
                       capture_output=True, text=True, cwd=REPO, timeout=120)
    assert r.returncode == 1
    assert r.stderr.count("^") == len("field_updatd") + len("flag_for_revison") + len("old_value")
    r = subprocess.run([sys.executable, "-m", "gem.policy.cli", "policy", "check", "--no-defaults",
                        str(default_policy_path())],
                       capture_output=True, text=True, cwd=REPO, timeout=120)
    assert r.returncode == 0, r.stderr


def test_check_warns_about_a_name_literal_that_is_not_canonical(tmp_path):
    path = tmp_path / "keys.policy"
    path.write_text('POLICY no-api-keys ON field_created WHEN field.name = "API key" DO drop(entry, "no")\n')
    rc, out, err = run("check", str(path))
    assert rc == 0 and out == "ok: 1 file on the default policy, 13 policies in force, 1 warning\n"
    assert f'{path}:1:55: warning: gem_name_not_canonical: names are compared by canonical key: "API key"' in err
    assert 'hint: write "api key"' in err
    assert run("check", "--strict", str(path))[0] == 1
