"""Erasure, the one destructive operator: what goes, what remains, the redacted log, the
receipt, and the physical purge by compaction (crash-safe)."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import pytest

import gem
from conftest import ENGINE, files_hold, memory_location, raw_write, snapshot
from gem.testing.consistency import cache_disagreements, derived_disagreements
from servers import HANG  # a guard against hangs only (tests/servers.py)

MARKER = "ZQX-7731-erase-me"


@pytest.fixture
def seeded(mem, clock):
    mem.ingest([gem.Fact("Bob", "ssn", MARKER, source="hr"),
                gem.Fact("Bob", "team", "blue", source="chat"),
                gem.Fact("Alice", "team", "red"),
                gem.Fact("Launch", "date", "May 1")])
    mem.link("Bob", "Launch")
    mem.link("Alice", "Bob", kind="association")
    clock.advance(days=1)
    mem.ingest(gem.Fact("Bob", "team", "green", source="hr"))   # flags Launch (Listing 1)
    mem.retrieve("bob team")
    return mem


def consistent(mem: gem.Memory) -> None:
    assert mem.audit(full=True).ok, mem.audit(full=True).violations
    assert derived_disagreements(mem) == [] and cache_disagreements(mem) == []


def test_erasing_a_topic_removes_it_and_everything_that_came_from_it(seeded):
    receipt = seeded.erase("Bob", reason="right to erasure, ticket 17")
    assert seeded.inspect("Bob") is None
    assert seeded.retrieve("bob ssn").topics == [] and seeded.retrieve(topic="Bob").topics == []
    assert seeded.inspect("Launch").flags == []             # the flag Bob's change raised
    assert seeded.inspect("Alice").fields["team"].value == "red"
    assert receipt.topics == ["t1"] and len(receipt.entries) == 3 and receipt.redacted
    assert seeded.verify_erasure(receipt).ok
    for record in seeded.transitions():
        if record["seq"] in receipt.redacted:
            assert record["redacted"] and record["units"] is None and record["detail"] is None
    assert MARKER not in repr(seeded.transitions())
    consistent(seeded)


def test_erasing_a_field_keeps_the_topic(seeded):
    receipt = seeded.erase("Bob", "ssn", reason="GDPR")
    bob = seeded.inspect("Bob")
    assert set(bob.fields) == {"team"} and bob.fields["team"].value == "green"
    assert MARKER not in bob.summary and "ssn" not in repr(receipt.model_dump())
    assert seeded.verify_erasure(receipt).ok
    consistent(seeded)


@pytest.mark.skipif(ENGINE == "falkordb", reason="a memory on FalkorDB keeps no snapshot files "
                    "beside a path")
def test_verifying_an_erasure_reads_the_snapshot_tables_string_columns(db_path, clock):
    """The tables file keeps ids as UTF-8 string tables (snapshot format 8): an erased value
    found in one is reported, as it was in numpy's fixed-width strings."""
    import numpy as np

    from gem.derived import snapshot_dir
    from gem.index import encode_strings, snapshot_strings

    with gem.open(path=db_path, clock=clock, engine=ENGINE) as mem:
        mem.ingest([gem.Fact("Bob", "ssn", MARKER), gem.Fact("Bob", "team", "blue")])
        receipt = mem.erase("Bob", "ssn", reason="GDPR")
    with gem.open(path=db_path, clock=clock, engine=ENGINE) as mem:
        assert mem.verify_erasure(receipt).ok
        folder = snapshot_dir(db_path)
        (name,) = [f for f in os.listdir(folder) if f.endswith(".npz")]
        with np.load(os.path.join(folder, name), allow_pickle=False) as f:
            arrays = {k: f[k] for k in f.files}
        ids = snapshot_strings(arrays, "fields_ids")
        arrays["fields_ids_utf8"], arrays["fields_ids_offsets"] = encode_strings([*ids, MARKER])
        with open(os.path.join(folder, name), "wb") as f:
            np.savez(f, allow_pickle=False, **arrays)
        check = mem.verify_erasure(receipt)
        assert not check.ok and any(name in p for p in check.problems)


def test_erasing_what_one_source_said_restores_the_history_rules(seeded, clock):
    receipt = seeded.erase("Bob", "team", source="hr", reason="hr system retracted")
    view = seeded.inspect("Bob", "team")
    assert view.value == "blue"                                     # hr's green is gone...
    history = seeded.history("Bob", "team")
    assert [(h.value, h.status) for h in history] == [("blue", "current")]
    assert all(o.provenance.source != "hr" for h in history for o in h.observations)
    assert seeded.inspect("Bob").fields.keys() == {"ssn", "team"}  # only the team field was asked
    assert seeded.verify_erasure(receipt).ok
    everywhere = seeded.erase("Bob", source="hr", reason="all of hr's")
    assert seeded.inspect("Bob").fields.keys() == {"team"}          # ssn came only from hr
    assert seeded.verify_erasure(everywhere).ok
    consistent(seeded)


def test_what_another_source_said_of_the_same_value_survives_erasing_one_source(seeded, clock):
    clock.advance(hours=1)
    seeded.ingest(gem.Fact("Bob", "team", "green", source="chat", ref="msg-7"))  # chat says it too
    receipt = seeded.erase("Bob", "team", source="hr", reason="hr system retracted")
    history = seeded.history("Bob", "team")
    # green stays, as chat's statement (its time and ref), with nothing of hr's
    assert [(h.value, h.status, h.provenance.source, h.provenance.ref) for h in history] == \
        [("blue", "superseded", "chat", None), ("green", "current", "chat", "msg-7")]
    green = history[1]
    assert green.valid_at == green.recorded_at == clock.now and green.observations == []
    assert receipt.entries == [] and len(receipt.observations) == 1  # chat's, now the entry's
    assert seeded.verify_erasure(receipt).ok
    assert "hr" not in {h.provenance.source for h in history}
    consistent(seeded)


def test_a_scope_erases_everything_it_holds_and_only_that(mem):
    a, b = mem.scope("a"), mem.scope("b")
    a.ingest([gem.Fact("Secret Project", "code", MARKER), gem.Fact("Plan", "x", 1)])
    b.ingest(gem.Fact("Secret Project", "code", "kept"))
    receipt = a.erase_all(reason="tenant a left")
    assert a.inspect("Secret Project") is None and a.inspect("Plan") is None
    assert b.inspect("Secret Project").fields["code"].value == "kept"
    assert a.verify_erasure(receipt).ok
    consistent(mem)


def test_a_field_erased_and_stated_again_is_audited_from_its_new_salience(mem, clock):
    """Found by the state machine: the audit kept expecting the salience an earlier erasure
    re-attested for the field (1.0), not what the field made again under its key was written
    with (0.5)."""
    mem.ingest([gem.Fact("Alpha Project", "deadline", "March 15"),
                gem.Fact("Beta Launch", "deadline", "March 15")])
    mem.ingest(gem.Fact("beta launch", "deadline", "March 15"))  # reinforces it
    mem.erase("Alpha Project", "deadline", reason="test")  # re-attests Beta's salience
    mem.erase("Beta Launch", "deadline", reason="test")
    mem.ingest([gem.Fact("Alpha Project", "deadline", "March 15"),
                gem.Fact("Beta Launch", "deadline", "March 15")])
    report = mem.audit(full=True)
    assert report.ok, report.violations


def test_erasures_one_after_another_keep_the_log_consistent(mem, clock):
    """A record redacted twice: erasing A's field re-attests B's units that the shared batch
    wrote; erasing B's owner deletes them; erasing B's other field redacts that deletion too,
    so its erasure record must say they are gone (found by the stateful machine)."""
    mem.ingest([gem.Fact("Alpha", "deadline", "March 15", source="chat"),
                gem.Fact("Delta", "owner", "Dana", source="chat")])
    mem.ingest(gem.Fact("Delta", "deadline", "May 1", source="chat"))
    mem.erase("Alpha", "deadline", reason="test")
    mem.erase("Delta", "owner", reason="test")
    assert mem.audit(full=True).ok
    receipt = mem.erase("Delta", "deadline", reason="test")
    assert mem.verify_erasure(receipt).ok
    report = mem.audit(full=True)
    assert report.ok, report.violations
    consistent(mem)


def test_erasing_keeps_the_salience_a_redacted_read_gave_other_topics(mem):
    """A retrieval's record holds the salience it gave every unit it returned; redacting it
    (it touched the erased topic) must not lose what it says about the others (found by the
    stateful machine: the stored salience then disagreed with the log)."""
    mem.ingest(gem.Fact("Alpha Project", "deadline", "March 15", source="chat"))
    mem.ingest(gem.Fact("Beta Launch", "owner", "Dana", source="chat"))
    returned = mem.retrieve("alpha project owner")
    assert {t.title for t in returned.topics} == {"Alpha Project", "Beta Launch"}
    before = mem.inspect("Beta Launch", "owner").salience
    mem.erase("Alpha Project", "deadline", reason="test")
    mem._engine.write_behind()  # the stored columns catch up: the audit compares them with the log
    report = mem.audit(full=True)
    assert report.ok, report.violations
    assert mem.inspect("Beta Launch", "owner").salience == before
    consistent(mem)


SECRET = "ZQX-SECRET-4711"


@pytest.fixture
def extended(mem):
    """Issue 25: a field of a topic that extends another, updated, so the other topic is
    flagged with the field's name in its evidence."""
    mem.ingest([gem.Fact("Project Q", f"{SECRET}-field", "1"), gem.Fact("Portfolio", "size", 3)])
    mem.link("Project Q", "Portfolio", kind="extension")
    mem.ingest(gem.Fact("Project Q", f"{SECRET}-field", "2"))
    assert SECRET in str(mem.pending_revisions())
    return mem


def test_an_erased_field_name_leaves_the_flags_and_the_log_it_was_copied_to(extended):
    receipt = extended.erase("Project Q", f"{SECRET}-field", reason="subject request")
    assert extended.verify_erasure(receipt).ok
    assert extended.pending_revisions() == []       # its only reason, the change, is erased
    flag = extended._engine.read(lambda t: t.flags("t2"))[0]
    assert flag["status"] == "cleared" and flag["cleared_by"] == "erasure"
    assert json.loads(flag["evidence"])["updated_field"] == "[erased]"
    assert SECRET.lower() not in repr(extended.transitions()).lower()
    assert SECRET.lower() not in repr(receipt.model_dump()).lower()
    consistent(extended)


def test_the_redacted_flags_and_log_stay_clean_after_reopening(tmp_path, clock):
    path = memory_location(tmp_path)
    with gem.open(path, clock=clock, engine=ENGINE) as mem:
        mem.ingest([gem.Fact("Project Q", f"{SECRET}-field", "1"), gem.Fact("Portfolio", "size", 3)])
        mem.link("Project Q", "Portfolio", kind="extension")
        mem.ingest(gem.Fact("Project Q", f"{SECRET}-field", "2"))
        receipt = mem.erase("Project Q", f"{SECRET}-field", reason="subject request")
    with gem.open(path, clock=clock, engine=ENGINE) as mem:
        report = mem.audit(full=True)
        assert report.ok, report.violations
        assert mem.verify_erasure(receipt).ok and mem.pending_revisions() == []


def test_verify_erasure_finds_an_erased_name_copied_anywhere(extended):
    """verify_erasure scans every stored string, not only the erased rows: a copy of the name
    left in a surviving flag's evidence fails it."""
    receipt = extended.erase("Project Q", f"{SECRET}-field", reason="subject request")
    raw_write(extended, "MATCH (g:Flag {id: 'g1'}) SET g.evidence = "
                        f"'{{\"updated_field\": \"{SECRET.lower()}-FIELD\"}}'")
    check = extended.verify_erasure(receipt)
    assert not check.ok and any("flag g1" in p for p in check.problems), check.problems


def test_a_name_a_surviving_unit_still_holds_is_not_a_leftover(mem):
    mem.ingest([gem.Fact("Bob", "team", "blue"), gem.Fact("Alice", "team", "blue"),
                gem.Fact("Bob", "ssn", MARKER)])
    receipt = mem.erase("Bob", "team", reason="GDPR")  # "team" and "blue" are Alice's too
    assert mem.verify_erasure(receipt).ok and len(receipt.marks) == 0
    receipt = mem.erase("Bob", reason="GDPR")          # "Bob", "ssn", the marker: Bob's alone
    assert len(receipt.marks) == 3 and mem.verify_erasure(receipt).ok
    consistent(mem)


def test_an_erased_source_leaves_the_log_and_the_flags(mem):
    source = "zqx-crm-9931"
    mem.ingest([gem.Fact("Bob", "team", "blue", source="chat"), gem.Fact("Launch", "date", "May 1")])
    mem.link("Bob", "Launch")
    mem.ingest(gem.Fact("Bob", "team", "green", source=source))
    receipt = mem.erase("Bob", "team", source=source, reason="crm retracted")
    assert mem.inspect("Bob", "team").value == "blue"
    assert mem.verify_erasure(receipt).ok
    assert source not in repr(mem.transitions()) and source not in repr(mem.pending_revisions())
    consistent(mem)


def test_bad_erasures_change_nothing(seeded):
    before = snapshot(seeded)
    with pytest.raises(gem.UnknownUnit):
        seeded.erase("Nobody", reason="x")
    with pytest.raises(gem.UnknownUnit):
        seeded.erase("Bob", "nothing", reason="x")
    with pytest.raises(gem.UnknownUnit):
        seeded.erase("Bob", source="never-heard-of", reason="x")
    with pytest.raises(gem.InvalidInput):
        seeded.erase("Bob", reason="  ")
    assert snapshot(seeded) == before


def test_a_receipt_that_matches_no_erasure_is_invalid(seeded):
    receipt = seeded.erase("Bob", "ssn", reason="GDPR")
    with pytest.raises(gem.InvalidInput):
        seeded.verify_erasure(receipt.model_copy(update={"commitment": "0" * 64}))
    with pytest.raises(gem.InvalidInput):
        seeded.verify_erasure(receipt.model_copy(update={"transition": 2}))
    with pytest.raises(gem.InvalidInput):
        seeded.verify_erasure({"not": "a receipt"})


def test_a_record_redacted_without_an_erasure_fails_the_audit(seeded):
    raw_write(seeded, "MATCH (x:Transition {seq: 3}) SET x.units = '', x.policies = '', x.detail = '', "
                      "x.salience = '', x.writes = '', x.salt = ''")
    report = seeded.audit(full=True)
    assert not report.ok and any(v.condition == "log" and v.unit == "3" for v in report.violations)



EMBEDDED_FILES = pytest.mark.skipif(ENGINE == "falkordb", reason="compaction rewrites an embedded "
                                    "database's files; FalkorDB frees erased values at once")


@EMBEDDED_FILES
def test_after_erasure_and_compaction_no_byte_of_the_value_is_left(tmp_path, clock):
    path = str(tmp_path / "db")
    with gem.open(path, clock=clock, engine=ENGINE) as mem:
        mem.ingest([gem.Fact("Bob", "ssn", MARKER), gem.Fact("Alice", "team", "red")])
        mem.retrieve(MARKER)                       # in the indexes, the summaries and the log
    assert files_hold(str(tmp_path), MARKER.encode())  # there, before
    with gem.open(path, clock=clock, engine=ENGINE) as mem:
        receipt = mem.erase("Bob", reason="GDPR")
        assert files_hold(str(tmp_path), MARKER.encode())  # deleted rows linger in pages
        sizes = mem.compact()
        assert sizes["bytes_after"] > 0
        assert mem.verify_erasure(receipt).ok and mem.audit(full=True).ok
        assert mem.inspect("Alice").fields["team"].value == "red"
    assert files_hold(str(tmp_path), MARKER.encode()) == []
    with gem.open(path, clock=clock, engine=ENGINE) as mem:
        assert mem.audit(full=True).ok and mem.verify_erasure(receipt).ok


@pytest.mark.slow
@EMBEDDED_FILES
@pytest.mark.parametrize("step", ["exported", "imported", "ready", "moved old", "moved new"])
def test_a_compaction_killed_at_any_step_leaves_a_whole_database(tmp_path, step):
    """In a subprocess killed (os._exit) at each step of the swap: the next open finds either
    the old or the new database, and the audit is clean."""
    path = str(tmp_path / "db")
    script = textwrap.dedent(f"""
        import os, gem
        from gem.store import compact
        mem = gem.open({path!r}, engine={ENGINE!r})
        mem.ingest([gem.Fact("Keep", "x", 1), gem.Fact("Gone", "y", {MARKER!r})])
        mem.erase("Gone", reason="test")
        compact.crash_point = lambda name: os._exit(9) if name == {step!r} else None
        mem.compact()
    """)
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=HANG)
    assert done.returncode == 9, done.stderr[-2000:]
    with gem.open(path, engine=ENGINE) as mem:
        assert mem.inspect("Keep").fields["x"].value == 1 and mem.inspect("Gone") is None
        assert mem.audit(full=True).ok
    assert not [n for n in os.listdir(tmp_path) if ".compact-" in n]


# ---------------------------------------------------------------- erased episodes (issue 25)
def _said_deadline(episode: gem.Episode) -> list[gem.Fact]:
    """An extractor: 'X is due D' -> Fact(X, deadline, D), citing the episode."""
    topic, _, date = episode.text.rstrip(".").partition(" is due ")
    return [gem.Fact(topic, "deadline", date, source=episode.source)] if date else []


ERASURES = {
    "topic": lambda mem: mem.erase("Website Redesign", reason="ticket 25"),
    "field": lambda mem: mem.erase("Website Redesign", "deadline", reason="ticket 25"),
    "source": lambda mem: mem.erase("Website Redesign", source="chat:41", reason="ticket 25"),
    "erase_all": lambda mem: mem.erase_all(reason="ticket 25"),
}


def _listed(mem: gem.Memory) -> list[str]:
    page = mem.episodes()
    assert page.matching == len(page.episodes) == sum(page.counts.values())
    return [e.text for e in page.episodes]


@pytest.mark.parametrize("how", sorted(ERASURES))
def test_episodes_and_topics_list_what_remains_after_an_erasure_removed_an_episode(db_path, clock, how):
    from datetime import timedelta
    said = clock.now - timedelta(hours=1)
    with gem.open(db_path, clock=clock, engine=ENGINE, extractor=_said_deadline) as mem:
        mem.ingest([gem.Episode("Website Redesign is due April 20.", at=said, source="chat:41"),
                    gem.Episode("Lunch is at the deli", at=said + timedelta(minutes=1), source="chat:42"),
                    gem.Fact("Lunch", "place", "deli")])
        receipt = ERASURES[how](mem)
        assert receipt.episodes == (["ep1", "ep2"] if how == "erase_all" else ["ep1"])
        remaining = [] if how == "erase_all" else ["Lunch is at the deli"]
        assert _listed(mem) == remaining
        assert all(e.follows is None for e in mem.episodes().episodes)  # its context went
        assert mem.episodes(status="active").matching == len(remaining)
        topics = mem.topics()
        assert topics.matching == len(topics.topics) == sum(topics.topic_counts.values())
        consistent(mem)
    with gem.open(db_path, clock=clock, engine=ENGINE) as mem:
        assert _listed(mem) == remaining
        assert mem.topics().matching == sum(mem.topics().topic_counts.values())
        consistent(mem)


def test_the_full_audit_finds_an_episode_that_follows_one_that_is_not_stored(mem, clock):
    from datetime import timedelta
    mem.ingest([gem.Episode("Where did you go?", at=clock.now - timedelta(minutes=2)),
                gem.Episode("Lisbon", at=clock.now - timedelta(minutes=1))])
    assert mem.audit(full=True).ok
    raw_write(mem, "MATCH (x:Episode {id: 'ep2'}) SET x.follows = 'ep9'")
    report = mem.audit(full=True)
    assert any(v.condition == "C4" and v.unit == "ep2" and "ep9" in v.detail
               for v in report.violations), report.violations


def test_the_full_audit_finds_derived_state_that_lists_an_episode_that_is_not_stored(mem, clock):
    mem.ingest([gem.Episode("kept"), gem.Episode("also kept")])
    assert mem.audit(full=True).ok
    episodes = mem._engine.derived.scope("default").episodes
    episodes.put("ep9", 0.0, clock.now, "active")   # what the database does not hold
    report = mem.audit(full=True)
    assert any(v.condition == "state" and v.unit == "ep9" for v in report.violations), report.violations
    episodes.remove("ep9")
    episodes.remove("ep2")                           # and one it holds is missing
    report = mem.audit(full=True)
    assert any(v.condition == "state" and v.unit == "ep2" for v in report.violations), report.violations
