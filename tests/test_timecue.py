"""Time cues: phrasings read against a clock into soft windows; mentions; what a turn refers to."""
from __future__ import annotations

from datetime import datetime, timedelta, timezone

import pytest

from gem.timecue import EARLIEST, asks_when, cue, mentions_time, refers_to, without_cue

NOW = datetime(2023, 7, 12, 15, 30, tzinfo=timezone.utc)  # a Wednesday


def d(y: int, m: int, day: int) -> datetime:
    return datetime(y, m, day, tzinfo=timezone.utc)


@pytest.mark.parametrize("text, lo, hi", [
    ("What did we decide yesterday?", d(2023, 7, 11), d(2023, 7, 12)),
    ("what happened today", d(2023, 7, 12), d(2023, 7, 13)),
    ("plans for tomorrow", d(2023, 7, 13), d(2023, 7, 14)),
    ("What did Ana say last week?", d(2023, 7, 3), d(2023, 7, 10)),
    ("anything this week", d(2023, 7, 10), d(2023, 7, 17)),
    ("Where did they go last weekend?", d(2023, 7, 8), d(2023, 7, 10)),
    ("What changed last month?", d(2023, 6, 1), d(2023, 7, 1)),
    ("Which trips last year?", d(2022, 1, 1), d(2023, 1, 1)),
    ("goals for this year", d(2023, 1, 1), d(2024, 1, 1)),
    ("When did Melanie go camping in June?", d(2023, 6, 1), d(2023, 7, 1)),
    ("What happened in May?", d(2023, 5, 1), d(2023, 6, 1)),
    ("what did she do in December", d(2022, 12, 1), d(2023, 1, 1)),   # the latest December
    ("the launch in Sept", d(2022, 9, 1), d(2022, 10, 1)),
    ("in May 2021", d(2021, 5, 1), d(2021, 6, 1)),
    ("What happened in 2022?", d(2022, 1, 1), d(2023, 1, 1)),
    ("Who did Maria have dinner with on May 3, 2023?", d(2023, 5, 3), d(2023, 5, 4)),
    ("the talk on 8 May, 2023", d(2023, 5, 8), d(2023, 5, 9)),
    ("the 3rd of June 2023 meeting", d(2023, 6, 3), d(2023, 6, 4)),
    ("due 2023-04-20", d(2023, 4, 20), d(2023, 4, 21)),
    ("on March 14", d(2023, 3, 14), d(2023, 3, 15)),
    ("on 20 August", d(2022, 8, 20), d(2022, 8, 21)),                  # not yet this year
    ("last Tuesday", d(2023, 7, 11), d(2023, 7, 12)),
    ("last Friday", d(2023, 7, 7), d(2023, 7, 8)),
    ("earlier this month", d(2023, 7, 1), d(2023, 7, 13)),
])
def test_a_cue_names_the_window_it_means_against_the_clock(text, lo, hi):
    found = cue(text, NOW)
    assert found is not None and (found.lo, found.hi) == (lo, hi), found


@pytest.mark.parametrize("text, days", [
    ("two weeks ago", 14), ("3 days ago", 3), ("a month ago", 30), ("a few days ago", 3),
    ("a couple of weeks ago", 14), ("one year ago", 365), ("10 days back", 10),
])
def test_an_interval_ago_is_a_window_around_that_day(text, days):
    found = cue(text, NOW)
    assert found is not None
    centre = d(2023, 7, 12) - timedelta(days=days)
    assert found.lo < centre < found.hi and found.hi - found.lo <= timedelta(days=days)


def test_before_and_after_open_the_window_on_one_side():
    before = cue("What did they do before June 2023?", NOW)
    assert before is not None and (before.lo, before.hi) == (EARLIEST, d(2023, 6, 1))
    after = cue("what happened after May", NOW)
    assert after is not None and after.lo == d(2023, 6, 1) and after.hi >= NOW
    since = cue("everything since 2022", NOW)
    assert since is not None and since.lo == d(2022, 1, 1) and since.hi >= NOW


@pytest.mark.parametrize("text", [
    "What did Caroline research?", "Where has Melanie camped?", "You may go now",
    "May I ask something?", "It was a 10 pm show", "the march for equality", "",
])
def test_text_without_a_time_has_no_cue(text):
    assert cue(text, NOW) is None


def test_the_weight_is_one_inside_and_decays_outside_never_zero():
    found = cue("in June", NOW)
    assert found is not None
    inside, near, far = (found.weight(x) for x in (d(2023, 6, 15), d(2023, 7, 3), d(2022, 6, 15)))
    assert inside == 1.0 and 0 < far < near < 1.0


def test_a_date_the_clock_does_not_know_is_no_window():
    assert cue("on February 30, 2023", NOW) is None


@pytest.mark.parametrize("question, expected", [
    ("When did Melanie paint a sunrise?", True), ("what year did John graduate", True),
    ("How long ago was the trip?", True), ("Which month was the fair?", True),
    ("What did Caroline research?", False), ("Where did Jon go?", False),
])
def test_asks_when_recognises_questions_for_a_time(question, expected):
    assert asks_when(question) is expected


@pytest.mark.parametrize("text, expected", [
    ("I went to a LGBTQ support group yesterday", True),
    ("Last weekend I joined a mentorship program", True),
    ("we went camping with my fam two weekends ago", True),
    ("Next month I'm having an art show", True),
    ("I got mentored by this amazing business dude yesterday!", True),
    ("The opening night is on June 20", True),
    ("I love painting with my kids", False),
    ("Thanks, Melanie! This necklace is super special", False),
])
def test_mentions_time_finds_relative_and_absolute_times_in_a_turn(text, expected):
    assert mentions_time(text) is expected


def test_refers_to_resolves_a_turn_s_time_against_when_it_was_said():
    said = datetime(2023, 5, 8, 13, 56, tzinfo=timezone.utc)
    assert refers_to("I went to a support group yesterday", said) == d(2023, 5, 7)
    assert refers_to("we moved in 2019", said) == d(2019, 1, 1)
    assert refers_to("I love it", said) is None


def test_without_cue_drops_only_the_words_that_name_the_time():
    assert without_cue("Who did Maria have dinner with on May 3, 2023?", NOW) == \
        "Who did Maria have dinner with on ?"
    assert without_cue("What did Caroline research?", NOW) == "What did Caroline research?"


def test_an_episode_refers_to_the_date_an_extractor_gives_before_its_words_cue(tmp_path):
    import gem
    from conftest import ENGINE, memory_location

    said = d(2023, 5, 8)
    concert = d(2023, 4, 29)

    def extract(episode):  # a stand-in for an LLM extractor that dates what the turn says
        if "concert" in episode.text:
            return [gem.Fact("Mel", "last concert", "Muse", at=concert, source=episode.source)]
        if "dentist" in episode.text:  # a fact without a date: valid when it was said
            return [gem.Fact("Mel", "dentist", "Dr Ode", source=episode.source)]
        return []

    with gem.open(memory_location(tmp_path), clock=lambda: said, engine=ENGINE,
                  extractor=extract) as mem:
        mem.ingest([gem.Episode("Yesterday I told you about the concert I saw.", at=said,
                                source="chat:1", speaker="Mel"),
                    gem.Episode("I went to the dentist yesterday.", at=said, source="chat:2",
                                speaker="Mel"),
                    gem.Episode("Nothing much happened.", at=said, source="chat:3")])
        days = {e.source: e.refers_to for e in mem.retrieve(
            "concert dentist nothing happened", k=10).episodes}
        assert days["chat:1"] == concert              # the extractor's date, not 'yesterday'
        assert days["chat:2"] == d(2023, 5, 7)        # no date given: the words' own cue
        assert "chat:3" not in days or days["chat:3"] is None
