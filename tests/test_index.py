import math
from collections import Counter

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gem.errors import InvalidInput
from gem.index import LexicalIndex, VectorIndex
from gem.index.common import ranked as _ranked
from test_index_snapshots import apply_lexical

# ---------------------------------------------------------------- BM25


def test_bm25_matches_hand_computed_scores():
    ix = LexicalIndex()
    ix.upsert("d1", "Apple banana apple")  # len 3
    ix.upsert("d2", "banana, cherry!")  # len 2
    ix.upsert("d3", "cherry date elder fig")  # len 4
    # N = 3, avgdl = 9 / 3 = 3, k1 = 1.2, b = 0.75
    idf_apple = math.log(1 + (3 - 1 + 0.5) / (1 + 0.5))  # df 1
    idf_cherry = math.log(1 + (3 - 2 + 0.5) / (2 + 0.5))  # df 2
    # d1: tf 2, dl 3 -> K = 1.2 * (0.25 + 0.75 * 3/3) = 1.2
    d1 = idf_apple * 2 * 2.2 / (2 + 1.2)
    # d2: tf 1, dl 2 -> K = 1.2 * (0.25 + 0.75 * 2/3) = 0.9
    d2 = idf_cherry * 1 * 2.2 / (1 + 0.9)
    # d3: tf 1, dl 4 -> K = 1.2 * (0.25 + 0.75 * 4/3) = 1.5
    d3 = idf_cherry * 1 * 2.2 / (1 + 1.5)
    got = ix.search("apple CHERRY")
    assert [d for d, _ in got] == ["d1", "d2", "d3"]
    for (_, s), want in zip(got, [d1, d2, d3]):
        assert s == pytest.approx(want, rel=1e-12)
    assert d1 == pytest.approx(1.3486406, rel=1e-6)
    # A document matching both terms gets the sum.
    ix.upsert("d4", "apple cherry")  # now N = 4, avgdl = 11/4
    both = dict(ix.search("apple cherry"))["d4"]
    avgdl = 11 / 4
    idf_a = math.log(1 + (4 - 2 + 0.5) / (2 + 0.5))
    idf_c = math.log(1 + (4 - 3 + 0.5) / (3 + 0.5))
    k = 1.2 * (0.25 + 0.75 * 2 / avgdl)
    assert both == pytest.approx(idf_a * 2.2 / (1 + k) + idf_c * 2.2 / (1 + k), rel=1e-12)


def test_bm25_basics():
    ix = LexicalIndex()
    assert ix.search("anything") == [] and len(ix) == 0
    ix.upsert("a", "website redesign deadline")
    ix.upsert("b", "lunch preferences")
    assert len(ix) == 2 and "a" in ix and "z" not in ix
    assert ix.search("no such words") == []
    assert ix.search("") == []
    assert [d for d, _ in ix.search("Website-Redesign")] == ["a"]
    # Repeated query terms are one term.
    assert ix.search("deadline deadline") == ix.search("deadline")
    assert ix.search("deadline", k=0) == []
    with pytest.raises(InvalidInput):
        ix.search("deadline", k=-1)


def test_bm25_common_term_still_scores_positive():
    # Lucene idf: a term in every document still counts (classic BM25 idf would be negative).
    ix = LexicalIndex()
    for i in range(5):
        ix.upsert(f"d{i}", "project status")
    ix.upsert("x", "other")
    assert all(s > 0 for _, s in ix.search("project"))


def test_bm25_ties_broken_by_id_and_k_respects_ties():
    ix = LexicalIndex()
    for d in ["e", "c", "a", "d", "b"]:
        ix.upsert(d, "same text here")
    ix.upsert("f", "same")
    res = ix.search("text")
    assert [d for d, _ in res] == ["a", "b", "c", "d", "e"]
    assert [d for d, _ in ix.search("text", k=2)] == ["a", "b"]


def test_bm25_upsert_replaces_and_remove_forgets():
    ix = LexicalIndex()
    ix.upsert("a", "alpha beta")
    ix.upsert("a", "gamma")
    assert ix.search("alpha") == [] and [d for d, _ in ix.search("gamma")] == ["a"]
    assert len(ix) == 1 and ix.avgdl == 1.0
    ix.remove("a")
    ix.remove("a")  # idempotent
    assert len(ix) == 0 and ix.search("gamma") == [] and ix.avgdl == 0.0
    ix.upsert("b", "")  # a document without words still counts as a document
    assert "b" in ix and ix.search("gamma") == []


VOCAB = ["alpha", "beta", "gamma", "delta", "eps", "zeta", "eta", "theta"]
IDS = [f"d{i}" for i in range(8)]

lexical_ops = st.lists(
    st.one_of(
        st.tuples(
            st.just("upsert"),
            st.sampled_from(IDS),
            st.lists(st.sampled_from(VOCAB), min_size=0, max_size=7).map(" ".join),
        ),
        st.tuples(st.just("remove"), st.sampled_from(IDS), st.just("")),
    ),
    max_size=40,
)


class _SmallSegments(LexicalIndex):
    # Postings normally stay in the write buffer until it holds 16k of them and are scored
    # exhaustively below 8k; tiny segments, blocks and no exhaustive shortcut let small
    # examples exercise flushes, the merge ladder, dead postings and pruned queries.
    _BUFFER_POSTINGS = 3
    _EXHAUSTIVE_BELOW = 0
    _PRUNED_AT_MOST = 2.0
    _BLOCK = 2
    _CODED_FROM = 0  # passes by blocks and codes however few the postings


@settings(max_examples=200, deadline=None)
@given(lexical_ops, st.randoms(use_true_random=False), st.booleans())
def test_bm25_incremental_equals_rebuild(ops, rnd, small):
    live = _SmallSegments() if small else LexicalIndex()
    model: dict[str, str] = {}
    for op, doc_id, text in ops:
        if op == "upsert":
            live.upsert(doc_id, text)
            model[doc_id] = text
        else:
            live.remove(doc_id)
            model.pop(doc_id, None)
        live.search(rnd.choice(VOCAB) + " " + rnd.choice(VOCAB))
    fresh = LexicalIndex()
    items = list(model.items())
    rnd.shuffle(items)  # insertion order must not matter either
    for doc_id, text in items:
        fresh.upsert(doc_id, text)
    assert len(live) == len(fresh) == len(model)
    assert set(live) == set(model)
    assert live.avgdl == fresh.avgdl
    queries = VOCAB + ["alpha beta", "gamma delta theta", "alpha alpha eta", "nothing"]
    for q in queries:
        assert live.search(q) == fresh.search(q), q
        assert live.search(q, k=3) == fresh.search(q, k=3), q


def brute_bm25(docs: dict[str, str], query: str, k1: float, b: float) -> list[tuple[str, float]]:
    """BM25 by definition, one document at a time: each score summed over the query's terms in
    sorted order, the order the index promises (so the floats are equal, not close)."""
    counted = {d: Counter(text.lower().split()) for d, text in docs.items()}
    n = len(docs)
    avgdl = sum(sum(c.values()) for c in counted.values()) / n if n else 0.0
    terms = sorted({t for t in query.lower().split() if any(t in c for c in counted.values())})
    out = []
    for d, c in counted.items():
        if not any(t in c for t in terms):
            continue
        score = 0.0
        for t in terms:
            if t in c:
                df = sum(1 for other in counted.values() if t in other)
                idf = math.log(1.0 + (n - df + 0.5) / (df + 0.5))
                tf = float(c[t])
                norm = k1 * (1.0 - b + b * (sum(c.values()) / avgdl))
                score += idf * (tf * (k1 + 1.0)) / (tf + norm)
        out.append((d, score))
    return sorted(out, key=lambda p: (-p[1], p[0]))


# Skewed word frequencies, as in text: a few words in most documents, many rare ones.
ZIPF_VOCAB = [f"w{i}" for i in range(40)]
zipf_text = st.lists(st.integers(0, 39).map(lambda i: ZIPF_VOCAB[(i * i) // 40]),
                     max_size=12).map(" ".join)
bm25_ops = st.lists(st.one_of(
    st.tuples(st.just("upsert"), st.integers(0, 60).map(lambda i: f"d{i}"), zipf_text),
    st.tuples(st.just("remove"), st.integers(0, 60).map(lambda i: f"d{i}"), st.just(""))),
    max_size=150)


@settings(max_examples=150, deadline=None)
@given(bm25_ops, st.lists(st.lists(st.sampled_from(ZIPF_VOCAB), min_size=1, max_size=4),
                          min_size=1, max_size=4),
       st.sampled_from([1, 2, 3, 5, 10]), st.sampled_from([(1.2, 0.75), (0.9, 0.4), (2.0, 1.0)]))
def test_pruned_top_k_equals_brute_force_bm25(ops, queries, k, params):
    # Pruned queries stop early; they must return the exhaustive answer exactly: the same
    # documents, the same float scores, ties by id, after upserts, rewrites and removals.
    ix = _SmallSegments(*params)
    model: dict[str, str] = {}
    apply_lexical(ix, model, ops)
    for words in queries:
        q = " ".join(words)
        want = brute_bm25(model, q, *params)
        assert ix.search(q) == want, q
        assert ix.search(q, k=k) == want[:k], q


def test_pruned_search_reads_few_postings_of_common_terms():
    # A rare term decides the top 5; the common term's postings (every document) cannot lift
    # a document without the rare term above them, so most of its blocks are never read.
    class Counting(LexicalIndex):
        _EXHAUSTIVE_BELOW = 0  # pruned however small the corpus
        read = 0

        def _live(self, seg, rows, *rest):
            Counting.read += rows.shape[0]
            return super()._live(seg, rows, *rest)

    ix = Counting()
    for i in range(20_000):
        ix.upsert(f"d{i}", "common filler words here" + (" rare" if i % 1000 == 0 else ""))
    got = ix.search("common rare", k=5)
    assert got == ix._exhaustive(ix._query_terms("common rare", None), 5, ix.avgdl)
    assert [d for d, _ in got] == ["d0", "d1000", "d10000", "d11000", "d12000"]
    Counting.read = 0
    ix.search("common rare", k=5)
    assert Counting.read < 20_000 // 4


# ---------------------------------------------------------------- vectors


def unit(rng, n, dim):
    m = rng.standard_normal((n, dim))
    return m / np.linalg.norm(m, axis=1, keepdims=True)


def brute(model: dict[str, np.ndarray], q, k=None, ids=None):
    qn = q / np.linalg.norm(q)
    pool = model if ids is None else {d: v for d, v in model.items() if d in set(ids)}
    scored = sorted(((d, float(v @ qn)) for d, v in pool.items()), key=lambda p: (-p[1], p[0]))
    return scored if k is None else scored[:k]


def assert_same_ranking(got, want):
    assert [d for d, _ in got] == [d for d, _ in want]
    np.testing.assert_allclose([s for _, s in got], [s for _, s in want], atol=1e-5)


def test_vector_search_matches_brute_force():
    rng = np.random.default_rng(7)
    dim = 32
    ix = VectorIndex(dim)
    vecs = unit(rng, 500, dim)
    model = {f"t{i}": vecs[i] for i in range(500)}
    for d, v in model.items():
        ix.upsert(d, v)
    for q in unit(rng, 10, dim):
        assert_same_ranking(ix.search(q, k=10), brute(model, q, k=10))
        assert_same_ranking(ix.search(q), brute(model, q))
        subset = [f"t{i}" for i in rng.choice(500, 40, replace=False)] + ["not-indexed"]
        assert_same_ranking(ix.search(q, k=5, ids=subset), brute(model, q, k=5, ids=subset))
        # A large subset takes the full product and picks rows; duplicates count once.
        big = [f"t{i}" for i in range(0, 500, 2)] * 2
        assert_same_ranking(ix.search(q, ids=big), brute(model, q, ids=big))
        assert_same_ranking(ix.search(q, ids=subset + subset), brute(model, q, ids=subset))
        assert ix.search(q, ids=[]) == [] and ix.search(q, ids=["nope"]) == []
        hits = ix.most_similar(q, 0.3)
        assert_same_ranking(hits, [p for p in brute(model, q) if p[1] >= 0.3])


def test_vector_upsert_normalises_and_get_returns_copy():
    ix = VectorIndex(3)
    ix.upsert("a", [3.0, 0.0, 4.0])
    v = ix.get("a")
    np.testing.assert_allclose(v, [0.6, 0.0, 0.8], rtol=1e-6)
    v[:] = 0
    assert ix.get("a")[0] == pytest.approx(0.6)
    assert ix.get("missing") is None
    ix.upsert("zero", [0.0, 0.0, 0.0])  # a text without tokens: similar to nothing
    assert dict(ix.search([1.0, 0.0, 0.0]))["zero"] == 0.0


def test_vector_same_id_remove_and_reinsert():
    ix = VectorIndex(2)
    ix.upsert("a", [1.0, 0.0])
    ix.upsert("b", [0.0, 1.0])
    ix.upsert("c", [1.0, 1.0])
    ix.upsert("a", [0.0, 1.0])  # overwrite in place
    assert len(ix) == 3
    assert [d for d, _ in ix.search([0.0, 1.0], k=2)] == ["a", "b"]
    ix.remove("a")  # swap-remove: "c" moves into a's row
    ix.remove("a")
    assert len(ix) == 2 and "a" not in ix
    np.testing.assert_allclose(ix.get("c"), [2**-0.5, 2**-0.5], rtol=1e-6)
    ix.upsert("a", [1.0, 0.0])
    assert [d for d, _ in ix.search([1.0, 0.0])] == ["a", "c", "b"]
    for d in ["a", "b", "c"]:
        ix.remove(d)
    assert len(ix) == 0 and ix.search([1.0, 0.0]) == []


def test_vector_ties_broken_by_id():
    ix = VectorIndex(2)
    for d in ["e", "b", "d", "a", "c"]:
        ix.upsert(d, [1.0, 0.0])
    ix.upsert("z", [0.0, 1.0])
    assert [d for d, _ in ix.search([1.0, 0.0], k=3)] == ["a", "b", "c"]
    assert [d for d, _ in ix.most_similar([1.0, 0.0], 0.5)] == ["a", "b", "c", "d", "e"]


def test_vector_bad_inputs():
    ix = VectorIndex(3)
    with pytest.raises(InvalidInput):
        ix.upsert("a", [1.0, 2.0])
    with pytest.raises(InvalidInput):
        ix.upsert("a", [1.0, float("nan"), 0.0])
    with pytest.raises(InvalidInput):
        ix.search([1.0, 0.0, 0.0], ids="abc")
    with pytest.raises(InvalidInput):
        ix.search([[1.0, 0.0, 0.0], [0.0, 1.0, 0.0]])
    with pytest.raises(InvalidInput):
        VectorIndex(0)


def test_upsert_many_equals_repeated_upsert():
    rng = np.random.default_rng(3)
    vecs = unit(rng, 50, 8)
    ids = [f"x{i % 40}" for i in range(50)]  # duplicates: the later vector wins
    a, b = VectorIndex(8), VectorIndex(8)
    a.upsert("x3", vecs[0])
    b.upsert("x3", vecs[0])
    a.upsert_many(ids, vecs)
    for d, v in zip(ids, vecs):
        b.upsert(d, v)
    assert len(a) == len(b) == 40
    for d in ids:
        np.testing.assert_array_equal(a.get(d), b.get(d))


vector_ops = st.lists(
    st.one_of(
        st.tuples(st.just("upsert"), st.sampled_from(IDS), st.integers(0, 10_000)),
        st.tuples(st.just("remove"), st.sampled_from(IDS), st.just(0)),
    ),
    max_size=40,
)


@settings(max_examples=200, deadline=None)
@given(vector_ops, st.integers(0, 10_000))
def test_vector_ops_sequence_matches_model(ops, qseed):
    dim = 6
    ix = VectorIndex(dim)
    model: dict[str, np.ndarray] = {}
    for op, doc_id, seed in ops:
        if op == "upsert":
            v = unit(np.random.default_rng(seed), 1, dim)[0]
            ix.upsert(doc_id, v)
            model[doc_id] = v
        else:
            ix.remove(doc_id)
            model.pop(doc_id, None)
    assert len(ix) == len(model) and set(ix) == set(model)
    q = unit(np.random.default_rng(qseed), 1, dim)[0]
    got, want = ix.search(q), brute(model, q)
    # Scores are float32 in the index: compare as sets of near-equal scores, order by score.
    assert sorted(d for d, _ in got) == sorted(d for d, _ in want)
    gs = dict(got)
    for d, s in want:
        assert gs[d] == pytest.approx(s, abs=1e-5)
    assert [s for _, s in got] == sorted((s for _, s in got), reverse=True)
    subset = IDS[::2]
    assert sorted(d for d, _ in ix.search(q, ids=subset)) == sorted(d for d in model if d in subset)


@given(st.lists(st.tuples(st.text(min_size=1, max_size=6),
                          st.one_of(st.sampled_from([0.5, 1.0, 2.0, 0.25, 3.0]),
                                    st.floats(0.0, 10.0, allow_nan=False))),
                min_size=1, max_size=120, unique_by=lambda p: p[0]),
       st.one_of(st.none(), st.integers(min_value=1, max_value=40)))
def test_ranking_is_score_descending_then_id_whatever_the_ties(docs, k):
    # BM25 ties many documents at one score; the k best are still the smallest ids among them.
    # Few distinct scores are peeled from the top, many partitioned (common._kth_largest).
    ids = [d for d, _ in docs]
    scores = np.array([s for _, s in docs])
    want = sorted(docs, key=lambda p: (-p[1], p[0]))
    assert _ranked(scores, np.arange(len(ids)), ids, k) == (want if k is None else want[:k])
