"""What the model calls a transition made cost: tokens, calls, answers from a cache.

A hook (an extractor, a reviser, a resolver, a summariser) that calls a model reports each
call with `record`; `metered()` collects the reports made in its block (in this thread or
task: a context variable), and the memory writes what an operator's block collected into the
transition's log detail as `llm` (gem/memory.py). `gem stats` adds up the log's (`totals`).
Hooks of any origin may report; gem.llm's adapters do.
"""
from __future__ import annotations

from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any, Iterable, Iterator

COUNTS = ("calls", "cached", "prompt_tokens", "completion_tokens")


class Meter:
    """Usage per hook: {hook: {"model", "calls", "cached", "prompt_tokens", "completion_tokens"}}."""

    def __init__(self) -> None:
        self.hooks: dict[str, dict[str, Any]] = {}

    def add(self, hook: str, model: str, *, prompt_tokens: int = 0, completion_tokens: int = 0,
            cached: bool = False) -> None:
        used = self.hooks.setdefault(hook, {"model": model, **dict.fromkeys(COUNTS, 0)})
        used["model"] = model
        used["cached" if cached else "calls"] += 1
        used["prompt_tokens"] += int(prompt_tokens)
        used["completion_tokens"] += int(completion_tokens)

    def charge(self, detail: dict[str, Any]) -> None:
        """Put what was used so far into a transition's detail (nothing if nothing was)."""
        if self.hooks:
            detail["llm"] = {hook: dict(used) for hook, used in sorted(self.hooks.items())}


_current: ContextVar[Meter | None] = ContextVar("gem_usage", default=None)


@contextmanager
def metered() -> Iterator[Meter]:
    """Collect the usage reported in this block; inside another metered block, that one's."""
    outer = _current.get()
    if outer is not None:
        yield outer
        return
    meter = Meter()
    token = _current.set(meter)
    try:
        yield meter
    finally:
        _current.reset(token)


def charge(detail: dict[str, Any]) -> None:
    """Put what the current metered block used into a transition's detail (nothing if none)."""
    meter = _current.get()
    if meter is not None:
        meter.charge(detail)


def record(hook: str, model: str, *, prompt_tokens: int = 0, completion_tokens: int = 0,
           cached: bool = False) -> None:
    """Report one model call (or one answer taken from a cache). Outside a metered block
    (a summary refreshed by a read) it is not charged to any transition."""
    meter = _current.get()
    if meter is not None:
        meter.add(hook, model, prompt_tokens=prompt_tokens, completion_tokens=completion_tokens,
                  cached=cached)


def totals(details: Iterable[dict[str, Any]]) -> dict[str, int]:
    """The sum over log details' `llm` parts: calls, cached, prompt and completion tokens."""
    out = dict.fromkeys(COUNTS, 0)
    for detail in details:
        for used in (detail.get("llm") or {}).values():
            for key in COUNTS:
                value = used.get(key, 0)
                if isinstance(value, int) and not isinstance(value, bool):
                    out[key] += value
    return out if any(out.values()) else {}
