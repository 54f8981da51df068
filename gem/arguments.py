"""The argument checks of the public API (gem.Memory, gem.open): each gives a clear
InvalidInput naming the argument, before any transition."""
from __future__ import annotations

import re
from typing import Any

from .errors import InvalidInput

MAX_K = 1000  # the most units one retrieval returns
SCOPE_NAME = re.compile(r"[a-z0-9][a-z0-9_.-]{0,63}")


def text_arg(value: Any, what: str) -> str:
    """A non-empty string argument, or InvalidInput naming it (before any transition)."""
    if not isinstance(value, str) or not value.strip():
        got = repr(value) if isinstance(value, str) else type(value).__name__
        raise InvalidInput(f"{what} must be a non-empty string, got {got}")
    return value


def callable_arg(value: Any, what: str) -> None:
    if value is not None and not callable(value):
        raise InvalidInput(f"{what} must be a callable or None, got {type(value).__name__}")


def page_args(text: Any, offset: Any, limit: Any) -> None:
    """The arguments every listing takes: a text filter and a page."""
    if text is not None and not isinstance(text, str):
        raise InvalidInput(f"text must be a string, got {type(text).__name__}")
    for name, value, least in (("offset", offset, 0), ("limit", limit, 1)):
        if not isinstance(value, int) or isinstance(value, bool) or value < least:
            raise InvalidInput(f"{name} must be an integer >= {least}")


def flag_arg(value: Any, what: str) -> bool:
    if not isinstance(value, bool):
        raise InvalidInput(f"{what} must be True or False, got {type(value).__name__}")
    return value
