"""What gem's benchmarks share: timing helpers, an injected clock, the raw twin that writes
exactly the rows gem wrote, and the runner that puts both engines side by side.

Governed against raw: a `Recorder` stage, inserted after the log stage, keeps each
transition's write set (created and updated rows with every column, supersessions,
relationships, the log record); `RawTwin.replay` writes the same set into a second database
with the same statements, in one engine transaction, and nothing else (no reads, policies,
conditions, resolution or derived upkeep). For reads and maintenance, `EngineTime` measures the
engine's share of the governed operation itself (every statement, BEGIN and COMMIT). The two
are interleaved operation by operation, after a warm-up, so machine noise hits both alike.

The two engines cannot share a process: `side_by_side` runs this script again once per
engine (`--child ENGINE`) and collects what each child prints as JSON.
"""
from __future__ import annotations

import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import time
from datetime import datetime, timedelta, timezone
from typing import Any, Callable, Sequence

# gem's own numpy math runs on one thread (gem.numeric); the children also pin the BLAS pool
# so an idle pool never competes with the engine for the two cores.
ENV = {**os.environ, "OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(q * (len(ordered) - 1))))]


def ms(values: list[float]) -> tuple[float, float]:
    """(p50, p95) in milliseconds."""
    return statistics.median(values) * 1e3, pct(values, 0.95) * 1e3


class Clock:
    """Simulated time: a millisecond per reading unless advanced by hand."""

    def __init__(self) -> None:
        self.now = datetime(2026, 1, 1, tzinfo=timezone.utc)

    def __call__(self) -> datetime:
        self.now += timedelta(milliseconds=1)
        return self.now

    def advance(self, **delta: float) -> None:
        self.now += timedelta(**delta)


class Recorder:
    """Keeps the write set of every transition the memory commits."""

    def __init__(self, mem: Any) -> None:
        from gem.pipeline import Stage, Writes
        self.writes: list[Any] = []
        engine = mem._engine
        engine.pipeline = engine.pipeline.insert_after(
            "log", Stage("record", lambda t, e: self.writes.append(Writes.of(t))))

    def take(self) -> list[Any]:
        out, self.writes = self.writes, []
        return out


class RawTwin:
    """A second database written only with the recorded write sets, statement for statement."""

    def __init__(self, path: str, engine: str) -> None:
        from gem.store import open_store, queries
        self.path, self.engine = path, engine
        self.store = open_store(path, engine)
        queries.ensure_schema(self.store)

    def reopen(self) -> None:
        """Close and open again, as gem's database is: closing checkpoints the engine's log,
        so a later write does not pay for a checkpoint the governed side already paid."""
        from gem.store import open_store
        self.store.close()
        self.store = open_store(self.path, self.engine)

    def replay(self, writes: list[Any]) -> float:
        from gem.pipeline import write
        start = time.perf_counter()
        for w in writes:
            with self.store.transaction() as tx:
                write(tx, w)
        return time.perf_counter() - start

    def close(self) -> None:
        self.store.close()


class EngineTime:
    """The time a memory spends inside its engine: every statement (with its parameters and
    result rows converted), BEGIN and COMMIT. `take()` returns the seconds since the last
    take. Measured in the governed run itself, so the engine's share of an operation that
    reads (a retrieve, a forgetting pass) is exact, where replaying its statements on a twin
    would measure a database whose pages and plans are warm in other ways."""

    def __init__(self, mem: Any) -> None:
        from contextlib import contextmanager
        self.seconds = 0.0
        store = mem._engine.store
        reading, transaction = store.reading, store.transaction

        @contextmanager
        def timed_reading() -> Any:
            with reading() as tx:
                yield self._wrap(tx)

        @contextmanager
        def timed_transaction(after: Any = None) -> Any:
            manager = transaction(after)
            start = time.perf_counter()
            tx = manager.__enter__()
            self.seconds += time.perf_counter() - start
            try:
                yield self._wrap(tx)
            except BaseException:
                if not manager.__exit__(*sys.exc_info()):
                    raise
            else:
                start = time.perf_counter()
                manager.__exit__(None, None, None)
                self.seconds += time.perf_counter() - start

        store.reading, store.transaction = timed_reading, timed_transaction

    def _wrap(self, tx: Any) -> Any:
        run, stream = tx.run, tx.stream

        def timed_run(query: str, params: Any = None) -> Any:
            start = time.perf_counter()
            try:
                return run(query, params)
            finally:
                self.seconds += time.perf_counter() - start

        def timed_stream(query: str, params: Any = None, *args: Any, **options: Any) -> Any:
            rows = stream(query, params, *args, **options)
            while True:
                start = time.perf_counter()
                try:
                    row = next(rows)
                except StopIteration:
                    return
                finally:
                    self.seconds += time.perf_counter() - start
                yield row

        tx.run, tx.stream = timed_run, timed_stream
        return tx

    def take(self) -> float:
        out, self.seconds = self.seconds, 0.0
        return out


GOVERNANCE_STAGES = ("policies", "bound", "commit_policies", "conditions", "log")


class StageTime:
    """The time a memory's transitions spend in each pipeline stage (gem/pipeline.py), through
    the pipeline's public form: each stage is replaced by a timed one of the same name.
    `take()` returns {stage: seconds} since the last take. The governance stages (the
    policies, C5's bound, C1-C6 and the log) are what the issue's governance overhead counts;
    the operator computes the proposed state and the flush writes it, as a raw write must."""

    def __init__(self, mem: Any) -> None:
        from gem.pipeline import Pipeline, Stage
        engine = mem._engine
        self.seconds: dict[str, float] = {s.name: 0.0 for s in engine.pipeline.stages}

        def timed_stage(name: str, run: Callable[..., None]) -> Callable[..., None]:
            def run_timed(t: Any, e: Any) -> None:
                start = time.perf_counter()
                try:
                    run(t, e)
                finally:
                    self.seconds[name] += time.perf_counter() - start
            return run_timed

        engine.pipeline = Pipeline(Stage(s.name, timed_stage(s.name, s.run))
                                   for s in engine.pipeline.stages)

    def take(self) -> dict[str, float]:
        out = dict(self.seconds)
        self.seconds = dict.fromkeys(out, 0.0)
        return out


def timed(fn: Callable[[], Any]) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def rss_mb() -> float:
    """The process's peak RSS so far, in MB."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def rss_now_mb() -> float:
    """The process's RSS now, in MB (what it holds, not its peak)."""
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return float("nan")


def disk_bytes(path: str) -> int:
    """Bytes on disk of a database (a file or a directory, with its WAL and derived files)."""
    total = 0
    base = os.path.dirname(path) or "."
    name = os.path.basename(path)
    for entry in os.listdir(base):
        if entry.startswith(name):
            full = os.path.join(base, entry)
            if os.path.isdir(full):
                for root, _, files in os.walk(full):
                    total += sum(os.path.getsize(os.path.join(root, f)) for f in files)
            else:
                total += os.path.getsize(full)
    return total


def side_by_side(script: str, args: list[str], engines: tuple[str, ...] = ("kuzu", "ladybug"),
                 timeout: float | None = None) -> dict[str, dict[str, Any]]:
    """Run `script --child ENGINE *args` once per engine, one after the other; each child
    prints its results as one JSON object on its last line, and its progress on stderr (passed
    through, so a long run shows where it is). A child that fails is reported and skipped: the
    others' results still print."""
    out = {}
    for engine in engines:
        try:
            done = subprocess.run([sys.executable, script, "--child", engine, *args], env=ENV,
                                  stdout=subprocess.PIPE, text=True, timeout=timeout)
        except subprocess.TimeoutExpired:
            print(f"{engine} run exceeded {timeout:g} s; left out", file=sys.stderr)
            continue
        if done.returncode != 0:
            print(f"{engine} run failed (exit {done.returncode}); left out:\n{done.stdout[-2000:]}",
                  file=sys.stderr)
            continue
        out[engine] = json.loads(done.stdout.strip().splitlines()[-1])
    if not out:
        raise SystemExit("every engine's run failed")
    return out


def exit_status(results: dict[str, Any], engines: Sequence[str]) -> int:
    """The benchmark's exit status once its table is printed: 1 if a run of `side_by_side` was
    left out (the others' results still print, and a smoke test still sees the failure)."""
    return 1 if any(e not in results for e in engines) else 0


def start_server(path: str, engine: str) -> tuple[subprocess.Popen, str]:
    """`gem serve PATH` on a free port, in its own session (the caller stops it by PID); its
    URL once /v1/health answers."""
    import httpx

    from gem.server.endpoint import read_endpoint

    proc = subprocess.Popen([sys.executable, "-m", "gem", "serve", path, "--port", "0", "--engine",
                             engine, "--log-level", "WARNING"], start_new_session=True,
                            stdin=subprocess.DEVNULL)
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline:
        endpoint = read_endpoint(path)
        if endpoint and endpoint.pid == proc.pid:
            try:
                if httpx.get(endpoint.url + "/v1/health").status_code == 200:
                    return proc, endpoint.url
            except httpx.HTTPError:
                pass
        time.sleep(0.1)
    proc.kill()
    raise SystemExit("gem serve did not start")


# ----------------------------------------------------- one revision against another, same rows
def checkout(rev: str, dest: str) -> str:
    """The code of a git revision (gem, its grammar and policies) extracted into `dest`, to run
    a benchmark's children with PYTHONPATH=dest side by side with this tree's."""
    os.makedirs(dest)
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    archive = subprocess.run(["git", "-C", root, "archive", rev, "gem", "grammar", "policies"],
                             capture_output=True, check=True).stdout
    subprocess.run(["tar", "-x", "-C", dest], input=archive, check=True)
    return dest


def copy_db(src: str, dest_dir: str, snapshot: bool = True) -> str:
    """A copy of a memory (its database and the files beside it; without `snapshot`, not its
    derived snapshot) in a new folder, so each side and each round starts from the same rows."""
    folder, name = os.path.split(src)
    os.makedirs(dest_dir)
    for entry in os.listdir(folder):
        if entry.startswith(name) and (snapshot or not entry.endswith(".gem-derived")):
            from_ = os.path.join(folder, entry)
            (shutil.copytree if os.path.isdir(from_) else shutil.copy2)(from_, os.path.join(dest_dir, entry))
    return os.path.join(dest_dir, name)


def run_child(script: str, code: str, args: list[str]) -> dict:
    """The last JSON line a benchmark's child prints, run with the gem found at `code`."""
    done = subprocess.run([sys.executable, os.path.abspath(script), *args],
                          env={**ENV, "PYTHONPATH": code}, cwd=os.path.dirname(os.path.abspath(script)),
                          capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise SystemExit(f"child failed ({code}):\n{done.stderr[-3000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def build_once(script: str, path: str, code: str, args: list[str]) -> None:
    """The benchmark's memory built at `path` by its `--build` child with the gem at `code`
    (the baseline's: a memory stores its policies, and older code cannot read policies written
    in a later language; later code reads older), unless it is there already (`--keep`)."""
    if os.path.exists(path):
        return
    os.makedirs(os.path.dirname(path), exist_ok=True)
    start = time.perf_counter()
    subprocess.run([sys.executable, os.path.abspath(script), "--build", path, *args],
                   env={**ENV, "PYTHONPATH": code}, cwd=os.path.dirname(os.path.abspath(script)),
                   check=True)
    print(f"built it in {time.perf_counter() - start:.0f} s ({' '.join(args)})", file=sys.stderr)
