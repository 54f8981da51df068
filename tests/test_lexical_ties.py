"""BM25 over short documents from a small vocabulary: scores tie by the thousand, and the best k
are still the exhaustive answer exactly (same documents, same floats, ties by id)."""
import random

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from gem.index import LexicalIndex, common
from gem.index.common import id_keys, ranked
from test_index import brute_bm25

WORDS = ["alpha", "budget", "launch", "design", "review", "hiring"]


class _Pruned(LexicalIndex):
    # every top-k query pruned, however small; small segments so merges and dead postings
    # occur; passes by blocks and codes however few the postings
    _BUFFER_POSTINGS = 64
    _EXHAUSTIVE_BELOW = 0
    _CODED_FROM = 0


class _Coded(LexicalIndex):
    _BUFFER_POSTINGS = 64
    _CODED_FROM = 0


class _PrunedSmallBlocks(_Pruned):
    _BLOCK = 4
    _PRUNED_AT_MOST = 2.0  # never give up for a pass: the pruned path runs to its end


def field_text(rnd: random.Random, topics: int) -> str:
    t = rnd.randrange(topics)
    return (f"topic {t} {WORDS[t % len(WORDS)]} field {rnd.randrange(4)} value {t} "
            f"{rnd.choice(WORDS)}" + (" extra" if rnd.random() < 0.1 else ""))


@settings(max_examples=60, deadline=None)
@given(st.integers(0, 10_000), st.integers(20, 400), st.integers(1, 40),
       st.sampled_from([_Pruned, _PrunedSmallBlocks, _Coded, LexicalIndex]),
       st.sampled_from([(1.2, 0.75), (0.9, 0.4)]))
def test_top_k_over_short_field_documents_equals_brute_force(seed, n, topics, cls, params):
    # Documents like the unit layer's ("topic 3 design field 1 value 3 review"): most query
    # terms are in a large share of them and every document of the same terms ties.
    rnd = random.Random(seed)
    ix = cls(*params)
    model: dict[str, str] = {}
    for i in range(n):
        doc_id = f"t{rnd.randrange(2 * n)}/field {rnd.randrange(4)}"
        if model and rnd.random() < 0.1:  # removals and rewrites leave dead postings
            gone = rnd.choice(sorted(model))
            ix.remove(gone)
            del model[gone]
        text = field_text(rnd, topics)
        ix.upsert(doc_id, text)
        model[doc_id] = text
    for _ in range(6):
        q = " ".join(rnd.sample(WORDS + ["topic", "value", "field", "3", "extra"],
                                rnd.randint(1, 3)))
        want = brute_bm25(model, q, *params)
        assert ix.search(q) == want, q
        for k in (1, 5, 50):
            assert ix.search(q, k=k) == want[:k], (q, k)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.text(min_size=0, max_size=10), min_size=1, max_size=80, unique=True),
       st.integers(1, 4), st.integers(1, 40), st.randoms(use_true_random=False))
def test_ranking_by_id_keys_equals_sorting_ids(ids, levels, k, rnd):
    # The keys compare the ids' first 8 bytes of UTF-8: ids sharing them (a long common
    # prefix, NUL characters, non-ASCII) are told apart by the ids themselves.
    ids = ids + ["t12345/field 1", "t12345/field 2", "t12345/f", "\x00", "é", "e\x00"]
    scores = np.array([float(rnd.randrange(levels)) + 1.0 for _ in ids])
    want = sorted(zip(ids, scores.tolist()), key=lambda p: (-p[1], p[0]))[:k]
    keys = id_keys(ids)
    before = common._KEYED_TIE
    common._KEYED_TIE = 0  # the keyed selection for any tie, however small
    try:
        assert ranked(scores, np.arange(len(ids)), ids, k, lambda: keys) == want
    finally:
        common._KEYED_TIE = before


def test_large_tie_picks_smallest_ids_after_writes():
    # A tie larger than common._KEYED_TIE builds the id keys once; later writes (new rows,
    # reused rows of removed documents) keep them, so later ties still pick the smallest ids.
    rnd = random.Random(5)
    ix = LexicalIndex()
    ids = [f"doc-{rnd.randrange(10**9):09d}" for _ in range(6000)]
    for d in ids:
        ix.upsert(d, "common words")
    assert ix.search("common", k=3) == [(d, ix.search("common")[0][1]) for d in sorted(ids)[:3]]
    for d in sorted(ids)[:50]:
        ix.remove(d)
    for d in ("doc-0", "a", "doc-00000000"):  # reuse removed rows, then a new one
        ix.upsert(d, "common words")
    ix.upsert("0" * 20, "common words")
    top = sorted(set(ids) - set(sorted(ids)[:50]) | {"doc-0", "a", "doc-00000000", "0" * 20})
    assert [d for d, _ in ix.search("common", k=5)] == top[:5]
