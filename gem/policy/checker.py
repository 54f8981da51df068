"""Static checks: a policy set that passes never reaches the engine with an unknown
name, a wrong arity, a type error, a cascade that can loop without bound, or no
policy at all.

The files are checked as one composition (compose.py): later files may override
and disable what earlier ones define. Every definition is checked, also one a later
file replaces; cascades and governance are judged on what is in force.

The checks run as ordered, named passes (PASSES). Each reports into one list; an
expression that already failed is typed Any afterwards so one mistake yields one
diagnostic, not a cascade of them. Warnings (a set a correctness condition will
hold against) never fail the check; they come back with the result.
"""
from __future__ import annotations

import math
import re
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Callable, Iterable, Sequence

from ..errors import PolicyCheckError
from ..text import name_key
from . import ast as A
from . import catalogue as C
from .catalogue import ANY, BOOL, DURATION, NULL, NUMBER, TEXT, TIME, VALUE, Type
from .compose import Composition, compose, governance
from .ast import positive_exists
from .diagnostics import Diagnostic, at, did_you_mean, finish, source_line
from .evaluate import evaluate_constant, is_name

# ---- results ---------------------------------------------------------------------------


@dataclass(frozen=True)
class CascadeEdge:
    """Policy `policy` (triggered by `source`) runs `action`, which may emit `target`."""

    source: str
    policy: str
    action: str
    target: str
    # True when the action acts on an element of dependent_topic: each step then moves
    # to a new topic along EXTENDS and the engine flags a topic once per transition,
    # so a cycle through this edge is bounded.
    bounded: bool
    span: A.Span = field(compare=False)


@dataclass(frozen=True)
class CheckedPolicies:
    """The input of `compile`: files that passed every check, plus what the checks learned."""

    files: tuple[A.PolicyFile, ...]  # in composition order
    policies: tuple[A.Policy, ...]  # in force after composition
    settings: tuple[A.Setting, ...]  # in force after composition
    cascades: tuple[CascadeEdge, ...]  # of the policies in force
    warnings: tuple[Diagnostic, ...] = ()
    available_actions: frozenset[str] | None = None


def check(
    files: A.PolicyFile | Sequence[A.PolicyFile],
    available_actions: Iterable[str] | None = None,
) -> CheckedPolicies:
    """Check one file, or several composed in the order given (the first is the base the
    others override and disable). Raises PolicyCheckError; warnings come back with the result."""
    if isinstance(files, A.PolicyFile):
        files = (files,)
    files = tuple(files)
    available = frozenset(available_actions) if available_actions is not None else None
    ctx = _Context(files, available)
    for _name, run in PASSES:
        run(ctx)
    if ctx.diagnostics:
        raise PolicyCheckError(finish(ctx.diagnostics, [f.file for f in files]))
    return CheckedPolicies(files, ctx.composition.policies, ctx.composition.settings, tuple(ctx.cascades),
                           tuple(finish(ctx.warnings, [f.file for f in files])), available)


class _Context:
    def __init__(self, files: tuple[A.PolicyFile, ...], available: frozenset[str] | None) -> None:
        self.files = files
        self.available = available
        self.sources = {f.file: f.source for f in files}
        self.diagnostics: list[Diagnostic] = []
        self.warnings: list[Diagnostic] = []
        self.cascades: list[CascadeEdge] = []
        self.composition = Composition((), (), (), ())

    def report(self, code: str, message: str, span: A.Span, hint: str | None = None,
               severity: str = "error") -> None:
        d = at(code, message, span, self.sources.get(span.file, ""), hint, severity)
        (self.warnings if severity == "warning" else self.diagnostics).append(d)

    @property
    def policies(self):
        """Every policy definition, also those a later file overrides or disables: all are checked."""
        return [p for f in self.files for p in f.policies]

    @property
    def settings(self):
        return [s for f in self.files for s in f.settings]


# ---- pass: composition ---------------------------------------------------------------


def _pass_composition(ctx: _Context) -> None:
    ctx.composition = compose(ctx.files)
    for problem in ctx.composition.problems:
        ctx.report(problem.code, problem.message, problem.span, problem.hint)
    for p in ctx.policies:
        keys: set[str] = set()
        for w in p.with_:
            if w.key in keys:
                ctx.report("gem_duplicate_key", f"WITH key '{w.key}' is given twice", w.key_span)
            keys.add(w.key)


# ---- pass: events, actions, settings names -------------------------------------------


def _pass_events(ctx: _Context) -> None:
    for p in ctx.policies:
        for name, span in zip(p.events, p.event_spans or [p.span] * len(p.events)):
            if name not in C.EVENTS:
                ctx.report("gem_unknown_event", f"unknown event '{name}'", span, did_you_mean(name, C.EVENTS))


def _pass_actions(ctx: _Context) -> None:
    for p in ctx.policies:
        for a in p.actions:
            if a.name not in C.ACTIONS:
                listed = "actions: " + ", ".join(sorted(C.ACTIONS))
                if a.name in C.FUNCTIONS:
                    hint = f"'{a.name}' is a function; DO runs {listed}"
                else:
                    closest = did_you_mean(a.name, C.ACTIONS)
                    hint = f"{closest} {listed}" if closest else listed
                ctx.report("gem_unknown_action", f"unknown action '{a.name}'", a.name_span, hint)
            elif ctx.available is not None and a.name not in ctx.available:
                ctx.report("gem_action_unavailable", f"'{a.name}' is not available yet", a.name_span,
                           "this build of gem implements: " + ", ".join(sorted(ctx.available)))


def _pass_setting_names(ctx: _Context) -> None:
    for s in ctx.settings:
        if s.name not in C.SETTINGS:
            ctx.report("gem_unknown_setting", f"unknown setting '{s.name}'", s.name_span,
                       did_you_mean(s.name, C.SETTINGS))


# ---- pass: expressions (names, scope, functions, attributes, arity, types) ---------------


class _Scope:
    """What names mean inside one policy (or one setting, where there is no event)."""

    def __init__(self, events: list[C.EventSig] | None, unknown_events: bool, setting: str | None = None):
        self.events = events or []
        self.unknown_events = unknown_events
        self.setting = setting
        self.vars: dict[str, Type] = {}
        self.invisible: set[str] = set()  # EXISTS variables DO cannot see (under OR/NOT)

    def child(self, var: str, t: Type) -> "_Scope":
        s = _Scope(self.events, self.unknown_events, self.setting)
        s.vars = {**self.vars, var: t}
        s.invisible = self.invisible
        return s

    def event_type(self, name: str) -> Type | None:
        types = [t for t in (ev.binding(name) for ev in self.events) if t is not None]
        if not self.events or len(types) < len(self.events):
            return None  # some triggering event does not bind the name
        return _join(types)


def _join(types: list[Type]) -> Type:
    uniq = list(dict.fromkeys(types))
    if not uniq:
        return ANY
    if len(uniq) == 1:
        return uniq[0]
    return C.union(*uniq)


def _elements(t: Type) -> Type | None:
    """Element type of a list type; Any for dynamic values; None if not a list."""
    if t.name == "List":
        return t.args[0]
    if t in (ANY, VALUE, NULL):
        return ANY
    return None


def _dynamic(t: Type) -> bool:
    return t in (ANY, VALUE, NULL)


class _Typer:
    def __init__(self, ctx: _Context) -> None:
        self.ctx = ctx

    def report(self, code, message, span, hint=None) -> Type:
        self.ctx.report(code, message, span, hint)
        return ANY

    # -- names --

    def name(self, e: A.Name, scope: _Scope) -> Type:
        n = e.id
        if n in scope.vars:
            return scope.vars[n]
        if scope.setting is not None and n not in C.RELATIONS and any(ev.binding(n) for ev in C.EVENTS.values()):
            return self.report("gem_out_of_scope", f"'{n}' is an event binding, and settings have no event", e.span)
        if scope.setting is None:
            t = scope.event_type(n)
            if t is not None:
                return t
            binders = [ev for ev in C.EVENTS.values() if ev.binding(n) is not None]
            if binders and n not in C.RELATIONS:
                if scope.unknown_events:
                    return ANY  # an unknown event was reported already; its bindings are unknowable
                missing = [ev.name for ev in scope.events if ev.binding(n) is None]
                return self.report(
                    "gem_out_of_scope", f"'{n}' is not bound by event '{missing[0]}'", e.span,
                    f"'{n}' is bound by: " + ", ".join(ev.name for ev in binders),
                )
        if n in C.RELATIONS:
            return self.relation(n, e.span, scope)
        if n in C.SETTINGS:
            if scope.setting is not None:
                return self.report("gem_unbound_name", f"setting '{scope.setting}' cannot refer to setting '{n}'",
                                   e.span, "settings may use relational names, functions and literals")
            return C.SETTINGS[n].type
        if scope.unknown_events and scope.setting is None:
            return ANY
        if n in scope.invisible:
            return self.report("gem_unbound_name", f"'{n}' is not bound here", e.span,
                               f"EXISTS {n} under OR or NOT binds nothing for DO and WITH; "
                               "make it an AND-ed condition")
        candidates = set(scope.vars) | set(C.RELATIONS)
        if scope.setting is None:
            candidates |= set(C.SETTINGS)
            for ev in scope.events:
                candidates |= set(ev.names)
        hint = did_you_mean(n, candidates)
        if hint is None and n in C.FUNCTIONS:
            hint = f"'{n}' is a function: call it as {n}(...)"
        return self.report("gem_unbound_name", f"unknown name '{n}'", e.span, hint)

    def relation(self, n: str, span: A.Span, scope: _Scope) -> Type:
        rel = C.RELATIONS[n]
        if scope.setting is not None and rel.needs:
            return self.report("gem_out_of_scope", f"'{n}' needs an event, and settings have none", span,
                               f"'{n}' is relative to the event's {', '.join(rel.needs)}")
        if scope.unknown_events:
            return rel.type
        for need in rel.needs:
            for ev in scope.events:
                if ev.binding(need) is None:
                    return self.report("gem_out_of_scope", f"'{n}' needs the event's {need}, "
                                       f"and event '{ev.name}' has none", span,
                                       f"'{n}' is defined for events that bind '{need}'")
        return rel.type

    # -- expressions --

    def infer(self, e: A.Expr, scope: _Scope, in_with: bool = False) -> Type:
        if isinstance(e, A.Literal):
            return {"number": NUMBER, "string": TEXT, "bool": BOOL, "null": NULL}[e.kind]
        if isinstance(e, A.Duration):
            return DURATION
        if isinstance(e, A.DateLit):
            return TIME
        if isinstance(e, A.Name):
            return self.name(e, scope)
        if isinstance(e, A.Attr):
            return self.attr(e, scope)
        if isinstance(e, A.Call):
            return self.call(e, scope)
        if isinstance(e, A.Unary):
            t = self.infer(e.operand, scope)
            if e.op == "NOT":
                return self.expect_bool(t, e.operand, "NOT")
            if _dynamic(t) or t in (NUMBER, DURATION):
                return t if not _dynamic(t) else ANY
            return self.report("gem_type", f"cannot negate {t}", e.span)
        if isinstance(e, A.Binary):
            lt, rt = self.infer(e.left, scope), self.infer(e.right, scope)
            if e.op in ("AND", "OR"):
                self.expect_bool(lt, e.left, e.op)
                self.expect_bool(rt, e.right, e.op)
                return BOOL
            return self.arith(e, lt, rt)
        if isinstance(e, A.Compare):
            lt, rt = self.infer(e.left, scope), self.infer(e.right, scope)
            if e.op in ("=", "!="):
                self.name_literals(e.left, e.right)
            return self.compare(e, lt, rt)
        if isinstance(e, A.In):
            it, ct = self.infer(e.item, scope), self.infer(e.container, scope)
            self.name_literals(e.item, e.container)
            return self.membership(e, it, ct)
        if isinstance(e, A.Exists):
            self.exists(e, scope)
            return BOOL
        if isinstance(e, A.SetLit):
            types = [self.infer(x, scope, in_with) for x in e.items]
            names = [x for x in e.items if isinstance(x, A.Name)]
            if in_with and len(names) == len(e.items):
                # WITH evidence = {updated_field, timestamp}: a record of those bindings.
                return C.record(**{x.id: t for x, t in zip(names, types)})
            return C.list_of(_join(types))
        if isinstance(e, A.ListLit):
            return C.list_of(_join([self.infer(x, scope, in_with) for x in e.items]))
        if isinstance(e, A.RecordLit):
            fields: dict[str, Type] = {}
            for key, value in e.items:
                t = self.infer(value, scope, in_with)
                if key in fields:
                    self.report("gem_duplicate_key", f"record key '{key}' is given twice", value.span)
                fields[key] = t
            return C.record(**fields)
        raise AssertionError(f"unhandled expression {type(e).__name__}")  # pragma: no cover

    def name_literals(self, a: A.Expr, b: A.Expr) -> None:
        """A name is compared by its canonical key: warn about a string literal compared with one
        that is not a key, saying what it will match (it is no error: it matches all the same)."""
        for name, other in ((a, b), (b, a)):
            if not is_name(name):
                continue
            items = other.items if isinstance(other, (A.ListLit, A.SetLit)) else (other,)
            for lit in items:
                if isinstance(lit, A.Literal) and isinstance(lit.value, str) and name_key(lit.value) != lit.value:
                    key = name_key(lit.value)
                    self.ctx.report(
                        "gem_name_not_canonical",
                        f"names are compared by canonical key: {_quote(lit.value)} matches every name "
                        f"whose key is {_quote(key)} ({_spellings(key)}, ...)",
                        lit.span, f"write {_quote(key)}", severity="warning")

    def expect_bool(self, t: Type, e: A.Expr, where: str) -> Type:
        if not C.assignable(t, BOOL):
            self.report("gem_type", f"{where} needs a condition (Bool), got {t}", e.span,
                        "use EXISTS x or count(x) > 0 to test a list" if t.name == "List" else None)
        return BOOL

    def attr(self, e: A.Attr, scope: _Scope) -> Type:
        t = self.infer(e.obj, scope)
        return self.attr_of(t, e)

    def attr_of(self, t: Type, e: A.Attr) -> Type:
        if _dynamic(t):
            return ANY
        if t.name == "Union":
            results = [self.attr_of_quiet(m, e.name) for m in t.args]
            if all(r is not None for r in results):
                return _join(results)  # type: ignore[arg-type]
            return self.report("gem_unknown_attribute", f"{t} has no attribute '{e.name}' on every member",
                               e.name_span)
        if t.name == "Record":
            if t.fields is None:
                return ANY
            ft = t.field_type(e.name)
            if ft is not None:
                return ft
            return self.report("gem_unknown_attribute", f"unknown attribute '{e.name}' of this record",
                               e.name_span, did_you_mean(e.name, dict(t.fields)) or
                               "keys: " + ", ".join(k for k, _ in t.fields))
        if t.name == "List":
            return self.report("gem_unknown_attribute", f"{t} has no attribute '{e.name}'", e.name_span,
                               "a list has no attributes: bind one element with EXISTS x IN ..., "
                               "or use count(...)")
        attrs = C.ATTRIBUTES.get(t.name)
        if attrs is None:
            return self.report("gem_unknown_attribute", f"{t} has no attribute '{e.name}'", e.name_span)
        if e.name in attrs:
            return attrs[e.name].type
        return self.report("gem_unknown_attribute", f"unknown attribute '{e.name}' of {t}", e.name_span,
                           did_you_mean(e.name, attrs))

    def attr_of_quiet(self, t: Type, name: str) -> Type | None:
        attrs = C.ATTRIBUTES.get(t.name, {})
        return attrs[name].type if name in attrs else None

    def call(self, e: A.Call, scope: _Scope) -> Type:
        arg_types = [self.infer(a, scope) for a in e.args]
        sig = C.FUNCTIONS.get(e.func)
        if sig is None:
            hint = did_you_mean(e.func, C.FUNCTIONS)
            if e.func in C.ACTIONS:
                hint = f"'{e.func}' is an action: actions go in DO"
            return self.report("gem_unknown_function", f"unknown function '{e.func}'", e.name_span, hint)
        self.arguments("function", e.func, sig.params, e.args, arg_types, e.name_span)
        if e.func in ("matches", "capture") and len(e.args) == 2 \
                and C.assignable(arg_types[1], TEXT):
            self.pattern(e.func, e.args[1])
        if e.func == "distance_km" and len(e.args) == 3:
            self.point(e.args[1], "latitude", 90.0)
            self.point(e.args[2], "longitude", 180.0)
        return sig.result

    def point(self, e: A.Expr, what: str, bound: float) -> None:
        """A coordinate of distance_km() that reads nothing is checked now: a point off the
        globe would make the condition null on every transition, silently."""
        if not _reads_nothing(e):
            return
        v = evaluate_constant(e)
        if type(v) in (int, float) and not (math.isfinite(v) and -bound <= v <= bound):
            self.report("gem_invalid_point", f"a {what} must be within [{-bound:g}, {bound:g}], "
                        f"got {v!r}", e.span,
                        "distance_km(place, lat, lon): latitude first, then longitude, in degrees")

    def pattern(self, func: str, e: A.Expr) -> None:
        """The regular expression of matches() or capture(): a string literal, compiled now, so
        a bad one (or, for capture(), one without a group) is refused with the policy instead
        of failing a transition."""
        if not (isinstance(e, A.Literal) and isinstance(e.value, str)):
            self.report("gem_invalid_regex", f"the pattern of {func}() must be a string literal",
                        e.span, f'write it in quotes: {func}(field.name, "^pass")')
            return
        try:
            compiled = re.compile(e.value)
        except re.error as exc:
            span = e.span
            line = source_line(self.ctx.sources.get(span.file, ""), span.line)
            raw = line[span.col - 1:span.end_col - 1] if span.line == span.end_line else ""
            if exc.pos is not None and raw[1:-1] == e.value:  # no escapes: point at the character
                col = span.col + 1 + exc.pos
                span = A.Span(span.file, span.line, col, span.line, col + 1)
            self.report("gem_invalid_regex", f"invalid regular expression: {exc.msg}", span,
                        f"{func}() takes a Python regular expression (module re)")
            return
        if func == "capture" and compiled.groups == 0:
            self.report("gem_invalid_regex", "the pattern of capture() has no group to capture",
                        e.span, 'put what to capture in parentheses: capture(episode.text, "in (\\w+)")')

    def arguments(self, kind: str, name: str, params, args, arg_types, name_span) -> None:
        what = f"{kind} '{name}'"
        if len(args) != len(params):
            n = len(params)
            self.report("gem_arity", f"{what} takes {n} argument{'s' if n != 1 else ''}, got {len(args)}",
                        name_span, f"{name}(" + ", ".join(str(p) for p in params) + ")")
            return
        for i, (p, a, t) in enumerate(zip(params, args, arg_types), 1):
            if not C.assignable(t, p):
                hint = None
                if t.name == "List" and C.assignable(t.args[0], p):
                    hint = "bind one element first, e.g. WHEN EXISTS x IN ... (or WHEN EXISTS dependent_topic)"
                self.report("gem_type", f"argument {i} of {what} must be {p}, got {t}", a.span, hint)

    def arith(self, e: A.Binary, lt: Type, rt: Type) -> Type:
        op = e.op
        if _dynamic(lt) or _dynamic(rt):
            return ANY
        pair = (lt.name, rt.name)
        table = {
            ("Number", "Number"): NUMBER,
            ("Duration", "Duration"): {"+": DURATION, "-": DURATION, "/": NUMBER}.get(op),
            ("Time", "Time"): DURATION if op == "-" else None,
            ("Time", "Duration"): TIME if op in "+-" else None,
            ("Duration", "Time"): TIME if op == "+" else None,
            ("Duration", "Number"): DURATION if op in "*/" else None,
            ("Number", "Duration"): DURATION if op == "*" else None,
            ("Text", "Text"): TEXT if op == "+" else None,
        }
        result = table.get(pair)
        if result is None:
            return self.report("gem_type", f"cannot apply '{op}' to {lt} and {rt}", e.span)
        return result

    def compare(self, e: A.Compare, lt: Type, rt: Type) -> Type:
        if _dynamic(lt) or _dynamic(rt):
            return BOOL
        if e.op in ("=", "!="):
            if C.assignable(lt, rt) or C.assignable(rt, lt):
                return BOOL
            return self.report("gem_type", f"cannot compare {lt} with {rt}", e.span)
        if lt.name == rt.name and lt.name in ("Number", "Text", "Time", "Duration"):
            return BOOL
        return self.report("gem_type", f"cannot order {lt} and {rt} with '{e.op}'", e.span,
                           "<, <=, > and >= compare two numbers, texts, times or durations")

    def membership(self, e: A.In, it: Type, ct: Type) -> Type:
        if _dynamic(ct):
            return BOOL
        if ct.name == "List":
            el = ct.args[0]
            if _dynamic(it) or C.assignable(it, el) or C.assignable(el, it):
                return BOOL
            return self.report("gem_type", f"{it} can never be IN {ct}", e.span)
        if ct == TEXT or ct.name == "Record":
            if C.assignable(it, TEXT):
                return BOOL
            return self.report("gem_type", f"IN {ct} needs Text on the left, got {it}", e.span)
        return self.report("gem_type", f"IN needs a list, a text or a record on the right, got {ct}",
                           e.container.span)

    def exists(self, e: A.Exists, scope: _Scope) -> None:
        el: Type | None  # _elements() gives None for a non-list, reported below and read as ANY
        if e.source is None:
            if e.var not in C.RELATIONS:
                if e.var in scope.vars or scope.event_type(e.var) is not None:
                    self.report("gem_type", f"EXISTS {e.var} needs a relational name", e.var_span,
                                f"to range over a list write EXISTS x IN {e.var}")
                else:
                    self.report("gem_unbound_name", f"unknown relational name '{e.var}'", e.var_span,
                                did_you_mean(e.var, C.RELATIONS))
                el = ANY
            else:
                t = self.relation(e.var, e.var_span, scope)
                el = _elements(t)
                if el is None:
                    self.report("gem_type", f"EXISTS needs a list; '{e.var}' is a {t}", e.var_span)
                    el = ANY
        else:
            t = self.infer(e.source, scope)
            el = _elements(t)
            if el is None:
                self.report("gem_type", f"EXISTS ... IN needs a list, got {t}", e.source.span)
                el = ANY
        if e.where is not None:
            inner = scope.child(e.var, el)
            self.expect_bool(self.infer(e.where, inner), e.where, "WHERE")


def _quote(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def _spellings(key: str) -> str:
    """A few spellings that share `key`, to show what a name literal will match."""
    words = key.split(" ")
    forms = [key, "-".join(w.capitalize() for w in words), "_".join(words).upper()]
    return ", ".join(_quote(f) for f in dict.fromkeys(forms))


def _pass_expressions(ctx: _Context) -> None:
    typer = _Typer(ctx)
    for s in ctx.settings:
        sig = C.SETTINGS.get(s.name)
        scope = _Scope(None, False, setting=s.name)
        reported = len(ctx.diagnostics)
        t = typer.infer(s.expr, scope)
        if sig is None or len(ctx.diagnostics) > reported:
            continue
        if not C.assignable(t, sig.type):
            hint = "write a duration such as 30d, 12h or 2w" if sig.type == DURATION else None
            ctx.report("gem_type", f"setting '{s.name}' must be {sig.type}, got {t}", s.expr.span, hint)
            continue
        _check_setting_value(ctx, s, sig)

    for p in ctx.policies:
        known = [C.EVENTS[n] for n in p.events if n in C.EVENTS]
        scope = _Scope(known, unknown_events=len(known) < len(p.events))
        if p.condition is not None:
            typer.expect_bool(typer.infer(p.condition, scope), p.condition, "WHEN")
        do_scope = _do_scope(p, scope, typer)
        for a in p.actions:
            types = [typer.infer(x, do_scope) for x in a.args]
            action = C.ACTIONS.get(a.name)
            if action is not None:
                typer.arguments("action", a.name, action.params, a.args, types, a.name_span)
        for w in p.with_:
            typer.infer(w.expr, do_scope, in_with=True)


def _do_scope(p: A.Policy, scope: _Scope, typer: _Typer) -> _Scope:
    """The scope DO and WITH see: event bindings plus positively bound EXISTS variables."""
    positive = positive_exists(p.condition)
    out = _Scope(scope.events, scope.unknown_events)
    for ex in positive:
        out.vars[ex.var] = _quiet_element_type(ex, out)
    if p.condition is not None:
        all_vars = {e.var for e in A.walk(p.condition) if isinstance(e, A.Exists)}
        out.invisible = all_vars - set(out.vars)
    return out


def _quiet_element_type(ex: A.Exists, scope: _Scope) -> Type:
    """Element type of an EXISTS, without reporting (the WHEN walk reported already)."""
    quiet = _Typer(_Context((), None))
    if ex.source is None:
        rel = C.RELATIONS.get(ex.var)
        return (_elements(rel.type) or ANY) if rel else ANY
    return _elements(quiet.infer(ex.source, scope)) or ANY


def _check_setting_value(ctx: _Context, s: A.Setting, sig: C.SettingSig) -> None:
    """A setting whose expression reads nothing has one value for ever: judge it now,
    by the rule the engine applies to computed values (SettingSig.validate)."""
    if not _reads_nothing(s.expr):
        return
    problem = sig.validate(evaluate_constant(s.expr))
    if problem is not None:
        ctx.report("gem_invalid_value", problem, s.expr.span)


def _reads_nothing(e: A.Expr) -> bool:
    """No names, attributes, EXISTS or calls that need the runtime: literals, operators and
    pure functions of them."""
    for x in A.walk(e):
        if isinstance(x, (A.Name, A.Attr, A.Exists)):
            return False
        if isinstance(x, A.Call) and not (x.func in C.FUNCTIONS and C.FUNCTIONS[x.func].pure):
            return False
    return True


# ---- pass: cascades ------------------------------------------------------------------


def cascade_edges(policies: Iterable[A.Policy]) -> list[CascadeEdge]:
    """event -> policy -> (events its actions may emit), for known events and actions."""
    edges = []
    for p in policies:
        safe_vars = {
            ex.var for ex in positive_exists(p.condition)
            if (ex.source is None and ex.var == "dependent_topic")
            or (isinstance(ex.source, A.Name) and ex.source.id == "dependent_topic")
        }
        for a in p.actions:
            sig = C.ACTIONS.get(a.name)
            if sig is None:
                continue
            bounded = any(isinstance(x, A.Name) and x.id in safe_vars for x in a.args)
            for source in p.events:
                if source not in C.EVENTS:
                    continue
                for target in sorted(sig.emits):
                    edges.append(CascadeEdge(source, p.name, a.name, target, bounded, a.span))
    return edges


def unbounded_cycles(edges: list[CascadeEdge]) -> list[list[CascadeEdge]]:
    """One concrete cycle per strongly connected component of the unbounded edges."""
    graph: dict[str, list[CascadeEdge]] = defaultdict(list)
    for e in edges:
        if not e.bounded:
            graph[e.source].append(e)
    cycles = []
    for comp in _sccs(graph):
        start = min(comp)
        path = _cycle_from(start, graph, comp)
        if path:
            cycles.append(path)
    return cycles


def _sccs(graph: dict[str, list[CascadeEdge]]) -> list[set[str]]:
    """Tarjan's algorithm, iterative (cascade graphs are tiny, but recursion is no tool for a library)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    on_stack: set[str] = set()
    stack: list[str] = []
    out: list[set[str]] = []
    counter = 0
    nodes = sorted(set(graph) | {e.target for es in graph.values() for e in es})
    for root in nodes:
        if root in index:
            continue
        work = [(root, iter(graph.get(root, [])))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on_stack.add(root)
        while work:
            node, it = work[-1]
            advanced = False
            for e in it:
                w = e.target
                if w not in index:
                    index[w] = low[w] = counter
                    counter += 1
                    stack.append(w)
                    on_stack.add(w)
                    work.append((w, iter(graph.get(w, []))))
                    advanced = True
                    break
                if w in on_stack:
                    low[node] = min(low[node], index[w])
            if advanced:
                continue
            work.pop()
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[node])
            if low[node] == index[node]:
                comp = set()
                while True:
                    w = stack.pop()
                    on_stack.discard(w)
                    comp.add(w)
                    if w == node:
                        break
                looped = len(comp) > 1 or any(e.target == node for e in graph.get(node, []))
                if looped:
                    out.append(comp)
    return out


def _cycle_from(start: str, graph, comp: set[str]) -> list[CascadeEdge]:
    # Breadth-first: the shortest way back to `start` inside the component.
    frontier: list[tuple[str, list[CascadeEdge]]] = [(start, [])]
    seen = {start}
    while frontier:
        nxt = []
        for node, path in frontier:
            for e in sorted(graph.get(node, []), key=lambda e: (e.target, e.policy, e.action)):
                if e.target == start:
                    return path + [e]
                if e.target in comp and e.target not in seen:
                    seen.add(e.target)
                    nxt.append((e.target, path + [e]))
        frontier = nxt
    return []  # pragma: no cover - every component handed in has a cycle


def describe_cycle(path: list[CascadeEdge]) -> str:
    parts = [f"'{e.policy}' -[{e.action}]-> {e.target}" for e in path]
    # Close the loop on the policy the first event triggers, so the cycle reads whole.
    return " -> ".join(parts) + f" -> '{path[0].policy}'"


def _pass_cascades(ctx: _Context) -> None:
    edges = cascade_edges(ctx.composition.policies)
    ctx.cascades = edges
    for path in unbounded_cycles(edges):
        first = min(path, key=lambda e: (e.span.file, e.span.line, e.span.col))
        ctx.report("gem_cascade_loop", "policies can trigger each other without bound: " + describe_cycle(path),
                   first.span,
                   "make an action on the cycle act on an element of dependent_topic "
                   "(WHEN EXISTS dependent_topic), or break the cycle")


# ---- pass: governance -------------------------------------------------------------------


def _pass_governance(ctx: _Context) -> None:
    # A judgement of the set as a whole: only worth making once each file is right.
    if ctx.diagnostics:
        return
    errors, warnings = governance(ctx.composition, ctx.files)
    for problem in errors:
        ctx.report(problem.code, problem.message, problem.span, problem.hint)
    for problem in warnings:
        ctx.report(problem.code, problem.message, problem.span, problem.hint, severity="warning")


PASSES: tuple[tuple[str, Callable[[_Context], None]], ...] = (
    ("composition: duplicates, overrides and disables", _pass_composition),
    ("unknown events", _pass_events),
    ("unknown actions", _pass_actions),
    ("unknown settings", _pass_setting_names),
    ("names, scope, attributes, functions, arities and types", _pass_expressions),
    ("cascade termination", _pass_cascades),
    ("governance: a set with no policy in force; C6 and C3 warnings", _pass_governance),
)
