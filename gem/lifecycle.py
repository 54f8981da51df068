"""Opening and closing a memory: which engine a path is opened with, `gem.open`'s
arguments checked and its store and engine opened, the engine of each scope, closing
them (brought up to date first), and the scheduled maintenance a memory runs."""
from __future__ import annotations

import logging
import os
import threading
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Sequence

from .arguments import flag_arg, text_arg
from .derived import DEFAULT_SCOPE, Progress, Summarizer
from .embed import Embedder
from .engine import Engine, embedder_for, utc_now
from .errors import GemError, InvalidInput
from .model import as_utc
from .policy import PolicySet, load_sources, read_sources
from .resolve import Resolver, TieredResolver
from .runtime import available_actions
from .store import ENGINES, engine_of, falkor_database, open_store

if TYPE_CHECKING:  # only for annotations: gem.memory imports this module
    from .memory import Extractor, Memory, Reviser

log = logging.getLogger("gem")


class ScopeEngines:
    """The engine that runs each scope of a memory. On an embedded database, the memory's one
    engine runs every scope. On FalkorDB each scope is its own graph (its own log and hash
    chain, gem/store/falkor.py), with its own engine, opened when the scope is first used; the
    policies stay with the default scope's, shared by all (`Engine.policy_home`)."""

    def __init__(self, root: Engine, database: Any = None) -> None:
        self.root = root
        self.database = database
        self.engines: dict[str, Engine] = {DEFAULT_SCOPE: root}
        self._lock = threading.Lock()

    @property
    def per_scope(self) -> bool:
        return self.database is not None

    def get(self, scope: str) -> Engine:
        if self.database is None:
            return self.root
        with self._lock:
            engine = self.engines.get(scope)
            if engine is None:
                store = self.database.graph(scope)
                services = self.root.services
                try:
                    engine = Engine(store, services.embedder, services.resolver, self.root.clock,
                                    services.summarizer, policy_home=self.root)
                except BaseException:
                    store.close()
                    raise
                engine.reviser, engine.extractor = self.root.reviser, self.root.extractor
                self.engines[scope] = engine
            return engine

    def scopes(self) -> list[str]:
        """The scopes that hold something (on FalkorDB: every graph of the memory with a log)."""
        if self.database is None:
            derived = self.root.derived
            return sorted(n for n, s in derived.scopes.items() if len(s.topics) or s.counters)
        return self.database.scope_names(logged=True)

    def opened(self) -> list[Engine]:
        with self._lock:
            return list(self.engines.values())


def engine_for(path: str | Path | None, engine: str | None = None) -> str:
    """The engine to open `path` with: the one that made the database there (read from its
    file, gem/store/graph.py `engine_of`), `engine` if given and not contradicted by it. A
    database opened with the wrong engine is refused with the engine it was made with, before
    that engine is loaded (the two cannot share a process)."""
    if engine is not None:
        text_arg(engine, "engine")
    url = isinstance(path, str) and "://" in path
    if path is None or url or engine == "falkordb":
        return engine or ("falkordb" if url else "kuzu")
    made = engine_of(os.fspath(path))
    if engine is not None and made is not None and engine in ENGINES and made != engine:
        raise InvalidInput(f"{os.fspath(path)!r} is a database of engine {made!r}, not {engine!r}: "
                           f"open it with engine {made!r}, or name no engine (it is detected)")
    return engine or made or "kuzu"


@dataclass(frozen=True)
class Opened:
    """What `open_engine` opened: the default scope's engine, the FalkorDB database whose
    graphs are the scopes (None for an embedded database), and the policy set `gem.open` was
    given, read and checked (None: keep the stored one)."""
    engine: Engine
    database: Any
    wanted: PolicySet | None

    def close(self) -> None:
        self.engine.deriver.stop()
        self.engine.store.close()
        if self.database is not None:
            self.database.close()


def open_engine(path: str | Path | None, policies: Sequence[str | Path] | None,
                embedder: Embedder | None, resolver: Resolver | None,
                clock: Callable[[], datetime] | None, engine: str | None,
                summarizer: Summarizer | None, create: bool, progress: Progress | None, *,
                defaults: bool, reviser: Reviser | None, extractor: Extractor | None,
                buffer_pool_size: int | None, max_db_size: int | None,
                accept_head: bool) -> Opened:
    """`gem.open`'s arguments checked (nothing is opened before they are), then the store and
    the engine on it: see `gem.open`."""
    if path is not None and not isinstance(path, (str, os.PathLike)):
        raise InvalidInput(f"path must be a str, an os.PathLike or None, got {type(path).__name__}")
    if path is not None and not os.fspath(path):
        raise InvalidInput("path is empty (use path=None for a temporary database)")
    engine = engine_for(path, engine)
    flag_arg(create, "create")
    flag_arg(defaults, "defaults")
    flag_arg(accept_head, "accept_head")
    for name, fn in (("clock", clock), ("summarizer", summarizer), ("progress", progress),
                     ("reviser", reviser), ("extractor", extractor)):
        if fn is not None and not callable(fn):
            raise InvalidInput(f"{name} must be callable, got {type(fn).__name__}")
    if resolver is not None and not callable(getattr(resolver, "resolve", None)):
        raise InvalidInput(f"resolver must have a resolve(name, topics) method, got "
                           f"{type(resolver).__name__}")
    if embedder is not None and not (callable(getattr(embedder, "embed", None))
                                     and isinstance(getattr(embedder, "dim", None), int)
                                     and isinstance(getattr(embedder, "name", None), str)):
        raise InvalidInput(f"embedder must have embed(texts), an int dim and a str name, got "
                           f"{type(embedder).__name__}")
    falkor = engine == "falkordb"
    if falkor and (buffer_pool_size is not None or max_db_size is not None):
        raise InvalidInput("buffer_pool_size and max_db_size size an embedded database; the "
                           "FalkorDB server has its own memory settings")
    if not falkor and isinstance(path, str) and "://" in path:
        raise InvalidInput(f"{path!r} is a URL: open it with engine='falkordb'")
    if not falkor and not create and path is not None and not Path(path).exists():
        raise InvalidInput(f"no database at {str(path)!r}")
    wanted = None
    if policies is not None:  # read and checked before anything is opened
        wanted = load_sources(read_sources(policies, argument="policies"), available_actions(),
                              defaults=defaults, argument="policies")
    elif not defaults:
        raise InvalidInput("defaults=False needs the policies that replace the default governance")
    database = None
    if falkor:
        if path is None:
            raise InvalidInput("engine 'falkordb' needs the memory's URL: redis://HOST:PORT/NAME")
        database = falkor_database(str(path))
        try:
            if not create and not database.exists():
                raise InvalidInput(f"no memory at {database.url}")
            store = database.graph(DEFAULT_SCOPE)
        except BaseException:
            database.close()
            raise
    else:
        store = open_store(None if path is None else str(path), engine,
                           buffer_pool_size=buffer_pool_size, max_db_size=max_db_size)
    try:
        system_clock = clock or utc_now

        def checked_clock() -> datetime:
            return as_utc(system_clock(), "clock()")

        core = Engine(store, embedder or embedder_for(store), resolver or TieredResolver(),
                      checked_clock, summarizer, progress, accept_head=accept_head)
    except BaseException:
        store.close()
        if database is not None:
            database.close()
        raise
    core.reviser, core.extractor = reviser, extractor
    return Opened(core, database, wanted)


def close(mem: "Memory") -> None:
    if mem._root is not None:
        mem._closed = True
        return
    if not mem._closed:
        mem.stop_maintenance()
        mem._closed = True
        for engine in reversed(mem._engines.opened()):  # the scopes' stores, then the root's
            engine.deriver.stop()
            try:
                # stamped: the stored columns then say they are current at the head, so
                # the next open replays no record (unstamped, it replayed the log since
                # the last write-behind and re-read every unit those records touched)
                engine.write_behind(stamp=True)
                engine.save_snapshot()
            except (GemError, OSError):  # the log still has it all: the next open catches up
                log.warning("gem: could not bring the database and its snapshot up to date "
                            "at close", exc_info=True)
            engine.store.close()
        if mem._engines.database is not None:
            mem._engines.database.close()


def start_maintenance(mem: "Memory", every: float | timedelta) -> None:
    from apscheduler.schedulers.background import BackgroundScheduler
    mem._check_open()
    if not isinstance(every, (int, float, timedelta)) or isinstance(every, bool):
        raise InvalidInput(f"every must be seconds or a timedelta, got {type(every).__name__}")
    seconds = every.total_seconds() if isinstance(every, timedelta) else float(every)
    if not seconds > 0:  # NaN too
        raise InvalidInput("every must be a positive number of seconds")
    if mem._scheduler is not None:
        raise GemError("maintenance is already running; stop it first")
    scheduler = BackgroundScheduler(timezone="UTC")

    def maintenance_job() -> None:
        _maintenance_job(mem)
    scheduler.add_job(maintenance_job, "interval", seconds=seconds,
                      id="gem-maintenance", max_instances=1, coalesce=True,
                      next_run_time=datetime.now(timezone.utc))
    scheduler.start()
    mem._scheduler = scheduler


def _maintenance_job(mem: "Memory") -> None:
    try:
        mem.maintain()
        mem.maintenance_runs += 1
    except Exception:  # logged and retried at the next interval
        mem.maintenance_failures += 1
        log.exception("gem maintenance run failed; it was rolled back and will be retried")


def stop_maintenance(mem: "Memory") -> None:
    if mem._scheduler is not None:
        mem._scheduler.shutdown(wait=True)
        mem._scheduler = None
