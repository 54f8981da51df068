"""Runs transitions: the pipeline over a proposed state, then the committed state's upkeep.

One `Engine` per handle (its clock, resolver, summariser); what is derived from a database
(row cache, derived indexes, the policies in force) is one `SharedState` per path in a
process, so every handle sees every commit at once and nothing is rebuilt when another handle
commits.
"""
from __future__ import annotations

import json
import logging
import time
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any, Callable, Sequence

from . import snapshot
from .derived import DerivedState, Progress, Summarizer, default_summary
from .embed import Embedder, default_embedder, embedder_named
from .errors import GemError, InvalidInput, TransitionRejected
from .numeric import single_threaded
from .pipeline import DEFAULT, Pipeline
from .policy import PolicySet, catalogue, load_sources
from .resolve import Resolver
from .runtime import FactsDropped, PolicyRuntime, available_actions
from .state.cache import CommittedCache
from .state.transition import Counters, Services, Transition
from .store import GraphStore, queries
from .store.schema import SCHEMA_VERSION

log = logging.getLogger("gem")
Clock = Callable[[], datetime]

DEFAULT_SETTINGS: dict[str, Any] = {name: sig.default for name, sig in catalogue.SETTINGS.items()}


@dataclass
class SharedState:
    """What gem keeps about one database in a process, shared by its handles."""
    cache: CommittedCache
    derived: DerivedState
    embedder_name: str
    policies: PolicySet | None = None
    by_event: dict[str, list[Any]] = field(default_factory=dict)

    def install(self, policies: PolicySet | None) -> None:
        self.policies = policies
        by_event: dict[str, list[Any]] = {}
        for policy in policies.policies if policies is not None else ():
            for event in policy.events:
                by_event.setdefault(event, []).append(policy)
        self.by_event = by_event

    def policies_for(self, event: str) -> Sequence[Any]:
        return self.by_event.get(event, ())


def open_shared(store: GraphStore, embedder: Embedder, progress: Progress | None) -> SharedState:
    version = queries.ensure_schema(store)
    if version != SCHEMA_VERSION:
        raise GemError(f"{store.path!r} holds gem schema version {version}; this gem reads "
                       f"version {SCHEMA_VERSION}")
    with store.transaction() as tx:
        stored = queries.meta_get(tx, "embedder")
        if stored is None:
            queries.meta_put(tx, "embedder", embedder.name)
    if stored is not None and stored != embedder.name:
        raise InvalidInput(f"this database was embedded with {stored!r}; "
                           f"open it with that embedder, not {embedder.name!r}")
    check_log(store)
    derived = snapshot.load(store, embedder, progress)
    shared = SharedState(CommittedCache(store, patch=derived.patch), derived, embedder.name)
    with store.reading() as tx:
        sources = queries.meta_get(tx, "policy_sources")
    if sources is not None:
        shared.install(load_sources([tuple(x) for x in json.loads(sources)],
                                    available_actions=available_actions()))
    return shared


def embedder_for(store: GraphStore) -> Embedder:
    """The embedder to open a database with when the caller names none: the one its vectors
    were made with (a database made by an older gem keeps `hashing-256-v1`), else the default."""
    shared = store.shared_state
    if shared is not None:
        stored: str | None = shared.embedder_name
    else:
        queries.ensure_schema(store)
        with store.reading() as tx:
            stored = queries.meta_get(tx, "embedder")
    found = None if stored is None else embedder_named(stored)
    return found if found is not None else default_embedder()
def check_log(store: GraphStore) -> None:
    """Refuse a database whose log cannot be the log of its state: every unit was written by
    a logged transition, and each scope's id counters (in the log) are ahead of its ids. A
    database whose log was deleted or whose counters were lowered would otherwise fail every
    later write with a duplicate key."""
    with store.reading() as tx:
        counters = queries.latest_counters(tx)
        highest = queries.highest_ids(tx)
    for (scope, kind), top in highest.items():
        have = counters.get(scope, {}).get(kind)
        if have is None:
            raise GemError(f"{store.path!r}: scope {scope!r} holds {kind} rows but the transition "
                           "log has no record of them: the log was deleted or cut, so this "
                           "database cannot be trusted (restore it from a backup)")
        if have < top:
            raise GemError(f"{store.path!r}: the log's {kind} counter of scope {scope!r} ({have}) "
                           f"is behind the highest {kind} id ({top}): the log was tampered with")


class Engine:
    def __init__(self, store: GraphStore, embedder: Embedder, resolver: Resolver, clock: Clock,
                 summarizer: Summarizer | None = None, progress: Progress | None = None) -> None:
        self.store = store
        self.clock = clock
        self.services = Services(embedder, resolver, summarizer or default_summary)
        self.pipeline: Pipeline = DEFAULT
        self.reviser: Callable[[Any], Any] | None = None  # asked by revise() (gem/memory.py)
        self.extractor: Callable[[Any], Any] | None = None  # asked by ingest() about episodes
        with store.lock:
            shared = store.shared_state
            if shared is None:
                shared = open_shared(store, embedder, progress)
                store.shared_state = shared
            elif shared.embedder_name != embedder.name:
                raise InvalidInput(f"this database was embedded with {shared.embedder_name!r}; "
                                   f"open it with that embedder, not {embedder.name!r}")
        self.shared: SharedState = shared

    # ------------------------------------------------------------------ shared state
    @property
    def derived(self) -> DerivedState:
        return self.shared.derived

    @property
    def cache(self) -> CommittedCache:
        return self.shared.cache

    @property
    def policies(self) -> PolicySet | None:
        return self.shared.policies

    @property
    def seq(self) -> int:
        return self.derived.seq

    def counters(self, scope: str = "default") -> Counters:
        return Counters(**self.derived.scope(scope).counters)

    def install_policies(self, policies: PolicySet | None) -> None:
        self.shared.install(policies)

    # ------------------------------------------------------------------ transitions
    def transition(self, op: str, *, actor: str = "api", interaction: bool = False,
                   now: datetime | None = None, scope: str = "default") -> Transition:
        """A proposed state over the committed one, in one scope (the caller holds the lock)."""
        counters = self.counters(scope)
        if interaction:
            counters.interactions += 1
        t = Transition(self.cache, self.derived.scope(scope), self.services, op=op, actor=actor,
                       now=now or self.now(), counters=counters, seq=self.derived.seq + 1,
                       scope=scope)
        t.policies_for = self.shared.policies_for
        t.settings = self.evaluate_settings(t)
        return t

    def now(self) -> datetime:
        """The time of the next transition: the clock's, or the last transition's if the clock
        went back (an NTP step, another process's clock): time in the log never decreases, so
        the newest statement is never filed as a late fact."""
        now = self.clock()
        last = self.derived.at
        return now if last is None or now >= last else last

    def evaluate_settings(self, t: Transition) -> dict[str, Any]:
        """Every setting's value for this transition. A value out of its range (a half-life
        computed as 0, a negative merge similarity) rejects the transition: the engine never
        computes with it."""
        values = dict(DEFAULT_SETTINGS)
        if self.policies is not None:
            # A setting may read the state (`count(active_topics)`), whose reads decay salience
            # with `half_life`: while the settings are evaluated, they see the defaults.
            t.settings = dict(DEFAULT_SETTINGS)
            rt = PolicyRuntime(t)
            for name, expr in self.policies.settings.items():
                value = expr(rt)
                problem = catalogue.SETTINGS[name].validate(value)
                if problem is not None:
                    raise TransitionRejected("policy", name, problem)
                values[name] = value
        return values

    def run(self, op: str, operator: Callable[[Transition], Any], *, actor: str = "api",
            interaction: bool = False, event: str | None = None,
            scope: str = "default",
            progress: Callable[[str, int, int], None] | None = None) -> tuple[Any, Transition]:
        """Run one transition through the pipeline, in one scope; commit it or raise (nothing
        written). When policies drop facts, it runs again from the committed state without
        them, at the same time; each run drops at least one more fact, so this ends."""
        with self.store.lock:
            self.store.check_open()
            started = time.perf_counter()
            dropped: dict[int, dict[str, Any]] = {}
            now = None
            while True:
                t = self.transition(op, actor=actor, interaction=interaction, now=now,
                                    scope=scope)
                t.operator = operator
                t.event = event or op
                t.progress = progress
                t.dropped, t.skipping = dict(dropped), frozenset(dropped)
                try:
                    with single_threaded():
                        self.pipeline.run(t, self)
                except FactsDropped as exc:
                    dropped, now = exc.dropped, t.now
                    continue
                except TransitionRejected as exc:
                    log.warning("gem transition %s (%s) rejected by %s on %s: %s", t.seq, op,
                                exc.condition, exc.unit, exc.detail)
                    raise
                break
            self._after_commit(t)
            if log.isEnabledFor(logging.DEBUG):
                log.debug("gem transition %s %s by %s: %.2f ms, %d units, policies fired %s",
                          t.seq, op, actor, (time.perf_counter() - started) * 1e3,
                          len(t.touched.topics) + len(t.touched.fields),
                          sorted({f.policy for f in t.fired}))
            return t.output, t

    def _after_commit(self, t: Transition) -> None:
        """Hand the committed transition's rows to the cache and the derived state. Should this
        fail, what is derived no longer matches the database: it is dropped and rebuilt."""
        try:
            self.cache.absorb({k: v for k, v in t.rows.items()},  # type: ignore[misc]
                              t.children, t.edges)
            title_vectors = t.directory.title_vectors() if t.directory is not None else None
            self.derived.apply(t, title_vectors)
        except BaseException:
            self.store.shared_state = None
            self.shared = open_shared(self.store, self.services.embedder, None)
            self.store.shared_state = self.shared
            raise

    def write_behind(self, *, stamp: bool = False) -> None:
        """Bring the stored salience columns up to date with the log (see gem/derived.py).
        `stamp`: also when nothing is pending, so that the stored log position is the head's
        (an export carries it, and its import must not replay what is already written)."""
        from .store import queries
        with self.store.lock:
            derived = self.derived
            if self.store.closed or not (derived.pending_salience or
                                         (stamp and derived.salience_seq != derived.seq)):
                return
            rows = [(table, key, s, last) for key, (table, s, last) in
                    sorted(derived.pending_salience.items())]
            with self.store.transaction() as tx:
                queries.write_salience(tx, rows, derived.seq)
            derived.pending_salience.clear()
            derived.salience_seq = derived.seq

    def save_snapshot(self) -> None:
        """Save the derived state beside the database (temporary databases keep none)."""
        with self.store.lock:
            if not self.store.closed and not self.store.temporary:
                snapshot.save(self.derived, self.store.path)

    def read(self, fn: Callable[[Transition], Any], scope: str = "default") -> Any:
        """A side-effect-free read of the committed state of a scope: no salience change, not
        an interaction, nothing logged."""
        with self.store.lock, single_threaded():
            self.store.check_open()
            return fn(self.transition("read", scope=scope))


def utc_now() -> datetime:
    return datetime.now(timezone.utc)
