"""Checked AST -> executable PolicySet.

A policy compiles to its event names, a solver for its WHEN (every binding of the EXISTS
variables under which it holds) and closures for its actions' arguments and its WITH
record; expressions are compiled by gem/policy/evaluate.py, which also defines what values
mean at run time. `load`, `load_text` and `load_sources` run the whole pipeline: read,
parse, compose, check, compile.
"""
from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass, field, replace
from datetime import timedelta
from typing import Any, Callable, Iterable, Iterator, Mapping, Sequence

from . import ast as A
from . import catalogue as C
from .ast import positive_exists
from .checker import CheckedPolicies, check
from .evaluate import Env, ExprCompiler, Fn, PolicyRuntime, equal, member, truth
from .diagnostics import Diagnostic
from .fmt import fmt_expr, fmt_policy
from .parser import parse_all
from .sources import Source, compose_sources, read_sources
from .vectorise import TickPlan, plan_of


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
    # On a tick, a policy of the ladder's shape decides on the derived columns which units it
    # moves (gem/policy/vectorise.py); None: it is evaluated per unit.
    plan: TickPlan | None = field(default=None, repr=False, compare=False)

    @property
    def enabled(self) -> bool:
        """Always True: a compiled policy is one in force (a disabled one is not compiled). It
        reads as the stored policy rows do, which keep disabled policies too."""
        return True

    @property
    def file(self) -> str:
        """The file that defines it."""
        return self.span.file

    def fire(self, bindings: dict, rt: PolicyRuntime) -> int:
        """Run this policy for one event; returns the number of action calls made.

        WHEN is evaluated on the state as it is before any of this firing's actions;
        DO then runs once per binding of the EXISTS variables that reach it (once if
        there are none), each action call with the WITH record as evidence.
        """
        run_plan = getattr(rt, "run_plan", None)  # a runtime without plans evaluates per unit
        if self.plan is not None and run_plan is not None:
            calls = run_plan(self, bindings)
            if calls is not None:
                return calls
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

    def __iter__(self) -> Iterator[CompiledPolicy]:
        """The policies in force, in firing order (`for p in mem.policies: p.name, p.source`)."""
        return iter(self.policies)

    def __len__(self) -> int:
        return len(self.policies)

    def __contains__(self, item: object) -> bool:
        """A policy in force, or the name of one."""
        if isinstance(item, str):
            return any(p.name == item for p in self.policies)
        return item in self.policies

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
        settings[s.name] = CompiledExpr(s.name, fmt_expr(s.expr), ExprCompiler(settings, frozenset()).expr(s.expr))
    for name, sig in C.SETTINGS.items():
        if name not in settings:
            settings[name] = _default_setting(name, sig.default)
    policies = [_compile_policy(p, settings) for p in checked.policies]
    policies.sort(key=lambda p: (-p.priority, p.name))
    sources = tuple(Source.of(f.file, f.source) for f in checked.files)
    return PolicySet(tuple(policies), settings, sources, checked.warnings)


def _default_setting(name: str, value: Any) -> CompiledExpr:
    if value is None:
        text = "null"
    elif isinstance(value, timedelta):
        text = f"{int(value.total_seconds() // 86400)}d" if value.total_seconds() % 86400 == 0 else \
            f"{int(value.total_seconds())}s"
    else:
        text = repr(value)
    return CompiledExpr(name, text, lambda env, rt: value)


def _sha(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def _compile_policy(p: A.Policy, settings: dict[str, CompiledExpr]) -> CompiledPolicy:
    bound = {n for e in p.events if e in C.EVENTS for n in C.EVENTS[e].names}
    comp = ExprCompiler(settings, frozenset(bound))
    solve = comp.solver(p.condition) if p.condition is not None else None
    do_locals = frozenset(bound | {ex.var for ex in positive_exists(p.condition)})
    do = ExprCompiler(settings, do_locals)
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
        plan=plan_of(p, comp),
    )


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
