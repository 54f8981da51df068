"""Every result model of gem.model goes through JSON and comes back equal."""
from __future__ import annotations

import json
from datetime import timedelta

import pydantic

import gem
from gem import model


def _results(mem, clock) -> list[pydantic.BaseModel]:
    t0 = clock()
    out: list[pydantic.BaseModel] = [
        mem.ingest([gem.Fact("Website Redesign", "deadline", "March 15", source="chat:1", at=t0),
                    gem.Fact("Launch Milestones", "plan", {"steps": [1, 2.5, None], "ok": True}),
                    gem.Fact("Budget", "amount", 1200.75, ref="doc:7", confidence=0.4)])]
    mem.link("Website Redesign", "Launch Milestones", kind="extension")
    clock.advance(minutes=1)
    out.append(mem.ingest(gem.Fact("website-redesign", "deadline", "April 20", source="chat:2",
                                   labels=["schedule"])))   # resolved by its canonical key
    out += mem.pending_revisions()                          # Launch Milestones, flagged
    out.append(mem.ingest(gem.Fact("Website Redesign", "deadline", "April 20", source="chat:3",
                                   polarity="-")))
    # two sources, one valid time, weak evidence: a contested field with candidates
    out.append(mem.ingest([gem.Fact("Vendor", "name", "Acme", source="a", at=t0, confidence=0.1),
                           gem.Fact("Vendor", "name", "Apex", source="b", at=t0, confidence=0.1)]))
    out.append(mem.retrieve("deadline of the website redesign", history=True))
    out.append(mem.retrieve(topic="Vendor", as_of=t0 + timedelta(hours=1)))
    episode = gem.Episode("We agreed the redesign ships on April 20", at=t0, speaker="Ana",
                          source="chat:9")
    out.append(episode)
    out.append(mem.ingest([episode]))
    said = out[-1].episode_ids[0]  # a fact cites it, a newer one replaces that: it is stale
    mem.ingest(gem.Fact("Website Redesign", "ships", "April 20", ref=said, at=t0))
    mem.ingest(gem.Fact("Website Redesign", "ships", "May 4"))
    out.append(mem.retrieve("when does the redesign ship", between=(t0, t0 + timedelta(days=1)),
                            fields="all"))
    out += [mem.inspect("Launch Milestones"), mem.inspect("Vendor", "name"),
            mem.explain("Website Redesign", "deadline"), mem.audit()]
    out += mem.history("Website Redesign", "deadline")
    out += [mem.topics(), mem.graph("Website Redesign", depth=2),
            mem.salience_history("Website Redesign"), mem.episodes()]
    out.append(gem.Fact("Topic", "field", ["a", 1], at=t0, source="s", polarity="-"))
    # places: on an entry, an episode, and a near= retrieval's distances
    out.append(mem.ingest([gem.Fact("Office", "wifi", "fast", place=(38.72, -9.14, "Lisbon")),
                           gem.Episode("Lunch by the river", at=t0, place=(38.7, -9.13))]))
    out.append(mem.retrieve(near=(38.72, -9.14, 10), history=True))
    assert out[-1].near and out[-1].episodes[0].place and out[-1].topics[0].fields["wifi"].place
    clock.advance(days=400)  # everything fades: the ladder history has something to show
    mem.forget()
    out.append(mem.salience_history("Budget"))
    assert out[-1].units[0].ladder
    receipt = mem.erase("Budget", reason="test")
    out += [receipt, mem.verify_erasure(receipt)]
    # a clean store has no violations to show: build the report a broken one gives
    out.append(gem.AuditReport(ok=False, checked={"C3": 1}, transitions=4, chain_ok=True,
                               violations=[model.Violation(condition="C3", unit="t2", detail="x")]))
    out.append(gem.DroppedFact(fact=1, topic="Account", field="password", reason="no secrets",
                               policy="no-passwords"))
    return out


def _walk(value):
    if isinstance(value, pydantic.BaseModel):
        yield value
        for name in type(value).model_fields:
            yield from _walk(getattr(value, name))
    elif isinstance(value, (list, tuple)):
        for v in value:
            yield from _walk(v)
    elif isinstance(value, dict):
        for v in value.values():
            yield from _walk(v)


def test_every_result_model_round_trips(mem, clock):
    results = _results(mem, clock)
    seen = set()
    for result in results:
        for obj in _walk(result):
            text = json.dumps(obj.model_dump(mode="json"))
            back = type(obj).model_validate_json(text)
            assert back == obj, type(obj).__name__
            assert back.model_dump(mode="json") == json.loads(text)
            seen.add(type(obj))
    declared = {v for v in vars(model).values()
                if isinstance(v, type) and issubclass(v, pydantic.BaseModel) and v is not pydantic.BaseModel}
    assert declared <= seen, f"not exercised: {sorted(c.__name__ for c in declared - seen)}"
    assert any(f.contested and f.candidates for r in results if isinstance(r, gem.RetrieveResult)
               for t in r.topics for f in t.fields.values())
