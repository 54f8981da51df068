"""A recall as a compact block for a prompt (gem.api.prompt): one formatter behind MCP
`memory_recall(format="text")`, HTTP `/v1/retrieve` `"format": "text"` and `gem query --prompt`;
cut to a token budget by rank, with marks for what a model must not take at face value."""
from __future__ import annotations

from datetime import datetime, timedelta, timezone

import pytest

import gem
from gem.api import ops, prompt
from gem.api import schemas as s
from conftest import ENGINE
from test_cli import gem_here

T = datetime(2026, 3, 2, 9, 0, tzinfo=timezone.utc)


@pytest.fixture
def mem(tmp_path):
    with gem.open(str(tmp_path / "prompt.db"), engine=ENGINE) as m:
        yield m


def _recall(mem, **kw) -> s.RecallResult:
    return ops.recall(mem, s.RetrieveRequest(**kw))


def test_the_block_shows_values_dates_sources_and_marks(mem):
    mem.ingest([gem.Fact("Website Redesign", "deadline", "March 15", at=T, source="chat:1"),
                gem.Fact("Launch Milestones", "launch", "March 20", at=T, source="chat:1"),
                gem.Fact("Launch Milestones", "venue", "harbour", at=T, source="chat:1"),
                gem.Episode("Ann said the launch party is at the harbour", speaker="Ann",
                            at=T + timedelta(days=1), source="msg:9")])
    mem.link("Website Redesign", "Launch Milestones")
    mem.ingest([gem.Fact("Website Redesign", "deadline", "April 20", at=T + timedelta(days=3),
                         source="chat:2")])  # flags Launch Milestones
    mem.retract("Launch Milestones", "venue", "the venue was never booked")
    block = prompt.render(_recall(mem, query="launch venue harbour", fields="all", k=10))
    assert "Launch Milestones [stale: needs review, Website Redesign changed]:" in block
    assert "- launch: March 20 (2026-03-02, source chat:1)" in block
    assert "- venue: none [retracted: the venue was never booked]" in block
    assert "Ann, 2026-03-03: Ann said the launch party is at the harbour" in block
    assert "t1" not in block and "ep" not in block.split("Ann said")[0]
    block = prompt.render(_recall(mem, topic="Website Redesign"))
    assert block.startswith("Website Redesign:\n- deadline: April 20 (2026-03-05, source chat:2)")


def _said(source: str) -> gem.Provenance:
    return gem.Provenance(source=source, actor="agent", confidence=1.0, polarity="+")


def test_contested_and_recalled_are_marked():
    field = s.FieldCard(name="owner", value="Ann", valid_at=T, status="active", salience=0.5,
                        contested=True, provenance=_said("crm"),
                        candidates=[
                            s.CandidateCard(value="Ann", provenance=_said("crm"),
                                            valid_at=T, reliability=0.2, current=True),
                            s.CandidateCard(value="Bo", provenance=_said("mail"),
                                            valid_at=T, reliability=0.1)])
    topic = s.TopicCard(title="Account", summary="", status="active", salience=0.5,
                        fields={"owner": field})
    said = s.EpisodeCard(text="hello", at=T, speaker=None, source="x", recalled="hidden")
    block = prompt.render(s.RecallResult(transition=1, topics=[topic], episodes=[said]))
    assert block == ("Account:\n- owner: Ann (2026-03-02, source crm) [contested with Bo]\n"
                     "someone, 2026-03-02: hello [recalled from hidden]\n")


def test_the_budget_keeps_whole_lines_in_rank_order(mem):
    mem.ingest([gem.Fact(f"Project {n}", "status", f"phase {n} of the rollout plan", at=T,
                         source=f"chat:{n}") for n in range(12)])
    result = _recall(mem, query="rollout plan phase status", k=12)
    full = prompt.render(result, max_tokens=100_000)
    lines = full.splitlines()
    assert len(lines) == 2 * len(result.topics) and "more" not in full
    titles = [t.title for t in result.topics]
    assert [line[:-1] for line in lines[::2]] == titles  # rank order kept
    for budget in (16, 40, 75, 120):
        cut = prompt.render(result, max_tokens=budget)
        assert sum(prompt.tokens(line) for line in cut.splitlines()) <= budget
        kept = cut.splitlines()[:-1]
        assert kept == lines[:len(kept)]  # a prefix of whole lines, best first
        assert cut.splitlines()[-1] == f"… {len(lines) - len(kept)} more"
    assert prompt.render(s.RecallResult(transition=1, topics=[])) == "Nothing in memory matches.\n"


def test_every_surface_gives_the_same_block(tmp_path):
    path = str(tmp_path / "cli.db")
    with gem.open(path, engine=ENGINE) as m:
        m.ingest([gem.Fact("Kitchen", "budget", "12k", at=T, source="chat:1")])
        expected = prompt.render(_recall(m, topic="Kitchen"), 800)
    e = ("--engine", ENGINE)
    assert gem_here("query", path, "--topic", "Kitchen", "--prompt", *e).stdout == expected
    cut = gem_here("query", path, "--topic", "Kitchen", "--prompt", "--max-tokens", "16", *e)
    assert cut.stdout == expected  # two short lines fit in 16 tokens
    refused = gem_here("query", path, "--topic", "Kitchen", "--prompt", "--json", *e, ok=False)
    assert refused.returncode == 1 and "exclude each other" in refused.stderr
