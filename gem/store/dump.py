"""Every stored row as a JSON-able record, and back: what `gem export` writes and `gem import`
reads (gem/transfer.py frames the records).

A record is one row of a node table, `{"table": T, "row": {column: value}}`, or one
relationship, `{"rel": R, "from": key, "to": key, "props": {...}}`. Values are JSON as they
are; timestamps are ISO 8601 text and are read back by their column's type in the schema, so
the records carry no type tags. Rows are dumped exactly as stored (log records, id counters,
salience columns and stored policies included): an import of them is the same database, which
is what lets the audit re-check every row hash and the chain after a round trip.
"""
from __future__ import annotations

from datetime import datetime
from typing import Any, Iterable, Iterator, get_type_hints

from .graph import Tx
from .queries import create_rels, create_rows, stream_rels, stream_rows
from .schema import RELS, TABLES, Row, cypher_type

# Node tables before the relationships that join them; parents before children. Every table
# of the schema is in it (checked below): a table left out would be lost by export, import and
# compaction alike.
NODE_ORDER = ("Meta", "Policy", "Topic", "Field", "Entry", "Observation", "Flag", "Episode",
              "Transition")
if set(NODE_ORDER) != set(TABLES):  # pragma: no cover - a schema change that forgot this list
    raise ImportError(f"gem/store/dump.py NODE_ORDER misses tables: {set(TABLES) - set(NODE_ORDER)}")
REL_ORDER = tuple(RELS)
BATCH = 2000


def _timestamp_columns(row: type | None) -> frozenset[str]:
    hints = get_type_hints(row) if row is not None else {}
    return frozenset(c for c, t in hints.items() if cypher_type(t) == "TIMESTAMP")


_NODE_TIMES = {name: _timestamp_columns(t.row) for name, t in TABLES.items()}
_REL_TIMES = {name: _timestamp_columns(r.props) for name, r in RELS.items()}


def _encode(row: Row) -> Row:
    return {c: v.isoformat() if isinstance(v, datetime) else v for c, v in row.items()}


def _decode(row: Row, times: frozenset[str], known: Iterable[str], what: str) -> Row:
    unknown = set(row) - set(known)
    if unknown:
        raise ValueError(f"{what} has columns the schema does not know: {sorted(unknown)}")
    out = dict(row)
    for c in times:
        if out.get(c) is not None:
            out[c] = datetime.fromisoformat(out[c])
    return out


def dump(tx: Tx) -> Iterator[dict[str, Any]]:
    """Every row and relationship of the database, in load order."""
    for table in NODE_ORDER:
        for row in stream_rows(tx, table):  # stored order: an import keeps it
            yield {"table": table, "row": _encode(row)}
    for rel in REL_ORDER:
        for a, b, props in stream_rels(tx, rel):
            yield {"rel": rel, "from": a, "to": b, "props": _encode(props)}


class Loader:
    """Writes dumped records into an empty database, in batches (call `flush` at the end).
    A record that does not fit the schema raises ValueError naming what is wrong."""

    def __init__(self, tx: Tx) -> None:
        self.tx = tx
        self.rows: dict[str, list[Row]] = {}
        self.rels: dict[str, list[tuple[str, str, Row]]] = {}
        self.done_tables: list[str] = []
        self.count = 0

    def add(self, record: dict[str, Any]) -> None:
        if "table" in record:
            table = record["table"]
            if table not in TABLES:
                raise ValueError(f"unknown table {table!r}")
            if self.rels:
                raise ValueError(f"a {table} row after the relationships")
            self._order(table)
            row = record.get("row")
            if not isinstance(row, dict) or TABLES[table].key not in row:
                raise ValueError(f"a {table} record needs a row with its key "
                                 f"{TABLES[table].key!r}")
            batch = self.rows.setdefault(table, [])
            batch.append(_decode(row, _NODE_TIMES[table], TABLES[table].columns, table))
            if len(batch) >= BATCH:
                self._write_rows(table)
        elif "rel" in record:
            rel = record["rel"]
            if rel not in RELS:
                raise ValueError(f"unknown relationship {rel!r}")
            a, b, props = record.get("from"), record.get("to"), record.get("props", {})
            if not isinstance(a, str) or not isinstance(b, str) or not isinstance(props, dict):
                raise ValueError(f"a {rel} record needs 'from' and 'to' keys and 'props'")
            self._flush_rows()
            batch_r = self.rels.setdefault(rel, [])
            batch_r.append((a, b, _decode(props, _REL_TIMES[rel], RELS[rel].columns, rel)))
            if len(batch_r) >= BATCH:
                self._write_rels(rel)
        else:
            raise ValueError("a record is either a table row ('table') or a relationship ('rel')")
        self.count += 1

    def _order(self, table: str) -> None:
        if self.done_tables and self.done_tables[-1] == table:
            return
        if table in self.done_tables:
            raise ValueError(f"{table} rows are not together")
        self._flush_rows()
        self.done_tables.append(table)

    def _write_rows(self, table: str) -> None:
        rows = self.rows.pop(table, [])
        if rows:
            create_rows(self.tx, table, rows)

    def _write_rels(self, rel: str) -> None:
        pairs = self.rels.pop(rel, [])
        if pairs:
            create_rels(self.tx, rel, pairs)

    def _flush_rows(self) -> None:
        for table in list(self.rows):
            self._write_rows(table)

    def flush(self) -> None:
        self._flush_rows()
        for rel in list(self.rels):
            self._write_rels(rel)


__all__ = ["dump", "Loader", "NODE_ORDER", "REL_ORDER"]
