"""The units' documents and valid times as columns by the row of their lexical index entry.

Every unit with a document has one entry in the unit layer's lexical index, and that entry's
row stays put until the unit is rewritten or removed: the documents and valid times are kept
by that row (texts as UTF-8 in one buffer, gem/derived/text_column.py, and a float64 array)
instead of two dicts keyed by unit id. At 10k topics the two dicts and their float objects held
~12 of the 18.7 MB of this part, and a list of 100k str 9 MB more.
"""
from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Generic, TypeVar

import numpy as np

from ..errors import SnapshotError
from ..index import LexicalIndex
from ..index.packed import decoded
from .text_column import TextColumn

T = TypeVar("T")


class UnitColumns:
    """Documents and valid times of the units in `lexical` (written after their entry)."""

    def __init__(self, lexical: LexicalIndex) -> None:
        self.lexical = lexical
        # each decoded when read (a query reads its hits'); a loaded snapshot's stay in its file
        self.texts = TextColumn("the unit documents")
        self.times = np.zeros(0, dtype=np.float64)
        self.docs: Mapping[str, str] = _Column(self, "texts")
        self.valid: Mapping[str, float] = _Column(self, "times")

    def _room(self, row: int) -> None:
        self.texts.grow(row + 1)
        if row >= self.times.shape[0]:
            grown = np.zeros(max(16, row + 1, self.times.shape[0] * 5 // 4), dtype=np.float64)
            grown[: self.times.shape[0]] = self.times
            self.times = grown

    def put(self, unit: str, text: str, valid: float) -> None:
        """Record `unit`'s document and valid time; its lexical entry must be written first."""
        row = self.lexical.rows[unit]
        self._room(row)
        self.texts[row] = text
        self.times[row] = valid

    def drop(self, row: int | None) -> None:
        """Release what a removed entry's row held (the row no longer belongs to its unit)."""
        if row is not None and row < len(self.texts):
            self.texts[row] = None

    def by_row(self) -> dict[str, np.ndarray]:
        """The columns by row, as a snapshot holds them (what `load_by_row` takes): texts as
        UTF-8 and offsets, which rows have one, valid times."""
        n = len(self.texts)
        blob, offsets, has = self.texts.packed()
        return {"docs_utf8": blob, "docs_offsets": offsets, "docs_has": has,
                "valid": self.times[:n].copy()}

    def load_by_row(self, arrays: dict[str, np.ndarray], what: str) -> None:
        """Take a snapshot's columns by row (`by_row`), written with the lexical index: the
        texts stay packed until read; SnapshotError unless as many rows have one as the index
        has units."""
        has = arrays["docs_has"]
        texts = TextColumn.adopted(arrays["docs_utf8"], arrays["docs_offsets"], has, what)
        valid = arrays["valid"]
        if valid.shape != (texts.n,) or int(np.count_nonzero(has)) != len(self.lexical.rows):
            raise SnapshotError(f"{what}: the unit documents and the unit index disagree")
        self.texts, self.times = texts, valid

    def load(self, ids: list[str], texts: list[str], valid: np.ndarray) -> None:
        """Take a snapshot's columns by unit, in any order (a snapshot of format 9 or before);
        ValueError unless they hold the units of the lexical index exactly."""
        rows = decoded(self.lexical.rows)  # every id is looked up
        if len(ids) != len(rows) or len(texts) != len(ids) or valid.shape != (len(ids),):
            raise ValueError("the unit documents and the unit index disagree")
        at = np.fromiter(map(rows.get, ids, [-1] * len(ids)), dtype=np.int64, count=len(ids))
        if len(ids) and (int(at.min()) < 0 or np.unique(at).shape[0] != len(ids)):
            raise ValueError("the unit documents and the unit index disagree")
        size = int(at.max()) + 1 if len(ids) else 0
        self._room(size - 1)
        for row, text in zip(at.tolist(), texts):
            self.texts[row] = text
        self.times[at] = valid


class _Column(Mapping[str, T], Generic[T]):
    """unit -> its value in one column, for the units in the lexical index."""

    def __init__(self, owner: UnitColumns, name: str) -> None:
        self.owner = owner
        self.name = name  # the column, read each time: the times array is replaced as it grows

    def __getitem__(self, unit: str) -> T:
        value = getattr(self.owner, self.name)[self.owner.lexical.rows[unit]]
        return value.item() if isinstance(value, np.generic) else value  # type: ignore[return-value]

    def __contains__(self, unit: object) -> bool:
        return unit in self.owner.lexical.rows

    def __iter__(self) -> Iterator[str]:
        return iter(list(self.owner.lexical.rows))

    def __len__(self) -> int:
        return len(self.owner.lexical.rows)

    def items(self):  # type: ignore[override]
        """(unit, value) pairs in one pass (a `between` window reads every valid time)."""
        rows = self.owner.lexical.rows
        column = getattr(self.owner, self.name)
        if isinstance(column, np.ndarray):
            values = column[np.fromiter(rows.values(), dtype=np.int64, count=len(rows))].tolist()
        else:
            values = [column[r] for r in rows.values()]
        return list(zip(rows, values))
