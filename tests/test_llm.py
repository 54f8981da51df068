"""gem.llm against a real HTTP server speaking the chat-completions protocol, answering from
recorded fixtures (tests/llm_server.py, tests/fixtures/llm/): extraction with the turns
before an episode, revision, the resolver's model tier, summaries, refused answers, retries,
the cache, token usage in the log and stats, and `gem serve --extractor-model` (also given
to the server `gem mcp` starts)."""
from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from datetime import datetime, timedelta, timezone

import httpx
import pytest
from mcp import Client, StdioServerParameters

import gem
from llm_server import FixtureServer
from servers import start, stop

MODEL = "test-model"
NOW = datetime(2026, 3, 2, 12, 0, tzinfo=timezone.utc)
SAID = datetime(2026, 3, 2, 9, 0, tzinfo=timezone.utc)
FAST = {"backoff": 0.001, "max_wait": 0.01}   # no real waiting in tests


@pytest.fixture
def llm():
    server = FixtureServer()
    try:
        yield server
    finally:
        server.stop()
    assert server.unknown == [], ("requests with no fixture (record them with GEM_LLM_RECORD=1): "
                                  f"{server.unknown}")


def memory(**hooks):
    return gem.open(clock=lambda: NOW, **hooks)


def dog_story(mem):
    mem.ingest(gem.Episode("My dog is called Rex.", at=SAID, speaker="Ana", source="chat:1"))
    return mem.ingest(gem.Episode("Sorry, not Rex, Rocco.", at=SAID + timedelta(minutes=1),
                                  speaker="Ana", source="chat:2"))


def test_the_extractor_reads_the_turn_before_and_a_correction_updates_the_field(llm):
    extractor = gem.llm.Extractor(MODEL, llm.url, api_key="sk-test", **FAST)
    with memory(extractor=extractor) as mem:
        second = dog_story(mem)
        assert second.extracted == 1 and second.created_topics == []
        assert mem.inspect("Dog", "name").value == "Rocco"
        rex, rocco = mem.history("Dog", "name")
        assert (rex.value, rex.status, rocco.value) == ("Rex", "superseded", "Rocco")
        assert rocco.provenance.actor == f"llm:{MODEL}" and rocco.provenance.source == "chat:2"
        assert rocco.episode.text == "Sorry, not Rex, Rocco."
    # what the model was shown the second time: the turn before, and the dog's topic
    asked = json.loads(llm.requests[1]["messages"][1]["content"])
    assert [t["text"] for t in asked["previous_turns"]] == ["My dog is called Rex."]
    assert asked["known_topics"] == [{"title": "Dog", "fields": {"name": "Rex"}}]
    assert llm.requests[0]["response_format"]["type"] == "json_schema"
    assert llm.authorizations == ["Bearer sk-test"] * 2


def test_the_api_key_comes_from_the_environment_by_default(llm, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-from-env")
    gem.llm.Extractor(MODEL, llm.url, **FAST)(gem.Episode("My dog is called Rex.", at=SAID,
                                                          speaker="Ana"))
    monkeypatch.delenv("OPENAI_API_KEY")
    gem.llm.Extractor(MODEL, llm.url, **FAST)(gem.Episode("My dog is called Rex.", at=SAID,
                                                          speaker="Ana"))
    assert llm.authorizations == ["Bearer sk-from-env", None]   # none sent without a key


def test_an_extractor_that_takes_context_sees_facts_extracted_earlier_in_the_batch():
    seen = []

    def extractor(episode, context):
        seen.append(([e.text for e in context.previous], [(k.title, k.values) for k in context.topics]))
        return [gem.Fact("Dog", "name", episode.text.split()[-1].rstrip("."))]
    extractor.takes_context = True
    with memory(extractor=extractor) as mem:
        week_ago = SAID - timedelta(days=7)
        mem.ingest([gem.Episode("My dog is Rex.", at=week_ago),
                    gem.Episode("Now he is Rocco.", at=week_ago + timedelta(minutes=2)),
                    gem.Episode("A week later: Bruno.", at=SAID)])
        assert mem.inspect("Dog", "name").value == "Bruno"
    assert seen[0] == ([], [])
    assert seen[1] == (["My dog is Rex."], [("Dog", {"name": "Rex"})])
    assert seen[2][0] == []                       # a week later: another conversation


def test_the_reviser_updates_a_flagged_topic(llm):
    reviser = gem.llm.Reviser(MODEL, llm.url, **FAST)
    with memory(reviser=reviser) as mem:
        mem.ingest([gem.Fact("Website Redesign", "deadline", "March 15", at=SAID),
                    gem.Fact("Launch Milestones", "launch", "March 20", at=SAID)])
        mem.link("Website Redesign", "Launch Milestones", kind="extension")
        mem.ingest(gem.Fact("Website Redesign", "deadline", "April 20", at=SAID))
        report = mem.revise()
        assert [by for _, by in report["flags_cleared"]] == ["reviser"]
        field = mem.inspect("Launch Milestones", "launch")
        assert field.value == "April 27" and field.provenance.actor == f"llm:{MODEL}"
        assert mem.pending_revisions() == []
        record = [r for r in mem.transitions() if r["event"] == "dependency_repair"][-1]
        assert record["detail"]["llm"]["reviser"]["calls"] == 1
    assert llm.count("revision") == 1


def test_the_resolver_asks_the_model_only_when_the_tiers_are_unsure(llm):
    resolver = gem.llm.Resolver(MODEL, llm.url, **FAST)
    with memory(resolver=resolver) as mem:
        mem.ingest(gem.Fact("Website Redesign", "deadline", "April 20", at=SAID))
        mem.ingest(gem.Fact("website  redesign", "owner", "Ana", at=SAID))   # canonical key
        mem.ingest(gem.Fact("Lunch menu", "friday", "deli", at=SAID))        # nothing similar
        assert llm.count("topic") == 0
        r = mem.ingest(gem.Fact("Website Redesign project", "budget", 5000, at=SAID))  # unsure
        assert llm.count("topic") == 1
        assert r.created_topics == [] and r.resolved[0].name == "Website Redesign project"
        assert mem.inspect("Website Redesign", "budget").value == 5000
        r = mem.ingest(gem.Fact("Website Redesign team", "size", 4, at=SAID))  # model: new
        assert llm.count("topic") == 2 and len(r.created_topics) == 1
        assert mem.inspect("Website Redesign team", "size").value == 4


def test_the_summarizer_writes_topic_summaries(llm):
    summarizer = gem.llm.Summarizer(MODEL, llm.url, **FAST)
    with memory(summarizer=summarizer) as mem:
        mem.ingest(gem.Fact("Website Redesign", "deadline", "April 20", at=SAID))
        assert llm.count("summary") == 0                  # summaries are derived lazily
        (topic,) = mem.retrieve("when is the website redesign due?").topics
        assert topic.summary == "The Website Redesign is due on April 20."
        assert mem.transitions()[-1]["detail"]["llm"]["summarizer"]["calls"] == 1
        assert mem.inspect("Website Redesign").summary == topic.summary
        assert llm.count("summary") == 1


@pytest.mark.parametrize("episode", ["Rex is 3 years old.", "Rex weighs 30 kg."])
def test_a_malformed_answer_is_refused_naming_the_model_and_nothing_is_written(llm, episode):
    extractor = gem.llm.Extractor(MODEL, llm.url, **FAST)
    with memory(extractor=extractor) as mem:
        before = mem.transitions()
        with pytest.raises(gem.InvalidInput, match=f"extractor model '{MODEL}' answered"):
            mem.ingest(gem.Episode(episode, at=SAID))
        assert mem.transitions() == before and mem.episodes().matching == 0
        # a refused answer is not cached: the model is asked again
        with pytest.raises(gem.InvalidInput):
            mem.ingest(gem.Episode(episode, at=SAID))
    assert llm.count() == 2


def test_a_429_is_retried_after_retry_after_then_the_answer_is_used(llm):
    extractor = gem.llm.Extractor(MODEL, llm.url, **FAST)
    llm.fail_next(429, retry_after="0")
    llm.fail_next(503)
    facts = extractor(gem.Episode("My dog is called Rex.", at=SAID, speaker="Ana", source="chat:1"))
    assert [(f.topic, f.field, f.value) for f in facts] == [("Dog", "name", "Rex")]
    assert llm.count() == 3


def test_the_wait_is_retry_after_capped_at_max_wait_else_exponential_backoff(llm, monkeypatch):
    import types
    from gem.llm import client
    waits = []
    monkeypatch.setattr(client, "time", types.SimpleNamespace(sleep=waits.append))
    extractor = gem.llm.Extractor(MODEL, llm.url, backoff=0.25, max_wait=5)
    llm.fail_next(429, retry_after="3")
    llm.fail_next(429, retry_after="120")
    llm.fail_next(502)
    llm.fail_next(503, retry_after="Wed, 21 Oct 2015 07:28:00 GMT")   # a date in the past
    extractor(gem.Episode("My dog is called Rex.", at=SAID, speaker="Ana"))
    assert waits == [3.0, 5.0, 1.0, 0.0] and llm.count() == 5


def test_retries_are_bounded_and_a_client_error_is_not_retried(llm):
    extractor = gem.llm.Extractor(MODEL, llm.url, retries=2, **FAST)
    llm.fail_next(500, times=3)
    with pytest.raises(gem.llm.LLMError, match="did not answer after 3 attempts: HTTP 500"):
        extractor(gem.Episode("My dog is called Rex.", at=SAID))
    assert llm.count() == 3
    llm.fail_next(401)
    with pytest.raises(gem.llm.LLMError, match="refused the request: HTTP 401"):
        extractor(gem.Episode("My dog is called Rex.", at=SAID))
    assert llm.count() == 4
    assert issubclass(gem.llm.LLMError, gem.GemError)


def test_an_answer_is_cached_in_memory_and_on_disk(llm, tmp_path):
    said = gem.Episode("My dog is called Rex.", at=SAID, speaker="Ana", source="chat:1")
    extractor = gem.llm.Extractor(MODEL, llm.url, cache_dir=tmp_path / "answers", **FAST)
    first = extractor(said)
    assert extractor(said) == first and llm.count() == 1
    again = gem.llm.Extractor(MODEL, llm.url, cache_dir=tmp_path / "answers", **FAST)
    assert again(said) == first and llm.count() == 1      # a new process: from the disk
    with memory(extractor=again) as mem:                  # a replay is charged as cached
        mem.ingest(said)
        assert mem.transitions()[-1]["detail"]["llm"]["extractor"] == {
            "model": MODEL, "calls": 0, "cached": 1, "prompt_tokens": 0, "completion_tokens": 0}
    assert llm.count() == 1


def test_token_usage_is_in_the_log_detail_and_in_stats(llm, tmp_path):
    path = str(tmp_path / "agent.db")
    extractor = gem.llm.Extractor(MODEL, llm.url, **FAST)
    with gem.open(path, clock=lambda: NOW, extractor=extractor) as mem:
        assert mem.stats()["llm"] == {}
        dog_story(mem)
        used = [r["detail"]["llm"]["extractor"] for r in mem.transitions() if r["op"] == "ingest"]
        assert used == [
            {"model": MODEL, "calls": 1, "cached": 0, "prompt_tokens": 180, "completion_tokens": 21},
            {"model": MODEL, "calls": 1, "cached": 0, "prompt_tokens": 240, "completion_tokens": 22}]
        mem.ingest(gem.Fact("Cat", "name", "Tom"))          # no model call: nothing recorded
        assert "llm" not in mem.transitions()[-1]["detail"]
        assert mem.stats()["llm"] == {"calls": 2, "cached": 0, "prompt_tokens": 420,
                                      "completion_tokens": 43}
    done = subprocess.run([sys.executable, "-m", "gem", "stats", path, "--json"],
                          capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["llm"]["prompt_tokens"] == 420


def test_gem_serve_wires_the_extractor_for_agents(llm, tmp_path):
    path = str(tmp_path / "agent.db")
    gem.open(path).close()
    served = start(path, "--extractor-model", MODEL, "--llm-base-url", llm.url)
    try:
        said = {"text": "My dog is called Rex.", "speaker": "Ana", "source": "chat:1",
                "at": SAID.isoformat()}
        answer = httpx.post(served.url + "/v1/ingest", json={"episodes": [said]}, timeout=60)
        assert answer.status_code == 200, answer.text
        assert answer.json()["extracted"] == 1
        field = httpx.get(served.url + "/v1/topic", params={"topic": "Dog", "field": "name"},
                          timeout=60).json()
        assert field["fields"]["name"]["value"] == "Rex"
        stats = httpx.get(served.url + "/v1/stats", timeout=60).json()
        assert stats["llm"]["calls"] == 1
        llm.fail_next(401)                       # the endpoint refuses: 502, nothing written
        said["text"] = "Rex is 3 years old."
        answer = httpx.post(served.url + "/v1/ingest", json={"episodes": [said]}, timeout=60)
        assert answer.status_code == 502 and answer.json()["error"] == "model_unavailable"
        assert httpx.get(served.url + "/v1/stats", timeout=60).json()["episodes"] == {"active": 1}
    finally:
        stop(served)
    assert llm.count() == 2


@pytest.mark.slow
def test_gem_mcp_starts_its_server_with_the_model_options(llm, tmp_path):
    """A desktop client's `gem mcp` starts the server itself: the model options it is given
    are the server's, so a remembered episode is extracted there."""
    from gem.server.endpoint import read_endpoint
    from servers import kill_group
    path = str(tmp_path / "agent.db")
    gem.open(path).close()
    params = StdioServerParameters(command=sys.executable, args=[
        "-m", "gem", "mcp", path, "--extractor-model", MODEL, "--llm-base-url", llm.url])
    said = {"text": "My dog is called Rex.", "speaker": "Ana", "source": "chat:1",
            "at": SAID.isoformat()}

    async def main():
        async with Client(params, cache=None) as c:
            remembered = await c.call_tool("memory_remember", {"episodes": [said]})
            assert not remembered.is_error, remembered.content
            found = await c.call_tool("memory_inspect", {"topic": "Dog", "field": "name"})
            return remembered.structured_content, found.structured_content
    try:
        remembered, found = asyncio.run(main())
    finally:
        endpoint = read_endpoint(path)  # the server the bridge started, if it got that far
        if endpoint is not None:
            kill_group(endpoint.pid)
    assert remembered["extracted"] == 1 and found["fields"]["name"]["value"] == "Rex"
    assert llm.count() == 1


@pytest.mark.slow
def test_gem_mcp_says_a_running_server_keeps_its_own_model_options(llm, tmp_path):
    from mcp.client.stdio import stdio_client
    path = str(tmp_path / "agent.db")
    served = start(path, "--create")
    said = tmp_path / "bridge.log"
    params = StdioServerParameters(command=sys.executable, args=[
        "-m", "gem", "mcp", path, "--extractor-model", MODEL, "--llm-base-url", llm.url])

    async def main():  # once the bridge answers, it has said everything it says on starting
        with open(said, "w") as err:
            async with Client(stdio_client(params, errlog=err), cache=None) as c:
                await c.list_tools()
    try:
        asyncio.run(main())
    finally:
        stop(served)
    assert (f"--extractor-model {MODEL} --llm-base-url {llm.url}: not applied: the server "
            f"already running for {path} keeps the options it was started with") in said.read_text()
    assert llm.count() == 0


def test_gem_mcp_refuses_a_model_without_an_endpoint_before_starting_a_server(tmp_path):
    path = str(tmp_path / "agent.db")
    gem.open(path).close()
    done = subprocess.run([sys.executable, "-m", "gem", "mcp", path, "--extractor-model", MODEL],
                          capture_output=True, text=True, stdin=subprocess.DEVNULL)
    assert done.returncode == 1 and "--extractor-model needs --llm-base-url" in done.stderr
    assert not os.path.exists(path + ".gem-serve.log")  # no server was started


def test_hooks_refuse_bad_settings():
    with pytest.raises(gem.InvalidInput, match="base_url"):
        gem.llm.Extractor(MODEL, "127.0.0.1:8080")
    with pytest.raises(gem.InvalidInput, match="timeout"):
        gem.llm.Summarizer(MODEL, "http://127.0.0.1:1/v1", timeout=0)
    with pytest.raises(gem.InvalidInput, match="model"):
        gem.llm.Reviser("", "http://127.0.0.1:1/v1")
    with pytest.raises(gem.InvalidInput, match="floor"):
        gem.llm.Resolver(MODEL, "http://127.0.0.1:1/v1", floor=2)
    assert "sk-" not in repr(gem.llm.Extractor(MODEL, "http://127.0.0.1:1/v1", api_key="sk-x").client)


def _guide_block() -> str:
    import re
    from pathlib import Path
    guide = Path(__file__).resolve().parents[1] / "docs" / "guides" / "llm-extraction.md"
    return re.findall(r"```python\n(.*?)```", guide.read_text(encoding="utf-8"), re.S)[0]


def test_the_guide_example_runs_against_an_endpoint_and_does_nothing_without_one(
        llm, monkeypatch, capsys):
    block = compile(_guide_block(), "docs/guides/llm-extraction.md", "exec")
    monkeypatch.delenv("GEM_LLM_BASE_URL", raising=False)
    exec(block, {})
    assert capsys.readouterr().out == "" and llm.count() == 0
    monkeypatch.setenv("GEM_LLM_BASE_URL", llm.url)
    monkeypatch.setenv("GEM_LLM_MODEL", MODEL)
    exec(block, {})
    used, dog = capsys.readouterr().out.splitlines()
    assert dog == "Dog Rocco" and "'prompt_tokens': 240" in used
    assert llm.count() == 2
