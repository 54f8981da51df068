"""(e) Generative Agents retrieval (recency + importance + relevance) over a MemGPT-style
bounded active tier that evicts to a searchable archive."""
from __future__ import annotations

import math
from typing import Any, Sequence

import numpy as np

from ..stream import FactSpec, StreamConfig, Turn
from ..system import Provenance, System
from .common import Embeddings, Message, canonical_question, provenance_of, read_latest, top_k


class RecencyImportanceMemory(System):
    """(e) Generative Agents retrieval over a MemGPT-style bounded active tier.

    Every message is an observation with an importance (1..10; oracle rating) and a last
    access time. Retrieval ranks the active observations by recency + importance +
    relevance, each min-max normalised, weights 1 (Park et al. 2023, section 4.1; recency
    decays by 0.995 per hour since last access) and returns the top k; returned
    observations get last_access = now. The active tier holds at most beta(n)
    observations; past that the one with the lowest recency x importance is evicted to an
    archive (MemGPT's recall storage), which is searched by relevance only when the active
    top-k says nothing about what was asked (the agent paging memory back in)."""

    name = "ga-memgpt"
    family = "recency x importance x relevance, capacity eviction (Generative Agents / MemGPT)"

    def __init__(self, config: StreamConfig, k: int = 5, decay: float = 0.995) -> None:
        super().__init__()
        self.config = config
        self.k = k
        self.decay = decay
        self.embed = Embeddings()
        self.active: list[Message] = []
        self.archive: list[Message] = []
        self.fallbacks = 0
        self._last: tuple[str, str, str, list[tuple[FactSpec, int]]] | None = None

    def _recency(self, msg: Message) -> float:
        hours = max(0.0, (self.now - msg.last_access).total_seconds() / 3600.0)
        return self.decay ** hours

    def _add(self, turn: Turn) -> None:
        self.active.append(Message(turn.index, turn.text, self.embed(turn.text), turn.facts,
                                    turn.time, turn.importance, turn.time))
        cap = max(0, math.floor(self.config.bound(self.n)))
        while len(self.active) > cap:
            victim = min(self.active, key=lambda m: (self._recency(m) * m.importance / 10.0,
                                                     m.order))
            self.active.remove(victim)
            self.archive.append(victim)

    def ingest(self, turn: Turn) -> None:
        self._add(turn)

    def link(self, turn: Turn) -> None:
        self._add(turn)

    @staticmethod
    def _minmax(x: np.ndarray) -> np.ndarray:
        lo, hi = float(x.min()), float(x.max())
        return np.zeros_like(x) if hi - lo <= 0 else (x - lo) / (hi - lo)

    def _retrieve(self, text: str, touch: bool) -> list[Message]:
        if not self.active:
            return []
        q = self.embed(text)
        rel = np.stack([m.vec for m in self.active]) @ q
        rec = np.array([self._recency(m) for m in self.active])
        imp = np.array([float(m.importance) for m in self.active])
        total = self._minmax(rec) + self._minmax(imp) + self._minmax(rel)
        hits = [self.active[i] for i in top_k(total, self.k)]
        if touch:
            for m in hits:
                m.last_access = self.now
        return hits

    def _archive_search(self, text: str) -> list[Message]:
        if not self.archive:
            return []
        sims = np.stack([m.vec for m in self.archive]) @ self.embed(text)
        return [self.archive[i] for i in top_k(sims, self.k)]

    @staticmethod
    def _items(messages: Sequence[Message]) -> list[tuple[FactSpec, int]]:
        return [(f, m.order) for m in messages for f in m.facts]

    def _answer_items(self, topic: str, field: str, text: str, touch: bool
                      ) -> list[tuple[FactSpec, int]]:
        items = self._items(self._retrieve(text, touch))
        if read_latest(items, topic, field) is None:
            if touch:
                self.fallbacks += 1
            items = self._items(self._archive_search(text))
        return items

    def query(self, topic: str, field: str, text: str) -> Any:
        items = self._answer_items(topic, field, text, touch=True)
        self._last = (topic, field, text, items)
        pick = read_latest(items, topic, field)
        return None if pick is None else pick[0].value

    def footprint(self) -> int:
        return len(self.active)

    def provenance(self, topic: str, field: str, text: str | None = None) -> Provenance | None:
        text = text or canonical_question(topic, field)
        if self._last is not None and self._last[:3] == (topic, field, text):
            items = self._last[3]   # what the answer was read from (retrieval moved recency)
        else:
            items = self._answer_items(topic, field, text, touch=False)
        return provenance_of(items, topic, field)

    def summary(self) -> dict[str, Any]:
        return {"k": self.k, "archived": len(self.archive), "archive_fallbacks": self.fallbacks}
