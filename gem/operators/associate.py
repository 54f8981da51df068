"""Associative reinforcement: what a read reinforces lends a smaller share to its associates.

A retrieval reinforces what it returns (C6). The episodes that share the returned unit's (a
field's or an episode's) salient words, its rarest terms in the unit index, are likely to be
asked about next, and so should not fade as fast: the policy action
`reinforce_associated(unit, amount)` adds `amount` to their strength, inside the same transition (logged with it, and C6 still reads
only what was returned). The default policy gives it `associative_factor * reinforce_amount`;
`SET associative_factor = 0` turns it off.

Bounded and cheap: the postings of at most ASSOCIATE_TERMS of the unit's rarest terms (each in
2 to ASSOCIATE_MAX_DF units) are read, at most ASSOCIATES units gain per unit read and
PER_READ in all per transition (a read returns its best units first, so they are the ones
whose associates gain; on LoCoMo, k=20 reads spent a fifth of their time here without it),
each once. Only visible episodes gain (active or compressed): reinforcing what the ladder put
away would not bring it back, and a cue does that (cued recall). Episodes the transition
itself read are reinforced by the read. Fields do not gain: a field's document holds its
topic's names and its own name, so the fields sharing its rarest terms are mostly its siblings
and the same field of other topics, an association by name that the topic's own reinforcement
already covers (it would keep a topic's unread fields from fading and so change which fields
C5 and the ladder attenuate).
"""
from __future__ import annotations

from typing import Any
from weakref import WeakKeyDictionary

from ..runtime import PolicyRuntime, action
from ..state.transition import Transition
from ..units import EpisodeRef, FieldRef, unit_table

ASSOCIATE_TERMS = 3      # the rarest terms of a unit its associates are found by
ASSOCIATE_MAX_DF = 20    # a term in more units than this is not salient enough to associate
ASSOCIATES = 5           # at most this many units gain per reinforced unit
PER_READ = 10            # and at most this many in one transition

# How many units gained in a transition so far.
_GAINED: "WeakKeyDictionary[Transition, int]" = WeakKeyDictionary()


def associates(t: Transition, unit: str) -> list[str]:
    """The visible episodes sharing `unit`'s rarest terms, those sharing the most first (at
    most ASSOCIATES), leaving out what this transition read."""
    derived = t.committed
    derived.refresh_units(t.cache)
    read = {key for _, key in t.touched.accessed}
    out = []
    for other, _ in derived.unit_lexical.sharing_rare_terms(unit, ASSOCIATE_TERMS,
                                                             ASSOCIATE_MAX_DF):
        if other in read or unit_table(other) != "Episode":
            continue
        if derived.unit_status(other)[0] in ("active", "compressed"):
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
    if _GAINED.get(t, 0) >= PER_READ or not t.once("reinforce_associated", policy, unit.id):
        return
    found = associates(t, unit.id)
    t.prefetch("Episode", found)
    for other in found:
        if _GAINED.get(t, 0) < PER_READ and t.once("reinforce_associated", policy, "gains", other):
            t.reinforce(unit_table(other), other, amount)
            _GAINED[t] = _GAINED.get(t, 0) + 1
