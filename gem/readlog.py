"""Reads written behind: a retrieval whose only effect is salience waits to be committed.

Every retrieval is a transition (C6: it reinforces what it returns), and most change nothing
but salience and the interaction count, which the log record carries (salience columns are
written behind, gem/derived/). Committing that record alone cost a third of a structured
retrieval (BEGIN, one CREATE, COMMIT with the engine's log fdatasync). Such a record is held
here instead, with its seq and its hash already chained, in log order, and written:

- first, in the engine transaction of the next transition that writes anything (so every
  write commits every read before it: the log on disk is always a prefix of the process's
  log, its chain whole);
- by `Engine.sync()`: at close, export, compaction, copy, `head()`, audits and log reads,
  and before an erasure (whose redaction reads the log);
- when `LIMIT` records wait (that read commits with them), and after `IDLE` seconds
  without another read (a timer).

The process's state takes a held read in at once (row cache, pending salience, counters), so
the next read sees its reinforcement. A crash loses at most the held records: the
reinforcement and interaction count of the last reads, never an acknowledged write; the head
acknowledged in `<db>.gem-head` only ever names a committed record. Only embedded databases
hold reads: where other processes write (FalkorDB) every transition commits at once.
"""
from __future__ import annotations

import logging
import threading
import time
from typing import TYPE_CHECKING, Any, Callable

from .store import queries
from .store.schema import Row

if TYPE_CHECKING:
    from .engine import Engine
    from .pipeline import Writes
    from .state.transition import Transition

log = logging.getLogger("gem")


class ReadLog:
    """The log records of reads not committed yet, in log order (one per database in a
    process: every handle's reads go in the same log)."""

    LIMIT = 256   # records held at most: the next read commits them all
    IDLE = 1.0    # seconds without a new held read before a timer commits them

    def __init__(self) -> None:
        self.records: list[Row] = []
        self._timer: threading.Timer | None = None
        self._last = 0.0  # when the last read was held (time.monotonic)
        self._sync: Callable[[], None] | None = None
        self._lock = threading.Lock()  # the timer's state, set from any thread

    def hold(self, t: "Transition", writes: "Writes", engine: "Engine") -> bool:
        """Hold `t`'s record instead of committing it, when `t` is a read that writes nothing
        else: no row, edge or other store write, no salience written behind now."""
        if t.op != "retrieve" or engine.store.shared_writers or writes.log_record is None \
                or len(self.records) >= self.LIMIT or not only_logged(writes):
            return False
        self.records.append(writes.log_record)
        t.record_held = True
        self._arm(engine.sync)
        return True

    def write(self, tx: Any) -> None:
        """Append the held records, oldest first, in the caller's engine transaction."""
        queries.append_transitions(tx, self.records)

    def written(self) -> None:
        """The transaction that wrote them committed."""
        self.records.clear()

    def _arm(self, sync: Callable[[], None]) -> None:
        # One timer at a time (a thread per read would cost more than the commit it saves):
        # when it fires before reads stopped for IDLE seconds, it waits out the rest. It
        # syncs through the handle that held the last read (another may be closed by then).
        with self._lock:
            self._last, self._sync = time.monotonic(), sync
            if self._timer is None:
                self._start(self.IDLE)

    def _start(self, delay: float) -> None:
        self._timer = threading.Timer(delay, self._fire)
        self._timer.daemon = True
        self._timer.start()

    def _fire(self) -> None:
        with self._lock:
            rest = self._last + self.IDLE - time.monotonic()
            if rest > 0:
                self._start(rest)
                return
            self._timer = None
            sync = self._sync
        if sync is None:
            return
        try:
            sync()
        except Exception:  # the next write, sync or close commits them
            log.warning("gem: committing the reads held behind failed", exc_info=True)


def only_logged(w: "Writes") -> bool:
    """Whether a transition's writes are its log record alone."""
    return not (any(w.created.values()) or any(w.updated.values()) or any(w.deleted.values())
                or any(w.rels_added.values()) or any(w.rels_removed.values())
                or w.store_writes or w.salience or w.salience_seq is not None)
