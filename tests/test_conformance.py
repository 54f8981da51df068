"""Conformance cases as data: every `specs/conformance/<area>/*.yaml` case, run against a real
memory. The case format is documented in specs/conformance/README.md.

One parametrized test runs them all, named `<area>/<file>::<note>`. The loader validates every
case strictly before running it (an unknown key anywhere is an error, so a typo cannot make a
case pass silently), runs its ops on a fresh database with an injected clock, checks each step's
`want` and the case's final `want`, and ends every case with `mem.audit().ok`. A step with
`want_error_code` must fail with that code and leave the state exactly as it was.
"""
from __future__ import annotations

import math
import os
import re
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import pytest
import yaml
from conftest import ENGINE, T0, Clock, drop_location, memory_location, snapshot

import gem
from gem.derived import scope_of
from gem.errors import PolicyError, TransitionRejected
from servers import HANG  # a guard against hangs only (tests/servers.py)

ROOT = Path(__file__).resolve().parent.parent / "specs" / "conformance"


class FormatError(Exception):
    """A case does not follow the format of specs/conformance/README.md."""


# ---------------------------------------------------------------------- YAML without surprises
class _Loader(yaml.SafeLoader):
    """SafeLoader that keeps timestamps as strings (times are parsed by the loader, values
    stay what they look like) and refuses duplicate keys (the second would silently win)."""


_Loader.yaml_implicit_resolvers = {
    ch: [(tag, rx) for tag, rx in resolvers if tag != "tag:yaml.org,2002:timestamp"]
    for ch, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()
}


def _mapping(loader: _Loader, node: yaml.MappingNode, deep: bool = False) -> dict:
    loader.flatten_mapping(node)
    out: dict = {}
    for key_node, value_node in node.value:
        key = loader.construct_object(key_node, deep=True)
        if key in out:
            raise FormatError(f"line {key_node.start_mark.line + 1}: key {key!r} is given twice")
        out[key] = loader.construct_object(value_node, deep=True)
    return out


_Loader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _mapping)


# ---------------------------------------------------------------------- the format
CASE_KEYS = {"note", "policies", "replace_default", "start", "resolver", "ops", "want", "wip",
             "reason", "reviser"}
FACT_KEYS = {"topic", "field", "value", "at", "source", "actor", "ref", "confidence", "polarity",
             "labels", "place"}
EPISODE_KEYS = {"episode", "at", "source", "speaker", "actor", "place"}  # an item with `episode`
RETRIEVE_KEYS = {"query", "topic", "fields", "as_of", "history", "include_archived", "k",
                 "between", "near"}
ADVANCE_KEYS = {"weeks", "days", "hours", "minutes", "seconds", "to"}
STEP_EXTRA = {"want", "want_error_code", "want_error_match", "raises_salience", "keeps_salience",
              "actor", "scope"}
# op -> (argument check, allowed keys of its step `want`; None: `want` is a partial matcher)
NO_ARGS = "none"
OPS: dict[str, tuple[Any, set[str] | None]] = {
    "ingest": ("facts", {"entries", "corroborations", "denials", "created_topics", "flagged",
                         "dropped", "resolved", "episodes"}),
    "retrieve": (RETRIEVE_KEYS, {"titles", "values", "fields", "match", "episodes", "truncated"}),
    "revise": (NO_ARGS, {"merged", "conflicts", "flags_evaluated", "flags_cleared", "flags_open"}),
    "forget": (NO_ARGS, {"attenuated"}),
    "tick": (NO_ARGS, {"attenuated"}),
    "maintain": (NO_ARGS, {"attenuated", "merged", "conflicts", "flags_evaluated",
                           "flags_cleared", "flags_open"}),
    "restore": ({"topic", "field"}, {"returns"}),
    "link": ({"src", "dst", "kind"}, {"returns"}),
    "advance": (ADVANCE_KEYS, set()),
    "load_policies": ("policy_text", {"policies"}),
    "inspect": ({"topic", "field"}, None),
    "history": ({"topic", "field"}, None),
    "explain": ({"topic", "field"}, None),
    "stats": (NO_ARGS, None),
    "audit": (NO_ARGS, None),
    "reopen": ({"naive_clock"}, set()),
    "retract": ({"topic", "field", "reason"}, {"returns"}),
    "pending_revisions": (NO_ARGS, None),
    "log": ({"last"}, None),
    "call": ({"method", "args", "kwargs"}, None),
    "cli": ("argv", None),
    "erase": ({"topic", "field", "source", "reason"}, None),
    "erase_all": ({"reason"}, None),
    "compact": (NO_ARGS, set()),
}
CASE_WANT_KEYS = {"values", "history", "superseded_by", "status", "flags", "salience_order",
                  "stats", "inspect", "explain", "absent", "fired", "not_fired", "annotations",
                  "policies", "audit", "reviser_calls"}
FLAG_KEYS = {"policy", "origin", "evidence", "evidence_keys"}
FIRED_KEYS = {"policy", "event", "action", "evidence", "op"}
CONDITIONS = {"C1", "C2", "C3", "C4", "C5", "C6", "policy", "cascade"}
ORDER_OPS = {">": lambda a, b: a > b, ">=": lambda a, b: a >= b, "<": lambda a, b: a < b,
             "<=": lambda a, b: a <= b, "=": lambda a, b: a == b}


def _fail(where: str, message: str) -> None:
    raise FormatError(f"{where}: {message}")


def _keys(where: str, value: Any, allowed: set[str], required: set[str] = frozenset()) -> dict:
    if not isinstance(value, dict):
        _fail(where, f"expected a mapping, got {type(value).__name__}")
    unknown = sorted(set(value) - allowed, key=str)
    if unknown:
        _fail(where, f"unknown key(s) {unknown}; allowed: {sorted(allowed)}")
    missing = sorted(required - set(value))
    if missing:
        _fail(where, f"missing key(s) {missing}")
    return value


def _is_text(value: Any) -> bool:
    return isinstance(value, str) and bool(value.strip())


def validate_case(case: Any, where: str) -> None:
    _keys(where, case, CASE_KEYS, {"note", "ops"})
    if not _is_text(case["note"]) or "\n" in case["note"].strip():
        _fail(where, "`note` must be one line of text")
    if "policies" in case and not isinstance(case["policies"], str):
        _fail(where, "`policies` must be policy source text")
    if "replace_default" in case:
        if not isinstance(case["replace_default"], bool):
            _fail(where, "`replace_default` must be true or false")
        if "policies" not in case:
            _fail(where, "`replace_default` needs `policies`")
    if "start" in case:
        parse_time(case["start"], f"{where}.start")
    resolver = case.get("resolver", "tiered")
    if isinstance(resolver, dict):
        _keys(f"{where}.resolver", resolver, {"similarity_threshold"}, {"similarity_threshold"})
    elif resolver not in ("tiered", "exact"):
        _fail(where, "`resolver` must be 'tiered', 'exact' or {similarity_threshold: x}")
    if "reviser" in case:
        answers = case["reviser"]
        if not isinstance(answers, dict) or not answers:
            _fail(where, "`reviser` maps topic titles to a list of facts or null")
        for title, facts in answers.items():
            if facts is not None:
                if not isinstance(facts, list):
                    _fail(where, f"`reviser[{title!r}]` must be a list of facts or null")
                for j, fact in enumerate(facts):
                    _keys(f"{where}.reviser[{title!r}][{j}]", fact, FACT_KEYS)
    if "wip" in case:
        if case["wip"] is not True:
            _fail(where, "`wip` must be true (remove it otherwise)")
        if not _is_text(case.get("reason")):
            _fail(where, "a `wip` case needs a `reason`")
    elif "reason" in case:
        _fail(where, "`reason` belongs to `wip` cases")
    if not isinstance(case["ops"], list) or not case["ops"]:
        _fail(where, "`ops` must be a non-empty list of steps")
    for i, step in enumerate(case["ops"]):
        validate_step(step, f"{where}.ops[{i}]")
    if "want" in case:
        validate_case_want(case["want"], f"{where}.want")
    elif not any(isinstance(s, dict) and ("want" in s or "want_error_code" in s
                                           or "raises_salience" in s or "keeps_salience" in s)
                 for s in case["ops"]):
        _fail(where, "a case must expect something: a `want`, or a step `want`/"
                     "`want_error_code`/`raises_salience`/`keeps_salience`")


def validate_step(step: Any, where: str) -> None:
    if not isinstance(step, dict):
        _fail(where, f"a step is a mapping with one op key, got {type(step).__name__}")
    ops = [k for k in step if k in OPS]
    if len(ops) != 1:
        _fail(where, f"a step needs exactly one op key out of {sorted(OPS)}, got {sorted(step)}")
    op = ops[0]
    _keys(where, step, STEP_EXTRA | {op})
    where = f"{where}.{op}"
    spec, want_keys = OPS[op]
    args = step[op]
    if spec == NO_ARGS:
        if args not in (None, {}):
            _fail(where, "takes no arguments")
    elif spec == "facts":
        facts = args if isinstance(args, list) else [args]
        if isinstance(args, list) and not args and "want_error_code" not in step:
            _fail(where, "an empty fact list only makes sense with `want_error_code`")
        for j, fact in enumerate(facts):
            _keys(f"{where}[{j}]", fact,
                  EPISODE_KEYS if isinstance(fact, dict) and "episode" in fact else FACT_KEYS)
            if "at" in fact:
                parse_time(fact["at"], f"{where}[{j}].at")
            if "place" in fact and not (isinstance(fact["place"], dict) or (
                    isinstance(fact["place"], list) and len(fact["place"]) in (2, 3))):
                _fail(f"{where}[{j}]", "`place` is [lat, lon], [lat, lon, name] or "
                      "{lat, lon, name}")
    elif spec == "argv":
        if not isinstance(args, list) or not args or not all(isinstance(a, str) for a in args):
            _fail(where, "needs the command line, a list of strings")
    elif spec == "policy_text":
        if isinstance(args, dict):
            _keys(where, args, {"text", "replace_default"}, {"text"})
            text, replace = args["text"], args.get("replace_default", False)
            if not isinstance(replace, bool):
                _fail(where, "`replace_default` must be true or false")
        else:
            text = args
        if not isinstance(text, str):
            _fail(where, "needs policy source text")
    elif op == "retrieve" and isinstance(args, str):
        pass  # shorthand: the query text
    elif op in ("retrieve", "reopen", "log") and args in (None, {}):
        pass
    else:
        _keys(where, args, spec)
        if op == "advance":
            if "to" in args:
                if len(args) != 1:
                    _fail(where, "`to` cannot be combined with a duration")
                parse_time(args["to"], f"{where}.to")
            elif not args or not all(isinstance(v, (int, float)) and v >= 0 for v in args.values()):
                _fail(where, "needs non-negative amounts of weeks/days/hours/minutes/seconds")
        if op == "retrieve" and "as_of" in args:
            parse_time(args["as_of"], f"{where}.as_of")
        if op == "retrieve" and "between" in args:
            if not isinstance(args["between"], list) or len(args["between"]) != 2:
                _fail(where, "`between` is a list of two times")
            for b in args["between"]:
                parse_time(b, f"{where}.between")
        if op == "retrieve" and "near" in args:
            if not isinstance(args["near"], list) or len(args["near"]) != 3:
                _fail(where, "`near` is a list [lat, lon, km]")
        if op in ("history", "explain") and "field" not in args:
            _fail(where, "needs `topic` and `field`")
        if op in ("restore", "inspect", "history", "explain") and "topic" not in args:
            _fail(where, "needs `topic`")
        if op == "retract" and set(args) != {"topic", "field", "reason"}:
            _fail(where, "needs `topic`, `field` and `reason`")
        if op == "call" and not _is_text(args.get("method")):
            _fail(where, "needs the `method` of the memory to call")
        if op == "link" and not {"src", "dst"} <= set(args):
            _fail(where, "needs `src` and `dst`")
    if "want_error_code" in step:
        code = step["want_error_code"]
        if isinstance(code, list):
            if not code or not all(_is_text(c) and c.startswith("gem_") for c in code):
                _fail(where, "a list of `want_error_code`s must be policy diagnostic codes")
        elif not _is_text(code):
            _fail(where, "`want_error_code` must be a code, a condition or an exception class name")
        if "want" in step:
            _fail(where, "a step expects either an error or a result, not both")
    elif "want_error_match" in step:
        _fail(where, "`want_error_match` needs `want_error_code`")
    if "want" in step:
        if want_keys is None:
            validate_matcher(step["want"], f"{where}.want")
        else:
            if not want_keys:
                _fail(where, "this op has no result to check")
            _keys(f"{where}.want", step["want"], want_keys)
            if "match" in step["want"]:
                validate_matcher(step["want"]["match"], f"{where}.want.match")
    for key in ("raises_salience", "keeps_salience"):
        if key in step and (not isinstance(step[key], list) or not step[key]
                            or not all(_is_text(u) for u in step[key])):
            _fail(where, f"`{key}` must be a non-empty list of units ('Topic' or 'Topic/field')")


def validate_case_want(want: Any, where: str) -> None:
    _keys(where, want, CASE_WANT_KEYS)
    if not want:
        _fail(where, "an empty `want` checks nothing")
    for key in ("values", "history", "superseded_by", "status", "flags", "inspect", "explain",
                "annotations"):
        if key in want and not isinstance(want[key], dict):
            _fail(f"{where}.{key}", "must map units to expectations")
    for unit, pairs in want.get("superseded_by", {}).items():
        if not isinstance(pairs, list) or not pairs or \
                not all(isinstance(p, list) and len(p) == 2 for p in pairs):
            _fail(f"{where}.superseded_by[{unit!r}]", "must be a list of [old value, new value]")
    for unit, flags in want.get("flags", {}).items():
        if isinstance(flags, list):
            for j, flag in enumerate(flags):
                _keys(f"{where}.flags[{unit!r}][{j}]", flag, FLAG_KEYS)
        elif not isinstance(flags, int) or isinstance(flags, bool):
            _fail(f"{where}.flags[{unit!r}]", "must be a count or a list of flag expectations")
    for key in ("fired", "not_fired"):
        if key in want:
            if not isinstance(want[key], list) or not want[key]:
                _fail(f"{where}.{key}", "must be a non-empty list")
            for j, rec in enumerate(want[key]):
                _keys(f"{where}.{key}[{j}]", rec, FIRED_KEYS)
    if "salience_order" in want:
        chains = want["salience_order"]
        chains = chains if chains and isinstance(chains[0], list) else [chains]
        for chain in chains:
            if len(chain) < 3 or len(chain) % 2 == 0 or \
                    any(op not in ORDER_OPS for op in chain[1::2]):
                _fail(f"{where}.salience_order", "must alternate units and one of > >= < <= =")
    if "absent" in want and not isinstance(want["absent"], list):
        _fail(f"{where}.absent", "must be a list of topic names")
    for key in ("stats", "audit", "reviser_calls"):
        if key in want:
            validate_matcher(want[key], f"{where}.{key}")
    for key in ("inspect", "explain", "annotations"):
        for unit, expected in want.get(key, {}).items():
            validate_matcher(expected, f"{where}.{key}[{unit!r}]")


MATCH_OPS = {"$gt", "$ge", "$lt", "$le", "$ne", "$approx", "$len", "$contains", "$has", "$keys",
             "$absent", "$in"}


def validate_matcher(expected: Any, where: str) -> None:
    if isinstance(expected, dict):
        ops = [k for k in expected if isinstance(k, str) and k.startswith("$")]
        if ops:
            if len(ops) != len(expected):
                _fail(where, "a matcher mixes $-operators and keys")
            bad = sorted(set(ops) - MATCH_OPS)
            if bad:
                _fail(where, f"unknown matcher operator(s) {bad}; known: {sorted(MATCH_OPS)}")
            if "$has" in expected:
                validate_matcher(expected["$has"], f"{where}.$has")
            return
        for key, value in expected.items():
            validate_matcher(value, f"{where}.{key}")
    elif isinstance(expected, list):
        for i, value in enumerate(expected):
            validate_matcher(value, f"{where}[{i}]")


def parse_time(value: Any, where: str) -> datetime:
    if not isinstance(value, str):
        _fail(where, f"a time is an ISO 8601 string, got {value!r}")
    try:
        parsed = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        _fail(where, f"not an ISO 8601 time: {value!r}")
    return parsed.replace(tzinfo=timezone.utc) if parsed.tzinfo is None \
        else parsed.astimezone(timezone.utc)


# ---------------------------------------------------------------------- collection
@dataclass
class Case:
    id: str
    file: Path
    index: int
    body: Any
    problem: str | None = None


def collect() -> list[Case]:
    cases: list[Case] = []
    files = sorted(p for p in ROOT.rglob("*") if p.suffix in (".yaml", ".yml"))
    for path in files:
        rel = path.relative_to(ROOT).as_posix()
        try:
            doc = yaml.load(path.read_text(encoding="utf-8"), Loader=_Loader)
            if isinstance(doc, dict):
                _keys(rel, doc, {"cases"}, {"cases"})
                doc = doc["cases"]
            if not isinstance(doc, list) or not doc:
                _fail(rel, "a case file holds a non-empty list of cases (or `cases:` with one)")
        except (yaml.YAMLError, FormatError) as exc:
            cases.append(Case(f"{rel}::<unreadable>", path, -1, None, str(exc)))
            continue
        seen: set[str] = set()
        for i, body in enumerate(doc):
            note = body.get("note") if isinstance(body, dict) else None
            name = note.strip() if isinstance(note, str) and note.strip() else f"#{i}"
            problem = None
            if name in seen:
                problem = f"{rel}: note {name!r} is used by two cases"
                name = f"{name} #{i}"
            seen.add(name)
            cases.append(Case(f"{rel}::{name}", path, i, body, problem))
    return cases


CASES = collect()


def test_there_are_enough_cases() -> None:
    assert ROOT.is_dir(), ROOT
    running = [c for c in CASES if not c.problem and isinstance(c.body, dict) and not c.body.get("wip")]
    assert len(running) >= 60, f"only {len(running)} conformance cases run"


# ---------------------------------------------------------------------- matching
def match(actual: Any, expected: Any, path: str = "") -> list[str]:
    """Partial structural match: mappings match on the keys given, lists element-wise with
    the same length, times against ISO strings, `$`-operators as documented."""
    where = path or "result"
    if isinstance(expected, dict) and expected and all(
            isinstance(k, str) and k.startswith("$") for k in expected):
        return _match_ops(actual, expected, where)
    if isinstance(expected, dict):
        if not isinstance(actual, dict):
            return [f"{where}: expected a mapping, got {actual!r}"]
        errors = []
        for key, value in expected.items():
            if isinstance(value, dict) and "$absent" in value:
                if (key in actual) == bool(value["$absent"]):
                    errors.append(f"{where}.{key}: expected {'absent' if value['$absent'] else 'present'}")
                continue
            if key not in actual:
                errors.append(f"{where}.{key}: missing (have {sorted(actual, key=str)})")
                continue
            errors += match(actual[key], value, f"{where}.{key}")
        return errors
    if isinstance(expected, list):
        if not isinstance(actual, (list, tuple)):
            return [f"{where}: expected a list, got {actual!r}"]
        if len(actual) != len(expected):
            return [f"{where}: expected {len(expected)} items, got {len(actual)}: {actual!r}"]
        errors = []
        for i, (a, e) in enumerate(zip(actual, expected)):
            errors += match(a, e, f"{where}[{i}]")
        return errors
    return [] if same(actual, expected) else [f"{where}: expected {expected!r}, got {actual!r}"]


def same(actual: Any, expected: Any) -> bool:
    """Exact equality of plain data, where true is not 1 and "1" is not 1; a time equals the
    ISO string that names it."""
    if isinstance(actual, datetime) and isinstance(expected, str):
        try:
            return actual == parse_time(expected, "expected")
        except FormatError:
            return False
    if isinstance(actual, bool) or isinstance(expected, bool):
        return isinstance(actual, bool) and isinstance(expected, bool) and actual == expected
    if isinstance(actual, (int, float)) and isinstance(expected, (int, float)):
        return actual == expected
    if isinstance(actual, dict) and isinstance(expected, dict):
        return actual.keys() == expected.keys() and all(same(actual[k], expected[k]) for k in actual)
    if isinstance(actual, (list, tuple)) and isinstance(expected, (list, tuple)):
        return len(actual) == len(expected) and all(same(a, e) for a, e in zip(actual, expected))
    return type(actual) is type(expected) and actual == expected


def _comparable(actual: Any, bound: Any) -> tuple[Any, Any]:
    if isinstance(actual, datetime) and isinstance(bound, str):
        return actual, parse_time(bound, "bound")
    return actual, bound


def _match_ops(actual: Any, ops: dict, where: str) -> list[str]:
    errors = []
    for op, arg in ops.items():
        try:
            if op in ("$gt", "$ge", "$lt", "$le"):
                a, b = _comparable(actual, arg)
                ok = a is not None and ORDER_OPS[{"$gt": ">", "$ge": ">=", "$lt": "<",
                                                  "$le": "<="}[op]](a, b)
            elif op == "$ne":
                ok = not same(actual, arg)
            elif op == "$approx":
                ok = isinstance(actual, (int, float)) and math.isclose(actual, arg, rel_tol=0,
                                                                       abs_tol=1e-6)
            elif op == "$len":
                ok = hasattr(actual, "__len__") and len(actual) == arg
            elif op == "$contains":
                ok = arg in actual if isinstance(actual, str) else \
                    any(same(x, arg) for x in actual)
            elif op == "$has":
                ok = isinstance(actual, (list, tuple)) and any(not match(x, arg) for x in actual)
            elif op == "$keys":
                ok = isinstance(actual, dict) and set(actual) == set(arg)
            elif op == "$in":
                ok = any(same(actual, x) for x in arg)
            elif op == "$absent":
                ok = False  # only meaningful as a mapping value, handled there
            else:  # pragma: no cover - validate_matcher refuses these
                ok = False
        except TypeError:
            ok = False
        if not ok:
            errors.append(f"{where}: expected {op} {arg!r}, got {actual!r}")
    return errors


def check(errors: list[str], what: str) -> None:
    assert not errors, f"{what}:\n  " + "\n  ".join(errors)


# ---------------------------------------------------------------------- running a case
class Runner:
    def __init__(self, case: dict, tmp_path: Path) -> None:
        self.case = case
        self.tmp = tmp_path
        self.location = memory_location(tmp_path)
        self.clock = Clock(parse_time(case["start"], "start") if "start" in case else T0)
        self.files = 0
        paths = None
        self.defaults = not case.get("replace_default", False)
        if "policies" in case:
            paths = self.policy_paths(case["policies"])
        self.reviser_calls: list[Any] = []
        self.mem = self.open(paths)

    def open(self, paths: list[str] | None) -> gem.Memory:
        resolver = self.case.get("resolver")
        return gem.open(path=self.location, policies=paths, clock=self.clock,
                        engine=ENGINE, defaults=self.defaults if paths else True,
                        resolver=ExactOnly() if resolver == "exact" else
                        gem.TieredResolver(**resolver) if isinstance(resolver, dict) else None,
                        reviser=self.reviser if "reviser" in self.case else None)

    def reviser(self, revision: gem.PendingRevision) -> list[gem.Fact] | None:
        """The case's reviser: its answer for the topic's title (a title it does not name, or
        null: it declines, and the flags stay open)."""
        self.reviser_calls.append(revision.model_dump())
        answer = self.case["reviser"].get(revision.title)
        return None if answer is None else [self.fact(f) for f in answer]

    def policy_paths(self, text: str) -> list[str]:
        """A case's policy text as a file; it extends the default governance unless the case
        says `replace_default`."""
        self.files += 1
        path = self.tmp / f"case-{self.files}.policy"
        path.write_text(text, encoding="utf-8")
        return [str(path)]

    # ------------------------------------------------------------ units
    def topic_id(self, name: str) -> str:
        view = self.mem.inspect(name)
        assert view is not None, f"no topic {name!r}"
        return view.id

    def title(self, tid: str) -> str:
        scope = scope_of(tid)
        view = (self.mem if scope == "default" else self.mem.scope(scope)).inspect(gem.TopicId(tid))
        assert view is not None, f"no topic with id {tid!r}"
        return view.title

    def split(self, unit: str) -> tuple[str, str | None, int | None]:
        topic, _, rest = unit.partition("/")
        if not rest:
            return topic, None, None
        field, hash_, index = rest.partition("#")
        return topic, field, int(index) if hash_ else None

    def view(self, unit: str) -> Any:
        topic, field, index = self.split(unit)
        assert index is None, f"{unit}: an entry has no view"
        view = self.mem.inspect(topic, field)
        assert view is not None, f"no unit {unit!r}"
        return view

    def salience(self, unit: str) -> float:
        return self.view(unit).salience

    def unit_name(self, unit_id: str) -> str:
        """'t3/deadline' -> 'Title/deadline'; 't3' -> 'Title'."""
        tid, _, field = unit_id.partition("/")
        return self.title(tid) + (f"/{field}" if field else "")

    # ------------------------------------------------------------ steps
    def run(self) -> None:
        for i, step in enumerate(self.case["ops"]):
            op = next(k for k in step if k in OPS)
            where = f"ops[{i}] {op}"
            before_salience = {u: self.salience(u) for u in
                               step.get("raises_salience", []) + step.get("keeps_salience", [])}
            if "want_error_code" in step:
                self.expect_error(step, op, where)
            else:
                result = self.do(op, step[op], step.get("actor"), step.get("scope"))
                if "want" in step:
                    self.check_step(op, result, step["want"], where)
            for unit in step.get("raises_salience", []):
                after = self.salience(unit)
                assert after > before_salience[unit], \
                    f"{where}: salience of {unit} did not rise ({before_salience[unit]} -> {after})"
            for unit in step.get("keeps_salience", []):
                after = self.salience(unit)
                assert after == before_salience[unit], \
                    f"{where}: salience of {unit} changed ({before_salience[unit]} -> {after})"
        if "want" in self.case:
            self.check_final(self.case["want"])
        report = self.mem.audit(full=True)
        assert report.ok, f"audit after the case: {report.violations}"

    def state(self) -> dict:
        return {"store": snapshot(self.mem), "policies": self.mem.policies.hash,
                "names": [p.name for p in self.mem.policies.policies]}

    def expect_error(self, step: dict, op: str, where: str) -> None:
        code = step["want_error_code"]
        codes = code if isinstance(code, list) else [code]
        code = codes[0]
        before = self.state()
        with pytest.raises(Exception) as info:
            self.do(op, step[op], step.get("actor"), step.get("scope"))
        exc = info.value
        assert isinstance(exc, gem.GemError) or code in {c.__name__ for c in type(exc).__mro__}, \
            f"{where}: expected {code}, got {type(exc).__name__}: {exc}"
        if code.startswith("gem_"):
            assert isinstance(exc, PolicyError), f"{where}: expected {code}, got {exc!r}"
            found = [d.code for d in exc.diagnostics]
            assert set(codes) <= set(found), f"{where}: expected {codes}, got {found}:\n{exc}"
        elif code in CONDITIONS:
            assert isinstance(exc, TransitionRejected) and exc.condition == code, \
                f"{where}: expected a transition rejected by {code}, got {exc!r}"
        else:
            names = {c.__name__ for c in type(exc).__mro__}
            assert code in names, f"{where}: expected {code}, got {type(exc).__name__}: {exc}"
        if "want_error_match" in step:
            assert step["want_error_match"] in str(exc), \
                f"{where}: {step['want_error_match']!r} not in the error: {exc}"
        assert self.state() == before, f"{where}: the failed step changed the state"

    def do(self, op: str, args: Any, actor: str | None, scope: str | None = None) -> Any:
        mem = self.mem if scope is None else self.mem.scope(scope)
        who = {"actor": actor} if actor else {}
        args = {} if args is None else args
        if op == "ingest":
            facts = [self.fact(f) for f in (args if isinstance(args, list) else [args])]
            return mem.ingest(facts, **who)
        if op == "retrieve":
            if isinstance(args, str):
                args = {"query": args}
            kwargs = dict(args)
            if "as_of" in kwargs:
                kwargs["as_of"] = parse_time(kwargs["as_of"], "as_of")
            if "between" in kwargs:
                kwargs["between"] = tuple(parse_time(b, "between") for b in kwargs["between"])
            if "near" in kwargs:
                kwargs["near"] = tuple(kwargs["near"])
            return mem.retrieve(**kwargs, **who)
        if op == "revise":
            return mem.revise(**who)
        if op in ("forget", "tick"):
            return mem.forget(**who)
        if op == "maintain":
            return mem.maintain(**who)
        if op == "restore":
            return mem.restore(args["topic"], args.get("field"), **who)
        if op == "link":
            return mem.link(args["src"], args["dst"], **({"kind": args["kind"]} if "kind" in args
                                                        else {}), **who)
        if op == "advance":
            if "to" in args:
                self.clock.now = parse_time(args["to"], "to")
            else:
                self.clock.advance(**{k: float(v) for k, v in args.items()})
            return None
        if op == "load_policies":
            text, replace = (args["text"], args.get("replace_default", False)) \
                if isinstance(args, dict) else (args, False)
            return mem.load_policies(self.policy_paths(text), defaults=not replace, **who)
        if op == "inspect":
            return mem.inspect(args["topic"], args.get("field"))
        if op == "history":
            return mem.history(args["topic"], args["field"])
        if op == "explain":
            return mem.explain(args["topic"], args["field"])
        if op == "stats":
            return mem.stats()
        if op == "audit":
            return mem.audit(full=True)
        if op == "reopen":
            # Close and open the same database without `policies`: the stored set governs it,
            # and every index is rebuilt from the database.
            self.mem.close()
            self.clock.naive = bool(args.get("naive_clock", False))
            self.mem = self.open(None)
            return None
        if op == "retract":
            return mem.retract(args["topic"], args["field"], args["reason"], **who)
        if op == "pending_revisions":
            return mem.pending_revisions()
        if op == "log":
            return mem.transitions()[-int(args.get("last", 1)):]
        if op == "call":
            # The memory's method with the YAML values as they are: how bad input is refused.
            call_args = [self.raw(a) for a in args.get("args", [])]
            call_kwargs = {k: self.raw(v) for k, v in args.get("kwargs", {}).items()}
            return getattr(mem, args["method"])(*call_args, **call_kwargs)
        if op == "cli":
            return self.cli(args)
        if op == "erase":
            receipt = mem.erase(args["topic"], args.get("field"), source=args.get("source"),
                                reason=args.get("reason", "conformance"), **who)
            assert mem.verify_erasure(receipt).ok, mem.verify_erasure(receipt).problems
            return receipt
        if op == "erase_all":
            receipt = mem.erase_all(args.get("reason", "conformance"), **who)
            assert mem.verify_erasure(receipt).ok
            return receipt
        if op == "compact":
            if ENGINE == "falkordb":  # no files to rewrite: FalkorDB frees erased values at once
                with pytest.raises(gem.InvalidInput, match="compact"):
                    mem.compact()
                return None
            mem.compact()
            return None
        raise AssertionError(op)  # pragma: no cover - validate_step refuses unknown ops

    def raw(self, value: Any) -> Any:
        return raw(value, self.tmp)

    def cli(self, argv: list[str]) -> dict:
        """`gem ARGV` as a subprocess ("{tmp}" is the case's directory): its exit code, output,
        and whether each path it was given exists afterwards."""
        import subprocess
        import sys
        args = [a.replace("{tmp}", str(self.tmp)) for a in argv]
        # The command line takes embedded databases only: on FalkorDB it runs on the default.
        if args[0] in ("demo", "maintain", "init", "audit", "stats") and "--engine" not in args \
                and ENGINE != "falkordb":
            args += ["--engine", ENGINE]
        done = subprocess.run([sys.executable, "-m", "gem", *args], capture_output=True,
                              text=True, timeout=HANG)
        return {"exit": done.returncode, "stdout": done.stdout, "stderr": done.stderr,
                "exists": {a.replace(str(self.tmp), "{tmp}"): os.path.exists(a)
                           for a in args if str(self.tmp) in a}}

    def fact(self, spec: dict) -> gem.Fact | gem.Episode:
        kwargs = dict(spec)
        if "at" in kwargs:
            kwargs["at"] = parse_time(kwargs["at"], "at")
        if "episode" in kwargs:
            return gem.Episode(kwargs.pop("episode"), **kwargs)
        return gem.Fact(**kwargs)

    # ------------------------------------------------------------ step results
    def check_step(self, op: str, result: Any, want: Any, where: str) -> None:
        if OPS[op][1] is None:
            check(match(dump(result), want), where)
            return
        errors: list[str] = []
        if op == "ingest":
            for key in ("entries", "corroborations", "denials"):
                if key in want:
                    got = len(result.entry_ids) if key == "entries" else getattr(result, key)
                    if got != want[key]:
                        errors.append(f"{key}: expected {want[key]}, got {got}")
            if "episodes" in want and len(result.episode_ids) != want["episodes"]:
                errors.append(f"episodes: expected {want['episodes']}, got {len(result.episode_ids)}")
            for key in ("created_topics", "flagged"):
                if key in want:
                    # by id, named the harness's way (the result's own names are tested too)
                    ids = getattr(result, "created_topic_ids" if key == "created_topics" else "flagged_ids")
                    assert [self.title(t) for t in ids] == getattr(result, key)
                    got = sorted(self.title(t) for t in ids)
                    if got != sorted(want[key]):
                        errors.append(f"{key}: expected {sorted(want[key])}, got {got}")
            for key in ("dropped", "resolved"):
                if key in want:
                    errors += match(dump(getattr(result, key)), want[key], key)
        elif op == "retrieve":
            titles = [t.title for t in result.topics]
            if "titles" in want and titles != want["titles"]:
                errors.append(f"titles: expected {want['titles']}, got {titles}")
            sources = [e.source for e in result.episodes]
            if "episodes" in want and sources != want["episodes"]:
                errors.append(f"episodes: expected sources {want['episodes']}, got {sources}")
            if "truncated" in want and result.truncated is not want["truncated"]:
                errors.append(f"truncated: expected {want['truncated']}, got {result.truncated}")
            for unit, value in want.get("values", {}).items():
                topic, field, _ = self.split(unit)
                got = result.value(topic, field)
                if not same(got, value):
                    errors.append(f"values[{unit}]: expected {value!r}, got {got!r}")
            for topic, names in want.get("fields", {}).items():
                found = [t for t in result.topics if t.title == topic]
                got = sorted(found[0].fields) if found else None
                if got != sorted(names):
                    errors.append(f"fields[{topic}]: expected {sorted(names)}, got {got}")
            if "match" in want:
                errors += match(dump(result), want["match"])
        elif op in ("revise", "maintain", "forget", "tick"):
            report = result.get("revise", result) if op == "maintain" else result
            if "merged" in want:
                got = [[self.title(a), self.title(b)] for a, b in report["merged_ids"]]
                if got != want["merged"]:
                    errors.append(f"merged: expected {want['merged']}, got {got}")
            if "conflicts" in want:
                got = sorted(self.unit_name(f) for f in report["conflict_ids"])
                if got != sorted(want["conflicts"]):
                    errors.append(f"conflicts: expected {sorted(want['conflicts'])}, got {got}")
            for key in ("flags_evaluated", "flags_open"):
                if key in want:
                    got = sorted(self.title(t) for t in report[key + "_ids"])
                    if got != sorted(want[key]):
                        errors.append(f"{key}: expected {sorted(want[key])}, got {got}")
            if "flags_cleared" in want:
                got = sorted([self.title(t), by] for t, by in report["flags_cleared_ids"])
                if got != sorted(want["flags_cleared"]):
                    errors.append(f"flags_cleared: expected {sorted(want['flags_cleared'])}, "
                                  f"got {got}")
            if "attenuated" in want:
                forgot = result["forget"] if op == "maintain" else result
                got = sorted(self.unit_name(u) for u in forgot["attenuated_ids"])
                if got != sorted(want["attenuated"]):
                    errors.append(f"attenuated: expected {sorted(want['attenuated'])}, got {got}")
        elif op in ("restore", "link", "retract"):
            if result is not want["returns"]:
                errors.append(f"returns: expected {want['returns']}, got {result}")
        elif op == "load_policies":
            got = sorted(p.name for p in result.policies)
            if got != sorted(want["policies"]):
                errors.append(f"policies: expected {sorted(want['policies'])}, got {got}")
        check(errors, where)

    # ------------------------------------------------------------ the final state
    def check_final(self, want: dict) -> None:
        mem, errors = self.mem, []
        for unit, value in want.get("values", {}).items():
            got = self.view(unit).value
            if not same(got, value):
                errors.append(f"values[{unit}]: expected {value!r}, got {got!r}")
        for unit, entries in want.get("history", {}).items():
            topic, field, _ = self.split(unit)
            history = [dump(h) for h in mem.history(topic, field)]
            expected = [e if isinstance(e, dict) else {"value": e} for e in entries]
            errors += match(history, expected, f"history[{unit}]")
        for unit, pairs in want.get("superseded_by", {}).items():
            topic, field, _ = self.split(unit)
            history = mem.history(topic, field)
            for old, new in pairs:
                olds = [h for h in history if same(h.value, old)]
                news = [h for h in history if same(h.value, new)]
                if len(olds) != 1 or len(news) != 1:
                    errors.append(f"superseded_by[{unit}]: {old!r} and {new!r} must each be one "
                                  f"entry of {[h.value for h in history]}")
                elif olds[0].superseded_by != news[0].id:
                    errors.append(f"superseded_by[{unit}]: {old!r} is superseded by "
                                  f"{olds[0].superseded_by}, not by {new!r} ({news[0].id})")
        for unit, status in want.get("status", {}).items():
            got = self.view(unit).status
            if got != status:
                errors.append(f"status[{unit}]: expected {status}, got {got}")
        for topic, flags in want.get("flags", {}).items():
            got = self.view(topic).flags
            if isinstance(flags, int):
                if len(got) != flags:
                    errors.append(f"flags[{topic}]: expected {flags}, got {len(got)}: {got}")
                continue
            if len(got) != len(flags):
                errors.append(f"flags[{topic}]: expected {len(flags)}, got {len(got)}: {got}")
                continue
            for j, (flag, exp) in enumerate(zip(got, flags)):
                p = f"flags[{topic}][{j}]"
                if "policy" in exp and flag.policy != exp["policy"]:
                    errors.append(f"{p}.policy: expected {exp['policy']}, got {flag.policy}")
                if "origin" in exp:
                    origin = None if flag.origin_id is None else self.title(flag.origin_id)
                    assert origin == flag.origin
                    if origin != exp["origin"]:
                        errors.append(f"{p}.origin: expected {exp['origin']}, got {origin}")
                if "evidence_keys" in exp and set(flag.evidence) != set(exp["evidence_keys"]):
                    errors.append(f"{p}.evidence keys: expected {sorted(exp['evidence_keys'])}, "
                                  f"got {sorted(flag.evidence)}")
                if "evidence" in exp:
                    errors += match(flag.evidence, exp["evidence"], f"{p}.evidence")
        if "salience_order" in want:
            chains = want["salience_order"]
            for chain in chains if isinstance(chains[0], list) else [chains]:
                values = {u: self.salience(u) for u in chain[0::2]}
                for a, op, b in zip(chain[0::2], chain[1::2], chain[2::2]):
                    if not ORDER_OPS[op](values[a], values[b]):
                        errors.append(f"salience_order: {a} ({values[a]}) {op} {b} ({values[b]}) "
                                      "does not hold")
        if "stats" in want:
            errors += match(mem.stats(), want["stats"], "stats")
        for unit, expected in want.get("inspect", {}).items():
            errors += match(dump(self.view(unit)), expected, f"inspect[{unit}]")
        for unit, expected in want.get("explain", {}).items():
            topic, field, _ = self.split(unit)
            errors += match(dump(mem.explain(topic, field)), expected, f"explain[{unit}]")
        for topic in want.get("absent", []):
            if mem.inspect(topic) is not None:
                errors.append(f"absent: topic {topic!r} exists")
        if "fired" in want or "not_fired" in want:
            fired = [{**p, "op": rec["op"]} for rec in mem.transitions() for p in rec["policies"]]
            for exp in want.get("fired", []):
                if not any(not match(f, exp) for f in fired):
                    errors.append(f"fired: nothing matches {exp}; fired: {fired}")
            for exp in want.get("not_fired", []):
                hits = [f for f in fired if not match(f, exp)]
                if hits:
                    errors.append(f"not_fired: {exp} matches {hits}")
        for unit, expected in want.get("annotations", {}).items():
            errors += match(self.annotations(unit), expected, f"annotations[{unit}]")
        if "policies" in want:
            got = sorted(p.name for p in mem.policies.policies)
            if got != sorted(want["policies"]):
                errors.append(f"policies: expected {sorted(want['policies'])}, got {got}")
        if "reviser_calls" in want:
            errors += match(self.reviser_calls, want["reviser_calls"], "reviser_calls")
        if "audit" in want:
            errors += match(dump(mem.audit(full=True)), want["audit"], "audit")
        check(errors, "want")

    def annotations(self, unit: str) -> dict:
        """What `annotate` stored on a unit. Annotations have no public read yet, so this
        reads the stored row, the way tests/conftest.py `snapshot` does."""
        import json
        topic, field, index = self.split(unit)
        tid = self.topic_id(topic)
        if field is None:
            table, key = "Topic", tid
        elif index is None:
            table, key = "Field", f"{tid}/{field}"
        else:
            table, key = "Entry", self.mem.history(topic, field)[index].id
        row = self.mem._read(lambda t: t.row(table, key))
        assert row is not None, f"no {table} {key} for {unit}"
        return json.loads(row["annotations"] or "{}")


def raw(value: Any, tmp: Path | None = None) -> Any:
    """A YAML value for `call`, as it is, except the `$`-forms that YAML cannot write: a
    datetime without offset stays naive ({$datetime: ...}), {$date: ...}, {$decimal: ...},
    {$bytes: ...} (UTF-8), {$tuple: [...]}, {$nested: N} (a list N levels deep),
    {$topic_id: ...} (a gem.TopicId), {$fact: {...}} (a gem.Fact of raw values) and
    {$file: {name, text, encoding}} (the path of a file written in the case's directory)."""
    import decimal
    from datetime import date
    if isinstance(value, list):
        return [raw(v, tmp) for v in value]
    if isinstance(value, dict) and len(value) == 1 and next(iter(value)).startswith("$"):
        (form, arg), = value.items()
        if form == "$datetime":
            return datetime.fromisoformat(arg)
        if form == "$date":
            return date.fromisoformat(arg)
        if form == "$decimal":
            return decimal.Decimal(arg)
        if form == "$bytes":
            return arg.encode("utf-8")
        if form == "$tuple":
            return tuple(raw(v) for v in arg)
        if form == "$nested":
            nested: list = []
            for _ in range(int(arg)):
                nested = [nested]
            return nested
        if form == "$topic_id":
            return gem.TopicId(arg)
        if form == "$fact":
            return gem.Fact(**{k: raw(v, tmp) for k, v in arg.items()})
        if form == "$file":
            assert tmp is not None
            path = tmp / arg["name"]
            path.write_bytes(arg["text"].encode(arg.get("encoding", "utf-8")))
            return str(path)
        raise FormatError(f"unknown raw form {form!r}")
    if isinstance(value, dict):
        return {k: raw(v, tmp) for k, v in value.items()}
    return value


class ExactOnly:
    """A resolver with the exact-title tier only, to make duplicate topics on purpose."""

    def resolve(self, name: str, topics: Any) -> str | None:
        return topics.exact(name)


def dump(value: Any) -> Any:
    if hasattr(value, "model_dump"):
        return value.model_dump()
    if isinstance(value, list):
        return [dump(v) for v in value]
    if isinstance(value, dict):
        return {k: dump(v) for k, v in value.items()}
    return value


RUN_WIP = os.environ.get("GEM_CONFORMANCE_WIP") == "1"


def _params() -> list[Any]:
    """Every case; `-m "not slow"` (the inner loop) runs the first of each file."""
    firsts = {min((c for c in CASES if c.file == f), key=lambda c: c.index).id
              for f in {c.file for c in CASES}}
    return [pytest.param(c, id=c.id, marks=[] if c.id in firsts else [pytest.mark.slow])
            for c in CASES]


@pytest.mark.parametrize("case", _params())
def test_conformance(case: Case, tmp_path: Path) -> None:
    if case.problem:
        raise FormatError(case.problem)
    validate_case(case.body, case.id)
    if case.body.get("wip") and not RUN_WIP:
        pytest.skip(f"wip: {case.body['reason']}")
    runner = Runner(case.body, tmp_path)
    try:
        runner.run()
    finally:
        runner.mem.close()
        drop_location(runner.location)


# ---------------------------------------------------------------------- the suite's own checks
def _policy_texts(body: dict) -> list[str]:
    """Policy sources a case runs with: its `policies` and every `load_policies` that loads."""
    texts = [body["policies"]] if "policies" in body else []
    for step in body["ops"]:
        if "load_policies" in step and "want_error_code" not in step:
            args = step["load_policies"]
            texts.append(args["text"] if isinstance(args, dict) else args)
    return texts


def test_every_event_action_operator_and_condition_is_covered() -> None:
    """Coverage of the catalogue by cases that run (not wip): a policy on every event, every
    action used by some policy, every operator as a step, each of C1-C6 named by a case."""
    from gem.policy import catalogue, parse

    events, actions, ops, conditions = set(), set(), set(), set()
    for case in CASES:
        body = case.body
        if case.problem or not isinstance(body, dict) or body.get("wip"):
            continue
        for text in _policy_texts(body):
            for policy in parse(text, case.id).policies:
                events.update(policy.events)
                actions.update(a.name for a in policy.actions)
        for step in body["ops"]:
            ops.update(k for k in step if k in OPS)
            code = step.get("want_error_code")
            if isinstance(code, str) and code in CONDITIONS:
                conditions.add(code)
        conditions.update(re.findall(r"\bC[1-6]\b", body["note"]))
    assert set(catalogue.EVENTS) - events == set(), "events without a case"
    assert set(catalogue.ACTIONS) - actions == set(), "actions without a case"
    operators = {"ingest", "retrieve", "revise", "restore", "link", "load_policies"}
    assert operators - ops == set() and ops & {"forget", "tick", "maintain"}, "operators without a case"
    assert {f"C{i}" for i in range(1, 7)} - conditions == set(), "conditions without a case"


MALFORMED = {
    "unknown case key": {"note": "x", "ops": [{"stats": None}], "wnat": {}},
    "unknown step key": {"note": "x", "ops": [{"stats": None, "wnat": {}}]},
    "two ops in a step": {"note": "x", "ops": [{"stats": None, "audit": None}]},
    "unknown op": {"note": "x", "ops": [{"ingets": []}], "want": {"absent": ["A"]}},
    "unknown fact key": {"note": "x", "ops": [{"ingest": {"topic": "A", "feild": "x", "value": 1},
                                               "want": {"entries": 1}}]},
    "unknown step want key": {"note": "x", "ops": [{"ingest": {"topic": "A", "field": "x", "value": 1},
                                                    "want": {"entires": 1}}]},
    "unknown case want key": {"note": "x", "ops": [{"stats": None}], "want": {"value": {}}},
    "unknown matcher": {"note": "x", "ops": [{"stats": None, "want": {"entries": {"$gte": 1}}}]},
    "unknown flag key": {"note": "x", "ops": [{"stats": None}], "want": {"flags": {"A": [{"polcy": "p"}]}}},
    "bad time": {"note": "x", "ops": [{"ingest": {"topic": "A", "field": "x", "value": 1, "at": "soon"},
                                       "want": {"entries": 1}}]},
    "nothing expected": {"note": "x", "ops": [{"ingest": {"topic": "A", "field": "x", "value": 1}}]},
    "wip without reason": {"note": "x", "wip": True, "ops": [{"stats": None, "want": {}}]},
    "error and result": {"note": "x", "ops": [{"stats": None, "want": {}, "want_error_code": "C1"}]},
    "bad salience order": {"note": "x", "ops": [{"stats": None}], "want": {"salience_order": ["A", "~", "B"]}},
    "two-line note": {"note": "one\ntwo", "ops": [{"stats": None, "want": {}}]},
}


@pytest.mark.parametrize("name", sorted(MALFORMED))
def test_the_loader_refuses_malformed_cases(name: str) -> None:
    with pytest.raises(FormatError):
        validate_case(MALFORMED[name], name)


def test_the_loader_refuses_duplicate_yaml_keys() -> None:
    with pytest.raises(FormatError, match="given twice"):
        yaml.load("note: a\nnote: b\n", Loader=_Loader)


_ONE = {"ingest": [{"topic": "A", "field": "x", "value": 1}]}
WRONG = {
    "wrong final value": {"ops": [_ONE], "want": {"values": {"A/x": 2}}},
    "wrong type of value": {"ops": [_ONE], "want": {"values": {"A/x": "1"}}},
    "wrong step result": {"ops": [{**_ONE, "want": {"entries": 2}}]},
    "wrong history": {"ops": [_ONE], "want": {"history": {"A/x": [{"value": 1, "status": "superseded"}]}}},
    "error that does not happen": {"ops": [{**_ONE, "want_error_code": "InvalidInput"}]},
    "wrong error code": {"ops": [{"ingest": [{"topic": "A", "field": "x", "value": None}],
                                  "want_error_code": "UnknownUnit"}]},
    "salience that does not rise": {"ops": [_ONE, {"inspect": {"topic": "A"}, "raises_salience": ["A/x"]}]},
    "missing flag": {"ops": [_ONE], "want": {"flags": {"A": 1}}},
    "wrong salience order": {"ops": [_ONE, {"ingest": [{"topic": "B", "field": "y", "value": 1}]},
                                     {"retrieve": {"topic": "B"}}],
                             "want": {"salience_order": ["A/x", ">", "B/y"]}},
    "policy that did not fire": {"ops": [_ONE], "want": {"fired": [{"policy": "propagate-on-change"}]}},
    "wrong stats": {"ops": [_ONE], "want": {"stats": {"active_fields": {"$gt": 1}}}},
    "absent topic that exists": {"ops": [_ONE], "want": {"absent": ["A"]}},
}


@pytest.mark.parametrize("name", sorted(WRONG))
def test_wrong_expectations_fail(name: str, tmp_path: Path) -> None:
    """The runner is not a test that cannot fail: each of these cases expects something false."""
    case = {"note": name, **WRONG[name]}
    validate_case(case, name)
    runner = Runner(case, tmp_path)
    try:
        with pytest.raises((AssertionError, pytest.fail.Exception)):
            runner.run()
    finally:
        runner.mem.close()
        drop_location(runner.location)
