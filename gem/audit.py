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


def decode(row: Row) -> dict[str, Any]:
    """A transition-log record with its JSON columns decoded, as stored (and hashed)."""
    return {"seq": row["seq"], "scope": row["scope"], "op": row["op"], "event": row["event"],
            "at": row["at"], "actor": row["actor"], "units": json.loads(row["units"]),
            "policies": json.loads(row["policies"]), "detail": json.loads(row["detail"]),
            "salience": json.loads(row["salience"] or "{}"),
            "counters": json.loads(row["counters"]),
            "prev_hash": row["prev_hash"], "hash": row["hash"]}


def log_entry(row: Row) -> dict[str, Any]:
    """A transition-log record as callers see it: every policy call listed on its own."""
    record = decode(row)
    calls = []
    for item in record["policies"]:
        call = {k: v for k, v in item.items() if k != "n"}
        calls += [dict(call) for _ in range(item.get("n", 1))]
    record["policies"] = calls
    return record


def verify_chain(records: Iterable[dict[str, Any]], start: str = GENESIS) -> tuple[bool, int | None, int]:
    """(chain intact, first broken record, records checked), from the hash `start`, over
    records as stored (`decode`)."""
    previous, checked = start, 0
    for record in records:
        body = {"seq": record["seq"], "scope": record["scope"], "op": record["op"],
                "event": record["event"], "at": record["at"].isoformat(), "actor": record["actor"],
                "units": record["units"], "policies": record["policies"], "detail": record["detail"],
                "salience": record["salience"], "counters": record["counters"]}
        checked += 1
        if record["prev_hash"] != previous or record["hash"] != chain_hash(previous, body):
            return False, record["seq"], checked
        previous = record["hash"]
    return True, None, checked


def audit(engine: "Engine", *, full: bool = False, progress: Progress | None = None) -> AuditReport:
    """C1-C6 and the hash chain: over everything with `full`, otherwise over what changed
    since the last clean audit (its head is kept with the derived state), or everything when
    there was none."""
    checkpoint = engine.derived.audit_checkpoint
    if full or checkpoint is None or checkpoint[0] > engine.seq:
        report = _full(engine, progress)
    else:
        report = _since(engine, checkpoint, progress)
    if report.ok:
        engine.derived.audit_checkpoint = (engine.seq, engine.derived.hash)
    return report


def _report(engine: "Engine", found: list[tuple[str, str | None, str]], checked: dict[str, int],
            chain: tuple[bool, int | None], active: dict[str, int], since: int) -> AuditReport:
    for scope, count in sorted(active.items()):  # C5 holds per scope, with that scope's n
        t = engine.read(lambda t: t, scope)
        found += [(c, u or scope, d) for c, u, d in conditions.c5_bounded_active_state(
            count, t.settings.get("active_bound"), t.counters.interactions)]
    violations = [Violation(condition=c, unit=u, detail=d) for c, u, d in found]
    chain_ok, broken_at = chain
    if not chain_ok:
        violations.append(Violation(condition="log", unit=str(broken_at),
                                    detail="transition log hash chain is broken here"))
    return AuditReport(ok=not violations, checked=checked, violations=violations,
                       transitions=engine.seq, chain_ok=chain_ok, since=since)


def _check_history(fid: str, history: list[Row]) -> list[tuple[str, str | None, str]]:
    ids = {e["id"] for e in history}
    return [*conditions.c1_c2_histories([(fid, history)]),
            *conditions.c4_provenance(history, (), lambda eid: {"id": eid} if eid in ids else None,
                                      lambda e: True)]


def _full(engine: "Engine", progress: Progress | None) -> AuditReport:
    found: list[tuple[str, str | None, str]] = []
    with engine.store.reading() as tx:
        n_fields = queries.count(tx, "Field")
        n_entries = queries.count(tx, "Entry")
        fields = entries = 0
        for fid, history in queries.stream_histories(tx):
            fields += 1
            entries += len(history)
            found += _check_history(fid, history)
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
        active = queries.active_fields_by_scope(tx)
        found += conditions.c6_strengths(queries.negative_strengths(tx))
        found += conditions.c6_strengths((key, s) for key, (_, s, _) in
                                         engine.derived.pending_salience.items())
        checked = {"C1": fields, "C2": fields, "C3": queries.count_rels(tx, "EXTENDS"),
                   "C4": entries, "C5": 1,
                   "C6": queries.count(tx, "Transition", "n.op = 'retrieve'")}
        chain_ok, broken_at, _ = verify_chain(
            decode(r) for r in queries.stream_rows(tx, "Transition", order="seq"))
    if progress is not None:
        progress("audit histories", fields, n_fields)
    return _report(engine, found, checked, (chain_ok, broken_at), active, 0)


def _since(engine: "Engine", checkpoint: tuple[int, str], progress: Progress | None) -> AuditReport:
    """What the transitions after a clean audit touched: their fields' histories and
    observations, the updates they made of extended topics, their units' strengths, and the
    chain from the audited head on (whose record must still carry the audited hash)."""
    seq, head = checkpoint
    found: list[tuple[str, str | None, str]] = []
    with engine.store.reading() as tx:
        anchor = queries.transitions(tx, seq - 1, seq) if seq else []
        records = [decode(r) for r in queries.transitions(tx, seq)]
        if seq and (not anchor or anchor[0]["hash"] != head):
            chain: tuple[bool, int | None] = (False, seq)
        else:
            ok, broken, _ = verify_chain(records, start=head if seq else GENESIS)
            chain = (ok, broken)
        units = sorted({u for r in records for u in r["units"]})
        fids = [u for u in units if "/" in u]
        tids = [u for u in units if "/" not in u]
        histories: dict[str, list[Row]] = {f: [] for f in fids}
        for i in range(0, len(fids), 1000):
            for fid, entry in queries.read_children(tx, "HAS_ENTRY", fids[i:i + 1000]):
                histories[fid].append(entry)
            if progress is not None:
                progress("audit histories", min(i + 1000, len(fids)), len(fids))
        entries = 0
        for fid, history in histories.items():
            entries += len(history)
            found += _check_history(fid, history)
        eids = [e["id"] for h in histories.values() for e in h]
        for i in range(0, len(eids), 1000):
            for _, obs in queries.read_children(tx, "CORROBORATES", eids[i:i + 1000]):
                found += conditions.c4_provenance((), [obs], lambda eid: {"id": eid}, lambda e: True)
        found += conditions.c3_trajectory(queries.updates_of_extended_topics(tx, since=seq),
                                          queries.flags_by_transition(tx))
        strengths = [(r["id"], engine.derived.patch(table, r)["strength"])
                     for table, keys in (("Topic", tids), ("Field", fids))
                     for r in queries.read_rows(tx, table, keys)]
        found += conditions.c6_strengths(strengths)
        active = queries.active_fields_by_scope(tx)
    checked = {"C1": len(fids), "C2": len(fids), "C3": len(tids), "C4": entries, "C5": 1,
               "C6": sum(1 for r in records if r["op"] == "retrieve")}
    return _report(engine, found, checked, chain, active, seq)
