"""Retrieval by place: `retrieve(near=(lat, lon, km))`, with or without a text query.

With a query, `near` narrows the units the query ranks to those within the radius (as
`between` narrows them to a time window; both may be given). Without one, the units within
the radius are returned nearest first (then the most salient), at most k, each with score
1 / (1 + km): "what happened near here last week" is `near=` with `between=`. A field is
placed by its current entry (with `as_of`, by the entry current then), an episode by its own
place (gem/places.py). Forgotten units
(hidden, or of an archived topic) come back only with `include_archived`: a place is no cue
strong enough to recall what was forgotten.
"""
from __future__ import annotations

from datetime import datetime

from ..derived import scope_of
from ..model import RetrieveResult
from ..history import as_of as value_as_of
from ..places import PlaceGrid, distance_km
from ..state.transition import Transition
from ..store import queries
from ..units import is_episode


def grid(t: Transition) -> PlaceGrid:
    """The scope's place grid, up to date with every commit (built by one scan if needed)."""
    derived = t.committed
    derived.refresh_units(t.cache)
    if derived.places is None:
        with t.cache.store.reading() as tx:
            found = queries.placed_units(tx, t.scope)
        derived.places = PlaceGrid((u, lat, lon) for u, lat, lon in found
                                   if scope_of(u) == t.scope)
    return derived.places


def within(t: Transition, near: tuple[float, float, float],
           as_of: datetime | None = None) -> dict[str, float]:
    """unit -> distance in km of the scope's units within the radius; with `as_of`, a field
    where its entry current at that time was (the grid holds current places only: the fields
    with an entry ever placed within the radius are read, one scan of the placed entries)."""
    found = grid(t).within(*near).units
    if as_of is None:
        return found
    lat, lon, km = near
    out = {u: d for u, d in found.items() if is_episode(u)}
    with t.cache.store.reading() as tx:
        placed = queries.placed_entries(tx)
    fids = sorted({fid for fid, plat, plon in placed if scope_of(fid) == t.scope
                   and distance_km(lat, lon, plat, plon) <= km})
    t.prefetch("Field", fids)
    t.prefetch_children("HAS_ENTRY", [f for f in fids if t.field_row(f) is not None])
    for fid in fids:
        if t.field_row(fid) is None:
            continue
        then = value_as_of(t.entries(fid), as_of, t.observations)
        if then is not None and then["place_lat"] is not None:
            d = distance_km(lat, lon, then["place_lat"], then["place_lon"])
            if d <= km:
                out[fid] = d
    return out


def in_window(t: Transition, units: dict[str, float],
              between: tuple[datetime, datetime] | None) -> dict[str, float]:
    if between is None:
        return units
    lo, hi = (b.timestamp() for b in between)
    valid = t.committed.unit_valid
    return {u: d for u, d in units.items() if u in valid and lo <= valid[u] <= hi}


def nearest(t: Transition, near: tuple[float, float, float],
            between: tuple[datetime, datetime] | None, k: int,
            include_archived: bool, as_of: datetime | None = None
            ) -> tuple[list[tuple[str, float]], bool]:
    """(unit, score) of the k units nearest the point within the radius (and the window),
    and whether more were there than k."""
    derived = t.committed
    found = in_window(t, within(t, near, as_of), between)
    eligible: dict[str, float] = {}
    salience: dict[str, float] = {}
    units = list(found)
    for unit, (status, topic_status, salience_now) in zip(
            units, derived.unit_states(units, t.now, t.half_life)):
        if status is None:
            continue
        if include_archived or (status != "hidden" and topic_status != "archived"):
            eligible[unit] = found[unit]
            salience[unit] = salience_now
    ordered = sorted(eligible, key=lambda u: (eligible[u], -salience[u], u))
    return [(u, round(1.0 / (1.0 + eligible[u]), 9)) for u in ordered[:k]], len(ordered) > k


def with_distances(near: tuple[float, float, float], result: RetrieveResult) -> RetrieveResult:
    """The result of a `near=` retrieval, each placed field and episode with its distance."""
    topics = []
    for view in result.topics:
        fields = {name: f if f.place is None else f.model_copy(update={
            "distance_km": _km(near, f.place.lat, f.place.lon)}) for name, f in view.fields.items()}
        topics.append(view.model_copy(update={"fields": fields}))
    episodes = [e if e.place is None else e.model_copy(update={
        "distance_km": _km(near, e.place.lat, e.place.lon)}) for e in result.episodes]
    return result.model_copy(update={"topics": topics, "episodes": episodes, "near": near})


def _km(near: tuple[float, float, float], lat: float, lon: float) -> float:
    return round(distance_km(near[0], near[1], lat, lon), 6)
