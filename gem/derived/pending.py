"""Deriving the search documents of changed units off the commit path (issue 28 item 3).

A commit records the units whose document it changed as pending (`ScopeState.stale_units`, an
ordered set) and returns. A worker thread owned by the handle derives them in small batches,
each under the store's lock, from the row cache, which holds the rows the commit just wrote (a
row it lost is read on the handle's own connection, under that lock, as a reader would). Every
reader of the unit layer first derives whatever is still pending, in one vectorised batch
(`ScopeState.refresh_units`), and readers hold the same lock: none sees half a batch, and each
sees exactly what a rebuild gives.

The worker and the caller share the GIL, so the worker adds throughput only where the caller
waits outside Python (the engine's statements, the caller's own I/O); measured at 10k topics it
takes the derivation out of a batch ingest's time, and it has drained everything before the
benchmark's first free-text query. A caller that commits back to back leaves it neither
the lock nor the time: a commit that finds more than BACKLOG units pending derives the excess
itself, so a first reader never derives more than BACKLOG. Stale summaries, which a reader
derives for itself when it needs them, wait until the memory has been left alone for QUIET.
"""
from __future__ import annotations

import itertools
import logging
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Callable

from ..store import queries
from .documents import cached_whole
from .scope import ScopeState
from .tables import Summarizer

if TYPE_CHECKING:
    from ..state.cache import CommittedCache
    from .state import DerivedState

log = logging.getLogger("gem")


def due(scope: ScopeState) -> bool:
    """Whether the scope's pending units are worth deriving before a reader asks: a unit layer
    still in the snapshot's files waits for its first reader until more than UNIT_STEP units
    are pending (a process that writes a little and never searches does not read it)."""
    return bool(scope.stale_units) and (scope.units_loaded or
                                        len(scope.stale_units) > ScopeState.UNIT_STEP)


class Deriver:
    """The worker that derives one handle's pending units. `state()` gives the derived state
    and row cache as they are now (a failed commit replaces both); `closed()` says whether the
    store is closed (nothing is derived then)."""

    BATCH = 128  # units a step derives: the longest a commit or a query waits for the lock
    BACKLOG = 2048  # pending units a commit leaves at most (a batch ingest's worth)
    POLL = 0.05  # seconds between looks at `stop` while the lock is held elsewhere

    # Stale summaries (a topic's title and current values: gem/derived/documents.py): up to
    # SUMMARY_KEYS pending are derived SUMMARY_BATCH topics a step from the row cache, which
    # holds what the commits that made them stale wrote (~0.5 ms a topic; those it no longer
    # holds whole are left to their readers); a larger backlog (a rebuild, an older snapshot:
    # every topic) is read from the engine SUMMARY_RANGE topics a step, each topic whole (at
    # 100k topics ~25 ms of CPU a step, where reading topics by key costs 2-25 ms each), and a
    # range with none stale costs one read of its topics' ids. So a query rarely reads whole
    # topics to summarise them. A step holds the store's lock, which a query waits for: at 512
    # topics a step, queries during a drain at 100k took 6x their time after it (p50 372 ms).
    SUMMARY_KEYS = 1024
    SUMMARY_BATCH = 64
    SUMMARY_RANGE = 128
    # Summaries wait for the memory to be left alone this long (seconds since a read or a
    # transition began or ended): a reader derives the few it needs itself, and a step would
    # hold the lock and share the GIL with it. At 100k topics, back-to-back queries during a
    # drain took 3x their time after it (p50 175 ms against 53) without this.
    QUIET = 0.05

    def __init__(self, lock: threading.RLock,
                 state: Callable[[], tuple["DerivedState", "CommittedCache"]],
                 closed: Callable[[], bool], name: str,
                 summarizer: Summarizer | None = None) -> None:
        """`summarizer`: the one to derive stale summaries with in the background, or None to
        leave them to their readers (a model's summarizer is called only for what is read)."""
        self._lock = lock
        self._state = state
        self._closed = closed
        self._name = name
        self._summarizer = summarizer
        self._range: tuple[int, int, int] | None = None  # a pass: next offset, end, derived
        self._wake = threading.Event()
        self._users = 0  # reads and transitions running or waiting for the lock
        self._users_lock = threading.Lock()
        self._used_at = 0.0  # time.monotonic() the last of them ended
        self._stopping = False
        self._thread: threading.Thread | None = None

    @property
    def running(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    def committed(self, scope: ScopeState, cache: "CommittedCache") -> None:
        """After a commit, under the store's lock: keep the backlog bounded, wake the worker."""
        excess = len(scope.stale_units) - self.BACKLOG
        if excess > 0:
            scope.refresh_units(cache, excess)
        if (due(scope) or self._summaries_due(scope)) and not self._stopping:
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name=f"gem-derive {self._name}",
                                                daemon=True)
                self._thread.start()
            self._wake.set()

    @contextmanager
    def in_use(self) -> Iterator[None]:
        """Around a read or a transition (the wait for the lock included): summaries wait
        until QUIET after the last one ends."""
        with self._users_lock:
            self._users += 1
        try:
            yield
        finally:
            with self._users_lock:
                self._users -= 1
            self._used_at = time.monotonic()

    def _quiet_in(self) -> float:
        """Seconds until a summaries step may run (0: now)."""
        if self._users:
            return self.QUIET
        return max(0.0, self.QUIET - (time.monotonic() - self._used_at))

    def stop(self) -> None:
        """Stop the worker and wait for it (it finishes the step it is in); then derive what is
        pending in a loaded unit layer, so the snapshot saved next holds it."""
        self._stopping = True
        self._wake.set()
        if self._thread is not None:
            self._thread.join()
            self._thread = None
        with self._lock:
            if self._closed():
                return
            derived, cache = self._state()
            try:
                for scope in list(derived.scopes.values()):
                    if scope.stale_units and scope.units_loaded:
                        scope.refresh_units(cache)
            except Exception:  # they stay pending, and the snapshot says so
                log.warning("gem: deriving search documents at close failed; the next "
                            "free-text retrieval derives them", exc_info=True)

    def _run(self) -> None:
        while True:
            # Let a thread waiting for the lock take it between steps: it holds the GIL
            # only once this one lets go of it, and the lock is not fair.
            time.sleep(0)
            self._wake.wait()
            self._wait_quiet()
            # A thread that closes the memory while it holds the lock waits for this one:
            # the wait for the lock gives up when asked to stop.
            while not self._lock.acquire(timeout=self.POLL):
                if self._stopping:
                    return
            try:
                if self._stopping or self._closed():
                    return
                self._step()
            finally:
                self._lock.release()

    def _wait_quiet(self) -> None:
        """Before a summaries step (no unit is due), wait until the memory has been left alone
        for QUIET (units are not held back: a batch ingest has them derived while it waits for
        the engine). Read without the lock: it only decides when to look again."""
        while not self._stopping:
            derived, _ = self._state()
            if any(due(s) for s in list(derived.scopes.values())):
                return
            wait = self._quiet_in()
            if not wait:
                return
            time.sleep(wait)

    def _summaries_due(self, scope: ScopeState) -> bool:
        """Whether the scope's stale summaries are worth deriving before a reader asks: as
        with units (`due`), a summaries' index still in the snapshot's files waits for its
        first reader until more than UNIT_STEP are stale."""
        return self._summarizer is not None and bool(scope.stale) and (
            scope.lexical_loaded or len(scope.stale) > ScopeState.UNIT_STEP)

    def _step(self) -> None:
        derived, cache = self._state()
        scope = next((s for s in derived.scopes.values() if due(s)), None)
        try:
            if scope is not None:
                scope.refresh_units(cache, self.BATCH)
            elif self._quiet_in():
                return  # a reader came while this one waited for the lock: after it
            elif not self._summaries_step(derived, cache):
                self._wake.clear()  # a commit sets it again, under this lock
        except Exception:  # the embedder failed before any index changed
            log.warning("gem: deriving search documents in the background failed; the next "
                        "free-text retrieval derives them", exc_info=True)
            self._wake.clear()

    def _summaries_step(self, derived: "DerivedState", cache: "CommittedCache") -> bool:
        """Derive a step of the stale summaries; False when there is none to derive."""
        summarizer = self._summarizer
        pending = [s for s in derived.scopes.values() if self._summaries_due(s)]
        if summarizer is None or not pending:
            self._range = None
            return False
        if self._range is None and sum(len(s.stale) for s in pending) <= self.SUMMARY_KEYS:
            # only those the cache holds whole: reading the others back would evict newer
            # rows (the cache keeps its budget after commits), and costs what a reader pays
            for scope in pending:
                ready = list(itertools.islice((t for t in scope.stale if cached_whole(cache, t)),
                                              self.SUMMARY_BATCH))
                if ready:
                    scope.refresh(cache, summarizer, ready)
                    return True
            return False
        # A pass over every topic, a range of node offsets a step; each step reads its topics
        # whole, under the lock, so what it derives is what is committed. Topics made stale
        # behind it are left to the next pass, or to the steps by key.
        with cache.store.reading() as tx:
            start, end, done = self._range or (0, queries.topic_offset_end(tx), 0)
            stop = min(end, start + self.SUMMARY_RANGE)
            done += derived.refresh_range(tx, start, stop, summarizer)
        self._range = None if stop >= end else (stop, end, done)
        return stop < end or done > 0  # a pass that found none of them is not repeated
