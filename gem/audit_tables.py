"""The full audit's reads of whole tables, as Arrow batches (gem/store/queries/batches.py):
rows hashed a column at a time (gem/rowhash_columns.py), histories sieved by column arithmetic
(gem/history_columns.py), and the attester's verdicts over a batch.

Apart from gem/audit.py so that pyarrow (~60 MB resident) is imported only by a process that
runs a full audit: `import gem`, an open, writes, reads and the incremental audit never load it.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa

from . import attest, conditions, history as history_rules, history_columns
from .derived import Progress
from .rowhash import hasher, isoformat
from .rowhash_columns import hash_batch
from .store.queries.batches import HOLDER, batch_rows, column_values, history_batches, row_batches

if TYPE_CHECKING:
    from .audit import Attester, LogScan

# The entry columns the history checks read (C1, C2: gem/history.py; C4: gem/conditions.py).
_JUDGED = sorted(history_rules.JUDGED | conditions.C4_ENTRY_COLUMNS)


def check_histories(tx: Any, attester: "Attester", n_fields: int,
                    progress: Progress | None) -> tuple[int, int, list[tuple[str, str | None, str]]]:
    """Every field's history, read as Arrow batches: C1, C2 and C4 by the rules themselves
    only on the histories the column sieve names, and each entry hashed against what its last
    writer attested. Returns (fields, entries read, what was found)."""
    found: list[tuple[str, str | None, str]] = []
    fields = entries = 0
    for batch in history_batches(tx):
        # C1, C2 and C4 by the rules themselves only on the histories the sieve names
        bounds = history_columns.groups(batch, HOLDER)
        suspect = history_columns.suspects(batch, bounds)
        holders = column_values(batch, HOLDER)
        for g in np.flatnonzero(suspect).tolist():
            start, end = int(bounds[g]), int(bounds[g + 1])
            found += conditions.history_violations(holders[start], batch_rows(
                batch.slice(start, end - start), _JUDGED))
        latest, seen = attester.scan.latest, attester.seen
        for key, digest in zip(column_values(batch, "id"),
                               digests("Entry", batch.drop_columns([HOLDER]))):
            if key not in seen:  # an entry in two histories is one row
                written = latest.get(key)
                if written is not None and written[1] == digest:
                    seen.add(key)  # as its last writer attested (`check`, without a call)
                else:
                    attester.check(key, digest)
        before, fields, entries = fields, fields + len(bounds) - 1, entries + batch.num_rows
        if progress is not None and fields // 10_000 > before // 10_000:
            progress("audit histories", fields, n_fields)
    return fields, entries, found


def check_batch(attester: "Attester", table: str, batch: pa.Table,
                digests: list[str]) -> list[tuple[int, str]]:
    """`Attester.check_unit` (or `check`) of every row of an Arrow batch of a table, whose hashes are
    `digests`: (row, message) of what it finds, in row order. A moved row is hashed again
    with the statuses it can have been written with, the rows of one first level together,
    a status at a time (most match the first tried)."""
    keys = column_values(batch, "id")
    if table not in attest.LADDER:
        out: list[tuple[int, str]] = []
        for i, (key, digest) in enumerate(zip(keys, digests)):
            message = attester.verdict(key, digest)
            if message is not None:
                out.append((i, message))
        return out
    statuses = column_values(batch, "status")
    ladder, latest, seen = attester.scan.ladder, attester.scan.latest, attester.seen
    out = []
    rewritten: dict[str, list[tuple[int, int, str]]] = {}  # first level -> (row, seq, digest)
    for i, key in enumerate(keys):
        moved = ladder.get(key)
        if moved is None:
            written = latest.get(key)
            if written is not None and written[1] == digests[i]:
                seen.add(key)  # as its last writer attested (`Attester.verdict`, without a call)
                continue
            message = attester.verdict(key, digests[i])
        else:
            seen.add(key)
            seq, first, level = moved
            written = latest.get(key)
            message = None
            if statuses[i] != level:
                message = f"status {statuses[i]!r} is not what transition {seq} moved it to ({level!r})"
            elif written is None:
                message = "no transition wrote this"
            elif written[1] is None:
                message = f"transition {written[0]} deleted this, but it is stored"
            else:
                rewritten.setdefault(first, []).append((i, written[0], written[1]))
        if message is not None:
            out.append((i, message))
    for first, rows in rewritten.items():
        out += [(i, f"differs from what transition {seq} wrote")
                for i, seq, _ in _unwritten(attester, table, batch, first, rows)]
    return sorted(out, key=lambda found: found[0])

def _unwritten(attester: "Attester", table: str, batch: pa.Table, first: str,
               rows: list[tuple[int, int, str]]) -> list[tuple[int, int, str]]:
    """The moved rows (row, seq, digest) of a batch that hash to their digest with none of
    the statuses they can have been written with (`Attester._written_with`, a status at a time)."""
    statuses = attester.statuses.get((table, first)) or \
        tuple(status for status in attest.LADDER[table] if status != first)
    column = batch.column_names.index("status")
    for status in statuses:
        if not rows:
            break
        moved = batch.take([i for i, _, _ in rows])
        moved = moved.set_column(column, "status", pa.array([status] * len(rows), pa.string()))
        hashed = digests(table, moved)
        left = [row for row, digest in zip(rows, hashed) if digest != row[2]]
        if len(left) < len(rows) and status != statuses[0]:
            attester.statuses[(table, first)] = (status, *(s for s in statuses if s != status))
        rows = left
    return rows


def digests(table: str, batch: pa.Table) -> list[str]:
    """`attest.row_hash` of each row of an Arrow batch of a table: a column at a time
    (gem/rowhash.py), the rows it leaves one by one."""
    digests = hash_batch(table, batch)
    if digests is None:
        return [hasher(table)(row) for row in batch_rows(batch)]
    alone = [i for i, digest in enumerate(digests) if digest is None]
    if alone:  # (a batch of them: a row taken from Arrow on its own costs ~20 us)
        for i, row in zip(alone, batch_rows(batch.take(alone))):
            digests[i] = hasher(table)(row)
    return digests  # type: ignore[return-value]


def attest_table(tx: Any, table: str, scan: "LogScan", attester: "Attester", done: int,
                  progress: Progress | None) -> int:
    """Every stored row of a table against its last writer (an entry hashed with its history
    is not hashed again), and the stored salience columns against the log: `audit._attest`'s part
    for one table of the full audit, read as Arrow batches. Returns the rows read so far."""
    found, seen, salience = attester.found, attester.seen, scan.salience
    salient = table in ("Topic", "Field", "Episode")
    for batch in row_batches(tx, table):
        if table == "Entry" and seen:  # hashed with its history; in no history, hashed here
            fresh = [i for i, key in enumerate(column_values(batch, "id")) if key not in seen]
            done += batch.num_rows - len(fresh)
            batch = batch.take(fresh)
        keys = column_values(batch, "id")
        checked = check_batch(attester, table, batch, digests(table, batch))
        if salient:
            found += _salience_checked(keys, checked, salience, batch)
        else:
            found += [("state", keys[i], text) for i, text in checked]
        if progress is not None and (done + batch.num_rows) // 10_000 > done // 10_000:
            progress("audit rows", done + batch.num_rows, 0)
        done += batch.num_rows
    return done


def _salience_checked(keys: list[str], checked: list[tuple[int, str]],
                      salience: dict[str, tuple[int, list[Any]]],
                      batch: pa.Table) -> list[tuple[str, str | None, str]]:
    """The `checked` messages of a batch's rows, each row's followed by its stored salience
    columns against what the log says."""
    found: list[tuple[str, str | None, str]] = []
    strengths = column_values(batch, "strength")
    accessed = column_values(batch, "last_access")
    messages = iter(checked)
    message = next(messages, None)
    for i, key in enumerate(keys):
        while message is not None and message[0] == i:
            found.append(("state", key, message[1]))
            message = next(messages, None)
        expected = salience.get(key)
        if expected is not None:
            stored = [strengths[i], isoformat(accessed[i])]
            if expected[1] != stored:
                found.append(("state", key, f"stored salience {stored} is not what the log "
                                            f"says ({expected[1]}, transition {expected[0]})"))
    return found
