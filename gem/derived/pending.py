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
itself, so a first reader never derives more than BACKLOG.
"""
from __future__ import annotations

import logging
import threading
import time
from typing import TYPE_CHECKING, Callable

from .scope import ScopeState

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

    def __init__(self, lock: threading.RLock,
                 state: Callable[[], tuple["DerivedState", "CommittedCache"]],
                 closed: Callable[[], bool], name: str) -> None:
        self._lock = lock
        self._state = state
        self._closed = closed
        self._name = name
        self._wake = threading.Event()
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
        if due(scope) and not self._stopping:
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name=f"gem-derive {self._name}",
                                                daemon=True)
                self._thread.start()
            self._wake.set()

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

    def _step(self) -> None:
        derived, cache = self._state()
        scope = next((s for s in derived.scopes.values() if due(s)), None)
        if scope is None:
            self._wake.clear()  # a commit sets it again, under this lock
            return
        try:
            scope.refresh_units(cache, self.BATCH)
        except Exception:  # the embedder failed before any index changed
            log.warning("gem: deriving search documents in the background failed; the next "
                        "free-text retrieval derives them", exc_info=True)
            self._wake.clear()
