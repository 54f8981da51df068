"""The trajectory benchmark's seeded adversarial stream: `generate(StreamConfig)` -> `Stream`
(the turn kinds are defined in specs/trajectory-benchmark.md)."""
from __future__ import annotations

import random
from dataclasses import replace
from datetime import date, datetime, timedelta
from typing import Any, Sequence

from .stream import (CHATTER, IMPORTANCE, PEOPLE, PROJECT_FIELDS, PROJECT_POOL, QUESTION_TEMPLATES,
                     SOURCES, START, STATUSES, FactSpec, LinkSpec, QuerySpec, Stream, StreamConfig,
                     Turn, stamp, value_str)
from .truth import Ledger


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
