"""One result shape: what `mem.ingest` returns is what POST /v1/ingest and memory_remember
send (its model_dump), and every dict a Memory method returns is plain JSON."""
from __future__ import annotations

import json
from datetime import datetime

import gem
from gem.api import ops
from gem.api import schemas as s


def _story(mem, clock) -> gem.IngestResult:
    mem.ingest([gem.Fact("Website Redesign", "deadline", "March 15"),
                gem.Fact("Launch Milestones", "launch", "March 20")])
    mem.link("Website Redesign", "Launch Milestones")
    clock.advance(days=1)
    return mem.ingest([gem.Fact("Website Redesign", "deadline", "April 20"),
                       gem.Episode("The deadline moved to April 20", speaker="Ana")])


def test_remember_is_the_ingest_result_itself(mem, clock):
    _story(mem, clock)
    clock.advance(minutes=1)
    r = ops.remember(mem, [s.FactIn(topic="Website Redesign", field="deadline", value="May 2")],
                     episodes=[s.EpisodeIn(text="Now it is May 2", speaker="Bo")])
    assert s.RememberResult is gem.IngestResult and isinstance(r, gem.IngestResult)
    body = r.model_dump(mode="json")
    assert body["flagged"] == ["Launch Milestones"] and body["flagged_ids"] == ["t2"]
    assert body["new_values"] == ["Website Redesign / deadline"] and body["entry_ids"]
    assert body["episodes"][0].startswith("Bo, ") and body["episode_ids"] == ["ep2"]
    assert gem.IngestResult.model_validate(body) == r   # the wire form reads back as itself


def test_a_dropped_fact_is_reported_by_the_same_name_everywhere(tmp_path, clock):
    policy = tmp_path / "no-secrets.policy"
    policy.write_text('POLICY no-secrets ON field_created OR recorded WHEN "secret" IN entry.labels\n'
                      'DO drop(entry, "secrets are not stored")\n')
    with gem.open(tmp_path / "db", policies=[str(policy)], clock=clock) as m:
        r = ops.remember(m, [s.FactIn(topic="Bob", field="password", value="x", labels=["secret"]),
                             s.FactIn(topic="Bob", field="role", value="dev")])
        assert r.dropped[0].reason == "secrets are not stored"
        assert r.model_dump(mode="json")["dropped"][0]["topic"] == "Bob"
        assert r.new_values == ["Bob / role"]


def test_every_dict_a_memory_returns_is_plain_json(mem, clock):
    _story(mem, clock)
    clock.advance(days=90)
    reports = {"transitions": mem.transitions(), "recent": mem.recent_transitions(5),
               "recent heads": mem.recent_transitions(5, details=False), "stats": mem.stats(),
               "forget": mem.forget(), "revise": mem.revise(), "maintain": mem.maintain(),
               "head": mem.head()}
    for name, report in reports.items():
        json.dumps(report)  # raises TypeError on a datetime, a set, a model
    log = mem.transitions()
    assert all(datetime.fromisoformat(r["at"]).utcoffset() is not None for r in log)
    wire = ops.log(mem).records   # /v1/log and `gem log` show the same times
    assert [w.at for w in wire] == [datetime.fromisoformat(r["at"]) for r in log[:len(wire)]]
    assert [r["at"] for r in mem.recent_transitions(3)] == [r["at"] for r in log[::-1][:3]]


def test_maintain_reports_the_same_names_in_python_and_on_the_wire(mem, clock):
    _story(mem, clock)
    clock.advance(days=120)
    python = mem.maintain()
    assert python["revise"]["flags_open"] == ["Launch Milestones"]
    assert python["forget"]["attenuated"] and all(" / " in u or "Ana" in u or u in
                                                  ("Website Redesign", "Launch Milestones")
                                                  for u in python["forget"]["attenuated"])
    wire = ops.maintain(mem)
    assert wire.revise.flags_open == mem.maintain()["revise"]["flags_open"] == ["Launch Milestones"]
