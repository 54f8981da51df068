"""Simulated power loss: run a crash-test child with an LD_PRELOAD shim (powerloss.c) that
copies each file's content at its every fsync/fdatasync, SIGKILL it, and build the *image*
a power cut at that moment could have left: every file as of its last sync (a file never
synced is empty), under the names of the last sync (the ordered-journal model of ext4 and
XFS). The image replaces the database, which is then reopened and checked like after a kill
(gem/testing/crash.py `verify`).

What it holds the engines to, as measured with strace on kuzu 0.11.3 and LadybugDB: both
fdatasync the write-ahead log at every COMMIT, so every acknowledged commit must be in the
image. Kuzu creates its database file and its WAL (again after every checkpoint, which
deletes it) without an fsync of their directory; LadybugDB fsyncs the directory. On ext4 and
XFS the WAL's fdatasync commits its name too (the default image). Under strict POSIX, where
only a directory fsync makes a new name durable (`strict=True`), a power cut can lose Kuzu's
WAL, and with it every commit since the last checkpoint (tests/test_crash.py).
"""
from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from .crash import Harness, read_lines, verify, wait_for_line

SOURCE = Path(__file__).with_name("powerloss.c")
DEPTH = 3  # directory levels the shim follows under the watched folder (as powerloss.c)


class ShimUnavailable(Exception):
    """No C compiler here, or the shim did not build: power loss cannot be simulated."""


def build_shim(folder: str) -> str:
    """Compile the shim into `folder`; its path."""
    compiler = shutil.which("cc") or shutil.which("gcc")
    if compiler is None:
        raise ShimUnavailable("no C compiler (cc or gcc) to build the power-loss shim")
    library = os.path.join(folder, "powerloss.so")
    done = subprocess.run([compiler, "-shared", "-fPIC", "-O2", "-o", library, str(SOURCE), "-ldl"],
                          capture_output=True, text=True)
    if done.returncode != 0:
        raise ShimUnavailable(f"the power-loss shim did not build: {done.stderr[-500:]}")
    return library


def _files(root: str) -> list[str]:
    found = []
    for folder, dirs, names in os.walk(root):
        if folder[len(root):].count(os.sep) >= DEPTH:
            dirs[:] = []
        found += [os.path.relpath(os.path.join(folder, n), root) for n in names]
    return found


def _key(path: str) -> str:
    st = os.stat(path)
    return f"{st.st_dev:x}-{st.st_ino:x}"


def _entries(path: str) -> list[list[str]]:
    with open(path) as f:
        return [line.rstrip("\n").split("\t") for line in f if line.strip()]


def baseline(watch: str, shadow: str) -> None:
    """The image before the child runs: what is on disk now, synced. `names.base` and
    `dirs.base` keep it for the strict model."""
    os.sync()
    for folder in ("data", "dirs"):
        os.makedirs(os.path.join(shadow, folder))
    lines = []
    for rel in _files(watch):
        key = _key(os.path.join(watch, rel))
        shutil.copyfile(os.path.join(watch, rel), os.path.join(shadow, "data", key))
        lines.append(f"{rel}\t{key}\n")
    for name in ("names", "names.base"):
        with open(os.path.join(shadow, name), "w") as f:
            f.writelines(lines)
    folders = {os.path.dirname(rel) for rel in _files(watch)} | {""}
    with open(os.path.join(shadow, "dirs.base"), "w") as f:
        f.writelines(f"{rel}\t{_key(os.path.join(watch, rel))}\n" for rel in sorted(folders))


def strict_names(shadow: str) -> list[list[str]]:
    """The names strict POSIX keeps: each directory's files as of its last fsync (or as they
    were before the run), in the directories that existed before it."""
    before: dict[str, list[list[str]]] = {}
    for rel, key in _entries(os.path.join(shadow, "names.base")):
        before.setdefault(os.path.dirname(rel), []).append([os.path.basename(rel), key])
    names = []
    for folder, key in _entries(os.path.join(shadow, "dirs.base")):
        synced = os.path.join(shadow, "dirs", key)
        listing = _entries(synced) if os.path.exists(synced) else before.get(folder, [])
        names += [[os.path.join(folder, name), file_key] for name, file_key in listing]
    return names


def build_image(shadow: str, dest: str, *, strict: bool = False) -> None:
    """The files a power cut leaves: the last synced names (`strict`: only those a directory
    fsync made durable), each with its last synced content."""
    os.makedirs(dest)
    entries = strict_names(shadow) if strict else _entries(os.path.join(shadow, "names"))
    for rel, key in entries:
        target = os.path.join(dest, rel)
        os.makedirs(os.path.dirname(target), exist_ok=True)
        data = os.path.join(shadow, "data", key)
        if os.path.exists(data):
            shutil.copyfile(data, target)
        else:
            open(target, "wb").close()


def cycle(harness: Harness, scenario: str, workload: str, window: float, shim: str, *,
          strict: bool = False) -> None:
    """One power cut in `workload`, reported in `harness.stats[scenario]` (`strict`: names
    durable only by a directory fsync)."""
    args = harness.args(scenario, workload)
    path, acks = args["path"], args["acks"]
    watch = os.path.dirname(path)
    with tempfile.TemporaryDirectory(dir=harness.workdir) as scratch:
        shadow = os.path.join(scratch, "shadow")
        baseline(watch, shadow)
        env = {**os.environ, "LD_PRELOAD": shim, "GEM_POWERLOSS_WATCH": watch,
               "GEM_POWERLOSS_SHADOW": shadow}
        after = "start" if harness.rng.random() < 0.2 else "open"
        delay = harness.rng.uniform(0, window)
        since = len(read_lines(acks))
        child = subprocess.Popen([sys.executable, "-m", "gem.testing.crash_workloads", json.dumps(args)],
                                 env=env, stdin=subprocess.DEVNULL, start_new_session=True)
        try:
            wait_for_line(acks, after, lambda: child.poll() is None, since)
            time.sleep(delay)
        finally:
            os.killpg(child.pid, signal.SIGKILL)
            child.wait()
        image = os.path.join(scratch, "image")
        build_image(shadow, image, strict=strict)
        shutil.rmtree(watch)
        shutil.move(image, watch)
    harness.record(scenario, 1, verify(path, harness.engine, acks))


__all__ = ["ShimUnavailable", "build_shim", "build_image", "baseline", "cycle", "strict_names"]
