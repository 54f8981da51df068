"""References to units of the state, as policies and conditions see them.

Small and hashable on purpose: a policy binding or a touched-unit set holds these,
never live rows, so what a condition reads always comes from the proposed state.
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any


class TopicId(str):
    """A topic named by its id ("t3") rather than by its title. Titles and ids never share a
    namespace: `mem.inspect("t3")` looks for a topic titled "t3", and
    `mem.inspect(gem.TopicId("t3"))` for the topic whose id is t3."""

    __slots__ = ()

    def __repr__(self) -> str:
        return f"TopicId({str.__repr__(self)})"


@dataclass(frozen=True)
class TopicRef:
    id: str

    def __str__(self) -> str:
        return f"topic {self.id}"


@dataclass(frozen=True)
class FieldRef:
    id: str
    topic_id: str
    name: str

    def __str__(self) -> str:
        return f"field {self.topic_id}.{self.name}"


@dataclass(frozen=True)
class EntryRef:
    id: str
    field_id: str

    def __str__(self) -> str:
        return f"entry {self.id}"


@dataclass(frozen=True)
class EpisodeRef:
    id: str

    def __str__(self) -> str:
        return f"episode {self.id}"


EPISODE_PREFIX = "ep"


def is_episode(key: str) -> bool:
    """Is this unit key an episode's ("ep<n>", after its scope's prefix: "acme:ep3")?"""
    return "/" not in key and key.rsplit(":", 1)[-1].startswith(EPISODE_PREFIX)


def unit_table(key: str) -> str:
    """The table of a unit named by its key: fields are "<topic>/<name>", episodes "ep<n>"
    (both after the scope's prefix)."""
    if "/" in key:
        return "Field"
    return "Episode" if is_episode(key) else "Topic"


@dataclass(frozen=True)
class EdgeRef:
    kind: str          # extension | association | derived
    source: str
    target: str

    def __str__(self) -> str:
        return f"{self.kind} edge {self.source}->{self.target}"


def field_id(topic_id: str, name: str) -> str:
    """Field ids are derived, so a field is found by primary key without a traversal."""
    return f"{topic_id}/{name}"


def dumps(value: Any) -> str:
    """Canonical JSON: how values, evidence and log records are stored and compared."""
    if _C_CANONICAL is None:
        return _CANONICAL.encode(value)
    return "".join(_C_CANONICAL(value, 0))


def _json_default(value: Any) -> Any:
    if isinstance(value, datetime):
        return _isoformat(value)
    if isinstance(value, timedelta):
        return value.total_seconds()
    if isinstance(value, (TopicRef, EntryRef, EpisodeRef)):
        return value.id
    if isinstance(value, FieldRef):
        return value.name
    if isinstance(value, EdgeRef):
        return {"kind": value.kind, "source": value.source, "target": value.target}
    if isinstance(value, (set, frozenset)):
        return sorted(value, key=str)
    if isinstance(value, tuple):
        return list(value)
    return str(value)


def _isoformat(value: datetime) -> str:
    """value.isoformat(), remembered for the last few thousand values: the rows a transition
    writes share a handful of times (its clock, the times of the facts it was given), and an
    aware datetime's isoformat costs more than the rest of encoding its row's column. Equal
    aware datetimes with the same tzinfo can still differ in fold (the repeated hour of a DST
    change: same wall time, another offset), so tzinfo and fold are checked too."""
    known = _ISO.get(value)
    if known is not None and known[0] is value.tzinfo and known[1] == value.fold:
        return known[2]
    text = value.isoformat()
    if len(_ISO) >= _ISO_SIZE:
        _ISO.clear()
    _ISO[value] = (value.tzinfo, value.fold, text)
    return text


_ISO: dict[datetime, tuple[Any, int, str]] = {}
_ISO_SIZE = 4096


# json.dumps with these options builds an encoder per call: a fifth of the cost of hashing a
# row (a forgetting pass hashes 100k) for nothing. Same options, same text.
_CANONICAL = json.JSONEncoder(sort_keys=True, default=_json_default, separators=(",", ":"))
# JSONEncoder.encode still makes its C encoder on every call (json/encoder.py `iterencode`):
# made once here, with the same options (no circular-reference check: gem encodes no cycles),
# a row hashes in ~2/3 of the time (the audit hashes 1.1M entries at 100k topics).
_make_encoder = getattr(json.encoder, "c_make_encoder", None)
_C_CANONICAL = None if _make_encoder is None else _make_encoder(
    None, _json_default, json.encoder.encode_basestring_ascii, None, ":", ",", True, False, True)
