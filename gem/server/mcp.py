"""gem's MCP server (the official SDK's MCPServer): tools and resources for a model.

Tool names, descriptions and schemas are written for the model that calls them; every
result names topics by title. Served over streamable HTTP at /mcp by `gem serve`, and
over stdio by `gem mcp` (a bridge to that server).
"""
from __future__ import annotations

import functools
import json
from datetime import datetime
from typing import Annotated, Any, Awaitable, Callable, Literal

from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ResourceError, ToolError
from mcp.types import CallToolResult, TextContent, ToolAnnotations
from pydantic import Field

from .. import __version__
from ..api import ops, prompt
from ..api import schemas as s
from ..errors import GemError, InvalidInput
from .keys import request_scope, scope_of_request
from .service import Service

INSTRUCTIONS = """\
gem is a long-term memory with governance. Store what you learn with memory_remember
(one fact = topic + field + value, with its source; episodes keep what was said verbatim);
read with memory_recall (a free-text query or a topic title, optionally a time window). Every value keeps its history and provenance: a newer value
supersedes an older one, and topics that depend on a changed topic get flagged for review
(memory_review). Recalling reinforces what it returns; things never recalled fade
(memory_maintain) but can always be restored (memory_restore). Refer to topics by title."""


# The `use_memory` prompt: how a model should work with this memory, for clients that let a
# user start a conversation from a server's prompt.
USE_MEMORY = """\
You have a long-term memory (the gem MCP server). Use it like this:

- Recall before you answer anything that may depend on what you were told before
  (memory_recall with a query in words, or a topic's title). Trust current values; say so
  when a value is contested (give the candidates), when a topic needs review (something it
  depends on changed), and when a value was retracted.
- Remember as you learn (memory_remember). A fact is a topic + field + value with its source
  and, if known, when it became true: 'Website Redesign' / 'deadline' / 'April 20'. Keep what
  someone said that is not a clean fact (a request, an opinion, a plan) as an episode,
  verbatim, with the speaker and time. A newer value supersedes the old one, which stays in
  the history: do not delete to update.
- When a user says a value was wrong and gives no replacement, retract it (memory_retract,
  with the reason). When a user asks you to forget something, erase it (memory_forget: a
  topic, one field, or what one source said); it cannot be undone, so erase only on request.
- Link topics that depend on each other (memory_link) so a change flags the dependents; look
  at memory_review now and then and fix what it lists.
- Refer to topics by title, never by the ids that appear alongside in *_ids fields."""


def _granted(ctx: Context | None) -> str | None:
    """The scope the API key of this MCP request grants (None: the server has no keys). The
    SDK runs tools outside the HTTP request's context, so it is read from the request the
    SDK hands the tool."""
    try:
        request = ctx.request_context.request if ctx is not None else None
    except ValueError:  # no request: an in-process session
        return None
    return scope_of_request(request) if request is not None else None


def _tool(fn: Callable[..., Awaitable[Any]]) -> Callable[..., Awaitable[Any]]:
    """A tool as registered: its calls run in the scope its request's key grants
    (`request_scope`, which `Service.call` reads), and gem's typed errors become tool errors
    the model reads (is_error results). The SDK injects `ctx` (annotated Context) and leaves
    it out of the tool's input schema."""
    @functools.wraps(fn)
    async def run(*args: Any, ctx: Context | None = None, **kwargs: Any) -> Any:
        token = request_scope.set(_granted(ctx))
        try:
            return await fn(*args, **kwargs)
        except GemError as exc:
            raise ToolError(str(exc)) from exc
        finally:
            request_scope.reset(token)
    run.__annotations__ = {**fn.__annotations__, "ctx": "Context | None"}
    return run


def build_mcp(service: Service) -> MCPServer:
    call = service.call

    async def memory_remember(
        facts: Annotated[list[s.FactIn] | None, Field(description="The facts to store.")] = None,
        episodes: Annotated[list[s.EpisodeIn] | None, Field(description=(
            "Things said or observed, kept verbatim (e.g. a user's message), searchable "
            "next to facts."))] = None,
    ) -> s.RememberResult:
        """Store facts and episodes in long-term memory, as one atomic step. Each fact says
        that a topic's field has a value (e.g. topic 'Website Redesign', field 'deadline',
        value 'April 20'), with its source. Restating a known value corroborates it instead
        of duplicating it; a new value supersedes the old one, which stays in the history.
        Returns, by title, the topics touched, the values recorded and the topics now flagged
        for review (ids alongside in the *_ids fields are for tools, not for you)."""
        if not facts and not episodes:
            raise InvalidInput("give at least one fact or episode")
        return await call("remember", ops.remember, facts or [], "mcp", episodes or [])

    async def memory_recall(
        query: Annotated[str | None, Field(description="What you want to know, in words.")] = None,
        topic: Annotated[str | None, Field(description="A topic title to read directly.")] = None,
        fields: Annotated[list[str] | Literal["all"] | None, Field(description=(
            "These fields of each topic returned, or 'all' its visible fields; default: "
            "the fields the query matched."))] = None,
        as_of: Annotated[datetime | None, Field(description="Answer as of this time.")] = None,
        between: Annotated[tuple[datetime, datetime] | None, Field(description=(
            "[start, end]: only values and episodes whose time lies in this window."))] = None,
        near: Annotated[tuple[float, float, float] | None, Field(description=(
            "[lat, lon, km]: only values and episodes stated within km of this point; "
            "without a query, those nearest first."))] = None,
        k: Annotated[int, Field(ge=1, le=50, description=(
            "At most this many results (fields and episodes)."))] = 5,
        include_history: Annotated[bool, Field(description="Add each field's history.")] = False,
        format: Annotated[Literal["json", "text"], Field(description=(
            "'text': the answer's text is a compact block to read (titles, values with their "
            "dates and sources, marks for contested/retracted/stale/recalled), cut to "
            "max_tokens by rank."))] = "json",
        max_tokens: Annotated[int, Field(ge=16, description=(
            "The budget of format 'text', tokens counted as characters / 4."))] = 800,
    ) -> Annotated[CallToolResult, s.RecallResult]:
        """Recall from memory by free-text query and/or topic title, or by place (near).
        Returns current
        values with their source and time, fields that are contested (with every
        candidate), names of fields faded from view (ask for them by name), and flags
        saying a topic needs review. Recalling reinforces what it returns."""
        request = s.RetrieveRequest(query=query, topic=topic, fields=fields, as_of=as_of,
                                    between=between, near=near, k=k,
                                    history=include_history, include_archived=False,
                                    actor="mcp", format=format, max_tokens=max_tokens)
        result = await call("recall", ops.recall, request)
        structured = result.model_dump(mode="json")
        text = prompt.render(result, max_tokens) if format == "text" else \
            json.dumps(structured, indent=2, ensure_ascii=False)
        return CallToolResult(content=[TextContent(type="text", text=text)],
                              structured_content=structured)

    async def memory_inspect(
        topic: Annotated[str, Field(description="The topic's title.")],
        field: Annotated[str | None, Field(description="One field of it.")] = None,
    ) -> s.TopicCard:
        """Look at a topic (or one field) as stored, including faded fields and open
        review flags, without reinforcing anything."""
        return await call("inspect", ops.inspect, topic, field)

    async def memory_history(
        topic: Annotated[str, Field(description="The topic's title.")],
        field: Annotated[str, Field(description="The field.")],
    ) -> s.HistoryResult:
        """Every value a field ever had, oldest first: current, superseded and retracted,
        each with its source, valid time and when it was recorded."""
        return await call("history", ops.history, topic, field)

    async def memory_explain(
        topic: Annotated[str, Field(description="The topic's title.")],
        field: Annotated[str, Field(description="The field.")],
    ) -> s.ExplainResult:
        """Why a field has its current value: the evidence behind it and its reliability
        R in [-1, 1] (how strongly sources agree, recent evidence counting more)."""
        return await call("explain", ops.explain, topic, field)

    async def memory_link(
        from_topic: Annotated[str, Field(description="Title of the topic the link starts from.")],
        to_topic: Annotated[str, Field(description="Title of the topic it points to.")],
        kind: Annotated[Literal["extension", "association"], Field(description=(
            "'extension': to_topic depends on from_topic, so a change to from_topic flags "
            "to_topic for review; 'association': merely related."))] = "extension",
    ) -> s.LinkResult:
        """Link two existing topics."""
        request = s.LinkRequest(from_topic=from_topic, to_topic=to_topic, kind=kind, actor="mcp")
        return await call("link", ops.link, request)

    async def memory_restore(
        topic: Annotated[str, Field(description="The topic's title.")],
        field: Annotated[str | None, Field(description="Only this field.")] = None,
    ) -> s.RestoreResult:
        """Bring back a topic (or field) that faded: compressed, hidden or archived."""
        request = s.RestoreRequest(topic=topic, field=field, actor="mcp")
        return await call("restore", ops.restore, request)

    async def memory_forget(
        topic: Annotated[str, Field(description="The topic's title.")],
        reason: Annotated[str, Field(description=(
            "Why it is erased (kept; never put the erased content in it)."))],
        field: Annotated[str | None, Field(description="Only this field of it.")] = None,
        source: Annotated[str | None, Field(description=(
            "Only what this source said (in the topic, or in the field)."))] = None,
    ) -> s.EraseResult:
        """Erase for good, on request (e.g. a user asks you to forget something): a topic,
        one field of it, or what one source said. Unlike fading this cannot be undone: the
        values, their history and the episodes that said them are destroyed. For a value
        that was merely wrong use memory_retract. Returns the erasure receipt."""
        request = s.EraseRequest(topic=topic, field=field, source=source, reason=reason,
                                 actor="mcp")
        return await call("erase", ops.erase, request)

    async def memory_retract(
        topic: Annotated[str, Field(description="The topic's title.")],
        field: Annotated[str, Field(description="The field whose current value was wrong.")],
        reason: Annotated[str, Field(description="Why it was wrong.")],
        source: Annotated[str, Field(description="Who says it was wrong.")] = "agent",
    ) -> s.RetractResult:
        """Say a field's current value was wrong, with no replacement: the field then has no
        value (the wrong one stays in its history as retracted) and dependent topics get
        flagged for review. To correct a value, remember the right one instead."""
        request = s.RetractRequest(topic=topic, field=field, reason=reason, source=source,
                                   actor="mcp")
        return await call("retract", ops.retract, request)

    async def memory_review() -> s.ReviewResult:
        """Topics flagged for review because something they depend on changed, with
        what changed. Recall them, then store corrected facts if needed."""
        return await call("review", ops.review)

    async def memory_maintain(
        dry_run: Annotated[bool, Field(description="Only report what would happen "
                                             "(default false: maintain for real).")] = False,
    ) -> s.MaintainResult:
        """Run maintenance: fade what has not been used (compress, hide, archive; all
        restorable), merge duplicate topics, settle conflicts, re-check review flags.
        By default it runs for real; with dry_run=true nothing changes: you get what it
        would do."""
        return await call("maintain", ops.maintain, dry_run, "mcp")

    async def memory_status() -> s.StatusResult:
        """Sizes of the memory, whether its correctness audit passes, the policies in
        force and the maintenance schedule."""
        return await service.status()

    # The tool list, in one place: (function, title, read_only, destructive, idempotent).
    tools: list[tuple[Callable[..., Awaitable[Any]], str, bool, bool, bool]] = [
        (memory_remember, "Remember facts", False, False, False),
        (memory_recall, "Recall from memory", False, False, False),
        (memory_inspect, "Inspect a topic", True, False, True),
        (memory_history, "History of a field", True, False, True),
        (memory_explain, "Explain a value", True, False, True),
        (memory_link, "Link two topics", False, False, True),
        (memory_restore, "Restore faded memory", False, False, True),
        (memory_forget, "Erase from memory", False, True, False),
        (memory_retract, "Retract a wrong value", False, False, True),
        (memory_review, "Topics needing review", True, False, True),
        (memory_maintain, "Maintain memory", False, False, False),
        (memory_status, "Memory status", True, False, True),
    ]
    server: MCPServer = MCPServer("gem", title="gem memory", version=__version__,
                                  instructions=INSTRUCTIONS, log_level="WARNING")
    for fn, title, read_only, destructive, idempotent in tools:
        server.add_tool(_tool(fn), name=fn.__name__, title=title,
                        annotations=ToolAnnotations(read_only_hint=read_only,
                                                    destructive_hint=destructive,
                                                    idempotent_hint=idempotent,
                                                    open_world_hint=False),
                        structured_output=True)

    @server.prompt(name="use_memory", title="Use gem's memory",
                   description="How to use this memory: when to remember facts or episodes, "
                               "recall before answering, retract or forget on request.")
    def use_memory() -> str:
        return USE_MEMORY

    # Resources, in one place.
    @server.resource("gem://policies", name="policies", title="Policies in force",
                     mime_type="text/plain",
                     description="The policy sources governing this memory (gem's policy language).")
    async def policy_sources() -> str:
        try:
            result = await call("policies", ops.policies)
        except GemError as exc:
            raise ResourceError(str(exc)) from exc
        return "\n".join(f"# --- {src.file}\n{src.text}" for src in result.sources)

    # A template (its `limit` is optional), because only templates get the request's context,
    # and the log a caller may read is its own scope's.
    @server.resource("gem://log{?limit}", name="log", title="Transition log",
                     mime_type="application/json",
                     description="The latest transitions (100 unless ?limit=N, at most 1000): "
                                 "operation, time, actor, topics touched and the policies that "
                                 "fired.")
    async def transition_log(ctx: Context, limit: str = "100") -> str:
        try:
            if not limit.isdigit() or not 1 <= int(limit) <= 1000:
                raise InvalidInput(f"limit must be a number from 1 to 1000, got {limit!r}")
            page = await service.call("log", ops.recent_log, int(limit), scope=_granted(ctx))
        except GemError as exc:
            raise ResourceError(str(exc)) from exc
        return json.dumps(page.model_dump(mode="json")["records"], indent=1)

    return server
