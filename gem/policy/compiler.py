"""Checked AST -> executable PolicySet.

Every expression becomes a closure `f(env, rt)`: `env` holds the event's bindings
plus the EXISTS variables in scope, `rt` is the engine's PolicyRuntime. Names are
resolved once, at compile time (the checker has proved what each one is), so
evaluation does no lookups in the catalogue.

Run-time semantics, chosen so that a policy can never crash a transition on
data it did not foresee:
- null propagates through attribute access and arithmetic; `<`, `<=`, `>`, `>=`
  with a null side are false; `=` / `!=` are plain equality (`x = null` tests for null);
- only a real `true` counts as true in a condition;
- arithmetic that cannot be done on the actual values (a JSON value of the wrong
  type, division by zero) yields null, and a comparison that cannot be made is false;
- durations are datetime.timedelta, times aware datetimes, dates midnight UTC.
"""
from __future__ import annotations

import hashlib
import operator
import os
from dataclasses import dataclass, field, replace
from datetime import timedelta
from typing import Any, Callable, Iterable, Iterator, Mapping, Protocol, Sequence

from . import ast as A
from . import catalogue as C
from .checker import CheckedPolicies, check, positive_exists
from .diagnostics import Diagnostic
from .fmt import fmt_expr, fmt_policy
from .parser import parse_all
from .sources import Source, compose_sources, read_sources


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
    """

    def attribute(self, obj: Any, name: str) -> Any: ...

    def relation(self, name: str, bindings: dict) -> Any: ...

    def function(self, name: str, args: list) -> Any: ...

    def act(self, action: str, args: list, evidence: dict, policy: str, span: A.Span) -> None: ...


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
    except TypeError:
        return None
    raise AssertionError(name)  # pragma: no cover


# ---- compiled objects ----------------------------------------------------------------


@dataclass(frozen=True)
class CompiledExpr:
    """A setting's value: call it with the runtime. `text` is its canonical source."""

    name: str
    text: str
    _fn: Fn = field(repr=False, compare=False)

    def __call__(self, rt: PolicyRuntime) -> Any:
        return self._fn({}, rt)


@dataclass(frozen=True)
class CompiledAction:
    name: str
    args: tuple[Fn, ...] = field(repr=False)
    span: A.Span = field(compare=False)


@dataclass(frozen=True)
class CompiledPolicy:
    name: str
    priority: int
    events: frozenset[str]
    actions: tuple[str, ...]  # action names used, in order of first use
    span: A.Span = field(compare=False)
    source_hash: str = ""  # sha256 of the canonical (fmt) source: stable under reformatting
    source: str = field(default="", repr=False)
    _solve: Callable[[Env, PolicyRuntime], Iterator[Env]] | None = field(default=None, repr=False, compare=False)
    _calls: tuple[CompiledAction, ...] = field(default=(), repr=False, compare=False)
    _with: tuple[tuple[str, Fn], ...] = field(default=(), repr=False, compare=False)

    def fire(self, bindings: dict, rt: PolicyRuntime) -> int:
        """Run this policy for one event; returns the number of action calls made.

        WHEN is evaluated on the state as it is before any of this firing's actions;
        DO then runs once per binding of the EXISTS variables that reach it (once if
        there are none), each action call with the WITH record as evidence.
        """
        env = dict(bindings)
        solutions = list(self._solve(env, rt)) if self._solve is not None else [env]
        calls = 0
        for sol in solutions:
            evidence = {key: fn(sol, rt) for key, fn in self._with}
            for action in self._calls:
                args = [fn(sol, rt) for fn in action.args]
                rt.act(action.name, args, dict(evidence), policy=self.name, span=action.span)
                calls += 1
        return calls


@dataclass(frozen=True)
class PolicySet:
    policies: tuple[CompiledPolicy, ...]  # in force; priority descending, then name
    settings: Mapping[str, CompiledExpr]  # every catalogue setting; defaults where not SET
    sources: tuple[Source, ...] = ()  # in composition order: load_sources(sources) rebuilds the set
    # What the checker warns about the set (gem_c6_no_reinforcement, gem_c3_no_propagation).
    warnings: tuple[Diagnostic, ...] = ()

    def triggered_by(self, event: str) -> tuple[CompiledPolicy, ...]:
        """Policies listening to `event`, in firing order."""
        return tuple(p for p in self.policies if event in p.events)

    def setting(self, name: str, rt: PolicyRuntime) -> Any:
        return self.settings[name](rt)

    @property
    def hash(self) -> str:
        """One hash for the whole set: changes iff some policy or setting changes meaning."""
        h = hashlib.sha256()
        for p in self.policies:
            h.update(p.source_hash.encode())
        for name in sorted(self.settings):
            h.update(f"{name}={self.settings[name].text}\n".encode())
        return h.hexdigest()


# ---- the compiler --------------------------------------------------------------------


def compile(checked: CheckedPolicies) -> PolicySet:  # noqa: A001 - the pipeline's name for this step
    """Turn checked policies into a PolicySet. Only `check`'s output is accepted."""
    if not isinstance(checked, CheckedPolicies):
        raise TypeError("compile() takes the result of check(), not a raw AST")
    settings: dict[str, CompiledExpr] = {}
    for s in checked.settings:
        settings[s.name] = CompiledExpr(s.name, fmt_expr(s.expr), _Compiler(settings, frozenset()).expr(s.expr))
    for name, sig in C.SETTINGS.items():
        if name not in settings:
            settings[name] = _default_setting(name, sig.default)
    policies = [_compile_policy(p, settings) for p in checked.policies]
    policies.sort(key=lambda p: (-p.priority, p.name))
    sources = tuple(Source.of(f.file, f.source) for f in checked.files)
    return PolicySet(tuple(policies), settings, sources, checked.warnings)


def evaluate_constant(e: A.Expr) -> Any:
    """The value of an expression that reads nothing (checked; no names, attributes or
    runtime calls), with exactly the semantics it has at run time."""
    return _Compiler({}, frozenset()).expr(e)({}, None)  # type: ignore[arg-type] - never consulted


def _default_setting(name: str, value: Any) -> CompiledExpr:
    if value is None:
        text = "null"
    elif isinstance(value, timedelta):
        text = f"{int(value.total_seconds() // 86400)}d" if value.total_seconds() % 86400 == 0 else \
            f"{int(value.total_seconds())}s"
    else:
        text = repr(value)
    return CompiledExpr(name, text, lambda env, rt, v=value: v)


def _sha(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def _compile_policy(p: A.Policy, settings: dict[str, CompiledExpr]) -> CompiledPolicy:
    bound = {n for e in p.events if e in C.EVENTS for n in C.EVENTS[e].names}
    comp = _Compiler(settings, frozenset(bound))
    solve = comp.solver(p.condition) if p.condition is not None else None
    do_locals = frozenset(bound | {ex.var for ex in positive_exists(p.condition)})
    do = _Compiler(settings, do_locals)
    calls = tuple(CompiledAction(a.name, tuple(do.expr(x) for x in a.args), a.span) for a in p.actions)
    with_ = tuple((w.key, do.expr(w.expr, in_with=True)) for w in p.with_)
    # A policy is the same policy whether a file defines it or overrides an earlier
    # definition with it: OVERRIDE is about the composition, not the policy's meaning.
    text = fmt_policy(replace(p, override=False))
    return CompiledPolicy(
        name=p.name,
        priority=p.priority,
        events=frozenset(p.events),
        actions=tuple(dict.fromkeys(a.name for a in p.actions)),
        span=p.span,
        source_hash=_sha(text),
        source=text,
        _solve=solve,
        _calls=calls,
        _with=with_,
    )


class _Compiler:
    def __init__(self, settings: Mapping[str, CompiledExpr], local: frozenset[str]) -> None:
        self.settings = settings
        self.local = local  # names read from env: event bindings and EXISTS variables

    def with_local(self, name: str) -> "_Compiler":
        return _Compiler(self.settings, self.local | {name})

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
            left, right, cmp = self.expr(e.left, in_with), self.expr(e.right, in_with), COMPARE[e.op]
            return lambda env, rt: cmp(left(env, rt), right(env, rt))
        if isinstance(e, A.In):
            item, container = self.expr(e.item, in_with), self.expr(e.container, in_with)
            return lambda env, rt: member(item(env, rt), container(env, rt))
        if isinstance(e, A.Exists):
            solve = self.solver(e)
            return lambda env, rt: next(iter(solve(env, rt)), None) is not None
        if isinstance(e, A.SetLit):
            items = tuple(self.expr(x, in_with) for x in e.items)
            if in_with and all(isinstance(x, A.Name) for x in e.items):
                keys = tuple(x.id for x in e.items)
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
            var = e.var
            source = self.expr(e.source) if e.source is not None else (lambda env, rt: rt.relation(var, env))
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

    def with_locals(self, exists: list[A.Exists]) -> "_Compiler":
        out = self
        for ex in exists:
            out = out.with_local(ex.var)
        return out


# ---- loading -----------------------------------------------------------------------------


def load(paths: Sequence[str | os.PathLike], available_actions: Iterable[str] | None = None, *,
         defaults: bool = True) -> PolicySet:
    """Read, parse, check and compile policy files as one composed set: the default policy
    first (unless `defaults=False`), then `paths` in order, each able to OVERRIDE and
    DISABLE what the files before it define.

    `load([])` is the default governance; `load([], defaults=False)` is InvalidInput.
    Diagnostics of all files are combined (sorted by file, then position; at most 10);
    syntax errors are reported before any check runs. Warnings are in `.warnings`.
    """
    return load_sources(read_sources(paths), available_actions, defaults=defaults, argument="paths")


def load_text(text: str, filename: str = "<string>", available_actions: Iterable[str] | None = None, *,
              defaults: bool = False) -> PolicySet:
    """One policy source held in memory; alone unless `defaults=True`."""
    return load_sources([(filename, text)], available_actions, defaults=defaults)


def load_sources(sources: Sequence[Source | tuple[str, str]], available_actions: Iterable[str] | None = None,
                 *, defaults: bool = False, argument: str = "sources") -> PolicySet:
    """Like `load`, from sources already in memory ((file, text) pairs or Source objects),
    composed exactly as given unless `defaults=True`: that is the form a stored set is read
    back in (`PolicySet.sources` already begins with the default policy it was composed with).
    `argument` names `sources` in InvalidInput messages (e.g. "policies" for gem.open's).
    """
    composed = compose_sources(sources, defaults=defaults, argument=argument)
    return compile(check(parse_all([(s.file, s.text) for s in composed]), available_actions))


__all__ = [
    "PolicyRuntime", "CompiledExpr", "CompiledPolicy", "CompiledAction", "PolicySet", "Source",
    "compile", "load", "load_sources", "load_text", "truth", "equal", "member",
]
