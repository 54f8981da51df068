"""A rebuild of the derived state holds a piece of the database's rows at a time (issue 28:
memory that does not grow with the data), and derives what a rebuild from whole tables did."""
from __future__ import annotations

from typing import Any, Iterator

import pytest

import gem
from conftest import ENGINE, evict_rows
from gem.derived import DerivedState, documents, scope as scope_module
from gem.store import graph
from gem.store.queries import pieces

PIECE_ROWS = 7
PIECE_UNITS = 5


def _fill(mem: gem.Memory) -> None:
    mem.ingest([gem.Fact(f"Topic {i}", f"field {j}", f"value {i}.{j} word{j}") for i in range(24)
                for j in range(4)])
    mem.ingest([gem.Fact("Topic 1", "field 1", ["a", "list"]), gem.Fact("Topic 3", "field 2", "new")])
    mem.retract("Topic 2", "field 2", "wrong")
    acme = mem.scope("acme")
    acme.ingest([gem.Fact(f"Acme {i}", "owner", f"person {i}") for i in range(9)])
    acme.ingest([gem.Episode(f"Acme said thing {i}", speaker="Ann", source=f"acme:m{i}")
                 for i in range(8)])
    mem.ingest([gem.Episode(f"We meet on day {i}", source=f"d{i}") for i in range(11)])


def _derived(mem: gem.Memory) -> dict[str, Any]:
    engine = mem._engine
    with engine.store.lock:
        state = DerivedState.rebuild(engine.store, engine.services.embedder)
        engine.cache.clear()
        state.refresh_units(engine.cache)
        return state.fingerprint()


def test_a_rebuild_reads_and_derives_a_piece_at_a_time_what_whole_tables_give(
        tmp_path, monkeypatch):
    with gem.open(tmp_path / "db", engine=ENGINE) as mem:
        _fill(mem)
        evict_rows(mem)  # the deriving worker idle: nothing pending
        whole = _derived(mem)

        # pieces of a few rows; many stale units documented from a scan of the current values
        monkeypatch.setattr(pieces, "piece_bytes", lambda tx: PIECE_ROWS * pieces.ROW_BYTES)
        monkeypatch.setattr(documents, "UNITS_PIECE", PIECE_UNITS, raising=False)
        monkeypatch.setattr(documents, "SCAN_ABOVE", 10)
        monkeypatch.setattr(scope_module, "SCAN_ABOVE", 10)
        reads: list[tuple[str, int]] = []
        embedded: list[int] = []
        stream, run = graph.Tx.stream, graph.Tx.run

        def counted_stream(self: graph.Tx, query: str, *args: Any, **kw: Any) -> Iterator[Any]:
            n = 0
            for row in stream(self, query, *args, **kw):
                n += 1
                yield row
            reads.append((query, n))

        def counted_run(self: graph.Tx, query: str, *args: Any, **kw: Any) -> list[Any]:
            rows = run(self, query, *args, **kw)
            reads.append((query, len(rows)))
            return rows

        embedder = mem._engine.services.embedder
        embed = embedder.embed

        def counted_embed(texts: list[str]) -> Any:
            embedded.append(len(texts))
            return embed(texts)

        monkeypatch.setattr(graph.Tx, "stream", counted_stream)
        monkeypatch.setattr(graph.Tx, "run", counted_run)
        monkeypatch.setattr(embedder, "embed", counted_embed)
        pieced = _derived(mem)
        monkeypatch.undo()

    assert pieced == whole
    assert len(whole["scopes"]["default"]["unit_docs"]) > 100  # it holds units to compare
    # no read of the units' tables returned more than a piece's rows (the log's records are
    # cut by their size instead, gem/store/queries/pieces.py)
    unit_reads = [(q, n) for q, n in reads if ":Transition" not in q]
    assert any(":Field" in q for q, _ in unit_reads)
    assert max(n for _, n in unit_reads) <= PIECE_ROWS, \
        [(q, n) for q, n in unit_reads if n > PIECE_ROWS]
    # titles are embedded a step of rows at a time, units a piece at a time
    assert embedded and max(embedded) <= max(PIECE_UNITS, 24 + 9)  # titles: every topic

@pytest.mark.parametrize("count", [0, 3])
def test_units_are_derived_a_piece_at_a_time(tmp_path, monkeypatch, count):
    """However many units are stale, an embedder call takes at most a piece of them."""
    with gem.open(tmp_path / "db", engine=ENGINE) as mem:
        _fill(mem)
        evict_rows(mem)
        engine = mem._engine
        monkeypatch.setattr(documents, "UNITS_PIECE", PIECE_UNITS, raising=False)
        embedded: list[int] = []
        embed = engine.services.embedder.embed
        monkeypatch.setattr(engine.services.embedder, "embed",
                            lambda texts: (embedded.append(len(texts)), embed(texts))[1])
        with engine.store.lock:
            scope = engine.derived.scope("default")
            want = scope.fingerprint()
            stale = [u for u in scope.fields.ids if u][count:]
            scope.stale_units.update(dict.fromkeys(stale))
            scope.refresh_units(engine.cache)
            assert not scope.stale_units
            assert scope.fingerprint() == want
        monkeypatch.undo()
    assert embedded and max(embedded) <= PIECE_UNITS
    assert sum(embedded) >= len(stale) - 1
