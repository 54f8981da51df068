"""Where a memory's RSS goes: row cache, derived state per component, the engine.

    python bench/footprint.py [--sizes 10000,30000] [--fields 10] [--engine kuzu]
                              [--buffer-pool-mb N] [--audit] [--variants "default;arena=0"]

One child process per size grows a memory (batch ingest, as bench/scale.py does), updates
some of it, runs structured and free-text retrieves (the first free-text one timed apart:
it derives every unit's search document), and then measures: the process's RSS now, the
bytes of Python objects and numpy arrays each part of gem holds (walked with
sys.getsizeof, arrays by nbytes, shared objects counted once, in the order listed), what
glibc's allocator holds, and what is left: the engine's buffer pool, its other memory and
the interpreter. That rest is attributed by mapping (/proc/self/smaps): the engine's buffer
pool region, the engine's library, other libraries, the main heap, thread arenas, thread
stacks, other anonymous memory (the interpreter's object arenas, numpy's and the engine's large
allocations). Free-text p50/p95 and recall@10 of the unit vector index against an exact scan
are printed too; `--audit` ends with a full audit (the pool at its fullest). `--variants` runs
one child per setting side by side (see SETTINGS). A benchmark, not a test: nothing asserts a
time.

    python bench/footprint.py --sizes 10000 --audit --variants "arena=0;default"
"""
from __future__ import annotations

import argparse
import ctypes
import gc
import json
import os
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from common import rss_now_mb  # noqa: E402

MB = 1 << 20
WORDS = ("alpha", "budget", "launch", "design", "review", "hiring", "roadmap", "pricing", "audit",
         "migration", "onboarding", "security", "analytics", "support", "research", "partner")


def malloc_held() -> float:
    """Bytes glibc's malloc hands out now (arenas in use + mmapped chunks), in MB."""
    class MallInfo2(ctypes.Structure):
        _fields_ = [(n, ctypes.c_size_t) for n in ("arena", "ordblks", "smblks", "hblks",
                                                    "hblkhd", "usmblks", "fsmblks", "uordblks",
                                                    "fordblks", "keepcost")]
    libc = ctypes.CDLL("libc.so.6")
    libc.mallinfo2.restype = MallInfo2
    m = libc.mallinfo2()
    return (m.uordblks + m.hblkhd) / MB


ENGINE_SO = ("/kuzu/_kuzu", "/ladybug/_lbug")
GIB = 1 << 30
ARENA = 64 << 20  # glibc's HEAP_MAX_SIZE on 64-bit: a thread arena's heap is 64 MiB aligned


def default_pool() -> int:
    """The engines' default buffer pool: 80% of the physical memory."""
    with open("/proc/meminfo") as f:
        total = next(int(line.split()[1]) for line in f if line.startswith("MemTotal:")) * 1024
    return int(total * 0.8)


def smaps(pool: int) -> dict[str, float]:
    """Resident MB per kind of mapping in /proc/self/smaps, for an engine whose buffer pool is
    `pool` bytes.

    Anonymous mappings are told apart by shape: the engine's buffer pool is one virtual region
    reserved up front (pages resident once read), at least the pool's size; its eviction queue
    is one array of 8 bytes per 4 KiB page of the pool, all of it touched when the database
    opens; a thread's stack is the stack rlimit in size; a glibc thread arena's heap starts
    64 MiB aligned and is at most 64 MiB; what is left is the interpreter's small-object arenas
    (most Python objects), malloc's mmapped chunks (numpy arrays, large engine allocations)."""
    import resource
    stack = resource.getrlimit(resource.RLIMIT_STACK)[0]
    queue = pool // 512
    out = dict.fromkeys(("engine buffer pool", "engine eviction queue (pool/512)", "engine .so",
                         "other .so + python", "other files", "[heap] (main arena)",
                         "thread arenas", "thread stacks",
                         "other anonymous (Python objects, numpy)"), 0.0)
    start = end = 0
    name = ""
    with open("/proc/self/smaps") as f:
        for line in f:
            head = line.split(None, 5)
            if "-" in head[0] and not head[0].endswith(":"):
                lo, hi = (int(x, 16) for x in head[0].split("-"))
                start, end = lo, hi
                name = head[5].strip() if len(head) > 5 else ""
                continue
            if head[0] != "Rss:":
                continue
            kb = int(head[1]) / 1024
            size = end - start
            if any(k in name for k in ENGINE_SO):
                kind = "engine .so"
            elif name.startswith("/") and (".so" in name or "python" in name.rsplit("/", 1)[-1]):
                kind = "other .so + python"
            elif name.startswith("/"):
                kind = "other files"
            elif name == "[heap]":
                kind = "[heap] (main arena)"
            elif name == "[stack]" or (not name and stack > 0 and size == stack):
                kind = "thread stacks"
            elif name:
                kind = "other files"  # [vdso], [vvar]: a page or two
            elif size >= min(pool, GIB):
                kind = "engine buffer pool"
            elif queue <= size <= queue + (64 << 10):
                kind = "engine eviction queue (pool/512)"
            elif start % ARENA == 0 and size <= ARENA:
                kind = "thread arenas"
            else:
                kind = "other anonymous (Python objects, numpy)"
            out[kind] += kb
    return out


def pymalloc() -> tuple[float, float]:
    """(MB of the interpreter's small-object arenas, MB of the blocks in use in them): the
    arenas are mmapped apart from malloc, so they sit in "other anonymous"."""
    with tempfile.TemporaryFile("w+") as f:
        sys.stderr.flush()
        saved = os.dup(2)
        os.dup2(f.fileno(), 2)
        try:
            sys._debugmallocstats()
        finally:
            os.dup2(saved, 2)
            os.close(saved)
        f.seek(0)
        stats = {k.strip(): v for k, _, v in (line.partition("=") for line in f)}
    arenas = int(stats["# arenas allocated current"].replace(",", "")) * (1 << 20)
    used = int(stats["# bytes in allocated blocks"].replace(",", ""))
    return arenas / MB, used / MB


def trim() -> None:
    gc.collect()
    ctypes.CDLL("libc.so.6").malloc_trim(0)


class Sizer:
    """Deep size of objects, each object counted once across calls."""

    def __init__(self) -> None:
        import numpy as np
        self.np = np
        self.seen: set[int] = set()

    def __call__(self, *objs) -> float:
        np = self.np
        total = 0
        stack = list(objs)
        while stack:
            o = stack.pop()
            if id(o) in self.seen or o is None or isinstance(o, (bool, type)):
                continue
            self.seen.add(id(o))
            if isinstance(o, np.ndarray):
                base = o
                while isinstance(base.base, np.ndarray):
                    base = base.base
                if id(base) in self.seen and base is not o:
                    continue
                self.seen.add(id(base))
                total += base.nbytes if base.base is None else 0  # views of a buffer: below
                if base.base is not None and id(base.base) not in self.seen:
                    self.seen.add(id(base.base))
                    total += sys.getsizeof(base.base)
                continue
            total += sys.getsizeof(o)
            if isinstance(o, dict):
                stack.extend(o.keys())
                stack.extend(o.values())
            elif isinstance(o, (list, tuple, set, frozenset)):
                stack.extend(o)
            elif hasattr(o, "__dict__") and not callable(o):
                stack.append(vars(o))
            elif hasattr(o, "__slots__"):
                stack.extend(getattr(o, s) for s in o.__slots__ if hasattr(o, s))
        return total / MB


# What a variant may set (--variants "arena=0;arena=1,cache_mb=64"): each patches one default of
# gem before the memory opens, so a change and the default it replaces run side by side.
SETTINGS = {
    "arena": ("gem.store.allocator", "ARENA_MAX"),  # malloc arenas (0: glibc's own 8 per core)
    "cache_mb": ("gem.state.cache", "DEFAULT_BUDGET"),  # the row cache's budget
    "defpool_mb": ("gem.store.graph", "DEFAULT_BUFFER_POOL"),  # pool when the caller sizes none
}


def apply_variant(variant: str) -> dict[str, int]:
    import importlib
    settings = dict(kv.split("=") for kv in variant.split(",") if kv and kv != "default")
    out = {}
    for key, value in settings.items():
        if key == "pool_mb":
            out["buffer_pool_mb"] = int(value)
            continue
        if key == "bigrams":  # the hashing embedder's cache of word pairs, in entries
            from functools import lru_cache

            from gem import embed
            embed._bigram_slot = lru_cache(maxsize=int(value))(embed._bigram_slot.__wrapped__)
            continue
        module, name = SETTINGS[key]
        number = int(value) * MB if key.endswith("_mb") else int(value)
        setattr(importlib.import_module(module), name, number)
        if key == "cache_mb":
            from gem.state.cache import CommittedCache
            CommittedCache.__init__.__defaults__ = (number,) + \
                CommittedCache.__init__.__defaults__[1:]
    return out


def child(n: int, fields: int, engine: str, buffer_pool_mb: int | None,
          variant: str = "default", audit: bool = False) -> dict:
    import numpy as np

    import gem
    from common import Clock

    buffer_pool_mb = apply_variant(variant).get("buffer_pool_mb", buffer_pool_mb)

    rng = random.Random(7)
    out: dict = {"topics": n, "variant": variant}
    base_rss = rss_now_mb()
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "gov.db")
        kwargs = {} if buffer_pool_mb is None else {"buffer_pool_size": buffer_pool_mb * MB}
        mem = gem.open(path, clock=Clock(), engine=engine, **kwargs)
        batch_topics = max(1, 2000 // fields)
        topics = 0
        t0 = time.perf_counter()
        while topics < n:
            size = min(batch_topics, n - topics)
            mem.ingest([gem.Fact(f"Topic {topics + i} {WORDS[(topics + i) % len(WORDS)]}",
                                 f"field {j}",
                                 f"value {topics + i}.{j} {WORDS[(i * 7 + j) % len(WORDS)]}")
                        for i in range(size) for j in range(fields)])
            topics += size
        for _ in range(5):
            pairs = rng.sample(range(topics * fields), min(2000, topics * fields))
            mem.ingest([gem.Fact(f"Topic {p // fields} {WORDS[p // fields % len(WORDS)]}",
                                 f"field {p % fields}", f"updated {rng.random():.6f}")
                        for p in pairs])
        out["grow_s"] = time.perf_counter() - t0
        out["facts"] = n * fields + 10_000
        times = []
        for t in (rng.randrange(topics) for _ in range(220)):
            t0 = time.perf_counter()
            mem.retrieve(topic=f"Topic {t} {WORDS[t % len(WORDS)]}", fields=["field 2"])
            times.append(time.perf_counter() - t0)
        times = sorted(times[20:])
        out["structured_p50_ms"] = times[len(times) // 2] * 1000
        out["structured_p95_ms"] = times[int(len(times) * 0.95)] * 1000
        t0 = time.perf_counter()
        mem.retrieve("value 3 stale summaries refresh")
        out["first_text_ms"] = (time.perf_counter() - t0) * 1000
        times = []
        for t in (rng.randrange(topics) for _ in range(220)):
            t0 = time.perf_counter()
            mem.retrieve(f"value {t}.2 {WORDS[t % len(WORDS)]}", k=5)
            times.append(time.perf_counter() - t0)
        times = sorted(times[20:])
        out["text_p50_ms"] = times[len(times) // 2] * 1000
        out["text_p95_ms"] = times[int(len(times) * 0.95)] * 1000

        shared = mem._engine.shared
        derived = shared.derived
        vec = derived.scope("default").unit_vectors
        queries = [f"value {t}.{rng.randrange(fields)} {WORDS[t % len(WORDS)]}"
                   for t in (rng.randrange(topics) for _ in range(100))]
        qv = derived.embedder.embed(queries)
        hits = total = 0
        for q in qv:
            got = {d for d, _ in vec.search(q, 10)}
            exact = vec.search(q, None)
            if not exact:
                continue
            kth = exact[min(9, len(exact) - 1)][1]
            hits += sum(1 for d in got if dict(exact)[d] >= kth)
            total += min(10, len(exact))
        out["unit_recall10"] = hits / max(1, total)

        gc.collect()
        out["rss_untrimmed_mb"] = rss_now_mb()  # what the process holds as gem leaves it
        t0 = time.perf_counter()
        trim()
        out["trim_ms"] = (time.perf_counter() - t0) * 1000  # what a trim costs on this heap
        out["rss_mb"] = rss_now_mb()
        pool = mem._engine.store.opened_with.get("buffer_pool_size") or default_pool()
        out["smaps"] = smaps(pool)
        out["pool_mb"] = pool / MB
        try:  # what the engine's buffer manager counts against the pool (pages, indexes, queries)
            with mem._engine.store.reading() as tx:
                out["pool_used_mb"] = tx.run("CALL bm_info() RETURN *")[0][1] / MB
        except Exception:  # an engine without bm_info
            pass
        out["base_rss_mb"] = base_rss
        out["malloc_mb"] = malloc_held()
        out["pymalloc_arenas_mb"], out["pymalloc_used_mb"] = pymalloc()
        size = Sizer()
        cache = shared.cache
        parts: dict[str, float] = {}
        parts["row cache"] = size(cache.rows, cache.children, cache.edges)
        out["row_cache_counted_mb"] = cache.nbytes / MB  # what the cache thinks it holds
        for name, s in derived.scopes.items():
            units = s._units
            parts["unit vectors (+codes)"] = size(units.vectors) if units else 0.0
            parts["unit lexical"] = size(units.lexical) if units else 0.0
            parts["unit docs + valid"] = size(units.docs, units.valid) if units else 0.0
            parts["topic summaries + lexical + vectors"] = size(s.summaries, s.lexical, s.vectors)
            parts["names + title vectors"] = size(s.names, s.title_vectors)
            parts["salience tables"] = size(s.topics, s.fields, s.episodes)
            parts["fields_by_topic, labels, touched_by, ..."] = size(
                s._fields_by_topic, s.field_labels, s.touched_by, s.edge_holders, s.stale,
                s.stale_units, s.unpaired, s.open_flags, s.said, s.counters)
        parts["pending salience"] = size(derived.pending_salience)
        parts["embedder cache"] = size(derived.embedder)
        python_total = sum(parts.values())
        out["parts"] = parts
        out["rest_mb"] = out["rss_mb"] - python_total
        # What dropping the row cache gives back to the system (it refills on demand).
        before = rss_now_mb()
        cache.clear()
        trim()
        out["row_cache_rss_drop_mb"] = before - rss_now_mb()
        out["db_mb"] = sum(f.stat().st_size for f in Path(d).glob("gov.db*") if f.is_file()) / MB
        if audit:  # reads every row: the engine's pool at its fullest
            t0 = time.perf_counter()
            try:
                ok = mem.audit(full=True).ok
            except gem.GemError as exc:  # a pool too small fails it: say so, measure the rest
                ok = False
                out["audit_error"] = str(exc)[:300]
            out["audit_s"] = time.perf_counter() - t0 if ok else float("nan")
            gc.collect()
            out["rss_after_audit_mb"] = rss_now_mb()
            out["pool_after_audit_mb"] = smaps(pool)["engine buffer pool"]
        mem.close()
        del np
    return out


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--sizes", default="10000,30000")
    p.add_argument("--fields", type=int, default=10)
    p.add_argument("--engine", default="kuzu")
    p.add_argument("--buffer-pool-mb", type=int, default=None)
    p.add_argument("--variants", default="default",
                   help="';'-separated settings to compare, each 'default' or key=value,... "
                        f"with keys {', '.join([*SETTINGS, 'pool_mb', 'bigrams'])}")
    p.add_argument("--audit", action="store_true", help="end with a full audit")
    p.add_argument("--child", action="store_true")
    args = p.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    if args.child:
        print(json.dumps(child(sizes[0], args.fields, args.engine, args.buffer_pool_mb,
                               args.variants, args.audit)))
        return
    results = []
    for n in sizes:
        for variant in args.variants.split(";"):
            cmd = [sys.executable, __file__, "--child", "--sizes", str(n), "--fields",
                   str(args.fields), "--engine", args.engine, "--variants", variant]
            cmd += ["--audit"] if args.audit else []
            if args.buffer_pool_mb is not None:
                cmd += ["--buffer-pool-mb", str(args.buffer_pool_mb)]
            done = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT)
            if done.returncode != 0:  # a setting that fails a write: said, and left out
                print(f"{n} {variant}: failed\n{done.stderr[-2000:]}", file=sys.stderr)
                continue
            results.append(json.loads(done.stdout.strip().splitlines()[-1]))
            print(json.dumps(results[-1]), file=sys.stderr, flush=True)
    if not results:
        sys.exit("every run failed")
    labels = list(results[0]["parts"])
    print(f"{'MB':<44}" + "".join(f"{r['topics']:>12,}" for r in results))
    print(f"{'variant':<44}" + "".join(f"{'v' + str(i):>12}" for i in range(len(results))))
    for i, r in enumerate(results):
        print(f"  v{i}: {r['variant']}")
    for label in labels:
        print(f"{label:<44}" + "".join(f"{r['parts'][label]:>12.1f}" for r in results))
    print("smaps: resident MB by mapping")
    for label in results[0]["smaps"]:
        print(f"  {label:<42}" + "".join(f"{r['smaps'][label]:>12.1f}" for r in results))
    for key in ("rest_mb", "rss_untrimmed_mb", "rss_mb", "malloc_mb", "pymalloc_arenas_mb",
                "pymalloc_used_mb", "pool_mb", "pool_used_mb", "base_rss_mb",
                "row_cache_counted_mb", "row_cache_rss_drop_mb", "trim_ms", "first_text_ms", "structured_p50_ms",
                "structured_p95_ms", "text_p50_ms", "text_p95_ms", "unit_recall10", "grow_s",
                "db_mb", "audit_s", "rss_after_audit_mb", "pool_after_audit_mb"):
        if key in results[0]:
            print(f"{key:<44}" + "".join(f"{r.get(key, float('nan')):>12.2f}" for r in results))
    for i, r in enumerate(results):
        if "audit_error" in r:
            print(f"  v{i} audit failed: {r['audit_error']}")


if __name__ == "__main__":
    main()
