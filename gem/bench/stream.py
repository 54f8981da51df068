"""The trajectory benchmark's workload: a seeded adversarial stream, its ground truth, and the
interface every system under test implements (gem and the baselines).

The definition is specs/trajectory-benchmark.md; gem/bench/trajectory.py runs and scores.
"""
from __future__ import annotations

import random
from abc import ABC, abstractmethod
from collections import Counter
from dataclasses import dataclass, replace
from datetime import date, datetime, timedelta, timezone
from typing import Any, Sequence


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
