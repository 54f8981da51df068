"""What the baselines share: the embedder (cached), BM25 and its stop words, the oracle
reader (the latest stated valid time wins), top-k, and the stored message of (a) and (e)."""
from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Iterable

import numpy as np

from gem.embed import HashingEmbedder
from gem.text import tokens

from ..stream import QUESTION_TEMPLATES, FactSpec
from ..system import Provenance


# A small English stop list (spaCy's is what Mem0 uses before BM25; this is its core).
STOPWORDS = frozenset("""
a about above after again against all am an and any are as at be because been before being
below between both but by can could did do does doing down during each few for from further
had has have having he her here hers herself him himself his how i if in into is it its itself
just me more most my myself no nor not now of off on once only or other our ours ourselves out
over own same she should so some such than that the their theirs them themselves then there
these they this those through to too under until up very was we were what when where which
while who whom why will with would you your yours yourself yourselves s t whats
""".split())


def bm25_terms(text: str) -> list[str]:
    return [t for t in tokens(text) if t not in STOPWORDS]


class Embeddings:
    """The shared embedder with a cache (texts repeat: questions, entity names)."""

    def __init__(self) -> None:
        self.embedder = HashingEmbedder()
        self._cache: dict[str, np.ndarray] = {}

    def __call__(self, text: str) -> np.ndarray:
        vec = self._cache.get(text)
        if vec is None:
            vec = self.embedder.embed([text])[0]
            self._cache[text] = vec
        return vec


class BM25:
    """Okapi BM25 (k1 = 1.2, b = 0.75, Lucene idf), the keyword arm of Mem0 v3 and Graphiti."""

    def __init__(self, k1: float = 1.2, b: float = 0.75) -> None:
        self.k1, self.b = k1, b
        self.docs: dict[Any, Counter] = {}
        self.lengths: dict[Any, int] = {}
        self.df: Counter = Counter()

    def add(self, key: Any, text: str) -> None:
        terms = Counter(bm25_terms(text))
        self.docs[key] = terms
        self.lengths[key] = sum(terms.values())
        self.df.update(terms.keys())

    def remove(self, key: Any) -> None:
        terms = self.docs.pop(key)
        self.lengths.pop(key)
        self.df.subtract(terms.keys())

    def scores(self, query: str) -> dict[Any, float]:
        n = len(self.docs)
        if n == 0:
            return {}
        avg = sum(self.lengths.values()) / n
        out: dict[Any, float] = {}
        for term in set(bm25_terms(query)):
            df = self.df.get(term, 0)
            if df <= 0:
                continue
            idf = math.log(1 + (n - df + 0.5) / (df + 0.5))
            for key, terms in self.docs.items():
                tf = terms.get(term, 0)
                if tf:
                    norm = tf * (self.k1 + 1) / (tf + self.k1 * (1 - self.b + self.b * self.lengths[key] / avg))
                    out[key] = out.get(key, 0.0) + idf * norm
        return out


def canonical_question(topic: str, field: str) -> str:
    return QUESTION_TEMPLATES[field][0].format(t=topic)


def read_latest(items: Iterable[tuple[FactSpec, int]], topic: str, field: str
                ) -> tuple[FactSpec, int] | None:
    """The oracle reader: among the retrieved statements about topic.field, the one with the
    latest stated valid time (ties: the one recorded last). An LLM that reads timestamped
    memories carefully does no better."""
    cands = [(f, o) for f, o in items if f.topic == topic and f.field == field]
    return max(cands, key=lambda x: (x[0].at, x[1])) if cands else None


def provenance_of(items: Iterable[tuple[FactSpec, int]], topic: str, field: str
                  ) -> Provenance | None:
    """Answer, source and replaced value, reconstructed from the statements at hand."""
    cands = sorted(((f, o) for f, o in items if f.topic == topic and f.field == field),
                   key=lambda x: (x[0].at, x[1]))
    if not cands:
        return None
    cur = cands[-1][0]
    older = [f for f, _ in cands[:-1] if f.value != cur.value]
    return Provenance(cur.value, cur.source, older[-1].value if older else None)


def top_k(scores: np.ndarray, k: int) -> list[int]:
    """Indices of the k best scores, best first; ties broken by index (older first)."""
    if scores.size == 0:
        return []
    order = np.lexsort((np.arange(scores.size), -scores))
    return [int(i) for i in order[:k]]


@dataclass
class Message:
    order: int
    text: str
    vec: np.ndarray
    facts: tuple[FactSpec, ...]
    time: datetime
    importance: int
    last_access: datetime
