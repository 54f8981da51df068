"""The state `gem serve` keeps around its one memory: opening it (waiting out another
process's lock), running every call on the AsyncMemory's worker, knowing what runs,
who is attached, and when the process was last used."""
from __future__ import annotations

import asyncio
import logging
import os
import time
from dataclasses import dataclass
from typing import Any, Callable, Literal, TypeVar

from .. import __version__
from ..aio import AsyncMemory
from ..api import ops
from ..api import schemas as s
from ..errors import GemError, StoreLocked, TransitionRejected
from .keys import ALL_SCOPES, Keys, request_scope

log = logging.getLogger("gem.server")
T = TypeVar("T")
State = Literal["starting", "waiting_for_lock", "ok", "stopping"]


@dataclass(frozen=True)
class ServeConfig:
    path: str                           # a database path, or a FalkorDB URL (engine "falkordb")
    engine: str = "kuzu"
    policies: tuple[str, ...] | None = None
    create: bool = False
    host: str = "127.0.0.1"
    port: int = 8765
    maintain_every: float | None = None
    idle_exit: float | None = None      # exit after this long with no request and no bridge
    lock_timeout: float = 10.0          # wait this long for another process's database lock
    max_body: int = 1 << 20             # bytes; larger request bodies get 413
    graceful_timeout: float = 30.0      # seconds a running call may take to finish on SIGTERM
    reports: str | None = "bench/out"   # the dashboard lists the HTML reports found here
    keys: Keys | None = None            # API keys -> scopes (gem/server/keys.py); None: no auth
    hooks: tuple[tuple[str, Any], ...] = ()  # gem.open's extractor=, reviser=, ... (gem.llm)

    @property
    def shared(self) -> bool:
        """A memory on a server that many `gem serve` workers share (FalkorDB): no lock and no
        endpoint file beside a database path."""
        return self.engine == "falkordb"

    @property
    def shown_path(self) -> str:
        """The path as the endpoint file and the log show it (local, never to a client):
        absolute, or the URL without its password."""
        if not self.shared:
            return os.path.abspath(self.path)
        from ..store.falkor import parse_url
        try:
            return parse_url(self.path)[2]
        except GemError:  # the open says what is wrong with it
            return self.path.rsplit("@", 1)[-1]


def _view(memory: Any, scope: str | None) -> Any:
    """The memory as a caller granted `scope` sees it: the memory itself without keys or for
    an operator key, else that scope's view (even for "default": the memory itself also
    reads other scopes' log records and totals)."""
    return memory if scope in (None, ALL_SCOPES) else memory.scope(scope)


class Rejected(GemError):
    """A TransitionRejected whose unit has been named for the reader."""

    def __init__(self, body: s.ErrorBody) -> None:
        self.body = body
        super().__init__(body.message)


class NotReady(GemError):
    """The server is up but its memory is not open (yet, or any more)."""


class Service:
    def __init__(self, config: ServeConfig) -> None:
        self.config = config
        self.memory: AsyncMemory | None = None
        self.state: State = "starting"
        self.detail: str | None = None
        self.busy: str | None = None       # the call on the worker now
        self.in_flight = 0                 # calls submitted and not finished
        self.attached = 0                  # bridges (gem mcp) holding /v1/attach open
        self.last_activity = time.monotonic()
        self.stopping = asyncio.Event()
        self.failure: str | None = None    # why the memory could not be opened

    # ------------------------------------------------------------------ lifecycle
    async def open(self) -> None:
        """Open the memory; while another process holds its lock, retry until lock_timeout.
        Meanwhile requests are answered 503 (StoreLocked)."""
        cfg = self.config
        deadline = time.monotonic() + cfg.lock_timeout
        while True:
            try:
                memory = await AsyncMemory.open(cfg.path, engine=cfg.engine, create=cfg.create,
                                                policies=list(cfg.policies) if cfg.policies else None,
                                                **dict(cfg.hooks))
                break
            except StoreLocked as exc:
                if time.monotonic() >= deadline or self.stopping.is_set():
                    raise
                if self.state != "waiting_for_lock":
                    log.warning("%s; waiting up to %.0f s for it", exc, cfg.lock_timeout)
                self.state = "waiting_for_lock"
                self.detail = f"locked by another process; waiting up to {cfg.lock_timeout:.0f} s"
                await asyncio.sleep(0.2)
        self.memory = memory
        self.state, self.detail = "ok", None
        if cfg.maintain_every:
            memory.start_maintenance(cfg.maintain_every)
        log.info("serving %s (%s engine)", memory.path, memory.engine_name)

    async def close(self) -> None:
        memory, self.memory = self.memory, None
        self.state = "stopping"
        if memory is not None:
            await memory.close()  # after the call on the worker finishes

    # ------------------------------------------------------------------ calls
    def _require(self) -> AsyncMemory:
        if self.memory is None:
            if self.state == "waiting_for_lock":
                raise StoreLocked(self.shown_name or "(not shown)", "the server is waiting for it")
            raise NotReady(f"the memory is not open ({self.state})")
        return self.memory

    async def call(self, name: str, fn: Callable[..., T], *args: Any,
                   scope: str | None | Literal["request"] = "request") -> T:
        """Run `fn(memory, *args)` (an ops function) on the worker, on the view of `scope`
        (by default the scope the request's API key grants; None: the memory itself); a
        rejected transition comes back as `Rejected` with its unit named."""
        memory = self._require()
        if scope == "request":
            scope = request_scope.get()
        self.in_flight += 1
        self.last_activity = time.monotonic()

        def traced(mem: Any, *a: Any) -> T:
            self.busy = name
            try:
                return fn(_view(mem, scope), *a)
            finally:
                self.busy = None
        try:
            return await memory.run(traced, *args)
        except TransitionRejected as exc:
            log.warning("%s rejected: %s", name, exc)
            raise Rejected(await memory.run(lambda m: ops.describe_rejection(_view(m, scope), exc))) \
                from exc
        finally:
            self.in_flight -= 1
            self.last_activity = time.monotonic()

    @property
    def shown_name(self) -> str | None:
        """What clients are told the memory is: never a directory. Without keys (a local
        admin) the database's file name, or the URL without its password; with keys nothing
        (a tenant learns nothing of where or what the store is)."""
        cfg = self.config
        if cfg.keys is not None:
            return None
        return cfg.shown_path if cfg.shared else os.path.basename(os.path.abspath(cfg.path))

    async def status(self) -> s.StatusResult:
        """ops.status, with the memory named as clients may see it."""
        found = await self.call("status", ops.status, self.maintenance_info())
        return found.model_copy(update={"path": self.shown_name})

    def maintenance_info(self) -> s.MaintenanceInfo:
        memory = self.memory
        return s.MaintenanceInfo(every_seconds=self.config.maintain_every,
                                 runs=memory.maintenance_runs if memory else 0,
                                 failures=memory.maintenance_failures if memory else 0)

    def health(self) -> s.Health:
        return s.Health(status=self.state if not self.stopping.is_set() else "stopping",
                        path=self.shown_name, engine=self.config.engine,
                        pid=os.getpid(), version=__version__, busy=self.busy, detail=self.detail)

    def idle_for(self) -> float | None:
        """Seconds since the last request or bridge, or None while something is in use."""
        if self.attached or self.in_flight:
            return None
        return time.monotonic() - self.last_activity
