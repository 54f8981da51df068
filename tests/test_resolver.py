"""The tiered host-topic resolver: exact, normalised, embedding similarity, new."""
from __future__ import annotations

import gem


def topic_count(mem):
    return sum(mem.stats()["topics"].values())


def test_exact_and_normalised_titles_resolve_to_one_topic(mem):
    mem.ingest(gem.Fact("Website Redesign", "deadline", "March 15"))
    for name in ["Website Redesign", "website redesign", "  WEBSITE-redesign! "]:
        mem.ingest(gem.Fact(name, "owner", "Alice"))
    assert topic_count(mem) == 1


def test_aliases_resolve(mem):
    mem.ingest(gem.Fact("Website Redesign", "deadline", "March 15"))
    tid = mem.inspect("Website Redesign").id
    mem._engine.run("revise", lambda t: t.update("Topic", tid, aliases=["WR-2026"]))
    mem.ingest(gem.Fact("WR-2026", "owner", "Alice"))
    assert topic_count(mem) == 1
    assert mem.inspect("WR-2026").title == "Website Redesign"


def test_similar_titles_resolve_by_embedding_unrelated_ones_do_not(db_path, clock):
    from conftest import ENGINE
    with gem.open(db_path, clock=clock, engine=ENGINE,
                  resolver=gem.TieredResolver(similarity_threshold=0.6)) as mem:
        mem.ingest(gem.Fact("Website Redesign Project", "deadline", "March 15"))
        mem.ingest(gem.Fact("Website Redesign Projects", "owner", "Alice"))
        assert topic_count(mem) == 1
        mem.ingest(gem.Fact("Lunch preferences", "food", "sushi"))
        assert topic_count(mem) == 2


def test_a_callers_resolver_decides(db_path, clock):
    from conftest import ENGINE

    class EverythingIsOneTopic:
        def resolve(self, name, topics):
            return topics.exact("Inbox")

    with gem.open(db_path, clock=clock, engine=ENGINE, resolver=EverythingIsOneTopic()) as mem:
        mem.ingest(gem.Fact("Inbox", "a", 1))
        mem.ingest(gem.Fact("Something else", "b", 2))
        assert topic_count(mem) == 1
        assert set(mem.inspect("Inbox").fields) == {"a", "b"}


def test_a_name_created_earlier_in_the_batch_hosts_the_later_names(db_path, clock):
    """Each name's exact match is looked up once per batch (Directory.settled); a topic the
    batch creates must still be found by the names after it."""
    from conftest import ENGINE

    class EverythingIsOneTopic:
        def resolve(self, name, topics):
            return topics.exact("Inbox")

    with gem.open(db_path, clock=clock, engine=ENGINE, resolver=EverythingIsOneTopic()) as mem:
        mem.ingest([gem.Fact("Inbox", "a", 1), gem.Fact("Something else", "b", 2)])
        assert topic_count(mem) == 1
        assert set(mem.inspect("Inbox").fields) == {"a", "b"}
