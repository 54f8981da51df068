"""A readable account of a policy set: which events trigger which policies, which
actions can cascade into which further events and policies, and, for several files,
how they compose (what each OVERRIDE and DISABLE changed) and whether some policy
in force does the jobs C6 and C3 need.

Works on parsed (not necessarily checked) trees, so it can explain a file that
does not check yet; unknown events and actions are listed as such, and composition
problems are listed instead of raised.
"""
from __future__ import annotations

from collections import defaultdict
from pathlib import Path
from typing import Sequence

from . import ast as A
from . import catalogue as C
from .cascades import cascade_edges, describe_cycle, unbounded_cycles
from .compose import ROLES, compose, governance
from .fmt import fmt_expr
from .vectorise import how_it_moves, per_unit_because


def explain(tree: A.PolicyFile | Sequence[A.PolicyFile]) -> str:
    """Explain one file, or several composed in the order given."""
    files = (tree,) if isinstance(tree, A.PolicyFile) else tuple(tree)
    comp = compose(files)
    several = len(files) > 1
    policies = sorted(comp.policies, key=lambda p: (-p.priority, p.name))
    out: list[str] = []

    if several or comp.changes or comp.problems:
        out.extend(_composition(files, comp))
        out.append("")

    by_event: dict[str, list[A.Policy]] = defaultdict(list)
    for p in policies:
        for ev in p.events:
            by_event[ev].append(p)
    out.append("Events and the policies they trigger (in firing order):")
    if not by_event:
        out.append("  (no policies)")
    for ev in sorted(by_event):
        note = "" if ev in C.EVENTS else "  (unknown event)"
        out.append(f"  {ev}{note}")
        for p in by_event[ev]:
            prio = f" [priority {p.priority}]" if p.priority else ""
            origin = f" ({_name(p.span.file)})" if several else ""
            when = f" WHEN {fmt_expr(p.condition)}" if p.condition is not None else ""
            actions = ", ".join(a.name for a in p.actions)
            out.append(f"    -> {p.name}{prio}{origin}:{when} DO {actions}")

    edges = cascade_edges(policies)
    out.append("")
    out.append("Cascades (action -> event it may emit -> policies that event triggers):")
    lines = []
    for p in policies:
        for a in dict.fromkeys(a.name for a in p.actions):
            sig = C.ACTIONS.get(a)
            if sig is None:
                lines.append(f"  {p.name}: {a} (unknown action)")
            elif sig.aborts:
                lines.append(f"  {p.name}: {a} aborts the transition")
            elif not sig.emits:
                lines.append(f"  {p.name}: {a} emits no event")
            else:
                for ev in sorted(sig.emits):
                    listeners = ", ".join(q.name for q in by_event.get(ev, [])) or "no policy"
                    lines.append(f"  {p.name}: {a} -> {ev} -> {listeners}")
    out.extend(lines or ["  (none)"])

    ticks = [p for p in policies if "tick" in p.events]
    if ticks:
        out.append("")
        out.append("Forgetting passes (tick): how each policy is evaluated:")
        listened = {ev for p in policies for ev in p.events}
        for p in ticks:
            why = per_unit_because(p)
            out.append(f"  {p.name}: " + ("vectorised, on the salience, status and labels columns; "
                                          + how_it_moves(p, listened)
                                          if why is None else f"per unit ({why})"))

    out.append("")
    out.append("Loops:")
    unbounded = unbounded_cycles(edges)
    bounded = [e for e in edges if e.bounded and any(e.target in q.events for q in policies)]
    for path in unbounded:
        out.append("  UNBOUNDED: " + describe_cycle(path))
    for e in bounded:
        out.append(f"  bounded: '{e.policy}' -[{e.action}]-> {e.target} acts on an element of dependent_topic, "
                   "so each step reaches a new topic")
    if not unbounded and not bounded:
        out.append("  none")

    out.append("")
    out.append("Correctness conditions that need a policy:")
    errors, _warnings = governance(comp, files)
    for problem in errors:
        out.append(f"  {problem.code}: {problem.message}")
    for role in ROLES if not errors else ():
        doers = [p.name for p in policies if role.played_by(p)]
        found = ", ".join(doers) if doers else f"none (warning {role.code})"
        out.append(f"  {role.condition} needs {role.needs}: {found}")

    out.append("")
    out.append("Settings:")
    given = {s.name: s for s in comp.settings}
    for name, setting in C.SETTINGS.items():
        if name in given:
            out.append(f"  {name} = {fmt_expr(given[name].expr)}{_set_where(given[name], several)}")
        else:
            out.append(f"  {name} = {_default(setting.default)} (default)")
    for name in given:
        if name not in C.SETTINGS:
            out.append(f"  {name} = {fmt_expr(given[name].expr)} (unknown setting)")
    return "\n".join(out) + "\n"


def _composition(files: Sequence[A.PolicyFile], comp) -> list[str]:
    out = ["Files, composed in this order:"]
    for f in files:
        counts = [(len(f.settings), "setting"), (len(f.policies), "policy"), (len(f.disables), "disable")]
        parts = [f"{n} {word if n == 1 else ('policies' if word == 'policy' else word + 's')}"
                 for n, word in counts if n]
        out.append(f"  {f.file}: " + (", ".join(parts) or "nothing"))
    if comp.changes:
        out.append("Changes to earlier files:")
        for c in comp.changes:
            was = "set" if c.kind == "OVERRIDE SET" else "defined"
            out.append(f"  {c.span}: {c.kind} {c.name} ({was} at {c.replaced})")
    if comp.problems:
        out.append("Composition problems (gem policy check reports them):")
        for problem in comp.problems:
            out.append(f"  {problem.span}: {problem.code}: {problem.message}")
    return out


def _set_where(s: A.Setting, several: bool) -> str:
    if s.override:
        return f" (OVERRIDE in {_name(s.span.file)})"
    return f" ({_name(s.span.file)})" if several else ""


def _name(file: str) -> str:
    return Path(file).name


def _default(value) -> str:
    if value is None:
        return "none"
    if hasattr(value, "total_seconds"):
        seconds = int(value.total_seconds())
        return f"{seconds // 86400}d" if seconds % 86400 == 0 else f"{seconds}s"
    return repr(value)
