import importlib.util
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import gem.embed
from gem.embed import (
    Embedder,
    HashingEmbedder,
    SentenceTransformerEmbedder,
    default_embedder,
)
from gem.errors import InvalidInput
from servers import HANG  # a guard against hangs only (tests/servers.py)

TEXTS = [
    "Website Redesign deadline March 15",
    "lunch preferences pizza",
    "",
    "Ana prefers vegetarian food",
]


def cos(a, b):
    return float(np.dot(a, b))


def test_shape_dtype_and_protocol():
    e = HashingEmbedder(64)
    assert isinstance(e, Embedder)
    assert e.dim == 64 and e.name == "hashing-64-v2"
    assert HashingEmbedder(64, version=1).name == "hashing-64-v1"
    m = e.embed(TEXTS)
    assert m.shape == (4, 64) and m.dtype == np.float32
    assert e.embed([]).shape == (0, 64)


@pytest.mark.parametrize("dim", [1, 7, 256, 1000])
def test_dim_honoured_and_rows_normalised(dim):
    m = HashingEmbedder(dim).embed(TEXTS)
    assert m.shape == (4, dim)
    norms = np.linalg.norm(m, axis=1)
    np.testing.assert_allclose(norms[[0, 1, 3]], 1.0, rtol=1e-6)


def test_zero_row_for_text_without_tokens():
    m = HashingEmbedder().embed(["", "   ", "!!! ---", "ok"])
    assert not m[:3].any()
    assert np.linalg.norm(m[3]) == pytest.approx(1.0, rel=1e-6)


def test_deterministic_within_process_and_case_insensitive():
    e = HashingEmbedder()
    a = e.embed(TEXTS)
    assert np.array_equal(a, HashingEmbedder().embed(TEXTS))
    assert np.array_equal(e.embed(["WEBSITE redesign!"]), e.embed(["website redesign"]))


def test_deterministic_across_processes():
    # A different PYTHONHASHSEED in the child proves nothing depends on Python's hash().
    code = (
        "import sys, numpy as np\n"
        "from gem.embed import HashingEmbedder\n"
        "m = HashingEmbedder(256).embed(sys.argv[1:])\n"
        "sys.stdout.write(m.astype('<f4').tobytes().hex())\n"
    )
    # The child must import this same checkout whether or not gem is installed.
    root = str(Path(gem.embed.__file__).resolve().parents[1])
    path = os.pathsep.join(p for p in (root, os.environ.get("PYTHONPATH")) if p)
    env = {**os.environ, "PYTHONHASHSEED": "12345", "PYTHONPATH": path}
    out = subprocess.run(
        [sys.executable, "-c", code, *TEXTS], capture_output=True, text=True, check=True, env=env
    ).stdout
    child = np.frombuffer(bytes.fromhex(out), dtype="<f4").reshape(len(TEXTS), 256)
    assert np.array_equal(child, HashingEmbedder(256).embed(TEXTS))


def test_known_vector_is_stable():
    # Pins the feature scheme: if this changes, stored embeddings are invalid and the
    # embedder's name version must be bumped.
    v = HashingEmbedder(16, version=1).embed(["website redesign"])[0]
    assert v.astype("<f4").tobytes().hex() == (
        "19d2303fc02813be00000000c02813be4519cd3e5dacc2bec028133ec028133e"
        "a1a7093e18b17bbea1a709be00000000c02813bea1a709be0000000000000000"
    )
    v2 = HashingEmbedder(16).embed(["website redesign"])[0]  # "redesign" -> "redesign"
    assert v2.astype("<f4").tobytes().hex() == (
        "58475c3f40fbf0bd000000000592933e30b2d03d059293be0000000040fbf03d"
        "30b2d03d30b2d03d30b2d0bd0000000040fbf0bd30b2d0bd0000000000000000"
    )


# Texts chosen to reach every branch of the feature scheme: empty and symbol-only texts,
# one-letter words, repeats, non-ASCII (NFKC, casefold, format characters), long words.
PINNED_TEXTS = [
    "Website Redesign deadline March 15",
    "Project 042 kitchen renovation budget",
    "",
    "!!! ---",
    "a",
    "the the the the the",
    "Ana prefers vegetarian food; Bob prefers pizza (with extra cheese).",
    "\u00dcn\u00efc\u00f6d\u00e9 Stra\u00dfe \u0130stanbul \u01c5emal \ufb01ne na\u00efve caf\u00e9",
    "\u65e5\u672c\u8a9e\u306e\u30c6\u30ad\u30b9\u30c8 \u3068 \u4e2d\u6587 \u6df7\u5408 text",
    "supercalifragilisticexpialidocious antidisestablishmentarianism",
    "co\u00adoperate zero\u200bwidth",
    "I went to a LGBTQ support group yesterday and it was so powerful.",
]

_PINNED_WORDS = (
    "project deadline budget kitchen renovation ana bob caf\u00e9 stra\u00dfe \u65e5\u672c review plan "
    "meeting notes q3 marketing migration kubernetes vegetarian pizza x yz "
    "redesign redesigned website launch"
).split()


def _generated_texts(n):
    # A fixed linear congruential generator: the texts must not depend on any library's RNG.
    state, out = 12345, []
    for _ in range(n):
        state = (state * 6364136223846793005 + 1442695040888963407) % 2**64
        length = state >> 60  # 0..15 words
        words = []
        for _ in range(length):
            state = (state * 6364136223846793005 + 1442695040888963407) % 2**64
            words.append(_PINNED_WORDS[(state >> 33) % len(_PINNED_WORDS)])
        out.append(" ".join(words))
    return out


# sha256 of the little-endian float32 bytes, computed with the per-feature implementation
# that defined hashing-*-v1 (before it was vectorised). dim 7 makes most features collide,
# which pins the order colliding features are summed in; the 3000 generated texts repeat
# words and whole texts, which exercises every cache.
@pytest.mark.parametrize(
    "dim, pinned, generated",
    [
        (256, "0ecf644fc69e62142e39ed72df59520580a57df75217d07c12f8f52e3109e9b1",
         "111588cac773e335cd5c3886c2de8ccf5a82696345b4998e39d94bd04cffc8c9"),
        (7, "e0c6a5585c812e21e7a05f065b5329b74deddb0a2978b41c238defa38db4ccd5",
         "42ad11c114b2b65442dc2a18e4509698deae014dfa4208d066aaa97ed689cd5b"),
        (1000, "a47aa15d20d38c1d2e6f80052bee2758e90c4d5090475bd4f0abd52f9b052f40",
         "e691c84dc3848adb470cec393799e5f8b05c412ecc73fd996600ca732f5a0d92"),
    ],
)
def test_vectors_pinned_bit_for_bit(dim, pinned, generated):
    import hashlib

    def digest(m):
        return hashlib.sha256(m.astype("<f4").tobytes()).hexdigest()

    e = HashingEmbedder(dim, version=1)  # v1 stays what databases embedded with it hold
    assert digest(e.embed(PINNED_TEXTS)) == pinned
    texts = _generated_texts(3000)
    assert digest(e.embed(texts)) == generated
    # Again, now that every cache is warm, and one text at a time.
    assert digest(e.embed(texts)) == generated
    one_by_one = np.concatenate([e.embed([t]) for t in PINNED_TEXTS])
    assert digest(one_by_one) == pinned


def test_similarity_ordering():
    e = HashingEmbedder()
    q, rel, unrel = e.embed(
        ["deadline of the website redesign", "Website Redesign deadline March 15", "lunch preferences pizza"]
    )
    assert cos(q, rel) > cos(q, unrel) + 0.3

    pairs = [
        # (query, related, unrelated)
        ("Ana's food preferences", "Ana prefers vegetarian food", "server migration to Kubernetes"),
        ("kubernetes migration status", "server migration to Kubernetes", "Ana prefers vegetarian food"),
        ("redesigned website", "website redesign", "quarterly tax filing"),  # morphology via trigrams
        ("budget for Q3 marketing", "marketing budget Q3 approved", "marketing team offsite"),
    ]
    for query, related, unrelated in pairs:
        a, b, c = e.embed([query, related, unrelated])
        assert cos(a, b) > cos(a, c), (query, related, unrelated)


def test_typo_is_close():
    e = HashingEmbedder()
    a, b, c = e.embed(["Website Redesign", "Webiste Redesgin", "Lunch Order"])
    assert cos(a, b) > 0.2 and cos(a, b) > cos(a, c) + 0.1


def test_bad_inputs():
    with pytest.raises(InvalidInput):
        HashingEmbedder(0)
    with pytest.raises(InvalidInput):
        HashingEmbedder(True)  # type: ignore[arg-type]
    with pytest.raises(InvalidInput):
        HashingEmbedder().embed("a single string")  # type: ignore[arg-type]
    with pytest.raises(InvalidInput):
        HashingEmbedder().embed(["ok", 3])  # type: ignore[list-item]


def test_default_embedder():
    e = default_embedder()
    assert isinstance(e, HashingEmbedder) and e.dim == 256 and e.name == "hashing-256-v2"


def test_sentence_embedder_without_the_extra(monkeypatch):
    # None in sys.modules makes the import fail as if the package were not installed.
    monkeypatch.setitem(sys.modules, "sentence_transformers", None)
    with pytest.raises(InvalidInput, match=r"pip install 'gem-memory\[sentence\]'"):
        SentenceTransformerEmbedder("all-MiniLM-L6-v2")


_HAS_ST = importlib.util.find_spec("sentence_transformers") is not None


@pytest.mark.skipif(not _HAS_ST, reason="sentence_transformers is not installed")
def test_sentence_embedder_never_downloads(tmp_path):
    # In a child process: importing torch brings its own OpenMP pool into the process, which
    # the thread-limit tests (tests/test_numeric.py) would then see.
    import subprocess
    code = (
        "import sys, pytest\n"
        "from gem.embed import SentenceTransformerEmbedder\n"
        "from gem.errors import InvalidInput\n"
        "for model in ('gem-test/model-that-is-not-cached', sys.argv[1]):\n"
        "    with pytest.raises(InvalidInput, match='locally'):\n"
        "        SentenceTransformerEmbedder(model)\n")
    env = {**os.environ, "HF_HOME": str(tmp_path / "empty-hf-home")}
    done = subprocess.run([sys.executable, "-c", code, str(tmp_path / "no-such-model-dir")],
                          env=env, capture_output=True, text=True, timeout=HANG)
    assert done.returncode == 0, done.stderr[-3000:]


class _FakeSentenceTransformer:
    """Stands in for the library to check gem's wrapper: what it passes, what it enforces."""

    seen: list = []

    def __init__(self, model_name_or_path, device=None, local_files_only=False):
        type(self).seen.append(
            (model_name_or_path, local_files_only, os.environ.get("HF_HUB_OFFLINE"))
        )
        if model_name_or_path == "not-cached":
            raise OSError("We couldn't connect to the Hub and the files are not in the cache")

    def get_sentence_embedding_dimension(self):
        return 4

    def encode(self, texts, convert_to_numpy, normalize_embeddings, show_progress_bar):
        assert convert_to_numpy and normalize_embeddings
        return np.tile(np.array([0.5, 0.5, 0.5, 0.5], dtype=np.float32), (len(texts), 1))


def test_sentence_wrapper_loads_offline_only(monkeypatch):
    import types

    fake = types.ModuleType("sentence_transformers")
    fake.SentenceTransformer = _FakeSentenceTransformer
    monkeypatch.setitem(sys.modules, "sentence_transformers", fake)
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    _FakeSentenceTransformer.seen.clear()

    e = SentenceTransformerEmbedder("some/cached-model")
    assert _FakeSentenceTransformer.seen == [("some/cached-model", True, "1")]
    assert "HF_HUB_OFFLINE" not in os.environ  # restored after the load
    assert isinstance(e, Embedder) and e.dim == 4 and "some/cached-model" in e.name
    m = e.embed(["hello", "", "..."])
    assert m.shape == (3, 4) and m.dtype == np.float32
    assert np.linalg.norm(m[0]) == pytest.approx(1.0) and not m[1:].any()

    with pytest.raises(InvalidInput, match="locally"):
        SentenceTransformerEmbedder("not-cached")


# ---------------------------------------------------------------- batching and the cache


def _reference_embed(texts, dim, version=1):
    """hashing-*-v1 (and v2, which hashes search terms instead of tokens) written the plain
    way (one feature at a time, one row at a time): the definition the vectorised and cached
    embedder must reproduce bit for bit."""
    import hashlib
    import math

    from gem.terms import search_terms
    from gem.text import tokens

    def slot(feature):
        d = hashlib.blake2b(feature.encode("utf-8"), digest_size=8, person=b"gem-hash-v1").digest()
        return int.from_bytes(d[:7], "little") % dim, (1.0 if d[7] & 1 else -1.0)

    out = np.zeros((len(texts), dim), dtype=np.float32)
    for row, text in enumerate(texts):
        words = tokens(text) if version == 1 else search_terms(text)
        feats = []
        for w in words:
            feats.append(("w\x00" + w, 1.0))
            marked = "<" + w + ">"
            n_tri = len(marked) - 2
            feats += [("c\x00" + marked[i : i + 3], 1.0 / n_tri**0.5) for i in range(n_tri)]
        feats += [("b\x00" + a + " " + b, 0.7) for a, b in zip(words, words[1:])]
        acc = np.zeros(dim)
        for feature, weight in feats:  # summed in feature order, in float64
            index, sign = slot(feature)
            acc[index] += sign * weight
        norm = math.sqrt(math.fsum((acc * acc).tolist()))
        if norm > 0:
            acc /= norm
        out[row] = acc
    return out


_text = st.text(
    alphabet=st.one_of(
        st.sampled_from("abcdeé ßİǅﬁ日本-!.\u00ad\u200b\t"), st.characters(codec="utf-8")
    ),
    max_size=40,
)


@settings(max_examples=150, deadline=None)
@given(st.lists(_text, max_size=12), st.sampled_from([1, 7, 64, 256]), st.integers(0, 5),
       st.sampled_from([1, 2]))
def test_batch_and_cache_equal_the_plain_definition(texts, dim, cache_size, version):
    texts = texts + texts[: len(texts) // 2]  # repeats within one batch
    want = _reference_embed(texts, dim, version)
    e = HashingEmbedder(dim, cache_size=cache_size, version=version)
    for _ in range(2):  # cold, then with whatever the (tiny) cache kept
        got = e.embed(texts)
        assert got.dtype == np.float32 and got.shape == (len(texts), dim)
        assert got.tobytes() == want.tobytes()
    for t, row in zip(texts, want):
        assert e.embed([t])[0].tobytes() == row.tobytes()


def test_cache_is_bounded_and_least_recently_used_goes_first():
    e = HashingEmbedder(16, cache_size=3)
    e.embed(["a", "b", "c"])
    e.embed(["a"])  # "a" is now the most recently used
    e.embed(["d"])  # evicts "b"
    assert list(e._cache.slot_of) == ["c", "a", "d"]
    e.embed([f"t{i}" for i in range(10)])  # a batch larger than the cache keeps its tail
    assert list(e._cache.slot_of) == ["t7", "t8", "t9"]
    assert e._cache.rows.shape[0] <= 3
    assert HashingEmbedder(16, cache_size=0).embed(["x", "x"]).shape == (2, 16)
    with pytest.raises(InvalidInput):
        HashingEmbedder(16, cache_size=-1)


def test_returned_rows_are_copies_not_the_cache():
    e = HashingEmbedder(32)
    first = e.embed(["shared title", "shared title"])
    want = first[0].copy()
    first[:] = 7.0
    assert e.embed(["shared title"])[0].tobytes() == want.tobytes()


def test_threads_sharing_one_embedder_get_the_plain_definition():
    import threading

    texts = [f"topic {i % 37} words {i % 11}" for i in range(400)]
    want = _reference_embed(texts, 64, version=2)
    e = HashingEmbedder(64, cache_size=16)  # constant eviction while threads interleave
    failures = []

    def work(offset):
        for start in range(offset, len(texts), 25):
            batch = texts[start : start + 25]
            if e.embed(batch).tobytes() != want[start : start + 25].tobytes():
                failures.append(start)

    threads = [threading.Thread(target=work, args=(k,)) for k in (0, 5, 10, 15)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert failures == []
