"""Ids and texts as a snapshot holds them (one UTF-8 blob and offsets), decoded one at a time.

At 100k topics a snapshot holds 1M unit ids in each of several tables and 1M unit documents:
decoding them all into str, and putting the ids in dicts, was most of the first query after an
open (seconds), which reads a few dozen of them. Here a row's id or text is decoded when it is
asked for, and an id's row is found through its `id_keys`: each id's 32-bit hash and row,
sorted, which a snapshot holds beside the ids (or which are computed when first needed, numpy
over the blob: no str is made). Writes go to small overlays; what iterates over all ids decodes them
all once, and from then on the plain list and dict serve.
"""
from __future__ import annotations

from collections.abc import Iterator, Mapping, MutableMapping
from typing import Any, cast

import numpy as np

from gem.errors import SnapshotError

from .common import id_key as id_key_of
from .common import id_keys as id_keys_of

_M64 = (1 << 64) - 1
_K0, _K1, _K2 = 0x9E3779B97F4A7C15, 0xC2B2AE3D27D4EB4F, 0x165667B19E3779F9
_MASKS = np.array([(1 << (8 * k)) - 1 for k in range(9)], dtype=np.uint64)
_LOW = np.uint64(0xFFFFFFFF)


def encode_strings(strings: list[str]) -> tuple[np.ndarray, np.ndarray]:
    """One UTF-8 blob and the strings' start offsets in characters (n + 1 of them; 32-bit
    when they fit: at 10k topics the unit files' four offset arrays were 3.2 of their 55 MB)."""
    lengths = np.fromiter(map(len, strings), dtype=np.int64, count=len(strings))
    offsets = np.zeros(len(strings) + 1, dtype=np.int64)
    np.cumsum(lengths, out=offsets[1:])
    if offsets[-1] < 2**31:
        offsets = offsets.astype(np.int32)
    # surrogatepass: ids are arbitrary str, and a lone surrogate must round-trip too.
    blob = "".join(strings).encode("utf-8", "surrogatepass")
    return np.frombuffer(blob, dtype=np.uint8), offsets


def decode_strings(blob: np.ndarray, offsets: np.ndarray) -> list[str]:
    text = blob.tobytes().decode("utf-8", "surrogatepass")
    bounds = offsets.tolist()
    if len(text) != bounds[-1]:
        raise ValueError("string table does not match its offsets")
    return [text[a:b] for a, b in zip(bounds, bounds[1:])]


def byte_offsets(blob: np.ndarray, offsets: np.ndarray) -> np.ndarray:
    """The byte offsets (int64) of strings whose offsets are in characters (`encode_strings`);
    ValueError if the blob cannot hold that many characters."""
    chars = int(offsets[-1]) if offsets.shape[0] else 0
    if blob.shape[0] == chars:  # ASCII: a character is a byte
        if chars and int(blob[:chars].max()) >= 0x80:
            raise ValueError("string table does not match its offsets")
        return offsets.astype(np.int64)
    starts = np.flatnonzero((blob & 0xC0) != 0x80)  # the first byte of each character
    if starts.shape[0] != chars:
        raise ValueError("string table does not match its offsets")
    return np.append(starts, blob.shape[0]).astype(np.int64)[offsets]


def _hash_words(b: bytes) -> int:
    """`hash_keys` of one id's UTF-8 bytes: its length, first 24 bytes and last 8."""
    n = len(b)
    h = (n * _K0) & _M64
    for c in range(3):
        h = ((h ^ int.from_bytes(b[8 * c:8 * c + 8], "little")) * _K1) & _M64
        h ^= h >> 31
    h = ((h ^ int.from_bytes(b[max(n - 8, 0):max(n - 8, 0) + 8], "little")) * _K2) & _M64
    return h ^ (h >> 29)


def hash_keys(blob: np.ndarray, starts: np.ndarray, ends: np.ndarray) -> np.ndarray:
    """For each string blob[starts[i]:ends[i]], (its hash's high 32 bits << 32) | i, sorted:
    what `IdKeys` searches. numpy over 8-byte words read at any byte (1M ids: ~50 ms, and the
    sort). A hash covers an id's length, first 24 and last 8 bytes; equal hashes are told
    apart by comparing the ids."""
    n = starts.shape[0]
    pad = np.zeros(blob.shape[0] + 16, dtype=np.uint8)
    pad[:blob.shape[0]] = blob
    words = np.ndarray((pad.shape[0] - 7,), dtype="<u8", buffer=pad, strides=(1,))
    last = words.shape[0] - 1
    lengths = ends - starts
    with np.errstate(over="ignore"):
        h = lengths.astype(np.uint64) * np.uint64(_K0)
        for c in range(3):
            w = words[np.minimum(starts + 8 * c, last)] & _MASKS[np.clip(lengths - 8 * c, 0, 8)]
            h = (h ^ w) * np.uint64(_K1)
            h ^= h >> np.uint64(31)
        w = words[np.minimum(np.maximum(ends - 8, starts), last)] & _MASKS[np.minimum(lengths, 8)]
        h = (h ^ w) * np.uint64(_K2)
        h ^= h >> np.uint64(29)
    keys = (h >> np.uint64(32) << np.uint64(32)) | np.arange(n, dtype=np.uint64)
    keys.sort()
    return keys


def id_keys(blob: np.ndarray, offsets: np.ndarray) -> np.ndarray:
    """`hash_keys` of a string table as `encode_strings` writes it (what a snapshot saves
    beside its ids, so that a reader finds an id's row without decoding any)."""
    bo = byte_offsets(blob, offsets)
    return hash_keys(blob, bo[:-1], bo[1:])


class PackedStrings:
    """Strings i of a string table, decoded one at a time."""

    def __init__(self, blob: np.ndarray, offsets: np.ndarray, what: str) -> None:
        self.blob, self.offsets, self.what = blob, offsets, what
        self.n = offsets.shape[0] - 1
        self._bounds: np.ndarray | None = None
        self._keys: np.ndarray | None = None
        self._saved_keys: np.ndarray | None = None  # as read, until checked

    @property
    def bounds(self) -> np.ndarray:
        """Each string's start in bytes, and the end (found when first needed, not at open)."""
        if self._bounds is None:
            try:
                self._bounds = byte_offsets(self.blob, self.offsets)
            except ValueError as exc:
                raise SnapshotError(f"{self.what}: its strings are malformed: {exc}") from exc
        return self._bounds

    def raw(self, i: int) -> bytes:
        return self.blob[int(self.bounds[i]):int(self.bounds[i + 1])].tobytes()

    def __getitem__(self, i: int) -> str:
        try:
            return self.raw(i).decode("utf-8", "surrogatepass")
        except UnicodeDecodeError as exc:
            raise SnapshotError(f"{self.what}: its strings are malformed: {exc}") from exc

    def all(self) -> list[str]:
        try:
            return decode_strings(self.blob, self.offsets)
        except (ValueError, UnicodeDecodeError) as exc:
            raise SnapshotError(f"{self.what}: its strings are malformed: {exc}") from exc

    def use_keys(self, keys: np.ndarray) -> None:
        """Take `id_keys` as saved beside the strings (checked for shape, order and rows when
        first used)."""
        if keys.shape != (self.n,) or keys.dtype != np.uint64:
            raise SnapshotError(f"{self.what}: its id keys are malformed")
        self._saved_keys = keys

    def keys(self) -> np.ndarray:
        if self._keys is None:
            keys = self._saved_keys
            if keys is None:
                keys = hash_keys(self.blob, self.bounds[:-1], self.bounds[1:])
            elif self.n and ((keys[1:] <= keys[:-1]).any() or int((keys & _LOW).max()) >= self.n):
                raise SnapshotError(f"{self.what}: its id keys are malformed")
            self._keys = keys
        return self._keys

    def find(self, s: str) -> list[int]:
        """The rows holding `s`."""
        b = s.encode("utf-8", "surrogatepass")
        keys = self.keys()
        h = np.uint64(_hash_words(b) >> 32 << 32)
        lo = int(np.searchsorted(keys, h))
        hi = int(np.searchsorted(keys, h | _LOW, side="right"))
        return [r for r in (keys[lo:hi] & _LOW).tolist() if self.raw(r) == b]

    def find_many(self, strings: list[str]) -> list[list[int]]:
        """`find` of each string, their hashes computed and searched at once (a query looks
        up a hundred candidates: ~15 us each one at a time, mostly numpy calls on scalars)."""
        encoded = [s.encode("utf-8", "surrogatepass") for s in strings]
        lengths = np.fromiter(map(len, encoded), dtype=np.int64, count=len(encoded))
        ends = np.cumsum(lengths)
        hashed = hash_keys(np.frombuffer(b"".join(encoded), dtype=np.uint8), ends - lengths, ends)
        h = np.empty(len(encoded), dtype=np.uint64)
        h[(hashed & _LOW).astype(np.int64)] = hashed >> np.uint64(32) << np.uint64(32)
        keys = self.keys()
        lo = np.searchsorted(keys, h).tolist()
        hi = np.searchsorted(keys, h | _LOW, side="right").tolist()
        return [[r for r in (keys[a:e] & _LOW).tolist() if self.raw(r) == b]
                for b, a, e in zip(encoded, lo, hi)]

    def repeated(self, free: set[int]) -> bool:
        """Whether a string is in two rows (rows in `free` left out): only rows whose hashes
        are equal are compared."""
        keys = self.keys()
        same = np.flatnonzero((keys[1:] ^ keys[:-1]) <= _LOW)  # equal high 32 bits
        seen: dict[bytes, int] = {}
        for a, b in zip((keys[same] & _LOW).tolist(), (keys[same + 1] & _LOW).tolist()):
            for row in (a, b):
                if row not in free and seen.setdefault(self.raw(row), row) != row:
                    return True
        return False


class PackedIds:
    """Ids by row and the row of each id. A snapshot's ids stay as its file has them (one UTF-8
    blob and each id's start in characters, `encode_strings`): `ids[row]` decodes that row's
    id, `row_of[id]` finds its row by its hash (`PackedStrings.find`), and writes go to
    overlays, until something iterates over them (then they are decoded into a list and a
    dict once). With `blanks`, an empty id marks a row an erasure emptied: it has no row.
    `what` names the owner in errors."""

    def __init__(self, what: str, blanks: bool = False) -> None:
        self.what, self.blanks = what, blanks
        self._ids: list[str] | None = []
        self._row_of: dict[str, int] | None = {}
        self._base: PackedStrings | None = None
        # while packed (_base): rows now (a vector index moves its last row into a removed
        # one), rows below base.n written since, rows from base.n on, row_of entries written
        # and removed since, ids decoded by row (their row, without a search)
        self._len = self._count = 0  # _count: entries row_of gained (or lost) since
        self._over: dict[int, str] = {}
        self._tail: list[str] = []
        self._set: dict[str, int] = {}
        self._gone: set[str] = set()
        self._seen: dict[str, int] = {}
        self._read: dict[int, str] = {}  # the base's ids decoded one at a time, by row
        self._free: set[int] | None = set()  # rows of the base that hold no id (None: not
        # found yet: with `blanks`, the rows whose id is empty)
        self._checked = False  # whether the base was searched for an id held twice
        self._reads = self._budget = 0  # reads through the views while packed, and how many
        # before every id is decoded at once (`_spend`)
        self._ids_view = _IdsView(self)
        self._rows_view = _RowsView(self)

    def adopt(self, ids: list[str]) -> None:
        """Take `ids` as the rows' ids; `row_of` is built when first asked for."""
        self._ids, self._row_of, self._base = ids, None, None

    def adopt_packed(self, blob: np.ndarray, offsets: np.ndarray, n: int | None = None,
                     keys: np.ndarray | None = None, free: list[int] | None = None) -> None:
        """Take the ids as a snapshot has them (`n` of them, when given; `keys`: their
        `id_keys`, when saved; `free`: rows that hold no id, else with `blanks` those with
        an empty one), decoded when first asked for; SnapshotError if the offsets cannot be
        the blob's."""
        count = offsets.shape[0] - 1 if offsets.ndim == 1 else -1
        if count < 0 or (n is not None and count != n) or \
                (count and (offsets[0] != 0 or (np.diff(offsets) < 0).any() or blob.shape[0] < offsets[-1])):
            raise SnapshotError(f"{self.what}: its ids are malformed")
        base = PackedStrings(blob, offsets, self.what)
        if keys is not None:
            base.use_keys(keys)
        if free is not None and (len(set(free)) != len(free) or any(not 0 <= r < count for r in free)):
            raise SnapshotError(f"{self.what}: its free rows are malformed")
        self._free = None if free is None and self.blanks and count else set(free or ())
        self._ids, self._row_of, self._base = None, None, base
        self._len, self._count = count, 0
        self._over, self._tail, self._set, self._gone, self._seen = {}, [], {}, set(), {}
        self._read = {}
        self._checked = False
        self._reads, self._budget = 0, max(self.READS_PACKED, count // 16)

    @property
    def packed_now(self) -> bool:
        """Whether the ids are still as the snapshot had them (not all decoded)."""
        return self._base is not None

    @property
    def ids(self) -> list[str]:
        if self._base is not None:  # the view does what callers do with a list
            return cast(list[str], self._ids_view)
        assert self._ids is not None
        return self._ids

    @property
    def row_of(self) -> dict[str, int]:
        if self._base is not None:
            return cast(dict[str, int], self._rows_view)
        if self._row_of is None:
            assert self._ids is not None
            ids = self._ids
            row_of = dict(zip(ids, range(len(ids))))
            blank = 0
            if self.blanks:
                row_of.pop("", None)
                blank = ids.count("")
            if len(row_of) != len(ids) - blank:
                raise SnapshotError(f"{self.what}: it holds an id twice")
            self._row_of = row_of
        return self._row_of

    def _untouched(self) -> bool:
        return not (self._over or self._tail or self._len != self._base.n) \
            if self._base is not None else False

    def packed(self) -> tuple[np.ndarray, np.ndarray]:
        """The ids as UTF-8 and offsets (as they were read, if no id was written since)."""
        if self._base is not None and self._untouched():
            return self._base.blob, self._base.offsets
        return encode_strings(list(self.ids))

    def packed_with_keys(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """`packed()` and its `id_keys` (as they were read, if no id was written since)."""
        if self._base is not None and self._untouched():
            return self._base.blob, self._base.offsets, self._base.keys()
        blob, offsets = self.packed()
        return blob, offsets, id_keys(blob, offsets)

    def prefix_keys(self) -> np.ndarray:
        """`common.id_keys` of the rows' ids (each id's first 8 bytes of UTF-8, big-endian,
        zero-padded), read from the blob while packed: a large tie in the first query after an
        open decodes no id (`LexicalIndex` picks such ties by these keys)."""
        if self._base is None:
            return id_keys_of(list(self.ids))
        base = self._base
        bounds = base.bounds
        starts, lengths = bounds[:-1], np.minimum(np.diff(bounds), 8)
        keys = np.zeros(self._len, dtype=np.uint64)
        upto = min(self._len, base.n)
        for j in range(8):
            has = np.flatnonzero(lengths[:upto] > j)
            keys[has] |= base.blob[starts[has] + j].astype(np.uint64) << np.uint64(8 * (7 - j))
        for row, s in self._over.items():
            if row < self._len:
                keys[row] = id_key_of(s)
        for i, s in enumerate(self._tail):
            keys[base.n + i] = id_key_of(s)
        return keys

    def __len__(self) -> int:
        if self._base is not None:
            return self._len
        assert self._ids is not None
        return len(self._ids)

    # ---------------------------------------------------------------- while packed
    # Reads answered packed before every id is decoded at once: a query reads a few dozen
    # rows, but a pass over many (a forgetting pass moves 2M units at 100k topics) paid ~3 us
    # a read packed, 10 s of CPU, where one decode of a 1M-id table takes ~0.3 s.
    READS_PACKED = 4096

    def _spend(self, reads: int = 1) -> bool:
        """Count reads; past the budget (a 16th of the rows, at least READS_PACKED) decode
        every id. True if the ids are now plain."""
        self._reads += reads
        if self._reads <= self._budget:
            return False
        self._decoded()
        return True

    def _position(self, row: int) -> int:
        """row as a list index would take it (negative from the end); IndexError outside."""
        if row < 0:
            row += self._len
        if not 0 <= row < self._len:
            raise IndexError("row out of range")
        return row

    def _id(self, row: int) -> str:
        base = self._base
        assert base is not None
        row = self._position(row)
        if row >= base.n:
            return self._tail[row - base.n]
        got = self._over.get(row)
        if got is None:
            got = self._read.get(row)
        if got is None:  # (a query's ties ask for the same rows again: kept)
            got = self._read[row] = base[row]
            if got:  # (an empty id is looked up by a search)
                self._seen[got] = row
        return got

    def _set_id(self, row: int, s: str) -> None:
        base = self._base
        assert base is not None
        row = self._position(row)
        if row >= base.n:
            self._tail[row - base.n] = s
        else:
            self._over[row] = s

    def _append(self, s: str) -> None:
        assert self._base is not None
        if self._len < self._base.n:
            self._over[self._len] = s
        else:
            self._tail.append(s)
        self._len += 1

    def _pop(self) -> str:
        assert self._base is not None
        s = self._id(self._len - 1)
        if self._len > self._base.n:
            self._tail.pop()
        else:
            self._over.pop(self._len - 1, None)
        self._len -= 1
        return s

    def _size(self) -> int:
        """row_of's size while packed: the base's ids, and what was written since."""
        assert self._base is not None
        return self._base.n - len(self._free_rows()) + self._count

    def _free_rows(self) -> set[int]:
        if self._free is None:
            assert self._base is not None
            self._free = set(np.flatnonzero(np.diff(self._base.bounds) == 0).tolist())
        return self._free

    def _row(self, s: str, found: list[int] | None = None) -> int | None:
        """s's row; `found`: the base's rows holding s, if searched already (`rows_of`)."""
        got = self._set.get(s)
        if got is not None or s in self._gone:
            return got
        base = self._base
        assert base is not None
        row = self._seen.get(s)
        if row is not None and row < self._len and row not in self._over:
            return row
        if not self._checked:
            if base.repeated(self._free_rows()):
                raise SnapshotError(f"{self.what}: it holds an id twice")
            self._checked = True
        for row in base.find(s) if found is None else found:
            if row < self._len and row not in self._over and row not in self._free_rows():
                self._seen[s] = row  # a query's candidate is looked up again (its status,
                return row           # then its salience)
        return None

    def rows_of(self, keys: list[str]) -> list[int | None]:
        """`row_of.get` of each key, those a search must find searched at once."""
        if self._base is None or self._spend(len(keys)):
            row_of = self.row_of
            return [row_of.get(s) for s in keys]
        return [self._row(s, found) for s, found in zip(keys, self._base.find_many(keys))]

    def _put_row(self, s: str, row: int) -> None:
        if self._row(s) is None:
            self._count += 1
        self._set[s] = row
        self._gone.discard(s)

    def _pop_row(self, s: str) -> int | None:
        row = self._row(s)
        if row is not None:
            self._set.pop(s, None)
            self._gone.add(s)
            self._count -= 1
        return row

    def _decoded(self) -> None:
        """Decode every id, once: the plain list and dict serve from here on."""
        base = self._base
        if base is None:
            return
        ids = base.all()
        free = self._free_rows()
        row_of = {s: r for r, s in enumerate(ids) if r not in free} if free else \
            dict(zip(ids, range(len(ids))))
        if len(row_of) != len(ids) - len(free):
            raise SnapshotError(f"{self.what}: it holds an id twice")
        for row, s in self._over.items():
            ids[row] = s
        del ids[self._len:]
        ids.extend(self._tail)
        for s in self._gone:
            row_of.pop(s, None)
        row_of.update(self._set)
        self._ids, self._row_of, self._base = ids, row_of, None
        self._over, self._tail, self._set, self._gone, self._seen, self._read = {}, [], {}, set(), {}, {}


def decoded(row_of: Mapping[str, int]) -> Mapping[str, int]:
    """`row_of` as a plain dict, its ids decoded at once if they were packed (for a caller
    about to look up every id)."""
    if isinstance(row_of, _RowsView):
        row_of.o._decoded()
        return row_of.o.row_of
    return row_of


def packed_of(ids: object) -> PackedIds | None:
    """The PackedIds whose `ids` these are, while they are packed."""
    return ids.o if isinstance(ids, _IdsView) and ids.o._base is not None else None


class _IdsView:
    """`PackedIds.ids` while packed: the list operations its owners use."""

    def __init__(self, owner: PackedIds) -> None:
        self.o = owner

    def __len__(self) -> int:
        return len(self.o)

    def __getitem__(self, row: int) -> str:
        if self.o._base is None or self.o._spend():
            return self.o.ids[row]
        return self.o._id(row)

    def __setitem__(self, row: int, s: str) -> None:
        if self.o._base is None:
            self.o.ids[row] = s
        else:
            self.o._set_id(row, s)

    def append(self, s: str) -> None:
        if self.o._base is None:
            self.o.ids.append(s)
        else:
            self.o._append(s)

    def pop(self) -> str:
        return self.o.ids.pop() if self.o._base is None else self.o._pop()

    def __iter__(self) -> Iterator[str]:
        self.o._decoded()
        return iter(self.o.ids)

    def count(self, s: str) -> int:
        self.o._decoded()
        return self.o.ids.count(s)


class _RowsView(MutableMapping[str, int]):
    """`PackedIds.row_of` while packed: a dict's operations, iteration decoding every id."""

    def __init__(self, owner: PackedIds) -> None:
        self.o = owner

    def get(self, s: Any, default: Any = None) -> Any:
        if self.o._base is None or self.o._spend():
            return self.o.row_of.get(s, default)
        row = self.o._row(s) if isinstance(s, str) else None
        return default if row is None else row

    def __getitem__(self, s: str) -> int:
        row = self.get(s)
        if row is None:
            raise KeyError(s)
        return cast(int, row)

    def __contains__(self, s: object) -> bool:
        return self.get(s) is not None

    def __setitem__(self, s: str, row: int) -> None:
        if self.o._base is None:
            self.o.row_of[s] = row
        else:
            self.o._put_row(s, row)

    def __delitem__(self, s: str) -> None:
        if self.pop(s, None) is None:
            raise KeyError(s)

    def pop(self, s: str, *default: Any) -> Any:  # type: ignore[override]
        if self.o._base is None:
            return self.o.row_of.pop(s, *default)
        row = self.o._pop_row(s)
        if row is None:
            if default:
                return default[0]
            raise KeyError(s)
        return row

    def __len__(self) -> int:
        if self.o._base is None:
            return len(self.o.row_of)
        return self.o._size()

    def __iter__(self) -> Iterator[str]:
        self.o._decoded()
        return iter(list(self.o.row_of))

