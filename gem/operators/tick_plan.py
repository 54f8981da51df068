"""Tick plans: a ladder policy's WHERE decided on the derived columns, set-at-a-time.

`gem/policy/vectorise.py` says which policies have a plan. Here a plan runs: the candidates
are the policy's relation in the proposed state (the same list, in the same order, per-unit
evaluation walks), their salience, status and labels come from the derived state's columns
in one vectorised step, and the predicate is decided on those arrays. Two kinds of unit are
decided by the policy's own compiled WHERE instead, one at a time, so that a plan moves
exactly the units per-unit evaluation moves (tests/test_vectorised_tick.py):
- units this transition created or changed (their columns are not committed yet);
- units whose salience is within a rounding error of a bound (numpy computes the decay with
  other operations than gem/salience.py).
When the actions are ladder steps that change a unit's status alone (and no policy listens
to the events they emit), they are made for the whole set at once (gem/operators/
status_moves.py), reading no row; the units that are not status moves (a field whose
compression folds a faded history, a unit the pass created or changed in more than its
status) go through the same `act` as per-unit evaluation, first, and the status moves then
in one call; what the record shows of their order is put back in unit order
(`status_moves.in_unit_order`). Other actions run per unit through `act`, on rows loaded
for the whole set in one statement. Either way: the same moves, with the same log.
"""
from __future__ import annotations

from itertools import compress
from typing import Any, Callable

import numpy as np

from ..policy import vectorise as V
from ..policy.evaluate import truth
from ..runtime import ACTIVE, PLAN_RUNNERS, VISIBLE, PolicyRuntime
from ..state.events import Fired
from ..state.transition import Transition
from ..units import EpisodeRef, FieldRef, TopicRef
from . import status_moves

# Relative distance from a bound under which the per-unit formula decides (numpy and
# gem/salience.py agree to a few ulps; this is many orders of magnitude wider).
_BORDER = 1e-9

_ORDER: dict[str, Callable[[np.ndarray, float], np.ndarray]] = {
    "<": np.less, "<=": np.less_equal, ">": np.greater, ">=": np.greater_equal,
    "=": np.equal, "!=": np.not_equal}


def candidates(t: Transition, plan: V.TickPlan, below: float | None) -> list[str]:
    """The plan's relation in the proposed state, as PolicyRuntime.relation lists it."""
    if plan.table == "Field":
        return t.field_ids_where(ACTIVE if plan.relation == "active_fields" else VISIBLE, below)
    if plan.table == "Topic":
        return t.topic_ids_where(ACTIVE, below)
    return t.episode_ids_where(ACTIVE if plan.relation == "active_episodes" else VISIBLE, below)


def ref(table: str, key: str) -> Any:
    if table == "Field":
        tid, _, name = key.partition("/")
        return FieldRef(key, tid, name)
    return TopicRef(key) if table == "Topic" else EpisodeRef(key)


def _changed(t: Transition, table: str) -> set[str]:
    """Units whose salience or labels in the proposed state may differ from the columns."""
    return set(t.created[table]) | {k for k, kind in t.salience.items() if kind == table} | \
        {k for k, props in t.updated[table].items() if "labels" in props}


def decide(plan: V.Predicate, bounds: dict[int, Any], s: np.ndarray, status: np.ndarray,
           labels: list[tuple[str, ...]]) -> tuple[np.ndarray, np.ndarray] | None:
    """(holds, uncertain) for each unit; None when a bound is not a number (the per-unit
    semantics of comparing with null, a text or a duration are left to per-unit evaluation)."""
    if isinstance(plan, V.Both):
        left = decide(plan.left, bounds, s, status, labels)
        right = decide(plan.right, bounds, s, status, labels)
        if left is None or right is None:
            return None
        holds = (left[0] & right[0]) if plan.op == "AND" else (left[0] | right[0])
        return holds, left[1] | right[1]
    if isinstance(plan, V.Not):
        inner = decide(plan.operand, bounds, s, status, labels)
        return None if inner is None else (~inner[0], inner[1])
    if isinstance(plan, V.Status):
        same = status == plan.value
        return (same if plan.op == "=" else ~same), np.zeros(s.shape[0], dtype=bool)
    if isinstance(plan, V.Label):
        have = np.fromiter((plan.label in x for x in labels), dtype=bool, count=len(labels))
        return have, np.zeros(s.shape[0], dtype=bool)
    bound = bounds[id(plan)]
    if not isinstance(bound, (int, float)) or isinstance(bound, bool):
        return None
    bound = float(bound)
    near = np.abs(s - bound) <= _BORDER * max(1.0, abs(bound))
    return _ORDER[plan.op](s, bound), near


def _bounds(plan: V.Predicate, env: dict[str, Any], rt: PolicyRuntime, into: dict[int, Any]) -> None:
    if isinstance(plan, V.Both):
        _bounds(plan.left, env, rt, into)
        _bounds(plan.right, env, rt, into)
    elif isinstance(plan, V.Not):
        _bounds(plan.operand, env, rt, into)
    elif isinstance(plan, V.Salience):
        into[id(plan)] = plan.bound(env, rt)


def run(rt: PolicyRuntime, policy: Any, bindings: dict[str, Any]) -> int | None:
    """Fire `policy` by its plan: its action calls, or None to evaluate it per unit."""
    plan: V.TickPlan = policy.plan
    t = rt.t
    env = dict(bindings)
    bounds: dict[int, Any] = {}
    _bounds(plan.predicate, env, rt, bounds)
    hint = plan.below(env, rt) if plan.below is not None else None
    below = hint if isinstance(hint, (int, float)) and not isinstance(hint, bool) else None
    keys = candidates(t, plan, below)
    if not keys:
        return 0
    changed = _changed(t, plan.table)
    committed = [k for k in keys if k not in changed] if changed else keys
    s, status, labels = t.committed.unit_columns(plan.table, committed, t.now, t.half_life,
                                                 t.label_half_life if plan.table == "Field" else None)
    # A unit the pass moved already (compressed, then walked by the next rung) keeps its
    # salience and labels: only its status is read from the proposed row (`moved`'s, or, for
    # a row the pass read, the row's; no unit is in both).
    updated, own, moved = t.updated[plan.table], t.rows[plan.table], t.moved[plan.table]
    if moved:
        status = list(map(moved.get, committed, status))
    read = updated.keys() & own.keys()
    if read:
        for i in compress(range(len(committed)), map(read.__contains__, committed)):
            status[i] = own[committed[i]]["status"]  # type: ignore[index]
    column = np.asarray(status, dtype=object)
    decided = decide(plan.predicate, bounds, np.asarray(s, dtype=float), column, labels)
    if decided is None:
        return None
    holds, uncertain = decided
    exact = [k for k, u in zip(committed, uncertain.tolist()) if u] if uncertain.any() else []
    exact += [k for k in keys if k in changed] if changed else []
    if exact:
        verdict = dict(zip(committed, holds.tolist()))
        rows = [k for k in exact if plan.table != "Field" or k not in t.created["Field"]]
        t.prefetch(plan.table, rows)
        for k in exact:
            verdict[k] = truth(plan.where({**env, plan.var: ref(plan.table, k)}, rt))
        chosen = [k for k in keys if verdict[k]]
    else:  # every candidate decided on the columns (`committed` is `keys`)
        chosen = list(compress(committed, holds.tolist()))
    if not status_moves.moves_in_bulk(t, plan.table, [name for name, _ in plan.actions]):
        return _per_unit(rt, policy, plan, chosen)
    # Status moves, in bulk, for the units whose rows the pass has not read (their status is
    # the column's, or the one an earlier rung gave them); the others, and the fields whose
    # compression folds a faded history, through the per-unit calls.
    folding: set[str] = set()
    if plan.table == "Field" and any(name == "compress" for name, _ in plan.actions):
        active = column == "active"
        folding = t.with_faded_history(
            list(compress(committed, (holds & active).tolist())) if not exact else
            [k for k, a in zip(committed, active.tolist()) if a and verdict[k]])
    gone = {k for k, row in own.items() if row is None}
    special = folding | gone | {k for k in exact if k in changed}
    single = list(filter(special.__contains__, chosen)) if special else []
    t.prefetch(plan.table, single)
    if plan.table in ("Field", "Topic"):
        t.siblings(plan.table, single)
    event = t.current_event.name if t.current_event is not None else ""
    steps = [(name, Fired(policy.name, event, name, (), {})) for name, _ in plan.actions]
    if exact:
        committed_status = dict(zip(committed, status))
        batch: dict[str, Any] = dict(zip(chosen, map(committed_status.get, chosen)))
    else:
        batch = dict(zip(chosen, compress(status, holds.tolist())))
    for k in single:
        del batch[k]

    def moves() -> None:
        _act(rt, policy, plan, single)
        status_moves.move_many(t, plan.table, steps, batch)
    if single or not own.keys().isdisjoint(batch):
        status_moves.in_unit_order(t, plan.table, chosen, moves)
    else:
        moves()
    return len(chosen) * len(plan.actions)


def _per_unit(rt: PolicyRuntime, policy: Any, plan: V.TickPlan, chosen: list[str]) -> int:
    """The plan's actions on each chosen unit through `act`, as per-unit evaluation calls
    them; the rows and (compression) faded entries they read are loaded for the set at once."""
    t = rt.t
    if len(chosen) > 1:
        t.prefetch(plan.table, chosen)
        if plan.table in ("Field", "Topic"):
            t.siblings(plan.table, chosen)
    return _act(rt, policy, plan, chosen)


def _act(rt: PolicyRuntime, policy: Any, plan: V.TickPlan, chosen: list[str]) -> int:
    calls = 0
    for k in chosen:
        unit = ref(plan.table, k)
        for name, span in plan.actions:
            rt.act(name, [unit], {}, policy=policy.name, span=span)
            calls += 1
    return calls


PLAN_RUNNERS[:] = [run]

__all__ = ["run", "decide", "candidates"]
