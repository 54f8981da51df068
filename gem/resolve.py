"""Choosing the host topic for a fact (specs/design.md §7).

The default resolver is deterministic and tiered: exact title or alias, then the canonical key
of the name (gem.text.name_key: case, width, spacing and word separators do not count, symbols
do), then embedding similarity of the name against topic titles at or above a high threshold,
else a new topic. A caller may pass any object with the same `resolve` method, for example one
that asks an LLM; the engine never calls a network service itself.

A name that lands in a topic under a name the topic does not have (by similarity, or by a
caller's resolver) becomes an alias of that topic, and the ingest result and the log say so
with the score: a similarity match is never silent.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol


class TopicDirectory(Protocol):
    """What a resolver may look at: the topics of the proposed state."""

    def exact(self, name: str) -> str | None: ...
    def normalised(self, name: str) -> str | None: ...
    def similar(self, name: str, k: int = 5) -> list[tuple[str, float]]: ...
    def title(self, tid: str) -> str | None: ...


class Resolver(Protocol):
    def resolve(self, name: str, topics: TopicDirectory) -> str | None:
        """The id of the topic that should host facts about `name`, or None for a new one."""


@dataclass(frozen=True)
class TieredResolver:
    # With the default hashing embedder a typo or an inflection of a two-word title scores
    # 0.5-0.7 and different entities sharing words score up to ~0.9, so 0.95 matches only
    # names that are nearly the same words; with a semantic embedder it means a paraphrase.
    similarity_threshold: float = 0.95

    def resolve(self, name: str, topics: TopicDirectory) -> str | None:
        found = topics.exact(name) or topics.normalised(name)
        if found is None:
            for tid, score in topics.similar(name, k=1):
                if score >= self.similarity_threshold:
                    found = tid
        return found
