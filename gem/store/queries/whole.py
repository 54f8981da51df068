"""A topic read whole in one statement: its row, its fields' rows and their entries.

A retrieval of a topic not cached yet reads its row, its fields and their histories: three
kuzu statements, each the engine's fixed cost (the hop's semi-masked scan of the child table's
node groups, a hand-off to the engine's worker threads), where the rows they return cost
little. One pattern from the topic's key down to the entries returns the same rows, repeated
per entry: measured at 10k topics (side by side on a loaded 2-core VM), 24-34 ms for the one
statement against 35-44 ms for the three. The caller checks what it got (a field without
entries is absent from it) and reads the usual way when it cannot tell.
"""
from __future__ import annotations

from typing import Any

from ..graph import Tx
from ..schema import TABLES, Row
from . import reads
from .forms import _rows

_TOPIC, _FIELD, _ENTRY = (TABLES[t].columns for t in ("Topic", "Field", "Entry"))


def supported(tx: Tx, topics: int) -> bool:
    """Only on kuzu, where it was measured (LadybugDB and FalkorDB plan hops otherwise), and
    for as many topics as kuzu reads histories of a topic at a time anyway (more are read in
    one scan of the entries: gem/store/queries/reads.py)."""
    return tx.engine == "kuzu" and topics <= max(
        reads.KUZU_FEW_KEYS, tx.size("Entry") // reads.KUZU_CHILD_ROWS_PER_TOPIC_READ)


def _returns(var: str, cols: tuple[str, ...] | list[str]) -> str:
    return ", ".join(f"{var}.{c} AS {var}_{c}" for c in cols)


_TEXT = (f"MATCH (t:Topic {{id: $t}})-[:HAS_FIELD]->(p:Field)-[:HAS_ENTRY]->(c:Entry) "
         f"RETURN {_returns('t', _TOPIC)}, {_returns('p', _FIELD)}, {_returns('c', _ENTRY)}")


def _order(row: Row, by: tuple[str, ...]) -> tuple[Any, ...]:
    # as gem.store.queries.reads._Order.few sorts one parent's children
    return tuple((row[c] is None, row[c]) for c in by)


def read_topic_whole(tx: Tx, tid: str) -> tuple[Row, list[Row], dict[str, list[Row]]] | None:
    """(topic row, its fields' rows in creation order, field id -> its entries in recording
    order), or None when the topic has no field with an entry (or does not exist). A field
    without entries is left out: the caller compares the fields with those it knows of."""
    found = tx.run(_TEXT, {"t": tid})
    if not found:
        return None
    a, b = len(_TOPIC), len(_TOPIC) + len(_FIELD)
    topic = _rows(tx, "Topic", _TOPIC, [found[0][:a]])[0]
    fields: dict[str, Row] = {}
    entries: dict[str, list[Row]] = {}
    for values, entry in zip(found, _rows(tx, "Entry", _ENTRY, (v[b:] for v in found))):
        fid = values[a + _FIELD.index("id")]
        if fid not in fields:
            fields[fid] = _rows(tx, "Field", _FIELD, [values[a:b]])[0]
            entries[fid] = []
        entries[fid].append(entry)
    ordered = sorted(fields.values(), key=lambda r: _order(r, ("created_at", "id")))
    for rows in entries.values():
        rows.sort(key=lambda r: _order(r, ("seq",)))
    return topic, ordered, entries
