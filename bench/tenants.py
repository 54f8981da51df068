"""What scopes, erasure and compaction cost (issue 12), on kuzu and LadybugDB side by side.

    python bench/tenants.py [--topics 2000] [--big 100000] [--singles 320] [--engines kuzu,ladybug]

Scopes: the same ingests and retrievals (the same rows, the same queries) on
  A  a memory with only the default scope,
  B  scope "acme" of a memory where acme is the only scope written,
  C  scope "acme" of a memory where nine other scopes hold nine times as much again,
  D  a memory with only the default scope, already holding as much as C's nine neighbours,
interleaved operation by operation after a warm-up (`--singles` rounds of one ingest, one
retrieve by topic and one by text, the first 20 not counted). B/A is what a scope costs; C/D
is what sharing a database with other scopes costs, against a memory as big (C/A mixes that
with the engine's tables being ten times larger). Erasure and compaction: a memory of `--big` topics (two fields each), erasing one
topic that was ingested in a 1,000-fact batch (its record is redacted, so the 999 other
units it wrote are attested again) and one ingested alone; then `compact()`, reported per
100k entries. A benchmark, not a test: nothing asserts a time.
"""
from __future__ import annotations

import argparse
import json
import os
import random
import sys
import tempfile
import time

from common import Clock, ENV, exit_status, ms, side_by_side, timed  # noqa: F401  (ENV: children's BLAS)

WORDS = ("alpha", "budget", "launch", "design", "review", "hiring", "roadmap", "pricing",
         "audit", "migration", "onboarding", "security", "analytics", "support", "research")


def _facts(gem, prefix: str, start: int, count: int, fields: int) -> list:
    return [gem.Fact(f"{prefix} {i} {WORDS[i % len(WORDS)]}", f"field {j}",
                     f"value {i}.{j} {WORDS[(i * 7 + j) % len(WORDS)]}", source="bench")
            for i in range(start, start + count) for j in range(fields)]


WARM = 20  # single-operation rounds not counted


def scopes(gem, engine: str, d: str, topics: int, singles: int) -> dict:
    clock = Clock()
    a = gem.open(os.path.join(d, "a.db"), clock=clock, engine=engine)
    b_root = gem.open(os.path.join(d, "b.db"), clock=clock, engine=engine)
    c_root = gem.open(os.path.join(d, "c.db"), clock=clock, engine=engine)
    d_mem = gem.open(os.path.join(d, "d.db"), clock=clock, engine=engine)
    for n in range(9):  # C's neighbours: nine scopes as big as the one measured; D as much
        neighbour = c_root.scope(f"other{n}")
        for start in range(0, topics, 200):
            neighbour.ingest(_facts(gem, "Topic", start, min(200, topics - start), 3))
            d_mem.ingest(_facts(gem, f"Filler{n} topic", start, min(200, topics - start), 3))
    sides = {"A": a, "B": b_root.scope("acme"), "C": c_root.scope("acme"), "D": d_mem}
    times: dict[str, dict[str, list[float]]] = {k: {"batch": [], "single": [], "text": [],
                                                    "structured": []} for k in sides}
    for mem in sides.values():  # warm-up: statements prepared, caches filled, on every side
        mem.ingest(_facts(gem, "Warm", 0, 50, 3))
        mem.retrieve("warm value", k=5)
    order = list(sides.items())
    for start in range(0, topics, 200):  # the same batches, in turn (the order rotates)
        batch = _facts(gem, "Topic", start, min(200, topics - start), 3)
        order = order[1:] + order[:1]
        for name, mem in order:
            times[name]["batch"].append(timed(lambda: mem.ingest(batch)) / len(batch))
    rng = random.Random(3)
    for i in range(singles):
        t = rng.randrange(topics)
        title = f"Topic {t} {WORDS[t % len(WORDS)]}"
        fact = gem.Fact(title, "field 1", f"single {i}", source="bench")
        query = f"value {t}.2 {WORDS[t % len(WORDS)]}"
        order = order[1:] + order[:1]
        for name, mem in order:
            times[name]["single"].append(timed(lambda: mem.ingest(fact)))
            times[name]["structured"].append(timed(lambda: mem.retrieve(topic=title, fields=["field 2"])))
            times[name]["text"].append(timed(lambda: mem.retrieve(query, k=5)))
    for mem in (a, b_root, c_root, d_mem):
        mem.close()
    warm = WARM
    out = {}
    for name, series in times.items():
        out[name] = {"batch_facts_s": len(series["batch"]) / sum(series["batch"]),
                     **{op: ms(series[op][warm:]) for op in ("single", "structured", "text")}}
    return out


def erasure(gem, engine: str, d: str, big: int) -> dict:
    clock = Clock()
    path = os.path.join(d, "big.db")
    mem = gem.open(path, clock=clock, engine=engine)
    start = time.perf_counter()
    for first in range(0, big, 500):
        mem.ingest(_facts(gem, "Topic", first, min(500, big - first), 2))
    grow = time.perf_counter() - start
    mem.ingest(gem.Fact("Lonely Topic", "secret", "s3cr3t", source="bench"))
    batch_topic = f"Topic {big // 2} {WORDS[(big // 2) % len(WORDS)]}"
    out = {"topics": big, "entries": big * 2 + 1, "grow_s": grow}
    out["erase_batch_topic_s"] = timed(lambda: mem.erase(batch_topic, reason="bench"))
    out["erase_lonely_topic_s"] = timed(lambda: mem.erase("Lonely Topic", reason="bench"))
    out["erase_field_s"] = timed(lambda: mem.erase(f"Topic 7 {WORDS[7]}", "field 1", reason="bench"))
    report: dict = {}
    out["compact_s"] = timed(lambda: report.update(mem.compact()))
    out["compact_per_100k_entries_s"] = out["compact_s"] / (out["entries"] / 100_000)
    out["bytes_before"], out["bytes_after"] = report["bytes_before"], report["bytes_after"]
    out["audit_after_ok"] = mem.audit(full=True).ok
    mem.close()
    return out


def child(engine: str, topics: int, big: int, singles: int) -> dict:
    import gem
    with tempfile.TemporaryDirectory() as d:
        result = {"scopes": scopes(gem, engine, d, topics, singles)}
        print(json.dumps({"progress": "scopes", **result}), file=sys.stderr, flush=True)
        result["erasure"] = erasure(gem, engine, d, big)
    return result


def table(results: dict[str, dict]) -> str:
    lines = []
    for engine, r in results.items():
        s = r["scopes"]
        lines.append(f"{engine}: scopes (A: default scope only; B: one named scope; C: a named scope "
                     "beside nine as big; D: default scope only, as big as C's database)")
        lines.append(f"  {'measure':<30}{'A':>10}{'B':>10}{'C':>10}{'D':>10}"
                     f"{'B/A':>7}{'C/D':>7}{'C/A':>7}")
        rate = {k: 1 / s[k]["batch_facts_s"] for k in "ABCD"}  # seconds per fact: a cost
        lines.append(f"  {'batch ingest facts/s':<30}" + "".join(
            f"{s[k]['batch_facts_s']:>10,.0f}" for k in "ABCD") +
            f"{rate['B'] / rate['A']:>7.2f}{rate['C'] / rate['D']:>7.2f}{rate['C'] / rate['A']:>7.2f}")
        for op, label in (("single", "single ingest p50 ms"), ("structured", "structured retrieve p50 ms"),
                          ("text", "free-text retrieve p50 ms")):
            p50 = {k: s[k][op][0] for k in "ABCD"}
            lines.append(f"  {label:<30}" + "".join(f"{p50[k]:>10.2f}" for k in "ABCD") +
                         f"{p50['B'] / p50['A']:>7.2f}{p50['C'] / p50['D']:>7.2f}"
                         f"{p50['C'] / p50['A']:>7.2f}")
        e = r["erasure"]
        lines.append(f"  erasure at {e['topics']:,} topics ({e['entries']:,} entries; grown in "
                     f"{e['grow_s']:.0f} s): a topic of a 1,000-fact batch {e['erase_batch_topic_s']:.3f} s, "
                     f"a topic ingested alone {e['erase_lonely_topic_s']:.3f} s, "
                     f"one field {e['erase_field_s']:.3f} s")
        lines.append(f"  compact(): {e['compact_s']:.1f} s ({e['compact_per_100k_entries_s']:.1f} s per 100k "
                     f"entries), {e['bytes_before'] / 1e6:,.0f} MB -> {e['bytes_after'] / 1e6:,.0f} MB, "
                     f"audit after: {'ok' if e['audit_after_ok'] else 'FAILED'}")
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--topics", type=int, default=2000, help="topics per scope (scopes part)")
    parser.add_argument("--big", type=int, default=100_000, help="topics for erasure and compact")
    parser.add_argument("--singles", type=int, default=320,
                        help=f"rounds of single operations per side (the first {WARM} not counted)")
    parser.add_argument("--engines", default="kuzu,ladybug")
    parser.add_argument("--child", choices=["kuzu", "ladybug"])
    args = parser.parse_args()
    if args.singles <= WARM:
        parser.error(f"--singles must be more than the {WARM} warm-up rounds")
    if args.child:
        print(json.dumps(child(args.child, args.topics, args.big, args.singles)))
        return 0
    results = side_by_side(__file__, ["--topics", str(args.topics), "--big", str(args.big),
                                      "--singles", str(args.singles)],
                           tuple(args.engines.split(",")))
    print(table(results))
    return exit_status(results, args.engines.split(","))


if __name__ == "__main__":
    sys.exit(main())
