"""The policy grammar and the language files shipped with gem, and the Lark parser built
from the grammar (LALR). Comments are not in the tree: the lexer hands each to the running
parse's collector (`comments`), so fmt can keep them."""
from __future__ import annotations

import contextvars
import hashlib
import json
from functools import lru_cache
from importlib.util import find_spec
from pathlib import Path

import lark
from lark import Lark, Token
from lark.grammar import Rule
from lark.lexer import TerminalDef


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


def build_parser(strict: bool | None = None) -> Lark:
    """The parser built from the grammar: the grammar parsed, the LALR tables computed and
    (with `interegular`) every pair of terminals compared, ~1 s of CPU."""
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


def grammar_digest() -> str:
    return hashlib.sha256(grammar_path().read_bytes()).hexdigest()


def _int_keys(d: dict) -> dict:
    # JSON keys are strings; the tables' keys that are numbers (states, tokens, memo) were ints
    return {int(k) if k.isdigit() else k: v for k, v in d.items()}


def table_path() -> Path:
    return data_file("grammar", "policy-tables.json")


@lru_cache(maxsize=1)
def lark_parser() -> Lark:
    """The policy parser. Every open of a memory parses its stored policies, and building the
    parser from the grammar cost ~1 s of an open (issue 28 item 6): it is loaded instead from
    the tables `build_parser` computed, shipped beside the grammar (~50 ms), when they were
    made from this grammar by this Lark; otherwise built."""
    try:
        table = json.loads(table_path().read_bytes(), object_hook=_int_keys)
    except (OSError, ValueError):
        table = {}
    if table.get("grammar_sha256") == grammar_digest() and table.get("lark") == lark.__version__:
        return Lark._load_from_dict(table["data"], table["memo"],
                                    lexer_callbacks={"COMMENT": _collect_comment})
    return build_parser()


def table_text() -> str:
    """The tables file's text, from the parser built strictly from the grammar now."""
    data, memo = build_parser(strict=True).memo_serialize([TerminalDef, Rule])
    data["options"] = {k: v for k, v in data["options"].items() if k != "lexer_callbacks"}
    return json.dumps({"about": "the LALR tables of policy.lark, made by `python -m "
                                "gem.policy.grammar` (gem/policy/grammar.py): do not edit",
                       "grammar_sha256": grammar_digest(), "lark": lark.__version__,
                       "data": data, "memo": memo}, sort_keys=True, separators=(",", ":")) + "\n"


if __name__ == "__main__":
    table_path().write_text(table_text(), encoding="utf-8")
