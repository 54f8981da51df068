"""Policy expressions -> closures, and the run-time semantics of their values.

Every expression becomes a closure `f(env, rt)`: `env` holds the event's bindings plus the
EXISTS variables in scope, `rt` is the engine's PolicyRuntime. Names are resolved once, at
compile time (the checker has proved what each one is), so evaluation does no lookups in the
catalogue. The checker uses the same evaluation for settings that read nothing
(`evaluate_constant`), so check time and run time never disagree on a value.

Run-time semantics, chosen so that a policy can never crash a transition on data it did not
foresee:
- null propagates through attribute access and arithmetic; `<`, `<=`, `>`, `>=` with a null
  side are false; `=` / `!=` are plain equality (`x = null` tests for null);
- only a real `true` counts as true in a condition;
- arithmetic that cannot be done on the actual values (a JSON value of the wrong type,
  division by zero) yields null, and a comparison that cannot be made is false;
- durations are datetime.timedelta, times aware datetimes, dates midnight UTC.
"""
from __future__ import annotations

import math
import operator
import re
from collections.abc import Mapping
from datetime import timedelta
from typing import Any, Callable, Iterator, Protocol

from ..places import distance_km
from ..text import name_key
from . import ast as A
from . import catalogue as C
from .ast import positive_exists


class PolicyRuntime(Protocol):
    """What a compiled policy needs from the engine (implemented by gem's engine).

    - attribute(obj, name): `topic.title`, `field.salience`, `entry.provenance`, ... for
      engine objects (plain dicts are read by the compiled policy itself).
    - relation(name, bindings): the relational names of the catalogue
      (`dependent_topic` -> list of topics relative to bindings['topic'],
      `interactions` -> number, ...).
    - function(name, args): the catalogue functions that need the state or the clock
      (now, age, reliability, state_*, similarity). count, min, max and abs are pure
      and evaluated by the policy itself.
    - act(action, args, evidence, policy, span): perform an action inside the current
      transition; `evidence` is the WITH record ({} without WITH).
    - run_plan(policy, bindings): fire a policy that has a plan (gem/policy/vectorise.py)
      set-at-a-time; the number of action calls made, or None to evaluate it per unit.
    """

    def attribute(self, obj: Any, name: str) -> Any: ...

    def relation(self, name: str, bindings: dict, salience_below: Any = None) -> Any: ...

    def function(self, name: str, args: list) -> Any: ...

    def act(self, action: str, args: list, evidence: dict, policy: str, span: A.Span) -> None: ...

    def run_plan(self, policy: Any, bindings: dict) -> int | None: ...


Env = dict
Fn = Callable[[Env, PolicyRuntime], Any]


# ---- value semantics -----------------------------------------------------------------


def truth(v: Any) -> bool:
    # numpy's bool_ is not a bool, but an engine computing with numpy may hand one back.
    return v is True or (type(v).__name__ == "bool_" and bool(v))


def equal(a: Any, b: Any) -> bool:
    if isinstance(a, bool) != isinstance(b, bool):
        return False  # true is not 1
    try:
        return bool(a == b)
    except Exception:
        return False


def _order(op: Callable[[Any, Any], bool]) -> Callable[[Any, Any], bool]:
    def compare(a: Any, b: Any) -> bool:
        if a is None or b is None or isinstance(a, bool) or isinstance(b, bool):
            return False
        try:
            return bool(op(a, b))
        except TypeError:
            return False

    return compare


COMPARE: dict[str, Callable[[Any, Any], bool]] = {
    "=": equal,
    "!=": lambda a, b: not equal(a, b),
    "<": _order(operator.lt),
    "<=": _order(operator.le),
    ">": _order(operator.gt),
    ">=": _order(operator.ge),
}


def _arith(op: Callable[[Any, Any], Any]) -> Callable[[Any, Any], Any]:
    def apply(a: Any, b: Any) -> Any:
        if a is None or b is None or isinstance(a, bool) or isinstance(b, bool):
            return None
        try:
            return op(a, b)
        except (TypeError, ZeroDivisionError, OverflowError, ValueError):
            return None

    return apply


ARITH = {"+": _arith(operator.add), "-": _arith(operator.sub), "*": _arith(operator.mul),
         "/": _arith(operator.truediv)}


def member(item: Any, container: Any) -> bool:
    if isinstance(container, (list, tuple, set, frozenset)):
        return any(equal(item, x) for x in container)
    if isinstance(container, str):
        return isinstance(item, str) and item in container
    if isinstance(container, Mapping):
        return isinstance(item, str) and item in container
    return False


def is_name(e: A.Expr) -> bool:
    """Whether `e` reads a name of a topic or a field (catalogue.NAME_ATTRIBUTES, NAME_BINDINGS)."""
    if isinstance(e, A.Attr):
        return e.name in C.NAME_ATTRIBUTES
    return isinstance(e, A.Name) and e.id in C.NAME_BINDINGS


def canonical(v: Any) -> Any:
    """A text as its canonical name key, a list as the list of its members' keys; anything else
    as it is (null stays null, a number is no name)."""
    if isinstance(v, str):
        return name_key(v)
    if isinstance(v, (list, tuple, set, frozenset)):
        return [canonical(x) for x in v]
    return v


def _sequence(v: Any) -> list:
    if isinstance(v, (list, tuple, set, frozenset)):
        return list(v)
    return []


def _pure(name: str, args: list) -> Any:
    if any(a is None for a in args):
        return None
    try:
        if name == "count":
            return len(args[0]) if isinstance(args[0], (list, tuple, set, frozenset, Mapping)) else None
        if name == "min":
            return min(args[0], args[1])
        if name == "max":
            return max(args[0], args[1])
        if name == "abs":
            return abs(args[0])
        if name == "lower":
            return args[0].lower() if isinstance(args[0], str) else None
        if name == "canon":
            return name_key(args[0]) if isinstance(args[0], str) else None
        if name == "distance_km":
            return _distance(*args)
    except TypeError:
        return None
    raise AssertionError(name)  # pragma: no cover


def _distance(place: Any, lat: Any, lon: Any) -> float | None:
    """`distance_km(place, lat, lon)`: null unless the place and the point are coordinates."""
    if not isinstance(place, Mapping):
        return None
    numbers: list[Any] = [place.get("lat"), place.get("lon"), lat, lon]
    if not all(type(x) in (int, float) and math.isfinite(x) for x in numbers):
        return None
    return distance_km(*numbers)


class ExprCompiler:
    def __init__(self, settings: Mapping[str, Callable[[PolicyRuntime], Any]],
                 local: frozenset[str]) -> None:
        self.settings = settings
        self.local = local  # names read from env: event bindings and EXISTS variables

    def with_local(self, name: str) -> "ExprCompiler":
        return ExprCompiler(self.settings, self.local | {name})

    def name(self, n: str) -> Fn:
        if n in self.local:
            return lambda env, rt: env.get(n)
        if n in C.RELATIONS:
            return lambda env, rt: rt.relation(n, env)
        if n in C.SETTINGS:
            settings = self.settings
            return lambda env, rt: settings[n](rt)
        raise AssertionError(f"unchecked name {n!r}")  # pragma: no cover - check() rejects these

    def expr(self, e: A.Expr, in_with: bool = False) -> Fn:
        if isinstance(e, A.Literal):
            v = e.value
            return lambda env, rt: v
        if isinstance(e, A.Duration):
            d = timedelta(seconds=e.seconds)
            return lambda env, rt: d
        if isinstance(e, A.DateLit):
            t = e.value
            return lambda env, rt: t
        if isinstance(e, A.Name):
            return self.name(e.id)
        if isinstance(e, A.Attr):
            obj, attr = self.expr(e.obj, in_with), e.name

            def get(env, rt):
                o = obj(env, rt)
                if o is None:
                    return None
                if isinstance(o, Mapping):
                    return o.get(attr)
                return rt.attribute(o, attr)

            return get
        if isinstance(e, A.Call):
            args = tuple(self.expr(a, in_with) for a in e.args)
            name = e.func
            if name in ("matches", "capture"):
                return _matcher(e, args[0])
            if C.FUNCTIONS[name].pure:
                return lambda env, rt: _pure(name, [f(env, rt) for f in args])
            return lambda env, rt: rt.function(name, [f(env, rt) for f in args])
        if isinstance(e, A.Unary):
            x = self.expr(e.operand, in_with)
            if e.op == "NOT":
                return lambda env, rt: not truth(x(env, rt))

            def neg(env, rt):
                v = x(env, rt)
                if v is None or isinstance(v, bool):
                    return None
                try:
                    return -v
                except TypeError:
                    return None

            return neg
        if isinstance(e, A.Binary):
            left, right = self.expr(e.left, in_with), self.expr(e.right, in_with)
            if e.op == "AND":
                return lambda env, rt: truth(left(env, rt)) and truth(right(env, rt))
            if e.op == "OR":
                return lambda env, rt: truth(left(env, rt)) or truth(right(env, rt))
            f = ARITH[e.op]
            return lambda env, rt: f(left(env, rt), right(env, rt))
        if isinstance(e, A.Compare):
            left, right, cmp = self.expr(e.left, in_with), self.expr(e.right, in_with), _comparison(e)
            return lambda env, rt: cmp(left(env, rt), right(env, rt))
        if isinstance(e, A.In):
            item, container = self.expr(e.item, in_with), self.expr(e.container, in_with)
            if is_name(e.item) or is_name(e.container):
                return lambda env, rt: member(canonical(item(env, rt)), canonical(container(env, rt)))
            return lambda env, rt: member(item(env, rt), container(env, rt))
        if isinstance(e, A.Exists):
            solve = self.solver(e)
            return lambda env, rt: next(iter(solve(env, rt)), None) is not None
        if isinstance(e, A.SetLit):
            items = tuple(self.expr(x, in_with) for x in e.items)
            if in_with and all(isinstance(x, A.Name) for x in e.items):
                keys = tuple(x.id for x in e.items if isinstance(x, A.Name))
                return lambda env, rt: {k: f(env, rt) for k, f in zip(keys, items)}

            def set_value(env, rt):
                out: list = []
                for f in items:
                    v = f(env, rt)
                    if not any(equal(v, seen) for seen in out):
                        out.append(v)
                return out

            return set_value
        if isinstance(e, A.ListLit):
            items = tuple(self.expr(x, in_with) for x in e.items)
            return lambda env, rt: [f(env, rt) for f in items]
        if isinstance(e, A.RecordLit):
            pairs = tuple((k, self.expr(v, in_with)) for k, v in e.items)
            return lambda env, rt: {k: f(env, rt) for k, f in pairs}
        raise AssertionError(f"unhandled expression {type(e).__name__}")  # pragma: no cover

    def solver(self, e: A.Expr) -> Callable[[Env, PolicyRuntime], Iterator[Env]]:
        """All environments (extended with EXISTS bindings) under which `e` holds."""
        if isinstance(e, A.Binary) and e.op == "AND":
            left = self.solver(e.left)
            inner = self.with_locals(positive_exists(e.left))
            right = inner.solver(e.right)

            def both(env, rt):
                for env1 in left(env, rt):
                    yield from right(env1, rt)

            return both
        if isinstance(e, A.Exists):
            filtered = self._attribute_filter(e)
            if filtered is not None:
                return filtered
            var = e.var
            source = self.source(e)
            where = self.with_local(var).solver(e.where) if e.where is not None else None

            def each(env, rt):
                for x in _sequence(source(env, rt)):
                    env1 = {**env, var: x}
                    if where is None:
                        yield env1
                    else:
                        yield from where(env1, rt)

            return each
        test = self.expr(e)

        def holds(env, rt):
            if truth(test(env, rt)):
                yield env

        return holds

    def _attribute_filter(self, e: A.Exists) -> Callable[[Env, PolicyRuntime], Iterator[Env]] | None:
        """`EXISTS x IN s WHERE x.attr <op> bound`, the bound not naming x (the forgetting
        ladder's shape: a pass walks every faded unit, 2M at 100k topics), as one loop: one
        attribute read and one comparison a unit instead of a chain of closures. The bound is
        evaluated once, before the first unit's attribute: it cannot depend on the unit, and
        WHEN reads the state before any action of the firing. Same bindings, same order."""
        where = e.where
        if not (isinstance(where, A.Compare) and isinstance(where.left, A.Attr)
                and isinstance(where.left.obj, A.Name) and where.left.obj.id == e.var
                and e.var not in _names(where.right)):
            return None
        var, attr, cmp = e.var, where.left.name, _comparison(where)
        source, bound = self.source(e), self.expr(where.right)

        def each(env: Env, rt: PolicyRuntime) -> Iterator[Env]:
            units = _sequence(source(env, rt))
            if not units:
                return
            limit, attribute = bound(env, rt), rt.attribute
            for x in units:
                value = None if x is None else x.get(attr) if isinstance(x, Mapping) \
                    else attribute(x, attr)
                if truth(cmp(value, limit)):
                    yield {**env, var: x}

        return each

    def source(self, e: A.Exists) -> Fn:
        """What an EXISTS ranges over. Over a relational name whose WHERE keeps only units with
        `var.salience < bound` (a conjunct, the bound not depending on `var`), the runtime is
        told the bound: it may then return only the units below it (a superset is fine, WHERE
        still decides), so a forgetting pass walks what faded, not the whole memory."""
        name = e.source.id if isinstance(e.source, A.Name) else (e.var if e.source is None else None)
        if name is None or name not in C.RELATIONS or name in self.local:
            assert e.source is not None
            return self.expr(e.source)
        bound = _salience_bound(e.var, e.where)
        if bound is None:
            return lambda env, rt: rt.relation(name, env)
        limit = self.with_local(e.var).expr(bound)
        return lambda env, rt: rt.relation(name, env, salience_below=limit(env, rt))

    def with_locals(self, exists: list[A.Exists]) -> "ExprCompiler":
        out = self
        for ex in exists:
            out = out.with_local(ex.var)
        return out


def _comparison(e: A.Compare) -> Callable[[Any, Any], bool]:
    """`e`'s operator; `=` and `!=` with a name on either side compare canonical keys."""
    cmp = COMPARE[e.op]
    if e.op in ("=", "!=") and (is_name(e.left) or is_name(e.right)):
        return lambda a, b: cmp(canonical(a), canonical(b))
    return cmp


def _matcher(e: A.Call, text: Fn) -> Fn:
    """`matches(text, "regex")`, `capture(text, "regex")`: the checker proved the pattern a
    valid string literal (with a group, for capture)."""
    literal = e.args[1]
    assert isinstance(literal, A.Literal) and isinstance(literal.value, str)
    pattern = re.compile(literal.value)

    def matches(env: Env, rt: PolicyRuntime) -> Any:
        v = text(env, rt)
        return None if v is None else isinstance(v, str) and pattern.search(v) is not None

    def capture(env: Env, rt: PolicyRuntime) -> Any:
        v = text(env, rt)
        found = pattern.search(v) if isinstance(v, str) else None
        return None if found is None else found.group(1)

    return matches if e.func == "matches" else capture


def _salience_bound(var: str, where: A.Expr | None) -> A.Expr | None:
    """`e` in a conjunct `var.salience < e` (or `<=`) of `where`, e not naming var."""
    stack = [where] if where is not None else []
    while stack:
        x = stack.pop()
        if isinstance(x, A.Binary) and x.op == "AND":
            stack += [x.right, x.left]
        elif isinstance(x, A.Compare) and x.op in ("<", "<=") and isinstance(x.left, A.Attr) \
                and x.left.name == "salience" and isinstance(x.left.obj, A.Name) \
                and x.left.obj.id == var and var not in _names(x.right):
            return x.right
    return None


def _names(e: A.Expr) -> set[str]:
    out: set[str] = set()
    stack: list[Any] = [e]
    while stack:
        x = stack.pop()
        if isinstance(x, A.Name):
            out.add(x.id)
        elif isinstance(x, tuple):
            stack.extend(x)
        elif hasattr(x, "__dataclass_fields__"):
            stack.extend(getattr(x, f) for f in x.__dataclass_fields__ if f != "span")
    return out


def evaluate_constant(e: A.Expr) -> Any:
    """The value of an expression that reads nothing (checked; no names, attributes or
    runtime calls), with exactly the semantics it has at run time."""
    never: Any = None  # the runtime is never consulted by an expression that reads nothing
    return ExprCompiler({}, frozenset()).expr(e)({}, never)
