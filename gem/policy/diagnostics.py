"""Diagnostics: one problem in a policy source, with a stable code and a caret.

Rendered form (stable; tests pin it):

    policies/x.policy:3:4: gem_unknown_event: unknown event 'field_updatd'
    ON field_updatd
       ^^^^^^^^^^^^
    hint: did you mean 'field_updated'?

A warning (a set that checks but that a correctness condition will hold against) is
rendered the same way with `warning: ` before its code.
"""
from __future__ import annotations

import difflib
from dataclasses import dataclass
from typing import Iterable

from .ast import Span

MAX_DIAGNOSTICS = 10

# Every error code the front-end can emit. Stable: tools and tests match on them.
CODES = (
    "gem_not_utf8",
    "gem_syntax",
    "gem_missing_do",
    "gem_with_before_do",
    "gem_unclosed_paren",
    "gem_unknown_event",
    "gem_unknown_action",
    "gem_unknown_function",
    "gem_unknown_attribute",
    "gem_unknown_setting",
    "gem_unbound_name",
    "gem_out_of_scope",
    "gem_arity",
    "gem_type",
    "gem_invalid_value",
    "gem_duplicate_policy",
    "gem_duplicate_setting",
    "gem_duplicate_key",
    "gem_nothing_to_override",
    "gem_nothing_to_disable",
    "gem_cascade_loop",
    "gem_action_unavailable",
    "gem_no_policies",
    "gem_invalid_regex",
    "gem_invalid_point",
)

# Warning codes: the set checks, but a correctness condition will reject transitions it governs.
WARNINGS = (
    "gem_c6_no_reinforcement",
    "gem_c3_no_propagation",
    "gem_name_not_canonical",
)


@dataclass(frozen=True)
class Diagnostic:
    code: str
    message: str
    file: str
    line: int
    col: int
    source_line: str
    hint: str | None = None
    # Width of the caret run; at least one caret is always drawn.
    width: int = 1
    severity: str = "error"  # or "warning"

    def render(self) -> str:
        label = "warning: " if self.severity == "warning" else ""
        out = [f"{self.file}:{self.line}:{self.col}: {label}{self.code}: {self.message}"]
        if self.line > 0:
            src = self.source_line.rstrip("\r\n")
            # Copy tabs from the source so the caret lines up however tabs are shown.
            pad = "".join("\t" if ch == "\t" else " " for ch in src[: max(self.col - 1, 0)])
            pad += " " * max(self.col - 1 - len(src), 0)
            width = max(1, min(self.width, max(len(src) - self.col + 1, 1)))
            out.append(src)
            out.append(pad + "^" * width)
        if self.hint:
            out.append(f"hint: {self.hint}")
        return "\n".join(out)

    @property
    def sort_key(self) -> tuple:
        return (self.file, self.line, self.col, self.code, self.message)


def source_line(source: str, line: int) -> str:
    lines = source.splitlines()
    if 1 <= line <= len(lines):
        return lines[line - 1]
    return ""


def at(code: str, message: str, span: Span, source: str, hint: str | None = None,
       severity: str = "error") -> Diagnostic:
    """A diagnostic pointing at `span` (carets to its end, or to the end of its first line)."""
    text = source_line(source, span.line)
    if span.end_line == span.line and span.end_col > span.col:
        width = span.end_col - span.col
    else:
        width = max(len(text) - span.col + 1, 1)
    return Diagnostic(code, message, span.file, span.line, span.col, text, hint, width, severity)


def did_you_mean(word: str, candidates: Iterable[str]) -> str | None:
    matches = difflib.get_close_matches(word, sorted(set(candidates)), n=1, cutoff=0.6)
    return f"did you mean '{matches[0]}'?" if matches else None


def finish(diagnostics: Iterable[Diagnostic], file_order: Iterable[str] = ()) -> list[Diagnostic]:
    """Deduplicate, sort by position (files in the order given), keep the first MAX_DIAGNOSTICS."""
    order = {f: i for i, f in enumerate(file_order)}
    unique = list(dict.fromkeys(diagnostics))
    unique.sort(key=lambda d: (order.get(d.file, len(order)),) + d.sort_key)
    return unique[:MAX_DIAGNOSTICS]
