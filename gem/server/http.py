"""The JSON API under /v1 (FastAPI: request and response bodies are the pydantic schemas
of gem.api.schemas, OpenAPI docs at /docs), its error mapping and body-size limit."""
from __future__ import annotations

import asyncio
import logging
import time
from typing import Any, AsyncIterator

from fastapi import APIRouter, FastAPI, Query, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import HTMLResponse, JSONResponse, PlainTextResponse, StreamingResponse
from starlette.exceptions import HTTPException

from .. import __version__
from ..api import ops, prompt
from ..api import schemas as s
from ..errors import GemError, InvalidInput, PolicyError, StoreLocked, UnknownUnit
from ..dashboard.apidocs import api_docs
from ..llm import LLMError
from .dashboard import HEADERS, build_dashboard
from .keys import KeyAuth
from .service import NotReady, Rejected, Service

log = logging.getLogger("gem.server")

# Typed errors -> HTTP status and the `error` word of the body. First match wins.
ERRORS: list[tuple[type[Exception], int, str]] = [
    (Rejected, 409, "transition_rejected"),
    (InvalidInput, 422, "invalid_input"),
    (PolicyError, 422, "invalid_input"),
    (UnknownUnit, 404, "unknown_unit"),
    (StoreLocked, 503, "store_locked"),
    (NotReady, 503, "not_ready"),
    (LLMError, 502, "model_unavailable"),   # a hook's model endpoint (gem.llm) did not answer
    (GemError, 500, "internal"),
]


# What each error status means, for the OpenAPI schema; every one has the ErrorBody shape.
MEANING = {
    404: "Unknown topic or field (`unknown_unit`)",
    409: "The transition was rejected: nothing changed (`transition_rejected`, with the "
         "condition and the unit)",
    413: "The request body is over --max-body bytes (`payload_too_large`)",
    422: "Invalid input (`invalid_input`)",
    503: "The database is locked by another process or not open yet (`store_locked`, "
         "`not_ready`); try again after Retry-After seconds",
}
# Routes by what they can answer: reads of a memory, reads naming a unit, transitions.
READ, NAMED, PARAMS = (503,), (404, 422, 503), (422, 503)
WRITE = (409, 413, 422, 503)


def errors(*codes: int) -> dict[int | str, dict[str, Any]]:
    """The `responses=` of a route that can answer `codes` in gem's error shape."""
    return {code: {"model": s.ErrorBody, "description": MEANING[code]} for code in sorted(codes)}


# Starlette's own errors (no such route, wrong method) in gem's words.
HTTP_WORDS = {404: "not_found", 405: "method_not_allowed"}


def _error(status: int, body: s.ErrorBody, headers: dict[str, str] | None = None) -> JSONResponse:
    return JSONResponse(body.model_dump(mode="json"), status_code=status, headers=headers)


def _gem_error(request: Request, exc: Exception) -> JSONResponse:
    if isinstance(exc, Rejected):
        return _error(409, exc.body)
    for kind, status, word in ERRORS:
        if isinstance(exc, kind):
            headers = {"Retry-After": "1"} if status == 503 else None
            return _error(status, s.ErrorBody(error=word, message=str(exc)), headers)
    raise exc  # pragma: no cover - ERRORS ends with GemError


def _http_error(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, HTTPException)  # the only class it is registered for
    headers = dict(exc.headers or {})
    method, path = request.method, request.url.path
    if exc.status_code == 404:
        message = f"no route {path}; the API is under /v1 (see /docs)"
    elif exc.status_code == 405:
        allowed = headers.get("Allow", "").split(", ")
        if "GET" in allowed and "HEAD" not in allowed:  # HeadAsGet answers HEAD for every GET
            headers["Allow"] = ", ".join([*allowed, "HEAD"])
        message = f"{path} does not take {method}; it takes {headers['Allow']}"
    else:
        message = str(exc.detail)
    word = HTTP_WORDS.get(exc.status_code, "invalid_input" if exc.status_code < 500 else "internal")
    return _error(exc.status_code, s.ErrorBody(error=word, message=message), headers)


def _validation_error(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, RequestValidationError)  # the only class it is registered for
    problems = [{"loc": list(e.get("loc", ())), "msg": e.get("msg", "")} for e in exc.errors()]
    text = "; ".join(f"{'.'.join(map(str, p['loc']))}: {p['msg']}" for p in problems)
    return _error(422, s.ErrorBody(error="invalid_input", message=f"invalid request: {text}",
                                   detail=problems))


def build_router(service: Service) -> APIRouter:
    """Every route of the API, in one place. Each runs one ops function on the worker."""
    r = APIRouter(prefix="/v1")
    call = service.call

    @r.get("/health", response_model=s.Health, summary="Liveness and readiness (never queued)",
           responses={503: {"model": s.Health}})
    async def health() -> Any:
        body = service.health()
        status = 200 if body.status == "ok" else 503
        return JSONResponse(body.model_dump(mode="json"), status_code=status)

    @r.post("/ingest", response_model=s.RememberResult, responses=errors(*WRITE),
            summary="Ingest facts and episodes as one transition")
    async def ingest(body: s.IngestRequest) -> s.RememberResult:
        return await call("ingest", ops.remember, list(body.facts), body.actor,
                          list(body.episodes))

    @r.post("/retrieve", response_model=s.RecallResult,
            responses={**errors(404, *WRITE), 200: {"content": {"text/plain": {}}, "description": (
                "The result; with `format: text`, a compact block for a prompt (text/plain)")}},
            summary="Retrieve (a transition: what is returned is reinforced)")
    async def retrieve(body: s.RetrieveRequest) -> Any:
        result = await call("retrieve", ops.recall, body)
        if body.format == "text":
            return PlainTextResponse(prompt.render(result, body.max_tokens))
        return result

    @r.get("/topic", response_model=s.TopicCard, responses=errors(*NAMED),
           summary="Inspect a topic or one of its fields (side-effect free)")
    async def topic(topic: str = Query(min_length=1), field: str | None = None) -> Any:
        return await call("inspect", ops.inspect, topic, field)

    @r.get("/history", response_model=s.HistoryResult, responses=errors(*NAMED), summary="A field's full value history")
    async def history(topic: str = Query(min_length=1), field: str = Query(min_length=1)) -> Any:
        return await call("history", ops.history, topic, field)

    @r.get("/explain", response_model=s.ExplainResult, responses=errors(*NAMED),
           summary="The evidence behind a field's current value, with its reliability")
    async def explain(topic: str = Query(min_length=1), field: str = Query(min_length=1)) -> Any:
        return await call("explain", ops.explain, topic, field)

    @r.post("/link", response_model=s.LinkResult, responses=errors(404, *WRITE), summary="Add a typed edge between two topics")
    async def link(body: s.LinkRequest) -> Any:
        return await call("link", ops.link, body)

    @r.post("/restore", response_model=s.RestoreResult, responses=errors(404, *WRITE),
            summary="Undo any forgetting of a topic (or one field)")
    async def restore(body: s.RestoreRequest) -> Any:
        return await call("restore", ops.restore, body)

    @r.post("/erase", response_model=s.EraseResult, responses=errors(404, *WRITE),
            summary="Erase a topic, a field, or what one source said (destructive; a receipt)")
    async def erase(body: s.EraseRequest) -> Any:
        return await call("erase", ops.erase, body)

    @r.post("/retract", response_model=s.RetractResult, responses=errors(404, *WRITE),
            summary="Retract a field's current value as wrong (kept in its history)")
    async def retract(body: s.RetractRequest) -> Any:
        return await call("retract", ops.retract, body)

    @r.post("/maintain", response_model=s.MaintainResult, responses=errors(*WRITE),
            summary="Forget, then revise; dry_run reports without changing anything")
    async def maintain(body: s.MaintainRequest) -> Any:
        return await call("maintain", ops.maintain, body.dry_run, body.actor)

    @r.get("/review", response_model=s.ReviewResult, responses=errors(*READ), summary="Open revision flags")
    async def review() -> Any:
        return await call("review", ops.review)

    @r.get("/audit", response_model=s.AuditResult, responses=errors(*PARAMS), summary="C1-C6 and the log's hash chain")
    async def audit(full: bool = False) -> Any:
        """What changed since the last clean audit; everything with `full=true`."""
        return await call("audit", ops.audit, full)

    @r.get("/stats", response_model=s.StatsResult, responses=errors(*READ), summary="Sizes of the state")
    async def stats() -> Any:
        return await call("stats", ops.stats)

    @r.get("/log", response_model=s.LogPage, responses=errors(*PARAMS), summary="The transition log, oldest first")
    async def transition_log(since: int = Query(0, ge=0), limit: int = Query(100, ge=1, le=1000)) -> Any:
        return await call("log", ops.log, since, limit)

    @r.get("/policies", response_model=s.PoliciesResult, responses=errors(*READ), summary="The policies in force")
    async def policies() -> Any:
        return await call("policies", ops.policies)

    @r.get("/status", response_model=s.StatusResult, responses=errors(*READ),
           summary="Stats, audit summary, policies and maintenance")
    async def status() -> Any:
        return await service.status()

    @r.get("/attach", include_in_schema=False)
    async def attach(request: Request) -> StreamingResponse:
        """Held open by each `gem mcp` bridge: an auto-started server stays up while one is."""
        return StreamingResponse(_attached(service), media_type="text/plain")

    return r


async def _attached(service: Service) -> AsyncIterator[bytes]:
    service.attached += 1
    try:
        while not service.stopping.is_set():
            yield b"ok\n"
            try:
                await asyncio.wait_for(service.stopping.wait(), timeout=5.0)
            except asyncio.TimeoutError:
                pass
        yield b"stopping\n"
    finally:
        service.attached -= 1
        service.last_activity = time.monotonic()


class BodyLimit:
    """Refuses request bodies over `limit` bytes with 413, before the app reads them
    (declared Content-Length, or counted while reading a chunked body)."""

    def __init__(self, app: Any, limit: int) -> None:
        self.app = app
        self.limit = limit

    async def __call__(self, scope: dict, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        declared = dict(scope.get("headers") or []).get(b"content-length")
        if declared is not None and declared.isdigit() and int(declared) > self.limit:
            return await self._refuse(scope, receive, send)
        if scope["method"] not in ("POST", "PUT", "PATCH"):
            return await self.app(scope, receive, send)
        chunks, size = [], 0
        while True:
            message = await receive()
            if message["type"] != "http.request":
                return  # the client went away
            chunk = message.get("body", b"")
            size += len(chunk)
            if size > self.limit:
                return await self._refuse(scope, receive, send)
            chunks.append(chunk)
            if not message.get("more_body"):
                break
        replayed = False

        async def replay() -> dict:
            nonlocal replayed
            if not replayed:
                replayed = True
                return {"type": "http.request", "body": b"".join(chunks), "more_body": False}
            return await receive()
        await self.app(scope, replay, send)

    async def _refuse(self, scope: dict, receive: Any, send: Any) -> None:
        body = s.ErrorBody(error="payload_too_large",
                           message=f"request body over {self.limit} bytes")
        await _error(413, body, {"Connection": "close"})(scope, receive, send)


class HeadAsGet:
    """HEAD is GET without the body, on every route that takes GET (FastAPI routes take only
    the methods they declare); its headers, Content-Length included, are GET's."""

    def __init__(self, app: Any) -> None:
        self.app = app

    async def __call__(self, scope: dict, receive: Any, send: Any) -> None:
        if scope["type"] != "http" or scope["method"] != "HEAD":
            return await self.app(scope, receive, send)

        async def headers_only(message: dict) -> None:
            if message["type"] == "http.response.body":
                message = {**message, "body": b""}
            await send(message)
        await self.app({**scope, "method": "GET"}, receive, headers_only)


class AccessLog:
    """One INFO record per request under the `gem.server` logger."""

    def __init__(self, app: Any, service: Service) -> None:
        self.app = app
        self.service = service

    async def __call__(self, scope: dict, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        start = time.perf_counter()
        status = 0

        async def sent(message: dict) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
            await send(message)
        self.service.last_activity = time.monotonic()
        try:
            await self.app(scope, receive, sent)
        finally:
            log.info("%s %s %s %.1f ms", scope["method"], scope["path"], status,
                     (time.perf_counter() - start) * 1000)


def build_app(service: Service, *, lifespan: Any = None, mcp_routes: list | None = None) -> Any:
    """The ASGI app: /v1 (JSON API), /docs (OpenAPI), /mcp (MCP, when routes are given), and
    the dashboard's pages at / (gem/server/dashboard.py)."""
    # docs_url=None: FastAPI's /docs loads Swagger UI from a CDN (blank offline); ours below
    # is rendered on the server from the same schema.
    app = FastAPI(title="gem", version=__version__, lifespan=lifespan, docs_url=None,
                  redoc_url=None, description="Governed Evolving Memory: the JSON API of `gem serve`. "
                              "Topics are named by title; MCP is served at /mcp.")
    app.include_router(build_router(service))
    app.include_router(build_dashboard(service))  # the read-only pages at /
    for kind, *_ in ERRORS:
        app.add_exception_handler(kind, _gem_error)
    app.add_exception_handler(RequestValidationError, _validation_error)
    app.add_exception_handler(HTTPException, _http_error)

    @app.get("/docs", include_in_schema=False)
    async def docs() -> HTMLResponse:
        return HTMLResponse(api_docs(app.openapi()), headers=HEADERS)
    for route in mcp_routes or ():
        app.router.routes.append(route)
    guarded: Any = BodyLimit(app, service.config.max_body)
    if service.config.keys is not None:  # before the body is read: no key, no work
        guarded = KeyAuth(guarded, service.config.keys)
    return AccessLog(HeadAsGet(guarded), service)


__all__ = ["build_app", "build_router", "ERRORS", "BodyLimit", "HeadAsGet", "errors"]
