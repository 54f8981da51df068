"""The public API (specs/design.md §7): `gem.open(...)` returns a `Memory`."""
from __future__ import annotations

import logging
from datetime import datetime, timedelta
from pathlib import Path
from typing import IO, Any, Callable, Iterable, Sequence, overload

from . import lifecycle, memory_admin, memory_ops, memory_reads, transfer, usage
from .arguments import SCOPE_NAME, text_arg
from .derived import DEFAULT_SCOPE, Progress, Summarizer
from .embed import Embedder
from .engine import Engine
from .errors import GemError, InvalidInput, TransitionRejected, UnknownUnit
from .lifecycle import ScopeEngines, engine_for, open_engine
from .memory_admin import install_policies
from .model import (AuditReport, Episode, EpisodePage, ErasureCheck, ErasureReceipt, Explanation,
                    Fact, FieldView, HistoryEntry, IngestResult, Neighbourhood, PendingRevision,
                    RetrieveResult, SalienceHistory, TopicPage, TopicView)
from .operators.common import field_named
from .operators.resolution import Directory
from .policy import PolicySet, load_sources
from .resolve import Resolver
from .runtime import available_actions
from .state.transition import Transition
from .transfer import TransferReport

log = logging.getLogger("gem")

# What an extractor is: called with each ingested episode (before the transition, so a slow
# model call holds no lock), it returns the facts found in it, which are ingested in the same
# transition, citing the episode (`ref`) and dated when it was said unless they say otherwise.
# One with `takes_context = True` is called as extractor(episode, gem.ExtractionContext).
Extractor = Callable[[Episode], Iterable[Fact]]
Reviser = Callable[[PendingRevision], "Iterable[Fact] | None"]


class Memory:
    """A governed evolving memory on one database. Use `gem.open(...)` to make one.

    A memory is confined to one scope (a tenant): `gem.open` gives scope "default", and
    `mem.scope(name)` a view of the same memory confined to another. Every unit belongs to
    one scope; salience, the forgetting ladder, the interaction count and C5, the lexical and
    vector indexes and title resolution are per scope, so nothing one scope does changes what
    another sees. Policies are global; the log and `audit()` cover every scope.
    """

    def __init__(self, engine: Engine, scope: str = DEFAULT_SCOPE,
                 root: "Memory | None" = None, engines: ScopeEngines | None = None) -> None:
        self._engine = engine
        self._scope = scope
        self._root = root  # the handle a scope view was made from (it owns the database)
        self._engines = engines or ScopeEngines(engine)
        self._closed = False
        self._scheduler = None
        self.maintenance_runs = 0      # scheduled maintenance runs that committed
        self.maintenance_failures = 0  # and those that were rolled back (to be retried)
        # Set when gem.open replaced the policies stored in the database: the load
        # transition's detail (hashes, policies enabled and disabled).
        self.policy_change: dict[str, Any] | None = None

    # ------------------------------------------------------------------ lifecycle
    @property
    def path(self) -> str:
        return self._engine.store.path

    @property
    def engine_name(self) -> str:
        return self._engine.store.engine

    @property
    def scope_name(self) -> str:
        return self._scope

    def scope(self, name: str) -> "Memory":
        """This memory confined to scope `name`: the whole API, on that scope's units only. A
        scope needs no creation: reading an empty one returns nothing, and its first write
        creates it. Closing a view closes nothing else."""
        if not isinstance(name, str) or not SCOPE_NAME.fullmatch(name):
            raise InvalidInput(f"scope names are 1-64 characters of a-z, 0-9, '_', '.', '-', "
                               f"starting with a letter or digit; got {name!r}")
        self._check_open()
        return Memory(self._engines.get(name), name, self._root or self, self._engines)

    def scopes(self) -> list[str]:
        """Every scope that holds something, in name order."""
        self._check_open()
        with self._engine.store.lock:
            return self._engines.scopes()

    def close(self) -> None:
        """Close this handle (waiting for a call running in another thread). Salience written
        behind is brought up to date in the database first, so the next open replays less.
        Closing a scope view only ends the view."""
        lifecycle.close(self)

    def __enter__(self) -> "Memory":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def _check_open(self) -> None:
        if self._closed or (self._root is not None and self._root._closed):
            raise GemError("this memory is closed")

    def _run(self, op: str, operator: Callable[[Transition], Any], **kw: Any) -> tuple[Any, Transition]:
        with usage.metered():  # the hooks' model calls: the log stage charges them (`llm`)
            return self._engine.run(op, operator, scope=self._scope, **kw)

    # ------------------------------------------------------------------ operators
    def ingest(self, facts: Fact | Episode | Iterable[Fact | Episode], *, actor: str = "api",
               progress: Progress | None = None) -> IngestResult:
        """Integrate facts and episodes (one, or a list mixing both), as one transition. The
        extractor given to `gem.open` is called with each episode first; the facts it returns
        are ingested in the same transition (numbered first in `IngestResult.dropped`). A fact
        dated after the transition's time is InvalidInput (nothing is written); a fact a policy
        `drop`s is left out and listed in `IngestResult.dropped`; a topic name that found a
        topic under another spelling is listed in `IngestResult.resolved`.
        `progress(step, done, total)` hears the pipeline's stages ("ingest: policies", ...),
        for batches big enough to wait on."""
        return memory_ops.ingest(self, facts, actor=actor, progress=progress)

    @property
    def extractor(self) -> Extractor | None:
        """What finds facts in ingested episodes (shared by every scope view of this memory)."""
        return self._engine.extractor

    @extractor.setter
    def extractor(self, extractor: Extractor | None) -> None:
        if extractor is not None and not callable(extractor):
            raise InvalidInput(f"extractor must be callable, got {type(extractor).__name__}")
        self._engine.extractor = extractor

    def retrieve(self, query: str | None = None, topic: str | None = None,
                 fields: Sequence[str] | str | None = None, as_of: datetime | None = None,
                 history: bool = False, include_archived: bool = False, k: int = 5,
                 *, between: tuple[datetime, datetime] | None = None,
                 near: tuple[float, float, float] | None = None,
                 actor: str = "api") -> RetrieveResult:
        """Read the memory. A transition: everything returned is reinforced (C6).

        A text `query` ranks units (fields and episodes): `k` of them are returned, fields
        grouped by topic (`fields="all"`: with every visible field of their topics; a list:
        with those fields too), episodes in `r.episodes`; `between=(start, end)` keeps units
        whose valid time lies in that window. Forgotten units a query matches strongly are
        recalled (and revived). `near=(lat, lon, km)` keeps units placed within km of the
        point; without a query it returns them nearest first (gem/operators/near.py).
        `topic=` looks a topic up by name; none of these gives the k most salient topics."""
        return memory_ops.retrieve(self, query, topic, fields, as_of, history, include_archived, k,
                                   between=between, near=near, actor=actor)

    def link(self, src: str, dst: str, kind: str = "extension", *, actor: str = "api") -> bool:
        """Add a typed edge: `extension` (a change on src may entail one on dst) or
        `association` (retrieval context only). Returns False if it already existed."""
        return memory_ops.link(self, src, dst, kind, actor=actor)

    def forget(self, *, actor: str = "maintenance",
               progress: Progress | None = None) -> dict[str, Any]:
        """A forgetting pass: the `tick` policies move faded units down the ladder.
        `progress(step, done, total)` hears the stages and, every 1000, the policy events.
        The report names units for readers (`attenuated`: titles, "Title / field", episodes as
        "speaker, time: excerpt"; `levels`: (name, level) per step) with the ids alongside
        (`attenuated_ids`, `level_ids`); it is plain JSON (json.dumps takes it)."""
        return memory_ops.forget(self, actor=actor, progress=progress)

    def revise(self, *, actor: str = "maintenance",
               progress: Progress | None = None) -> dict[str, Any]:
        """A revision pass; each repair (merge, conflicts, dependency repair) is its own
        transition, so one that is rejected does not undo the others.

        Dependency repair puts each topic with open revision flags to the `revised` policies
        and then to the reviser given to `gem.open`, whose facts are applied in the same
        transition. A flag is cleared only by what handled it: `flags_cleared` lists
        (topic, by) with by "reviser" or "policy:<name>"; `flags_open` lists the topics still
        flagged (see `pending_revisions`). Without a reviser and a `revised` policy, flags
        are left for the agent, and no transition is made for them. Topics are named by
        title, fields as "Title / field"; each list has its ids alongside under the key ending
        in `_ids` (`conflict_ids` for `conflicts`); the report is plain JSON.
        `progress(step, done, total)` hears each repair: "revise: merge" (done of the pairs
        found), "revise: conflicts", "revise: flags"."""
        return memory_ops.revise(self, actor=actor, progress=progress)

    def pending_revisions(self) -> list[PendingRevision]:
        """Topics with open revision flags, oldest flag first: each with its flags (origin,
        policy, evidence), its current values and those of the topics whose change flagged
        it. An administrative read: nothing is reinforced."""
        return memory_reads.pending_revisions(self)

    def retract(self, topic: str, field: str, reason: str, *, source: str = "api",
                actor: str = "api") -> bool:
        """Say that the field's current value was wrong, with no replacement: from now on the
        field has no current value (in retrieval, `as_of` now, `inspect` and `explain`), the
        retracted entry is kept in the history as retracted, with `reason`, and the topic's
        dependents are flagged like for any update. A later statement gives it a value again.
        Returns False when the field has no current value to retract."""
        return memory_ops.retract(self, topic, field, reason, source=source, actor=actor)

    @property
    def reviser(self) -> Reviser | None:
        """The callable `revise()` asks about flagged topics (gem.open(reviser=...))."""
        return self._engine.reviser

    def maintain(self, *, actor: str = "maintenance",
                 progress: Progress | None = None) -> dict[str, Any]:
        """One maintenance run: forget, then revise (`progress` as for those two)."""
        return {"forget": self.forget(actor=actor, progress=progress),
                "revise": self.revise(actor=actor, progress=progress)}

    def restore(self, topic: str, field: str | None = None, *, actor: str = "api") -> bool:
        """Reverse any forgetting level of a topic and of one of its fields, or, without
        `field`, of every field of it: a restored topic is back in default retrieval whole."""
        return memory_ops.restore(self, topic, field, actor=actor)

    # ------------------------------------------------------------------ erasure
    def erase(self, topic: str, field: str | None = None, *, source: str | None = None,
              reason: str, actor: str = "api") -> ErasureReceipt:
        """Erase, for privacy: a topic; one `field` of it; or, with `source`, what that source
        said in the topic (or in that field; a value another source stated too stays, as that
        source's statement). The one destructive operator (forgetting never
        destroys): one transition removes the values, observations, index entries, summaries
        and salience of what is erased, recomputes what remains, redacts the log records that
        touched the topic and writes a tombstone. The episodes that said what is erased go
        too: those its entries and observations cite, and with `source` the scope's episodes
        from that source. The erased names and values no surviving unit holds are redacted
        wherever they were copied (log records, flag evidence, the derived snapshot). The bytes
        leave the database files with `compact()`. Nothing to erase: UnknownUnit."""
        return memory_admin.erase(self, topic, field, source=source, reason=reason, actor=actor)

    def erase_all(self, reason: str, *, actor: str = "api") -> ErasureReceipt:
        """Erase every topic and episode of this memory's scope (a tenant leaving), as one
        transition."""
        return memory_admin.erase_all(self, reason, actor=actor)

    def verify_erasure(self, receipt: ErasureReceipt) -> ErasureCheck:
        """Check that what `receipt` says was erased is gone: its tombstone is in the log as
        given, no stored row, index entry, name or summary holds the erased units, the
        redacted records hold no content, and no stored or derived string (snapshot files
        included) holds an erased name or value that no surviving unit holds itself. A receipt
        that matches no erasure: InvalidInput."""
        return memory_admin.verify_erasure(self, receipt)

    def compact(self) -> dict[str, Any]:
        """Rewrite the live data into a fresh database and swap it in atomically, so what was
        erased leaves the files too (an engine keeps deleted values in its pages). Crash-safe:
        a kill at any point leaves the old or the new database. Only the one handle open on
        the path may compact; returns the bytes before and after."""
        return memory_admin.compact(self)

    def export(self, dest: str | Path | IO[str], progress: Progress | None = None) -> TransferReport:
        """Write the whole database (every scope, the log included) as JSON Lines to `dest`, a
        path or a text stream (gem/transfer.py). `gem.import_jsonl` loads it into an empty
        database, on either engine, with the same state. Changes no state; salience pending to
        be written behind is written first, so that the file carries it."""
        return memory_admin.export(self, dest, progress)

    def copy_database(self, dest: str | Path) -> None:
        """Copy the committed database (every scope) to `dest`, a path where no database is:
        a backup, or a scratch database to try something on (a dry-run maintain). Changes no
        state. A child process copies the files while no transition of this process runs:
        this process never opens a file of its own database (closing it would drop the
        engine's lock on it)."""
        memory_admin.copy_database(self, dest)

    def start_maintenance(self, every: float | timedelta = 3600.0) -> None:
        """Run `maintain` in the background every `every` seconds (APScheduler). Runs are
        serialised with client transitions by the store's write lock; a failing run is
        logged and retried at the next interval, never half-applied."""
        lifecycle.start_maintenance(self, every)

    def stop_maintenance(self) -> None:
        """Stop scheduled maintenance, waiting for a run in progress to finish."""
        lifecycle.stop_maintenance(self)

    # ------------------------------------------------------------------ administrative reads
    def _read(self, fn: Callable[[Transition], Any]) -> Any:
        """A side-effect-free read: no salience change, not an interaction, nothing logged."""
        self._check_open()
        return self._engine.read(fn, self._scope)

    def _topic_id(self, t: Transition, topic: str) -> str | None:
        """A topic named by title or alias (exactly, then by canonical key), or by id with a
        `gem.TopicId`: titles and ids never share a namespace."""
        text_arg(topic, "topic")
        return Directory.of(t).lookup(topic)

    @overload
    def inspect(self, topic: str, field: None = None) -> TopicView | None: ...

    @overload
    def inspect(self, topic: str, field: str) -> FieldView | None: ...

    def inspect(self, topic: str, field: str | None = None) -> TopicView | FieldView | None:
        """An administrative read: the topic's view (status, salience, fields, pending flags),
        or that field's view; None if unknown. No salience change, not an interaction."""
        return memory_reads.inspect(self, topic, field)

    def history(self, topic: str, field: str) -> list[HistoryEntry]:
        """The field's full value history, compressed and retracted entries included."""
        return memory_reads.history(self, topic, field)

    def explain(self, topic: str, field: str) -> Explanation:
        """The evidence chain behind a field's current value, with its reliability R."""
        return memory_reads.explain(self, topic, field)

    def _require_field(self, t: Transition, topic: str, field: str) -> str:
        tid = self._topic_id(t, topic)
        if tid is None:
            raise UnknownUnit(f"no topic named {topic!r}")
        fid = field_named(t, tid, text_arg(field, "field"))
        if fid is None:
            raise UnknownUnit(f"topic {topic!r} has no field {field!r}")
        return fid

    def stats(self) -> dict[str, Any]:
        """Sizes of the state: the active footprint (C5) and everything kept behind it."""
        return memory_reads.stats(self)

    def transitions(self, since: int = 0) -> list[dict[str, Any]]:
        """The transition log from `since` on: op, time, actor, units, policies fired, hashes
        (a scope view: only its own scope's records). Plain JSON (json.dumps takes it): `at`
        is ISO 8601 text with its offset. Units are named by id, as the log is hashed;
        `gem log` and GET /v1/log name them by title."""
        return memory_reads.transitions(self, since)

    def audit(self, *, full: bool = False, progress: Progress | None = None,
              expected_head: dict[str, Any] | None = None) -> AuditReport:
        """C1-C6, every stored row against the hash the log attests for it, and the hash chain:
        over what the transitions since the last clean audit touched, or over the whole state
        with `full=True` (and whenever this memory has no clean audit yet). `report.since` says
        which was done. `expected_head` is a `head()` kept outside the database: a log cut
        short of it or rewritten up to it fails the audit."""
        return memory_reads.audit(self, full=full, progress=progress, expected_head=expected_head)

    def head(self) -> dict[str, Any]:
        """The log's head ({"seq", "hash"}): keep it outside the database and pass it to
        `audit(expected_head=...)` later to detect truncation or a rewritten log."""
        self._check_open()
        with self._engine.store.lock:
            return {"seq": self._engine.derived.seq, "hash": self._engine.derived.hash}

    # -- views for people (the dashboard): side-effect free, like inspect
    def topics(self, *, status: str | None = None, flagged: bool = False, text: str | None = None,
               order: str = "salience", offset: int = 0, limit: int = 50) -> TopicPage:
        """A page of topics with status, salience now, fields per ladder level and open flags,
        and the totals of the state. `status` active|archived, `flagged`: only topics with open
        flags, `text`: a part of the title; `order` salience|title|recent|flags."""
        return memory_reads.topics(self, status=status, flagged=flagged, text=text, order=order,
                                   offset=offset, limit=limit)

    def episodes(self, *, text: str | None = None, status: str | None = None, offset: int = 0,
                 limit: int = 50) -> EpisodePage:
        """A page of this scope's episodes, newest first: `text` a part of what was said or of
        the speaker, `status` active|hidden. An administrative read: nothing is reinforced."""
        return memory_reads.episodes(self, text=text, status=status, offset=offset, limit=limit)

    def titles(self, topic_ids: Iterable[str]) -> dict[str, str]:
        """The titles of these topic ids (ids of no topic are left out), from the committed
        name directory: one dictionary lookup each."""
        return memory_reads.titles(self, topic_ids)

    def episode_labels(self, episode_ids: Iterable[str]) -> dict[str, str]:
        """These episodes as a reader knows them, "speaker, time: excerpt" (ids of no episode
        of this scope are left out). An administrative read: nothing is reinforced."""
        return memory_reads.episode_labels(self, episode_ids)

    def graph(self, topic: str, depth: int = 1, *, limit: int = 100) -> Neighbourhood:
        """The topics within `depth` EXTENDS / ASSOCIATES / DERIVED_FROM edges of `topic`
        (either direction, at most `limit` topics) and the typed edges between them."""
        return memory_reads.graph(self, topic, depth, limit=limit)

    def salience_history(self, topic: str) -> SalienceHistory:
        """Salience and ladder status over time of a topic and each of its fields, from the
        transition log (every record carries the salience it changed) and the stored rows."""
        return memory_reads.salience_history(self, topic)

    def recent_transitions(self, limit: int = 50, *, before: int | None = None,
                           topic: str | None = None, details: bool = True) -> list[dict[str, Any]]:
        """The newest log records (those numbered below `before`), newest first; with `topic`,
        only those that touched it or its fields. Records are as stored and hashed (what
        `gem.audit.verify_chain` checks): like `transitions`, plus the salience they changed,
        but the policy calls in runs: consecutive identical calls are one item with `n`, the
        number of calls (a forgetting pass makes thousands). `details=False` leaves out each
        record's policies, detail and salience (for a forgetting pass over a large memory,
        megabytes): seq, op, event, at, actor, units and the hashes only. Plain JSON, `at`
        as ISO 8601 text, as in `transitions`."""
        return memory_reads.recent_transitions(self, limit, before=before, topic=topic,
                                               details=details)

    # ------------------------------------------------------------------ policies
    @property
    def policies(self) -> PolicySet:
        policies = self._engine.policies
        assert policies is not None  # open() installs a set before it returns
        return policies

    def load_policies(self, paths: Sequence[str | Path], *, defaults: bool = True,
                      actor: str = "api") -> PolicySet:
        """Check, compile and store a new policy set as one transition: the default governance
        followed by `paths` (which may OVERRIDE its settings and policies, or DISABLE them), or
        only `paths` with `defaults=False`. A set with any error is refused whole
        (PolicySyntaxError / PolicyCheckError) and the previous set stays in force."""
        return memory_admin.load_policies(self, paths, defaults=defaults, actor=actor)


def import_jsonl(source: str | Path | IO[str], path: str | Path, *, engine: str = "kuzu",
                 embedder: Embedder | None = None,
                 progress: Progress | None = None) -> TransferReport:
    """Load an export (`Memory.export`, `gem export`) into a new database at `path`, where no
    database is or an empty one. The database is built beside `path` and moved there only
    once it audits clean (every row hash against the log, the chain, C1-C6) and its log ends
    at the head the export names; on any error nothing is left at `path`."""
    path = str(path)
    if engine == "falkordb":
        raise InvalidInput("import builds an embedded database (engine 'kuzu' or 'ladybug'); a "
                           "FalkorDB memory keeps a log per scope, which the export format does "
                           "not hold yet")
    transfer.target_is_empty(path, engine)
    building = path + transfer.IMPORTING
    transfer.remove(building)
    try:
        header, records, digest = transfer.load(source, building, engine, progress)
        memory = open(building, engine=engine, embedder=embedder, create=False, progress=progress)
        try:
            report = memory.audit(full=True, progress=progress)
            if not report.ok:
                raise InvalidInput(f"the imported database fails the audit: {report.violations[:3]}")
            head, named = memory.head(), header.get("head")
            if named is not None and (head["seq"], head["hash"]) != (named.get("seq"), named.get("hash")):
                raise InvalidInput("the imported log does not end at the head the export names")
        finally:
            memory.close()
        transfer.move_into_place(building, path)
    except BaseException:
        transfer.remove(building)
        raise
    return transfer.TransferReport(path, records, head["seq"], head, digest)


def open(path: str | Path | None = None, policies: Sequence[str | Path] | None = None,
         embedder: Embedder | None = None, resolver: Resolver | None = None,
         clock: Callable[[], datetime] | None = None, engine: str | None = None,
         summarizer: Summarizer | None = None, create: bool = True,
         progress: Progress | None = None, *, defaults: bool = True,
         reviser: Reviser | None = None, extractor: Extractor | None = None,
         buffer_pool_size: int | None = None, max_db_size: int | None = None,
         accept_head: bool = False) -> Memory:
    """Open (or create) a memory. `path=None` makes a temporary database removed on close.

    `engine`: "kuzu" or "ladybug", embedded databases at `path`; or "falkordb", a memory on a
    FalkorDB server that many processes share: `path` is its URL, `redis://HOST:PORT/NAME`
    (each scope is a graph `gem:NAME:<scope>`; see gem/store/falkor.py). Without it, the
    engine is the one that made the database at `path` (`engine_for`), "falkordb" for a URL,
    and "kuzu" for a new database. `buffer_pool_size` and `max_db_size` (bytes) size an embedded
    database (kuzu reserves 8 TiB of address space per database by default, so only ~15 fit in
    one process; a smaller `max_db_size` lets thousands).

    `policies`: .policy files that extend the default governance (`defaults=False`: that
    replace it). Without `policies` a database keeps the policies stored in it (a new one
    gets the default governance). Opening an existing database with a set different from the
    stored one is a policy transition, logged, and reported in `Memory.policy_change`.
    `create=False` refuses a path where no database exists (a mistyped path would otherwise
    make a new one). `progress(step, done, total)` is told about long work (rebuilding what is
    derived from a database). `clock()` must return timezone-aware datetimes; a time earlier
    than the last transition's is taken as the last transition's (time in the log never goes
    back). `reviser(PendingRevision)` is asked by `revise()` about each flagged topic and
    returns facts to apply (or None to leave its flags open). `extractor(episode) -> [Fact, ...]`
    finds facts in each ingested episode (an LLM in real use, e.g. gem.llm.Extractor; the
    default finds none); one whose `takes_context` is True is called as `extractor(episode,
    context)` with the turns before it and the topics it may update (gem.ExtractionContext).

    An embedded database's owner process holds a lock on `<path>.gem-head` (another process
    gets `StoreLocked`) and records there the last commit it acknowledged. If the log lacks
    it (the files were replaced by older ones), the open raises `LostCommits`;
    `accept_head=True` accepts the database as it is now.
    """
    opened = open_engine(path, policies, embedder, resolver, clock, engine, summarizer, create,
                         progress, defaults=defaults, reviser=reviser, extractor=extractor,
                         buffer_pool_size=buffer_pool_size, max_db_size=max_db_size,
                         accept_head=accept_head)
    core, wanted = opened.engine, opened.wanted
    try:
        memory = Memory(core, engines=ScopeEngines(core, opened.database))
        stored = core.policies
        if stored is None:
            install_policies(memory, wanted or load_sources([], available_actions(), defaults=True),
                             "api")
        elif wanted is not None and wanted.hash != stored.hash:
            install_policies(memory, wanted, "api")
            memory.policy_change = memory.transitions(core.seq - 1)[-1]["detail"]
            log.warning("gem: %s opened with a different policy set (%s -> %s); enabled %s, "
                        "disabled %s", memory.path, stored.hash[:12], wanted.hash[:12],
                        memory.policy_change.get("enabled"), memory.policy_change.get("disabled"))
        return memory
    except BaseException:
        opened.close()
        raise


__all__ = ["Memory", "open", "engine_for", "Fact", "TransitionRejected", "Reviser"]
