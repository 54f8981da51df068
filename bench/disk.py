"""Where the bytes on disk go: bench/scale.py's workload (N topics x 10 fields, 30 batches of
2,000 updates, 200 single facts, a forgetting pass after 45 idle days), then, after close, the
bytes per fact of every file, of every table inside the engine (the pages its column
chunks hold, and each table imported alone), and of the log's parts.

    python bench/disk.py [--topics 10000] [--engines kuzu,ladybug] [--keep DIR]

Per table: each table's rows (exported by the engine) imported alone into a fresh database;
a relationship table is measured with its two node tables, less theirs. "compacted" is every
table imported into one fresh database: what the live rows take without the pages that
updates left behind. A benchmark, not a test.
"""
from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import sys
import tempfile

from common import Clock, disk_bytes, exit_status, side_by_side
from scale import new_facts, single_facts, update_facts


def build(path: str, engine: str, topics: int, fields: int, rounds: int) -> int:
    """The scale workload into a new memory at `path`; the number of facts ingested."""
    import gem
    rng = random.Random(7)
    clock = Clock()
    mem = gem.open(path, clock=clock, engine=engine)
    facts = 0
    step = max(1, 2000 // fields)
    for start in range(0, topics, step):
        batch = [gem.Fact(*f) for f in new_facts(start, min(step, topics - start), fields)]
        mem.ingest(batch)
        facts += len(batch)
    for _ in range(rounds):
        batch = [gem.Fact(*f) for f in update_facts(rng, topics, fields)]
        mem.ingest(batch)
        facts += len(batch)
    for single in single_facts(rng, topics):
        mem.ingest(gem.Fact(*single))
        facts += 1
    mem.audit(full=True)
    clock.advance(days=45)
    mem.forget()
    mem.close()
    return facts


def files(path: str) -> dict[str, int]:
    base, name = os.path.dirname(path), os.path.basename(path)
    out: dict[str, int] = {}
    for entry in sorted(os.listdir(base)):
        if not entry.startswith(name):
            continue
        full = os.path.join(base, entry)
        if os.path.isdir(full):
            for f in sorted(os.listdir(full)):
                kind = f.split("-")[0].split(".")[0]
                out[f"{entry}/{kind}"] = out.get(f"{entry}/{kind}", 0) + os.path.getsize(os.path.join(full, f))
        else:
            out[entry] = os.path.getsize(full)
    return out


def log_parts(path: str, engine: str) -> dict[str, int]:
    """Bytes of each column of the transition log (UTF-8 lengths of its strings)."""
    from gem.store import open_store
    from gem.store.schema import TABLES
    store = open_store(path, engine)
    out: dict[str, int] = {}
    try:
        with store.reading() as tx:
            for column in TABLES["Transition"].columns:
                rows = tx.run(f"MATCH (t:Transition) RETURN t.{column}")
                out[column] = sum(len(str(r[0]).encode()) if r[0] is not None else 0 for r in rows)
            out["records"] = len(rows)
    finally:
        store.close()
    return out


def live_pages(path: str, engine: str) -> dict[str, int]:
    """Bytes of the pages the engine's column chunks hold (CALL storage_info), per table and
    per column of the log; what the file holds besides them is its primary-key indexes,
    metadata and free pages."""
    from gem.store.schema import RELS, TABLES
    module = __import__(engine)
    db = module.Database(path, read_only=True)
    conn = module.Connection(db)
    out: dict[str, int] = {}
    try:
        for name in (*TABLES, *RELS):
            result = conn.execute(f"CALL storage_info('{name}') RETURN column_name, num_pages")
            while result.has_next():
                column, pages = result.get_next()
                out[name] = out.get(name, 0) + pages * 4096
                if name == "Transition" and column.endswith("_data"):
                    out[f"Transition.{column}"] = pages * 4096
    finally:
        conn.close()
        db.close()
    out["not live (indexes, metadata, free pages)"] = \
        os.path.getsize(path) - sum(v for k, v in out.items() if "." not in k)
    return out


def column_bytes(path: str, engine: str) -> dict[str, dict[str, int]]:
    """Per node table: rows and the UTF-8 bytes of each string column (lists joined)."""
    from gem.store import open_store
    from gem.store.schema import TABLES
    store = open_store(path, engine)
    out: dict[str, dict[str, int]] = {}
    try:
        with store.reading() as tx:
            for t in TABLES.values():
                if t.name == "Transition":
                    continue
                cols: dict[str, int] = {}
                for column in t.columns:
                    rows = tx.run(f"MATCH (x:{t.name}) RETURN x.{column}")
                    cols["rows"] = len(rows)
                    if rows and isinstance(next((r[0] for r in rows if r[0] is not None), None), (str, list)):
                        cols[column] = sum(len(json.dumps(r[0]) if isinstance(r[0], list) else r[0].encode())
                                           for r in rows if r[0] is not None)
                out[t.name] = cols
    finally:
        store.close()
    return out


def per_table(path: str, engine: str, work: str) -> dict[str, int]:
    """Each table's rows copied out (parquet) and into a fresh database alone (relationships
    with their endpoints, less the endpoints'), and all of them together ("compacted")."""
    from gem.store.schema import RELS, TABLES, ddl
    module = __import__(engine)
    db = module.Database(path)
    conn = module.Connection(db)
    copies = {}
    for t in TABLES.values():
        out_file = os.path.join(work, f"{t.name}.parquet")
        cols = ", ".join(f"x.{c}" for c in t.columns)
        if conn.execute(f"MATCH (x:{t.name}) RETURN count(*)").get_next()[0]:
            conn.execute(f"COPY (MATCH (x:{t.name}) RETURN {cols}) TO '{out_file}'")
            copies[t.name] = f"COPY {t.name} FROM '{out_file}'"
    for r in RELS.values():
        out_file = os.path.join(work, f"{r.name}.parquet")
        src, dst = TABLES[r.source].key, TABLES[r.target].key
        cols = "".join(f", r.{c}" for c in r.columns)
        if conn.execute(f"MATCH ()-[r:{r.name}]->() RETURN count(*)").get_next()[0]:
            conn.execute(f"COPY (MATCH (a:{r.source})-[r:{r.name}]->(b:{r.target}) "
                         f"RETURN a.{src}, b.{dst}{cols}) TO '{out_file}'")
            copies[r.name] = f"COPY {r.name} FROM '{out_file}'"
    conn.close()
    db.close()

    def size_with(tables: list[str]) -> int:
        target = os.path.join(work, "t.db")
        fresh = module.Database(target)
        c = module.Connection(fresh)
        for s in ddl():
            c.execute(s)
        for t in tables:
            c.execute(copies[t])
        c.execute("CHECKPOINT")
        c.close()
        fresh.close()
        size = sum(os.path.getsize(target + s) for s in ("", ".wal") if os.path.exists(target + s))
        for s in ("", ".wal"):
            if os.path.exists(target + s):
                os.remove(target + s)
        return size

    empty = size_with([])
    out = {"empty schema": empty}
    for t in TABLES:
        if t in copies:
            out[t] = size_with([t]) - empty
    for r in RELS.values():
        if r.name in copies:
            ends = sorted({r.source, r.target})
            out[r.name] = size_with([*ends, r.name]) - sum(out.get(e, 0) for e in ends) - empty
    out["compacted"] = size_with(list(copies))
    return out


def child(engine: str, topics: int, fields: int, rounds: int, keep: str | None,
          quick: bool = False, checkpoint_mb: int | None = None) -> dict:
    if checkpoint_mb is not None:
        from gem.store import graph
        graph.CHECKPOINT_THRESHOLD[engine] = checkpoint_mb << 20
    with tempfile.TemporaryDirectory(dir=keep) as d:
        path = os.path.join(d, "gov.db")
        facts = build(path, engine, topics, fields, rounds)
        out: dict = {"engine": engine, "facts": facts, "total": disk_bytes(path), "files": files(path),
                     "tables": {}, "columns": {}}
        out["log"] = log_parts(path, engine)
        out["pages"] = live_pages(path, engine)
        if not quick:
            out["columns"] = column_bytes(path, engine)
            work = os.path.join(d, "work")
            os.mkdir(work)
            out["tables"] = per_table(path, engine, work)
        if keep:
            shutil.copytree(d, os.path.join(keep, f"{engine}-{topics}"), dirs_exist_ok=True)
    return out


def table(results: dict[str, dict]) -> str:
    lines = []
    for e, r in results.items():
        n = r["facts"]
        lines.append(f"\n{e}: {n:,} facts, {r['total'] / n:,.0f} B/fact on disk")
        for name, b in r["files"].items():
            lines.append(f"  file {name:<40}{b / n:>10,.0f}")
        for name, b in r.get("pages", {}).items():
            lines.append(f"  pages {name:<39}{b / n:>10,.0f}")
        for name, b in r["tables"].items():
            lines.append(f"  table {name:<39}{b / n:>10,.0f}")
        logs = r["log"]
        lines.append(f"  log: {logs['records']:,} records")
        for name, b in logs.items():
            if name != "records":
                lines.append(f"  log {name:<41}{b / n:>10,.0f}")
        for t, cols in r["columns"].items():
            parts = ", ".join(f"{c} {b / n:,.0f}" for c, b in cols.items() if c != "rows" and b / n >= 1)
            lines.append(f"  {t} ({cols.get('rows', 0):,} rows): {parts}")
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--topics", type=int, default=10000)
    parser.add_argument("--fields", type=int, default=10)
    parser.add_argument("--updates", type=int, default=30)
    parser.add_argument("--engines", default="kuzu,ladybug")
    parser.add_argument("--keep", help="copy each engine's database here")
    parser.add_argument("--quick", action="store_true", help="files and the log only")
    parser.add_argument("--checkpoint", type=int, help="the engine's checkpoint threshold, MiB")
    parser.add_argument("--child", choices=["kuzu", "ladybug"])
    parser.add_argument("--json", help="also write the results to this file")
    args = parser.parse_args()
    if args.child:
        print(json.dumps(child(args.child, args.topics, args.fields, args.updates, args.keep,
                              args.quick, args.checkpoint)))
        return 0
    results = side_by_side(__file__, ["--topics", str(args.topics), "--fields", str(args.fields),
                                      "--updates", str(args.updates)]
                           + (["--keep", args.keep] if args.keep else [])
                           + (["--quick"] if args.quick else [])
                           + (["--checkpoint", str(args.checkpoint)] if args.checkpoint else []),
                           tuple(args.engines.split(",")))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=1)
    print(table(results))
    return exit_status(results, args.engines.split(","))


if __name__ == "__main__":
    sys.exit(main())
