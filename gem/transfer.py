"""`gem export` / `gem import`: a whole database as JSON Lines, and back into an empty one.

The file is a header line, one line per stored row or relationship (gem/store/dump.py), and
an end line:

    {"format": "gem-export", "version": 1, "schema": "2", "gem": "...", "engine": "kuzu",
     "exported_at": "...", "head": {"seq": 41, "hash": "..."}}
    {"table": "Topic", "row": {"id": "t1", "title": "Website Redesign", ...}}
    ...
    {"rel": "EXTENDS", "from": "t1", "to": "t2", "props": {...}}
    {"end": true, "records": 1234, "sha256": "<hash of every line between header and end>"}

It is lossless: topics, fields, entries with provenance, observations, edges, flags, the
stored policies, every scope, and the transition log with its hash chain and the content
hashes it attests. Derived state (indexes, summaries, salience tables) is not in it: it is
rebuilt from the rows. So an import is the same database, and the import proves it: it
runs the full audit (every row hash against the log, the chain, C1-C6) before the database
appears at its path. It is also how a database moves between engines (kuzu <-> ladybug).

Nothing partial is ever left at the target: the import builds the database beside it
(`<path>.importing`) and moves it into place only when it audits clean. A truncated or
edited file (the end line's count and hash), a row the schema does not know, or another
schema version is refused with `InvalidInput`, naming the line.
"""
from __future__ import annotations

import hashlib
import json
import os
import shutil
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import IO, Any, Iterator

from . import __version__
from .derived import Progress, snapshot_dir
from .errors import GemError, InvalidInput
from .store import compact, queries
from .store.dump import Loader, dump
from .store.graph import GraphStore, held_database, open_store
from .store.owner import head_file
from .store.schema import SCHEMA_VERSION

FORMAT, VERSION = "gem-export", 1
IMPORTING = ".importing"
PROGRESS_EVERY = 5000


@dataclass(frozen=True)
class TransferReport:
    """What an export wrote or an import loaded."""
    path: str
    records: int
    transitions: int
    head: dict[str, Any] | None
    sha256: str


def _line(record: dict[str, Any]) -> str:
    return json.dumps(record, ensure_ascii=False, separators=(",", ":"), sort_keys=True) + "\n"


def export_jsonl(store: GraphStore, dest: str | Path | IO[str],
                 progress: Progress | None = None) -> TransferReport:
    """Write the whole database (every scope) to `dest` (a path or a text stream). Read-only:
    it runs under the store's lock, so the file is one consistent state."""
    owned = isinstance(dest, (str, Path))
    if isinstance(dest, (str, Path)):
        _not_a_database_file(dest, "export into")
    out: IO[str] = open(dest, "w", encoding="utf-8") if isinstance(dest, (str, Path)) else dest
    digest = hashlib.sha256()
    records = 0
    try:
        with store.reading() as tx:
            last = queries.last_transition(tx)
            head = {"seq": last["seq"], "hash": last["hash"]} if last else None
            total = sum(queries.count(tx, t) for t in ("Topic", "Field", "Entry", "Observation",
                                                          "Flag", "Episode", "Transition"))
            out.write(_line({"format": FORMAT, "version": VERSION, "schema": SCHEMA_VERSION,
                             "gem": __version__, "engine": store.engine, "head": head,
                             "exported_at": datetime.now(timezone.utc).isoformat()}))
            for record in dump(tx):
                line = _line(record)
                digest.update(line.encode("utf-8"))
                out.write(line)
                records += 1
                if progress and records % PROGRESS_EVERY == 0:
                    progress("export", min(records, total), total)
        out.write(_line({"end": True, "records": records, "sha256": digest.hexdigest()}))
        if progress:
            progress("export", total, total)
    finally:
        if owned:
            out.close()
    where = str(dest) if owned else getattr(dest, "name", "<stream>")
    return TransferReport(where, records, head["seq"] if head else 0, head, digest.hexdigest())


def _not_a_database_file(path: str | Path, doing: str) -> None:
    held = held_database(path)
    if held is not None:
        raise InvalidInput(f"cannot {doing} {str(path)!r}: it is a file of the database "
                           f"{held!r}, open in this process")


def _lines(source: str | Path | IO[str]) -> Iterator[tuple[int, str]]:
    if isinstance(source, (str, Path)):
        _not_a_database_file(source, "import from")
        if not Path(source).is_file():
            raise InvalidInput(f"no export file at {str(source)!r}")
        with open(source, encoding="utf-8") as f:
            yield from enumerate(f, 1)
    else:
        yield from enumerate(source, 1)


def _parse(number: int, line: str) -> dict[str, Any]:
    try:
        record = json.loads(line)
    except json.JSONDecodeError as exc:
        raise InvalidInput(f"line {number}: not JSON ({exc.msg})") from None
    if not isinstance(record, dict):
        raise InvalidInput(f"line {number}: a record is a JSON object")
    return record


def _check_header(record: dict[str, Any]) -> dict[str, Any]:
    if record.get("format") != FORMAT:
        raise InvalidInput("line 1: not a gem export (the first line names format 'gem-export')")
    if record.get("version") != VERSION:
        raise InvalidInput(f"line 1: export format version {record.get('version')!r}; this gem "
                           f"reads version {VERSION}")
    if record.get("schema") != SCHEMA_VERSION:
        raise InvalidInput(f"line 1: an export of gem schema {record.get('schema')!r}; this gem "
                           f"reads schema {SCHEMA_VERSION}")
    return record


def target_is_empty(path: str, engine: str) -> None:
    """An import goes where no database is, or into one that holds nothing yet."""
    if held_database(path) is not None:
        raise InvalidInput(f"{path!r} is open in this process; import needs a database no "
                           "process has open (a new path)")
    if not os.path.exists(path):
        return
    try:
        store = open_store(path, engine)
    except GemError as exc:
        raise InvalidInput(f"{path!r} exists and is not a database gem can open: {exc}") from None
    try:
        with store.reading() as tx:
            held = queries.count(tx, "Transition") + queries.count(tx, "Topic")
    except GemError:
        held = 0  # no tables yet: an empty database
    finally:
        store.close()
    if held:
        raise InvalidInput(f"{path!r} already holds a memory; import needs an empty database "
                           "(a new path)")


def remove(path: str) -> None:
    """A database's files, its head record and its derived snapshot (no process has it open)."""
    compact._remove(path)
    if os.path.exists(head_file(path)):
        os.remove(head_file(path))
    shutil.rmtree(snapshot_dir(path), ignore_errors=True)


def load(source: str | Path | IO[str], building: str, engine: str,
         progress: Progress | None = None) -> tuple[dict[str, Any], int, str]:
    """Write an export's rows into a new database at `building`, checking the header, every
    record against the schema, and the end line's count and hash. Returns (header, records,
    sha256). The caller opens and audits the result before moving it into place."""
    lines = _lines(source)
    first = next(lines, None)
    if first is None:
        raise InvalidInput("the export is empty (no header line)")
    header = _check_header(_parse(*first))
    digest = hashlib.sha256()
    end: dict[str, Any] | None = None
    store = open_store(building, engine)
    try:
        with store.transaction() as tx:
            queries.create_tables(tx)
            loader = Loader(tx)
            for number, line in lines:
                if end is not None:
                    raise InvalidInput(f"line {number}: a record after the end line")
                record = _parse(number, line)
                if record.get("end") is True:
                    end = record
                    continue
                digest.update((line if line.endswith("\n") else line + "\n").encode("utf-8"))
                try:
                    loader.add(record)
                except (ValueError, TypeError) as exc:
                    raise InvalidInput(f"line {number}: {exc}") from None
                if progress and loader.count % PROGRESS_EVERY == 0:
                    progress("import", loader.count, 0)
            if end is None:
                raise InvalidInput("the export has no end line: it was cut short")
            if end.get("records") != loader.count or end.get("sha256") != digest.hexdigest():
                raise InvalidInput(f"the export's end line says {end.get('records')} records "
                                   f"with a hash that the {loader.count} records read do not "
                                   "match: the file was cut or edited")
            loader.flush()
    finally:
        store.close()
    return header, loader.count, digest.hexdigest()


def move_into_place(building: str, path: str) -> None:
    remove(path)  # an empty database (checked before the import began) or nothing
    compact._move(building, path)
    os.replace(head_file(building), head_file(path))  # the head the audited import ends at
    if os.path.isdir(snapshot_dir(building)):
        os.replace(snapshot_dir(building), snapshot_dir(path))


__all__ = ["export_jsonl", "load", "move_into_place", "remove", "target_is_empty",
           "TransferReport", "FORMAT", "VERSION", "IMPORTING"]
