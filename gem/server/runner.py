"""`gem serve`: one process owns a database and serves it over HTTP (/v1, /docs) and MCP
(/mcp, streamable HTTP), with scheduled maintenance.

Lifecycle: take the server lock and bind the socket (failing fast), start listening,
write the endpoint file, open the memory (waiting out another process's database
lock for up to --lock-timeout seconds; requests get 503 meanwhile). On SIGTERM or
SIGINT: stop taking connections, let the running calls finish, end MCP sessions and
bridges' attach streams, close the memory (after the call on the worker finishes),
remove the endpoint file. With --idle-exit N the server also stops by itself after N
seconds with no request and no attached bridge (how `gem mcp` starts it).
"""
from __future__ import annotations

import asyncio
import gc
import logging
import os
import signal
import socket
import sys
import time
from contextlib import asynccontextmanager, contextmanager
from datetime import datetime, timezone
from typing import Any, AsyncIterator, Iterator

import uvicorn

from .. import __version__
from .endpoint import Endpoint, ServerLock, read_endpoint, remove_endpoint, write_endpoint
from .http import build_app
from .mcp import build_mcp
from .service import ServeConfig, Service

log = logging.getLogger("gem.server")

EXIT_OK, EXIT_ERROR, EXIT_ALREADY_SERVED = 0, 1, 3


def serve(cfg: ServeConfig) -> int:
    """Run the server until it is told to stop; returns the process exit code."""
    if cfg.shared:  # many workers serve one FalkorDB memory: nothing to lock or announce
        return _listen_and_run(cfg)
    path = os.path.abspath(cfg.path)
    if not cfg.create and not os.path.exists(path):
        print(f"gem serve: no database at {cfg.path!r} (create it with `gem init`, or pass "
              "--create)", file=sys.stderr)
        return EXIT_ERROR
    lock = ServerLock(path)
    if not lock.acquire():
        other = read_endpoint(path)
        where = f" by pid {other.pid} at {other.url}" if other else ""
        print(f"gem serve: {path} is already served{where}", file=sys.stderr)
        return EXIT_ALREADY_SERVED
    try:
        return _listen_and_run(ServeConfig(**{**cfg.__dict__, "path": path}))
    finally:
        remove_endpoint(path, os.getpid())
        lock.release()


def _listen_and_run(cfg: ServeConfig) -> int:
    try:
        sock = _bind(cfg.host, cfg.port)
    except OSError as exc:
        print(f"gem serve: cannot listen on {cfg.host}:{cfg.port}: {exc.strerror}", file=sys.stderr)
        return EXIT_ERROR
    with sock:
        return asyncio.run(_run(cfg, sock))


def _bind(host: str, port: int) -> socket.socket:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    # proto IPPROTO_TCP, not 0: asyncio turns on TCP_NODELAY only for sockets that say
    # so, and without it every response waits ~40 ms for a delayed ACK (Nagle).
    sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
    except OSError:
        sock.close()
        raise
    sock.set_inheritable(True)
    return sock


class _Server(uvicorn.Server):
    """uvicorn's server, telling the service when a stop begins, so long-lived streams end
    instead of holding the shutdown; and a stop asked for by SIGTERM or SIGINT that ends
    cleanly exits 0 (uvicorn would re-raise the signal once it has shut down)."""

    on_stop: Any = None

    @contextmanager
    def capture_signals(self) -> Iterator[None]:
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, self.handle_exit, sig, None)
        try:
            yield
        finally:
            for sig in (signal.SIGINT, signal.SIGTERM):
                loop.remove_signal_handler(sig)

    def handle_exit(self, sig: int, frame: Any) -> None:
        if self.on_stop is not None:
            self.on_stop()
        super().handle_exit(sig, frame)


async def _run(cfg: ServeConfig, sock: socket.socket) -> int:
    loop = asyncio.get_running_loop()
    service = Service(cfg)
    mcp = build_mcp(service)
    mcp_app = mcp.streamable_http_app(streamable_http_path="/mcp", host=cfg.host,
                                      max_request_body_size=cfg.max_body)
    mcp_stop = asyncio.Event()
    exit_code = EXIT_OK
    port = sock.getsockname()[1]
    server: _Server

    def begin_stop() -> None:
        if not service.stopping.is_set():
            service.stopping.set()
            loop.create_task(_end_mcp_after_calls(service, mcp_stop, cfg.graceful_timeout))

    def stop(reason: str, code: int = EXIT_OK) -> None:
        nonlocal exit_code
        exit_code = exit_code or code
        log.info("stopping: %s", reason)
        begin_stop()
        server.should_exit = True

    async def run_mcp_sessions() -> None:
        async with mcp.session_manager.run():
            await mcp_stop.wait()

    async def open_memory() -> None:
        try:
            await service.open()
        except Exception as exc:  # the reason is the server's last word: it cannot serve
            service.failure = str(exc)
            print(f"gem serve: {exc}", file=sys.stderr)
            stop("the memory could not be opened", EXIT_ERROR)
            return
        # What is alive now (the server's modules, the memory's derived state) lives as long as
        # the process: out of the collector's sight, a full collection no longer walks it. At
        # 10k topics (~140k objects) the collections a page's allocations trigger cost a
        # dashboard topic page 114 ms of CPU instead of 36 (bench/dashboard.py).
        gc.freeze()

    async def announce() -> None:
        while not server.started:
            await asyncio.sleep(0.02)
        endpoint = Endpoint(pid=os.getpid(), host=cfg.host, port=port, path=cfg.shown_path,
                            engine=cfg.engine, version=__version__, idle_exit=cfg.idle_exit,
                            started_at=datetime.now(timezone.utc).isoformat())
        if not cfg.shared:
            write_endpoint(cfg.path, endpoint)
        log.info("listening on %s (MCP at %s)", endpoint.url, endpoint.mcp_url)

    async def exit_when_idle(seconds: float) -> None:
        while True:
            await asyncio.sleep(min(1.0, seconds / 4))
            idle = service.idle_for()
            if idle is not None and idle >= seconds and service.memory is not None:
                stop(f"no request and no attached client for {seconds:g} s")
                return

    @asynccontextmanager
    async def lifespan(app: Any) -> AsyncIterator[None]:
        tasks = [loop.create_task(run_mcp_sessions()), loop.create_task(open_memory()),
                 loop.create_task(announce())]
        if cfg.idle_exit:
            tasks.append(loop.create_task(exit_when_idle(cfg.idle_exit)))
        try:
            yield
        finally:
            begin_stop()
            mcp_stop.set()
            for task in tasks[1:]:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            await service.close()
            if not cfg.shared:
                remove_endpoint(cfg.path, os.getpid())
            log.info("stopped; %s closed", cfg.shown_path)

    app = build_app(service, lifespan=lifespan, mcp_routes=list(mcp_app.routes))
    config = uvicorn.Config(app, lifespan="on", log_config=None, log_level="warning",
                            access_log=False, timeout_graceful_shutdown=int(cfg.graceful_timeout))
    server = _Server(config)
    server.on_stop = begin_stop  # signal handlers run in the loop (add_signal_handler)
    await server.serve(sockets=[sock])
    return exit_code


async def _end_mcp_after_calls(service: Service, mcp_stop: asyncio.Event, limit: float) -> None:
    """End MCP sessions (their streams would hold the shutdown) once the calls already
    running have answered, or after `limit` seconds."""
    deadline = time.monotonic() + limit
    while service.in_flight and time.monotonic() < deadline:
        await asyncio.sleep(0.05)
    mcp_stop.set()
