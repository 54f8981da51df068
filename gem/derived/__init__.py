"""Derived state: everything gem computes from the database to answer quickly.

The database is the single source of truth. Derived from it, and kept here, per scope
(`ScopeState`; `DerivedState` holds one per scope and what is global: the log head, the
salience written behind, the last clean audit):

- the name directory (titles and aliases, exact and by canonical key -> topics) and title vectors,
  which the resolver reads to choose a fact's host topic;
- topic summaries (title and current visible values, by the summariser) and the lexical
  (BM25) and vector indexes over them, which free-text retrieval searches;
- salience columns (strength, last access, status) of every topic and field, which answer the
  global questions no key lookup can: which units faded below a salience, which topics are the
  most salient, how many fields are active (C5); and the labels of the fields that have any,
  which give them their own half-life (`label_half_life`);
- the topics with open revision flags, the id counters, and which log records touched each
  topic and episode (an erasure redacts them);
- the unit indexes free-text retrieval ranks: one document per field (its topic's names, its
  name and current value) and per episode (speaker and text), in a lexical index over search
  terms and a vector index, with each unit's valid time (for `between`). Forgotten units stay
  in them, so a strong cue can still recall them (issue 10); the units a commit changed
  are derived off the commit path, by the handle's worker or the next reader (`pending.py`);
- globally, the log head (sequence number, hash, and time: no transition is earlier).

It changes only after a commit (`apply`), from the committed transition's rows, so a rejected
transition leaves no trace here. Summaries and their index entries are refreshed lazily: a
commit marks the topics whose content changed as stale, and whatever reads summaries (a
free-text retrieval, `inspect`, `similarity`) refreshes the stale ones first, in one batch,
from committed state. All of it can be saved beside the database (`save`) and loaded at open
when it matches the log's head; a stale snapshot catches up from the log.
"""
from .documents import SCAN_ABOVE, scope_of, snapshot_dir, summaries_of, unit_documents
from .scope import ScopeState
from .state import DerivedState
from .tables import (DEFAULT_SCOPE, EPISODE_STATUS, FIELD_STATUS, GENESIS, TOPIC_STATUS, NameDirectory,
                     Progress, SalienceTable, Summarizer, UnitIndexes, choose, default_summary, said_key,
                     topic_seq)

__all__ = ["DEFAULT_SCOPE", "EPISODE_STATUS", "FIELD_STATUS", "GENESIS", "SCAN_ABOVE", "TOPIC_STATUS",
           "DerivedState", "NameDirectory", "Progress", "SalienceTable", "ScopeState", "Summarizer",
           "UnitIndexes", "choose", "default_summary", "said_key", "scope_of", "snapshot_dir",
           "summaries_of", "topic_seq", "unit_documents"]
