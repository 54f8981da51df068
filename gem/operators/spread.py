"""The second stage of free-text retrieval: activation spreads over gem's structure.

The first stage (`retrieve.rank_units`) scores each unit on its own against the query. A
question whose evidence lies in several turns often finds one of them and not the next (the
answer said a turn later, the fact extracted from the turn), so the best first-stage units
pass part of their score, decayed, along the structure:

- `follows`: an episode to the one said right after it in the same conversation (the reply:
  FOLLOWS_NEXT) and to the one before it (its question: FOLLOWS_PREV); when the query names
  one speaker, a neighbour someone else said is passed OTHER_SPEAKER of that (a question about
  one person is answered by what that person said; the other's reply is context, and it takes
  a place among the k that the person's other turns need);
- a field's current value to the episode it was extracted from (its `ref`: CITES);

and the query's own cues add structural evidence of their own:

- who said it: an episode whose speaker the query names (SPEAKER_WEIGHT);
- when (gem.timecue): a unit whose time (when it was said, or the day its words refer to)
  falls in the query's time cue, decaying outside the window (TIME_WEIGHT), never filtering; and, for a question asking *when*, an episode that
  itself says when ('yesterday', 'last week', 'in May': MENTION_WEIGHT).

A unit reached only by spreading must be active: structure does not recall the forgotten
(a cue does, in the first stage). Units the stage adds are returned like any other and so
reinforced like any other: every read is a write. Association edges are not walked here:
`retrieve._context` returns associated topics after the ranked units.

Measured on the LoCoMo dev split: see the weights' notes.
"""
from __future__ import annotations

from dataclasses import dataclass, replace
from datetime import datetime, timezone
from typing import Callable, Sequence

from ..state.transition import Transition
from ..state.whole import prefetch_stale
from ..text import tokens
from ..timecue import asks_when, cue, mentions_time
from .common import refers_to
from ..units import unit_table

# Weights, as fractions of the seed's first-stage score (spreading) or as absolute score scaled
# by how well the unit answers (first-stage scores of LoCoMo's top ten lie around 0.02-0.06).
# Measured on the LoCoMo dev split (bench/locomo.py, all five conversations, hashing embedder,
# maintenance on), any@10/all@10: without the stage overall 0.726/0.600 (multi-hop
# 0.634/0.148, temporal 0.776/0.737); with it 0.770/0.642 (0.683/0.169, 0.801/0.763).
# Follows alone gives single-hop most of its gain, the speaker multi-hop, the time mention
# 'when' questions (MENTION_WEIGHT 0.005 -> 0.02: temporal any@10 0.788 -> 0.801).
FOLLOWS_NEXT = 0.9
FOLLOWS_PREV = 0.5
CITES = 0.9
SPEAKER_WEIGHT = 0.015
# Measured as above (with images' captions in the turns): multi-hop any@10/all@10 0.676/0.176
# -> 0.697/0.190, single-hop 0.878/0.866 -> 0.880/0.866, temporal and open-domain unchanged;
# 0.3 and 0 measured the same.
OTHER_SPEAKER = 0.3
TIME_WEIGHT = 0.01
MENTION_WEIGHT = 0.02
SEEDS = 10        # the best first-stage units activation spreads from (at least k)
POOL = 30         # the first-stage units the cues re-weigh (at least 3 k)


@dataclass(frozen=True)
class Hit:
    """A ranked unit: its fused score, its first-stage relevance, for a cued recall the ladder
    level it is recalled from, and how the second stage reached it (None: the first stage)."""
    unit: str
    score: float
    relevance: float
    recalled: str | None = None
    via: str | None = None


def second_stage(t: Transition, query: str, first: Sequence[Hit], k: int,
                 admit: Callable[[str, float], tuple[bool, str | None]]) -> list[Hit]:
    """`first`, best first, re-scored and extended by the structure; best first. `admit`
    says whether a unit the first stage did not rank may be added, given the relevance passed
    on to it (inside the request's window; active, or hidden and cued strongly enough), and the
    ladder level it is then recalled from (None: active)."""
    if not first:
        return []
    pool = list(first[:max(POOL, 3 * k)])
    seeds = pool[:max(SEEDS, k)]
    by_unit = {s.unit: s for s in pool}
    eids = [s.unit for s in pool if unit_table(s.unit) == "Episode"]
    # a seed's neighbours, both ways: who said them weighs the spreading when the query names
    # a speaker (the one before is the one it follows: ids count up per scope)
    seed_eids = [s.unit for s in seeds if unit_table(s.unit) == "Episode"]
    t.prefetch("Episode", eids + [_after(eid) for eid in eids] + _before(seed_eids))
    score = {s.unit: s.score for s in pool}
    # how well a unit answers the query, first stage or passed on: the cues below weigh what
    # answers (who said it matters among the turns about the thing asked, not on its own)
    answers = {s.unit: s.relevance for s in pool}
    via: dict[str, str] = {}
    recalled: dict[str, str | None] = {}

    def reach(unit: str, decay: float, seed: Hit, how: str) -> None:
        amount = decay * seed.score
        if unit not in by_unit:
            if amount <= score.get(unit, 0.0):
                return
            ok, level = admit(unit, decay * seed.relevance)
            if not ok:
                return
            via[unit] = how
            recalled[unit] = level
        score[unit] = max(score.get(unit, 0.0), amount)
        answers[unit] = max(answers.get(unit, 0.0), decay * seed.relevance)

    named = _named_speakers(query, [r["speaker"] for r in (t.row("Episode", e) for e in eids)
                                    if r is not None and r["speaker"]])

    def said_by_other(eid: str) -> float:
        """OTHER_SPEAKER for a turn someone other than the one speaker the query names said."""
        if not named:
            return 1.0
        row = t.row("Episode", eid)
        return OTHER_SPEAKER if row is not None and row["speaker"] not in named else 1.0

    # a field's history is read for its top k only, which the first stage's caller reads anyway
    # (and all of its topic, in the same statement, when the topic's summary will need it)
    top = [s.unit for s in pool[:k] if unit_table(s.unit) == "Field"]
    prefetch_stale(t, [fid.split("/", 1)[0] for fid in top])
    t.prefetch_children("HAS_ENTRY", top)
    for i, s in enumerate(seeds):
        if unit_table(s.unit) == "Episode":
            row = t.row("Episode", s.unit)
            if row is None:
                continue
            nxt = t.row("Episode", _after(s.unit))
            if nxt is not None and nxt["follows"] == s.unit:
                reach(nxt["id"], FOLLOWS_NEXT * said_by_other(nxt["id"]), s, "follows")
            if row["follows"]:
                reach(row["follows"], FOLLOWS_PREV * said_by_other(row["follows"]), s, "follows")
        elif i < k:
            entry = t.current_entry(s.unit)
            ref = None if entry is None else entry["ref"]
            if isinstance(ref, str) and unit_table(ref) == "Episode" and _same_scope(t, ref):
                reach(ref, CITES, s, "cites")

    units = list(score)
    t.prefetch("Episode", [u for u in units if unit_table(u) == "Episode"])
    rows = {u: t.row("Episode", u) for u in units if unit_table(u) == "Episode"}
    window = cue(query, t.now)
    when = asks_when(query)
    best = max(answers.values()) or 1.0
    for unit in units:
        row = rows.get(unit)
        bonus = 0.0
        if row is not None and row["speaker"] is not None and row["speaker"] in named:
            bonus += SPEAKER_WEIGHT
        if window is not None:
            bonus += TIME_WEIGHT * max((window.weight(at) for at in _times_of(t, unit, row)),
                                       default=0.0)
        if when and row is not None and mentions_time(row["text"]):
            bonus += MENTION_WEIGHT
        score[unit] += bonus * answers[unit] / best

    out = [replace(by_unit[u], score=round(score[u], 9)) if u in by_unit
           else Hit(u, round(score[u], 9), 0.0, recalled[u], via[u]) for u in units]
    out.sort(key=lambda s: (-s.score, s.unit))
    return out


def _after(eid: str) -> str:
    """The id of the episode recorded right after `eid` (ids count up per scope)."""
    head, n = eid.rsplit("ep", 1)
    return f"{head}ep{int(n) + 1}"


def _before(eids: Sequence[str]) -> list[str]:
    """The ids of the episodes recorded right before these."""
    out = []
    for eid in eids:
        head, n = eid.rsplit("ep", 1)
        if int(n) > 1:
            out.append(f"{head}ep{int(n) - 1}")
    return out


def _same_scope(t: Transition, eid: str) -> bool:
    return eid[:len(eid) - len(eid.rsplit(":", 1)[-1])] == t.prefix


def _named_speakers(query: str, speakers: Sequence[str]) -> set[str]:
    """The speakers whose every name word the query says; none when it names several (a
    question about two people is about neither alone)."""
    words = set(tokens(query))
    named = {s for s in set(speakers) if tokens(s) and set(tokens(s)) <= words}
    return named if len(named) == 1 else set()


def _times_of(t: Transition, unit: str, row: dict | None) -> list[datetime]:
    """When a unit was said (an episode) or is valid (a field), and the day an episode's own
    words refer to ('last night', said on 4 May, is 3 May)."""
    if row is not None:
        said: datetime = row["at"]
        meant = refers_to(t, row)
        return [said] if meant is None else [said, meant]
    valid = t.committed.unit_valid.get(unit)
    return [] if valid is None else [datetime.fromtimestamp(valid, timezone.utc)]


__all__ = ["Hit", "second_stage"]
