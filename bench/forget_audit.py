"""A forgetting pass and a full audit, this tree's code against an earlier revision's, on copies
of the same memory, side by side in one run (issue 28: forget pass <= 10 s at 1M fields, full
audit <= 15 s at 1.1M entries).

    python bench/forget_audit.py [--topics 10000] [--baseline 4b5d922[,REV...]] [--rounds 1] [--keep DIR]

The memory is scale.py's: N topics of 10 fields, then 30 batches of 2,000 updates; each child
process opens a copy of it 45 days later, runs `forget()` (everything faded: fields compressed
then hidden, topics archived) and then `audit(full=True)` on what the pass left, and prints its
times, wall and CPU (the CPU time of the process, the engine's threads included: on a shared,
loaded machine the steadier of the two). The baseline runs from `git archive <rev>` of this repository, the current code from this
tree; rounds alternate which goes first. Per-unit costs are per unit the pass moved and per
entry audited. A benchmark, not a test: nothing asserts a time.

Measured (10k topics, 2 rounds, best of each; the shared 2-core VM at load 9-15, so wall times
swung 2x and CPU times are the ones to compare), 4b5d922 against the ladder attestation, the
C encoder made once, the collector paused in the audit and timestamp-only conversion:
forget 10.28 -> 9.37 CPU s (67.5 -> 61.5 us per move, 0.91x), full audit 11.34 -> 7.98 CPU s
(70.9 -> 49.8 us per entry, 0.70x; 78 -> 55 s at 1.1M entries).

Then 07ae221 against the audit's row hasher (gem/rowhash.py: a template per row shape), each
scan's times made aware once, and a moved row's likeliest written status tried first, two
side-by-side runs of 2 rounds at load 10-13: full audit 9.91 -> 7.95 and 9.11 -> 8.05 CPU s
(61.9 -> 49.7 and 56.9 -> 50.3 us per entry, 0.80x and 0.88x; ~55 s at 1.1M entries, against
the target of 15). What is left, by py-spy samples in the audit: the engine's fetch ~18%, the
canonical encoding ~21% and sha256 ~6%, the log's decoding and scan ~16% (its salience part is
14 MB of JSON at 10k topics), C1/C2/C4 ~10%, row dicts ~7%, the rest bookkeeping.

Then, at load 4-14, 07ae221 against the ladder's status moves made
in bulk (gem/operators/status_moves.py): forget 10.39 -> 8.68 CPU s (68.2 -> 56.9 us per move,
0.84x; a run at load 12: 10.62 -> 8.90). 43k of the 152k moves here are compressions that fold a faded history (30 batches of
2,000 updates over 100k fields), still per unit: reading their 60k faded entries and 43k field
rows (~2 s, most of it row conversion), hashing those 96k rows for the log, writing and caching
them are most of what is left. On the same 10k topics without the updates (200k moves, status
alone; built apart), 26.9-31.5 -> 7.3-7.8 us per move, ~4x; at 100k topics the same updates
touch 6% of the 1M fields, so there the bulk cost dominates. Where a move went before (cProfile,
07ae221): per-unit `act` and the step functions (row copy, update, touched, record) ~40%, a
third of it reading faded histories; loading every moved row ~9%, the log's hashes ~16%, the
flush ~11%, the cache and derived state taking every row ~12%, candidates and the report ~10%.

Then 5147e9d against one bulk call per plan (the folds first, the record's order put back),
moved units skipped by key in the record and the flush, one status dict per level, the report
named per level, renewed cache rows costed by what changed and the record's row hashes made
by gem/rowhash.py; forget alone, alternating, at load 2-7 (min of the runs; CPU s): 10k
topics 7.39 -> 6.00 (48.5 -> 39.4 us per move; medians of 6 runs 8.4 -> 7.8), 20k topics (347k moves,
51k folds) 11.04 -> 10.25 (31.8 -> 29.5 us), 10k topics without the updates (200k status
moves) 1.22 -> 1.13 (6.1 -> 5.7 us per move; medians 1.78 -> 1.15, 8.9 -> 5.8 us). Records, reports and
audits identical. What is left where folds are many (py-spy, 20k): reading the faded
histories ~19% (row conversion half of it), the folds' own steps ~14%, the record ~17% (row
hashes 8%), the cache and derived state ~12%, the flush ~6%.

Then the full audit read as Arrow pieces and hashed a column at a time (gem/store/queries/
batches.py, rowhash_columns.hash_batch) with C1/C2/C4 run only on the histories a column sieve names
(gem/history_columns.py), against 5147e9d and 997c2b0 (before the reads in pieces) in the same
runs (--baseline 997c2b0,5147e9d; CPU s of the audit, us per entry): at 10k topics, 2 rounds
at load 1-5, 997c2b0 6.69 (41.8), 5147e9d 6.88 (43.0), this 4.76 (29.8), 0.69x; one round at
load 2-8, 7.57 / 7.44 / 5.33 (47.3 / 46.5 / 33.3). At 30k topics, load 1-5: 19.95 (55.4),
20.27 (56.3), 10.68 (29.7), 0.53x (~33 s at 1.1M entries; wall 30.6 -> 16.6 s). The pieces
cost nothing measurable here (5147e9d against 997c2b0: 0.98x-1.21x at 10k in four runs,
0.95x-1.02x at 30k in two). Left,
per entry at 10k (CPU s of 3.6-4.5): the log's decoding and scan ~1.3 (its salience part is
14 MB of JSON, its writes 20 MB, 650k keys to take in), the history join ~0.6-0.7 (the
engine's join of fields to entries; a scan of the Entry table alone costs a seventh of it),
hashing ~0.9 (Arrow's joins of ~50 column texts a row, sha256 ~1 us a row), the verdicts
~0.5, the other queries ~0.3.

Then what the log says of each unit kept as columns (gem/audit_units.py: Arrow arrays per
record, one fold, units found by their str hash in a sorted array) and rows judged a batch at a
time, moved rows hashed only with the statuses they can have been written with, and the
engine's next batch read on a thread meanwhile, against 439e89b (load 5-11; audit CPU s, us
per entry): 10k topics, 2 rounds, 4.73 -> 3.39 (29.6 -> 21.2, 0.72x), wall 9.3 -> 8.3 s;
30k, 1 round, 11.28 -> 9.64 (31.3 -> 26.8, 0.85x), wall 22.9 -> 19.1 s. The audit alone in a
fresh process on the forgotten copy (peak RSS, the engine's pool included): 10k 5.00 -> 3.65
CPU s, 696 -> 656 MB; 30k 10.24 -> 7.83 CPU s, wall 20.6 -> 15.2 s, 1046 -> 845 MB. Left at
30k (CPU s of ~8.5): the engine's reads ~2.5 (the log's alone take its pool from ~210 to
~630 MB), row hashing ~2.7 (Arrow's joins of the column texts and sha256 per row: hashlib
holds the GIL under 2 KB), the log's JSON ~0.5, its columns ~1.4, the verdicts ~0.5.

Then the pass's walks over its units in C (the tick plans' candidates in a kept id order,
SalienceTable.rows_by_id; moved units in `Transition.moved` alone, not also in `updated`;
maps, filters and compress instead of per-key comprehensions in the plans, the moves, the
record and the report), against c85586e on copies of a 100k-topic memory (1M fields, 1.06M
entries; `forget()` 45 days on: 2.10M moves, 1.10M units; the same report, byte for byte; full
audit clean), alternated, two sittings at load 6-13 (forget CPU s): c85586e 38.1 / 37.8 /
32.4 / 24.1, this 26.0 / 25.9 (an earlier step) and 19.5 / 15.1 (0.60x / 0.63x beside the
runs next to them); peak RSS 1.70-1.75 GB both. Left (cProfile, 15 CPU s, 28 s wall): the
engine ~7.7 s wall (the status writes by key ~4, the faded-history scan ~1.6), the report
~5.9 (four lists of 1-2M names and pairs), the bulk moves' dicts of 1M ids ~3, candidates
and the faded-history split ~4, the record ~1.8, the cache and derived state ~1.5.

Then c85586e against unit hashes searched in hash order, table pieces weighed by their bytes
(a field's piece holds twice the rows: each piece is a scan of the whole table), HAS_ENTRY's
ownership compared with the histories as they are read (not by a second join), text columns
escaped only where they hold a quote or backslash, and a history batch hashed without a copy:
`gem.open` then `audit(full=True)` on copies of a memory of 100k topics without the updates
(1M fields, 1.01M entries), base and new alternating, audit CPU s (wall s): at load 7-11,
25.89 -> 21.23 and 26.52 -> 20.31; at load 5-7, 15.79 -> 13.39 (24.0 -> 23.7) and
17.05 -> 13.48 (20.4 -> 17.3); with the ids handed to the lookups as Arrow, at load 5-7,
16.90 -> 14.28 and 17.18 -> 14.01: 0.77x-0.85x. Peak RSS 1.53-1.59 GB both. 10k topics, 3
rounds: at load 9-11, medians 2.21 -> 1.94 CPU s; at load 6, 1.59 -> 1.34 (0.84x), peak RSS
~520 -> ~500 MB. The same CPU work costs ~1.6x more at load 10 than at load 6.
Left at 100k (py-spy, both threads, 13.8 CPU s): the fold of the log's columns 13% (most of
it one dictionary of the 3.2M keys the log names), sha256 and its loop 13%, the engine's
conversion to Arrow 12% and its reads 10% (the join of fields to entries most: a scan of the
Entry table costs more, ~0.3 s a piece for the scan whatever the range), the row texts' joins
(Arrow's binary_join_element_wise of ~50 parts a row, ~1.6 us a row) 10%, the rows' lookups
in the log's columns 9%, the log's per-record arrays 6% and its JSON 5%, the column texts 4%,
the sieve 4%. Peak RSS: open ~300 MB, the log's read +650 MB (the pool holds the log's
pages), its columns' fold +550 MB (the dictionary's memo table ~230 MB; kept by the
allocator after).
"""
from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import sys
import tempfile
import time

from common import Clock, build_once, checkout, copy_db, run_child

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
WORDS = ("alpha", "budget", "launch", "design", "review", "hiring", "roadmap", "pricing", "audit",
         "vendor", "metrics", "onboarding")


def build(path: str, topics: int, fields: int = 10) -> None:
    import gem
    rng = random.Random(7)
    clock = Clock()
    with gem.open(path, clock=clock) as mem:
        for start in range(0, topics, 200):
            size = min(200, topics - start)
            mem.ingest([gem.Fact(f"Topic {start + i} {WORDS[(start + i) % len(WORDS)]}",
                                 f"field {j}", f"value {start + i}.{j}")
                        for i in range(size) for j in range(fields)])
        for _ in range(30):
            pairs = rng.sample(range(topics * fields), min(2000, topics * fields))
            mem.ingest([gem.Fact(f"Topic {p // fields} {WORDS[p // fields % len(WORDS)]}",
                                 f"field {p % fields}", f"updated {rng.random():.6f}")
                        for p in pairs])


def child(path: str) -> dict:
    """Open `path` 45 days on, a forgetting pass, then a full audit of what it left."""
    import gem
    from gem.store import queries
    clock = Clock()
    clock.advance(days=45)
    out: dict = {}
    with gem.open(path, clock=clock) as mem:
        start, cpu = time.perf_counter(), time.process_time()
        report = mem.forget()
        out["forget_s"] = time.perf_counter() - start
        out["forget_cpu"] = time.process_time() - cpu
        out["moved"] = len(report["level_ids"])
        del report
        clock.advance(minutes=1)
        start, cpu = time.perf_counter(), time.process_time()
        audit = mem.audit(full=True)
        out["audit_s"] = time.perf_counter() - start
        out["audit_cpu"] = time.process_time() - cpu
        out["audit_ok"] = audit.ok
        with mem._engine.store.reading() as tx:
            out["entries"] = queries.count(tx, "Entry")
            out["fields"] = queries.count(tx, "Field")
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--topics", type=int, default=10_000)
    parser.add_argument("--baseline", default="4b5d922")
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--keep", help="build the memory here once and reuse it on later runs")
    parser.add_argument("--child")
    parser.add_argument("--build")
    args = parser.parse_args()
    if args.child:
        print(json.dumps(child(args.child)))
        return 0
    if args.build:
        build(args.build, args.topics)
        return 0
    with tempfile.TemporaryDirectory() as d:
        codes = {}  # several baselines, comma-separated: each one side by side with this tree
        for rev in args.baseline.split(","):
            codes[rev] = checkout(rev, os.path.join(d, f"baseline-{rev}"))
        old_code = codes[args.baseline.split(",")[0]]
        base = os.path.join(args.keep or d, f"m{args.topics}", "gov.db")
        build_once(__file__, base, old_code, ["--topics", str(args.topics)])
        results: dict[str, list[dict]] = {**{rev: [] for rev in codes}, "this tree": []}
        for r in range(args.rounds):
            order = [*codes.items(), ("this tree", ROOT)]
            for name, code in order if r % 2 == 0 else order[::-1]:
                db = copy_db(base, os.path.join(d, f"run{r}-{name.replace(' ', '')}"))
                results[name].append(run_child(__file__, code, ["--child", db]))
                shutil.rmtree(os.path.dirname(db))
                print(name, results[name][-1], file=sys.stderr, flush=True)
    first = results["this tree"][0]
    print(f"{args.topics} topics: {first['fields']:,} fields, {first['entries']:,} entries, "
          f"{first['moved']:,} ladder moves")
    print(f"{'':10} {'forget s':>9} {'cpu s':>7} {'cpu us/move':>12} {'1M fields cpu s':>16} "
          f"{'audit s':>8} {'cpu s':>7} {'cpu us/entry':>13} {'1.1M entries cpu s':>19} {'ok':>4}")
    for name, runs in results.items():
        forget, forget_cpu = min(x["forget_s"] for x in runs), min(x["forget_cpu"] for x in runs)
        audit, audit_cpu = min(x["audit_s"] for x in runs), min(x["audit_cpu"] for x in runs)
        per_entry = audit_cpu / runs[0]["entries"] * 1e6
        # at scale.py's 100k topics: 1M fields (the moves grow with them), 1.1M entries
        print(f"{name:10} {forget:>9.2f} {forget_cpu:>7.2f} "
              f"{forget_cpu / max(1, runs[0]['moved']) * 1e6:>12.1f} {forget_cpu * 1e6 / runs[0]['fields']:>16.1f} "
              f"{audit:>8.2f} {audit_cpu:>7.2f} {per_entry:>13.1f} {per_entry * 1.1:>19.1f} "
              f"{str(all(x['audit_ok'] for x in runs)):>4}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
