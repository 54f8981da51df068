"""Every benchmark still runs: each script at a tiny size, in a subprocess, must finish and
print its table. Benchmarks are not tests of speed (nothing here looks at a time); this only
keeps them from rotting when the API they drive changes."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from servers import HANG  # a guard against hangs only (tests/servers.py)

BENCH = Path(__file__).resolve().parent.parent / "bench"

RUNS = {
    "engine_forms.py": ["--sizes", "30", "--fields", "2", "--reps", "1"],
    "disk.py": ["--topics", "30", "--fields", "2", "--updates", "1", "--engines", "kuzu"],
    "scale.py": ["--sizes", "60", "--fields", "2", "--updates", "2", "--engines", "kuzu"],
    "tenants.py": ["--topics", "40", "--big", "60", "--singles", "40", "--engines", "kuzu"],
    "serve.py": ["--topics", "20", "--ops", "4", "--rounds", "1"],
    "dashboard.py": ["--topics", "120", "--rounds", "1", "--history", "40"],
    "maintenance.py": ["--sizes", "200", "--rounds", "20"],
    "forget_audit.py": ["--topics", "30"],
    "open.py": ["--topics", "30", "--opens", "1", "--baseline", "HEAD", "--no-profile"],
    "poolbound.py": ["--topics", "30", "--updates", "1"],
    "rebuild.py": ["--topics", "30", "--updates", "1", "--baseline", "HEAD"],
    "index.py": ["--sizes", "300", "--queries", "20"],
    "lexical.py": ["--sizes", "300", "--queries", "10", "--only", "gem,baseline"],
    "places.py": ["--sizes", "300", "--queries", "10", "--memory", "50"],
    "footprint.py": ["--sizes", "60", "--fields", "2", "--audit",
                     "--variants", "default;arena=0"],
    "vectors.py": ["--sizes", "500", "--queries", "10", "--reps", "1", "--snapshot-docs", "500",
                   "--pair-sizes", "500", "--embed-texts", "500"],
    "ingest_retrieve.py": ["--topics", "200", "--rounds", "30", "--engines", "kuzu"],
    "locomo.py": ["--conversations", "1", "--sessions", "2", "--questions", "5", "--k", "10"],
    "crash.py": ["--kills", "2", "--engines", "kuzu", "--scenarios", "batch"],
    "scaleout.py": ["--writers", "2", "--ops", "4", "--scopes", "3", "--facts", "3"],
}


def test_every_benchmark_is_listed():
    scripts = {p.name for p in BENCH.glob("*.py")} - {"common.py", "peers.py"}
    assert scripts == set(RUNS), "add the new benchmark to RUNS with tiny arguments"


@pytest.mark.slow
@pytest.mark.parametrize("script", sorted(RUNS))
def test_benchmark_runs_at_a_tiny_size(script, tmp_path):
    # Its own temp dir, which it must leave empty: benchmarks build databases of GBs.
    scratch = tmp_path / "tmp"
    scratch.mkdir()
    env = {**os.environ, "GEM_TEST_ENGINE": "kuzu", "TMPDIR": str(scratch)}
    if script != "locomo.py":  # the others' made-up data, as on a machine without LoCoMo
        env["GEM_LOCOMO"] = os.path.join(os.sep, "nonexistent", "locomo-dev.json")
    done = subprocess.run([sys.executable, str(BENCH / script), *RUNS[script]], cwd=BENCH,
                          env=env, capture_output=True, text=True, timeout=HANG)
    assert done.returncode == 0, done.stderr[-3000:]
    if done.stdout.startswith("skipped:"):  # data read by path that this machine lacks
        pytest.skip(done.stdout.strip())
    assert len(done.stdout.strip().splitlines()) >= 2, done.stdout  # a table: a header and rows
    assert not list(scratch.iterdir()), f"{script} left temporary files: {sorted(os.listdir(scratch))}"


def test_scale_table_says_a_missing_peer_is_not_installed(monkeypatch):
    monkeypatch.syspath_prepend(str(BENCH))
    import scale

    ran = {"peer": "kuzu-memory", "sizes": {"10": {
        "batch_new": (500.0, None), "batch_update": (400.0, None), "single": ((2.0, 3.0), None),
        "first_text": 0.004, "text": (2.0, 5.0), "open": 0.3, "rss_mb": 200.0, "rss_now_mb": 190.0,
        "facts": 100, "bytes_per_fact": 900.0}}}
    lines = scale.table({"kuzu-memory": ran, "mem0": {"peer": "mem0", "missing": True, "sizes": {}}})
    lines = lines.splitlines()
    assert lines[0].split()[-3:] == ["kuzu-memory", "@10", "mem0"]
    first = lines[2]
    assert first.endswith("not installed") and "500" in first
    assert "2.0x" in next(line for line in lines if "first / later p50" in line)
    # what a peer has no equivalent of (structured, raw twin, forgetting) is a dash
    assert next(line for line in lines if line.startswith("structured")).split()[-2:] == ["-", "-"]


def test_a_benchmark_whose_engine_run_failed_exits_non_zero(monkeypatch):
    """side_by_side leaves a failed run out so the others still print; the benchmark's exit
    status still says so (a tiny run above would otherwise pass with its gem column missing)."""
    monkeypatch.syspath_prepend(str(BENCH))
    from common import exit_status

    assert exit_status({"kuzu": {}, "ladybug": {}}, ["kuzu", "ladybug"]) == 0
    assert exit_status({"kuzu": {}, "mem0": {"missing": True}}, ["kuzu", "mem0"]) == 0
    assert exit_status({"ladybug": {}}, ["kuzu", "ladybug"]) == 1
