"""The forgetting ladder's status moves, made for many units at once.

Most of a forgetting pass moves units by their status alone: a field compressed that has no
faded history to fold, any field hidden, a topic archived, an episode compressed or hidden
(at 100k topics, ~1.8M moves). A tick plan (gem/operators/tick_plan.py) whose actions are
such steps makes them here: for each unit, unit after unit, exactly the writes, touched
units, log items and `detail.attenuated` entries that the step functions of
gem/operators/forget.py make, without reading the unit's row (its status is the derived
column's, or the one an earlier rung of the pass gave it; `Transition.move_statuses`). The flush
writes them with one statement per table and status, the record attests them by
`detail.attenuated` (gem/attest.py), and the derived state and the cache take the new
statuses in bulk after the commit.

A policy that listens to the events those functions emit needs each move as its own event:
then the plan's actions run per unit (`moves_in_bulk`).
"""
from __future__ import annotations

from itertools import filterfalse, islice
from operator import itemgetter, methodcaller
from typing import Any, Callable, Sequence

from ..policy.vectorise import STEP_EVENTS
from ..state.events import Fired
from ..state.transition import Transition

# (table, action) -> (the level, the statuses the step moves a unit from), as forget.py's
# compress_field (without a faded history), hide_field, compress_episode, hide_episode and
# archive_topic decide it (vectorise.STATUS_STEPS, for `gem policy explain`, names the same;
# STEP_EVENTS are the events those functions emit).
STATUS_MOVES = {("Field", "compress"): ("compressed", ("active",)),
                ("Field", "hide"): ("hidden", ("active", "compressed")),
                ("Episode", "compress"): ("compressed", ("active",)),
                ("Episode", "hide"): ("hidden", ("active", "compressed")),
                ("Topic", "archive"): ("archived", ("active",))}
_TOPIC = methodcaller("partition", "/")  # a field id -> (topic id, "/", name)
_FIRST = itemgetter(0)


def moves_in_bulk(t: Transition, table: str, actions: Sequence[str]) -> bool:
    """Whether a plan's actions on units of `table` can be made by `move_many`."""
    return all((table, a) in STATUS_MOVES for a in actions) and \
        not any(t.policies_for(e) for e in STEP_EVENTS[table])


def move_many(t: Transition, table: str, steps: Sequence[tuple[str, Fired]],
              units: dict[str, str]) -> None:
    """Run `steps` (each action with its log item, `t.fired`'s: the log keeps no unit of a
    call) on each unit of `units` (key -> its status in the proposed state), as calls unit
    after unit would: each step on every unit in turn leaves the same writes, touched units
    and `detail.attenuated` lists (each in unit order), and the log items are interleaved as
    those calls make them. A compression of a field with a faded history to fold is no status
    move: such fields are not among `units`."""
    if not units:
        return
    before = len(t.fired)
    t.fired.extend([fired for _, fired in steps] * len(units))
    if t.progress is not None:  # as `PolicyRuntime.act` reports: every 1000th action
        for done in range((before // 1000 + 1) * 1000, len(t.fired) + 1, 1000):
            t.progress(f"{t.op}: policy actions", done, 0)
    status = dict(units) if len(steps) > 1 else units
    touched = t.touched
    for action, _ in steps:
        level, moves_from = STATUS_MOVES[(table, action)]
        going = list(status) if set(status.values()) <= set(moves_from) else \
            [k for k, s in status.items() if s in moves_from]
        if not going:
            continue
        t.move_statuses(table, going, level)
        if len(steps) > 1:
            status.update(dict.fromkeys(going, level))
        t.detail.setdefault("attenuated", {}).setdefault(level, []).extend(going)
        if table == "Field":
            topics = dict.fromkeys(map(_FIRST, map(_TOPIC, going)))
            if level == "hidden":
                touched.content.update(topics)
            touched.fields.update(dict.fromkeys(going))
            touched.topics.update(topics)
        elif table == "Episode":
            touched.episodes.update(dict.fromkeys(going))


def in_unit_order(t: Transition, table: str, chosen: Sequence[str], run: Callable[[], Any]) -> None:
    """`run` moves units of `chosen` out of their order (the units that need their own calls
    first, then the rest in one `move_many`); afterwards what the record shows holds what
    `run` added in the order calls unit after unit would have added it, unit order: each
    `detail.attenuated` list, and the touched topics (a field's topic at its first field that
    moves), which the `commit` event lists. The other touched sets are read as sets."""
    lists = t.detail.setdefault("attenuated", {})
    before = {level: len(units) for level, units in lists.items()}
    topics = t.touched.topics
    size = len(topics)
    run()
    for level, units in lists.items():
        start = before.get(level, 0)
        if len(units) - start == len(chosen):  # every chosen unit (each once): all in order
            units[start:] = chosen
        elif len(units) > start:  # those units, as `chosen` orders them (one C-level filter)
            units[start:] = filter(set(units[start:]).__contains__, chosen)
    if len(topics) == size:
        return
    added = list(islice(topics, size, None))
    # each topic at its first field (and before them, in their order, any no unit names)
    order = dict.fromkeys(map(_FIRST, map(_TOPIC, chosen)) if table == "Field" else chosen)
    ordered = list(filterfalse(order.__contains__, added))
    ordered += filter(set(added).__contains__, order)
    if ordered != added:
        for k in added:
            del topics[k]
        topics.update(dict.fromkeys(ordered))
