"""Radius queries: the place grid (gem/places.py) against a full scan of the same points.

A benchmark, not a test: it prints a table and asserts nothing. Run:

    python bench/places.py                          # 10k and 100k units
    python bench/places.py --sizes 10000 --queries 200 --memory 2000

The points are synthetic: 80% around 200 "cities" over Europe (a Gaussian of ~20 km), 20%
uniform over the same box, as placed notes cluster where people are. Queries are centred on
random points of the data set. Both sides answer from the same points: the grid visits the
cells covering the circle and checks their units exactly; the scan computes the haversine
distance of every unit (numpy, vectorised). Their answers are compared on every query.
`--memory N` adds a row for `retrieve(near=...)` on a real memory of N placed episodes.
"""
from __future__ import annotations

import argparse
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run from a checkout

from gem.places import PlaceGrid  # noqa: E402

BOX = (35.0, 70.0, -10.0, 40.0)  # lat and lon bounds of the synthetic points


def points(n: int, rnd: random.Random) -> list[tuple[str, float, float]]:
    cities = [(rnd.uniform(BOX[0], BOX[1]), rnd.uniform(BOX[2], BOX[3])) for _ in range(200)]
    out = []
    for i in range(n):
        if rnd.random() < 0.8:
            lat, lon = rnd.choice(cities)
            lat, lon = lat + rnd.gauss(0, 0.18), lon + rnd.gauss(0, 0.25)
        else:
            lat, lon = rnd.uniform(BOX[0], BOX[1]), rnd.uniform(BOX[2], BOX[3])
        out.append((f"u{i}", max(-90.0, min(90.0, lat)), max(-180.0, min(180.0, lon))))
    return out


def measure(n: int, radii: list[float], queries: int, seed: int) -> list[list[str]]:
    rnd = random.Random(seed)
    pts = points(n, rnd)
    start = time.perf_counter()
    grid = PlaceGrid(pts)
    built = time.perf_counter() - start
    rows = []
    for km in radii:
        centres = [rnd.choice(pts)[1:] for _ in range(queries)]
        for lat, lon in centres[:5]:  # warm-up
            grid.within(lat, lon, km)
            grid.scan(lat, lon, km)
        g_times, s_times, cells, candidates, hits = [], [], [], [], []
        for lat, lon in centres:  # interleaved: both sides see the same machine noise
            t0 = time.perf_counter()
            found = grid.within(lat, lon, km)
            t1 = time.perf_counter()
            scanned = grid.scan(lat, lon, km)
            t2 = time.perf_counter()
            if found.units.keys() != scanned.keys():
                raise SystemExit(f"the grid and the scan disagree at {lat},{lon},{km}")
            g_times.append(t1 - t0)
            s_times.append(t2 - t1)
            cells.append(found.cells)
            candidates.append(found.candidates)
            hits.append(len(found.units))
        g, s = statistics.median(g_times), statistics.median(s_times)
        rows.append([f"{n:,}", f"{km:g}", f"{statistics.mean(hits):,.1f}",
                     f"{statistics.mean(cells):.1f}", f"{statistics.mean(candidates):,.0f}",
                     f"{statistics.mean(candidates) / n:.2%}", f"{g * 1e6:,.0f}",
                     f"{s * 1e6:,.0f}", f"{s / g:,.1f}x", f"{built * 1e3:,.0f}"])
    return rows


def memory_row(n: int, queries: int, seed: int) -> list[str]:
    """retrieve(near=...) on a memory of n placed episodes: the first query builds the grid
    with one scan of the placed rows (a text query first derives the units' search documents,
    which any first retrieval after an ingest does), the others use it."""
    import gem
    rnd = random.Random(seed)
    pts = points(n, rnd)
    with tempfile.TemporaryDirectory() as d, gem.open(str(Path(d) / "places.db")) as mem:
        for i in range(0, n, 500):
            mem.ingest([gem.Episode(f"note {u}", source=u, place=(lat, lon))
                        for u, lat, lon in pts[i:i + 500]])
        mem.retrieve("note")
        t0 = time.perf_counter()
        mem.retrieve(near=(*pts[0][1:], 5.0))
        first = time.perf_counter() - t0
        times = []
        for _ in range(queries):
            lat, lon = rnd.choice(pts)[1:]
            t0 = time.perf_counter()
            mem.retrieve(near=(lat, lon, 5.0))
            times.append(time.perf_counter() - t0)
    return [f"{n:,}", f"{first * 1e3:,.1f}", f"{statistics.median(times) * 1e3:,.2f}"]


def table(header: list[str], rows: list[list[str]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    return "\n".join(lines + ["| " + " | ".join(r) + " |" for r in rows])


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--sizes", type=int, nargs="+", default=[10_000, 100_000])
    p.add_argument("--radii", type=float, nargs="+", default=[1, 10, 100])
    p.add_argument("--queries", type=int, default=200)
    p.add_argument("--memory", type=int, default=0, help="placed episodes of a real memory")
    p.add_argument("--seed", type=int, default=7)
    args = p.parse_args()
    rows = [r for n in args.sizes for r in measure(n, args.radii, args.queries, args.seed)]
    print(table(["units", "km", "hits", "cells", "checked", "checked/units", "grid us",
                 "scan us", "scan/grid", "build ms"], rows))
    if args.memory:
        print()
        print(table(["episodes", "first near= (builds the grid) ms", "near= p50 ms"],
                    [memory_row(args.memory, min(args.queries, 50), args.seed)]))


if __name__ == "__main__":
    main()
