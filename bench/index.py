"""Latency of gem's derived indexes (BM25 and vector search) at growing corpus sizes.

A benchmark, not a test: it prints a table and asserts nothing. Run:

    python bench/index.py                      # 1k, 10k, 100k documents
    python bench/index.py --sizes 1000 5000 --queries 500

The corpus is synthetic: words drawn from a Zipf-like distribution over a 30k-word vocabulary
(so queries hit a mix of rare and very common terms, like real text), 8-60 words a document.
Vector search latency does not depend on the vectors' content, so random unit vectors of the
default embedder's dimension stand in for embeddings.
"""
from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run from a checkout

from gem.index import LexicalIndex, VectorIndex  # noqa: E402

VOCAB_SIZE = 30_000
DIM = 256
K = 10


def zipf_words(rng: np.random.Generator, n: int) -> np.ndarray:
    # Rank-frequency ~ 1/rank (s = 1.0), truncated to the vocabulary.
    ranks = np.arange(1, VOCAB_SIZE + 1, dtype=np.float64)
    p = 1.0 / ranks
    p /= p.sum()
    return rng.choice(VOCAB_SIZE, size=n, p=p)


def make_docs(rng: np.random.Generator, n: int) -> list[str]:
    lengths = rng.integers(8, 61, size=n)
    words = zipf_words(rng, int(lengths.sum()))
    docs, start = [], 0
    for length in lengths:
        docs.append(" ".join(f"w{w}" for w in words[start : start + length]))
        start += length
    return docs


def make_queries(rng: np.random.Generator, n: int) -> list[str]:
    words = zipf_words(rng, 3 * n).reshape(n, 3)
    return [" ".join(f"w{w}" for w in row) for row in words]


def unit_rows(rng: np.random.Generator, n: int) -> np.ndarray:
    m = rng.standard_normal((n, DIM)).astype(np.float32)
    m /= np.linalg.norm(m, axis=1, keepdims=True)
    return m


def timed(fn, args_list) -> list[float]:
    out = []
    for args in args_list:
        t0 = time.perf_counter()
        fn(*args)
        out.append((time.perf_counter() - t0) * 1e3)
    return out


def stats(ms: list[float]) -> tuple[float, float]:
    return statistics.median(ms), float(np.percentile(ms, 95))


def run(size: int, n_queries: int, seed: int) -> list[tuple]:
    rng = np.random.default_rng(seed)
    ids = [f"topic-{i}" for i in range(size)]
    rows = []

    docs = make_docs(rng, size)
    lex = LexicalIndex()
    t0 = time.perf_counter()
    for d, text in zip(ids, docs):
        lex.upsert(d, text)
    lex_build = time.perf_counter() - t0
    queries = [(q,) for q in make_queries(rng, n_queries)]
    lex.search(queries[0][0], K)  # warm-up
    rows.append((size, f"bm25 search k={K}", lex_build, *stats(timed(lambda q: lex.search(q, K), queries))))
    rows.append((size, "bm25 search k=None", lex_build, *stats(timed(lex.search, queries))))
    # An update after a commit: replace one document's text.
    upd = [(ids[int(i)], docs[int(j)]) for i, j in rng.integers(0, size, (n_queries, 2))]
    rows.append((size, "bm25 upsert (replace)", lex_build, *stats(timed(lex.upsert, upd))))
    # Ingest-then-retrieve: each write drops the cached posting arrays of its terms (which
    # include the common ones), so this is the cold-cache query cost.
    cold = []
    for (q,), (d, text) in zip(queries, upd):
        lex.upsert(d, text)
        cold.extend(timed(lambda q: lex.search(q, K), [(q,)]))
    rows.append((size, f"bm25 search k={K} after a write", lex_build, *stats(cold)))

    vecs = unit_rows(rng, size)
    vec = VectorIndex(DIM)
    t0 = time.perf_counter()
    for d, v in zip(ids, vecs):
        vec.upsert(d, v)
    vec_build = time.perf_counter() - t0
    qv = [(q,) for q in unit_rows(rng, n_queries)]
    vec.search(qv[0][0], K)  # warm-up
    rows.append((size, f"vector search k={K}", vec_build, *stats(timed(lambda q: vec.search(q, K), qv))))
    sub_n = min(1000, size)
    subsets = [rng.choice(size, sub_n, replace=False) for _ in range(n_queries)]
    sub_args = [(q, [ids[i] for i in s]) for (q,), s in zip(qv, subsets)]
    rows.append(
        (size, f"vector search k={K} ids={sub_n}", vec_build,
         *stats(timed(lambda q, s: vec.search(q, K, ids=s), sub_args)))
    )
    rows.append((size, "vector most_similar>=0.2", vec_build,
                 *stats(timed(lambda q: vec.most_similar(q, 0.2), qv))))
    rm = [(ids[int(i)],) for i in rng.integers(0, size, n_queries)]
    rm_ms = timed(vec.remove, rm)
    rows.append((size, "vector remove (swap)", vec_build, *stats(rm_ms)))
    return rows


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--sizes", type=int, nargs="+", default=[1_000, 10_000, 100_000])
    ap.add_argument("--queries", type=int, default=200)
    ap.add_argument("--seed", type=int, default=0)
    a = ap.parse_args(argv)
    print(f"numpy {np.__version__}, python {sys.version.split()[0]}, {a.queries} queries per row")
    header = f"{'docs':>8}  {'operation':<30} {'build s':>8} {'median ms':>10} {'p95 ms':>9}"
    print(header)
    print("-" * len(header))
    for size in a.sizes:
        for n, op, build, med, p95 in run(size, a.queries, a.seed):
            print(f"{n:>8}  {op:<30} {build:>8.2f} {med:>10.3f} {p95:>9.3f}")
        sys.stdout.flush()


if __name__ == "__main__":
    main()
