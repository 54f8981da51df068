"""Whole-state scans and counts."""
from __future__ import annotations

from typing import Any, Iterator, Sequence

from ..graph import Tx
from ..schema import RELS, TABLES, Row

from .forms import _TIMES, _as_float, _rows, _typing
from .pieces import seq_pieces, table_pieces
from .reads import _owned_hop, _returns



# ---------------------------------------------------------------------- whole-state scans
# Used to rebuild derived state and by the full audit; never on a transition's path.
def scan(tx: Tx, table: str, where: str = "", params: dict[str, Any] | None = None,
         columns: Sequence[str] | None = None, order: str | None = None) -> list[Row]:
    cols = tuple(columns or TABLES[table].columns)
    order_by = f" ORDER BY n.{order}" if order else ""
    rows = tx.run(f"MATCH (n:{table}) {('WHERE ' + where) if where else ''} "
                  f"RETURN {_returns('n', cols)}{order_by}", params)
    return _rows(tx, table, cols, rows)


def current_values(tx: Tx) -> Iterator[tuple[str, str, str, str, Any]]:
    """(field id, topic id, field name, value JSON, valid time) of every field's current
    entry, in one scan read a piece at a time: what the search documents of many fields are
    made of."""
    for values in table_pieces(tx, "Field", "MATCH (f:Field)-[:HAS_ENTRY]->(e:Entry {status: 'current'}) "
                               "{WHERE} RETURN f.id, f.topic_id, f.name, e.value, e.valid_at", "f",
                               times=[4]):
        yield tuple(values)  # type: ignore[misc]


def topic_offset_end(tx: Tx) -> int:
    """One past the highest node offset of a topic (0 without topics): where a scan of the
    topics by offset ranges (`summary_values`) ends."""
    top = tx.scalar("MATCH (t:Topic) RETURN max(offset(id(t)))")
    return 0 if top is None else int(top) + 1


def topics_in_range(tx: Tx, lo: int, hi: int) -> list[tuple[str, str, str]]:
    """(topic id, scope, title) of the topics at node offsets [lo, hi). Not for FalkorDB (no
    node offsets)."""
    return [tuple(r) for r in tx.run(  # type: ignore[misc]
        f"MATCH (t:Topic) {_RANGED} RETURN t.id, t.scope, t.title", {"lo": lo, "hi": hi})]


def summary_values(tx: Tx, lo: int, hi: int) -> list[tuple[str, str, Any, int, str]]:
    """What the summaries of the topics at node offsets [lo, hi) are made of, each topic
    whole: (topic id, field name, field created_at, entry seq, value JSON) of every current
    entry of their visible fields, from the topics' side of the range (kuzu masks the field and
    entry scans by the topics in range): at 100k topics ~0.1 s of CPU per thousand topics,
    where reading topics by key costs 2-25 ms each. Not for FalkorDB (no node offsets)."""
    return [tuple(r) for r in tx.stream(  # type: ignore[misc]
        f"MATCH (t:Topic)-[:HAS_FIELD]->(f:Field)-[:HAS_ENTRY]->(e:Entry) {_RANGED} "
        "AND f.status <> 'hidden' AND e.status = 'current' "
        "RETURN t.id, f.name, f.created_at, e.seq, e.value", {"lo": lo, "hi": hi})]


_RANGED = "WHERE offset(id(t)) >= $lo AND offset(id(t)) < $hi"


def stream_scan(tx: Tx, table: str, columns: Sequence[str], by_seq: bool = False) -> Iterator[Row]:
    """`scan` of some columns a row at a time and a piece of the table at a time: in stored
    order, or in order of `seq` (unique in a scope)."""
    cols = tuple(columns)
    typed = _typing(tx, table, cols)
    times = [i for i, c in enumerate(cols) if c in _TIMES[table]]
    values = seq_pieces(tx, table, _returns("n", cols), times) if by_seq else \
        table_pieces(tx, table, f"MATCH (n:{table}) {{WHERE}} RETURN {_returns('n', cols)}", "n", times=times)
    for v in values:
        row = dict(zip(cols, v))
        yield row if typed is None else typed(row)


def placed_units(tx: Tx, scope: str) -> list[tuple[str, float, float]]:
    """(unit, lat, lon) of every field of any scope whose current entry has a place and of
    every episode of `scope` that has one: what the place grid of a scope is built from
    (gem/places.py; the caller keeps its scope's fields, whose ids carry the scope)."""
    cols = ("field_id", "place_lat", "place_lon")
    entries = _rows(tx, "Entry", cols, tx.run(
        "MATCH (e:Entry) WHERE e.status = 'current' AND e.place_lat IS NOT NULL "
        "RETURN e.field_id, e.place_lat, e.place_lon"))
    episodes = _rows(tx, "Episode", ("id", "place_lat", "place_lon"), tx.run(
        "MATCH (n:Episode) WHERE n.scope = $scope AND n.place_lat IS NOT NULL "
        "RETURN n.id, n.place_lat, n.place_lon", {"scope": scope}))
    return [(r["field_id"], r["place_lat"], r["place_lon"]) for r in entries] + \
        [(r["id"], r["place_lat"], r["place_lon"]) for r in episodes]


def citing_entries(tx: Tx, episodes: Sequence[str]) -> dict[str, list[str]]:
    """episode -> the entries whose facts cite it (`ref`) or whose value a positive observation
    citing it corroborates: what `Episode.cited_by` lists, for episodes recorded before it was
    kept (a scan of the entries and observations: such databases only)."""
    out: dict[str, list[str]] = {}
    for ref, entry in [*tx.run("MATCH (e:Entry) WHERE e.ref IN $ids AND e.polarity = '+' "
                               "RETURN e.ref, e.id", {"ids": list(episodes)}),
                       *tx.run("MATCH (o:Observation) WHERE o.ref IN $ids AND o.polarity = '+' "
                               "RETURN o.ref, o.entry_id", {"ids": list(episodes)})]:
        if entry not in out.setdefault(ref, []):
            out[ref].append(entry)
    return {k: sorted(v) for k, v in out.items()}


def placed_entries(tx: Tx) -> list[tuple[str, float, float]]:
    """(field id, lat, lon) of every entry of any scope that has a place, current or not: the
    fields a `near=` read as of an earlier time may find (gem/operators/near.py)."""
    return [(r[0], r[1], r[2]) for r in tx.run(
        "MATCH (e:Entry) WHERE e.place_lat IS NOT NULL RETURN e.field_id, e.place_lat, e.place_lon")]


def scan_edges(tx: Tx, rel: str) -> list[tuple[str, str, Row]]:
    cols = RELS[rel].columns
    rows = tx.run(f"MATCH (a:Topic)-[r:{rel}]->(b:Topic) RETURN a.id, b.id, {_returns('r', cols)}"
                  if cols else f"MATCH (a:Topic)-[r:{rel}]->(b:Topic) RETURN a.id, b.id")
    return [(r[0], r[1], props) for r, props in zip(rows, _rows(tx, rel, cols, (r[2:] for r in rows)))]


def scan_owned(tx: Tx, rel: str) -> list[tuple[str, str]]:
    """(parent key, child key) of every owning relationship of one kind."""
    spec = RELS[rel]
    return [(r[0], r[1]) for r in tx.run(
        f"MATCH (p:{spec.parent}){_owned_hop(spec)} RETURN p.id, c.id")]


def count(tx: Tx, table: str, where: str = "", params: dict[str, Any] | None = None) -> int:
    return int(tx.scalar(f"MATCH (n:{table}) {('WHERE ' + where) if where else ''} RETURN count(*)",
                         params) or 0)


def count_rels(tx: Tx, rel: str) -> int:
    return int(tx.scalar(f"MATCH ()-[r:{rel}]->() RETURN count(*)") or 0)


def misowned(tx: Tx, rel: str) -> list[tuple[str, str, str]]:
    """(child, owner column, holder) of the children of an owning relationship whose owner
    column names another owner than the one that holds them (gem reads children through
    that column: see `_kuzu_one_hop`)."""
    spec = RELS[rel]
    assert spec.parent_column is not None
    return [(r[0], r[1], r[2]) for r in tx.run(
        f"MATCH (p:{spec.parent}){_owned_hop(spec)} WHERE c.{spec.parent_column} <> p.id "
        f"RETURN c.id, c.{spec.parent_column}, p.id ORDER BY c.id")]


def status_counts(tx: Tx, scope: str | None = None) -> dict[str, dict[str, int]]:
    """Topics by status, and fields by ladder level (a field of an archived topic counts as
    archived), in one scope or in all."""
    where, params = ("WHERE x.scope = $scope ", {"scope": scope}) if scope is not None else ("", None)
    topics = {r[0]: int(r[1]) for r in tx.run(
        f"MATCH (x:Topic) {where}RETURN x.status, count(*)", params)}
    fields = {r[0]: int(r[1]) for r in tx.run(
        f"MATCH (x:Topic)-[:HAS_FIELD]->(f:Field) {where}RETURN "
        "CASE WHEN x.status = 'archived' THEN 'archived' ELSE f.status END, count(*)", params)}
    episodes = {r[0]: int(r[1]) for r in tx.run(
        f"MATCH (x:Episode) {where}RETURN x.status, count(*)", params)}
    return {"topics": topics, "fields": fields, "episodes": episodes}


def active_fields_by_scope(tx: Tx) -> dict[str, int]:
    return {r[0]: int(r[1]) for r in tx.run(
        "MATCH (x:Topic)-[:HAS_FIELD]->(f:Field) WHERE x.status = 'active' AND "
        "f.status = 'active' RETURN x.scope, count(*)")}


def entry_counts(tx: Tx, scope: str | None = None) -> tuple[int, int]:
    """(all entries, entries in the active history), in one scope or in all. kuzu 0.11.3
    miscounts a bare boolean in CASE, hence the explicit comparison."""
    counted = "sum(CASE WHEN e.active = true THEN 1 ELSE 0 END)"
    if scope is None:
        row = tx.one(f"MATCH (e:Entry) RETURN count(*), {counted}")
    else:
        row = tx.one(f"MATCH (x:Topic)-[:HAS_FIELD]->(:Field)-[:HAS_ENTRY]->(e:Entry) "
                     f"WHERE x.scope = $scope RETURN count(*), {counted}", {"scope": scope})
    return (int(row[0]), int(row[1] or 0)) if row else (0, 0)


def updates_of_extended_topics(tx: Tx, since: int = 0) -> list[tuple[str, str, int]]:
    """(topic, dependent, transition) for every update of a topic made in or after the
    transition that created an extension edge from it (C3 over the trajectory). An update is a
    supersession made by the transition that recorded the new entry, on the field it was
    recorded in (entries moved in by a merge were updates of another topic then)."""
    rows = tx.run(
        "MATCH (a:Topic)-[x:EXTENDS]->(b:Topic), (a)-[:HAS_FIELD]->(f:Field)-[:HAS_ENTRY]->"
        "(old:Entry), (f)-[:HAS_ENTRY]->(new:Entry) WHERE old.superseded_by = new.id "
        "AND new.tx >= x.tx AND old.superseded_tx = new.tx AND old.tx < new.tx "
        "AND new.origin_field = f.id AND new.tx > $since RETURN DISTINCT a.id, b.id, new.tx",
        {"since": since})
    return [(r[0], r[1], int(r[2])) for r in rows]


def flags_by_transition(tx: Tx) -> set[tuple[str, int]]:
    return {(r[0], int(r[1])) for r in tx.run("MATCH (g:Flag)-[:FLAGS]->(b:Topic) RETURN b.id, g.tx")}


def conflicting_fields(tx: Tx, scope: str) -> list[str]:
    """Fields of a scope whose current value is contradicted by another source at the same
    valid time."""
    return [r[0] for r in tx.run(
        "MATCH (x:Topic)-[:HAS_FIELD]->(f:Field)-[:HAS_ENTRY]->(a:Entry), (f)-[:HAS_ENTRY]->(b:Entry) "
        "WHERE x.scope = $scope AND a.status = 'current' AND b.id <> a.id "
        "AND b.status <> 'retracted' AND b.asserted_at = a.asserted_at AND b.value <> a.value "
        "AND b.source <> a.source AND f.status <> 'hidden' RETURN DISTINCT f.id ORDER BY f.id",
        {"scope": scope})]


def stream_rows(tx: Tx, table: str) -> Iterator[Row]:
    """Every row of a table, in stored order, a bounded piece at a time (gem/store/queries/pieces.py)."""
    cols = TABLES[table].columns
    typed = _typing(tx, table, cols)
    times = [i for i, c in enumerate(cols) if c in _TIMES[table]]
    for values in table_pieces(tx, table, f"MATCH (n:{table}) {{WHERE}} RETURN {_returns('n', cols)}",
                               "n", times=times):
        row = dict(zip(cols, values))
        yield row if typed is None else typed(row)


def stream_rels(tx: Tx, rel: str) -> Iterator[tuple[str, str, Row]]:
    """(source key, target key, properties) of every relationship of one table."""
    spec = RELS[rel]
    cols = spec.columns
    typed = _typing(tx, rel, cols)
    returns = "".join(f", r.{c}" for c in cols)
    for a, b, *values in tx.stream(f"MATCH (a:{spec.source})-[r:{rel}]->(b:{spec.target}) "
                                   f"RETURN a.id, b.id{returns}"):
        row = dict(zip(cols, values))
        yield a, b, row if typed is None else typed(row)


def count_owned(tx: Tx, rel: str) -> int:
    """Children that hang off an existing parent through their owning relationship."""
    return count_rels(tx, rel)


def negative_strengths(tx: Tx) -> list[tuple[str, float]]:
    strength = "toFloat(n.strength)" if tx.text_values else "n.strength"
    out = []
    for table in ("Topic", "Field", "Episode"):
        out += [(r[0], _as_float(r[1])) for r in tx.run(
            f"MATCH (n:{table}) WHERE {strength} < 0 RETURN n.id, n.strength")]
    return out
