"""The policy grammar and the language files shipped with gem, and the Lark parser built
from the grammar (LALR). Comments are not in the tree: the lexer hands each to the running
parse's collector (`comments`), so fmt can keep them."""
from __future__ import annotations

import contextvars
from functools import lru_cache
from importlib.util import find_spec
from pathlib import Path

from lark import Lark, Token


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
comments: contextvars.ContextVar[list | None] = contextvars.ContextVar("gem_policy_comments", default=None)


def _collect_comment(tok: Token) -> Token:
    sink = comments.get()
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
