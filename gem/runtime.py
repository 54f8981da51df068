"""What a compiled policy sees of the proposed state, and the actions it may take.

`PolicyRuntime` answers attribute reads, relational names and functions against a
transition's proposed state, and runs actions as state-level primitives inside the same
transition. Actions are registered by name so each operator module (forget, revise) brings
its own; an action the engine does not register is refused when the policy set is checked,
never at run time.
"""
from __future__ import annotations

import json
from datetime import datetime
from typing import Any, Callable

import numpy as np

from .errors import InvalidInput, TransitionRejected
from .history import is_retraction
from .places import place_record
from .operators.common import (add_edge, entry_value, field_evidence, field_ref, provenance_of,
                               settle_current)
from .reliability import evidence_states
from .salience import strength_of
from .state.events import Fired
from .state.transition import Transition
from .store import queries
from .store.schema import EDGE_TABLES
from .units import EdgeRef, EntryRef, EpisodeRef, FieldRef, TopicRef, dumps

ActionFn = Callable[["PolicyRuntime", list[Any], dict[str, Any], str], None]
ACTIONS: dict[str, ActionFn] = {}
# Runs a policy's tick plan set-at-a-time (gem/operators/tick_plan.py registers it): the
# number of action calls made, or None when the policy must be evaluated per unit.
PlanRunner = Callable[["PolicyRuntime", Any, dict[str, Any]], "int | None"]
PLAN_RUNNERS: list[PlanRunner] = []

# The event binding naming the fact an ingest event is about. Not a name a policy can write,
# so no policy sees it; `drop` reads it to leave out exactly the fact the event is about.
FACT = "#fact"


class FactsDropped(Exception):
    """Policies dropped facts of this transition: the engine runs it again without them (not
    an error: nothing of the first run is kept, and the log records the drops)."""

    def __init__(self, dropped: dict[int, dict[str, Any]]) -> None:
        super().__init__(f"facts dropped: {sorted(dropped)}")
        self.dropped = dict(dropped)

ACTIVE = frozenset({"active"})
VISIBLE = frozenset({"active", "compressed"})


def action(name: str) -> Callable[[ActionFn], ActionFn]:
    def register(fn: ActionFn) -> ActionFn:
        ACTIONS[name] = fn
        return fn
    return register


def available_actions() -> frozenset[str]:
    return frozenset(ACTIONS)


def topic_summary(t: Transition, tid: str) -> str:
    """The topic's summary in the proposed state (title and current visible values)."""
    row = t.topic(tid)
    assert row is not None
    values = {}
    for fid in t.field_ids(tid):
        f = t.field_row(fid)
        current = t.current_entry(fid)
        if f is not None and f["status"] != "hidden" and current is not None \
                and not is_retraction(current):
            values[f["name"]] = entry_value(current)
    return t.services.summarizer(row["title"], values)


class PolicyRuntime:
    """The `PolicyRuntime` protocol of gem.policy.compiler, over one transition."""

    def __init__(self, transition: Transition) -> None:
        self.t = transition

    # -------------------------------------------------------------- attributes
    def attribute(self, obj: Any, name: str) -> Any:
        if obj is None:
            return None
        t = self.t
        if isinstance(obj, TopicRef):
            row = t.topic(obj.id)
            if row is None:
                return None
            if name == "salience":
                return t.salience_now(row)
            if name == "fields":
                return [field_ref(t, f) for f in t.field_ids(obj.id)]
            if name == "field_count":
                return len(t.field_ids(obj.id))
            if name == "flags":
                return [{"id": g["id"], "origin": g["origin_id"], "policy": g["policy"],
                         "evidence": json.loads(g["evidence"])} for g in t.open_flags(obj.id)]
            if name == "summary":
                return topic_summary(t, obj.id)
            if name == "updated_at":  # derived, so no update of a value rewrites its topic
                recorded = [e["recorded_at"] for f in t.field_ids(obj.id) for e in t.entries(f)]
                return max(recorded, default=row["created_at"])
            if name == "id":
                return obj.id
            return row.get(name)
        if isinstance(obj, FieldRef):
            row = t.field_row(obj.id)
            if row is None:
                return None
            if name == "salience":
                return t.salience_now(row)
            if name == "topic":
                return TopicRef(obj.topic_id)
            if name == "history_length":
                return sum(1 for e in t.entries(obj.id) if e["active"])
            if name in ("value", "current"):
                current = t.current_entry(obj.id)
                if current is None:
                    return None
                return entry_value(current) if name == "value" else EntryRef(current["id"], obj.id)
            return row.get(name)
        if isinstance(obj, EntryRef):
            row = t.entry(obj.id)
            if row is None:
                return None
            if name == "value":
                return entry_value(row)
            if name == "provenance":
                return provenance_of(row)
            if name == "place":
                return place_record(row)
            if name == "field":
                return field_ref(t, obj.field_id)
            if name == "topic":
                return TopicRef(field_ref(t, obj.field_id).topic_id)
            return row.get(name)
        if isinstance(obj, EpisodeRef):
            row = t.row("Episode", obj.id)
            if row is None:
                return None
            if name == "salience":
                return t.salience_now(row)
            if name == "place":
                return place_record(row)
            return row.get(name)
        if isinstance(obj, EdgeRef):
            if name == "created_at":
                edge = t.edge(EDGE_TABLES[obj.kind], obj.source, obj.target)
                return None if edge is None else edge[3].get("created_at")
            return {"kind": obj.kind, "source": TopicRef(obj.source),
                    "target": TopicRef(obj.target)}.get(name)
        if isinstance(obj, dict):
            return obj.get(name)
        raise InvalidInput(f"no attribute {name!r} on {type(obj).__name__}")

    # -------------------------------------------------------------- relations
    def relation(self, name: str, bindings: dict[str, Any], salience_below: float | None = None) -> Any:
        """A relational name. `salience_below` is a hint from the compiler: the caller keeps
        only units whose salience is under it, so a superset of those may be returned."""
        t = self.t
        if name == "interactions":
            return t.counters.interactions
        if name == "scope":
            return t.scope
        if name in ("dependent_topic", "associated_topic"):
            topic = bindings.get("topic")
            if not isinstance(topic, TopicRef):
                return []
            ids = t.dependents(topic.id) if name == "dependent_topic" else t.associates(topic.id)
            return [TopicRef(x) for x in ids]
        below = salience_below if isinstance(salience_below, (int, float)) else None
        if name in ("active_fields", "visible_fields"):
            fids = t.field_ids_where(ACTIVE if name == "active_fields" else VISIBLE, below)
            t.prefetch("Field", fids)
            refs = []
            for fid in fids:
                row = t.field_row(fid)
                assert row is not None
                refs.append(FieldRef(fid, row["topic_id"], row["name"]))
            t.siblings("Field", fids)
            return refs
        if name == "active_topics":
            tids = t.topic_ids_where(ACTIVE, below)
            t.siblings("Topic", tids)
            return [TopicRef(x) for x in tids]
        if name == "flagged_topics":
            return [TopicRef(x) for x in t.flagged_topics()]
        if name in ("active_episodes", "visible_episodes"):
            eids = t.episode_ids_where(ACTIVE if name == "active_episodes" else VISIBLE, below)
            t.prefetch("Episode", eids)
            return [EpisodeRef(x) for x in eids]
        if name == "said_before":
            return said_before(t, bindings.get("episode"))
        raise InvalidInput(f"unknown relational name {name!r}")

    # -------------------------------------------------------------- functions
    def function(self, name: str, args: list[Any]) -> Any:
        t = self.t
        if name == "now":
            return t.now
        if name == "age":
            (x,) = args
            if isinstance(x, datetime):
                return t.now - x
            when = self.attribute(x, "last_access" if isinstance(x, (TopicRef, FieldRef))
                                  else "recorded_at")
            return None if when is None else t.now - when
        if name == "count":
            (x,) = args
            return 0 if x is None else len(x)
        if name in ("min", "max"):
            return (min if name == "min" else max)(args)
        if name == "abs":
            return abs(args[0])
        if name == "reliability" or name.startswith("state_"):
            (f,) = args
            if not isinstance(f, FieldRef):
                return None
            states = evidence_states(field_evidence(t, f.id), t.settings["reliability_decay"])
            return {"reliability": states.reliability, "state_action": states.action,
                    "state_inaction": states.inaction, "state_conflict": states.conflict,
                    "state_ignorance": states.ignorance}[name]
        if name == "similarity":
            a, b = (self._vector(x) for x in args)
            return float(np.dot(a, b))
        raise InvalidInput(f"unknown function {name!r}")

    def _vector(self, x: Any) -> np.ndarray:
        text = topic_summary(self.t, x.id) if isinstance(x, TopicRef) else str(x)
        return self.t.services.embedder.embed([text])[0]

    def run_plan(self, policy: Any, bindings: dict[str, Any]) -> int | None:
        event = self.t.current_event
        if not PLAN_RUNNERS or event is None or event.name != "tick":
            return None
        return PLAN_RUNNERS[0](self, policy, bindings)

    # -------------------------------------------------------------- actions
    def act(self, action_name: str, args: list[Any], evidence: dict[str, Any], policy: str,
            span: Any = None) -> None:
        t = self.t
        if t.progress is not None and len(t.fired) % 1000 == 999:
            # How many actions the policies will call is not known before they run: total 0.
            t.progress(f"{t.op}: policy actions", len(t.fired) + 1, 0)
        event = self.t.current_event
        self.t.record_fired(Fired(policy, event.name if event else "", action_name,
                                  tuple(args), dict(evidence)))
        try:
            ACTIONS[action_name](self, list(args), dict(evidence), policy)
        except (TypeError, ValueError, InvalidInput) as exc:
            # A policy that checked clean met a value it cannot act on (null, wrong type, a
            # self-edge): the transition is refused as a policy failure, never a crash.
            raise TransitionRejected("policy", policy,
                                     f"{action_name}({', '.join(map(str, args))}) failed: {exc}") from None

    @property
    def event_topic(self) -> TopicRef | None:
        event = self.t.current_event
        topic = event.bindings.get("topic") if event else None
        return topic if isinstance(topic, TopicRef) else None


def _unit(x: Any) -> tuple[str, str] | None:
    if isinstance(x, TopicRef):
        return ("Topic", x.id)
    if isinstance(x, FieldRef):
        return ("Field", x.id)
    if isinstance(x, EpisodeRef):
        return ("Episode", x.id)
    return None


# A speaker's earlier episodes a policy sees (`said_before`): the latest ones, for a rule that
# compares what one says now with what they said lately, not an index of everything said.
SAID_BEFORE = 100


def said_before(t: Transition, episode: Any) -> list[EpisodeRef]:
    """The latest episodes (at most SAID_BEFORE) the speaker of `episode` said before it, newest
    first: the committed ones and those this transition recorded, as the proposed state holds
    them. None for an episode without a speaker (whose they are is unknown)."""
    row = t.row("Episode", episode.id) if isinstance(episode, EpisodeRef) else None
    if row is None or row["speaker"] is None:
        return []
    with t.cache.store.reading() as tx:
        committed = queries.latest_episodes_of(tx, t.scope, row["speaker"], SAID_BEFORE + 1)
    t.prefetch("Episode", committed)
    found = {eid: r for eid in [*committed, *t.created["Episode"]]
             if (r := t.row("Episode", eid)) is not None and eid != row["id"]
             and r["speaker"] == row["speaker"] and (r["at"], r["seq"]) < (row["at"], row["seq"])}
    newest = sorted(found, key=lambda eid: (found[eid]["at"], found[eid]["seq"]), reverse=True)
    return [EpisodeRef(eid) for eid in newest[:SAID_BEFORE]]


# ---------------------------------------------------------------------- base actions
@action("flag_for_revision")
def _flag_for_revision(rt: PolicyRuntime, args: list[Any], evidence: dict[str, Any],
                       policy: str) -> None:
    flag_topic(rt, args[0], evidence, policy)


@action("propagate")
def _propagate(rt: PolicyRuntime, args: list[Any], evidence: dict[str, Any], policy: str) -> None:
    # Propagation flags the topic and lets its own `flagged` policies run now, in this
    # transition, instead of waiting for the next revision pass.
    flag_topic(rt, args[0], {**evidence, "propagated": True}, policy)


def flag_topic(rt: PolicyRuntime, target: Any, evidence: dict[str, Any], policy: str) -> None:
    """Flag `target` for revision. `WITH evidence = {...}` is the flag's evidence (Listing 1);
    without it, the whole WITH record is."""
    if isinstance(evidence.get("evidence"), dict):
        evidence = evidence["evidence"]
    t = rt.t
    if not isinstance(target, TopicRef) or t.topic(target.id) is None:
        return
    if not t.once("flag", target.id):
        return  # a topic is flagged at most once per transition: cascades stay bounded
    origin = rt.event_topic
    t.new_flag(target.id, origin.id if origin else None, policy, dumps(evidence))
    t.emit("flagged", topic=target, origin=origin, evidence=dict(evidence))


@action("reinforce")
def _reinforce(rt: PolicyRuntime, args: list[Any], evidence: dict[str, Any], policy: str) -> None:
    unit = _unit(args[0])
    if unit is None or not rt.t.once("reinforce", policy, *unit):
        return
    amount = float(args[1]) if len(args) > 1 and args[1] is not None \
        else float(rt.t.settings["reinforce_amount"])
    rt.t.reinforce(*unit, amount)


@action("set_salience")
def _set_salience(rt: PolicyRuntime, args: list[Any], evidence: dict[str, Any],
                  policy: str) -> None:
    unit = _unit(args[0])
    if unit is None or rt.t.row(*unit) is None:
        return
    value = float(args[1])
    if not 0.0 <= value < 1.0:
        raise TransitionRejected("policy", policy, f"set_salience needs a value in [0, 1), got {value}")
    rt.t.update(*unit, strength=strength_of(value), last_access=rt.t.now)


@action("annotate")
def _annotate(rt: PolicyRuntime, args: list[Any], evidence: dict[str, Any], policy: str) -> None:
    target, key, value = args
    table = {TopicRef: "Topic", FieldRef: "Field", EntryRef: "Entry",
             EpisodeRef: "Episode"}.get(type(target))
    if table is None:
        return
    row = rt.t.row(table, target.id)
    if row is None:
        return
    notes = json.loads(row["annotations"] or "{}")
    notes[str(key)] = json.loads(dumps({"v": value}))["v"]
    rt.t.update(table, target.id, annotations=dumps(notes))


@action("mark_stale")
def _mark_stale(rt: PolicyRuntime, args: list[Any], evidence: dict[str, Any], policy: str) -> None:
    """Mark an episode stale: a later one contradicts it (gem/operators/stale.py shows the mark;
    a later contradiction replaces an earlier one's)."""
    old, new = args
    if not isinstance(old, EpisodeRef) or not isinstance(new, EpisodeRef):
        return
    t = rt.t
    said, later = t.row("Episode", old.id), t.row("Episode", new.id)
    if said is None or later is None:
        return
    if later["at"] <= said["at"]:
        raise ValueError(f"episode {new.id} was not said after episode {old.id}")
    marked = t.row("Episode", said["contradicted_by"]) if said["contradicted_by"] else None
    if marked is not None and marked["at"] >= later["at"]:
        return
    t.update("Episode", old.id, contradicted_by=new.id)
    t.touched.episodes[old.id] = None


@action("drop")
def _drop(rt: PolicyRuntime, args: list[Any], evidence: dict[str, Any], policy: str) -> None:
    """Leave out the fact that recorded `entry` in this transition (the one the event is about,
    when it stated that entry; else every fact of this transition that did). An entry no fact
    of this transition stated (a committed one, or a tick's) has nothing to drop."""
    entry, reason = args
    if not isinstance(entry, EntryRef):
        return
    t = rt.t
    facts = t.detail.get("_fact_of_entry", {}).get(entry.id, [])
    event = t.current_event
    about = event.bindings.get(FACT) if event is not None else None
    for n in [about] if isinstance(about, int) and about in facts else facts:
        t.dropped.setdefault(n, {"reason": "dropped by policy" if reason is None else str(reason),
                                 "policy": policy})


@action("reject")
def _reject(rt: PolicyRuntime, args: list[Any], evidence: dict[str, Any], policy: str) -> None:
    message = str(args[0]) if args else "rejected by policy"
    raise TransitionRejected("policy", policy, message)


@action("contest")
def _contest(rt: PolicyRuntime, args: list[Any], evidence: dict[str, Any], policy: str) -> None:
    f = args[0]
    if isinstance(f, FieldRef) and rt.t.field_row(f.id) is not None:
        rt.t.update("Field", f.id, contested=True)
        rt.t.touch_field(f.id, f.topic_id)


@action("link")
def _link(rt: PolicyRuntime, args: list[Any], evidence: dict[str, Any], policy: str) -> None:
    a, b, kind = args
    if isinstance(a, TopicRef) and isinstance(b, TopicRef):
        add_edge(rt.t, a.id, b.id, str(kind), source=f"policy:{policy}")


@action("supersede")
def _supersede(rt: PolicyRuntime, args: list[Any], evidence: dict[str, Any], policy: str) -> None:
    """Retract an entry; the field's current value becomes the best remaining entry."""
    e = args[0]
    if not isinstance(e, EntryRef):
        return
    t = rt.t
    row = t.entry(e.id)
    if row is None or row["status"] != "current" or not t.once("supersede", e.id):
        return
    t.update("Entry", e.id, status="retracted")
    t.touched.entries[e.id] = None
    fid = row["field_id"]
    settle_current(t, fid)
    replacement = t.current_entry(fid)
    if replacement is not None:  # keep the provenance link to what took its place
        t.link_successor(row, replacement)
    f = field_ref(t, fid)
    t.touch_field(fid, f.topic_id)
    t.content_changed(f.topic_id)
    t.emit("superseded", topic=TopicRef(f.topic_id), field=f, entry=e,
           by=EntryRef(replacement["id"], fid) if replacement else None)
