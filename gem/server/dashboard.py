"""The dashboard's routes under `/`: each renders one page of gem.dashboard.pages on the
memory's worker (like every API call), and answers HTML with a policy that forbids scripts.

    /                 overview: topics, ladder counts, flags, audit, last transitions
    /topic?topic=     a topic (topic= its title or alias, or id= its id, as links give it):
                      fields, values, provenance, timelines, evidence, salience
    /graph?topic=&depth=   its neighbourhood through typed edges (or id=)
    /log?topic=&before=    the transition log, newest first (or id=)
    /episodes?text=&status=&offset=   episodes, newest first
    /policies         the policy set in force and its trigger graph
    /audit?full=      C1-C6 and the hash chain
    /reports, /reports/NAME   benchmark reports (HTML files in --reports DIR)

Every page but the reports takes `scope=NAME` and then shows that scope only (the header
offers the scopes there are).
"""
from __future__ import annotations

from pathlib import Path
from typing import Any, Callable

from fastapi import APIRouter, Request
from fastapi.responses import FileResponse, HTMLResponse

from ..dashboard import pages
from ..dashboard.html import CSP, viewing
from ..derived import DEFAULT_SCOPE
from ..errors import GemError, InvalidInput, StoreLocked, UnknownUnit
from ..units import TopicId
from .keys import ALL_SCOPES, scope_of_request
from .service import NotReady, Service

HEADERS = {"Content-Security-Policy": CSP, "X-Content-Type-Options": "nosniff",
           "Cache-Control": "no-store"}


def _html(body: str, status: int = 200) -> HTMLResponse:
    return HTMLResponse(body, status_code=status, headers=HEADERS)


def _text(q: Any, name: str) -> str:
    value = (q.get(name) or "").strip()
    if not value:
        raise InvalidInput(f"give {name}=")
    return value


def _topic(q: Any) -> str:
    """The topic a page is about: `id=` names it by id (what the pages' links carry), `topic=`
    by title or alias. Never both in one namespace: a topic may be titled like an id."""
    tid = (q.get("id") or "").strip()
    return TopicId(tid) if tid else _text(q, "topic")


def _given(q: Any, *names: str) -> bool:
    return any((q.get(name) or "").strip() for name in names)


def _int(q: Any, name: str, default: int | None, least: int,
         most: int | None = None) -> Any:
    raw = q.get(name)
    if raw in (None, ""):
        return default
    try:
        value = int(raw)
    except ValueError:
        raise InvalidInput(f"{name} must be an integer, got {raw!r}") from None
    if value < least or (most is not None and value > most):
        bounds = f"from {least} to {most}" if most is not None else f"at least {least}"
        raise InvalidInput(f"{name} must be {bounds}, got {value}")
    return value


def _flag(raw: str | None) -> bool:
    return (raw or "").lower() in ("1", "true", "yes", "on")


def build_dashboard(service: Service) -> APIRouter:
    r = APIRouter(include_in_schema=False)
    where = " · ".join(filter(None, (service.shown_name, service.config.engine)))

    async def render(fn: Callable[[Any], str], request: Request | None = None) -> HTMLResponse:
        """`fn(memory)` on the memory's worker (it reads the query and builds the page); with
        `?scope=NAME`, `fn` gets that scope's view and every link on the page stays in it. A
        key for one scope (gem/server/keys.py) sees that scope only: any other is not found."""
        asked = (request.query_params.get("scope") or "").strip() if request else ""
        granted = scope_of_request(request) if request else None
        confined = granted not in (None, ALL_SCOPES)
        if confined and asked and asked != granted:
            return _html(pages.error("Not found", f"no scope named {asked!r}", where), 404)
        scope = granted if confined else asked

        def in_scope(mem: Any) -> str:
            view = mem.scope(scope) if scope and (confined or scope != DEFAULT_SCOPE) else mem
            offered: list[str] = [scope] if confined and scope else mem.scopes()
            with viewing(scope if view is not mem else None, offered, where):
                return fn(view)

        try:
            return _html(await service.call("dashboard", in_scope, scope=None))
        except UnknownUnit as exc:
            return _html(pages.error("Not found", str(exc), where), 404)
        except InvalidInput as exc:
            return _html(pages.error("Bad request", str(exc), where), 422)
        except (StoreLocked, NotReady) as exc:
            response = _html(pages.error("Not ready", str(exc), where), 503)
            response.headers["Retry-After"] = "1"
            return response
        except GemError as exc:
            return _html(pages.error("Error", str(exc), where), 500)

    # Query parameters are read by the page function, not declared to FastAPI: a bad one is a
    # page saying what is wrong (422), not the JSON API's validation error.
    @r.get("/")
    async def overview(request: Request) -> HTMLResponse:
        q = request.query_params
        return await render(lambda mem: pages.overview(mem, pages.OverviewQuery(
            text=q.get("text") or None, status=q.get("status") or None,
            flagged=_flag(q.get("flagged")), order=q.get("order") or "salience",
            offset=_int(q, "offset", 0, 0))), request)

    @r.get("/topic")
    async def topic(request: Request) -> HTMLResponse:
        q = request.query_params
        return await render(lambda mem: pages.topic(mem, _topic(q)), request)

    @r.get("/graph")
    async def graph(request: Request) -> HTMLResponse:
        q = request.query_params
        return await render(lambda mem: pages.graph(mem, _topic(q),
                                                    _int(q, "depth", 2, 1, 4)), request)

    @r.get("/log")
    async def transition_log(request: Request) -> HTMLResponse:
        q = request.query_params
        return await render(lambda mem: pages.log(mem, _topic(q) if _given(q, "id", "topic") else None,
                                                  _int(q, "before", None, 1)), request)

    @r.get("/episodes")
    async def episodes(request: Request) -> HTMLResponse:
        q = request.query_params
        return await render(lambda mem: pages.episodes(
            mem, (q.get("text") or "").strip() or None, q.get("status") or None,
            _int(q, "offset", 0, 0)), request)

    @r.get("/policies")
    async def policies(request: Request) -> HTMLResponse:
        return await render(pages.policies, request)

    @r.get("/audit")
    async def audit(request: Request) -> HTMLResponse:
        q = request.query_params
        return await render(lambda mem: pages.audit(mem, _flag(q.get("full"))), request)

    @r.get("/reports")
    async def reports() -> HTMLResponse:
        return _html(pages.reports(service.config.reports, where))

    @r.get("/reports/{name}")
    async def report(name: str) -> Any:
        found = {p.name: p for p in pages.report_files(service.config.reports)}
        if name not in found:  # only files listed: no path ever leaves the directory
            return _html(pages.error("Not found", f"no report named {name!r}", where), 404)
        return FileResponse(Path(found[name]), media_type="text/html", headers=HEADERS)

    @r.get("/favicon.ico")
    async def favicon() -> HTMLResponse:  # browsers ask; "nothing" beats a 404 in their console
        return HTMLResponse("", status_code=204)

    return r


__all__ = ["build_dashboard"]
