"""(a) The paper's Figure 1: an append-only vector store."""
from __future__ import annotations

import math
from typing import Any, Sequence

import numpy as np

from ..stream import FactSpec, StreamConfig, Turn
from ..system import Provenance, System
from .common import Embeddings, Message, canonical_question, provenance_of, read_latest, top_k


class AppendOnlyVectorStore(System):
    """(a) The paper's Figure 1 system: every message is embedded and appended; a question
    is answered from the top-k messages by cosine similarity; when the store is full the
    oldest messages are evicted ("evicts old ones by age"). Capacity is the same beta(n)
    gem is held to, so the footprint is within the bound by construction."""

    name = "vector-store"
    family = "append-only vector store, top-k cosine, age eviction (paper Fig. 1)"

    def __init__(self, config: StreamConfig, k: int = 5, evict: bool = True) -> None:
        super().__init__()
        self.config = config
        self.k = k
        self.evict = evict
        self.embed = Embeddings()
        self.messages: list[Message] = []
        self.evicted = 0

    def _add(self, turn: Turn) -> None:
        self.messages.append(Message(turn.index, turn.text, self.embed(turn.text), turn.facts,
                                      turn.time, turn.importance, turn.time))
        if self.evict:
            cap = max(0, math.floor(self.config.bound(self.n)))
            while len(self.messages) > cap:
                self.messages.pop(0)
                self.evicted += 1

    def ingest(self, turn: Turn) -> None:
        self._add(turn)

    def link(self, turn: Turn) -> None:
        self._add(turn)

    def _retrieve(self, text: str) -> list[Message]:
        if not self.messages:
            return []
        m = np.stack([x.vec for x in self.messages])
        return [self.messages[i] for i in top_k(m @ self.embed(text), self.k)]

    @staticmethod
    def _items(messages: Sequence[Message]) -> list[tuple[FactSpec, int]]:
        return [(f, msg.order) for msg in messages for f in msg.facts]

    def query(self, topic: str, field: str, text: str) -> Any:
        pick = read_latest(self._items(self._retrieve(text)), topic, field)
        return None if pick is None else pick[0].value

    def footprint(self) -> int:
        return len(self.messages)

    def provenance(self, topic: str, field: str, text: str | None = None) -> Provenance | None:
        text = text or canonical_question(topic, field)
        return provenance_of(self._items(self._retrieve(text)), topic, field)

    def summary(self) -> dict[str, Any]:
        return {"k": self.k, "evicted": self.evicted}
