"""The resolver's view of topic names: committed ones plus those made in this transition.

Resolution runs once per batch: every name of an ingest that no exact name or canonical key
(gem.text.name_key) matches is embedded and matched against the stored title vectors in one
matrix product (`prepare`), instead of one search per name.

Ids and titles never share a namespace: a string is a title or an alias, and a topic is named
by id only with a `gem.TopicId`. A topic titled "t1" is found by that title, and "t1" never
finds the topic whose id is t1.
"""
from __future__ import annotations

from contextlib import contextmanager
from typing import Iterator

import numpy as np

from ..derived import choose, scope_of
from ..index import VectorIndex
from ..state.transition import Transition
from ..text import name_key, tokens
from ..units import TopicId


class Directory:
    def __init__(self, t: Transition) -> None:
        self.t = t
        self.committed = t.committed
        self._names: dict[str, list[str]] = {}   # names and keys given in this transition
        self._keys: dict[str, list[str]] = {}
        self._titles: dict[str, str] = {}        # topic created here -> its title
        self._new = VectorIndex(t.services.embedder.dim)
        self._vectors: dict[str, np.ndarray] = {}
        self._similar: dict[str, list[tuple[str, float]]] = {}
        self._exact: dict[str, str | None] | None = None  # while `settled`: name -> exact()

    @classmethod
    def of(cls, t: Transition) -> "Directory":
        if t.directory is None:
            t.directory = cls(t)
        return t.directory  # type: ignore[no-any-return]

    def _status(self, tid: str) -> str | None:
        """A topic's status in the proposed state (a merge in this transition already
        redirects names), from memory: this transition's copy, else the derived state's."""
        own = self.t.rows["Topic"].get(tid)
        if own is not None:
            return str(own["status"])
        if tid in self._titles:
            return "active"
        return self.committed.topic_status(tid)

    def _choose(self, holders: list[str]) -> str | None:
        return choose(dict.fromkeys(holders), self._status)

    def exact(self, name: str) -> str | None:
        """The topic whose title or alias is exactly `name`."""
        memo = self._exact
        if memo is not None and name in memo:
            return memo[name]
        found = self._choose(self._names.get(name, []) + self.committed.names.holders(name))
        if memo is not None:
            memo[name] = found
        return found

    @contextmanager
    def settled(self) -> Iterator[None]:
        """A block in which no topic changes status and names change only through `add` and
        `add_name` (resolving a batch's names): each name's exact match is looked up once, not
        once for `prepare`, the prefetch, the resolver and the alias check (4 lookups a fact
        of a batch of updates)."""
        self._exact = {}
        try:
            yield
        finally:
            self._exact = None

    def normalised(self, name: str) -> str | None:
        """The topic whose title or alias has the canonical key of `name` (gem.text.name_key:
        case, width, spacing and word separators do not count; symbols do)."""
        key = name_key(name)
        return self._choose(self._keys.get(key, []) + self.committed.names.key_holders(key))

    def prepare(self, names: list[str]) -> None:
        """Embed the names that no exact name or key matches, and find their nearest committed
        titles, all at once."""
        unknown = [n for n in names if n not in self._vectors and self.exact(n) is None
                   and self.normalised(n) is None]
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

    def title(self, tid: str) -> str | None:
        own = self.t.rows["Topic"].get(tid)
        if own is not None:
            return str(own["title"])
        return self._titles.get(tid) or self.committed.names.title_of.get(tid)

    def similar(self, name: str, k: int = 5) -> list[tuple[str, float]]:
        """Topics whose titles embed close to `name`, best first, as (id, cosine). A title made
        of exactly the words of `name` is left out: its name differs (or an exact or key lookup
        would have found it) only in symbols, order or repetition ("C#" and "C++", "Paris to
        London" and "London to Paris"), which is just what tells the two apart and what a
        similarity of words cannot see."""
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
        words = set(tokens(name))
        hits = [(tid, score) for tid, score in hits
                if set(tokens(self.title(tid) or "")) != words]
        hits.sort(key=lambda x: (-x[1], x[0]))
        return hits[:k]

    def similarity(self, name: str, tid: str) -> float | None:
        """The cosine of `name` and the title of topic `tid`, when both embed to something."""
        title = self._titles.get(tid)
        other = self._vector(title) if title is not None else self.committed.title_vectors.get(tid)
        vec = self._vector(name)
        if other is None or not np.any(vec) or not np.any(other):
            return None
        return float(np.dot(vec, other))

    def add(self, tid: str, title: str) -> None:
        """A topic created in this transition."""
        self._titles[tid] = title
        self.add_name(tid, title)
        vec = self._vector(title)
        if np.any(vec):
            self._new.upsert(tid, vec)

    def add_name(self, tid: str, name: str) -> None:
        """A title or alias given to `tid` in this transition."""
        if self._exact is not None:
            self._exact.pop(name, None)  # the only exact match a new holder can change
        for index, key in ((self._names, name), (self._keys, name_key(name))):
            holders = index.setdefault(key, [])
            if tid not in holders:
                holders.append(tid)

    def title_vectors(self) -> dict[str, np.ndarray]:
        """Vectors of the titles created in this transition, for the derived title index."""
        return {tid: self._vectors[title] for tid, title in self._titles.items()
                if title in self._vectors}

    def lookup(self, name: str) -> str | None:
        """An explicit lookup: a `TopicId` finds the topic with that id (of this scope only);
        any other string is a title or alias, exact first, then by canonical key."""
        if isinstance(name, TopicId):
            tid = str(name)
            return tid if scope_of(tid) == self.t.scope and self.t.topic(tid) is not None else None
        return self.exact(name) or self.normalised(name)
