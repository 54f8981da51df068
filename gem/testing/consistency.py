"""Checks that what gem keeps in memory agrees with the database, its single source of truth.

- `cache_disagreements`: the row cache may know less than the database, never something else.
- `derived_disagreements`: the derived state (names, indexes, salience columns, flags, log
  head) equals what a rebuild from the database alone gives.

Both are invariants of the stateful machine (gem/testing/stateful.py) and of the tests that
reject transitions on purpose.
"""
from __future__ import annotations

from typing import Any

from ..derived import DerivedState, scope_of
from ..store import queries


def cache_disagreements(mem: Any) -> list[str]:
    engine = mem._engine
    cache = engine.cache
    wrong = []
    with engine.store.reading() as tx:
        for table, rows in cache.rows.items():
            # salience written behind is part of the committed state (the log has it)
            stored = {r["id"]: engine.derived.patch(table, r)
                      for r in queries.read_rows(tx, table, list(rows))}
            for key, row in rows.items():
                if row != stored.get(key):
                    wrong.append(f"{table} {key}: cached {row!r}, stored {stored.get(key)!r}")
        for rel, lists in cache.children.items():
            stored_lists: dict[str, list[str]] = {p: [] for p in lists}
            for parent, row in queries.read_children(tx, rel, list(lists)):
                stored_lists[parent].append(row["id"])
            for parent, keys in lists.items():
                if sorted(keys) != sorted(stored_lists[parent]):
                    wrong.append(f"{rel} of {parent}: cached {keys}, stored {stored_lists[parent]}")
        stored_edges = queries.read_edges(tx, list(cache.edges))
        for tid, edges in cache.edges.items():
            want = sorted(repr(e) for e in stored_edges if tid in (e[1], e[2]))
            if sorted(map(repr, edges)) != want:
                wrong.append(f"edges of {tid}: cached {sorted(map(repr, edges))}, stored {want}")
    return wrong


def citation_disagreements(mem: Any) -> list[str]:
    """Episodes whose `cited_by` is not what a scan of every entry and observation gives: the
    positive entries that cite them (`ref`) and the entries positive observations citing them
    corroborate (gem/operators/stale.py derives staleness from it)."""
    engine = mem._engine
    want: dict[str, set[str]] = {}
    with engine.store.reading() as tx:
        episodes = {r["id"]: set(r["cited_by"] or ()) for r in queries.stream_rows(tx, "Episode")}
        for e in queries.stream_rows(tx, "Entry"):
            if e["ref"] in episodes and e["polarity"] == "+":
                want.setdefault(e["ref"], set()).add(e["id"])
        for o in queries.stream_rows(tx, "Observation"):
            if o["ref"] in episodes and o["polarity"] == "+":
                want.setdefault(o["ref"], set()).add(o["entry_id"])
    return [f"episode {eid}: cited_by {sorted(have)}, cited by {sorted(want.get(eid, set()))}"
            for eid, have in sorted(episodes.items()) if have != want.get(eid, set())]


def derived_disagreements(mem: Any) -> list[str]:
    engine = mem._engine
    with engine.store.lock:
        derived = engine.derived
        derived.refresh(engine.cache, engine.services.summarizer)
        derived.refresh_units(engine.cache)
        rebuilt = DerivedState.rebuild(engine.store, engine.services.embedder)
        rebuilt.refresh(engine.cache, engine.services.summarizer)
        rebuilt.refresh_units(engine.cache)
        have, want = derived.fingerprint(), rebuilt.fingerprint()
        grids = placed_disagreements(engine.store, derived)
    return differences(have, want) + grids


def placed_disagreements(store: Any, derived: DerivedState) -> list[str]:
    """A scope's place grid, once built (not saved, so a rebuild has none), must hold exactly
    the placed units a scan of the database finds."""
    out = []
    for name, scope in derived.scopes.items():
        if scope.places is None:
            continue
        with store.reading() as tx:
            found = queries.placed_units(tx, name)
        want = {u: (lat, lon) for u, lat, lon in found if scope_of(u) == name}
        have = dict(scope.places.points)
        if have != want:
            out += differences(have, want, f"/places/{name}")
    return out


def differences(have: Any, want: Any, path: str = "", limit: int = 5) -> list[str]:
    """Where two nested values differ (at most `limit` places), with short reprs."""
    out: list[str] = []
    if isinstance(have, dict) and isinstance(want, dict):
        for key in sorted(set(have) | set(want), key=str):
            if len(out) >= limit:
                break
            if have.get(key) != want.get(key):
                out += differences(have.get(key), want.get(key), f"{path}/{key}", limit - len(out))
        return out
    return [f"{path or '/'}: derived {have!r:.120} but a rebuild gives {want!r:.120}"]
