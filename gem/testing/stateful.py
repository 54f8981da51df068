"""A hypothesis state machine that drives a real memory against a reference model.

    from gem.testing.stateful import memory_machine
    TestMyPolicies = memory_machine(policies=["my.policy"]).TestCase

The model is plain Python: for every (topic, field) the list of entries with their
value, valid time, recording order and polarity, from which the current value, the
value as of any time and the history length follow by the field-history rules. Rules
ingest (new values, updates, re-ingests, late-arriving facts, denials, batches, with labels),
retract, retrieve (text, structured, as-of, history, unit-level with k and time windows; a read
raises no unreturned episode's salience but a bounded few associates'), record
episodes, link, revise (with a reviser that handles some topics and declines the others),
forget, restore, erase a field, act in a second scope (ingest with labels, retract, revise),
advance the clock and reload the policies. One small invariant per correctness condition C1-C6,
plus "model and memory agree", runs after every step; every step is `note()`d, so a
failure prints a readable trace. Shipped in the package so other policy sets (and other
stores behind the same API) can reuse it.
"""
from __future__ import annotations

import os
import shutil
import tempfile
from copy import deepcopy
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any, Sequence

from hypothesis import note
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

import gem
from gem.operators.associate import ASSOCIATES, PER_READ
from gem.places import distance_km
from gem.testing.consistency import cache_disagreements, citation_disagreements, \
    derived_disagreements

TOPICS = ("Alpha Project", "Beta Launch", "Gamma Budget", "Delta Team")
FIELDS = ("deadline", "owner", "status")
CANONICAL = {t.lower(): t for t in TOPICS}
VALUES = st.sampled_from(["March 15", "April 20", "May 1", "Alice", "Bob", "green", "red", 7, 11])
START = datetime(2026, 3, 2, 9, 0, tzinfo=timezone.utc)
# Where episodes are said: two near each other, one farther, two across the antimeridian.
PLACES = ((38.7223, -9.1393), (38.8029, -9.3817), (41.1579, -8.6291), (0.0, 179.99),
          (0.0, -179.99))
EPISODES = ("Alpha Project deadline moved to May 1", "Bob owns the Beta Launch now",
            "the Gamma Budget status is red", "lunch at the deli on Friday")

# The machine's governance: the default policies and a tight C5 bound, so attenuation and
# rejection (and so rollback) both happen within a few dozen steps. The second set drops the
# paper's Listing 1: under it, C3 must reject every update of a topic that has dependents.
MACHINE_BOUND = "SET active_bound = 3 + interactions / 6\n" \
                "SET label_half_life = {pii: 7d, keep: null}\n"
PROPAGATION = "propagate-on-change"
LABELS = st.sampled_from([(), (), ("pii",), ("keep",), ("pii", "keep")])
# The machine's reviser handles these topics' flags (answering "their values still hold") and
# declines the others, whose flags stay open.
REVIEWED = frozenset({"Alpha Project", "Gamma Budget"})
# A second scope, where the same titles hold other values and labels: what happens there
# (ingests, retractions, revision) must never show in the default scope, and the reverse.
TENANT = "tenant"


@dataclass
class ModelEntry:
    value: Any
    valid_at: datetime
    order: int
    positive: bool
    stated: list[datetime] = field(default_factory=list)  # every positive statement of it

    def latest(self, when: datetime | None = None) -> datetime:
        return max(s for s in self.stated if when is None or s <= when)


@dataclass
class Model:
    histories: dict[tuple[str, str], list[ModelEntry]] = field(default_factory=dict)
    extension: set[tuple[str, str]] = field(default_factory=set)
    flagged: set[str] = field(default_factory=set)
    labels: dict[tuple[str, str], set[str]] = field(default_factory=dict)  # a field's: every fact's
    order: int = 0
    episodes: dict[str, tuple[str, datetime]] = field(default_factory=dict)  # id -> (text, at)
    places: dict[str, tuple[float, float] | None] = field(default_factory=dict)  # id -> place
    cited: dict[tuple[str, str], set[str]] = field(default_factory=dict)  # episodes a field's facts cite

    def candidates(self, key: tuple[str, str], when: datetime | None = None) -> list[ModelEntry]:
        return [e for e in self.histories.get(key, []) if e.positive
                and (when is None or e.valid_at <= when)]

    def best(self, key: tuple[str, str], when: datetime | None = None) -> ModelEntry | None:
        """The latest stated value (as of `when`); ties go to the later recording."""
        return max(self.candidates(key, when), key=lambda e: (e.latest(when), e.order), default=None)

    def current(self, key: tuple[str, str], when: datetime | None = None) -> Any:
        best = self.best(key, when)
        return None if best is None else best.value

    def record(self, key: tuple[str, str], value: Any, at: datetime, positive: bool) -> str:
        """Apply one fact; returns what the memory must have done with it."""
        history = self.histories.setdefault(key, [])
        current = self.best(key)
        self.order += 1
        if not positive:
            if any(e.value == value for e in history):
                return "observation"
            history.append(ModelEntry(value, at, self.order, False))
            return "denied"
        if current is not None and current.value == value:
            current.stated.append(at)  # a re-statement counts from the moment it is made
            return "observation"
        for e in history:
            if e.value == value and e.valid_at == at and e.positive:
                e.stated.append(at)
                return "observation"
        history.append(ModelEntry(value, at, self.order, True, [at]))
        if current is None:
            return "created"
        if at >= current.latest():
            return "updated"
        return "late"

    def retract(self, key: tuple[str, str], at: datetime) -> None:
        """The current value was wrong: it is a value at no time, and from `at` the field has
        none (a retraction: a positive entry holding None, stated at `at`)."""
        current = self.best(key)
        assert current is not None and current.value is not None
        current.positive = False
        self.order += 1
        self.histories[key].append(ModelEntry(None, max(at, current.latest()), self.order, True,
                                              [max(at, current.latest())]))


class GemMachine(RuleBasedStateMachine):
    engine = "kuzu"
    # engine "falkordb": the server's URL (each run is a temporary memory on it)
    server: str | None = None
    policy_files: Sequence[str] = ()
    defaults = True  # policy files extend the default governance (False: they replace it)

    def __init__(self) -> None:
        super().__init__()
        self.dir = tempfile.mkdtemp(prefix="gem-stateful-")
        self.now = START
        self.model = Model()
        self.tenant = Model()  # the scope TENANT's (no links there: nothing is flagged)
        if self.policy_files:
            self.policy_sets = {True: list(self.policy_files)}
        else:
            self.policy_sets = {True: [self._machine_policy(propagate=True)],
                                False: [self._machine_policy(propagate=False)]}
        self.propagating = True
        if self.engine == "falkordb" and not self.server:
            raise ValueError("engine 'falkordb' needs the server's URL (memory_machine(server=...))")
        location = self.server if self.engine == "falkordb" else os.path.join(self.dir, "db")
        self.mem = gem.open(location, clock=lambda: self.now,
                            engine=self.engine, policies=self.policy_sets[True],
                            defaults=self.defaults, reviser=self._reviser)
        # Salience is written behind every few transitions, so the machine sees both the
        # columns catching up and reads patched from the log (gem/derived/).
        self.mem._engine.derived.WRITE_BEHIND_TRANSITIONS = 5
        self.c6_failures: list[str] = []
        self.c5_rejections = 0
        self.c3_rejections = 0
        self.steps = 0

    def _machine_policy(self, propagate: bool) -> str:
        """The default governance with a tight C5 bound, and without Listing 1 if asked."""
        text = MACHINE_BOUND if propagate else f"DISABLE POLICY {PROPAGATION}\n{MACHINE_BOUND}"
        path = Path(self.dir) / f"machine-{'propagating' if propagate else 'silent'}.policy"
        path.write_text(text)
        return str(path)

    def teardown(self) -> None:
        try:
            report = self.mem.audit(full=True)
            assert report.ok, report.violations
            log = os.environ.get("GEM_STATEFUL_LOG")
            if log:  # for long runs: how many steps really ran, and how many C5 rejections
                with open(log, "a") as f:
                    f.write(f"{self.steps} {self.c5_rejections} {self.c3_rejections}\n")
        finally:
            self.mem.close()
            shutil.rmtree(self.dir, ignore_errors=True)

    # ------------------------------------------------------------------ helpers
    @staticmethod
    def _reviser(revision: gem.PendingRevision) -> list[gem.Fact] | None:
        return [] if revision.title in REVIEWED else None

    def _ingest(self, facts: list[tuple[str, str, Any, datetime, bool, str]],
                labels: tuple[str, ...] = ()) -> None:
        before = {k: [replace(e, stated=list(e.stated)) for e in v]
                  for k, v in self.model.histories.items()}
        order, flagged = self.model.order, set(self.model.flagged)
        outcomes = []
        for topic, fld, value, at, positive, _ in facts:
            outcomes.append(self.model.record((CANONICAL[topic.lower()], fld), value, at, positive))
        note(f"ingest {[(t, f, v, a.isoformat(), '+' if p else '-', s) for t, f, v, a, p, s in facts]}"
             f" -> {outcomes}")
        updated = {CANONICAL[t.lower()] for (t, *_), o in zip(facts, outcomes) if o == "updated"}
        must_reject_c3 = not self.propagating and any(
            a in updated for a, _ in self.model.extension)
        try:
            result = self.mem.ingest([gem.Fact(t, f, v, at=a, polarity="+" if p else "-", source=s,
                                               labels=list(labels))
                                      for t, f, v, a, p, s in facts])
        except gem.TransitionRejected as exc:
            # Without Listing 1 an update of a topic with dependents violates C3; C5 may refuse
            # a batch whose own fields exceed the bound. Either way nothing may have changed.
            assert exc.condition == ("C3" if must_reject_c3 else "C5"), f"unexpected: {exc}"
            if exc.condition == "C3":
                self.c3_rejections += 1
            else:
                self.c5_rejections += 1
            note(f"  rejected by {exc.condition}: {exc.detail}")
            self.model.histories, self.model.order, self.model.flagged = before, order, flagged
            return
        assert not must_reject_c3, "an update of a topic with dependents committed unflagged"
        for topic, fld, *_ in facts:
            self.model.labels.setdefault((CANONICAL[topic.lower()], fld), set()).update(labels)
        new_entries = sum(o in ("created", "updated", "late", "denied") for o in outcomes)
        assert len(result.entry_ids) == new_entries, (result.new_values, outcomes)
        for (topic, *_), outcome in zip(facts, outcomes):
            if outcome == "updated":
                self.model.flagged |= {b for a, b in self.model.extension
                                       if a == CANONICAL[topic.lower()]}

    def _check_retrieval(self, result: gem.RetrieveResult, as_of: datetime | None = None) -> None:
        for view in result.topics:
            for name, fv in view.fields.items():
                want = self.model.current((view.title, name), as_of)
                assert fv.value == want, f"{view.title}.{name}: memory {fv.value!r}, model {want!r}"

    def _episode_salience(self) -> dict[str, float]:
        page = self.mem.episodes(limit=500)  # an administrative read: nothing reinforced
        return {e.id: e.salience for e in page.episodes}

    def _salience(self, topic: str, fld: str | None = None) -> float | None:
        view = self.mem.inspect(topic, fld)
        return None if view is None else view.salience

    def _known(self) -> list[tuple[str, str]]:
        """Fields with a current value (a retracted field has none)."""
        return [k for k in self.model.histories if self.model.current(k) is not None]

    # ------------------------------------------------------------------ ingest rules
    @rule(topic=st.sampled_from(TOPICS), fld=st.sampled_from(FIELDS), value=VALUES,
          back=st.integers(0, 3), source=st.sampled_from(["chat", "email", "doc"]), labels=LABELS)
    def ingest_value(self, topic, fld, value, back, source, labels):
        self.steps += 1
        self._ingest([(topic, fld, value, self.now - timedelta(days=back), True, source)], labels)

    @precondition(lambda self: self._known())
    @rule(data=st.data())
    def retract(self, data):
        self.steps += 1
        topic, fld = data.draw(st.sampled_from(self._known()))
        must_reject_c3 = not self.propagating and any(a == topic for a, _ in self.model.extension)
        note(f"retract {topic}.{fld}")
        try:
            changed = self.mem.retract(topic, fld, "the machine says it was wrong")
        except gem.TransitionRejected as exc:
            assert exc.condition == "C3" and must_reject_c3, f"unexpected: {exc}"
            self.c3_rejections += 1
            note(f"  rejected by {exc.condition}: {exc.detail}")
            return
        assert changed and not must_reject_c3
        self.model.retract((topic, fld), self.now)
        self.model.flagged |= {b for a, b in self.model.extension if a == topic}

    @precondition(lambda self: self._known())
    @rule(data=st.data())
    def reingest_current(self, data):
        self.steps += 1
        topic, fld = data.draw(st.sampled_from(self._known()))
        value = self.model.current((topic, fld))
        self._ingest([(topic.lower(), fld, value, self.now, True, "re-explained")])

    @precondition(lambda self: self._known())
    @rule(data=st.data(), value=VALUES)
    def late_arriving(self, data, value):
        self.steps += 1
        topic, fld = data.draw(st.sampled_from(self._known()))
        oldest = min(e.valid_at for e in self.model.candidates((topic, fld)))
        self._ingest([(topic, fld, value, oldest - timedelta(days=1), True, "late")])

    @precondition(lambda self: self._known())
    @rule(data=st.data(), value=VALUES)
    def deny(self, data, value):
        self.steps += 1
        topic, fld = data.draw(st.sampled_from(self._known()))
        self._ingest([(topic, fld, value, self.now, False, "skeptic")])

    @rule(facts=st.lists(st.tuples(st.sampled_from(TOPICS), st.sampled_from(FIELDS), VALUES),
                         min_size=2, max_size=5))
    def ingest_batch(self, facts):
        self.steps += 1
        self._ingest([(t, f, v, self.now, True, "batch") for t, f, v in facts])

    # ------------------------------------------------------------------ retrieval rules
    @rule(topic=st.sampled_from(TOPICS), fld=st.sampled_from(FIELDS))
    def retrieve_structured(self, topic, fld):
        self.steps += 1
        before_field, before_topic = self._salience(topic, fld), self._salience(topic)
        result = self.mem.retrieve(topic=topic, fields=[fld], include_archived=True)
        note(f"retrieve topic={topic} field={fld} -> {[(t.title, list(t.fields)) for t in result.topics]}")
        self._check_retrieval(result)
        for view in result.topics:
            for name, fv in view.fields.items():
                if before_field is not None and not fv.salience > before_field:
                    self.c6_failures.append(f"{topic}.{name}: {before_field} -> {fv.salience}")
            if before_topic is not None and not view.salience > before_topic:
                self.c6_failures.append(f"{topic}: {before_topic} -> {view.salience}")

    @rule(query=st.sampled_from(["deadline", "alpha project owner", "launch status", "budget",
                                 "who owns the team", "nothing relevant here"]))
    def retrieve_text(self, query):
        self.steps += 1
        result = self.mem.retrieve(query, include_archived=True)
        note(f"retrieve {query!r} -> {[t.title for t in result.topics]}")
        self._check_retrieval(result)

    @rule(days=st.integers(0, 20), history=st.booleans())
    def retrieve_as_of(self, days, history):
        self.steps += 1
        when = self.now - timedelta(days=days)
        result = self.mem.retrieve(topic=TOPICS[days % len(TOPICS)], as_of=when, history=history,
                                   include_archived=True)
        note(f"retrieve as_of={when.isoformat()} -> {[(t.title, {n: f.value for n, f in t.fields.items()}) for t in result.topics]}")
        self._check_retrieval(result, as_of=when)
        for view in result.topics:
            for name in FIELDS:
                if name not in view.fields:
                    assert self.model.current((view.title, name), when) is None

    @rule(text=st.sampled_from(EPISODES), back=st.integers(0, 3),
          with_fact=st.booleans(), where=st.one_of(st.none(), st.sampled_from(PLACES)))
    def record_episode(self, text, back, with_fact, where):
        self.steps += 1
        at = self.now - timedelta(days=back)
        items: list[Any] = [gem.Episode(text, at=at, source="chat", speaker="Ana", place=where)]
        # the fact cites the latest episode recorded before (its `ref`), as a caller may
        cited = max(self.model.episodes, key=lambda e: int(e[2:])) \
            if with_fact and self.model.episodes else None
        note(f"episode {text!r} at {at.isoformat()} in {where} (with a fact: {with_fact}, "
             f"citing {cited})")
        before = {k: [replace(e, stated=list(e.stated)) for e in v]
                  for k, v in self.model.histories.items()}
        order, outcome = self.model.order, None
        if with_fact:
            outcome = self.model.record(("Delta Team", "status"), text, at, True)
            items.append(gem.Fact("Delta Team", "status", text, at=at, source="episode",
                                  place=where, ref=cited))
        must_reject_c3 = outcome == "updated" and not self.propagating and any(
            a == "Delta Team" for a, _ in self.model.extension)
        try:
            result = self.mem.ingest(items)
        except gem.TransitionRejected as exc:  # C5 (the fact's field), or C3 without Listing 1
            assert exc.condition == ("C3" if must_reject_c3 else "C5"), f"unexpected: {exc}"
            self.model.histories, self.model.order = before, order
            return
        assert not must_reject_c3
        if cited is not None:
            self.model.cited.setdefault(("Delta Team", "status"), set()).add(cited)
        # the same text, source, speaker and time is the same episode: stored once
        known = next((eid for eid, said in self.model.episodes.items() if said == (text, at)), None)
        if known is not None:
            assert (result.episode_ids, result.known_episode_ids) == ([], [known])
        else:
            (eid,) = result.episode_ids
            assert eid not in self.model.episodes and result.known_episode_ids == []
            self.model.episodes[eid] = (text, at)
            self.model.places[eid] = where  # an episode said again keeps its first place
        if outcome == "updated":
            self.model.flagged |= {b for a, b in self.model.extension if a == "Delta Team"}

    @rule(query=st.sampled_from(["deadline", "who owns the launch", "budget status red",
                                 "lunch friday", "Alpha Project deadline moved"]),
          k=st.integers(1, 4), window=st.booleans())
    def retrieve_units(self, query, k, window):
        self.steps += 1
        between = (START, self.now - timedelta(days=2)) if window and self.now - timedelta(days=2) >= START \
            else None
        before = self._episode_salience()
        result = self.mem.retrieve(query, k=k, between=between)
        fields = [(t.title, n) for t in result.topics if t.context_of is None for n in t.fields]
        note(f"retrieve units {query!r} k={k} between={between} -> {fields}, "
             f"{[e.id for e in result.episodes]}, truncated={result.truncated}")
        assert len(fields) + len(result.episodes) <= k
        self._check_retrieval(result)
        # associative reinforcement: an episode the read did not return may only gain, and
        # at most ASSOCIATES of them per unit returned (gem/operators/associate.py)
        after = self._episode_salience()
        returned = {e.id for e in result.episodes}
        gained = [e for e, s in after.items() if e not in returned and s > before.get(e, s)]
        assert all(s >= before[e] for e, s in after.items() if e in before and e not in returned)
        read = sum(len(t.fields) for t in result.topics) + len(returned)  # context included
        assert len(gained) <= min(ASSOCIATES * read, PER_READ), gained
        for e in result.episodes:
            text, at = self.model.episodes[e.id]
            assert (e.text, e.at) == (text, at) and e.status == "active"
            if between is not None:
                assert between[0] <= e.at <= between[1]

    @rule(where=st.sampled_from(PLACES), km=st.sampled_from([1.0, 30.0, 3000.0]),
          k=st.integers(1, 6))
    def retrieve_near(self, where, km, k):
        """near= without a query: what is within the radius, nearest first, and nothing else
        (the grid is built by the first such read; the derived invariant then checks it against
        the database after every step)."""
        self.steps += 1
        result = self.mem.retrieve(near=(*where, km), k=k, include_archived=True)
        fields = [(t.title, n, f) for t in result.topics if t.context_of is None
                  for n, f in t.fields.items()]
        note(f"retrieve near {where} {km} km k={k} -> {[(t, n) for t, n, _ in fields]}, "
             f"{[e.id for e in result.episodes]}, truncated={result.truncated}")
        assert len(fields) + len(result.episodes) <= k
        self._check_retrieval(result)
        for _, _, f in fields:
            assert f.place is not None and f.distance_km is not None and f.distance_km <= km
        expected = {eid for eid, p in self.model.places.items()
                    if p is not None and distance_km(*where, *p) <= km}
        got = [e.id for e in result.episodes]
        assert set(got) <= expected, f"near returned {set(got) - expected}, not within {km} km"
        if not result.truncated:
            assert set(got) == expected, f"near left out {expected - set(got)}"
        # nearest first (fields and episodes interleave); a stale episode is ranked below the
        # current fact that superseded it (issue 27), wherever that puts it
        distances = [e.distance_km for e in result.episodes if not e.stale]
        assert distances == sorted(distances)

    # ------------------------------------------------------------------ structure and maintenance
    @rule(a=st.sampled_from(TOPICS), b=st.sampled_from(TOPICS),
          kind=st.sampled_from(["extension", "association"]))
    def link(self, a, b, kind):
        self.steps += 1
        if a == b or self.mem.inspect(a) is None or self.mem.inspect(b) is None:
            return
        note(f"link {a} -> {b} ({kind})")
        self.mem.link(a, b, kind)
        if kind == "extension":
            self.model.extension.add((a, b))

    @rule()
    def revise(self):
        self.steps += 1
        report = self.mem.revise()
        note(f"revise -> {report}")
        assert report["merged"] == []
        self.model.flagged -= REVIEWED  # the reviser handled these; the others stay flagged

    @rule()
    def forget(self):
        self.steps += 1
        note(f"forget -> {self.mem.forget()['attenuated']}")

    @rule(topic=st.sampled_from(TOPICS), fld=st.one_of(st.none(), st.sampled_from(FIELDS)))
    def restore(self, topic, fld):
        self.steps += 1
        if self.mem.inspect(topic) is None or (fld and self.mem.inspect(topic, fld) is None):
            return
        note(f"restore {topic} {fld}")
        self.mem.restore(topic, fld)

    @precondition(lambda self: self.model.histories)
    @rule(data=st.data())
    def erase_field(self, data):
        """Erasure: the field and its whole history go; the rest is untouched."""
        self.steps += 1
        topic, fld = data.draw(st.sampled_from(sorted(self.model.histories)))
        note(f"erase {topic}.{fld}")
        receipt = self.mem.erase(topic, fld, reason="machine")
        del self.model.histories[(topic, fld)]
        self.model.labels.pop((topic, fld), None)  # its labels went with its entries
        for eid in self.model.cited.pop((topic, fld), set()):  # what its facts cite goes too
            self.model.episodes.pop(eid, None)
            self.model.places.pop(eid, None)
        assert self.mem.inspect(topic, fld) is None
        assert self.mem.verify_erasure(receipt).ok

    @rule(topic=st.sampled_from(TOPICS), fld=st.sampled_from(FIELDS), value=VALUES,
          labels=LABELS, retract=st.booleans())
    def in_another_scope(self, topic, fld, value, labels, retract):
        """Governance in another scope: a fact stated now (an update), or a retraction, then a
        revision there. Its values, labels and flags stay in that scope."""
        self.steps += 1
        other = self.mem.scope(TENANT)
        key = (topic, fld)
        before = deepcopy(self.tenant)
        try:
            if retract and self.tenant.current(key) is not None:
                note(f"[{TENANT}] retract {topic}.{fld}")
                self.tenant.retract(key, self.now)
                assert other.retract(topic, fld, "wrong in the tenant")
            else:
                note(f"[{TENANT}] ingest {topic}.{fld} = {value!r} {list(labels)}")
                self.tenant.record(key, value, self.now, True)
                self.tenant.labels.setdefault(key, set()).update(labels)
                other.ingest(gem.Fact(topic, fld, value, at=self.now, source="tenant",
                                      labels=list(labels)))
        except gem.TransitionRejected as exc:
            assert exc.condition == "C5", f"unexpected in {TENANT}: {exc}"
            self.tenant = before
            self.c5_rejections += 1
            note(f"  rejected by {exc.condition}: {exc.detail}")
            return
        report = other.revise()
        assert report["merged"] == [] and report["flags_open"] == [], report

    @rule(days=st.integers(1, 20))
    def advance(self, days):
        self.steps += 1
        self.now += timedelta(days=days)
        note(f"advance {days}d -> {self.now.isoformat()}")

    @rule(propagate=st.booleans())
    def reload_policies(self, propagate):
        self.steps += 1
        propagate = propagate if propagate in self.policy_sets else True
        note(f"load policies (propagation {'on' if propagate else 'off'})")
        self.mem.load_policies(self.policy_sets[propagate], defaults=self.defaults)
        self.propagating = propagate

    # ------------------------------------------------------------------ invariants
    @invariant()
    def c1_current_values_match_the_model(self):
        for (topic, fld) in self.model.histories:
            view = self.mem.inspect(topic, fld)
            want = self.model.current((topic, fld))
            got = None if view is None else view.value
            assert got == want, f"C1 {topic}.{fld}: memory {got!r}, model {want!r}"

    @invariant()
    def c2_no_superseded_value_is_current(self):
        for (topic, fld) in self.model.histories:
            statuses = [h.status for h in self.mem.history(topic, fld)]
            assert statuses.count("current") == (1 if self.model.candidates((topic, fld)) else 0)

    @invariant()
    def c3_extension_dependents_are_flagged(self):
        for topic in TOPICS:
            view = self.mem.inspect(topic)
            if view is not None:
                assert bool(view.flags) == (topic in self.model.flagged), \
                    f"C3 {topic}: flags {view.flags}, model expects {topic in self.model.flagged}"

    @invariant()
    def labels_are_those_of_every_fact(self):
        for (topic, fld), labels in self.model.labels.items():
            view = self.mem.inspect(topic, fld)
            assert view is not None and set(view.labels) == labels, \
                f"{topic}.{fld}: labels {view and view.labels}, model {labels}"

    @invariant()
    def scopes_keep_to_themselves(self):
        other = self.mem.scope(TENANT)
        for (topic, fld) in self.tenant.histories:
            view = other.inspect(topic, fld)
            value, labels = self.tenant.current((topic, fld)), self.tenant.labels[(topic, fld)]
            assert view is not None and view.value == value and set(view.labels) == labels, \
                f"[{TENANT}] {topic}.{fld}: {view}, model {value!r} {labels}"
            if (topic, fld) not in self.model.histories:
                assert self.mem.inspect(topic, fld) is None, f"{topic}.{fld} leaked from {TENANT}"

    @invariant()
    def c4_history_keeps_provenance(self):
        for (topic, fld), entries in self.model.histories.items():
            history = self.mem.history(topic, fld)
            assert len(history) == len(entries), \
                f"{topic}.{fld}: {len(history)} entries, model {len(entries)}"
            for h in history:
                assert h.provenance.source and h.provenance.actor and h.recorded_at

    @invariant()
    def c5_active_state_is_bounded(self):
        stats = self.mem.stats()
        assert stats["active_bound"] is None or stats["active_fields"] <= stats["active_bound"]

    @invariant()
    def c6_retrieval_raised_salience(self):
        assert not self.c6_failures, self.c6_failures

    @invariant()
    def episodes_know_the_facts_that_cite_them(self):
        """`Episode.cited_by` (from which staleness is derived) lists exactly the entries whose
        facts cite the episode (`ref`) or whose value an observation citing it corroborates."""
        assert citation_disagreements(self.mem) == []

    @invariant()
    def what_is_kept_in_memory_agrees_with_the_database(self):
        """The row cache holds nothing the database does not, and the derived state equals a
        rebuild from the database, after every commit and every rejection."""
        assert cache_disagreements(self.mem) == []
        assert derived_disagreements(self.mem) == []


def memory_machine(policies: Sequence[str | Path] = (), engine: str = "kuzu", *,
                   defaults: bool = True, server: str | None = None) -> type[GemMachine]:
    """A machine class for a policy set: `policies` composed on gem's default governance
    (`defaults=False`: instead of it); without `policies`, the defaults plus a tight C5 bound.
    With engine "falkordb", `server` is the FalkorDB server's URL."""
    return type("GemMachine", (GemMachine,), {"policy_files": [str(p) for p in policies],
                                              "engine": engine, "defaults": defaults,
                                              "server": server})


__all__ = ["GemMachine", "memory_machine", "Model"]
