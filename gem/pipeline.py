"""The transition pipeline (specs/design.md §2, the paper's Algorithm 1), as named stages.

    operator         the operator proposes M_{t+1}, emitting events
    policies         matching policies run on the proposed state, FIFO, cascade bounded
    bound            C5 enforcement: past beta(n) the least relevant fields are hidden
    commit_policies  the `commit` event: constraint policies see the whole proposal
    conditions       C1-C6 on the units the transition touched
    output           the operator's result, built from the proposed state
    log              the transition-log record, chained by hash to the previous one
    flush            the proposal is written with a few batched statements and committed

The stages are declared once, in order (`STAGES`); a `Pipeline` is an ordered list of them
that a test or a tool can extend (`insert_after`) or shorten (`without`), which is how the
conditions are shown to reject broken transitions and how the benchmarks price the checks.
Each stage is a plain function of the transition and the engine it runs on. A stage that
raises ends the transition: nothing was written, so there is nothing to undo.
"""
from __future__ import annotations

import hashlib
import json
from dataclasses import asdict, dataclass
from itertools import chain, compress, groupby
from typing import TYPE_CHECKING, Any, Callable, Iterable

from . import attest, conditions, usage
from .errors import InvalidInput, TransitionRejected
from .operators.forget import attenuations, enforce_bound
from .rowhash import hasher
from .runtime import FactsDropped, PolicyRuntime
from .state.transition import Transition
from .store import queries
from .store.schema import TABLES, Row, owning_rel
from .units import TopicRef, dumps

if TYPE_CHECKING:
    from .engine import Engine


@dataclass(frozen=True)
class Stage:
    name: str
    run: Callable[[Transition, "Engine"], None]


class Pipeline:
    """An ordered list of named stages."""

    def __init__(self, stages: Iterable[Stage]) -> None:
        self.stages: tuple[Stage, ...] = tuple(stages)
        names = [s.name for s in self.stages]
        if len(set(names)) != len(names):
            raise InvalidInput(f"stage names must be unique: {names}")

    @property
    def names(self) -> list[str]:
        return [s.name for s in self.stages]

    def insert_after(self, name: str, stage: Stage) -> "Pipeline":
        """A pipeline with `stage` right after the stage called `name`."""
        if name not in self.names:
            raise InvalidInput(f"no stage named {name!r}; stages: {self.names}")
        i = self.names.index(name) + 1
        return Pipeline(self.stages[:i] + (stage,) + self.stages[i:])

    def without(self, name: str) -> "Pipeline":
        if name not in self.names:
            raise InvalidInput(f"no stage named {name!r}; stages: {self.names}")
        return Pipeline(s for s in self.stages if s.name != name)

    def run(self, t: Transition, engine: "Engine") -> None:
        progress, total = t.progress, len(self.stages)
        for i, stage in enumerate(self.stages):
            if progress is not None:
                progress(f"{t.op}: {stage.name}", i, total)
            stage.run(t, engine)
        if progress is not None:
            progress(f"{t.op}: committed", total, total)


# ---------------------------------------------------------------------- the stages
def run_operator(t: Transition, engine: "Engine") -> None:
    t.output = t.operator(t)


def run_policies(t: Transition, engine: "Engine | None" = None) -> None:
    """Evaluate matching policies on the proposed state, FIFO, with a bounded cascade."""
    policies_for = t.policies_for
    limit = int(t.settings["cascade_depth"])
    while t.events:
        event = t.events.popleft()
        policies = policies_for(event.name)
        if policies and event.depth > limit:
            raise TransitionRejected(
                "cascade", None,
                f"policy cascade deeper than cascade_depth={limit} at event {event.name!r}")
        for policy in policies:
            t.current_event, t.depth = event, event.depth
            try:
                policy.fire(event.bindings, PolicyRuntime(t))
            finally:
                t.current_event, t.depth = None, 0
    if t.dropped.keys() - t.skipping:
        # Facts this run recorded were dropped: what they caused must not be decided on, so
        # the transition starts again without them (gem/engine.py).
        raise FactsDropped(t.dropped)


def bound(t: Transition, engine: "Engine") -> None:
    enforce_bound(t)
    run_policies(t)


def commit_policies(t: Transition, engine: "Engine") -> None:
    t.emit("commit", op=t.op, touched=[TopicRef(x) for x in t.touched.topics])
    run_policies(t)


def check_conditions(t: Transition, engine: "Engine") -> None:
    conditions.check_transition(t)


def build_output(t: Transition, engine: "Engine") -> None:
    if callable(t.output):
        t.output = t.output(t)


def append_log(t: Transition, engine: "Engine") -> None:
    """The record of this transition: its content parts under one salted commitment, and the
    chain over its metadata, counters and that commitment (gem/attest.py)."""
    usage.charge(t.detail)  # what the hooks' model calls cost this transition (gem/usage.py)
    parts = {
        # (deduplicated in order, not as a set: a pass's fields come in runs already in id
        # order, which the sort then merges instead of sorting 1M ids from scratch)
        "units": sorted(dict.fromkeys(chain(t.touched.topics, t.touched.fields, t.touched.episodes))),
        "policies": runs_of(t.fired),
        "detail": {k: v for k, v in t.detail.items() if not k.startswith("_")},
        "salience": salience_changes(t),
        "writes": attested(t),
    }
    texts = {name: dumps(parts[name]) for name in attest.PARTS}
    salt = attest.new_salt()
    commit = attest.commitment_of_texts(salt, texts)
    counters = asdict(t.counters)
    previous = engine.derived.hash
    body = {"seq": t.seq, "scope": t.scope, "op": t.op, "event": t.event, "at": t.now.isoformat(),
            "actor": t.actor, "counters": counters, "tombstone": t.tombstone, "commit": commit}
    t.log_record = {
        "seq": t.seq, "scope": t.scope, "op": t.op, "event": t.event, "at": t.now,
        "actor": t.actor, **texts,
        "counters": dumps(counters), "tombstone": dumps(t.tombstone) if t.tombstone else "",
        "salt": salt, "commit": commit, "prev_hash": previous,
        "hash": chain_hash(previous, body)}


def attested(t: Transition) -> dict[str, str | None]:
    """unit -> content hash of every row this transition wrote (None: deleted), every typed
    edge it added or removed, and what its other writes attest (stored policies). A unit whose
    status alone moved down the ladder is attested by `detail.attenuated` (gem/attest.py)."""
    out: dict[str, str | None] = {}
    levels: dict[str, str] | None = None
    for table in ("Topic", "Field", "Entry", "Observation", "Flag", "Episode"):
        row_hash = hasher(table)  # attest.row_hash's hashes, as the audit makes them again
        for key, row in t.created[table].items():
            out[key] = row_hash(row)
        # (units moved in bulk, not in `updated`, changed their status alone: status_moves)
        updated = t.updated[table]
        for key in updated:
            props = updated[key]
            if len(props) == 1 and table in attest.LADDER:  # may be a ladder move too
                if levels is None:
                    levels = dict(attenuations(t.detail))
                if attest.ladder_attested(table, key, props, levels):
                    continue
            out[key] = row_hash(t.get(table, key))
        for key in t.deleted[table]:
            if key not in t.unlisted:
                out[key] = None
    for table, triples in t.rels_added.items():
        if table in attest.EDGE_KINDS:
            for a, b, props in triples:
                out[attest.edge_key(table, a, b)] = attest.edge_hash(table, props)
    for table, pairs in t.rels_removed.items():
        if table in attest.EDGE_KINDS:
            for a, b in pairs:
                out[attest.edge_key(table, a, b)] = None
    out.update(t.attested)
    return dict(sorted(out.items()))


def runs_of(fired: list[Any]) -> list[dict[str, Any]]:
    """The policies that fired, as stored: consecutive identical calls (same policy, event,
    action and evidence; a forgetting pass makes thousands) become one item with "n", the
    number of calls. `gem.audit.log_entry` lists every call again."""
    out: list[dict[str, Any]] = []
    last = None
    # Runs of one item (bulk moves repeat one: status_moves.move_many) are counted in C.
    for _, run in groupby(fired, key=id):
        f = next(run)
        n = 1 + len(list(run))
        evidence = dumps(f.evidence) if f.evidence else "{}"
        key = (f.policy, f.event, f.action, evidence)
        if key == last:
            out[-1]["n"] = out[-1].get("n", 1) + n
        else:
            out.append({"policy": f.policy, "event": f.event, "action": f.action,
                        "evidence": json.loads(evidence)})
            if n > 1:
                out[-1]["n"] = n
            last = key
    return out


def salience_changes(t: Transition) -> dict[str, list[Any]]:
    """unit -> [strength, last access] for every unit whose salience this transition changed
    (the log is where salience is written first; see gem/derived/)."""
    changed = dict(t.salience)
    for table in ("Topic", "Field", "Episode"):  # a unit's salience history starts with its creation
        changed.update((key, table) for key in t.created[table])
    out = {}
    for key in sorted(changed):
        row = t.get(changed[key], key)
        out[key] = [row["strength"], row["last_access"].isoformat()]
    return out


def chain_hash(previous: str, record: dict[str, Any]) -> str:
    """The next link: sha256 of the previous hash and the record's canonical body."""
    return hashlib.sha256((previous + dumps(record)).encode("utf-8")).hexdigest()


@dataclass(frozen=True)
class Writes:
    """What a transition writes: its created and updated rows, relationship changes, other
    store writes and its log record (the flush's whole input)."""
    created: dict[str, dict[str, Row]]
    updated: dict[str, dict[str, Row]]
    parent_of: dict[str, str]
    rels_added: dict[str, list[tuple[str, str, Row]]]
    rels_removed: dict[str, list[tuple[str, str]]]
    store_writes: tuple[Callable[[Any], None], ...]
    log_record: Row | None
    deleted: dict[str, dict[str, None]]
    salience: tuple[tuple[str, str, float, Any], ...] = ()  # written behind now: (table, key, strength, last)
    salience_seq: int | None = None                          # and the log position they reflect
    moved: dict[str, dict[str, str]] | None = None  # updates that set the status alone (ladder)

    @classmethod
    def of(cls, t: Transition) -> "Writes":
        return cls(t.created, t.updated, t.parent_of, t.rels_added, t.rels_removed,
                   tuple(t.store_writes), t.log_record, t.deleted, tuple(t.salience_written),
                   t.seq if t.salience_written else None, t.moved)


def write(tx: Any, w: Writes) -> None:
    """Creates (parents' tables first, each child with its owning relationship), relationship
    deletes, relationship creates, updates, other writes, the log record."""
    for table in ("Topic", "Field", "Entry", "Observation", "Flag", "Episode"):
        rows = list(w.created[table].values())
        if not rows:
            continue
        key = TABLES[table].key
        owned = [r for r in rows if r[key] in w.parent_of]
        free = [r for r in rows if r[key] not in w.parent_of]
        if free:
            queries.create_rows(tx, table, free)
        if owned:
            queries.create_rows(tx, table, owned, owning_rel(table), w.parent_of)
    for rel, pairs in w.rels_removed.items():
        if pairs:
            queries.delete_rels(tx, rel, pairs)
    for table in ("Observation", "Entry", "Flag", "Field", "Topic", "Episode"):  # children first
        if w.deleted[table]:
            queries.delete_rows(tx, table, list(w.deleted[table]))
    for rel, triples in w.rels_added.items():
        if triples:
            queries.create_rels(tx, rel, triples)
    # Salience written behind goes in the same statement as a row's other changes: one keyed
    # SET per row, not two (a forgetting pass updates the fields whose salience piled up).
    due = {(table, key): (strength, last) for table, key, strength, last in w.salience}
    for table, updates in w.updated.items():
        moved = (w.moved or {}).get(table) or {}  # the ladder's bulk moves: not in `updates`
        if not updates and not moved:
            continue
        changes: list[tuple[Any, Row]] = []
        for key, props in updates.items():
            salience = due.pop((table, key), None) if due else None
            if salience is not None:
                props = {**props, "strength": salience[0], "last_access": salience[1]}
            changes.append((key, props))
        joined: set[str] = set()  # moved units whose salience is due too: one SET for both
        for table_key in [tk for tk in due if tk[0] == table and tk[1] in moved] if moved else ():
            strength, last = due.pop(table_key)
            key = table_key[1]
            changes.append((key, {"status": moved[key], "strength": strength, "last_access": last}))
            joined.add(key)
        if changes:
            queries.update_rows(tx, table, changes)
        for status in set(moved.values()):  # one statement per status (a pass: two or three)
            keys = list(compress(moved, map(status.__eq__, moved.values())))
            queries.set_status(tx, table, [k for k in keys if k not in joined] if joined else keys,
                               status)
    for other in w.store_writes:
        other(tx)
    if w.salience_seq is not None:
        queries.write_salience(tx, [(table, key, s, last) for (table, key), (s, last) in due.items()],
                               w.salience_seq)
    if w.log_record is not None:
        queries.append_transition(tx, w.log_record)


def flush(t: Transition, engine: "Engine") -> None:
    """Write the proposal in one engine transaction; when enough salience changes have piled up
    behind the log, they go with it. The writes follow the log head the transition was computed
    on: where other processes write too, the store refuses them if one committed meanwhile
    (`WriteConflict`, and the engine runs the transition again)."""
    t.salience_written = engine.derived.salience_due(t)
    with engine.store.transaction(after=(engine.derived.seq, engine.derived.hash)) as tx:
        write(tx, Writes.of(t))


STAGES: tuple[Stage, ...] = (
    Stage("operator", run_operator),
    Stage("policies", lambda t, e: run_policies(t)),
    Stage("bound", bound),
    Stage("commit_policies", commit_policies),
    Stage("conditions", check_conditions),
    Stage("output", build_output),
    Stage("log", append_log),
    Stage("flush", flush),
)

DEFAULT = Pipeline(STAGES)

__all__ = ["Stage", "Pipeline", "STAGES", "DEFAULT", "Writes", "run_policies", "chain_hash", "write"]
