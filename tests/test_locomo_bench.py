"""bench/locomo.py runs end to end on one LoCoMo conversation (skipped without the data), and
its observation extractor feeds facts that cite their turns."""
from __future__ import annotations

import importlib.util
import sys
import tempfile
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest

import gem

BENCH = Path(__file__).resolve().parents[1] / "bench" / "locomo.py"


def _module():
    spec = importlib.util.spec_from_file_location("locomo_bench", BENCH)
    module = importlib.util.module_from_spec(spec)
    sys.modules["locomo_bench"] = module
    spec.loader.exec_module(module)
    return module


def test_locomo_bench_on_one_conversation():
    locomo = _module()
    if not locomo.DATA.is_file():
        pytest.skip(f"no LoCoMo data at {locomo.DATA}")
    lines: list[str] = []
    result = locomo.run(locomo.DATA, 1, "hashing", [5, 10], out=lines.append, questions=40)
    text = "\n".join(lines)
    for system in ("gem", "gem, no maintenance", "BM25", "dense hashing", "RRF BM25+hashing"):
        assert f"\n{system} " in text
        for k in (5, 10):
            any_k, all_k = result["recall"][system][k]
            assert 0.0 <= all_k <= any_k <= 1.0
    assert result["questions"] == 40
    for shown in ("ms/turn", "ms/q p95", "reverse order", "multi-hop (", "by evidence age",
                  ">90 d", "targets (issue 27)"):
        assert shown in text
    assert len(result["targets"]) == 4   # vs hybrid, maintenance, multi-hop, temporal
    # gem finds evidence at all: a broken ranking (or ingest) scores zero here
    assert result["recall"]["gem, no maintenance"][10][0] > 0.3


def test_a_slice_of_sessions_keeps_the_questions_it_can_answer():
    """--sessions N (the tiny run of tests/test_bench.py): the first N sessions, and only the
    questions whose evidence turns they hold."""
    locomo = _module()
    if not locomo.DATA.is_file():
        pytest.skip(f"no LoCoMo data at {locomo.DATA}")
    (whole,) = locomo.load(locomo.DATA, 1)
    (part,) = locomo.load(locomo.DATA, 1, sessions=2)
    assert part.sessions == whole.sessions[:2]
    said = {t.dia_id for t in part.turns}
    assert part.questions and all(set(locomo.evidence_ids(q["evidence"])) <= said
                                  for q in part.questions)
    assert [q for q in whole.questions if set(locomo.evidence_ids(q["evidence"])) <= said] \
        == part.questions


def test_observations_become_facts_that_retrieve_the_turns_they_cite():
    locomo = _module()
    start = datetime(2023, 5, 8, 13, 0, tzinfo=timezone.utc)
    turns = [locomo.Turn("D1:1", "Ana", "Hi! How was your week?", start),
             locomo.Turn("D1:2", "Ben", "Great, I adopted a greyhound called Biscuit.",
                         start + timedelta(seconds=1)),
             locomo.Turn("D1:3", "Ana", "Lovely! I started pottery lessons.",
                         start + timedelta(seconds=2))]
    conv = locomo.Conversation(
        "toy", [(start, turns)],
        [{"question": "What is the name of Ben's dog?", "evidence": ["D1:2"], "category": 4}],
        [("Ben", "Ben adopted a greyhound named Biscuit.", ["D1:2"]),
         ("Ana", "Ana takes pottery lessons.", ["D1:3", "D1:1"])])
    extractor = locomo.ObservationExtractor(conv)
    assert [f.value for f in extractor(gem.Episode("x", source="D1:2"))] == \
        ["Ben adopted a greyhound named Biscuit."]
    assert extractor(gem.Episode("x", source="D1:1")) == []   # cited, but second
    with tempfile.TemporaryDirectory() as work:
        db = str(Path(work) / "m.db")
        variant = locomo.Variant("hashing", maintain=False, observations=True)
        embedder = gem.HashingEmbedder(256)
        clock, sources, ex = locomo.ingest_conversation(conv, db, embedder, variant,
                                                        locomo.GemRun())
        assert sorted(sources.values()) == ["D1:1", "D1:2", "D1:3"]
        with gem.open(db, clock=clock, embedder=embedder) as mem:
            r = mem.retrieve("greyhound Biscuit", k=3)
            (ben,) = [t for t in r.topics if t.title == "Ben"]
            (fact,) = ben.fields.values()
            assert sources[fact.provenance.ref] == "D1:2"   # the fact cites its turn's episode
            r = mem.retrieve("pottery lessons", k=1)
            assert not r.episodes and locomo.ranked_turns(r, sources, ex) == ["D1:3", "D1:1"]


def test_locomo_bench_skips_cleanly_without_the_data(monkeypatch, capsys):
    locomo = _module()
    monkeypatch.setattr(locomo, "DATA", Path("/nonexistent/locomo-dev.json"))
    assert locomo.main([]) == 0
    assert "skipped" in capsys.readouterr().out
