"""Derived state: everything gem computes from the database to answer quickly.

The database is the single source of truth. Derived from it, and kept here, per scope
(`ScopeState`; `DerivedState` holds one per scope and what is global: the log head, the
salience written behind, the last clean audit):

- the name directory (titles and aliases, exact and by canonical key -> topics) and title vectors,
  which the resolver reads to choose a fact's host topic;
- topic summaries (title and current visible values, by the summariser) and the lexical
  (BM25) and vector indexes over them, which free-text retrieval searches;
- salience columns (strength, last access, status) of every topic and field, which answer the
  global questions no key lookup can: which units faded below a salience, which topics are the
  most salient, how many fields are active (C5); and the labels of the fields that have any,
  which give them their own half-life (`label_half_life`);
- the topics with open revision flags, the id counters, and which log records touched each
  topic and episode (an erasure redacts them);
- the unit indexes free-text retrieval ranks: one document per field (its topic's names, its
  name and current value) and per episode (speaker and text), in a lexical index over search
  terms and a vector index, with each unit's valid time (for `between`). Forgotten units stay
  in them, so a strong cue can still recall them (issue 10); like summaries they are
  refreshed lazily, by the next free-text retrieval;
- globally, the log head (sequence number, hash, and time: no transition is earlier).

It changes only after a commit (`apply`), from the committed transition's rows, so a rejected
transition leaves no trace here. Summaries and their index entries are refreshed lazily: a
commit marks the topics whose content changed as stale, and whatever reads summaries (a
free-text retrieval, `inspect`, `similarity`) refreshes the stale ones first, in one batch,
from committed state. All of it can be saved beside the database (`save`) and loaded at open
when it matches the log's head; a stale snapshot catches up from the log.
"""
from __future__ import annotations

import hashlib
import itertools
import json
import math
import random
import time
from array import array
import os
from datetime import datetime, timedelta, timezone
from typing import TYPE_CHECKING, Any, Callable, Iterable, Protocol, Sequence

import numpy as np

from .collector import paused_gc
from .errors import SnapshotError, StoreError
from .history import is_retraction
from .index import LexicalIndex, VectorIndex
from .places import PlaceGrid, unit_places
from .store import GraphStore, queries
from .store.schema import Row
from .text import name_key, value_text
from .units import unit_table

if TYPE_CHECKING:
    from .embed import Embedder
    from .state.cache import CommittedCache
    from .state.transition import Transition

Summarizer = Callable[[str, dict[str, Any]], str]
Progress = Callable[[str, int, int], None]
GENESIS = "0" * 64
_EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)
DEFAULT_SCOPE = "default"
TOPIC_STATUS = ("active", "archived")
FIELD_STATUS = ("active", "compressed", "hidden")
EPISODE_STATUS = ("active", "hidden")


def default_summary(title: str, values: dict[str, Any]) -> str:
    """A deterministic summary: the title and the current value of each visible field."""
    parts = [f"{name}: {value_text(value)}" for name, value in sorted(values.items())]
    return title + (" — " + "; ".join(parts) if parts else "")


def _seconds(when: datetime | None) -> float:
    return math.nan if when is None else (when - _EPOCH).total_seconds()


class SalienceTable:
    """(strength, last access, status) of every unit of one kind, as numpy columns.

    `row_of` (unit id -> row) is built from `ids` when it is first asked for: a loaded
    snapshot's table of 1M fields takes 0.25 s to put into a dict (one cache miss per
    insert), a quarter of an open at 100k topics, and a process that only reads topics
    never needs it."""

    def __init__(self, statuses: Sequence[str]) -> None:
        self.codes = {s: i for i, s in enumerate(statuses)}
        self.names = tuple(statuses)
        self.ids: list[str] = []
        self._row_of: dict[str, int] | None = {}
        self.strength = np.zeros(64)
        self.last = np.zeros(64)
        self.status = np.zeros(64, dtype=np.int8)
        self.owner = np.full(64, -1, dtype=np.int64)  # a field's topic row in the topic table

    @property
    def row_of(self) -> dict[str, int]:
        if self._row_of is None:
            ids = self.ids
            row_of = dict(zip(ids, range(len(ids))))
            row_of.pop("", None)  # the rows of erased units stay, empty (`remove`)
            if len(row_of) != len(ids) - ids.count(""):
                raise SnapshotError("the snapshot's salience table holds an id twice")
            self._row_of = row_of
        return self._row_of

    def adopt(self, ids: list[str]) -> None:
        """Take `ids` as the rows' ids (a loaded snapshot's), building `row_of` when needed."""
        self.ids = ids
        self._row_of = None

    def __len__(self) -> int:
        return len(self.ids)

    def _grow(self) -> None:
        n = self.strength.shape[0] * 2
        for name in ("strength", "last", "status", "owner"):
            old = getattr(self, name)
            new = np.full(n, -1 if name == "owner" else 0, dtype=old.dtype)
            new[:old.shape[0]] = old
            setattr(self, name, new)

    def put(self, key: str, strength: float | None, last: datetime | None, status: str,
            owner: int = -1) -> None:
        row = self.row_of.get(key)
        if row is None:
            row = len(self.ids)
            if row >= self.strength.shape[0]:
                self._grow()
            self.ids.append(key)
            self.row_of[key] = row
        self.strength[row] = strength or 0.0
        self.last[row] = _seconds(last)
        self.status[row] = self.codes[status]
        self.owner[row] = owner

    def status_of(self, key: str) -> str | None:
        row = self.row_of.get(key)
        return None if row is None else self.names[int(self.status[row])]

    def remove(self, key: str) -> None:
        """Forget a unit (erasure). Its row stays, empty and matched by no status, so the rows
        of the others (and fields' owner rows) do not move."""
        row = self.row_of.pop(key, None)
        if row is not None:
            self.ids[row] = ""
            self.status[row] = len(self.names)

    def salience(self, now: datetime, half_life: timedelta,
                 per_row: np.ndarray | None = None) -> np.ndarray:
        """Salience now of every row: s = 1 - exp(-x), decayed by 2^(-age / half_life), with
        `per_row` half-lives in seconds where given (inf: no decay)."""
        n = len(self.ids)
        s = -np.expm1(-np.maximum(self.strength[:n], 0.0))
        age = np.maximum(_seconds(now) - self.last[:n], 0.0)
        age = np.where(np.isnan(age), 0.0, age)
        return s * np.exp2(-age / (half_life.total_seconds() if per_row is None else per_row))

    def live(self) -> np.ndarray:
        """Which rows hold a unit: not those an erasure emptied (`remove`)."""
        return self.status[:len(self.ids)] < len(self.names)

    def mask(self, statuses: Iterable[str]) -> np.ndarray:
        codes = [self.codes[s] for s in statuses]
        return np.isin(self.status[:len(self.ids)], codes)


# The selections by salience (field_ids_where, ...) promise a superset of the units whose
# salience now is under the bound as the transition computes it, one unit at a time
# (gem/salience.py), and numpy computes the same decay with other operations: a unit within a
# few ulps of the bound could otherwise be left out. The policy's WHERE decides the rest.
_SALIENCE_SLACK = 1e-12


def topic_seq(tid: str) -> int:
    """A topic's creation order in its scope, from its id ("t<seq>", after the scope's prefix)."""
    digits = tid.rsplit(":", 1)[-1][1:]
    return int(digits) if digits.isdigit() else -1


class NameDirectory:
    """Titles and aliases -> the topics that hold them, by exact name and by canonical key
    (gem.text.name_key). A name may have several holders: a merged-away topic keeps its title,
    which its survivor holds as an alias. Holders are kept in creation order; which one a lookup
    finds is decided by the reader (`choose`), who knows the topics' statuses."""

    def __init__(self) -> None:
        self.by_name: dict[str, list[str]] = {}
        self.by_key: dict[str, list[str]] = {}
        self.names_of: dict[str, list[str]] = {}
        self.title_of: dict[str, str] = {}

    @staticmethod
    def _drop(index: dict[str, list[str]], key: str, tid: str) -> None:
        holders = index.get(key)
        if holders and tid in holders:
            holders.remove(tid)
            if not holders:
                del index[key]

    @staticmethod
    def _add(index: dict[str, list[str]], key: str, tid: str) -> None:
        holders = index.setdefault(key, [])
        if tid not in holders:
            holders.append(tid)
            holders.sort(key=topic_seq)

    @classmethod
    def of(cls, names_of: dict[str, list[str]],
           keys_of: dict[str, list[str]] | None = None) -> "NameDirectory":
        """The directory of topics' names (title first), built at once: what `set` for each
        does, without re-sorting holder lists one name at a time. `keys_of`: each topic's
        names' keys (gem.text.name_key), in the same order, when they are known."""
        directory = cls()
        by_name, by_key = directory.by_name, directory.by_key
        for tid, names in names_of.items():
            directory.names_of[tid] = names
            directory.title_of[tid] = names[0]
            keys = keys_of[tid] if keys_of is not None else [name_key(n) for n in names]
            if len(keys) != len(names):
                raise ValueError(f"topic {tid!r} has {len(names)} names but {len(keys)} keys")
            for name, key in zip(names, keys):
                # get-then-insert: setdefault would build an empty list for every name
                holders = by_name.get(name)
                if holders is None:
                    by_name[name] = [tid]
                elif tid not in holders:
                    holders.append(tid)
                holders = by_key.get(key)
                if holders is None:
                    by_key[key] = [tid]
                elif tid not in holders:
                    holders.append(tid)
        for index in (by_name, by_key):
            for holders in index.values():
                if len(holders) > 1:
                    holders.sort(key=topic_seq)
        return directory

    def drop(self, tid: str) -> None:
        """Forget every name of `tid` (it is renamed, or erased)."""
        for name in self.names_of.pop(tid, ()):
            self._drop(self.by_name, name, tid)
            self._drop(self.by_key, name_key(name), tid)
        self.title_of.pop(tid, None)

    def set(self, tid: str, title: str, aliases: Sequence[str]) -> None:
        self.drop(tid)
        self.names_of[tid] = [title, *aliases]
        for name in self.names_of[tid]:
            self._add(self.by_name, name, tid)
            self._add(self.by_key, name_key(name), tid)
        self.title_of[tid] = title

    def holders(self, name: str) -> list[str]:
        return self.by_name.get(name, [])

    def key_holders(self, key: str) -> list[str]:
        return self.by_key.get(key, [])


def choose(holders: Iterable[str], status: Callable[[str], str | None]) -> str | None:
    """The topic a name finds among its holders: an active one before an archived one (the
    survivor of a merge, not the copy it archived), then the oldest."""
    found = [(status(tid) != "active", topic_seq(tid), tid) for tid in holders
             if status(tid) is not None]
    return min(found)[2] if found else None


class UnitIndexes:
    """The unit layer of a scope: a field's or an episode's search document, its entries in the
    lexical and vector indexes, and its valid time (for `between`)."""

    def __init__(self, embedder: "Embedder") -> None:
        # k1 = 0.9, b = 0.4 (Anserini's defaults for short passages): one turn or one value is
        # a short document; measured on LoCoMo turns, any@10 0.655 -> 0.672 over k1 1.2, b 0.75.
        self.lexical = LexicalIndex(0.9, 0.4, analyzer="search")
        self.vectors = VectorIndex(embedder.dim)
        self.docs: dict[str, str] = {}
        self.valid: dict[str, float] = {}


class SavedUnits(Protocol):
    """A scope's unit layer in snapshot files (gem/snapshot.py)."""

    def load(self, embedder: "Embedder") -> UnitIndexes: ...


def said_key(text: str, source: str, speaker: str | None, at: datetime) -> bytes:
    """What makes an episode the one it is: what was said, where, by whom and when."""
    said = json.dumps([text, source, speaker, at.astimezone(timezone.utc).isoformat()])
    return hashlib.blake2b(said.encode("utf-8"), digest_size=16).digest()


class ScopeState:
    """What gem derives from the units of one scope. Nothing here depends on another scope, so
    what a tenant sees (rankings, document frequencies, title matches, ids, salience, C5) is
    the same whatever other tenants do."""

    def __init__(self, name: str, embedder: "Embedder") -> None:
        self.name = name
        self.embedder = embedder
        self.counters: dict[str, int] = {}  # id sequences and interactions of this scope
        self.names = NameDirectory()
        # The resolver needs the exact nearest title (a match decides where a fact goes).
        self.title_vectors = VectorIndex(embedder.dim, approximate_above=None)
        self.lexical = LexicalIndex()
        self.vectors = VectorIndex(embedder.dim)
        self.summaries: dict[str, str] = {}
        self.stale: dict[str, None] = {}  # topics whose summary and index entries are out of date
        self.topics = SalienceTable(TOPIC_STATUS)
        self.fields = SalienceTable(FIELD_STATUS)
        self.episodes = SalienceTable(EPISODE_STATUS)
        # The unit indexes (fields and episodes), their documents and valid times; units in
        # `stale_units` are re-derived by the next reader (`refresh_units`).
        self._units: UnitIndexes | None = UnitIndexes(embedder)
        # The files that hold the unit layer as it is (None once it changed since they were
        # written or read). A loaded snapshot leaves the layer on disk until something reads it:
        # at 100k topics it is 1M documents and vectors, most of a snapshot's bytes and of the
        # time to open one, and most opens never search units.
        self.saved_units: SavedUnits | None = None
        self.stale_units: dict[str, None] = {}
        # topic -> its fields in creation order: derived from the field table's ids when first
        # asked for (topic status changes, C5's bound, erasure), not saved (19 of the 27 MB of a
        # 100k-topic snapshot's state file) nor kept up to date until then
        self._fields_by_topic: dict[str, list[str]] | None = {}
        # Labels of the fields that have any (field id -> labels), and for each label the rows
        # of the field table that carry it: a label's half-life applies to all of them at once.
        self.field_labels: dict[str, tuple[str, ...]] = {}
        self._label_rows: dict[str, np.ndarray] | None = None
        self.open_flags: dict[str, int] = {}
        # What each episode said, where, by whom and when (`said_key`) -> its id: an ingest
        # stores an episode it repeats only once. Built by one scan of the scope's episodes
        # when an ingest first needs it (not saved), then kept by `_put_episode`; an erasure
        # drops it (rare). A hit is checked against the episode's row, so a stale one is
        # harmless.
        self.said: dict[bytes, str] | None = None
        # The placed units by geohash (gem/places.py): built by one scan when a `near=` query
        # first needs it (not saved), then kept by `refresh_units` and `_forget_unit`.
        self.places: PlaceGrid | None = None
        self._active_fields: int | None = None
        # Duplicate detection compares only titles that changed since its last pass, unless its
        # threshold changed (gem/operators/revise.py).
        self.unpaired: dict[str, None] = {}
        self.paired_at: float | None = None
        # topic -> the log records that touched it (an erasure redacts them)
        self.touched_by: dict[str, array] = {}
        # The topics with any typed edge: a transition reads the edges of no other topic (most
        # have none; reading that they have none cost two statements). Found by one scan of
        # the edges when the state is loaded or rebuilt, not saved.
        self.edge_holders: set[str] = set()

    # ------------------------------------------------------------------ the unit layer
    def units(self) -> "UnitIndexes":
        """The unit layer, read from the snapshot's files when first asked for; if they are
        unusable, an empty one with every unit stale, which the next reader derives again from
        the database (as a rebuild does)."""
        if self._units is None:
            assert self.saved_units is not None
            try:
                self._units = self.saved_units.load(self.embedder)
            except SnapshotError:
                self._units = UnitIndexes(self.embedder)
                self.saved_units = None
                self.stale_units.update(dict.fromkeys(
                    u for table in (self.fields, self.episodes) for u in table.ids if u))
        return self._units

    def changed_units(self) -> "UnitIndexes":
        """The unit layer, about to change: the files that held it no longer do."""
        units = self.units()
        self.saved_units = None
        return units

    @property
    def units_loaded(self) -> bool:
        return self._units is not None

    @property
    def unit_lexical(self) -> LexicalIndex:
        return self.units().lexical

    @property
    def unit_vectors(self) -> VectorIndex:
        return self.units().vectors

    @property
    def unit_docs(self) -> dict[str, str]:
        return self.units().docs

    @property
    def unit_valid(self) -> dict[str, float]:
        return self.units().valid

    # ------------------------------------------------------------------ the Committed view
    def topic_status(self, tid: str) -> str | None:
        return self.topics.status_of(tid)

    def has_edges(self, tid: str) -> bool:
        return tid in self.edge_holders

    def has_open_flags(self, tid: str) -> bool:
        return self.open_flags.get(tid, 0) > 0

    def field_status(self, fid: str) -> str | None:
        return self.fields.status_of(fid)

    def fields_of(self, tid: str) -> list[str]:
        return self.fields_by_topic.get(tid, [])

    def summary_stale(self, tid: str) -> bool:
        """Whether the topic's summary (and its index entries) wait for a refresh."""
        return tid in self.stale

    @property
    def fields_by_topic(self) -> dict[str, list[str]]:
        if self._fields_by_topic is None:
            grouped: dict[str, list[str]] = {}
            for fid in self.fields.ids:  # rows in the order fields were first put
                if fid:  # "": an erased field's row
                    grouped.setdefault(fid.split("/", 1)[0], []).append(fid)
            self._fields_by_topic = grouped
        return self._fields_by_topic

    def derive_fields_by_topic(self) -> None:
        """Group the fields by topic from the field table when next asked (a loaded table)."""
        self._fields_by_topic = None

    def _topic_active(self) -> np.ndarray:
        """For each field row: is its topic active?"""
        n = len(self.fields)
        owner = self.fields.owner[:n]
        active = np.zeros(n, dtype=bool)
        known = owner >= 0
        active[known] = self.topics.status[owner[known]] == 0
        return active

    def field_half_lives(self, half_life: timedelta,
                         by_label: dict[str, timedelta | None] | None) -> np.ndarray | None:
        """Each field row's half-life in seconds (inf: it does not fade) under the setting
        `label_half_life`, one vectorised step per label it names (gem/salience.py has the
        rule); None when no field's half-life differs from `half_life`."""
        if not by_label or not self.field_labels:
            return None
        if self._label_rows is None:
            rows: dict[str, list[int]] = {}
            for fid, labels in self.field_labels.items():
                for label in labels:
                    rows.setdefault(label, []).append(self.fields.row_of[fid])
            self._label_rows = {k: np.asarray(v, dtype=np.int64) for k, v in rows.items()}
        n = len(self.fields)
        shortest = np.full(n, np.inf)
        kept = np.zeros(n, dtype=bool)
        for label, duration in by_label.items():
            rows_of = self._label_rows.get(label)
            if rows_of is None:
                continue
            if duration is None:
                kept[rows_of] = True
            else:
                shortest[rows_of] = np.minimum(shortest[rows_of], duration.total_seconds())
        return np.where(np.isfinite(shortest), shortest,
                        np.where(kept, np.inf, half_life.total_seconds()))

    def field_salience(self, now: datetime, half_life: timedelta,
                       by_label: dict[str, timedelta | None] | None = None) -> np.ndarray:
        return self.fields.salience(now, half_life, self.field_half_lives(half_life, by_label))

    def field_ids_where(self, statuses: frozenset[str], below: float | None, now: datetime,
                        half_life: timedelta,
                        by_label: dict[str, timedelta | None] | None = None) -> list[str]:
        keep = self.fields.mask(statuses) & self._topic_active()
        if below is not None:
            keep &= self.field_salience(now, half_life, by_label) < below + _SALIENCE_SLACK
        return [self.fields.ids[i] for i in np.flatnonzero(keep).tolist()]

    def topic_ids_where(self, statuses: frozenset[str], below: float | None, now: datetime,
                        half_life: timedelta) -> list[str]:
        keep = self.topics.mask(statuses)
        if below is not None:
            keep &= self.topics.salience(now, half_life) < below + _SALIENCE_SLACK
        return [self.topics.ids[i] for i in np.flatnonzero(keep).tolist()]

    def active_field_count(self) -> int:
        if self._active_fields is None:
            self._active_fields = int(np.count_nonzero(self.fields.mask(("active",))
                                                       & self._topic_active()))
        return self._active_fields

    def flagged_topics(self) -> list[str]:
        return [tid for tid, n in self.open_flags.items() if n > 0]

    def episode_ids_where(self, statuses: frozenset[str], below: float | None, now: datetime,
                          half_life: timedelta) -> list[str]:
        keep = self.episodes.mask(statuses)
        if below is not None:
            keep &= self.episodes.salience(now, half_life) < below + _SALIENCE_SLACK
        return [self.episodes.ids[i] for i in np.flatnonzero(keep).tolist()]

    def unit_columns(self, table: str, ids: Sequence[str], now: datetime, half_life: timedelta,
                     by_label: dict[str, timedelta | None] | None = None
                     ) -> tuple[np.ndarray, list[str], list[tuple[str, ...]]]:
        """Committed salience now, status and labels of `ids` (all of `table`'s), for the
        tick plans (gem/operators/tick_plan.py)."""
        units = {"Topic": self.topics, "Field": self.fields, "Episode": self.episodes}[table]
        rows = np.fromiter((units.row_of[k] for k in ids), dtype=np.int64, count=len(ids))
        s = self.field_salience(now, half_life, by_label) if table == "Field" else \
            units.salience(now, half_life)
        names = units.names
        labels = [self.field_labels.get(k, ()) for k in ids] if table == "Field" else []
        return s[rows], [names[c] for c in units.status[rows].tolist()], labels

    def unit_salience(self, key: str, now: datetime, half_life: timedelta) -> float:
        """A field's or an episode's committed salience now (0 if unknown)."""
        table = self.episodes if unit_table(key) == "Episode" else self.fields
        row = table.row_of.get(key)
        if row is None:
            return 0.0
        age = _seconds(now) - float(table.last[row])
        age = 0.0 if math.isnan(age) else max(age, 0.0)
        return -math.expm1(-max(float(table.strength[row]), 0.0)) * \
            2.0 ** (-age / half_life.total_seconds())

    def unit_status(self, key: str) -> tuple[str | None, str | None]:
        """(the unit's ladder status, its topic's status; None for an episode)."""
        if unit_table(key) == "Episode":
            return self.episodes.status_of(key), None
        return self.fields.status_of(key), self.topics.status_of(key.split("/", 1)[0])

    def least_relevant_fields(self, n: int, exclude: set[str], now: datetime,
                              half_life: timedelta,
                              by_label: dict[str, timedelta | None] | None = None
                              ) -> list[tuple[float, str]]:
        """The n active fields of active topics with the lowest relevance (the mean of field
        and topic salience), skipping `exclude`, as (relevance, field id)."""
        if n <= 0 or not len(self.fields):
            return []
        keep = self.fields.mask(("active",)) & self._topic_active()
        for fid in exclude:
            row = self.fields.row_of.get(fid)
            if row is not None:
                keep[row] = False
        rows = np.flatnonzero(keep)
        if rows.shape[0] == 0:
            return []
        nf = len(self.fields)
        fs = self.field_salience(now, half_life, by_label)[rows]
        ts = self.topics.salience(now, half_life)[self.fields.owner[:nf][rows]]
        relevance = (fs + ts) / 2
        if rows.shape[0] > n:
            cut = np.partition(relevance, n - 1)[n - 1]
            pick = np.flatnonzero(relevance <= cut)
        else:
            pick = np.arange(rows.shape[0])
        found = sorted((float(relevance[i]), self.fields.ids[int(rows[i])]) for i in pick.tolist())
        return found[:n]

    def most_salient_topics(self, k: int, now: datetime, half_life: timedelta,
                            statuses: Sequence[str]) -> list[str]:
        s = self.topics.salience(now, half_life)
        rows = np.flatnonzero(self.topics.mask(statuses))
        if rows.shape[0] == 0:
            return []
        order = sorted(rows.tolist(), key=lambda r: (-s[r], self.topics.ids[r]))
        return [self.topics.ids[r] for r in order[:k]]

    # ------------------------------------------------------------------ units
    def _put_topic(self, row: Row) -> None:
        self.topics.put(row["id"], row["strength"], row["last_access"], row["status"])

    def _put_field(self, row: Row) -> None:
        owner = self.topics.row_of.get(row["topic_id"], -1)
        self.fields.put(row["id"], row["strength"], row["last_access"], row["status"], owner)
        labels = tuple(row.get("labels") or ())
        if labels != self.field_labels.get(row["id"], ()):
            if labels:
                self.field_labels[row["id"]] = labels
            else:
                del self.field_labels[row["id"]]
            self._label_rows = None
        if self._fields_by_topic is not None:
            fids = self._fields_by_topic.setdefault(row["topic_id"], [])
            if row["id"] not in fids:
                fids.append(row["id"])

    def _put_episode(self, row: Row) -> None:
        self.episodes.put(row["id"], row["strength"], row["last_access"], row["status"])
        if self.said is not None:
            self.said[said_key(row["text"], row["source"], row["speaker"], row["at"])] = row["id"]

    def _put_names(self, rows: Sequence[Row], vectors: dict[str, np.ndarray]) -> None:
        retitled = [r for r in rows if self.names.title_of.get(r["id"]) != r["title"]]
        missing = [r for r in retitled if r["id"] not in vectors]
        if missing:
            embedded = self.embedder.embed([r["title"] for r in missing])
            vectors = {**vectors, **{r["id"]: v for r, v in zip(missing, embedded)}}
        for r in rows:
            self.names.set(r["id"], r["title"], list(r["aliases"] or []))
        for r in retitled:
            self.unpaired[r["id"]] = None
            vec = vectors[r["id"]]
            if np.any(vec):
                self.title_vectors.upsert(r["id"], vec)
            else:
                self.title_vectors.remove(r["id"])

    def take(self, t: "Transition", title_vectors: dict[str, np.ndarray] | None) -> None:
        """Take in what a committed transition of this scope changed."""
        def changed(table: str) -> dict[str, Row]:
            keys = [*t.updated[table], *(k for k, kind in t.salience.items() if kind == table)]
            out: dict[str, Row] = {k: t.rows[table][k] for k in keys}  # type: ignore[misc]
            out.update(t.created[table])
            return out

        topics = changed("Topic")
        for row in topics.values():
            self._put_topic(row)
        for row in changed("Field").values():
            self._put_field(row)
        for row in changed("Episode").values():
            self._put_episode(row)
        self.stale_units.update(dict.fromkeys(t.created["Episode"]))
        # an episode whose context (`follows`) an erasure removed reads differently
        self.stale_units.update(dict.fromkeys(k for k, props in t.updated["Episode"].items()
                                              if "follows" in props))
        self.stale_units.update(dict.fromkeys(units_rewritten(t)))
        for tid in t.touched.reindex:  # a new title or alias changes every field's document
            self.stale_units.update(dict.fromkeys(self.fields_of(tid)))
        renamed = [topics[k] for k in t.touched.reindex if k in topics]
        self._put_names([r for r in renamed if r is not None], title_vectors or {})
        for tid in t.children["FLAGS"]:
            self.open_flags[tid] = sum(1 for g in t.open_flags(tid))
        for tid, edges in t.edges.items():  # every topic whose edges it read or changed
            if edges:
                self.edge_holders.add(tid)
            else:
                self.edge_holders.discard(tid)
        for tid in t.touched.content:
            self.stale[tid] = None
        if t.tombstone:  # records an erasure redacted touch nothing any more
            gone = set(t.tombstone["redacted"])
            for tid, seqs in list(self.touched_by.items()):
                if gone.intersection(seqs):
                    self.touched_by[tid] = array("q", [s for s in seqs if s not in gone])
        for tid in {unit.split("/", 1)[0] for unit in (*t.touched.topics, *t.touched.fields,
                                                       *t.touched.episodes)}:
            self.touched_by.setdefault(tid, array("q")).append(t.seq)
        self.forget_units(t.deleted["Topic"], t.deleted["Field"], t.deleted["Episode"])
        self._active_fields = None
        self.counters = dict(vars(t.counters))

    def forget_units(self, topics: Iterable[str], fields: Iterable[str],
                     episodes: Iterable[str] = ()) -> None:
        """Remove erased topics, fields and episodes from everything derived (their index
        entries, names, summaries, salience, flags, and the record of what touched them)."""
        for eid in episodes:
            self.said = None
            self.episodes.remove(eid)
            self._forget_unit(eid)
            self.touched_by.pop(eid, None)
        for fid in fields:
            self._forget_field(fid)
            tid = fid.split("/", 1)[0]
            if fid in self.fields_by_topic.get(tid, ()):
                self.fields_by_topic[tid].remove(fid)
        for tid in topics:
            self.topics.remove(tid)
            for fid in self.fields_by_topic.pop(tid, []):
                self._forget_field(fid)
            self.names.drop(tid)
            self.title_vectors.remove(tid)
            self.lexical.remove(tid)
            self.vectors.remove(tid)
            for mapping in (self.summaries, self.stale, self.open_flags, self.unpaired,
                            self.touched_by):
                mapping.pop(tid, None)  # type: ignore[attr-defined]
            self.edge_holders.discard(tid)

    def _forget_unit(self, unit: str) -> None:
        """A field or an episode leaves the unit indexes."""
        self.stale_units.pop(unit, None)
        if self.places is not None:
            self.places.remove(unit)
        units = self.units()
        if unit in units.docs or unit in units.lexical or unit in units.vectors:
            units = self.changed_units()
            units.lexical.remove(unit)
            units.vectors.remove(unit)
            units.docs.pop(unit, None)
            units.valid.pop(unit, None)

    def _forget_field(self, fid: str) -> None:
        self.fields.remove(fid)
        self._forget_unit(fid)
        if self.field_labels.pop(fid, None) is not None:
            self._label_rows = None

    # ------------------------------------------------------------------ summaries, lazily
    def refresh(self, cache: "CommittedCache", summarizer: Summarizer,
                only: Iterable[str] | None = None) -> None:
        """Recompute stale summaries (all, or those of `only`) from committed state, and their
        lexical and vector index entries, in one embedder call."""
        stale = list(self.stale) if only is None else [t for t in only if t in self.stale]
        if not stale:
            return
        texts = summaries_of(cache, stale, summarizer)
        vectors = self.embedder.embed([texts[t] for t in stale])
        for tid, vec in zip(stale, vectors):
            text = texts[tid]
            self.summaries[tid] = text
            names = self.names.names_of.get(tid, [])
            self.lexical.upsert(tid, " ".join([*names, text]))
            if np.any(vec):
                self.vectors.upsert(tid, vec)
            else:
                self.vectors.remove(tid)
            del self.stale[tid]

    def refresh_units(self, cache: "CommittedCache", limit: int | None = None) -> None:
        """Re-derive the stale units' documents, valid times and index entries from committed
        state (all of them, or the `limit` oldest), in one embedder call."""
        self.units()  # unusable files make every unit stale
        if not self.stale_units:
            return
        units = self.changed_units()
        stale = list(self.stale_units) if limit is None else \
            list(itertools.islice(self.stale_units, limit))
        docs = unit_documents(cache, self.names, stale)
        keep = [u for u in stale if u in docs]
        vectors = self.embedder.embed([docs[u][0] for u in keep]) if keep else \
            np.zeros((0, self.embedder.dim), dtype=np.float32)
        for unit in stale:
            if unit not in docs:  # no current value (or gone): nothing to find it by
                units.lexical.remove(unit)
                units.vectors.remove(unit)
                units.docs.pop(unit, None)
                units.valid.pop(unit, None)
        for unit in keep:
            text, valid = docs[unit]
            units.docs[unit] = text
            units.valid[unit] = valid
            units.lexical.upsert(unit, text)
        nonzero = np.any(vectors, axis=1) if keep else np.zeros(0, dtype=bool)
        for unit in (u for u, has in zip(keep, nonzero.tolist()) if not has):
            units.vectors.remove(unit)
        if nonzero.any():  # one bulk upsert: a rebuild refreshes every unit at once
            units.vectors.upsert_many([u for u, has in zip(keep, nonzero.tolist()) if has],
                                      vectors[nonzero])
        if self.places is not None and len(stale) > SCAN_ABOVE:
            self.places = None  # too many to read by key: its own scan rebuilds it
        elif self.places is not None:
            self.places.update(unit_places(cache, stale))
        for unit in stale:
            del self.stale_units[unit]

    # Stale units derived after a commit beyond those the commit itself made stale: a backlog
    # (a rebuild makes every unit stale) drains without any one commit paying for all of it.
    UNIT_STEP = 256

    def derive_step(self, cache: "CommittedCache", made: int) -> None:
        """After a commit that made `made` units stale: derive them and a bounded step of
        the older ones, while the commit's rows are in the row cache. A free-text query after a
        bulk load then finds nothing left to derive (it derived 1M documents, ~50 s, before).
        Not while the unit layer is still in the snapshot's files: a process that writes and
        never searches does not read it, and the first reader derives what is stale."""
        if self.stale_units and self.units_loaded:
            self.refresh_units(cache, made + self.UNIT_STEP)

    def summary(self, cache: "CommittedCache", summarizer: Summarizer, tid: str) -> str:
        self.refresh(cache, summarizer, [tid])
        return self.summaries.get(tid, self.names.title_of.get(tid, ""))

    # ------------------------------------------------------------------ comparison
    def fingerprint(self) -> dict[str, Any]:
        """Everything this state holds, in a canonical form (by key, not by insertion order),
        so two states compare equal exactly when they would answer every question alike."""
        def table(t: SalienceTable) -> dict[str, tuple[float, float, str, str | None]]:
            return {key: (float(t.strength[i]), float(t.last[i]), t.names[int(t.status[i])],
                          self.topics.ids[int(t.owner[i])] if t.owner[i] >= 0 else None)
                    for i, key in enumerate(t.ids) if key}

        def vectors(index: VectorIndex) -> dict[str, bytes]:
            return {key: index.get(key).tobytes() for key in index}  # type: ignore[union-attr]

        return {
            "counters": dict(self.counters),
            "names": sorted(self.names.by_name.items()), "keys": sorted(self.names.by_key.items()),
            "titles": sorted(self.names.title_of.items()),
            "title_vectors": vectors(self.title_vectors), "vectors": vectors(self.vectors),
            "lexical": sorted(self.lexical), "summaries": dict(sorted(self.summaries.items())),
            "stale": sorted(self.stale), "topics": table(self.topics), "fields": table(self.fields),
            "fields_by_topic": {k: sorted(v) for k, v in sorted(self.fields_by_topic.items()) if v},
            "field_labels": dict(sorted(self.field_labels.items())),
            "open_flags": {k: v for k, v in sorted(self.open_flags.items()) if v},
            "episodes": table(self.episodes), "unit_docs": dict(sorted(self.unit_docs.items())),
            "unit_valid": dict(sorted(self.unit_valid.items())),
            "unit_lexical": sorted(self.unit_lexical), "unit_vectors": vectors(self.unit_vectors),
            "stale_units": sorted(self.stale_units),
            "touched_by": {k: list(v) for k, v in sorted(self.touched_by.items()) if v},
            "edge_holders": sorted(self.edge_holders),
        }



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

    def refresh_units(self, cache: "CommittedCache") -> None:
        """Every scope's stale unit documents and index entries."""
        for scope in self.scopes.values():
            scope.refresh_units(cache)

    def fingerprint(self) -> dict[str, Any]:
        return {"seq": self.seq, "hash": self.hash, "at": self.at,
                "scopes": {name: s.fingerprint() for name, s in sorted(self.scopes.items())
                           if s.topics.ids or s.counters}}

    # ------------------------------------------------------------------ rebuild
    @classmethod
    @paused_gc()
    def rebuild(cls, store: GraphStore, embedder: "Embedder",
                progress: Progress | None = None) -> "DerivedState":
        """Everything derived, from the database alone (summaries are left stale: the first
        reader refreshes them)."""
        state = cls(embedder)
        attempt = 0
        while True:
            attempt += 1
            with store.reading() as tx:
                state.salience_seq = int(queries.meta_get(tx, "salience_seq") or 0)
                last = queries.last_transition(tx)
                counters = queries.latest_counters(tx)
                topics = queries.scan(tx, "Topic", columns=("id", "title", "aliases", "status",
                                                            "strength", "last_access", "scope"),
                                      order="seq")
                fields = queries.scan(tx, "Field", columns=("id", "topic_id", "status", "strength",
                                                            "last_access", "labels"))
                flags = queries.scan(tx, "Flag", "n.status = 'open'", columns=("topic_id",))
                episodes = queries.scan(tx, "Episode", columns=("id", "status", "strength",
                                                                "last_access", "scope"), order="seq")
                behind = queries.transitions(tx, state.salience_seq)
                touches = queries.touches(tx)
                edge_holders = queries.edge_holders(tx)
                # On a store other processes write, each read above is its own query: they
                # describe one state only if no commit, and no write-behind of the salience
                # columns, came between the first and the last.
                if not store.shared_writers or (
                        _unmoved(tx, last) and
                        int(queries.meta_get(tx, "salience_seq") or 0) == state.salience_seq):
                    break
            if attempt >= cls.REBUILD_ATTEMPTS:
                raise StoreError(f"{store.path!r}: other processes kept committing while this "
                                 f"one read the state ({attempt} times); open it again")
            time.sleep(random.uniform(0, 0.002 * attempt))
        for record in behind:  # the salience the stored columns do not have yet
            for key, (strength, last_access) in json.loads(record["salience"] or "{}").items():
                state.pending_salience[key] = (unit_table(key), strength,
                                               datetime.fromisoformat(last_access))
            for key, digest in json.loads(record["writes"] or "{}").items():
                if digest is None:  # deleted later: nothing of it is pending (as after `apply`)
                    state.pending_salience.pop(key, None)
        topics = [state.patch("Topic", r) for r in topics]
        fields = [state.patch("Field", r) for r in fields]
        episodes = [state.patch("Episode", r) for r in episodes]
        if last is not None:
            state.seq, state.hash, state.at = last["seq"], last["hash"], last["at"]
        for name, values in counters.items():
            state.scope(name).counters = values
        total = len(topics)
        for row in topics:
            scope = state.scope(row["scope"])
            scope._put_topic(row)
            scope.stale[row["id"]] = None
        for row in fields:
            scope = state.scope(scope_of(row["id"]))
            scope._put_field(row)
            scope.stale_units[row["id"]] = None
        for row in episodes:
            scope = state.scope(row["scope"])
            scope._put_episode(row)
            scope.stale_units[row["id"]] = None
        for g in flags:
            scope = state.scope(scope_of(g["topic_id"]))
            scope.open_flags[g["topic_id"]] = scope.open_flags.get(g["topic_id"], 0) + 1
        state.set_edge_holders(edge_holders)
        for seq, units in touches:
            for tid in {unit.split("/", 1)[0] for unit in units}:
                state.scope(scope_of(tid)).touched_by.setdefault(tid, array("q")).append(seq)
        step = 10_000
        for i in range(0, total, step):
            chunk = topics[i:i + step]
            for name in dict.fromkeys(r["scope"] for r in chunk):
                state.scope(name)._put_names([r for r in chunk if r["scope"] == name], {})
            if progress is not None:
                progress("index titles", min(i + step, total), total)
        return state


def _unmoved(tx: Any, last: Row | None) -> bool:
    """Whether the log's head is still `last` (no later record; its hash unchanged)."""
    seq = 0 if last is None else last["seq"]
    return queries.record_hash(tx, seq + 1) is None and \
        (last is None or queries.record_hash(tx, seq) == last["hash"])


def summaries_of(cache: "CommittedCache", tids: Sequence[str], summarizer: Summarizer) -> dict[str, str]:
    """Summaries of committed topics: the title and each visible field's current value."""
    cache.load_rows("Topic", tids)
    cache.load_children("HAS_FIELD", tids)
    fids = [f for t in tids for f in cache.children["HAS_FIELD"][t]]
    cache.load_children("HAS_ENTRY", fids)
    out = {}
    for tid in tids:
        row = cache.rows["Topic"][tid]
        if row is None:
            continue
        values = {}
        for fid in cache.children["HAS_FIELD"][tid]:
            f = cache.rows["Field"][fid]
            if f is None or f["status"] == "hidden":
                continue
            for eid in reversed(cache.children["HAS_ENTRY"][fid]):
                e = cache.rows["Entry"][eid]
                if e is not None and e["status"] == "current":
                    if not is_retraction(e):  # a retracted value says nothing any more
                        values[f["name"]] = json.loads(e["value"])
                    break
        out[tid] = summarizer(row["title"], values)
    return out


def units_rewritten(t: "Transition") -> list[str]:
    """The fields whose search document a committed transition may have changed: new fields,
    fields that gained or changed entries (a compression, which only moves older entries out
    of the active history, changes no document), and every field a revision touched (a merge
    moves entries away). A ladder step alone changes none: status is read at query time, so a
    forgetting pass does not make the next query re-embed what it attenuated."""
    out = dict.fromkeys(t.created["Field"])
    for table in ("created", "updated"):
        for eid, props in getattr(t, table)["Entry"].items():
            if table == "updated" and set(props) <= {"active"}:
                continue
            row = t.rows["Entry"].get(eid)
            if row is not None:
                out[row["field_id"]] = None
    if t.op == "revise":
        out.update(dict.fromkeys(t.touched.fields))
    return list(out)


# Above this many stale units, their documents come from one scan of every current value
# (seconds at 1M entries) rather than reads by key (about 0.5 ms a unit on kuzu, cold).
SCAN_ABOVE = 20_000


def unit_documents(cache: "CommittedCache", names: NameDirectory, units: Sequence[str],
                   scan: bool | None = None) -> dict[str, tuple[str, float]]:
    """unit -> (its searchable document, its valid time in seconds) for committed fields with a
    current value (the topic's names, the field's name, the value) and episodes (speaker and
    text). Units without a current value, or gone, are left out. `scan`: read the fields'
    current values in one scan instead of by key (default: when there are many)."""
    fids = [u for u in units if unit_table(u) == "Field"]
    eids = [u for u in units if unit_table(u) == "Episode"]
    out: dict[str, tuple[str, float]] = {}
    if scan if scan is not None else len(fids) > SCAN_ABOVE:
        out.update(_scanned_field_documents(cache, names, fids))
        fids = []
    cache.load_rows("Field", fids)
    cache.load_children("HAS_ENTRY", fids)
    cache.load_rows("Episode", eids)
    # an episode is read in the context of the one it follows (gem/operators/ingest.py)
    cache.load_rows("Episode", [r["follows"] for r in (cache.rows["Episode"][e] for e in eids)
                                if r is not None and r["follows"]])
    for fid in fids:
        f = cache.rows["Field"][fid]
        if f is None:
            continue
        current = None
        for eid in reversed(cache.children["HAS_ENTRY"][fid]):
            e = cache.rows["Entry"][eid]
            if e is not None and e["status"] == "current":
                current = e
                break
        if current is None:
            continue
        out[fid] = _field_document(names, f["topic_id"], f["name"], current["value"],
                                   current["valid_at"])
    for eid in eids:
        row = cache.rows["Episode"][eid]
        if row is None:
            continue
        text = f"{row['speaker']}: {row['text']}" if row["speaker"] else row["text"]
        before = cache.rows["Episode"].get(row["follows"]) if row["follows"] else None
        if before is not None:
            text += " " + before["text"]
        out[eid] = (text, _seconds(row["at"]))
    return out


def _field_document(names: NameDirectory, tid: str, name: str, value: str,
                    valid_at: Any) -> tuple[str, float]:
    text = " ".join([*names.names_of.get(tid, []), name, value_text(json.loads(value))])
    return text, _seconds(valid_at)


def _scanned_field_documents(cache: "CommittedCache", names: NameDirectory,
                             fids: Sequence[str]) -> dict[str, tuple[str, float]]:
    wanted = set(fids)
    with cache.store.reading() as tx:
        found = queries.current_values(tx)
    return {fid: _field_document(names, tid, name, value, valid_at)
            for fid, tid, name, value, valid_at in found if fid in wanted}


def scope_of(unit: str) -> str:
    """The scope a unit belongs to, from its id: "t1", "t1/deadline", "e5" are in "default";
    "acme:t1", "acme:t1/deadline", "acme:e5" are in "acme" (scope names hold no ":" or "/")."""
    head = unit.split("/", 1)[0]
    return head.split(":", 1)[0] if ":" in head else DEFAULT_SCOPE


def snapshot_dir(db_path: str) -> str:
    return db_path + ".gem-derived"


__all__ = ["DerivedState", "ScopeState", "NameDirectory", "SalienceTable", "choose", "topic_seq",
           "scope_of", "default_summary", "snapshot_dir",
           "summaries_of", "GENESIS"]
_ = os
