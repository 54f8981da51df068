"""What the log commits to: the content of every row a transition wrote, and its own parts.

Tamper evidence. Each log record carries, in its `writes` part, the content hash of every row
the transition wrote (entries, observations, fields, topics, flags, episodes, edges, stored policies and
the policy files; null for a row it deleted). The record's content parts (units, policies,
detail, salience, writes) are committed to by one salted hash, `commit`, and the hash chain
runs over the record's metadata, counters and that commitment. So the audit can recompute
every stored row's hash and compare it with what the last transition that wrote it attested,
and a part can be redacted (erasure) while the chain still verifies: the commitment stays, the
content and the salt go, and the erasure's tombstone names the redacted record.

Salience columns are not part of a row's hash: they are written behind (gem/derived/); the
log's salience part is what they are checked against.

A move down the forgetting ladder that changes only a unit's status (most of a forgetting
pass: 1M fields at 100k topics) is attested by the record's `detail.attenuated`, which names
every unit moved and its level, not by hashing the row again: the row's other columns are
still what the last record that wrote it attested, with the status it had then (one of
`LADDER[table]`, found by trying them; a hash matches one at most). So the audit checks the
stored status against the last move and the rest of the row against the last hash.
"""
from __future__ import annotations

import hashlib
import os
from typing import Any

from .store.schema import EDGE_TABLES, Row
from .units import dumps

PARTS = ("units", "policies", "detail", "salience", "writes")
WRITTEN_BEHIND = frozenset({"strength", "last_access"})
# Columns added to the schema after rows were first attested (gem/store/queries/log.py
# `add_missing_columns`): a row written before one existed reads it back empty ([] or null), so
# an empty value is left out of the hash and the rows of an older database still match what
# its log attests.
ADDED_LATER = ("labels", "reason", "cleared_by", "cited_by", "contradicted_by")
# Places (gem/places.py) came later too; only null is left out: 0.0 is a latitude.
PLACE_COLUMNS = ("place_lat", "place_lon", "place_name")
# The statuses a unit of each table can have, the ladder's levels among them ("active" first:
# the status most rows were written in).
LADDER = {"Topic": ("active", "archived"), "Field": ("active", "compressed", "hidden"),
          "Episode": ("active", "hidden")}


def row_hash(table: str, row: Row) -> str:
    """The content hash of a stored row (salience columns excepted: written behind)."""
    body = {k: v for k, v in row.items() if k not in WRITTEN_BEHIND} \
        if table in ("Topic", "Field", "Episode") else dict(row)
    for column in ADDED_LATER:
        if column in body and not body[column]:
            del body[column]
    for column in PLACE_COLUMNS:
        if column in body and body[column] is None:
            del body[column]
    return hashlib.sha256(f"{table}\n{dumps(body)}".encode("utf-8")).hexdigest()[:32]


def ladder_attested(table: str, key: str, props: Row, levels: dict[str, str]) -> bool:
    """Whether a transition's update of a row is attested by its record's ladder moves
    (`levels`: unit -> the last level it moved to) instead of the row's hash: it changed the
    status alone, to that level."""
    return table in LADDER and len(props) == 1 and levels.get(key, "") == props.get("status")


def edge_key(table: str, source: str, target: str) -> str:
    return f"{table}|{source}|{target}"


def edge_hash(table: str, props: Row) -> str:
    return hashlib.sha256(f"{table}\n{dumps(props)}".encode("utf-8")).hexdigest()[:32]


def text_hash(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:32]


def new_salt() -> str:
    return os.urandom(16).hex()


def commitment(salt: str, parts: dict[str, Any]) -> str:
    """The salted hash of a record's content parts."""
    return commitment_of_texts(salt, {name: dumps(parts[name]) for name in PARTS})


def commitment_of_texts(salt: str, texts: dict[str, str]) -> str:
    """commitment() from the parts' canonical texts, as the log stores them: the canonical
    text of the record {part: value} is its parts' texts under their names, in name order,
    so the parts (a forgetting pass's `writes` holds 100k hashes) are encoded once, not twice."""
    body = ",".join(f"{_KEY[name]}:{texts[name]}" for name in sorted(PARTS))
    return hashlib.sha256(f"{salt}\n{{{body}}}".encode("utf-8")).hexdigest()


_KEY = {name: dumps(name) for name in PARTS}


EDGE_KINDS = tuple(EDGE_TABLES.values())
