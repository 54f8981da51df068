"""The resolver's view of topic names: committed ones plus those made in this transition.

Resolution runs once per batch: every name of an ingest that no exact or normalised name
matches is embedded and matched against the stored title vectors in one matrix product
(`prepare`), instead of one search per name.
"""
from __future__ import annotations

import numpy as np

from ..derived import scope_of
from ..index import VectorIndex
from ..state.transition import Transition
from ..text import normalise


class Directory:
    def __init__(self, t: Transition) -> None:
        self.t = t
        self.committed = t.committed
        self._names: dict[str, str] = {}
        self._norms: dict[str, str] = {}
        self._new = VectorIndex(t.services.embedder.dim)
        self._vectors: dict[str, np.ndarray] = {}
        self._similar: dict[str, list[tuple[str, float]]] = {}

    @classmethod
    def of(cls, t: Transition) -> "Directory":
        if t.directory is None:
            t.directory = cls(t)
        return t.directory  # type: ignore[no-any-return]

    def exact(self, name: str) -> str | None:
        return self._names.get(name) or self.committed.names.by_name.get(name)

    def normalised(self, norm: str) -> str | None:
        return self._norms.get(norm) or self.committed.names.by_norm.get(norm)

    def prepare(self, names: list[str]) -> None:
        """Embed the names that no exact or normalised name matches, and find their nearest
        committed titles, all at once."""
        unknown = [n for n in names if n not in self._vectors and self.exact(n) is None
                   and self.normalised(normalise(n)) is None]
        if not unknown:
            return
        vectors = self.t.services.embedder.embed(unknown)
        for name, vec in zip(unknown, vectors):
            self._vectors[name] = vec
        index = self.committed.title_vectors
        if len(index):
            for name, hits in zip(unknown, index.search_many(vectors, 5)):
                self._similar[name] = hits

    def _vector(self, name: str) -> np.ndarray:
        if name not in self._vectors:
            self._vectors[name] = self.t.services.embedder.embed([name])[0]
        return self._vectors[name]

    def similar(self, name: str, k: int = 5) -> list[tuple[str, float]]:
        vec = self._vector(name)
        if not np.any(vec):
            return []
        if name in self._similar:
            hits = list(self._similar[name][:k])
        else:
            index = self.committed.title_vectors
            hits = index.search(vec, k) if len(index) else []
        if len(self._new):
            hits += self._new.search(vec, k)
        hits.sort(key=lambda x: (-x[1], x[0]))
        return hits[:k]

    def add(self, tid: str, title: str) -> None:
        self._names.setdefault(title, tid)
        self._norms.setdefault(normalise(title), tid)
        vec = self._vector(title)
        if np.any(vec):
            self._new.upsert(tid, vec)

    def title_vectors(self) -> dict[str, np.ndarray]:
        """Vectors of the titles created in this transition, for the derived title index."""
        return {tid: self._vectors[title] for title, tid in self._names.items()
                if title in self._vectors}

    def lookup(self, name: str) -> str | None:
        """Explicit lookup by id (of this scope), exact title or alias, or normalised title."""
        if scope_of(name) == self.t.scope and self.t.topic(name) is not None:
            return name
        return self.exact(name) or self.normalised(normalise(name))
