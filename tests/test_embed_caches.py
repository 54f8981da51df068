"""What the hashing embedder keeps between calls stays small (gem/embed.py)."""
from __future__ import annotations

import tracemalloc

import numpy as np

from gem import embed


def test_embedding_many_distinct_word_pairs_keeps_a_bounded_cache():
    """Each cached word pair is kept for the life of the process: 60k distinct pairs of 300
    words (a large memory's values pair their words in ever new ways) leave a few MB behind,
    not one entry per pair, and the vectors are the ones computed without the caches."""
    vocabulary = [f"word{i}" for i in range(300)]
    texts = [f"{vocabulary[i % 300]} {vocabulary[i // 300]}" for i in range(60_000)]
    embedder = embed.HashingEmbedder(cache_size=0)
    embed._bigram_slot.cache_clear()
    embedder.embed(vocabulary)  # the words' own cache entries
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        for start in range(0, len(texts), 5000):
            embedder.embed(texts[start:start + 5000])
        kept = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    assert kept < 7 << 20, f"{kept / (1 << 20):.1f} MB kept"
    sample = [texts[7], texts[59_999]]
    embed._bigram_slot.cache_clear()
    embed._word_slots.cache_clear()
    assert np.array_equal(embedder.embed(sample), embed.HashingEmbedder(cache_size=0).embed(sample))
