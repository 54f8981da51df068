import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gem.errors import InvalidInput
from gem.index import LexicalIndex, VectorIndex
from gem.index.common import ranked as _ranked

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


class _CacheEverything(LexicalIndex):
    # Posting arrays are normally cached only for frequent terms; caching all of them lets
    # small examples exercise the cache invalidation.
    _CACHE_MIN_DF = 1


@settings(max_examples=200, deadline=None)
@given(lexical_ops, st.randoms(use_true_random=False), st.booleans())
def test_bm25_incremental_equals_rebuild(ops, rnd, cache_all):
    live = _CacheEverything() if cache_all else LexicalIndex()
    model: dict[str, str] = {}
    for op, doc_id, text in ops:
        if op == "upsert":
            live.upsert(doc_id, text)
            model[doc_id] = text
        else:
            live.remove(doc_id)
            model.pop(doc_id, None)
        # Searching between writes fills the posting-array cache that later writes must drop.
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


@given(st.lists(st.tuples(st.text(min_size=1, max_size=6), st.sampled_from([0.5, 1.0, 2.0, 0.25, 3.0])),
                min_size=1, max_size=120, unique_by=lambda p: p[0]),
       st.one_of(st.none(), st.integers(min_value=1, max_value=40)))
def test_ranking_is_score_descending_then_id_whatever_the_ties(docs, k):
    # BM25 ties many documents at one score; the k best are still the smallest ids among them.
    ids = [d for d, _ in docs]
    scores = np.array([s for _, s in docs])
    want = sorted(docs, key=lambda p: (-p[1], p[0]))
    assert _ranked(scores, np.arange(len(ids)), ids, k) == (want if k is None else want[:k])
