"""Static checks: a policy set that passes never reaches the engine with an unknown
name, a wrong arity, a type error, a cascade that can loop without bound, or no
policy at all.

The files are checked as one composition (compose.py): later files may override
and disable what earlier ones define. Every definition is checked, also one a later
file replaces; cascades and governance are judged on what is in force.

The checks run as ordered, named passes (PASSES), each one kind of rule: composition
and names here, expressions in check_types.py, cascade termination over cascades.py,
governance in compose.py. Each reports into one list (check_context.py); an
expression that already failed is typed Any afterwards so one mistake yields one
diagnostic, not a cascade of them. Warnings (a set a correctness condition will
hold against) never fail the check; they come back with the result.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Iterable, Sequence

from ..errors import PolicyCheckError
from . import ast as A
from . import catalogue as C
from .cascades import CascadeEdge, cascade_edges, describe_cycle, unbounded_cycles
from .check_context import CheckContext
from .check_types import pass_expressions
from .compose import compose, governance
from .diagnostics import Diagnostic, did_you_mean, finish


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
    ctx = CheckContext(files, available)
    for _name, run in PASSES:
        run(ctx)
    if ctx.diagnostics:
        raise PolicyCheckError(finish(ctx.diagnostics, [f.file for f in files]))
    return CheckedPolicies(files, ctx.composition.policies, ctx.composition.settings, tuple(ctx.cascades),
                           tuple(finish(ctx.warnings, [f.file for f in files])), available)


def _pass_composition(ctx: CheckContext) -> None:
    ctx.composition = compose(ctx.files)
    for problem in ctx.composition.problems:
        ctx.report(problem.code, problem.message, problem.span, problem.hint)
    for p in ctx.policies:
        keys: set[str] = set()
        for w in p.with_:
            if w.key in keys:
                ctx.report("gem_duplicate_key", f"WITH key '{w.key}' is given twice", w.key_span)
            keys.add(w.key)


def _pass_events(ctx: CheckContext) -> None:
    for p in ctx.policies:
        for name, span in zip(p.events, p.event_spans or [p.span] * len(p.events)):
            if name not in C.EVENTS:
                ctx.report("gem_unknown_event", f"unknown event '{name}'", span, did_you_mean(name, C.EVENTS))


def _pass_actions(ctx: CheckContext) -> None:
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


def _pass_setting_names(ctx: CheckContext) -> None:
    for s in ctx.settings:
        if s.name not in C.SETTINGS:
            ctx.report("gem_unknown_setting", f"unknown setting '{s.name}'", s.name_span,
                       did_you_mean(s.name, C.SETTINGS))


def _pass_cascades(ctx: CheckContext) -> None:
    edges = cascade_edges(ctx.composition.policies)
    ctx.cascades = edges
    for path in unbounded_cycles(edges):
        first = min(path, key=lambda e: (e.span.file, e.span.line, e.span.col))
        ctx.report("gem_cascade_loop", "policies can trigger each other without bound: " + describe_cycle(path),
                   first.span,
                   "make an action on the cycle act on an element of dependent_topic "
                   "(WHEN EXISTS dependent_topic), or break the cycle")


def _pass_governance(ctx: CheckContext) -> None:
    # A judgement of the set as a whole: only worth making once each file is right.
    if ctx.diagnostics:
        return
    errors, warnings = governance(ctx.composition, ctx.files)
    for problem in errors:
        ctx.report(problem.code, problem.message, problem.span, problem.hint)
    for problem in warnings:
        ctx.report(problem.code, problem.message, problem.span, problem.hint, severity="warning")


PASSES: tuple[tuple[str, Callable[[CheckContext], None]], ...] = (
    ("composition: duplicates, overrides and disables", _pass_composition),
    ("unknown events", _pass_events),
    ("unknown actions", _pass_actions),
    ("unknown settings", _pass_setting_names),
    ("names, scope, attributes, functions, arities and types", pass_expressions),
    ("cascade termination", _pass_cascades),
    ("governance: a set with no policy in force; C6 and C3 warnings", _pass_governance),
)
