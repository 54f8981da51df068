"""`attest.row_hash` for many rows of one table: the same hashes, for less.

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
_sha256 = hashlib.sha256
_BOOL = {True: "true", False: "false"}.__getitem__
_NONE = type(None)


def _float(value: float) -> str:
    # json writes a non-finite float as NaN or Infinity, float.__repr__ as nan or inf
    if math.isfinite(value):
        return float.__repr__(value)
    return "NaN" if value != value else ("Infinity" if value > 0 else "-Infinity")


def _list(value: list[Any]) -> str:
    return "[" + ",".join(map(_ESC, value)) + "]"  # a non-str item raises: row_hash takes it


# How each value type is written (None: see _NULL).
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


# A null column is written into the template; its value still fills a place (every hashed
# column does, so one getter serves every plan), with no text or with "null".
_DROPPED_NULL = {None: ""}.__getitem__
_NULL = {None: "null"}.__getitem__


class RowHasher:
    """`attest.row_hash(table, row)`, for a table of gem/store/schema.py."""

    def __init__(self, table: str) -> None:
        self.table = table
        self.columns = tuple(sorted(TABLES[table].columns))
        behind = WRITTEN_BEHIND if table in ("Topic", "Field", "Episode") else frozenset()
        self.hashed = tuple(c for c in self.columns if c not in behind)
        self._behind = frozenset(behind)
        self._values = itemgetter(*self.hashed)
        # per combination of value types: the template and each value's encoder (None: row_hash)
        self._plans: dict[tuple[type, ...], tuple[str, tuple[Callable[[Any], str], ...]] | None] = {}

    def __call__(self, row: Row) -> str:
        # exactly the table's columns: as many, the hashed ones and the ones written behind
        if len(row) != len(self.columns) or not row.keys() >= self._behind:
            return row_hash(self.table, row)
        try:
            values = self._values(row)
        except KeyError:
            return row_hash(self.table, row)
        kinds = tuple(map(type, values))
        try:
            plan = self._plans[kinds]
        except KeyError:
            plan = self._plans[kinds] = self._plan(kinds)
        if plan is None:
            return row_hash(self.table, row)
        try:
            text = plan[0] % tuple(map(call, plan[1], values))
        except (TypeError, ValueError):
            return row_hash(self.table, row)
        return _sha256(text.encode("utf-8")).hexdigest()[:32]

    def _plan(self, kinds: tuple[type, ...]) -> tuple[str, tuple[Callable[[Any], str], ...]] | None:
        pieces: list[str] = []
        encoders: list[Callable[[Any], str]] = []
        kept = False  # a column always written came before: the next one follows a comma
        for column, kind in zip(self.hashed, kinds):
            key = _ESC(column) + ":"
            comma = "," if kept else ""
            if kind is _NONE and column in (*ADDED_LATER, *PLACE_COLUMNS):
                pieces.append("%s")
                encoders.append(_DROPPED_NULL)
            elif column in ADDED_LATER:
                if not kept or kind not in (str, list):
                    return None  # dropped before any column is kept, it would leave a comma
                pieces.append("%s")
                encoders.append(_dropped(key))
            elif kind is _NONE:
                pieces.append(comma + key.replace("%", "%%") + "%s")
                encoders.append(_NULL)
                kept = True
            elif kind in _ENCODERS:
                quote = '"' if kind is datetime else ""
                pieces.append(comma + key.replace("%", "%%") + quote + "%s" + quote)
                encoders.append(_ENCODERS[kind])
                kept = True
            else:
                return None
        template = self.table.replace("%", "%%") + "\n{" + "".join(pieces) + "}"
        return template, tuple(encoders)


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
