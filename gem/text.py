"""Text normalisation: the words of a text (the lexical index and the default embedder) and
the canonical key of a name (the resolver and the name directory).

Two definitions, because they answer two questions. `tokens` says which words a text has:
punctuation and symbols separate words, so "website-redesign!" is the words "website
redesign" for BM25 and the embedder. `name_key` says whether two spellings name the same
thing: case, width, spacing and word separators do not count, but a symbol does, so "C#" and
"C++", "🚀" and "🎉", "Launch 🚀" and "Launch" are different names whose words are the same.
"""
from __future__ import annotations

import math
import unicodedata
from collections.abc import Mapping, Sequence
from typing import Any

from gem.errors import InvalidInput

__all__ = ["normalise", "tokens", "name_key", "value_text", "check_texts"]

# Zero width space is a format character (Cf) like the soft hyphen, but it marks a word
# boundary rather than sitting inside a word, so it separates instead of vanishing.
_ZERO_WIDTH_SPACE = 0x200B


class _SeparatorTable(dict):
    """A str.translate table filled on first sight of each code point.

    Precomputing it would mean classifying all 1.1M code points at import time; texts use a
    few hundred distinct ones, and after the first lookup translate() stays in C.
    """

    def __missing__(self, cp: int) -> str | None:
        cat = unicodedata.category(chr(cp))
        if cp == _ZERO_WIDTH_SPACE:
            out: str | None = " "
        elif cat[0] in "PSZ" or cat == "Cc" or cat == "Cs":
            # Punctuation and symbols do not tell titles apart ("website-redesign!" is
            # "website redesign"); Z and Cc are whitespace and line breaks in all scripts.
            out = " "
        elif cat == "Cf":
            # Soft hyphens, joiners, BOMs: invisible, and they sit inside words, so
            # replacing them with a space would split "co\u00adoperate" in two.
            out = None
        else:
            # Letters, marks and digits are kept; marks must stay or Devanagari, Thai,
            # etc. would be cut into pieces at every vowel sign.
            out = chr(cp)
        self[cp] = out
        return out


_TABLE = _SeparatorTable()


def normalise(s: str) -> str:
    """Canonical caseless form: NFKC, casefold, punctuation and symbols to spaces, spaces collapsed.

    "Website Redesign", "website-redesign!" and " WEBSITE  redesign" all give "website redesign".
    """
    if not isinstance(s, str):
        raise InvalidInput(f"normalise expects a str, got {type(s).__name__}")
    if s.isascii():
        # NFKC is the identity on ASCII and casefold equals lower there.
        s = s.lower()
    else:
        # casefold can leave a string that is no longer NFKC (e.g. "İ" -> "i" + U+0307),
        # so normalise again: the Unicode definition of compatibility caseless matching.
        s = unicodedata.normalize("NFKC", unicodedata.normalize("NFKC", s).casefold())
    return " ".join(s.translate(_TABLE).split())


class _NameTable(dict):
    """The str.translate table of `name_key`, filled on first sight like `_SeparatorTable`."""

    def __missing__(self, cp: int) -> str | None:
        cat = unicodedata.category(chr(cp))
        if cp == _ZERO_WIDTH_SPACE or cat[0] == "Z" or cat in ("Cc", "Pd", "Pc"):
            # Spaces, line breaks, dashes and underscores only separate words:
            # "website-redesign", "website_redesign" and "website  redesign" are one name.
            out: str | None = " "
        elif cat == "Cf":
            out = None  # invisible, inside words (soft hyphens, joiners)
        else:
            out = chr(cp)  # letters, marks, digits, symbols and other punctuation all count
        self[cp] = out
        return out


_NAME_TABLE = _NameTable()
# Sentence punctuation and quotes around a name are how it was written, not what it names:
# "Website Redesign!" and "'Website Redesign'" are "website redesign". Inside a name they count.
_NAME_ENDS = " .,;:!?¡¿…'\"‘’“”«»"


def name_key(s: str) -> str:
    """The canonical key of a name (a topic title or alias, a field name).

    NFKC and casefold; whitespace, dashes and underscores are word separators, collapsed to one
    space; sentence punctuation and quotes at either end are dropped, unless nothing else is
    left; every other character counts. So "Website Redesign", " website-redesign! " and
    "WEBSITE_REDESIGN" share a key, while "C#" and "C++", "🚀" and "🎉", "???" and "★",
    "Launch 🚀" and "Launch" do not. Idempotent: name_key(name_key(s)) == name_key(s).
    """
    if not isinstance(s, str):
        raise InvalidInput(f"name_key expects a str, got {type(s).__name__}")
    if s.isascii():
        folded = s.lower()
    else:
        folded = unicodedata.normalize("NFKC", unicodedata.normalize("NFKC", s).casefold())
    spaced = " ".join(folded.translate(_NAME_TABLE).split())
    return spaced.strip(_NAME_ENDS) or spaced or folded


def tokens(s: str) -> list[str]:
    """The normalised words of s, in order (duplicates kept, since BM25 counts them)."""
    return normalise(s).split()


def _number_text(x: int | float) -> str:
    if isinstance(x, int):
        return str(x)
    if not math.isfinite(x):
        return "nan" if math.isnan(x) else ("inf" if x > 0 else "-inf")
    if x.is_integer() and abs(x) < 1e16:
        # 15.0 should be found by the query "15", which is how people write it.
        return str(int(x))
    return repr(x)


def value_text(value: Any) -> str:
    """Searchable text for a JSON value: strings as they are, numbers and booleans spelt out,
    lists and objects flattened in order (object keys included, since "deadline" in
    {"deadline": "March 15"} is what a query is likely to name). None gives "".

    Raises InvalidInput for anything that is not a JSON value, or for a cyclic container.
    """
    parts: list[str] = []
    _collect(value, parts, set())
    return " ".join(p for p in parts if p)


def _collect(value: Any, parts: list[str], open_containers: set[int]) -> None:
    if value is None:
        return
    if isinstance(value, str):
        parts.append(value)
    elif isinstance(value, bool):  # before int: bool is a subclass of int
        parts.append("true" if value else "false")
    elif isinstance(value, (int, float)):
        parts.append(_number_text(value))
    elif isinstance(value, (list, tuple, Mapping)):
        key = id(value)
        if key in open_containers:
            raise InvalidInput("value_text: the value contains itself")
        open_containers.add(key)
        try:
            if isinstance(value, Mapping):
                for k, v in value.items():
                    if not isinstance(k, (str, int, float, bool)) and k is not None:
                        raise InvalidInput(
                            f"value_text: object key of type {type(k).__name__} is not JSON"
                        )
                    _collect(k, parts, open_containers)
                    _collect(v, parts, open_containers)
            else:
                for item in value:
                    _collect(item, parts, open_containers)
        finally:
            open_containers.discard(key)
    else:
        raise InvalidInput(f"value_text: {type(value).__name__} is not a JSON value")


def check_texts(texts: Sequence[str]) -> list[str]:
    """The list of strings an embedder was given, or InvalidInput."""
    # A bare string is a sequence of one-character strings: embedding it "works" and silently
    # returns one vector per character, so it is refused rather than guessed at.
    if isinstance(texts, (str, bytes)):
        raise InvalidInput("embed expects a list of strings, not a single string")
    out = list(texts)
    for t in out:
        if not isinstance(t, str):
            raise InvalidInput(f"embed expects strings, got {type(t).__name__}")
    return out
