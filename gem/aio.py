"""`gem.AsyncMemory`: the `Memory` API for asyncio, on one worker thread.

Every call runs on a single worker thread owned by the AsyncMemory, in the order the
calls were made, so the event loop never blocks on the engine and the engine only ever
sees one thread (the embedded engines serialise writers anyway: more threads would
only queue on the store lock). Cancelling an awaiting task does not interrupt a call
already running on the worker: a transition is never cut in half.

    async with await gem.AsyncMemory.open("agent.db") as mem:
        await mem.ingest(gem.Fact("Website Redesign", "deadline", "April 20"))
        r = await mem.retrieve("deadline of the website redesign")
"""
from __future__ import annotations

import asyncio
import functools
import inspect
import logging
from concurrent.futures import ThreadPoolExecutor
from datetime import timedelta
from typing import Any, Callable, TypeVar

from .errors import GemError, InvalidInput
from .memory import Memory
from .memory import open as open_memory
from .policy import PolicySet

log = logging.getLogger("gem.aio")
T = TypeVar("T")

# The Memory methods AsyncMemory offers as coroutines, with Memory's own signatures and
# docs. tests/test_aio.py checks that every public Memory method is either here or in
# _NOT_DELEGATED, so a method added to Memory cannot be forgotten.
DELEGATED = ("ingest", "retrieve", "link", "forget", "revise", "maintain", "restore",
             "inspect", "history", "explain", "stats", "transitions", "audit", "load_policies",
             "retract", "pending_revisions",
             "scopes", "head", "erase", "erase_all", "verify_erasure", "compact", "export",
             "copy_database",
             "topics", "episodes", "titles", "episode_labels", "graph", "salience_history",
             "recent_transitions")
# Lifecycle, scheduling and views, written out below: they manage the worker itself.
_NOT_DELEGATED = ("close", "start_maintenance", "stop_maintenance", "scope")


def _delegate(name: str) -> Callable[..., Any]:
    method = getattr(Memory, name)

    @functools.wraps(method)
    async def call(self: "AsyncMemory", *args: Any, **kwargs: Any) -> Any:
        return await self._submit(getattr(self._memory, name), *args, **kwargs)

    call.__signature__ = inspect.signature(method)  # type: ignore[attr-defined]
    return call


class AsyncMemory:
    """A `Memory` whose methods are awaitable. Make one with `await AsyncMemory.open(...)`
    (the open itself runs on the worker) or wrap an open Memory: `AsyncMemory(mem)`;
    then use that Memory only through the wrapper."""

    def __init__(self, memory: Memory, *, _executor: ThreadPoolExecutor | None = None) -> None:
        self._memory = memory
        self._executor = _executor or ThreadPoolExecutor(max_workers=1, thread_name_prefix="gem-worker")
        self._closed = False
        self._maintenance: asyncio.Task[None] | None = None
        self._view = False
        self.maintenance_runs = 0      # scheduled maintenance runs that committed
        self.maintenance_failures = 0  # and those that were rolled back (retried next interval)

    @classmethod
    async def open(cls, *args: Any, **kwargs: Any) -> "AsyncMemory":
        """`gem.open(...)` on the worker thread (opening rebuilds indexes: it can take a while)."""
        executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="gem-worker")
        loop = asyncio.get_running_loop()
        try:
            memory = await loop.run_in_executor(executor, functools.partial(open_memory, *args, **kwargs))
        except BaseException:
            executor.shutdown(wait=False)
            raise
        return cls(memory, _executor=executor)

    async def _submit(self, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        if self._closed:
            raise GemError("this memory is closed")
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._executor, functools.partial(fn, *args, **kwargs))

    async def run(self, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        """Run `fn(memory, *args, **kwargs)` on the worker thread, in turn with every other
        call: for a sequence of reads that must not interleave with other calls."""
        return await self._submit(fn, self._memory, *args, **kwargs)

    # ------------------------------------------------------------------ the Memory API
    ingest = _delegate("ingest")
    retrieve = _delegate("retrieve")
    link = _delegate("link")
    forget = _delegate("forget")
    revise = _delegate("revise")
    maintain = _delegate("maintain")
    restore = _delegate("restore")
    inspect = _delegate("inspect")
    history = _delegate("history")
    explain = _delegate("explain")
    stats = _delegate("stats")
    transitions = _delegate("transitions")
    audit = _delegate("audit")
    load_policies = _delegate("load_policies")
    retract = _delegate("retract")
    pending_revisions = _delegate("pending_revisions")
    topics = _delegate("topics")
    episodes = _delegate("episodes")
    titles = _delegate("titles")
    episode_labels = _delegate("episode_labels")
    graph = _delegate("graph")
    salience_history = _delegate("salience_history")
    recent_transitions = _delegate("recent_transitions")
    scopes = _delegate("scopes")
    head = _delegate("head")
    erase = _delegate("erase")
    erase_all = _delegate("erase_all")
    verify_erasure = _delegate("verify_erasure")
    compact = _delegate("compact")
    export = _delegate("export")
    copy_database = _delegate("copy_database")

    def scope(self, name: str) -> "AsyncMemory":
        """A view confined to scope `name` (see `Memory.scope`), on this same worker thread."""
        view = AsyncMemory(self._memory.scope(name), _executor=self._executor)
        view._view = True
        return view

    @property
    def memory(self) -> Memory:
        """The wrapped Memory. Calling it directly bypasses the worker thread."""
        return self._memory

    @property
    def path(self) -> str:
        return self._memory.path

    @property
    def engine_name(self) -> str:
        return self._memory.engine_name

    @property
    def policies(self) -> PolicySet:
        return self._memory.policies

    # ------------------------------------------------------------------ maintenance
    def start_maintenance(self, every: float | timedelta = 3600.0) -> None:
        """Run `maintain` every `every` seconds as a task of the running loop, on the same
        worker thread as every other call (Memory.start_maintenance uses a thread of its
        own instead). A failing run is logged and retried at the next interval."""
        if not isinstance(every, (int, float, timedelta)) or isinstance(every, bool):
            raise InvalidInput(f"every must be seconds or a timedelta, got {type(every).__name__}")
        seconds = every.total_seconds() if isinstance(every, timedelta) else float(every)
        if not seconds > 0:
            raise InvalidInput("every must be a positive number of seconds")
        if self._closed:
            raise GemError("this memory is closed")
        if self._maintenance is not None:
            raise GemError("maintenance is already running; stop it first")
        self._maintenance = asyncio.get_running_loop().create_task(self._maintenance_loop(seconds))

    async def _maintenance_loop(self, seconds: float) -> None:
        while True:
            try:
                await self.maintain()
                self.maintenance_runs += 1
            except GemError:
                self.maintenance_failures += 1
                log.exception("gem maintenance run failed; it was rolled back and will be retried")
            await asyncio.sleep(seconds)

    async def stop_maintenance(self) -> None:
        """Stop scheduled maintenance; a run already on the worker finishes first."""
        task, self._maintenance = self._maintenance, None
        if task is not None:
            task.cancel()
            try:
                await task
            except asyncio.CancelledError:
                pass
            # A run the cancelled task was awaiting is still on the worker: wait for it.
            await self._submit(lambda: None)

    @property
    def maintenance_running(self) -> bool:
        return self._maintenance is not None

    # ------------------------------------------------------------------ lifecycle
    async def close(self) -> None:
        """Close after every call already submitted has finished."""
        if self._closed:
            return
        await self.stop_maintenance()
        self._closed = True
        if self._view:  # a scope view shares its memory's worker: ending it ends only the view
            self._memory.close()
            return
        loop = asyncio.get_running_loop()
        try:
            await loop.run_in_executor(self._executor, self._memory.close)
        finally:
            self._executor.shutdown(wait=True)

    async def __aenter__(self) -> "AsyncMemory":
        return self

    async def __aexit__(self, *exc: Any) -> None:
        await self.close()
