"""Associative reinforcement: what a read returns lends a smaller share of its reinforcement to
the episodes and fields that share its rarest words, in the same (logged) transition."""
from __future__ import annotations

import subprocess
import sys
from datetime import timedelta
from pathlib import Path

from conftest import T0

import gem
from gem.testing.consistency import derived_disagreements

ROOT = Path(__file__).resolve().parents[1]


def salience(mem: gem.Memory, text: str) -> float:
    (found,) = mem.episodes(text=text).episodes  # an administrative read: nothing reinforced
    return found.salience


def dig_talk(mem: gem.Memory) -> None:
    said = ["The Ferrogate excavation near Quillby found Roman pottery.",
            "We drove back to Quillby to see the Ferrogate trench again.",
            "Lunch was soup and bread.",
            "The weather turned cold in the afternoon.",
            "My sister called about the weekend."]
    for i, text in enumerate(said):
        mem.ingest(gem.Episode(text, at=T0 - timedelta(days=10 - i), source=f"chat:{i}"))
    for i in range(8):  # ordinary talk, so the dig's words are the rare ones
        mem.ingest(gem.Episode(f"The weekend plan number {i} was soup and a walk.",
                               at=T0 - timedelta(days=4, hours=i), source=f"note:{i}"))


def test_an_episode_sharing_rare_words_with_a_retrieved_one_gains_salience(mem, clock):
    dig_talk(mem)
    clock.advance(days=20)
    related, unrelated = salience(mem, "drove back"), salience(mem, "sister called")
    r = mem.retrieve("Roman pottery excavation", k=1)
    assert [e.source for e in r.episodes] == ["chat:0"]
    assert salience(mem, "drove back") > related
    assert salience(mem, "sister called") == unrelated


def test_an_associate_gains_less_than_what_was_read(mem, clock):
    dig_talk(mem)
    clock.advance(days=20)
    read, related = salience(mem, "Roman pottery"), salience(mem, "drove back")
    mem.retrieve("Roman pottery excavation", k=1)
    assert 0 < salience(mem, "drove back") - related < salience(mem, "Roman pottery") - read


def test_a_policy_setting_turns_associative_reinforcement_off(mem, clock, tmp_path):
    off = tmp_path / "off.policy"
    off.write_text("OVERRIDE SET associative_factor = 0\n")
    mem.load_policies([str(off)])
    dig_talk(mem)
    clock.advance(days=20)
    related = salience(mem, "drove back")
    mem.retrieve("Roman pottery excavation", k=1)
    assert salience(mem, "drove back") == related


def test_associative_reinforcement_is_logged_with_the_read_and_derived_state_agrees(mem, clock):
    dig_talk(mem)
    clock.advance(days=20)
    mem.retrieve("Roman pottery excavation", k=1)
    assert mem.audit(full=True).ok
    assert derived_disagreements(mem) == []


def test_associative_reinforcement_survives_a_reopen(db_path, clock):
    with gem.open(db_path, clock=clock) as mem:
        dig_talk(mem)
        clock.advance(days=20)
        mem.retrieve("Roman pottery excavation", k=1)
        after = salience(mem, "drove back")
    with gem.open(db_path, clock=clock) as mem:
        assert salience(mem, "drove back") == after


def test_a_hidden_episode_gains_nothing_by_association(mem, clock):
    dig_talk(mem)
    clock.advance(days=200)
    mem.maintain()  # everything faded: the ladder hides every episode
    assert mem.episodes(status="active").matching == 0
    mem.retrieve("Quillby Ferrogate excavation Roman pottery", k=1)  # a cue recalls chat:0
    hidden = mem.episodes(text="drove back").episodes[0]
    assert hidden.status == "hidden"
    before = hidden.salience
    mem.retrieve("Roman pottery excavation", k=1)
    assert salience(mem, "drove back") == before


def test_at_most_a_few_associates_gain_per_read(mem, clock):
    for i in range(12):
        mem.ingest(gem.Episode(f"Visit {i} to the Ferrogate site with friend {i}.",
                               at=T0 - timedelta(days=12 - i), source=f"v:{i}"))
    for i in range(12):
        mem.ingest(gem.Episode(f"Ordinary day {i}, nothing much.", at=T0 - timedelta(hours=i),
                               source=f"o:{i}"))
    clock.advance(days=20)
    before = {e.source: e.salience for e in mem.episodes(text="Ferrogate").episodes}
    r = mem.retrieve("visit 3 Ferrogate site", k=1)
    (read,) = [e.source for e in r.episodes]
    after = {e.source: e.salience for e in mem.episodes(text="Ferrogate").episodes}
    gained = [s for s in before if s != read and after[s] > before[s]]
    assert 1 <= len(gained) <= 5


def test_policy_explain_shows_associative_reinforcement():
    out = subprocess.run([sys.executable, "-m", "gem", "policy", "explain",
                          "--no-defaults", str(ROOT / "policies" / "default.policy")],
                         capture_output=True, text=True, check=True).stdout
    assert "reinforce-associated-episodes: DO reinforce_associated" in out
    assert "associative_factor = 0.2" in out
