"""Which statement reads a 1-hop from many parents on kuzu: the forms gem chooses between
(gem/store/queries/reads.py `_kuzu_one_hop`), side by side on the same rows.

    python bench/engine_forms.py [--sizes 2000,20000] [--fields 10] [--reps 12]

A memory of N topics with `fields` fields each is built through gem; then the entries of the
fields of 1, 20 and 200 random topics are read with each form, interleaved, on a fresh read
transaction each time: a statement per key (per topic for entries: the topic's key, then two
hops), one IN list, one hash join of the keys with the parent table, one hash join of the keys
with the entries' `field_id` column, and gem's own choice. kuzu 0.11.3 uses its primary-key
index only for a key passed as a parameter, so the IN list and the joins scan a table; the IN
list also tests each row against the whole list, and the column join reads one column of the
child table instead of the parents and the hop. A benchmark, not a test: nothing asserts a
time.
"""
from __future__ import annotations

import argparse
import os
import random
import statistics
import sys
import tempfile
import time

from common import Clock

FORMS = {  # the settings (SETTINGS, in order) that force each form
    "per key/topic": (4, 1, 0, 1, 1, None),
    "IN list": (0, 10**12, 10**12, 10**12, 10**12, None),
    "hash join": (0, 10**12, 0, 10**12, 10**12, None),
    "column join": (0, 10**12, 0, 10**12, 10**12, "field_id"),
}
SETTINGS = ("KUZU_FEW_KEYS", "KUZU_ROWS_PER_KEYED_READ", "KUZU_IN_LIST_KEYS",
            "KUZU_CHILD_ROWS_PER_KEYED_READ", "KUZU_CHILD_ROWS_PER_TOPIC_READ")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sizes", default="2000,20000")
    parser.add_argument("--fields", type=int, default=10)
    parser.add_argument("--reps", type=int, default=12)
    args = parser.parse_args()
    import dataclasses

    import gem
    from gem.store import queries, schema
    rng = random.Random(5)
    print(f"{'topics':>7} {'fields':>8} {'read':>6} {'form':>14} {'p50 ms':>9} {'vs gem':>7}")
    for size in [int(s) for s in args.sizes.split(",")]:
        with tempfile.TemporaryDirectory() as d:
            mem = gem.open(os.path.join(d, "forms.db"), clock=Clock())
            step = max(1, 2000 // args.fields)
            for start in range(0, size, step):
                mem.ingest([gem.Fact(f"Topic {i}", f"field {j}", f"value {i}.{j}")
                            for i in range(start, min(size, start + step)) for j in range(args.fields)])
            store = mem._engine.store
            with store.reading() as tx:
                fields_of: dict[str, list[str]] = {}
                for tid, fid in tx.run("MATCH (t:Topic)-[:HAS_FIELD]->(f:Field) RETURN t.id, f.id"):
                    fields_of.setdefault(tid, []).append(fid)
            topics = sorted(fields_of)
            defaults = (*(getattr(queries.reads, name) for name in SETTINGS),
                        schema.RELS["HAS_ENTRY"].parent_column)
            has_entry = schema.RELS["HAS_ENTRY"]
            for count in (1, 20, 200):
                count = min(count, len(topics))
                times: dict[str, list[float]] = {name: [] for name in (*FORMS, "gem")}
                for rep in range(args.reps + 1):
                    keys = [f for t in rng.sample(topics, count) for f in fields_of[t]]
                    order = list(times) if rep % 2 else list(times)[::-1]
                    for name in order:
                        *settings, column = FORMS.get(name, defaults)
                        for setting, value in zip(SETTINGS, settings):
                            setattr(queries.reads, setting, value)
                        # without the parent column, the forms that read through the parents
                        schema.RELS["HAS_ENTRY"] = dataclasses.replace(has_entry, parent_column=column)
                        with store.reading() as tx:
                            started = time.perf_counter()
                            rows = queries.read_children(tx, "HAS_ENTRY", keys)
                            took = time.perf_counter() - started
                        assert len(rows) == len(keys)
                        if rep:  # the first round warms the statement cache
                            times[name].append(took)
                for setting, value in zip(SETTINGS, defaults):
                    setattr(queries.reads, setting, value)
                schema.RELS["HAS_ENTRY"] = has_entry
                gem_p50 = statistics.median(times["gem"])
                for name, values in times.items():
                    p50 = statistics.median(values)
                    print(f"{size:>7} {size * args.fields:>8} {count * args.fields:>6} {name:>14} "
                          f"{p50 * 1e3:>9.2f} {p50 / gem_p50:>6.2f}x", flush=True)
            mem.close()


if __name__ == "__main__":
    sys.exit(main())
