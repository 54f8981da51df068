"""Writes: rows and relationships created, updated and deleted, and salience written behind."""
from __future__ import annotations

from typing import Any, Iterable, Sequence

from ..graph import Tx
from ..schema import RELS, TABLES, Rel, Row

from .forms import CHUNK, COLUMN_CHUNK, JOIN_CHUNK, _FLOATS, _columns_form, _for_engine, _kuzu



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


STATUS_CHUNK = 200_000  # keys per kuzu status write (`set_status`)


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
