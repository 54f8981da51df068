"""Episodes under main's governance: scopes, tamper evidence, erasure, export/import and the
input rules of the new retrieve arguments (issue 10 merged with issues 9 and 12)."""
from __future__ import annotations

import io
import os
from datetime import datetime, timedelta, timezone

import pytest

import gem
from conftest import ENGINE, Clock, files_hold, snapshot
from gem.store import open_store
from gem.testing.consistency import cache_disagreements, derived_disagreements
from test_transfer import _logical

MARKER = "Zorblax-4471-quux"


def _said_by(ep: gem.Episode) -> list[gem.Fact]:
    """A plain-function extractor: "X's <field> is <value>" becomes one fact."""
    head, _, value = ep.text.partition(" is ")
    if "'s " not in head or not value:
        return []
    topic, _, field = head.partition("'s ")
    return [gem.Fact(topic, field, value.rstrip("."))]


def _found(r: gem.RetrieveResult) -> str:
    """What a retrieval returned (its query echoed back left out)."""
    return r.model_dump_json(include={"topics", "episodes"})


def _consistent(mem: gem.Memory) -> None:
    assert cache_disagreements(mem) == []
    assert derived_disagreements(mem) == []


@pytest.mark.slow
# ---------------------------------------------------------------------- scopes
def test_an_episode_of_one_scope_is_never_seen_from_another(db_path, clock):
    with gem.open(db_path, clock=clock, engine=ENGINE) as mem:
        acme, globex = mem.scope("acme"), mem.scope("globex")
        got = acme.ingest([gem.Episode(f"The launch code is {MARKER}", speaker="Ann",
                                       source="acme:m1"),
                           gem.Episode("We meet on Tuesdays", source="acme:m2")])
        assert got.episode_ids == ["acme:ep1", "acme:ep2"]
        mem.ingest(gem.Episode("Lunch is at noon", source="d1"))
        # (acme:ep2 follows acme:ep1 in the conversation, so it is read in its context)
        assert [e.id for e in acme.retrieve(MARKER).episodes][:1] == ["acme:ep1"]
        for other in (mem, globex):
            r = other.retrieve(f"launch code {MARKER}", k=20)
            assert all(not e.id.startswith("acme:") for e in r.episodes)
            assert MARKER not in _found(r)
        assert [e.id for e in mem.retrieve("lunch noon").episodes] == ["ep1"]
        assert acme.stats()["episodes"] == {"active": 2}
        assert mem.stats()["episodes"] == {"active": 1}
        assert globex.stats()["episodes"] == {}
        # a fact in another scope citing acme's episode by id shows nothing of it
        mem.ingest(gem.Fact("Probe", "x", 1, ref="acme:ep1"))
        history = mem.history("Probe", "x")
        assert history[0].episode is None
        # and a fact citing its own scope's episode does
        acme.ingest(gem.Fact("Launch", "code", MARKER, ref="acme:ep1"))
        assert acme.history("Launch", "code")[0].episode.text.endswith(MARKER)
        _consistent(mem)
    with gem.open(db_path, clock=clock, engine=ENGINE) as mem:  # from the snapshot
        assert [e.id for e in mem.scope("acme").retrieve(MARKER).episodes][:1] == ["acme:ep1"]
        assert MARKER not in _found(mem.retrieve(MARKER, k=20))
        assert mem.audit(full=True).ok
        _consistent(mem)


def test_erasing_a_scope_erases_its_episodes_and_only_those(db_path, clock):
    with gem.open(db_path, clock=clock, engine=ENGINE) as mem:
        acme = mem.scope("acme")
        acme.ingest([gem.Episode("Only talk, no facts", source="a1"),
                     gem.Episode("More talk", source="a2")])
        mem.ingest(gem.Episode("Default scope talk", source="d1"))
        receipt = acme.erase_all(reason="tenant left")   # a scope holding only episodes
        assert receipt.topics == [] and receipt.episodes == ["acme:ep1", "acme:ep2"]
        assert acme.verify_erasure(receipt).ok
        assert acme.retrieve("talk").episodes == []
        assert [e.id for e in mem.retrieve("talk").episodes] == ["ep1"]
        assert mem.audit(full=True).ok
        _consistent(mem)
        with pytest.raises(gem.UnknownUnit):
            acme.erase_all(reason="again")


# ---------------------------------------------------------------------- tamper evidence
@pytest.fixture(scope="module")
def closed(tmp_path_factory):
    folder = tmp_path_factory.mktemp("episodes-tamper")
    path = str(folder / "db")
    with gem.open(path, clock=Clock(), engine=ENGINE) as mem:
        mem.ingest([gem.Episode("Ann's city is Paris.", speaker="Ann", source="m1"),
                    gem.Episode("I like tea", speaker="Ann", source="m2")])
        mem.scope("acme").ingest(gem.Episode("Acme says hello", source="a1"))
        mem.retrieve("tea")
        head = mem.head()
        assert mem.audit(full=True, expected_head=head).ok
    return path, head


EDITS = {
    "an episode's text": ("MATCH (x:Episode {id: 'ep2'}) SET x.text = 'I like coffee'", "ep2"),
    "an episode's speaker": ("MATCH (x:Episode {id: 'ep1'}) SET x.speaker = 'Bob'", "ep1"),
    "an episode's time": ("MATCH (x:Episode {id: 'ep1'}) SET x.at = timestamp('2020-01-01 00:00:00')",
                          "ep1"),
    "an episode hidden": ("MATCH (x:Episode {id: 'ep2'}) SET x.status = 'hidden'", "ep2"),
    "an episode's salience inflated": ("MATCH (x:Episode {id: 'ep1'}) SET x.strength = 9.0", "ep1"),
    "an episode deleted": ("MATCH (x:Episode {id: 'acme:ep1'}) DELETE x", "acme:ep1"),
    "an episode moved to another scope": ("MATCH (x:Episode {id: 'acme:ep1'}) SET x.scope = 'default'",
                                          "acme:ep1"),
}


@pytest.mark.parametrize("edit", sorted(EDITS))
def test_an_edited_episode_row_fails_the_audit(closed, tmp_path, edit):
    from test_tamper import copy_of
    base_path, head = closed
    path = copy_of(base_path, str(tmp_path))
    statement, unit = EDITS[edit]
    store = open_store(path, ENGINE)
    with store.transaction() as tx:
        tx.run(statement)
    store.close()
    with gem.open(path, engine=ENGINE) as mem:
        report = mem.audit(full=True, expected_head=head)
    assert not report.ok
    assert unit in {v.unit for v in report.violations}, report.violations


@pytest.mark.slow
# ---------------------------------------------------------------------- erasure
def test_erasing_a_topic_erases_the_episodes_its_facts_came_from(db_path, clock):
    with gem.open(db_path, clock=clock, engine=ENGINE, extractor=_said_by) as mem:
        got = mem.ingest([gem.Episode(f"Bob's ssn is {MARKER}.", speaker="Bob", source="chat:1"),
                          gem.Episode("That was a secret", speaker="Bob", source="chat:2"),
                          gem.Episode("Alice's team is red.", speaker="Alice", source="chat:3")])
        assert got.extracted == 2
        assert mem.inspect("Bob").fields["ssn"].provenance.ref == "ep1"
        assert [e.id for e in mem.retrieve(f"ssn {MARKER}").episodes][:1] == ["ep1"]
        receipt = mem.erase("Bob", reason="GDPR")
        assert receipt.episodes == ["ep1"] and receipt.redacted
        check = mem.verify_erasure(receipt)
        assert check.ok, check.problems
        r = mem.retrieve(MARKER, k=20)
        assert MARKER not in _found(r)
        # the episode said next read the erased one as context: no longer
        engine = mem._engine
        with engine.store.lock:
            engine.derived.refresh_units(engine.cache)
            docs = engine.derived.scope("default").unit_docs
        assert "ep1" not in docs and all(MARKER not in d for d in docs.values())
        assert "ep2" in docs
        assert mem.inspect("Alice").fields["team"].value == "red"
        assert mem.audit(full=True).ok
        _consistent(mem)
        assert all(MARKER not in str(t) for t in mem.transitions())
    with gem.open(db_path, clock=clock, engine=ENGINE) as mem:
        assert mem.verify_erasure(receipt).ok and mem.audit(full=True).ok
        _consistent(mem)
        mem.compact()
    assert files_hold(os.path.dirname(db_path), MARKER.encode()) == []
    with gem.open(db_path, clock=clock, engine=ENGINE) as mem:
        assert [e.source for e in mem.retrieve("secret").episodes][:1] == ["chat:2"]
        assert mem.audit(full=True).ok


def test_erasing_what_a_source_said_erases_its_episodes(mem, clock):
    mem.extractor = _said_by
    mem.ingest([gem.Episode("Carol's phone is 555-0100.", source="leaky"),
                gem.Episode("unrelated chatter", source="leaky"),
                gem.Episode("Carol's desk is 4B.", source="fine")])
    clock.advance(hours=1)
    mem.ingest(gem.Fact("Carol", "phone", "555-0199", source="fine"))
    receipt = mem.erase("Carol", source="leaky", reason="the source was not allowed")
    assert receipt.episodes == ["ep1", "ep2"]
    assert mem.verify_erasure(receipt).ok
    assert [e.source for e in mem.retrieve("Carol desk chatter phone", k=10).episodes] == ["fine"]
    assert mem.inspect("Carol").fields["phone"].value == "555-0199"
    assert mem.audit(full=True).ok
    _consistent(mem)


def test_an_erasure_seen_only_through_the_log_is_caught_up(db_path, clock):
    """A snapshot saved before an erasure, then the log: the erased episode leaves the
    derived state as a rebuild would."""
    with gem.open(db_path, clock=clock, engine=ENGINE, extractor=_said_by) as mem:
        mem.ingest([gem.Episode(f"Dan's pin is {MARKER}.", source="x1"),
                    gem.Episode("ok", source="x2")])
        mem.retrieve("pin")
    folder = db_path + ".gem-derived"
    saved = {name: open(os.path.join(folder, name), "rb").read() for name in os.listdir(folder)}
    with gem.open(db_path, clock=clock, engine=ENGINE) as mem:
        mem.erase("Dan", reason="asked")
    for name in os.listdir(folder):
        os.remove(os.path.join(folder, name))
    for name, data in saved.items():
        with open(os.path.join(folder, name), "wb") as f:
            f.write(data)
    with gem.open(db_path, clock=clock, engine=ENGINE) as mem:
        _consistent(mem)
        assert MARKER not in _found(mem.retrieve(MARKER, k=20))


@pytest.mark.slow
# ---------------------------------------------------------------------- export / import
def test_export_and_import_carry_episodes(db_path, clock, tmp_path):
    with gem.open(db_path, clock=clock, engine=ENGINE, extractor=_said_by) as mem:
        mem.ingest([gem.Episode("Eve's city is Oslo.", speaker="Eve", source="e:1"),
                    gem.Episode("and she skis", speaker="Eve", source="e:2")])
        mem.scope("acme").ingest(gem.Episode("Acme ships in May", source="a:1"))
        clock.advance(days=60)
        mem.maintain()
        mem.retrieve("Oslo")  # salience to write behind at close
    # closed first (salience written behind), as the import leaves its copy
    with gem.open(db_path, clock=clock, engine=ENGINE) as mem:
        buffer = io.StringIO()
        mem.export(buffer)
        before = snapshot(mem)
        head = mem.head()
    assert '"table":"Episode"' in buffer.getvalue()
    buffer.seek(0)
    copy = str(tmp_path / "copy.db")
    report = gem.import_jsonl(buffer, copy, engine=ENGINE)
    assert report.head == head
    with gem.open(copy, clock=clock, engine=ENGINE, create=False) as mem:
        after = snapshot(mem)
        assert len(after["tables"]["Episode"]) == 3
        assert _logical(after)["tables"] == _logical(before)["tables"]
        assert mem.audit(full=True).ok
        assert [e.source for e in mem.scope("acme").retrieve("ships May").episodes] == ["a:1"]
        assert "e:2" in [e.source for e in mem.retrieve("Eve skis", k=3).episodes]


# ---------------------------------------------------------------------- input rules
T = datetime(2026, 1, 1, tzinfo=timezone.utc)


@pytest.mark.parametrize("kwargs, named", [
    ({"between": "last week"}, "between"),
    ({"between": (T,)}, "between"),
    ({"between": (T, "tomorrow")}, "between end"),
    ({"between": (datetime(2026, 1, 1), T)}, "between start"),
    ({"between": (T + timedelta(days=1), T)}, "between"),
    ({"fields": "everything"}, "fields"),
    ({"fields": 5}, "fields"),
    ({"fields": ["ok", 3]}, "fields[1]"),
    ({"k": "3"}, "k"),
    ({"k": 0}, "k"),
    ({"k": True}, "k"),
    ({"k": 10_000}, "k"),
    ({"history": "yes"}, "history"),
])
def test_wrong_retrieve_arguments_are_invalid_input_naming_the_argument(mem, kwargs, named):
    mem.ingest(gem.Episode("something to find", source="s"))
    before = snapshot(mem)
    with pytest.raises(gem.InvalidInput, match=named.replace("[", r"\[").replace("]", r"\]")):
        mem.retrieve("something", **kwargs)
    assert snapshot(mem) == before


@pytest.mark.parametrize("make, named", [
    (lambda: gem.Episode(5), "text"),
    (lambda: gem.Episode("  "), "text"),
    (lambda: gem.Episode("x", at="2026-01-01"), "at"),
    (lambda: gem.Episode("x", at=datetime(2026, 1, 1)), "at"),
    (lambda: gem.Episode("x", speaker=3), "speaker"),
    (lambda: gem.Episode("x", source=b"s"), "source"),
])
def test_a_malformed_episode_is_invalid_input_naming_the_field(make, named):
    with pytest.raises(gem.InvalidInput, match=named):
        make()


def test_an_extractor_must_be_callable():
    with pytest.raises(gem.InvalidInput, match="extractor"):
        gem.open(None, extractor="not callable")
