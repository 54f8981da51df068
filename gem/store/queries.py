"""Every query gem sends to the engine, as named functions over a `Tx`.

Nothing outside gem/store/ writes Cypher. Rows come back as dicts keyed by the column names of
the schema's TypedDicts (gem/store/schema.py), so a column added there is read and written
everywhere at once.

Statement forms are chosen per engine by measurement: a form that looks equivalent can be
planned as a full table scan per row on one engine and as an index lookup on the other, which
is the difference between flat and linear cost in the table size. `bench/engine_forms.py`
puts kuzu's forms of a 1-hop read side by side.
"""
from __future__ import annotations

import json
from datetime import datetime, timezone
from dataclasses import dataclass
from typing import Any, Callable, Iterable, Iterator, Sequence

from .graph import GraphStore, Tx
from .schema import EDGE_TABLES, RELS, SCHEMA_VERSION, TABLES, Rel, Row, add_column, columns_of_type, ddl

# The forms below were measured on both engines at 10k, 100k and 1M rows (the engine v2
# issue's notes hold the numbers). In short: kuzu 0.11.3 uses the primary-key index only when the key
# is a statement parameter (one prepared statement per key); a key taken from a row (UNWIND,
# a list, IN) is a scan, cheapest as one hash join (`WITH r, r.id AS k MATCH (n {id: k})`), and
# the rows of a batch cost 3-4x less as parallel lists than as a list of structs (`_columns`;
# LadybugDB ~1.8x less, looked up by index when the key is bound by a WITH, scanned without).
# LadybugDB 0.22 looks up row-driven keys by index (`UNWIND ... MATCH (n {id: r.id})`), but
# not in IN lists, comma patterns or MERGE, which scan on both engines.
# FalkorDB (gem/store/falkor.py) looks keys up by index in every form below, IN lists
# included, and runs a transition's writes as one query: it takes the ladybug forms, and one
# statement for a 1-hop from many parents.
CHUNK = 200          # rows per UNWIND write on ladybug and FalkorDB
READ_CHUNK = 1000    # keys per UNWIND read on ladybug and FalkorDB
JOIN_CHUNK = 5000    # rows per kuzu hash-join write from structs (relationships)
COLUMN_CHUNK = 50_000  # rows per kuzu write from parallel lists (each scans the table once; at
                       # 1M fields a SET: 50k 3.3 us a row, 200k 2.4 us, 5k-row structs 22 us)
FADED_SCAN_KEYS = 1000  # fields from which read_faded_history scans for those holding any first
STATUS_CHUNK = 200_000  # keys per kuzu status write (`set_status`)
KEY_JOIN_CHUNK = 100_000  # keys per kuzu hash-join read: fewer scans of the table (a forgetting
                          # pass reads every field: 40 scans of 200k fields, 8.6 s, became 2,
                          # 0.9 s; updates gained nothing, their cost is per row)


# A row read by its key costs ~0.13 ms on kuzu; a hash join of many keys with the table scans
# it (~0.13 us a row: 130 ms at 1M fields). Measured at 1M fields: 2,000 keys 256-307 ms one
# by one, 110-160 ms joined; 200 keys 30-63 ms against 140-226 ms.
KUZU_ROWS_PER_KEY_LOOKUP = 1000


def _kuzu(tx: Tx) -> bool:
    return tx.engine == "kuzu"


def _columns_form(tx: Tx) -> bool:
    """Batches as parallel lists (`_columns`): on kuzu and LadybugDB (at 1M fields LadybugDB
    set 20k rows in 80 ms from lists, 149 ms from 200-row structs; 10 rows in 0.1 vs 0.2 ms)."""
    return tx.engine in ("kuzu", "ladybug")


def _falkor(tx: Tx) -> bool:
    return tx.engine == "falkordb"


# ---------------------------------------------------------------------- typed columns
# FalkorDB keeps no exact datetime (its localdatetime drops microseconds) and returns a double
# rounded to 15 digits (a salience of 17.878793403559726 comes back as 17.8787934035597, and
# the audit compares it with the log). On an engine with `tx.text_values`, datetime and float
# columns are stored as text (ISO time in UTC; Python's shortest exact float repr) and typed
# back here, from the schema's declaration, so a new column needs no edit.
_TIMES = columns_of_type(datetime)
_FLOATS = columns_of_type(float)


def _as_time(value: Any) -> Any:
    if isinstance(value, str):
        return datetime.fromisoformat(value).replace(tzinfo=timezone.utc)
    return value


def _as_float(value: Any) -> Any:
    return float(value) if isinstance(value, str) else value


def _typing(tx: Tx, name: str, cols: Sequence[str]) -> Callable[[Row], Row] | None:
    """A function that types a row read back (None when the engine needs none)."""
    if not tx.text_values:
        return None
    typed = [(c, _as_time) for c in cols if c in _TIMES[name]] + \
        [(c, _as_float) for c in cols if c in _FLOATS[name]]
    if not typed:
        return None

    def convert(row: Row) -> Row:
        for c, to in typed:
            row[c] = to(row[c])
        return row
    return convert


def _rows(tx: Tx, name: str, cols: Sequence[str], found: Iterable[Sequence[Any]]) -> list[Row]:
    """Rows of table or relationship `name` from returned values, typed back."""
    typed = _typing(tx, name, cols)
    rows = [dict(zip(cols, values)) for values in found]
    return rows if typed is None else [typed(r) for r in rows]


def _for_engine(tx: Tx, name: str, rows: list[Row]) -> list[Row]:
    """Float columns as exact text on an engine with `tx.text_values` (its adapter sends
    datetimes as text itself)."""
    floats = _FLOATS[name] if tx.text_values else ()
    if not floats:
        return rows
    return [{c: repr(float(v)) if c in floats and v is not None else v for c, v in r.items()}
            for r in rows]


# ---------------------------------------------------------------------- schema and meta
def ensure_schema(store: GraphStore) -> str:
    """Create missing tables; return the schema version the database holds. (FalkorDB has no
    tables: its adapter indexes and constrains each table's key when it opens a graph.)"""
    with store.transaction() as tx:
        if not _falkor(tx):  # FalkorDB has no tables, hence no columns to add either
            for statement in ddl():
                tx.write(statement)
            add_missing_columns(tx)
        version = meta_get(tx, "schema")
        if version is None:
            meta_put(tx, "schema", SCHEMA_VERSION)
            version = SCHEMA_VERSION
    return version


def add_missing_columns(tx: Tx) -> None:
    """Add the columns gem/store/schema.py declares that a database made by an earlier gem
    lacks (labels, a retraction's reason, who cleared a flag): a new column is no new schema
    version, and rows written before it read as an empty list or null."""
    for table in TABLES.values():
        have = {row[1] for row in tx.run(f"CALL table_info('{table.name}') RETURN *")}
        for column in table.columns:
            if column not in have:
                tx.run(add_column(table.name, column))


def create_tables(tx: Tx) -> None:
    """The tables only, nothing in them (an import brings its own Meta rows)."""
    for statement in ([] if _falkor(tx) else ddl()):
        tx.write(statement)


def meta_get(tx: Tx, key: str) -> str | None:
    return tx.scalar("MATCH (m:Meta {key: $k}) RETURN m.value", {"k": key})


def meta_put(tx: Tx, key: str, value: str) -> None:
    tx.write("MERGE (m:Meta {key: $k}) SET m.value = $v", {"k": key, "v": value})


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
            return [r for tid, fids in by_topic.items()
                    for r in order.few(tx.run(text, {"t": tid, "ids": fids}))]
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
        fields = [f for f in fields if f in holding]
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


# ---------------------------------------------------------------------- writes
# Each write says how many rows it must reach (`tx.write(..., rows=n)`): an engine that runs
# a write set as one query (FalkorDB) checks it there, so a write that missed its row fails
# the whole set instead of landing in part.
def _per_row(tx: Tx, statement: str, rows: list[Row]) -> None:
    for row in rows:
        tx.write(statement, row, 1)


def _chunks(tx: Tx, statement: str, rows: list[Row], size: int) -> None:
    for i in range(0, len(rows), size):
        tx.write(statement, {"rows": rows[i:i + size]}, len(rows[i:i + size]))


def _by_null_columns(rows: Iterable[Row], columns: Sequence[str]) -> dict[tuple[str, ...], list[Row]]:
    """Rows grouped by which columns are set: an UNWIND column that is null in every row has no
    type, and the engines refuse to store it into a typed column."""
    groups: dict[tuple[str, ...], list[Row]] = {}
    for row in rows:
        names = tuple(c for c in columns if row.get(c) is not None)
        groups.setdefault(names, []).append({c: row[c] for c in names})
    return groups


def create_rows(tx: Tx, table: str, rows: list[Row], owner: Rel | None = None,
                parent_of: dict[str, str] | None = None) -> None:
    """Create rows; with `owner`, each row is created together with the relationship from its
    parent (`parent_of[row key]`), in the same statement."""
    spec = TABLES[table]
    tx.grew(table, len(rows))
    for names, batch in _by_null_columns(_for_engine(tx, table, rows), spec.columns).items():
        if owner is None or parent_of is None:
            if _columns_form(tx) and len(batch) > 1:
                _create_from_columns(tx, table, batch, names, None, None)
                continue
            node = "(:" + table + " {" + ", ".join(f"{c}: r.{c}" for c in names) + "})"
            _chunks(tx, f"UNWIND $rows AS r CREATE {node}", batch, CHUNK)
            continue
        parent = owner.parent
        if _columns_form(tx) and not (_kuzu(tx) and len(batch) <= max(4, tx.size(parent) // 10_000)):
            _create_from_columns(tx, table, batch, names, owner, parent_of)
            continue
        for row in batch:
            row["parent_id"] = parent_of[row[spec.key]]

        def pattern(src: str) -> str:
            fields = ", ".join(f"{c}: {src}{c}" for c in names)
            return _owned_by_p(owner, f"(:{table} {{{fields}}})")

        if _kuzu(tx):
            _per_row(tx, f"MATCH (p:{parent} {{id: $parent_id}}) CREATE {pattern('$')}", batch)
        else:
            _chunks(tx, f"UNWIND $rows AS r MATCH (p:{parent} {{id: r.parent_id}}) "
                        f"CREATE {pattern('r.')}", batch, CHUNK)


def _owned_by_p(owner: Rel, node: str) -> str:
    """`node` created with its owning relationship to or from the parent matched as `p`."""
    return f"{node}-[:{owner.name}]->(p)" if owner.child_first else f"(p)-[:{owner.name}]->{node}"


def _create_from_columns(tx: Tx, table: str, rows: list[Row], names: Sequence[str],
                         owner: Rel | None, parent_of: dict[str, str] | None) -> None:
    """CREATE from parallel lists (see `_columns`), each row with its owning
    relationship from a parent looked up by key when `owner` is given."""
    key = TABLES[table].key
    for i in range(0, len(rows), COLUMN_CHUNK):
        part = rows[i:i + COLUMN_CHUNK]
        params, exprs, _ = _columns(table, part, names)
        params["keys"] = [r[key] for r in part]
        node = "(:" + table + " {" + ", ".join(f"{c}: {exprs[c]}" for c in names) + "})"
        if owner is None or parent_of is None:
            tx.write(f"UNWIND range(1, size($keys)) AS i CREATE {node}", params, len(part))
            continue
        params["parents"] = [parent_of[k] for k in params["keys"]]
        tx.write(f"UNWIND range(1, size($keys)) AS i WITH i, $parents[i] AS k "
                 f"MATCH (p:{owner.parent} {{id: k}}) CREATE {_owned_by_p(owner, node)}", params, len(part))


def update_rows(tx: Tx, table: str, updates: list[tuple[Any, Row]]) -> None:
    """Set properties of existing rows, by key; None sets a property to null."""
    spec = TABLES[table]
    groups: dict[tuple[tuple[str, ...], tuple[str, ...]], list[Row]] = {}
    for key, props in zip([k for k, _ in updates], _for_engine(tx, table, [p for _, p in updates])):
        values = tuple(sorted(p for p, v in props.items() if v is not None))
        nulls = tuple(sorted(p for p, v in props.items() if v is None))
        groups.setdefault((values, nulls), []).append({"key": key, **{p: props[p] for p in values}})
    for (values, nulls), rows in groups.items():
        def sets(src: str) -> str:
            return ", ".join([f"n.{p} = {src}{p}" for p in values] + [f"n.{p} = NULL" for p in nulls])

        if len(rows) == 1 or (_kuzu(tx) and len(rows) <= tx.size(table) // 1500):
            _per_row(tx, f"MATCH (n:{table} {{{spec.key}: $key}}) SET {sets('$')}", rows)
        elif _columns_form(tx):
            _column_chunks(tx, table, spec.key, rows, values, nulls)
        else:
            _chunks(tx, f"UNWIND $rows AS r MATCH (n:{table} {{{spec.key}: r.key}}) SET {sets('r.')}",
                    rows, CHUNK)


def set_status(tx: Tx, table: str, keys: list[Any], status: str) -> None:
    """One status for many rows, by key (the forgetting ladder's moves, ~1.8M in a pass at
    100k topics): the keys are the only list sent, in chunks of STATUS_CHUNK (each statement
    scans the table once; at 1M fields 200k rows a statement cost 2.4 us a row, 50k 3.3 us)."""
    if not _columns_form(tx) or len(keys) == 1 or (_kuzu(tx) and len(keys) <= tx.size(table) // 1500):
        update_rows(tx, table, [(k, {"status": status}) for k in keys])
        return
    key = TABLES[table].key
    for i in range(0, len(keys), STATUS_CHUNK):
        part = keys[i:i + STATUS_CHUNK]
        tx.write(f"UNWIND $keys AS k MATCH (n:{table} {{{key}: k}}) SET n.status = $status",
                 {"keys": part, "status": status}, len(part))


def _columns(table: str, rows: list[Row], names: Sequence[str]) -> tuple[dict[str, Any], dict[str, str], bool]:
    """Parameters for `rows` as parallel lists, one per column (`$c<j>[i]` in row i), and a
    value every row shares as one parameter (`$c<j>`): kuzu converts a list of structs
    parameter field by field, row by row, which costs 3-4x (see update_rows). Returns the
    parameters, each column's expression, and whether any needs the row index `i`."""
    floats = _FLOATS[table]
    params: dict[str, Any] = {}
    exprs: dict[str, str] = {}
    per_row = False
    for j, name in enumerate(names):
        column = [r[name] for r in rows]
        if name in floats:  # an int in a float column would type the whole list INT64
            column = [float(v) for v in column]
        first = column[0]
        if all(v == first and v.__class__ is first.__class__ for v in column):
            params[f"c{j}"] = first
            exprs[name] = f"$c{j}"
        else:
            params[f"c{j}"] = column
            exprs[name] = f"$c{j}[i]"
            per_row = True
    return params, exprs, per_row


def _column_chunks(tx: Tx, table: str, key: str, rows: list[Row], values: Sequence[str],
                   nulls: Sequence[str]) -> None:
    """SET by key from parallel lists (the keys, one list per changed column). On kuzu at 1M
    fields a SET of 100k rows took 17.8-23.8 us a row from 5k-row lists of structs, 4.6-5.9 us
    from lists (50k a statement), measured through this function."""
    for i in range(0, len(rows), COLUMN_CHUNK):
        part = rows[i:i + COLUMN_CHUNK]
        params, exprs, per_row = _columns(table, part, values)
        params["keys"] = [r["key"] for r in part]
        sets = [f"n.{name} = {exprs[name]}" for name in values] + [f"n.{name} = NULL" for name in nulls]
        head = "UNWIND range(1, size($keys)) AS i WITH i, $keys[i] AS k" if per_row else \
            "UNWIND $keys AS k"
        tx.write(f"{head} MATCH (n:{table} {{{key}: k}}) SET {', '.join(sets)}", params, len(part))


def create_rels(tx: Tx, rel: str, pairs: list[tuple[str, str, Row]]) -> None:
    spec = RELS[rel]
    props_of = _for_engine(tx, rel, [props for _, _, props in pairs])
    rows = [{"a": a, "b": b, **props} for (a, b, _), props in zip(pairs, props_of)]
    for names, batch in _by_null_columns(rows, ("a", "b", *spec.columns)).items():
        props = [c for c in names if c not in ("a", "b")]

        def body(src: str) -> str:
            return " {" + ", ".join(f"{p}: {src}{p}" for p in props) + "}" if props else ""

        a, b = spec.source, spec.target
        if _kuzu(tx) and len(batch) <= max(1, (tx.size(a) + tx.size(b)) // 4000):
            _per_row(tx, f"MATCH (a:{a} {{id: $a}}), (b:{b} {{id: $b}}) CREATE (a)-[:{rel}{body('$')}]->(b)",
                     batch)
        elif _kuzu(tx):  # the key chain: one hash join per end (a comma pattern is a cross product)
            _chunks(tx, f"UNWIND $rows AS r WITH r, r.a AS ka MATCH (a:{a} {{id: ka}}) "
                        f"WITH r, a, r.b AS kb MATCH (b:{b} {{id: kb}}) "
                        f"CREATE (a)-[:{rel}{body('r.')}]->(b)", batch, JOIN_CHUNK)
        else:  # two MATCH clauses: ladybug looks each end up by index (the comma form scans)
            _chunks(tx, f"UNWIND $rows AS r MATCH (a:{a} {{id: r.a}}) MATCH (b:{b} {{id: r.b}}) "
                        f"CREATE (a)-[:{rel}{body('r.')}]->(b)", batch, CHUNK)


def delete_rels(tx: Tx, rel: str, pairs: list[tuple[str, str]]) -> None:
    """Delete relationships (merges re-point a few edges: one keyed statement each)."""
    spec = RELS[rel]
    _per_row(tx, f"MATCH (a:{spec.source} {{id: $a}})-[x:{rel}]->(b:{spec.target} {{id: $b}}) DELETE x",
             [{"a": a, "b": b} for a, b in pairs])


def delete_rows(tx: Tx, table: str, keys: list[str]) -> None:
    """Remove rows with every relationship they have (erasure: the one destructive write)."""
    key = TABLES[table].key
    _per_row(tx, f"MATCH (n:{table} {{{key}: $key}}) DETACH DELETE n", [{"key": k} for k in keys])


def write_salience(tx: Tx, rows: list[tuple[str, str, float, Any]], seq: int) -> None:
    """Salience written behind: (table, key, strength, last access) rows and the log position
    they bring the stored columns up to."""
    for table in ("Topic", "Field", "Episode"):
        updates = [(key, {"strength": s, "last_access": last}) for t, key, s, last in rows if t == table]
        if updates:
            update_rows(tx, table, updates)
    meta_put(tx, "salience_seq", str(seq))


# ---------------------------------------------------------------------- the transition log
_LOG_COLUMNS = TABLES["Transition"].columns
LOG_RECORDS_BY_KEY = 64


def append_transition(tx: Tx, row: Row) -> None:
    tx.write("CREATE (:Transition {" + ", ".join(f"{c}: ${c}" for c in _LOG_COLUMNS) + "})", row, 1)


def last_transition(tx: Tx) -> Row | None:
    head = log_head(tx)
    return read_rows(tx, "Transition", [head])[0] if head else None


def log_head(tx: Tx) -> int:
    """The sequence number of the newest log record, 0 for an empty log (one column scan;
    `last_transition` reads every column of every record to sort them)."""
    return int(tx.scalar("MATCH (x:Transition) RETURN max(x.seq)") or 0)


def record_hash(tx: Tx, seq: int) -> str | None:
    """The hash of log record `seq`, None if there is none (one key lookup: how a process
    that shares its store learns whether another one committed after what it knows)."""
    return tx.scalar("MATCH (x:Transition {seq: $s}) RETURN x.hash", {"s": seq})


def transitions(tx: Tx, since: int = 0, until: int | None = None,
                scope: str | None = None) -> list[Row]:
    """Log records with since < seq <= until (of one scope, if given), in order."""
    where = "x.seq > $s" + ("" if until is None else " AND x.seq <= $u")
    params: dict[str, Any] = {"s": since}
    if until is not None:
        params["u"] = until
    if scope is not None:
        where += " AND x.scope = $scope"
        params["scope"] = scope
    # A filter on the log is a scan that reads every column of every record (200 ms for the
    # one record an open checks, at 100k topics): the numbers are found with a scan of their
    # own column, and a few records then read by key.
    seqs = [r[0] for r in tx.run(f"MATCH (x:Transition) WHERE {where} RETURN x.seq", params)]
    if len(seqs) <= LOG_RECORDS_BY_KEY:
        text = f"MATCH (x:Transition {{seq: $k}}) RETURN {_returns('x', _LOG_COLUMNS)}"
        found = [r for seq in sorted(seqs) for r in tx.run(text, {"k": seq})]
        return _rows(tx, "Transition", _LOG_COLUMNS, found)
    rows = tx.run(f"MATCH (x:Transition) WHERE {where} RETURN {_returns('x', _LOG_COLUMNS)} "
                  "ORDER BY x.seq", params)
    return _rows(tx, "Transition", _LOG_COLUMNS, rows)


def details_mentioning(tx: Tx, scope: str, needle: str) -> list[dict[str, Any]]:
    """The details of a scope's log records whose detail text holds `needle` (a key: `gem
    stats` adds up the `llm` parts), decoded; redacted records have none."""
    rows = tx.run("MATCH (x:Transition) WHERE x.scope = $s AND x.detail CONTAINS $n "
                  "RETURN x.detail", {"s": scope, "n": needle})
    return [json.loads(r[0]) for r in rows if r[0]]


def latest_counters(tx: Tx) -> dict[str, dict[str, int]]:
    """Each scope's id sequences and interaction count, from its latest log record."""
    out: dict[str, dict[str, int]] = {}
    for scope, counters in tx.stream("MATCH (x:Transition) RETURN x.scope, x.counters ORDER BY x.seq"):
        out[scope] = json.loads(counters)
    return out


def highest_ids(tx: Tx) -> dict[tuple[str, str], int]:
    """(scope, "topic") -> the highest topic sequence number in use in each scope, the same
    for episodes, and
    (scope, "entry") for the entry with the highest sequence number of all (one column scan)."""
    out: dict[tuple[str, str], int] = {}
    for scope, top in tx.run("MATCH (x:Topic) RETURN x.scope, max(x.seq)"):
        out[(scope, "topic")] = int(top)
    for scope, top in tx.run("MATCH (x:Episode) RETURN x.scope, max(x.seq)"):
        out[(scope, "episode")] = int(top)
    row = tx.one("MATCH (e:Entry) RETURN e.id, e.seq ORDER BY e.seq DESC LIMIT 1")
    if row is not None:
        head = row[0].split("/", 1)[0]
        out[(head.split(":", 1)[0] if ":" in head else "default", "entry")] = int(row[1])
    return out


def episode_ids_from(tx: Tx, scope: str, source: str) -> list[str]:
    """The ids of a scope's episodes recorded from `source` (erasure by source)."""
    return [r[0] for r in tx.run("MATCH (x:Episode) WHERE x.scope = $scope AND x.source = $source "
                                 "RETURN x.id ORDER BY x.seq", {"scope": scope, "source": source})]


def stream_episodes(tx: Tx, scope: str) -> Iterator[Row]:
    """Every episode of one scope (what it said, where, by whom and when)."""
    cols = TABLES["Episode"].columns
    typed = _typing(tx, "Episode", cols)
    for values in tx.stream(f"MATCH (n:Episode) WHERE n.scope = $scope RETURN {_returns('n', cols)}",
                            {"scope": scope}):
        row = dict(zip(cols, values))
        yield row if typed is None else typed(row)


def latest_episodes_of(tx: Tx, scope: str, speaker: str, limit: int) -> list[str]:
    """The ids of the `limit` latest episodes (by when they were said) one speaker said in a
    scope, newest first. A scan of the scope's episodes: a policy asks only for an episode its
    cheaper tests kept (gem/runtime.py, `said_before`)."""
    return [str(row[0]) for row in tx.run(
        "MATCH (n:Episode) WHERE n.scope = $scope AND n.speaker = $speaker "
        f"RETURN n.id, n.at, n.seq ORDER BY n.at DESC, n.seq DESC LIMIT {int(limit)}",
        {"scope": scope, "speaker": speaker})]


def touches(tx: Tx) -> Iterator[tuple[int, list[str]]]:
    """(seq, units) of every log record not redacted, in order."""
    for seq, units in tx.stream("MATCH (x:Transition) WHERE x.salt <> '' RETURN x.seq, x.units "
                                "ORDER BY x.seq"):
        yield int(seq), json.loads(units)


def read_records(tx: Tx, seqs: Sequence[int]) -> list[Row]:
    return sorted(read_rows(tx, "Transition", list(seqs)), key=lambda r: r["seq"])


REDACTED = {"units": "", "policies": "", "detail": "", "salience": "", "writes": "", "salt": ""}


def redact_records(tx: Tx, seqs: Sequence[int]) -> None:
    """Drop the content parts and the salt of log records (their commitments stay)."""
    update_rows(tx, "Transition", [(seq, dict(REDACTED)) for seq in seqs])


def log_records(tx: Tx, *, before: int | None = None, limit: int | None = None,
                mentioning: Sequence[str] = (), newest_first: bool = True,
                columns: Sequence[str] | None = None) -> list[Row]:
    """Log records with seq < before (all with None), newest first unless told otherwise, at
    most `limit`, with these `columns` (all by default). With `mentioning`, only records whose
    units or salience changes contain one of these strings (JSON-quoted unit ids, or an id's
    quoted prefix such as '"t12/'): the log is searched where it is stored, not loaded to be
    filtered."""
    cols = tuple(columns or _LOG_COLUMNS)
    where: list[str] = []
    params: dict[str, Any] = {}
    if before is not None:
        where.append("x.seq < $before")
        params["before"] = before
    if mentioning:
        alternatives = []
        for i, needle in enumerate(mentioning):
            params[f"n{i}"] = needle
            alternatives += [f"x.units CONTAINS $n{i}", f"x.salience CONTAINS $n{i}"]
        where.append("(" + " OR ".join(alternatives) + ")")
    text = (f"MATCH (x:Transition) {('WHERE ' + ' AND '.join(where)) if where else ''} "
            f"RETURN {_returns('x', cols)} ORDER BY x.seq {'DESC' if newest_first else ''}")
    if limit is not None:
        text += " LIMIT $limit"
        params["limit"] = limit
    return _rows(tx, "Transition", cols, tx.run(text, params))


def transition_count(tx: Tx) -> int:
    return int(tx.scalar("MATCH (x:Transition) RETURN count(*)") or 0)


# ---------------------------------------------------------------------- policies
_POLICY_COLUMNS = TABLES["Policy"].columns


def stored_policies(tx: Tx) -> list[Row]:
    rows = tx.run(f"MATCH (p:Policy) RETURN {_returns('p', _POLICY_COLUMNS)} ORDER BY p.name")
    return _rows(tx, "Policy", _POLICY_COLUMNS, rows)


def put_policies(tx: Tx, rows: list[tuple[Row, bool]], files: str, set_hash: str) -> None:
    """Store policy rows ((row, already stored) pairs), the source files they came from, and
    the set's hash (what another process compares to learn that the policies changed)."""
    updates = [(r["name"], {k: v for k, v in r.items() if k != "name"}) for r, exists in rows if exists]
    if updates:
        update_rows(tx, "Policy", updates)
    created = [r for r, exists in rows if not exists]
    if created:
        create_rows(tx, "Policy", created)
    meta_put(tx, "policy_sources", files)
    meta_put(tx, "policy_set", set_hash)


# ---------------------------------------------------------------------- whole-state scans
# Used to rebuild derived state and by the full audit; never on a transition's path.
def scan(tx: Tx, table: str, where: str = "", params: dict[str, Any] | None = None,
         columns: Sequence[str] | None = None, order: str | None = None) -> list[Row]:
    cols = tuple(columns or TABLES[table].columns)
    order_by = f" ORDER BY n.{order}" if order else ""
    rows = tx.run(f"MATCH (n:{table}) {('WHERE ' + where) if where else ''} "
                  f"RETURN {_returns('n', cols)}{order_by}", params)
    return _rows(tx, table, cols, rows)


def current_values(tx: Tx) -> list[tuple[str, str, str, str, Any]]:
    """(field id, topic id, field name, value JSON, valid time) of every field's current
    entry, in one scan: what the search documents of many fields are made of."""
    return [tuple(r) for r in tx.run(  # type: ignore[misc]
        "MATCH (f:Field)-[:HAS_ENTRY]->(e:Entry) WHERE e.status = 'current' "
        "RETURN f.id, f.topic_id, f.name, e.value, e.valid_at")]


def placed_units(tx: Tx, scope: str) -> list[tuple[str, float, float]]:
    """(unit, lat, lon) of every field of any scope whose current entry has a place and of
    every episode of `scope` that has one: what the place grid of a scope is built from
    (gem/places.py; the caller keeps its scope's fields, whose ids carry the scope)."""
    cols = ("field_id", "place_lat", "place_lon")
    entries = _rows(tx, "Entry", cols, tx.run(
        "MATCH (e:Entry) WHERE e.status = 'current' AND e.place_lat IS NOT NULL "
        "RETURN e.field_id, e.place_lat, e.place_lon"))
    episodes = _rows(tx, "Episode", ("id", "place_lat", "place_lon"), tx.run(
        "MATCH (n:Episode) WHERE n.scope = $scope AND n.place_lat IS NOT NULL "
        "RETURN n.id, n.place_lat, n.place_lon", {"scope": scope}))
    return [(r["field_id"], r["place_lat"], r["place_lon"]) for r in entries] + \
        [(r["id"], r["place_lat"], r["place_lon"]) for r in episodes]


def citing_entries(tx: Tx, episodes: Sequence[str]) -> dict[str, list[str]]:
    """episode -> the entries whose facts cite it (`ref`) or whose value a positive observation
    citing it corroborates: what `Episode.cited_by` lists, for episodes recorded before it was
    kept (a scan of the entries and observations: such databases only)."""
    out: dict[str, list[str]] = {}
    for ref, entry in [*tx.run("MATCH (e:Entry) WHERE e.ref IN $ids AND e.polarity = '+' "
                               "RETURN e.ref, e.id", {"ids": list(episodes)}),
                       *tx.run("MATCH (o:Observation) WHERE o.ref IN $ids AND o.polarity = '+' "
                               "RETURN o.ref, o.entry_id", {"ids": list(episodes)})]:
        if entry not in out.setdefault(ref, []):
            out[ref].append(entry)
    return {k: sorted(v) for k, v in out.items()}


def placed_entries(tx: Tx) -> list[tuple[str, float, float]]:
    """(field id, lat, lon) of every entry of any scope that has a place, current or not: the
    fields a `near=` read as of an earlier time may find (gem/operators/near.py)."""
    return [(r[0], r[1], r[2]) for r in tx.run(
        "MATCH (e:Entry) WHERE e.place_lat IS NOT NULL RETURN e.field_id, e.place_lat, e.place_lon")]


def scan_edges(tx: Tx, rel: str) -> list[tuple[str, str, Row]]:
    cols = RELS[rel].columns
    rows = tx.run(f"MATCH (a:Topic)-[r:{rel}]->(b:Topic) RETURN a.id, b.id, {_returns('r', cols)}"
                  if cols else f"MATCH (a:Topic)-[r:{rel}]->(b:Topic) RETURN a.id, b.id")
    return [(r[0], r[1], props) for r, props in zip(rows, _rows(tx, rel, cols, (r[2:] for r in rows)))]


def scan_owned(tx: Tx, rel: str) -> list[tuple[str, str]]:
    """(parent key, child key) of every owning relationship of one kind."""
    spec = RELS[rel]
    return [(r[0], r[1]) for r in tx.run(
        f"MATCH (p:{spec.parent}){_owned_hop(spec)} RETURN p.id, c.id")]


def count(tx: Tx, table: str, where: str = "", params: dict[str, Any] | None = None) -> int:
    return int(tx.scalar(f"MATCH (n:{table}) {('WHERE ' + where) if where else ''} RETURN count(*)",
                         params) or 0)


def count_rels(tx: Tx, rel: str) -> int:
    return int(tx.scalar(f"MATCH ()-[r:{rel}]->() RETURN count(*)") or 0)


def misowned(tx: Tx, rel: str) -> list[tuple[str, str, str]]:
    """(child, owner column, holder) of the children of an owning relationship whose owner
    column names another owner than the one that holds them (gem reads children through
    that column: see `_kuzu_one_hop`)."""
    spec = RELS[rel]
    assert spec.parent_column is not None
    return [(r[0], r[1], r[2]) for r in tx.run(
        f"MATCH (p:{spec.parent}){_owned_hop(spec)} WHERE c.{spec.parent_column} <> p.id "
        f"RETURN c.id, c.{spec.parent_column}, p.id ORDER BY c.id")]


def status_counts(tx: Tx, scope: str | None = None) -> dict[str, dict[str, int]]:
    """Topics by status, and fields by ladder level (a field of an archived topic counts as
    archived), in one scope or in all."""
    where, params = ("WHERE x.scope = $scope ", {"scope": scope}) if scope is not None else ("", None)
    topics = {r[0]: int(r[1]) for r in tx.run(
        f"MATCH (x:Topic) {where}RETURN x.status, count(*)", params)}
    fields = {r[0]: int(r[1]) for r in tx.run(
        f"MATCH (x:Topic)-[:HAS_FIELD]->(f:Field) {where}RETURN "
        "CASE WHEN x.status = 'archived' THEN 'archived' ELSE f.status END, count(*)", params)}
    episodes = {r[0]: int(r[1]) for r in tx.run(
        f"MATCH (x:Episode) {where}RETURN x.status, count(*)", params)}
    return {"topics": topics, "fields": fields, "episodes": episodes}


def active_fields_by_scope(tx: Tx) -> dict[str, int]:
    return {r[0]: int(r[1]) for r in tx.run(
        "MATCH (x:Topic)-[:HAS_FIELD]->(f:Field) WHERE x.status = 'active' AND "
        "f.status = 'active' RETURN x.scope, count(*)")}


def entry_counts(tx: Tx, scope: str | None = None) -> tuple[int, int]:
    """(all entries, entries in the active history), in one scope or in all. kuzu 0.11.3
    miscounts a bare boolean in CASE, hence the explicit comparison."""
    counted = "sum(CASE WHEN e.active = true THEN 1 ELSE 0 END)"
    if scope is None:
        row = tx.one(f"MATCH (e:Entry) RETURN count(*), {counted}")
    else:
        row = tx.one(f"MATCH (x:Topic)-[:HAS_FIELD]->(:Field)-[:HAS_ENTRY]->(e:Entry) "
                     f"WHERE x.scope = $scope RETURN count(*), {counted}", {"scope": scope})
    return (int(row[0]), int(row[1] or 0)) if row else (0, 0)


def updates_of_extended_topics(tx: Tx, since: int = 0) -> list[tuple[str, str, int]]:
    """(topic, dependent, transition) for every update of a topic made in or after the
    transition that created an extension edge from it (C3 over the trajectory). An update is a
    supersession made by the transition that recorded the new entry, on the field it was
    recorded in (entries moved in by a merge were updates of another topic then)."""
    rows = tx.run(
        "MATCH (a:Topic)-[x:EXTENDS]->(b:Topic), (a)-[:HAS_FIELD]->(f:Field)-[:HAS_ENTRY]->"
        "(old:Entry), (f)-[:HAS_ENTRY]->(new:Entry) WHERE old.superseded_by = new.id "
        "AND new.tx >= x.tx AND old.superseded_tx = new.tx AND old.tx < new.tx "
        "AND new.origin_field = f.id AND new.tx > $since RETURN DISTINCT a.id, b.id, new.tx",
        {"since": since})
    return [(r[0], r[1], int(r[2])) for r in rows]


def flags_by_transition(tx: Tx) -> set[tuple[str, int]]:
    return {(r[0], int(r[1])) for r in tx.run("MATCH (g:Flag)-[:FLAGS]->(b:Topic) RETURN b.id, g.tx")}


def conflicting_fields(tx: Tx, scope: str) -> list[str]:
    """Fields of a scope whose current value is contradicted by another source at the same
    valid time."""
    return [r[0] for r in tx.run(
        "MATCH (x:Topic)-[:HAS_FIELD]->(f:Field)-[:HAS_ENTRY]->(a:Entry), (f)-[:HAS_ENTRY]->(b:Entry) "
        "WHERE x.scope = $scope AND a.status = 'current' AND b.id <> a.id "
        "AND b.status <> 'retracted' AND b.asserted_at = a.asserted_at AND b.value <> a.value "
        "AND b.source <> a.source AND f.status <> 'hidden' RETURN DISTINCT f.id ORDER BY f.id",
        {"scope": scope})]


def stream_histories(tx: Tx) -> Iterator[tuple[str, list[Row]]]:
    """Every field's history, (field key, entries in recording order), one field at a time."""
    cols = TABLES["Entry"].columns
    typed = _typing(tx, "Entry", cols)
    current: str | None = None
    entries: list[Row] = []
    times = [1 + i for i, c in enumerate(cols) if c in _TIMES["Entry"]]
    for values in tx.stream(f"MATCH (f:Field)-[:HAS_ENTRY]->(e:Entry) RETURN f.id, "
                            f"{_returns('e', cols)} ORDER BY f.id, e.seq", times=times):
        if values[0] != current:
            if current is not None:
                yield current, entries
            current, entries = values[0], []
        row = dict(zip(cols, values[1:]))
        entries.append(row if typed is None else typed(row))
    if current is not None:
        yield current, entries


def stream_rows(tx: Tx, table: str, order: str | None = None) -> Iterator[Row]:
    cols = TABLES[table].columns
    typed = _typing(tx, table, cols)
    order_by = f" ORDER BY n.{order}" if order else ""
    times = [i for i, c in enumerate(cols) if c in _TIMES[table]]
    for values in tx.stream(f"MATCH (n:{table}) RETURN {_returns('n', cols)}{order_by}", times=times):
        row = dict(zip(cols, values))
        yield row if typed is None else typed(row)


def stream_rels(tx: Tx, rel: str) -> Iterator[tuple[str, str, Row]]:
    """(source key, target key, properties) of every relationship of one table."""
    spec = RELS[rel]
    cols = spec.columns
    typed = _typing(tx, rel, cols)
    returns = "".join(f", r.{c}" for c in cols)
    for a, b, *values in tx.stream(f"MATCH (a:{spec.source})-[r:{rel}]->(b:{spec.target}) "
                                   f"RETURN a.id, b.id{returns}"):
        row = dict(zip(cols, values))
        yield a, b, row if typed is None else typed(row)


def count_owned(tx: Tx, rel: str) -> int:
    """Children that hang off an existing parent through their owning relationship."""
    return count_rels(tx, rel)


def negative_strengths(tx: Tx) -> list[tuple[str, float]]:
    strength = "toFloat(n.strength)" if tx.text_values else "n.strength"
    out = []
    for table in ("Topic", "Field", "Episode"):
        out += [(r[0], _as_float(r[1])) for r in tx.run(
            f"MATCH (n:{table}) WHERE {strength} < 0 RETURN n.id, n.strength")]
    return out
