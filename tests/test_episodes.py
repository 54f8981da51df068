"""Episodes: ingest with an extractor, bad input, the stored embedder, rejected transitions."""
from __future__ import annotations

from datetime import datetime, timedelta, timezone

import pytest
from conftest import ENGINE, T0, memory_location, snapshot

import gem
from gem.testing.consistency import cache_disagreements, derived_disagreements


def extract_deadlines(episode: gem.Episode) -> list[gem.Fact]:
    """A stand-in for an LLM extractor: 'X is due D' -> Fact(X, deadline, D)."""
    text = episode.text.rstrip(".")
    if " is due " not in text:
        return []
    topic, date = text.split(" is due ", 1)
    return [gem.Fact(topic, "deadline", date, source=episode.source)]


def test_the_extractor_s_facts_are_ingested_in_the_same_transition_citing_the_episode(db_path, clock):
    said_at = T0 - timedelta(hours=2)
    with gem.open(db_path, clock=clock, engine=ENGINE, extractor=extract_deadlines) as mem:
        before = mem.stats()["transitions"]
        r = mem.ingest([gem.Episode("Website Redesign is due April 20.", at=said_at,
                                    source="chat:4", speaker="Ana"),
                        gem.Episode("Lunch was great", source="chat:5"),
                        gem.Fact("Website Redesign", "owner", "Ana")])
        assert mem.stats()["transitions"] == before + 1
        assert r.episode_ids == ["ep1", "ep2"] and r.extracted == 1 and len(r.entry_ids) == 2
        (entry,) = mem.history("Website Redesign", "deadline")
        assert entry.value == "April 20" and entry.valid_at == said_at  # dated when it was said
        assert entry.provenance.ref == "ep1" and entry.provenance.source == "chat:4"
        assert entry.episode.text == "Website Redesign is due April 20." and entry.episode.speaker == "Ana"
        assert mem.explain("Website Redesign", "deadline").entries[0].episode.id == "ep1"
        assert mem.history("Website Redesign", "owner")[0].episode is None
        assert mem.audit(full=True).ok


@pytest.mark.parametrize("extractor, problem", [
    (lambda e: "Website Redesign is due", "list of gem.Fact"),
    (lambda e: [{"topic": "X"}], "not a gem.Fact"),
    (lambda e: None, "list of gem.Fact"),
])
def test_an_extractor_returning_something_else_is_refused_and_nothing_is_written(db_path, clock, extractor,
                                                                                problem):
    with gem.open(db_path, clock=clock, engine=ENGINE, extractor=extractor) as mem:
        mem.ingest(gem.Fact("Website Redesign", "owner", "Ana"))
        before = snapshot(mem)
        with pytest.raises(gem.InvalidInput, match=problem):
            mem.ingest([gem.Fact("Lunch", "place", "Deli"), gem.Episode("hello", source="chat:1")])
        assert snapshot(mem) == before


def test_bad_episodes_and_bad_ingest_arguments_are_refused_and_nothing_is_written(mem, clock):
    mem.ingest(gem.Episode("first", source="chat:1", at=T0))
    before = snapshot(mem)
    aware = datetime(2026, 1, 1, tzinfo=timezone.utc)
    for bad in [dict(text=""), dict(text="  \n"), dict(text=7), dict(text=None),
                dict(text="x", at=datetime(2026, 1, 1)),               # naive: any zone
                dict(text="x", at=datetime(9999, 12, 31, tzinfo=timezone.utc)),  # a typo
                dict(text="x", at=datetime(1850, 1, 1, tzinfo=timezone.utc)),
                dict(text="x", at="2026-01-01"), dict(text="x", source=""),
                dict(text="x", speaker=""), dict(text="x", at=aware, mood="happy")]:
        with pytest.raises(gem.InvalidInput):
            mem.ingest(gem.Episode(**bad))
    for bad_batch in ["just a string", 5, [gem.Episode("ok"), "text"], []]:
        with pytest.raises(gem.InvalidInput):
            mem.ingest(bad_batch)
    assert snapshot(mem) == before
    with pytest.raises(gem.InvalidInput):
        gem.open(extractor="not callable")


def test_a_rejected_transition_with_episodes_leaves_nothing_behind(tmp_path, clock):
    policy = tmp_path / "no-secrets.policy"
    policy.write_text('POLICY no-secrets\nON episode_recorded\nWHEN "password" IN episode.text\n'
                      'DO reject("episodes must not hold passwords")\n')
    with gem.open(memory_location(tmp_path), clock=clock, engine=ENGINE, policies=[policy]) as mem:
        mem.ingest(gem.Episode("the launch moved to April", source="chat:1"))
        before = snapshot(mem)
        with pytest.raises(gem.TransitionRejected, match="passwords"):
            mem.ingest([gem.Episode("my password is hunter2", source="chat:2"),
                        gem.Fact("Launch", "date", "April 20")])
        assert snapshot(mem) == before
        r = mem.ingest(gem.Episode("no secrets here", source="chat:3"))
        assert r.episode_ids == ["ep2"]  # the rejected one used no id


def test_episodes_survive_reopen_and_a_hidden_one_stays_searchable(tmp_path, clock):
    path = memory_location(tmp_path)
    with gem.open(path, clock=clock, engine=ENGINE) as mem:
        mem.ingest([gem.Episode("The kickoff is in the red room", source="chat:1",
                                at=T0 - timedelta(hours=2)),
                    gem.Episode("Parking is behind building C", source="chat:2", at=T0)])
        clock.advance(days=100)  # 0.39 * 2^(-100/30) < 0.05: compressed, then hidden
        mem.forget()
        assert mem.stats()["episodes"] == {"hidden": 2}
    with gem.open(path, clock=clock, engine=ENGINE) as mem:
        assert derived_disagreements(mem) == [] and cache_disagreements(mem) == []
        r = mem.retrieve("where is the kickoff, the red room?")
        assert [(e.source, e.recalled) for e in r.episodes] == [("chat:1", "hidden")]
        assert mem.stats()["episodes"] == {"active": 1, "hidden": 1}
        assert mem.audit(full=True).ok


def test_a_database_made_with_the_v1_embedder_opens_with_it_by_default(tmp_path, clock):
    path = memory_location(tmp_path)
    with gem.open(path, clock=clock, engine=ENGINE, embedder=gem.HashingEmbedder(256, version=1)) as mem:
        mem.ingest(gem.Fact("Website Redesign", "deadline", "April 20"))
    with gem.open(path, clock=clock, engine=ENGINE) as mem:
        assert mem._engine.services.embedder.name == "hashing-256-v1"
        assert mem.retrieve("website redesign deadline").value("Website Redesign", "deadline") == "April 20"
    with pytest.raises(gem.InvalidInput, match="hashing-256-v1"):
        gem.open(path, clock=clock, engine=ENGINE, embedder=gem.HashingEmbedder(256))
    with gem.open(memory_location(tmp_path, "new"), clock=clock, engine=ENGINE) as mem:
        assert mem._engine.services.embedder.name == "hashing-256-v2"


@pytest.mark.skipif(ENGINE != "kuzu", reason="the guide's example opens the default engine")
def test_the_guide_episode_example_runs_as_written():
    import re
    from pathlib import Path
    guide = (Path(__file__).resolve().parents[1] / "docs" / "guides" / "episodes.md").read_text(encoding="utf-8")
    (block,) = [b for b in re.findall(r"```python\n(.*?)```", guide, re.S) if "def deadlines(episode)" in b]
    exec(compile(block, "docs/guides/episodes.md", "exec"), {"gem": gem})


def test_between_needs_a_text_query_and_aware_times(mem, clock):
    mem.ingest(gem.Episode("the budget review went well", source="chat:1", at=T0))
    before = snapshot(mem)
    window = (T0 - timedelta(days=1), T0 + timedelta(days=1))
    for kwargs in [dict(between=window), dict(topic="Budget", query="budget", between=window),
                   dict(query="budget", between=(datetime(2026, 3, 1), T0)),
                   dict(query="budget", between=(T0,)), dict(query="budget", between="2026"),
                   dict(query="budget", between=(T0, T0 - timedelta(seconds=1))),
                   dict(query="budget", k=True), dict(query="budget", k=10_000),
                   dict(query="budget", fields=[""])]:
        with pytest.raises(gem.InvalidInput):
            mem.retrieve(**kwargs)
    assert snapshot(mem) == before
    r = mem.retrieve("budget review", between=window)
    assert [e.source for e in r.episodes] == ["chat:1"] and r.between == window


class _Text(str):
    """A str subclass: not a str as written, so refused like any other type."""


@pytest.mark.parametrize("kwargs", [
    dict(at="2026-03-01T08:00:00+00:00"),      # ISO text: the boundary parses it, not the model
    dict(at=1767225600), dict(at=1767225600.0), dict(at=True),   # an epoch is not a time
    dict(source=_Text("chat:1")), dict(source=7), dict(speaker=_Text("Ana")), dict(speaker=1),
    dict(actor=_Text("me")),
])
def test_an_episode_is_validated_like_a_fact_and_nothing_is_coerced(kwargs):
    fact_kwargs = {k: v for k, v in kwargs.items() if k != "speaker"}
    with pytest.raises(gem.InvalidInput):
        gem.Episode("the launch moved to April", **kwargs)
    if fact_kwargs:
        with pytest.raises(gem.InvalidInput):
            gem.Fact("Launch", "date", "April", **fact_kwargs)
    with pytest.raises(gem.InvalidInput):
        gem.Episode(_Text("the launch moved to April"))


def test_an_episode_keeps_its_text_as_said_and_its_time_in_utc():
    said = datetime(2026, 3, 1, 9, 0, tzinfo=timezone(timedelta(hours=1)))
    episode = gem.Episode("  the launch moved to April\n", at=said, speaker=" Ana ")
    assert episode.text == "  the launch moved to April\n" and episode.speaker == "Ana"
    assert episode.at == said and episode.at.tzinfo == timezone.utc
    assert gem.Fact("Launch", "date", "April", at=said).at == episode.at


@pytest.mark.parametrize("with_extractor", [False, True])
def test_a_future_dated_episode_is_refused_with_or_without_an_extractor(db_path, clock, with_extractor):
    extractor = extract_deadlines if with_extractor else None
    with gem.open(db_path, clock=clock, engine=ENGINE, extractor=extractor) as mem:
        mem.ingest(gem.Episode("first", source="chat:1", at=T0 - timedelta(hours=1)))
        before = snapshot(mem)
        for said in [T0 + timedelta(seconds=1), T0 + timedelta(days=30)]:
            with pytest.raises(gem.InvalidInput, match=r"facts\[1\]\.at .*after the memory's clock"):
                mem.ingest([gem.Fact("Launch", "owner", "Ana"),
                            gem.Episode("Website Redesign is due April 20.", at=said, source="chat:2")])
            assert snapshot(mem) == before
        r = mem.ingest(gem.Episode("Website Redesign is due April 20.", at=T0, source="chat:2"))
        assert r.episode_ids == ["ep2"] and r.extracted == (1 if with_extractor else 0)


def test_an_episode_ingested_again_is_the_same_episode_and_stores_nothing_new(db_path, clock):
    said = T0 - timedelta(hours=1)

    def turn(text="Website Redesign is due April 20.", **kwargs):
        return gem.Episode(text, **{"at": said, "source": "chat:4", "speaker": "Ana", **kwargs})

    with gem.open(db_path, clock=clock, engine=ENGINE, extractor=extract_deadlines) as mem:
        first = mem.ingest([turn(), turn()])                       # twice in one batch
        assert (first.episode_ids, first.known_episode_ids, first.extracted) == (["ep1"], ["ep1"], 1)
        clock.advance(hours=1)
        again = mem.ingest([turn(), gem.Fact("Website Redesign", "owner", "Ana")])
        assert (again.episode_ids, again.known_episode_ids, again.extracted) == ([], ["ep1"], 0)
        assert again.corroborations == 0 and len(again.entry_ids) == 1   # only the new fact
        (entry,) = mem.history("Website Redesign", "deadline")
        assert entry.observations == [] and entry.provenance.ref == "ep1"
        # any difference in what was said, by whom, where or when is another episode
        other = mem.ingest([turn(speaker="Bob"), turn(source="chat:5"), turn(text="Lunch at noon"),
                            turn(at=said + timedelta(seconds=1)), turn(speaker=None)])
        assert other.episode_ids == ["ep2", "ep3", "ep4", "ep5", "ep6"] and other.known_episode_ids == []
        # per scope: another tenant's identical episode is its own
        assert mem.scope("acme").ingest(turn()).episode_ids == ["acme:ep1"]
        assert mem.episodes().matching == 6
        assert mem.audit(full=True).ok
    with gem.open(db_path, clock=clock, engine=ENGINE) as mem:
        assert mem.ingest(turn()).known_episode_ids == ["ep1"]           # after reopen too
        mem.erase("Website Redesign", reason="ticket 25")            # erased: ep1 goes
        assert mem.ingest(turn()).episode_ids == ["ep7"]                 # said again, it is new


@pytest.mark.parametrize("at", [1767225600, 1767225600.5, "1767225600", "yesterday", True])
def test_the_wire_reads_a_time_only_from_iso_text(mem, at):
    from pydantic import ValidationError
    from gem.api import ops, schemas
    for body in ({"episodes": [{"text": "the launch moved", "at": at}]},
                 {"facts": [{"topic": "Launch", "field": "date", "value": "May", "at": at}]}):
        with pytest.raises(ValidationError, match="at"):
            schemas.IngestRequest.model_validate(body)
    said = schemas.IngestRequest.model_validate(
        {"episodes": [{"text": "the launch moved", "at": "2026-03-01T08:00:00Z"}],
         "facts": [{"topic": "Launch", "field": "date", "value": "May", "at": "2026-03-01T09:00:00+01:00"}]})
    r = ops.remember(mem, list(said.facts), episodes=said.episodes)
    assert (r.episode_ids, len(r.new_values)) == (["ep1"], 1)
    assert mem.episodes().episodes[0].at == datetime(2026, 3, 1, 8, tzinfo=timezone.utc)
    naive = schemas.IngestRequest.model_validate({"episodes": [{"text": "x", "at": "2026-03-01T08:00:00"}]})
    with pytest.raises(gem.InvalidInput, match="timezone-aware"):
        ops.remember(mem, [], episodes=naive.episodes)
