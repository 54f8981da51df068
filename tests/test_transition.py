"""Atomic transitions: anything raised after the writes leaves no trace, and each of the
conditions C1-C6 is shown able to reject a deliberately broken transition."""
from __future__ import annotations

import pytest

import gem
from conftest import ENGINE, evict_rows, memory_location, raw_write, snapshot
from gem.pipeline import DEFAULT, Stage
from gem.store import queries


@pytest.fixture
def seeded(mem, clock):
    mem.ingest([gem.Fact("Website Redesign", "deadline", "March 15"),
                gem.Fact("Launch Milestones", "launch", "March 20")])
    mem.link("Website Redesign", "Launch Milestones")
    clock.advance(days=1)
    return mem


def break_with(mem, hook):
    """Run `hook` on every transition's proposal just before the conditions check it."""
    mem._engine.pipeline = DEFAULT if hook is None else \
        DEFAULT.insert_after("commit_policies", Stage("break", lambda t, engine: hook(t)))


class Boom(Exception):
    pass


def test_an_exception_after_the_writes_rolls_everything_back(seeded, clock):
    """The flush writes every unit, then fails inside the engine transaction."""
    before = snapshot(seeded)

    def explode(tx):
        raise Boom("after the writes")

    break_with(seeded, lambda t: t.store_writes.append(explode))
    with pytest.raises(Boom):
        seeded.ingest([gem.Fact("Website Redesign", "deadline", "April 20"),
                       gem.Fact("Brand New Topic", "colour", "teal")])
    with pytest.raises(Boom):
        seeded.retrieve("deadline")
    assert snapshot(seeded) == before
    break_with(seeded, None)
    seeded.ingest(gem.Fact("Website Redesign", "deadline", "April 20"))
    assert seeded.inspect("Website Redesign", "deadline").value == "April 20"
    assert seeded.audit().ok


def _field(t, mem, topic="Website Redesign", name="deadline"):
    return mem.inspect(topic).id + "/" + name


BROKEN = {
    # C1: an old entry claims to be current next to the real one
    "C1": ("ingest", lambda mem: lambda t: t.update(
        "Entry", t.entries(_field(t, mem))[0]["id"], status="current", superseded_by=None)),
    # C2: a superseded link on the current entry
    "C2": ("ingest", lambda mem: lambda t: t.update(
        "Entry", t.current_entry(_field(t, mem))["id"], superseded_by="e1")),
    # C3: the dependent's flag is forgotten
    "C3": ("ingest", lambda mem: lambda t: t.touched.flagged.clear()),
    # C4: provenance loses its source
    "C4": ("ingest", lambda mem: lambda t: t.update(
        "Entry", t.current_entry(_field(t, mem))["id"], source="")),
    # C6: the retrieved field's reinforcement is undone
    "C6": ("retrieve", lambda mem: lambda t: t.update(
        "Field", _field(t, mem), strength=0.0)),
}


@pytest.mark.parametrize("condition", sorted(BROKEN))
def test_each_condition_can_reject(seeded, condition):
    op, make = BROKEN[condition]
    before = snapshot(seeded)
    break_with(seeded, make(seeded))
    with pytest.raises(gem.TransitionRejected) as info:
        if op == "ingest":
            seeded.ingest(gem.Fact("Website Redesign", "deadline", "April 20"))
        else:
            seeded.retrieve(topic="Website Redesign", fields=["deadline"])
    assert info.value.condition == condition
    assert info.value.detail
    assert snapshot(seeded) == before
    break_with(seeded, None)
    assert seeded.audit().ok


def test_c5_rejects_when_attenuation_cannot_restore_the_bound(tmp_path, clock):
    policy = tmp_path / "tight.policy"
    policy.write_text("SET active_bound = 1\n")
    with gem.open(memory_location(tmp_path), clock=clock, engine=ENGINE, policies=[str(policy)]) as mem:
        mem.ingest(gem.Fact("A", "x", 1))
        mem.ingest(gem.Fact("B", "y", 2))  # the bound hides the least salient field, A.x
        assert mem.inspect("A", "x").status == "hidden"
        assert mem.stats()["active_fields"] == 1
        before = snapshot(mem)
        # Both fields of one transition are in use: hiding others is not enough.
        with pytest.raises(gem.TransitionRejected) as info:
            mem.ingest([gem.Fact("C", "z", 3), gem.Fact("C", "w", 4)])
        assert info.value.condition == "C5"
        assert snapshot(mem) == before


def test_rejection_names_condition_unit_and_detail():
    err = gem.TransitionRejected("C3", "t7", "not flagged")
    assert (err.condition, err.unit, err.detail) == ("C3", "t7", "not flagged")
    assert str(err) == "C3 on t7: not flagged"
    assert isinstance(err, gem.GemError)


def test_the_transition_log_is_a_hash_chain(seeded):
    log = seeded.transitions()
    assert all(a["hash"] == b["prev_hash"] for a, b in zip(log, log[1:]))
    assert seeded.audit().chain_ok
    raw_write(seeded, "MATCH (x:Transition {seq: 2}) SET x.actor = 'mallory'")
    assert seeded.audit().ok  # the audit since the last clean one does not reread record 2
    report = seeded.audit(full=True)
    assert not report.ok and not report.chain_ok
    assert report.violations[-1].unit == "2"


def test_audit_orders_events_by_transition_not_by_clock(mem):
    """Found by the stateful machine: an update and a later link at the same clock instant
    looked to the audit like an update after the edge existed, with no flag."""
    mem.ingest([gem.Fact("Gamma Budget", "owner", "Carol"), gem.Fact("Alpha Project", "deadline", "May 1")])
    mem.ingest(gem.Fact("Gamma Budget", "owner", "Dana"))  # an update, before any edge
    mem.link("Gamma Budget", "Alpha Project")             # same clock instant, later transition
    assert mem.inspect("Alpha Project").flags == []
    assert mem.audit().ok
    mem.ingest(gem.Fact("Gamma Budget", "owner", "Erin"))  # now the edge exists: flagged
    assert len(mem.inspect("Alpha Project").flags) == 1
    assert mem.audit().ok


def test_one_flag_answers_every_update_of_a_transition(mem, clock):
    """Found by the stateful machine: two updated topics that share a dependent flag it once
    (a topic is flagged at most once per transition); the audit must accept that flag for
    both updates, as the commit-time check does."""
    mem.ingest([gem.Fact("A", "x", 1), gem.Fact("B", "y", 1), gem.Fact("C", "z", 1)])
    mem.link("A", "C")
    mem.link("B", "C")
    clock.advance(hours=1)
    mem.ingest([gem.Fact("A", "x", 2), gem.Fact("B", "y", 2)])
    assert len(mem.inspect("C").flags) == 1
    assert mem.audit().ok


def test_the_audit_checks_what_changed_since_the_last_clean_one(seeded, clock):
    first = seeded.audit()
    assert first.ok and first.since == 0 and first.checked["C1"] == 2  # no clean audit yet: all
    head = first.transitions
    seeded.ingest(gem.Fact("Website Redesign", "deadline", "April 20"))
    seeded.retrieve(topic="Launch Milestones")
    report = seeded.audit()
    assert report.ok and report.since == head
    assert report.checked["C1"] == 1 and report.checked["C6"] == 1  # one field changed, one read
    # An edit of a unit a later transition touched is found without a full audit.
    seeded.ingest(gem.Fact("Launch Milestones", "launch", "March 21"))
    raw_write(seeded, "MATCH (e:Entry {status: 'current'}) WHERE e.field_id ENDS WITH '/launch' "
              "SET e.status = 'superseded'")
    found = seeded.audit()
    assert not found.ok and found.since == report.transitions
    # no current entry (C1), no successor (C2), and not the row its transition attested
    assert {v.condition for v in found.violations} == {"C1", "C2", "state"}


def test_salience_is_written_behind_and_replayed_from_the_log(tmp_path, clock):
    """Reads reinforce without rewriting rows: the log carries the new salience, the stored
    columns catch up in bulk; whatever the columns say, every read sees the log's value."""
    from gem.testing.consistency import cache_disagreements, derived_disagreements
    path = memory_location(tmp_path)
    mem = gem.open(path, clock=clock, engine=ENGINE)
    derived = mem._engine.derived
    derived.WRITE_BEHIND_TRANSITIONS = 4
    mem.ingest([gem.Fact("A", "x", 1), gem.Fact("B", "y", 2)])
    stored = lambda: {r[0]: float(r[1]) for r in mem._engine.store.reading().__enter__().run(
        "MATCH (f:Field) RETURN f.id, f.strength")}
    at_ingest = stored()
    mem.retrieve(topic="A")
    assert derived.pending_salience and stored() == at_ingest      # behind: only the log has it
    assert mem.transitions()[-1]["salience"]                          # ... and the chain covers it
    seen = mem.inspect("A", "x").salience
    mem.retrieve(topic="B")  # the 4th transition since the columns were last written
    assert not derived.pending_salience and derived.salience_seq == mem.stats()["transitions"] == 4
    assert stored()[mem.inspect("A").id + "/x"] > at_ingest[mem.inspect("A").id + "/x"]
    mem.retrieve(topic="A")                                           # behind again
    assert cache_disagreements(mem) == [] and derived_disagreements(mem) == []
    after = mem.inspect("A", "x").salience
    assert after > seen
    mem._engine.store.close()  # as a crash would: nothing written back at close
    with gem.open(path, clock=clock, engine=ENGINE) as again:        # replayed from the log
        assert again.inspect("A", "x").salience == after
        assert again.audit(full=True).ok
    with gem.open(path, clock=clock, engine=ENGINE) as again:
        assert again.inspect("A", "x").salience == after


def test_a_memory_larger_than_the_row_cache_keeps_the_newer_half_within_its_byte_budget(
        tmp_path, clock):
    from gem.testing.consistency import cache_disagreements
    with gem.open(memory_location(tmp_path), clock=clock, engine=ENGINE) as mem:
        cache = mem._engine.cache
        cache.budget = 60_000
        evictions = 0
        before, previous = 0, set()
        for i in range(12):
            mem.ingest([gem.Fact(f"Topic {i}", f"f{j}", f"v{i}.{j}") for j in range(3)])
            assert cache.nbytes == cache.measured()  # the count kept is the count made again
            assert cache.nbytes <= cache.budget
            if cache.nbytes < before:  # evicted: the older half went, the last commit's stayed
                evictions += 1
                assert previous and previous <= set(cache.rows["Field"])
            before, previous = cache.nbytes, set(list(cache.rows["Field"])[-3:])
        assert evictions >= 1
        assert mem.inspect("Topic 0", "f0").value == "v0.0"  # dropped, read again
        assert cache.nbytes == cache.measured()
        assert cache_disagreements(mem) == []


def test_a_child_list_that_outlives_its_rows_in_the_cache_reads_them_again(tmp_path, clock):
    """Eviction drops the older half of each cached table on its own, so a field's entry list
    loaded after its entries were read by key keeps them listed while their rows go (seen at
    100k topics as a KeyError refreshing a summary). Whoever reads the list gets the rows."""
    from gem.derived import summaries_of
    from gem.testing.consistency import cache_disagreements
    with gem.open(memory_location(tmp_path), clock=clock, engine=ENGINE) as mem:
        mem.ingest([gem.Fact("A", "x", "one"), gem.Fact("A", "y", "two")])
        mem.ingest(gem.Fact("A", "x", "three"))
        engine, tid = mem._engine, mem.inspect("A").id
        cache = engine.cache
        with engine.store.lock:
            cache.clear()
            fields = [f"{tid}/x", f"{tid}/y"]
            cache.load_rows("Field", fields)
            with engine.store.reading() as tx:
                listed = queries.read_children(tx, "HAS_ENTRY", fields)
            # the rows first (older), those of the list eviction keeps (the newer half) first
            cache.load_rows("Entry", [r["id"] for f in reversed(fields) for p, r in listed
                                      if p == f])
            cache.load_rows("Topic", [tid])
            cache.load_children("HAS_FIELD", [tid])
            cache.load_children("HAS_ENTRY", fields)    # then the lists (newer)
            cache.evict()
            assert any(e not in cache.rows["Entry"]  # a list kept, a row of it gone
                       for listed in cache.children["HAS_ENTRY"].values() for e in listed)
            assert summaries_of(cache, [tid], engine.services.summarizer) == {
                tid: engine.services.summarizer("A", {"x": "three", "y": "two"})}
        assert mem.inspect("A", "x").value == "three"
        assert cache_disagreements(mem) == []


def test_a_fields_faded_history_is_what_its_whole_history_says(mem, clock):
    """`faded_history` reads only the entries compression would move out (for the field and
    the siblings a policy walks with it); it must equal the filter over the whole history,
    committed or changed in the transition, in recording order."""
    mem.ingest([gem.Fact(f"Project {i}", name, f"{name} {i}.0")
                for i in range(6) for name in ("deadline", "owner", "budget")])
    for step in range(1, 4):
        clock.advance(days=1)
        mem.ingest([gem.Fact(f"Project {i}", "deadline", f"deadline {i}.{step}")
                    for i in range(0, 6, step)])
    mem.retract("Project 5", "owner", "assigned by mistake")
    clock.advance(days=1)
    mem.ingest(gem.Fact("Project 5", "owner", "owner 5.1"))
    engine = mem._engine
    fids = sorted(mem.inspect(f"Project {i}").id + "/" + name
                  for i in range(6) for name in ("deadline", "owner", "budget"))

    def faded(t, fid):
        return [e["id"] for e in t.faded_history(fid)]

    with engine.store.lock:
        whole = engine.transition("check")
        expected = {fid: [e["id"] for e in whole.entries(fid)
                          if e["active"] and e["status"] != "current"] for fid in fids}
        assert any(expected.values()) and not all(expected.values())
        engine.cache.clear()  # nothing of the histories cached: the filtered read answers
        t = engine.transition("check")
        t.siblings("Field", fids)
        assert {fid: faded(t, fid) for fid in fids} == expected
        assert not any(t.history_touched(fid) for fid in fids)  # no whole history was read
        # changed in the transition: the answer follows the proposed state
        victim = next(fid for fid in fids if len(expected[fid]) >= 2)
        t.update("Entry", expected[victim][0], active=False)
        assert faded(t, victim) == expected[victim][1:]


def test_selections_by_salience_follow_the_proposed_state(mem, clock):
    """`field_ids_where` answers from the committed selection and re-judges only what the
    transition changed: fields compressed, hidden or restored, fields reinforced or relabelled,
    fields of a topic archived or restored. It must equal filtering every field of the proposed
    state one by one."""
    from gem.runtime import ACTIVE, VISIBLE
    for day in range(8):
        mem.ingest([gem.Fact(f"Project {i}", f"note {day}", f"note {i}.{day}")
                    for i in range(4)])
        clock.advance(days=6)
    mem.forget()  # some fields compressed or hidden, committed
    clock.advance(days=3)
    engine = mem._engine
    tids = [mem.inspect(f"Project {i}").id for i in range(4)]
    with engine.store.lock:
        t = engine.transition("check")
        fids = [fid for tid in tids for fid in t.field_ids(tid)]
        t.prefetch("Field", fids)
        rows = {fid: t.field_row(fid) for fid in fids}
        by_status = {s: [f for f in fids if rows[f]["status"] == s]
                     for s in ("active", "compressed", "hidden")}
        assert all(by_status.values()), by_status
        t.update("Field", by_status["active"][0], status="compressed")
        t.update("Field", by_status["active"][1], status="hidden")
        t.update("Field", by_status["compressed"][0], status="hidden")
        t.update("Field", by_status["hidden"][0], status="active")
        t.reinforce("Field", by_status["active"][2], 0.5)
        t.update("Field", by_status["active"][3], labels=["keep"])  # a kept field never fades
        t.settings = {**t.settings, "label_half_life": {"keep": None}}
        t.update("Topic", tids[0], status="archived")

        def expected(statuses, below):
            return sorted(f for f in fids if rows[f]["status"] in statuses
                          and t.topic(rows[f]["topic_id"])["status"] == "active"
                          and (below is None or t.salience_now(rows[f]) < below))

        # bounds between the saliences the fields have (at a unit's own salience, the
        # selection may include it: a superset within rounding, the policy's WHERE decides)
        saliences = sorted({t.salience_now(rows[f]) for f in fids})
        bounds = [(a + b) / 2 for a, b in zip(saliences, saliences[1:])]
        for statuses in (ACTIVE, VISIBLE, frozenset({"hidden"})):
            for below in (None, 0.0, *bounds[:: max(1, len(bounds) // 8)], 1.0):
                assert t.field_ids_where(statuses, below) == expected(statuses, below), \
                    (statuses, below)


def test_c4_reads_of_an_entry_only_the_columns_it_names(mem):
    """conditions.C4_ENTRY_COLUMNS is all C4 reads of an entry it checks: an operator that
    changes only other columns (compression and restoration change `active`) leaves it
    unmarked, and the entry keeps its committed verdict."""
    from gem import conditions

    class Recording(dict):
        read: set[str] = set()

        def __getitem__(self, key):
            Recording.read.add(key)
            return super().__getitem__(key)

        def get(self, key, default=None):
            Recording.read.add(key)
            return super().get(key, default)

    mem.ingest([gem.Fact("Project", "deadline", "v1"), gem.Fact("Project", "deadline", "v2")])
    older, newer = mem.history("Project", "deadline")
    with mem._engine.store.lock:
        t = mem._engine.transition("check")
        for entry in (older, newer):
            t.rows["Entry"][entry.id] = Recording(t.entry(entry.id))
            t.touched.entries[entry.id] = None
        assert list(conditions.transition_violations(t)) == []
    assert Recording.read and Recording.read <= conditions.C4_ENTRY_COLUMNS
    assert "active" not in conditions.C4_ENTRY_COLUMNS


def test_compression_leaves_the_histories_it_moves_unjudged(mem, clock):
    """Compressing moves older entries out of the active history (`active`, a column the
    history rules do not read): C1/C2 keep their committed verdict on those fields instead of
    reading every history whole; a change to a judged column (status) is judged again."""
    mem.ingest([gem.Fact(f"Project {i}", "deadline", f"v{i}.0") for i in range(4)])
    for step in (1, 2):
        clock.advance(days=1)
        mem.ingest([gem.Fact(f"Project {i}", "deadline", f"v{i}.{step}") for i in range(4)])
    clock.advance(days=200)
    seen = {}

    checked_by_c4 = []

    def look(t):
        for fid in t.touched.fields:
            seen[fid] = (t.history_touched(fid), t.history_judged(fid))
        checked_by_c4.extend(t.touched.entries)

    break_with(mem, look)
    evict_rows(mem)  # histories not cached, as in a large memory: none is read whole
    mem.forget()
    break_with(mem, None)
    assert checked_by_c4 == []  # nor are their entries checked by C4 again (see below)
    fids = [mem.inspect(f"Project {i}").id + "/deadline" for i in range(4)]
    assert all(mem.inspect(f"Project {i}").fields["deadline"].status != "active"
               for i in range(4))
    assert [seen[f] for f in fids] == [(True, False)] * 4
    with mem._engine.store.lock:
        mem._engine.cache.clear()
        t = mem._engine.transition("check")
        older = mem.history("Project 0", "deadline")[0]
        t.update("Entry", older.id, annotations="{}")
        assert t.history_touched(fids[0]) and not t.history_judged(fids[0])
        t.update("Entry", older.id, status="superseded")
        assert t.history_judged(fids[0])
    assert mem.audit(full=True).ok
