"""The parser: Listing 1, literals, precedence, comments, syntax diagnostics, fuzzing."""
from __future__ import annotations

import json
from datetime import datetime, timezone
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
import lark
from lark import Lark

from gem.errors import PolicyError, PolicySyntaxError
from gem.policy import ast as A
from gem.policy import default_policy_path, grammar_path, parse
from gem.policy.grammar import build_parser, data_file, grammar_digest, lark_parser, table_path

LISTING_1 = """POLICY propagate-on-change
ON field_updated
WHEN EXISTS dependent_topic
DO flag_for_revision(dependent_topic)
WITH evidence = {updated_field, timestamp}
"""


def syntax_error(text: str, file: str = "t.policy") -> str:
    with pytest.raises(PolicySyntaxError) as info:
        parse(text, file)
    return str(info.value)


# ---- the grammar itself -------------------------------------------------------------------


def test_grammar_builds_in_strict_mode_without_conflicts_or_collisions():
    pytest.importorskip("interegular")  # strict mode needs it to compare terminals
    Lark(grammar_path().read_text(), parser="lalr", lexer="basic", propagate_positions=True,
         maybe_placeholders=True, strict=True)


def test_the_shipped_parser_tables_are_the_grammars():
    # Made by `python -m gem.policy.grammar` whenever grammar/policy.lark changes (or Lark
    # does): without them every open builds the parser from the grammar (~1 s).
    # Lark's version is not asserted: `lark` is not pinned, and tables made by another Lark
    # are ignored (the parser is built), which the next test checks either way.
    table = json.loads(table_path().read_text(encoding="utf-8"))
    assert table["grammar_sha256"] == grammar_digest(), "run python -m gem.policy.grammar"


def test_the_parser_loaded_from_the_tables_parses_as_the_one_built_from_the_grammar():
    import lark
    built, loaded = build_parser(strict=False), lark_parser()
    made_by = json.loads(table_path().read_text(encoding="utf-8"))["lark"]
    # loaded from the tables when this Lark made them; built from the grammar otherwise
    assert hasattr(loaded, "grammar") == (made_by != lark.__version__)
    texts = [default_policy_path().read_text(), "policy p on commit do hide(x) where a.b >= 1 and",
             "set half_life = 3d\npolicy q priority -2 on ingest when n in [1, 2] do archive()"]
    for text in texts:
        try:
            expected = built.parse(text)
        except lark.exceptions.UnexpectedInput as exc:
            with pytest.raises(type(exc)) as info:
                loaded.parse(text)
            assert (info.value.line, info.value.column) == (exc.line, exc.column)
        else:
            assert loaded.parse(text) == expected


def test_grammar_and_default_policy_come_from_the_package_or_the_checkout():
    repo = Path(__file__).resolve().parents[2]
    assert grammar_path().read_text() == (repo / "grammar" / "policy.lark").read_text()
    assert default_policy_path().read_text() == (repo / "policies" / "default.policy").read_text()
    assert data_file("grammar", "policy.lark").name == "policy.lark"


# ---- Listing 1 and the shape of the tree ------------------------------------------------


def test_listing_1_parses_exactly_as_written():
    tree = parse(LISTING_1, "listing1.policy")
    assert tree == A.PolicyFile(
        settings=(),
        policies=(
            A.Policy(
                name="propagate-on-change",
                priority=0,
                events=("field_updated",),
                condition=A.Exists("dependent_topic", None, None),
                actions=(A.ActionCall("flag_for_revision", (A.Name("dependent_topic"),)),),
                with_=(A.WithItem("evidence", A.SetLit((A.Name("updated_field"), A.Name("timestamp")))),),
            ),
        ),
    )
    p = tree.policies[0]
    assert p.span == A.Span("listing1.policy", 1, 1, 5, 43)
    assert p.name_span == A.Span("listing1.policy", 1, 8, 1, 27)
    assert p.event_spans == (A.Span("listing1.policy", 2, 4, 2, 17),)
    assert p.actions[0].name_span.col == 4 and p.with_[0].key_span.line == 5


def test_spans_do_not_take_part_in_equality():
    assert parse(LISTING_1, "a") == parse("\n\n" + LISTING_1.replace("\n", "   \n"), "b")


def test_settings_priorities_several_events_and_actions():
    tree = parse('SET half_life = 2w\nPOLICY p-2 PRIORITY -5 ON tick OR commit DO reject("no"), contest(x) '
                 "WITH a = 1, b = [1, 2]")
    assert tree.settings == (A.Setting("half_life", A.Duration(1209600, "2w")),)
    p = tree.policies[0]
    assert (p.name, p.priority, p.events) == ("p-2", -5, ("tick", "commit"))
    assert [a.name for a in p.actions] == ["reject", "contest"]
    assert p.with_[1] == A.WithItem("b", A.ListLit((A.Literal(1, "number"), A.Literal(2, "number"))))


def value(text: str):
    return parse(f"SET x = {text}").settings[0].expr


def test_literals():
    assert value("42") == A.Literal(42, "number")
    assert value("2.5") == A.Literal(2.5, "number")
    assert value("1e3") == A.Literal(1000.0, "number")
    assert value('"a \\"b\\" \\u00e9"') == A.Literal('a "b" é', "string")
    assert value("true") == A.Literal(True, "bool") and value("null") == A.Literal(None, "null")
    assert value("30d") == A.Duration(30 * 86400, "30d")
    assert value("1d12h") == A.Duration(36 * 3600, "1d12h")
    assert value("15m").seconds == 900 and value("45s").seconds == 45
    assert value("2026-03-15") == A.DateLit(datetime(2026, 3, 15, tzinfo=timezone.utc), "2026-03-15")
    assert value("2026-03-15T10:00:00Z").value == datetime(2026, 3, 15, 10, tzinfo=timezone.utc)
    assert value("2026-03-15T12:00+02:00").value == datetime(2026, 3, 15, 10, tzinfo=timezone.utc)
    assert value("{a: 1, \"b c\": x}") == A.RecordLit((("a", A.Literal(1, "number")), ("b c", A.Name("x"))))
    assert value("{}") == A.RecordLit(())
    assert value("{a, b.c}") == A.SetLit((A.Name("a"), A.Attr(A.Name("b"), "c")))
    assert value("[]") == A.ListLit(())


def test_precedence_and_associativity():
    one, two = A.Literal(1, "number"), A.Literal(2, "number")
    assert value("a - b - c") == A.Binary("-", A.Binary("-", A.Name("a"), A.Name("b")), A.Name("c"))
    assert value("a + b * c") == A.Binary("+", A.Name("a"), A.Binary("*", A.Name("b"), A.Name("c")))
    assert value("a.b.c") == A.Attr(A.Attr(A.Name("a"), "b"), "c")
    assert value("-x.y") == A.Unary("-", A.Attr(A.Name("x"), "y"))
    assert value("NOT a = 1 AND b OR c") == A.Binary(
        "OR", A.Binary("AND", A.Unary("NOT", A.Compare("=", A.Name("a"), one)), A.Name("b")), A.Name("c"))
    assert value("x IN {1, 2}") == A.In(A.Name("x"), A.SetLit((one, two)))
    assert value("f(x, g())") == A.Call("f", (A.Name("x"), A.Call("g", ())))


def test_exists_forms():
    assert value("EXISTS f IN topic.fields WHERE f.salience < 1 AND f.name = \"x\"") == A.Exists(
        "f", A.Attr(A.Name("topic"), "fields"),
        A.Binary("AND", A.Compare("<", A.Attr(A.Name("f"), "salience"), A.Literal(1, "number")),
                 A.Compare("=", A.Attr(A.Name("f"), "name"), A.Literal("x", "string"))))
    # Without WHERE, EXISTS is an operand of AND / NOT like any condition.
    assert value("EXISTS a AND NOT EXISTS b IN xs") == A.Binary(
        "AND", A.Exists("a", None, None), A.Unary("NOT", A.Exists("b", A.Name("xs"), None)))
    assert value("x AND (EXISTS y WHERE z)") == A.Binary("AND", A.Name("x"), A.Exists("y", None, A.Name("z")))
    # As the last operand of a top-level AND / OR chain, WHERE runs to the end.
    assert value("x AND EXISTS y WHERE z OR w") == A.Binary(
        "AND", A.Name("x"), A.Exists("y", None, A.Binary("OR", A.Name("z"), A.Name("w"))))
    assert value("NOT EXISTS y WHERE z") == A.Unary("NOT", A.Exists("y", None, A.Name("z")))
    assert value("v OR x AND EXISTS y WHERE z") == A.Binary(
        "OR", A.Name("v"), A.Binary("AND", A.Name("x"), A.Exists("y", None, A.Name("z"))))


def test_hyphens_belong_to_policy_names_only():
    assert parse("POLICY a-b-c ON tick DO x()").policies[0].name == "a-b-c"
    assert value("a-b") == A.Binary("-", A.Name("a"), A.Name("b"))
    assert value("a - b") == value("a-b")


def test_comments_are_kept_with_the_item_below_them():
    tree = parse("# about x\nSET x = 1  # one\n\n# first\n\n# about p\nPOLICY p ON tick DO y()\n# the end\n")
    assert tree.settings[0].comments == ("# about x",)
    assert tree.settings[0].trailing_comment == "# one"
    assert tree.policies[0].comments == ("# first", "", "# about p")
    assert tree.trailing_comments == ("# the end",)


def test_empty_and_comment_only_files_parse():
    assert parse("") == A.PolicyFile((), ())
    assert parse("# nothing yet\n").trailing_comments == ("# nothing yet",)


# ---- composition: OVERRIDE SET, OVERRIDE POLICY, DISABLE POLICY ---------------------------


def test_composition_items_parse_into_flags_and_disables_with_spans():
    tree = parse("OVERRIDE SET half_life = 7d\n"
                 "DISABLE POLICY hide-faded-fields\n"
                 "OVERRIDE POLICY reinforce-on-retrieval PRIORITY 2\nON retrieved\nDO reinforce(topic, 1)\n"
                 "SET cascade_depth = 4\n", "c.policy")
    assert tree.settings == (A.Setting("half_life", A.Duration(7 * 86400, "7d"), override=True),
                             A.Setting("cascade_depth", A.Literal(4, "number")))
    assert tree.disables == (A.Disable("hide-faded-fields"),)
    (p,) = tree.policies
    assert (p.name, p.priority, p.override) == ("reinforce-on-retrieval", 2, True)
    d = tree.disables[0]
    assert d.span == A.Span("c.policy", 2, 1, 2, 33) and d.name_span == A.Span("c.policy", 2, 16, 2, 33)
    assert tree.settings[0].span.col == 1 and tree.settings[0].name_span.col == 14  # the item starts at OVERRIDE
    assert p.span.line == 3 and p.name_span == A.Span("c.policy", 3, 17, 3, 39)


def test_override_is_part_of_the_meaning_and_disables_are_compared():
    assert parse("OVERRIDE SET x = 1") != parse("SET x = 1")
    assert parse("OVERRIDE POLICY p ON tick DO x()") != parse("POLICY p ON tick DO x()")
    assert parse("DISABLE POLICY a") != parse("DISABLE POLICY b")
    assert parse("DISABLE POLICY a\nDISABLE POLICY b") != parse("DISABLE POLICY b\nDISABLE POLICY a")


def test_comments_attach_to_disables_too():
    tree = parse("# no hiding here\nDISABLE POLICY hide-faded-fields  # see ADR 7\n")
    assert tree.disables[0].comments == ("# no hiding here",)
    assert tree.disables[0].trailing_comment == "# see ADR 7"


def test_composition_keywords_are_reserved_and_upper_case():
    assert "did you mean 'OVERRIDE'?" in syntax_error("override SET x = 1")
    assert "did you mean 'DISABLE'?" in syntax_error("disable POLICY p")
    assert "unexpected 'OVERRIDE'; expected an expression" in syntax_error("SET x = OVERRIDE SET y = 1")


def test_composition_syntax_errors_name_the_mistake():
    assert syntax_error("DISABLE SET half_life = 7d") == (
        "t.policy:1:9: gem_syntax: only policies can be disabled\n"
        "DISABLE SET half_life = 7d\n"
        "        ^^^\n"
        "hint: change a setting of an earlier file with OVERRIDE SET name = value"
    )
    assert syntax_error("DISABLE hide-faded-fields") == (
        "t.policy:1:9: gem_syntax: unexpected name 'hide'; expected 'POLICY'\n"
        "DISABLE hide-faded-fields\n"
        "        ^^^^"
    )
    assert "gem_syntax: spaces are not allowed around '-' in a policy name" in syntax_error("DISABLE POLICY a - b")
    assert "unexpected 'DISABLE'; expected 'POLICY' or 'SET'" in syntax_error("OVERRIDE DISABLE POLICY p")
    assert "gem_missing_do: policy 'p' has no DO clause" in syntax_error("OVERRIDE POLICY p ON tick\nDISABLE POLICY q")
    # Where any item may start, the message names POLICY and SET, not all four item keywords.
    assert syntax_error("SET x = 1 < 2 < 3").startswith(
        "t.policy:1:15: gem_syntax: unexpected '<'; expected '+', '-', 'AND', 'OR', 'POLICY', 'SET' or end of file")


def test_double_equals_is_pointed_at_with_a_hint_to_write_one_equals_sign():
    assert syntax_error('POLICY p ON retrieved WHEN field.name == "x" DO contest(field)') == (
        "t.policy:1:39: gem_syntax: '==' is not an operator; equality is '='\n"
        'POLICY p ON retrieved WHEN field.name == "x" DO contest(field)\n'
        "                                      ^^\n"
        "hint: compare with one '=': write field.name = \"x\""
    )
    assert "hint: compare with one '=': write 1 = 1" in syntax_error("SET x = 1 == 1")
    # Chained comparisons keep their own hint.
    assert "comparisons do not chain" in syntax_error("SET x = 1 = 2 = 3")


# ---- syntax diagnostics: each named mistake, exact text -------------------------------


def test_gem_syntax():
    assert syntax_error("POLICY p ON tick DO x() @") == (
        "t.policy:1:25: gem_syntax: unexpected character '@'\n"
        "POLICY p ON tick DO x() @\n"
        "                        ^"
    )


def test_gem_missing_do():
    assert syntax_error("POLICY late\nON field_updated\nWHEN true\n\nPOLICY q ON tick DO x()\n") == (
        "t.policy:1:1: gem_missing_do: policy 'late' has no DO clause\n"
        "POLICY late\n"
        "^^^^^^\n"
        "hint: every policy needs DO <action>(...) after ON and WHEN"
    )
    assert "gem_missing_do: policy 'p' has no DO clause" in syntax_error("POLICY p ON tick\n")


def test_gem_with_before_do():
    assert syntax_error('POLICY p\nON tick\nWITH a = 1\nDO reject("x")\n') == (
        "t.policy:3:1: gem_with_before_do: WITH must come after DO\n"
        "WITH a = 1\n"
        "^^^^\n"
        "hint: write DO <action>(...) first, then WITH key = value"
    )


def test_gem_unclosed_paren():
    assert syntax_error('POLICY p\nON tick\nWHEN (1 < 2\nDO reject("x")\n') == (
        "t.policy:3:6: gem_unclosed_paren: '(' is never closed\n"
        "WHEN (1 < 2\n"
        "     ^\n"
        "hint: add ')' before 'DO'"
    )
    assert "'[' is never closed" in syntax_error("SET x = [1, 2")


def test_named_messages_for_other_common_mistakes():
    assert syntax_error("POLICY p on tick DO x()").endswith(
        "gem_syntax: unexpected name 'on'\nPOLICY p on tick DO x()\n         ^^\n"
        "hint: keywords are upper-case: did you mean 'ON'?")
    assert "gem_syntax: missing ON clause" in syntax_error("POLICY p DO x()")
    assert "unterminated string" in syntax_error('POLICY p ON tick DO reject("abc\n')
    assert "comparisons do not chain" in syntax_error("SET x = 1 < 2 < 3")
    assert "put EXISTS ... WHERE ... in parentheses" in syntax_error("SET x = NOT NOT EXISTS y WHERE b")
    assert "spaces are not allowed around '-'" in syntax_error("POLICY a - b ON tick DO x()")
    assert "invalid date '2026-13-45'" in syntax_error("SET x = 2026-13-45")
    assert "invalid escape" in syntax_error('SET x = "\\q"')


def test_several_syntax_errors_are_reported_at_once_sorted_by_position():
    text = ("POLICY a ON tick WHEN 1 + DO x()\n"
            "POLICY b ON tick WHEN (x DO y()\n"
            "POLICY c ON DO z()\n"
            "POLICY d ON tick DO ok()\n")
    with pytest.raises(PolicySyntaxError) as info:
        parse(text, "t.policy")
    found = [(d.line, d.code) for d in info.value.diagnostics]
    assert found == [(1, "gem_syntax"), (2, "gem_unclosed_paren"), (3, "gem_syntax")]


def test_at_most_ten_diagnostics():
    with pytest.raises(PolicySyntaxError) as info:
        parse("\n".join(f"POLICY p{i} ON tick DO x() @" for i in range(30)))
    assert len(info.value.diagnostics) == 10
    assert [d.line for d in info.value.diagnostics] == list(range(1, 11))


def test_deep_nesting_is_a_syntax_error_not_a_crash():
    assert "nested too deeply" in syntax_error("SET x = " + "[" * 300 + "1" + "]" * 300)
    assert parse("SET x = " + "(" * 300 + "1" + ")" * 300)  # parentheses add no depth


# ---- fuzzing: nothing but PolicySyntaxError ------------------------------------------------

_PIECES = ["POLICY", "OVERRIDE", "DISABLE", "ON", "OR", "WHEN", "DO", "WITH", "SET", "AND", "NOT", "IN", "EXISTS",
           "WHERE", "PRIORITY", "p", "a-b", "tick", "(", ")", "{", "}", "[", "]", ",", ":", ".", "=", "<", "+", "-",
           "1", "2.5", "30d", "2026-01-01", '"s"', '"', "true", "null", "\n", "# c\n", "@", "f(x)"]


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.text(max_size=80))
def test_random_text_raises_only_policy_syntax_error(text):
    try:
        parse(text, "fuzz")
    except PolicySyntaxError as e:
        assert 1 <= len(e.diagnostics) <= 10
        assert str(e)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.sampled_from(_PIECES), max_size=40).map(" ".join))
def test_random_token_soup_raises_only_policy_syntax_error(text):
    try:
        parse(text, "fuzz")
    except PolicyError as e:
        assert isinstance(e, PolicySyntaxError)
        assert all(d.render().startswith("fuzz:") for d in e.diagnostics)
