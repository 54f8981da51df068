"""Policy sources: the one reader of policy files, and the list a policy set is composed from.

Everything that reads .policy files (gem.policy.load, `gem policy`, the memory's
policy loader) goes through `read_sources`, so every caller refuses the same bad
input the same way: a bare string or a non-path item is InvalidInput naming the
argument, a missing or unreadable file is InvalidInput, and a file that is not
UTF-8 is a policy diagnostic (gem_not_utf8) pointing at the first bad byte.
"""
from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable

from ..errors import InvalidInput, PolicySyntaxError
from .ast import Span
from .diagnostics import at, finish
from .grammar import data_file


@dataclass(frozen=True)
class Source:
    """One policy file as composed: its name (as given), its text and the text's sha256."""

    file: str
    text: str
    hash: str

    @classmethod
    def of(cls, file: str, text: str) -> "Source":
        return cls(file, text, hashlib.sha256(text.encode("utf-8")).hexdigest())


def default_policy_path() -> Path:
    """policies/default.policy: inside the wheel (gem/_data/policies) or the source checkout."""
    return data_file("policies", "default.policy")


def default_sources() -> list[Source]:
    """The default governance, as the first source of a composition."""
    path = default_policy_path()
    return [Source.of(str(path), path.read_text(encoding="utf-8"))]


def read_sources(paths: Iterable[str | os.PathLike], *, argument: str | None = "paths") -> list[Source]:
    """Read policy files, in order. `argument` names `paths` in error messages (None: the
    messages name only the file, as the command line wants).

    Raises InvalidInput for a bare str, bytes or path instead of a list, for an item that is
    not a path, and for a file that is missing or unreadable (all before reading any file's
    text); PolicySyntaxError (gem_not_utf8) for files that are not UTF-8, all of them at once.
    """
    what = argument or "the policy files"
    if isinstance(paths, (str, bytes, bytearray, os.PathLike)):
        raise InvalidInput(f"{what} must be a list of policy file paths, not one {type(paths).__name__}: "
                           f"write [{paths!r}]")
    if isinstance(paths, (dict, set, frozenset)):  # unordered: the composition order would be
        raise InvalidInput(f"{what} must be a list of policy file paths (in composition order), "
                           f"got {type(paths).__name__}")
    try:
        items = list(paths)
    except TypeError:
        raise InvalidInput(f"{what} must be a list of policy file paths, got {type(paths).__name__}") from None
    names = []
    for i, item in enumerate(items):
        where = f"{argument}[{i}]" if argument else f"policy file {item!r}"
        name = os.fspath(item) if isinstance(item, (str, os.PathLike)) else None
        if not isinstance(name, str):
            raise InvalidInput(f"{where} must be a path (str or os.PathLike), got {type(item).__name__}")
        if not name:
            raise InvalidInput(f"{where} is an empty path")
        names.append(name)
    data = [_read_bytes(name, f"{argument}[{i}]: " if argument else "") for i, name in enumerate(names)]
    sources, diagnostics = [], []
    for name, raw in zip(names, data):
        try:
            sources.append(Source.of(name, raw.decode("utf-8")))
        except UnicodeDecodeError as exc:
            diagnostics.append(_not_utf8(name, raw, exc))
    if diagnostics:
        raise PolicySyntaxError(finish(diagnostics, names))
    return sources


def _read_bytes(name: str, where: str) -> bytes:
    try:
        return Path(name).read_bytes()
    except FileNotFoundError:
        raise InvalidInput(f"{where}no such policy file: {name}") from None
    except IsADirectoryError:
        raise InvalidInput(f"{where}{name} is a directory, not a policy file") from None
    except OSError as exc:
        raise InvalidInput(f"{where}cannot read policy file {name}: {exc.strerror or exc}") from None


def _not_utf8(name: str, raw: bytes, exc: UnicodeDecodeError):
    # Everything before the bad byte decodes, so line and column count real characters;
    # the line is shown with U+FFFD where the bad bytes are.
    before = raw[: exc.start].decode("utf-8")
    line = before.count("\n") + 1
    col = len(before) - (before.rfind("\n") + 1) + 1
    shown = raw.decode("utf-8", errors="replace")
    return at("gem_not_utf8", f"the file is not UTF-8: byte 0x{raw[exc.start]:02x} ({exc.reason})",
              Span(name, line, col, line, col + 1), shown, "save the file as UTF-8")


def compose_sources(sources: Iterable, *, defaults: bool, argument: str = "sources") -> list[Source]:
    """The sources of a policy set in composition order: the default policy first if
    `defaults`, then `sources` ((file, text) pairs or Source objects).

    Refuses, as InvalidInput, a bare str instead of a list, an item that is not a source,
    an empty composition (it would leave a memory without governance) and, with
    `defaults`, the default policy file among `sources` (it would be composed twice).
    """
    if isinstance(sources, (str, bytes, bytearray, os.PathLike)):
        raise InvalidInput(f"{argument} must be a list of policy sources, not one {type(sources).__name__}")
    own = [_as_source(x, f"{argument}[{i}]") for i, x in enumerate(sources)]
    if not defaults and not own:
        raise InvalidInput(f"{argument} is empty and defaults=False: that would leave no governance at all; "
                           "pass defaults=True to use the default policy, or at least one policy file")
    if not defaults:
        return own
    for i, s in enumerate(own):
        if is_default_policy(s.file):
            raise InvalidInput(f"{argument}[{i}] is the default policy, which defaults=True composes first "
                               "already: leave it out, or pass defaults=False")
    return default_sources() + own


def _as_source(x, where: str) -> Source:
    if isinstance(x, Source):
        return x
    if isinstance(x, tuple) and len(x) == 2 and all(isinstance(v, str) for v in x):
        return Source.of(x[0], x[1])
    raise InvalidInput(f"{where} must be a Source or a (file, text) pair of str, got {type(x).__name__}")


def is_default_policy(name: str) -> bool:
    """Is the file `name` the shipped default policy itself?"""
    try:
        return Path(name).resolve() == default_policy_path().resolve()
    except (OSError, ValueError):  # a name that is no path at all
        return False
