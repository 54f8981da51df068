"""Administrative views of the committed state: topic listings, neighbourhoods, salience and
ladder status over time. Read-only: they run inside `Engine.read` (no transition is
committed, nothing is reinforced) and change nothing but what caches hold.

Listings read the derived state's columns (gem/derived/), so listing 10k topics is a few
vectorised passes, not a read per topic; neighbourhoods walk the row cache's edge lists; the
histories read the log records that mention a topic (their `salience` column is where every
salience change is written first).
"""
from __future__ import annotations

import json
from datetime import datetime
from typing import Sequence

import numpy as np

from ..derived import FIELD_STATUS, ScopeState
from ..model import EpisodePage, GraphEdge, GraphNode, LadderChange, Neighbourhood, \
    SalienceHistory, SaliencePoint, TopicPage, TopicSummary, UnitHistory
from ..salience import salience_of
from ..store.schema import EDGE_KINDS, Row
from ..state.reads import episode_order, topic_order
from ..state.transition import Transition
from ..text import name_key
from .forget import attenuations
from .retrieve import episode_view

ORDERS: tuple[str, ...] = ("salience", "title", "recent", "flags")


def episode_listing(t: Transition, derived: ScopeState, *, text: str | None = None,
                    status: str | None = None, offset: int = 0, limit: int = 50) -> EpisodePage:
    """Episodes newest first (by when they were recorded), from the derived columns; only the
    page's rows are read, or with `text` (a part of what was said or of the speaker, any case)
    the rows of the episodes it filters."""
    episodes = derived.episodes
    n = len(episodes)
    statuses = episodes.status[:n]
    keep = episodes.live()
    if status is not None:
        keep &= statuses == episodes.codes[status]
    if text:  # what each said, not its search document (that includes the turn before it)
        want = text.casefold()
        candidates = [episodes.ids[r] for r in np.flatnonzero(keep).tolist()]
        t.prefetch("Episode", candidates)
        said = {eid for eid in candidates if (row := t.row("Episode", eid)) is not None and (
            want in row["text"].casefold() or want in (row["speaker"] or "").casefold())}
        keep &= np.fromiter((eid in said for eid in episodes.ids), dtype=bool, count=n)
    rows = sorted(np.flatnonzero(keep).tolist(), key=lambda r: episode_order(episodes.ids[r]),
                  reverse=True)
    return EpisodePage(
        episodes=[episode_view(t, episodes.ids[r]) for r in rows[offset:offset + limit]],
        matching=len(rows), offset=offset, limit=limit,
        counts={name: int(np.count_nonzero(statuses == code))
                for name, code in episodes.codes.items()})


def topic_listing(t: Transition, derived: ScopeState, *, status: str | None = None,
                  flagged: bool = False, text: str | None = None, order: str = "salience",
                  offset: int = 0, limit: int = 50) -> TopicPage:
    topics, fields = derived.topics, derived.fields
    n, nf = len(topics), len(fields)
    salience = topics.salience(t.now, t.half_life)
    topic_status = topics.status[:n]
    owner = fields.owner[:nf]
    known = owner >= 0
    per_level = {name: np.bincount(owner[known & (fields.status[:nf] == code)], minlength=n)
                 for name, code in fields.codes.items()}
    flags = np.array([derived.open_flags.get(tid, 0) for tid in topics.ids], dtype=np.int64) \
        if n else np.zeros(0, dtype=np.int64)

    keep = topics.live()
    if status is not None:
        keep &= topic_status == topics.codes[status]
    if flagged:
        keep &= flags > 0
    if text:  # a part of a title or alias, compared by canonical key (gem.text.name_key)
        want = name_key(text)
        named = {tid for key, holders in derived.names.by_key.items() if want in key
                 for tid in holders}
        keep &= np.fromiter((tid in named for tid in topics.ids), dtype=bool, count=n)
    rows = np.flatnonzero(keep)
    if order == "salience":
        rows = rows[np.lexsort((rows, -salience[rows]))]
    elif order == "flags":
        rows = rows[np.lexsort((-salience[rows], -flags[rows]))]
    elif order == "title":
        titles = derived.names.title_of
        rows = np.array(sorted(rows.tolist(), key=lambda r: (
            titles.get(topics.ids[r], "").casefold(), topic_order(topics.ids[r]))), dtype=np.int64)
    else:  # recent: newest topics first
        rows = np.array(sorted(rows.tolist(), key=lambda r: topic_order(topics.ids[r]),
                               reverse=True), dtype=np.int64)
    page = rows[offset:offset + limit].tolist()

    archived = topics.codes["archived"]
    in_archived = np.zeros(nf, dtype=bool)
    in_archived[known] = topic_status[owner[known]] == archived
    field_counts = {level: int(np.count_nonzero((fields.status[:nf] == code) & ~in_archived))
                    for level, code in fields.codes.items()}
    field_counts["archived"] = int(np.count_nonzero(in_archived))
    return TopicPage(
        topics=[TopicSummary(id=topics.ids[r], title=derived.names.title_of.get(topics.ids[r], ""),
                             status=topics.names[int(topic_status[r])],  # type: ignore[arg-type]
                             salience=float(salience[r]),
                             fields={level: int(per_level[level][r]) for level in FIELD_STATUS},
                             open_flags=int(flags[r])) for r in page],
        matching=int(rows.shape[0]), offset=offset, limit=limit,
        topic_counts={name: int(np.count_nonzero(topic_status == code))
                      for name, code in topics.codes.items()},
        field_counts=field_counts, flagged=int(np.count_nonzero(flags > 0)))


def neighbourhood(t: Transition, derived: ScopeState, tid: str, depth: int,
                  limit: int) -> Neighbourhood:
    """Breadth first through EXTENDS, ASSOCIATES and DERIVED_FROM (either direction), up to
    `depth` edges and `limit` topics; the edges are those between the topics found."""
    reached = {tid: 0}
    frontier = [tid]
    truncated = False
    for d in range(1, depth + 1):
        t.prefetch_edges(frontier)
        following: list[str] = []
        for x in frontier:
            for _, a, b, _ in sorted(t.edges_of(x), key=lambda e: (e[0], e[1], e[2])):
                other = b if a == x else a
                if other in reached:
                    continue
                if len(reached) >= limit:
                    truncated = True
                    continue
                reached[other] = d
                following.append(other)
        frontier = following
        if not frontier:
            break
    if frontier and not truncated:  # the last ring may have neighbours beyond the depth
        t.prefetch_edges(frontier)
    ids = list(reached)
    t.prefetch("Topic", ids)
    edges: dict[tuple[str, str, str], GraphEdge] = {}
    for x in ids:
        for table, a, b, props in t.edges_of(x):
            if a in reached and b in reached and (table, a, b) not in edges:
                edges[(table, a, b)] = _edge(table, a, b, props)
    nodes = []
    for x in ids:
        row = t.topic(x)
        if row is None:
            continue
        nodes.append(GraphNode(id=x, title=row["title"], status=row["status"],
                               salience=t.salience_now(row), depth=reached[x],
                               open_flags=derived.open_flags.get(x, 0)))
    return Neighbourhood(centre=tid, depth=depth, nodes=nodes,
                         edges=sorted(edges.values(), key=lambda e: (e.kind, e.source, e.target)),
                         truncated=truncated)


def _edge(table: str, a: str, b: str, props: Row) -> GraphEdge:
    detail = props.get("reason") if table == "DERIVED_FROM" else props.get("source")
    return GraphEdge(kind=EDGE_KINDS[table], source=a, target=b,  # type: ignore[arg-type]
                     created_at=props.get("created_at"), transition=props.get("tx"),
                     detail=detail)


def log_needles(tid: str) -> tuple[str, str]:
    """What the log's JSON columns contain when a record is about a topic or its fields."""
    return json.dumps(tid), json.dumps(tid + "/")[:-1]


def salience_history(t: Transition, tid: str, records: Sequence[Row]) -> SalienceHistory:
    """`records`: the log records mentioning the topic, oldest first (`log_needles`)."""
    topic = t.topic(tid)
    assert topic is not None
    fids = t.field_ids(tid)
    t.prefetch("Field", fids)
    rows: dict[str, Row] = {tid: topic}
    rows.update((fid, t.get("Field", fid)) for fid in fids)
    points: dict[str, list[SaliencePoint]] = {u: [] for u in rows}
    ladder: dict[str, list[LadderChange]] = {u: [] for u in rows}
    status = {u: "active" for u in rows}
    needles = log_needles(tid)

    def about(text: str | None) -> bool:  # a batch's record is large: decode it only if needed
        return bool(text) and any(n in text for n in needles)  # type: ignore[operator]

    for record in records:
        seq, at, op = record["seq"], record["at"], record["op"]
        if about(record["salience"]):
            for unit, (strength, last) in json.loads(record["salience"]).items():
                if unit in points:
                    points[unit].append(SaliencePoint(
                        at=datetime.fromisoformat(last), transition=seq, strength=strength,
                        salience=salience_of(strength)))
        detail = json.loads(record["detail"]) if about(record["detail"]) else {}
        for unit, level in attenuations(detail):
            if unit in ladder and status[unit] != level:
                status[unit] = level
                ladder[unit].append(LadderChange(at=at, transition=seq, op=op, status=level))
        if op in ("restore", "retrieve"):  # restore, or an explicit lookup reviving a field
            for unit in json.loads(record["units"]):
                if unit in ladder and status[unit] != "active":
                    status[unit] = "active"
                    ladder[unit].append(LadderChange(at=at, transition=seq, op=op, status="active"))
    units = []
    for unit, row in rows.items():
        series = points[unit]
        stored = SaliencePoint(at=row["last_access"], transition=None, strength=row["strength"],
                               salience=salience_of(row["strength"]))
        if not series or (series[-1].at, series[-1].strength) != (stored.at, stored.strength):
            series.append(stored)
        half_life = t.half_life_of(row)  # a field's labels may give it its own
        units.append(UnitHistory(unit=unit, field=row.get("name") if unit != tid else None,
                                 created_at=row["created_at"], status=row["status"],
                                 salience=t.salience_now(row), points=series, ladder=ladder[unit],
                                 half_life_seconds=None if half_life is None
                                 else half_life.total_seconds()))
    return SalienceHistory(topic=tid, now=t.now, half_life_seconds=t.half_life.total_seconds(),
                           units=units)


__all__ = ["topic_listing", "neighbourhood", "salience_history", "log_needles", "ORDERS"]
