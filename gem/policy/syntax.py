"""The language's keywords, and syntax errors: what Lark reports, described for a reader
(what was found, what was expected, a likely fix), and panic-mode recovery (skip to the next
clause keyword, pop the parser stack until that keyword fits) so one run reports several."""
from __future__ import annotations

import re

from typing import cast

from lark import Token, Tree
from lark.exceptions import LarkError, UnexpectedCharacters, UnexpectedInput, UnexpectedToken

from . import ast as A
from .diagnostics import MAX_DIAGNOSTICS, Diagnostic, at, source_line
from .grammar import lark_parser


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


class Recovery:
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
