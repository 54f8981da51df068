"""The public API (specs/design.md §7): `gem.open(...)` returns a `Memory`."""
from __future__ import annotations

import json
import logging
import os
import re
import threading
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import IO, Any, Callable, Iterable, Sequence, overload

from . import attest
from . import audit as audit_mod
from . import history as history_rules
from . import extraction, transfer, usage
from .collector import paused_gc
from .derived import DEFAULT_SCOPE, Progress, Summarizer, snapshot_dir
from .embed import Embedder
from .engine import Engine, embedder_for, utc_now
from .errors import GemError, InvalidInput, TransitionRejected, UnknownUnit
from .model import AuditReport, DroppedFact, Episode, EpisodePage, ErasureCheck, ErasureReceipt, Explanation, \
    Fact, FieldView, HistoryEntry, IngestResult, Neighbourhood, PendingRevision, Resolution, \
    RetrieveResult, SalienceHistory, TopicPage, TopicView, as_utc, checked_time, episode_label, \
    returned_facts
from .operators import erase as erase_op
from .operators import forget as forget_op
from .operators import ingest as ingest_op
from .operators import retract as retract_op
from .operators import revise as revise_op
from .operators import retrieve as retrieve_op
from .operators import views
from .operators.common import add_edge, field_evidence, field_named
from .operators.resolution import Directory
from .pipeline import run_policies
from .policy import PolicySet, load_sources, read_sources
from .reliability import evidence_states
from .resolve import Resolver, TieredResolver
from .runtime import available_actions
from .state.transition import Transition
from .store import ENGINES, engine_of, falkor_database, open_store, queries
from .transfer import TransferReport
from .units import is_episode
from .places import checked_near

log = logging.getLogger("gem")

# What an extractor is: called with each ingested episode (before the transition, so a slow
# model call holds no lock), it returns the facts found in it, which are ingested in the same
# transition, citing the episode (`ref`) and dated when it was said unless they say otherwise.
# One with `takes_context = True` is called as extractor(episode, gem.ExtractionContext).
Extractor = Callable[[Episode], Iterable[Fact]]
MAX_K = 1000
Reviser = Callable[[PendingRevision], "Iterable[Fact] | None"]


def _text(value: Any, what: str) -> str:
    """A non-empty string argument, or InvalidInput naming it (before any transition)."""
    if not isinstance(value, str) or not value.strip():
        got = repr(value) if isinstance(value, str) else type(value).__name__
        raise InvalidInput(f"{what} must be a non-empty string, got {got}")
    return value


def _callable(value: Any, what: str) -> None:
    if value is not None and not callable(value):
        raise InvalidInput(f"{what} must be a callable or None, got {type(value).__name__}")


def _page(text: Any, offset: Any, limit: Any) -> None:
    """The arguments every listing takes: a text filter and a page."""
    if text is not None and not isinstance(text, str):
        raise InvalidInput(f"text must be a string, got {type(text).__name__}")
    for name, value, least in (("offset", offset, 0), ("limit", limit, 1)):
        if not isinstance(value, int) or isinstance(value, bool) or value < least:
            raise InvalidInput(f"{name} must be an integer >= {least}")


def _flag(value: Any, what: str) -> bool:
    if not isinstance(value, bool):
        raise InvalidInput(f"{what} must be True or False, got {type(value).__name__}")
    return value


SCOPE_NAME = re.compile(r"[a-z0-9][a-z0-9_.-]{0,63}")


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
            return sorted(n for n, s in derived.scopes.items() if s.topics.ids or s.counters)
        return self.database.scope_names(logged=True)

    def opened(self) -> list[Engine]:
        with self._lock:
            return list(self.engines.values())


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
        if self._root is not None:
            self._closed = True
            return
        if not self._closed:
            self.stop_maintenance()
            self._closed = True
            for engine in reversed(self._engines.opened()):  # the scopes' stores, then the root's
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
            if self._engines.database is not None:
                self._engines.database.close()

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
        self._check_open()
        _callable(progress, "progress")
        if isinstance(facts, (str, bytes, dict)) or not (isinstance(facts, (Fact, Episode))
                                                         or hasattr(facts, "__iter__")):
            raise InvalidInput(f"facts must be a gem.Fact, a gem.Episode or a list of them, got "
                               f"{type(facts).__name__}")
        _text(actor, "actor")
        batch: list[Any] = [facts] if isinstance(facts, (Fact, Episode)) else list(facts)
        for i, item in enumerate(batch):
            if not isinstance(item, (Fact, Episode)):
                raise InvalidInput(f"facts[{i}] is a {type(item).__name__}, not a gem.Fact or "
                                   "a gem.Episode")
        if not batch:
            raise InvalidInput("ingest needs at least one fact or episode")
        plain = [f for f in batch if isinstance(f, Fact)]
        with usage.metered():  # the extractor's model calls are charged to this transition
            episodes = self._extract(batch)
            if episodes:
                def operator(t: Transition) -> dict[str, Any]:
                    return ingest_op.ingest_with_episodes(t, plain, episodes)
            else:
                def operator(t: Transition) -> dict[str, Any]:
                    return ingest_op.ingest(t, plain)
            summary, t = self._run("ingest", operator, actor=actor, interaction=True,
                                   progress=progress)
        topics, flagged = list(t.touched.topics), list(t.touched.flagged)
        created_episodes = [t.created["Episode"][e] for e in summary.get("episodes", [])]
        entry_fields = [t.created["Entry"][e]["field_id"] for e in summary["entries"]]
        title = self.titles([*topics, *flagged, *(r["topic"] for r in summary["resolved"])]).get
        known = summary.get("known_episodes", [])
        known_labels = self.episode_labels(known) if known else {}

        def field_name(fid: str) -> str:
            tid, _, name = fid.partition("/")
            return f"{title(tid, tid)} / {name}"
        return IngestResult(transition=self._engine.seq,
                            topics=[title(i, i) for i in topics], topic_ids=topics,
                            created_topics=[title(i, i) for i in summary["created_topics"]],
                            created_topic_ids=summary["created_topics"],
                            new_values=[field_name(f) for f in entry_fields],
                            entry_ids=summary["entries"],
                            corroborations=summary["corroborations"], denials=summary["denials"],
                            flagged=[title(i, i) for i in flagged], flagged_ids=flagged,
                            dropped=[DroppedFact(**d) for d in summary["dropped"]],
                            resolved=[Resolution(**{**r, "topic": title(r["topic"], r["topic"]),
                                                    "topic_id": r["topic"]})
                                      for r in summary["resolved"]],
                            episodes=[episode_label(e["speaker"], e["source"], e["at"], e["text"])
                                      for e in created_episodes],
                            episode_ids=[e["id"] for e in created_episodes],
                            known_episodes=[known_labels[e] for e in known],
                            known_episode_ids=known,
                            extracted=summary.get("extracted", 0))

    @property
    def extractor(self) -> Extractor | None:
        """What finds facts in ingested episodes (shared by every scope view of this memory)."""
        return self._engine.extractor

    @extractor.setter
    def extractor(self, extractor: Extractor | None) -> None:
        if extractor is not None and not callable(extractor):
            raise InvalidInput(f"extractor must be callable, got {type(extractor).__name__}")
        self._engine.extractor = extractor

    def _extract(self, batch: list[Any]) -> list[tuple[int, Episode, list[Fact]]]:
        """Each episode of the batch with the facts the extractor found in it; an extractor
        that `takes_context` also gets the turns before it and the topics it may update
        (gem/extraction.py), read before the transition."""
        found = [(i, e) for i, e in enumerate(batch) if isinstance(e, Episode)]
        extractor = self.extractor
        if extractor is None or not found:
            return [(i, e, []) for i, e in found]
        contexts = self._read(lambda t: extraction.contexts(t, [e for _, e in found])) \
            if extraction.takes_context(extractor) else None
        out: list[tuple[int, Episode, list[Fact]]] = []
        so_far: list[Fact] = []
        for n, (i, episode) in enumerate(found):
            context = None if contexts is None else extraction.with_batch(contexts[n], so_far)
            facts = returned_facts(extraction.call(extractor, episode, context),
                                   f"the extractor (for facts[{i}])")
            so_far += facts
            out.append((i, episode, facts))
        return out

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
        self._check_open()
        if query is not None and not isinstance(query, str):
            raise InvalidInput(f"query must be a string, got {type(query).__name__}")
        if topic is not None:
            _text(topic, "topic")
        all_fields = fields == "all"
        if fields is not None and not all_fields:
            if isinstance(fields, (str, bytes)) or not isinstance(fields, (list, tuple)):
                got = repr(fields) if isinstance(fields, str) else type(fields).__name__
                raise InvalidInput(f"fields must be a list of field names or \"all\", got {got}")
            for i, name in enumerate(fields):
                _text(name, f"fields[{i}]")
        if not isinstance(k, int) or isinstance(k, bool) or not 1 <= k <= MAX_K:
            raise InvalidInput(f"k must be an integer in [1, {MAX_K}], got {k!r}")
        _flag(history, "history")
        _flag(include_archived, "include_archived")
        _text(actor, "actor")
        point = None if near is None else checked_near(near)
        if point is not None and topic is not None:
            raise InvalidInput("near filters the units a retrieval ranks: give it without a topic")
        window = None
        if between is not None:
            if not isinstance(between, (tuple, list)) or len(between) != 2:
                raise InvalidInput(f"between must be a pair (start, end) of datetimes, got "
                                   f"{type(between).__name__}")
            try:
                window = (checked_time(between[0], "between start"),
                          checked_time(between[1], "between end"))
            except ValueError as exc:
                raise InvalidInput(str(exc)) from None
            if window[0] > window[1]:
                raise InvalidInput(f"between: start {window[0].isoformat()} is after end "
                                   f"{window[1].isoformat()}")
            if (not query and point is None) or topic is not None:
                raise InvalidInput("between filters the units a text query (or near=) ranks: "
                                   "give a query or near (and no topic)")
        request = retrieve_op.Request(
            query=query.strip() if query else None, topic=topic,
            fields=None if fields is None or all_fields else tuple(fields),
            as_of=None if as_of is None else as_utc(as_of, "as_of"),
            history=history, include_archived=include_archived, k=k,
            all_fields=all_fields, between=window, near=point)
        result, _ = self._run("retrieve", lambda t: retrieve_op.retrieve(t, request),
                                     actor=actor, interaction=True)
        return result.model_copy(update={"transition": self._engine.seq})

    def link(self, src: str, dst: str, kind: str = "extension", *, actor: str = "api") -> bool:
        """Add a typed edge: `extension` (a change on src may entail one on dst) or
        `association` (retrieval context only). Returns False if it already existed."""
        self._check_open()
        _text(src, "src")
        _text(dst, "dst")
        _text(actor, "actor")
        if kind not in ("extension", "association"):
            raise InvalidInput(f"kind must be 'extension' or 'association', got {kind!r}")

        def op(t: Transition) -> bool:
            directory = Directory.of(t)
            a, b = directory.lookup(src), directory.lookup(dst)
            if a is None or b is None:
                raise UnknownUnit(f"no topic named {src if a is None else dst!r}")
            return add_edge(t, a, b, kind, source=actor)

        created, _ = self._run("link", op, actor=actor)
        return created

    def forget(self, *, actor: str = "maintenance",
               progress: Progress | None = None) -> dict[str, Any]:
        """A forgetting pass: the `tick` policies move faded units down the ladder.
        `progress(step, done, total)` hears the stages and, every 1000, the policy events.
        The report names units for readers (`attenuated`: titles, "Title / field", episodes as
        "speaker, time: excerpt"; `levels`: (name, level) per step) with the ids alongside
        (`attenuated_ids`, `level_ids`); it is plain JSON (json.dumps takes it)."""
        self._check_open()
        _text(actor, "actor")
        _callable(progress, "progress")
        # The report is built before the collector runs again, and the transition dropped:
        # otherwise its first pass walks every row and record the pass made (0.3-0.9 s of a
        # 5 s pass over 50k fields, measured), though all of it is freed by reference counts.
        with paused_gc():
            _, t = self._run("forget", forget_op.forget, actor=actor, event="tick",
                             progress=progress)
            done = forget_op.attenuations(t.detail)
            del t
            ids = list(dict.fromkeys(unit for unit, _ in done))
            name = self._unit_names(ids)
            report = {"transition": self._engine.seq,
                      "attenuated": [name[u] for u in ids], "attenuated_ids": ids,
                      "levels": [(name[u], level) for u, level in done],
                      "level_ids": done}
            del done
        return report

    def _unit_names(self, ids: Sequence[str]) -> dict[str, str]:
        """Each unit id as a reader knows it: a topic by title, a field as "Title / field",
        an episode as "speaker, time: excerpt" (a unit no longer there: its id)."""
        titles = self.titles({u.partition("/")[0] for u in ids if not is_episode(u)})
        said = self.episode_labels([u for u in ids if is_episode(u)])
        out = {}
        for u in ids:
            tid, _, field = u.partition("/")
            title = titles.get(tid)
            out[u] = said.get(u, u) if is_episode(u) else u if title is None else \
                f"{title} / {field}" if field else title
        return out

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
        self._check_open()
        _text(actor, "actor")
        _callable(progress, "progress")

        def step(name: str, done: int, total: int) -> None:
            if progress is not None:
                progress(f"revise: {name}", done, total)
        engine = self._engine
        report: dict[str, Any] = {"merged": [], "merged_ids": [], "conflicts": [],
                                  "conflict_ids": [], "flags_evaluated": [],
                                  "flags_evaluated_ids": [], "flags_cleared": [],
                                  "flags_cleared_ids": [], "flags_open": [],
                                  "flags_open_ids": []}
        with engine.store.lock:  # no other commit between finding and repairing
            threshold, pairs = self._read(lambda t: (
                t.settings["merge_similarity"],
                revise_op.duplicate_pairs(t, t.settings["merge_similarity"])))
            for i, (keep, away) in enumerate(pairs):
                step("merge", i, len(pairs))
                named = self._unit_names([keep, away])  # before the merged one is gone
                self._run("revise", lambda t: revise_op.merge_topics(t, keep, away),
                           actor=actor, event="merge")
                report["merged"].append((named[keep], named[away]))
                report["merged_ids"].append((keep, away))
            step("merge", len(pairs), len(pairs))
            scope = engine.derived.scope(self._scope)
            scope.unpaired.clear()
            scope.paired_at = threshold
            with engine.store.reading() as tx:
                fids = queries.conflicting_fields(tx, self._scope)
            if fids:
                step("conflicts", 0, len(fids))
                self._run("revise", lambda t: revise_op.settle_conflicts(t, fids), actor=actor,
                           event="conflicts")
                report["conflict_ids"] = fids
                step("conflicts", len(fids), len(fids))
            tids = self._read(revise_op.open_flag_topics)
            if tids and (self.reviser is not None or engine.shared.policies_for("revised")):
                answers: dict[str, Any] = {}  # asked once per topic, should the run restart
                step("flags", 0, len(tids))
                _, t = self._run("revise", lambda t: revise_op.evaluate_flags(
                    t, tids, run_policies, self.reviser, answers),
                    actor=actor, event="dependency_repair")
                report["flags_evaluated_ids"] = tids
                step("flags", len(tids), len(tids))
                report["flags_cleared_ids"] = list(dict.fromkeys(
                    (c["topic"], c["by"]) for c in t.detail.get("flags_cleared", [])))
            report["flags_open_ids"] = self._read(revise_op.open_flag_topics)
        name = self._unit_names([*report["conflict_ids"], *report["flags_evaluated_ids"],
                                 *report["flags_open_ids"],
                                 *(tid for tid, _ in report["flags_cleared_ids"])])
        for key in ("conflicts", "flags_evaluated", "flags_open"):
            id_key = "conflict_ids" if key == "conflicts" else key + "_ids"
            report[key] = [name[u] for u in report[id_key]]
        report["flags_cleared"] = [(name[tid], by) for tid, by in report["flags_cleared_ids"]]
        return report

    def pending_revisions(self) -> list[PendingRevision]:
        """Topics with open revision flags, oldest flag first: each with its flags (origin,
        policy, evidence), its current values and those of the topics whose change flagged
        it. An administrative read: nothing is reinforced."""
        return self._read(lambda t: [revise_op.pending_revision(t, tid)
                                     for tid in revise_op.open_flag_topics(t)])

    def retract(self, topic: str, field: str, reason: str, *, source: str = "api",
                actor: str = "api") -> bool:
        """Say that the field's current value was wrong, with no replacement: from now on the
        field has no current value (in retrieval, `as_of` now, `inspect` and `explain`), the
        retracted entry is kept in the history as retracted, with `reason`, and the topic's
        dependents are flagged like for any update. A later statement gives it a value again.
        Returns False when the field has no current value to retract."""
        self._check_open()
        _text(topic, "topic")
        _text(field, "field")
        _text(reason, "reason")
        _text(source, "source")
        _text(actor, "actor")
        provenance = {"source": source, "actor": actor, "ref": None, "confidence": 1.0,
                      "polarity": "+"}

        def op(t: Transition) -> bool:
            fid = self._require_field(t, topic, field)
            return retract_op.retract(t, fid, reason.strip(), provenance)

        changed, _ = self._run("retract", op, actor=actor)
        return bool(changed)

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
        self._check_open()
        _text(topic, "topic")
        if field is not None:
            _text(field, "field")
        _text(actor, "actor")

        def op(t: Transition) -> bool:
            tid = self._topic_id(t, topic)
            if tid is None:
                raise UnknownUnit(f"no topic named {topic!r}")
            fid = None if field is None else self._require_field(t, topic, field)
            return forget_op.restore(t, tid, fid)

        changed, _ = self._run("restore", op, actor=actor)
        return changed

    # ------------------------------------------------------------------ erasure
    def erase(self, topic: str, field: str | None = None, *, source: str | None = None,
              reason: str, actor: str = "api") -> ErasureReceipt:
        """Erase, for privacy: a topic; one `field` of it; or, with `source`, what that source
        said in the topic (or in that field). The one destructive operator (forgetting never
        destroys): one transition removes the values, observations, index entries, summaries
        and salience of what is erased, recomputes what remains, redacts the log records that
        touched the topic and writes a tombstone. The episodes that said what is erased go
        too: those its entries and observations cite, and with `source` the scope's episodes
        from that source. The erased names and values no surviving unit holds are redacted
        wherever they were copied (log records, flag evidence, the derived snapshot). The bytes
        leave the database files with `compact()`. Nothing to erase: UnknownUnit."""
        self._check_open()
        _text(topic, "topic")
        if not isinstance(reason, str) or not reason.strip():
            raise InvalidInput("reason must be a non-empty string (it is kept in the tombstone: "
                               "never put the erased content in it)")
        for name, value in (("field", field), ("source", source)):
            if value is not None:
                _text(value, name)
        _text(actor, "actor")

        def op(t: Transition) -> dict[str, Any]:
            tid = self._topic_id(t, topic)
            if tid is None:
                raise UnknownUnit(f"no topic named {topic!r}")
            return erase_op.erase(t, [tid], field, source, reason.strip())

        return self._erasure(op, actor)

    def erase_all(self, reason: str, *, actor: str = "api") -> ErasureReceipt:
        """Erase every topic and episode of this memory's scope (a tenant leaving), as one
        transition."""
        self._check_open()
        _text(reason, "reason")
        _text(actor, "actor")

        def op(t: Transition) -> dict[str, Any]:
            tids = t.topic_ids_where(frozenset({"active", "archived"}))
            if not tids and not t.episode_ids_where(frozenset({"active", "hidden"})):
                raise UnknownUnit(f"scope {self._scope!r} holds nothing to erase")
            return erase_op.erase(t, tids, None, None, reason.strip(), every_episode=True)

        return self._erasure(op, actor)

    def _erasure(self, op: Callable[[Transition], dict[str, Any]], actor: str) -> ErasureReceipt:
        result, t = self._run("erase", op, actor=actor)
        engine = self._engine
        stone = result["tombstone"]
        with engine.store.lock:  # what is derived from what remains, and a saved snapshot, now
            scope = engine.derived.scope(self._scope)
            scope.refresh(engine.cache, engine.services.summarizer, stone["changed"])
            # a changed field's document, an episode's that read an erased one as context (the
            # scope's other stale units with them: work the next retrieval would do)
            scope.refresh_units(engine.cache)
            if os.path.isdir(snapshot_dir(engine.store.path)):
                engine.save_snapshot()
        return ErasureReceipt(
            transition=t.seq, scope=self._scope, at=t.now, reason=stone["reason"],
            topics=stone["topics"], fields=stone["fields"], entries=stone["entries"],
            observations=stone["observations"], redacted=stone["redacted"],
            episodes=stone["episodes"], marks=result["marks"],
            commitment=result["commitment"], salt=result["salt"])

    def verify_erasure(self, receipt: ErasureReceipt) -> ErasureCheck:
        """Check that what `receipt` says was erased is gone: its tombstone is in the log as
        given, no stored row, index entry, name or summary holds the erased units, the
        redacted records hold no content, and no stored or derived string (snapshot files
        included) holds an erased name or value that no surviving unit holds itself. A receipt
        that matches no erasure: InvalidInput."""
        self._check_open()
        if not isinstance(receipt, ErasureReceipt):
            raise InvalidInput(f"receipt must be a gem.ErasureReceipt, got {type(receipt).__name__}")
        with self._engine.store.lock:
            return erase_op.verify(self._engine, receipt)

    def compact(self) -> dict[str, Any]:
        """Rewrite the live data into a fresh database and swap it in atomically, so what was
        erased leaves the files too (an engine keeps deleted values in its pages). Crash-safe:
        a kill at any point leaves the old or the new database. Only the one handle open on
        the path may compact; returns the bytes before and after."""
        self._check_open()
        if self._root is not None:
            raise InvalidInput("compact the memory, not a scope view: it rewrites every scope")
        engine = self._engine
        with engine.store.lock:
            before = _disk_bytes(self.path)
            engine.write_behind()
            engine.store.compact()
            engine.save_snapshot()
            return {"bytes_before": before, "bytes_after": _disk_bytes(self.path)}

    def export(self, dest: str | Path | IO[str], progress: Progress | None = None) -> TransferReport:
        """Write the whole database (every scope, the log included) as JSON Lines to `dest`, a
        path or a text stream (gem/transfer.py). `gem.import_jsonl` loads it into an empty
        database, on either engine, with the same state. Changes no state; salience pending to
        be written behind is written first, so that the file carries it."""
        self._check_open()
        if self._root is not None:
            raise InvalidInput("export the memory, not a scope view: the file holds every scope")
        if self._engines.per_scope:
            raise InvalidInput("export reads one embedded database; a FalkorDB memory keeps a log "
                               "per scope, which the export format (one log) does not hold yet")
        with self._engine.store.lock:  # no commit between writing behind and reading
            self._engine.write_behind(stamp=True)
            return transfer.export_jsonl(self._engine.store, dest, progress)

    def copy_database(self, dest: str | Path) -> None:
        """Copy the committed database (every scope) to `dest`, a path where no database is:
        a backup, or a scratch database to try something on (a dry-run maintain). Changes no
        state. A child process copies the files while no transition of this process runs:
        this process never opens a file of its own database (closing it would drop the
        engine's lock on it)."""
        self._check_open()
        if self._engines.per_scope:
            raise InvalidInput("copy_database copies an embedded database's files; a FalkorDB "
                               "memory lives on its server (export it, or copy the server's)")
        target = os.path.abspath(os.fspath(dest))
        if any(os.path.exists(target + suffix) for suffix in ("", ".wal")):
            raise InvalidInput(f"{str(dest)!r} already exists")
        self._engine.store.copy_files(target)

    def start_maintenance(self, every: float | timedelta = 3600.0) -> None:
        """Run `maintain` in the background every `every` seconds (APScheduler). Runs are
        serialised with client transitions by the store's write lock; a failing run is
        logged and retried at the next interval, never half-applied."""
        from apscheduler.schedulers.background import BackgroundScheduler
        self._check_open()
        if not isinstance(every, (int, float, timedelta)) or isinstance(every, bool):
            raise InvalidInput(f"every must be seconds or a timedelta, got {type(every).__name__}")
        seconds = every.total_seconds() if isinstance(every, timedelta) else float(every)
        if not seconds > 0:  # NaN too
            raise InvalidInput("every must be a positive number of seconds")
        if self._scheduler is not None:
            raise GemError("maintenance is already running; stop it first")
        scheduler = BackgroundScheduler(timezone="UTC")
        scheduler.add_job(self._maintenance_job, "interval", seconds=seconds,
                          id="gem-maintenance", max_instances=1, coalesce=True,
                          next_run_time=datetime.now(timezone.utc))
        scheduler.start()
        self._scheduler = scheduler

    def _maintenance_job(self) -> None:
        try:
            self.maintain()
            self.maintenance_runs += 1
        except Exception:  # logged and retried at the next interval
            self.maintenance_failures += 1
            log.exception("gem maintenance run failed; it was rolled back and will be retried")

    def stop_maintenance(self) -> None:
        """Stop scheduled maintenance, waiting for a run in progress to finish."""
        if self._scheduler is not None:
            self._scheduler.shutdown(wait=True)
            self._scheduler = None

    # ------------------------------------------------------------------ administrative reads
    def _read(self, fn: Callable[[Transition], Any]) -> Any:
        """A side-effect-free read: no salience change, not an interaction, nothing logged."""
        self._check_open()
        return self._engine.read(fn, self._scope)

    def _topic_id(self, t: Transition, topic: str) -> str | None:
        """A topic named by title or alias (exactly, then by canonical key), or by id with a
        `gem.TopicId`: titles and ids never share a namespace."""
        _text(topic, "topic")
        return Directory.of(t).lookup(topic)

    @overload
    def inspect(self, topic: str, field: None = None) -> TopicView | None: ...

    @overload
    def inspect(self, topic: str, field: str) -> FieldView | None: ...

    def inspect(self, topic: str, field: str | None = None) -> TopicView | FieldView | None:
        """An administrative read: the topic's view (status, salience, fields, pending flags),
        or that field's view; None if unknown. No salience change, not an interaction."""
        def read(t: Transition) -> TopicView | FieldView | None:
            tid = self._topic_id(t, topic)
            if tid is None:
                return None
            if field is None:
                return retrieve_op.topic_view(t, tid, flags=True)
            fid = field_named(t, tid, _text(field, "field"))
            return None if fid is None else retrieve_op.field_view(t, fid)
        return self._read(read)

    def history(self, topic: str, field: str) -> list[HistoryEntry]:
        """The field's full value history, compressed and retracted entries included."""
        def read(t: Transition) -> list[HistoryEntry]:
            fid = self._require_field(t, topic, field)
            return [retrieve_op.history_entry(t, e) for e in history_rules.chronological(t.entries(fid))]
        return self._read(read)

    def explain(self, topic: str, field: str) -> Explanation:
        """The evidence chain behind a field's current value, with its reliability R."""
        def read(t: Transition) -> Explanation:
            fid = self._require_field(t, topic, field)
            decay = t.settings["reliability_decay"]
            states = evidence_states(field_evidence(t, fid), decay)
            current = t.current_entry(fid)
            if current is not None and history_rules.is_retraction(current):
                current = None  # retracted: no current value
            entries = history_rules.chronological(t.entries(fid))
            view = retrieve_op.field_view(t, fid)
            return Explanation(
                contested=view.contested, why_current=view.why_current,
                topic=t.get("Topic", t.get("Field", fid)["topic_id"])["title"],
                topic_id=t.get("Field", fid)["topic_id"], field=t.get("Field", fid)["name"],
                value=None if current is None else json.loads(current["value"]),
                entries=[retrieve_op.history_entry(t, e) for e in entries],
                reliability=states.reliability, decay=decay,
                states={"action": states.action, "inaction": states.inaction,
                        "conflict": states.conflict, "ignorance": states.ignorance})
        return self._read(read)

    def _require_field(self, t: Transition, topic: str, field: str) -> str:
        tid = self._topic_id(t, topic)
        if tid is None:
            raise UnknownUnit(f"no topic named {topic!r}")
        fid = field_named(t, tid, _text(field, "field"))
        if fid is None:
            raise UnknownUnit(f"topic {topic!r} has no field {field!r}")
        return fid

    def stats(self) -> dict[str, Any]:
        """Sizes of the state: the active footprint (C5) and everything kept behind it."""
        def read(t: Transition) -> dict[str, Any]:
            with self._engine.store.reading() as tx:
                counts = queries.status_counts(tx, self._scope)
                entries, active_entries = queries.entry_counts(tx, self._scope)
                transitions = queries.count(tx, "Transition", "n.scope = $s", {"s": self._scope})
                llm = usage.totals(queries.details_mentioning(tx, self._scope, '"llm"'))
            return {"topics": counts["topics"], "fields": counts["fields"],
                    "active_fields": counts["fields"].get("active", 0),
                    "entries": entries, "active_entries": active_entries,
                    "episodes": counts["episodes"],
                    "interactions": t.counters.interactions,
                    "active_bound": t.settings.get("active_bound"),
                    "transitions": transitions, "llm": llm}
        return self._read(read)

    def transitions(self, since: int = 0) -> list[dict[str, Any]]:
        """The transition log from `since` on: op, time, actor, units, policies fired, hashes
        (a scope view: only its own scope's records). Plain JSON (json.dumps takes it): `at`
        is ISO 8601 text with its offset. Units are named by id, as the log is hashed;
        `gem log` and GET /v1/log name them by title."""
        self._check_open()
        if not isinstance(since, int) or isinstance(since, bool) or since < 0:
            raise InvalidInput(f"since must be an integer >= 0, got {since!r}")
        with self._engine.store.reading() as tx:
            rows = queries.transitions(tx, since, scope=self._scope if self._root else None)
        return [_json_time(audit_mod.log_entry(r)) for r in rows]

    def audit(self, *, full: bool = False, progress: Progress | None = None,
              expected_head: dict[str, Any] | None = None) -> AuditReport:
        """C1-C6, every stored row against the hash the log attests for it, and the hash chain:
        over what the transitions since the last clean audit touched, or over the whole state
        with `full=True` (and whenever this memory has no clean audit yet). `report.since` says
        which was done. `expected_head` is a `head()` kept outside the database: a log cut
        short of it or rewritten up to it fails the audit."""
        self._check_open()
        _flag(full, "full")
        if expected_head is not None and not (isinstance(expected_head, dict)
                                              and {"seq", "hash"} <= set(expected_head)):
            raise InvalidInput("expected_head must be a head() record: {'seq': ..., 'hash': ...}")
        with self._engine.store.lock:
            report = audit_mod.audit(self._engine, full=full, progress=progress,
                                     expected_head=expected_head)
        if self._root is None and self._engines.per_scope:
            # Each scope of a FalkorDB memory is its own store with its own log: the memory's
            # audit is every scope's.
            for name in self._engines.scopes():
                if name != self._scope:
                    engine = self._engines.get(name)
                    with engine.store.lock:
                        report = audit_mod.merge(report, name, audit_mod.audit(
                            engine, full=full, progress=progress))
        return report

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
        if status not in (None, "active", "archived"):
            raise InvalidInput(f"status must be 'active' or 'archived', got {status!r}")
        _flag(flagged, "flagged")
        if order not in views.ORDERS:
            raise InvalidInput(f"order must be one of {', '.join(views.ORDERS)}, got {order!r}")
        _page(text, offset, limit)
        derived = self._engine.derived.scope(self._scope)
        return self._read(lambda t: views.topic_listing(
            t, derived, status=status, flagged=flagged, text=text, order=order,
            offset=offset, limit=limit))

    def episodes(self, *, text: str | None = None, status: str | None = None, offset: int = 0,
                 limit: int = 50) -> EpisodePage:
        """A page of this scope's episodes, newest first: `text` a part of what was said or of
        the speaker, `status` active|hidden. An administrative read: nothing is reinforced."""
        if status not in (None, "active", "hidden"):
            raise InvalidInput(f"status must be 'active' or 'hidden', got {status!r}")
        _page(text, offset, limit)
        derived = self._engine.derived.scope(self._scope)
        return self._read(lambda t: views.episode_listing(
            t, derived, text=text, status=status, offset=offset, limit=limit))

    def titles(self, topic_ids: Iterable[str]) -> dict[str, str]:
        """The titles of these topic ids (ids of no topic are left out), from the committed
        name directory: one dictionary lookup each."""
        self._check_open()
        if isinstance(topic_ids, (str, bytes, dict)) or not hasattr(topic_ids, "__iter__"):
            raise InvalidInput(f"topic_ids must be a list of topic ids, got {type(topic_ids).__name__}")
        topic_ids = list(topic_ids)
        for i, tid in enumerate(topic_ids):
            if not isinstance(tid, str):
                raise InvalidInput(f"topic_ids[{i}] must be a string, got {type(tid).__name__}")
        with self._engine.store.lock:
            title_of = self._engine.derived.scope(self._scope).names.title_of
            return {tid: title_of[tid] for tid in topic_ids if tid in title_of}

    def episode_labels(self, episode_ids: Iterable[str]) -> dict[str, str]:
        """These episodes as a reader knows them, "speaker, time: excerpt" (ids of no episode
        of this scope are left out). An administrative read: nothing is reinforced."""
        if isinstance(episode_ids, (str, bytes, dict)) or not hasattr(episode_ids, "__iter__"):
            raise InvalidInput(f"episode_ids must be a list of episode ids, got "
                               f"{type(episode_ids).__name__}")
        episode_ids = list(episode_ids)
        for i, eid in enumerate(episode_ids):
            if not isinstance(eid, str):
                raise InvalidInput(f"episode_ids[{i}] must be a string, got {type(eid).__name__}")
        wanted = [e for e in episode_ids if is_episode(e)]

        def read(t: Transition) -> dict[str, str]:
            rows = ((e, t.row("Episode", e)) for e in wanted)
            return {e: episode_label(r["speaker"], r["source"], r["at"], r["text"])
                    for e, r in rows if r is not None and r["scope"] == self._scope}
        return self._read(read)

    def graph(self, topic: str, depth: int = 1, *, limit: int = 100) -> Neighbourhood:
        """The topics within `depth` EXTENDS / ASSOCIATES / DERIVED_FROM edges of `topic`
        (either direction, at most `limit` topics) and the typed edges between them."""
        for name, value in (("depth", depth), ("limit", limit)):
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                raise InvalidInput(f"{name} must be a positive integer")
        derived = self._engine.derived.scope(self._scope)

        def read(t: Transition) -> Neighbourhood:
            tid = self._topic_id(t, topic)
            if tid is None:
                raise UnknownUnit(f"no topic named {topic!r}")
            return views.neighbourhood(t, derived, tid, depth, limit)
        return self._read(read)

    def salience_history(self, topic: str) -> SalienceHistory:
        """Salience and ladder status over time of a topic and each of its fields, from the
        transition log (every record carries the salience it changed) and the stored rows."""
        def read(t: Transition) -> SalienceHistory:
            tid = self._topic_id(t, topic)
            if tid is None:
                raise UnknownUnit(f"no topic named {topic!r}")
            with self._engine.store.reading() as tx:
                records = queries.log_records(tx, mentioning=views.log_needles(tid),
                                              newest_first=False)
            return views.salience_history(t, tid, records)
        return self._read(read)

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
        if not isinstance(limit, int) or isinstance(limit, bool) or limit < 1:
            raise InvalidInput("limit must be a positive integer")
        if before is not None and (not isinstance(before, int) or isinstance(before, bool)):
            raise InvalidInput("before must be an integer")
        _flag(details, "details")

        def read(t: Transition) -> list[dict[str, Any]]:
            needles: tuple[str, ...] = ()
            if topic is not None:
                tid = self._topic_id(t, topic)
                if tid is None:
                    raise UnknownUnit(f"no topic named {topic!r}")
                needles = views.log_needles(tid)
            with self._engine.store.reading() as tx:
                rows = queries.log_records(tx, before=before, limit=limit, mentioning=needles,
                                           columns=None if details else _LOG_HEADS)
            if not details:
                # an erasure redacted a record's units with the rest of its content
                return [_json_time({**r, "units": json.loads(r["units"]) if r["units"] else []})
                        for r in rows]
            return [_json_time(audit_mod.decode(r)) for r in rows]
        return self._read(read)

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
        self._check_open()
        _flag(defaults, "defaults")
        _text(actor, "actor")
        if self._root is not None:
            raise InvalidInput("policies govern every scope: load them on the memory, not on a "
                               f"view of scope {self._scope!r}")
        policy_set = load_sources(read_sources(paths, argument="paths"), available_actions(),
                                  defaults=defaults, argument="paths")
        return self._install(policy_set, actor)

    def _install(self, policy_set: PolicySet, actor: str) -> PolicySet:
        engine = self._engine
        previous_set = engine.policies

        def op(t: Transition) -> None:
            with engine.store.reading() as tx:
                stored = {r["name"]: r for r in queries.stored_policies(tx)}
            rows = []
            for policy in policy_set.policies:
                old = stored.get(policy.name)
                unchanged = old is not None and old["hash"] == policy.source_hash and old["enabled"]
                version = 1 if old is None else old["version"] + (0 if unchanged else 1)
                rows.append(({"name": policy.name, "file": policy.span.file, "source": policy.source,
                              "hash": policy.source_hash, "version": version, "enabled": True,
                              "loaded_at": t.now}, old is not None))
            names = {p.name for p in policy_set.policies}
            rows += [({**old, "enabled": False}, True) for name, old in stored.items()
                     if name not in names and old["enabled"]]
            # The files themselves are kept too: settings live outside any policy.
            files = json.dumps([[src.file, src.text] for src in policy_set.sources])
            t.store_writes.append(lambda tx: queries.put_policies(tx, rows, files, policy_set.hash))
            for row, _ in rows:  # the log attests what was stored (gem/attest.py)
                t.attested[f"Policy|{row['name']}"] = attest.row_hash("Policy", row)
            t.attested["Meta|policy_sources"] = attest.text_hash(files)
            t.detail["policies"] = sorted(names)
            t.detail["policy_set_hash"] = policy_set.hash
            if previous_set is not None:
                before = {p.name for p in previous_set.policies}
                t.detail["previous_policy_set_hash"] = previous_set.hash
                t.detail["enabled"] = sorted(names - before)
                t.detail["disabled"] = sorted(before - names)
            if policy_set.warnings:
                t.detail["warnings"] = [w.render() for w in policy_set.warnings]

        with engine.store.lock:
            previous = engine.policies
            engine.install_policies(policy_set)  # the new set governs its own load transition
            try:
                self._run("policy", op, actor=actor)
            except BaseException:
                engine.install_policies(previous)
                raise
        return policy_set

    def _stored_sources(self) -> list[tuple[str, str]] | None:
        with self._engine.store.reading() as tx:
            value = queries.meta_get(tx, "policy_sources")
        return None if value is None else [tuple(x) for x in json.loads(value)]


def _json_time(record: dict[str, Any]) -> dict[str, Any]:
    """A log record as plain JSON: its time as ISO 8601 text with its offset, exactly the text
    its hash covers (and what GET /v1/log shows)."""
    record["at"] = record["at"].isoformat()
    return record


def _disk_bytes(path: str) -> int:
    return sum(os.path.getsize(path + s) for s in ("", ".wal") if os.path.exists(path + s))
_LOG_HEADS = ("seq", "op", "event", "at", "actor", "units", "prev_hash", "hash")


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


def engine_for(path: str | Path | None, engine: str | None = None) -> str:
    """The engine to open `path` with: the one that made the database there (read from its
    file, gem/store/graph.py `engine_of`), `engine` if given and not contradicted by it. A
    database opened with the wrong engine is refused with the engine it was made with, before
    that engine is loaded (the two cannot share a process)."""
    if engine is not None:
        _text(engine, "engine")
    url = isinstance(path, str) and "://" in path
    if path is None or url or engine == "falkordb":
        return engine or ("falkordb" if url else "kuzu")
    made = engine_of(os.fspath(path))
    if engine is not None and made is not None and engine in ENGINES and made != engine:
        raise InvalidInput(f"{os.fspath(path)!r} is a database of engine {made!r}, not {engine!r}: "
                           f"open it with engine {made!r}, or name no engine (it is detected)")
    return engine or made or "kuzu"


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
    if path is not None and not isinstance(path, (str, os.PathLike)):
        raise InvalidInput(f"path must be a str, an os.PathLike or None, got {type(path).__name__}")
    if path is not None and not os.fspath(path):
        raise InvalidInput("path is empty (use path=None for a temporary database)")
    engine = engine_for(path, engine)
    _flag(create, "create")
    _flag(defaults, "defaults")
    _flag(accept_head, "accept_head")
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
        core.reviser = reviser
        memory = Memory(core, engines=ScopeEngines(core, database))
        core.extractor = extractor
        stored = core.policies
        if stored is None:
            memory._install(wanted or load_sources([], available_actions(), defaults=True), "api")
        elif wanted is not None and wanted.hash != stored.hash:
            memory._install(wanted, "api")
            memory.policy_change = memory.transitions(core.seq - 1)[-1]["detail"]
            log.warning("gem: %s opened with a different policy set (%s -> %s); enabled %s, "
                        "disabled %s", memory.path, stored.hash[:12], wanted.hash[:12],
                        memory.policy_change.get("enabled"), memory.policy_change.get("disabled"))
        return memory
    except BaseException:
        store.close()
        if database is not None:
            database.close()
        raise


__all__ = ["Memory", "open", "engine_for", "Fact", "TransitionRejected", "Reviser"]
