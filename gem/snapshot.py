"""The derived state, saved beside the database so that opening does not rebuild it.

    <database>.gem-derived/
        meta.json                  the stamp: log position and hash it reflects, embedder, files
        state-<gen>.json           pending salience, the last clean audit, the log head's time,
                                   and per scope: names, stale topics and units, flags,
                                   counters, field labels
        tables-<scope>-<gen>.npz   salience columns of every topic, field and episode of a scope,
                                   the log records that touched each topic, the summaries
        lexical-<scope>-<gen>.snap the BM25 index over a scope's summaries    (gem/index/lexical.py)
        vectors-<scope>-<gen>.snap the vector index over a scope's summaries  (gem/index/vector.py)
        titles-<scope>-<gen>.snap  the title vectors the resolver matches     (gem/index/vector.py)
        units-<scope>-<gen>.snap   the BM25 index over a scope's units (fields, episodes)
        unitvec-<scope>-<gen>.snap the vector index over a scope's units
        unitdocs-<scope>-<gen>.snap  the units' documents and valid times

Opening reads the state file, the tables and the two vector indexes, and keeps what it need
not use as it read it (gem/derived: packed ids, the names' JSON text, the touched-by columns,
the summaries' BM25 file unread) until first used; a save writes what was never used back as
it was read. The three unit files are read when the unit layer is first used, not at open
(at 100k topics they are 1M documents and vectors: most of the bytes), and a save whose unit
layer did not change since they were written or read keeps them (they carry the stamp of the generation that
wrote them, which `meta.json` records); if they turn out unusable, only the unit layer is
derived again from the database.

Files of a new generation are written (and synced) first, then `meta.json` is replaced
atomically, then the old generation is removed: a crash at any point leaves a `meta.json` that
names a complete set. Nothing here is trusted over the database: `load` accepts a snapshot only
when the log record at its position still carries its hash, catches up from the log records
after it (re-deriving the units they touched), and anything unusable (missing, torn, foreign,
corrupted, of another embedder) means a rebuild from the database. No pickle: JSON and numpy
arrays only.
"""
from __future__ import annotations

import json
import os
from array import array
import shutil
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any

import numpy as np

from .collector import paused_gc
from .derived import (DerivedState, NameDirectory, Progress, SalienceTable, ScopeState, UnitIndexes,
                      scope_of, snapshot_dir)
from .derived.summaries import Summaries
from .derived.unit_columns import UnitColumns
from .errors import SnapshotError
from .index import (LexicalIndex, VectorIndex, encode_strings, read_snapshot_file, snapshot_strings,
                    write_snapshot_file)
from .store import GraphStore, queries
from .text import name_key
from .units import is_episode, unit_table

if TYPE_CHECKING:
    from .embed import Embedder

# 1: one state per scope; 2 (an earlier layout, without scopes): the log head's time and field
# labels, or (another branch) episodes and the unit indexes; 3: per scope, with the log head's
# time and each scope's field labels; 4: per scope, with episodes and the unit indexes (issue
# 10); 5: the unit layer in its own files, read lazily; 6: each name with its canonical key;
# 7: without each topic's field list (derived from the field table; a format-6 snapshot's is
# ignored, so one is still read); 8: the tables' ids as UTF-8 and offsets, not numpy's
# fixed-width UTF-32 (at 10k topics 5.6 of its 9.5 MB), and their narrow columns in 32 bits;
# 9: each scope's names as one JSON text in the state's JSON, parsed when first used (at 30k
# topics 0.1 s of an open), and no zero open-flag counts; 10: beside each table of ids, their
# hash keys (gem/index/packed.py: a row found without decoding the ids), and the unit documents
# by the unit lexical index's rows (a 9's unit files are written again by the next save);
# 11: the summaries in the tables, packed (gem/derived/summaries.py), not in the state's JSON.
# A snapshot of any other format is rebuilt from the database, never read.
FORMAT = 11
READS = (6, 7, 8, 9, 10, 11)
UNIT_FILES = (("units", "snap"), ("unitvec", "snap"), ("unitdocs", "snap"))


def save(state: DerivedState, db_path: str) -> None:
    """Write `state` beside the database at `db_path`."""
    folder = snapshot_dir(db_path)
    os.makedirs(folder, exist_ok=True)
    previous = _meta(folder)
    gen = (previous or {}).get("generation", 0) + 1
    stamp = {"seq": state.seq, "hash": state.hash, "embedder": state.embedder.name}
    scopes = {name: s for name, s in sorted(state.scopes.items()) if len(s.topics) or s.counters}
    files: dict[str, Any] = {"state": f"state-{gen}.json", "scopes": {}}
    body: dict[str, Any] = {"salience_seq": state.salience_seq,
                            "audit_checkpoint": state.audit_checkpoint,
                            "at": None if state.at is None else state.at.isoformat(),
                            "scopes": {}}
    for name, scope in scopes.items():
        files["scopes"][name] = {kind: f"{kind}-{name}-{gen}.{ext}" for kind, ext in
                                 (("tables", "npz"), ("lexical", "snap"), ("vectors", "snap"),
                                  ("titles", "snap"))}
        body["scopes"][name] = {
            # each name with its canonical key: open then builds the directory without
            # normalising 100k names again (0.1 s of a 1.1 s open at 100k topics)
            "names": scope.names.saved(),
            "stale": list(scope.stale),
            # topics without open flags are most: absent means none
            "open_flags": {tid: n for tid, n in scope.open_flags.items() if n},
            "counters": scope.counters,
            "field_labels": scope.field_labels,
            "unpaired": list(scope.unpaired), "paired_at": scope.paired_at,
            "stale_units": list(scope.stale_units),
        }
        _save_scope(scope, folder, files["scopes"][name], stamp)
        saved = scope.saved_units
        if not isinstance(saved, UnitFiles) or saved.folder != folder:
            saved = _save_units(scope.units(), folder, {kind: f"{kind}-{name}-{gen}.{ext}"
                                                        for kind, ext in UNIT_FILES}, stamp)
        files["scopes"][name].update(saved.files, unit_stamp=saved.stamp)
        scope.saved_units = saved
    _write(os.path.join(folder, files["state"]), json.dumps(body).encode("utf-8"))
    meta = {"format": FORMAT, **stamp, "generation": gen, "files": files}
    _write(os.path.join(folder, "meta.json"), json.dumps(meta).encode("utf-8"))
    state.saved_mark = state.mark()
    keep = {"meta.json", files["state"]} | {f for scope in files["scopes"].values()
                                           for kind, f in scope.items() if kind != "unit_stamp"}
    for name in os.listdir(folder):
        if name not in keep:
            path = os.path.join(folder, name)
            shutil.rmtree(path) if os.path.isdir(path) else os.remove(path)


def _save_scope(scope: ScopeState, folder: str, files: dict[str, str], stamp: dict[str, Any]) -> None:
    arrays: dict[str, np.ndarray] = {}
    for kind, table in (("topics", scope.topics), ("fields", scope.fields),
                        ("episodes", scope.episodes)):
        n = len(table)
        arrays[f"{kind}_ids_utf8"], arrays[f"{kind}_ids_offsets"], arrays[f"{kind}_ids_keys"] = \
            table.packed_ids()
        arrays[f"{kind}_strength"] = table.strength[:n]
        arrays[f"{kind}_last"] = table.last[:n]
        arrays[f"{kind}_status"] = table.status[:n]
        arrays[f"{kind}_owner"] = _narrow(table.owner[:n])
    arrays.update(scope.summaries.arrays())
    packed = scope.touched_packed
    if isinstance(packed, Touches) and not scope.touched_later:  # unused since read: as it was
        arrays.update(packed.arrays)
    else:
        touched = sorted(scope.touched_by.items())
        arrays["touched_ids_utf8"], arrays["touched_ids_offsets"] = encode_strings(
            [tid for tid, _ in touched])
        arrays["touched_offsets"] = _narrow(np.cumsum([0] + [len(seqs) for _, seqs in touched]))
        arrays["touched_seqs"] = _narrow(np.concatenate([np.frombuffer(seqs, dtype=np.int64)
                                                         for _, seqs in touched])) \
            if touched else np.zeros(0, dtype=np.int32)
    tmp = os.path.join(folder, files["tables"] + ".tmp")
    with open(tmp, "wb") as f:
        np.savez(f, allow_pickle=False, **arrays)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, os.path.join(folder, files["tables"]))
    scope.lexical.save(os.path.join(folder, files["lexical"]), stamp)
    scope.vectors.save(os.path.join(folder, files["vectors"]), stamp)
    scope.title_vectors.save(os.path.join(folder, files["titles"]), stamp)


def _narrow(values: np.ndarray) -> np.ndarray:
    """int64 values as int32 when they fit (row numbers, log positions: half the bytes)."""
    fits = not len(values) or (values.min() >= -2**31 and values.max() < 2**31)
    return values.astype(np.int32 if fits else np.int64)


def _ids(arrays: dict[str, np.ndarray], name: str) -> list[str]:
    """A column of ids: UTF-8 and offsets (format 8), or numpy's fixed-width strings."""
    if f"{name}_utf8" in arrays:
        return snapshot_strings(arrays, name)
    ids: list[str] = arrays[name].tolist()
    return ids


@dataclass(frozen=True)
class SavedLexical:
    """A scope's BM25 index over its summaries, in its snapshot file: read when first used
    (`ScopeState.lexical`): at 100k topics' summaries, ~0.5 s an open need not spend."""

    path: str
    stamp: dict[str, Any]

    def load(self) -> LexicalIndex:
        lexical, stamp = LexicalIndex.load(self.path)
        if stamp != self.stamp:
            raise SnapshotError(f"{self.path!r} is of another generation of the snapshot")
        return lexical


@dataclass(frozen=True)
class Touches:
    """A scope's touched-by columns as a snapshot holds them: each topic's log records, read
    into a dict of arrays when first used (`ScopeState.touched_by`)."""

    arrays: dict[str, np.ndarray]

    @classmethod
    def of(cls, tables: dict[str, np.ndarray]) -> "Touches":
        names = ("touched_offsets", "touched_seqs",
                 *(("touched_ids_utf8", "touched_ids_offsets") if "touched_ids_utf8" in tables
                   else ("touched_ids",)))
        arrays = {name: tables[name] for name in names}
        n = arrays["touched_ids_offsets"].shape[0] - 1 if "touched_ids_offsets" in arrays \
            else arrays["touched_ids"].shape[0]
        offsets, seqs = arrays["touched_offsets"], arrays["touched_seqs"]
        if offsets.shape != (n + 1,) or (n and offsets[-1] != seqs.shape[0]):
            raise ValueError("the touched-by columns disagree")
        return cls(arrays)

    def build(self) -> dict[str, array]:
        ids = _ids(self.arrays, "touched_ids")
        packed = self.arrays["touched_seqs"].astype("<i8").tobytes()
        bounds = (self.arrays["touched_offsets"].astype(np.int64) * 8).tolist()
        touched: dict[str, array] = {}
        for i, tid in enumerate(ids):
            touched[tid] = seqs_of = array("q")
            seqs_of.frombytes(packed[bounds[i]:bounds[i + 1]])
        return touched


@dataclass(frozen=True)
class UnitFiles:
    """A scope's unit layer as saved: the files, and the stamp they were written with."""

    folder: str
    files: dict[str, str]
    stamp: dict[str, Any]

    def load(self, embedder: "Embedder") -> UnitIndexes:
        units = UnitIndexes(embedder)
        path = {kind: os.path.join(self.folder, f) for kind, f in self.files.items()}
        try:
            units.lexical, s1 = LexicalIndex.load(path["units"])
            units.vectors, s2 = VectorIndex.load(path["unitvec"])
            s3, meta, arrays = read_snapshot_file(path["unitdocs"], "unitdocs")
            if not s1 == s2 == s3 == self.stamp or units.vectors.dim != embedder.dim:
                raise SnapshotError("the snapshot's unit files are of different generations")
            units.columns = UnitColumns(units.lexical)
            if meta.get("by") == "row":  # by the lexical index's rows, decoded when read
                units.columns.load_by_row(arrays, f"unit documents {path['unitdocs']!r}")
            else:
                ids, docs = snapshot_strings(arrays, "ids"), snapshot_strings(arrays, "docs")
                units.columns.load(ids, docs, arrays["valid"])
                units.outdated = True
        except (KeyError, ValueError, TypeError) as exc:
            raise SnapshotError(f"the unit files in {self.folder!r} are unusable: {exc}") from exc
        return units


def _save_units(units: UnitIndexes, folder: str, files: dict[str, str],
                stamp: dict[str, Any]) -> UnitFiles:
    units.lexical.save(os.path.join(folder, files["units"]), stamp)
    units.vectors.save(os.path.join(folder, files["unitvec"]), stamp)
    # by the rows of the unit lexical index, which the units file holds: a reader needs no
    # unit ids here, and decodes a document when it reads it
    write_snapshot_file(os.path.join(folder, files["unitdocs"]), "unitdocs", stamp, {"by": "row"},
                        units.columns.by_row())
    return UnitFiles(folder, files, dict(stamp))


def load(store: GraphStore, embedder: "Embedder", progress: Progress | None = None) -> DerivedState:
    """The derived state from the snapshot beside the database, caught up with the log; a
    rebuild from the database when there is no usable snapshot."""
    if not store.keeps_snapshot:
        return DerivedState.rebuild(store, embedder, progress)
    with paused_gc():
        try:
            state = _read(store.path, embedder)
        except SnapshotError:
            return DerivedState.rebuild(store, embedder, progress)
        with store.reading() as tx:
            anchor = queries.record_hash(tx, state.seq) if state.seq else None
            head_seq = queries.log_head(tx)
        if state.seq > head_seq or (state.seq and anchor != state.hash):
            return DerivedState.rebuild(store, embedder, progress)  # not this database's history
        saved = state.seq
        catch_up(state, store, progress)
    if state.seq == saved:  # nothing after it: the snapshot on disk still describes the state
        state.saved_mark = state.mark()
    return state


def _read(db_path: str, embedder: "Embedder") -> DerivedState:
    folder = snapshot_dir(db_path)
    meta = _meta(folder)
    if meta is None or meta.get("format") not in READS or meta.get("embedder") != embedder.name:
        raise SnapshotError(f"no usable snapshot in {folder!r}")
    files = meta["files"]
    try:
        with open(os.path.join(folder, files["state"]), "rb") as f:
            body = json.loads(f.read().decode("utf-8"))
        stamp = {"seq": meta["seq"], "hash": meta["hash"], "embedder": meta["embedder"]}
        state = DerivedState(embedder)
        state.seq, state.hash = int(meta["seq"]), str(meta["hash"])
        state.salience_seq = int(body["salience_seq"])
        state.at = None if body["at"] is None else datetime.fromisoformat(body["at"])
        checkpoint = body["audit_checkpoint"]
        state.audit_checkpoint = None if checkpoint is None else (int(checkpoint[0]), str(checkpoint[1]))
        if set(body["scopes"]) != set(files["scopes"]):
            raise SnapshotError("the snapshot's scopes and files disagree")
        for name, part in body["scopes"].items():
            _read_scope(state.scope(name), part, folder, files["scopes"][name], stamp)
    except SnapshotError:
        raise
    except (OSError, KeyError, ValueError, TypeError, IndexError, AttributeError) as exc:
        raise SnapshotError(f"snapshot in {folder!r} is unusable: {exc}") from exc
    return state


def _read_scope(scope: ScopeState, part: dict[str, Any], folder: str, files: dict[str, str],
                stamp: dict[str, Any]) -> None:
    with np.load(os.path.join(folder, files["tables"]), allow_pickle=False) as arrays:
        tables = {k: arrays[k] for k in arrays.files}
    vectors, s2 = VectorIndex.load(os.path.join(folder, files["vectors"]))
    titles, s3 = VectorIndex.load(os.path.join(folder, files["titles"]))
    dim = scope.embedder.dim
    if not s2 == s3 == stamp or any(ix.dim != dim for ix in (vectors, titles)):
        raise SnapshotError("the snapshot's files are of different generations")
    scope.vectors, scope.title_vectors = vectors, titles
    scope.lexical_from(SavedLexical(os.path.join(folder, files["lexical"]), dict(stamp)))
    unit_stamp = files["unit_stamp"]
    if not isinstance(unit_stamp, dict) or int(unit_stamp["seq"]) > int(stamp["seq"]):
        raise SnapshotError("the snapshot's unit files are newer than its state")
    scope._units = None
    scope.saved_units = UnitFiles(folder, {kind: str(files[kind]) for kind, _ in UNIT_FILES},
                                  unit_stamp)
    scope.stale_units = dict.fromkeys(part["stale_units"])
    # What json.loads built is used as it is (fresh lists and dicts of str), not copied.
    scope.names = NameDirectory.deferred(part["names"])
    # before format 11 in the state's JSON
    scope.summaries = Summaries(part["summaries"]) if "summaries" in part else \
        Summaries.packed(tables, f"the summaries in {files['tables']!r}")
    scope.stale = dict.fromkeys(part["stale"])
    scope.open_flags = {k: int(v) for k, v in part["open_flags"].items()}
    scope.counters = {k: int(v) for k, v in part["counters"].items()}
    scope.field_labels = {k: tuple(v) for k, v in part["field_labels"].items()}
    scope.topics = _table(tables, "topics", SalienceTable(scope.topics.names))
    scope.fields = _table(tables, "fields", SalienceTable(scope.fields.names))
    scope.episodes = _table(tables, "episodes", SalienceTable(scope.episodes.names))
    scope.derive_fields_by_topic()
    scope.unpaired = dict.fromkeys(part["unpaired"])
    scope.touched_from(Touches.of(tables))
    scope.paired_at = None if part["paired_at"] is None else float(part["paired_at"])


def _table(arrays: dict[str, np.ndarray], kind: str, table: SalienceTable) -> SalienceTable:
    if f"{kind}_ids_utf8" in arrays:  # decoded when first asked for
        table.adopt_packed(arrays[f"{kind}_ids_utf8"], arrays[f"{kind}_ids_offsets"],
                           arrays.get(f"{kind}_ids_keys"))
    else:
        table.adopt(_ids(arrays, f"{kind}_ids"))
    n = len(table)
    cap = max(64, n)
    for name, dtype, fill in (("strength", np.float64, 0), ("last", np.float64, 0),
                              ("status", np.int8, 0), ("owner", np.int32, -1)):
        column = np.full(cap, fill, dtype=dtype)
        values = arrays[f"{kind}_{name}"]
        if values.shape != (n,):
            raise ValueError(f"{kind} column {name} has {values.shape}, not ({n},)")
        column[:n] = values
        setattr(table, name, column)
    return table


def catch_up(state: DerivedState, store: GraphStore, progress: Progress | None = None, *,
             live: bool = False) -> None:
    """Bring a state up to the log's head: the salience behind the stored columns is replayed,
    and every unit a later transition touched is derived again from the database (the units
    it deleted are forgotten). A loaded snapshot replays the salience from the stored columns'
    position; a `live` state (exact at its position: a process following the commits of
    others on a shared store) keeps what it has pending unless the stored columns moved past
    it, and reads only the records after its position."""
    with store.reading() as tx:
        stored_salience = int(queries.meta_get(tx, "salience_seq") or 0)
        start = state.seq if live else min(state.seq, stored_salience)
        records = queries.transitions(tx, start)
        if not live or stored_salience > state.seq:
            state.pending_salience = {}
        state.salience_seq = stored_salience
        for record in records:
            if record["seq"] > stored_salience:
                for key, (strength, last) in json.loads(record["salience"] or "{}").items():  # "": redacted
                    state.pending_salience[key] = (unit_table(key), strength,
                                                   datetime.fromisoformat(last))
            for key, digest in json.loads(record["writes"] or "{}").items():
                if digest is None:  # deleted (erasure): nothing of it is pending any more
                    state.pending_salience.pop(key, None)
        later = [r for r in records if r["seq"] > state.seq]
        units = {u for r in later for u in json.loads(r["units"] or "[]")}
        # A later record's salience part names what it reinforced: re-read even when the
        # stored columns already have it (another process wrote them behind).
        reinforced = {k for r in later for k in json.loads(r["salience"] or "{}")}
        keys = units | reinforced | set(state.pending_salience)
        eids = sorted(u for u in keys if unit_table(u) == "Episode")
        tids = sorted({u.split("/", 1)[0] for u in keys if unit_table(u) != "Episode"})
        fids = sorted(u for u in keys if "/" in u)
        topics = queries.read_rows(tx, "Topic", tids) if tids else []
        fields = queries.read_rows(tx, "Field", fids) if fids else []
        episodes = queries.read_rows(tx, "Episode", eids) if eids else []
        flags = [(parent, g) for parent, g in queries.read_children(tx, "FLAGS", tids)] if tids else []
        # which topics have typed edges is not saved: one scan of the edges finds them
        edge_holders = queries.edge_holders(tx) if later or not live else None
    for row in topics:
        state.scope(row["scope"])._put_topic(state.patch("Topic", row))
    for name in dict.fromkeys(r["scope"] for r in topics):
        state.scope(name)._put_names([r for r in topics if r["scope"] == name], {})
    for row in fields:
        state.scope(scope_of(row["id"]))._put_field(state.patch("Field", row))
    for row in episodes:
        state.scope(row["scope"])._put_episode(state.patch("Episode", row))
    for r in later:  # their documents are derived again by the next reader
        for unit in json.loads(r["units"] or "[]"):
            scope = state.scope(scope_of(unit))
            if unit_table(unit) == "Topic":
                scope.stale_units.update(dict.fromkeys(scope.fields_of(unit)))
            else:
                scope.stale_units[unit] = None
    for tid in tids:
        state.scope(scope_of(tid)).open_flags[tid] = 0
    for parent, flag in flags:
        if flag["status"] == "open":
            state.scope(scope_of(parent)).open_flags[parent] += 1
    for r in later:
        if r["tombstone"]:  # the records an erasure redacted touch nothing any more
            redacted = set(json.loads(r["tombstone"]).get("redacted", []))
            for scope in state.scopes.values():
                for tid, seqs in list(scope.touched_by.items()):
                    if redacted.intersection(seqs):
                        scope.touched_by[tid] = array("q", [s for s in seqs if s not in redacted])
        for tid in {unit.split("/", 1)[0] for unit in json.loads(r["units"] or "[]")}:
            scope = state.scope(scope_of(tid))
            if unit_table(tid) == "Topic":
                scope.stale[tid] = None
            scope.touch(tid, r["seq"])
        state.scope(r["scope"]).counters = json.loads(r["counters"])
        state.scope(r["scope"])._active_fields = None
    # units a later transition erased are gone from the database: from here too (a field's
    # id comes back when its name is stated again: then it is found)
    found = {r["id"] for r in (*topics, *fields, *episodes)}
    gone = {u for u in (*tids, *fids, *eids) if u not in found}
    for r in later:
        gone.update(k for k, v in json.loads(r["writes"] or "{}").items() if v is None and "|" not in k)
    for unit in sorted(gone - found):
        scope = state.scope(scope_of(unit))
        if "/" in unit:
            scope.forget_units([], [unit])
        elif is_episode(unit):
            scope.forget_units([], [], [unit])
        elif unit.rsplit(":", 1)[-1].startswith("t"):
            scope.forget_units([unit], [])
    if edge_holders is not None:
        state.set_edge_holders(edge_holders)
    if later:
        state.seq, state.hash, state.at = later[-1]["seq"], later[-1]["hash"], later[-1]["at"]
    if progress is not None and later:
        progress("catch up from the log", len(later), len(later))


def _meta(folder: str) -> dict[str, Any] | None:
    try:
        with open(os.path.join(folder, "meta.json"), "rb") as f:
            meta = json.loads(f.read().decode("utf-8"))
    except (OSError, ValueError):
        return None
    return meta if isinstance(meta, dict) else None


def _write(path: str, data: bytes) -> None:
    tmp = path + ".tmp"
    with open(tmp, "wb") as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)
    dirfd = os.open(os.path.dirname(path), os.O_RDONLY)
    try:
        os.fsync(dirfd)
    finally:
        os.close(dirfd)
