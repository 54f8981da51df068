"""Text -> AST for the policy language.

The grammar lives in `grammar/policy.lark` (shipped in the wheel as
`gem/_data/grammar/policy.lark`). Parsing never raises anything but
PolicySyntaxError: Lark's LALR error hook (`on_error`) records each error and
recovers in panic mode (skip to the next clause keyword, pop the parser stack
until that keyword fits), so one run reports several mistakes.
"""
from __future__ import annotations

import contextvars
import json
import math
import re
from datetime import datetime, timezone
from functools import lru_cache
from importlib.util import find_spec
from pathlib import Path
from typing import cast

from lark import Lark, Token, Tree
from lark.exceptions import LarkError, UnexpectedCharacters, UnexpectedInput, UnexpectedToken

from ..errors import PolicySyntaxError
from . import ast as A
from .diagnostics import MAX_DIAGNOSTICS, Diagnostic, at, finish, source_line

_PKG = Path(__file__).resolve().parent.parent  # the `gem` package directory


def data_file(kind: str, name: str) -> Path:
    """A language source shipped with gem: `kind` is 'grammar' or 'policies'.

    An installed wheel carries them under gem/_data/; an editable or source
    checkout keeps them at the top of the repository.
    """
    packaged = _PKG / "_data" / kind / name
    if packaged.exists():
        return packaged
    return _PKG.parent / kind / name


def grammar_path() -> Path:
    return data_file("grammar", "policy.lark")


# Comments are ignored by the grammar but fmt keeps them: the lexer hands each
# one to this per-parse collector.
_comments: contextvars.ContextVar[list | None] = contextvars.ContextVar("gem_policy_comments", default=None)


def _collect_comment(tok: Token) -> Token:
    sink = _comments.get()
    if sink is not None:
        sink.append(tok)
    return tok


@lru_cache(maxsize=1)
def lark_parser(strict: bool | None = None) -> Lark:
    # Strict mode (conflicts and terminal collisions are errors) needs the optional
    # `interegular` package; the grammar is the same either way and the test suite
    # builds it strictly, so a missing interegular only skips re-validation.
    if strict is None:
        strict = find_spec("interegular") is not None
    return Lark(
        grammar_path().read_text(encoding="utf-8"),
        parser="lalr",
        lexer="basic",
        propagate_positions=True,
        maybe_placeholders=True,
        strict=strict,
        lexer_callbacks={"COMMENT": _collect_comment},
    )


KEYWORDS = frozenset(
    "SET POLICY PRIORITY ON OR WHEN DO WITH AND NOT IN EXISTS WHERE OVERRIDE DISABLE true false null".split()
)
# Tokens that begin an item of a file.
_ITEM_START = frozenset({"POLICY", "SET", "OVERRIDE", "DISABLE"})
# Tokens that begin a clause: panic-mode recovery resynchronises on them.
_SYNC = _ITEM_START | {"ON", "WHEN", "DO", "WITH"}
_CLOSERS = {"RPAR": ("LPAR", "("), "RSQB": ("LSQB", "["), "RBRACE": ("LBRACE", "{")}
_TERMINAL_WORDS = {
    "NAME": "a name",
    "INT": "a number",
    "NUMBER": "a number",
    "STRING": "a string",
    "DURATION": "a duration",
    "DATE": "a date",
    "DATETIME": "a date-time",
    "$END": "end of file",
}
MAX_DEPTH = 100  # expression nesting; keeps every later recursive pass far from Python's limit


def parse_all(sources: list[tuple[str, str]] | tuple) -> list[A.PolicyFile]:
    """Parse several (filename, text) sources; one PolicySyntaxError lists the problems of
    all of them (sorted by file, then position; at most 10)."""
    trees, diagnostics = [], []
    for name, text in sources:
        try:
            trees.append(parse(text, name))
        except PolicySyntaxError as exc:
            diagnostics.extend(exc.diagnostics)
    if diagnostics:
        raise PolicySyntaxError(finish(diagnostics, [name for name, _ in sources]))
    return trees


def parse(text: str, filename: str = "<string>") -> A.PolicyFile:
    """Parse one policy source. Raises PolicySyntaxError listing up to 10 problems."""
    if not isinstance(text, str):
        raise TypeError("policy source must be str")
    rec = _Recovery(text, filename)
    sink: list[Token] = []
    reset = _comments.set(sink)
    tree = result = None
    try:
        tree = lark_parser().parse(text, on_error=rec.on_error)
    except UnexpectedInput as e:
        # Either recovery gave up (too many errors) or the error was the last straw.
        if len(rec.diagnostics) < MAX_DIAGNOSTICS and not rec.seen(e):
            rec.diagnostics.append(rec.describe(e))
    except LarkError as e:  # pragma: no cover - defensive: no known input reaches this
        rec.diagnostics.append(Diagnostic("gem_syntax", f"cannot parse: {e}", filename, 1, 1, source_line(text, 1)))
    finally:
        _comments.reset(reset)
    if tree is not None:
        builder = _Builder(text, filename, sink)
        try:
            result = builder.build(tree)
        except _TooDeep as e:
            builder.error("expression nested too deeply", e.span, f"nest at most {MAX_DEPTH} levels")
            result = None
        except RecursionError:  # pragma: no cover - _TooDeep fires long before this
            builder.diagnostics.append(
                Diagnostic("gem_syntax", "expression nested too deeply", filename, 1, 1, source_line(text, 1))
            )
            result = None
        rec.diagnostics.extend(builder.diagnostics)
    if rec.diagnostics:
        raise PolicySyntaxError(finish(rec.diagnostics))
    assert result is not None
    return result


# ---- error reporting and recovery ------------------------------------------------


class _Recovery:
    def __init__(self, text: str, file: str) -> None:
        self.text = text
        self.file = file
        self.diagnostics: list[Diagnostic] = []
        self._positions: set[int | None] = set()  # an UnexpectedToken's token may lack a position
        self._garbage_end = -1  # end of the last run of unlexable characters

    def seen(self, e: UnexpectedInput) -> bool:
        return getattr(e, "pos_in_stream", None) in self._positions

    def on_error(self, e: UnexpectedInput) -> bool:
        if len(self.diagnostics) >= MAX_DIAGNOSTICS:
            return False
        if isinstance(e, UnexpectedCharacters):
            self._bad_characters(e)
            return True
        assert isinstance(e, UnexpectedToken)
        self._add(e)
        ip = e.interactive_parser
        tok = e.token
        if tok.type in _SYNC | {"$END"} and self._resync(ip, tok):
            return True
        return self._skip_to_sync(ip)

    def _add(self, e: UnexpectedInput) -> None:
        self._positions.add(getattr(e, "pos_in_stream", None))
        d = self.describe(e)
        prev = self.diagnostics[-1] if self.diagnostics else None
        if (d.code == "gem_unclosed_paren" and prev is not None and prev.message == "unterminated string"
                and (prev.line, prev.col) > (d.line, d.col)):
            return  # the string swallowed the ')': one mistake, one diagnostic
        self.diagnostics.append(d)

    def _bad_characters(self, e: UnexpectedCharacters) -> None:
        pos = _char_pos(e)
        state = e.interactive_parser.lexer_thread.state if e.interactive_parser else None
        if self.text[pos] == '"':
            eol = self.text.find("\n", pos)
            eol = len(self.text) if eol < 0 else eol
            if pos != self._garbage_end:
                self._add(e)
            if state is not None:  # the string runs to the end of its line: skip it whole
                state.line_ctr.feed(self.text[pos:eol])
            self._garbage_end = eol
            return
        if pos != self._garbage_end:  # one diagnostic per run of bad characters
            self._add(e)
        self._garbage_end = pos + 1

    def _resync(self, ip, tok: Token) -> bool:
        """Pop parser states until `tok` fits, then feed it (for $END only position the stack)."""
        ps = ip.parser_state
        is_end = tok.type == "$END"
        table = ps.parse_conf.states
        for k in range(len(ps.state_stack)):
            if tok.type not in table[ps.state_stack[-1 - k]]:
                continue  # cheap pre-check: only states with an action on tok can take it
            trial = ps.copy(deepcopy_values=False)
            if k:
                del trial.state_stack[-k:]
                del trial.value_stack[-k:]
            try:
                trial.feed_token(tok, is_end)
            except UnexpectedToken:
                continue
            if k:
                del ps.state_stack[-k:]
                del ps.value_stack[-k:]
            if not is_end:
                ps.feed_token(tok)
            return True
        return False

    def _skip_to_sync(self, ip) -> bool:
        lexer = ip.lexer_thread
        while True:
            try:
                for tok in lexer.lex(ip.parser_state):
                    if tok.type in _SYNC and self._resync(ip, tok):
                        return True
                break
            except UnexpectedCharacters as e:
                # Characters skipped during recovery are still reported once per run.
                if len(self.diagnostics) < MAX_DIAGNOSTICS:
                    e.interactive_parser = ip
                    self._bad_characters(e)
                state = lexer.state
                pos = _char_pos(e)
                if state.line_ctr.char_pos == pos:
                    state.line_ctr.feed(self.text[pos])
        end = Token("$END", "")
        return self._resync(ip, end)

    # -- messages --

    def describe(self, e: UnexpectedInput) -> Diagnostic:
        if isinstance(e, UnexpectedCharacters):
            ch = self.text[_char_pos(e)]
            span = A.Span(self.file, e.line, e.column, e.line, e.column + 1)
            if ch == '"':
                return at("gem_syntax", "unterminated string", span, self.text,
                          'close the string with " on the same line')
            return at("gem_syntax", f"unexpected character {ch!r}", span, self.text)
        assert isinstance(e, UnexpectedToken)
        tok = e.token
        ip = e.interactive_parser
        try:
            expected = set(e.accepts) if ip is not None else set(e.expected)
        except LarkError:  # pragma: no cover
            expected = set(e.expected)
        expected = expected or set(e.expected)
        span = self._token_span(tok)
        stack = list(ip.parser_state.value_stack) if ip is not None else []

        if tok.type == "WITH" and "DO" in expected:
            return at("gem_with_before_do", "WITH must come after DO", span, self.text,
                      "write DO <action>(...) first, then WITH key = value")
        if tok.type in _ITEM_START | {"$END"} and "DO" in expected:
            header = _last_token(stack, "POLICY")
            name = _policy_name_after(stack, header)
            where = self._token_span(header) if header is not None else span
            what = f"policy '{name}'" if name else "this policy"
            return at("gem_missing_do", f"{what} has no DO clause", where, self.text,
                      "every policy needs DO <action>(...) after ON and WHEN")
        if tok.type in _SYNC | {"$END", "PRIORITY"}:
            for closer, (opener, char) in _CLOSERS.items():
                if closer in expected:
                    open_tok = _last_token(stack, opener)
                    where = self._token_span(open_tok) if open_tok is not None else span
                    before = "the end of the file" if tok.type == "$END" else f"'{tok.value}'"
                    return at("gem_unclosed_paren", f"'{char}' is never closed", where, self.text,
                              f"add '{_CLOSE_CHAR[char]}' before {before}")
        prev = stack[-1] if stack else None
        if tok.type == "SET" and isinstance(prev, Token) and prev.type == "DISABLE":
            return at("gem_syntax", "only policies can be disabled", span, self.text,
                      "change a setting of an earlier file with OVERRIDE SET name = value")
        if tok.type in {"DO", "WHEN", "WITH"} and "ON" in expected:
            return at("gem_syntax", "missing ON clause", span, self.text,
                      "a policy starts with POLICY <name> ON <event>")
        if tok.type == "NAME" and tok.value.upper() in expected and tok.value.upper() in KEYWORDS:
            return at("gem_syntax", f"unexpected name '{tok.value}'", span, self.text,
                      f"keywords are upper-case: did you mean '{tok.value.upper()}'?")
        if tok.value == "=" and self._doubled(tok):
            return self._double_equals(tok)
        if tok.type == "$END":
            message = "unexpected end of file"
        else:
            message = f"unexpected {_describe_token(tok)}"
        wanted = _describe_expected(expected)
        if wanted:
            message += f"; expected {wanted}"
        hint = None
        if tok.value in ("=", "!=", "<", "<=", ">", ">=", "IN"):
            hint = "comparisons do not chain: write a < b AND b < c"
        elif tok.type == "WHERE":
            hint = "WHERE runs to the end of the condition, so here put EXISTS ... WHERE ... in parentheses"
        return at("gem_syntax", message, span, self.text, hint)

    def _doubled(self, tok: Token) -> bool:
        start = tok.start_pos
        return start is not None and start > 0 and self.text[start - 1] == "="

    def _double_equals(self, tok: Token) -> Diagnostic:
        """`a == b`: the lexer reads two '=' tokens, so without this the message would be about
        chained comparisons. Point at both characters and show the comparison rewritten."""
        assert tok.line is not None and tok.column is not None  # a lexed '=' is positioned
        span = A.Span(self.file, tok.line, tok.column - 1, tok.line, tok.column + 1)
        line = source_line(self.text, tok.line)
        hint = "compare with one '='"
        for m in _DOUBLE_EQUALS.finditer(line):
            if m.start(2) == tok.column - 2:
                hint += f": write {m.group(1)} = {m.group(3)}"
        return at("gem_syntax", "'==' is not an operator; equality is '='", span, self.text, hint)

    def _token_span(self, tok: Token) -> A.Span:
        if tok.type == "$END" or tok.line is None:
            # Point just past the last non-blank character of the file.
            body = self.text.rstrip()
            line = body.count("\n") + 1
            col = len(body) - (body.rfind("\n") + 1) + 1
            return A.Span(self.file, line, col, line, col + 1)
        assert tok.column is not None  # the lexer sets a token's line and column together
        width = max(len(tok.value), 1)
        return A.Span(self.file, tok.line, tok.column, tok.line, tok.column + width)


_CLOSE_CHAR = {"(": ")", "[": "]", "{": "}"}
# An operand on either side of a `==`, for the hint that shows the comparison rewritten.
_OPERAND = r'"(?:[^"\\]|\\.)*"|[\w.]+'
_DOUBLE_EQUALS = re.compile(rf"({_OPERAND})\s*(==)\s*({_OPERAND})")


def _char_pos(e: UnexpectedCharacters) -> int:
    # Lark declares pos_in_stream as a bare class attribute `= None`, so mypy reads it as
    # None; UnexpectedCharacters always sets it to the index the lexer stopped at.
    return cast(int, e.pos_in_stream)


def _last_token(stack: list, type_: str) -> Token | None:
    for v in reversed(stack):
        if isinstance(v, Token) and v.type == type_:
            return v
    return None


def _policy_name_after(stack: list, header: Token | None) -> str | None:
    if header is None:
        return None
    idx = next(i for i, v in enumerate(stack) if v is header)
    if idx + 1 < len(stack) and isinstance(stack[idx + 1], Tree) and stack[idx + 1].data == "policy_name":
        return "-".join(str(t) for t in stack[idx + 1].children)
    return None


def _describe_token(tok: Token) -> str:
    if tok.type == "NAME":
        return f"name '{tok.value}'"
    if tok.type == "STRING":
        return f"string {tok.value}"
    if tok.type in ("INT", "NUMBER"):
        return f"number {tok.value}"
    return f"'{tok.value}'"


def _describe_expected(expected: set[str]) -> str:
    if {"NAME", "STRING", "LPAR"} <= expected:
        return "an expression"
    if _ITEM_START <= expected:
        # Where any item may start, naming POLICY and SET says so; the composition
        # keywords would only lengthen the list.
        expected = expected - {"OVERRIDE", "DISABLE"}
    if not expected or len(expected) > 8:
        return ""
    parser = lark_parser()
    words = []
    for name in sorted(expected):
        if name in _TERMINAL_WORDS:
            words.append(_TERMINAL_WORDS[name])
            continue
        try:
            pattern = parser.get_terminal(name).pattern
        except KeyError:  # pragma: no cover
            continue
        words.append(f"'{pattern.value}'" if pattern.type == "str" else name.lower())
    words = sorted(dict.fromkeys(words))
    if len(words) == 1:
        return words[0]
    return ", ".join(words[:-1]) + " or " + words[-1]


# ---- tree -> AST ---------------------------------------------------------------------

_UNITS = {"w": 604800, "d": 86400, "h": 3600, "m": 60, "s": 1}
_DURATION_PART = re.compile(r"(\d+)([wdhms])")
_COMPARE = {"eq": "=", "ne": "!=", "lt": "<", "le": "<=", "gt": ">", "ge": ">="}
_ARITH = {"add": "+", "sub": "-", "mul": "*", "div": "/", "or_": "OR", "and_": "AND"}


class _Builder:
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
            raise _TooDeep(self.span(t))
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


class _TooDeep(RecursionError):
    def __init__(self, span: A.Span) -> None:
        super().__init__("expression nested too deeply")
        self.span = span


def _replace(node, **changes):
    from dataclasses import replace

    return replace(node, **changes)
