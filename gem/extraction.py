"""What an extractor may see besides the episode: the turns before it in its conversation and
the topics it may update (the guide docs/guides/llm-extraction.md).

An extractor is called as `extractor(episode)`; one that sets the attribute
`takes_context = True` is called as `extractor(episode, context)` with an
`ExtractionContext`, so "not Rex, Rocco" can become an update of the dog's name. The context
is read before the ingest's transition, side-effect free (nothing is reinforced): the
previous turns follow the rule that links an episode to the one before it (said within
`CONVERSATION_GAP` after it, gem/operators/ingest.py), and the topics are those the turns'
words rank (fields ranked without a relevance floor: candidates, not answers), plus the facts
extracted earlier in the same batch.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any, Sequence

from .model import Episode, Fact
from .operators.ingest import CONVERSATION_GAP
from .operators.retrieve import rank_units
from .operators.revise import current_values
from .state.transition import Transition
from .units import unit_table

TURNS = 6    # previous turns shown to an extractor
TOPICS = 8   # topics shown to an extractor


@dataclass(frozen=True)
class KnownTopic:
    """A topic an extractor may update: its title and the current value of each visible field."""
    title: str
    values: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class ExtractionContext:
    previous: tuple[Episode, ...] = ()     # the turns before the episode, oldest first
    topics: tuple[KnownTopic, ...] = ()    # the topics it may update, most relevant first


def takes_context(extractor: Any) -> bool:
    """Whether the extractor asks for an ExtractionContext (`takes_context = True`)."""
    return getattr(extractor, "takes_context", False) is True


def _episode(row: dict[str, Any]) -> Episode:
    return Episode(row["text"], at=row["at"], source=row["source"], speaker=row["speaker"],
                   actor=row["actor"])


def stored_turns(t: Transition) -> list[Episode]:
    """The scope's latest episode and the ones it follows, oldest first (at most TURNS)."""
    turns: list[Episode] = []
    eid = f"{t.prefix}ep{t.counters.episode}" if t.counters.episode else None
    while eid and len(turns) < TURNS:
        row = t.row("Episode", eid)
        if row is None:
            break
        turns.append(_episode(row))
        eid = row.get("follows")
    return turns[::-1]


def follows(previous: Episode | None, at: datetime) -> bool:
    return previous is not None and previous.at is not None and \
        timedelta(0) <= at - previous.at <= CONVERSATION_GAP


def known_topics(t: Transition, text: str) -> list[KnownTopic]:
    """The topics whose fields `text` ranks best, with their current values."""
    t.committed.refresh_units(t.cache)
    hits, _ = rank_units(t, text, 4 * TOPICS, False, None, 0.0, float("inf"))
    tids = list(dict.fromkeys(h.unit.split("/", 1)[0] for h in hits
                              if unit_table(h.unit) == "Field"))[:TOPICS]
    t.prefetch("Topic", tids)
    t.prefetch_children("HAS_FIELD", tids)
    out = []
    for tid in tids:
        row = t.topic(tid)
        if row is not None and row["status"] == "active":
            out.append(KnownTopic(row["title"], current_values(t, tid)))
    return out


def contexts(t: Transition, episodes: Sequence[Episode]) -> list[ExtractionContext]:
    """The context of each episode of a batch, in order (a read: `t` is never committed)."""
    history = stored_turns(t)
    out = []
    for episode in episodes:
        at = episode.at or t.now
        previous = history if history and follows(history[-1], at) else []
        text = "\n".join([e.text for e in previous] + [episode.text])
        out.append(ExtractionContext(tuple(previous[-TURNS:]), tuple(known_topics(t, text))))
        history = [*previous, episode.model_copy(update={"at": at})][-TURNS:]
    return out


def with_batch(context: ExtractionContext, extracted: Sequence[Fact]) -> ExtractionContext:
    """The context plus the topics of facts extracted earlier in the same batch (not stored
    yet), whose values come first."""
    if not extracted:
        return context
    values: dict[str, dict[str, Any]] = {}
    for fact in extracted:
        values.setdefault(fact.topic, {})[fact.field] = fact.value
    topics = [KnownTopic(title, v) for title, v in values.items()]
    topics += [k for k in context.topics if k.title not in values]
    return ExtractionContext(context.previous, tuple(topics[:TOPICS]))


def call(extractor: Any, episode: Episode, context: ExtractionContext | None) -> Any:
    """Call an extractor with the context if it takes one."""
    if context is not None:
        return extractor(episode, context)
    return extractor(episode)


__all__ = ["ExtractionContext", "KnownTopic", "takes_context", "contexts", "with_batch",
           "call", "TURNS", "TOPICS"]
