"""What a compiled policy sees of the proposed state, and the actions it may take.

`PolicyRuntime` answers attribute reads, relational names and functions against the
transition's proposed state, and runs actions as state-level primitives inside the
same transition. Actions are registered by name so each operator module (forget,
revise) brings its own; an action the engine does not register is refused when the
policy set is checked, never at run time.
"""
from __future__ import annotations

import json
from datetime import datetime
from typing import Any, Callable

import numpy as np

from .errors import InvalidInput, TransitionRejected
from .reliability import Observation as EvidenceObservation, evidence_states
from .transition import Fired, Transition, decode_vector
from .units import EDGE_TABLES, EdgeRef, EntryRef, FieldRef, TopicRef

ActionFn = Callable[["PolicyRuntime", list[Any], dict[str, Any], str], None]
ACTIONS: dict[str, ActionFn] = {}


def action(name: str) -> Callable[[ActionFn], ActionFn]:
    def register(fn: ActionFn) -> ActionFn:
        ACTIONS[name] = fn
        return fn
    return register


def available_actions() -> frozenset[str]:
    return frozenset(ACTIONS)


def field_ref(t: Transition, fid: str) -> FieldRef:
    row = t.field_row(fid)
    return FieldRef(fid, row["topic_id"], row["name"])


def entry_value(row: dict[str, Any]) -> Any:
    return json.loads(row["value"])


def provenance_of(row: dict[str, Any]) -> dict[str, Any]:
    return {k: row[k] for k in ("source", "actor", "ref", "confidence", "polarity")}


def field_evidence(t: Transition, fid: str,
                   assume_current: dict[str, Any] | None = None) -> list[EvidenceObservation]:
    """The evidence sequence F of the field's current value (design section 6).

    Observations of the same value count with their own polarity. Observations of another
    value count against it only when they claim the same or a later time than its latest
    statement: an older value that was superseded is history, not a contradiction. `assume_current` assesses a
    candidate of a contested field instead of the current value.
    """
    current = assume_current or t.current_entry(fid)
    if current is None:
        return []
    sequence = []
    for entry in t.entries(fid):
        same = entry["value"] == current["value"]
        for obs in [entry, *t.observations(entry["id"])]:
            if same:
                polarity = obs["polarity"]
            elif obs["polarity"] == "+" and obs["valid_at"] >= current["asserted_at"]:
                polarity = "-"
            else:
                continue
            sequence.append(EvidenceObservation(polarity, float(obs["confidence"]),
                                                obs["valid_at"]))
    return sequence


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
                return self._open_flags(obj.id)
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
            if name == "field":
                return field_ref(t, obj.field_id)
            if name == "topic":
                return TopicRef(t.field_row(obj.field_id)["topic_id"])
            return row.get(name)
        if isinstance(obj, EdgeRef):
            if name == "created_at":
                rows = t.query(f"MATCH (:Topic {{id: $a}})-[r:{EDGE_TABLES[obj.kind]}]->"
                               "(:Topic {id: $b}) RETURN r.created_at", {"a": obj.source, "b": obj.target})
                return rows[0][0] if rows else None
            return {"kind": obj.kind, "source": TopicRef(obj.source),
                    "target": TopicRef(obj.target)}.get(name)
        if isinstance(obj, dict):
            return obj.get(name)
        raise InvalidInput(f"no attribute {name!r} on {type(obj).__name__}")

    def _open_flags(self, tid: str) -> list[dict[str, Any]]:
        rows = self.t.query(
            "MATCH (g:Flag)-[:FLAGS]->(t:Topic {id: $id}) WHERE g.status = 'open' "
            "RETURN g.id, g.origin_id, g.policy, g.evidence", {"id": tid})
        return [{"id": r[0], "origin": r[1], "policy": r[2], "evidence": json.loads(r[3])}
                for r in rows]

    # -------------------------------------------------------------- relations
    def relation(self, name: str, bindings: dict[str, Any]) -> Any:
        t = self.t
        if name == "interactions":
            return t.counters.interactions
        if name in ("dependent_topic", "associated_topic"):
            topic = bindings.get("topic")
            if not isinstance(topic, TopicRef):
                return []
            if name == "dependent_topic":
                return [TopicRef(b) for b in t.dependents(topic.id)]
            rows = t.query("MATCH (a:Topic {id: $id})-[:ASSOCIATES]-(b:Topic) "
                           "WHERE b.id <> $id RETURN DISTINCT b.id ORDER BY b.id", {"id": topic.id})
            return [TopicRef(r[0]) for r in rows]
        if name == "active_fields":
            rows = t.query("MATCH (t:Topic)-[:HAS_FIELD]->(f:Field) WHERE t.status = 'active' "
                           "AND f.status = 'active' RETURN f.id, t.id, f.name ORDER BY f.id")
            refs = [FieldRef(*r) for r in rows]
            t.siblings("Field", [r.id for r in refs])
            return refs
        if name == "active_topics":
            refs = [TopicRef(r[0]) for r in t.query(
                "MATCH (t:Topic) WHERE t.status = 'active' RETURN t.id ORDER BY t.seq")]
            t.siblings("Topic", [r.id for r in refs])
            return refs
        if name == "flagged_topics":
            return [TopicRef(r[0]) for r in t.query(
                "MATCH (g:Flag)-[:FLAGS]->(t:Topic) WHERE g.status = 'open' "
                "RETURN DISTINCT t.id ORDER BY t.id")]
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
        engine = self.t.engine
        if isinstance(x, TopicRef):
            return decode_vector(self.t.topic_embedding(x.id), engine.embedder.dim)
        return engine.embedder.embed([str(x)])[0]

    # -------------------------------------------------------------- actions
    def act(self, action_name: str, args: list[Any], evidence: dict[str, Any], policy: str,
            span: Any = None) -> None:
        event = self.t.current_event
        self.t.record_fired(Fired(policy, event.name if event else "", action_name,
                                  list(args), dict(evidence)))
        try:
            ACTIONS[action_name](self, list(args), dict(evidence), policy)
        except (TypeError, ValueError, InvalidInput) as exc:
            # A policy that checked clean met a value it cannot act on (null, wrong type,
            # a self-edge): the transition is refused as a policy failure, never a crash.
            raise TransitionRejected("policy", policy,
                                     f"{action_name}({', '.join(map(str, args))}) failed: {exc}") from None

    @property
    def event_topic(self) -> TopicRef | None:
        event = self.t.current_event
        topic = event.bindings.get("topic") if event else None
        return topic if isinstance(topic, TopicRef) else None


def _unit(t: Transition, x: Any) -> tuple[str, str] | None:
    if isinstance(x, TopicRef):
        return ("Topic", x.id)
    if isinstance(x, FieldRef):
        return ("Field", x.id)
    return None


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
    n = t.counters.next("flag")
    row = t.create("Flag", {
        "id": f"g{n}", "seq": n, "tx": t.seq, "topic_id": target.id,
        "origin_id": origin.id if origin else None, "policy": policy,
        "evidence": _evidence_json(evidence), "status": "open", "created_at": t.now,
        "cleared_at": None})
    t.relate("FLAGS", ("Flag", row["id"]), ("Topic", target.id))
    t.touched.flagged.setdefault(target.id, []).append(row["id"])
    t.touch_topic(target.id)
    t.emit("flagged", topic=target, origin=origin, evidence=dict(evidence))


def _evidence_json(evidence: dict[str, Any]) -> str:
    from .transition import dumps
    return dumps(evidence)


@action("reinforce")
def _reinforce(rt: PolicyRuntime, args: list[Any], evidence: dict[str, Any], policy: str) -> None:
    unit = _unit(rt.t, args[0])
    if unit is None or not rt.t.once("reinforce", policy, *unit):
        return
    amount = float(args[1]) if len(args) > 1 and args[1] is not None \
        else float(rt.t.settings["reinforce_amount"])
    rt.t.reinforce(*unit, amount)


@action("set_salience")
def _set_salience(rt: PolicyRuntime, args: list[Any], evidence: dict[str, Any],
                  policy: str) -> None:
    from .salience import strength_of
    unit = _unit(rt.t, args[0])
    if unit is None or rt.t.row(*unit) is None:
        return
    value = float(args[1])
    if not 0.0 <= value < 1.0:
        raise TransitionRejected("policy", policy, f"set_salience needs a value in [0, 1), got {value}")
    rt.t.update(*unit, strength=strength_of(value), last_access=rt.t.now)


@action("annotate")
def _annotate(rt: PolicyRuntime, args: list[Any], evidence: dict[str, Any], policy: str) -> None:
    target, key, value = args
    table = {TopicRef: "Topic", FieldRef: "Field", EntryRef: "Entry"}.get(type(target))
    if table is None:
        return
    row = rt.t.row(table, target.id)
    if row is None:
        return
    notes = json.loads(row["annotations"] or "{}")
    notes[str(key)] = json.loads(_evidence_json({"v": value}))["v"]
    rt.t.update(table, target.id, annotations=_evidence_json(notes))


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


def add_edge(t: Transition, src: str, dst: str, kind: str, source: str) -> bool:
    """Create a typed edge unless it already exists. Returns True if created."""
    if kind not in EDGE_TABLES or kind == "derived":
        raise InvalidInput(f"edge kind must be 'extension' or 'association', got {kind!r}")
    if src == dst:
        raise InvalidInput("an edge must join two different topics")
    table = EDGE_TABLES[kind]
    exists = t.query(f"MATCH (a:Topic {{id: $a}})-[:{table}]->(b:Topic {{id: $b}}) RETURN count(*)",
                     {"a": src, "b": dst})[0][0]
    if exists or not t.once("edge", kind, src, dst):
        return False
    t.relate(table, ("Topic", src), ("Topic", dst), tx=t.seq, created_at=t.now, source=source,
             actor=t.actor)
    t.touch_topic(src)
    t.touch_topic(dst)
    t.emit("linked", edge=EdgeRef(kind, src, dst), source=TopicRef(src), target=TopicRef(dst),
           kind=kind)
    return True


@action("supersede")
def _supersede(rt: PolicyRuntime, args: list[Any], evidence: dict[str, Any], policy: str) -> None:
    """Retract an entry; the field's current value becomes the best remaining entry."""
    from .operators.ingest import settle_current
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
    t.emit("superseded", topic=TopicRef(f.topic_id), field=f, entry=e,
           by=EntryRef(replacement["id"], fid) if replacement else None)
