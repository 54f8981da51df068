"""gem's own derived search indexes: BM25 over text and cosine search over embeddings.

The database is the single source of truth (specs/design.md §4): these indexes hold nothing that
cannot be rebuilt from it, are updated only after a commit succeeds, and can be saved to a
snapshot file beside the database and loaded from it instead of being rebuilt (the caller
stamps the snapshot with what it reflects and rebuilds on any SnapshotError). They are not
thread-safe; the caller serialises writes, as it does for the database itself.
"""
from .lexical import ANALYZERS, LexicalIndex
from .snapfile import decode_strings, encode_strings, read_snapshot_file, snapshot_strings, write_snapshot_file
from .vector import VectorIndex

__all__ = ["ANALYZERS", "LexicalIndex", "VectorIndex", "decode_strings", "encode_strings", "read_snapshot_file",
           "snapshot_strings", "write_snapshot_file"]
