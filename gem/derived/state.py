"""DerivedState: one ScopeState per scope, and what is global (log head, salience written behind)."""
from __future__ import annotations

import itertools
import json
import random
import time
from array import array
from datetime import datetime
from typing import TYPE_CHECKING, Any, Iterable

import numpy as np

from ..collector import paused_gc
from ..errors import StoreError
from ..store import GraphStore, queries
from ..store.schema import Row
from ..units import unit_table
from .documents import scanned_summaries, scope_of, unmoved
from .scope import ScopeState
from .tables import GENESIS, Progress, Summarizer

if TYPE_CHECKING:
    from ..embed import Embedder
    from ..state.cache import CommittedCache
    from ..state.transition import Transition


class DerivedState:
    """What gem derives from one database, shared by every handle on it in a process: the log's
    head, salience written behind, the last clean audit, and a `ScopeState` per scope."""

    REBUILD_ATTEMPTS = 50  # reads of a shared store's state that a commit overtook, at most

    def __init__(self, embedder: "Embedder") -> None:
        self.embedder = embedder
        self.seq = 0
        self.hash = GENESIS
        self.at: datetime | None = None  # the time of the log head: no transition is earlier
        self.scopes: dict[str, ScopeState] = {}
        self.audit_checkpoint: tuple[int, str] | None = None  # the log head of the last clean audit
        # Salience written behind: unit -> (table, strength, last access) changed since the
        # stored columns were last brought up to date (at log position `salience_seq`).
        self.pending_salience: dict[str, tuple[str, float, datetime]] = {}
        self.salience_seq = 0
        self.made_stale = 0  # units the last commit applied made stale (`derive_step`)
        self.saved_mark: tuple[Any, ...] | None = None  # `mark()` as the snapshot on disk has it

    def mark(self) -> tuple[Any, ...]:
        """What changes whenever the snapshot on disk stops describing this state: a commit, an
        audit, or derived work done lazily (a summary or a search document refreshed, units
        paired). Writing a snapshot at 100k topics costs seconds; a memory closed after reads
        alone need not write one."""
        return (self.seq, self.hash, self.salience_seq, self.audit_checkpoint, self.at,
                tuple((name, len(s.summaries), len(s.stale), s.saved_units is None, len(s.stale_units),
                       len(s.unpaired), s.paired_at) for name, s in sorted(self.scopes.items())))

    def set_edge_holders(self, tids: Iterable[str]) -> None:
        """Which topics have typed edges, in every scope (from a scan of the edges)."""
        for scope in self.scopes.values():
            scope.edge_holders = set()
        for tid in tids:
            self.scope(scope_of(tid)).edge_holders.add(tid)

    def scope(self, name: str) -> ScopeState:
        """The state of one scope (an empty one for a scope nothing was written to yet)."""
        state = self.scopes.get(name)
        if state is None:
            state = self.scopes[name] = ScopeState(name, self.embedder)
        return state

    # ------------------------------------------------------------------ salience, behind
    # Every read reinforces what it returns, so writing salience through would rewrite a row
    # per unit per read. A transition's log record carries the salience it changed (and the
    # hash chain covers it); the stored columns catch up in bulk, with the flush of the
    # transition that finds enough pending, and at close. Rows read from the database are
    # patched with what is pending (`patch`), and a rebuild replays the log past `salience_seq`.
    WRITE_BEHIND_UNITS = 4096
    WRITE_BEHIND_TRANSITIONS = 1024

    def salience_due(self, t: "Transition") -> list[tuple[str, str, float, Any]]:
        """The rows to write behind with this transition's flush (none until enough piled up)."""
        pending = dict(self.pending_salience)
        for key, table in t.salience.items():
            row = t.rows[table][key]
            assert row is not None
            pending[key] = (table, row["strength"], row["last_access"])
        for table in ("Topic", "Field", "Episode"):  # rows this transition deletes get no write
            for key in t.deleted[table]:
                pending.pop(key, None)
        if len(pending) < self.WRITE_BEHIND_UNITS and not t.write_behind_now and \
                t.seq - self.salience_seq < self.WRITE_BEHIND_TRANSITIONS:
            return []
        return [(table, key, s, last) for key, (table, s, last) in sorted(pending.items())]

    def patch(self, table: str, row: Row) -> Row:
        """A row read from the database, with the salience that is pending for it."""
        pending = self.pending_salience.get(row["id"])
        if pending is not None and pending[0] == table:
            row["strength"], row["last_access"] = pending[1], pending[2]
        return row

    # ------------------------------------------------------------------ after a commit
    def apply(self, t: "Transition", title_vectors: dict[str, np.ndarray] | None = None) -> None:
        """Take in a committed transition (its own rows are the proposed state it committed)."""
        if t.salience_written:
            self.pending_salience.clear()
            self.salience_seq = t.seq
        else:
            for key, table in t.salience.items():
                row = t.rows[table][key]
                assert row is not None
                self.pending_salience[key] = (table, row["strength"], row["last_access"])
        for table in ("Topic", "Field", "Episode"):
            for key in t.deleted[table]:
                self.pending_salience.pop(key, None)
        scope = self.scope(t.scope)
        stale = len(scope.stale_units)
        scope.take(t, title_vectors)
        self.made_stale = max(0, len(scope.stale_units) - stale)
        self.seq = t.seq
        self.at = t.now
        self.hash = t.log_record["hash"] if t.log_record else self.hash

    def refresh(self, cache: "CommittedCache", summarizer: Summarizer) -> None:
        """Every scope's stale summaries."""
        for scope in self.scopes.values():
            scope.refresh(cache, summarizer)

    def refresh_range(self, tx: Any, lo: int, hi: int, summarizer: Summarizer) -> int:
        """Refresh the stale summaries of the topics at node offsets [lo, hi), from one read
        of the range in `tx` (a backlog of them, a piece at a time: gem/derived/pending.py);
        how many."""
        scopes = dict(self.scopes)
        for scope in scopes.values():
            scope.lexical  # an unusable snapshot file makes every topic stale
        found = scanned_summaries(tx, lo, hi, summarizer,
                                  lambda name, tid: name in scopes and tid in scopes[name].stale)
        for name, texts in found.items():
            scopes[name].set_summaries(texts)
        return sum(map(len, found.values()))

    def refresh_units(self, cache: "CommittedCache") -> None:
        """Every scope's stale unit documents and index entries."""
        for scope in self.scopes.values():
            scope.refresh_units(cache)

    def fingerprint(self) -> dict[str, Any]:
        return {"seq": self.seq, "hash": self.hash, "at": self.at,
                "scopes": {name: s.fingerprint() for name, s in sorted(self.scopes.items())
                           if len(s.topics) or s.counters}}

    # ------------------------------------------------------------------ rebuild
    # Titles embedded and named at a time (a rebuild reads every table a piece at a time and
    # holds no more of its rows than this: at 100k topics the rows alone were GBs).
    TITLE_STEP = 10_000

    @classmethod
    @paused_gc()
    def rebuild(cls, store: GraphStore, embedder: "Embedder",
                progress: Progress | None = None) -> "DerivedState":
        """Everything derived, from the database alone (summaries are left stale: the first
        reader refreshes them), each table read and taken in a piece at a time."""
        attempt = 0
        while True:
            attempt += 1
            state = cls(embedder)
            with store.reading() as tx:
                state.salience_seq = int(queries.meta_get(tx, "salience_seq") or 0)
                last = queries.last_transition(tx)
                state._take_rows(tx, last, queries.latest_counters(tx), progress)
                # On a store other processes write, each read above is its own query: they
                # describe one state only if no commit, and no write-behind of the salience
                # columns, came between the first and the last.
                if not store.shared_writers or (
                        unmoved(tx, last) and
                        int(queries.meta_get(tx, "salience_seq") or 0) == state.salience_seq):
                    return state
            if attempt >= cls.REBUILD_ATTEMPTS:
                raise StoreError(f"{store.path!r}: other processes kept committing while this "
                                 f"one read the state ({attempt} times); open it again")
            time.sleep(random.uniform(0, 0.002 * attempt))

    def _take_rows(self, tx: Any, last: Row | None, counters: dict[str, dict[str, int]],
                   progress: Progress | None) -> None:
        """Read the state's rows (`rebuild`), patched with the salience the log has past the
        stored columns."""
        for salience, writes in queries.salience_since(tx, self.salience_seq):  # not stored yet
            for key, (strength, last_access) in json.loads(salience or "{}").items():
                self.pending_salience[key] = (unit_table(key), strength,
                                              datetime.fromisoformat(last_access))
            for key, digest in json.loads(writes or "{}").items():
                if digest is None:  # deleted later: nothing of it is pending (as after `apply`)
                    self.pending_salience.pop(key, None)
        if last is not None:
            self.seq, self.hash, self.at = last["seq"], last["hash"], last["at"]
        for name, values in counters.items():
            self.scope(name).counters = values
        total = queries.count(tx, "Topic") if progress is not None else 0
        done = 0
        topics = queries.stream_scan(tx, "Topic", ("id", "title", "aliases", "status", "strength",
                                                   "last_access", "scope"), by_seq=True)
        while chunk := list(itertools.islice(topics, self.TITLE_STEP)):
            for row in chunk:
                scope = self.scope(row["scope"])
                scope._put_topic(self.patch("Topic", row))
                scope.stale[row["id"]] = None
            for name in dict.fromkeys(r["scope"] for r in chunk):
                self.scope(name)._put_names([r for r in chunk if r["scope"] == name], {})
            done += len(chunk)
            if progress is not None:
                progress("index titles", done, total)
        for row in queries.stream_scan(tx, "Field", ("id", "topic_id", "status", "strength",
                                                     "last_access", "labels")):
            scope = self.scope(scope_of(row["id"]))
            scope._put_field(self.patch("Field", row))
            scope.stale_units[row["id"]] = None
        for row in queries.stream_scan(tx, "Episode", ("id", "status", "strength", "last_access",
                                                       "scope"), by_seq=True):
            scope = self.scope(row["scope"])
            scope._put_episode(self.patch("Episode", row))
            scope.stale_units[row["id"]] = None
        for g in queries.scan(tx, "Flag", "n.status = 'open'", columns=("topic_id",)):
            scope = self.scope(scope_of(g["topic_id"]))
            scope.open_flags[g["topic_id"]] = scope.open_flags.get(g["topic_id"], 0) + 1
        self.set_edge_holders(queries.edge_holders(tx))
        for seq, units in queries.touches(tx):
            for tid in {unit.split("/", 1)[0] for unit in units}:
                self.scope(scope_of(tid)).touched_by.setdefault(tid, array("q")).append(seq)
