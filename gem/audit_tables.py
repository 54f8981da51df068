"""The full audit's reads of whole tables, as Arrow batches (gem/store/queries/batches.py):
rows hashed a column at a time (gem/rowhash_columns.py), histories sieved by column arithmetic
(gem/history_columns.py), and the attester's verdicts over a batch.

Apart from gem/audit.py so that pyarrow (~60 MB resident) is imported only by a process that
runs a full audit: `import gem`, an open, writes, reads and the incremental audit never load it.
"""
from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from datetime import timezone
from typing import TYPE_CHECKING, Any, Iterator

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from . import attest, conditions, history as history_rules, history_columns
from .derived import Progress
from .rowhash import hasher, isoformat
from .rowhash_columns import hash_batch
from .store.queries.batches import HOLDER, batch_rows, column_values, history_batches, row_batches

if TYPE_CHECKING:
    from .audit_units import LogUnits, UnitAttester

# The entry columns the history checks read (C1, C2: gem/history.py; C4: gem/conditions.py).
_JUDGED = sorted(history_rules.JUDGED | conditions.C4_ENTRY_COLUMNS)


def check_histories(tx: Any, attester: "UnitAttester", n_fields: int, progress: Progress | None
                    ) -> tuple[int, int, list[tuple[str, str | None, str]], list[tuple[str, str, str]]]:
    """Every field's history, read as Arrow batches: C1, C2 and C4 by the rules themselves
    only on the histories the column sieve names, and each entry hashed against what its last
    writer attested. Returns (fields, entries read, what was found, and (entry, field_id,
    holder) of each entry held by a field its row does not name, by entry: what
    `queries.misowned(tx, "HAS_ENTRY")` gives, read here with the histories, not by a second
    join of every field to its entries)."""
    found: list[tuple[str, str | None, str]] = []
    misowned: list[tuple[str, str, str]] = []
    fields = entries = 0
    for batch in read_ahead(history_batches(tx)):
        held = np.flatnonzero(_flags(pc.not_equal(batch.column("field_id"), batch.column(HOLDER))))
        if len(held):
            odd = batch.take(held)
            misowned += zip(*(column_values(odd, c) for c in ("id", "field_id", HOLDER)))
        # C1, C2 and C4 by the rules themselves only on the histories the sieve names
        bounds = history_columns.groups(batch, HOLDER)
        suspect = history_columns.suspects(batch, bounds)
        holders = batch.column(HOLDER)
        for g in np.flatnonzero(suspect).tolist():
            start, end = int(bounds[g]), int(bounds[g + 1])
            found += conditions.history_violations(holders[start].as_py(), batch_rows(
                batch.slice(start, end - start), _JUDGED))
        keys = column_values(batch, "id")
        codes = attester.units.codes(keys, batch.column("id"))
        fresh = attester.fresh(keys, codes)  # an entry in two histories is one row
        entries_of = batch.drop_columns([HOLDER])
        hashed = digests("Entry", entries_of if len(fresh) == batch.num_rows else
                         entries_of.take(fresh))  # (fresh rows are in order: all of them, or some)
        fresh_keys = [keys[i] for i in fresh.tolist()]
        attester.found += [("state", fresh_keys[i], message) for i, message in
                           attester.judge(fresh_keys, codes[fresh], hashed)]
        before, fields, entries = fields, fields + len(bounds) - 1, entries + batch.num_rows
        if progress is not None and fields // 10_000 > before // 10_000:
            progress("audit histories", fields, n_fields)
    return fields, entries, found, sorted(misowned)


def read_ahead(batches: Iterator[pa.Table]) -> Iterator[pa.Table]:
    """The batches, each next one read by the engine on a thread of its own while the caller
    checks the one before (the engine lets go of the GIL while it reads: ~a quarter of the
    full audit is its reads). The caller must not use the transaction meanwhile: only one
    read is ever under way, and one stopped early is waited for."""
    with ThreadPoolExecutor(max_workers=1, thread_name_prefix="gem-audit-read") as pool:
        pending = pool.submit(next, batches, None)
        while (batch := pending.result()) is not None:
            pending = pool.submit(next, batches, None)
            yield batch


def check_batch(attester: "UnitAttester", table: str, batch: pa.Table, keys: list[str],
                codes: np.ndarray) -> list[tuple[int, str]]:
    """What `Attester.check_unit` (or `check`) finds of every row of an Arrow batch of a table
    (`keys` its ids, `codes` their rows of the attester's `LogUnits`): (row, message) in row
    order. A moved row is hashed only with the statuses it can have been written with (its
    stored one is the level it moved to), the rows of one first level together, a status at
    a time (most match the first tried)."""
    units = attester.units
    moved = units.move_seq[codes] >= 0
    if table not in attest.LADDER or not moved.any():
        return attester.judge(keys, codes, digests(table, batch))
    still = np.flatnonzero(~moved)
    out = [(int(still[i]), message) for i, message in
           attester.judge([keys[i] for i in still.tolist()], codes[still],
                          digests(table, batch.take(still)))]
    rows = np.flatnonzero(moved)
    attester.mark([keys[i] for i in rows.tolist()], codes[rows])
    unit = codes[rows]
    statuses = batch.column("status").take(rows).combine_chunks()
    moved_to = units.move_level[unit]
    seqs = units.write_seq[unit]
    off = ~np.asarray(pc.fill_null(pc.equal(statuses, pa.array(units.levels, pa.string())
                                            .take(pa.array(moved_to))), False)
                      .to_numpy(zero_copy_only=False), dtype=bool)
    deleted = ~_valid(units.digest.take(pa.array(unit)))
    wrong = off | (seqs < 0) | deleted
    for j in np.flatnonzero(wrong).tolist():
        if off[j]:
            out.append((int(rows[j]), f"status {statuses[j].as_py()!r} is not what transition "
                                      f"{int(units.move_seq[unit[j]])} moved it to "
                                      f"({units.levels[moved_to[j]]!r})"))
        elif seqs[j] < 0:
            out.append((int(rows[j]), "no transition wrote this"))
        else:
            out.append((int(rows[j]), f"transition {int(seqs[j])} deleted this, but it is stored"))
    rest = np.flatnonzero(~wrong)  # hashed again, the rows of one first level together
    firsts = units.move_first[unit[rest]]
    for first in np.unique(firsts).tolist():
        picked = rest[firsts == first]
        at = rows[picked]
        left = _unwritten(attester, table, batch.take(at), units.levels[first],
                          units.digest.take(pa.array(unit[picked])))
        out += [(int(at[i]), f"differs from what transition {int(seqs[picked[i]])} wrote")
                for i in left.tolist()]
    return sorted(out, key=lambda found: found[0])


def _flags(values: Any) -> np.ndarray:
    """True where a boolean column is (null is False: a comparison with a null is no match)."""
    return np.asarray(pc.fill_null(values, False).to_numpy(zero_copy_only=False), dtype=bool)


def _valid(values: Any) -> np.ndarray:
    return np.asarray(values.is_valid().to_numpy(zero_copy_only=False), dtype=bool)


def _unwritten(attester: "UnitAttester", table: str, moved: pa.Table, first: str,
               expected: pa.Array) -> np.ndarray:
    """The moved rows of a batch (`moved`, written with digests `expected`) that hash to
    their digest with none of the statuses they can have been written with
    (`Attester._written_with`, a status at a time)."""
    statuses = attester.statuses.get((table, first)) or \
        tuple(status for status in attest.LADDER[table] if status != first)
    column = moved.column_names.index("status")
    left = np.arange(moved.num_rows)
    for status in statuses:
        if not len(left):
            break
        rows = moved.take(left)
        rows = rows.set_column(column, "status", pa.array([status] * len(left), pa.string()))
        same = np.asarray(pc.fill_null(pc.equal(digests(table, rows), expected.take(left)), False)
                          .to_numpy(zero_copy_only=False), dtype=bool)
        if same.any() and status != statuses[0]:
            attester.statuses[(table, first)] = (status, *(s for s in statuses if s != status))
        left = left[~same]
    return left


def digests(table: str, batch: pa.Table) -> pa.Array:
    """`attest.row_hash` of each row of an Arrow batch of a table: a column at a time
    (gem/rowhash.py), the rows it leaves one by one."""
    digests = hash_batch(table, batch)
    if digests is None:
        return pa.array([hasher(table)(row) for row in batch_rows(batch)], pa.string())
    alone = [i for i, digest in enumerate(digests) if digest is None]
    if alone:  # (a batch of them: a row taken from Arrow on its own costs ~20 us)
        for i, row in zip(alone, batch_rows(batch.take(alone))):
            digests[i] = hasher(table)(row)
    return pa.array(digests, pa.string())


def attest_table(tx: Any, table: str, attester: "UnitAttester", done: int,
                 progress: Progress | None) -> int:
    """Every stored row of a table against its last writer (an entry hashed with its history
    is not hashed again), and the stored salience columns against the log: `audit._attest`'s part
    for one table of the full audit, read as Arrow batches. Returns the rows read so far."""
    found, units = attester.found, attester.units
    salient = table in ("Topic", "Field", "Episode")
    for batch in read_ahead(row_batches(tx, table)):
        keys = column_values(batch, "id")
        codes = units.codes(keys, batch.column("id"))
        if table == "Entry":  # hashed with its history; in no history, hashed here
            fresh = attester.fresh(keys, codes)
            done += batch.num_rows - len(fresh)
            batch, codes, keys = batch.take(fresh), codes[fresh], [keys[i] for i in fresh.tolist()]
        checked = check_batch(attester, table, batch, keys, codes)
        if salient:
            found += _salience_checked(keys, codes, checked, units, batch)
        else:
            found += [("state", keys[i], text) for i, text in checked]
        if progress is not None and (done + batch.num_rows) // 10_000 > done // 10_000:
            progress("audit rows", done + batch.num_rows, 0)
        done += batch.num_rows
    return done


def _salience_checked(keys: list[str], codes: np.ndarray, checked: list[tuple[int, str]],
                      units: "LogUnits", batch: pa.Table) -> list[tuple[str, str | None, str]]:
    """The `checked` messages of a batch's rows, each row's followed by its stored salience
    columns against what the log says."""
    unit = codes
    expected = units.sal_seq[unit] >= 0
    rows = np.flatnonzero(expected)
    at = pa.array(unit[rows])
    strengths = batch.column("strength").take(rows).combine_chunks() if len(rows) else \
        pa.array([], pa.float64())
    want = units.sal_strength.take(at)
    same = np.asarray(pc.fill_null(pc.equal(strengths, want), False)
                      .to_numpy(zero_copy_only=False), dtype=bool)
    same |= ~_valid(strengths) & ~_valid(want)
    accessed = batch.column("last_access").take(rows).combine_chunks() if len(rows) else \
        pa.array([], pa.timestamp("us"))
    texts = _iso_texts(accessed)
    wanted = units.sal_at.take(at)
    same &= np.asarray(pc.fill_null(pc.equal(texts, wanted), False)
                       .to_numpy(zero_copy_only=False), dtype=bool) | (~_valid(texts) & ~_valid(wanted))
    odd = [j for j, u in enumerate(unit[rows].tolist()) if u in units.sal_odd]
    wrong = set(np.flatnonzero(~same).tolist()) - set(odd)
    stored_of = {}
    if wrong or odd:
        picked = sorted(wrong | set(odd))
        sub = batch.take(rows[picked])
        stored_of = {j: [s, isoformat(a) if a is not None else None] for j, s, a in zip(
            picked, column_values(sub, "strength"), column_values(sub, "last_access"))}
    messages: list[tuple[int, int, str]] = [(i, 0, text) for i, text in checked]
    for j, stored in stored_of.items():
        u = int(unit[rows[j]])
        value = units.sal_odd[u] if u in units.sal_odd else \
            [units.sal_strength[u].as_py(), units.sal_at[u].as_py()]
        if value != stored:
            messages.append((int(rows[j]), 1, f"stored salience {stored} is not what the log "
                                              f"says ({value}, transition {int(units.sal_seq[u])})"))
    return [("state", keys[i], text) for i, _, text in sorted(messages)]


def _iso_texts(times: pa.Array) -> pa.Array:
    """`isoformat` of each time (aware UTC), made once per distinct time."""
    coded = pc.dictionary_encode(times.cast(pa.timestamp("us")))
    utc = timezone.utc
    made = [None if t is None else isoformat(t.replace(tzinfo=utc))
            for t in coded.dictionary.to_pylist()]
    return pc.take(pa.array(made, pa.string()), coded.indices)
