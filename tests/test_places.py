"""Places (issue 27 item 5): facts and episodes carry a place, `retrieve(near=(lat, lon, km))`
finds units by radius through the geohash grid (gem/places.py), alone or with a query and
`between=`; bad input is refused naming the field; the grid follows commits and erasure."""
from __future__ import annotations

import json
import math
import random
from datetime import timedelta

import pytest
from hypothesis import example, given, settings, strategies as st

import gem
from conftest import ENGINE, T0, snapshot
from gem.places import EARTH_KM, MAX_CELLS, PlaceGrid, distance_km
from gem.testing.consistency import derived_disagreements

LISBON = (38.7223, -9.1393)
PORTO = (41.1579, -8.6291)
SINTRA = (38.8029, -9.3817)   # ~23 km from Lisbon


def test_a_fact_and_an_episode_keep_their_place(mem):
    mem.ingest([gem.Fact("Office", "wifi", "fast", place=(*LISBON, "Lisbon office")),
                gem.Episode("Met Ana at the cafe", place=gem.Place(*SINTRA)),
                gem.Fact("Office", "printer", "broken")])
    view = mem.inspect("Office", "wifi")
    assert view.place == gem.Place(*LISBON, name="Lisbon office")
    assert mem.history("Office", "wifi")[0].place.name == "Lisbon office"
    assert mem.inspect("Office", "printer").place is None
    r = mem.retrieve("cafe")
    assert r.episodes[0].place == gem.Place(*SINTRA)
    # a Fact's JSON carries its place and reads back the same
    fact = gem.Fact("Office", "wifi", "fast", place=(*LISBON, "Lisbon office"))
    assert gem.Fact.model_validate_json(fact.model_dump_json()) == fact


def test_a_field_is_placed_by_its_current_value(mem, clock):
    mem.ingest(gem.Fact("Ana", "desk", "B12", place=LISBON))
    clock.advance(hours=1)
    mem.ingest(gem.Fact("Ana", "desk", "C3", place=PORTO))
    assert mem.retrieve(near=(*LISBON, 5)).topics == []
    assert mem.retrieve(near=(*PORTO, 5)).value("Ana", "desk") == "C3"
    clock.advance(hours=1)
    mem.ingest(gem.Fact("Ana", "desk", "D1"))  # no place: the field is nowhere now
    assert mem.retrieve(near=(*PORTO, 5)).topics == []
    assert derived_disagreements(mem) == []


def test_near_as_of_places_a_field_by_the_entry_current_then(mem, clock):
    mem.ingest(gem.Fact("Ana", "desk", "B12", place=LISBON))
    then = clock.advance(minutes=30)
    clock.advance(minutes=30)
    mem.ingest(gem.Fact("Ana", "desk", "C3", place=PORTO))
    clock.advance(hours=1)
    r = mem.retrieve(near=(*LISBON, 5), as_of=then)
    assert r.value("Ana", "desk") == "B12"
    assert r.topics[0].fields["desk"].distance_km == 0.0
    assert mem.retrieve(near=(*PORTO, 5), as_of=then).topics == []
    assert mem.retrieve("desk", near=(*LISBON, 5), as_of=then).value("Ana", "desk") == "B12"
    assert mem.retrieve("desk", near=(*PORTO, 5), as_of=then).topics == []
    assert mem.retrieve(near=(*PORTO, 5)).value("Ana", "desk") == "C3"   # now: where it is now


def test_a_restatement_places_an_entry_that_had_no_place(mem, clock):
    mem.ingest(gem.Fact("Ana", "desk", "B12"))
    clock.advance(minutes=1)
    mem.ingest(gem.Fact("Ana", "desk", "B12", place=LISBON))
    clock.advance(minutes=1)
    mem.ingest(gem.Fact("Ana", "desk", "B12", place=PORTO))  # the first place given stays
    assert mem.inspect("Ana", "desk").place == gem.Place(*LISBON)
    assert mem.audit(full=True).ok


def test_near_without_a_query_returns_what_is_within_the_radius_nearest_first(mem):
    mem.ingest([gem.Fact("Sintra palace", "tickets", "sold out", place=SINTRA),
                gem.Fact("Lisbon office", "wifi", "fast", place=LISBON),
                gem.Fact("Porto office", "wifi", "slow", place=PORTO),
                gem.Fact("Unplaced", "x", 1),
                gem.Episode("Lunch at the river", place=(38.707, -9.136))])
    r = mem.retrieve(near=(*LISBON, 50))
    assert [t.title for t in r.topics] == ["Lisbon office", "Sintra palace"]
    assert [e.text for e in r.episodes] == ["Lunch at the river"]
    wifi = r.topics[0].fields["wifi"]
    assert wifi.distance_km == pytest.approx(0.0, abs=1e-6)
    assert r.topics[1].fields["tickets"].distance_km == pytest.approx(
        distance_km(*LISBON, *SINTRA), abs=1e-5)
    assert 20 < r.topics[1].fields["tickets"].distance_km < 30
    assert r.near == (*LISBON, 50.0)
    assert wifi.score > r.topics[1].fields["tickets"].score  # nearer ranks first
    assert [t.title for t in mem.retrieve(near=(*LISBON, 50), k=1).topics] == ["Lisbon office"]
    assert mem.retrieve(near=(*LISBON, 50), k=1).truncated


def test_near_combines_with_a_query_and_between(mem, clock):
    """'What happened near here last week': near= and between=, with or without text."""
    mem.ingest([gem.Episode("Fire drill in the Lisbon office", place=LISBON),
                gem.Episode("Fire drill in the Porto office", place=PORTO)])
    clock.advance(days=9)
    mem.ingest(gem.Episode("Coffee machine fixed", place=LISBON))
    clock.advance(hours=2)  # so neither follows the other: the second stage would add the reply
    mem.ingest(gem.Episode("Fire alarm tested", place=(LISBON[0] + 0.01, LISBON[1])))
    now = clock.now
    last_week = (now - timedelta(days=7), now)
    r = mem.retrieve(near=(*LISBON, 10), between=last_week)
    assert sorted(e.text for e in r.episodes) == ["Coffee machine fixed", "Fire alarm tested"]
    r = mem.retrieve("fire", near=(*LISBON, 10))
    assert sorted(e.text for e in r.episodes) == ["Fire alarm tested",
                                                   "Fire drill in the Lisbon office"]
    r = mem.retrieve("fire", near=(*LISBON, 10), between=last_week)
    assert [e.text for e in r.episodes] == ["Fire alarm tested"]
    assert all(e.distance_km is not None for e in r.episodes)


@pytest.mark.parametrize("bad, field", [
    (dict(place=(91, 0)), "place: lat"), (dict(place=(0, -180.5)), "place: lon"),
    (dict(place=(math.nan, 0)), "place: lat"), (dict(place=(0, math.inf)), "place: lon"),
    (dict(place=("38.7", 0)), "place: lat"), (dict(place=(True, 0)), "place: lat"),
    (dict(place=(0, 0, "")), "place: name"), (dict(place={"lat": 1}), "place: lon"),
    (dict(place=(1, 2, 3, 4)), "place"), (dict(place="Lisbon"), "place"),
])
def test_a_bad_place_is_refused_naming_the_field(bad, field):
    for make in (lambda: gem.Fact("A", "x", 1, **bad), lambda: gem.Episode("said", **bad)):
        with pytest.raises(gem.InvalidInput, match=field):
            make()


@pytest.mark.parametrize("near, field", [
    ((90.5, 0, 1), "lat"), ((0, 181, 1), "lon"), ((0, 0, 0), "km"), ((0, 0, -1), "km"),
    ((0, 0, math.nan), "km"), ((0, 0, math.inf), "km"), ((math.nan, 0, 1), "lat"),
    ((0, 0), "near"), ("0,0,1", "near"), ((0, "1", 1), "lon"), ((0, 0, True), "km"),
])
def test_a_bad_near_is_refused_and_changes_nothing(mem, near, field):
    mem.ingest(gem.Fact("Office", "wifi", "fast", place=LISBON))
    before = snapshot(mem)
    with pytest.raises(gem.InvalidInput, match=field):
        mem.retrieve(near=near)
    with pytest.raises(gem.InvalidInput, match=field):
        mem.retrieve("wifi", near=near)
    assert snapshot(mem) == before


def test_near_with_a_topic_is_refused(mem):
    with pytest.raises(gem.InvalidInput, match="near"):
        mem.retrieve(topic="Office", near=(*LISBON, 1))


def test_a_null_place_and_a_zero_latitude_hash_apart():
    """A place at latitude 0 is content: the row hash must not take it for a missing place."""
    from gem.attest import row_hash
    entry = {"id": "e1", "value": '"x"', "labels": [], "reason": None}
    unplaced = row_hash("Entry", {**entry, "place_lat": None, "place_lon": None,
                                  "place_name": None})
    assert unplaced == row_hash("Entry", entry)
    assert row_hash("Entry", {**entry, "place_lat": 0.0, "place_lon": 0.0,
                              "place_name": None}) != unplaced


# ---------------------------------------------------------------------------- the grid
points = st.tuples(st.floats(-90, 90), st.floats(-180, 180))


@settings(max_examples=150, deadline=None)
@given(st.lists(points, max_size=120), st.lists(st.tuples(points, st.floats(0.001, 25000)),
                                                min_size=1, max_size=6),
       st.lists(st.integers(0, 200), max_size=30))
@example([(89.999, 10.0), (-89.999, -170.0), (0.0, 180.0), (0.0, -180.0)],
         [((90.0, 0.0), 1.0), ((0.0, 179.99), 5.0), ((-90.0, 0.0), 0.5)], [])
def test_the_grid_answers_exactly_as_a_full_scan(pts, queries, moved):
    """Correctness against brute force, across poles, the antimeridian and every radius, with
    units moved and removed after the grid was sorted."""
    grid = PlaceGrid((f"u{i}", lat, lon) for i, (lat, lon) in enumerate(pts))
    rnd = random.Random(len(pts))
    for m in moved:  # some units move or go after the sort: the grid checks them one by one
        unit = f"u{m}"
        if m % 3 == 0:
            grid.remove(unit)
        else:
            grid.put(unit, (rnd.uniform(-90, 90), rnd.uniform(-180, 180)))
    for (lat, lon), km in queries:
        truth = {u: distance_km(lat, lon, *p) for u, p in grid.points.items()
                 if distance_km(lat, lon, *p) <= km}
        found = grid.within(lat, lon, km)
        assert found.units.keys() == truth.keys()
        assert all(found.units[u] == pytest.approx(truth[u]) for u in truth)
        assert grid.scan(lat, lon, km).keys() == truth.keys()
        assert found.cells <= MAX_CELLS


def test_a_radius_query_checks_few_units_of_many():
    """10k units over Europe: a 5 km query visits at most MAX_CELLS cells and checks a few
    units, not all of them (bench/places.py measures the time)."""
    rnd = random.Random(7)
    grid = PlaceGrid((f"u{i}", rnd.uniform(35, 70), rnd.uniform(-10, 40)) for i in range(10_000))
    for _ in range(20):
        lat, lon = rnd.uniform(36, 69), rnd.uniform(-9, 39)
        found = grid.within(lat, lon, 5.0)
        assert found.units.keys() == grid.scan(lat, lon, 5.0).keys()
        assert found.cells <= MAX_CELLS and found.candidates < 100
    everything = grid.within(52.0, 15.0, math.pi * EARTH_KM)  # half the globe's circumference
    assert len(everything.units) == 10_000


# ---------------------------------------------------------------------------- the grid follows the state
def test_the_grid_follows_commits_erasure_and_forgetting(mem, clock):
    mem.ingest([gem.Fact("Ana", "desk", "B12", place=(*LISBON, "Lisbon office")),
                gem.Fact("Bo", "desk", "A1", place=LISBON),
                gem.Episode("Met Ana at the cafe", place=LISBON)])
    assert len(mem.retrieve(near=(*LISBON, 1)).topics) == 2   # the grid is built here
    clock.advance(minutes=5)
    mem.ingest(gem.Fact("Cy", "desk", "Z9", place=LISBON))    # followed after commit
    assert {t.title for t in mem.retrieve(near=(*LISBON, 1)).topics} == {"Ana", "Bo", "Cy"}
    receipt = mem.erase("Ana", reason="asked to be forgotten")
    assert {t.title for t in mem.retrieve(near=(*LISBON, 1)).topics} == {"Bo", "Cy"}
    assert mem.verify_erasure(receipt).ok
    assert derived_disagreements(mem) == []
    assert mem.audit(full=True).ok


def test_forgotten_units_are_near_only_with_include_archived(mem, clock):
    from gem.operators.forget import archive_topic
    mem.ingest(gem.Fact("Bo", "desk", "A1", place=LISBON))
    tid = mem.inspect("Bo").id
    mem._engine.run("forget", lambda t: archive_topic(t, tid))
    assert mem.retrieve(near=(*LISBON, 1)).topics == []
    assert [t.title for t in mem.retrieve(near=(*LISBON, 1), include_archived=True).topics] == ["Bo"]


def test_the_grid_is_rebuilt_after_reopening(db_path, clock):
    with gem.open(db_path, clock=clock, engine=ENGINE) as mem:
        mem.ingest([gem.Fact("Ana", "desk", "B12", place=LISBON),
                    gem.Episode("Met Ana", place=PORTO)])
        assert mem.retrieve(near=(*LISBON, 1)).value("Ana", "desk") == "B12"
    with gem.open(db_path, clock=clock, engine=ENGINE) as mem:
        assert mem.retrieve(near=(*LISBON, 1)).value("Ana", "desk") == "B12"
        assert [e.text for e in mem.retrieve(near=(*PORTO, 1)).episodes] == ["Met Ana"]
        assert derived_disagreements(mem) == []


@pytest.mark.skipif(ENGINE == "falkordb", reason="the embedded engines' tables")
def test_a_database_made_before_places_opens_and_takes_them(db_path, clock):
    """An older database has no place columns: they are added at open, its rows still match
    their log, and places are recorded from then on."""
    from gem.store import open_store
    with gem.open(db_path, clock=clock, engine=ENGINE) as mem:
        mem.ingest([gem.Fact("A", "x", 1), gem.Episode("said before places")])
    store = open_store(db_path, ENGINE)
    with store.transaction() as tx:  # what a database of the previous schema looks like
        for table in ("Entry", "Episode"):
            for column in ("place_lat", "place_lon", "place_name"):
                tx.run(f"ALTER TABLE {table} DROP {column}")
    store.close()
    with gem.open(db_path, clock=clock, engine=ENGINE) as mem:
        assert mem.inspect("A", "x").place is None
        assert mem.audit(full=True).ok
        clock.advance(minutes=1)
        mem.ingest(gem.Fact("A", "y", 2, place=(0.0, 0.0, "Null Island")))
        assert mem.retrieve(near=(0.0, 0.0, 1)).value("A", "y") == 2
        mem.compact()  # the added columns survive a physical purge's export and import
        assert mem.inspect("A", "y").place == gem.Place(0.0, 0.0, name="Null Island")
        assert mem.audit(full=True).ok


def test_policies_read_an_episodes_place(db_path, clock, tmp_path):
    policy = tmp_path / "places.policy"
    policy.write_text('POLICY far-episodes\nON episode_recorded\n'
                      'WHEN distance_km(episode.place, 38.7223, -9.1393) > 100\n'
                      'DO reject("only what is said near Lisbon")\n')
    with gem.open(db_path, clock=clock, engine=ENGINE, policies=[str(policy)]) as mem:
        mem.ingest(gem.Episode("Said in Lisbon", place=LISBON))
        mem.ingest(gem.Episode("Said nowhere"))  # null place: no distance, nothing rejected
        with pytest.raises(gem.TransitionRejected):
            mem.ingest(gem.Episode("Said in Porto", place=PORTO))
        assert len(mem.retrieve(near=(*LISBON, 1)).episodes) == 1


# ---------------------------------------------------------------------------- the surfaces
def test_http_and_mcp_bodies_carry_places_and_near(mem):
    """The request and result schemas HTTP and MCP share (gem/api/schemas.py, ops.py)."""
    from gem.api import ops, prompt, schemas as s
    ops.remember(mem, [s.FactIn(topic="Office", field="wifi", value="fast",
                                place=s.PlaceIn(lat=LISBON[0], lon=LISBON[1], name="Lisbon"))],
                 episodes=[s.EpisodeIn(text="Lunch by the river",
                                       place=s.PlaceIn(lat=38.707, lon=-9.136))])
    result = ops.recall(mem, s.RetrieveRequest(near=(*LISBON, 5)))
    card = result.topics[0].fields["wifi"]
    assert card.place.name == "Lisbon" and card.distance_km == pytest.approx(0.0, abs=1e-6)
    assert result.episodes[0].place.lat == 38.707 and result.near == (*LISBON, 5.0)
    text = prompt.render(result)
    assert "at Lisbon (0.0 km away)" in text and "at 38.7070,-9.1360" in text
    with pytest.raises(gem.InvalidInput, match="place: lat"):
        ops.remember(mem, [s.FactIn(topic="Office", field="x", value=1,
                                    place=s.PlaceIn(lat=99, lon=0))])
    with pytest.raises(gem.InvalidInput, match="near: km"):
        ops.recall(mem, s.RetrieveRequest(near=(0, 0, -3)))


@pytest.mark.skipif(ENGINE == "falkordb", reason="the command line's database is embedded")
def test_gem_query_near(tmp_path):
    from test_cli import gem_here, jsonl
    path = str(tmp_path / "cli.db")
    gem_here("init", path, "--engine", ENGINE)
    facts = [{"topic": "Office", "field": "wifi", "value": "fast",
              "place": {"lat": LISBON[0], "lon": LISBON[1], "name": "Lisbon office"}},
             {"topic": "Depot", "field": "gate", "value": "3", "place": {"lat": PORTO[0],
                                                                          "lon": PORTO[1]}}]
    gem_here("ingest", path, "-", stdin=jsonl(facts))
    out = gem_here("query", path, "--near", f"{LISBON[0]},{LISBON[1]},10").stdout
    assert "wifi" in out and "at Lisbon office (0.00 km)" in out and "Depot" not in out
    out = gem_here("query", path, "--near", f"{PORTO[0]},{PORTO[1]},10", "--json").stdout
    assert json.loads(out)["topics"][0]["title"] == "Depot"
    bad = gem_here("query", path, "--near", "1,2", ok=False)
    assert bad.returncode != 0 and "LAT,LON,KM" in bad.stderr
    bad = gem_here("query", path, "--near", "95,2,1", ok=False)
    assert bad.returncode != 0 and "near: lat" in bad.stderr


def test_the_dashboard_shows_places_escaped(mem):
    from gem.dashboard import pages
    mem.ingest([gem.Fact("Office", "wifi", "fast", place=(*LISBON, "<b>Lisbon</b> office")),
                gem.Episode("Lunch by the river", place=(38.707, -9.136))])
    topic = pages.topic(mem, "Office")
    assert "&lt;b&gt;Lisbon&lt;/b&gt; office" in topic and "<b>Lisbon" not in topic
    assert "38.72230, -9.13930" in topic
    said = pages.episodes(mem, None, None, 0)
    assert "<th>place</th>" in said and "38.70700, -9.13600" in said


def test_a_scope_finds_only_its_own_places(mem):
    mem.ingest(gem.Fact("Office", "wifi", "fast", place=LISBON))
    acme = mem.scope("acme")
    acme.ingest([gem.Fact("Office", "wifi", "slow", place=LISBON),
                 gem.Episode("acme stand-up", place=LISBON)])
    assert mem.retrieve(near=(*LISBON, 1)).value("Office", "wifi") == "fast"
    assert mem.retrieve(near=(*LISBON, 1)).episodes == []
    found = acme.retrieve(near=(*LISBON, 1))
    assert found.value("Office", "wifi") == "slow" and len(found.episodes) == 1
    assert derived_disagreements(mem) == []
