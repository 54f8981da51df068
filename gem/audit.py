"""The audit: C1-C6 over the whole stored state, and the hash chain of the transition log.

At every commit the conditions run on the units a transition touched (gem/conditions.py);
the audit runs them over everything the database holds, read with streaming scans so that
memory stays bounded by one field's history, and reports every violation it finds.
"""
from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any, Iterable

from . import conditions
from .derived import GENESIS, Progress
from .model import AuditReport, Violation
from .pipeline import chain_hash
from .store import queries
from .store.schema import Row

if TYPE_CHECKING:
    from .engine import Engine


def log_entry(row: Row) -> dict[str, Any]:
    """A transition-log record as callers see it (JSON columns decoded)."""
    return {"seq": row["seq"], "op": row["op"], "event": row["event"], "at": row["at"],
            "actor": row["actor"], "units": json.loads(row["units"]),
            "policies": json.loads(row["policies"]), "detail": json.loads(row["detail"]),
            "prev_hash": row["prev_hash"], "hash": row["hash"]}


def verify_chain(records: Iterable[dict[str, Any]]) -> tuple[bool, int | None, int]:
    """(chain intact, first broken record, records checked)."""
    previous, checked = GENESIS, 0
    for record in records:
        body = {"seq": record["seq"], "op": record["op"], "event": record["event"],
                "at": record["at"].isoformat(), "actor": record["actor"], "units": record["units"],
                "policies": record["policies"], "detail": record["detail"]}
        checked += 1
        if record["prev_hash"] != previous or record["hash"] != chain_hash(previous, body):
            return False, record["seq"], checked
        previous = record["hash"]
    return True, None, checked


def audit(engine: "Engine", *, full: bool = True, progress: Progress | None = None) -> AuditReport:
    store = engine.store
    found: list[tuple[str, str | None, str]] = []
    checked: dict[str, int] = {}
    with store.reading() as tx:
        n_fields = queries.count(tx, "Field")
        n_entries = queries.count(tx, "Entry")
        fields = entries = 0
        for fid, history in queries.stream_histories(tx):
            fields += 1
            entries += len(history)
            found += conditions.c1_c2_histories([(fid, history)])
            ids = {e["id"] for e in history}
            found += conditions.c4_provenance(
                history, (), lambda eid: {"id": eid} if eid in ids else None, lambda e: True)
            if progress is not None and fields % 10_000 == 0:
                progress("audit histories", fields, n_fields)
        if entries != n_entries:
            found.append(("C4", None, f"{n_entries - entries} entries are not in any field's history"))
        unreachable = n_fields - queries.count_rels(tx, "HAS_FIELD")
        if unreachable:
            found.append(("C4", None, f"{unreachable} fields do not belong to a topic"))
        observations = 0
        for obs in queries.stream_rows(tx, "Observation"):
            observations += 1
            found += conditions.c4_provenance((), [obs], lambda eid: {"id": eid}, lambda e: True)
        orphans = observations - queries.count_rels(tx, "CORROBORATES")
        if orphans:
            found.append(("C4", None, f"{orphans} observations are not attached to an entry"))
        found += conditions.c3_trajectory(queries.updates_of_extended_topics(tx),
                                          queries.flags_by_transition(tx))
        active = queries.status_counts(tx)["fields"].get("active", 0)
        found += conditions.c6_strengths(queries.negative_strengths(tx))
        checked = {"C1": fields, "C2": fields, "C3": queries.count_rels(tx, "EXTENDS"),
                   "C4": entries, "C5": 1,
                   "C6": queries.count(tx, "Transition", "n.op = 'retrieve'")}
        chain_ok, broken_at, _ = verify_chain(
            log_entry(r) for r in queries.stream_rows(tx, "Transition", order="seq"))
    settings = engine.read(lambda t: t.settings)
    found += conditions.c5_bounded_active_state(active, settings.get("active_bound"),
                                                engine.counters.interactions)
    violations = [Violation(condition=c, unit=u, detail=d) for c, u, d in found]
    if not chain_ok:
        violations.append(Violation(condition="log", unit=str(broken_at),
                                    detail="transition log hash chain is broken here"))
    return AuditReport(ok=not violations, checked=checked, violations=violations,
                       transitions=engine.seq, chain_ok=chain_ok)
