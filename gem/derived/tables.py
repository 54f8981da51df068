"""The tables derived state keeps per scope: salience columns, the name directory, unit indexes."""
from __future__ import annotations

import hashlib
import json
import math
from itertools import compress
from datetime import datetime, timedelta, timezone
from typing import TYPE_CHECKING, Any, Callable, Iterable, Mapping, Protocol, Sequence

import numpy as np

from ..errors import SnapshotError
from ..index import LexicalIndex, VectorIndex
from ..index.packed import PackedIds, decoded
from ..index.rows import capacity_for
from ..text import name_key, value_text
from .unit_columns import UnitColumns

if TYPE_CHECKING:
    from ..embed import Embedder


Summarizer = Callable[[str, dict[str, Any]], str]
Progress = Callable[[str, int, int], None]
GENESIS = "0" * 64
_EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)
DEFAULT_SCOPE = "default"
TOPIC_STATUS = ("active", "archived")
FIELD_STATUS = ("active", "compressed", "hidden")
EPISODE_STATUS = ("active", "hidden", "compressed")  # appended: stored codes keep their meaning


def default_summary(title: str, values: dict[str, Any]) -> str:
    """A deterministic summary: the title and the current value of each visible field."""
    parts = [f"{name}: {value_text(value)}" for name, value in sorted(values.items())]
    return title + (" — " + "; ".join(parts) if parts else "")


def seconds(when: datetime | None) -> float:
    return math.nan if when is None else (when - _EPOCH).total_seconds()


class SalienceTable:
    """(strength, last access, status) of every unit of one kind, as numpy columns.

    A loaded table's ids stay as the snapshot has them (gem/index/packed.py `PackedIds`): an
    id is decoded when its row is asked for, and `row_of` finds a row by the id's hash: the
    columns (salience, statuses) need neither, and a query that reads a few dozen units'
    statuses decodes those, not 1M field ids."""

    def __init__(self, statuses: Sequence[str]) -> None:
        self.codes = {s: i for i, s in enumerate(statuses)}
        self.names = tuple(statuses)
        self._keys = PackedIds("the snapshot's salience table", blanks=True)
        self.strength = np.zeros(64)
        self.last = np.zeros(64)
        self.status = np.zeros(64, dtype=np.int8)
        self.owner = np.full(64, -1, dtype=np.int32)  # a field's topic row in the topic table
        self._by_id = np.zeros(0, dtype=np.int64)  # the first rows, in the order of their ids

    @property
    def row_of(self) -> dict[str, int]:
        return self._keys.row_of

    @property
    def ids(self) -> list[str]:
        """Each row's unit id ("" for a row an erasure emptied)."""
        return self._keys.ids

    def adopt(self, ids: list[str]) -> None:
        """Take `ids` as the rows' ids (a loaded snapshot's), building `row_of` when needed."""
        self._keys.adopt(ids)
        self._by_id = np.zeros(0, dtype=np.int64)

    def adopt_packed(self, blob: np.ndarray, offsets: np.ndarray, keys: np.ndarray | None = None) -> None:
        """Take the rows' ids as a snapshot has them (with their `id_keys`, if saved): a row's
        id is decoded when asked for, an id's row found by its hash (gem/index/packed.py)."""
        self._keys.adopt_packed(blob, offsets, keys=keys)
        self._by_id = np.zeros(0, dtype=np.int64)

    def packed_ids(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """The ids as UTF-8, offsets and `id_keys`."""
        return self._keys.packed_with_keys()

    def __len__(self) -> int:
        return len(self._keys)

    def _grow(self) -> None:
        n = capacity_for(self.strength.shape[0], self.strength.shape[0] + 1)  # a quarter more
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
        self.last[row] = seconds(last)
        self.status[row] = self.codes[status]
        self.owner[row] = owner

    def ids_where(self, keep: np.ndarray, by_id: bool = False) -> list[str]:
        """The ids of the rows `keep` marks, in row order (`by_id`: in id order). Many at once
        (a forgetting pass walks 1M fields) are read from the decoded list in one C-level
        map, not through the packed view id by id."""
        if by_id:
            order = self.rows_by_id()
            rows = order[keep[order]].tolist()
        else:
            rows = np.flatnonzero(keep).tolist()
        if len(rows) > PackedIds.READS_PACKED:
            decoded(self.row_of)
        return list(map(self.ids.__getitem__, rows))

    def rows_by_id(self) -> np.ndarray:
        """Every row, in the order of its id (an emptied row where its id was). Sorted once
        and kept: rows added since are sorted alone and merged in (a forgetting pass asks for
        1M fields in id order twice; sorting them cost ~2 s a time at 100k topics)."""
        n, done = len(self), self._by_id.shape[0]
        if done < n:
            decoded(self.row_of)
            at = self.ids.__getitem__
            rows = self._by_id.tolist() + sorted(range(done, n), key=at)
            if done:
                rows.sort(key=at)  # two sorted runs: one merge
            self._by_id = np.asarray(rows, dtype=np.int64)
        return self._by_id

    def set_status(self, moved: dict[str, str]) -> None:
        """New statuses of units already here (the ladder's bulk moves), one step per status."""
        if not moved:
            return
        row_of = self.row_of
        for status in set(moved.values()):  # a pass moves to two or three levels
            keys = list(compress(moved, map(status.__eq__, moved.values())))
            rows = np.fromiter(map(row_of.__getitem__, keys), dtype=np.int64, count=len(keys))
            self.status[rows] = self.codes[status]

    def status_of(self, key: str) -> str | None:
        row = self.row_of.get(key)
        return None if row is None else self.names[int(self.status[row])]

    def rows_of(self, keys: list[str]) -> list[int | None]:
        """Each key's row (None: not here), looked up at once."""
        return self._keys.rows_of(keys)

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
        n = len(self)
        s = -np.expm1(-np.maximum(self.strength[:n], 0.0))
        age = np.maximum(seconds(now) - self.last[:n], 0.0)
        age = np.where(np.isnan(age), 0.0, age)
        return s * np.exp2(-age / (half_life.total_seconds() if per_row is None else per_row))

    def live(self) -> np.ndarray:
        """Which rows hold a unit: not those an erasure emptied (`remove`)."""
        return self.status[:len(self)] < len(self.names)

    def mask(self, statuses: Iterable[str]) -> np.ndarray:
        codes = [self.codes[s] for s in statuses]
        return np.isin(self.status[:len(self)], codes)


# The selections by salience (field_ids_where, ...) promise a superset of the units whose
# salience now is under the bound as the transition computes it, one unit at a time
# (gem/salience.py), and numpy computes the same decay with other operations: a unit within a
# few ulps of the bound could otherwise be left out. The policy's WHERE decides the rest.
SALIENCE_SLACK = 1e-12


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
        self._by_name: dict[str, list[str]] = {}
        self._by_key: dict[str, list[str]] = {}
        self._names_of: dict[str, list[str]] = {}
        self._title_of: dict[str, str] = {}
        # A loaded snapshot's [tid, names, keys] rows (or their JSON text), put into the dicts
        # when first asked for (`deferred`): 1 s of an open at 100k topics, and an open need
        # not resolve a name. Each topic's names come first (a summary or a document needs
        # those of a few topics); the directory by name and key, 0.5 s more, when looked up.
        self._rows: list[list[Any]] | str | None = None
        self._unindexed: list[list[Any]] | None = None  # rows whose names are not in by_name yet
        self._text: str | None = None  # the JSON text they were read as, until a name changes

    def _parsed(self) -> "NameDirectory":
        if self._rows is not None:
            rows = self._rows
            try:
                if isinstance(rows, str):
                    self._text, rows = rows, json.loads(rows)
                names_of = {tid: names for tid, names, _ in rows}
                title_of = {tid: names[0] for tid, names in names_of.items()}
            except (ValueError, TypeError, IndexError) as exc:
                raise SnapshotError(f"the snapshot's names are unusable: {exc}") from exc
            self._names_of, self._title_of = names_of, title_of
            self._unindexed, self._rows = rows, None
        return self

    def _built(self) -> "NameDirectory":
        rows = self._parsed()._unindexed
        if rows is not None:
            built = NameDirectory()  # filled apart: unusable rows leave nothing half-built
            try:
                built._fill(self._names_of, {tid: keys for tid, _, keys in rows})
            except (ValueError, TypeError, IndexError) as exc:
                raise SnapshotError(f"the snapshot's names are unusable: {exc}") from exc
            self._by_name, self._by_key = built._by_name, built._by_key
            self._unindexed = None
        return self

    @property
    def by_name(self) -> dict[str, list[str]]:
        return self._built()._by_name

    @property
    def by_key(self) -> dict[str, list[str]]:
        return self._built()._by_key

    @property
    def names_of(self) -> dict[str, list[str]]:
        """Each topic's names, title first (read only: `set` and `drop` change them)."""
        return self._parsed()._names_of

    @property
    def title_of(self) -> dict[str, str]:
        """Each topic's title (read only)."""
        return self._parsed()._title_of

    @classmethod
    def deferred(cls, rows: list[list[Any]] | str) -> "NameDirectory":
        """The directory of a snapshot's [tid, names, keys] rows, or of their JSON text
        (`saved`), built when first used."""
        if not isinstance(rows, (list, str)):
            raise SnapshotError("the snapshot's names are neither a list nor its JSON text")
        directory = cls()
        directory._rows = rows
        return directory

    def saved(self) -> str:
        """The JSON text of [tid, names, their keys] of every topic: what `deferred` takes. A
        text inside the snapshot's JSON, so that reading the snapshot makes one str of it,
        not 100k lists."""
        if isinstance(self._rows, str):  # never used since it was loaded: as it was read
            return self._rows
        if self._text is not None:  # read, and no name changed since
            return self._text
        rows = self._rows if self._rows is not None else \
            [[tid, names, [name_key(n) for n in names]] for tid, names in self._names_of.items()]
        return json.dumps(rows)

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
        directory._fill(names_of, keys_of)
        return directory

    def _fill(self, names_of: dict[str, list[str]], keys_of: dict[str, list[str]] | None) -> None:
        by_name, by_key = self._by_name, self._by_key
        for tid, names in names_of.items():
            self._names_of[tid] = names
            self._title_of[tid] = names[0]
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

    def drop(self, tid: str) -> None:
        """Forget every name of `tid` (it is renamed, or erased)."""
        self._built()._text = None
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
        # documents and valid times by the row of their lexical entry (gem/derived/unit_columns.py)
        self.columns = UnitColumns(self.lexical)
        # read from unit files of an older layout (documents by unit id, ids without their
        # keys): the next save writes them again, so that later opens read them packed
        self.outdated = False

    @property
    def docs(self) -> Mapping[str, str]:
        return self.columns.docs

    @property
    def valid(self) -> Mapping[str, float]:
        return self.columns.valid

    def put(self, unit: str, text: str, valid: float) -> None:
        """Index a unit's document and record it with its valid time."""
        self.lexical.upsert(unit, text)
        self.columns.put(unit, text, valid)

    def drop(self, unit: str) -> None:
        """A unit leaves the unit layer (absent ones are ignored)."""
        self.columns.drop(self.lexical.rows.get(unit))
        self.lexical.remove(unit)
        self.vectors.remove(unit)


class SavedUnits(Protocol):
    """A scope's unit layer in snapshot files (gem/snapshot.py)."""

    def load(self, embedder: "Embedder") -> UnitIndexes: ...


def said_key(text: str, source: str, speaker: str | None, at: datetime) -> bytes:
    """What makes an episode the one it is: what was said, where, by whom and when."""
    said = json.dumps([text, source, speaker, at.astimezone(timezone.utc).isoformat()])
    return hashlib.blake2b(said.encode("utf-8"), digest_size=16).digest()
