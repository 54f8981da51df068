"""The hooks of gem.open backed by a model: extractor, reviser, resolver, summariser.

Each is constructed with `model`, `base_url` (an OpenAI-compatible endpoint, e.g.
"http://127.0.0.1:11434/v1" for ollama), `api_key` (default: the environment's
OPENAI_API_KEY; none is sent without one) and `timeout` (seconds per request), plus the
client's `retries`, `backoff`, `max_wait` and `cache_dir` (gem/llm/client.py). Its prompt is a
file in gem/llm/prompts/. An answer is checked as any Fact is: an answer that is not what the
schema asks for, or a fact gem would refuse, is InvalidInput naming the model, before anything
is written. Facts a model states carry `actor="llm:<model>"`.
"""
from __future__ import annotations

from datetime import datetime
from pathlib import Path
from typing import Any

from ..errors import InvalidInput
from ..extraction import ExtractionContext
from ..model import Episode, Fact, PendingRevision
from ..resolve import Resolver as ResolverProtocol
from ..resolve import TieredResolver, TopicDirectory
from .client import Client, prompt

FACT_KEYS = ("topic", "field", "value", "at", "confidence")
FACT_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "topic": {"type": "string"},
        "field": {"type": "string"},
        "value": {"description": "any JSON value: a string, number, boolean, list or object"},
        "at": {"type": ["string", "null"], "description": "ISO-8601 with a UTC offset, or null"},
        "confidence": {"type": ["number", "null"], "minimum": 0, "maximum": 1},
    },
    "required": list(FACT_KEYS),
    "additionalProperties": False,
}
FACTS_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"facts": {"type": "array", "items": FACT_SCHEMA}},
    "required": ["facts"],
    "additionalProperties": False,
}


def facts_of(items: Any, *, source: str, actor: str) -> list[Fact]:
    """The facts of an answer's `facts` list, each checked as any Fact (InvalidInput)."""
    if not isinstance(items, list):
        raise InvalidInput(f"no list of facts: {items!r:.200}")
    facts = []
    for i, item in enumerate(items):
        if not isinstance(item, dict):
            raise InvalidInput(f"facts[{i}] that is not an object: {item!r:.200}")
        unknown = sorted(set(item) - set(FACT_KEYS))
        if unknown:
            raise InvalidInput(f"facts[{i}] with unknown keys {unknown}")
        options: dict[str, Any] = {"source": source, "actor": actor}
        at = item.get("at")
        if at is not None:
            if not isinstance(at, str):
                raise InvalidInput(f"facts[{i}].at that is not a string: {at!r}")
            try:
                options["at"] = datetime.fromisoformat(at)
            except ValueError:
                raise InvalidInput(f"facts[{i}].at {at!r}, not an ISO-8601 time") from None
        if item.get("confidence") is not None:
            options["confidence"] = item["confidence"]
        try:
            facts.append(Fact(item.get("topic"), item.get("field"), item.get("value"), **options))
        except InvalidInput as exc:
            raise InvalidInput(f"an invalid fact as facts[{i}]: {exc}") from None
    return facts


class _Hook:
    role = "hook"      # how usage and errors name it
    prompt_file = ""   # gem/llm/prompts/<prompt_file>.md

    def __init__(self, model: str, base_url: str, api_key: str | None = None,
                 timeout: float = 60.0, *, retries: int = 4, backoff: float = 0.5,
                 max_wait: float = 60.0, cache_dir: str | Path | None = None) -> None:
        self.client = Client(model, base_url, api_key, timeout, retries=retries,
                             backoff=backoff, max_wait=max_wait, cache_dir=cache_dir)
        self.prompt = prompt(self.prompt_file)

    @property
    def model(self) -> str:
        return self.client.model

    @property
    def actor(self) -> str:
        return f"llm:{self.model}"

    def __repr__(self) -> str:
        return f"gem.llm.{type(self).__name__}(model={self.model!r}, " \
               f"base_url={self.client.base_url!r})"


class Extractor(_Hook):
    """`gem.open(extractor=gem.llm.Extractor(...))`: the facts a turn states, read with the
    turns before it and the topics it may update (an ExtractionContext), so that a correction
    ("not Rex, Rocco") updates the field it corrects."""
    role, prompt_file = "extractor", "extract"
    takes_context = True

    def __call__(self, episode: Episode, context: ExtractionContext | None = None) -> list[Fact]:
        context = context or ExtractionContext()
        payload = {
            "episode": _turn(episode),
            "previous_turns": [_turn(e) for e in context.previous],
            "known_topics": [{"title": k.title, "fields": k.values} for k in context.topics],
        }
        return self.client.ask(
            self.role, self.prompt, payload, "facts", FACTS_SCHEMA,
            lambda answer: facts_of(_part(answer, "facts"), source=episode.source,
                                    actor=self.actor))


class Reviser(_Hook):
    """`gem.open(reviser=gem.llm.Reviser(...))`: for a topic flagged because something it
    depends on changed, the facts that update it ("update"), [] when its values still hold
    ("keep"), or None to leave its flags open for a person ("defer")."""
    role, prompt_file = "reviser", "revise"
    SCHEMA: dict[str, Any] = {
        "type": "object",
        "properties": {"decision": {"type": "string", "enum": ["update", "keep", "defer"]},
                       "facts": {"type": "array", "items": FACT_SCHEMA},
                       "reason": {"type": "string"}},
        "required": ["decision", "facts", "reason"],
        "additionalProperties": False,
    }

    def __call__(self, revision: PendingRevision) -> list[Fact] | None:
        payload = {
            "topic": revision.title, "values": revision.values,
            "flags": [{"policy": f.policy, "changed": f.origin, "evidence": f.evidence}
                      for f in revision.flags],
            "changed": revision.origins,
        }
        return self.client.ask(self.role, self.prompt, payload, "revision", self.SCHEMA,
                               self._accept)

    def _accept(self, answer: Any) -> list[Fact] | None:
        decision = _part(answer, "decision")
        if decision not in ("update", "keep", "defer"):
            raise InvalidInput(f"decision {decision!r}, not update, keep or defer")
        facts = facts_of(answer.get("facts", []), source="reviser", actor=self.actor)
        if decision == "update" and not facts:
            raise InvalidInput("decision 'update' with no facts")
        if decision != "update" and facts:
            raise InvalidInput(f"decision {decision!r} with facts")
        return None if decision == "defer" else facts


class Resolver(_Hook):
    """`gem.open(resolver=gem.llm.Resolver(...))`: the default tiered resolver (exact name,
    canonical key, embedding similarity at or above its threshold) first; only when it finds
    nothing and some titles are similar at or above `floor` (unsure: neither the same name
    nor clearly another) is the model asked which of those `candidates`, if any, the name
    means. It runs inside the ingest's transition, holding the write lock."""
    role, prompt_file = "resolver", "resolve"
    SCHEMA: dict[str, Any] = {
        "type": "object",
        "properties": {"topic": {"type": ["string", "null"]}},
        "required": ["topic"],
        "additionalProperties": False,
    }

    def __init__(self, model: str, base_url: str, api_key: str | None = None,
                 timeout: float = 60.0, *, tiers: ResolverProtocol | None = None,
                 floor: float = 0.5, candidates: int = 5, **client: Any) -> None:
        super().__init__(model, base_url, api_key, timeout, **client)
        if isinstance(floor, bool) or not isinstance(floor, (int, float)) or not 0 <= floor <= 1:
            raise InvalidInput(f"floor must be a number in [0, 1], got {floor!r}")
        if isinstance(candidates, bool) or not isinstance(candidates, int) or candidates < 1:
            raise InvalidInput(f"candidates must be a positive integer, got {candidates!r}")
        self.tiers = tiers if tiers is not None else TieredResolver()
        self.floor = float(floor)
        self.candidates = candidates

    def resolve(self, name: str, topics: TopicDirectory) -> str | None:
        found = self.tiers.resolve(name, topics)
        if found is not None:
            return found
        near: dict[str, tuple[str, float]] = {}
        for tid, score in topics.similar(name, k=self.candidates):
            title = topics.title(tid)
            if score >= self.floor and title is not None and title not in near:
                near[title] = (tid, score)
        if not near:
            return None
        payload = {"name": name, "candidates": [{"title": title, "similarity": round(score, 3)}
                                                 for title, (_, score) in near.items()]}

        def accept(answer: Any) -> str | None:
            title = _part(answer, "topic")
            if title is not None and title not in near:
                raise InvalidInput(f"topic {title!r}, which is none of the candidates "
                                   f"{sorted(near)}")
            return None if title is None else near[title][0]
        return self.client.ask(self.role, self.prompt, payload, "topic", self.SCHEMA, accept)


class Summarizer(_Hook):
    """`gem.open(summarizer=gem.llm.Summarizer(...))`: a topic's summary from its title and
    current values. Summaries are derived lazily, by whatever reads them next (a free-text
    retrieval, `inspect`), one model call per topic changed since (cached by content)."""
    role, prompt_file = "summarizer", "summarize"
    SCHEMA: dict[str, Any] = {
        "type": "object",
        "properties": {"summary": {"type": "string"}},
        "required": ["summary"],
        "additionalProperties": False,
    }

    def __call__(self, title: str, values: dict[str, Any]) -> str:
        def accept(answer: Any) -> str:
            summary = _part(answer, "summary")
            if not isinstance(summary, str) or not summary.strip():
                raise InvalidInput(f"summary {summary!r}, not a non-empty string")
            return summary.strip()
        return self.client.ask(self.role, self.prompt, {"title": title, "values": values},
                               "summary", self.SCHEMA, accept)


def _part(answer: Any, key: str) -> Any:
    if not isinstance(answer, dict) or key not in answer:
        raise InvalidInput(f"{answer!r:.200}, which has no {key!r}")
    return answer[key]


def _turn(episode: Episode) -> dict[str, Any]:
    return {"speaker": episode.speaker, "text": episode.text,
            "at": None if episode.at is None else episode.at.isoformat()}
