"""Places: where a fact was stated or an episode said, and the grid that finds them by radius.

A place is stored as three columns of its entry or episode (`place_lat`, `place_lon`,
`place_name`; gem/store/schema.py). A field is placed by its current entry, an episode by its
own row. `retrieve(near=(lat, lon, km))` keeps the units within `km` (great-circle distance,
haversine, on a sphere of the Earth's mean radius) of a point.

The index is a geohash column kept in memory per scope (`PlaceGrid`, in the derived state): each
placed unit's Morton code (latitude and longitude quantised to BITS bits each, interleaved), in
one sorted array. A cell of level L (2^L x 2^L cells over the globe) is a prefix of the code,
hence one contiguous range of the array: a radius query picks the finest level whose cells
covering the circle's bounding box number at most MAX_CELLS, finds each cell's range with a
binary search and checks only the units in those ranges exactly. Units changed since the array
was sorted wait in a small set, checked one by one, until there are enough to sort again.

The grid is not saved with the snapshot: a scan of the placed rows builds it when a `near=`
query first needs one; after that it follows the units the unit layer re-derives
(`ScopeState.refresh_units`) and those erased (`ScopeState.forget_units`).
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Iterable, Mapping, Sequence

import numpy as np

from .errors import InvalidInput
from .model import Place, coordinate
from .units import unit_table

EARTH_KM = 6371.0088     # the mean Earth radius (IUGG)
BITS = 26                # per coordinate: a finest cell is ~0.3 m of latitude
MAX_CELLS = 16           # cells a radius query may visit at the level it picks
PAD = 1e-9               # degrees added to the bounding box: rounding never loses a unit
COLUMNS = ("place_lat", "place_lon", "place_name")


def haversine_km(lat1: Any, lon1: Any, lat2: Any, lon2: Any) -> Any:
    """Great-circle distance in km (scalars or numpy arrays, degrees)."""
    p1, p2 = np.radians(lat1), np.radians(lat2)
    a = np.sin((p2 - p1) / 2) ** 2 + np.cos(p1) * np.cos(p2) * np.sin(np.radians(lon2 - lon1) / 2) ** 2
    return 2 * EARTH_KM * np.arcsin(np.sqrt(np.clip(a, 0.0, 1.0)))


def distance_km(lat1: float, lon1: float, lat2: float, lon2: float) -> float:
    return float(haversine_km(lat1, lon1, lat2, lon2))


def columns(place: Place | None) -> dict[str, Any]:
    """A place as the stored columns of its entry or episode (nothing for no place)."""
    if place is None:
        return {}
    return {"place_lat": place.lat, "place_lon": place.lon, "place_name": place.name}


def place_of(row: Mapping[str, Any] | None) -> Place | None:
    """The place a stored entry or episode holds, or None."""
    if row is None or row.get("place_lat") is None or row.get("place_lon") is None:
        return None
    return Place(row["place_lat"], row["place_lon"], name=row.get("place_name"))


def place_record(row: Mapping[str, Any] | None) -> dict[str, Any] | None:
    """A place as policies read it (`entry.place`, `episode.place`): {lat, lon, name}."""
    place = place_of(row)
    return None if place is None else place.model_dump()


def checked_near(near: Any) -> tuple[float, float, float]:
    """`near=(lat, lon, km)` of a retrieval, checked: InvalidInput naming what is wrong."""
    if not isinstance(near, (tuple, list)) or len(near) != 3:
        raise InvalidInput(f"near must be (lat, lon, km), got {type(near).__name__}"
                           + (f" of {len(near)}" if isinstance(near, (tuple, list)) else ""))
    lat, lon, km = near
    for i, (what, bound) in enumerate((("lat", 90.0), ("lon", 180.0))):
        try:
            coordinate(near[i], bound)
        except ValueError as exc:
            raise InvalidInput(f"near: {what}: {exc}") from None
    if type(km) not in (int, float) or not math.isfinite(km) or km <= 0:
        raise InvalidInput(f"near: km must be a finite number > 0, got {km!r}")
    return float(lat), float(lon), float(km)


def unit_places(cache: Any, units: Sequence[str]
                ) -> dict[str, tuple[float, float] | None]:
    """unit -> (lat, lon) of committed fields (their current entry's place) and episodes;
    None for a unit with no place, no current value, or gone. `cache`: the row cache
    (gem/state/cache.py, a layer above this one)."""
    fids = [u for u in units if unit_table(u) == "Field"]
    eids = [u for u in units if unit_table(u) == "Episode"]
    cache.load_children("HAS_ENTRY", fids)
    cache.load_rows("Episode", eids)
    out: dict[str, tuple[float, float] | None] = {}
    for fid in fids:
        current = None
        for eid in reversed(cache.children["HAS_ENTRY"].get(fid) or []):
            e = cache.rows["Entry"].get(eid)
            if e is not None and e["status"] == "current":
                current = e
                break
        out[fid] = _point(current)
    for eid in eids:
        out[eid] = _point(cache.rows["Episode"].get(eid))
    return out


def _point(row: Mapping[str, Any] | None) -> tuple[float, float] | None:
    if row is None or row.get("place_lat") is None or row.get("place_lon") is None:
        return None
    return float(row["place_lat"]), float(row["place_lon"])


# ---------------------------------------------------------------------------- the grid
def _spread(x: Any) -> Any:
    """The bits of x (< 2^32) moved to the even positions (works on ints and uint64 arrays)."""
    x = x & 0x00000000FFFFFFFF
    x = (x | (x << 16)) & 0x0000FFFF0000FFFF
    x = (x | (x << 8)) & 0x00FF00FF00FF00FF
    x = (x | (x << 4)) & 0x0F0F0F0F0F0F0F0F
    x = (x | (x << 2)) & 0x3333333333333333
    return (x | (x << 1)) & 0x5555555555555555


_TOP = (1 << BITS) - 1


def _quantised(value: Any, low: float, span: float) -> Any:
    """The finest cell index of a coordinate (monotonic in it, so a box's edges bound the
    cells of every point inside it)."""
    return np.clip(np.floor((np.asarray(value, dtype=np.float64) - low) / span * (1 << BITS)),
                   0, _TOP).astype(np.uint64)


def codes_of(lats: Any, lons: Any) -> np.ndarray:
    """The Morton codes of points: latitude bits at odd positions, longitude bits at even."""
    i = _quantised(lats, -90.0, 180.0)
    j = _quantised(lons, -180.0, 360.0)
    return (_spread(i) << np.uint64(1)) | _spread(j)


@dataclass(frozen=True)
class Found:
    """What a radius query returned and what it looked at (for the benchmark's numbers)."""
    units: dict[str, float]          # unit -> distance in km, within the radius
    level: int                       # the grid level it searched
    cells: int                       # cells visited
    candidates: int                  # units checked exactly


class PlaceGrid:
    """The placed units of one scope, by Morton code (see the module's docstring)."""

    def __init__(self, points: Iterable[tuple[str, float, float]] = ()) -> None:
        self.points: dict[str, tuple[float, float]] = {u: (lat, lon) for u, lat, lon in points}
        self.dirty: set[str] = set()  # changed since the sorted arrays were made
        self._sort()

    def __len__(self) -> int:
        return len(self.points)

    def _sort(self) -> None:
        units = list(self.points)
        lats = np.array([self.points[u][0] for u in units], dtype=np.float64)
        lons = np.array([self.points[u][1] for u in units], dtype=np.float64)
        codes = codes_of(lats, lons)
        order = np.argsort(codes, kind="stable")
        self.codes = codes[order]
        self.units = [units[i] for i in order.tolist()]
        self.lats, self.lons = lats[order], lons[order]
        self.dirty = set()

    def put(self, unit: str, point: tuple[float, float] | None) -> None:
        """Place a unit (None: it has no place any more)."""
        if point is None:
            self.remove(unit)
        elif self.points.get(unit) != point:
            self.points[unit] = point
            self.dirty.add(unit)

    def update(self, places: Mapping[str, tuple[float, float] | None]) -> None:
        for unit, point in places.items():
            self.put(unit, point)

    def remove(self, unit: str) -> None:
        if self.points.pop(unit, None) is not None:
            self.dirty.add(unit)

    def within(self, lat: float, lon: float, km: float) -> Found:
        """The units within `km` of (lat, lon), with their distances."""
        if len(self.dirty) > max(1024, len(self.points) // 16):
            self._sort()
        level, starts, ends = cover(lat, lon, km)
        lo = np.searchsorted(self.codes, starts, side="left")
        hi = np.searchsorted(self.codes, ends, side="left")
        picked = np.concatenate([np.arange(a, b) for a, b in zip(lo.tolist(), hi.tolist())]) \
            if len(starts) else np.zeros(0, dtype=np.int64)
        picked = picked.astype(np.int64)
        dist = haversine_km(lat, lon, self.lats[picked], self.lons[picked])
        out: dict[str, float] = {}
        for i, d in zip(picked[dist <= km].tolist(), dist[dist <= km].tolist()):
            unit = self.units[i]
            if unit not in self.dirty:
                out[unit] = d
        for unit in self.dirty:  # moved, added or removed since the sort: checked one by one
            point = self.points.get(unit)
            if point is not None:
                d = distance_km(lat, lon, *point)
                if d <= km:
                    out[unit] = d
        return Found(out, level, len(starts), len(picked) + len(self.dirty))

    def scan(self, lat: float, lon: float, km: float) -> dict[str, float]:
        """The same answer by a check of every unit, vectorised over the same arrays (the
        reference the grid is tested and measured against)."""
        dist = haversine_km(lat, lon, self.lats, self.lons)
        out = {self.units[i]: d for i, d in zip(np.flatnonzero(dist <= km).tolist(),
                                                 dist[dist <= km].tolist())
               if self.units[i] not in self.dirty}
        for unit in self.dirty:
            point = self.points.get(unit)
            if point is not None and (d := distance_km(lat, lon, *point)) <= km:
                out[unit] = d
        return out


def cover(lat: float, lon: float, km: float) -> tuple[int, np.ndarray, np.ndarray]:
    """The level and the code ranges [start, end) of the cells that cover the circle's
    bounding box: the finest level at which there are at most MAX_CELLS of them."""
    r = km / EARTH_KM  # radians of arc
    dlat = math.degrees(r) + PAD
    lat_lo, lat_hi = lat - dlat, lat + dlat
    spans: list[tuple[float, float]]
    if r >= math.pi or lat_lo <= -90.0 or lat_hi >= 90.0:
        spans = [(-180.0, 180.0)]  # the circle holds a pole: every longitude
    else:
        ratio = math.sin(r) / math.cos(math.radians(lat))
        dlon = 180.0 if ratio >= 1.0 else math.degrees(math.asin(ratio)) + PAD
        if dlon >= 180.0:
            spans = [(-180.0, 180.0)]
        elif lon - dlon < -180.0:
            spans = [(lon - dlon + 360.0, 180.0), (-180.0, lon + dlon)]
        elif lon + dlon > 180.0:
            spans = [(-180.0, lon + dlon - 360.0), (lon - dlon, 180.0)]
        else:
            spans = [(lon - dlon, lon + dlon)]
    qlat = [int(x) for x in _quantised([max(lat_lo, -90.0), min(lat_hi, 90.0)], -90.0, 180.0)]
    qlon = [[int(x) for x in _quantised(list(s), -180.0, 360.0)] for s in spans]
    for level in range(BITS, -1, -1):
        shift = BITS - level
        rows = (qlat[1] >> shift) - (qlat[0] >> shift) + 1
        cols = sum((b >> shift) - (a >> shift) + 1 for a, b in qlon)
        if rows * cols <= MAX_CELLS or level == 0:
            break
    shift = BITS - level
    cells = [(i, j) for i in range((qlat[0] >> shift), (qlat[1] >> shift) + 1)
             for a, b in qlon for j in range(a >> shift, (b >> shift) + 1)]
    cells = list(dict.fromkeys(cells))  # two spans can share a cell at coarse levels
    ci = np.array([c[0] for c in cells], dtype=np.uint64)
    cj = np.array([c[1] for c in cells], dtype=np.uint64)
    starts = ((_spread(ci) << np.uint64(1)) | _spread(cj)) << np.uint64(2 * shift)
    ends = starts + np.uint64(1 << (2 * shift))
    return level, starts, ends


__all__ = ["Place", "PlaceGrid", "Found", "haversine_km", "distance_km", "columns", "place_of",
           "place_record", "checked_near", "unit_places", "codes_of", "cover", "EARTH_KM"]
