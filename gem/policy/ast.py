"""Syntax tree of the policy language.

Every node is a frozen dataclass with a `span`. Spans (and the other purely
positional or cosmetic fields: name spans, comments) are excluded from equality,
so two trees are equal when they mean the same program; that is what lets
`parse(fmt(tree)) == tree` be a meaningful property.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Union


@dataclass(frozen=True)
class Span:
    """A source range. Lines and columns are 1-based; `end_col` is one past the last character."""

    file: str
    line: int
    col: int
    end_line: int
    end_col: int

    def __str__(self) -> str:
        return f"{self.file}:{self.line}:{self.col}"


NO_SPAN = Span("<none>", 0, 0, 0, 0)


def _span():
    return field(default=NO_SPAN, compare=False, repr=False)


# ---- expressions ---------------------------------------------------------------


@dataclass(frozen=True)
class Literal:
    """A number, string, boolean or null. `kind` is 'number' | 'string' | 'bool' | 'null'."""

    value: object
    kind: str
    span: Span = _span()


@dataclass(frozen=True)
class Name:
    id: str
    span: Span = _span()


@dataclass(frozen=True)
class Attr:
    obj: "Expr"
    name: str
    span: Span = _span()
    name_span: Span = _span()


@dataclass(frozen=True)
class Call:
    func: str
    args: tuple["Expr", ...]
    span: Span = _span()
    name_span: Span = _span()


@dataclass(frozen=True)
class Unary:
    """`op` is '-' or 'NOT'."""

    op: str
    operand: "Expr"
    span: Span = _span()


@dataclass(frozen=True)
class Binary:
    """Arithmetic ('+', '-', '*', '/') and logic ('AND', 'OR')."""

    op: str
    left: "Expr"
    right: "Expr"
    span: Span = _span()


@dataclass(frozen=True)
class Compare:
    """`op` is one of '=', '!=', '<', '<=', '>', '>='."""

    op: str
    left: "Expr"
    right: "Expr"
    span: Span = _span()


@dataclass(frozen=True)
class In:
    item: "Expr"
    container: "Expr"
    span: Span = _span()


@dataclass(frozen=True)
class Exists:
    """`EXISTS var [IN source] [WHERE where]`.

    Without a source, `var` names a relational name (dependent_topic, ...) and
    each of its elements is bound under that same name.
    """

    var: str
    source: "Expr | None"
    where: "Expr | None"
    span: Span = _span()
    var_span: Span = _span()


@dataclass(frozen=True)
class SetLit:
    items: tuple["Expr", ...]
    span: Span = _span()


@dataclass(frozen=True)
class RecordLit:
    items: tuple[tuple[str, "Expr"], ...]
    span: Span = _span()


@dataclass(frozen=True)
class ListLit:
    items: tuple["Expr", ...]
    span: Span = _span()


@dataclass(frozen=True)
class Duration:
    """`30d`, `12h`, `1d12h`: `seconds` is the total, `text` the spelling kept for fmt."""

    seconds: int
    text: str
    span: Span = _span()


@dataclass(frozen=True)
class DateLit:
    """`2026-03-15` or `2026-03-15T10:00:00Z`; `value` is timezone-aware (UTC when no offset given)."""

    value: datetime
    text: str
    span: Span = _span()


Expr = Union[
    Literal, Name, Attr, Call, Unary, Binary, Compare, In, Exists,
    SetLit, RecordLit, ListLit, Duration, DateLit,
]


# ---- declarations ----------------------------------------------------------------


@dataclass(frozen=True)
class ActionCall:
    name: str
    args: tuple[Expr, ...]
    span: Span = _span()
    name_span: Span = _span()


@dataclass(frozen=True)
class WithItem:
    key: str
    expr: Expr
    span: Span = _span()
    key_span: Span = _span()


@dataclass(frozen=True)
class Setting:
    """`SET name = expr`; with `override`, `OVERRIDE SET ...`: it replaces the value an
    earlier file of the composition set."""

    name: str
    expr: Expr
    span: Span = _span()
    name_span: Span = _span()
    # Comment lines written above the setting, and one written at the end of its line.
    comments: tuple[str, ...] = field(default=(), compare=False, repr=False)
    trailing_comment: str | None = field(default=None, compare=False, repr=False)
    override: bool = False


@dataclass(frozen=True)
class Policy:
    """`POLICY ...`; with `override`, `OVERRIDE POLICY ...`: it replaces the policy of that
    name an earlier file of the composition defines."""

    name: str
    priority: int
    events: tuple[str, ...]
    condition: Expr | None
    actions: tuple[ActionCall, ...]
    with_: tuple[WithItem, ...]
    span: Span = _span()
    name_span: Span = _span()
    event_spans: tuple[Span, ...] = field(default=(), compare=False, repr=False)
    comments: tuple[str, ...] = field(default=(), compare=False, repr=False)
    trailing_comment: str | None = field(default=None, compare=False, repr=False)
    override: bool = False


@dataclass(frozen=True)
class Disable:
    """`DISABLE POLICY name`: the policy an earlier file of the composition defines is not in force."""

    name: str
    span: Span = _span()
    name_span: Span = _span()
    comments: tuple[str, ...] = field(default=(), compare=False, repr=False)
    trailing_comment: str | None = field(default=None, compare=False, repr=False)


@dataclass(frozen=True)
class PolicyFile:
    """One source. Items are kept by kind, each kind in source order: within a file the
    order of items carries no meaning (fmt lays them out settings, disables, policies)."""

    settings: tuple[Setting, ...]
    policies: tuple[Policy, ...]
    disables: tuple[Disable, ...] = ()
    file: str = field(default="<string>", compare=False)
    # The exact source text: diagnostics quote lines from it.
    source: str = field(default="", compare=False, repr=False)
    trailing_comments: tuple[str, ...] = field(default=(), compare=False, repr=False)


def walk(expr: Expr):
    """Yield `expr` and every expression below it, parents first."""
    stack = [expr]
    while stack:
        e = stack.pop()
        yield e
        stack.extend(reversed(children(e)))


def children(e: Expr) -> tuple[Expr, ...]:
    if isinstance(e, Attr):
        return (e.obj,)
    if isinstance(e, (Call, SetLit, ListLit)):
        return tuple(e.args if isinstance(e, Call) else e.items)
    if isinstance(e, Unary):
        return (e.operand,)
    if isinstance(e, (Binary, Compare)):
        return (e.left, e.right)
    if isinstance(e, In):
        return (e.item, e.container)
    if isinstance(e, Exists):
        return tuple(x for x in (e.source, e.where) if x is not None)
    if isinstance(e, RecordLit):
        return tuple(v for _, v in e.items)
    return ()


def positive_exists(expr: Expr | None) -> list[Exists]:
    """EXISTS nodes whose bindings reach DO: the condition itself or an AND-conjunct of it,
    and, recursively, of their WHERE clauses. EXISTS under OR or NOT binds nothing for DO."""
    out: list[Exists] = []
    stack = [expr] if expr is not None else []
    while stack:
        e = stack.pop()
        if isinstance(e, Binary) and e.op == "AND":
            stack.extend([e.right, e.left])
        elif isinstance(e, Exists):
            out.append(e)
            if e.where is not None:
                stack.append(e.where)
    return out
