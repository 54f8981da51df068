"""What a user or a model reads names topics by title ("Title / field"), episodes by who said
what when: internal ids ("acme:t2", "e5", "ep1") appear only alongside, in fields named
`id`, `ids` or `*_id(s)` that tooling may use."""
from __future__ import annotations

import io
import json
import re
import httpx
import pytest

import gem
from conftest import ENGINE
from gem.cli.demo import demo
from servers import start, stop
from test_cli import gem_here

KEY = "acme-key-0123456789abcdef"
SCOPED = re.compile(r"\bacme:(?:t|e|ep|o|g)\d+")
# An unscoped id as a word of its own ("t2", "t2/preferences", "e5", "ep1").
BARE = re.compile(r"(?<![\w:#.-])(?:t|e|ep)\d+(?![\w.])")


def _id_key(key: str) -> bool:
    return key in ("id", "ids") or key.endswith(("_id", "_ids"))


def leaks(data, pattern: re.Pattern = SCOPED, where: str = "") -> list[str]:
    """Every string inside `data` (a JSON value) that holds an id, outside id fields."""
    if isinstance(data, dict):
        return [x for k, v in data.items() if not _id_key(str(k))
                for x in leaks(v, pattern, f"{where}.{k}")]
    if isinstance(data, list):
        return [x for i, v in enumerate(data) for x in leaks(v, pattern, f"{where}[{i}]")]
    if isinstance(data, str):
        return [f"{where}: ...{data[max(m.start() - 60, 0):m.end() + 20]!r}"
                for m in pattern.finditer(data)]
    return []


def page_text(html: str) -> str:
    """What a reader of an HTML page sees (not its links' targets; an id shown alongside,
    marked as one, is fine)."""
    html = re.sub(r'<code class="id">[^<]*</code>', " ", html)
    html = re.sub(r"<(style|script)\b.*?</\1>", " ", html, flags=re.S)
    return re.sub(r"<[^>]*>", " ", html)


@pytest.fixture(scope="module")
def keyed(tmp_path_factory):
    folder = tmp_path_factory.mktemp("titles")
    keys = folder / "keys.json"
    keys.write_text(json.dumps({KEY: "acme"}))
    server = start(str(folder / "titles.db"), "--create", "--engine", ENGINE, "--keys", str(keys))
    yield server
    stop(server)


def test_a_keyed_server_names_topics_by_title_in_every_response(keyed):
    bodies: dict[str, object] = {}
    with httpx.Client(base_url=keyed.url, headers={"Authorization": f"Bearer {KEY}"},
                      timeout=120) as c:
        def call(method: str, url: str, **kw) -> object:
            r = c.request(method, url, **kw)
            assert r.status_code == 200, (url, r.text)
            bodies[f"{method} {url} {kw}"] = r.json()
            return r.json()
        call("POST", "/v1/ingest", json={"facts": [
            {"topic": "Website Redesign", "field": "deadline", "value": "March 15"},
            {"topic": "Launch Milestones", "field": "launch", "value": "March 20"}],
            "episodes": [{"text": "Let's ship the redesign by March 15", "speaker": "Ana"}]})
        call("POST", "/v1/link", json={"from_topic": "Website Redesign", "to_topic": "Launch Milestones"})
        update = call("POST", "/v1/ingest", json={"facts": [
            {"topic": "Website Redesign", "field": "deadline", "value": "April 20"}]})
        assert update["flagged"] == ["Launch Milestones"] and update["flagged_ids"] == ["acme:t2"]
        assert update["new_values"] == ["Website Redesign / deadline"]
        call("POST", "/v1/retrieve", json={"query": "deadline redesign ship", "history": True})
        call("GET", "/v1/topic", params={"topic": "Launch Milestones"})
        call("GET", "/v1/history", params={"topic": "Website Redesign", "field": "deadline"})
        call("GET", "/v1/explain", params={"topic": "Website Redesign", "field": "deadline"})
        call("GET", "/v1/review")
        log = call("GET", "/v1/log")
        assert any("Website Redesign / deadline" in r["units"] for r in log["records"])
        call("GET", "/v1/stats")
        call("GET", "/v1/status")
        call("GET", "/v1/audit")
        call("POST", "/v1/maintain", json={"dry_run": False})
        for url, params in [("/", {}), ("/topic", {"topic": "Website Redesign"}), ("/log", {}),
                            ("/episodes", {}), ("/graph", {"topic": "Website Redesign"}),
                            ("/audit", {})]:
            r = c.get(url, params=params)
            assert r.status_code == 200, (url, r.text)
            bodies[f"page {url}"] = page_text(r.text)
    found = [leak for name, body in bodies.items() for leak in leaks(body, where=name)]
    assert not found, found


def test_python_results_name_topics_by_title_with_ids_alongside(mem, clock):
    acme = mem.scope("acme")
    acme.ingest([gem.Fact("Website Redesign", "deadline", "March 15"),
                 gem.Fact("Launch Milestones", "launch", "March 20"),
                 gem.Episode("Ship it by March 15", speaker="Ana")])
    acme.link("Website Redesign", "Launch Milestones")
    clock.advance(minutes=5)
    r = acme.ingest(gem.Fact("website redesign", "deadline", "April 20"))
    assert r.topics == ["Website Redesign", "Launch Milestones"]
    assert r.topic_ids == ["acme:t1", "acme:t2"]
    assert r.flagged == ["Launch Milestones"] and r.flagged_ids == ["acme:t2"]
    assert r.new_values == ["Website Redesign / deadline"] and len(r.entry_ids) == 1
    first = acme.ingest(gem.Episode("We should also fix the footer", speaker="Bo"))
    assert first.episode_ids == ["acme:ep2"]
    assert first.episodes[0].startswith("Bo, ") and "We should also fix the footer" in first.episodes[0]
    assert not leaks(r.model_dump(mode="json")) and not leaks(first.model_dump(mode="json"))
    (pending,) = acme.pending_revisions()
    assert (pending.title, pending.topic_id) == ("Launch Milestones", "acme:t2")
    assert pending.flags[0].origin == "Website Redesign" and pending.flags[0].origin_id == "acme:t1"
    assert not leaks(pending.model_dump(mode="json"))
    assert not leaks(acme.inspect("Launch Milestones").model_dump(mode="json"))
    explained = acme.explain("website redesign", "deadline")
    assert (explained.topic, explained.topic_id) == ("Website Redesign", "acme:t1")
    report = acme.maintain()
    assert report["revise"]["flags_open"] == ["Launch Milestones"]
    assert report["revise"]["flags_open_ids"] == ["acme:t2"]
    assert not leaks(json.loads(json.dumps(report)))


def test_the_demo_tells_its_story_in_titles():
    out = io.StringIO()
    assert demo(out, engine=ENGINE) == 0
    told = out.getvalue()
    assert not BARE.search(told), BARE.findall(told)
    assert "Lunch / preferences" in told


def test_gem_log_and_maintain_name_units_by_title(tmp_path, clock):
    path = str(tmp_path / "cli.db")
    with gem.open(path, engine=ENGINE, clock=clock) as m:
        m.ingest([gem.Fact("Website Redesign", "deadline", "March 15"),
                  gem.Fact("Lunch", "preferences", "sushi"),
                  gem.Episode("Ship it by March 15", speaker="Ana")])
    e = ("--engine", ENGINE)
    logged = gem_here("log", path, *e).stdout
    assert "Website Redesign / deadline" in logged and not BARE.search(logged), logged
    logged_json = json.loads(gem_here("log", path, "--json", *e).stdout)
    assert not leaks(logged_json, BARE)
    maintained = gem_here("maintain", path, "--json", *e).stdout
    assert not leaks(json.loads(maintained), BARE)
    assert not BARE.search(gem_here("maintain", path, *e).stdout)
