"""The schema and meta rows, the transition log and the stored policies."""
from __future__ import annotations

import json
from typing import Any, Iterator, Sequence

from ..graph import GraphStore, Tx
from ..schema import SCHEMA_VERSION, TABLES, Row, add_column, ddl

from .forms import _TIMES, _falkor, _rows, _typing
from .pieces import log_pieces
from .reads import _returns, read_rows
from .writes import create_rows, update_rows



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
_LOG_TIMES = [i for i, c in enumerate(_LOG_COLUMNS) if c in _TIMES["Transition"]]
# The columns that make a record large: what a piece of a log read is cut by.
_LOG_TEXTS = ("units", "policies", "detail", "salience", "writes")
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
    rows = log_pieces(tx, _returns('x', _LOG_COLUMNS), where, params, _LOG_TEXTS, _LOG_TIMES)
    return _rows(tx, "Transition", _LOG_COLUMNS, rows)


def stream_log(tx: Tx) -> Iterator[Row]:
    """Every log record, in order, a bounded piece at a time (gem/store/queries/pieces.py)."""
    typed = _typing(tx, "Transition", _LOG_COLUMNS)
    for values in log_pieces(tx, _returns('x', _LOG_COLUMNS), weigh=_LOG_TEXTS, times=_LOG_TIMES):
        row = dict(zip(_LOG_COLUMNS, values))
        yield row if typed is None else typed(row)


def salience_since(tx: Tx, seq: int) -> Iterator[tuple[str, str]]:
    """(salience, writes) of the log records after `seq`, in order, a bounded piece at a time:
    the salience a rebuild replays onto the stored columns."""
    for salience, writes in log_pieces(tx, "x.salience, x.writes", "x.seq > $s", {"s": seq},
                                       weigh=("salience", "writes")):
        yield salience, writes


def details_mentioning(tx: Tx, scope: str, needle: str) -> list[dict[str, Any]]:
    """The details of a scope's log records whose detail text holds `needle` (a key: `gem
    stats` adds up the `llm` parts), decoded; redacted records have none."""
    rows = tx.run("MATCH (x:Transition) WHERE x.scope = $s AND x.detail CONTAINS $n "
                  "RETURN x.detail", {"s": scope, "n": needle})
    return [json.loads(r[0]) for r in rows if r[0]]


def latest_counters(tx: Tx) -> dict[str, dict[str, int]]:
    """Each scope's id sequences and interaction count, from its latest log record."""
    # Each scope's last record found by a grouped maximum and read by key: a sort of the
    # whole log (this runs at every open) needs a buffer pool as large as the log.
    latest = tx.run("MATCH (x:Transition) RETURN x.scope, max(x.seq)")
    return {scope: json.loads(tx.scalar("MATCH (x:Transition {seq: $s}) RETURN x.counters",
                                        {"s": seq})) for scope, seq in latest}


def highest_ids(tx: Tx) -> dict[tuple[str, str], int]:
    """(scope, "topic") -> the highest topic sequence number in use in each scope, the same
    for episodes, and
    (scope, "entry") for the entry with the highest sequence number of all (one column scan)."""
    out: dict[tuple[str, str], int] = {}
    for scope, top in tx.run("MATCH (x:Topic) RETURN x.scope, max(x.seq)"):
        out[(scope, "topic")] = int(top)
    for scope, top in tx.run("MATCH (x:Episode) RETURN x.scope, max(x.seq)"):
        out[(scope, "episode")] = int(top)
    # max() then a read of its row: ~10 ms at 330k entries, where sorting them for the top
    # row took 40-110 ms (this runs at every open)
    top = tx.scalar("MATCH (e:Entry) RETURN max(e.seq)")
    eid = None if top is None else tx.scalar("MATCH (e:Entry) WHERE e.seq = $s RETURN e.id",
                                              {"s": top})
    if eid is not None:
        head = eid.split("/", 1)[0]
        out[(head.split(":", 1)[0] if ":" in head else "default", "entry")] = int(top)
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
    for seq, units in log_pieces(tx, "x.seq, x.units", "x.salt <> ''", weigh=("units",)):
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
