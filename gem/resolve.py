"""Choosing the host topic for a fact (specs/design.md §7).

The default resolver is deterministic and tiered: exact title or alias, then the
normalised form (case, whitespace, punctuation), then embedding similarity of the
name against topic titles above a threshold, else a new topic. A caller may pass
any object with the same `resolve` method, for example one that asks an LLM; the
engine never calls a network service itself.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from .text import normalise


class TopicDirectory(Protocol):
    """What a resolver may look at: the topics of the proposed state."""

    def exact(self, name: str) -> str | None: ...
    def normalised(self, name: str) -> str | None: ...
    def similar(self, name: str, k: int = 5) -> list[tuple[str, float]]: ...


class Resolver(Protocol):
    def resolve(self, name: str, topics: TopicDirectory) -> str | None:
        """The id of the topic that should host facts about `name`, or None for a new one."""


@dataclass(frozen=True)
class TieredResolver:
    similarity_threshold: float = 0.85

    def resolve(self, name: str, topics: TopicDirectory) -> str | None:
        found = topics.exact(name)
        if found is None:
            found = topics.normalised(normalise(name))
        if found is None:
            for tid, score in topics.similar(name, k=1):
                if score >= self.similarity_threshold:
                    found = tid
        return found
