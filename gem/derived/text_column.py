"""A column of texts by row as UTF-8 bytes in one growing buffer: no str object per row.

The unit layer keeps every unit's search document (1M at 100k topics). As a list of str each
cost a str object (~50 bytes and its text) kept for the life of the process; those objects,
made while a memory grows, are what pin the interpreter's small-object arenas (measured at
10k topics: 118 MB of arenas, of which dropping every derived structure freed 60 MB of
objects but no arena). Here a row is an extent of a byte buffer, decoded when read (a query
reads its hits'). A rewrite appends and leaves its old bytes as garbage, copied out once it is a
quarter of the buffer (amortised O(1) a write, as `gem/index/rows.py`'s sparse rows). A
snapshot's texts are adopted as they were read (the file's mapped blob) and stay there until
their row is rewritten.
"""
from __future__ import annotations

import numpy as np

from ..errors import SnapshotError
from ..index.packed import PackedStrings
from ..index.rows import capacity_for

_NONE, _BASE = -1, -2  # a row's start when it has no text, or when its text is the snapshot's


class TextColumn:
    """Texts by row (None: no text). `what` names the owner in errors."""

    def __init__(self, what: str) -> None:
        self.what = what
        self.base: PackedStrings | None = None
        self.changed = False  # whether a row differs from the base since it was adopted
        self.data = np.zeros(1024, dtype=np.uint8)
        self.used = self.garbage = 0
        self.n = 0
        self.start = np.full(16, _NONE, dtype=np.int64)
        self.size = np.zeros(16, dtype=np.int32)

    @classmethod
    def adopted(cls, blob: np.ndarray, offsets: np.ndarray, has: np.ndarray,
                what: str) -> "TextColumn":
        """A snapshot's texts (`packed`'s arrays), each read from its blob when asked for."""
        base = PackedStrings(blob, offsets, what)
        if has.shape != (base.n,):
            raise SnapshotError(f"{what}: its rows disagree")
        column = cls(what)
        column.base, column.n = base, base.n
        column.start = np.where(has != 0, _BASE, _NONE).astype(np.int64)
        column.size = np.zeros(base.n, dtype=np.int32)
        return column

    def __len__(self) -> int:
        return self.n

    def grow(self, n: int) -> None:
        """Rows up to n, the new ones without a text."""
        if n > self.start.shape[0]:
            cap = capacity_for(self.start.shape[0], n)
            self.start = np.concatenate([self.start, np.full(cap - self.start.shape[0], _NONE,
                                                             dtype=np.int64)])
            self.size = np.concatenate([self.size, np.zeros(cap - self.size.shape[0],
                                                            dtype=np.int32)])
        if n > self.n:
            self.n, self.changed = n, True

    def __getitem__(self, row: int) -> str | None:
        if not 0 <= row < self.n:
            raise IndexError("row out of range")
        at = int(self.start[row])
        if at >= 0:
            return self.data[at:at + int(self.size[row])].tobytes().decode("utf-8",
                                                                           "surrogatepass")
        if at == _BASE:
            assert self.base is not None
            return self.base[row]
        return None

    def __setitem__(self, row: int, text: str | None) -> None:
        if not 0 <= row < self.n:
            raise IndexError("row out of range")
        self.changed = True
        if self.start[row] >= 0:
            self.garbage += int(self.size[row])
        self.start[row], self.size[row] = _NONE, 0  # before a copy-out: its bytes are garbage
        if text is not None:
            b = text.encode("utf-8", "surrogatepass")
            if self.used + len(b) > self.data.shape[0]:
                self._make_room(len(b))
            self.data[self.used:self.used + len(b)] = np.frombuffer(b, dtype=np.uint8)
            self.start[row], self.size[row] = self.used, len(b)
            self.used += len(b)

    def _make_room(self, more: int) -> None:
        """Copy the live bytes out in row order if garbage is a quarter of the buffer, and grow
        it if they still leave no room for `more`."""
        if self.garbage > self.used // 4:
            rows = np.flatnonzero(self.start[:self.n] >= 0)
            idx = self._extents(self.start[rows], self.size[rows])
            self.data[:idx.shape[0]] = self.data[idx]  # a gather copies before it writes
            self.start[rows] = np.cumsum(self.size[rows], dtype=np.int64) - self.size[rows]
            self.used, self.garbage = idx.shape[0], 0
        if self.used + more > self.data.shape[0]:
            grown = np.zeros(capacity_for(self.data.shape[0], self.used + more), dtype=np.uint8)
            grown[:self.used] = self.data[:self.used]
            self.data = grown

    @staticmethod
    def _extents(starts: np.ndarray, sizes: np.ndarray) -> np.ndarray:
        """Positions of the bytes of extents (start, size), extent after extent."""
        sizes = sizes.astype(np.int64)
        ends = np.cumsum(sizes)
        total = int(ends[-1]) if ends.shape[0] else 0
        return np.repeat(starts - (ends - sizes), sizes) + np.arange(total, dtype=np.int64)

    def packed(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(UTF-8, offsets in characters, which rows have a text): what `encode_strings` makes
        of the texts with "" for None (as adopted, if no row changed since)."""
        if self.base is not None and not self.changed:
            return self.base.blob, self.base.offsets, (self.start[:self.n] == _BASE).astype(
                np.uint8)
        start, size = self.start[:self.n], self.size[:self.n].astype(np.int64)
        source = self.data[:self.used]
        if self.base is not None and (start == _BASE).any():
            bounds = self.base.bounds
            on_base = np.flatnonzero(start == _BASE)
            start = start.copy()
            size = size.copy()
            start[on_base] = self.used + bounds[on_base]
            size[on_base] = bounds[on_base + 1] - bounds[on_base]
            source = np.concatenate([source, self.base.blob])
        size[start < 0] = 0
        blob = source[self._extents(np.maximum(start, 0), size)]
        # a character's first byte is the one byte of its UTF-8 that is no continuation byte
        firsts = np.concatenate([[0], np.cumsum((blob & 0xC0) != 0x80, dtype=np.int64)])
        offsets = firsts[np.concatenate([[0], np.cumsum(size)])]
        if offsets[-1] < 2**31:
            offsets = offsets.astype(np.int32)
        return blob, offsets, (start != _NONE).astype(np.uint8)
