"""The forgetting ladder compresses a faded conversation turn into its searchable summary
(its distinct content words, derived, in the unit index) instead of hiding its words: an
ordinary cue still finds it and revives it; hiding comes only after it faded much further."""
from __future__ import annotations

from datetime import timedelta

from conftest import ENGINE, T0, files_hold

import gem
from gem.derived.documents import COMPRESSED_WORDS
from gem.policy import load_text
from gem.terms import content_words
from gem.testing.consistency import derived_disagreements

TURN = "Honestly I think the Ferrogate excavation near Quillby found the Roman pottery we saw."


def talk(mem: gem.Memory) -> str:
    (eid,) = mem.ingest(gem.Episode(TURN, at=T0 - timedelta(hours=7), source="chat:1", speaker="Ana")).episode_ids
    for i in range(6):
        mem.ingest(gem.Episode(f"Ordinary remark number {i} about the weather.",
                               at=T0 - timedelta(hours=6 - i), source=f"n:{i}"))
    return eid


def status(mem: gem.Memory, text: str) -> str:
    (found,) = mem.episodes(text=text).episodes
    return found.status


def test_a_faded_turn_is_compressed_not_hidden(mem, clock):
    talk(mem)
    clock.advance(days=45)   # salience 0.39 -> ~0.14: below the compression rung only
    mem.maintain()
    assert status(mem, "Ferrogate") == "compressed"
    assert mem.episodes(status="compressed").matching == 7
    assert mem.episodes(status="hidden").matching == 0


def test_a_compressed_turn_is_searched_by_its_summary(mem, clock):
    eid = talk(mem)
    clock.advance(days=45)
    mem.maintain()
    mem.retrieve("weather remark", k=1)  # a read derives what the pass made stale
    doc = mem._engine.derived.scope("default").unit_docs[eid]
    assert doc == content_words(f"Ana: {TURN}", COMPRESSED_WORDS)
    assert "honestly" in doc and " the " not in f" {doc} " and doc.count("ferrogate") == 1
    assert derived_disagreements(mem) == []


def test_a_cue_finds_a_compressed_turn_at_the_ordinary_floor_and_revives_it(mem, clock, tmp_path):
    # hidden units could not be recalled at all: only compression keeps the turn findable
    strict = tmp_path / "strict.policy"
    strict.write_text("OVERRIDE SET hidden_recall_floor = 1\n")
    mem.load_policies([str(strict)])
    talk(mem)
    clock.advance(days=45)
    mem.maintain()
    r = mem.retrieve("Roman pottery at the excavation", k=3)
    (found,) = [e for e in r.episodes if e.source == "chat:1"]
    assert found.recalled == "compressed" and found.status == "active"
    assert found.text == TURN                       # what it said is kept whole
    assert status(mem, "Ferrogate") == "active"
    mem.retrieve("weather remark", k=1)             # its words are back in the index
    eid = mem.episodes(text="Ferrogate").episodes[0].id
    assert mem._engine.derived.scope("default").unit_docs[eid].startswith(f"Ana: {TURN}")
    assert derived_disagreements(mem) == [] and mem.audit(full=True).ok


def test_a_turn_that_faded_much_further_is_hidden(mem, clock):
    talk(mem)
    clock.advance(days=120)  # ~0.02: past both rungs, compressed then hidden in one pass
    mem.maintain()
    assert status(mem, "Ferrogate") == "hidden"
    assert mem.episodes(status="compressed").matching == 0
    r = mem.retrieve("Ferrogate excavation Quillby Roman pottery", k=3)  # a strong cue
    assert [e.recalled for e in r.episodes if e.source == "chat:1"] == ["hidden"]


def test_compressed_episodes_survive_a_reopen_and_a_rebuild(db_path, clock):
    with gem.open(db_path, clock=clock, engine=ENGINE) as mem:
        eid = talk(mem)
        clock.advance(days=45)
        mem.maintain()
    with gem.open(db_path, clock=clock, engine=ENGINE) as mem:
        assert status(mem, "Ferrogate") == "compressed"
        mem.retrieve("weather remark", k=1)
        assert mem._engine.derived.scope("default").unit_docs[eid].startswith("ana honestly")
        assert derived_disagreements(mem) == [] and mem.audit(full=True).ok



def test_an_erased_compressed_turn_leaves_nothing_not_even_its_summary(tmp_path, clock):
    path = str(tmp_path / "db")
    with gem.open(path, clock=clock, engine=ENGINE) as mem:
        eid = talk(mem)
        clock.advance(days=45)
        mem.maintain()
        mem.retrieve("weather remark", k=1)
        units = mem._engine.derived.scope("default")
        assert eid in units.unit_docs
        receipt = mem.erase_all("the speaker left")
        assert eid not in units.unit_docs and eid not in units.unit_lexical
        assert mem.retrieve("Ferrogate Quillby pottery", include_archived=True).episodes == []
        assert mem.verify_erasure(receipt).ok and derived_disagreements(mem) == []
        if ENGINE != "falkordb":
            mem.compact()
    if ENGINE != "falkordb":
        assert files_hold(str(tmp_path), b"quillby") == []
        assert files_hold(str(tmp_path), b"Quillby") == []


def test_the_policy_language_compresses_episodes():
    policies = load_text("POLICY squeeze\nON tick\nWHEN EXISTS e IN visible_episodes "
                         "WHERE e.salience < 0.5\nDO compress(e)\n", defaults=True)
    assert [p.name for p in policies.triggered_by("tick") if p.name == "squeeze"] == ["squeeze"]
