"""The trajectory benchmark's workload: its vocabulary and the stream's types (turns, facts,
links, questions). Its generator is generator.py, its ground truth truth.py, the interface
every system under test implements (gem and the baselines) system.py.

The definition is specs/trajectory-benchmark.md; gem/bench/trajectory.py runs it, scoring.py scores.
"""
from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any


UTC = timezone.utc
START = datetime(2026, 1, 5, 9, 0, tzinfo=UTC)

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
