"""Every query gem sends to the engine, as named functions over a `Tx`.

Nothing outside gem/store/ writes Cypher. Rows come back as dicts keyed by the column names of
the schema's TypedDicts (gem/store/schema.py), so a column added there is read and written
everywhere at once.

Statement forms are chosen per engine by measurement: a form that looks equivalent can be
planned as a full table scan per row on one engine and as an index lookup on the other, which
is the difference between flat and linear cost in the table size. `bench/engine_forms.py`
puts kuzu's forms of a 1-hop read side by side.

The package splits them by kind: `forms` (how each engine is asked), `reads` (keyed reads
and 1-hops), `writes`, `log` (schema, meta, the transition log, salience written behind,
stored policies), `scans` (whole-state scans and counts) and `batches` (the full audit's
scans, as Arrow tables). Every name is re-exported here: callers write `queries.read_rows`. Settings (chunk sizes, form thresholds) stay on the module
that reads them: a test or bench changes `queries.reads.KUZU_FEW_KEYS`.
"""

from __future__ import annotations

from .reads import (read_rows, read_children, read_faded_history, read_edges, edge_holders)
from .writes import (create_rows, update_rows, set_status, create_rels, delete_rels, delete_rows)
from .log import (ensure_schema, add_missing_columns, create_tables, meta_get, meta_put,
    write_salience, append_transition, last_transition, log_head, record_hash, transitions,
    details_mentioning, latest_counters, highest_ids, episode_ids_from, stream_episodes,
    latest_episodes_of, touches, salience_since, stream_log, read_records, redact_records, log_records, transition_count,
    stored_policies, put_policies)
from .scans import (scan, current_values, topic_offset_end, topics_in_range, summary_values, placed_units, citing_entries, placed_entries, scan_edges,
    scan_owned, count, count_rels, misowned, status_counts, active_fields_by_scope, entry_counts,
    updates_of_extended_topics, flags_by_transition, conflicting_fields,
    stream_rows, stream_rels, count_owned, negative_strengths, stream_scan)

__all__ = ['read_rows', 'read_children', 'read_faded_history', 'read_edges', 'edge_holders',
           'create_rows', 'update_rows', 'set_status', 'create_rels', 'delete_rels', 'delete_rows',
           'ensure_schema', 'add_missing_columns', 'create_tables', 'meta_get', 'meta_put',
           'write_salience', 'append_transition', 'last_transition', 'log_head', 'record_hash',
           'transitions', 'details_mentioning', 'latest_counters', 'highest_ids',
           'episode_ids_from', 'stream_episodes', 'latest_episodes_of', 'touches', 'stream_log', 'read_records',
           'redact_records', 'log_records', 'transition_count', 'stored_policies', 'put_policies',
           'scan', 'current_values', 'topic_offset_end', 'topics_in_range', 'summary_values', 'placed_units', 'citing_entries', 'placed_entries',
           'scan_edges', 'scan_owned', 'count', 'count_rels', 'misowned', 'status_counts',
           'active_fields_by_scope', 'entry_counts', 'updates_of_extended_topics',
           'flags_by_transition', 'conflicting_fields', 'stream_rows',
           'stream_rels', 'count_owned', 'negative_strengths', 'stream_scan', 'salience_since']
