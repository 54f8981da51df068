"""The audit: C1-C6 over the whole stored state, and the hash chain of the transition log.

At every commit the conditions run on the units a transition touched (gem/conditions.py);
the audit runs them over everything the database holds, read with streaming scans so that
memory stays bounded by one field's history, and reports every violation it finds.
"""
from __future__ import annotations

import json
from datetime import datetime
from typing import TYPE_CHECKING, Any, Iterable, Iterator

import numpy as np

from . import attest, conditions
from .rowhash import hasher
from .collector import paused_gc
from .derived import GENESIS, Progress
from .model import AuditReport, Violation
from .operators.forget import attenuations
from .pipeline import chain_hash
from .store import queries
from .store.schema import RELS, Row
from .units import is_episode

if TYPE_CHECKING:
    from .derived import ScopeState
    from .engine import Engine


OWNED = tuple(name for name, rel in RELS.items() if rel.parent_column is not None)


def decode(row: Row, parts: tuple[str, ...] = attest.PARTS) -> dict[str, Any]:
    """A transition-log record with its JSON columns decoded, as stored (and hashed). A
    redacted record (erasure) has no salt, and its content parts are None (so are the parts
    not in `parts`: the log scan reads only `writes` and `salience`)."""
    redacted = not row["salt"]
    record = {"seq": row["seq"], "scope": row["scope"], "op": row["op"], "event": row["event"],
              "at": row["at"], "actor": row["actor"], "counters": json.loads(row["counters"]),
              "tombstone": json.loads(row["tombstone"]) if row["tombstone"] else None,
              "salt": row["salt"], "commit": row["commit"], "redacted": redacted,
              "prev_hash": row["prev_hash"], "hash": row["hash"]}
    for name in attest.PARTS:
        record[name] = None if redacted or name not in parts else json.loads(row[name])
    return record


def log_entry(row: Row) -> dict[str, Any]:
    """A transition-log record as callers see it: every policy call listed on its own."""
    record = decode(row)
    del record["salt"]
    if record["policies"] is not None:
        calls = []
        for item in record["policies"]:
            call = {k: v for k, v in item.items() if k != "n"}
            calls += [dict(call) for _ in range(item.get("n", 1))]
        record["policies"] = calls
    return record


def _iso(at: datetime | str) -> str:
    # Memory.recent_transitions gives the time as the ISO text the hash covers already.
    return at if isinstance(at, str) else at.isoformat()


def record_problem(previous: str, record: dict[str, Any], row: Row | None = None) -> str | None:
    """Why a record does not continue the chain from `previous`, or None. With the stored
    `row` it came from, the commitment is first checked on the parts' stored texts (what
    the log stage hashed): decoding and encoding the parts again (a forgetting pass's
    `writes` holds 100k hashes) is left for a record whose texts do not match."""
    if not record["redacted"] and not (
            row is not None and attest.commitment_of_texts(
                record["salt"], {name: row[name] for name in attest.PARTS}) == record["commit"]) \
            and attest.commitment(record["salt"], decode(row) if row is not None else record) \
            != record["commit"]:
        return "its content does not match its commitment"
    body = {"seq": record["seq"], "scope": record["scope"], "op": record["op"],
            "event": record["event"], "at": _iso(record["at"]), "actor": record["actor"],
            "counters": record["counters"], "tombstone": record["tombstone"],
            "commit": record["commit"]}
    if record["prev_hash"] != previous or record["hash"] != chain_hash(previous, body):
        return "the hash chain is broken here"
    return None


def verify_chain(records: Iterable[dict[str, Any]], start: str = GENESIS,
                 expected: dict[str, Any] | None = None) -> tuple[bool, int | None, int]:
    """(chain intact, first broken record, records checked), from the hash `start`, over
    records as stored (`decode`)."""
    previous, checked = start, 0
    for record in records:
        checked += 1
        if record_problem(previous, record) is not None:
            return False, record["seq"], checked
        previous = record["hash"]
    return True, None, checked


@paused_gc()
def audit(engine: "Engine", *, full: bool = False, progress: Progress | None = None,
          expected_head: dict[str, Any] | None = None) -> AuditReport:
    """C1-C6, the state against what the log attests, and the hash chain: over everything with
    `full`, otherwise over what changed since the last clean audit (its head is kept with the
    derived state), or everything when there was none. `expected_head` ({"seq", "hash"},
    exported earlier with `Memory.head()`) anchors the log outside the database: a log cut
    short of it, or rewritten up to it, fails. The cyclic collector is paused (gem/collector.py):
    what the log scan keeps per unit (1.1M entries at 100k topics) forms no cycles, and each
    full collection over it walked it all again."""
    checkpoint = engine.derived.audit_checkpoint
    if full or checkpoint is None or checkpoint[0] > engine.seq or \
            (expected_head is not None and int(expected_head["seq"]) <= checkpoint[0]):
        report = _full(engine, progress, expected_head)
    else:
        report = _since(engine, checkpoint, progress, expected_head)
    if report.ok:
        engine.derived.audit_checkpoint = (engine.seq, engine.derived.hash)
    return report


def merge(report: AuditReport, scope: str, other: AuditReport) -> AuditReport:
    """One report of a memory whose scopes are separate stores (FalkorDB: one graph, one log
    and one chain per scope): `other` is scope `scope`'s. A log record is named with its
    scope (`acme:12`), its number alone being the scope's."""
    found = [v if v.condition != "log" else
             Violation(condition=v.condition, unit=f"{scope}:{v.unit}", detail=v.detail)
             for v in other.violations]
    checked = dict(report.checked)
    for name, n in other.checked.items():
        checked[name] = checked.get(name, 0) + n
    return AuditReport(ok=report.ok and other.ok, checked=checked,
                       violations=[*report.violations, *found],
                       transitions=report.transitions + other.transitions,
                       chain_ok=report.chain_ok and other.chain_ok,
                       since=min(report.since, other.since))


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


class UnitLog:
    """What the log says of each unit, as dicts: its last write, its ladder moves since, and the
    salience its stored columns must hold (the incremental audit's few records; the full audit
    keeps the same as columns: gem/audit_units.py)."""

    def __init__(self, salience_seq: int = 0) -> None:
        self.salience_seq = salience_seq
        self.latest: dict[str, tuple[int, str | None]] = {}
        # unit -> (seq, first level, last level) of its ladder moves since the last record
        # that wrote its row (gem/attest.py: a status-only move is not hashed)
        self.ladder: dict[str, tuple[int, str, str]] = {}
        self.salience: dict[str, tuple[int, list[Any]]] = {}   # expected in the stored columns

    def take(self, seq: int, writes: dict[str, Any], moves: list[tuple[str, str]],
             salience: dict[str, Any]) -> None:
        ladder = self.ladder
        for key, value in writes.items():
            self.latest[key] = (seq, value)
            if key in ladder:
                del ladder[key]
            if value is None:  # deleted: a unit made again under its key starts afresh
                self.salience.pop(key, None)
        for unit, level in moves:
            if unit not in writes:  # its status alone moved: the record attests it
                before = ladder.get(unit)
                ladder[unit] = (seq, before[1] if before else level, level)
        for key, value in salience.items():
            if seq <= self.salience_seq or key not in self.salience:
                self.salience[key] = (seq, value)


class LogScan:
    """One pass over the log: the chain, what each unit's last writer attested (`units`: a
    `UnitLog`, or the full audit's columns), which records were redacted by which erasure, and
    that its times never decrease."""

    def __init__(self, start: str = GENESIS, salience_seq: int = 0,
                 start_at: datetime | None = None, units: Any = None) -> None:
        self.previous = start
        self.previous_at = start_at  # the time of the record before the first
        self.backwards: list[tuple[int, datetime, datetime]] = []
        self.broken: int | None = None
        self.checked = 0
        self.units = UnitLog(salience_seq) if units is None else units
        self.redacted: set[int] = set()
        self.tombstoned: set[int] = set()
        self.head: tuple[int, str] | None = None
        self.hashes: dict[int, str] = {}

    def add(self, record: dict[str, Any], row: Row | None = None) -> None:
        """Take in the next record (`row`: the stored row it was decoded from, see
        `record_problem`)."""
        self.checked += 1
        seq = record["seq"]
        if self.broken is None and record_problem(self.previous, record, row) is not None:
            self.broken = seq
        self.previous = record["hash"]
        # The engine never goes back in time (it takes the later of its clock and the last
        # transition's time), so a record earlier than the one before it was written otherwise.
        if self.previous_at is not None and record["at"] < self.previous_at:
            self.backwards.append((seq, record["at"], self.previous_at))
        self.previous_at = record["at"]
        self.head = (seq, record["hash"])
        self.hashes[seq] = record["hash"]
        if record["tombstone"]:
            self.tombstoned.update(record["tombstone"].get("redacted", []))
        if record["redacted"]:
            self.redacted.add(seq)
            return
        self.units.take(seq, record["writes"], attenuations(record["detail"] or {}),
                        record["salience"])

    def violations(self) -> list[tuple[str, str | None, str]]:
        found: list[tuple[str, str | None, str]] = [
            ("log", str(seq), "record redacted without an erasure that names it")
            for seq in sorted(self.redacted - self.tombstoned)]
        found += [("log", str(seq), f"recorded at {at.isoformat()}, before the transition before "
                                    f"it ({before.isoformat()})") for seq, at, before in self.backwards]
        return found


class Attester:
    """Stored rows against the hash their last writer in `scan` attested, and which were seen
    (a row the log attests that was never seen is missing)."""

    def __init__(self, units: UnitLog) -> None:
        self.units = units
        self.found: list[tuple[str, str | None, str]] = []
        self.seen: set[str] = set()
        # (table, first level) -> the statuses a moved row may have been written with, the
        # one the last such row was written with first (most rows of a pass share it)
        self.statuses: dict[tuple[str, str], tuple[str, ...]] = {}

    def check_unit(self, table: str, row: Row) -> None:
        """A topic, field or episode: its status against its last ladder move, if one came
        after its row was last written, and the rest against that write's hash (the status
        it was written with is one the move did not move it to). A unit the records only
        moved is checked by its status: its row's hash is in an earlier record (the
        incremental audit's)."""
        key = row["id"]
        moved = self.units.ladder.get(key)
        if moved is None:
            self.check(key, hasher(table)(row))
            return
        self.seen.add(key)
        seq, first, level = moved
        if row["status"] != level:
            self.found.append(("state", key, f"status {row['status']!r} is not what transition "
                                             f"{seq} moved it to ({level!r})"))
            return
        written = self.units.latest.get(key)
        if written is None:
            return
        if written[1] is None:
            self.found.append(("state", key, f"transition {written[0]} deleted this, but it is stored"))
        elif not self._written_with(table, row, first, written[1]):
            self.found.append(("state", key, f"differs from what transition {written[0]} wrote"))

    def _written_with(self, table: str, row: Row, first: str, digest: str) -> bool:
        """Whether a moved row hashes to `digest` with one of the statuses it can have been
        written with (every one is tried before saying no)."""
        statuses = self.statuses.get((table, first)) or \
            tuple(status for status in attest.LADDER[table] if status != first)
        row_hash = hasher(table)
        for status in statuses:
            if row_hash({**row, "status": status}) == digest:
                if status != statuses[0]:
                    self.statuses[(table, first)] = (status, *(s for s in statuses if s != status))
                return True
        return False

    def verdict(self, key: str, digest: str) -> str | None:
        self.seen.add(key)
        written = self.units.latest.get(key)
        if written is None:
            return "no transition wrote this"
        if written[1] is None:
            return f"transition {written[0]} deleted this, but it is stored"
        if written[1] != digest:
            return f"differs from what transition {written[0]} wrote"
        return None

    def check(self, key: str, digest: str) -> None:
        message = self.verdict(key, digest)
        if message is not None:
            self.found.append(("state", key, message))

    def missing(self, keys: set[str]) -> list[tuple[str, str | None, str]]:
        """The units of `keys` the log attests (written and not deleted since, or moved) that
        no row holds."""
        latest, ladder, seen = self.units.latest, self.units.ladder, self.seen
        found: list[tuple[str, str | None, str]] = [
            ("state", key, f"missing: transition {latest[key][0]} wrote it")
            for key in sorted(key for key in latest.keys() - seen
                              if latest[key][1] is not None and key in keys)]
        found += [("state", key, f"missing: transition {ladder[key][0]} moved it")
                  for key in sorted(key for key in ladder.keys() - seen - latest.keys()
                                    if key in keys)]
        return found


def _attest(tx: Any, attester: Any, keys: set[str] | None = None, entries_seen: bool = False,
            progress: Progress | None = None) -> list[tuple[str, str | None, str]]:
    """Every stored row (or only the units of `keys`) against the hash its last writer
    attested; with every row, the stored salience columns against the log too. `attester`
    (an `Attester`, or with every row the full audit's `audit_units.UnitAttester`) holds the
    rows checked already: with `entries_seen`, every stored entry (the full audit hashes
    entries as it reads the histories, and reads them only once)."""
    found, check = attester.found, attester.check
    done = 0
    for table in ("Topic", "Field", "Entry", "Observation", "Flag", "Episode"):
        if table == "Entry" and entries_seen:
            continue
        if keys is None:
            from . import audit_tables  # pyarrow only where a full audit runs
            done = audit_tables.attest_table(tx, table, attester, done, progress)
            continue
        rows = queries.read_rows(tx, table, sorted(k for k in keys if "|" not in k))
        row_hash = hasher(table)
        for row in rows:
            done += 1
            if progress is not None and done % 10_000 == 0:
                progress("audit rows", done, 0)
            if table == "Entry" and row["id"] in attester.seen:
                continue  # hashed with its history; an entry in no history is hashed here
            if table in attest.LADDER:
                attester.check_unit(table, row)
            else:
                check(row["id"], row_hash(row))
    edge_keys = None if keys is None else {k for k in keys if k.split("|", 1)[0] in attest.EDGE_KINDS}
    if keys is None:
        edges = [(table, a, b, props) for table in attest.EDGE_KINDS
                 for a, b, props in queries.scan_edges(tx, table)]
    else:
        ends = sorted({k.split("|")[1] for k in edge_keys or ()})
        edges = queries.read_edges(tx, ends) if ends else []
    for table, a, b, props in edges:
        key = attest.edge_key(table, a, b)
        if edge_keys is None or key in edge_keys:
            check(key, attest.edge_hash(table, props))
    for row in queries.stored_policies(tx):
        key = f"Policy|{row['name']}"
        if keys is None or key in keys:
            check(key, attest.row_hash("Policy", row))
    sources = queries.meta_get(tx, "policy_sources")
    if sources is not None and (keys is None or "Meta|policy_sources" in keys):
        check("Meta|policy_sources", attest.text_hash(sources))
    found += attester.missing() if keys is None else attester.missing(keys)
    return found


class EpisodeLinks:
    """What points at an episode must find it: the episode it `follows` (stored, of its scope)
    and the derived state's listing of each scope's episodes (every stored episode with its
    status, and nothing else: an erased one listed would be read as a row that is not there)."""

    def __init__(self) -> None:
        self.stored: dict[str, tuple[str, str]] = {}     # id -> (scope, status)
        self.follows: list[tuple[str, str, str]] = []    # (id, scope, the episode it follows)

    def seen(self, rows: Iterable[Row]) -> Iterator[Row]:
        for row in rows:
            self.stored[row["id"]] = (row["scope"], row["status"])
            if row["follows"] is not None:
                self.follows.append((row["id"], row["scope"], row["follows"]))
            yield row

    def violations(self, derived: dict[str, "ScopeState"] | None) -> list[tuple[str, str | None, str]]:
        found: list[tuple[str, str | None, str]] = [
            ("C4", eid, f"follows {before}, which is not an episode of its scope")
            for eid, scope, before in self.follows
            if self.stored.get(before, ("", ""))[0] != scope]
        if derived is None:
            return found
        for eid, (scope, status) in sorted(self.stored.items()):
            state = derived.get(scope)
            listed = None if state is None else state.episodes.status_of(eid)
            if listed != status:
                found.append(("state", eid, f"the derived state lists it as {listed}, the "
                                            f"database holds it as {status}"))
        for scope, state in sorted(derived.items()):
            table = state.episodes
            found += [("state", table.ids[r], "the derived state lists an episode the database "
                                              "does not hold")
                      for r in np.flatnonzero(table.live()).tolist()
                      if table.ids[r] not in self.stored]
        return found


def _head(scan: LogScan, expected: dict[str, Any] | None) -> list[tuple[str, str | None, str]]:
    """The log must reach an anchored head, with that hash (truncation, re-chaining)."""
    if expected is None:
        return []
    seq, digest = int(expected["seq"]), str(expected["hash"])
    have = scan.hashes.get(seq)
    if have is None:
        return [("log", str(seq), f"the log ends at {scan.head[0] if scan.head else 0}, before the "
                                  f"anchored head {seq}")]
    if have != digest:
        return [("log", str(seq), "the record at the anchored head has another hash: the log "
                                  "was rewritten")]
    return []


def _full(engine: "Engine", progress: Progress | None,
          expected_head: dict[str, Any] | None = None) -> AuditReport:
    found: list[tuple[str, str | None, str]] = []
    with engine.store.reading() as tx:
        n_fields = queries.count(tx, "Field")
        n_entries = queries.count(tx, "Entry")
        # The log first: then each entry is checked against what its last writer attested as
        # its history is read, and the largest table is read once, not twice.
        n_records = queries.count(tx, "Transition")
        # pyarrow (~60 MB resident) only in a process that runs a full audit
        from . import audit_tables, audit_units
        units = audit_units.LogUnits(int(queries.meta_get(tx, "salience_seq") or 0))
        scan = LogScan(units=units)
        for record in queries.stream_log(tx):
            scan.add(decode(record, ("writes", "salience", "detail")), record)
            if progress is not None and scan.checked % 1_000 == 0:
                progress("audit log", scan.checked, n_records)
        if progress is not None:
            progress("audit log", scan.checked, n_records)
        units.finish()
        attester = audit_units.UnitAttester(units)
        fields, entries, found_in, misowned = audit_tables.check_histories(tx, attester, n_fields,
                                                                           progress)
        found += found_in
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
        for rel in OWNED:  # an entry's holder came with its history
            found += [("C4", child, f"held by {holder} ({rel}) but names {owner} as its owner")
                      for child, owner, holder in (misowned if rel == "HAS_ENTRY" else
                                                   queries.misowned(tx, rel))]
        episodes = EpisodeLinks()
        found += conditions.c4_episodes(episodes.seen(queries.stream_rows(tx, "Episode")))
        found += conditions.c3_trajectory(queries.updates_of_extended_topics(tx),
                                          queries.flags_by_transition(tx))
        active = queries.active_fields_by_scope(tx)
        found += conditions.c6_strengths(queries.negative_strengths(tx))
        found += conditions.c6_strengths((key, s) for key, (_, s, _) in
                                         engine.derived.pending_salience.items())
        checked = {"C1": fields, "C2": fields, "C3": queries.count_rels(tx, "EXTENDS"),
                   "C4": entries, "C5": 1,
                   "C6": queries.count(tx, "Transition", "n.op = 'retrieve'")}
        found += scan.violations()
        found += _attest(tx, attester, entries_seen=entries == n_entries,
                         progress=progress)
        chain_ok, broken_at = scan.broken is None, scan.broken
        found += _head(scan, expected_head)
        # the derived state describes the head it took in: compared when that is this log's
        described = engine.derived.seq == (scan.head[0] if scan.head else 0)
        found += episodes.violations(engine.derived.scopes if described else None)
    if progress is not None:
        progress("audit histories", fields, n_fields)
    return _report(engine, found, checked, (chain_ok, broken_at), active, 0)


def _since(engine: "Engine", checkpoint: tuple[int, str], progress: Progress | None,
           expected_head: dict[str, Any] | None = None) -> AuditReport:
    """What the transitions after a clean audit touched: their fields' histories and
    observations, the updates they made of extended topics, the rows they wrote against what
    they attested, their units' strengths, and the chain from the audited head on (whose
    record must still carry the audited hash)."""
    seq, head = checkpoint
    found: list[tuple[str, str | None, str]] = []
    with engine.store.reading() as tx:
        anchor = queries.transitions(tx, seq - 1, seq) if seq else []
        rows = queries.transitions(tx, seq)
        records = [decode(r, ("units", "writes", "salience", "detail")) for r in rows]
        scan = LogScan(start=head if seq else GENESIS, start_at=anchor[0]["at"] if anchor else None)
        for record, row in zip(records, rows):
            scan.add(record, row)
        if seq and (not anchor or anchor[0]["hash"] != head):
            chain: tuple[bool, int | None] = (False, seq)
        else:
            chain = (scan.broken is None, scan.broken)
        found += scan.violations()
        found += _attest(tx, Attester(scan.units), keys=set(scan.units.latest) | set(scan.units.ladder))
        found += _head(scan, expected_head) if expected_head and int(expected_head["seq"]) > seq else []
        units = sorted({u for r in records for u in (r["units"] or ())})
        fids = [u for u in units if "/" in u]
        tids = [u for u in units if "/" not in u and not is_episode(u)]
        eps = [u for u in units if is_episode(u)]
        histories: dict[str, list[Row]] = {f: [] for f in fids}
        for i in range(0, len(fids), 1000):
            for fid, entry in queries.read_children(tx, "HAS_ENTRY", fids[i:i + 1000]):
                histories[fid].append(entry)
            if progress is not None:
                progress("audit histories", min(i + 1000, len(fids)), len(fids))
        entries = 0
        for fid, history in histories.items():
            entries += len(history)
            found += conditions.history_violations(fid, history)
        eids = [e["id"] for h in histories.values() for e in h]
        for i in range(0, len(eids), 1000):
            for _, obs in queries.read_children(tx, "CORROBORATES", eids[i:i + 1000]):
                found += conditions.c4_provenance((), [obs], lambda eid: {"id": eid}, lambda e: True)
        found += conditions.c3_trajectory(queries.updates_of_extended_topics(tx, since=seq),
                                          queries.flags_by_transition(tx))
        strengths = [(r["id"], engine.derived.patch(table, r)["strength"])
                     for table, keys in (("Topic", tids), ("Field", fids), ("Episode", eps))
                     for r in queries.read_rows(tx, table, keys)]
        found += conditions.c6_strengths(strengths)
        active = queries.active_fields_by_scope(tx)
    checked = {"C1": len(fids), "C2": len(fids), "C3": len(tids), "C4": entries, "C5": 1,
               "C6": sum(1 for r in records if r["op"] == "retrieve")}
    return _report(engine, found, checked, chain, active, seq)
