"""The store interface: the only way gem reaches the graph engine.

Operators and conditions talk to a `Store` and the `Tx` it hands out; nothing outside
this package imports kuzu, ladybug or the FalkorDB client. The two embedded engines share one
adapter (they expose the same Python API), selected by name; FalkorDB, a server many
processes share, has its own (gem/store/falkor.py) behind the same interface.
"""
from __future__ import annotations

from typing import Any

from .graph import ENGINES, GraphStore, Tx, engine_of, open_store


def falkor_database(url: str) -> Any:
    """A memory on FalkorDB (gem/store/falkor.py); the client is imported only here."""
    from .falkor import open_database
    return open_database(url)


__all__ = ["ENGINES", "GraphStore", "Tx", "engine_of", "open_store", "falkor_database"]
