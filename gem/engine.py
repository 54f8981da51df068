"""The transition pipeline (design section 2, the paper's Algorithm 1).

    BEGIN
      operator writes (through Transition primitives), emitting events
      policies run on the proposed state, FIFO, cascade bounded
      topic summaries and embeddings of changed topics are refreshed
      `commit` event: constraint policies run
      postconditions C1-C6 on the touched units
      the transition-log record, chained by hash to the previous one
    COMMIT, or ROLLBACK on any exception (TransitionRejected for violations)

Derived state (lexical and vector indexes, the title directory, id counters) is
updated only after COMMIT succeeds, so a rejected transition leaves no trace there
either. The database stays the single source of truth: all of it is rebuilt at open.
"""
from __future__ import annotations

import hashlib
import json
from dataclasses import asdict, replace
from datetime import datetime, timezone
from typing import Any, Callable

import numpy as np

from . import conditions
from .cache import StateCache
from .embed import Embedder
from .errors import GemError
from .index import LexicalIndex, VectorIndex
from .operators.forget import enforce_bound
from .policy import PolicySet, catalogue
from .resolve import Resolver
from .runtime import PolicyRuntime, entry_value
from .store import GraphStore
from .text import normalise, value_text
from .transition import Counters, Transition, decode_vector, dumps, encode_vector
from .units import TopicRef

Clock = Callable[[], datetime]
Summarizer = Callable[[str, dict[str, Any]], str]

# Before any policy set is installed (only while a memory is being opened).
DEFAULT_SETTINGS: dict[str, Any] = {name: sig.default for name, sig in catalogue.SETTINGS.items()}
GENESIS = "0" * 64


def default_summary(title: str, values: dict[str, Any]) -> str:
    """A deterministic summary: the title and the current value of each visible field."""
    parts = [f"{name}: {value_text(value)}" for name, value in sorted(values.items())]
    return title + (" — " + "; ".join(parts) if parts else "")


class Engine:
    def __init__(self, store: GraphStore, embedder: Embedder, resolver: Resolver,
                 clock: Clock, summarizer: Summarizer | None = None) -> None:
        self.store = store
        self.embedder = embedder
        self.resolver = resolver
        self.clock = clock
        self.summarizer = summarizer or default_summary
        self.policies: PolicySet | None = None
        self._by_event: dict[str, list[Any]] = {}
        self.checks_enabled = True
        self._test_hook: Callable[[Transition], None] | None = None
        self.cache = StateCache()
        self._load_derived_state()

    # ------------------------------------------------------------------ derived state
    def _load_derived_state(self) -> None:
        self.cache.clear()
        self.lexical = LexicalIndex()
        self.vectors = VectorIndex(self.embedder.dim)
        self.title_vectors = VectorIndex(self.embedder.dim)
        self.by_name: dict[str, str] = {}
        self.by_norm: dict[str, str] = {}
        self.status: dict[str, str] = {}
        self._names_of: dict[str, list[str]] = {}
        self._title_of: dict[str, str] = {}
        with self.store.reading() as tx:
            rows = tx.run("MATCH (t:Topic) RETURN t.id, t.title, t.aliases, t.summary, "
                          "t.embedding, t.status ORDER BY t.seq")
            last = tx.one("MATCH (x:Transition) RETURN x.seq, x.hash, x.counters "
                          "ORDER BY x.seq DESC LIMIT 1")
            stored = tx.scalar("MATCH (m:Meta {key: 'embedder'}) RETURN m.value")
        if stored is not None and stored != self.embedder.name:
            raise GemError(f"this database was embedded with {stored!r}; "
                           f"open it with that embedder, not {self.embedder.name!r}")
        if stored is None:
            with self.store.transaction() as tx:
                tx.run("CREATE (:Meta {key: 'embedder', value: $v})", {"v": self.embedder.name})
        self.seq, self.last_hash = (0, GENESIS) if last is None else (last[0], last[1])
        self.counters = Counters(**json.loads(last[2])) if last else Counters()
        titles = [r[1] for r in rows]
        title_vecs = self.embedder.embed(titles) if titles else None
        self._seen = self.store.commit_count
        for i, (tid, title, aliases, summary, emb, status) in enumerate(rows):
            self._index_topic(tid, title, aliases or [], summary or "",
                              decode_vector(emb, self.embedder.dim), status,
                              title_vecs[i] if title_vecs is not None else None)

    def sync(self) -> None:
        """Catch up with transitions another handle on this database committed.

        Several `Memory` handles in one process share the database and its write lock,
        but each derives its own indexes and counters. Under the lock, the store's commit
        count tells whether anyone else committed since this engine last looked; if so,
        everything derived is rebuilt from the database (the single source of truth).
        """
        if self.store.commit_count == self._seen:
            return
        with self.store.reading() as tx:
            stored = tx.scalar("MATCH (m:Meta {key: 'policy_sources'}) RETURN m.value")
        self._load_derived_state()
        if stored is not None:
            from .policy import load_sources
            from .runtime import available_actions
            sources = [tuple(x) for x in json.loads(stored)]
            if self.policies is None or [(s.file, s.text) for s in self.policies.sources] != sources:
                self.install_policies(load_sources(sources, available_actions=available_actions()))

    def _index_topic(self, tid: str, title: str, aliases: list[str], summary: str,
                     embedding: np.ndarray, status: str, title_vec: np.ndarray | None) -> None:
        for name in self._names_of.pop(tid, ()):
            if self.by_name.get(name) == tid:
                del self.by_name[name]
            if self.by_norm.get(normalise(name)) == tid:
                del self.by_norm[normalise(name)]
        self._names_of[tid] = [title, *aliases]
        for name in self._names_of[tid]:
            self.by_name.setdefault(name, tid)
            self.by_norm.setdefault(normalise(name), tid)
        self.status[tid] = status
        self.lexical.upsert(tid, " ".join([title, *aliases, summary]))
        if np.any(embedding):
            self.vectors.upsert(tid, embedding)
        if title_vec is not None and np.any(title_vec):
            self.title_vectors.upsert(tid, title_vec)
        self._title_of[tid] = title

    def directory(self, t: Transition) -> "Directory":
        if not hasattr(t, "_directory"):
            t._directory = Directory(self, t)
        return t._directory

    # ------------------------------------------------------------------ policies
    def install_policies(self, policies: PolicySet | None) -> None:
        self.policies = policies
        by_event: dict[str, list[Any]] = {}
        for policy in policies.policies if policies is not None else ():
            for event in policy.events:
                by_event.setdefault(event, []).append(policy)
        self._by_event = by_event

    def policies_for(self, event: str) -> list[Any]:
        return self._by_event.get(event, [])

    def runtime(self, t: Transition) -> PolicyRuntime:
        return PolicyRuntime(t)

    def evaluate_settings(self, t: Transition) -> dict[str, Any]:
        values = dict(DEFAULT_SETTINGS)
        if self.policies is not None:
            rt = self.runtime(t)
            for name, expr in self.policies.settings.items():
                if name != "active_bound":  # depends on n: evaluated when C5 is checked
                    values[name] = expr(rt)
        return values

    def active_bound(self, t: Transition) -> float | None:
        """beta(n) of C5, from the policies; None when no bound is set."""
        if self.policies is None:
            return None
        return self.policies.settings["active_bound"](self.runtime(t))

    # ------------------------------------------------------------------ the pipeline
    def run(self, op: str, operator: Callable[[Transition], Any], *, actor: str = "api",
            interaction: bool = False, event: str | None = None) -> Any:
        with self.store.lock:
            self.sync()
            now = self.clock()
            counters = replace(self.counters)
            if interaction:
                counters.interactions += 1
            with self.store.transaction() as tx:
                t = Transition(self, tx, op, actor, now, counters)
                t.settings = self.evaluate_settings(t)
                finish = operator(t)
                t.run_policies()
                enforce_bound(t)
                t.run_policies()
                self._refresh_summaries(t)
                t.emit("commit", op=op, touched=[TopicRef(x) for x in t.touched.topics])
                t.run_policies()
                self._refresh_summaries(t)
                if self._test_hook is not None:
                    self._test_hook(t)
                t.flush()
                if self.checks_enabled:
                    conditions.check_transition(t)
                output = finish(t) if callable(finish) else finish
                record = self._log(t, event or op)
                t.flush()
            self._after_commit(t, counters, record)
            return output, t

    def _refresh_summaries(self, t: Transition) -> None:
        dirty = list(t.touched.index_dirty)
        if not dirty:
            return
        t.prefetch_fields_of(dirty)
        t.prefetch_entries([f for tid in dirty for f in t.field_ids(tid)])
        texts = []
        for tid in dirty:
            values = {}
            for fid in t.field_ids(tid):
                f = t.field_row(fid)
                current = t.current_entry(fid)
                if f["status"] != "hidden" and current is not None:
                    values[f["name"]] = entry_value(current)
            texts.append(self.summarizer(t.topic(tid)["title"], values))
        vectors = self.embedder.embed(texts)
        for tid, text, vec in zip(dirty, texts, vectors):
            t.update("Topic", tid, summary=text, embedding=encode_vector(vec), updated_at=t.now)
        t.touched.index_dirty.clear()

    def _log(self, t: Transition, event: str) -> dict[str, Any]:
        seq = self.seq + 1
        record = {
            "seq": seq, "op": t.op, "event": event, "at": t.now.isoformat(), "actor": t.actor,
            "units": sorted(set(t.touched.topics) | set(t.touched.fields)),
            "policies": [{"policy": f.policy, "event": f.event, "action": f.action,
                          "evidence": f.evidence} for f in t.fired],
            "detail": {k: v for k, v in t.detail.items() if not k.startswith("_")},
        }
        body = dumps(record)
        digest = hashlib.sha256((self.last_hash + body).encode("utf-8")).hexdigest()
        t.tx.run("CREATE (:Transition {seq: $seq, op: $op, event: $event, at: $at, actor: $actor, "
                 "units: $units, policies: $policies, detail: $detail, counters: $counters, "
                 "prev_hash: $prev, hash: $hash})",
                 {"seq": seq, "op": t.op, "event": event, "at": t.now, "actor": t.actor,
                  "units": dumps(record["units"]), "policies": dumps(record["policies"]),
                  "detail": dumps(record["detail"]), "counters": json.dumps(asdict(t.counters)),
                  "prev": self.last_hash, "hash": digest})
        return {"seq": seq, "hash": digest}

    def _after_commit(self, t: Transition, counters: Counters, record: dict[str, Any]) -> None:
        self._seen = self.store.commit_count
        self.cache.absorb(t)
        self.counters = counters
        self.seq, self.last_hash = record["seq"], record["hash"]
        reindex = [tid for tid in t.touched.reindex if t.topic(tid) is not None]
        retitled = [tid for tid in reindex if self._title_of.get(tid) != t.topic(tid)["title"]]
        title_vecs = dict(zip(retitled, self.embedder.embed([t.topic(x)["title"] for x in retitled])
                              if retitled else []))
        for tid in reindex:
            row = t.topic(tid)
            self._index_topic(tid, row["title"], list(row["aliases"] or []), row["summary"] or "",
                              decode_vector(row.get("embedding"), self.embedder.dim), row["status"],
                              title_vecs.get(tid))

    # ------------------------------------------------------------------ search
    def search(self, query: str, k: int, include_archived: bool,
               floor: float) -> list[tuple[str, float]]:
        """Fuse BM25 (normalised by the best hit) with embedding cosine over the best
        candidates of each. Returns every candidate above the floor, best first, scores
        rounded so that equal relevance compares equal (the caller breaks ties)."""
        pool = max(50, 10 * k)
        lexical = dict(self.lexical.search(query, pool, max_df=0.5))
        best = max(lexical.values(), default=0.0)
        qvec = self.embedder.embed([query])[0]
        dense = dict(self.vectors.search(qvec, pool)) if np.any(qvec) and len(self.vectors) else {}
        scored = []
        for tid in set(lexical) | set(dense):
            if not include_archived and self.status.get(tid) == "archived":
                continue
            lex = lexical.get(tid, 0.0) / best if best > 0 else 0.0
            score = round(0.5 * lex + 0.5 * max(dense.get(tid, 0.0), 0.0), 9)
            if score >= floor:
                scored.append((tid, score))
        scored.sort(key=lambda x: (-x[1], x[0]))
        return scored

    def most_salient(self, t: Transition, k: int, include_archived: bool) -> list[tuple[str, None]]:
        statuses = ["active", "archived"] if include_archived else ["active"]
        rows = t.query("MATCH (x:Topic) WHERE x.status IN $statuses "
                       "RETURN x.id, x.strength, x.last_access", {"statuses": statuses})
        ranked = sorted(rows, key=lambda r: (-t.salience_now({"strength": r[1], "last_access": r[2]}),
                                             r[0]))
        return [(r[0], None) for r in ranked[:k]]



class Directory:
    """The resolver's view of topic names: committed ones plus those made in this transition."""

    def __init__(self, engine: Engine, t: Transition) -> None:
        self.engine = engine
        self.t = t
        self._names: dict[str, str] = {}
        self._norms: dict[str, str] = {}
        self._new = VectorIndex(engine.embedder.dim)
        self._vectors: dict[str, np.ndarray] = {}

    def exact(self, name: str) -> str | None:
        return self._names.get(name) or self.engine.by_name.get(name)

    def normalised(self, norm: str) -> str | None:
        return self._norms.get(norm) or self.engine.by_norm.get(norm)

    def _vector(self, name: str) -> np.ndarray:
        if name not in self._vectors:
            self._vectors[name] = self.engine.embedder.embed([name])[0]
        return self._vectors[name]

    def similar(self, name: str, k: int = 5) -> list[tuple[str, float]]:
        vec = self._vector(name)
        if not np.any(vec):
            return []
        hits = []
        for index in (self.engine.title_vectors, self._new):
            if len(index):
                hits += index.search(vec, k)
        hits.sort(key=lambda x: (-x[1], x[0]))
        return hits[:k]

    def add(self, tid: str, title: str) -> None:
        self._names.setdefault(title, tid)
        self._norms.setdefault(normalise(title), tid)
        vec = self._vector(title)
        if np.any(vec):
            self._new.upsert(tid, vec)

    def lookup(self, name: str) -> str | None:
        """Explicit lookup by id, exact title or alias, or normalised title."""
        if self.t.topic(name) is not None:
            return name
        return self.exact(name) or self.normalised(normalise(name))


def utc_now() -> datetime:
    return datetime.now(timezone.utc)

