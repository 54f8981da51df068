"""The public API (design section 7): `gem.open(...)` returns a `Memory`."""
from __future__ import annotations

import hashlib
import json
import logging
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any, Callable, Iterable, Sequence

from . import conditions
from .embed import Embedder, default_embedder
from .engine import Engine, Summarizer, utc_now
from .errors import GemError, InvalidInput, TransitionRejected, UnknownUnit
from .model import AuditReport, Explanation, Fact, FieldView, HistoryEntry, IngestResult, \
    RetrieveResult, TopicView, Violation, as_utc
from .operators import forget as forget_op
from .operators import ingest as ingest_op
from .operators import revise as revise_op
from .operators import retrieve as retrieve_op
from .policy import PolicySet, default_policy_path, load_sources
from .reliability import evidence_states
from .resolve import Resolver, TieredResolver
from .runtime import add_edge, available_actions, field_evidence
from .store import open_store
from .transition import Transition
from .units import field_id

log = logging.getLogger("gem")


class Memory:
    """A governed evolving memory on one database. Use `gem.open(...)` to make one."""

    def __init__(self, engine: Engine) -> None:
        self._engine = engine
        self._closed = False
        self._scheduler = None
        self.maintenance_runs = 0      # scheduled maintenance runs that committed
        self.maintenance_failures = 0  # and those that were rolled back (to be retried)

    # ------------------------------------------------------------------ lifecycle
    @property
    def path(self) -> str:
        return self._engine.store.path

    @property
    def engine_name(self) -> str:
        return self._engine.store.engine

    def close(self) -> None:
        if not self._closed:
            self.stop_maintenance()
            self._closed = True
            self._engine.store.close()

    def __enter__(self) -> "Memory":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def _check_open(self) -> None:
        if self._closed:
            raise GemError("this memory is closed")

    # ------------------------------------------------------------------ operators
    def ingest(self, facts: Fact | Iterable[Fact], *, actor: str = "api") -> IngestResult:
        """Integrate one fact or a list of facts, as one transition."""
        self._check_open()
        batch = [facts] if isinstance(facts, Fact) else list(facts)
        for i, fact in enumerate(batch):
            if not isinstance(fact, Fact):
                raise InvalidInput(f"facts[{i}] is a {type(fact).__name__}, not a gem.Fact")
        if not batch:
            raise InvalidInput("ingest needs at least one fact")
        summary, t = self._engine.run("ingest", lambda t: ingest_op.ingest(t, batch),
                                      actor=actor, interaction=True)
        return IngestResult(transition=self._engine.seq, topics=list(t.touched.topics),
                            created_topics=summary["created_topics"], entries=summary["entries"],
                            corroborations=summary["corroborations"], denials=summary["denials"],
                            flagged=list(t.touched.flagged))

    def retrieve(self, query: str | None = None, topic: str | None = None,
                 fields: Sequence[str] | None = None, as_of: datetime | None = None,
                 history: bool = False, include_archived: bool = False, k: int = 5,
                 *, actor: str = "api") -> RetrieveResult:
        """Read the memory. A transition: everything returned is reinforced (C6)."""
        self._check_open()
        if query is not None and not isinstance(query, str):
            raise InvalidInput("query must be a string")
        if topic is not None and (not isinstance(topic, str) or not topic.strip()):
            raise InvalidInput("topic must be a non-empty string")
        if isinstance(fields, str):
            raise InvalidInput("fields must be a list of field names, not a string")
        if not isinstance(k, int) or isinstance(k, bool) or k < 1:
            raise InvalidInput("k must be a positive integer")
        request = retrieve_op.Request(
            query=query.strip() if query else None, topic=topic,
            fields=None if fields is None else tuple(fields),
            as_of=None if as_of is None else as_utc(as_of, "as_of"),
            history=bool(history), include_archived=bool(include_archived), k=k)
        result, _ = self._engine.run("retrieve", lambda t: retrieve_op.retrieve(t, request),
                                     actor=actor, interaction=True)
        return result.model_copy(update={"transition": self._engine.seq})

    def link(self, src: str, dst: str, kind: str = "extension", *, actor: str = "api") -> bool:
        """Add a typed edge: `extension` (a change on src may entail one on dst) or
        `association` (retrieval context only). Returns False if it already existed."""
        self._check_open()
        if kind not in ("extension", "association"):
            raise InvalidInput(f"kind must be 'extension' or 'association', got {kind!r}")

        def op(t: Transition) -> bool:
            directory = self._engine.directory(t)
            a, b = directory.lookup(src), directory.lookup(dst)
            for name, tid in ((src, a), (dst, b)):
                if tid is None:
                    raise UnknownUnit(f"no topic named {name!r}")
            return add_edge(t, a, b, kind, source=actor)

        created, _ = self._engine.run("link", op, actor=actor)
        return created

    def forget(self, *, actor: str = "maintenance") -> dict[str, Any]:
        """A forgetting pass: the `tick` policies move faded units down the ladder."""
        self._check_open()
        _, t = self._engine.run("forget", forget_op.forget, actor=actor, event="tick")
        done = t.detail.get("attenuated", [])
        return {"transition": self._engine.seq,
                "attenuated": list(dict.fromkeys(unit for unit, _ in done)),
                "levels": [tuple(x) for x in done]}

    def revise(self, *, actor: str = "maintenance") -> dict[str, Any]:
        """A revision pass; each repair (merge, conflicts, dependency repair) is its own
        transition, so one that is rejected does not undo the others."""
        self._check_open()
        engine = self._engine
        report: dict[str, Any] = {"merged": [], "conflicts": [], "flags_evaluated": []}
        pairs = self._read(lambda t: revise_op.duplicate_pairs(t, t.settings["merge_similarity"]))
        for keep, away in pairs:
            engine.run("revise", lambda t: revise_op.merge_topics(t, keep, away),
                       actor=actor, event="merge")
            report["merged"].append((keep, away))
        fids = self._read(revise_op.conflicting_fields)
        if fids:
            engine.run("revise", lambda t: revise_op.settle_conflicts(t, fids), actor=actor,
                       event="conflicts")
            report["conflicts"] = fids
        tids = self._read(revise_op.open_flag_topics)
        if tids:
            engine.run("revise", lambda t: revise_op.evaluate_flags(t, tids), actor=actor,
                       event="dependency_repair")
            report["flags_evaluated"] = tids
        return report

    def maintain(self, *, actor: str = "maintenance") -> dict[str, Any]:
        """One maintenance run: forget, then revise."""
        return {"forget": self.forget(actor=actor), "revise": self.revise(actor=actor)}

    def restore(self, topic: str, field: str | None = None, *, actor: str = "api") -> bool:
        """Reverse any forgetting level of a topic (and one of its fields)."""
        self._check_open()

        def op(t: Transition) -> bool:
            tid = self._topic_id(t, topic)
            if tid is None:
                raise UnknownUnit(f"no topic named {topic!r}")
            fid = None
            if field is not None:
                fid = field_id(tid, field)
                if t.field_row(fid) is None:
                    raise UnknownUnit(f"topic {topic!r} has no field {field!r}")
            return forget_op.restore(t, tid, fid)

        changed, _ = self._engine.run("restore", op, actor=actor)
        return changed

    def start_maintenance(self, every: float | timedelta = 3600.0) -> None:
        """Run `maintain` in the background every `every` seconds (APScheduler). Runs are
        serialised with client transitions by the store's write lock; a failing run is
        logged and retried at the next interval, never half-applied."""
        from apscheduler.schedulers.background import BackgroundScheduler
        self._check_open()
        seconds = every.total_seconds() if isinstance(every, timedelta) else float(every)
        if seconds <= 0:
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
        engine = self._engine
        with engine.store.reading() as tx:
            engine.sync()
            t = Transition(engine, tx, "read", "api", engine.clock(), engine.counters)
            t.settings = engine.evaluate_settings(t)
            return fn(t)

    def _topic_id(self, t: Transition, topic: str) -> str | None:
        if not isinstance(topic, str) or not topic.strip():
            raise InvalidInput("topic must be a non-empty string")
        return self._engine.directory(t).lookup(topic)

    def inspect(self, topic: str, field: str | None = None) -> TopicView | FieldView | None:
        def read(t: Transition) -> TopicView | FieldView | None:
            tid = self._topic_id(t, topic)
            if tid is None:
                return None
            if field is None:
                return retrieve_op.topic_view(t, tid, flags=True)
            fid = field_id(tid, field)
            return None if t.field_row(fid) is None else retrieve_op.field_view(t, fid)
        return self._read(read)

    def history(self, topic: str, field: str) -> list[HistoryEntry]:
        """The field's full value history, compressed and retracted entries included."""
        def read(t: Transition) -> list[HistoryEntry]:
            fid = self._require_field(t, topic, field)
            entries = sorted(t.entries(fid), key=lambda e: (e["valid_at"], e["recorded_at"], e["seq"]))
            return [retrieve_op.history_entry(t, e) for e in entries]
        return self._read(read)

    def explain(self, topic: str, field: str) -> Explanation:
        """The evidence chain behind a field's current value, with its reliability R."""
        def read(t: Transition) -> Explanation:
            fid = self._require_field(t, topic, field)
            decay = t.settings["reliability_decay"]
            states = evidence_states(field_evidence(t, fid), decay)
            current = t.current_entry(fid)
            entries = sorted(t.entries(fid), key=lambda e: (e["valid_at"], e["recorded_at"], e["seq"]))
            return Explanation(
                topic=t.field_row(fid)["topic_id"], field=field,
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
        if not isinstance(field, str) or t.field_row(field_id(tid, field)) is None:
            raise UnknownUnit(f"topic {topic!r} has no field {field!r}")
        return field_id(tid, field)

    def stats(self) -> dict[str, Any]:
        """Sizes of the state: the active footprint (C5) and everything kept behind it."""
        def read(t: Transition) -> dict[str, Any]:
            topics = dict(t.query("MATCH (x:Topic) RETURN x.status, count(*)"))
            fields = dict(t.query("MATCH (x:Topic)-[:HAS_FIELD]->(f:Field) RETURN "
                                  "CASE WHEN x.status = 'archived' THEN 'archived' "
                                  "ELSE f.status END, count(*)"))
            entries = t.query("MATCH (e:Entry) RETURN count(*), "
                              "sum(CASE WHEN e.active = true THEN 1 ELSE 0 END)")[0]  # kuzu 0.11.3 miscounts a bare boolean in CASE
            return {"topics": topics, "fields": fields,
                    "active_fields": fields.get("active", 0),
                    "entries": entries[0], "active_entries": int(entries[1] or 0),
                    "interactions": self._engine.counters.interactions,
                    "active_bound": self._engine.active_bound(t),
                    "transitions": self._engine.seq}
        return self._read(read)

    def transitions(self, since: int = 0) -> list[dict[str, Any]]:
        """The transition log from `since` on: op, time, actor, units, policies fired, hashes."""
        def read(t: Transition) -> list[dict[str, Any]]:
            rows = t.query("MATCH (x:Transition) WHERE x.seq > $s RETURN x.seq, x.op, x.event, "
                           "x.at, x.actor, x.units, x.policies, x.detail, x.prev_hash, x.hash "
                           "ORDER BY x.seq", {"s": since})
            return [{"seq": r[0], "op": r[1], "event": r[2], "at": r[3], "actor": r[4],
                     "units": json.loads(r[5]), "policies": json.loads(r[6]),
                     "detail": json.loads(r[7]), "prev_hash": r[8], "hash": r[9]} for r in rows]
        return self._read(read)

    def audit(self) -> AuditReport:
        """C1-C6 over the whole state, and the hash chain of the transition log."""
        def read(t: Transition) -> AuditReport:
            checked, found = conditions.audit(t)
            return AuditReport(ok=not found, checked=checked,
                               violations=[Violation(condition=c, unit=u, detail=d)
                                           for c, u, d in found],
                               transitions=self._engine.seq, chain_ok=True)
        report = self._read(read)
        chain_ok, broken_at = self._verify_chain()
        if not chain_ok:
            extra = Violation(condition="log", unit=str(broken_at),
                              detail="transition log hash chain is broken here")
            report = report.model_copy(update={"ok": False, "chain_ok": False,
                                               "violations": [*report.violations, extra]})
        return report

    def _verify_chain(self) -> tuple[bool, int | None]:
        from .engine import GENESIS
        from .transition import dumps
        previous = GENESIS
        for record in self.transitions():
            body = dumps({"seq": record["seq"], "op": record["op"], "event": record["event"],
                          "at": record["at"].isoformat(), "actor": record["actor"],
                          "units": record["units"], "policies": record["policies"],
                          "detail": record["detail"]})
            digest = hashlib.sha256((previous + body).encode("utf-8")).hexdigest()
            if record["prev_hash"] != previous or record["hash"] != digest:
                return False, record["seq"]
            previous = record["hash"]
        return True, None

    # ------------------------------------------------------------------ policies
    @property
    def policies(self) -> PolicySet:
        return self._engine.policies

    def load_policies(self, paths: Sequence[str | Path], *, actor: str = "api") -> PolicySet:
        """Check, compile and store a new policy set as one transition. A set with any
        error is refused whole (PolicySyntaxError / PolicyCheckError) and the previous
        set stays in force."""
        self._check_open()
        sources = []
        for p in paths:
            path = Path(p)
            try:
                sources.append((str(p), path.read_text(encoding="utf-8")))
            except OSError as exc:
                raise InvalidInput(f"cannot read policy file {str(p)!r}: {exc.strerror}") from None
        return self._install(sources, actor)

    def _install(self, sources: list[tuple[str, str]], actor: str) -> PolicySet:
        policy_set = load_sources(sources, available_actions=available_actions())

        def op(t: Transition) -> None:
            stored = {r[0] for r in t.query("MATCH (p:Policy) RETURN p.name")}
            for policy in policy_set.policies:
                params = {"n": policy.name, "f": policy.span.file, "s": policy.source,
                          "h": policy.source_hash, "at": t.now}
                if policy.name not in stored:
                    t.query("CREATE (:Policy {name: $n, file: $f, source: $s, hash: $h, "
                            "version: 1, enabled: true, loaded_at: $at})", params)
                else:
                    t.query("MATCH (p:Policy {name: $n}) SET p.version = p.version + "
                            "CASE WHEN p.hash = $h AND p.enabled THEN 0 ELSE 1 END, "
                            "p.file = $f, p.source = $s, p.hash = $h, p.enabled = true, "
                            "p.loaded_at = $at", params)
            names = {p.name for p in policy_set.policies}
            for name in stored - names:
                t.query("MATCH (p:Policy {name: $n}) SET p.enabled = false", {"n": name})
            # The files themselves are kept too: settings live outside any policy.
            t.query("MATCH (m:Meta {key: 'policy_sources'}) DELETE m")
            t.query("CREATE (:Meta {key: 'policy_sources', value: $v})",
                    {"v": json.dumps([[s.file, s.text] for s in policy_set.sources])})
            t.detail["policies"] = sorted(names)
            t.detail["policy_set_hash"] = policy_set.hash

        engine = self._engine
        previous = engine.policies
        engine.install_policies(policy_set)  # the new set governs its own load transition
        try:
            engine.run("policy", op, actor=actor)
        except BaseException:
            engine.install_policies(previous)
            raise
        return policy_set

    def _stored_sources(self) -> list[tuple[str, str]] | None:
        with self._engine.store.reading() as tx:
            value = tx.scalar("MATCH (m:Meta {key: 'policy_sources'}) RETURN m.value")
        return None if value is None else [tuple(x) for x in json.loads(value)]


def open(path: str | Path | None = None, policies: Sequence[str | Path] | None = None,
         embedder: Embedder | None = None, resolver: Resolver | None = None,
         clock: Callable[[], datetime] | None = None, engine: str = "kuzu",
         summarizer: Summarizer | None = None, create: bool = True) -> Memory:
    """Open (or create) a memory. `path=None` makes a temporary database removed on close.

    `policies`: .policy files to govern it; by default the policies stored in the
    database, or `policies/default.policy` for a new one. `create=False` refuses a
    path where no database exists (a mistyped path would otherwise make a new one).
    """
    if policies is not None and isinstance(policies, (str, Path)):
        raise InvalidInput("policies must be a list of paths")
    if not create and path is not None and not Path(path).exists():
        raise InvalidInput(f"no database at {str(path)!r}")
    store = open_store(None if path is None else str(path), engine)
    try:
        system_clock = clock or utc_now

        def checked_clock() -> datetime:
            return as_utc(system_clock(), "clock()")

        core = Engine(store, embedder or default_embedder(), resolver or TieredResolver(),
                      checked_clock, summarizer)
        memory = Memory(core)
        stored = memory._stored_sources()
        if policies is not None:
            memory.load_policies(list(policies))
        elif stored is not None:
            core.install_policies(load_sources(stored, available_actions=available_actions()))
        else:
            memory.load_policies([default_policy_path()])
        return memory
    except BaseException:
        store.close()
        raise


__all__ = ["Memory", "open", "Fact", "TransitionRejected"]
