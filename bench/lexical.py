"""gem's BM25 index side by side: against itself at a git revision, bm25s and tantivy.

    python bench/lexical.py [--sizes 100000 1000000] [--queries 300] [--corpus zipf|fields]
                            [--k 10] [--reload] [--baseline 4b5d922]
                            [--only gem,baseline,bm25s,tantivy]

Each index is built in a child process on the same synthetic corpus as bench/index.py
(Zipf-distributed words over a 30k vocabulary, 8-60 words a document) and measured there:
build time, the RSS the index adds (after a malloc_trim), top-10 query p50/p95 (wall, and the
thread's CPU time: cpu50/cpu95) over Zipf queries of three words (all terms, and as gem's
retrieve asks: max_df=0.5), and recall@10
against gem's exhaustive BM25 (ties at the 10th score count as hits). For gem, the share of
the query terms' postings a top-10 query reads, and whether its answer equals the exhaustive
one. `--baseline` builds gem's LexicalIndex as it was at that revision (its whole gem package,
extracted with git archive). `--corpus fields` is instead the unit layer of bench/scale.py's
memory (a document per field: "Topic 12 budget field 3 value 12.3 review", ids "t12/field 3",
the unit index's analyzer and k1/b): short documents over a small vocabulary, where most query
terms are in a tenth of the documents and scores tie by the thousand; its queries are the
shapes of a free-text retrieve ("budget review", "launch design 7", "value 12 pricing").
`--reload` queries gem's index after a save and load, as a memory opened from its snapshot
holds it (one segment).

Measured (--corpus fields --k 100 --queries 100, 439e89b against the block-scored, coded pass
with id keys for ties; ms a query at max_df=0.5, wall p50/p95, the shared VM at load 2-8):
100k reloaded 0.99/2.74 -> 0.46/0.74; 1M reloaded 10.9/66.8 -> 4.4/12.4 (CPU p95 66.8 -> 7.4);
1M incremental (7 segments) 12.8/77.6 -> 3.3/5.8. Zipf at 100k (k=10) unchanged (0.59/1.73 ->
0.42/1.43). Every answer identical to the exhaustive one.
bm25s and tantivy build a static index (neither updates a document in place), rank by
their own BM25 variants and break ties their own way, so their recall is below 1 by ties
alone. A benchmark, not a test: nothing asserts a time.
"""
from __future__ import annotations

import argparse
import ctypes
import gc
import json
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
# a baseline child runs the gem extracted at its revision (GEM_BENCH_CODE), this one's otherwise
sys.path.insert(0, os.environ.get("GEM_BENCH_CODE", str(ROOT)))
sys.path.insert(0, str(ROOT / "bench"))

from gem.index import LexicalIndex  # noqa: E402  (before index.py puts this tree's on the path)

from common import ENV, checkout, rss_now_mb  # noqa: E402
from index import make_docs, make_queries  # noqa: E402

K = 10
# the words of bench/scale.py's topics and values (bench/footprint.py's WORDS)
WORDS = ("alpha", "budget", "launch", "design", "review", "hiring", "roadmap", "pricing", "audit",
         "migration", "onboarding", "security", "analytics", "support", "research", "partner")


def trim() -> None:
    gc.collect()
    ctypes.CDLL("libc.so.6").malloc_trim(0)


def field_corpus(size: int) -> tuple[list[str], list[str]]:
    """(ids, texts) of `size` field documents, 10 per topic, as bench/scale.py ingests them."""
    ids, docs = [], []
    for t in range(size // 10):
        for j in range(10):
            ids.append(f"t{t + 1}/field {j}")
            docs.append(f"Topic {t} {WORDS[t % len(WORDS)]} field {j} value {t}.{j} "
                        f"{WORDS[(t * 7 + j) % len(WORDS)]}")
    return ids, docs


def field_queries(seed: int, n: int, topics: int) -> list[str]:
    rng = random.Random(seed)
    shapes = [lambda: f"{rng.choice(WORDS)} {rng.choice(WORDS)}",
              lambda: f"{rng.choice(WORDS)} {rng.choice(WORDS)} {rng.randrange(10)}",
              lambda: f"value {rng.randrange(topics)} {rng.choice(WORDS)}",
              lambda: f"value {rng.randrange(topics)}.{rng.randrange(10)} {rng.choice(WORDS)}",
              lambda: rng.choice(WORDS)]
    return [rng.choice(shapes)() for _ in range(n)]


class Counting(LexicalIndex):
    """gem's index, counting the postings a query reads (every path goes through _live) and
    the documents scored from their own terms."""
    read = 0

    def _live(self, seg, rows, *rest):
        Counting.read += rows.shape[0]
        return super()._live(seg, rows, *rest)


def timed(fn, queries, cpu: list[float] | None = None) -> tuple[list[float], list]:
    """Wall ms per query (and the thread's CPU ms into `cpu`: on a shared machine a query
    descheduled for a time slice costs ~10 ms of wall time it did not use)."""
    ms, out = [], []
    for q in queries:
        t0, c0 = time.perf_counter(), time.thread_time()
        out.append(fn(q))
        ms.append((time.perf_counter() - t0) * 1e3)
        if cpu is not None:
            cpu.append((time.thread_time() - c0) * 1e3)
    return ms, out


def pct(ms: list[float]) -> tuple[float, float]:
    return statistics.median(ms), float(np.percentile(ms, 95))


def recall(got: list[list[str]], exact: list[list[tuple[str, float]]]) -> float:
    hits = total = 0
    for g, e in zip(got, exact):
        if not e:
            continue
        kth = e[min(K, len(e)) - 1][1]
        best = dict(e)
        hits += sum(1 for d in g[:K] if best.get(d, -1.0) >= kth)
        total += min(K, len(e))
    return hits / max(total, 1)


def child(kind: str, size: int, n_queries: int, seed: int, corpus: str, reload: bool,
          exact_file: str) -> dict:
    """Build and query one index; the first child (gem) writes the exhaustive answers to
    `exact_file`, which the others are measured against."""
    params: tuple = ()
    if corpus == "fields":
        ids, docs = field_corpus(size)
        queries = field_queries(seed, n_queries, size // 10)
        params = (0.9, 0.4, "search")
    else:
        rng = np.random.default_rng(seed)
        docs = make_docs(rng, size)
        queries = make_queries(rng, n_queries)
        ids = [f"topic-{i}" for i in range(size)]
    exact = {}
    if kind != "gem":
        saved = json.loads(Path(exact_file).read_text())
        exact = {None: saved["None"], 0.5: saved["0.5"]}
    trim()
    before = rss_now_mb()
    out: dict = {"kind": kind, "docs": size}
    t0 = time.perf_counter()
    if kind in ("gem", "baseline"):
        ix = Counting(*params)
        for d, text in zip(ids, docs):
            ix.upsert(d, text)
        out["build_s"] = time.perf_counter() - t0
        if reload:  # as a memory opened from its snapshot holds it: one segment
            with tempfile.TemporaryDirectory() as tmp:
                ix.save(Path(tmp) / "lexical", {})
                ix = Counting.load(Path(tmp) / "lexical")[0]
        trim()
        out["rss_mb"] = rss_now_mb() - before
        if kind == "gem":
            exact = {m: [ix.search(q, None, m)[:max(200, K)] for q in queries]
                     for m in (None, 0.5)}
            Path(exact_file).write_text(json.dumps({str(m): v for m, v in exact.items()}))
        for m in (None, 0.5):
            ix.search(queries[0], K, m)
            Counting.read = 0
            cpu: list[float] = []
            ms, got = timed(lambda q: ix.search(q, K, m), queries, cpu)
            out[f"p50_{m}"], out[f"p95_{m}"] = pct(ms)
            out[f"cpu50_{m}"], out[f"cpu95_{m}"] = pct(cpu)
            out[f"recall_{m}"] = recall([[d for d, _ in g] for g in got], exact[m])
            total = sum(ix._df_id(t) for q in queries for t, _ in ix._query_terms(q, m))
            out[f"read_{m}"] = Counting.read / max(total, 1)
            out[f"identical_{m}"] = all(g == [tuple(x) for x in e[:K]]
                                        for g, e in zip(got, exact[m]))
        out["segments"] = len(ix._segments)
        out["code"] = sys.modules["gem"].__file__
    elif kind == "bm25s":
        import bm25s
        model = bm25s.BM25(k1=1.2, b=0.75, method="lucene")
        model.index(bm25s.tokenize(docs, stopwords=None, show_progress=False),
                    show_progress=False)
        out["build_s"] = time.perf_counter() - t0
        trim()
        out["rss_mb"] = rss_now_mb() - before

        def search(q: str) -> list[str]:
            tok = bm25s.tokenize([q], stopwords=None, show_progress=False)
            found, _ = model.retrieve(tok, k=K, show_progress=False, n_threads=1)
            return [ids[int(i)] for i in found[0]]
        search(queries[0])
        ms, got = timed(search, queries)
        out["p50_None"], out["p95_None"] = pct(ms)
        out["recall_None"] = recall(got, exact[None])
    elif kind == "tantivy":
        import tantivy
        builder = tantivy.SchemaBuilder()
        builder.add_integer_field("row", stored=True, indexed=False, fast=True)
        builder.add_text_field("text", stored=False, tokenizer_name="default")
        schema = builder.build()
        index = tantivy.Index(schema)
        writer = index.writer(heap_size=64 << 20, num_threads=1)
        for i, text in enumerate(docs):
            writer.add_document(tantivy.Document(row=i, text=text))
        writer.commit()
        writer.wait_merging_threads()
        index.reload()
        searcher = index.searcher()
        out["build_s"] = time.perf_counter() - t0
        trim()
        out["rss_mb"] = rss_now_mb() - before

        def search(q: str) -> list[str]:
            hits = searcher.search(index.parse_query(q, ["text"]), K).hits
            return [ids[searcher.doc(a)["row"][0]] for _, a in hits]
        search(queries[0])
        ms, got = timed(search, queries)
        out["p50_None"], out["p95_None"] = pct(ms)
        out["recall_None"] = recall(got, exact[None])
    out["bytes_per_doc"] = out["rss_mb"] * (1 << 20) / size
    return out


def main() -> None:
    global K
    p = argparse.ArgumentParser()
    p.add_argument("--sizes", type=int, nargs="+", default=[100_000, 1_000_000])
    p.add_argument("--queries", type=int, default=300)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--baseline", default="4b5d922")
    p.add_argument("--corpus", choices=("zipf", "fields"), default="zipf")
    p.add_argument("--k", type=int, default=K)
    p.add_argument("--reload", action="store_true", help="query gem's index saved and loaded")
    p.add_argument("--only", default="gem,baseline,bm25s,tantivy")
    p.add_argument("--child", nargs=2)
    p.add_argument("--exact")
    a = p.parse_args()
    K = a.k
    if a.child:
        print(json.dumps(child(a.child[0], int(a.child[1]), a.queries, a.seed, a.corpus,
                               a.reload, a.exact)))
        return
    print(f"{'docs':>8} {'index':<9}" + "".join(f"{c:>13}" for c in COLS))
    kinds = ["gem"] + [k for k in a.only.split(",") if k != "gem"]
    with tempfile.TemporaryDirectory() as tmp:
        code = checkout(a.baseline, str(Path(tmp) / "baseline")) if "baseline" in kinds else ""
        for size in a.sizes:
            exact = str(Path(tmp) / f"exact-{size}.json")
            for kind in kinds:
                run(kind, size, a, exact, code)


COLS = ("build_s", "rss_mb", "bytes_per_doc", "p50_None", "p95_None", "cpu50_None",
        "cpu95_None", "recall_None", "read_None", "p50_0.5", "p95_0.5", "cpu50_0.5", "cpu95_0.5",
        "recall_0.5", "read_0.5")


def run(kind: str, size: int, a: argparse.Namespace, exact: str, code: str) -> None:
    env = {**ENV, "GEM_BENCH_CODE": code} if kind == "baseline" else ENV
    done = subprocess.run([sys.executable, __file__, "--child", kind, str(size),
                           "--queries", str(a.queries), "--seed", str(a.seed),
                           "--corpus", a.corpus, "--k", str(a.k), "--exact", exact,
                           *(["--reload"] if a.reload else [])],
                          capture_output=True, text=True, env=env)
    if done.returncode != 0:
        print(f"{size:>8} {kind:<9} failed: {done.stderr.strip().splitlines()[-1]}")
        return
    r = json.loads(done.stdout.strip().splitlines()[-1])
    print(f"{size:>8} {kind:<9}" + "".join(
        f"{r[c]:>13.3f}" if c in r else f"{'-':>13}" for c in COLS), flush=True)
    if "identical_None" in r:
        print(f"{'':>18}identical to exhaustive: {r['identical_None']}, "
              f"{r['identical_0.5']}; segments {r['segments']}", flush=True)


if __name__ == "__main__":
    main()
