"""What `Memory` does to a database as a whole (gem/memory.py keeps the signatures and
documentation): erasure and its verification, compaction, export and copies of the files,
and installing a policy set as a transition."""
from __future__ import annotations

import json
import os
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any, Callable, Sequence

from . import attest
from . import transfer
from .arguments import flag_arg, text_arg
from .derived import EPISODE_STATUS, Progress, snapshot_dir
from .errors import InvalidInput, UnknownUnit
from .model import ErasureCheck, ErasureReceipt
from .operators import erase as erase_op
from .policy import PolicySet, load_sources, read_sources
from .runtime import available_actions
from .state.transition import Transition
from .store import queries
from .transfer import TransferReport

if TYPE_CHECKING:  # only for annotations: gem.memory imports this module
    from .memory import Memory


def _disk_bytes(path: str) -> int:
    return sum(os.path.getsize(path + s) for s in ("", ".wal") if os.path.exists(path + s))


def erase(mem: "Memory", topic: str, field: str | None, *, source: str | None, reason: str,
          actor: str) -> ErasureReceipt:
    mem._check_open()
    text_arg(topic, "topic")
    if not isinstance(reason, str) or not reason.strip():
        raise InvalidInput("reason must be a non-empty string (it is kept in the tombstone: "
                           "never put the erased content in it)")
    for name, value in (("field", field), ("source", source)):
        if value is not None:
            text_arg(value, name)
    text_arg(actor, "actor")

    def op(t: Transition) -> dict[str, Any]:
        tid = mem._topic_id(t, topic)
        if tid is None:
            raise UnknownUnit(f"no topic named {topic!r}")
        return erase_op.erase(t, [tid], field, source, reason.strip())

    return _erasure(mem, op, actor)


def erase_all(mem: "Memory", reason: str, *, actor: str) -> ErasureReceipt:
    mem._check_open()
    text_arg(reason, "reason")
    text_arg(actor, "actor")

    def op(t: Transition) -> dict[str, Any]:
        tids = t.topic_ids_where(frozenset({"active", "archived"}))
        if not tids and not t.episode_ids_where(frozenset(EPISODE_STATUS)):
            raise UnknownUnit(f"scope {mem._scope!r} holds nothing to erase")
        return erase_op.erase(t, tids, None, None, reason.strip(), every_episode=True)

    return _erasure(mem, op, actor)


def _erasure(mem: "Memory", op: Callable[[Transition], dict[str, Any]], actor: str) -> ErasureReceipt:
    result, t = mem._run("erase", op, actor=actor)
    engine = mem._engine
    stone = result["tombstone"]
    with engine.store.lock:  # what is derived from what remains, and a saved snapshot, now
        scope = engine.derived.scope(mem._scope)
        scope.refresh(engine.cache, engine.services.summarizer, stone["changed"])
        # a changed field's document, an episode's that read an erased one as context (the
        # scope's other stale units with them: work the next retrieval would do)
        scope.refresh_units(engine.cache)
        if os.path.isdir(snapshot_dir(engine.store.path)):
            engine.save_snapshot()
    return ErasureReceipt(
        transition=t.seq, scope=mem._scope, at=t.now, reason=stone["reason"],
        topics=stone["topics"], fields=stone["fields"], entries=stone["entries"],
        observations=stone["observations"], redacted=stone["redacted"],
        episodes=stone["episodes"], marks=result["marks"],
        commitment=result["commitment"], salt=result["salt"])


def verify_erasure(mem: "Memory", receipt: ErasureReceipt) -> ErasureCheck:
    mem._check_open()
    if not isinstance(receipt, ErasureReceipt):
        raise InvalidInput(f"receipt must be a gem.ErasureReceipt, got {type(receipt).__name__}")
    with mem._engine.store.lock:
        return erase_op.verify(mem._engine, receipt)


def compact(mem: "Memory") -> dict[str, Any]:
    mem._check_open()
    if mem._root is not None:
        raise InvalidInput("compact the memory, not a scope view: it rewrites every scope")
    engine = mem._engine
    with engine.store.lock:
        before = _disk_bytes(mem.path)
        engine.write_behind()
        engine.store.compact()
        engine.save_snapshot()
        return {"bytes_before": before, "bytes_after": _disk_bytes(mem.path)}


def export(mem: "Memory", dest: str | Path | IO[str], progress: Progress | None) -> TransferReport:
    mem._check_open()
    if mem._root is not None:
        raise InvalidInput("export the memory, not a scope view: the file holds every scope")
    if mem._engines.per_scope:
        raise InvalidInput("export reads one embedded database; a FalkorDB memory keeps a log "
                           "per scope, which the export format (one log) does not hold yet")
    with mem._engine.store.lock:  # no commit between writing behind and reading
        mem._engine.write_behind(stamp=True)
        return transfer.export_jsonl(mem._engine.store, dest, progress)


def copy_database(mem: "Memory", dest: str | Path) -> None:
    mem._check_open()
    if mem._engines.per_scope:
        raise InvalidInput("copy_database copies an embedded database's files; a FalkorDB "
                           "memory lives on its server (export it, or copy the server's)")
    target = os.path.abspath(os.fspath(dest))
    if any(os.path.exists(target + suffix) for suffix in ("", ".wal")):
        raise InvalidInput(f"{str(dest)!r} already exists")
    mem._engine.store.copy_files(target)


def load_policies(mem: "Memory", paths: Sequence[str | Path], *, defaults: bool, actor: str) -> PolicySet:
    mem._check_open()
    flag_arg(defaults, "defaults")
    text_arg(actor, "actor")
    if mem._root is not None:
        raise InvalidInput("policies govern every scope: load them on the memory, not on a "
                           f"view of scope {mem._scope!r}")
    policy_set = load_sources(read_sources(paths, argument="paths"), available_actions(),
                              defaults=defaults, argument="paths")
    return install_policies(mem, policy_set, actor)


def install_policies(mem: "Memory", policy_set: PolicySet, actor: str) -> PolicySet:
    engine = mem._engine
    previous_set = engine.policies

    def op(t: Transition) -> None:
        with engine.store.reading() as tx:
            stored = {r["name"]: r for r in queries.stored_policies(tx)}
        rows = []
        for policy in policy_set.policies:
            old = stored.get(policy.name)
            unchanged = old is not None and old["hash"] == policy.source_hash and old["enabled"]
            version = 1 if old is None else old["version"] + (0 if unchanged else 1)
            rows.append(({"name": policy.name, "file": policy.span.file, "source": policy.source,
                          "hash": policy.source_hash, "version": version, "enabled": True,
                          "loaded_at": t.now}, old is not None))
        names = {p.name for p in policy_set.policies}
        rows += [({**old, "enabled": False}, True) for name, old in stored.items()
                 if name not in names and old["enabled"]]
        # The files themselves are kept too: settings live outside any policy.
        files = json.dumps([[src.file, src.text] for src in policy_set.sources])
        t.store_writes.append(lambda tx: queries.put_policies(tx, rows, files, policy_set.hash))
        for row, _ in rows:  # the log attests what was stored (gem/attest.py)
            t.attested[f"Policy|{row['name']}"] = attest.row_hash("Policy", row)
        t.attested["Meta|policy_sources"] = attest.text_hash(files)
        t.detail["policies"] = sorted(names)
        t.detail["policy_set_hash"] = policy_set.hash
        if previous_set is not None:
            before = {p.name for p in previous_set.policies}
            t.detail["previous_policy_set_hash"] = previous_set.hash
            t.detail["enabled"] = sorted(names - before)
            t.detail["disabled"] = sorted(before - names)
        if policy_set.warnings:
            t.detail["warnings"] = [w.render() for w in policy_set.warnings]

    with engine.store.lock:
        previous = engine.policies
        engine.install_policies(policy_set)  # the new set governs its own load transition
        try:
            mem._run("policy", op, actor=actor)
        except BaseException:
            engine.install_policies(previous)
            raise
    return policy_set
