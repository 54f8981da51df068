"""(d) Zep / Graphiti: fact edges with bi-temporal validity."""
from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Iterable, Sequence

import numpy as np

from ..stream import StreamConfig, Turn, value_str
from ..system import Provenance, System
from .common import BM25, Embeddings, top_k


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
