"""Runs transitions: the pipeline over a proposed state, then the committed state's upkeep.

One `Engine` per handle (its clock, resolver, summariser); what is derived from a database
(row cache, derived indexes, the policies in force) is one `SharedState` per path in a
process, so every handle sees every commit at once and nothing is rebuilt when another handle
commits.
"""
from __future__ import annotations

import json
import logging
import random
import time
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any, Callable, Sequence

from . import snapshot
from .collector import paused_gc
from .derived import GENESIS, DerivedState, Progress, Summarizer, default_summary
from .derived.pending import Deriver
from .embed import Embedder, default_embedder, embedder_named
from .errors import GemError, InvalidInput, LostCommits, TransitionRejected, WriteConflict
from .numeric import single_threaded
from .pipeline import DEFAULT, Pipeline
from .policy import PolicySet, catalogue, load_sources
from .resolve import Resolver
from .runtime import FactsDropped, PolicyRuntime, available_actions
from .state.cache import CommittedCache
from .state.committed import Counters, Services
from .state.transition import Transition
from .store import GraphStore, queries
from .store.schema import SCHEMA_VERSION

log = logging.getLogger("gem")
Clock = Callable[[], datetime]

DEFAULT_SETTINGS: dict[str, Any] = {name: sig.default for name, sig in catalogue.SETTINGS.items()}


@dataclass
class Governance:
    """The policies in force and their index by event. A memory whose scopes are separate
    stores (FalkorDB: a graph per scope) shares one between its scopes. `install` replaces
    both at once, and a transition keeps the ones it started with."""
    policies: PolicySet | None = None
    by_event: dict[str, list[Any]] = field(default_factory=dict)

    def install(self, policies: PolicySet | None) -> None:
        by_event: dict[str, list[Any]] = {}
        for policy in policies.policies if policies is not None else ():
            for event in policy.events:
                by_event.setdefault(event, []).append(policy)
        self.policies, self.by_event = policies, by_event


@dataclass
class SharedState:
    """What gem keeps about one database in a process, shared by its handles."""
    cache: CommittedCache
    derived: DerivedState
    embedder_name: str
    governance: Governance = field(default_factory=Governance)

    @property
    def policies(self) -> PolicySet | None:
        return self.governance.policies

    def install(self, policies: PolicySet | None) -> None:
        self.governance.install(policies)

    def policies_for(self, event: str) -> Sequence[Any]:
        return self.governance.by_event.get(event, ())


def open_shared(store: GraphStore, embedder: Embedder, progress: Progress | None,
                accept_head: bool = False) -> SharedState:
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
    check_head(store, accept_head)
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
        # The ids before the counters: on a store other processes write these are two queries,
        # and a commit between them raises both the ids and the counters, never the ids alone.
        highest = queries.highest_ids(tx)
        counters = queries.latest_counters(tx)
    for (scope, kind), top in highest.items():
        have = counters.get(scope, {}).get(kind)
        if have is None:
            raise GemError(f"{store.path!r}: scope {scope!r} holds {kind} rows but the transition "
                           "log has no record of them: the log was deleted or cut, so this "
                           "database cannot be trusted (restore it from a backup)")
        if have < top:
            raise GemError(f"{store.path!r}: the log's {kind} counter of scope {scope!r} ({have}) "
                           f"is behind the highest {kind} id ({top}): the log was tampered with")


def check_head(store: GraphStore, accept: bool = False) -> None:
    """Refuse a database whose log lacks the last commit acknowledged on it (the head the
    engine wrote to `<db>.gem-head` after it, gem/store/owner.py): its files were replaced by
    older ones, and what was acknowledged since is gone. `accept` takes the log as it is.
    Then the file names the log's head (a log ahead of it: a crash came between a commit
    and its record, and nothing was lost)."""
    head = store.head_file
    if head is None:
        return
    with store.reading() as tx:
        last = queries.log_head(tx)
        last_hash = queries.record_hash(tx, last) if last else GENESIS
        if not accept:
            try:
                acknowledged = head.read()
            except ValueError as exc:
                raise LostCommits(store.path, None, str(exc)) from None
            if acknowledged is not None and acknowledged[0] > 0:
                seq, expected = acknowledged
                found = queries.record_hash(tx, seq)
                if found is None:
                    raise LostCommits(store.path, seq, f"the log ends at transition {last}")
                if found != expected:
                    raise LostCommits(store.path, seq, f"the log's transition {seq} is another one "
                                      f"(hash {found[:12]}..., acknowledged {expected[:12]}...)")
    head.write(last, last_hash or GENESIS)


class Engine:
    """Runs transitions on one store. `policy_home`: the engine of the store that holds the
    policies, when it is another (a scope's graph on FalkorDB: the default scope's)."""

    # On a store other processes write, a transition that lost the race to another process's
    # commit is run again on the caught-up state, up to this many times in all, after a short
    # random pause that grows with each loss (so that racing processes fall out of step).
    MAX_ATTEMPTS = 32
    MAX_PAUSE = 0.05  # seconds

    def __init__(self, store: GraphStore, embedder: Embedder, resolver: Resolver, clock: Clock,
                 summarizer: Summarizer | None = None, progress: Progress | None = None,
                 policy_home: "Engine | None" = None, accept_head: bool = False) -> None:
        self.store = store
        self.clock = clock
        self.services = Services(embedder, resolver, summarizer or default_summary)
        self.pipeline: Pipeline = DEFAULT
        self.policy_home = policy_home
        self.conflicts = 0  # transitions run again because another process committed first
        self.reviser: Callable[[Any], Any] | None = None  # asked by revise() (gem/memory.py)
        self.extractor: Callable[[Any], Any] | None = None  # asked by ingest() about episodes
        with store.lock:
            shared = store.shared_state
            if shared is None:
                shared = open_shared(store, embedder, progress, accept_head)
                store.shared_state = shared
            elif shared.embedder_name != embedder.name:
                raise InvalidInput(f"this database was embedded with {shared.embedder_name!r}; "
                                   f"open it with that embedder, not {embedder.name!r}")
        self.shared: SharedState = shared
        if policy_home is not None:
            shared.governance = policy_home.shared.governance
        # the search documents of what this handle commits, derived off the commit path
        self.deriver = Deriver(store.lock, lambda: (self.derived, self.cache),
                               lambda: self.store.closed, store.path,
                               default_summary if self.services.summarizer is default_summary
                               else None)

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
        governance = self.shared.governance
        policies, by_event = governance.policies, governance.by_event
        t.policies_for = lambda event: by_event.get(event, ())
        t.settings = self.evaluate_settings(t, policies)
        return t

    def now(self) -> datetime:
        """The time of the next transition: the clock's, or the last transition's if the clock
        went back (an NTP step, another process's clock): time in the log never decreases, so
        the newest statement is never filed as a late fact."""
        now = self.clock()
        last = self.derived.at
        return now if last is None or now >= last else last

    def evaluate_settings(self, t: Transition, policies: PolicySet | None) -> dict[str, Any]:
        """Every setting's value for this transition. A value out of its range (a half-life
        computed as 0, a negative merge similarity) rejects the transition: the engine never
        computes with it."""
        values = dict(DEFAULT_SETTINGS)
        if policies is not None:
            # A setting may read the state (`count(active_topics)`), whose reads decay salience
            # with `half_life`: while the settings are evaluated, they see the defaults.
            t.settings = dict(DEFAULT_SETTINGS)
            rt = PolicyRuntime(t)
            for name, expr in policies.settings.items():
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
        them, at the same time; each run drops at least one more fact, so this ends. On a
        store other processes write, it runs on the state caught up with their commits, and
        again (whole) if one of them committed to the same scope before its flush."""
        with self.deriver.in_use(), self.store.lock, paused_gc():
            self.store.check_open()
            started = time.perf_counter()
            dropped: dict[int, dict[str, Any]] = {}
            now = None
            attempt = 0
            while True:
                self.follow()
                t = self.transition(op, actor=actor, interaction=interaction, now=now,
                                    scope=scope)
                t.operator = operator
                t.event = event or op
                t.progress = progress
                t.dropped, t.skipping = dict(dropped), frozenset(dropped)
                try:
                    with single_threaded():
                        self.pipeline.run(t, self)
                    break
                except WriteConflict as exc:
                    lost: Exception = exc
                except Exception as exc:
                    # Its reads may have seen another process's commit that came after the
                    # state it follows: then neither a rejection, a drop nor an error is its
                    # verdict, and it runs again from the start.
                    if not self._overtaken():
                        if isinstance(exc, FactsDropped):
                            dropped, now = exc.dropped, t.now
                            continue
                        if isinstance(exc, TransitionRejected):
                            log.warning("gem transition %s (%s) rejected by %s on %s: %s", t.seq,
                                        op, exc.condition, exc.unit, exc.detail)
                        raise
                    lost = exc
                attempt += 1
                self.conflicts += 1
                if attempt >= self.MAX_ATTEMPTS:
                    raise WriteConflict(f"{op}: other processes committed to scope {scope!r} "
                                        f"first {attempt} times in a row; nothing was written "
                                        f"({lost})") from lost
                dropped, now = {}, None
                time.sleep(random.uniform(0, min(self.MAX_PAUSE, 0.001 * 2 ** attempt)))
            if t.log_record is not None and self.store.head_file is not None:
                self.store.head_file.write(t.seq, t.log_record["hash"])  # acknowledged
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
                              t.children, t.edges, t.moved)
            title_vectors = t.directory.title_vectors() if t.directory is not None else None
            self.derived.apply(t, title_vectors)
        except BaseException:
            governance = self.shared.governance
            self.store.shared_state = None
            self.shared = open_shared(self.store, self.services.embedder, None)
            self.shared.governance = governance
            self.store.shared_state = self.shared
            raise
        try:
            if self.store.shared_writers:  # derived while the cache has this commit's rows
                self.derived.scope(t.scope).derive_step(self.cache, self.derived.made_stale)
            else:
                self.deriver.committed(self.derived.scope(t.scope), self.cache)
        except Exception:  # the embedder failed before any index changed: the units stay
            log.warning("gem: deriving search documents after transition %s failed; the next "
                        "free-text retrieval derives them", t.seq, exc_info=True)

    def _overtaken(self) -> bool:
        """Whether another process committed after the log position this process follows
        (never on an embedded database: only this process writes it)."""
        if not self.store.shared_writers:
            return False
        with self.store.reading() as tx:
            return queries.record_hash(tx, self.derived.seq + 1) is not None

    def follow(self) -> None:
        """On a store other processes write (FalkorDB): take in what they committed after the
        position this process knows (the log records after it, gem/snapshot.py `catch_up`;
        the row cache is emptied, its rows may be stale), and the policies in force if they
        changed. One key lookup when nothing changed. Nothing to do on an embedded database:
        only this process writes it."""
        store = self.store
        if not store.shared_writers:
            return
        derived = self.derived
        with store.reading() as tx:
            moved = queries.record_hash(tx, derived.seq + 1) is not None
        if moved:
            snapshot.catch_up(derived, store, live=True)
            self.cache.clear()
        if moved or self.policy_home is not None:
            self._follow_policies()

    def _follow_policies(self) -> None:
        home = self.policy_home.store if self.policy_home is not None else self.store
        governance = self.shared.governance
        with home.reading() as tx:
            stamp = queries.meta_get(tx, "policy_set")
            if stamp is None or (governance.policies is not None and governance.policies.hash == stamp):
                return
            sources = queries.meta_get(tx, "policy_sources")
        if sources is not None:
            governance.install(load_sources([tuple(x) for x in json.loads(sources)],
                                            available_actions=available_actions()))

    def write_behind(self, *, stamp: bool = False) -> None:
        """Bring the stored salience columns up to date with the log (see gem/derived/).
        `stamp`: also when nothing is pending, so that the stored log position is the head's
        (an export carries it, and its import must not replay what is already written). On a
        store other processes write, only while the log's head is still this process's (a
        later writer's columns are newer; the log has everything anyway)."""
        from .store import queries
        with self.store.lock:
            derived = self.derived
            if self.store.closed or not (derived.pending_salience or
                                         (stamp and derived.salience_seq != derived.seq)):
                return
            rows = [(table, key, s, last) for key, (table, s, last) in
                    sorted(derived.pending_salience.items())]
            try:
                with self.store.transaction(after=(derived.seq, derived.hash)) as tx:
                    queries.write_salience(tx, rows, derived.seq)
            except WriteConflict:
                return
            derived.pending_salience.clear()
            derived.salience_seq = derived.seq

    def save_snapshot(self) -> None:
        """Save the derived state beside the database (temporary databases keep none)."""
        with self.store.lock:
            if not self.store.closed and self.store.keeps_snapshot and \
                    self.derived.saved_mark != self.derived.mark():
                snapshot.save(self.derived, self.store.path)

    def read(self, fn: Callable[[Transition], Any], scope: str = "default") -> Any:
        """A side-effect-free read of the committed state of a scope: no salience change, not
        an interaction, nothing logged."""
        with self.deriver.in_use(), self.store.lock, single_threaded(), paused_gc():
            self.store.check_open()
            attempt = 0
            while True:
                attempt += 1
                self.follow()
                try:
                    return fn(self.transition("read", scope=scope))
                except Exception:
                    # Its reads may have met another process's later commit (a row it
                    # deleted): read again on the caught-up state, as a transition runs again.
                    if attempt >= self.MAX_ATTEMPTS or not self._overtaken():
                        raise
                    self.conflicts += 1


def utc_now() -> datetime:
    return datetime.now(timezone.utc)
