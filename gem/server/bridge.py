"""`gem mcp PATH`: MCP over stdio for desktop clients, bridged to the server that owns PATH.

An embedded database has one owner process, so a stdio server cannot open the database
itself: a second desktop client (or `gem serve` already running) would find it locked.
Instead every `gem mcp PATH` is a bridge to one `gem serve PATH`:

- a live server for PATH (its endpoint file names a live pid that answers /v1/health)
  is used as it is;
- otherwise the bridge starts one, detached (`gem serve PATH --port 0 --idle-exit N`, and
  the model options `gem mcp` was given, `--extractor-model` and the like; its output appended
  to `PATH.gem-serve.log`), and waits until it is healthy. When two
  bridges race, one server wins the server lock; the other exits with code 3 and its
  bridge uses the winner.

While a bridge runs it holds `/v1/attach` open. An auto-started server exits N seconds
(--idle-exit, default 60) after its last bridge detached and its last request ended;
the next `gem mcp` starts a new one. A server started by hand (`gem serve`) is never
stopped by bridges.

The bridge speaks MCP on both sides with the SDK: an MCP server on stdio whose tools, prompts and
resources forward to an MCP client of the server's /mcp endpoint, so each side
negotiates its own protocol version.
"""
from __future__ import annotations

import http.client
import json
import os
import subprocess
import sys
import time
from typing import Any, Sequence

import anyio
from mcp import Client
from mcp import types
from mcp.server.lowlevel import Server
from mcp.client.streamable_http import streamable_http_client
from mcp.server.stdio import stdio_server
from mcp.shared._httpx_utils import create_mcp_http_client

from .endpoint import Endpoint, read_endpoint
from .runner import EXIT_ALREADY_SERVED


LOG_SUFFIX = ".gem-serve.log"
START_TIMEOUT = 60.0  # opening a large database rebuilds its indexes


class BridgeError(Exception):
    pass


def _get(endpoint: Endpoint, path: str, timeout: float = 2.0,
         headers: dict[str, str] | None = None) -> tuple[int, dict[str, Any]]:
    conn = http.client.HTTPConnection(endpoint.host, endpoint.port, timeout=timeout)
    try:
        conn.request("GET", path, headers=headers or {})
        response = conn.getresponse()
        return response.status, json.loads(response.read() or b"{}")
    finally:
        conn.close()


def health(endpoint: Endpoint) -> dict[str, Any] | None:
    """The server's /v1/health body, if it answers as the server of its database."""
    try:
        _, body = _get(endpoint, "/v1/health")
    except (OSError, ValueError, http.client.HTTPException):
        return None
    # The pid names the process that wrote the endpoint file; the path is shown by file name
    # only, and not at all by a server with keys.
    named = body.get("path") in (None, os.path.basename(endpoint.path))
    return body if named and body.get("pid") == endpoint.pid else None


def _ready(path: str) -> Endpoint | None:
    endpoint = read_endpoint(path)
    if endpoint is None:
        return None
    body = health(endpoint)
    return endpoint if body is not None and body.get("status") == "ok" else None


def ensure_server(path: str, engine: str = "kuzu", idle_exit: float = 60.0,
                  serve_args: Sequence[str] = ()) -> tuple[Endpoint, bool]:
    """The endpoint of a healthy server for `path`, starting one (`gem serve` with
    `serve_args` added) if none runs. Returns (endpoint, whether this call started it)."""
    path = os.path.abspath(path)
    endpoint = _ready(path)
    if endpoint is not None:
        return endpoint, False
    command = [sys.executable, "-m", "gem", "serve", path, "--port", "0", "--engine", engine,
               "--idle-exit", str(idle_exit), *serve_args]
    with open(path + LOG_SUFFIX, "ab") as out:
        child = subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=out, stderr=out,
                                 start_new_session=True, close_fds=True)
    deadline = time.monotonic() + START_TIMEOUT
    while time.monotonic() < deadline:
        endpoint = _ready(path)
        if endpoint is not None:
            return endpoint, endpoint.pid == child.pid
        code = child.poll()
        if code is not None and code != EXIT_ALREADY_SERVED:
            raise BridgeError(f"the server for {path} exited with code {code}; "
                              f"see {path + LOG_SUFFIX}")
        time.sleep(0.05)
    raise BridgeError(f"no server for {path} became ready within {START_TIMEOUT:g} s; "
                      f"see {path + LOG_SUFFIX}")


def _auth(key: str | None) -> dict[str, str]:
    return {"Authorization": f"Bearer {key}"} if key else {}


def _hold_attach(endpoint: Endpoint, key: str | None) -> None:
    """Blocks while the server keeps this bridge's attach stream open."""
    conn = http.client.HTTPConnection(endpoint.host, endpoint.port, timeout=None)
    try:
        conn.request("GET", "/v1/attach", headers=_auth(key))
        response = conn.getresponse()
        while response.readline():
            pass
    except (OSError, http.client.HTTPException):
        pass
    finally:
        conn.close()


def _proxy(upstream: Client) -> Server[Any]:
    """An MCP server whose every request is answered by `upstream`."""
    async def list_tools(ctx: Any, params: types.PaginatedRequestParams | None) -> types.ListToolsResult:
        return await upstream.list_tools(cursor=params.cursor if params else None)

    async def call_tool(ctx: Any, params: types.CallToolRequestParams) -> types.CallToolResult:
        return await upstream.call_tool(params.name, params.arguments or {})

    async def list_resources(ctx: Any, params: types.PaginatedRequestParams | None) -> types.ListResourcesResult:
        return await upstream.list_resources(cursor=params.cursor if params else None)

    async def list_templates(ctx: Any, params: types.PaginatedRequestParams | None) -> types.ListResourceTemplatesResult:
        return await upstream.list_resource_templates(cursor=params.cursor if params else None)

    async def read_resource(ctx: Any, params: types.ReadResourceRequestParams) -> types.ReadResourceResult:
        return await upstream.read_resource(str(params.uri))

    async def list_prompts(ctx: Any, params: types.PaginatedRequestParams | None) -> types.ListPromptsResult:
        return await upstream.list_prompts(cursor=params.cursor if params else None)

    async def get_prompt(ctx: Any, params: types.GetPromptRequestParams) -> types.GetPromptResult:
        return await upstream.get_prompt(params.name, params.arguments)

    info = upstream.server_info
    return Server(info.name if info else "gem", version=info.version if info else "",
                  title=info.title if info else None, instructions=upstream.instructions,
                  on_list_tools=list_tools, on_call_tool=call_tool,
                  on_list_resources=list_resources, on_list_resource_templates=list_templates,
                  on_read_resource=read_resource, on_list_prompts=list_prompts,
                  on_get_prompt=get_prompt)


async def _bridge(endpoint: Endpoint, key: str | None) -> None:
    async with anyio.create_task_group() as tg:
        async def watch() -> None:
            await anyio.to_thread.run_sync(_hold_attach, endpoint, key, abandon_on_cancel=True)
            # The server is gone: end this process now, so the client sees its MCP server
            # exit (and may restart it) instead of waiting on calls nobody will answer. A
            # clean return cannot do it: the stdio transport's thread blocks on stdin.
            print(f"gem mcp: the server at {endpoint.url} went away", file=sys.stderr, flush=True)
            os._exit(1)
        tg.start_soon(watch)
        transport = streamable_http_client(endpoint.mcp_url,
                                           http_client=create_mcp_http_client(headers=_auth(key)))
        async with Client(transport, cache=None) as upstream:
            proxy = _proxy(upstream)
            async with stdio_server() as (read, write):
                await proxy.run(read, write, proxy.create_initialization_options())
        tg.cancel_scope.cancel()


def run_bridge(path: str, engine: str = "kuzu", idle_exit: float = 60.0,
               key: str | None = None, serve_args: Sequence[str] = ()) -> int:
    """Bridge stdio to the server of `path` (started with `serve_args` if none runs); `key`:
    the API key a server started with --keys needs (its scope is what the client sees)."""
    if not os.path.exists(path):
        print(f"gem mcp: no database at {path!r} (create it with `gem init`)", file=sys.stderr)
        return 1
    try:
        endpoint, started = ensure_server(path, engine, idle_exit, serve_args)
    except BridgeError as exc:
        print(f"gem mcp: {exc}", file=sys.stderr)
        return 1
    print(f"gem mcp: bridging stdio to {endpoint.mcp_url} (server pid {endpoint.pid}"
          f"{', started now' if started else ''})", file=sys.stderr)
    if serve_args and not started:
        print(f"gem mcp: {' '.join(serve_args)}: not applied: the server already running "
              f"for {path} keeps the options it was started with", file=sys.stderr)
    try:
        status, _ = _get(endpoint, "/v1/stats", timeout=30.0, headers=_auth(key))
    except (OSError, ValueError, http.client.HTTPException) as exc:
        print(f"gem mcp: the server at {endpoint.url} does not answer: {exc}", file=sys.stderr)
        return 1
    if status == 401:
        print(f"gem mcp: the server at {endpoint.url} needs an API key"
              f"{' (this one is not known)' if key else ''}: pass --key KEY or set GEM_API_KEY",
              file=sys.stderr)
        return 1
    anyio.run(_bridge, endpoint, key)
    return 0
