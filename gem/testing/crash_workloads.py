"""What a crash-test child does until it is killed (gem/testing/crash.py runs it).

Each workload drives one part of the public API in a loop, forever. Before each operation it
appends an *intent* line to the acknowledgement file, and after the operation returns an
*ack* line, written with one `write` and fsynced before the next operation starts: an ack
is the child's promise that the operation committed. Both carry the log positions around
the operation (`from`: the first seq it may write; `seq`/`hash`: the head after it), and
what it wrote, so the parent can check after the kill that every acknowledged write is
there and that nothing it did not start is.

Names are unique per cycle (`tag`), so the checks of one cycle never see another's units.
"""
from __future__ import annotations

import json
import os
import random
import sys
import time
from datetime import datetime, timedelta, timezone
from typing import Any, Callable

import gem

# Policy files the policy workload switches between (written beside the database by the
# parent). They differ in settings only, so every load is a real change of the stored set.
POLICIES = {"fast.policy": "OVERRIDE SET half_life = 14d\n",
            "slow.policy": "OVERRIDE SET half_life = 60d\n"}
TOPIC_FIELDS = ("owner", "status")
REASON = "crash test"


class Acks:
    """The child's end of the acknowledgement file: one JSON line per write, fsynced."""

    def __init__(self, path: str) -> None:
        self.fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)

    def line(self, record: dict[str, Any]) -> None:
        os.write(self.fd, (json.dumps(record, default=str) + "\n").encode())
        os.fsync(self.fd)

    def intent(self, kind: str, mem: Any, **what: Any) -> None:
        self.line({"i": kind, "from": mem.head()["seq"] + 1, **what})

    def ack(self, kind: str, mem: Any, **what: Any) -> None:
        head = mem.head()
        self.line({"k": kind, "seq": head["seq"], "hash": head["hash"], **what})


def _clock(stride_days: int) -> Callable[[], datetime]:
    """A clock far enough ahead of every earlier cycle's (stride) that advances six hours a
    reading, so that maintenance has something to forget."""
    start = datetime.now(timezone.utc) + timedelta(days=stride_days)
    ticks = [0]

    def clock() -> datetime:
        ticks[0] += 1
        return start + timedelta(hours=6 * ticks[0])
    return clock


def _open(args: dict[str, Any], acks: Acks, **kw: Any) -> Any:
    acks.line({"i": "open", "ops": ["policy"]})
    mem = gem.open(args["path"], engine=args["engine"], **kw)
    acks.ack("open", mem)
    return mem


def _fact(acks: Acks, mem: Any, topic: str, field: str, value: Any, kind: str = "fact") -> None:
    acks.intent(kind, mem, facts=[[topic, field, value]])
    mem.ingest(gem.Fact(topic, field, value, source="crash"))
    acks.ack(kind, mem, facts=[[topic, field, value]])


def _batch(acks: Acks, mem: Any, tag: str, k: int, rng: random.Random) -> None:
    """A batch of facts on several topics and a marker: all of it is there, or none."""
    n = rng.randint(2, 40)
    facts: list[list[Any]] = [[f"B{tag}-{k}-t{j}", "part", f"{k}:{j}"] for j in range(n)]
    facts.append([f"B{tag}-{k}-marker", "count", n])
    acks.intent("batch", mem, facts=facts)
    mem.ingest([gem.Fact(t, f, v, source="crash") for t, f, v in facts])
    acks.ack("batch", mem, facts=facts)


def single(args: dict[str, Any], acks: Acks, rng: random.Random) -> None:
    mem = _open(args, acks)
    for k in range(10 ** 9):
        _fact(acks, mem, f"S{args['tag']}-{k % 7}", f"f{k}", f"v{k}")


def batch(args: dict[str, Any], acks: Acks, rng: random.Random) -> None:
    mem = _open(args, acks)
    for k in range(10 ** 9):
        _batch(acks, mem, args["tag"], k, rng)


def episode(args: dict[str, Any], acks: Acks, rng: random.Random) -> None:
    """An episode and a fact in one transition: both or neither."""
    mem = _open(args, acks)
    tag = args["tag"]
    for k in range(10 ** 9):
        token = f"zq{tag}x{k}y"  # no token is a prefix of another
        facts = [[f"E{tag}-{k}", "said", token]]
        acks.intent("episode", mem, facts=facts, episode=token)
        mem.ingest([gem.Episode(f"we spoke about {token} today", source=f"ep:{tag}:{k}"),
                    gem.Fact(*facts[0], source="crash")])
        acks.ack("episode", mem, facts=facts, episode=token)


def retrieve(args: dict[str, Any], acks: Acks, rng: random.Random) -> None:
    mem = _open(args, acks)
    topics = [f"R-{j}" for j in range(4)]  # made by the database's first run, read by all
    for j, topic in enumerate(topics):
        if mem.inspect(topic) is None:
            _fact(acks, mem, topic, "status", f"stage {j}")
    for k in range(10 ** 9):
        acks.intent("retrieve", mem, ops=["retrieve"])
        if k % 2:
            mem.retrieve(topic=rng.choice(topics))
        else:
            mem.retrieve(f"what is the status of stage {rng.randrange(4)}", k=3)
        acks.ack("retrieve", mem)


def maintain(args: dict[str, Any], acks: Acks, rng: random.Random) -> None:
    mem = _open(args, acks, clock=_clock(int(args["tag"]) * 30))
    for k in range(10 ** 9):
        _batch(acks, mem, args["tag"], k, rng)
        acks.intent("maintain", mem, ops=["forget", "revise"], many=True)
        mem.maintain()
        acks.ack("maintain", mem)


def erase(args: dict[str, Any], acks: Acks, rng: random.Random) -> None:
    """A topic with two fields, then its erasure: a receipt acknowledges it."""
    mem = _open(args, acks)
    tag = args["tag"]
    for k in range(10 ** 9):
        topic = f"X{tag}-{k}"
        facts = [[topic, name, f"{name} {k}"] for name in TOPIC_FIELDS]
        acks.intent("batch", mem, facts=facts)
        mem.ingest([gem.Fact(t, f, v, source="crash") for t, f, v in facts])
        acks.ack("batch", mem, facts=facts)
        acks.intent("erase", mem, topic=topic, fields=len(TOPIC_FIELDS), ops=["erase"])
        receipt = mem.erase(topic, reason=REASON)
        acks.ack("erase", mem, topic=topic, receipt=receipt.model_dump(mode="json"))


def compact(args: dict[str, Any], acks: Acks, rng: random.Random) -> None:
    mem = _open(args, acks)
    tag = args["tag"]
    for k in range(10 ** 9):
        _batch(acks, mem, tag, k, rng)
        topic = f"C{tag}-{k}"
        _fact(acks, mem, topic, "secret", f"gone {k}")
        acks.intent("erase", mem, topic=topic, fields=1, ops=["erase"])
        mem.erase(topic, reason=REASON)
        acks.ack("erase", mem, topic=topic)
        acks.intent("compact", mem, ops=[])
        mem.compact()
        acks.ack("compact", mem)


def policy(args: dict[str, Any], acks: Acks, rng: random.Random) -> None:
    """Policy sets loaded at open (gem.open(policies=...)) and by load_policies."""
    folder = os.path.dirname(args["path"])
    files = sorted(POLICIES)
    mem = _open(args, acks, policies=[os.path.join(folder, rng.choice(files))])
    acks.ack("policy", mem, policy_hash=mem.policies.hash)
    for k in range(10 ** 9):
        _fact(acks, mem, f"P{args['tag']}-{k}", "status", f"v{k}")
        acks.intent("policy", mem, ops=["policy"])
        loaded = mem.load_policies([os.path.join(folder, files[k % 2])])
        acks.ack("policy", mem, policy_hash=loaded.hash)


def reopen(args: dict[str, Any], acks: Acks, rng: random.Random) -> None:
    """Recovery itself: open (the engine replays its log, gem catches its derived state up),
    read, audit and close, as a process restarted after a crash does."""
    acks.line({"i": "open", "ops": ["policy"]})
    started = time.perf_counter()
    mem = gem.open(args["path"], engine=args["engine"])
    mem.head()
    acks.line({"opened": time.perf_counter() - started})
    mem.audit()
    mem.close()
    acks.line({"closed": time.perf_counter() - started})
    while True:  # the parent kills it; it must not open the database again
        time.sleep(1)


WORKLOADS: dict[str, Callable[[dict[str, Any], Acks, random.Random], None]] = {
    "single": single, "batch": batch, "episode": episode, "retrieve": retrieve,
    "maintain": maintain, "erase": erase, "compact": compact, "policy": policy,
    "reopen": reopen}


def child(args: dict[str, Any]) -> None:
    """The entry point of a child process: run the named workload until killed."""
    acks = Acks(args["acks"])
    acks.line({"start": os.getpid()})
    WORKLOADS[args["workload"]](args, acks, random.Random(args["seed"]))


def _die_with_parent() -> None:
    """Linux: be killed when the zygote dies (a harness that dies leaves no workload running)."""
    try:
        import ctypes
        ctypes.CDLL(None).prctl(1, 9)  # PR_SET_PDEATHSIG, SIGKILL
    except (OSError, AttributeError):  # pragma: no cover - not Linux
        pass


def zygote(engine: str) -> None:
    """Fork a child per line of JSON arguments read from stdin, from this process, which has
    imported gem and the engine already (so a child costs a fork, not a Python start); say
    "pid N" on stdout when one is forked and "exit N" when it is reaped. Ends with stdin."""
    import importlib
    import select
    importlib.import_module(gem.store.graph.ENGINES[engine])
    while True:
        ready, _, _ = select.select([sys.stdin], [], [], 0.02)
        if ready:
            line = sys.stdin.readline()
            if not line:
                return
            pid = os.fork()
            if pid == 0:
                try:
                    _die_with_parent()
                    os.close(0)
                    child(json.loads(line))
                finally:
                    os._exit(1)
            print(f"pid {pid}", flush=True)
        while True:
            try:
                pid, _ = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                break
            if pid == 0:
                break
            print(f"exit {pid}", flush=True)


if __name__ == "__main__":  # python -m gem.testing.crash_workloads ('<json args>' | --zygote ENGINE)
    if sys.argv[1] == "--zygote":
        zygote(sys.argv[2])
    else:
        child(json.loads(sys.argv[1]))
