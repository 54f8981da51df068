"""Keyed reads: rows by key, and 1-hop children of many parents in the form each engine
looks up cheapest."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Sequence

from ..graph import Tx
from ..schema import EDGE_TABLES, RELS, TABLES, Rel, Row

from .forms import KEY_JOIN_CHUNK, KUZU_ROWS_PER_KEY_LOOKUP, READ_CHUNK, _TIMES, _falkor, _kuzu, _rows



# ---------------------------------------------------------------------- keyed reads
def _returns(var: str, columns: Sequence[str]) -> str:
    return ", ".join(f"{var}.{c}" for c in columns)


def read_rows(tx: Tx, table: str, keys: Sequence[Any]) -> list[Row]:
    """The rows with these primary keys (missing keys are simply absent)."""
    spec = TABLES[table]
    cols = spec.columns
    if not keys:
        return []
    returns = _returns("n", cols)
    if len(keys) == 1 or (_kuzu(tx) and len(keys) <= tx.size(table) // KUZU_ROWS_PER_KEY_LOOKUP):
        text = f"MATCH (n:{table} {{{spec.key}: $k}}) RETURN {returns}"
        found = [r for key in keys for r in tx.run(text, {"k": key})]
    else:  # kuzu: one hash join; ladybug and FalkorDB: an index lookup per row
        chunk = KEY_JOIN_CHUNK if _kuzu(tx) else READ_CHUNK
        text = f"UNWIND $keys AS k MATCH (n:{table} {{{spec.key}: k}}) RETURN {returns}"
        times = [i for i, c in enumerate(cols) if c in _TIMES[table]]  # see stream_rows
        found = [r for i in range(0, len(keys), chunk)
                 for r in tx.stream(text, {"keys": list(keys[i:i + chunk])}, times=times)]
    return _rows(tx, table, cols, found)


@dataclass(frozen=True)
class _Order:
    """The order children come back in. A statement over many parents says it (`text`); one
    for a single parent (or one topic's fields) is sorted here by the same columns (`at`:
    their positions in its rows): kuzu's ORDER BY costs ~0.25 ms even over one row, a fifth of
    reading a field's history at 1M entries."""
    text: str = ""
    at: tuple[int, ...] = ()

    def few(self, rows: list[list[Any]]) -> list[list[Any]]:
        if len(rows) < 2 or not self.at:
            return rows
        return sorted(rows, key=lambda v: tuple((v[i] is None, v[i]) for i in self.at))


# LadybugDB's 1-hop from many parents looks each parent up by index (5-8 us a key at 1,000
# keys a statement). Where the child holds its owner's key, one hash join of the keys with that
# column scans the child table instead (~0.05-0.08 us a child row, plus ~1 us a key). Measured
# at 100k entries: 1,000 keys 5.2 ms by lookups against 9.1 ms joined, 5,000 keys 23.5 against
# 10.4; at 1M entries: 5,000 keys 41.6 against 46.6 ms, 20k keys 144 against 58, 1M keys (a
# forgetting pass's histories) 8.3 s against 1.4 s.
LADYBUG_CHILD_ROWS_PER_KEYED_READ = 100


def _one_hop(tx: Tx, parent: str, hop: str, returns: str, order: _Order,
             keys: Sequence[str], child: str = "Topic",
             parent_column: str | None = None, where: str = "") -> list[list[Any]]:
    """Rows `p.id, c.id, <returns>` of `(p:parent)<hop>` from many parents `p` (kuzu: see
    `_kuzu_one_hop`; ladybug: per parent up to 64, then index lookups of the parents and an
    OPTIONAL MATCH, or, for more parents than the child table's rows / 100 and a child that
    holds its owner's key, one join with that column; FalkorDB: one IN list, looked up by
    index). `where`: a condition on the child `c` (constant: no parameters of its own) that
    each returned row meets."""
    if not keys:
        return []
    if _kuzu(tx):
        return _kuzu_one_hop(tx, parent, hop, child, parent_column, returns, order, keys, where)
    columns = f"p.id AS parent_key, c.id AS child_key, {returns}"
    arrow = f"(p:{parent}){hop}"
    also = f" AND {where}" if where else ""
    if not _falkor(tx) and len(keys) <= 64:
        text = f"MATCH {arrow} WHERE p.id = $id{also} RETURN {columns}"
        return [r for key in keys for r in order.few(tx.run(text, {"id": key}))]
    if _falkor(tx):
        return tx.run(f"MATCH {arrow} WHERE p.id IN $ids{also} RETURN {columns} {order.text}",
                      {"ids": list(keys)})
    if parent_column is not None and \
            len(keys) * LADYBUG_CHILD_ROWS_PER_KEYED_READ > tx.size(child):
        return _child_column_join(tx, child, parent_column, returns, order, keys, where)
    out = []
    for i in range(0, len(keys), READ_CHUNK):
        rows = tx.run(f"UNWIND $ids AS k MATCH (p:{parent} {{id: k}}) OPTIONAL MATCH (p){hop} "
                      f"{'WHERE ' + where if where else ''} "
                      f"RETURN {columns} {order.text}", {"ids": list(keys[i:i + READ_CHUNK])})
        out += [r for r in rows if r[1] is not None]
    return out


# kuzu's ways of reading a 1-hop from many parents, measured (bench/engine_forms.py): a
# statement per parent key (an index lookup, then the hop: ~0.65 ms at 200k parents, ~1.1 ms
# for a field's entries at 1M; the entries of many fields of few topics are read per topic,
# the topic's key then two hops, ~3 ms for its 10 fields); one IN list (a scan that tests each
# row against the list: ~(40 + 1.8 x keys) ns per row); one hash join of the keys with the
# parent table, then the hop (a scan: ~360 ns per row, 0.7-1.4 s for 2,000 fields at 1M);
# and, where the child holds its owner's key (`Rel.parent_column`), one hash join of the keys
# with that column of the child table (a scan of one column: ~0.16 us per row, 160 ms for the
# entries of 1 to 2,000 fields at 1M entries). A child column join wins once keys pass
# children / 6000 (per key) or topics pass children / 20000 (per topic); without one, per key
# wins while keys stay under parents / 1800; then the IN list up to ~180 keys; then the join.
KUZU_FEW_KEYS = 4    # fewer keys (topics, for entries) than this: per key at any size
# Read per topic, a field's entries cost its topic's other fields' too: at 100k topics (1M
# entries) one field 3.5 ms through its topic against 1.9 by its key, two 3.0 against 3.6. A
# free-text query reads the histories of its top fields, mostly one a topic.
KUZU_FIELDS_PER_TOPIC_READ = 2
KUZU_ROWS_PER_KEYED_READ = 1800
KUZU_IN_LIST_KEYS = 180
KUZU_CHILD_ROWS_PER_KEYED_READ = 6000
KUZU_CHILD_ROWS_PER_TOPIC_READ = 20_000


def _kuzu_one_hop(tx: Tx, parent: str, hop: str, child: str, parent_column: str | None,
                  returns: str, order: _Order, keys: Sequence[str], where: str = "") -> list[list[Any]]:
    arrow = f"(p:{parent}){hop}"
    columns = f"p.id AS parent_key, c.id AS child_key, {returns}"
    also = f" AND {where}" if where else ""
    rows = tx.size(parent)
    children = tx.size(child) if parent_column is not None else 0
    if parent == "Field" and child == "Entry":
        by_topic: dict[str, list[str]] = {}
        for fid in keys:
            by_topic.setdefault(fid.split("/", 1)[0], []).append(fid)
        topics = children // KUZU_CHILD_ROWS_PER_TOPIC_READ if parent_column is not None \
            else rows // KUZU_ROWS_PER_KEYED_READ
        if len(keys) >= KUZU_FEW_KEYS and len(by_topic) <= max(KUZU_FEW_KEYS, topics):
            text = (f"MATCH (t:Topic {{id: $t}})-[:HAS_FIELD]->{arrow} WHERE p.id IN $ids{also} "
                    f"RETURN {columns}")
            by_key = f"MATCH {arrow} WHERE p.id = $id{also} RETURN {columns}"
            out = []
            for tid, fids in by_topic.items():
                if len(fids) >= KUZU_FIELDS_PER_TOPIC_READ:
                    out += order.few(tx.run(text, {"t": tid, "ids": fids}))
                else:
                    out += [r for fid in fids for r in order.few(tx.run(by_key, {"id": fid}))]
            return out
    keyed = children // KUZU_CHILD_ROWS_PER_KEYED_READ if parent_column is not None \
        else rows // KUZU_ROWS_PER_KEYED_READ
    if len(keys) < KUZU_FEW_KEYS or len(keys) <= keyed:
        text = f"MATCH {arrow} WHERE p.id = $id{also} RETURN {columns}"
        return [r for key in keys for r in order.few(tx.run(text, {"id": key}))]
    if parent_column is not None:
        return _child_column_join(tx, child, parent_column, returns, order, keys, where)
    if len(keys) <= KUZU_IN_LIST_KEYS:
        return tx.run(f"MATCH {arrow} WHERE p.id IN $ids{also} RETURN {columns} {order.text}",
                      {"ids": list(keys)})
    return _key_chunks(tx, f"UNWIND $ids AS x WITH x AS k MATCH (p:{parent} {{id: k}}){hop} "
                           f"{'WHERE ' + where if where else ''} RETURN {columns} {order.text}",
                       keys)


def _child_column_join(tx: Tx, child: str, parent_column: str, returns: str, order: _Order,
                       keys: Sequence[str], where: str = "") -> list[list[Any]]:
    """A 1-hop from many parents as one hash join of their keys with the child's owner-key
    column: a scan of one column of the child table instead of a lookup per parent."""
    also = f" AND {where}" if where else ""
    return _key_chunks(tx, f"UNWIND $ids AS k MATCH (c:{child}) WHERE c.{parent_column} = k{also} "
                           f"RETURN k AS parent_key, c.id AS child_key, {returns} {order.text}",
                       keys)


def _key_chunks(tx: Tx, text: str, keys: Sequence[str]) -> list[list[Any]]:
    """The rows of a hash-join read (`$ids`), run once per KEY_JOIN_CHUNK keys."""
    out = []
    for i in range(0, len(keys), KEY_JOIN_CHUNK):
        out += tx.run(text, {"ids": list(keys[i:i + KEY_JOIN_CHUNK])})
    return out


def _owned_hop(spec: Rel) -> str:
    """The pattern from an owner `p` to its children `c`, after `(p:<parent>)`."""
    return f"<-[:{spec.name}]-(c:{spec.child})" if spec.child_first else \
        f"-[:{spec.name}]->(c:{spec.child})"


def read_children(tx: Tx, rel: str, parents: Sequence[str], where: str = "") -> list[tuple[str, Row]]:
    """(parent key, child row) over an owning relationship, children in creation order;
    with `where` (a condition on the child `c`), only the children that meet it."""
    spec = RELS[rel]
    parent, child = spec.parent, spec.child
    cols = TABLES[child].columns
    hop = _owned_hop(spec)
    by = ("seq",) if "seq" in cols else ("created_at", "id")
    # rows are [parent key, child key, *cols]
    order = _Order("ORDER BY " + ", ".join(f"c.{c}" for c in by), tuple(2 + cols.index(c) for c in by))
    found = _one_hop(tx, parent, hop, _returns("c", cols), order, parents, child,
                     spec.parent_column, where)
    rows = _rows(tx, child, cols, (values[2:] for values in found))
    return [(values[0], row) for values, row in zip(found, rows)]


FADED_SCAN_KEYS = 1000  # fields from which read_faded_history scans for those holding any first


def read_faded_history(tx: Tx, fields: Sequence[str]) -> list[tuple[str, Row]]:
    """(field key, entry row) of the entries of these fields still in the active history but
    no longer current (what compression moves out), in recording order: at 10k topics a
    forgetting pass reads ~20k of these instead of the 210k entries of the fields it compresses.
    For many fields, those that hold any are found first by one scan of the entries' columns:
    at 10k topics a pass asks for 100k fields, 45k of them hold some, and joining all 100k
    keys cost 10x the scan (most fields that fade hold one entry, the current one)."""
    where = "c.active = true AND c.status <> 'current'"
    if len(fields) >= FADED_SCAN_KEYS:
        holding = {r[0] for r in tx.run(f"MATCH (c:Entry) WHERE {where} RETURN DISTINCT c.field_id")}
        fields = list(filter(holding.__contains__, fields))
        if not fields:
            return []
    return read_children(tx, "HAS_ENTRY", fields, where)


def read_edges(tx: Tx, topics: Sequence[str]) -> list[tuple[str, str, str, Row]]:
    """Every typed edge (table, source, target, properties) touching these topics."""
    out: list[tuple[str, str, str, Row]] = []
    names = ("EXTENDS", "ASSOCIATES", "DERIVED_FROM")
    # One statement a direction for the three kinds (six cost a cold read ~1 ms more): each
    # row says its kind, and the columns of the other kinds come back null.
    columns = list(dict.fromkeys(c for name in names for c in RELS[name].columns))
    kind = "type(r)" if _falkor(tx) else "label(r)"
    props = ", ".join([kind, *(f"r.{c}" for c in columns)])
    for hop, outgoing in ((f"-[r:{'|'.join(names)}]->(c:Topic)", True),
                          (f"<-[r:{'|'.join(names)}]-(c:Topic)", False)):
        for v in _one_hop(tx, "Topic", hop, props, _Order(), topics):
            name = v[2]
            cols = RELS[name].columns
            values = dict(zip(columns, v[3:]))
            [row] = _rows(tx, name, cols, [[values[c] for c in cols]])
            source, target = (v[0], v[1]) if outgoing else (v[1], v[0])
            out.append((name, source, target, row))
    # An edge between two of the topics is found from both ends.
    unique: dict[tuple[str, str, str], tuple[str, str, str, Row]] = {}
    for edge in out:
        unique.setdefault(edge[:3], edge)
    return list(unique.values())


def edge_holders(tx: Tx) -> set[str]:
    """Every topic with at least one typed edge (a scan of the edges, not of the topics)."""
    names = "|".join(EDGE_TABLES.values())
    return {tid for row in tx.run(f"MATCH (a:Topic)-[:{names}]->(b:Topic) RETURN a.id, b.id")
            for tid in row}
