"""Derived indexes and the embedder, old against new, side by side in one run.

A benchmark, not a test: it prints tables and asserts nothing. Run from a checkout:

    python bench/vectors.py                       # 10k and 100k
    python bench/vectors.py --sizes 10000 100000 1000000
    python bench/vectors.py --only embed search   # some sections only
    python bench/vectors.py --only search --sizes 100000 1000000 --vectors-from DIR

The search section runs --baseline-index's gem/index (439e89b: 2% of rows re-scored) as
"old" beside today's, and reports each query's CPU time beside its wall time.

"old" is gem/index.py and gem/embed.py as of --baseline (the commit before this work), read
with `git show` and run in this same process, so both sides see the same machine load;
old and new runs are interleaved. All of gem's math runs on one BLAS thread (as the engine
will run it); the first table shows what the default multi-threaded BLAS costs instead.

Data: "random" are random unit vectors (the worst case for an approximate index: nothing
clusters); "titles" are `Project NNN <1-4 words>` and "sentences" are word chains drawn
from the turns of ../shared/data/locomo-dev.json (read by path; titles fall back to a
synthetic vocabulary if it is absent), embedded with HashingEmbedder(256). Queries are
fresh titles and the LoCoMo questions. Recall@10 counts a returned document as found if
its exact score reaches the exact 10th best (so ties at the 10th place do not count as
misses).
"""
from __future__ import annotations

import argparse
import atexit
import gc
import importlib
import io
import json
import os
import random
import re
import statistics
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time
import types
from collections import Counter
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # run from a checkout

from gem import embed as new_embed  # noqa: E402
from gem.embed import HashingEmbedder  # noqa: E402
from gem.index import LexicalIndex, VectorIndex  # noqa: E402
from gem.numeric import single_threaded  # noqa: E402

BASELINE = "a3fbc48"  # main before the derived-index work
SKETCHES = "4b5d922"  # main with float sketches, before sign codes and sparse rows
BASELINE_INDEX = "439e89b"  # main before the pool grew with sqrt(n) (2% re-scored)
LOCOMO = Path(os.environ.get("GEM_LOCOMO") or ROOT.parent / "shared" / "data" / "locomo-dev.json")
DIM = 256
K = 10


# ---------------------------------------------------------------------- helpers
def old_module(rev: str, path: str, name: str, package: str | None = None
               ) -> types.ModuleType | None:
    """A module as of git revision rev; `package` resolves its relative imports (against
    today's modules of that package)."""
    try:
        src = subprocess.run(["git", "-C", str(ROOT), "show", f"{rev}:{path}"],
                             capture_output=True, text=True, check=True).stdout
    except (OSError, subprocess.CalledProcessError):
        return None
    mod = types.ModuleType(name)
    mod.__package__ = package
    try:
        exec(compile(src, f"{rev}:{path}", "exec"), mod.__dict__)
    except ImportError:
        return None
    return mod


def old_package(rev: str, path: str, name: str) -> types.ModuleType | None:
    """The package at `path` (e.g. gem/index) as of git revision rev, imported as `name`, so
    its modules' relative imports (vector.py's .codes and .rows) get that revision's too."""
    root = tempfile.mkdtemp(prefix="gem-bench-")
    atexit.register(shutil.rmtree, root, True)
    try:
        archive = subprocess.run(["git", "-C", str(ROOT), "archive", rev, path],
                                 capture_output=True, check=True).stdout
    except (OSError, subprocess.CalledProcessError):
        return None
    tarfile.open(fileobj=io.BytesIO(archive)).extractall(root, filter="data")
    os.rename(os.path.join(root, path), os.path.join(root, name))
    sys.path.insert(0, root)
    try:
        return importlib.import_module(f"{name}.vector")
    except ImportError:
        return None
    finally:
        sys.path.remove(root)


def held_bytes(ix) -> int:
    """Bytes of the arrays a VectorIndex holds: today's (nbytes), or one with float sketches."""
    if hasattr(ix, "nbytes"):
        return ix.nbytes
    sketches = getattr(ix, "_sketches", None)
    return ix._m.nbytes + (sketches.rows.nbytes if sketches is not None else 0)


def ms(seconds: float) -> str:
    return f"{seconds * 1e3:9.2f}"


def ratio(old: float | None, new: float) -> str:
    return f"{old / new:7.1f}x" if old is not None and new > 0 else "      -"


def timed(fn, *args) -> float:
    t0 = time.perf_counter()
    fn(*args)
    return time.perf_counter() - t0


def timed_cpu(fn) -> tuple[float, float]:
    """(wall, this thread's CPU) seconds of fn(): on a loaded machine the wall time of a
    10 ms call includes other processes' time slices, its CPU time does not."""
    w0, c0 = time.perf_counter(), time.thread_time()
    fn()
    return time.perf_counter() - w0, time.thread_time() - c0


def pct(xs: list[float], p: float) -> float:
    return float(np.percentile(xs, p))


def table(title: str, header: list[str], rows: list[list[str]]) -> None:
    widths = [max(len(h), *(len(r[i]) for r in rows)) for i, h in enumerate(header)]
    print(f"\n{title}")
    line = "  ".join(h.rjust(w) if i else h.ljust(w) for i, (h, w) in enumerate(zip(header, widths)))
    print(line)
    print("-" * len(line))
    for r in rows:
        print("  ".join(c.rjust(w) if i else c.ljust(w) for i, (c, w) in enumerate(zip(r, widths))))
    sys.stdout.flush()


# ---------------------------------------------------------------------- data
def _letters(n: int) -> str:
    """A word for the number n, in letters only (the corpus splits text on letters)."""
    out = ""
    while True:
        n, r = divmod(n, 26)
        out = chr(97 + r) + out
        if n == 0:
            return "w" + out


class Corpus:
    def __init__(self, seed: int) -> None:
        self.rng = random.Random(seed)
        if LOCOMO.exists():
            data = json.loads(LOCOMO.read_text())
            self.turns = [t["text"] for c in data for k, v in c["conversation"].items()
                          if isinstance(v, list) for t in v]
            self.questions = [q["question"] for c in data for q in c["qa"]]
        else:
            self.turns, self.questions = [], []
        if not self.turns:  # no LoCoMo here: Zipf-like made-up words, in made-up turns
            made_up = [_letters(int(self.rng.paretovariate(1.0))) for _ in range(50_000)]
            self.turns = [" ".join(self.rng.choice(made_up) for _ in range(self.rng.randint(5, 20)))
                          for _ in range(3_000)]
        words = [w for t in self.turns for w in re.findall(r"[a-z']+", t.lower())]
        common = {w for w, _ in Counter(words).most_common(150)}
        self.content = [w for w in words if w not in common]
        self.next_word: dict[str, list[str]] = {}
        for t in self.turns:
            ws = re.findall(r"[A-Za-z']+", t)
            for a, b in zip(["<s>", *ws], [*ws, "</s>"]):
                self.next_word.setdefault(a, []).append(b)
        if not self.questions:
            self.questions = self.sentences(500)

    def titles(self, n: int) -> list[str]:
        r = self.rng
        return [f"Project {r.randrange(1000):03d} "
                + " ".join(r.choice(self.content) for _ in range(r.randint(1, 4)))
                for _ in range(n)]

    def sentences(self, n: int) -> list[str]:
        r, out = self.rng, []
        while len(out) < n:
            w, ws = "<s>", []
            while len(ws) < 30:
                w = r.choice(self.next_word[w])
                if w == "</s>":
                    break
                ws.append(w)
            if len(ws) >= 4:
                out.append(" ".join(ws))
        return out

    def bm25_docs(self, n: int) -> list[str]:
        # ~30 words each, drawn with corpus frequencies
        words = [w for t in self.turns for w in re.findall(r"[a-z']+", t.lower())] or self.content
        r = self.rng
        return [" ".join(r.choice(words) for _ in range(r.randint(20, 40))) for _ in range(n)]


def unit_rows(rng: np.random.Generator, n: int) -> np.ndarray:
    out = np.empty((n, DIM), dtype=np.float32)
    for a in range(0, n, 65536):
        m = rng.standard_normal((min(65536, n - a), DIM)).astype(np.float32)
        m /= np.linalg.norm(m, axis=1, keepdims=True)
        out[a : a + m.shape[0]] = m
    return out


def embed_all(texts: list[str]) -> np.ndarray:
    e = HashingEmbedder(DIM, cache_size=0)
    return np.concatenate([e.embed(texts[a : a + 20000]) for a in range(0, len(texts), 20000)])


# ---------------------------------------------------------------------- sections
def bench_threads(old_index, rng, n: int) -> None:
    from threadpoolctl import ThreadpoolController

    def block():
        with single_threaded():
            pass

    outer = min(timed(lambda: [block() for _ in range(20000)]) for _ in range(3)) / 20000
    with single_threaded():
        nested = min(timed(lambda: [block() for _ in range(20000)]) for _ in range(3)) / 20000
    blas = ThreadpoolController().select(user_api="blas").info()
    threads = blas[0]["num_threads"] if blas else "?"
    vecs = unit_rows(rng, n)
    qs = unit_rows(rng, 100)
    rows = []
    if old_index is not None:
        ix = old_index.VectorIndex(DIM)
        ix.upsert_many([f"t{i}" for i in range(n)], vecs)
        multi, single = [], []
        for q in qs:  # interleaved
            multi.append(timed(ix.search, q, K))
            with single_threaded():
                single.append(timed(ix.search, q, K))
        rows.append([f"old search k=10, {n:,}, BLAS threads={threads}", ms(statistics.median(multi)),
                     ms(pct(multi, 95)), ""])
        rows.append([f"old search k=10, {n:,}, single_threaded()", ms(statistics.median(single)),
                     ms(pct(single, 95)), ratio(statistics.median(multi), statistics.median(single))])
    table("single_threaded(): cost of the block itself, and what it saves",
          ["operation", "p50 ms", "p95 ms", "speedup"],
          [["outermost block (enter+exit)", f"{outer * 1e3:9.4f}", "", ""],
           ["nested block", f"{nested * 1e3:9.4f}", "", ""], *rows])


def bench_embed(old_embed, corpus: Corpus, reps: int, titles: int) -> None:
    sentences = max(1, titles // 5)
    sets = [(f"{titles:,} short titles", corpus.titles(titles))]
    if corpus.turns:
        sets.append((f"{sentences:,} sentences", corpus.turns[:sentences]))
    else:
        sets.append((f"{sentences:,} sentences", corpus.sentences(sentences)))
    rows = []
    for name, texts in sets:
        res: dict[str, list[float]] = {k: [] for k in
                                       ("old cold", "old warm", "new cold", "new warm words",
                                        "new warm cached", "new one by one")}
        for _ in range(reps):
            if old_embed is not None:
                old_embed._slot.cache_clear()
                e = old_embed.HashingEmbedder(DIM)
                res["old cold"].append(timed(e.embed, texts))
                res["old warm"].append(timed(e.embed, texts))
            for f in (new_embed._word_slots, new_embed._bigram_slot, new_embed._trigram_slot):
                f.cache_clear()
            e = HashingEmbedder(DIM, cache_size=0)
            res["new cold"].append(timed(e.embed, texts))
            res["new warm words"].append(timed(e.embed, texts))
            e = HashingEmbedder(DIM, cache_size=len(texts))
            e.embed(texts)
            res["new warm cached"].append(timed(e.embed, texts))
            e = HashingEmbedder(DIM, cache_size=0)
            e.embed(texts)
            res["new one by one"].append(timed(lambda: [e.embed([t]) for t in texts]))
        med = {k: statistics.median(v) for k, v in res.items() if v}
        old_cold, old_warm = med.get("old cold"), med.get("old warm")
        for k in ("old cold", "old warm"):
            if k in med:
                rows.append([name, k, ms(med[k]), f"{med[k] / len(texts) * 1e6:8.1f}", ""])
        rows.append([name, "new cold (empty caches)", ms(med["new cold"]),
                     f"{med['new cold'] / len(texts) * 1e6:8.1f}", ratio(old_cold, med["new cold"])])
        rows.append([name, "new, words cached, no text cache", ms(med["new warm words"]),
                     f"{med['new warm words'] / len(texts) * 1e6:8.1f}",
                     ratio(old_warm, med["new warm words"])])
        rows.append([name, "new, every text cached", ms(med["new warm cached"]),
                     f"{med['new warm cached'] / len(texts) * 1e6:8.1f}",
                     ratio(old_warm, med["new warm cached"])])
        rows.append([name, "new, one text per call, words cached", ms(med["new one by one"]),
                     f"{med['new one by one'] / len(texts) * 1e6:8.1f}",
                     ratio(old_warm, med["new one by one"])])
    table(f"HashingEmbedder.embed (median of {reps}; ratio = old / new, warm vs warm)",
          ["texts", "variant", "total ms", "us/text", "old/new"], rows)


def bench_snapshots(old_index, corpus: Corpus, n: int, rng) -> None:
    docs = corpus.bm25_docs(n)
    ids = [f"topic-{i}" for i in range(n)]
    vecs = unit_rows(rng, n)
    rows = []
    with tempfile.TemporaryDirectory() as d:
        # Lexical: rebuilding (what open does today) against loading a snapshot.
        build = (old_index.LexicalIndex if old_index is not None else LexicalIndex)
        t0 = time.perf_counter()
        lex = build()
        for i, text in zip(ids, docs):
            lex.upsert(i, text)
        rebuild = time.perf_counter() - t0
        lex = LexicalIndex()
        for i, text in zip(ids, docs):
            lex.upsert(i, text)
        path = os.path.join(d, "lexical.snap")
        save = min(timed(lex.save, path, {"seq": 1}) for _ in range(2))
        loads = []
        for _ in range(3):
            gc.collect()
            t0 = time.perf_counter()
            loaded, _ = LexicalIndex.load(path)
            loads.append(time.perf_counter() - t0)
            del loaded
        loaded, _ = LexicalIndex.load(path)
        q = docs[0].split()[:3]
        first = timed(loaded.search, " ".join(q), K)
        first_write = timed(loaded.upsert, ids[1], docs[2])
        size = os.path.getsize(path)
        rows.append([f"BM25, {n} docs ~30 words", f"{rebuild:8.2f}", f"{save:8.2f}",
                     f"{min(loads):8.3f}", f"{size / 1e6:8.1f}", f"{size / n:7.0f}",
                     f"{rebuild / min(loads):7.1f}x",
                     f"search {first * 1e3:.1f} ms, upsert {first_write * 1e3:.1f} ms"])
        del lex, loaded
        for approx in (False, True):
            ix = VectorIndex(DIM, approximate_above=(n if approx else None))
            t0 = time.perf_counter()
            ix.upsert_many(ids, vecs)
            rebuild = time.perf_counter() - t0
            path = os.path.join(d, "vectors.snap")
            save = min(timed(ix.save, path, {"seq": 1}) for _ in range(2))
            loads = []
            for _ in range(3):
                gc.collect()
                t0 = time.perf_counter()
                loaded, _ = VectorIndex.load(path)
                loads.append(time.perf_counter() - t0)
                del loaded
            size = os.path.getsize(path)
            rows.append([f"vectors, {n} x {DIM}" + (" + sketches" if approx else ""),
                         f"{rebuild:8.2f}", f"{save:8.2f}", f"{min(loads):8.3f}",
                         f"{size / 1e6:8.1f}", f"{size / n:7.0f}",
                         f"{rebuild / min(loads):7.1f}x",
                         "rebuild = upsert_many" + (" + training" if approx else "")])
            del ix
    table("Snapshots: rebuild vs save/load (best of 2-3; BM25 rebuild = old upsert loop)",
          ["index", "rebuild s", "save s", "load s", "MB", "B/doc", "rebuild/load", "after load"],
          rows)


def recall(got, want) -> float:
    if not want:
        return 1.0
    kth = want[min(K, len(want)) - 1][1]
    return min(K, sum(1 for _, s in got if s >= kth)) / min(K, len(want))


def bench_search(sketch_index, baseline_index, corpus: Corpus, sizes: list[int],
                 n_queries: int, rng, variants: list[tuple[int, float, int, float]], kinds: list[str],
                 vectors_from: Path | None = None) -> None:
    """Exact scan, float sketches (--sketches), sign codes as of --baseline-index and as
    today, on the same rows. The approximate indexes of a data set are built together and
    queried in turn, query by query (at 1M random vectors each holds ~1 GB)."""
    rows = []
    sets: list[tuple[str, int, object, object]] = []
    if "locomo" in kinds and LOCOMO.exists():
        sets.append(("locomo turns", len(corpus.turns), lambda: embed_all(corpus.turns),
                     lambda: embed_all((corpus.questions * 2)[:n_queries])))

    def made(n: int) -> dict[str, tuple]:
        return {"random": (lambda: unit_rows(rng, n), lambda: unit_rows(rng, n_queries)),
                "titles": (lambda: embed_all(corpus.titles(n)),
                           lambda: embed_all(corpus.titles(n_queries))),
                "sentences": (lambda: embed_all(corpus.sentences(n)),
                              lambda: embed_all((corpus.questions * 2)[:n_queries]))}

    def saved(kind: str, n: int, what: str):
        # KIND_x.npy / KIND_q.npy: the makers' vectors at the largest size, made and saved by
        # the first run (embedding 1M texts takes minutes); a size reads the first n rows
        path = vectors_from / f"{kind}_{what}.npy"  # type: ignore[operator]
        if not path.exists():
            np.save(path, made(max(sizes))[kind][what == "q"]())
        return np.array(np.load(path, mmap_mode="r")[:n])

    for n in sizes:
        makers = made(n)
        if vectors_from is not None:
            makers = {k: (lambda k=k, n=n: saved(k, n, "x"),
                          lambda k=k: saved(k, n_queries, "q")) for k in makers}
        sets += [(kind, n, *makers[kind]) for kind in kinds if kind in makers]
    for kind, n, make, make_q in sets:
        vecs, qs = make(), make_q()
        ids = [f"t{i}" for i in range(n)]
        exact = VectorIndex(DIM, approximate_above=None)
        exact.upsert_many(ids, vecs)
        t_ex: list[tuple[float, float]] = []
        want: list[list[tuple[str, float]]] = []
        for q in qs:
            t_ex.append(timed_cpu(lambda: want.append(exact.search(q, K))))
        kept = "non-zero entries" if exact._rows.sparse else "float32 matrix"
        results = [(f"exact scan of all rows ({kept})", t_ex, 1.0, held_bytes(exact) / n)]
        del exact
        candidates = []
        if sketch_index is not None:
            candidates += [(f"sketches {d} dims, {share:.0%} re-scored ({SKETCHES})",
                            lambda d=d, share=share: sketch_index.VectorIndex(
                                DIM, approximate_above=1, sketch_dim=d, candidate_share=share))
                           for d, share in ((80, 0.02),)]
        if baseline_index is not None:
            candidates.append((f"old: sign codes 512 bits, 2% re-scored ({baseline_index.REV})",
                               lambda: baseline_index.VectorIndex(DIM, approximate_above=1)))
        candidates += [(f"new: sign codes {bits} bits, {scale:g} sqrt(n) re-scored"
                        + (f", first {words} words keep {share:.0%}" if words else ""),
                        lambda bits=bits, scale=scale: VectorIndex(
                            DIM, approximate_above=1, code_bits=bits, candidate_scale=scale))
                       for bits, scale, words, share in variants]
        built = []
        for (label, build), (*_, words, share) in zip(
                candidates, [(None, None)] * (len(candidates) - len(variants)) + variants):
            gc.collect()
            ix = build()
            t0 = time.perf_counter()
            ix.upsert_many(ids, vecs)
            if words:  # the prefix of the cascade (gem/index/codes.py), for this index only
                ix._codes.FIRST_WORDS, ix._codes.FIRST_SHARE = words, share
            built.append((label + f" (build {time.perf_counter() - t0:.1f}s)", ix))
        ts: list[list[tuple[float, float]]] = [[] for _ in built]
        rec: list[list[float]] = [[] for _ in built]
        for q, w in zip(qs, want):  # interleaved: every index sees the same load
            for j, (_, ix) in enumerate(built):
                got: list[tuple[str, float]] = []
                ts[j].append(timed_cpu(lambda: got.extend(ix.search(q, K))))
                rec[j].append(recall(got, w))
        results += [(label, t, float(np.mean(r)), held_bytes(ix) / n)
                    for (label, ix), t, r in zip(built, ts, rec)]
        del built
        base = statistics.median(c for _, c in (ts[-1 - len(variants)] if baseline_index
                                                 is not None else t_ex))
        for label, t, rc, per_unit in results:
            wall, cpu = [w for w, _ in t], [c for _, c in t]
            rows.append([f"{n}", kind, label, f"{per_unit:7.0f}", ms(statistics.median(cpu)),
                         ms(pct(cpu, 95)), ms(statistics.median(wall)), ms(pct(wall, 95)),
                         "" if rc is None else f"{rc:.3f}",
                         ratio(base, statistics.median(cpu))])
        del vecs
        gc.collect()
        # the table so far after each data set (a run at 1M rows takes a while)
        table(f"Vector search k={K}, {n_queries} queries, one BLAS thread (bytes/unit: arrays "
              "the index holds, capacity included; cpu = this thread's CPU time, wall includes "
              "other processes' time slices; speedup = old (else exact) cpu p50 / row cpu p50)",
              ["n", "data", "method", "B/unit", "cpu p50", "cpu p95", "wall p50", "wall p95",
               "recall@10", "speedup"], rows)


def bench_many(old_index, corpus: Corpus, n: int, rng) -> None:
    vecs = embed_all(corpus.titles(n))
    ids = [f"t{i}" for i in range(n)]
    names = embed_all(corpus.titles(200))
    ix = VectorIndex(DIM, approximate_above=None)
    ix.upsert_many(ids, vecs)
    rows = []
    old = None
    if old_index is not None:
        old = old_index.VectorIndex(DIM)
        old.upsert_many(ids, vecs)
    for m in (1, 20, 200):
        qs = names[:m]
        t_old = None
        if old is not None:
            with single_threaded():
                t_old = min(timed(lambda: [old.search(q, 5) for q in qs]) for _ in range(3))
        t_loop = min(timed(lambda: [ix.search(q, 5) for q in qs]) for _ in range(3))
        t_many = min(timed(ix.search_many, qs, 5) for _ in range(3))
        rows.append([f"{m} names, {n} titles", ms(t_old) if t_old else "-", ms(t_loop),
                     ms(t_many), ratio(t_old, t_many), ratio(t_loop, t_many)])
    table("Resolving new topic names: one search per name vs search_many (k=5, exact, best of 3)",
          ["batch", "old loop ms", "new loop ms", "search_many ms", "old/many", "loop/many"], rows)


def bench_pairs(corpus: Corpus, sizes: list[int], threshold: float) -> None:
    rows = []
    for n in sizes:
        texts = corpus.titles(n)
        vecs = embed_all(texts)
        ids = [f"t{i}" for i in range(n)]
        ix = VectorIndex(DIM, approximate_above=None)
        ix.upsert_many(ids, vecs)
        old_bytes = n * n * 4
        t_old = None
        if old_bytes <= 4e9:
            # today's revise(): the full N x N product, then a threshold scan per row
            gc.collect()
            with single_threaded():
                t0 = time.perf_counter()
                sims = vecs @ vecs.T
                found = sum(int(np.count_nonzero(sims[i, i + 1 :] >= threshold)) for i in range(n))
                t_old = time.perf_counter() - t0
            del sims
        t0 = time.perf_counter()
        pairs = ix.pairs_above(threshold)
        t_new = time.perf_counter() - t0
        changed = ids[:: 100]  # the 1% of topics touched since the last pass
        t0 = time.perf_counter()
        touching = ix.pairs_above(threshold, involving=changed)
        t_inc = time.perf_counter() - t0
        assert touching == [p for p in pairs if p[0] in set(changed) or p[1] in set(changed)]
        rows.append([str(n), f"{old_bytes / 1e9:6.1f} GB", f"{t_old:8.2f}" if t_old else "skipped",
                     f"{1024 * 1024 * 4 / 1e6:6.1f} MB", f"{t_new:8.2f}", f"{t_inc:8.2f}",
                     str(len(pairs)), str(found) if t_old else "-"])
        del ix, vecs
    table(f"Duplicate pairs (cosine >= {threshold}) among titles: N x N matrix vs pairs_above "
          "(new memory = one 1024 x 1024 block of scores)",
          ["n", "old memory", "old s", "new memory", "new s", "new s, 1% changed", "pairs",
           "old pairs"], rows)


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--sizes", type=int, nargs="+", default=[10_000, 100_000])
    ap.add_argument("--queries", type=int, default=200)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--embed-texts", type=int, default=10_000,
                    help="titles the embedder section embeds (and a fifth as many sentences)")
    ap.add_argument("--snapshot-docs", type=int, default=100_000)
    ap.add_argument("--pair-sizes", type=int, nargs="+", default=[20_000, 100_000])
    ap.add_argument("--pair-threshold", type=float, default=0.9)
    ap.add_argument("--variants", nargs="+", default=["512:4"],
                    help="sign code settings to compare, as code_bits:candidate_scale, optionally "
                         ":first_words:first_share (SignCodes.FIRST_WORDS, FIRST_SHARE)")
    ap.add_argument("--baseline-index", default=BASELINE_INDEX,
                    help="revision whose gem/index the search section runs as 'old'")
    ap.add_argument("--sketches", action="store_true",
                    help="also run the float sketches of " + SKETCHES + " in the search section")
    ap.add_argument("--vectors-from", type=Path,
                    help="search section: keep the data sets' vectors and queries in this "
                         "directory (KIND_x.npy, KIND_q.npy: made and saved at the largest of "
                         "--sizes if absent) instead of embedding them on every run")
    ap.add_argument("--kinds", nargs="+", default=["locomo", "random", "titles", "sentences"],
                    help="data sets of the search section")
    ap.add_argument("--baseline", default=BASELINE)
    ap.add_argument("--only", nargs="+",
                    choices=["threads", "embed", "snapshots", "search", "many", "pairs"])
    ap.add_argument("--seed", type=int, default=0)
    a = ap.parse_args(argv)
    only = set(a.only or ["threads", "embed", "snapshots", "search", "many", "pairs"])
    old_index = old_module(a.baseline, "gem/index.py", "gem_old_index")
    old_embed = old_module(a.baseline, "gem/embed.py", "gem_old_embed")
    print(f"numpy {np.__version__}, python {sys.version.split()[0]}, {os.cpu_count()} cpus, "
          f"baseline {a.baseline}: {'loaded' if old_index else 'not available (no git?)'}, "
          f"LoCoMo: {'yes' if LOCOMO.exists() else 'absent'}")
    rng = np.random.default_rng(a.seed)
    corpus = Corpus(a.seed)
    if "threads" in only:
        bench_threads(old_index, rng, min(100_000, max(a.sizes)))  # 100k unless smaller
    if "embed" in only:
        bench_embed(old_embed, corpus, a.reps, a.embed_texts)
    with single_threaded():
        if "snapshots" in only:
            bench_snapshots(old_index, corpus, a.snapshot_docs, rng)
        if "search" in only:
            variants = [(int(b), float(c), int(w), float(f)) for b, c, w, f in
                        ((v + "::").split(":")[:4] for v in a.variants)
                        for w, f in [(w or 0, f or 0)]]
            sketch_index = old_module(SKETCHES, "gem/index/vector.py", "gem_sketch_index",
                                      package="gem.index") if a.sketches else None
            baseline_index = old_package(a.baseline_index, "gem/index", "gem_baseline_index")
            if baseline_index is not None:
                baseline_index.REV = a.baseline_index  # type: ignore[attr-defined]
            bench_search(sketch_index, baseline_index, corpus, a.sizes, a.queries, rng,
                         variants, a.kinds, a.vectors_from)
        if "many" in only:
            bench_many(old_index, corpus, max(a.sizes), rng)
        if "pairs" in only:
            bench_pairs(corpus, a.pair_sizes, a.pair_threshold)


if __name__ == "__main__":
    main()
