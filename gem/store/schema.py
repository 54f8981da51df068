"""The schema of M_t = (D_t, S_t, P_t) plus the transition log, declared once.

Each node table is a TypedDict: the same declaration gives the DDL, the column tuples the
queries read and write, and the row type the rest of gem works with, so they cannot drift.
Relationships are declared below the tables.

What is stored is the state itself, nothing derivable: topic summaries and embeddings are
derived (by the summariser and the embedder, from titles and current values) and live in
gem's derived snapshot beside the database (gem/derived/). Before that change every update
rewrote the topic's 1.4 KB base64 embedding and its summary, ~9.7 KB per fact on Kuzu.

`tx` on entries, flags and edges is the sequence number of the transition that made them:
within one clock instant, times cannot order events, transition numbers can. An entry links
to the entry that superseded it by key (`superseded_by`, `superseded_tx`), not by a
relationship: on kuzu 0.11.3 creating a relationship between two existing nodes costs ~10x
more than creating a child together with its owning relationship. Entries are nodes, not a
JSON blob inside the topic, so every correctness condition can be checked with a query.
"""
from __future__ import annotations

import types
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, TypedDict, Union, get_args, get_origin, get_type_hints

SCHEMA_VERSION = "2"


class MetaRow(TypedDict):
    key: str
    value: str


class TopicRow(TypedDict):
    id: str
    seq: int
    title: str
    aliases: list[str]
    strength: float           # salience s = 1 - exp(-strength), decayed lazily (gem/salience.py)
    last_access: datetime
    status: str               # active | archived
    scope: str
    created_at: datetime
    annotations: str          # JSON object


class FieldRow(TypedDict):
    id: str                   # "<topic id>/<name>": found by key, without a traversal
    topic_id: str
    name: str
    strength: float
    last_access: datetime
    status: str               # active | compressed | hidden
    contested: bool
    summary: str | None       # what compression left in place of the older entries
    created_at: datetime
    annotations: str
    labels: list[str]         # the union of its entries' labels (kept with every entry written)


class EntryRow(TypedDict):
    id: str
    seq: int
    tx: int
    field_id: str
    origin_field: str         # the field it was recorded in (merges move entries)
    value: str                # JSON
    valid_at: datetime
    asserted_at: datetime     # its latest statement (re-statements move it forward)
    recorded_at: datetime
    source: str
    actor: str
    ref: str | None
    confidence: float
    polarity: str             # + | -
    status: str               # current | superseded | retracted
    superseded_by: str | None
    superseded_tx: int | None
    active: bool              # False once compression moved it out of the active history
    annotations: str
    labels: list[str]         # the labels of the facts that stated it (Fact.labels)
    reason: str | None        # why it was retracted (mem.retract), or what a retraction says
    place_lat: float | None   # where the fact that stated it was (Fact.place; gem/places.py)
    place_lon: float | None
    place_name: str | None


class ObservationRow(TypedDict):
    id: str
    seq: int
    entry_id: str
    source: str
    actor: str
    ref: str | None
    confidence: float
    polarity: str
    valid_at: datetime
    recorded_at: datetime


class FlagRow(TypedDict):
    id: str
    seq: int
    tx: int
    topic_id: str
    origin_id: str | None
    policy: str | None
    evidence: str             # JSON
    status: str               # open | cleared
    created_at: datetime
    cleared_at: datetime | None
    cleared_by: str | None    # "reviser" or "policy:<name>": what handled it


class EpisodeRow(TypedDict):
    """A raw observation (a turn of a conversation, a message, a note), kept as said: the tier
    facts are extracted from, and searchable beside them (issue 10)."""
    id: str                   # "ep<seq>"
    seq: int
    tx: int
    text: str
    at: datetime              # when it was said or observed (valid time)
    recorded_at: datetime
    source: str
    actor: str
    speaker: str | None
    follows: str | None       # the episode said just before it (gem/operators/ingest.py)
    strength: float           # salience, as for topics and fields
    last_access: datetime
    status: str               # active | hidden
    scope: str
    annotations: str
    place_lat: float | None   # where it was said (Episode.place; gem/places.py)
    place_lon: float | None
    place_name: str | None
    cited_by: list[str]       # entries whose facts cite it (ref), or whose value it corroborates
    contradicted_by: str | None  # a later episode a policy judged to contradict it (mark_stale)


class PolicyRow(TypedDict):
    name: str
    file: str
    source: str
    hash: str
    version: int
    enabled: bool
    loaded_at: datetime


class TransitionRow(TypedDict):
    seq: int
    scope: str                # the scope it changed (id sequences and interactions are per scope)
    op: str
    event: str
    at: datetime
    actor: str
    units: str                # JSON list of unit ids
    policies: str             # JSON list of policies fired, with their evidence
    detail: str               # JSON object
    salience: str             # JSON object: unit -> [strength, last access] it changed to
    writes: str               # JSON object: unit -> content hash of the row it wrote (null: deleted)
    counters: str             # JSON object: id counters and the interaction count
    tombstone: str            # JSON object of an erasure (ids, redacted records, commitment), else ""
    salt: str                 # random, per record: the commitment below is salted with it
    commit: str               # sha256 over salt and content parts (units ... writes); chained
    prev_hash: str
    hash: str


class EdgeProps(TypedDict):
    tx: int
    created_at: datetime
    source: str
    actor: str


class DerivedProps(TypedDict):
    reason: str
    created_at: datetime


Row = dict[str, Any]


@dataclass(frozen=True)
class Table:
    name: str
    row: type
    key: str
    columns: tuple[str, ...] = field(init=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "columns", tuple(get_type_hints(self.row)))


@dataclass(frozen=True)
class Rel:
    """A relationship table. `owns`: the source owns the target (or, with `child_first`, the
    target owns the source) and the relationship is created in the statement that creates
    the child; `parent_column` is the child's column that holds its owner's key (every
    transition that moves a child between owners sets it too), so a child can be found by
    its owner without the relationship."""
    name: str
    source: str
    target: str
    props: type | None = None
    owns: bool = False
    child_first: bool = False
    parent_column: str | None = None
    columns: tuple[str, ...] = field(init=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "columns", tuple(get_type_hints(self.props)) if self.props else ())

    @property
    def parent(self) -> str:
        """The owner's table, of an owning relationship."""
        return self.target if self.child_first else self.source

    @property
    def child(self) -> str:
        """The owned rows' table, of an owning relationship."""
        return self.source if self.child_first else self.target


TABLES: dict[str, Table] = {t.name: t for t in (
    Table("Meta", MetaRow, "key"),
    Table("Topic", TopicRow, "id"),
    Table("Field", FieldRow, "id"),
    Table("Entry", EntryRow, "id"),
    Table("Observation", ObservationRow, "id"),
    Table("Flag", FlagRow, "id"),
    Table("Episode", EpisodeRow, "id"),
    Table("Policy", PolicyRow, "name"),
    Table("Transition", TransitionRow, "seq"),
)}

RELS: dict[str, Rel] = {r.name: r for r in (
    Rel("HAS_FIELD", "Topic", "Field", owns=True, parent_column="topic_id"),
    Rel("HAS_ENTRY", "Field", "Entry", owns=True, parent_column="field_id"),
    Rel("CORROBORATES", "Observation", "Entry", owns=True, child_first=True,
        parent_column="entry_id"),
    Rel("FLAGS", "Flag", "Topic", owns=True, child_first=True, parent_column="topic_id"),
    Rel("EXTENDS", "Topic", "Topic", EdgeProps),
    Rel("ASSOCIATES", "Topic", "Topic", EdgeProps),
    Rel("DERIVED_FROM", "Topic", "Topic", DerivedProps),
)}

# The edge kinds of S_t, as policies and the public API name them, and their tables.
EDGE_TABLES = {"extension": "EXTENDS", "association": "ASSOCIATES", "derived": "DERIVED_FROM"}
EDGE_KINDS = {table: kind for kind, table in EDGE_TABLES.items()}

_CYPHER_TYPES = {str: "STRING", int: "INT64", float: "DOUBLE", bool: "BOOLEAN",
                 datetime: "TIMESTAMP"}


def cypher_type(annotation: Any) -> str:
    """The engine type of a TypedDict annotation (`X | None` is X: every column is nullable)."""
    annotation = _base_type(annotation)
    if get_origin(annotation) is list:
        return cypher_type(get_args(annotation)[0]) + "[]"
    return _CYPHER_TYPES[annotation]


def _base_type(annotation: Any) -> Any:
    if get_origin(annotation) in (Union, types.UnionType):
        (annotation,) = [a for a in get_args(annotation) if a is not type(None)]
    return annotation


def columns_of_type(kind: type) -> dict[str, frozenset[str]]:
    """Table or relationship name -> its columns of one Python type (`X | None` counts as X).
    An engine that cannot store a type natively (FalkorDB: datetimes) converts these columns
    at its boundary, found from the declaration so a new column needs no edit there."""
    out = {t.name: frozenset(c for c, a in get_type_hints(t.row).items() if _base_type(a) is kind)
           for t in TABLES.values()}
    out.update({r.name: frozenset(c for c, a in get_type_hints(r.props).items()
                                  if _base_type(a) is kind) if r.props else frozenset()
                for r in RELS.values()})
    return out


def _columns_ddl(row: type) -> str:
    return ", ".join(f"{name} {cypher_type(t)}" for name, t in get_type_hints(row).items())


def ddl() -> tuple[str, ...]:
    """CREATE statements for every table; idempotent, so opening an existing database is safe."""
    out = [f"CREATE NODE TABLE IF NOT EXISTS {t.name}({_columns_ddl(t.row)}, PRIMARY KEY({t.key}))"
           for t in TABLES.values()]
    for r in RELS.values():
        props = f", {_columns_ddl(r.props)}" if r.props else ""
        out.append(f"CREATE REL TABLE IF NOT EXISTS {r.name}(FROM {r.source} TO {r.target}{props})")
    return tuple(out)


UNKNOWN_WHEN_ADDED = frozenset({"cited_by"})


def add_column(table: str, column: str) -> str:
    """ALTER statement adding a declared column to a table made before it was declared: lists
    start empty, everything else null (what a row written before the column existed means)."""
    kind = cypher_type(get_type_hints(TABLES[table].row)[column])
    # an episode's `cited_by` was not kept before the column: null says "not known" (read
    # from the entries instead, gem/operators/stale.py), where [] would say "none"
    default = " DEFAULT []" if kind.endswith("[]") and column not in UNKNOWN_WHEN_ADDED else ""
    return f"ALTER TABLE {table} ADD IF NOT EXISTS {column} {kind}{default}"


def owning_rel(child_table: str) -> Rel | None:
    """The relationship that owns rows of `child_table`, if any."""
    for r in RELS.values():
        if r.owns and r.child == child_table:
            return r
    return None


__all__ = ["SCHEMA_VERSION", "TABLES", "RELS", "EDGE_TABLES", "EDGE_KINDS", "Table", "Rel", "Row",
           "TopicRow", "FieldRow", "EntryRow", "ObservationRow", "FlagRow", "PolicyRow",
           "TransitionRow", "MetaRow", "EpisodeRow", "EdgeProps", "DerivedProps", "ddl",
           "cypher_type", "owning_rel", "add_column", "columns_of_type"]
