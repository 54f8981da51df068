"""The trajectory benchmark: ground truth at three levels over an adversarial stream.

GEM's research agenda (the paper, section 5, "Correctness and Evaluation") asks for a
workload with ground truth for the current value of every unit over time (C2), the
dependent units that must be re-evaluated after each update (C3) and the allowed active
footprint at each interaction count (C5). This module builds one and scores systems on it:

    generate(StreamConfig(turns=500, seed=0))  -> Stream        a seeded adversarial stream
    ground_truth(stream)                       -> Truth         C2 / C3 / C5 after every turn
    run_system(stream, truth, system)          -> SystemRun     one system, turn by turn
    score(stream, truth, run)                  -> dict          the metrics of one run
    run_benchmark(config, systems)             -> Report        all of it, plus table/JSON/PNG

The definition (what every turn kind means, the truth rules, each metric, each baseline
and its sources) is specs/trajectory-benchmark.md. Everything is offline and
deterministic: the stream depends only on (turns, seed), every system uses the same
`gem.HashingEmbedder`, and simulated time advances by a fixed step per turn.
"""
from __future__ import annotations

import argparse
import json
import random
import statistics
import sys
import tempfile
import time
from abc import ABC, abstractmethod
from collections import Counter
from dataclasses import asdict, dataclass, field, replace
from datetime import date, datetime, timedelta, timezone
from pathlib import Path
from typing import Any, Callable, Sequence

UTC = timezone.utc
START = datetime(2026, 1, 5, 9, 0, tzinfo=UTC)

# ---------------------------------------------------------------------------- vocabulary
PROJECT_POOL = (
    "Website Redesign", "Mobile App Launch", "Data Warehouse Migration", "Customer Portal",
    "Brand Refresh", "Security Audit", "Payroll Integration", "Office Relocation",
    "Support Chatbot", "Partner API", "Launch Campaign", "Analytics Dashboard",
    "Pricing Experiment", "Vendor Onboarding",
)
PROJECT_FIELDS = ("deadline", "owner", "budget", "status")
PEOPLE = ("Alice", "Bob", "Carol", "Dan", "Erin", "Farid", "Grace", "Hiro", "Ines", "Jon",
          "Kemal", "Lena")
STATUSES = ("planned", "in progress", "blocked", "at risk", "on hold", "done")
SOURCES = ("chat", "jira", "finance-sheet", "standup-notes", "email")

# Low-value chatter: topic -> (field names, values). Each (topic, field) is one unit.
CHATTER: dict[str, tuple[tuple[str, ...], tuple[str, ...]]] = {
    "Lunch preferences": (tuple(p.lower() for p in PEOPLE),
                          ("sushi", "tacos", "salad", "ramen", "pizza", "falafel", "curry")),
    "Weekend plans": (tuple(p.lower() for p in PEOPLE),
                      ("hiking", "cinema", "gardening", "climbing", "a concert", "baking")),
    "Coffee orders": (tuple(p.lower() for p in PEOPLE),
                      ("flat white", "espresso", "oat latte", "cold brew", "green tea")),
    "Office playlist": (("monday", "tuesday", "wednesday", "thursday", "friday"),
                        ("jazz", "lo-fi", "classical", "synthwave", "folk", "bossa nova")),
    "Book club": (("january", "february", "march", "april", "may", "june"),
                  ("Dune", "Middlemarch", "Piranesi", "The Overstory", "Klara and the Sun")),
    "Parking spots": (tuple(p.lower() for p in PEOPLE),
                      ("P1-04", "P1-12", "P2-07", "P2-14", "P3-01", "P3-09")),
    "Desk plants": (("monstera", "pothos", "cactus", "fern", "ficus", "snake plant"),
                    ("window", "kitchen", "reception", "meeting room", "desk 4")),
}

QUESTION_TEMPLATES = {
    "deadline": ("What is the deadline of {t}?", "When is {t} due?",
                 "What's the current deadline for {t}?"),
    "owner": ("Who owns {t}?", "Who is the owner of {t}?"),
    "budget": ("What is the budget of {t}?", "How much budget does {t} have?"),
    "status": ("What is the status of {t}?", "How is {t} going, what is its status?"),
}

# How important a turn is, as an LLM rating "poignancy" on 1..10 would put it (Generative
# Agents, section 4.1). Only the recency x importance x relevance baseline reads it; the
# generator knows which turns are chatter, so this is an oracle rating, an upper bound on
# what an LLM rater gives that baseline.
IMPORTANCE = {"kickoff": 8, "update": 7, "contradiction": 6, "late": 5, "reexplain": 5,
              "link": 6, "chatter": 2, "query": 3}

INGEST_KINDS = ("kickoff", "update", "reexplain", "late", "contradiction", "chatter")


# ---------------------------------------------------------------------------- the stream
@dataclass(frozen=True)
class StreamConfig:
    """Everything that determines a stream (and the bound the systems are held to)."""

    turns: int = 500
    seed: int = 0
    step_hours: float = 3.0
    projects: int = 10
    initial_projects: int = 6
    hot_facts: int = 4
    associations: int = 3
    bound_base: float = 40.0       # beta(n) = bound_base + bound_slope * n
    bound_slope: float = 0.1
    # relative weights of the turn kinds once the initial projects exist
    w_update: float = 0.14
    w_reexplain: float = 0.12
    w_late: float = 0.06
    w_contradiction: float = 0.05
    w_query: float = 0.25
    w_chatter: float = 0.20
    w_link: float = 0.35           # only while a declared dependency is not yet linked

    def bound(self, n: int) -> float:
        """beta(n): the allowed active footprint after n interactions (C5)."""
        return self.bound_base + self.bound_slope * n

    def bound_policy(self) -> str:
        return f"SET active_bound = {self.bound_base:g} + {self.bound_slope:g} * interactions\n"


@dataclass(frozen=True)
class FactSpec:
    """One fact a turn asserts: `topic`.`field` = `value`, valid at `at`, said by `source`.

    `kind` is the turn kind that produced it; `case` a sub-case used to break results down
    (update: "change" | "revert"; late: "predates-current" | "inside-current-run";
    contradiction: "same-moment" | "newer")."""

    topic: str
    field: str
    value: Any
    at: datetime
    source: str
    kind: str
    case: str = ""

    def text(self, with_date: bool = False) -> str:
        base = f"{self.topic} {self.field} is {value_str(self.value)}"
        return f"As of {stamp(self.at)}, {base}." if with_date else base


@dataclass(frozen=True)
class LinkSpec:
    src: str          # a change on src ...
    dst: str          # ... must flag dst (extension); association: related, no propagation
    kind: str


@dataclass(frozen=True)
class QuerySpec:
    topic: str
    field: str
    text: str
    reason: str       # hot | recent | random


@dataclass(frozen=True)
class Turn:
    index: int
    time: datetime
    kind: str         # kickoff update reexplain late contradiction chatter link query
    text: str
    facts: tuple[FactSpec, ...] = ()
    link: LinkSpec | None = None
    query: QuerySpec | None = None
    importance: int = 1

    @property
    def interaction(self) -> bool:
        """Ingests and queries are interactions (they count towards n); links are not."""
        return self.kind != "link"


@dataclass(frozen=True)
class Stream:
    config: StreamConfig
    turns: tuple[Turn, ...]
    projects: tuple[str, ...]
    hot: tuple[tuple[str, str], ...]
    links: tuple[LinkSpec, ...]

    def counts(self) -> dict[str, int]:
        c = Counter(t.kind for t in self.turns)
        for t in self.turns:
            for f in t.facts:
                if f.case:
                    c[f"{f.kind}:{f.case}"] += 1
        return dict(sorted(c.items()))


def value_str(value: Any) -> str:
    return str(value)


def stamp(at: datetime) -> str:
    return at.astimezone(UTC).strftime("%Y-%m-%d %H:%M")


# ---------------------------------------------------------------------------- truth
@dataclass(frozen=True)
class Assertion:
    value: Any
    at: datetime          # valid time
    order: int            # recording order (global, strictly increasing)
    source: str
    turn: int
    kind: str
    case: str


class Ledger:
    """The reference model of current values (the C1/C2 rule of the spec).

    The current value of a unit is the value of the assertion with the latest valid time;
    ties go to the assertion recorded last. A re-explanation is an assertion made at the
    time it is said, so it re-affirms the value as of then.
    """

    def __init__(self) -> None:
        self.units: dict[tuple[str, str], list[Assertion]] = {}

    @staticmethod
    def _key(a: Assertion) -> tuple[datetime, int]:
        return (a.at, a.order)

    def add(self, fact: FactSpec, order: int, turn: int) -> tuple[Any, Any] | None:
        """Record a fact. Returns (old, new) when the unit's current value changed to a
        different value (an update in the C3 sense), else None."""
        unit = (fact.topic, fact.field)
        before = self.current(unit)
        self.units.setdefault(unit, []).append(
            Assertion(fact.value, fact.at, order, fact.source, turn, fact.kind, fact.case))
        after = self.current(unit)
        if before is not None and after is not None and after.value != before.value:
            return (before.value, after.value)
        return None

    def ordered(self, unit: tuple[str, str]) -> list[Assertion]:
        return sorted(self.units.get(unit, ()), key=self._key)

    def current(self, unit: tuple[str, str]) -> Assertion | None:
        items = self.units.get(unit)
        return max(items, key=self._key) if items else None

    def run(self, unit: tuple[str, str]) -> list[Assertion]:
        """The trailing run: the latest assertions (in valid-time order) that all carry the
        current value."""
        items = self.ordered(unit)
        if not items:
            return []
        i = len(items) - 1
        while i > 0 and items[i - 1].value == items[-1].value:
            i -= 1
        return items[i:]

    def replaced(self, unit: tuple[str, str]) -> Any:
        """The value the unit held (in valid time) just before its current value: what the
        current answer replaced. None if it never held another value."""
        items = self.ordered(unit)
        run = self.run(unit)
        before = items[:len(items) - len(run)]
        return before[-1].value if before else None

    def values(self, unit: tuple[str, str]) -> set[Any]:
        return {a.value for a in self.units.get(unit, ())}

    def first(self, unit: tuple[str, str]) -> Assertion | None:
        items = self.ordered(unit)
        return items[0] if items else None


@dataclass(frozen=True)
class ProbeTruth:
    topic: str
    field: str
    value: Any
    superseded: frozenset
    sources: frozenset
    replaced: Any
    reason: str
    last_event: str       # kind[:case] of the unit's most recently recorded assertion


@dataclass(frozen=True)
class TurnTruth:
    n: int                               # interactions after this turn
    bound: float                         # beta(n)
    units: int                           # distinct units asserted so far
    changes: tuple[tuple[str, str, Any, Any], ...] = ()  # (topic, field, old, new)
    expected_flags: frozenset | None = None              # ingest turns only (C3)
    probe: ProbeTruth | None = None


@dataclass(frozen=True)
class Truth:
    turns: tuple[TurnTruth, ...]
    extension_edges: tuple[tuple[str, str, int], ...]    # (src, dst, turn linked)


def ground_truth(stream: Stream) -> Truth:
    """Replay the stream through the reference model and record, after every turn, what
    each of C2, C3 and C5 demands."""
    ledger = Ledger()
    dependents: dict[str, set[str]] = {}
    edges: list[tuple[str, str, int]] = []
    out: list[TurnTruth] = []
    n = 0
    order = 0
    for turn in stream.turns:
        if turn.interaction:
            n += 1
        bound = stream.config.bound(n)
        if turn.kind == "link":
            assert turn.link is not None
            if turn.link.kind == "extension":
                dependents.setdefault(turn.link.src, set()).add(turn.link.dst)
                edges.append((turn.link.src, turn.link.dst, turn.index))
            out.append(TurnTruth(n, bound, len(ledger.units)))
            continue
        if turn.kind == "query":
            q = turn.query
            assert q is not None
            unit = (q.topic, q.field)
            cur = ledger.current(unit)
            assert cur is not None, f"turn {turn.index} asks about an unknown unit {unit}"
            last = max(ledger.units[unit], key=lambda a: a.order)
            probe = ProbeTruth(
                q.topic, q.field, cur.value,
                superseded=frozenset(ledger.values(unit) - {cur.value}),
                sources=frozenset(a.source for a in ledger.run(unit)),
                replaced=ledger.replaced(unit), reason=q.reason,
                last_event=last.kind + (f":{last.case}" if last.case else ""))
            out.append(TurnTruth(n, bound, len(ledger.units), probe=probe))
            continue
        changes = []
        for fact in turn.facts:
            order += 1
            changed = ledger.add(fact, order, turn.index)
            if changed is not None:
                changes.append((fact.topic, fact.field, changed[0], changed[1]))
        flags: set[str] = set()
        for topic, _, _, _ in changes:
            flags |= dependents.get(topic, set())
        out.append(TurnTruth(n, bound, len(ledger.units), tuple(changes), frozenset(flags)))
    return Truth(tuple(out), tuple(edges))


# ---------------------------------------------------------------------------- generator
class _Generator:
    def __init__(self, config: StreamConfig) -> None:
        self.c = config
        self.rng = random.Random(f"gem-trajectory:{config.seed}")
        self.ledger = Ledger()
        self.order = 0
        self.turns: list[Turn] = []
        self.live_projects: list[str] = []
        self.chatter_units: list[tuple[str, str]] = []
        self.recent: list[tuple[int, tuple[str, str]]] = []   # (turn, unit) of changes

    # -- values ---------------------------------------------------------------------
    def fresh_value(self, fld: str, current: Any = None) -> Any:
        rng = self.rng
        for _ in range(100):
            if fld == "deadline":
                if current is None:
                    v: Any = (date(2026, 2, 1) + timedelta(days=rng.randrange(0, 300))).isoformat()
                else:
                    shift = rng.choice((-1, 1)) * rng.randrange(7, 46)
                    v = (date.fromisoformat(current) + timedelta(days=shift)).isoformat()
            elif fld == "owner":
                v = rng.choice(PEOPLE)
            elif fld == "budget":
                if current is None:
                    v = rng.randrange(20_000, 400_001, 5_000)
                else:
                    factor = 1 + rng.choice((-1, 1)) * rng.uniform(0.05, 0.3)
                    v = max(5_000, int(round(current * factor / 5_000)) * 5_000)
            else:
                v = rng.choice(STATUSES)
            if v != current:
                return v
        raise RuntimeError(f"could not draw a new value for {fld}")  # pragma: no cover

    # -- helpers ----------------------------------------------------------------------
    def now(self) -> datetime:
        return START + timedelta(hours=self.c.step_hours * len(self.turns))

    def emit(self, kind: str, text: str, facts: Sequence[FactSpec] = (), **kw: Any) -> None:
        index = len(self.turns)
        for f in facts:
            self.order += 1
            changed = self.ledger.add(f, self.order, index)
            if changed is not None or f.kind in ("late", "contradiction"):
                self.recent.append((index, (f.topic, f.field)))
        self.turns.append(Turn(index, self.now(), kind, text, tuple(facts),
                               importance=IMPORTANCE[kind], **kw))

    def project_units(self) -> list[tuple[str, str]]:
        return [(p, f) for p in self.live_projects for f in PROJECT_FIELDS]

    def pick_unit(self, hot: Sequence[tuple[str, str]]) -> tuple[str, str]:
        units = self.project_units()
        weights = [3.0 if u in hot else 1.0 for u in units]
        return self.rng.choices(units, weights)[0]

    # -- turn kinds -------------------------------------------------------------------
    def kickoff(self, project: str) -> None:
        now = self.now()
        source = self.rng.choice(("chat", "jira", "email"))
        facts = [FactSpec(project, f, self.fresh_value(f), now, source, "kickoff")
                 for f in PROJECT_FIELDS]
        v = {f.field: value_str(f.value) for f in facts}
        text = (f"Kicking off {project}: deadline {v['deadline']}, owner {v['owner']}, "
                f"budget {v['budget']}, status {v['status']}.")
        self.live_projects.append(project)
        self.emit("kickoff", text, facts)

    def update(self, hot: Sequence[tuple[str, str]]) -> None:
        topic, fld = unit = self.pick_unit(hot)
        cur = self.ledger.current(unit)
        assert cur is not None
        earlier = sorted(self.ledger.values(unit) - {cur.value}, key=str)
        if earlier and self.rng.random() < 0.1:
            value, case = self.rng.choice(earlier), "revert"
        else:
            value, case = self.fresh_value(fld, cur.value), "change"
        source = self.rng.choice(SOURCES)
        fact = FactSpec(topic, fld, value, self.now(), source, "update", case)
        verb = {"deadline": "the deadline moved to", "owner": "the new owner is",
                "budget": "the budget is now", "status": "the status changed to"}[fld]
        self.emit("update", f"Update on {topic} ({source}): {verb} {value_str(value)}.", [fact])

    def reexplain(self, hot: Sequence[tuple[str, str]]) -> None:
        topic, fld = unit = self.pick_unit(hot)
        cur = self.ledger.current(unit)
        assert cur is not None
        fact = FactSpec(topic, fld, cur.value, self.now(), "chat", "reexplain")
        self.emit("reexplain",
                  f"As I said before, the {fld} of {topic} is {value_str(cur.value)}.", [fact])

    def late(self, hot: Sequence[tuple[str, str]]) -> bool:
        topic, fld = unit = self.pick_unit(hot)
        cur = self.ledger.current(unit)
        first = self.ledger.first(unit)
        assert cur is not None and first is not None
        lo = first.at - timedelta(days=3)
        hi = cur.at
        taken = {a.at for a in self.ledger.units[unit]}
        minutes = int((hi - lo).total_seconds() // 60)
        if minutes < 2:
            return False
        for _ in range(20):
            at = lo + timedelta(minutes=self.rng.randrange(1, minutes))
            if at not in taken and at < hi:
                break
        else:  # pragma: no cover - 20 collisions on a minute grid
            return False
        run_start = self.ledger.run(unit)[0]
        case = "predates-current" if at < run_start.at else "inside-current-run"
        value = self.fresh_value(fld, cur.value)
        source = self.rng.choice(("finance-sheet", "email", "standup-notes"))
        fact = FactSpec(topic, fld, value, at, source, "late", case)
        self.emit("late", f"Found an older note in the {source}: as of {stamp(at)}, the {fld} "
                          f"of {topic} was {value_str(value)}.", [fact])
        return True

    def contradiction(self, hot: Sequence[tuple[str, str]]) -> None:
        topic, fld = unit = self.pick_unit(hot)
        cur = self.ledger.current(unit)
        assert cur is not None
        source = self.rng.choice([s for s in SOURCES if s != cur.source])
        value = self.fresh_value(fld, cur.value)
        if self.rng.random() < 0.5:
            at, case = cur.at, "same-moment"
            text = (f"{source} disagrees: as of {stamp(at)} the {fld} of {topic} was "
                    f"{value_str(value)}, not {value_str(cur.value)}.")
        else:
            at, case = self.now(), "newer"
            text = (f"{source} says the {fld} of {topic} is {value_str(value)}, "
                    f"not {value_str(cur.value)}.")
        fact = FactSpec(topic, fld, value, at, source, "contradiction", case)
        self.emit("contradiction", text, [fact])

    def chatter(self) -> None:
        rng = self.rng
        used = set(self.chatter_units)
        fresh = [(t, f) for t, (fields, _) in CHATTER.items() for f in fields
                 if (t, f) not in used]
        if fresh and (not self.chatter_units or rng.random() < 0.75):
            topic, fld = rng.choice(fresh)
            self.chatter_units.append((topic, fld))
        else:
            topic, fld = rng.choice(self.chatter_units)
        values = CHATTER[topic][1]
        cur = self.ledger.current((topic, fld))
        value = rng.choice([v for v in values if cur is None or v != cur.value])
        fact = FactSpec(topic, fld, value, self.now(), "chat", "chatter")
        self.emit("chatter", f"By the way, {topic.lower()}: {fld} is {value}.", [fact])

    def link(self, spec: LinkSpec) -> None:
        if spec.kind == "extension":
            text = f"{spec.dst} depends on {spec.src}: when {spec.src} changes, {spec.dst} has to be re-planned."
        else:
            text = f"{spec.dst} is related to {spec.src} (no dependency)."
        self.emit("link", text, link=spec)

    def query(self, hot: Sequence[tuple[str, str]]) -> None:
        rng = self.rng
        recent = [u for i, u in self.recent if i >= len(self.turns) - 10
                  and u[0] in self.live_projects]
        roll = rng.random()
        if roll < 0.45 and hot:
            unit, reason = rng.choice(list(hot)), "hot"
        elif roll < 0.70 and recent:
            unit, reason = rng.choice(recent), "recent"
        else:
            unit, reason = rng.choice(self.project_units()), "random"
        topic, fld = unit
        text = rng.choice(QUESTION_TEMPLATES[fld]).format(t=topic)
        self.emit("query", text, query=QuerySpec(topic, fld, text, reason))

    # -- the stream -------------------------------------------------------------------
    def build(self) -> Stream:
        c = self.c
        rng = self.rng
        n_projects = max(2, min(c.projects, len(PROJECT_POOL), c.turns // 12))
        n_initial = max(1, min(c.initial_projects, n_projects, c.turns // 20 or 1))
        projects = rng.sample(PROJECT_POOL, n_projects)
        later = n_projects - n_initial
        kickoff_at: dict[int, str] = {i: projects[i] for i in range(n_initial)}
        for k in range(later):
            t = max(n_initial + k, round(c.turns * (k + 1) / (later + 1)))
            while t in kickoff_at:
                t += 1
            kickoff_at[t] = projects[n_initial + k]
        # Declared dependencies: each project after the first may extend one or two earlier
        # ones; a few association edges join otherwise unrelated projects.
        declared: list[LinkSpec] = []
        for j in range(1, n_projects):
            sources = []
            if rng.random() < 0.7:
                sources.append(rng.choice(projects[:j]))
            if j >= 2 and rng.random() < 0.3:
                other = rng.choice(projects[:j])
                if other not in sources:
                    sources.append(other)
            declared += [LinkSpec(s, projects[j], "extension") for s in sources]
        pairs = [(a, b) for i, a in enumerate(projects) for b in projects[i + 1:]
                 if not any({l.src, l.dst} == {a, b} for l in declared)]
        for a, b in rng.sample(pairs, min(c.associations, len(pairs))):
            declared.append(LinkSpec(a, b, "association"))
        pending = list(declared)
        hot: list[tuple[str, str]] = []
        weights = {"update": c.w_update, "reexplain": c.w_reexplain, "late": c.w_late,
                   "contradiction": c.w_contradiction, "query": c.w_query,
                   "chatter": c.w_chatter}
        for i in range(c.turns):
            if i in kickoff_at:
                self.kickoff(kickoff_at[i])
                if not hot and len(self.live_projects) >= n_initial:
                    units = self.project_units()
                    hot = rng.sample(units, min(c.hot_facts, len(units)))
                continue
            if not self.live_projects:  # only possible for tiny streams
                self.chatter()
                continue
            ready = [l for l in pending if l.src in self.live_projects
                     and l.dst in self.live_projects]
            kinds = dict(weights)
            if ready:
                kinds["link"] = c.w_link
            while True:
                kind = rng.choices(list(kinds), list(kinds.values()))[0]
                if kind == "link":
                    spec = ready[0]
                    pending.remove(spec)
                    self.link(spec)
                elif kind == "update":
                    self.update(hot)
                elif kind == "reexplain":
                    self.reexplain(hot)
                elif kind == "late":
                    if not self.late(hot):
                        continue
                elif kind == "contradiction":
                    self.contradiction(hot)
                elif kind == "chatter":
                    self.chatter()
                else:
                    self.query(hot)
                break
        return Stream(c, tuple(self.turns), tuple(projects), tuple(hot),
                      tuple(l for l in declared if l not in pending))


def generate(config: StreamConfig | None = None, *, turns: int | None = None,
             seed: int | None = None) -> Stream:
    """A seeded adversarial stream. Same (config) -> the same stream, byte for byte."""
    config = config or StreamConfig()
    if turns is not None:
        config = replace(config, turns=turns)
    if seed is not None:
        config = replace(config, seed=seed)
    if config.turns < 1:
        raise ValueError("a stream needs at least one turn")
    return _Generator(config).build()


# ---------------------------------------------------------------------------- systems
@dataclass(frozen=True)
class Provenance:
    """What a system can show about its current answer: the value, where it came from,
    and the value it replaced (None when it replaced nothing)."""

    value: Any
    source: str | None
    replaced: Any


class System(ABC):
    """The interface every system under test implements (gem and the five baselines)."""

    name: str = "system"
    family: str = ""

    def __init__(self) -> None:
        self.now = START
        self.n = 0  # interactions seen (ingest and query turns)

    def begin(self, turn: Turn) -> None:
        """Called before every turn: the simulated clock moves to the turn's time."""
        self.now = turn.time
        if turn.interaction:
            self.n += 1

    @abstractmethod
    def ingest(self, turn: Turn) -> None:
        """Take in the facts one turn states (turn.text is the raw utterance)."""

    @abstractmethod
    def link(self, turn: Turn) -> None:
        """Take in a declared relation between two projects (turn.link)."""

    @abstractmethod
    def query(self, topic: str, field: str, text: str) -> Any:
        """Answer the question `text` about topic.field: the current value, or None."""

    def flagged_after_update(self) -> set[str]:
        """Topics (titles) the last ingest marked for re-evaluation as a consequence of it."""
        return set()

    @abstractmethod
    def footprint(self) -> int:
        """Units in the active state: what default retrieval ranks over (C5)."""

    @abstractmethod
    def provenance(self, topic: str, field: str, text: str | None = None) -> Provenance | None:
        """Where the current answer to `text` came from and what it replaced, without side
        effects (systems that answer by search look it up the way they answered)."""

    def provenance_complete(self, topic: str, field: str, truth: ProbeTruth,
                            text: str | None = None) -> bool:
        """Can the system show the right answer, a source that asserted it, and the value
        it replaced?"""
        p = self.provenance(topic, field, text)
        return (p is not None and p.value == truth.value and p.source in truth.sources
                and p.replaced == truth.replaced)

    def diagnose(self, topic: str, field: str) -> dict[str, Any]:
        """System-specific detail for a failed probe (read-only)."""
        return {}

    def summary(self) -> dict[str, Any]:
        """System-specific facts for the report (errors, audits, ...)."""
        return {}

    def close(self) -> None:
        pass


class GemSystem(System):
    """gem with its default policies plus the benchmark's C5 bound."""

    name = "gem"
    family = "governed evolving memory (this project)"

    def __init__(self, config: StreamConfig, *, engine: str = "kuzu",
                 extra_policies: str = "", maintain_every: int = 0,
                 name: str | None = None) -> None:
        super().__init__()
        import gem
        from gem.policy import default_policy_path
        self._gem = gem
        if name:
            self.name = name
        self._dir = tempfile.TemporaryDirectory(prefix="gem-bench-")
        bound = Path(self._dir.name) / "trajectory-bound.policy"
        bound.write_text("# the trajectory benchmark's C5 bound\n" + config.bound_policy()
                         + extra_policies, encoding="utf-8")
        self.policy_files = [str(default_policy_path()), str(bound)]
        self.mem = gem.open(path=None, policies=self.policy_files,
                            embedder=gem.HashingEmbedder(), clock=lambda: self.now,
                            engine=engine)
        self.config = config
        self.maintain_every = maintain_every
        self._turns = 0
        self._flagged: set[str] = set()
        self._titles: dict[str, str] = {}
        self.errors: list[dict[str, Any]] = []
        self.bound_mismatches: list[dict[str, Any]] = []
        self._turn = -1

    def _title(self, tid: str) -> str:
        if tid not in self._titles:
            view = self.mem.inspect(tid)
            self._titles[tid] = view.title if view is not None else tid
        return self._titles[tid]

    def begin(self, turn: Turn) -> None:
        super().begin(turn)
        self._turn = turn.index

    def ingest(self, turn: Turn) -> None:
        gem = self._gem
        facts = [gem.Fact(f.topic, f.field, f.value, at=f.at, source=f.source, actor="user",
                          ref=f"turn-{turn.index}") for f in turn.facts]
        self._flagged = set()
        try:
            result = self.mem.ingest(facts)
        except gem.GemError as exc:
            self.errors.append({"turn": turn.index, "op": "ingest", "error": type(exc).__name__,
                                "detail": str(exc)})
            return
        self._flagged = {self._title(t) for t in result.flagged}
        self._maintain()

    def _maintain(self) -> None:
        self._turns += 1
        if self.maintain_every and self._turns % self.maintain_every == 0:
            try:
                self.mem.maintain()
            except self._gem.GemError as exc:
                self.errors.append({"turn": self._turn, "op": "maintain",
                                    "error": type(exc).__name__, "detail": str(exc)})

    def link(self, turn: Turn) -> None:
        assert turn.link is not None
        try:
            self.mem.link(turn.link.src, turn.link.dst, kind=turn.link.kind)
        except self._gem.GemError as exc:
            self.errors.append({"turn": turn.index, "op": "link", "error": type(exc).__name__,
                                "detail": str(exc)})

    def query(self, topic: str, field: str, text: str) -> Any:
        try:
            result = self.mem.retrieve(topic=topic, fields=[field])
        except self._gem.GemError as exc:
            self.errors.append({"turn": self._turn, "op": "retrieve",
                                "error": type(exc).__name__, "detail": str(exc)})
            return None
        finally:
            self._maintain()
        return result.value(topic, field)

    def flagged_after_update(self) -> set[str]:
        return set(self._flagged)

    def footprint(self) -> int:
        stats = self.mem.stats()
        want = self.config.bound(self.n)
        got = stats.get("active_bound")
        if stats.get("interactions") != self.n or got is None or abs(got - want) > 1e-9:
            self.bound_mismatches.append({"turn": self._turn, "n": self.n,
                                          "gem_interactions": stats.get("interactions"),
                                          "beta": want, "gem_active_bound": got})
        return int(stats["active_fields"])

    def provenance(self, topic: str, field: str, text: str | None = None) -> Provenance | None:
        try:
            history = self.mem.history(topic, field)
            view = self.mem.inspect(topic, field)
        except self._gem.GemError:
            return None
        if view is None:
            return None
        # In order of statement: a re-stated value counts from its latest statement.
        entries = sorted((h for h in history if h.status != "retracted"
                          and h.provenance.polarity == "+"), key=lambda h: (h.asserted_at, h.recorded_at))
        current = [i for i, h in enumerate(entries) if h.status == "current"]
        if not current:
            return None
        i = current[0]
        cur = entries[i]
        older = [h for h in entries[:i] if h.value != cur.value]
        # The source of the latest statement: the entry's own, or a later re-statement's.
        statements = [(cur.valid_at, cur.provenance.source)] + [
            (o.valid_at, o.provenance.source) for o in cur.observations
            if o.provenance.polarity == "+"]
        source = max(statements, key=lambda s: s[0])[1]
        return Provenance(cur.value, source, older[-1].value if older else None)

    def diagnose(self, topic: str, field: str) -> dict[str, Any]:
        out: dict[str, Any] = {}
        try:
            tv = self.mem.inspect(topic)
            fv = self.mem.inspect(topic, field)
            out["topic_status"] = None if tv is None else tv.status
            if fv is not None:
                out.update(field_status=fv.status, salience=round(fv.salience, 4),
                           contested=fv.contested, stored_current=fv.value)
            out["history"] = [(h.value, h.valid_at.isoformat(), h.status, h.provenance.source,
                               len(h.observations)) for h in self.mem.history(topic, field)]
        except self._gem.GemError as exc:
            out["error"] = str(exc)
        return out

    def summary(self) -> dict[str, Any]:
        audit = self.mem.audit()
        stats = self.mem.stats()
        return {"errors": self.errors, "bound_mismatches": self.bound_mismatches[:20],
                "bound_mismatch_count": len(self.bound_mismatches),
                "audit_ok": audit.ok, "audit_violations": [v.model_dump() for v in audit.violations][:20],
                "stats": {k: v for k, v in stats.items() if k != "topics"},
                "policies": [p.name for p in self.mem.policies.policies],
                "maintain_every": self.maintain_every}

    def close(self) -> None:
        self.mem.close()
        self._dir.cleanup()


# ---------------------------------------------------------------------------- running
@dataclass
class ProbeOutcome:
    turn: int
    topic: str
    field: str
    expected: Any
    got: Any
    outcome: str          # correct | stale | miss | wrong
    reason: str
    last_event: str
    provenance: bool


@dataclass
class FlagOutcome:
    turn: int
    changes: list[tuple[str, str, Any, Any]]
    expected: list[str]
    got: list[str]


@dataclass
class SystemRun:
    name: str
    family: str
    probes: list[ProbeOutcome] = field(default_factory=list)
    flags: list[FlagOutcome] = field(default_factory=list)
    footprint: list[int] = field(default_factory=list)
    seconds: list[float] = field(default_factory=list)
    kinds: list[str] = field(default_factory=list)
    diagnoses: dict[int, dict[str, Any]] = field(default_factory=dict)
    summary: dict[str, Any] = field(default_factory=dict)
    wall_seconds: float = 0.0


def classify(answer: Any, truth: ProbeTruth) -> str:
    if answer is None:
        return "miss"
    if answer == truth.value:
        return "correct"
    if answer in truth.superseded:
        return "stale"
    return "wrong"


def run_system(stream: Stream, truth: Truth, system: System,
               progress: Callable[[str], None] | None = None) -> SystemRun:
    """Drive one system through the stream and record what it did at every turn."""
    run = SystemRun(system.name, system.family)
    started = time.perf_counter()
    step = max(1, len(stream.turns) // 10)
    for turn, tt in zip(stream.turns, truth.turns):
        system.begin(turn)
        t0 = time.perf_counter()
        answer = None
        if turn.kind == "link":
            system.link(turn)
        elif turn.kind == "query":
            q = turn.query
            assert q is not None
            answer = system.query(q.topic, q.field, q.text)
        else:
            system.ingest(turn)
        dt = time.perf_counter() - t0
        flagged = system.flagged_after_update() if turn.kind in INGEST_KINDS else None
        run.seconds.append(dt)
        run.kinds.append(turn.kind)
        run.footprint.append(system.footprint())
        if flagged is not None and tt.expected_flags is not None:
            run.flags.append(FlagOutcome(turn.index, [list(c) for c in tt.changes],
                                         sorted(tt.expected_flags), sorted(flagged)))
        if tt.probe is not None:
            p = tt.probe
            outcome = classify(answer, p)
            complete = system.provenance_complete(p.topic, p.field, p, turn.query.text)
            run.probes.append(ProbeOutcome(turn.index, p.topic, p.field, p.value, answer,
                                           outcome, p.reason, p.last_event, complete))
            if outcome != "correct":
                run.diagnoses[turn.index] = system.diagnose(p.topic, p.field)
        if progress and (turn.index + 1) % step == 0:
            progress(f"  {system.name}: turn {turn.index + 1}/{len(stream.turns)}")
    run.wall_seconds = time.perf_counter() - started
    run.summary = system.summary()
    return run


def _ratio(num: float, den: float) -> float | None:
    return None if den == 0 else num / den


def score(stream: Stream, truth: Truth, run: SystemRun) -> dict[str, Any]:
    """The metrics of one run (definitions in specs/trajectory-benchmark.md)."""
    probes = run.probes
    n_probes = len(probes)
    outcomes = Counter(p.outcome for p in probes)
    expected = sum(len(f.expected) for f in run.flags)
    raised = sum(len(f.got) for f in run.flags)
    hit = sum(len(set(f.expected) & set(f.got)) for f in run.flags)
    ratios = [fp / tt.bound for fp, tt in zip(run.footprint, truth.turns)]
    within = sum(1 for fp, tt in zip(run.footprint, truth.turns) if fp <= tt.bound)
    ms = [s * 1000 for s in run.seconds]
    by_kind: dict[str, list[float]] = {}
    for k, s in zip(run.kinds, ms):
        by_kind.setdefault(k, []).append(s)
    return {
        "probes": n_probes,
        "accuracy": _ratio(outcomes["correct"], n_probes),
        "stale_rate": _ratio(outcomes["stale"], n_probes),
        "miss_rate": _ratio(outcomes["miss"], n_probes),
        "wrong_rate": _ratio(outcomes["wrong"], n_probes),
        "flag_recall": _ratio(hit, expected),
        "flag_precision": _ratio(hit, raised),
        "flags_expected": expected,
        "flags_raised": raised,
        "footprint_final": run.footprint[-1] if run.footprint else 0,
        "footprint_max": max(run.footprint, default=0),
        "footprint_bound_ratio_max": max(ratios, default=0.0),
        "within_bound_share": _ratio(within, len(run.footprint)),
        "provenance_complete": _ratio(sum(p.provenance for p in probes), n_probes),
        "ms_per_turn_mean": statistics.fmean(ms) if ms else 0.0,
        "ms_per_turn_p95": (sorted(ms)[int(0.95 * (len(ms) - 1))] if ms else 0.0),
        "ms_by_kind": {k: round(statistics.fmean(v), 3) for k, v in sorted(by_kind.items())},
    }


def breakdown(run: SystemRun, key: str) -> dict[str, dict[str, Any]]:
    """Accuracy of the probes grouped by `reason` or `last_event`."""
    groups: dict[str, list[ProbeOutcome]] = {}
    for p in run.probes:
        groups.setdefault(getattr(p, key), []).append(p)
    return {k: {"probes": len(v), "accuracy": sum(p.outcome == "correct" for p in v) / len(v),
                "stale": sum(p.outcome == "stale" for p in v),
                "miss": sum(p.outcome == "miss" for p in v)}
            for k, v in sorted(groups.items())}


def failures(run: SystemRun, truth: Truth, stream: Stream, limit: int | None) -> dict[str, Any]:
    """Every failed probe and flag decision (or the first `limit`), with what the truth was."""
    bad = [p for p in run.probes if p.outcome != "correct"]
    flag_bad = [f for f in run.flags if set(f.expected) != set(f.got)]
    over = [i for i, (fp, tt) in enumerate(zip(run.footprint, truth.turns)) if fp > tt.bound]
    cut = (lambda xs: xs) if limit is None else (lambda xs: xs[:limit])
    probes = []
    for p in cut(bad):
        item = asdict(p)
        item["history"] = _unit_history(stream, p.topic, p.field, p.turn)
        item["cause"] = cause(p, item["history"], run.diagnoses.get(p.turn, {}))
        if p.turn in run.diagnoses:
            item["system"] = run.diagnoses[p.turn]
        probes.append(item)
    return {
        "probe_failures": len(bad),
        "probes": probes,
        "flag_failures": len(flag_bad),
        "flags": [{**asdict(f), "missing": sorted(set(f.expected) - set(f.got)),
                   "extra": sorted(set(f.got) - set(f.expected))} for f in cut(flag_bad)],
        "over_bound_turns": cut(over),
        "over_bound_count": len(over),
    }


def cause(p: ProbeOutcome, history: list[list[Any]], diagnosis: dict[str, Any]) -> str:
    """A one-line reading of why a probe failed, from the truth side (and, for gem, the
    field's status)."""
    if p.outcome == "miss":
        if diagnosis.get("field_status") == "hidden":
            return "no answer: the field was hidden (attenuated under the C5 bound)"
        if diagnosis.get("topic_status") == "archived":
            return "no answer: the topic was archived"
        return "no answer: nothing about this unit was retrieved (evicted or ranked out)"
    late = [h for h in history if h[1].startswith("late") and h[2] == value_str(p.got)]
    inside = [h for h in history if h[1] == "late:inside-current-run"]
    if p.outcome == "stale" and late:
        note = ("" if not inside else "; the unit had a late fact older than a re-statement "
                "of its current value (turn " + ", ".join(str(h[0]) for h in inside) + ")")
        return f"a late-arriving value (turn {late[-1][0]}) was taken as current{note}"
    if p.outcome == "stale":
        return "an older value was returned instead of the current one"
    return "a value never asserted for this unit was returned"


def _unit_history(stream: Stream, topic: str, fld: str, upto: int) -> list[list[Any]]:
    rows = []
    for turn in stream.turns[:upto]:
        for f in turn.facts:
            if f.topic == topic and f.field == fld:
                rows.append([turn.index, f.kind + (f":{f.case}" if f.case else ""),
                             value_str(f.value), stamp(f.at), f.source])
    return rows


# ---------------------------------------------------------------------------- report
SYSTEM_ORDER = ("gem", "vector-store", "mem0-v2", "mem0-v3", "zep", "ga-memgpt")


def make_systems(config: StreamConfig, names: Sequence[str] | None = None, *,
                 gem_engine: str = "kuzu", gem_maintain_every: int = 0) -> list[System]:
    from . import baselines
    factories: dict[str, Callable[[], System]] = {
        "gem": lambda: GemSystem(config, engine=gem_engine, maintain_every=gem_maintain_every),
        "vector-store": lambda: baselines.AppendOnlyVectorStore(config),
        "mem0-v2": lambda: baselines.OverwriteFactStore(config),
        "mem0-v3": lambda: baselines.AddOnlyFactStore(config),
        "zep": lambda: baselines.BitemporalGraph(config),
        "ga-memgpt": lambda: baselines.RecencyImportanceMemory(config),
    }
    names = list(names or SYSTEM_ORDER)
    unknown = [n for n in names if n not in factories]
    if unknown:
        raise ValueError(f"unknown system(s) {unknown}; choose from {list(factories)}")
    return [factories[n]() for n in names]


@dataclass
class Report:
    stream: Stream
    truth: Truth
    runs: list[SystemRun]
    scores: dict[str, dict[str, Any]]
    seconds: float

    def table(self) -> str:
        return format_table(self)

    def to_json(self, failure_limit: int | None = 200) -> dict[str, Any]:
        c = self.stream.config
        systems = {}
        for run in self.runs:
            cum, correct, seen = [], 0, 0
            probe_at = {p.turn: p for p in run.probes}
            for i in range(len(self.stream.turns)):
                if i in probe_at:
                    seen += 1
                    correct += probe_at[i].outcome == "correct"
                cum.append(None if seen == 0 else correct / seen)
            limit = None if run.name.startswith("gem") else failure_limit
            systems[run.name] = {
                "family": run.family,
                "scores": self.scores[run.name],
                "by_reason": breakdown(run, "reason"),
                "by_last_event": breakdown(run, "last_event"),
                "series": {"footprint": run.footprint, "cumulative_accuracy": cum},
                "failures": failures(run, self.truth, self.stream, limit),
                "details": run.summary,
                "wall_seconds": run.wall_seconds,
            }
        return {
            "benchmark": "gem trajectory benchmark",
            "spec": "specs/trajectory-benchmark.md",
            "config": asdict(c),
            "bound": f"beta(n) = {c.bound_base:g} + {c.bound_slope:g} * n",
            "stream": {"turns": len(self.stream.turns), "projects": list(self.stream.projects),
                       "hot_facts": [list(u) for u in self.stream.hot],
                       "links": [asdict(l) for l in self.stream.links],
                       "kinds": self.stream.counts(),
                       "units": self.truth.turns[-1].units if self.truth.turns else 0,
                       "interactions": self.truth.turns[-1].n if self.truth.turns else 0,
                       "updates_with_dependents": sum(1 for t in self.truth.turns
                                                      if t.expected_flags),
                       "flags_expected": sum(len(t.expected_flags or ()) for t in self.truth.turns)},
            "truth_series": {"bound": [t.bound for t in self.truth.turns],
                             "n": [t.n for t in self.truth.turns],
                             "probe_turns": [i for i, t in enumerate(self.truth.turns) if t.probe]},
            "systems": systems,
            "seconds": self.seconds,
        }


def _pct(x: float | None) -> str:
    return "n/a" if x is None else f"{100 * x:5.1f}%"


def format_table(report: Report) -> str:
    c = report.stream.config
    t = report.truth.turns[-1]
    counts = report.stream.counts()
    lines = [
        f"gem trajectory benchmark: {len(report.stream.turns)} turns, seed {c.seed}, "
        f"{len(report.stream.projects)} projects, {t.units} units, n={t.n} interactions, "
        f"beta(n) = {c.bound_base:g} + {c.bound_slope:g}*n",
        "stream: " + ", ".join(f"{k} {v}" for k, v in counts.items()),
        f"probes: {sum(1 for x in report.truth.turns if x.probe)}; updates with dependents: "
        f"{sum(1 for x in report.truth.turns if x.expected_flags)} "
        f"({sum(len(x.expected_flags or ()) for x in report.truth.turns)} expected flags)",
        "",
    ]
    head = ("system", "accuracy", "stale", "miss", "flag R", "flag P", "max fp/beta",
            "within beta", "provenance", "ms/turn")
    rows = []
    for run in report.runs:
        s = report.scores[run.name]
        rows.append((run.name, _pct(s["accuracy"]), _pct(s["stale_rate"]), _pct(s["miss_rate"]),
                     _pct(s["flag_recall"]), _pct(s["flag_precision"]),
                     f"{s['footprint_bound_ratio_max']:.2f}", _pct(s["within_bound_share"]),
                     _pct(s["provenance_complete"]), f"{s['ms_per_turn_mean']:.2f}"))
    widths = [max(len(str(r[i])) for r in (head, *rows)) for i in range(len(head))]
    fmt = lambda r: "  ".join(str(v).ljust(w) if i == 0 else str(v).rjust(w)
                              for i, (v, w) in enumerate(zip(r, widths)))
    lines.append(fmt(head))
    lines.append("  ".join("-" * w for w in widths))
    lines += [fmt(r) for r in rows]
    # accuracy by the unit's last event, the adversarial cases side by side
    cases = sorted({p.last_event for run in report.runs for p in run.probes})
    if cases:
        lines += ["", "accuracy by the probed unit's most recent event (probes per case):"]
        head2 = ("case", "probes", *[run.name for run in report.runs])
        rows2 = []
        for case in cases:
            per = []
            count = 0
            for run in report.runs:
                ps = [p for p in run.probes if p.last_event == case]
                count = len(ps)
                per.append(_pct(sum(p.outcome == "correct" for p in ps) / len(ps)) if ps else "n/a")
            rows2.append((case, str(count), *per))
        w2 = [max(len(str(r[i])) for r in (head2, *rows2)) for i in range(len(head2))]
        f2 = lambda r: "  ".join(str(v).ljust(w) if i == 0 else str(v).rjust(w)
                                 for i, (v, w) in enumerate(zip(r, w2)))
        lines.append(f2(head2))
        lines += [f2(r) for r in rows2]
    for run in report.runs:
        if not run.name.startswith("gem"):
            continue
        bad = [p for p in run.probes if p.outcome != "correct"]
        fb = [f for f in run.flags if set(f.expected) != set(f.got)]
        over = sum(1 for fp, tt in zip(run.footprint, report.truth.turns) if fp > tt.bound)
        lines += ["", f"{run.name}: {len(bad)} failed probes, {len(fb)} wrong flag sets, "
                      f"{over} turns over beta(n), {len(run.summary.get('errors', []))} rejected "
                      f"operations, audit {'ok' if run.summary.get('audit_ok') else 'FAILED'}"]
        for p in bad[:15]:
            why = cause(p, _unit_history(report.stream, p.topic, p.field, p.turn),
                        run.diagnoses.get(p.turn, {}))
            lines.append(f"  turn {p.turn}: {p.topic}.{p.field} expected {p.expected!r} got "
                         f"{p.got!r}: {why}")
        if len(bad) > 15:
            lines.append(f"  ... {len(bad) - 15} more in the JSON")
        for f in fb[:10]:
            lines.append(f"  turn {f.turn}: flags expected {f.expected} got {f.got}")
    lines += ["", f"wall time {report.seconds:.1f}s"]
    return "\n".join(lines)


def run_benchmark(config: StreamConfig, systems: Sequence[str] | None = None, *,
                  gem_engine: str = "kuzu", gem_maintain_every: int = 0,
                  progress: Callable[[str], None] | None = None) -> Report:
    started = time.perf_counter()
    stream = generate(config)
    truth = ground_truth(stream)
    runs = []
    for system in make_systems(config, systems, gem_engine=gem_engine,
                               gem_maintain_every=gem_maintain_every):
        if progress:
            progress(f"running {system.name} ...")
        try:
            runs.append(run_system(stream, truth, system, progress))
        finally:
            system.close()
    scores = {run.name: score(stream, truth, run) for run in runs}
    return Report(stream, truth, runs, scores, time.perf_counter() - started)


def write_outputs(report: Report, out: Path) -> dict[str, Path | str]:
    """Write the table, the JSON and (if matplotlib is installed) the PNG into `out`."""
    out.mkdir(parents=True, exist_ok=True)
    c = report.stream.config
    stem = f"trajectory-{len(report.stream.turns)}-seed{c.seed}"
    written: dict[str, Path | str] = {}
    table_path = out / f"{stem}.txt"
    table_path.write_text(report.table() + "\n", encoding="utf-8")
    written["table"] = table_path
    json_path = out / f"{stem}.json"
    json_path.write_text(json.dumps(report.to_json(), indent=1, default=_json_default) + "\n",
                         encoding="utf-8")
    written["json"] = json_path
    png = plot(report, out / f"{stem}.png")
    written["png"] = png
    return written


def _json_default(x: Any) -> Any:
    if isinstance(x, datetime):
        return x.isoformat()
    if isinstance(x, (set, frozenset)):
        return sorted(x, key=str)
    return str(x)


def plot(report: Report, path: Path) -> Path | str:
    """Accuracy and footprint over turns. Returns the path, or why no PNG was written."""
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return ("no PNG: matplotlib is not installed (it is the optional `bench` extra: "
                "pip install 'gem[bench]')")
    data = report.to_json(failure_limit=0)
    turns = list(range(len(report.stream.turns)))
    fig, (ax1, ax2) = plt.subplots(2, 1, figsize=(10, 8), sharex=True)
    for run in report.runs:
        series = data["systems"][run.name]["series"]
        acc = series["cumulative_accuracy"]
        xs = [i for i, a in zip(turns, acc) if a is not None]
        ax1.plot(xs, [100 * acc[i] for i in xs], label=run.name, linewidth=2 if run.name == "gem" else 1.2)
        ax2.plot(turns, series["footprint"], label=run.name, linewidth=2 if run.name == "gem" else 1.2)
    ax2.plot(turns, [t.bound for t in report.truth.turns], "k--", label="beta(n)")
    ax1.set_ylabel("current-value accuracy, cumulative (%)")
    ax1.set_ylim(0, 105)
    ax1.legend(loc="lower left", fontsize=8)
    ax1.grid(alpha=0.3)
    ax2.set_ylabel("active footprint (units)")
    ax2.set_xlabel("turn")
    ax2.legend(loc="upper left", fontsize=8)
    ax2.grid(alpha=0.3)
    c = report.stream.config
    fig.suptitle(f"gem trajectory benchmark: {len(turns)} turns, seed {c.seed}")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


# ---------------------------------------------------------------------------- CLI
def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--turns", type=int, default=500, help="stream length (default 500)")
    p.add_argument("--seed", type=int, default=0, help="generator seed (default 0)")
    p.add_argument("--out", default="bench/out", help="output directory (default bench/out/)")
    p.add_argument("--systems", default=",".join(SYSTEM_ORDER),
                   help=f"comma-separated subset of {','.join(SYSTEM_ORDER)}")
    p.add_argument("--bound-base", type=float, default=StreamConfig.bound_base,
                   help="beta(n) = base + slope * n (default 40)")
    p.add_argument("--bound-slope", type=float, default=StreamConfig.bound_slope,
                   help="beta(n) = base + slope * n (default 0.1)")
    p.add_argument("--gem-engine", default="kuzu", choices=["kuzu", "ladybug"])
    p.add_argument("--gem-maintain-every", type=int, default=0, metavar="K",
                   help="run gem's maintenance (forget + revise) every K interactions "
                        "(default 0: never; only the C5 bound attenuates)")
    p.add_argument("--quiet", action="store_true", help="no progress lines on stderr")


def run(args: argparse.Namespace) -> int:
    config = StreamConfig(turns=args.turns, seed=args.seed, bound_base=args.bound_base,
                          bound_slope=args.bound_slope)
    systems = [s.strip() for s in args.systems.split(",") if s.strip()]
    progress = None if args.quiet else (lambda m: print(m, file=sys.stderr, flush=True))
    try:
        report = run_benchmark(config, systems, gem_engine=args.gem_engine,
                               gem_maintain_every=args.gem_maintain_every, progress=progress)
    except ValueError as exc:
        print(f"gem bench trajectory: {exc}", file=sys.stderr)
        return 2
    print(report.table())
    written = write_outputs(report, Path(args.out))
    for kind, where in written.items():
        print(f"{kind}: {where}")
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m gem.bench.trajectory",
                                     description="gem's trajectory benchmark")
    add_arguments(parser)
    return run(parser.parse_args(argv))


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
