"""Which `tick` policies run as set-at-a-time plans over the derived columns.

A forgetting pass at 100k topics walks ~2M faded units; evaluated one unit at a time, each
costs ~30 us of closures, attribute reads and row loads before its action runs. A policy of
the ladder's shape

    ON tick WHEN EXISTS x IN <active_fields | visible_fields | active_topics | active_episodes>
            WHERE <predicate over x.salience, x.status and x.labels>
    DO compress(x) | hide(x) | archive(x), ...          (no WITH)

reads only what the derived state keeps as columns (salience, ladder status, a field's
labels), so which units it moves is decided on arrays (gem/operators/tick_plan.py) and only
its actions run per unit. Every other policy is evaluated per unit, as before; `plan_of` says
why, and `gem policy explain` shows it. A plan decides exactly what per-unit evaluation
decides: units whose salience is within a rounding error of a bound, and units the transition
itself changed, are decided by the policy's own compiled WHERE.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Union

from . import ast as A
from . import catalogue as C
from .evaluate import ExprCompiler, Fn, _salience_bound, is_name

# relation -> the table its units live in
PLANNED_RELATIONS = {"active_fields": "Field", "visible_fields": "Field",
                     "active_topics": "Topic", "active_episodes": "Episode",
                     "visible_episodes": "Episode"}
PLANNED_ACTIONS = frozenset({"compress", "hide", "archive"})
# The steps a plan makes as status moves, for the whole chosen set at once, reading no row
# (gem/operators/status_moves.py), unless some policy listens to an event they emit.
STATUS_STEPS = frozenset({("Field", "compress"), ("Field", "hide"), ("Episode", "compress"),
                          ("Episode", "hide"), ("Topic", "archive")})
STEP_EVENTS = {"Field": ("attenuated",), "Episode": ("attenuated",),
               "Topic": ("archived", "attenuated")}  # the events those steps emit


@dataclass(frozen=True)
class Salience:
    """x.salience <op> bound (the bound reads no unit: evaluated once per firing)."""
    op: str
    bound: Fn = field(repr=False, compare=False)


@dataclass(frozen=True)
class Status:
    """x.status = / != a text literal."""
    op: str
    value: str


@dataclass(frozen=True)
class Label:
    """"label" IN x.labels."""
    label: str


@dataclass(frozen=True)
class Not:
    operand: "Predicate"


@dataclass(frozen=True)
class Both:
    op: str  # AND | OR
    left: "Predicate"
    right: "Predicate"


Predicate = Union[Salience, Status, Label, Not, Both]


@dataclass(frozen=True)
class TickPlan:
    relation: str
    table: str
    var: str
    predicate: Predicate
    where: Fn = field(repr=False, compare=False)        # the compiled WHERE, for exact per-unit checks
    below: Fn | None = field(repr=False, compare=False)  # the salience_below hint's bound
    actions: tuple[tuple[str, A.Span], ...] = ()


def plan_of(p: A.Policy, compiler: ExprCompiler) -> TickPlan | None:
    """The plan of a policy of the ladder's shape (None: it runs per unit)."""
    if per_unit_because(p) is not None:
        return None
    cond = p.condition
    assert isinstance(cond, A.Exists) and cond.where is not None
    source = cond.source.id if isinstance(cond.source, A.Name) else cond.var
    local = compiler.with_local(cond.var)
    bound = _salience_bound(cond.var, cond.where)
    return TickPlan(source, PLANNED_RELATIONS[source], cond.var,
                    _predicate(cond.where, cond.var, compiler), local.expr(cond.where),
                    None if bound is None else local.expr(bound),
                    tuple((a.name, a.span) for a in p.actions))


def per_unit_because(p: A.Policy) -> str | None:
    """Why a policy runs per unit, or None when it runs as a plan (on a tick). Judges the
    tree alone, so explain can say it of a file that does not check yet."""
    if "tick" not in p.events:
        return "not a tick policy"
    cond = p.condition
    if not isinstance(cond, A.Exists):
        return "WHEN is not one EXISTS over a relation"
    source = cond.source.id if isinstance(cond.source, A.Name) else \
        cond.var if cond.source is None else None
    if source not in PLANNED_RELATIONS:
        return f"EXISTS ranges over {source or 'an expression'}, not a relation of units"
    if p.with_:
        return "WITH is evaluated per unit"
    for a in p.actions:
        if a.name not in PLANNED_ACTIONS:
            return f"action {a.name} is not a ladder step"
        if len(a.args) != 1 or not (isinstance(a.args[0], A.Name) and a.args[0].id == cond.var):
            return f"{a.name} does not act on {cond.var} alone"
    if cond.where is None:
        return "EXISTS has no WHERE"
    return _why_not(cond.where, cond.var, PLANNED_RELATIONS[source] == "Field")


def how_it_moves(p: A.Policy, listened: set[str]) -> str:
    """How a planned policy's actions run, given the events some policy of the set listens
    to (`gem policy explain`)."""
    cond = p.condition
    assert isinstance(cond, A.Exists)
    source = cond.source.id if isinstance(cond.source, A.Name) else cond.var
    table = PLANNED_RELATIONS[source]
    if any((table, a.name) not in STATUS_STEPS for a in p.actions):
        return "its actions per unit"
    heard = sorted(listened.intersection(STEP_EVENTS[table]))
    if heard:
        return f"its actions per unit (a policy listens to {', '.join(heard)})"
    folds = table == "Field" and any(a.name == "compress" for a in p.actions)
    return "its moves made in bulk, by status" + (
        " (a field with a faded history to fold: per unit)" if folds else "")


def _attr(e: A.Expr, var: str) -> str | None:
    if isinstance(e, A.Attr) and isinstance(e.obj, A.Name) and e.obj.id == var:
        return e.name
    return None


def _constant(e: A.Expr, var: str) -> bool:
    """Reads no unit and nothing but literals and settings."""
    if isinstance(e, (A.Literal, A.Duration, A.DateLit)):
        return True
    if isinstance(e, A.Name):
        return e.id in C.SETTINGS and e.id != var
    if isinstance(e, A.Unary):
        return e.op != "NOT" and _constant(e.operand, var)
    if isinstance(e, A.Binary):
        return e.op not in ("AND", "OR") and _constant(e.left, var) and _constant(e.right, var)
    return False


_FLIP = {"<": ">", "<=": ">=", ">": "<", ">=": "<=", "=": "=", "!=": "!="}


def _why_not(e: A.Expr, var: str, labelled: bool) -> str | None:
    if isinstance(e, A.Binary) and e.op in ("AND", "OR"):
        return _why_not(e.left, var, labelled) or _why_not(e.right, var, labelled)
    if isinstance(e, A.Unary) and e.op == "NOT":
        return _why_not(e.operand, var, labelled)
    if isinstance(e, A.Compare):
        left, right = _attr(e.left, var), _attr(e.right, var)
        attr, other = (left, e.right) if left is not None else (right, e.left)
        if attr == "salience" and _constant(other, var):
            return None
        if attr == "status" and e.op in ("=", "!=") and isinstance(other, A.Literal) \
                and isinstance(other.value, str) and not is_name(other):
            return None
        return f"WHERE compares {attr and f'{var}.{attr}' or 'something'} the columns do not hold"
    if isinstance(e, A.In) and labelled and _attr(e.container, var) == "labels" and \
            isinstance(e.item, A.Literal) and isinstance(e.item.value, str):
        return None
    return "WHERE reads more than salience, status and labels"


def _predicate(e: A.Expr, var: str, compiler: ExprCompiler) -> Predicate:
    if isinstance(e, A.Binary):
        return Both(e.op, _predicate(e.left, var, compiler), _predicate(e.right, var, compiler))
    if isinstance(e, A.Unary):
        return Not(_predicate(e.operand, var, compiler))
    if isinstance(e, A.In):
        assert isinstance(e.item, A.Literal) and isinstance(e.item.value, str)
        return Label(e.item.value)
    assert isinstance(e, A.Compare)
    flipped = _attr(e.left, var) is None
    attr = _attr(e.right if flipped else e.left, var)
    other = e.left if flipped else e.right
    op = _FLIP[e.op] if flipped else e.op
    if attr == "salience":
        return Salience(op, compiler.expr(other))
    assert isinstance(other, A.Literal) and isinstance(other.value, str)
    return Status(op, other.value)
