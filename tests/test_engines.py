"""The store-facing tests again on the other engine, in a subprocess (the two engines
cannot be loaded into one process)."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from servers import HANG

HERE = Path(__file__).parent


# The store-facing files, in three parts of about equal length (measured): each part is a
# subprocess test of its own, so the suite's xdist workers share them and no worker is left
# with one long test while the other has nothing to do.
PARTS = [
    ["test_erasure.py", "test_transfer.py", "test_transition.py"],
    ["test_store.py", "test_integrity.py", "test_scopes.py", "test_snapshot.py",
     "test_ingest.py", "test_dashboard_pages.py"],
    ["test_tamper.py", "test_api_input.py", "test_episode_governance.py", "test_episodes.py",
     "test_views.py", "test_retrieve.py"],
]
# Property tests whose full count the default-engine session runs: here fewer examples of the
# scope-leak property (each runs two memories on this engine), and of canonical JSON, which
# never touches an engine.
EXAMPLES = {"GEM_LEAK_EXAMPLES": "6", "GEM_CANONICAL_JSON_EXAMPLES": "20"}


@pytest.mark.slow
@pytest.mark.skipif(os.environ.get("GEM_TEST_ENGINE", "kuzu") != "kuzu",
                    reason="runs once, from the default-engine session")
@pytest.mark.parametrize("files", PARTS, ids=[f"part{n + 1}" for n in range(len(PARTS))])
def test_store_ingest_retrieve_and_transition_tests_pass_on_ladybug(files):
    pytest.importorskip("ladybug")
    env = {**os.environ, "GEM_TEST_ENGINE": "ladybug", **EXAMPLES}
    # Its output goes straight to this test's (shown on failure, live with -s); it takes as
    # long as the machine needs: HANG only guards against a hang.
    done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-n", "0",
                           *[str(HERE / f) for f in files]], env=env, timeout=HANG, cwd=HERE.parent)
    assert done.returncode == 0, "the ladybug session failed: its output is above"
