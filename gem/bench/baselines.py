"""The five baseline memory families of the trajectory benchmark, re-implemented honestly.

Each class follows the documented behaviour of its family (sources and every assumption are
in specs/trajectory-benchmark.md). Where a real system asks an LLM to decide something
(which facts a message holds, whether two facts are duplicates or contradict each other,
which retrieved memory answers the question), the baseline gets a perfect oracle instead:
the generator's own facts, exact matching on (topic, field, value), and a reader that picks
the retrieved statement with the latest stated valid time. The baselines are therefore an
upper bound on their families; whatever they still get wrong comes from the mechanism
(what is stored, what is retrieved, what is evicted, what is never propagated), not from a
weak model.

All of them embed with the same `gem.HashingEmbedder` as gem does.

    AppendOnlyVectorStore   (a) the paper's Figure 1: append every message, top-k cosine,
                                evict the oldest when the store is full
    OverwriteFactStore      (b) Mem0 as published (2025, "v2"): ADD / UPDATE / DELETE / NOOP
                                per extracted fact; UPDATE overwrites, the history table
                                keeps the old text
    AddOnlyFactStore        (c) Mem0's April 2026 algorithm ("v3"): ADD-only extraction,
                                semantic + BM25 + entity-boost retrieval
    BitemporalGraph         (d) Zep / Graphiti: fact edges with valid_at / invalid_at; a new
                                edge invalidates the edges it contradicts, one at a time
    RecencyImportanceMemory (e) Generative Agents retrieval (recency + importance +
                                relevance) over a MemGPT-style bounded active tier that
                                evicts to a searchable archive
"""
from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Iterable, Sequence

import numpy as np

from gem.embed import HashingEmbedder
from gem.text import tokens

from .stream import (QUESTION_TEMPLATES, FactSpec, Provenance, StreamConfig, System, Turn,
                         stamp, value_str)

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


# ---------------------------------------------------------------------------- the reader
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


# ---------------------------------------------------------------------------- (a)
@dataclass
class _Message:
    order: int
    text: str
    vec: np.ndarray
    facts: tuple[FactSpec, ...]
    time: datetime
    importance: int
    last_access: datetime


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
        self.messages: list[_Message] = []
        self.evicted = 0

    def _add(self, turn: Turn) -> None:
        self.messages.append(_Message(turn.index, turn.text, self.embed(turn.text), turn.facts,
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

    def _retrieve(self, text: str) -> list[_Message]:
        if not self.messages:
            return []
        m = np.stack([x.vec for x in self.messages])
        return [self.messages[i] for i in top_k(m @ self.embed(text), self.k)]

    @staticmethod
    def _items(messages: Sequence[_Message]) -> list[tuple[FactSpec, int]]:
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


# ---------------------------------------------------------------------------- (b)
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


# ---------------------------------------------------------------------------- (c)
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


# ---------------------------------------------------------------------------- (d)
@dataclass
class _Edge:
    id: int
    topic: str
    name: str
    target: Any
    fact: str
    vec: np.ndarray
    valid_at: datetime
    created_at: datetime
    invalid_at: datetime | None = None
    expired_at: datetime | None = None
    episodes: list[tuple[int, str]] = field(default_factory=list)


class BitemporalGraph(System):
    """(d) Zep / Graphiti: facts are edges with bi-temporal validity.

    A new fact is resolved against the existing edges between the same nodes (oracle:
    duplicates are currently valid edges with the same topic.field and value; contradicted
    edges are those with the same topic.field and another value), then Graphiti's temporal
    rules run exactly as in graphiti_core/utils/maintenance/edge_operations.py: the new edge
    is expired if a contradicted edge is valid from a later time (late-arriving facts), and
    every contradicted edge that became valid earlier gets invalid_at = the new edge's
    valid_at. Nothing else is re-evaluated: a dependency edge carries no propagation.
    Search is Graphiti's EDGE_HYBRID_SEARCH_RRF (BM25 and cosine, 2 x limit candidates
    each, reciprocal-rank fusion with rank constant 1, limit 10); the reader trusts the
    edges whose invalid_at is "Present", as Zep's context template tells the LLM to."""

    name = "zep"
    family = "bitemporal graph, single-edge invalidation (Zep / Graphiti)"

    def __init__(self, config: StreamConfig, limit: int = 10, sim_min_score: float = 0.25
                 ) -> None:
        super().__init__()
        self.limit = limit
        self.sim_min_score = sim_min_score
        self.embed = Embeddings()
        self.edges: list[_Edge] = []
        self.bm25 = BM25()
        self.invalidated = 0
        self.expired_on_arrival = 0

    def _new_edge(self, topic: str, name: str, target: Any, fact: str, valid_at: datetime
                  ) -> _Edge:
        edge = _Edge(len(self.edges), topic, name, target, fact, self.embed(fact), valid_at,
                     self.now)
        self.edges.append(edge)
        self.bm25.add(edge.id, fact)
        return edge

    def _resolve_contradictions(self, resolved: _Edge, candidates: Sequence[_Edge]) -> None:
        for edge in candidates:
            if (edge.invalid_at is not None and edge.invalid_at <= resolved.valid_at) or \
               (resolved.invalid_at is not None and resolved.invalid_at <= edge.valid_at):
                continue
            if edge.valid_at < resolved.valid_at:
                edge.invalid_at = resolved.valid_at
                edge.expired_at = edge.expired_at or self.now
                self.invalidated += 1

    def ingest(self, turn: Turn) -> None:
        for f in turn.facts:
            related = [e for e in self.edges if e.topic == f.topic and e.name == f.field]
            dup = [e for e in related if e.target == f.value and e.invalid_at is None]
            if dup:
                resolved = dup[0]          # a duplicate keeps its own timestamps
            else:
                resolved = self._new_edge(f.topic, f.field, f.value,
                                          f"The {f.field} of {f.topic} is {value_str(f.value)}",
                                          f.at)
            resolved.episodes.append((turn.index, f.source))
            candidates = [e for e in related if e.target != f.value]
            if resolved.expired_at is None:
                for c in sorted(candidates, key=lambda e: e.valid_at):
                    if c.valid_at > resolved.valid_at:
                        resolved.invalid_at = c.valid_at
                        resolved.expired_at = self.now
                        self.expired_on_arrival += 1
                        break
            self._resolve_contradictions(resolved, candidates)

    def link(self, turn: Turn) -> None:
        spec = turn.link
        assert spec is not None
        name = "DEPENDS_ON" if spec.kind == "extension" else "RELATED_TO"
        edge = self._new_edge(spec.dst, name, spec.src, turn.text, turn.time)
        edge.episodes.append((turn.index, "chat"))

    def _search(self, text: str) -> list[_Edge]:
        if not self.edges:
            return []
        cand = 2 * self.limit
        bm = self.bm25.scores(text)
        bm_rank = [k for k, _ in sorted(bm.items(), key=lambda x: (-x[1], x[0]))[:cand]]
        sims = np.stack([e.vec for e in self.edges]) @ self.embed(text)
        cos_rank = [i for i in top_k(sims, cand) if sims[i] >= self.sim_min_score]
        fused: dict[int, float] = {}
        for ranking in (bm_rank, cos_rank):
            for i, key in enumerate(ranking):
                fused[key] = fused.get(key, 0.0) + 1.0 / (i + 1)
        best = sorted(fused.items(), key=lambda x: (-x[1], x[0]))[:self.limit]
        return [self.edges[k] for k, _ in best]

    @staticmethod
    def _valid_pick(edges: Iterable[_Edge], topic: str, field: str) -> _Edge | None:
        valid = [e for e in edges if e.topic == topic and e.name == field and e.invalid_at is None]
        return max(valid, key=lambda e: (e.valid_at, e.created_at, e.id), default=None)

    def query(self, topic: str, field: str, text: str) -> Any:
        pick = self._valid_pick(self._search(text), topic, field)
        return None if pick is None else pick.target

    def footprint(self) -> int:
        return len(self.edges)

    def provenance(self, topic: str, field: str, text: str | None = None) -> Provenance | None:
        # Graphiti reads a node's edges directly (EntityEdge.get_by_node_uuid): full history.
        edges = [e for e in self.edges if e.topic == topic and e.name == field]
        cur = self._valid_pick(edges, topic, field)
        if cur is None:
            return None
        ordered = sorted(edges, key=lambda e: (e.valid_at, e.created_at, e.id))
        older = [e for e in ordered[:ordered.index(cur)] if e.target != cur.target]
        return Provenance(cur.target, cur.episodes[0][1] if cur.episodes else None,
                          older[-1].target if older else None)

    def summary(self) -> dict[str, Any]:
        return {"invalidated": self.invalidated, "expired_on_arrival": self.expired_on_arrival,
                "limit": self.limit, "sim_min_score": self.sim_min_score}


# ---------------------------------------------------------------------------- (e)
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
        self.active: list[_Message] = []
        self.archive: list[_Message] = []
        self.fallbacks = 0
        self._last: tuple[str, str, str, list[tuple[FactSpec, int]]] | None = None

    def _recency(self, msg: _Message) -> float:
        hours = max(0.0, (self.now - msg.last_access).total_seconds() / 3600.0)
        return self.decay ** hours

    def _add(self, turn: Turn) -> None:
        self.active.append(_Message(turn.index, turn.text, self.embed(turn.text), turn.facts,
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

    def _retrieve(self, text: str, touch: bool) -> list[_Message]:
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

    def _archive_search(self, text: str) -> list[_Message]:
        if not self.archive:
            return []
        sims = np.stack([m.vec for m in self.archive]) @ self.embed(text)
        return [self.archive[i] for i in top_k(sims, self.k)]

    @staticmethod
    def _items(messages: Sequence[_Message]) -> list[tuple[FactSpec, int]]:
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
