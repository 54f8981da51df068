"""The store interface: the only way gem reaches the graph engine.

Operators and conditions talk to a `Store` and the `Tx` it hands out; nothing outside
this package imports kuzu or ladybug. Both engines share one adapter (they expose the
same Python API), selected by name.
"""
from __future__ import annotations

from .graph import ENGINES, GraphStore, Tx, open_store

__all__ = ["ENGINES", "GraphStore", "Tx", "open_store"]
