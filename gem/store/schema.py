"""The schema of M_t = (D_t, S_t, P_t) plus the transition log (design section 1).

Embeddings are stored as base64 float32 bytes in a STRING: measured here, batch writes of
256-dim FLOAT[] lists are ~20x slower than strings, and the vector index is ours anyway.
`tx` on entries, flags and edges is the sequence number of the transition that made them:
within one clock instant, times cannot order events, transition numbers can.
An entry links to the entry that superseded it by key (`superseded_by`, `superseded_tx`),
not by a relationship: on Kuzu 0.11.3 creating a relationship between two existing nodes
costs ~1.5 ms (measured at 30k nodes; LadybugDB ~0.02 ms), and every update makes one.
Relationships from a parent to a new child (topic-field, field-entry, ...) are created with
the child, in the same statement, which costs ~0.15 ms.
Entries are nodes, not a JSON blob inside the topic, so every correctness condition
can be checked with a query. Each statement is idempotent so opening an existing
database is safe.
"""
from __future__ import annotations

SCHEMA_VERSION = "1"

_UNIT_SALIENCE = "strength DOUBLE, last_access TIMESTAMP"

STATEMENTS: tuple[str, ...] = (
    "CREATE NODE TABLE IF NOT EXISTS Meta(key STRING, value STRING, PRIMARY KEY(key))",
    "CREATE NODE TABLE IF NOT EXISTS Topic(id STRING, seq INT64, title STRING, aliases STRING[], "
    "summary STRING, embedding STRING, " + _UNIT_SALIENCE + ", status STRING, scope STRING, "
    "created_at TIMESTAMP, updated_at TIMESTAMP, annotations STRING, PRIMARY KEY(id))",
    "CREATE NODE TABLE IF NOT EXISTS Field(id STRING, topic_id STRING, name STRING, "
    + _UNIT_SALIENCE + ", status STRING, contested BOOLEAN, summary STRING, "
    "created_at TIMESTAMP, annotations STRING, PRIMARY KEY(id))",
    "CREATE NODE TABLE IF NOT EXISTS Entry(id STRING, seq INT64, tx INT64, field_id STRING, "
    "origin_field STRING, value STRING, "
    "valid_at TIMESTAMP, asserted_at TIMESTAMP, recorded_at TIMESTAMP, source STRING, "
    "actor STRING, ref STRING, confidence DOUBLE, polarity STRING, status STRING, "
    "superseded_by STRING, superseded_tx INT64, active BOOLEAN, "
    "annotations STRING, PRIMARY KEY(id))",
    "CREATE NODE TABLE IF NOT EXISTS Observation(id STRING, seq INT64, entry_id STRING, "
    "source STRING, actor STRING, ref STRING, confidence DOUBLE, polarity STRING, "
    "valid_at TIMESTAMP, recorded_at TIMESTAMP, PRIMARY KEY(id))",
    "CREATE NODE TABLE IF NOT EXISTS Flag(id STRING, seq INT64, tx INT64, topic_id STRING, "
    "origin_id STRING, "
    "policy STRING, evidence STRING, status STRING, created_at TIMESTAMP, cleared_at TIMESTAMP, "
    "PRIMARY KEY(id))",
    "CREATE NODE TABLE IF NOT EXISTS Policy(name STRING, file STRING, source STRING, hash STRING, "
    "version INT64, enabled BOOLEAN, loaded_at TIMESTAMP, PRIMARY KEY(name))",
    "CREATE NODE TABLE IF NOT EXISTS Transition(seq INT64, op STRING, event STRING, at TIMESTAMP, "
    "actor STRING, units STRING, policies STRING, detail STRING, counters STRING, "
    "prev_hash STRING, hash STRING, PRIMARY KEY(seq))",
    "CREATE REL TABLE IF NOT EXISTS HAS_FIELD(FROM Topic TO Field)",
    "CREATE REL TABLE IF NOT EXISTS HAS_ENTRY(FROM Field TO Entry)",
    "CREATE REL TABLE IF NOT EXISTS CORROBORATES(FROM Observation TO Entry)",
    "CREATE REL TABLE IF NOT EXISTS FLAGS(FROM Flag TO Topic)",
    "CREATE REL TABLE IF NOT EXISTS EXTENDS(FROM Topic TO Topic, tx INT64, created_at TIMESTAMP, "
    "source STRING, actor STRING)",
    "CREATE REL TABLE IF NOT EXISTS ASSOCIATES(FROM Topic TO Topic, tx INT64, created_at TIMESTAMP, "
    "source STRING, actor STRING)",
    "CREATE REL TABLE IF NOT EXISTS DERIVED_FROM(FROM Topic TO Topic, reason STRING, "
    "created_at TIMESTAMP)",
)
