"""gem's BM25 index side by side: against itself at a git revision, bm25s and tantivy.

    python bench/lexical.py [--sizes 100000 1000000] [--queries 300]
                            [--baseline 4b5d922] [--only gem,baseline,bm25s,tantivy]

Each index is built in a child process on the same synthetic corpus as bench/index.py
(Zipf-distributed words over a 30k vocabulary, 8-60 words a document) and measured there:
build time, the RSS the index adds (after a malloc_trim), top-10 query p50/p95 over Zipf
queries of three words (all terms, and as gem's retrieve asks: max_df=0.5), and recall@10
against gem's exhaustive BM25 (ties at the 10th score count as hits). For gem, the share of
the query terms' postings a top-10 query reads, and whether its answer equals the exhaustive
one. `--baseline` builds gem's LexicalIndex as it was at that revision (read with git show).
bm25s and tantivy build a static index (neither updates a document in place), rank by
their own BM25 variants and break ties their own way, so their recall is below 1 by ties
alone. A benchmark, not a test: nothing asserts a time.
"""
from __future__ import annotations

import argparse
import ctypes
import gc
import importlib.util
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from common import rss_now_mb  # noqa: E402
from index import make_docs, make_queries  # noqa: E402

from gem.index import LexicalIndex  # noqa: E402

K = 10


def trim() -> None:
    gc.collect()
    ctypes.CDLL("libc.so.6").malloc_trim(0)


def baseline_class(rev: str):
    """gem's LexicalIndex as it was at `rev`, imported from `git show` output."""
    src = subprocess.run(["git", "show", f"{rev}:gem/index/lexical.py"], cwd=ROOT, check=True,
                         capture_output=True, text=True).stdout
    folder = Path(tempfile.mkdtemp(prefix="gem-bench-lexical-"))
    path = folder / "lexical_baseline.py"
    path.write_text(src.replace("from .common", "from gem.index.common").replace(
        "from .snapfile", "from gem.index.snapfile"))
    spec = importlib.util.spec_from_file_location("lexical_baseline", path)
    module = importlib.util.module_from_spec(spec)  # type: ignore[arg-type]
    spec.loader.exec_module(module)  # type: ignore[union-attr]
    path.unlink()
    folder.rmdir()
    return module.LexicalIndex


class Counting(LexicalIndex):
    """gem's index, counting the postings a query reads (every path goes through _live) and
    the documents scored from their own terms."""
    read = 0

    def _live(self, seg, rows, *rest):
        Counting.read += rows.shape[0]
        return super()._live(seg, rows, *rest)


def timed(fn, queries) -> tuple[list[float], list]:
    ms, out = [], []
    for q in queries:
        t0 = time.perf_counter()
        out.append(fn(q))
        ms.append((time.perf_counter() - t0) * 1e3)
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


def child(kind: str, size: int, n_queries: int, seed: int, rev: str, exact_file: str) -> dict:
    """Build and query one index; the first child (gem) writes the exhaustive answers to
    `exact_file`, which the others are measured against."""
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
        cls = Counting if kind == "gem" else baseline_class(rev)
        ix = cls()
        for d, text in zip(ids, docs):
            ix.upsert(d, text)
        out["build_s"] = time.perf_counter() - t0
        trim()
        out["rss_mb"] = rss_now_mb() - before
        if kind == "gem":
            exact = {m: [ix.search(q, None, m)[:200] for q in queries] for m in (None, 0.5)}
            Path(exact_file).write_text(json.dumps({str(m): v for m, v in exact.items()}))
        for m in (None, 0.5):
            ix.search(queries[0], K, m)
            Counting.read = 0
            ms, got = timed(lambda q: ix.search(q, K, m), queries)
            out[f"p50_{m}"], out[f"p95_{m}"] = pct(ms)
            out[f"recall_{m}"] = recall([[d for d, _ in g] for g in got], exact[m])
            if kind == "gem":
                total = sum(ix._df_id(t) for q in queries for t, _ in ix._query_terms(q, m))
                out[f"read_{m}"] = Counting.read / max(total, 1)
                out[f"identical_{m}"] = all(g == [tuple(x) for x in e[:K]]
                                            for g, e in zip(got, exact[m]))
        if kind == "gem":
            out["segments"] = len(ix._segments)
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
    p = argparse.ArgumentParser()
    p.add_argument("--sizes", type=int, nargs="+", default=[100_000, 1_000_000])
    p.add_argument("--queries", type=int, default=300)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--baseline", default="4b5d922")
    p.add_argument("--only", default="gem,baseline,bm25s,tantivy")
    p.add_argument("--child", nargs=2)
    p.add_argument("--exact")
    a = p.parse_args()
    if a.child:
        print(json.dumps(child(a.child[0], int(a.child[1]), a.queries, a.seed, a.baseline,
                               a.exact)))
        return
    print(f"{'docs':>8} {'index':<9}" + "".join(f"{c:>13}" for c in COLS))
    kinds = ["gem"] + [k for k in a.only.split(",") if k != "gem"]
    for size in a.sizes:
        with tempfile.TemporaryDirectory() as tmp:
            exact = str(Path(tmp) / "exact.json")
            for kind in kinds:
                run(kind, size, a, exact)


COLS = ("build_s", "rss_mb", "bytes_per_doc", "p50_None", "p95_None", "recall_None",
        "read_None", "p50_0.5", "p95_0.5", "recall_0.5", "read_0.5")


def run(kind: str, size: int, a: argparse.Namespace, exact: str) -> None:
    done = subprocess.run([sys.executable, __file__, "--child", kind, str(size),
                           "--queries", str(a.queries), "--seed", str(a.seed),
                           "--baseline", a.baseline, "--exact", exact],
                          capture_output=True, text=True)
    if done.returncode != 0:
        print(f"{size:>8} {kind:<9} failed: {done.stderr.strip().splitlines()[-1]}")
        return
    r = json.loads(done.stdout.strip().splitlines()[-1])
    print(f"{size:>8} {kind:<9}" + "".join(
        f"{r[c]:>13.3f}" if c in r else f"{'-':>13}" for c in COLS), flush=True)
    if kind == "gem":
        print(f"{'':>18}identical to exhaustive: {r['identical_None']}, "
              f"{r['identical_0.5']}; segments {r['segments']}", flush=True)


if __name__ == "__main__":
    main()
