"""Lark's parse tree -> the AST (ast.py): spans, literals (strings, durations, dates),
expressions nested at most MAX_DEPTH deep, and comments attached to the items they precede so
fmt keeps them."""
from __future__ import annotations

import json
import math
import re
from datetime import datetime, timezone

from lark import Token, Tree

from . import ast as A
from .diagnostics import Diagnostic, at


MAX_DEPTH = 100  # expression nesting; keeps every later recursive pass far from Python's limit
_UNITS = {"w": 604800, "d": 86400, "h": 3600, "m": 60, "s": 1}
_DURATION_PART = re.compile(r"(\d+)([wdhms])")
_COMPARE = {"eq": "=", "ne": "!=", "lt": "<", "le": "<=", "gt": ">", "ge": ">="}
_ARITH = {"add": "+", "sub": "-", "mul": "*", "div": "/", "or_": "OR", "and_": "AND"}


class Builder:
    def __init__(self, text: str, file: str, comments: list[Token]) -> None:
        self.text = text
        self.file = file
        self.comments = comments
        self.diagnostics: list[Diagnostic] = []

    def error(self, message: str, span: A.Span, hint: str | None = None, code: str = "gem_syntax") -> None:
        self.diagnostics.append(at(code, message, span, self.text, hint))

    def span(self, node) -> A.Span:
        if isinstance(node, Token):
            # Tokens in the tree come from the lexer, which positions every one.
            assert node.line is not None and node.column is not None
            assert node.end_line is not None and node.end_column is not None
            return A.Span(self.file, node.line, node.column, node.end_line, node.end_column)
        m = node.meta
        if getattr(m, "empty", True):  # pragma: no cover - every rule here has positions
            return A.Span(self.file, 0, 0, 0, 0)
        return A.Span(self.file, m.line, m.column, m.end_line, m.end_column)

    # -- declarations --

    def build(self, tree: Tree) -> A.PolicyFile:
        parsed: list[A.Setting | A.Disable | A.Policy] = []
        for item in tree.children:
            if item.data == "setting":
                parsed.append(self.setting(item))
            elif item.data == "disable":
                parsed.append(self.disable(item))
            else:
                parsed.append(self.policy(item))
        order = {A.Setting: 0, A.Disable: 1, A.Policy: 2}
        parsed.sort(key=lambda x: order[type(x)])  # stable: each kind keeps its order
        items, trailing = self._attach_comments(parsed)
        return A.PolicyFile(tuple(x for x in items if isinstance(x, A.Setting)),
                            tuple(x for x in items if isinstance(x, A.Policy)),
                            tuple(x for x in items if isinstance(x, A.Disable)),
                            file=self.file, source=self.text, trailing_comments=trailing)

    def setting(self, t: Tree) -> A.Setting:
        override, name, expr = t.children
        return A.Setting(str(name), self.expr(expr), self.span(t), self.span(name), override=override is not None)

    def disable(self, t: Tree) -> A.Disable:
        (name_t,) = t.children
        return A.Disable(self.policy_name(name_t), self.span(t), self.span(name_t))

    def policy_name(self, name_t: Tree) -> str:
        parts = name_t.children
        for prev, nxt in zip(parts, parts[1:]):
            # policy_name is NAME ("-" (NAME | INT))*: lexer tokens, each with its offsets.
            assert isinstance(prev, Token) and isinstance(nxt, Token)
            assert prev.end_pos is not None and nxt.start_pos is not None
            if nxt.start_pos - prev.end_pos != 1:
                self.error("spaces are not allowed around '-' in a policy name", self.span(name_t),
                           "write the name as one word: " + "-".join(str(p) for p in parts))
                break
        return "-".join(str(p) for p in parts)

    def policy(self, t: Tree) -> A.Policy:
        override, name_t, prio_t, on_t, when_t, do_t, with_t = t.children
        name = self.policy_name(name_t)
        priority = 0
        if prio_t is not None:
            digits = prio_t.children[0]
            assert isinstance(digits, Token)  # PRIORITY takes an INT
            priority = int(digits) * (-1 if prio_t.data == "neg_priority" else 1)
        events = tuple(str(tok) for tok in on_t.children)
        event_spans = tuple(self.span(tok) for tok in on_t.children)
        condition = self.expr(when_t.children[0]) if when_t is not None else None
        actions = tuple(self.action(a) for a in do_t.children)
        with_ = tuple(self.with_item(w) for w in with_t.children) if with_t is not None else ()
        return A.Policy(
            name, priority, events, condition, actions, with_,
            span=self.span(t), name_span=self.span(name_t), event_spans=event_spans,
            override=override is not None,
        )

    def action(self, t: Tree) -> A.ActionCall:
        name, args = t.children
        return A.ActionCall(str(name), self.args(args), self.span(t), self.span(name))

    def with_item(self, t: Tree) -> A.WithItem:
        key, expr = t.children
        return A.WithItem(str(key), self.expr(expr), self.span(t), self.span(key))

    def args(self, t: Tree | None, depth: int = 0) -> tuple:
        if t is None:
            return ()
        return tuple(self.expr(c, depth) for c in t.children)

    # -- expressions --

    def expr(self, t, depth: int = 0):
        if depth > MAX_DEPTH:
            raise TooDeep(self.span(t))
        d = depth + 1
        kind = t.data
        sp = self.span(t)
        ch = t.children
        if kind == "name":
            return A.Name(str(ch[0]), sp)
        if kind in _COMPARE:
            return A.Compare(_COMPARE[kind], self.expr(ch[0], d), self.expr(ch[1], d), sp)
        if kind in _ARITH:
            return A.Binary(_ARITH[kind], self.expr(ch[0], d), self.expr(ch[1], d), sp)
        if kind == "in_":
            return A.In(self.expr(ch[0], d), self.expr(ch[1], d), sp)
        if kind == "not_":
            return A.Unary("NOT", self.expr(ch[0], d), sp)
        if kind == "neg":
            return A.Unary("-", self.expr(ch[0], d), sp)
        if kind in ("exists_bare", "exists_where"):
            var, source = ch[0], ch[1]
            where = self.expr(ch[2], d) if kind == "exists_where" else None
            src = self.expr(source, d) if source is not None else None
            return A.Exists(str(var), src, where, sp, self.span(var))
        if kind == "attr":
            obj, name = ch
            return A.Attr(self.expr(obj, d), str(name), sp, self.span(name))
        if kind == "call":
            name, args = ch
            return A.Call(str(name), self.args(args, d), sp, self.span(name))
        if kind == "set_lit":
            return A.SetLit(tuple(self.expr(c, d) for c in ch), sp)
        if kind == "list_lit":
            return A.ListLit(self.args(ch[0], d), sp)
        if kind == "record_lit":
            items = []
            for item in ch:
                key_tok, value = item.children
                key = self._string(key_tok) if key_tok.type == "STRING" else str(key_tok)
                items.append((key, self.expr(value, d)))
            return A.RecordLit(tuple(items), sp)
        return self.literal(t, sp)

    def literal(self, t: Tree, sp: A.Span):
        kind = t.data
        if kind == "true":
            return A.Literal(True, "bool", sp)
        if kind == "false":
            return A.Literal(False, "bool", sp)
        if kind == "null":
            return A.Literal(None, "null", sp)
        tok = t.children[0]
        assert isinstance(tok, Token)  # every literal rule but true/false/null is one terminal
        text = str(tok)
        if kind == "number":
            value = int(text) if tok.type == "INT" else float(text)
            if isinstance(value, float) and not math.isfinite(value):
                self.error(f"number {text} is too large", sp)
                value = 0.0
            return A.Literal(value, "number", sp)
        if kind == "string":
            return A.Literal(self._string(tok), "string", sp)
        if kind == "duration":
            seconds = sum(int(n) * _UNITS[u] for n, u in _DURATION_PART.findall(text))
            return A.Duration(seconds, text, sp)
        if kind in ("date", "datetime"):
            return A.DateLit(self._datetime(text, sp), text, sp)
        raise AssertionError(f"unhandled rule {kind}")  # pragma: no cover

    def _string(self, tok: Token) -> str:
        try:
            return json.loads(str(tok))
        except ValueError:
            self.error("invalid escape or control character in string", self.span(tok),
                       'strings use JSON escapes: \\" \\\\ \\n \\t \\uXXXX')
            return str(tok)[1:-1]

    def _datetime(self, text: str, sp: A.Span) -> datetime:
        try:
            if "T" in text:
                value = datetime.fromisoformat(text)
            else:
                value = datetime.strptime(text, "%Y-%m-%d")
        except ValueError:
            self.error(f"invalid date '{text}'", sp, "dates are YYYY-MM-DD, times YYYY-MM-DDTHH:MM[:SS]Z")
            return datetime(1970, 1, 1, tzinfo=timezone.utc)
        if value.tzinfo is None:
            return value.replace(tzinfo=timezone.utc)
        return value.astimezone(timezone.utc)

    # -- comments --

    def _attach_comments(self, items: list) -> tuple[list, tuple[str, ...]]:
        """Give each comment to the item it sits above (or at the end of the line of).
        Returns the items in source order and the comments after the last item."""
        items = sorted(items, key=lambda it: (it.span.line, it.span.col))
        leading: dict[int, list[tuple[int, str]]] = {id(it): [] for it in items}
        trailing: dict[int, str] = {}
        after_all: list[tuple[int, str]] = []
        for tok in self.comments:
            text = str(tok).rstrip()
            line = tok.line
            assert line is not None  # comments come from the lexer, which positions them
            owner = next((it for it in items if it.span.end_line == line and it.span.end_col <= tok.column), None)
            if owner is not None and id(owner) not in trailing:
                trailing[id(owner)] = text
                continue
            # Above an item, or inside one (fmt lifts inner comments above it).
            target = next((it for it in items if it.span.end_line >= line), None)
            if target is None:
                after_all.append((line, text))
            else:
                leading[id(target)].append((line, text))

        def block(lines: list[tuple[int, str]], next_line: int | None) -> tuple[str, ...]:
            # Keep one blank line wherever the source separated comment paragraphs.
            out: list[str] = []
            for i, (line, text) in enumerate(lines):
                if i and line - lines[i - 1][0] > 1:
                    out.append("")
                out.append(text)
            if lines and next_line is not None and next_line - lines[-1][0] > 1:
                out.append("")
            return tuple(out)

        def attach(it):
            return _replace(it, comments=block(leading[id(it)], it.span.line),
                            trailing_comment=trailing.get(id(it)))

        return [attach(it) for it in items], block(after_all, None)


class TooDeep(RecursionError):
    def __init__(self, span: A.Span) -> None:
        super().__init__("expression nested too deeply")
        self.span = span


def _replace(node, **changes):
    from dataclasses import replace

    return replace(node, **changes)
