"""Multi-hop retrieval: the second stage brings evidence the query's words do not reach
(the reply a turn later, the episode a fact was extracted from), and weighs who and when."""
from __future__ import annotations

from datetime import timedelta

from conftest import ENGINE, T0

import gem
from gem.operators.spread import Hit, second_stage


def offsite_conversation(mem: gem.Memory, start=T0 - timedelta(days=1)) -> None:
    turns = [("Ana", "Where will the team offsite be held this year?"),
             ("Bob", "Let me check the booking."),
             ("Bob", "Lisbon, in the old tram depot by the river."),
             ("Ana", "Lovely, thanks!")]
    for i, (who, text) in enumerate(turns):
        mem.ingest(gem.Episode(text, at=start + timedelta(seconds=i), source=f"chat:{i}",
                               speaker=who))
    # other talk, some of it about the team, none about the offsite
    for i, text in enumerate(["The team lunch is on Friday.", "Bob fixed the build.",
                              "The river walk was nice.", "Ana booked the dentist."]):
        mem.ingest(gem.Episode(text, at=start + timedelta(hours=2 + i), source=f"note:{i}"))


def test_the_answer_said_turns_after_the_question_is_returned_with_it(mem):
    offsite_conversation(mem)
    r = mem.retrieve("Where is the team offsite held?", k=3)
    sources = [e.source for e in r.episodes]
    # chat:2 shares no word with the question (its context is 'Let me check the booking'):
    # only the follows chain from the question's turns reaches it
    assert {"chat:0", "chat:2"} <= set(sources), sources


def test_an_episode_reached_only_by_structure_is_reinforced_like_any_read(mem, clock):
    offsite_conversation(mem)
    (before,) = mem.episodes(text="tram depot").episodes
    r = mem.retrieve("Where is the team offsite held?", k=3)
    after = next(e for e in r.episodes if e.source == "chat:2")
    assert after.salience > before.salience
    assert mem.audit(full=True).ok


def extract_deadline(episode: gem.Episode) -> list[gem.Fact]:
    """A stand-in for an LLM extractor that resolves 'the 20th' to a date."""
    if "moved it to the 20th" in episode.text:
        return [gem.Fact("Website Redesign", "deadline", "2026-04-20", source=episode.source)]
    return []


def test_a_fact_s_episode_comes_with_the_fact(db_path, clock):
    with gem.open(db_path, clock=clock, engine=ENGINE, extractor=extract_deadline) as mem:
        mem.ingest(gem.Episode("The client moved it to the 20th.", source="mail:7", speaker="Ana",
                               at=T0 - timedelta(days=3)))
        for i in range(6):
            mem.ingest(gem.Episode(f"Unrelated note number {i} about lunch.", source=f"n{i}",
                                   at=T0 - timedelta(days=2, hours=i)))
        r = mem.retrieve("website redesign deadline", k=3)
        assert r.value("Website Redesign", "deadline") == "2026-04-20"
        assert [e.source for e in r.episodes] == ["mail:7"]  # none of its words are the query's


def test_a_time_cue_raises_what_was_said_in_its_window_and_filters_nothing(mem, clock):
    for month, place in [(3, "Porto"), (5, "Lisbon"), (6, "Faro")]:
        mem.ingest(gem.Episode(f"We went hiking near {place} with the kids.", speaker="Ana",
                               at=T0.replace(month=month, day=2) - timedelta(days=365)))
    clock.advance(days=1)
    r = mem.retrieve("When did Ana go hiking in May?", k=3)
    assert [e.text for e in r.episodes][0] == "We went hiking near Lisbon with the kids."
    assert len(r.episodes) == 3  # a soft window: the others are still evidence


def test_a_when_question_prefers_the_turn_that_says_when(mem):
    mem.ingest(gem.Episode("Jon, a mentor for the dance studio would help you.", speaker="Gina",
                           at=T0 - timedelta(days=2)))
    mem.ingest(gem.Episode("I got a mentor for the dance studio yesterday!", speaker="Jon",
                           at=T0 - timedelta(days=1)))
    r = mem.retrieve("When did Jon get a mentor for the dance studio?", k=2)
    assert r.episodes[0].text == "I got a mentor for the dance studio yesterday!"


def test_the_speaker_a_question_names_outranks_the_one_it_does_not(mem):
    mem.ingest(gem.Episode("I love painting sunsets by the lake.", speaker="Melanie",
                           at=T0 - timedelta(days=3)))
    mem.ingest(gem.Episode("Melanie, love painting!", speaker="Caroline",
                           at=T0 - timedelta(days=2)))  # more of the question's words, said by another
    r = mem.retrieve("What does Melanie love painting?", k=2)
    assert r.episodes[0].speaker == "Melanie"


def test_a_turn_is_found_by_the_day_its_words_refer_to(mem, clock):
    said = T0 - timedelta(days=30)
    mem.ingest(gem.Episode("My mom and I made some dinner together last night!", speaker="Maria",
                           at=said))
    mem.ingest(gem.Episode("Dinner with the team was fun.", speaker="Maria",
                           at=said - timedelta(days=9)))
    day = (said - timedelta(days=1)).strftime("%B %-d, %Y")
    r = mem.retrieve(f"Who did Maria have dinner with on {day}?", k=2)
    assert r.episodes[0].text == "My mom and I made some dinner together last night!"


def test_a_returned_turn_carries_when_it_was_said_and_the_day_it_refers_to(mem):
    said = T0 - timedelta(days=30)
    mem.ingest(gem.Episode("I got mentored by a business coach yesterday!", speaker="Jon", at=said))
    (e,) = mem.retrieve("When did Jon get mentored?", k=1).episodes
    assert e.at == said
    assert e.refers_to == (said - timedelta(days=1)).replace(hour=0, minute=0, second=0)


def test_a_hidden_reply_is_recalled_through_the_turn_the_query_matches_and_revived(mem, clock):
    """Forgetting must not cost the second stage what it finds: a hidden turn reached from a
    turn the query matches strongly is cued by it, returned marked `recalled`, and revived, as
    a hidden turn the query matched itself would be."""
    offsite_conversation(mem)
    clock.advance(days=120)
    mem.maintain()
    (hidden,) = mem.episodes(text="tram depot", status="hidden").episodes
    r = mem.retrieve("Where is the team offsite held?", k=3)
    reply = next(e for e in r.episodes if e.source == "chat:2")
    assert reply.recalled == "hidden"
    assert mem.episodes(text="tram depot", status="hidden").episodes == []
    (revived,) = mem.episodes(text="tram depot").episodes
    assert revived.status == "active" and revived.salience > hidden.salience
    assert mem.audit(full=True).ok


def test_a_question_about_one_speaker_passes_the_other_s_reply_less_than_their_own_turn(mem):
    """The reply to the turn the query matched follows it; when the query names one speaker,
    what that speaker said elsewhere answers it better than the other's reply (LoCoMo: 97% of
    a multi-hop question's evidence is the named speaker's). The second stage is given the
    first stage's ranking as rank_units would hand it over."""
    start = T0 - timedelta(days=30)
    for i, (who, text, at) in enumerate([
            ("Ana", "I play the clarinet, since I was young.", start),
            ("Bob", "That is lovely to hear!", start + timedelta(seconds=1)),
            ("Ana", "Running, reading, or playing my violin.", start + timedelta(days=10))]):
        mem.ingest(gem.Episode(text, at=at, source=f"chat:{i}", speaker=who))
    ids = {e.source: e.id for e in mem.episodes(limit=10).episodes}
    first = [Hit(ids["chat:0"], 0.05, 0.6), Hit(ids["chat:2"], 0.03, 0.2)]

    def ranked(query: str) -> list[str]:
        hits = mem._engine.read(lambda t: second_stage(t, query, first, 2,
                                                       lambda unit, rel: (True, None)))
        source = {v: k for k, v in ids.items()}
        return [source[h.unit] for h in hits]
    assert ranked("What instruments does Ana play?")[:2] == ["chat:0", "chat:2"]
    # a question naming no one (or both) keeps the reply next to the turn it answers
    assert ranked("What instruments are played?")[:2] == ["chat:0", "chat:1"]
