"""Tamper evidence: direct edits of a closed database file are found by the audit.

Each case copies one closed memory, edits the copy with raw queries (as someone with the file
would), reopens it and audits the whole state against a log head kept outside the database.
The first 20 edits are the ones an earlier audit missed (issue 12)."""
from __future__ import annotations

import os
import shutil

import pytest

import gem
from conftest import ENGINE
from gem.store import open_store


@pytest.fixture(scope="module")
def base(tmp_path_factory):
    """A closed memory with history, observations, an extension edge, a flag, policies, and
    salience written behind; and its head, kept outside the database."""
    from conftest import Clock
    folder = tmp_path_factory.mktemp("tamper")
    path = str(folder / "db")
    clock = Clock()
    with gem.open(path, clock=clock, engine=ENGINE) as mem:
        mem.ingest([gem.Fact("Website Redesign", "deadline", "March 15", source="chat:1"),
                    gem.Fact("Website Redesign", "owner", "Alice"),
                    gem.Fact("Launch Milestones", "launch", "March 20"),
                    gem.Fact("Lunch", "preferences", "sushi", labels=["pii"])])
        mem.link("Website Redesign", "Launch Milestones")
        clock.advance(days=1)
        mem.ingest(gem.Fact("Website Redesign", "deadline", "April 20", source="chat:2"))
        mem.ingest(gem.Fact("Website Redesign", "owner", "Alice", source="standup"))  # observation
        assert mem.retract("Lunch", "preferences", "never said")  # the retraction is e6
        mem.retrieve(topic="Website Redesign")
        head = mem.head()
        assert mem.audit(full=True, expected_head=head).ok
    return path, head


def copy_of(base_path: str, dest: str) -> str:
    folder, name = os.path.split(base_path)
    for entry in os.listdir(folder):
        if entry.startswith(name):
            src = os.path.join(folder, entry)
            (shutil.copytree if os.path.isdir(src) else shutil.copy2)(src, os.path.join(dest, entry))
    return os.path.join(dest, name)


# name -> (raw statements, the unit a violation must name, or None for a log violation)
EDITS = {
    "an entry's value": (["MATCH (e:Entry {id: 'e4'}) SET e.value = '\"May 1\"'"], "e4"),
    "a provenance source": (["MATCH (e:Entry {id: 'e4'}) SET e.source = 'forged'"], "e4"),
    # a null, or a column added later filled in, changes a row's shape (gem/rowhash.py)
    "an entry's value nulled": (["MATCH (e:Entry {id: 'e4'}) SET e.value = NULL"], "e4"),
    "a label added to an entry": (["MATCH (e:Entry {id: 'e2'}) SET e.labels = ['x']"], "e2"),
    "a confidence within [0, 1]": (["MATCH (e:Entry {id: 'e1'}) SET e.confidence = 0.5"], "e1"),
    "a valid time": (["MATCH (e:Entry {id: 'e4'}) SET e.valid_at = timestamp('2027-01-01 00:00:00')"], "e4"),
    "an observation changed": (["MATCH (o:Observation {id: 'o1'}) SET o.source = 'forged'"], "o1"),
    "an observation deleted": (["MATCH (o:Observation {id: 'o1'}) DETACH DELETE o"], "o1"),
    "a superseded entry deleted": (["MATCH (e:Entry {id: 'e1'}) DETACH DELETE e"], "e1"),
    "a whole field deleted": (["MATCH (f:Field {id: 't1/owner'})-[:HAS_ENTRY]->(e:Entry) "
                               "OPTIONAL MATCH (e)<-[:CORROBORATES]-(o:Observation) DETACH DELETE o, e",
                               "MATCH (f:Field {id: 't1/owner'}) DETACH DELETE f"], "t1/owner"),
    "a whole topic deleted": (["MATCH (t:Topic {id: 't3'})-[:HAS_FIELD]->(f:Field)-[:HAS_ENTRY]->(e:Entry) "
                               "DETACH DELETE e, f", "MATCH (t:Topic {id: 't3'}) DETACH DELETE t"], "t3"),
    "an extension edge deleted": (["MATCH (:Topic {id: 't1'})-[r:EXTENDS]->(:Topic {id: 't2'}) DELETE r"],
                                  "EXTENDS|t1|t2"),
    "an entry moved to another field": (["MATCH (:Field {id: 't1/owner'})-[r:HAS_ENTRY]->(:Entry {id: 'e2'}) "
                                         "DELETE r",
                                         "MATCH (f:Field {id: 't2/launch'}), (e:Entry {id: 'e2'}) "
                                         "CREATE (f)-[:HAS_ENTRY]->(e)"], "e2"),
    "a topic renamed": (["MATCH (t:Topic {id: 't1'}) SET t.title = 'Site Revamp'"], "t1"),
    "salience inflated": (["MATCH (f:Field {id: 't3/preferences'}) SET f.strength = 9.0"], "t3/preferences"),
    "a field hidden": (["MATCH (f:Field {id: 't1/deadline'}) SET f.status = 'hidden'"], "t1/deadline"),
    "a fabricated current entry": (
        ["MATCH (e:Entry {id: 'e3'}) SET e.status = 'superseded', e.superseded_by = 'x1', e.superseded_tx = 9",
         "MATCH (f:Field {id: 't2/launch'}) CREATE (f)-[:HAS_ENTRY]->(:Entry {id: 'x1', seq: 2, tx: 9, "
         "field_id: 't2/launch', origin_field: 't2/launch', value: '\"June 1\"', "
         "valid_at: timestamp('2026-03-04 00:00:00'), asserted_at: timestamp('2026-03-04 00:00:00'), "
         "recorded_at: timestamp('2026-03-04 00:00:00'), source: 'x', actor: 'x', confidence: 1.0, "
         "polarity: '+', status: 'current', active: true, annotations: '{}'})"], "x1"),
    "a log record edited, chain recomputed": ("rechain", None),
    "the last log record deleted": (["MATCH (x:Transition) WITH max(x.seq) AS m "
                                     "MATCH (y:Transition {seq: m}) DELETE y"], None),
    "a log record edited": (["MATCH (x:Transition {seq: 3}) SET x.actor = 'mallory'"], None),
    "a label removed": (["MATCH (f:Field {id: 't3/preferences'}) SET f.labels = []"], "t3/preferences"),
    "a retraction's reason edited": (["MATCH (e:Entry {id: 'e6'}) SET e.reason = 'forged'"], "e6"),
    "a flag cleared by hand": (["MATCH (g:Flag {id: 'g1'}) SET g.status = 'cleared', "
                                "g.cleared_by = 'reviser'"], "g1"),
    "a stored policy source edited": (["MATCH (p:Policy {name: 'reinforce-on-retrieval'}) "
                                       "SET p.source = 'POLICY reinforce-on-retrieval ON retrieved DO "
                                       "reinforce(field, 0.01)'"], "Policy|reinforce-on-retrieval"),
    "the policy files edited": (lambda tx: tx.run(
        "MATCH (m:Meta {key: 'policy_sources'}) SET m.value = $v",
        {"v": tx.scalar("MATCH (m:Meta {key: 'policy_sources'}) RETURN m.value")
            .replace("half_life = 30d", "half_life = 300d")}), "Meta|policy_sources"),
}

REWRITE_THE_HEAD = {"a log record edited, chain recomputed", "the last log record deleted"}


def rechain(path: str) -> None:
    """Edit record 3's actor and recompute every hash after it, as a careful forger would."""
    from gem.audit import decode
    from gem.pipeline import chain_hash
    store = open_store(path, ENGINE)
    with store.transaction() as tx:
        rows = [r for r in tx.run("MATCH (x:Transition) RETURN x ORDER BY x.seq")]
        records = [decode(dict(r[0])) for r in rows]
        previous = records[0]["prev_hash"]
        for record in records:
            if record["seq"] == 3:
                record["actor"] = "mallory"
            body = {"seq": record["seq"], "scope": record["scope"], "op": record["op"],
                    "event": record["event"], "at": record["at"].isoformat(),
                    "actor": record["actor"], "counters": record["counters"],
                    "tombstone": record["tombstone"], "commit": record["commit"]}
            digest = chain_hash(previous, body)
            tx.run("MATCH (x:Transition {seq: $s}) SET x.actor = $a, x.prev_hash = $p, x.hash = $h",
                   {"s": record["seq"], "a": record["actor"], "p": previous, "h": digest})
            previous = digest
    store.close()


@pytest.mark.parametrize("edit", sorted(EDITS))
def test_every_direct_edit_is_found(base, tmp_path, edit):
    base_path, head = base
    path = copy_of(base_path, str(tmp_path))
    statements, unit = EDITS[edit]
    if statements == "rechain":
        rechain(path)
    else:
        store = open_store(path, ENGINE)
        with store.transaction() as tx:
            if callable(statements):
                statements(tx)
            else:
                for statement in statements:
                    tx.run(statement)
        store.close()
    if edit in REWRITE_THE_HEAD:
        # The head acknowledged to the owner (<db>.gem-head) is no longer the log's: the open
        # fails; accepted, the audit against a head kept elsewhere still finds the edit.
        with pytest.raises(gem.LostCommits):
            gem.open(path, engine=ENGINE)
    with gem.open(path, engine=ENGINE, accept_head=edit in REWRITE_THE_HEAD) as mem:
        report = mem.audit(full=True, expected_head=head)
    assert not report.ok, edit
    named = {v.unit for v in report.violations}
    if unit is not None:
        assert unit in named, (edit, report.violations)
    else:
        assert any(v.condition == "log" for v in report.violations), (edit, report.violations)


@pytest.mark.parametrize("edit", ["the whole log deleted", "the id counters lowered"])
def test_a_database_whose_log_cannot_be_its_history_refuses_to_open(base, tmp_path, edit):
    base_path, _ = base
    path = copy_of(base_path, str(tmp_path))
    store = open_store(path, ENGINE)
    with store.transaction() as tx:
        if edit == "the whole log deleted":
            tx.run("MATCH (x:Transition) DELETE x")
        else:
            tx.run("MATCH (x:Transition) SET x.counters = '{\"entry\": 1, \"flag\": 0, "
                   "\"interactions\": 1, \"observation\": 0, \"topic\": 1}'")
    store.close()
    with pytest.raises(gem.GemError, match="log"):
        gem.open(path, engine=ENGINE)


def test_an_untouched_copy_audits_clean(base, tmp_path):
    base_path, head = base
    path = copy_of(base_path, str(tmp_path))
    with gem.open(path, engine=ENGINE) as mem:
        assert mem.audit(full=True, expected_head=head).ok


def test_columns_added_later_leave_the_hash_of_older_rows_as_it_was():
    """A database made before labels, a retraction's reason and who cleared a flag existed
    reads them back empty once they are added (gem/store/queries/log.py add_missing_columns): its
    rows must still match what its log attested."""
    from gem.attest import row_hash
    entry = {"id": "e1", "value": '"x"', "source": "s"}
    assert row_hash("Entry", {**entry, "labels": [], "reason": None}) == row_hash("Entry", entry)
    assert row_hash("Entry", {**entry, "labels": ["pii"]}) != row_hash("Entry", entry)
    assert row_hash("Entry", {**entry, "reason": "wrong"}) != row_hash("Entry", entry)
    flag = {"id": "g1", "status": "open"}
    assert row_hash("Flag", {**flag, "cleared_by": None}) == row_hash("Flag", flag)
    assert row_hash("Flag", {**flag, "cleared_by": "reviser"}) != row_hash("Flag", flag)
    episode = {"id": "ep1", "text": "said"}
    assert row_hash("Episode", {**episode, "cited_by": [], "contradicted_by": None}) == \
        row_hash("Episode", episode)
    assert row_hash("Episode", {**episode, "cited_by": ["e1"]}) != row_hash("Episode", episode)
    assert row_hash("Episode", {**episode, "contradicted_by": "ep2"}) != row_hash("Episode", episode)


def test_a_record_commits_to_the_canonical_text_of_its_parts():
    """The log stage hashes the parts' stored texts (attest.commitment_of_texts) instead of
    encoding the parts a second time: the commitment must be the hash of the canonical text
    of the whole {part: value} record, as the audit recomputes it from the parsed parts."""
    import hashlib
    from datetime import datetime, timezone
    from gem import attest
    from gem.units import dumps
    parts = {"units": ["t1", "acme:t2/déadline"], "detail": {"attenuated": [["t1/a", "hidden"]]},
             "policies": [{"policy": "p", "n": 3, "evidence": {"at": datetime(2026, 1, 2,
                                                                             tzinfo=timezone.utc)}}],
             "salience": {"t1": [0.5, "2026-01-02T00:00:00+00:00"]},
             "writes": {"t1": "0" * 32, "t1/a": None}}
    whole = hashlib.sha256(f"salt\n{dumps(parts)}".encode("utf-8")).hexdigest()
    assert attest.commitment("salt", parts) == whole
    texts = {name: dumps(value) for name, value in parts.items()}
    assert attest.commitment_of_texts("salt", texts) == whole


def test_times_are_encoded_with_their_own_offset_however_often_they_repeat():
    """Canonical JSON remembers recent isoformat texts by value (gem/units.py). Equal instants
    in other zones, and the two equal wall times of a DST change's repeated hour (same tzinfo,
    fold 0 and 1), must still come out with their own offsets."""
    from datetime import datetime, timedelta, timezone, tzinfo
    from gem.units import dumps
    utc = datetime(2026, 3, 1, 12, 0, tzinfo=timezone.utc)
    cet = utc.astimezone(timezone(timedelta(hours=1)))
    assert utc == cet
    assert [dumps(utc), dumps(cet), dumps(utc)] == \
        [f'"{utc.isoformat()}"', f'"{cet.isoformat()}"', f'"{utc.isoformat()}"']
    class RepeatedHour(tzinfo):  # like America/New_York on 2026-11-01, without tz data
        def utcoffset(self, dt):
            return timedelta(hours=-5 if dt.fold else -4)

        def dst(self, dt):
            return timedelta(0 if dt.fold else 1)

    first = datetime(2026, 11, 1, 1, 30, tzinfo=RepeatedHour())
    second = first.replace(fold=1)
    assert first == second and first.isoformat() != second.isoformat()
    assert [dumps(first), dumps(second), dumps(first)] == \
        [f'"{first.isoformat()}"', f'"{second.isoformat()}"', f'"{first.isoformat()}"']


def test_canonical_json_is_the_json_modules_text_for_any_value():
    """gem.units.dumps calls the C encoder it made once (JSONEncoder makes one per call): every
    stored hash depends on it writing exactly what json.dumps writes with the same options."""
    import json
    from datetime import datetime, timezone
    from hypothesis import given, settings, strategies as st
    from gem.units import _json_default, dumps
    leaves = st.one_of(st.none(), st.booleans(), st.integers(), st.text(),
                       st.floats(allow_nan=True, allow_infinity=True),
                       st.datetimes(timezones=st.just(timezone.utc)))
    values = st.recursive(leaves, lambda inner: st.one_of(
        st.lists(inner, max_size=5), st.dictionaries(st.text(max_size=8), inner, max_size=5)),
        max_leaves=20)

    # fewer in the other engines' sub-sessions (tests/test_engines.py): nothing here is stored
    @settings(max_examples=int(os.environ.get("GEM_CANONICAL_JSON_EXAMPLES", "300")), deadline=None)
    @given(values)
    def same(value):
        assert dumps(value) == json.dumps(value, sort_keys=True, separators=(",", ":"),
                                          default=_json_default)
    same()
    assert dumps({"b": [1.5, None], "a": datetime(2026, 1, 1, tzinfo=timezone.utc)}) == \
        '{"a":"2026-01-01T00:00:00+00:00","b":[1.5,null]}'
