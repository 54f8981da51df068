"""`attest.row_hash` for many rows of one table: the same hashes, a third of the time.

The full audit hashes every stored row (1.1M entries and 1M fields at 100k topics), and
`dumps` spent most of a row's hash on building and sorting a dict and on calling back into
Python for each datetime. A `RowHasher` knows its table's columns in their sorted (canonical)
order and, for each combination of value types a row holds (a handful per table), a format
template with the keys, the nulls and the dropped columns written in once, so a row costs one
`%` of values each encoded by a C function. Only value types whose canonical text it
reproduces exactly (str, int, bool, float, None, datetime, lists of str) take that path; any
other row, or a row whose columns are not exactly its table's, is hashed by
`attest.row_hash` itself (tests/test_rowhash.py holds the two byte-identical).
"""
from __future__ import annotations

import hashlib
import json
import math
from datetime import datetime
from operator import call, itemgetter
from typing import Any, Callable

from .attest import ADDED_LATER, PLACE_COLUMNS, WRITTEN_BEHIND, row_hash
from .store.schema import TABLES, Row
from .units import _isoformat  # the remembered text dumps writes: isoformat costs ~1 us aware

_ESC: Callable[[str], str] = json.encoder.encode_basestring_ascii  # what dumps escapes with
_BOOL = {True: "true", False: "false"}.__getitem__
_NONE = type(None)


def _float(value: float) -> str:
    # json writes a non-finite float as NaN or Infinity, float.__repr__ as nan or inf
    if math.isfinite(value):
        return float.__repr__(value)
    return "NaN" if value != value else ("Infinity" if value > 0 else "-Infinity")


def _list(value: list[Any]) -> str:
    return "[" + ",".join(map(_ESC, value)) + "]"  # a non-str item raises: row_hash takes it


# How each value type is written (None is written into the template: it has no function).
_ENCODERS: dict[type, Callable[[Any], str]] = {
    str: _ESC, int: int.__repr__, bool: _BOOL, float: _float, datetime: _isoformat,
    list: _list}


def _dropped(key: str) -> Callable[[Any], str]:
    """The encoder of a column left out of the hash when empty (attest.ADDED_LATER): the
    column's whole text, its separator and key included, or nothing."""
    head = "," + key

    def text(value: Any) -> str:
        return head + (_list(value) if value.__class__ is list else _ESC(value)) if value else ""
    return text


class _Plan:
    """The text of rows whose values have one combination of types."""
    __slots__ = ("template", "encoders", "values")

    def __init__(self, template: str, encoders: tuple[Callable[[Any], str], ...],
                 values: Callable[[Row], Any]) -> None:
        self.template, self.encoders, self.values = template, encoders, values


class RowHasher:
    """`attest.row_hash(table, row)`, for a table of gem/store/schema.py."""

    def __init__(self, table: str) -> None:
        self.table = table
        self.columns = tuple(sorted(TABLES[table].columns))
        self._all = itemgetter(*self.columns)
        self._plans: dict[tuple[type, ...], _Plan | None] = {}

    def __call__(self, row: Row) -> str:
        if len(row) != len(self.columns):
            return row_hash(self.table, row)
        try:
            kinds = tuple(map(type, self._all(row)))
        except KeyError:
            return row_hash(self.table, row)
        try:
            plan = self._plans[kinds]
        except KeyError:
            plan = self._plans[kinds] = self._plan(kinds)
        if plan is None:
            return row_hash(self.table, row)
        try:
            text = plan.template % tuple(map(call, plan.encoders, plan.values(row)))
        except (TypeError, ValueError):
            return row_hash(self.table, row)
        return hashlib.sha256(text.encode("utf-8")).hexdigest()[:32]

    def _plan(self, kinds: tuple[type, ...]) -> _Plan | None:
        skip = WRITTEN_BEHIND if self.table in ("Topic", "Field", "Episode") else ()
        pieces: list[str] = []
        encoders: list[Callable[[Any], str]] = []
        taken: list[str] = []
        for column, kind in zip(self.columns, kinds):
            if column in skip or (kind is _NONE and column in (*ADDED_LATER, *PLACE_COLUMNS)):
                continue
            key = _ESC(column) + ":"
            if column in ADDED_LATER:
                if not pieces or kind not in (str, list):
                    return None  # dropped before any column is kept, it would leave a comma
                pieces.append("%s")
                encoders.append(_dropped(key))
            elif kind is _NONE:
                pieces.append(("," if pieces else "") + key.replace("%", "%%") + "null")
                continue
            elif kind in _ENCODERS:
                quote = '"' if kind is datetime else ""
                pieces.append(("," if pieces else "") + key.replace("%", "%%") + quote + "%s" + quote)
                encoders.append(_ENCODERS[kind])
            else:
                return None
            taken.append(column)
        values = (lambda row: ()) if not taken else itemgetter(*taken) if len(taken) > 1 \
            else (lambda row: (row[taken[0]],))
        template = self.table.replace("%", "%%") + "\n{" + "".join(pieces) + "}"
        return _Plan(template, tuple(encoders), values)


# value.isoformat(), remembered as dumps remembers it: the audit compares each stored salience
# time with the log's text of it, and an aware datetime's isoformat costs ~1 us.
isoformat = _isoformat


_HASHERS: dict[str, RowHasher] = {}


def hasher(table: str) -> RowHasher:
    """The one `RowHasher` of a table (its plans are learnt once per process)."""
    found = _HASHERS.get(table)
    if found is None:
        found = _HASHERS[table] = RowHasher(table)
    return found
