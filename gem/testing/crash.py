"""A kill harness: run a workload in a child process, SIGKILL it at a random moment, reopen
the database and check that nothing acknowledged was lost and nothing is half there.

    from gem.testing.crash import Harness
    with Harness("kuzu", workdir, seed=7) as harness:
        harness.run("batch", kills=20)
        print(harness.table())

After every kill (`verify`): the database opens (timed with its first read: the recovery
time), a full audit is clean (C1-C6, every row against the hash the log attests, the hash
chain), every write the child acknowledged is in the log with the hash it was acknowledged
with and reads back (facts in their history, episodes, erasures verified by their receipts,
the policy set in force is the last one logged), the log holds nothing after the last
acknowledgement but what the interrupted operation could have written, and a batch the
child was writing when it died is there whole or not at all.

Children of the kill scenarios are forked from a process that has imported gem and the
engine already (`Zygote`), so a kill costs a fork, not a Python start;
`gem serve` runs as its own process and its acknowledgements are HTTP 200s. Every delay comes
from one seeded RNG: the seed and the cycle number reproduce the kill schedule (the moments
themselves vary with the machine's load). The workloads are in gem/testing/crash_workloads.py;
simulated power loss is gem/testing/powerloss.py.
"""
from __future__ import annotations

import json
import os
import random
import shutil
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from typing import Any, Callable

import gem

from . import crash_workloads as workloads

# Each scenario: the workload its child runs, and the window (seconds after the child is up)
# its kill moment is drawn from, long enough to cover its open and several operations.
SCENARIOS: dict[str, tuple[str, float]] = {
    "single ingest": ("single", 0.8), "batch": ("batch", 1.0), "episode": ("episode", 0.8),
    "retrieve-as-write": ("retrieve", 0.8), "forget/maintain": ("maintain", 1.5),
    "erase": ("erase", 0.8), "compact": ("compact", 2.5), "policy load": ("policy", 1.0),
    "recovery": ("reopen", 0.0), "serve": ("serve", 1.5)}
INGEST_OPS = ("ingest",)
OPEN_KILLS = 0.2  # the share of kills drawn from the moments right after the child starts
RESET_EVERY = 20  # cycles on one database before a fresh one (bounds the audit's cost)


@dataclass
class Stats:
    kills: int = 0
    failures: list[str] = field(default_factory=list)
    acked: int = 0  # acknowledged writes of the killed children, each checked after its kill
    inflight: dict[str, int] = field(default_factory=dict)  # what each kill interrupted
    recovery: list[float] = field(default_factory=list)  # reopen + first read, seconds
    audit: list[float] = field(default_factory=list)


def read_lines(path: str) -> list[dict[str, Any]]:
    """The complete lines of an acknowledgement file (a line cut by the kill is no ack)."""
    try:
        with open(path, "rb") as f:
            data = f.read()
    except FileNotFoundError:
        return []
    return [json.loads(line) for line in data.split(b"\n")[:-1] if line.strip()]


@dataclass(frozen=True)
class Ledger:
    """What the acknowledgement file says: acknowledged writes, and the intents after the
    last acknowledgement (what the kill interrupted)."""
    acks: list[dict[str, Any]]
    pending: list[dict[str, Any]]
    erased: frozenset[str]        # topics an acknowledged erasure removed
    maybe_erased: frozenset[str]  # topics any erasure was started on
    fresh: int                    # acknowledgements since the last verification

    @staticmethod
    def of(lines: list[dict[str, Any]]) -> "Ledger":
        acks: list[dict[str, Any]] = []
        pending: list[dict[str, Any]] = []
        fresh = 0
        for line in lines:
            if "k" in line:
                acks.append(line)
                pending = []
                fresh = 0 if line["k"] == "verified" else fresh + 1
            elif "i" in line:
                pending.append(line)
        erased = frozenset(a["topic"] for a in acks if a["k"] == "erase")
        # An erasure that was in flight at an earlier kill may have committed: its topic's
        # facts are not expected any more (that kill's check saw it whole or gone).
        maybe = frozenset(line["topic"] for line in lines if line.get("i") == "erase")
        return Ledger(acks, pending, erased, maybe, fresh)


def _present(mem: Any, topic: str, field_name: str, value: Any) -> bool:
    try:
        return any(e.value == value for e in mem.history(topic, field_name))
    except gem.errors.UnknownUnit:
        return False


def check(mem: Any, ledger: Ledger) -> list[str]:
    """Every acknowledged write is there; nothing unacknowledged beyond what was in flight;
    the interrupted batch whole or absent. Returns the problems found."""
    problems: list[str] = []
    log = {r["seq"]: r for r in mem.transitions(0)}
    head = max(log, default=0)
    acked = 0
    for ack in ledger.acks:
        seq = ack.get("seq")
        if seq is None:
            continue
        acked = max(acked, seq)
        record = log.get(seq)
        if record is None:
            problems.append(f"acknowledged {ack['k']} at seq {seq} is not in the log (head {head})")
        elif ack.get("hash") is not None and record["hash"] != ack["hash"]:
            problems.append(f"log record {seq} ({ack['k']}) has another hash than acknowledged")
    # Only the interrupted operation may have written after the last acknowledgement.
    allowed = [op for p in ledger.pending for op in p.get("ops", INGEST_OPS)]
    unbounded = any(p.get("many") for p in ledger.pending)
    later = [log[s] for s in sorted(log) if s > acked]
    strays = [r for r in later if r["op"] not in allowed]
    if strays or (len(later) > len(allowed) and not unbounded):
        problems.append(f"{len(later)} log records after the last acknowledged seq {acked} "
                        f"({[r['op'] for r in later]}), in flight only {allowed}")
    skip = ledger.erased | ledger.maybe_erased
    # What the acknowledgements since the last verification wrote is read back; earlier ones
    # were read back then, and are held since by their log records' hashes and the full audit.
    first_fresh = len(ledger.acks) - ledger.fresh
    for i, ack in enumerate(ledger.acks):
        fresh = i >= first_fresh
        for topic, name, value in ack.get("facts", ()) if fresh else ():
            if topic not in skip and not _present(mem, topic, name, value):
                problems.append(f"acknowledged fact {topic}.{name}={value!r} is missing")
        if fresh and ack.get("episode") and mem.episodes(text=ack["episode"]).matching != 1:
            problems.append(f"acknowledged episode {ack['episode']} is missing")
        if ack["k"] == "erase":
            if mem.inspect(ack["topic"]) is not None:
                problems.append(f"erased topic {ack['topic']} is back")
            if ack.get("receipt"):
                verdict = mem.verify_erasure(gem.model.ErasureReceipt(**ack["receipt"]))
                if not verdict.ok:
                    problems.append(f"erasure of {ack['topic']}: {verdict.problems}")
    for intent in ledger.pending:
        facts = [f for f in intent.get("facts", ()) if f[0] not in skip]
        there = [_present(mem, *f) for f in facts]
        if intent.get("episode") and facts:
            there.append(mem.episodes(text=intent["episode"]).matching == 1)
        if any(there) and not all(there):
            problems.append(f"half-visible {intent['i']}: {sum(there)} of {len(there)} parts "
                            f"({facts[0][0]}...)")
        if intent["i"] == "erase" and mem.inspect(intent["topic"]) is not None:
            view = mem.inspect(intent["topic"])
            if len(view.fields) != intent["fields"]:
                problems.append(f"half-erased topic {intent['topic']}: fields {list(view.fields)}")
    last = max((r for r in log.values() if r["op"] == "policy"), key=lambda r: r["seq"], default=None)
    if last is not None and last["detail"] and \
            last["detail"].get("policy_set_hash") != mem.policies.hash:
        problems.append("the policy set in force is not the last one logged")
    return problems


@dataclass(frozen=True)
class Verdict:
    recovery: float  # seconds to reopen and read
    audit: float     # seconds of the full audit
    problems: list[str]
    fresh: int       # acknowledgements it checked for the first time
    inflight: str = "-"  # the operation the kill interrupted ("-": none, between operations)


def verify(path: str, engine: str, ack_path: str) -> Verdict:
    """Reopen after a kill and check it. The head it verified is appended to the
    acknowledgement file (what follows builds on it)."""
    ledger = Ledger.of(read_lines(ack_path))
    if not os.path.exists(path) and not ledger.acks and not ledger.pending:
        return Verdict(0.0, 0.0, [], 0)  # killed before it began to create the database
    started = time.perf_counter()
    try:
        mem = gem.open(path, engine=engine)
    except Exception as exc:  # the finding itself: the database does not reopen
        return Verdict(time.perf_counter() - started, 0.0,
                       [f"reopen failed: {type(exc).__name__}: {exc}"], ledger.fresh)
    try:
        mem.head()
        mem.topics(limit=1)
        recovery = time.perf_counter() - started
        started = time.perf_counter()
        report = mem.audit(full=True)
        audit = time.perf_counter() - started
        problems = [] if report.ok else [f"audit: {[str(v) for v in report.violations[:3]]} "
                                         f"chain_ok={report.chain_ok}"]
        problems += check(mem, ledger)
        head = mem.head()
    finally:
        mem.close()
    leftovers = [n for n in os.listdir(os.path.dirname(path)) if ".compact-" in n]
    if leftovers:
        problems.append(f"compaction leftovers after reopen: {leftovers}")
    with open(ack_path, "a") as f:
        f.write(json.dumps({"k": "verified", "seq": head["seq"], "hash": head["hash"]}) + "\n")
    inflight = ledger.pending[-1]["i"] if ledger.pending else "-"
    return Verdict(recovery, audit, problems, ledger.fresh, inflight)


def wait_for_line(path: str, key: str, alive: Callable[[], bool], since: int = 0,
                   timeout: float = 120.0) -> bool:
    """Wait until the acknowledgement file has a line (after the first `since`) with `key`
    (or an ack of that kind), or the child died."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if any(key in line or line.get("k") == key for line in read_lines(path)[since:]):
            return True
        if not alive():
            return False
        time.sleep(0.005)
    return False


def _alive(pid: int) -> bool:
    """Whether a process runs (a zombie, dead but not yet reaped, does not)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] not in ("Z", "X")
    except (OSError, IndexError):
        return False


class Zygote:
    """A process that has imported gem and the engine and forks the children
    (crash_workloads.zygote)."""

    def __init__(self, engine: str) -> None:
        self.process = subprocess.Popen(
            [sys.executable, "-m", "gem.testing.crash_workloads", "--zygote", engine],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, bufsize=1)

    def _expect(self, word: str, pid: int | None = None) -> int:
        assert self.process.stdout is not None
        while True:
            line = self.process.stdout.readline()
            if not line:
                raise RuntimeError(f"the crash-test zygote exited ({self.process.wait()})")
            said, number = line.split()
            if said == word and (pid is None or int(number) == pid):
                return int(number)

    def start(self, args: dict[str, Any]) -> int:
        assert self.process.stdin is not None
        self.process.stdin.write(json.dumps(args) + "\n")
        self.process.stdin.flush()
        return self._expect("pid")

    def kill(self, pid: int) -> None:
        """SIGKILL the child and wait until it is reaped."""
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        self._expect("exit", pid)

    def close(self) -> None:
        assert self.process.stdin is not None
        self.process.stdin.close()
        self.process.wait()


class Harness:
    """Kill cycles on one engine, in `workdir` (a database per scenario, renewed every
    RESET_EVERY cycles); `stats` by scenario."""

    def __init__(self, engine: str, workdir: str, seed: int = 0,
                 progress: Callable[[str], None] | None = None) -> None:
        self.engine, self.workdir, self.seed = engine, workdir, seed
        self.rng = random.Random(seed)
        self.stats: dict[str, Stats] = {}
        self.progress = progress
        self.cycle = 0
        self._zygote: Zygote | None = None

    def __enter__(self) -> "Harness":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def close(self) -> None:
        if self._zygote is not None:
            self._zygote.close()
            self._zygote = None

    def folder(self, scenario: str) -> tuple[str, str]:
        """(database path, acknowledgement file) of a scenario's current database."""
        stats = self.stats.setdefault(scenario, Stats())
        slug = "".join(c if c.isalnum() else "-" for c in scenario)
        folder = os.path.join(self.workdir, f"{slug}-{stats.kills // RESET_EVERY}")
        acks = os.path.join(self.workdir, f"{slug}.acks")
        if not os.path.isdir(folder):
            for old in os.listdir(self.workdir):  # the scenario's previous database
                if old.startswith(slug + "-"):
                    shutil.rmtree(os.path.join(self.workdir, old))
            if os.path.exists(acks):
                os.remove(acks)
            os.makedirs(folder)
            for name, text in workloads.POLICIES.items():
                with open(os.path.join(folder, name), "w") as f:
                    f.write(text)
        return os.path.join(folder, "memory.db"), acks

    def args(self, scenario: str, workload: str) -> dict[str, Any]:
        path, acks = self.folder(scenario)
        self.cycle += 1
        return {"engine": self.engine, "path": path, "acks": acks, "workload": workload,
                "tag": str(self.cycle), "seed": self.rng.randrange(2 ** 32)}

    def kill_child(self, args: dict[str, Any], window: float, after: str | None = None) -> None:
        """Start the workload in a forked child and SIGKILL it at a random moment: mostly in
        the `window` seconds after its database is open, in one kill of five in the `window`
        after it started (during the open)."""
        if after is None:
            after = "start" if self.rng.random() < OPEN_KILLS else "open"
        delay = self.rng.uniform(0, window)
        if self._zygote is None:
            self._zygote = Zygote(self.engine)
        since = len(read_lines(args["acks"]))
        pid = self._zygote.start(args)
        try:
            wait_for_line(args["acks"], after, lambda: _alive(pid), since)
            time.sleep(delay)
        finally:
            self._zygote.kill(pid)

    def run(self, scenario: str, kills: int) -> Stats:
        for _ in range(kills):
            self.run_one(scenario)
        return self.stats[scenario]

    def run_one(self, scenario: str) -> None:
        workload, window = SCENARIOS[scenario]
        args = self.args(scenario, workload)
        if workload == "reopen":
            kills = self._recovery_chain(args)
        elif workload == "serve":
            kills = self._serve(args, window)
        else:
            self.kill_child(args, window)
            kills = 1
        self.record(scenario, kills, verify(args["path"], self.engine, args["acks"]))

    def record(self, scenario: str, kills: int, verdict: Verdict) -> None:
        stats = self.stats.setdefault(scenario, Stats())
        stats.kills += kills
        stats.acked += verdict.fresh
        stats.inflight[verdict.inflight] = stats.inflight.get(verdict.inflight, 0) + 1
        stats.recovery.append(verdict.recovery)
        stats.audit.append(verdict.audit)
        if verdict.problems:
            stats.failures.append(f"cycle {self.cycle} (seed {self.seed}): {verdict.problems}")
        if self.progress:
            self.progress(f"{self.engine} {scenario}: {stats.kills} kills, {stats.acked} acked, "
                          f"{len(stats.failures)} failures"
                          + (f" {verdict.problems}" if verdict.problems else ""))

    # Recovery: a writer killed mid-batch leaves the engine's log to replay; then one to three
    # reopening processes (open, read, audit, close) are killed at random moments of it.
    _reopen_seconds = 1.0

    def _recovery_chain(self, args: dict[str, Any]) -> int:
        self.kill_child({**args, "workload": "batch"}, 1.0)
        chain = self.rng.randint(1, 3)
        for _ in range(chain):
            before = len(read_lines(args["acks"]))
            self.kill_child({**args, "seed": self.rng.randrange(2 ** 32)}, self._reopen_seconds,
                            after="start")
            for line in read_lines(args["acks"])[before:]:
                if "closed" in line:  # kills spread over the whole reopen
                    self._reopen_seconds = max(self._reopen_seconds, 1.2 * line["closed"])
        return chain

    def _serve(self, args: dict[str, Any], window: float) -> int:
        """`gem serve` killed while a client posts batches; an HTTP 200 is the ack."""
        import httpx

        from gem.server.endpoint import read_endpoint
        path = args["path"]
        log = open(path + ".serve-log", "ab")
        server = subprocess.Popen([sys.executable, "-m", "gem", "serve", path, "--port", "0",
                                   "--engine", self.engine, "--create"], stdin=subprocess.DEVNULL,
                                  stdout=log, stderr=log, start_new_session=True)
        log.close()
        acks = workloads.Acks(args["acks"])
        rng = random.Random(args["seed"])
        try:
            url = None
            deadline = time.monotonic() + 120
            while url is None and server.poll() is None and time.monotonic() < deadline:
                endpoint = read_endpoint(path)
                try:
                    if endpoint and endpoint.pid == server.pid and \
                            httpx.get(endpoint.url + "/v1/health").status_code == 200:
                        url = endpoint.url
                except httpx.HTTPError:
                    pass
                time.sleep(0.02)
            if url is None:
                raise RuntimeError(f"gem serve did not come up: {open(path + '.serve-log').read()[-2000:]}")
            timer = threading.Timer(self.rng.uniform(0, window), os.killpg, (server.pid, signal.SIGKILL))
            timer.start()
            with httpx.Client(timeout=60) as client:
                for k in range(10 ** 9):
                    n = rng.randint(1, 20)
                    facts = [[f"H{args['tag']}-{k}-t{j}", "part", f"{k}:{j}"] for j in range(n)]
                    acks.line({"i": "batch", "facts": facts})
                    try:
                        reply = client.post(url + "/v1/ingest", json={"facts": [
                            {"topic": t, "field": f, "value": v} for t, f, v in facts]})
                    except httpx.HTTPError:
                        break
                    if reply.status_code != 200:
                        raise RuntimeError(f"ingest answered {reply.status_code}: {reply.text}")
                    acks.line({"k": "batch", "seq": reply.json()["transition"], "hash": None,
                               "facts": facts})
            timer.join()
        finally:
            try:
                os.killpg(server.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            server.wait()
            os.close(acks.fd)
        return 1

    def table(self) -> str:
        return table([(self.engine, name, s) for name, s in self.stats.items()])


def _ms(values: list[float], q: float) -> str:
    if not values:
        return "-"
    ordered = sorted(values)
    return f"{ordered[min(len(ordered) - 1, int(round(q * (len(ordered) - 1))))] * 1e3:.0f}"


def table(rows: list[tuple[str, str, Stats]]) -> str:
    """engine | scenario | kills | acknowledged writes | failures | recovery p50/p95/max | audit
    p50/max (ms) | what the kills interrupted (per verification: a recovery chain counts once)."""
    lines = ["| engine | scenario | kills | acked writes checked | failures | "
             "recovery p50 / p95 / max ms | audit p50 / max ms | in flight at the kill |",
             "|---|---|---|---|---|---|---|---|"]
    for engine, name, s in rows:
        inflight = ", ".join(f"{k} {n}" for k, n in sorted(s.inflight.items(), key=lambda kv: -kv[1]))
        lines.append(f"| {engine} | {name} | {s.kills} | {s.acked} | {len(s.failures)} | "
                     f"{_ms(s.recovery, .5)} / {_ms(s.recovery, .95)} / {_ms(s.recovery, 1)} | "
                     f"{_ms(s.audit, .5)} / {_ms(s.audit, 1)} | {inflight} |")
    return "\n".join(lines)


__all__ = ["Harness", "SCENARIOS", "Stats", "table", "verify", "check", "Ledger"]
