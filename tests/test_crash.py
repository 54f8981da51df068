"""Crash tolerance: processes SIGKILLed at random moments of every kind of write, and power
cuts simulated by keeping only what was fsynced (gem/testing/crash.py, powerloss.py). The kill
runs are small here (`python bench/crash.py` runs >= 1,000 kills per engine); the checks they
rely on are tested first on states known to be broken, so that a clean run means something."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap

import pytest

import gem
from gem.store import compact
from gem.testing import powerloss
from gem.testing.crash import SCENARIOS, Harness, read_lines, verify
from gem.testing.crash_workloads import Acks

from conftest import ENGINE
from servers import wait_for

pytestmark = pytest.mark.skipif(ENGINE == "falkordb", reason="kills an embedded database's owner")


def _acked_batch(mem, acks, facts):
    acks.intent("batch", mem, facts=facts)
    mem.ingest([gem.Fact(*f) for f in facts])
    acks.ack("batch", mem, facts=facts)


def test_the_checks_find_a_lost_acknowledged_write_and_a_half_visible_batch(tmp_path):
    """`verify` against states a crash must never leave: an acknowledged commit the log does
    not hold, an acknowledged fact that is not there, half of a batch."""
    path, ack_path = str(tmp_path / "memory.db"), str(tmp_path / "acks")
    acks = Acks(ack_path)
    with gem.open(path, engine=ENGINE) as mem:
        _acked_batch(mem, acks, [["A", "x", 1], ["B", "y", 2]])
    assert verify(path, ENGINE, ack_path).problems == []
    with gem.open(path, engine=ENGINE) as mem:
        mem.ingest(gem.Fact("Half", "part", 0))  # one part of a batch said to be in flight
        head = mem.head()
    acks.line({"k": "batch", "seq": head["seq"] + 5, "hash": "0" * 64, "facts": [["C", "z", 3]]})
    acks.line({"i": "batch", "facts": [["Half", "part", 0], ["Half", "part2", 1]]})
    problems = " ".join(verify(path, ENGINE, ack_path).problems)
    assert f"seq {head['seq'] + 5} is not in the log" in problems
    assert "acknowledged fact C.z=3 is missing" in problems
    assert "half-visible batch: 1 of 2 parts" in problems
    os.close(acks.fd)


def test_the_checks_find_a_write_nobody_started(tmp_path):
    path, ack_path = str(tmp_path / "memory.db"), str(tmp_path / "acks")
    acks = Acks(ack_path)
    with gem.open(path, engine=ENGINE) as mem:
        _acked_batch(mem, acks, [["A", "x", 1]])
        mem.ingest(gem.Fact("Stray", "x", 1))  # committed, never announced
    problems = verify(path, ENGINE, ack_path).problems
    assert problems and "after the last acknowledged seq" in problems[0]
    os.close(acks.fd)


@pytest.mark.parametrize("step,database", [("exported", compact.NEW), ("ready", "")])
def test_a_compaction_killed_in_a_checkpoint_leaves_no_file_of_the_database_it_drops(tmp_path, step,
                                                                                      database):
    """Found by the kill harness: LadybugDB checkpoints through `<db>.wal.checkpoint` and two
    lock files, which a kill during a CHECKPOINT leaves: the new database's (killed while it
    is built) or the old one's (killed while it closes, once the new one is ready). The next
    open drops them with the database they belong to: a stale `.wal.checkpoint` beside
    another database is not its log."""
    path = str(tmp_path / "db")
    script = textwrap.dedent(f"""
        import os, gem
        from gem.store import compact
        mem = gem.open({path!r}, engine={ENGINE!r})
        mem.ingest([gem.Fact("Keep", "x", 1), gem.Fact("Gone", "y", 2)])
        mem.erase("Gone", reason="test")
        compact.crash_point = lambda name: os._exit(9) if name == {step!r} else None
        mem.compact()
    """)
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300)
    assert done.returncode == 9, done.stderr[-2000:]
    for suffix in (".wal.checkpoint", ".checkpoint.intent.lock", ".checkpoint.apply.lock"):
        with open(path + database + suffix, "wb") as f:  # as the kill left them
            f.write(b"stale")
    with gem.open(path, engine=ENGINE) as mem:
        assert mem.inspect("Keep").fields["x"].value == 1 and mem.audit(full=True).ok
    assert not [n for n in os.listdir(tmp_path) if ".compact-" in n or "checkpoint" in n]


@pytest.mark.slow
def test_kills_at_random_moments_lose_no_acknowledged_write(tmp_path):
    """Two kills in every scenario (the recovery chain kills one to three reopening
    processes): after each, the database reopens, audits clean in full, holds every
    acknowledged write, and the batch in flight is whole or absent."""
    with Harness(ENGINE, str(tmp_path), seed=20261201) as harness:
        for name in SCENARIOS:
            harness.run(name, 2)
        print(harness.table())
    failures = [f for s in harness.stats.values() for f in s.failures]
    assert failures == []
    assert sum(s.kills for s in harness.stats.values()) >= 2 * len(SCENARIOS)
    assert sum(s.acked for s in harness.stats.values()) > 0


@pytest.fixture
def shim(tmp_path):
    try:
        return powerloss.build_shim(str(tmp_path))
    except powerloss.ShimUnavailable as exc:
        pytest.skip(str(exc))


@pytest.mark.slow
def test_a_power_cut_keeps_every_acknowledged_commit(tmp_path, shim):
    """Both engines fdatasync their log at COMMIT: the files as of their last sync must hold
    every commit acknowledged before the cut."""
    harness = Harness(ENGINE, str(tmp_path / "work"), seed=7)
    os.makedirs(harness.workdir)
    while harness.stats.get("power loss", None) is None or harness.stats["power loss"].acked == 0:
        powerloss.cycle(harness, "power loss", "batch", 1.5, shim)
        assert harness.stats["power loss"].kills < 10, "no write was acknowledged in 10 runs"
    assert harness.stats["power loss"].failures == []


@pytest.mark.slow
def test_a_power_cut_image_without_the_log_fails_the_check(tmp_path, shim):
    """The image is what the check reads: drop the engine's log from it and the commits
    acknowledged since the last checkpoint are reported missing."""
    harness = Harness(ENGINE, str(tmp_path / "work"), seed=3)
    os.makedirs(harness.workdir)
    args = harness.args("cut", "single")
    watch = os.path.dirname(args["path"])
    shadow, image = str(tmp_path / "shadow"), str(tmp_path / "image")
    powerloss.baseline(watch, shadow)
    env = {**os.environ, "LD_PRELOAD": shim, "GEM_POWERLOSS_WATCH": watch,
           "GEM_POWERLOSS_SHADOW": shadow}
    child = subprocess.Popen([sys.executable, "-m", "gem.testing.crash_workloads", json.dumps(args)],
                             env=env, stdin=subprocess.DEVNULL)
    wait_for(lambda: sum("k" in line for line in read_lines(args["acks"])) >= 4 or child.poll() is not None,
             what="acknowledged writes")
    child.kill()
    child.wait()
    powerloss.build_image(shadow, image)
    os.remove(os.path.join(image, "memory.db.wal"))
    shutil.rmtree(watch)
    shutil.move(image, watch)
    problems = " ".join(verify(args["path"], ENGINE, args["acks"]).problems)
    assert "is not in the log" in problems or "reopen failed" in problems


@pytest.mark.slow
def test_a_power_cut_keeps_every_acknowledged_commit_under_strict_posix(tmp_path, shim):
    """kuzu 0.11.3 creates its WAL (anew after every checkpoint) without an fsync of the
    directory: under strict POSIX a power cut lost the WAL's name and every commit acknowledged
    since the last checkpoint, until the store synced the directory when the log is new."""
    harness = Harness(ENGINE, str(tmp_path / "work"), seed=11)
    os.makedirs(harness.workdir)
    with gem.open(harness.args("strict", "single")["path"], engine=ENGINE):
        pass  # a database closed cleanly (checkpointed: no WAL) before the cut's run
    while harness.stats.get("strict") is None or harness.stats["strict"].acked < 2:
        powerloss.cycle(harness, "strict", "single", 1.0, shim, strict=True)
        assert harness.stats["strict"].kills < 10, "no write was acknowledged in 10 runs"
    assert harness.stats["strict"].failures == []
