"""Associative reinforcement: what a read reinforces lends a smaller share to its associates.

A retrieval reinforces what it returns (C6). The episodes and fields that share the returned
unit's salient words (its rarest terms in the unit index) are likely to be asked about next,
and so should not fade as fast: the policy action `reinforce_associated(unit, amount)` adds
`amount` to their strength, inside the same transition (logged with it, and C6 still reads
only what was returned). The default policy gives it `associative_factor * reinforce_amount`;
`SET associative_factor = 0` turns it off.

Bounded and cheap: the postings of at most ASSOCIATE_TERMS of the unit's rarest terms (each in
2 to ASSOCIATE_MAX_DF units) are read, at most ASSOCIATES units gain, each once per
transition. Only visible units gain (active or compressed, and a field of an active
topic): reinforcing what the ladder put away would not bring it back, and a cue
does that (cued recall). Units the transition itself read are reinforced by the read.
"""
from __future__ import annotations

from typing import Any

from ..runtime import PolicyRuntime, action
from ..state.transition import Transition
from ..units import EpisodeRef, FieldRef, unit_table

ASSOCIATE_TERMS = 3      # the rarest terms of a unit its associates are found by
ASSOCIATE_MAX_DF = 20    # a term in more units than this is not salient enough to associate
ASSOCIATES = 5           # at most this many units gain per reinforced unit


def associates(t: Transition, unit: str) -> list[str]:
    """The visible units sharing `unit`'s rarest terms, those sharing the most first (at most
    ASSOCIATES), leaving out what this transition read."""
    derived = t.committed
    derived.refresh_units(t.cache)
    read = {key for _, key in t.touched.accessed}
    out = []
    for other, _ in derived.unit_lexical.sharing_rare_terms(unit, ASSOCIATE_TERMS,
                                                             ASSOCIATE_MAX_DF):
        if other in read:
            continue
        status, topic_status = derived.unit_status(other)
        visible = status in ("active", "compressed") and topic_status in (None, "active")
        if visible:
            out.append(other)
            if len(out) == ASSOCIATES:
                break
    return out


@action("reinforce_associated")
def _reinforce_associated(rt: PolicyRuntime, args: list[Any], evidence: dict[str, Any],
                          policy: str) -> None:
    unit, amount = args[0], float(args[1])
    if not isinstance(unit, (FieldRef, EpisodeRef)) or amount <= 0.0:
        return
    t = rt.t
    if not t.once("reinforce_associated", policy, unit.id):
        return
    for other in associates(t, unit.id):
        if t.once("reinforce_associated", policy, "gains", other):
            t.reinforce(unit_table(other), other, amount)
