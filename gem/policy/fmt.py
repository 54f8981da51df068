"""Canonical formatting: `parse(fmt(tree)) == tree` for every tree the parser can produce.

Layout: settings first (one SET per line), then the DISABLE lines, then each policy
as one clause per line (POLICY, ON, WHEN, DO, WITH), blocks and policies separated
by a blank line, comments kept above the item they were written above (or at the
end of its last line). Within a file the order of items carries no meaning, so this
reordering never changes what a file does.
Expressions get the fewest parentheses that preserve their structure.
"""
from __future__ import annotations

import json
import re

from . import ast as A
from .syntax import KEYWORDS

# Binding strength; a child weaker than its slot requires is parenthesised.
_EXISTS_WHERE, _OR, _AND, _NOT, _CMP, _SUM, _PRODUCT, _UNARY, _POSTFIX, _ATOM = range(10)
_BINARY_LEVEL = {"OR": _OR, "AND": _AND, "+": _SUM, "-": _SUM, "*": _PRODUCT, "/": _PRODUCT}
_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")


def fmt(tree: A.PolicyFile) -> str:
    out: list[str] = []
    for s in tree.settings:
        out.extend(s.comments)
        out.append(_with_trailing(fmt_setting(s), s.trailing_comment))
    for i, d in enumerate(tree.disables):
        if out and i == 0:
            out.append("")
        out.extend(d.comments)
        out.append(_with_trailing(f"DISABLE POLICY {d.name}", d.trailing_comment))
    for p in tree.policies:
        if out:
            out.append("")
        out.extend(p.comments)
        text = fmt_policy(p)
        out.append(_with_trailing(text, p.trailing_comment))
    if tree.trailing_comments:
        if out:
            out.append("")
        out.extend(tree.trailing_comments)
    return "\n".join(out) + "\n" if out else ""


def _with_trailing(text: str, comment: str | None) -> str:
    return f"{text}  {comment}" if comment else text


def fmt_setting(s: A.Setting) -> str:
    return f"{'OVERRIDE ' if s.override else ''}SET {s.name} = {fmt_expr(s.expr)}"


def fmt_policy(p: A.Policy) -> str:
    head = f"{'OVERRIDE ' if p.override else ''}POLICY {p.name}"
    if p.priority:
        head += f" PRIORITY {p.priority}"
    lines = [head, "ON " + " OR ".join(p.events)]
    if p.condition is not None:
        lines.append("WHEN " + fmt_expr(p.condition))
    lines.append("DO " + ", ".join(f"{a.name}({_args(a.args)})" for a in p.actions))
    if p.with_:
        lines.append("WITH " + ", ".join(f"{w.key} = {fmt_expr(w.expr)}" for w in p.with_))
    return "\n".join(lines)


def _args(args) -> str:
    return ", ".join(fmt_expr(a) for a in args)


def fmt_expr(e: A.Expr, need: int = _EXISTS_WHERE) -> str:
    level, text = _fmt(e)
    return f"({text})" if level < need else text


def _key(k: str) -> str:
    return k if _IDENT.match(k) and k not in KEYWORDS else json.dumps(k, ensure_ascii=False)


def _number(v) -> str:
    if isinstance(v, float):
        return repr(v)  # shortest text that reads back as the same float
    return str(v)


def _exists_where(e: A.Expr) -> bool:
    return isinstance(e, A.Exists) and e.where is not None


def _where_tail(e: A.Expr) -> bool:
    # grammar: where_tail
    return _exists_where(e) or (isinstance(e, A.Unary) and e.op == "NOT" and _exists_where(e.operand))


def _is_tail(e: A.Expr, op: str) -> bool:
    """Can `e` be the unparenthesised right operand of `op` (grammar: and_tail / or_tail)?"""
    if _where_tail(e):
        return True
    return op == "OR" and isinstance(e, A.Binary) and e.op == "AND" and _where_tail(e.right)


def _fmt(e: A.Expr) -> tuple[int, str]:
    if isinstance(e, A.Literal):
        if e.kind == "bool":
            return _ATOM, "true" if e.value else "false"
        if e.kind == "null":
            return _ATOM, "null"
        if e.kind == "string":
            return _ATOM, json.dumps(e.value, ensure_ascii=False)
        return _ATOM, _number(e.value)
    if isinstance(e, (A.Duration, A.DateLit)):
        return _ATOM, e.text
    if isinstance(e, A.Name):
        return _ATOM, e.id
    if isinstance(e, A.Attr):
        return _POSTFIX, f"{fmt_expr(e.obj, _POSTFIX)}.{e.name}"
    if isinstance(e, A.Call):
        return _POSTFIX, f"{e.func}({_args(e.args)})"
    if isinstance(e, A.Unary):
        if e.op == "NOT":
            if _exists_where(e.operand):
                return _EXISTS_WHERE, f"NOT {_fmt(e.operand)[1]}"
            return _NOT, f"NOT {fmt_expr(e.operand, _NOT)}"
        inner = fmt_expr(e.operand, _UNARY)
        return _UNARY, f"- {inner}" if inner.startswith("-") else f"-{inner}"
    if isinstance(e, A.Binary):
        level = _BINARY_LEVEL[e.op]
        if e.op in ("AND", "OR") and _is_tail(e.right, e.op):
            # `a AND EXISTS x WHERE b`: the WHERE runs to the end, so the whole chain
            # may only stand where a complete expression is expected.
            return _EXISTS_WHERE, f"{fmt_expr(e.left, level)} {e.op} {_fmt(e.right)[1]}"
        # Left-associative: the right operand must bind strictly tighter.
        return level, f"{fmt_expr(e.left, level)} {e.op} {fmt_expr(e.right, level + 1)}"
    if isinstance(e, A.Compare):
        return _CMP, f"{fmt_expr(e.left, _SUM)} {e.op} {fmt_expr(e.right, _SUM)}"
    if isinstance(e, A.In):
        return _CMP, f"{fmt_expr(e.item, _SUM)} IN {fmt_expr(e.container, _SUM)}"
    if isinstance(e, A.Exists):
        text = f"EXISTS {e.var}"
        if e.source is not None:
            text += f" IN {fmt_expr(e.source, _POSTFIX)}"
        if e.where is not None:
            return _EXISTS_WHERE, f"{text} WHERE {fmt_expr(e.where)}"
        return _NOT, text
    if isinstance(e, A.SetLit):
        return _ATOM, "{" + _args(e.items) + "}"
    if isinstance(e, A.ListLit):
        return _ATOM, "[" + _args(e.items) + "]"
    if isinstance(e, A.RecordLit):
        return _ATOM, "{" + ", ".join(f"{_key(k)}: {fmt_expr(v)}" for k, v in e.items) + "}"
    raise AssertionError(f"unhandled expression {type(e).__name__}")  # pragma: no cover
