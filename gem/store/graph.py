"""One adapter for Kuzu and its maintained fork LadybugDB (same Python API).

Why the process-wide registry: neither engine refuses a second `Database` on a path already
open in the same process, and the two then overwrite each other's files (the last to close
wins); neither allows two concurrent writers. So a process holds one `Database` per path,
shared by every `GraphStore` opened on it, and serialises all work on it with one re-entrant
lock per path: a second writer in the same process waits instead of failing. Another process
gets `StoreLocked`: the process holds `<db>.gem-head` (gem/store/owner.py) from before the
engine opens the path until its last handle closes it. Reads take the lock too: on kuzu a
CHECKPOINT (after a rollback) times out while another connection reads.

The registry entry also carries `state`, a slot the engine fills with what it derives from
the database (row cache, indexes, counters): every handle on one path shares it, so a commit
through one handle is seen by the others without rebuilding anything.
"""
from __future__ import annotations

import importlib
import importlib.util  # kuzu 0.11.3 calls importlib.util without importing it
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import warnings
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any, Iterator, Sequence

from ..errors import GemError, InvalidInput, StoreError, StoreLocked
from . import allocator, compact
from .owner import HEAD_SUFFIX, OwnerFile

ENGINES = {"kuzu": "kuzu", "ladybug": "ladybug"}
# The native extension each package loads (ladybug loads its own lazily, at first use).
_NATIVE = {"kuzu": "kuzu._kuzu", "ladybug": "ladybug._lbug"}


def _import_engine(engine: str) -> Any:
    if engine not in ENGINES:
        raise InvalidInput(f"unknown engine {engine!r}; choose one of {sorted([*ENGINES, 'falkordb'])}")
    other = next(e for e in ENGINES if e != engine)
    if _NATIVE[other] in sys.modules:
        # Both packages register the same native types; loading the second crashes.
        raise InvalidInput(f"engine {engine!r} cannot be used in a process that already loaded "
                           f"{other!r}; use one engine per process")
    try:
        return importlib.import_module(ENGINES[engine])
    except ImportError as exc:  # pragma: no cover - depends on the install
        extra = "" if engine == "kuzu" else f" (pip install 'gem-memory[{engine}]')"
        raise InvalidInput(f"engine {engine!r} is not installed{extra}") from exc


@dataclass
class _Shared:
    module: Any
    database: Any
    lock: threading.RLock = field(default_factory=threading.RLock)
    users: int = 0
    state: Any = None  # what the engine derives from this database, shared by its handles
    sizes: dict[str, int] = field(default_factory=dict)  # rows per table, roughly (for plans)
    owner: OwnerFile | None = None  # None for a temporary database (no other process knows it)
    # The engine's log file as of the last commit (device, inode), to see it created anew.
    wal: tuple[int, int] | None = None
    options: dict[str, int] = field(default_factory=dict)  # what the `Database` was opened with


_registry: dict[tuple[str, str], _Shared] = {}
_registry_lock = threading.Lock()


_PLAIN = (str, int, float, bool, type(None))


def _to_db(value: Any) -> Any:
    """Engines drop timezone offsets on TIMESTAMP, so everything is stored as naive UTC.
    (Batches carry thousands of rows: plain values are passed through without a call.)"""
    if isinstance(value, datetime):
        if value.tzinfo is not None:
            value = value.astimezone(timezone.utc).replace(tzinfo=None)
        return value
    if isinstance(value, dict):
        return {k: v if isinstance(v, _PLAIN) else _to_db(v) for k, v in value.items()}
    if isinstance(value, list):
        return [v if isinstance(v, _PLAIN) else _to_db(v) for v in value]
    return value


_AWARE_SIZE = 4096  # times remembered by one scan


def _rows(result: Any, times: Sequence[int] | None = None) -> Iterator[list[Any]]:
    """A result's rows, with the naive UTC the engine returns read back as aware UTC. (A scan
    reads millions of values: the native cursor is called directly, and a value is tested
    with one type comparison, not a call per value; with `times`, the positions of the
    timestamp columns, only those are: the full audit reads 1.1M entries of 25 columns.)"""
    cursor = result._query_result
    utc = timezone.utc
    if times is not None:
        # The rows of a scan share a few times (a transition's clock, its facts' times): each
        # is made aware once, and later rows hold the same object, whose hash it keeps (the
        # audit looks each time's text up by it: a fresh aware datetime's hash costs ~1 us).
        aware: dict[datetime, datetime] = {}
        while cursor.hasNext():
            row = cursor.getNext()
            for i in times:
                value = row[i]
                if value is not None:
                    made = aware.get(value)
                    if made is None:
                        if len(aware) >= _AWARE_SIZE:
                            aware.clear()
                        made = aware[value] = value.replace(tzinfo=utc)
                    row[i] = made
            yield row
        return
    while cursor.hasNext():
        yield [v.replace(tzinfo=utc) if v.__class__ is datetime and v.tzinfo is None else v
               for v in cursor.getNext()]


class Tx:
    """Statements run one at a time, always with parameters (never values in query text).

    Statements are prepared once per connection and reused: gem sends a small fixed set of
    query texts, and preparing costs as much as running a key lookup (measured ~2x).
    """

    text_values = False  # datetimes and floats are stored as such (see gem/store/queries/forms.py)

    def __init__(self, conn: Any, prepared: dict[str, Any], engine: str = "kuzu",
                 sizes: dict[str, int] | None = None, pool: int | None = None) -> None:
        self._conn = conn
        self._prepared = prepared
        self.engine = engine
        self._sizes = {} if sizes is None else sizes
        self.pool = pool  # the engine's buffer pool (bytes; None: the engine's default)

    def size(self, table: str) -> int:
        """Rows in a table, roughly: counted once, then kept up to date by creates (a
        statement form is chosen by it, see gem/store/queries/reads.py)."""
        if table not in self._sizes:
            self._sizes[table] = int(self.scalar(f"MATCH (n:{table}) RETURN count(*)") or 0)
        return self._sizes[table]

    def grew(self, table: str, rows: int) -> None:
        if table in self._sizes:
            self._sizes[table] += rows

    def _statement(self, query: str) -> Any:
        statement = self._prepared.get(query)
        if statement is None:
            with warnings.catch_warnings():
                # kuzu 0.11 deprecates separate prepare/execute but still supports it
                warnings.simplefilter("ignore", DeprecationWarning)
                statement = self._conn.prepare(query)
            if not statement.is_success():
                message = statement.get_error_message()
                # The traceback of the error raised here holds this frame: cut the statement
                # from its native object, or it keeps the database alive (see close()).
                statement._prepared_statement = None
                raise StoreError(f"{message} [query: {query}]")
            self._prepared[query] = statement
        return statement

    def run(self, query: str, params: dict[str, Any] | None = None) -> list[list[Any]]:
        try:
            result = self._conn.execute(self._statement(query), _to_db(params) if params else {})
        except RuntimeError as exc:
            raise StoreError(_pool_hint(f"{exc} [query: {query}]")) from exc
        return list(_rows(result))

    def write(self, query: str, params: dict[str, Any] | None = None, rows: int = 1) -> None:
        """A write statement. Here it runs at once, inside the engine transaction; `rows` (how
        many rows it must reach) matters to engines that run a write set as one query."""
        self.run(query, params)

    def stream(self, query: str, params: dict[str, Any] | None = None,
               times: Sequence[int] | None = None) -> Iterator[list[Any]]:
        """Rows one at a time, for scans too large to hold as a list (`times`: the positions
        of the timestamp columns, when the caller knows them)."""
        try:
            result = self._conn.execute(self._statement(query), _to_db(params) if params else {})
        except RuntimeError as exc:
            raise StoreError(_pool_hint(f"{exc} [query: {query}]")) from exc
        yield from _rows(result, times)

    def arrow(self, query: str, params: dict[str, Any] | None = None) -> Any:
        """The whole result as one Arrow table, converted by the engine in bulk (a scan's values
        one by one through `stream` cost ~8 us a row of 25 columns, this ~1.3 us): timestamps
        come back naive (UTC), as the engine stores them."""
        try:
            result = self._conn.execute(self._statement(query), _to_db(params) if params else {})
            return result.get_as_arrow(max(1, result.get_num_tuples()))
        except RuntimeError as exc:
            raise StoreError(_pool_hint(f"{exc} [query: {query}]")) from exc

    def one(self, query: str, params: dict[str, Any] | None = None) -> list[Any] | None:
        rows = self.run(query, params)
        return rows[0] if rows else None

    def scalar(self, query: str, params: dict[str, Any] | None = None) -> Any:
        row = self.one(query, params)
        return row[0] if row else None


# What the child process of `GraphStore.copy_files` runs: pairs of (source, destination).
_COPY = ("import shutil, sys, os\n"
         "for src, dst in zip(sys.argv[1::2], sys.argv[2::2]):\n"
         "    (shutil.copytree if os.path.isdir(src) else shutil.copyfile)(src, dst)\n")


# The log size at which an engine checkpoints, where gem's differs from the engine's 16 MiB.
# On LadybugDB a checkpoint at 100k topics costs ~2.2 s however little the log holds (update
# batches touch rows all over the tables): 36 batches of 2,000 updates checkpointed 6 times and
# took 27-29 s, with 64 MiB once and 19-21 s (at 10k topics 13.9 and 13.1 s). The price: reads
# slow down while more is left uncheckpointed, single writes and retrievals at 100k topics by
# up to ~0.5 ms (p50 2.2-2.7 against 2.1-2.2 ms). On kuzu 0.11.3 the same change made batches
# slower (31.8 against 34.3 s), so it keeps its default. A database whose buffer pool the caller
# sized (many small ones in a process) keeps the engine's default too, which bounds what each
# one leaves unwritten.
CHECKPOINT_THRESHOLD = {"ladybug": 64 << 20}

def _default_pool() -> int:
    ram = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    return min(1 << 30, ram // 4 >> 20 << 20)


# The buffer pool of a database whose caller sizes none: 1 GiB, or a quarter of the RAM on a
# machine with less than 4 GiB. The engine's own default (80% of the RAM) costs 8 bytes per
# page of the pool at open (its eviction queue: 38 MB for 80% of 24 GB, 2 MB for 1 GiB), and
# lets a long-running memory's cache of pages grow to most of the machine. The pool holds pages
# only once they are read, so a small memory stays light either way (bench/footprint.py: 128
# and 256 MiB gave the same RSS at 10k topics). A statement whose result or sort outgrows the
# pool fails ("the buffer pool is full") instead of slowing down, so whole-table reads go in
# bounded pieces (gem/store/queries/pieces.py): before them the full audit's sorted read of
# the log and of the histories failed in 40 MiB at 1k topics; with them 20 MiB (kuzu) and
# 80 MiB (LadybugDB, whose C3 join needs more) pass there. 1 GiB passed growing to 100k
# topics, 30 update batches, a forgetting pass and the full audit on kuzu (bench/poolbound.py),
# and bench/footprint.py --audit at 10k on both engines. Why not smaller for a small database:
# at 10k topics (a 112 MB database) 81 MB of the pool's region were resident with a 128 MiB or
# a 1 GiB pool alike (the engine counted 97 MB in use: pages, its primary-key indexes and
# statements), and a 48 MiB pool failed the benchmark ("buffer pool is full" in the join of the
# entries on their fields): a pool small enough to save memory there is too small for the
# statements, and a database that grows past its open size in one session keeps its pool.
DEFAULT_BUFFER_POOL: int | None = _default_pool()

# What a statement that outgrew the pool says, and what gem adds to it.
_POOL_FULL = "buffer pool is full"


def _pool_hint(message: str) -> str:
    if _POOL_FULL not in message:
        return message
    return (f"{message} (the engine's buffer pool is too small for this statement: open the "
            "memory with a larger buffer_pool_size)")


class GraphStore:
    """A handle on one database path; many handles in a process share one `Database`.

    `buffer_pool_size` and `max_db_size` (bytes) go to the engine's `Database`: each database
    reserves `max_db_size` of address space (8 TiB by default on kuzu 0.11.3, so the 16th
    database of a process fails to map) and the engine's default buffer pool (80% of the RAM)
    unless the caller sizes it.
    They apply when this process opens the path first; later handles share that `Database`.
    """

    # Only this process writes an embedded database (another one gets StoreLocked), so nothing
    # committed can be unknown to this process's shared state.
    shared_writers = False

    def __init__(self, path: str | None, engine: str = "kuzu", *, buffer_pool_size: int | None = None,
                 max_db_size: int | None = None) -> None:
        module = _import_engine(engine)
        self.engine = engine
        self._tempdir: str | None = None
        if path is None:
            self._tempdir = tempfile.mkdtemp(prefix="gem-")
            path = os.path.join(self._tempdir, "memory.db")
        self.path = os.path.abspath(os.fspath(path))
        self._key = (engine, self.path)
        with _registry_lock:
            shared = _registry.get(self._key)
            if shared is None:
                # Owned before anything touches the files: recovery moves them.
                owner = OwnerFile(self.path) if self._tempdir is None else None
                try:
                    database = self._open_database(module, owner, buffer_pool_size, max_db_size)
                except BaseException:
                    if owner is not None:
                        owner.release()
                    raise
                shared = _Shared(module, database, owner=owner, options=self._options)
                _registry[self._key] = shared
            shared.users += 1
        self._shared = shared
        self._conn = module.Connection(shared.database)
        self._prepared: dict[str, Any] = {}
        self._closed = False

    def _open_database(self, module: Any, owner: OwnerFile | None, buffer_pool_size: int | None,
                       max_db_size: int | None) -> Any:
        if self._tempdir is None:
            compact.recover(self.path)  # a compaction a crash interrupted
        if owner is not None and not os.path.exists(self.path):
            owner.clear()  # what it says of a deleted database is not this new one's
        options = {name: int(value) for name, value in (
            ("buffer_pool_size", buffer_pool_size), ("max_db_size", max_db_size))
            if value is not None}
        if buffer_pool_size is None:
            if DEFAULT_BUFFER_POOL:
                options["buffer_pool_size"] = DEFAULT_BUFFER_POOL
            if self.engine in CHECKPOINT_THRESHOLD:
                options["checkpoint_threshold"] = CHECKPOINT_THRESHOLD[self.engine]
        self._options = options
        allocator.cap_arenas()  # before the engine starts its threads
        allocator.clear_blocks()  # before it writes a page
        try:
            return module.Database(self.path, **options)
        except RuntimeError as exc:
            if "lock" in str(exc).lower():
                raise StoreLocked(self.path, str(exc).splitlines()[0]) from exc
            raise StoreError(f"cannot open {self.path!r}: {exc}") from exc

    @property
    def lock(self) -> threading.RLock:
        return self._shared.lock

    @property
    def opened_with(self) -> dict[str, int]:
        """The options the engine's `Database` was opened with (its buffer pool, ...)."""
        return dict(self._shared.options)

    @property
    def head_file(self) -> OwnerFile | None:
        """Where the acknowledged log head is kept (None: a temporary database)."""
        return self._shared.owner

    def copy_files(self, dest: str) -> None:
        """Copy the committed database to `dest` (a new path), while no transaction of this
        process runs. A child process copies: a descriptor of the database's file opened and
        closed in this process would drop the engine's lock on it."""
        with self._shared.lock:
            self.check_open()
            pairs = [arg for suffix in compact.DB_SUFFIXES if os.path.exists(self.path + suffix)
                     for arg in (self.path + suffix, dest + suffix)]
            done = subprocess.run([sys.executable, "-I", "-c", _COPY, *pairs],
                                  stdin=subprocess.DEVNULL, capture_output=True, text=True)
            if done.returncode != 0:
                raise StoreError(f"cannot copy {self.path!r}: {done.stderr.strip()[-500:]}")

    @property
    def shared_state(self) -> Any:
        return self._shared.state

    @shared_state.setter
    def shared_state(self, value: Any) -> None:
        self._shared.state = value

    @property
    def keeps_snapshot(self) -> bool:
        """The derived state is saved beside the database (not for a temporary one)."""
        return self._tempdir is None

    @contextmanager
    def transaction(self, after: tuple[int, str] | None = None) -> Iterator[Tx]:
        """BEGIN; COMMIT on success; ROLLBACK on any exception (and re-raise it). `after`, the
        log head (seq, hash) the writes follow, is for stores several processes write
        (gem/store/falkor.py); here the process lock already guarantees it."""
        with self._shared.lock:
            self.check_open()
            self._conn.execute("BEGIN TRANSACTION")
            tx = Tx(self._conn, self._prepared, self.engine, self._shared.sizes,
                    self._shared.options.get("buffer_pool_size"))
            try:
                yield tx
            except BaseException:
                self._rollback()
                raise
            try:
                self._conn.execute("COMMIT")
            except RuntimeError as exc:
                self._rollback()
                raise StoreError(_pool_hint(f"commit failed: {exc}")) from exc
            self._sync_new_log()

    def _sync_new_log(self) -> None:
        """Make the name of a log file the engine just created durable. Both engines fdatasync
        their log at COMMIT, but kuzu 0.11.3 creates it (again after every checkpoint, which
        removes it) without an fsync of its directory: under strict POSIX a power cut would
        lose the log's name, and with it every commit since the checkpoint (tests/test_crash.py).
        One stat per commit tells; the directory is synced only when the log is new. Opening
        the directory, not a file of the database, leaves the engine's lock alone."""
        if self._tempdir is not None:
            return
        try:
            st = os.stat(self.path + ".wal")
        except FileNotFoundError:
            return
        wal = (st.st_dev, st.st_ino)
        if wal != self._shared.wal:
            compact.sync_dir(self.path)
            self._shared.wal = wal

    @contextmanager
    def reading(self) -> Iterator[Tx]:
        """Reads of committed state: each statement is its own read transaction, and the lock
        is held so no write of this process is half-visible (other processes cannot write)."""
        with self._shared.lock:
            self.check_open()
            yield Tx(self._conn, self._prepared, self.engine, self._shared.sizes,
                     self._shared.options.get("buffer_pool_size"))

    def compact(self) -> None:
        """Rewrite the live data into a fresh database and swap it in (gem/store/compact.py).
        Only the one handle on a path may do it: the others' connections would still point at
        the old database."""
        shared = self._shared
        with shared.lock:
            self.check_open()
            if shared.users != 1:
                raise GemError(f"{shared.users} handles are open on {self.path!r} in this "
                               "process: close the others before compacting")
            if "'" in self.path:
                raise InvalidInput("compact() needs a database path without a quote (')")
            self._conn.execute("CHECKPOINT")
            compact.build(shared.module, self.path,
                          lambda dst: self._conn.execute(f"EXPORT DATABASE '{dst}' (format='parquet')"),
                          shared.options)
            self._release()
            shared.database.close()
            compact.swap(self.path)
            shared.database = shared.module.Database(self.path, **shared.options)
            self._conn = shared.module.Connection(shared.database)
            shared.sizes.clear()

    def _release(self) -> None:
        """Cut this handle's prepared statements from the engine and close its connection."""
        # LadybugDB 0.22: a prepared statement keeps its native database alive after
        # Database.close() (file lock and WAL kept); if the path is reopened in this process,
        # the old database's shutdown, whenever the statement is freed, writes its stale state
        # over the files and deletes the new one's log (seen as UnicodeDecodeError,
        # std::bad_alloc, or committed rows silently lost). A reference can outlive this dict
        # (an exception's traceback holds the statement), so each statement is cut from its
        # native object, not only dropped.
        for statement in self._prepared.values():
            statement._prepared_statement = None
        self._prepared.clear()
        try:
            self._conn.close()
        except Exception:  # pragma: no cover - engine-specific
            pass

    def _rollback(self) -> None:
        # An error inside a transaction may already have aborted it; then ROLLBACK itself
        # raises "no active transaction", which is the state we want anyway.
        try:
            self._conn.execute("ROLLBACK")
        except RuntimeError:
            pass
        # kuzu 0.11.3: after a rolled-back update of a row, the next update of that row fails
        # with a write-write conflict (or crashes) in most runs; measured 16 of 20 runs
        # without, 0 of 100 with a checkpoint right after the rollback. Since engine v2 a
        # transition writes nothing before its final flush, so this runs only when the engine
        # itself fails a flush.
        try:
            self._conn.execute("CHECKPOINT")
        except RuntimeError:  # pragma: no cover - nothing to checkpoint is not an error
            pass

    def check_open(self) -> None:
        if self._closed:
            raise StoreError(f"store at {self.path!r} is closed")

    @property
    def closed(self) -> bool:
        return self._closed

    @property
    def temporary(self) -> bool:
        """A database made for `path=None`, removed when closed."""
        return self._tempdir is not None

    def close(self) -> None:
        """Close this handle. Waits for a call running on this path in another thread: closing
        a connection under a running transaction crashed kuzu (SIGSEGV or "Invalid transaction
        type to rollback" in 18 of 20 runs)."""
        shared = self._shared
        with shared.lock:
            if self._closed:
                return
            self._closed = True
            with _registry_lock:
                shared.users -= 1
                self._release()
                if shared.users == 0:
                    _registry.pop(self._key, None)
                    try:
                        shared.database.close()
                    except Exception:  # pragma: no cover - engine-specific
                        pass
                    if shared.owner is not None:  # only once the engine let go of the files
                        shared.owner.release()
        if self._tempdir:
            shutil.rmtree(self._tempdir, ignore_errors=True)


# The first bytes of each engine's database file.
_MAGIC = {b"KUZU": "kuzu", b"LBUG": "ladybug"}


def engine_of(path: str) -> str | None:
    """The engine that made the database at `path`, from the first bytes of its file; None
    where there is no such file, or one neither engine made. A path this process has open
    answers with the engine it is open with, and its file is not touched: closing any
    descriptor of a file drops every POSIX lock the process holds on it, the engine's too.
    The registry lock keeps another thread from opening it meanwhile."""
    path = os.path.abspath(os.fspath(path))
    with _registry_lock:
        for engine, open_path in _registry:
            if open_path == path:
                return engine
        try:
            with open(path, "rb") as handle:
                head = handle.read(4)
        except OSError:  # missing, a directory, unreadable: nothing to tell the engine by
            return None
    return _MAGIC.get(head)

def held_database(path: str | os.PathLike[str]) -> str | None:
    """The database open in this process that `path` is a file of (its data, log or head
    file), if any. Such a file must not be opened here outside the engine: closing the
    descriptor would drop the engine's lock on it."""
    target = os.path.realpath(os.fspath(path))
    with _registry_lock:
        paths = [key[1] for key in _registry]
    for db in paths:
        if target in {os.path.realpath(db + suffix)
                      for suffix in (*compact.DB_SUFFIXES, HEAD_SUFFIX)}:
            return db
    return None


def open_store(path: str | None = None, engine: str = "kuzu", *,
               buffer_pool_size: int | None = None, max_db_size: int | None = None) -> GraphStore:
    """A store on an embedded database (FalkorDB: `gem.store.falkor_database`)."""
    for name, value in (("buffer_pool_size", buffer_pool_size), ("max_db_size", max_db_size)):
        if value is not None and (not isinstance(value, int) or isinstance(value, bool) or value <= 0):
            raise InvalidInput(f"{name} must be a positive number of bytes, got {value!r}")
    if max_db_size is not None and max_db_size & (max_db_size - 1):
        raise InvalidInput(f"max_db_size must be a power of 2 (the engine requires it), got {max_db_size}")
    return GraphStore(path, engine, buffer_pool_size=buffer_pool_size, max_db_size=max_db_size)
