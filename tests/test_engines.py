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


@pytest.mark.slow
@pytest.mark.skipif(os.environ.get("GEM_TEST_ENGINE", "kuzu") != "kuzu",
                    reason="runs once, from the default-engine session")
def test_store_ingest_retrieve_and_transition_tests_pass_on_ladybug():
    pytest.importorskip("ladybug")
    env = {**os.environ, "GEM_TEST_ENGINE": "ladybug"}
    files = ["test_store.py", "test_ingest.py", "test_retrieve.py", "test_transition.py",
             "test_integrity.py", "test_snapshot.py", "test_scopes.py",
             "test_tamper.py", "test_erasure.py", "test_views.py", "test_dashboard_pages.py",
             "test_api_input.py", "test_transfer.py", "test_episodes.py",
             "test_episode_governance.py"]
    # Its output goes straight to this test's (shown on failure, live with -s); it takes as
    # long as the machine needs: HANG only guards against a hang.
    done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-n", "0",
                           *[str(HERE / f) for f in files]], env=env, timeout=HANG, cwd=HERE.parent)
    assert done.returncode == 0, "the ladybug session failed: its output is above"
