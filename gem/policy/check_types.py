"""The check stage's expression pass: what names mean in each scope, and the type of every
expression (names, scope, attributes, functions, arities, types), plus the values of
settings that read nothing. An expression that already failed is typed Any afterwards."""
from __future__ import annotations

import math
import re

from ..text import name_key
from . import ast as A
from . import catalogue as C
from .ast import positive_exists
from .catalogue import ANY, BOOL, DURATION, NULL, NUMBER, TEXT, TIME, VALUE, Type
from .check_context import CheckContext
from .diagnostics import did_you_mean, source_line
from .evaluate import evaluate_constant, is_name


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
    def __init__(self, ctx: CheckContext) -> None:
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


def pass_expressions(ctx: CheckContext) -> None:
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
    quiet = _Typer(CheckContext((), None))
    if ex.source is None:
        rel = C.RELATIONS.get(ex.var)
        return (_elements(rel.type) or ANY) if rel else ANY
    return _elements(quiet.infer(ex.source, scope)) or ANY


def _check_setting_value(ctx: CheckContext, s: A.Setting, sig: C.SettingSig) -> None:
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
