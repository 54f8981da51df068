"""Text -> AST for the policy language.

The grammar lives in `grammar/policy.lark` (shipped in the wheel as
`gem/_data/grammar/policy.lark`). Parsing never raises anything but
PolicySyntaxError: Lark's LALR error hook (`on_error`) records each error and
recovers in panic mode (skip to the next clause keyword, pop the parser stack
until that keyword fits), so one run reports several mistakes.

Loading the grammar is grammar.py; describing errors and recovering from them, syntax.py;
building the AST from Lark's tree, builder.py.
"""
from __future__ import annotations

from lark import Token
from lark.exceptions import LarkError, UnexpectedInput

from ..errors import PolicySyntaxError
from . import ast as A
from .builder import MAX_DEPTH, Builder, TooDeep
from .diagnostics import MAX_DIAGNOSTICS, Diagnostic, finish, source_line
from .grammar import comments, lark_parser
from .syntax import Recovery


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
    rec = Recovery(text, filename)
    sink: list[Token] = []
    reset = comments.set(sink)
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
        comments.reset(reset)
    if tree is not None:
        builder = Builder(text, filename, sink)
        try:
            result = builder.build(tree)
        except TooDeep as e:
            builder.error("expression nested too deeply", e.span, f"nest at most {MAX_DEPTH} levels")
            result = None
        except RecursionError:  # pragma: no cover - TooDeep fires long before this
            builder.diagnostics.append(
                Diagnostic("gem_syntax", "expression nested too deeply", filename, 1, 1, source_line(text, 1))
            )
            result = None
        rec.diagnostics.extend(builder.diagnostics)
    if rec.diagnostics:
        raise PolicySyntaxError(finish(rec.diagnostics))
    assert result is not None
    return result
