"""The checker: every diagnostic code with its exact rendered text, scopes, cascades."""
from __future__ import annotations

from datetime import timedelta

import pytest

from gem.errors import PolicyCheckError
from gem.policy import ast as A
from gem.policy import CODES, PASSES, WARNINGS, check, default_policy_path, parse
from gem.policy import catalogue as C

DEFAULT = parse(default_policy_path().read_text(), "default.policy")


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
        "hint: did you mean 'flag_for_revision'? actions: " + ", ".join(sorted(C.ACTIONS)),
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
        "hint: a file names each policy once",
    ),
    "gem_duplicate_setting": (
        "SET half_life = 1d\nSET half_life = 2d",
        "c.policy:2:5: gem_duplicate_setting: setting 'half_life' is already set at c.policy:1:5\n"
        "SET half_life = 2d\n"
        "    ^^^^^^^^^\n"
        "hint: a file sets each setting once",
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


def test_unknown_action_lists_the_actions_and_suggests_the_closest():
    listed = "actions: " + ", ".join(sorted(C.ACTIONS))
    assert check_error("POLICY p ON tick DO frobnicate()").endswith(f"hint: {listed}")
    assert check_error("POLICY p ON retrieved DO hid(field)").endswith(f"hint: did you mean 'hide'? {listed}")
    assert check_error("POLICY p ON retrieved DO count(field)").endswith(
        f"hint: 'count' is a function; DO runs {listed}")


def test_gem_action_unavailable():
    text = "POLICY p ON tick WHEN EXISTS f IN active_fields DO compress(f)"
    assert check_error(text, available_actions={"reject", "contest"}) == (
        "c.policy:1:52: gem_action_unavailable: 'compress' is not available yet\n"
        "POLICY p ON tick WHEN EXISTS f IN active_fields DO compress(f)\n"
        "                                                   ^^^^^^^^\n"
        "hint: this build of gem implements: contest, reject"
    )
    ok(text, available_actions={"compress"})


def test_a_bad_regular_expression_is_refused_at_check_time_pointing_into_the_pattern():
    assert check_error('POLICY p ON field_created WHEN matches(field.name, "^pass(") DO drop(entry, "x")') == (
        "c.policy:1:58: gem_invalid_regex: invalid regular expression: missing ), unterminated subpattern\n"
        'POLICY p ON field_created WHEN matches(field.name, "^pass(") DO drop(entry, "x")\n'
        "                                                         ^\n"
        "hint: matches() takes a Python regular expression (module re)"
    )
    assert "gem_invalid_regex: the pattern of matches() must be a string literal" in check_error(
        "POLICY p ON field_created WHEN matches(field.name, topic.title) DO contest(field)")
    # A pattern with escapes is still refused, pointing at the whole literal.
    assert check_error('POLICY p ON field_created WHEN matches(field.name, "\\\\d[") DO contest(field)'
                       ).startswith("c.policy:1:52: gem_invalid_regex: invalid regular expression")
    # Also inside what an EXISTS ranges over, which the checker types twice (for WHEN and for DO).
    assert "gem_invalid_regex" in check_error('POLICY p ON tick WHEN EXISTS t IN [matches("a", "(")] DO reject("x")')
    ok('POLICY p ON field_created WHEN matches(lower(field.name), "^pass(word)?$") AND canon(topic.title) = "ada" '
       'DO contest(field)')


def test_a_name_compared_with_a_literal_that_is_not_canonical_warns_what_it_matches():
    text = ('POLICY p ON field_created WHEN field.name = "API key" OR field.name IN ["password", "api_key"]\n'
            '  OR "Ops Team" IN topic.aliases OR topic.title != "ada" DO contest(field)')
    warnings = [w for w in ok(text).warnings if w.code == "gem_name_not_canonical"]
    assert [w.render() for w in warnings] == [
        'c.policy:1:45: warning: gem_name_not_canonical: names are compared by canonical key: "API key" '
        'matches every name whose key is "api key" ("api key", "Api-Key", "API_KEY", ...)\n'
        'POLICY p ON field_created WHEN field.name = "API key" OR field.name IN ["password", "api_key"]\n'
        "                                            ^^^^^^^^^\n"
        'hint: write "api key"',
        'c.policy:1:85: warning: gem_name_not_canonical: names are compared by canonical key: "api_key" '
        'matches every name whose key is "api key" ("api key", "Api-Key", "API_KEY", ...)\n'
        'POLICY p ON field_created WHEN field.name = "API key" OR field.name IN ["password", "api_key"]\n'
        "                                                                                    ^^^^^^^^^\n"
        'hint: write "api key"',
        'c.policy:2:6: warning: gem_name_not_canonical: names are compared by canonical key: "Ops Team" '
        'matches every name whose key is "ops team" ("ops team", "Ops-Team", "OPS_TEAM", ...)\n'
        '  OR "Ops Team" IN topic.aliases OR topic.title != "ada" DO contest(field)\n'
        "     ^^^^^^^^^^\n"
        'hint: write "ops team"',
    ]
    # Texts that are not names are compared as they are, and say nothing.
    assert not [w for w in ok('POLICY p ON field_created WHEN entry.value = "API key" DO contest(field)').warnings
                if w.code == "gem_name_not_canonical"]


def test_a_point_off_the_globe_is_refused_at_check_time():
    assert check_error('POLICY p ON field_created WHEN distance_km(entry.place, 12, -181) < 5 '
                       'DO contest(field)') == (
        "c.policy:1:61: gem_invalid_point: a longitude must be within [-180, 180], got -181\n"
        "POLICY p ON field_created WHEN distance_km(entry.place, 12, -181) < 5 DO contest(field)\n"
        "                                                            ^^^^\n"
        "hint: distance_km(place, lat, lon): latitude first, then longitude, in degrees")
    assert "gem_invalid_point: a latitude" in check_error(
        'POLICY p ON field_created WHEN distance_km(entry.place, 90 + 1, 0) < 5 DO contest(field)')
    # a coordinate the policy reads is checked when it runs (null off the globe), not here
    ok('POLICY p ON field_created WHEN distance_km(entry.place, entry.place.lat, 0) < 5 '
       'DO contest(field)')
    assert "gem_type" in check_error(
        'POLICY p ON field_created WHEN distance_km(entry.place, "north", 0) < 5 DO contest(field)')


def test_every_code_is_listed_and_tested_somewhere():
    tested = set(EXACT) | {"gem_action_unavailable"} | set(COMPOSITION_EXACT) | {"gem_no_policies"}
    tested |= {"gem_invalid_regex", "gem_invalid_point"}
    syntax = {"gem_syntax", "gem_missing_do", "gem_with_before_do", "gem_unclosed_paren"}  # test_policy_parse
    reader = {"gem_not_utf8"}  # test_policy_sources
    assert tested | syntax | reader == set(CODES)
    assert set(WARNINGS) == {"gem_c6_no_reinforcement", "gem_c3_no_propagation", "gem_name_not_canonical"}
    assert not set(WARNINGS) & set(CODES)


def test_passes_are_ordered_and_named():
    assert [name for name, _ in PASSES] == [
        "composition: duplicates, overrides and disables", "unknown events", "unknown actions",
        "unknown settings", "names, scope, attributes, functions, arities and types", "cascade termination",
        "governance: a set with no policy in force; C6 and C3 warnings",
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


@pytest.mark.parametrize("value,message", [
    ("half_life = 0d", "setting 'half_life' must be a positive duration, got 0s"),
    ("half_life = -30d", "setting 'half_life' must be a positive duration, got -30d"),
    ("half_life = 1d - 2d", "setting 'half_life' must be a positive duration, got -1d"),
    ("half_life = null", "setting 'half_life' must be a positive duration, got null"),
    ("half_life = 30d / 0", "setting 'half_life' must be a positive duration, got null"),
    ("merge_similarity = 1 - 2", "setting 'merge_similarity' must be a number in [0, 1], got -1"),
    ("merge_similarity = null", "setting 'merge_similarity' must be a number in [0, 1], got null"),
    ("relevance_floor = max(0.2, 2)", "setting 'relevance_floor' must be a number in [0, 1], got 2"),
    ("reliability_decay = 0", "setting 'reliability_decay' must be a number in (0, 1], got 0"),
    ("cascade_depth = 0", "setting 'cascade_depth' must be an integer in [1, inf), got 0"),
    ("cascade_depth = 1e300 * 1e300", "setting 'cascade_depth' must be an integer in [1, inf), got inf"),
    ("active_bound = -1", "setting 'active_bound' must be a number in [0, inf) or null, got -1"),
])
def test_a_setting_that_reads_nothing_is_range_checked_by_value(value, message):
    err = check_error(f"SET {value}")
    assert err.count("gem_") == 1 and f"gem_invalid_value: {message}" in err


def test_settings_that_read_the_state_are_left_to_run_time_and_null_is_none_only_where_allowed():
    for value in ("active_bound = null", "active_bound = 10 + interactions", "half_life = 1d / 3",
                  "merge_similarity = min(1, count(active_topics) / 100)", "cascade_depth = 3 * 2"):
        ok(f"SET {value}\n" + _READS + _FLAGS)


def test_setting_values_are_validated_by_the_catalogue_rule_at_run_time():
    assert C.SETTINGS["half_life"].validate(timedelta(days=30)) is None
    assert C.SETTINGS["half_life"].validate(timedelta(0)) == "setting 'half_life' must be a positive duration, got 0s"
    assert C.SETTINGS["half_life"].validate(timedelta(hours=-36)) == (
        "setting 'half_life' must be a positive duration, got -1d12h")
    assert C.SETTINGS["half_life"].validate(None) == "setting 'half_life' must be a positive duration, got null"
    assert C.SETTINGS["half_life"].validate(30) == "setting 'half_life' must be a positive duration, got 30"
    merge = C.SETTINGS["merge_similarity"]
    assert merge.validate(0.92) is None and merge.validate(0) is None and merge.validate(1) is None
    assert merge.validate(-0.1) == "setting 'merge_similarity' must be a number in [0, 1], got -0.1"
    assert merge.validate(float("nan")) == "setting 'merge_similarity' must be a number in [0, 1], got nan"
    assert merge.validate(True) == "setting 'merge_similarity' must be a number in [0, 1], got true"
    assert merge.validate("0.5") == "setting 'merge_similarity' must be a number in [0, 1], got text '0.5'"
    assert C.SETTINGS["cascade_depth"].validate(4.0) is None
    assert C.SETTINGS["active_bound"].validate(None) is None
    assert C.SETTINGS["active_bound"].validate(float("inf")) == (
        "setting 'active_bound' must be a number in [0, inf) or null, got inf")
    for name, sig in C.SETTINGS.items():  # every default is a valid value of its setting
        assert sig.validate(sig.default) is None, name


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
    assert str(info.value) == (
        "b.policy:1:5: gem_duplicate_setting: setting 'half_life' is already set at a.policy:2:5\n"
        "SET half_life = 2d\n"
        "    ^^^^^^^^^\n"
        "hint: to change it, write OVERRIDE SET half_life = ...\n"
        "b.policy:2:8: gem_duplicate_policy: policy 'same' is already defined at a.policy:1:8\n"
        'POLICY same ON tick DO reject("b")\n'
        "       ^^^^\n"
        "hint: to replace it, write OVERRIDE POLICY same; to remove it, DISABLE POLICY same"
    )


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


# ---- composition: OVERRIDE and DISABLE across files ------------------------------------------


def composed(text: str, base: A.PolicyFile = DEFAULT, **kw):
    return check([base, parse(text, "mine.policy")], **kw)


def composed_error(text: str, base: A.PolicyFile = DEFAULT) -> str:
    with pytest.raises(PolicyCheckError) as info:
        composed(text, base)
    return str(info.value)


def in_force(checked) -> list[str]:
    return [p.name for p in checked.policies]


COMPOSITION_EXACT = {
    "gem_nothing_to_override": (
        "OVERRIDE POLICY hide-faded-field\nON tick\nWHEN EXISTS f IN active_fields WHERE f.salience < 0.01\nDO hide(f)",
        "mine.policy:1:17: gem_nothing_to_override: no earlier file defines policy 'hide-faded-field'\n"
        "OVERRIDE POLICY hide-faded-field\n"
        "                ^^^^^^^^^^^^^^^^\n"
        "hint: did you mean 'hide-faded-fields'?",
    ),
    "gem_nothing_to_disable": (
        "DISABLE POLICY compress-faded-field",
        "mine.policy:1:16: gem_nothing_to_disable: no earlier file defines policy 'compress-faded-field'\n"
        "DISABLE POLICY compress-faded-field\n"
        "               ^^^^^^^^^^^^^^^^^^^^\n"
        "hint: did you mean 'compress-faded-fields'?",
    ),
}


@pytest.mark.parametrize("code", sorted(COMPOSITION_EXACT))
def test_each_composition_code_renders_exactly(code):
    text, expected = COMPOSITION_EXACT[code]
    assert composed_error(text) == expected


def test_override_set_replaces_the_earlier_value_and_keeps_the_rest():
    checked = composed("OVERRIDE SET half_life = 7d\nSET cascade_depth = 4")
    settings = {s.name: s for s in checked.settings}
    assert settings["half_life"].expr == A.Duration(7 * 86400, "7d") and settings["half_life"].override
    assert settings["reinforce_amount"].span.file == "default.policy"
    assert settings["cascade_depth"].span.file == "mine.policy"
    assert in_force(checked) == [p.name for p in DEFAULT.policies]


def test_override_set_needs_an_earlier_set_and_an_unknown_name_is_reported_once():
    assert composed_error("OVERRIDE SET cascade_depth = 4") == (
        "mine.policy:1:14: gem_nothing_to_override: no earlier file sets 'cascade_depth'\n"
        "OVERRIDE SET cascade_depth = 4\n"
        "             ^^^^^^^^^^^^^\n"
        "hint: to set it, write SET cascade_depth = ... without OVERRIDE"
    )
    err = composed_error("OVERRIDE SET half_lif = 7d")
    assert err.count("gem_") == 1 and "gem_unknown_setting: unknown setting 'half_lif'" in err
    assert "did you mean 'half_life'?" in err


def test_override_policy_replaces_in_place_and_disable_removes():
    checked = composed("DISABLE POLICY hide-faded-fields\n"
                       "OVERRIDE POLICY archive-faded-topics PRIORITY 10\nON tick\n"
                       "WHEN EXISTS t IN active_topics WHERE t.salience < 0.01\nDO archive(t)\n"
                       'POLICY note-archived ON archived DO annotate(topic, "archived_at", timestamp)\n')
    names = [p.name for p in DEFAULT.policies]
    names.remove("hide-faded-fields")
    assert in_force(checked) == names + ["note-archived"]
    archive = next(p for p in checked.policies if p.name == "archive-faded-topics")
    assert archive.span.file == "mine.policy" and archive.override
    assert checked.warnings == ()


def test_a_later_file_overrides_what_an_earlier_override_set():
    second = parse("OVERRIDE SET half_life = 7d", "a.policy")
    third = parse("OVERRIDE SET half_life = 1d\nOVERRIDE POLICY reinforce-on-retrieval ON retrieved "
                  "DO reinforce(field, 1), reinforce(topic, 1)", "b.policy")
    fourth = parse("OVERRIDE POLICY reinforce-on-retrieval ON retrieved DO reinforce(field, 2), "
                   "reinforce(topic, 2)", "c.policy")
    checked = check([DEFAULT, second, third, fourth])
    assert {s.name: s.span.file for s in checked.settings}["half_life"] == "b.policy"
    assert next(p for p in checked.policies if p.name == "reinforce-on-retrieval").span.file == "c.policy"


def test_disabling_twice_and_redefining_a_disabled_policy():
    first = parse("DISABLE POLICY hide-faded-fields", "a.policy")
    assert "gem_nothing_to_disable: policy 'hide-faded-fields' is already disabled at a.policy:1:16" in str(
        pytest.raises(PolicyCheckError, check, [DEFAULT, first, parse("DISABLE POLICY hide-faded-fields", "b")]).value)
    again = parse("POLICY hide-faded-fields ON tick WHEN EXISTS f IN active_fields DO hide(f)", "b.policy")
    assert str(pytest.raises(PolicyCheckError, check, [DEFAULT, first, again]).value) == (
        "b.policy:1:8: gem_duplicate_policy: policy 'hide-faded-fields' is already defined at "
        "default.policy:55:8 (disabled at a.policy:1:16)\n"
        "POLICY hide-faded-fields ON tick WHEN EXISTS f IN active_fields DO hide(f)\n"
        "       ^^^^^^^^^^^^^^^^^\n"
        "hint: to define it anew, write OVERRIDE POLICY hide-faded-fields"
    )
    back = parse("OVERRIDE POLICY hide-faded-fields ON tick WHEN EXISTS f IN active_fields DO hide(f)", "b.policy")
    assert "hide-faded-fields" in in_force(check([DEFAULT, first, back]))


def test_one_file_says_one_thing_about_each_name():
    assert composed_error("SET cascade_depth = 4\nOVERRIDE SET cascade_depth = 5").endswith(
        "mine.policy:2:14: gem_duplicate_setting: setting 'cascade_depth' is already set at mine.policy:1:5\n"
        "OVERRIDE SET cascade_depth = 5\n"
        "             ^^^^^^^^^^^^^\n"
        "hint: a file sets each setting once")
    err = composed_error("DISABLE POLICY hide-faded-fields\n"
                         "OVERRIDE POLICY hide-faded-fields ON tick WHEN EXISTS f IN active_fields DO hide(f)")
    assert err == (
        "mine.policy:2:17: gem_duplicate_policy: policy 'hide-faded-fields' is already disabled at mine.policy:1:16\n"
        "OVERRIDE POLICY hide-faded-fields ON tick WHEN EXISTS f IN active_fields DO hide(f)\n"
        "                ^^^^^^^^^^^^^^^^^\n"
        "hint: a file names each policy once"
    )


def test_a_disable_of_no_close_name_lists_the_policies_in_force():
    assert composed_error("DISABLE POLICY forgetting").endswith(
        "hint: the policies in force are: archive-faded-topics, compress-faded-episodes, compress-faded-fields, "
        "contest-unreliable-conflict, hide-faded-episodes, hide-faded-fields, propagate-on-change, "
        "reinforce-associated-episodes, reinforce-episodes, reinforce-on-ingest, "
        "reinforce-on-retrieval, stale-when-moved")
    assert check_error("DISABLE POLICY forgetting\n" + _READS).endswith(
        "gem_nothing_to_disable: no earlier file defines policy 'forgetting'\n"
        "DISABLE POLICY forgetting\n"
        "               ^^^^^^^^^^")  # nothing is in force before the first file: no hint


def test_an_override_in_the_first_file_has_nothing_to_override():
    err = check_error("OVERRIDE POLICY p ON tick DO reject(\"x\")")
    assert "gem_nothing_to_override: no earlier file defines policy 'p'" in err
    assert "hint: to add a policy, write POLICY p without OVERRIDE" in err


def test_every_definition_is_checked_even_one_a_later_file_replaces():
    base = parse('POLICY p ON tick DO reject(1)\nPOLICY keep ON retrieved DO reinforce(field, 1), '
                 "reinforce(topic, 1)", "base.policy")
    err = composed_error("DISABLE POLICY p\nOVERRIDE POLICY keep ON retrieved DO reinforce(feild, 1)", base)
    assert "base.policy:1:28: gem_type: argument 1 of action 'reject' must be Text, got Number" in err
    assert "mine.policy:2:48: gem_unbound_name: unknown name 'feild'" in err


def test_cascades_are_judged_on_the_policies_in_force():
    looping = parse("POLICY re-flag ON flagged DO flag_for_revision(topic)\n" + _READS, "base.policy")
    with pytest.raises(PolicyCheckError, match="gem_cascade_loop"):
        check(looping)
    assert "re-flag" not in in_force(composed("DISABLE POLICY re-flag", looping))
    err = composed_error("OVERRIDE POLICY archive-faded-topics ON archived DO restore(topic)\n"
                         "POLICY re-archive ON restored WHEN EXISTS t IN active_topics DO archive(t)")
    assert "gem_cascade_loop: policies can trigger each other without bound: 'archive-faded-topics'" in err


# ---- governance: an empty set is an error; C6 and C3 warnings ---------------------------------

_READS = "POLICY reads ON retrieved DO reinforce(field, 1), reinforce(topic, 1)\n"
_FLAGS = ("POLICY flags ON field_updated WHEN EXISTS dependent_topic "
          "DO flag_for_revision(dependent_topic)\n")


def test_a_set_with_no_policy_in_force_is_an_error():
    assert check_error("# just settings\nSET half_life = 7d\n") == (
        "c.policy:1:1: gem_no_policies: no policy is in force: these files would leave a memory without governance\n"
        "# just settings\n"
        "^\n"
        "hint: compose them with the default policy (defaults=True; gem policy check without --no-defaults)"
    )
    base = parse(_READS, "base.policy")
    assert composed_error("DISABLE POLICY reads", base) == (
        "mine.policy:1:16: gem_no_policies: no policy is in force: these files would leave a memory without "
        "governance\n"
        "DISABLE POLICY reads\n"
        "               ^^^^^\n"
        "hint: this took 'reads', the last policy in force, out of force"
    )


def test_the_set_as_a_whole_is_judged_only_when_each_file_is_right():
    err = check_error("SET half_lif = 7d")
    assert err.count("gem_") == 1 and "gem_unknown_setting" in err


def test_warnings_name_the_condition_and_do_not_fail_the_check():
    checked = ok("POLICY only-archive ON tick WHEN EXISTS t IN active_topics WHERE t.salience < 0.01 DO archive(t)")
    # Sorted like errors: by file, position, then code.
    assert [(w.code, w.severity) for w in checked.warnings] == [
        ("gem_c3_no_propagation", "warning"), ("gem_c6_no_reinforcement", "warning")]
    assert "\n".join(w.render() for w in checked.warnings) == (
        "c.policy:1:1: warning: gem_c3_no_propagation: no policy flags dependents on 'field_updated', so C3 will "
        "reject every update of a topic that another topic extends\n"
        "POLICY only-archive ON tick WHEN EXISTS t IN active_topics WHERE t.salience < 0.01 DO archive(t)\n"
        "^\n"
        "hint: add a policy ON field_updated WHEN EXISTS dependent_topic DO flag_for_revision(dependent_topic)\n"
        "c.policy:1:1: warning: gem_c6_no_reinforcement: no policy reinforces on 'retrieved', so C6 will reject "
        "every retrieval that returns something\n"
        "POLICY only-archive ON tick WHEN EXISTS t IN active_topics WHERE t.salience < 0.01 DO archive(t)\n"
        "^\n"
        "hint: add a policy ON retrieved DO reinforce(field, reinforce_amount), reinforce(topic, reinforce_amount)"
    )
    assert ok(_READS + _FLAGS).warnings == ()
    assert check(DEFAULT).warnings == ()


def test_any_condition_and_any_argument_count_for_a_role():
    # The approximation is generous: a guarded reinforce, or propagate of the event's own topic, counts.
    assert ok("POLICY r ON retrieved WHEN false DO reinforce(topic, 0.1)\n"
              "POLICY f ON field_updated DO propagate(topic)").warnings == ()
    # set_salience, or a reinforce on another event, does not.
    codes = [w.code for w in ok("POLICY r ON retrieved DO set_salience(topic, 0.9)\n"
                                "POLICY i ON field_created DO reinforce(field, 1)\n" + _FLAGS).warnings]
    assert codes == ["gem_c6_no_reinforcement"]


def test_a_warning_points_at_the_override_or_disable_that_removed_the_last_policy_doing_the_job():
    checked = composed("DISABLE POLICY reinforce-on-retrieval")
    assert [w.render() for w in checked.warnings] == [
        "mine.policy:1:16: warning: gem_c6_no_reinforcement: no policy reinforces on 'retrieved', so C6 will "
        "reject every retrieval that returns something\n"
        "DISABLE POLICY reinforce-on-retrieval\n"
        "               ^^^^^^^^^^^^^^^^^^^^^^\n"
        "hint: this took 'reinforce-on-retrieval', the last policy that reinforced on 'retrieved', out of force"]
    checked = composed("OVERRIDE POLICY propagate-on-change\nON field_updated\nDO annotate(topic, \"changed\", true)")
    (w,) = checked.warnings
    assert (w.code, w.file, w.line, w.col) == ("gem_c3_no_propagation", "mine.policy", 1, 17)
    assert w.hint == ("this replaced 'propagate-on-change', the last policy that flagged dependents on "
                      "'field_updated', with one that does not")
