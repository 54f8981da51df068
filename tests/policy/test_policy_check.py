"""The checker: every diagnostic code with its exact rendered text, scopes, cascades."""
from __future__ import annotations

import pytest

from gem.errors import PolicyCheckError
from gem.policy import CODES, PASSES, check, default_policy_path, parse
from gem.policy import catalogue as C


def check_error(text: str, file: str = "c.policy", **kw) -> str:
    with pytest.raises(PolicyCheckError) as info:
        check(parse(text, file), **kw)
    return str(info.value)


def ok(text: str, **kw):
    return check(parse(text, "c.policy"), **kw)


EXACT = {
    "gem_unknown_event": (
        "POLICY p\nON field_updatd\nDO contest(field)",
        "c.policy:2:4: gem_unknown_event: unknown event 'field_updatd'\n"
        "ON field_updatd\n"
        "   ^^^^^^^^^^^^\n"
        "hint: did you mean 'field_updated'?",
    ),
    "gem_unknown_action": (
        "POLICY p ON field_updated WHEN EXISTS dependent_topic DO flag_for_revison(dependent_topic)",
        "c.policy:1:58: gem_unknown_action: unknown action 'flag_for_revison'\n"
        "POLICY p ON field_updated WHEN EXISTS dependent_topic DO flag_for_revison(dependent_topic)\n"
        "                                                         ^^^^^^^^^^^^^^^^\n"
        "hint: did you mean 'flag_for_revision'?",
    ),
    "gem_unknown_function": (
        "POLICY p ON retrieved WHEN reliabilty(field) > 0 DO contest(field)",
        "c.policy:1:28: gem_unknown_function: unknown function 'reliabilty'\n"
        "POLICY p ON retrieved WHEN reliabilty(field) > 0 DO contest(field)\n"
        "                           ^^^^^^^^^^\n"
        "hint: did you mean 'reliability'?",
    ),
    "gem_unknown_attribute": (
        "POLICY p ON retrieved WHEN field.salince > 0 DO contest(field)",
        "c.policy:1:34: gem_unknown_attribute: unknown attribute 'salince' of Field\n"
        "POLICY p ON retrieved WHEN field.salince > 0 DO contest(field)\n"
        "                                 ^^^^^^^\n"
        "hint: did you mean 'salience'?",
    ),
    "gem_unknown_setting": (
        "SET half_lif = 30d",
        "c.policy:1:5: gem_unknown_setting: unknown setting 'half_lif'\n"
        "SET half_lif = 30d\n"
        "    ^^^^^^^^\n"
        "hint: did you mean 'half_life'?",
    ),
    "gem_unbound_name": (
        "POLICY p ON retrieved WHEN fieldd.salience > 0 DO contest(field)",
        "c.policy:1:28: gem_unbound_name: unknown name 'fieldd'\n"
        "POLICY p ON retrieved WHEN fieldd.salience > 0 DO contest(field)\n"
        "                           ^^^^^^\n"
        "hint: did you mean 'field'?",
    ),
    "gem_out_of_scope": (
        'POLICY p ON retrieved DO annotate(field, "old", old_value)',
        "c.policy:1:49: gem_out_of_scope: 'old_value' is not bound by event 'retrieved'\n"
        'POLICY p ON retrieved DO annotate(field, "old", old_value)\n'
        "                                                ^^^^^^^^^\n"
        "hint: 'old_value' is bound by: field_updated",
    ),
    "gem_arity": (
        "POLICY p ON retrieved DO reinforce(field)",
        "c.policy:1:26: gem_arity: action 'reinforce' takes 2 arguments, got 1\n"
        "POLICY p ON retrieved DO reinforce(field)\n"
        "                         ^^^^^^^^^\n"
        "hint: reinforce(Unit, Number)",
    ),
    "gem_type": (
        "POLICY p ON field_updated DO flag_for_revision(dependent_topic)",
        "c.policy:1:48: gem_type: argument 1 of action 'flag_for_revision' must be Topic, got List[Topic]\n"
        "POLICY p ON field_updated DO flag_for_revision(dependent_topic)\n"
        "                                               ^^^^^^^^^^^^^^^\n"
        "hint: bind one element first, e.g. WHEN EXISTS x IN ... (or WHEN EXISTS dependent_topic)",
    ),
    "gem_invalid_value": (
        "SET reliability_decay = 0",
        "c.policy:1:25: gem_invalid_value: setting 'reliability_decay' must be a number in (0, 1], got 0\n"
        "SET reliability_decay = 0\n"
        "                        ^",
    ),
    "gem_duplicate_policy": (
        'POLICY p ON tick DO reject("a")\nPOLICY p ON tick DO reject("b")',
        "c.policy:2:8: gem_duplicate_policy: policy 'p' is already defined at c.policy:1:8\n"
        'POLICY p ON tick DO reject("b")\n'
        "       ^\n"
        "hint: policy names must be unique across every loaded file",
    ),
    "gem_duplicate_setting": (
        "SET half_life = 1d\nSET half_life = 2d",
        "c.policy:2:5: gem_duplicate_setting: setting 'half_life' is already set at c.policy:1:5\n"
        "SET half_life = 2d\n"
        "    ^^^^^^^^^\n"
        "hint: set each setting once across every loaded file",
    ),
    "gem_duplicate_key": (
        'POLICY p ON tick DO reject("a") WITH a = 1, a = 2',
        "c.policy:1:45: gem_duplicate_key: WITH key 'a' is given twice\n"
        'POLICY p ON tick DO reject("a") WITH a = 1, a = 2\n'
        "                                            ^",
    ),
    "gem_cascade_loop": (
        "POLICY a ON archived DO restore(topic)\n"
        "POLICY b ON restored WHEN EXISTS t IN active_topics DO archive(t)",
        "c.policy:1:25: gem_cascade_loop: policies can trigger each other without bound: "
        "'a' -[restore]-> restored -> 'b' -[archive]-> archived -> 'a'\n"
        "POLICY a ON archived DO restore(topic)\n"
        "                        ^^^^^^^^^^^^^^\n"
        "hint: make an action on the cycle act on an element of dependent_topic "
        "(WHEN EXISTS dependent_topic), or break the cycle",
    ),
}


@pytest.mark.parametrize("code", sorted(EXACT))
def test_each_check_code_renders_exactly(code):
    text, expected = EXACT[code]
    assert check_error(text) == expected


def test_gem_action_unavailable():
    text = "POLICY p ON tick WHEN EXISTS f IN active_fields DO compress(f)"
    assert check_error(text, available_actions={"reject", "contest"}) == (
        "c.policy:1:52: gem_action_unavailable: 'compress' is not available yet\n"
        "POLICY p ON tick WHEN EXISTS f IN active_fields DO compress(f)\n"
        "                                                   ^^^^^^^^\n"
        "hint: this build of gem implements: contest, reject"
    )
    ok(text, available_actions={"compress"})


def test_every_code_is_listed_and_tested_somewhere():
    tested = set(EXACT) | {"gem_action_unavailable"}
    syntax = {"gem_syntax", "gem_missing_do", "gem_with_before_do", "gem_unclosed_paren"}  # test_policy_parse
    assert tested | syntax == set(CODES)


def test_passes_are_ordered_and_named():
    assert [name for name, _ in PASSES] == [
        "duplicates", "unknown events", "unknown actions", "unknown settings",
        "names, scope, attributes, functions, arities and types", "cascade termination",
    ]


# ---- scope ----------------------------------------------------------------------------------


def test_a_binding_must_be_bound_by_every_event_in_on():
    err = check_error('POLICY p ON field_updated OR retrieved DO annotate(field, "q", query)')
    assert "gem_out_of_scope: 'query' is not bound by event 'field_updated'" in err
    ok('POLICY p ON field_updated OR retrieved DO annotate(field, "t", timestamp)')


def test_relational_names_need_the_events_topic():
    err = check_error("POLICY p ON tick WHEN EXISTS dependent_topic DO flag_for_revision(dependent_topic)")
    assert "gem_out_of_scope: 'dependent_topic' needs the event's topic, and event 'tick' has none" in err
    assert "gem_out_of_scope: 'dependent_topic' needs an event, and settings have none" in check_error(
        "SET active_bound = count(dependent_topic)")


def test_exists_under_not_or_or_binds_nothing_for_do():
    err = check_error("POLICY p ON tick WHEN NOT EXISTS t IN active_topics DO archive(t)")
    assert "gem_unbound_name: 't' is not bound here" in err
    assert "under OR or NOT binds nothing for DO" in err
    ok("POLICY p ON tick WHEN count(active_topics) > 1 AND EXISTS t IN active_topics WHERE t.salience < 0.1 "
       "DO archive(t)")


def test_nested_exists_binds_both_variables():
    ok('POLICY p ON tick WHEN EXISTS t IN active_topics WHERE EXISTS f IN t.fields WHERE f.status != "hidden" '
       'DO hide(f), annotate(t, "hid", f.name)')


def test_exists_without_in_needs_a_relational_list():
    assert "gem_type: EXISTS touched needs a relational name" in check_error(
        'POLICY p ON commit WHEN EXISTS touched DO reject("x")')
    assert "gem_type: EXISTS needs a list; 'interactions' is a Number" in check_error(
        'POLICY p ON commit WHEN EXISTS interactions DO reject("x")')
    assert "gem_unbound_name: unknown relational name 'dependent_topc'" in check_error(
        "POLICY p ON field_updated WHEN EXISTS dependent_topc DO contest(field)")


def test_settings_are_readable_in_policies_but_not_in_other_settings():
    ok("SET active_bound = 100 + 2 * interactions\n"
       "POLICY p ON retrieved WHEN field.salience < relevance_floor DO reinforce(field, reinforce_amount)")
    assert "setting 'half_life' cannot refer to setting 'reinforce_amount'" in check_error(
        "SET half_life = reinforce_amount")


# ---- types ------------------------------------------------------------------------------------


@pytest.mark.parametrize("text,message", [
    ("POLICY p ON retrieved WHEN field.salience DO contest(field)", "WHEN needs a condition (Bool), got Number"),
    ("POLICY p ON retrieved WHEN field.salience < 1d DO contest(field)", "cannot order Number and Duration"),
    ("POLICY p ON retrieved WHEN field = topic.title DO contest(field)", "cannot compare Field with Text"),
    ("POLICY p ON retrieved WHEN now() + 1 > now() DO contest(field)", "cannot apply '+' to Time and Number"),
    ("POLICY p ON retrieved WHEN 1 IN field.name DO contest(field)", "IN Text needs Text on the left"),
    ("POLICY p ON retrieved WHEN age(field, topic) > 1d DO contest(field)",
     "function 'age' takes 1 argument, got 2"),
    ("POLICY p ON retrieved WHEN reliability(topic) > 0 DO contest(field)",
     "argument 1 of function 'reliability' must be Field, got Topic"),
    ("POLICY p ON tick WHEN EXISTS t IN active_topics WHERE t.fields.salience < 1 DO archive(t)",
     "List[Field] has no attribute 'salience'"),
    ('POLICY p ON field_updated WHEN entry.provenance.sorce = "x" DO contest(field)',
     "unknown attribute 'sorce' of this record"),
    ("SET half_life = 30", "setting 'half_life' must be Duration, got Number"),
    ("SET cascade_depth = 2.5", "setting 'cascade_depth' must be an integer in [1, inf), got 2.5"),
    ("POLICY p ON tick DO count(active_topics)", "'count' is a function; DO runs actions"),
])
def test_type_and_name_errors(text, message):
    assert message in check_error(text)


def test_well_typed_policies_check():
    ok('POLICY p ON field_updated WHEN entry.provenance.source = "x" AND new_value > 5 '
       "AND age(entry) < 2w AND now() - timestamp < 1h DO contest(field)")
    ok('POLICY p ON flagged WHEN evidence.updated_field = "deadline" DO annotate(topic, "x", origin.title)')
    ok("POLICY p ON attenuated WHEN level IN {\"hidden\", \"archived\"} AND unit.salience < 0.01 "
       "DO restore(unit)")
    ok("POLICY p ON tick WHEN EXISTS f IN active_fields WHERE reliability(f) < -0.5 "
       "AND state_conflict(f) > max(0.2, abs(-0.1)) DO contest(f)")
    ok('POLICY p ON ingested WHEN EXISTS t IN active_topics WHERE t.id != topic.id AND similarity(topic, t) > 0.9 DO merge(t, topic)')


def test_with_set_of_names_is_a_record_of_those_bindings():
    ok("POLICY p ON field_updated WHEN EXISTS dependent_topic DO flag_for_revision(dependent_topic) "
       "WITH evidence = {updated_field, timestamp}, note = {a: new_value, b: [1, 2]}")


def test_unknown_event_does_not_cascade_into_name_errors():
    err = check_error("POLICY p ON field_updatd WHEN old_value != new_value DO contest(field)")
    assert err.count("gem_") == 1


# ---- several files, several errors -----------------------------------------------------------


def test_duplicate_names_across_files():
    a = parse('POLICY same ON tick DO reject("a")\nSET half_life = 1d', "a.policy")
    b = parse('SET half_life = 2d\nPOLICY same ON tick DO reject("b")', "b.policy")
    with pytest.raises(PolicyCheckError) as info:
        check([a, b])
    assert [(d.file, d.code) for d in info.value.diagnostics] == [
        ("b.policy", "gem_duplicate_setting"), ("b.policy", "gem_duplicate_policy")]
    assert "already defined at a.policy:1:8" in str(info.value)


def test_three_mistakes_three_caret_diagnostics_sorted():
    text = ("POLICY p\nON field_updatd\nWHEN EXISTS dependent_topic\nDO flag_for_revison(dependent_topic)\n\n"
            "POLICY q\nON retrieved\nDO reinforce(field, old_value)\n")
    with pytest.raises(PolicyCheckError) as info:
        check(parse(text, "three.policy"))
    ds = info.value.diagnostics
    assert [(d.line, d.code) for d in ds] == [
        (2, "gem_unknown_event"), (4, "gem_unknown_action"), (8, "gem_out_of_scope")]
    assert str(info.value).count("^") == len("field_updatd") + len("flag_for_revison") + len("old_value")


def test_at_most_ten_check_diagnostics():
    text = "\n".join(f"POLICY p{i} ON nope{i} DO contest(field)" for i in range(15))
    with pytest.raises(PolicyCheckError) as info:
        check(parse(text))
    assert len(info.value.diagnostics) == 10


# ---- cascades -------------------------------------------------------------------------------


def test_a_cycle_through_dependent_topic_is_bounded():
    checked = ok("POLICY a ON flagged WHEN EXISTS dependent_topic DO propagate(dependent_topic)")
    assert [(e.source, e.target, e.bounded) for e in checked.cascades] == [("flagged", "flagged", True)]
    ok("POLICY a ON flagged WHEN EXISTS t IN dependent_topic WHERE t.salience > 0 DO propagate(t)")


def test_a_self_loop_is_refused():
    assert "'a' -[flag_for_revision]-> flagged -> 'a'" in check_error(
        "POLICY a ON flagged DO flag_for_revision(topic)")


def test_a_loop_across_files_is_refused():
    a = parse("POLICY a ON archived DO restore(topic)", "a.policy")
    b = parse("POLICY b ON restored WHEN EXISTS t IN active_topics DO archive(t)", "b.policy")
    with pytest.raises(PolicyCheckError, match="gem_cascade_loop"):
        check([a, b])


def test_the_default_policy_checks_with_every_catalogue_action():
    checked = check(parse(default_policy_path().read_text(), "default.policy"), available_actions=C.ACTIONS)
    assert checked.policies[0].name == "propagate-on-change"
