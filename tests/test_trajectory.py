"""The trajectory benchmark: generator, ground truth, the baselines' defining behaviour,
and gem on a small stream (specs/trajectory-benchmark.md)."""
from __future__ import annotations

import argparse
import json
import re
from dataclasses import replace
from datetime import timedelta


import gem
from gem.bench import add_bench_parser, run_bench
from gem.bench.baselines import (AddOnlyFactStore, AppendOnlyVectorStore, BitemporalGraph,
                                 OverwriteFactStore, RecencyImportanceMemory)
from gem.bench.gem_system import GemSystem
from gem.bench.generator import generate
from gem.bench.stream import (CHATTER, IMPORTANCE, PROJECT_POOL, START, FactSpec, LinkSpec,
                              QuerySpec, StreamConfig, Turn)
from gem.bench.scoring import run_system, score
from gem.bench.trajectory import run_benchmark
from gem.bench.truth import Ledger, ground_truth

from conftest import ENGINE, temporary_location

SMALL = StreamConfig(turns=90, seed=7)


# ---------------------------------------------------------------------------- generator
def test_same_seed_same_stream_other_seed_other_stream():
    a, b = generate(SMALL), generate(SMALL)
    assert a == b
    assert generate(replace(SMALL, seed=8)).turns != a.turns


def test_stream_shape():
    s = generate(SMALL)
    assert len(s.turns) == SMALL.turns
    assert [t.index for t in s.turns] == list(range(SMALL.turns))
    step = timedelta(hours=SMALL.step_hours)
    assert all(b.time - a.time == step for a, b in zip(s.turns, s.turns[1:]))
    assert s.turns[0].kind == "kickoff"
    kinds = {t.kind for t in s.turns}
    assert {"kickoff", "update", "reexplain", "query", "chatter", "link"} <= kinds
    live: set[str] = set()
    for t in s.turns:
        if t.kind == "kickoff":
            live.add(t.facts[0].topic)
        if t.link is not None:
            assert {t.link.src, t.link.dst} <= live
        if t.query is not None:
            assert t.query.topic in live
        for f in t.facts:
            assert (f.topic in live) != (f.topic in CHATTER)
        assert t.importance == IMPORTANCE[t.kind]


def test_titles_do_not_resolve_to_each_other():
    # gem's resolver merges names whose title embeddings are >= 0.85 alike; the stream's
    # topics must stay distinct so the truth and every system agree on what a topic is.
    names = list(PROJECT_POOL) + list(CHATTER)
    vecs = gem.HashingEmbedder().embed(names)
    sims = vecs @ vecs.T
    for i in range(len(names)):
        for j in range(i + 1, len(names)):
            assert sims[i, j] < 0.85, (names[i], names[j])


# ---------------------------------------------------------------------------- truth
def _fact(topic, fld, value, hours, source="chat", kind="update", case=""):
    return FactSpec(topic, fld, value, START + timedelta(hours=hours), source, kind, case)


def test_ledger_rules():
    led = Ledger()
    u = ("P", "owner")
    assert led.add(_fact("P", "owner", "Erin", 0, kind="kickoff"), 1, 0) is None
    assert led.add(_fact("P", "owner", "Erin", 40, kind="reexplain"), 2, 1) is None
    # a late fact older than the latest assertion never becomes current, even when it is
    # newer than the value's first assertion (the re-statement re-affirmed it)
    assert led.add(_fact("P", "owner", "Hiro", 10, kind="late"), 3, 2) is None
    assert led.current(u).value == "Erin"
    assert led.replaced(u) == "Hiro"
    # same valid time: the later recording wins
    assert led.add(_fact("P", "owner", "Ines", 40, source="jira"), 4, 3) == ("Erin", "Ines")
    assert led.current(u).value == "Ines" and led.replaced(u) == "Erin"
    assert led.values(u) == {"Erin", "Hiro", "Ines"}


def test_ground_truth_sanity():
    s = generate(StreamConfig(turns=300, seed=1))
    truth = ground_truth(s)
    led = Ledger()
    deps: dict[str, set[str]] = {}
    order = 0
    n = 0
    assert len(truth.turns) == len(s.turns)
    for turn, tt in zip(s.turns, truth.turns):
        n += turn.interaction
        assert tt.n == n and tt.bound == s.config.bound(n)
        if turn.kind == "link":
            if turn.link.kind == "extension":
                deps.setdefault(turn.link.src, set()).add(turn.link.dst)
            assert tt.expected_flags is None
            continue
        if turn.kind == "query":
            cur = led.current((turn.query.topic, turn.query.field))
            assert tt.probe.value == cur.value
            assert cur.value not in tt.probe.superseded
            continue
        before = {(f.topic, f.field): led.current((f.topic, f.field)) for f in turn.facts}
        changed = []
        for f in turn.facts:
            order += 1
            if led.add(f, order, turn.index) is not None:
                changed.append(f.topic)
            after = led.current((f.topic, f.field))
            if f.kind == "late":            # (a) a late fact never becomes current
                assert after.value != f.value
            if f.kind == "reexplain":       # a re-explanation never changes the value
                assert after.value == before[(f.topic, f.field)].value
            if f.kind in ("update", "contradiction"):  # these always take over
                assert after.value == f.value
        # (b) exactly the direct extension dependents of the changed topics
        want = set().union(*(deps.get(t, set()) for t in changed)) if changed else set()
        assert tt.expected_flags == want
    assoc = {(l.src, l.dst) for l in s.links if l.kind == "association"}
    assert assoc  # association edges exist and never show up as expected flags
    assert sum(len(t.expected_flags or ()) for t in truth.turns) > 0
    # (c) beta grows with interactions only
    bounds = [t.bound for t in truth.turns]
    assert bounds == sorted(bounds)


# ---------------------------------------------------------------------------- baselines
CFG = StreamConfig(bound_base=3, bound_slope=0.0)


class Script:
    """Hand-written turns for one system, with the clock moving 3 hours a turn."""

    def __init__(self, system):
        self.system = system
        self.i = 0

    def _turn(self, kind, text="", facts=(), link=None, query=None):
        t = Turn(self.i, START + timedelta(hours=3 * self.i), kind, text, tuple(facts), link,
                 query, IMPORTANCE[kind])
        self.i += 1
        self.system.begin(t)
        return t

    def say(self, kind, topic, fld, value, at_turn=None, source="chat", text=None):
        at = START + timedelta(hours=3 * (self.i if at_turn is None else at_turn))
        f = FactSpec(topic, fld, value, at, source, kind)
        t = self._turn(kind, text or f"{topic} {fld} is {value}", [f])
        self.system.ingest(t)

    def link(self, src, dst):
        t = self._turn("link", f"{dst} depends on {src}", link=LinkSpec(src, dst, "extension"))
        self.system.link(t)

    def ask(self, topic, fld):
        text = f"What is the {fld} of {topic}?"
        self._turn("query", text, query=QuerySpec(topic, fld, text, "test"))
        return self.system.query(topic, fld, text)


def test_vector_store_appends_everything_and_evicts_by_age():
    vs = AppendOnlyVectorStore(StreamConfig(bound_base=4, bound_slope=0.0))
    s = Script(vs)
    s.say("kickoff", "Website Redesign", "deadline", "2026-03-15")
    s.say("reexplain", "Website Redesign", "deadline", "2026-03-15")
    assert vs.footprint() == 2          # a re-explanation is stored again
    s.say("update", "Website Redesign", "deadline", "2026-04-20",
          text="Update on Website Redesign: the deadline moved to 2026-04-20.")
    for person in ("alice", "bob"):
        s.say("chatter", "Lunch preferences", person, "sushi")
    assert vs.footprint() == 4 and vs.evicted == 1   # the oldest message went first
    assert [m.order for m in vs.messages] == [1, 2, 3, 4]
    assert s.ask("Website Redesign", "deadline") == "2026-04-20"


def test_mem0_v2_overwrites_on_conflict_and_keeps_a_history_row():
    m = OverwriteFactStore(CFG)
    s = Script(m)
    s.say("kickoff", "Website Redesign", "budget", 100000)
    s.say("reexplain", "Website Redesign", "budget", 100000)
    assert m.events["NOOP"] == 1 and m.footprint() == 1
    s.say("update", "Website Redesign", "budget", 120000, source="jira")
    assert m.footprint() == 1 and m.events["UPDATE"] == 1
    assert s.ask("Website Redesign", "budget") == 120000
    p = m.provenance("Website Redesign", "budget")
    assert (p.value, p.source, p.replaced) == (120000, "jira", 100000)
    # the update prompt has no notion of valid time: an older note overwrites too
    s.say("late", "Website Redesign", "budget", 90000, at_turn=1, source="finance-sheet")
    assert s.ask("Website Redesign", "budget") == 90000


def test_mem0_v3_adds_only_and_skips_duplicates():
    m = AddOnlyFactStore(CFG)
    s = Script(m)
    s.say("kickoff", "Website Redesign", "deadline", "2026-03-15")
    s.say("reexplain", "Website Redesign", "deadline", "2026-03-15")
    assert m.footprint() == 1 and m.skipped == 1
    s.say("update", "Website Redesign", "deadline", "2026-04-20")
    s.say("late", "Website Redesign", "deadline", "2026-03-30", at_turn=1)
    assert m.footprint() == 3            # nothing is overwritten or deleted
    assert all(mem.text.startswith("As of ") for mem in m.memories)
    assert s.ask("Website Redesign", "deadline") == "2026-04-20"   # the dated reader
    p = m.provenance("Website Redesign", "deadline")
    assert p.replaced == "2026-03-30"


def test_zep_invalidates_one_edge_and_expires_late_edges_on_arrival():
    z = BitemporalGraph(CFG)
    s = Script(z)
    s.say("kickoff", "Website Redesign", "deadline", "2026-03-15")
    s.say("kickoff", "Launch Campaign", "deadline", "2026-05-01")
    s.link("Website Redesign", "Launch Campaign")
    s.say("update", "Website Redesign", "deadline", "2026-04-20")
    old, dep_edge, new = z.edges[0], z.edges[2], z.edges[3]
    assert old.invalid_at == new.valid_at and new.invalid_at is None
    assert z.flagged_after_update() == set()          # no propagation along dependencies
    assert z.edges[1].invalid_at is None and dep_edge.name == "DEPENDS_ON"
    s.say("late", "Website Redesign", "deadline", "2026-03-30", at_turn=1)
    late = z.edges[4]
    assert late.invalid_at == new.valid_at and late.expired_at is not None
    assert s.ask("Website Redesign", "deadline") == "2026-04-20"
    s.say("reexplain", "Website Redesign", "deadline", "2026-04-20")
    assert z.footprint() == 5                          # a duplicate joins its edge


def test_ga_memgpt_evicts_the_least_recent_and_important_and_pages_back():
    g = RecencyImportanceMemory(StreamConfig(bound_base=3, bound_slope=0.0))
    s = Script(g)
    s.say("kickoff", "Website Redesign", "deadline", "2026-03-15")
    s.say("chatter", "Lunch preferences", "alice", "sushi")
    s.say("update", "Website Redesign", "owner", "Bob")
    s.say("chatter", "Lunch preferences", "bob", "tacos")
    assert g.footprint() == 3
    assert [m.facts[0].field for m in g.archive] == ["alice"]   # chatter goes first
    before = g.active[0].last_access
    assert s.ask("Website Redesign", "deadline") == "2026-03-15"
    assert g.active[0].last_access > before                    # retrieval refreshes recency
    for person in ("carol", "dan", "erin"):
        s.say("update", "Website Redesign", person, "x")
    assert s.ask("Lunch preferences", "alice") == "sushi"       # paged back from the archive
    assert g.fallbacks >= 1


# ---------------------------------------------------------------------------- gem
def test_gem_small_stream_accuracy_and_flags():
    stream = generate(SMALL)
    truth = ground_truth(stream)
    system = GemSystem(stream.config, engine=ENGINE, path=temporary_location())
    try:
        run = run_system(stream, truth, system)
    finally:
        system.close()
    s = score(stream, truth, run)
    assert s["probes"] > 10 and s["flags_expected"] > 0
    assert s["flag_recall"] == 1.0
    assert s["within_bound_share"] == 1.0
    assert run.summary["audit_ok"] and not run.summary["errors"]
    assert run.summary["bound_mismatch_count"] == 0
    wrong = [p for p in run.probes if p.outcome != "correct"]
    assert wrong == [] and s["accuracy"] == 1.0


def test_gem_keeps_a_tight_bound():
    config = replace(SMALL, turns=70, bound_base=15, bound_slope=0.05)
    stream = generate(config)
    truth = ground_truth(stream)
    system = GemSystem(config, engine=ENGINE, path=temporary_location())
    try:
        run = run_system(stream, truth, system)
        hidden = system.mem.stats()["fields"].get("hidden", 0)
    finally:
        system.close()
    s = score(stream, truth, run)
    assert hidden > 0                          # the bound had to attenuate
    assert s["within_bound_share"] == 1.0      # C5 after every turn
    assert s["flag_recall"] == 1.0
    assert run.summary["audit_ok"]


def test_gem_restated_value_outranks_an_older_late_fact():
    now = [START]
    with gem.open(temporary_location(), clock=lambda: now[0], engine=ENGINE) as mem:
        mem.ingest(gem.Fact("Support Chatbot", "owner", "Erin", at=START))
        now[0] += timedelta(days=18)
        mem.ingest(gem.Fact("Support Chatbot", "owner", "Erin"))       # "still Erin"
        now[0] += timedelta(days=1)
        mem.ingest(gem.Fact("Support Chatbot", "owner", "Hiro", at=START + timedelta(days=2),
                            source="standup-notes"))                    # an older note
        r = mem.retrieve(topic="Support Chatbot", fields=["owner"])
        assert r.value("Support Chatbot", "owner") == "Erin"


# ---------------------------------------------------------------------------- runner, CLI
def test_benchmark_end_to_end_on_a_tiny_stream(tmp_path):
    config = StreamConfig(turns=40, seed=2)
    report = run_benchmark(config, ["vector-store", "mem0-v2", "mem0-v3", "zep", "ga-memgpt"])
    table = report.table()
    for name in ("vector-store", "mem0-v2", "mem0-v3", "zep", "ga-memgpt"):
        assert name in table
        sc = report.scores[name]
        assert 0.0 <= sc["accuracy"] <= 1.0
        assert sc["flag_recall"] in (0.0, None)   # no baseline propagates along dependencies
    data = json.loads(json.dumps(report.to_json(), default=str))
    assert set(data["systems"]) == {r.name for r in report.runs}
    assert len(data["truth_series"]["bound"]) == 40


def test_cli_mounts_and_writes_outputs(tmp_path, capsys):
    parser = argparse.ArgumentParser(prog="gem")
    add_bench_parser(parser.add_subparsers(dest="command", required=True))
    args = parser.parse_args(["bench", "trajectory", "--turns", "30", "--seed", "1", "--out",
                              str(tmp_path), "--systems", "mem0-v2,zep", "--quiet", "--html"])
    assert run_bench(args) == 0
    out = capsys.readouterr().out
    assert "mem0-v2" in out and "accuracy" in out
    assert (tmp_path / "trajectory-30-seed1.json").exists()
    assert (tmp_path / "trajectory-30-seed1.txt").exists()
    report = (tmp_path / "trajectory-30-seed1.html").read_text(encoding="utf-8")
    assert report.count('<svg xmlns="http://www.w3.org/2000/svg"') == 2  # accuracy, footprint
    assert "<script" not in report and not re.search(r'(src|href)="(https?:)?//', report)
    assert "beta(n)" in report and "<b>zep</b>" in report and "<b>mem0-v2</b>" in report
    png = tmp_path / "trajectory-30-seed1.png"
    try:
        import matplotlib
    except ImportError:
        assert "matplotlib is not installed" in out
    else:
        assert matplotlib.__version__ and png.exists()
    bad = parser.parse_args(["bench", "trajectory", "--systems", "nope", "--quiet",
                             "--out", str(tmp_path)])
    assert run_bench(bad) == 2
