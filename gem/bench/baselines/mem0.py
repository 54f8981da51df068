"""Mem0, both algorithms: (b) as published ("v2": ADD / UPDATE / DELETE / NOOP per
extracted fact) and (c) April 2026 ("v3": ADD-only, semantic + BM25 + entity-boost retrieval)."""
from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Iterable, Sequence

import numpy as np

from ..stream import FactSpec, StreamConfig, Turn, stamp
from ..system import Provenance, System
from .common import (BM25, Embeddings, bm25_terms, canonical_question, provenance_of, read_latest,
                     top_k)


@dataclass
class _Memory:
    id: int
    text: str
    vec: np.ndarray
    topic: str | None
    field: str | None
    value: Any
    source: str
    at: datetime
    order: int


class OverwriteFactStore(System):
    """(b) Mem0 as published (Chhikara et al. 2025; mem0 OSS before 2.0, "v2").

    Extraction turns a message into facts (oracle: the turn's facts). For each fact the
    update phase retrieves similar memories and an LLM chooses ADD (nothing similar),
    UPDATE (same information, different content), DELETE (contradicted) or NOOP (already
    present). Oracle decisions: the memory about the same topic.field is "similar"; the
    same value is NOOP; a different value is UPDATE (the memory keeps its id, its text is
    overwritten, and the history table records old and new text). DELETE-without-ADD, which
    loses the new fact (mem0 issue #4536), is never chosen. Search is cosine over memory
    embeddings, limit 100 (the v2 default)."""

    name = "mem0-v2"
    family = "overwrite-on-conflict fact store (Mem0 2025, ADD/UPDATE/DELETE/NOOP)"

    def __init__(self, config: StreamConfig, limit: int = 100) -> None:
        super().__init__()
        self.limit = limit
        self.embed = Embeddings()
        self.memories: dict[int, _Memory] = {}
        self.by_unit: dict[tuple[str, str], int] = {}
        self.history: list[dict[str, Any]] = []
        self.events: Counter = Counter()
        self._next = 0
        self._order = 0

    def _add_memory(self, text: str, topic: str | None, field: str | None, value: Any,
                    source: str, at: datetime) -> _Memory:
        self._next += 1
        self._order += 1
        mem = _Memory(self._next, text, self.embed(text), topic, field, value, source, at,
                      self._order)
        self.memories[mem.id] = mem
        self.history.append({"memory_id": mem.id, "old": None, "new": text, "event": "ADD",
                             "value": value, "source": source, "time": self.now})
        self.events["ADD"] += 1
        return mem

    def ingest(self, turn: Turn) -> None:
        for f in turn.facts:
            unit = (f.topic, f.field)
            mid = self.by_unit.get(unit)
            if mid is None:
                self.by_unit[unit] = self._add_memory(f.text(), f.topic, f.field, f.value,
                                                      f.source, f.at).id
                continue
            mem = self.memories[mid]
            if mem.value == f.value:
                self.events["NOOP"] += 1
                continue
            self.history.append({"memory_id": mid, "old": mem.text, "new": f.text(),
                                 "event": "UPDATE", "old_value": mem.value, "value": f.value,
                                 "source": f.source, "time": self.now})
            self.events["UPDATE"] += 1
            self._order += 1
            mem.text, mem.vec, mem.value = f.text(), self.embed(f.text()), f.value
            mem.source, mem.at, mem.order = f.source, f.at, self._order

    def link(self, turn: Turn) -> None:
        assert turn.link is not None
        self._add_memory(turn.text, None, None, None, "chat", turn.time)

    def query(self, topic: str, field: str, text: str) -> Any:
        mems = list(self.memories.values())
        if not mems:
            return None
        sims = np.stack([m.vec for m in mems]) @ self.embed(text)
        hits = [mems[i] for i in top_k(sims, self.limit)]
        pick = read_latest(((FactSpec(m.topic, m.field, m.value, m.at, m.source, ""), m.order)
                            for m in hits if m.topic is not None and m.field is not None), topic, field)
        return None if pick is None else pick[0].value

    def footprint(self) -> int:
        return len(self.memories)

    def provenance(self, topic: str, field: str, text: str | None = None) -> Provenance | None:
        # mem0's history(memory_id) API: the memory and every ADD / UPDATE of it.
        mid = self.by_unit.get((topic, field))
        if mid is None:
            return None
        mem = self.memories[mid]
        updates = [h for h in self.history if h["memory_id"] == mid and h["event"] == "UPDATE"]
        return Provenance(mem.value, mem.source, updates[-1]["old_value"] if updates else None)

    def summary(self) -> dict[str, Any]:
        return {"events": dict(self.events), "limit": self.limit}


ENTITY_BOOST_WEIGHT = 0.5   # mem0/utils/scoring.py


def bm25_sigmoid_params(query: str) -> tuple[float, float]:
    """mem0 get_bm25_params: the sigmoid midpoint and steepness by query length."""
    n = len(bm25_terms(query)) or 1
    if n <= 3:
        return 5.0, 0.7
    if n <= 6:
        return 7.0, 0.6
    if n <= 9:
        return 9.0, 0.5
    if n <= 15:
        return 10.0, 0.5
    return 12.0, 0.5


class AddOnlyFactStore(System):
    """(c) Mem0's April 2026 algorithm ("v3": mem0 OSS 2.x, the new memory algorithm).

    Single-pass ADD-only extraction: every new fact becomes a new memory written with its
    date ("As of <date>, ..."); nothing is updated or deleted. A fact that is semantically
    equivalent to an existing memory with no new context is skipped (oracle: the latest
    memory about the same topic.field already has this value). Entities are extracted and
    linked to memories (oracle: the topic, and the person for an owner). Search scores
    each semantic candidate as (semantic + BM25 sigmoid + entity boost) / 2.5, gated by a
    semantic threshold of 0.1, and returns the top 20 (mem0/utils/scoring.py and
    Memory._search_vector_store)."""

    name = "mem0-v3"
    family = "add-only fact store, hybrid retrieval (Mem0 2026 ADD-only algorithm)"

    def __init__(self, config: StreamConfig, top_k: int = 20, threshold: float = 0.1) -> None:
        super().__init__()
        self.k = top_k
        self.threshold = threshold
        self.embed = Embeddings()
        self.memories: list[_Memory] = []
        self.bm25 = BM25()
        self.entities: dict[str, list[int]] = {}    # entity text -> linked memory ids
        self.skipped = 0
        self._order = 0

    def _add(self, text: str, topic: str | None, field: str | None, value: Any, source: str,
             at: datetime, entities: Iterable[str]) -> None:
        self._order += 1
        mem = _Memory(len(self.memories), text, self.embed(text), topic, field, value, source,
                      at, self._order)
        self.memories.append(mem)
        self.bm25.add(mem.id, text)
        for e in entities:
            self.entities.setdefault(e, []).append(mem.id)

    def ingest(self, turn: Turn) -> None:
        for f in turn.facts:
            same = [m for m in self.memories if m.topic == f.topic and m.field == f.field]
            latest = max(same, key=lambda m: (m.at, m.order), default=None)
            if latest is not None and latest.value == f.value:
                self.skipped += 1
                continue
            ents = [f.topic] + ([f.value] if f.field == "owner" else [])
            self._add(f.text(with_date=True), f.topic, f.field, f.value, f.source, f.at, ents)

    def link(self, turn: Turn) -> None:
        assert turn.link is not None
        self._add(f"As of {stamp(turn.time)}, {turn.text}", None, None, None, "chat", turn.time,
                  [turn.link.src, turn.link.dst])

    def _entity_boosts(self, query_entities: Sequence[str]) -> dict[int, float]:
        boosts: dict[int, float] = {}
        for qe in query_entities:
            qv = self.embed(qe)
            for ent, linked in self.entities.items():
                sim = float(np.dot(qv, self.embed(ent)))
                if sim < 0.5:
                    continue
                weight = 1.0 / (1.0 + 0.001 * ((max(len(linked), 1) - 1) ** 2))
                boost = sim * ENTITY_BOOST_WEIGHT * weight
                for mid in linked:
                    boosts[mid] = max(boosts.get(mid, 0.0), boost)
        return boosts

    def _search(self, text: str, query_entities: Sequence[str]) -> list[_Memory]:
        if not self.memories:
            return []
        sims = np.stack([m.vec for m in self.memories]) @ self.embed(text)
        candidates = top_k(sims, max(self.k * 4, 60))
        midpoint, steepness = bm25_sigmoid_params(text)
        bm25 = {k: 1.0 / (1.0 + math.exp(-steepness * (v - midpoint)))
                for k, v in self.bm25.scores(text).items() if v > 0}
        boosts = self._entity_boosts(query_entities)
        max_possible = 1.0 + (1.0 if bm25 else 0.0) + (ENTITY_BOOST_WEIGHT if boosts else 0.0)
        scored = []
        for i in candidates:
            sem = float(sims[i])
            if sem < self.threshold:
                continue
            combined = min((sem + bm25.get(i, 0.0) + boosts.get(i, 0.0)) / max_possible, 1.0)
            scored.append((combined, i))
        scored.sort(key=lambda x: (-x[0], x[1]))
        return [self.memories[i] for _, i in scored[:self.k]]

    @staticmethod
    def _items(mems: Sequence[_Memory]) -> list[tuple[FactSpec, int]]:
        return [(FactSpec(m.topic, m.field, m.value, m.at, m.source, ""), m.order)
                for m in mems if m.topic is not None and m.field is not None]

    def query(self, topic: str, field: str, text: str) -> Any:
        pick = read_latest(self._items(self._search(text, [topic])), topic, field)
        return None if pick is None else pick[0].value

    def footprint(self) -> int:
        return len(self.memories)

    def provenance(self, topic: str, field: str, text: str | None = None) -> Provenance | None:
        text = text or canonical_question(topic, field)
        return provenance_of(self._items(self._search(text, [topic])), topic, field)

    def summary(self) -> dict[str, Any]:
        return {"skipped_as_duplicate": self.skipped, "top_k": self.k}
