"""`gem serve` through real HTTP requests: every route, every error mapping, the body
limit, the endpoint file, waiting out a lock, SIGTERM during a call."""
from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import threading
from html.parser import HTMLParser
from urllib.parse import urljoin

import httpx
import pytest

import gem
from gem.server.endpoint import endpoint_file, read_endpoint
from conftest import ENGINE
from servers import HANG, client, get, post, start, stop, wait_for

ID = re.compile(r'"[teg]\d+(/[^"]*)?"')  # an internal id as a whole JSON string


@pytest.fixture
def served(tmp_path):
    path = str(tmp_path / "served.db")
    server = start(path, "--create", "--engine", ENGINE, "--max-body", "4096")
    yield server
    stop(server)


@pytest.fixture(scope="module")
def served_once(tmp_path_factory):
    """The same server, started once for the tests that only read what any server answers
    (docs, schema, error shapes, HEAD): none of them changes the memory or depends on it."""
    path = str(tmp_path_factory.mktemp("served") / "served.db")
    server = start(path, "--create", "--engine", ENGINE, "--max-body", "4096")
    yield server
    stop(server)


def test_every_route(served):
    with client(served.url + "/v1") as c:
        health = c.get("/health").json()
        assert health["status"] == "ok" and health["pid"] == served.process.pid
        r = c.post("/ingest", json={"facts": [
            {"topic": "Website Redesign", "field": "deadline", "value": "March 15", "source": "chat:1"},
            {"topic": "Launch Milestones", "field": "launch", "value": "March 20"}]})
        assert r.status_code == 200 and r.json()["created_topics"] == ["Website Redesign", "Launch Milestones"]
        r = c.post("/link", json={"from_topic": "Website Redesign", "to_topic": "Launch Milestones"})
        assert r.json() == {"created": True, "from_topic": "Website Redesign",
                            "to_topic": "Launch Milestones", "kind": "extension"}
        r = c.post("/ingest", json={"facts": [{"topic": "website redesign", "field": "deadline",
                                               "value": "April 20"}], "actor": "test"})
        assert r.json()["flagged"] == ["Launch Milestones"] and r.json()["flagged_ids"] == ["t2"]
        r = c.post("/retrieve", json={"query": "deadline of the website redesign", "k": 2})
        top = r.json()["topics"][0]
        assert top["title"] == "Website Redesign" and top["fields"]["deadline"]["value"] == "April 20"
        r = c.get("/topic", params={"topic": "Launch Milestones"})
        assert r.json()["needs_review"][0]["because_of"] == "Website Redesign"
        r = c.post("/retrieve", json={"topic": "Launch Milestones", "format": "text"})
        assert r.headers["content-type"].startswith("text/plain")
        assert r.text.startswith("Launch Milestones [stale: needs review, Website Redesign "
                                 "changed]:\n- launch: March 20 (")
        r = c.post("/retrieve", json={"topic": "Launch Milestones", "format": "text",
                                      "max_tokens": 24})  # the title line, not its field
        assert r.text.splitlines()[1:] == ["… 1 more"], r.text
        r = c.get("/topic", params={"topic": "Website Redesign", "field": "deadline"})
        assert list(r.json()["fields"]) == ["deadline"]
        r = c.get("/history", params={"topic": "Website Redesign", "field": "deadline"})
        assert [e["superseded_by"] for e in r.json()["entries"]] == [2, None]
        r = c.get("/explain", params={"topic": "Website Redesign", "field": "deadline"})
        assert r.json()["value"] == "April 20"
        assert [f["topic"] for f in c.get("/review").json()["flags"]] == ["Launch Milestones"]
        dry = c.post("/maintain", json={"dry_run": True}).json()
        assert dry["dry_run"] and dry["revise"]["flags_open"] == ["Launch Milestones"]
        assert c.get("/review").json()["flags"]  # still open: the dry run changed nothing
        done = c.post("/maintain", json={}).json()
        assert not done["dry_run"] and done["forget"]["transition"] > 0
        assert c.post("/restore", json={"topic": "Launch Milestones"}).json()["changed"] is False
        audit = c.get("/audit").json()
        assert audit["ok"] and audit["chain_ok"]
        stats = c.get("/stats").json()
        assert stats["topics"] == {"active": 2} and stats["entries"] == 3
        log = c.get("/log", params={"since": 1, "limit": 3}).json()
        assert [r["op"] for r in log["records"]] == ["ingest", "link", "ingest"] and log["next_since"] == 4
        assert "Website Redesign / deadline" in log["records"][2]["units"]
        assert "propagate-on-change" in c.get("/policies").json()["names"]
        status = c.get("/status").json()
        assert status["audit"]["ok"] and status["engine"] == ENGINE
        r = c.post("/retract", json={"topic": "Launch Milestones", "field": "launch",
                                     "reason": "never agreed"})
        assert r.json() == {"changed": True, "topic": "Launch Milestones", "field": "launch",
                            "reason": "never agreed"}
        r = c.post("/erase", json={"topic": "Launch Milestones", "reason": "user request"})
        erased = r.json()
        assert r.status_code == 200 and erased["topic"] == "Launch Milestones", r.text
        assert erased["topic_erased"] and erased["entries_erased"] == 2 and erased["salt"]  # value, retraction
        assert c.get("/topic", params={"topic": "Launch Milestones"}).status_code == 404
        r = c.post("/erase", json={"topic": "Launch Milestones", "reason": "again"})
        assert r.status_code == 404 and r.json()["error"] == "unknown_unit"
        r = c.post("/erase", json={"topic": "Website Redesign", "reason": " "})
        assert r.status_code == 422 and r.json()["error"] == "invalid_input"
        everything = json.dumps([health, top, log, status, dry, done, audit,
                                 {k: v for k, v in erased.items() if not k.endswith("_ids")}])
        assert not ID.search(everything), ID.search(everything)
    spec = get(served.url + "/openapi.json").json()
    assert {"/v1/ingest", "/v1/retrieve", "/v1/topic", "/v1/history", "/v1/explain", "/v1/link",
            "/v1/restore", "/v1/maintain", "/v1/audit", "/v1/stats", "/v1/log",
            "/v1/health", "/v1/erase", "/v1/retract"} <= set(spec["paths"])
    assert get(served.url + "/docs").status_code == 200


@pytest.mark.slow
def test_episodes_and_time_windows_over_http(served):
    with client(served.url + "/v1") as c:
        r = c.post("/ingest", json={
            "facts": [{"topic": "Kitchen Renovation", "field": "budget", "value": "12k euros",
                       "at": "2026-01-05T10:00:00+00:00", "source": "chat:1"}],
            "episodes": [{"text": "We picked the oak cabinets for the kitchen renovation",
                          "speaker": "Ann", "at": "2026-01-05T10:01:00+00:00", "source": "chat:1"},
                         {"text": "The plumber comes on Tuesday", "speaker": "Bo",
                          "at": "2026-03-02T09:00:00+00:00", "source": "chat:2"}]})
        assert r.status_code == 200, r.text
        assert (len(r.json()["episodes"]), r.json()["new_values"]) == (2, ["Kitchen Renovation / budget"])
        found = c.post("/retrieve", json={"query": "oak cabinets kitchen", "k": 5}).json()
        assert found["episodes"][0]["text"].startswith("We picked the oak cabinets")
        assert found["episodes"][0]["speaker"] == "Ann"
        march = c.post("/retrieve", json={"query": "plumber oak cabinets", "k": 5, "between": [
            "2026-03-01T00:00:00+00:00", "2026-03-31T00:00:00+00:00"]}).json()
        assert [e["text"] for e in march["episodes"]] == ["The plumber comes on Tuesday"]
        whole = c.post("/retrieve", json={"query": "budget", "fields": "all"}).json()
        assert whole["topics"][0]["fields"]["budget"]["value"] == "12k euros"
        r = c.post("/retrieve", json={"query": "x", "between": ["2026-03-31T00:00:00+00:00",
                                                                 "2026-03-01T00:00:00+00:00"]})
        assert r.status_code == 422
        r = c.post("/ingest", json={"episodes": [{"text": "  "}]})
        assert r.status_code == 422 and r.json()["error"] == "invalid_input"
        assert c.get("/stats").json()["entries"] == 1
        r = c.post("/ingest", json={"facts": [{"topic": "Depot", "field": "gate", "value": "3",
                                               "place": {"lat": 41.1579, "lon": -8.6291,
                                                         "name": "Porto depot"}}]})
        assert r.status_code == 200, r.text
        near = c.post("/retrieve", json={"near": [41.16, -8.63, 5]}).json()
        assert near["topics"][0]["fields"]["gate"]["place"]["name"] == "Porto depot"
        assert near["topics"][0]["fields"]["gate"]["distance_km"] < 1
        r = c.post("/retrieve", json={"near": [41.16, -8.63, 0]})
        assert r.status_code == 422 and "near: km" in r.text


def test_errors_are_mapped(served):
    with client(served.url + "/v1") as c:
        r = c.post("/ingest", json={"facts": []})  # the request schema refuses it
        assert r.status_code == 422 and r.json()["error"] == "invalid_input"
        r = c.post("/ingest", json={"facts": [{"topic": "A", "field": "x", "value": None}]})
        assert r.status_code == 422 and "must not be null" in r.json()["message"]  # gem refuses it
        r = c.post("/retrieve", json={})
        assert r.status_code == 422 and "give a query, a topic" in r.json()["message"]
        r = c.post("/ingest", content=b"{not json", headers={"content-type": "application/json"})
        assert r.status_code == 422
        r = c.get("/history", params={"topic": "Nope", "field": "x"})
        assert r.status_code == 404 and r.json() == {
            "error": "unknown_unit", "message": "no topic named 'Nope'", "condition": None,
            "unit": None, "detail": None}
        assert c.get("/topic", params={"topic": "Nope"}).status_code == 404
        assert c.post("/link", json={"from_topic": "A", "to_topic": "B"}).status_code == 404
        assert c.post("/restore", json={"topic": "Nope"}).status_code == 404
        r = c.post("/ingest", json={"facts": [{"topic": "A", "field": "x", "value": "y" * 5000}]})
        assert r.status_code == 413 and r.json()["error"] == "payload_too_large"
        chunks = (b'{"facts": [{"topic": "A", "field": "x", "value": "' + b"y" * 1000 + b'"}' for _ in range(5))
        r = c.post("/ingest", content=chunks, headers={"content-type": "application/json"})
        assert r.status_code == 413  # chunked, no Content-Length: counted while read
        assert c.get("/stats").json()["entries"] == 0


@pytest.mark.slow
def test_a_rejected_transition_is_409_with_condition_and_unit(tmp_path):
    policy = tmp_path / "tight.policy"
    policy.write_text("SET active_bound = 1\n")
    path = str(tmp_path / "tight.db")
    server = start(path, "--create", "--engine", ENGINE, "--policies", str(policy))
    try:
        with client(server.url + "/v1") as c:
            assert c.post("/ingest", json={"facts": [{"topic": "A", "field": "x", "value": 1}]}).status_code == 200
            r = c.post("/ingest", json={"facts": [{"topic": "C", "field": "z", "value": 3},
                                                  {"topic": "C", "field": "w", "value": 4}]})
            assert r.status_code == 409
            body = r.json()
            assert body["error"] == "transition_rejected" and body["condition"] == "C5"
            assert "unit" in body and body["detail"]  # C5 is a bound on the whole: no unit
            assert body["message"].startswith("C5") and not ID.search(json.dumps(body))
            assert c.get("/stats").json()["entries"] == 1
    finally:
        stop(server)


@pytest.mark.slow
def test_waits_for_a_locked_database_answering_503(tmp_path):
    path = str(tmp_path / "locked.db")
    holder = gem.open(path, engine=ENGINE)  # this process holds the database
    server = None
    try:
        server = start(path, "--engine", ENGINE, "--lock-timeout", str(HANG), ready=False)
        # Until its first try to open meets the lock, the server is "starting" (not_ready):
        # wait for the state that makes the answer store_locked.
        wait_for(lambda: get(server.url + "/v1/health").json()["status"] == "waiting_for_lock",
                 what="the server to meet the lock")
        r = get(server.url + "/v1/stats")
        assert r.status_code == 503 and r.json()["error"] == "store_locked"
        assert r.headers["retry-after"] == "1"
        assert get(server.url + "/v1/health").json()["status"] == "waiting_for_lock"
        holder.close()
        wait_for(lambda: get(server.url + "/v1/health").status_code == 200, what="the lock")
        assert get(server.url + "/v1/stats").status_code == 200
    finally:
        holder.close()
        if server:
            stop(server)


@pytest.mark.slow
def test_one_server_per_database_and_stale_endpoint_files(tmp_path):
    path = str(tmp_path / "one.db")
    gem.open(path, engine=ENGINE).close()
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    endpoint_file(path).write_text(json.dumps({
        "pid": dead.pid, "host": "127.0.0.1", "port": 1, "path": path, "engine": ENGINE,
        "started_at": "2020-01-01T00:00:00+00:00", "version": "0"}))
    assert read_endpoint(path) is None  # its process is gone: ignored
    server = start(path, "--engine", ENGINE)
    try:
        assert read_endpoint(path).pid == server.process.pid  # and replaced
        second = subprocess.run([sys.executable, "-m", "gem", "serve", path, "--port", "0",
                                 "--engine", ENGINE], capture_output=True, text=True, timeout=HANG)
        assert second.returncode == 3
        assert f"already served by pid {server.process.pid}" in second.stderr
        cli = subprocess.run([sys.executable, "-m", "gem", "stats", path, "--engine", ENGINE],
                             capture_output=True, text=True, timeout=HANG)
        assert cli.returncode == 1 and f"served by `gem serve` (pid {server.process.pid})" in cli.stderr
    finally:
        stop(server)


@pytest.mark.slow
def test_sigterm_lets_the_running_call_finish_and_closes_cleanly(tmp_path):
    path = str(tmp_path / "term.db")
    server = start(path, "--create", "--engine", ENGINE, "--max-body", str(64 << 20),
                   "--maintain-every", "3600")
    facts = [{"topic": f"Topic {i}", "field": "value", "value": i} for i in range(1500)]
    answer: dict = {}

    def ingest() -> None:
        answer["response"] = post(server.url + "/v1/ingest", json={"facts": facts})
    try:
        wait_for(lambda: get(server.url + "/v1/status").json()["maintenance"]["runs"] >= 1,
                 what="the first scheduled maintenance run")
        caller = threading.Thread(target=ingest)
        caller.start()
        wait_for(lambda: get(server.url + "/v1/health").json()["busy"] == "ingest",
                 what="the ingest to run")
        os.kill(server.process.pid, signal.SIGTERM)
        caller.join(timeout=HANG)
        assert answer["response"].status_code == 200
        assert server.process.wait(timeout=HANG) == 0
        assert not endpoint_file(path).exists()
    finally:
        stop(server)
    with gem.open(path, engine=ENGINE, create=False) as mem:
        assert mem.stats()["entries"] == len(answer["response"].json()["new_values"]) == 1500
        assert mem.audit().ok


class _Links(HTMLParser):
    """Every src/href/action attribute of a page."""

    def __init__(self) -> None:
        super().__init__()
        self.found: list[str] = []

    def handle_starttag(self, tag, attrs):
        self.found += [v for k, v in attrs if k in ("src", "href", "action") and v]


@pytest.mark.slow
def test_the_api_docs_and_everything_they_reference_are_served_by_the_server_itself(served_once):
    r = get(served_once.url + "/docs")
    assert r.status_code == 200 and r.headers["content-type"].startswith("text/html")
    links = _Links()
    links.feed(r.text)
    assert links.found, "the docs page links its schema"
    for link in links.found:
        target = urljoin(served_once.url + "/docs", link)
        assert target.startswith(served_once.url + "/") or link.startswith("#"), link
        if not link.startswith("#"):
            assert get(target).status_code == 200, link
    assert "<script" not in r.text.lower()  # nothing to fetch or run: the page is the schema
    for route in ("/v1/ingest", "/v1/retrieve", "/v1/health", "ErrorBody", "transition_rejected"):
        assert route in r.text, route
    assert get(served_once.url + "/redoc").status_code == 404  # the CDN page is gone too


@pytest.mark.slow
def test_openapi_declares_the_error_shape_for_each_status_a_route_can_answer(served_once):
    spec = get(served_once.url + "/openapi.json").json()
    error = "#/components/schemas/ErrorBody"
    assert {"error", "message", "condition", "unit", "detail"} <= set(
        spec["components"]["schemas"]["ErrorBody"]["properties"])

    def declared(path: str, method: str) -> dict[str, str]:
        responses = spec["paths"][path][method]["responses"]
        return {code: r["content"]["application/json"]["schema"].get("$ref", "")
                for code, r in responses.items() if code != "200"}

    transitions = {"ingest", "retrieve", "link", "restore", "maintain", "erase", "retract"}
    for path, methods in spec["paths"].items():
        for method in methods:
            if path == "/v1/health":
                continue
            codes = declared(path, method)
            assert codes.get("503") == error, (path, codes)
            if method == "post":
                assert codes.get("413") == error and codes.get("422") == error, (path, codes)
            if path.rsplit("/", 1)[-1] in transitions:
                assert codes.get("409") == error, (path, codes)
    for path in ("/v1/topic", "/v1/history", "/v1/explain", "/v1/link", "/v1/restore",
                 "/v1/retrieve", "/v1/erase", "/v1/retract"):
        method = "get" if path in ("/v1/topic", "/v1/history", "/v1/explain") else "post"
        assert declared(path, method).get("404") == error, path
        assert declared(path, method).get("422") == error, path
    assert "404" not in declared("/v1/stats", "get")


@pytest.mark.slow
def test_an_unknown_route_or_a_wrong_method_answers_in_the_error_shape(served_once):
    shape = {"error", "message", "condition", "unit", "detail"}
    r = get(served_once.url + "/v1/nope")
    assert r.status_code == 404 and set(r.json()) == shape and r.json()["error"] == "not_found"
    assert "/v1/nope" in r.json()["message"]
    assert post(served_once.url + "/nothing/here", json={}).json()["error"] == "not_found"
    r = get(served_once.url + "/v1/ingest")
    assert r.status_code == 405 and set(r.json()) == shape
    assert r.json()["error"] == "method_not_allowed" and r.headers["allow"] == "POST"
    r = httpx.delete(served_once.url + "/v1/stats", timeout=HANG)
    assert r.status_code == 405 and set(r.headers["allow"].split(", ")) == {"GET", "HEAD"}


@pytest.mark.slow
def test_head_answers_every_get_route_like_get_without_a_body(served_once):
    for path in ("/", "/v1/health", "/v1/stats", "/v1/status", "/docs", "/openapi.json",
                 "/policies"):
        full = get(served_once.url + path)
        head = httpx.head(served_once.url + path, timeout=HANG)
        assert head.status_code == full.status_code == 200, path
        assert head.content == b"" and head.headers["content-type"] == full.headers["content-type"]
    nope = httpx.head(served_once.url + "/v1/topic", params={"topic": "Nope"}, timeout=HANG)
    assert nope.status_code == 404
    assert httpx.head(served_once.url + "/v1/nope", timeout=HANG).status_code == 404


def _no_path_in(text: str, folder: str, where: str) -> None:
    for form in {folder, os.path.realpath(folder)}:
        assert form not in text, f"{where} shows {form}"


def _every_answer(url: str, headers: dict[str, str]) -> dict[str, str]:
    """The text of every read route, API and dashboard, plus an error page and an error body."""
    with client(url, headers=headers) as c:
        r = c.post("/v1/ingest", json={"facts": [{"topic": "Plans", "field": "due", "value": "May"}]})
        assert r.status_code == 200, r.text
        answers = {}
        for path in ("/v1/health", "/v1/status", "/v1/stats", "/v1/audit", "/v1/log",
                     "/v1/policies", "/v1/topic?topic=Plans", "/v1/topic?topic=Nope", "/",
                     "/topic?topic=Plans", "/graph?topic=Plans", "/log", "/episodes",
                     "/policies", "/audit", "/reports", "/topic?topic=Nope", "/nowhere",
                     "/docs", "/openapi.json"):
            answers[path] = c.get(path).text
        return answers


@pytest.mark.slow
def test_no_absolute_path_reaches_a_client_without_keys(served, tmp_path):
    answers = _every_answer(served.url, {})
    for where, text in answers.items():
        _no_path_in(text, str(tmp_path), where)
    # a local admin sees which database this is: its file name
    assert json.loads(answers["/v1/status"])["path"] == "served.db"
    assert json.loads(answers["/v1/health"])["path"] == "served.db"
    assert "served.db" in answers["/"]


@pytest.mark.slow
def test_no_path_at_all_reaches_a_tenant(tmp_path):
    keys = tmp_path / "keys.json"
    key = "tenant-key-0123456789"
    keys.write_text(json.dumps({key: "acme", "operator-key-0123456789": "*"}))
    server = start(str(tmp_path / "tenants.db"), "--create", "--engine", ENGINE, "--keys",
                   str(keys), "--reports", str(tmp_path))
    try:
        answers = _every_answer(server.url, {"Authorization": f"Bearer {key}"})
        answers["no key"] = get(server.url + "/v1/health").text
        for where, text in answers.items():
            _no_path_in(text, str(tmp_path), where)
            assert "tenants.db" not in text, where
        assert json.loads(answers["/v1/status"])["path"] is None
    finally:
        stop(server)
