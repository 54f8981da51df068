"""Ids and texts kept packed as a snapshot holds them (gem/index/packed.py): read one row or
one id at a time, written through overlays, they answer as the plain list and dict would."""
from __future__ import annotations

import random

import numpy as np
import pytest

from gem.errors import SnapshotError
from gem.index import packed
from gem.index.packed import PackedIds, encode_strings, id_keys

IDS = ["t1/deadline", "t1/owner", "", "t2/größe", "e17", "acme:t3/日本語", "t4/\ud800 lone",
       "t5/a field whose name is much longer than twenty-four bytes", "x", "t6/" + "y" * 40,
       "t6/" + "y" * 39 + "z"]


def _packed(ids: list[str], blanks: bool, saved_keys: bool) -> PackedIds:
    blob, offsets = encode_strings(ids)
    p = PackedIds("test", blanks=blanks)
    p.adopt_packed(blob, offsets, keys=id_keys(blob, offsets) if saved_keys else None)
    return p


def _plain(ids: list[str], blanks: bool) -> PackedIds:
    p = PackedIds("test", blanks=blanks)
    p.adopt(list(ids))
    return p


@pytest.mark.parametrize("saved_keys", [True, False])
@pytest.mark.parametrize("seed", range(4))
def test_packed_ids_answer_as_a_list_and_a_dict_through_writes(seed, saved_keys):
    rnd = random.Random(seed)
    ids = [i for i in IDS if i] + [f"t{n}/f{n % 7}" for n in range(300)]
    rnd.shuffle(ids)
    blanks = seed % 2 == 0
    if blanks:
        ids[5] = ""
    p, model = _packed(ids, blanks, saved_keys), _plain(ids, blanks)
    for step in range(400):
        op = rnd.random()
        live = sorted(model.row_of)
        if op < 0.3:  # a salience table's put of a new unit
            key = f"new{step}/é" if step % 3 else f"new{step}"
            for t in (p, model):
                t.row_of[key] = len(t.ids)
                t.ids.append(key)
        elif op < 0.5 and live and blanks:  # an erasure empties a row
            key = rnd.choice(live)
            for t in (p, model):
                row = t.row_of.pop(key)
                t.ids[row] = ""
        elif op < 0.6 and len(model.ids) > 1:  # a vector index moves its last row
            if not live:
                continue
            key = rnd.choice(live)
            for t in (p, model):
                row = t.row_of.pop(key)
                last = len(t.ids) - 1
                if row != last:
                    moved = t.ids[last]
                    t.ids[row] = moved
                    if moved or not blanks:
                        t.row_of[moved] = row
                t.ids.pop()
        probe = rnd.choice(ids + ["absent", "t1/deadlinf"])
        assert p.row_of.get(probe) == model.row_of.get(probe)
        if step % 10 == 0:  # a query's candidates, looked up at once
            probes = rnd.sample(ids, 4) + ["absent", probe, "", f"new{step - 3}/é"]
            assert p.rows_of(probes) == [model.row_of.get(x) for x in probes]
        assert (probe in p.row_of) == (probe in model.row_of)
        row = rnd.randrange(len(model.ids)) if len(model.ids) else None
        if row is not None:
            assert p.ids[row] == model.ids[row]
        assert len(p.ids) == len(model.ids) and len(p.row_of) == len(model.row_of)
    assert p.packed_now  # nothing above decoded every id
    assert list(p.ids) == model.ids and dict(p.row_of) == model.row_of
    assert not p.packed_now


def test_packed_ids_decode_only_the_rows_asked_for(monkeypatch):
    ids = [f"t{n}/field {n % 10}" for n in range(5000)]
    p = _packed(ids, blanks=False, saved_keys=True)
    decoded = []
    monkeypatch.setattr(packed, "decode_strings", lambda *a: decoded.append(a) or [])
    assert p.ids[4321] == ids[4321]
    assert p.row_of["t77/field 7"] == 77 and p.row_of.get("t77/field 8") is None
    p.row_of["t9999/new"] = 5000
    p.ids.append("t9999/new")
    assert p.row_of["t9999/new"] == 5000 and len(p.row_of) == 5001
    assert decoded == [] and p.packed_now
    # what was read and never written is saved as it was read, with the keys it came with
    q = _packed(ids, blanks=False, saved_keys=True)
    assert q.row_of["t3/field 3"] == 3
    blob, offsets, keys = q.packed_with_keys()
    assert keys is q._base.keys() and decoded == []


def test_an_id_held_twice_is_found_when_an_id_is_first_searched_for():
    p = _packed(["a", "b", "a"], blanks=False, saved_keys=False)
    assert p.ids[1] == "b"  # reading by row needs no search
    with pytest.raises(SnapshotError):
        p.row_of.get("c")
    blanks = _packed(["a", "", ""], blanks=True, saved_keys=False)
    assert blanks.row_of.get("a") == 0 and len(blanks.row_of) == 1  # empty rows are no ids


def test_saved_keys_that_cannot_be_their_ids_keys_are_refused():
    blob, offsets = encode_strings(["a", "b", "c"])
    keys = id_keys(blob, offsets)
    with pytest.raises(SnapshotError):
        PackedIds("test").adopt_packed(blob, offsets, keys=keys[:2])
    for bad in (keys[::-1].copy(), keys | np.uint64(7)):  # found when first searched
        p = PackedIds("test")
        p.adopt_packed(blob, offsets, keys=bad)
        assert p.ids[1] == "b"
        with pytest.raises(SnapshotError):
            p.row_of.get("c")


@pytest.mark.parametrize("seed", range(3))
def test_prefix_keys_of_packed_ids_are_the_keys_of_their_ids_through_writes(seed, monkeypatch):
    """A large tie picks its smallest ids by these keys: read from the blob, with the rows
    written since, they are what `common.id_keys` makes of the ids, and no id is decoded."""
    from gem.index.common import id_keys as prefix_keys
    rnd = random.Random(seed)
    ids = [i for i in IDS if i] + [f"t{n}/f{n % 7}" for n in range(200)]
    rnd.shuffle(ids)
    p = _packed(ids, blanks=False, saved_keys=True)
    with monkeypatch.context() as m:
        m.setattr(packed.PackedStrings, "__getitem__", lambda self, i: pytest.fail("decoded"))
        assert p.prefix_keys().tolist() == prefix_keys(ids).tolist()
    view, expect = p.ids, list(ids)
    view[3] = expect[3] = "zz/replaced"
    view[len(ids) - 1] = expect[-1] = "é/replaced"
    for s in ("new/ü", "t0"):
        view.append(s)
        expect.append(s)
    assert p.prefix_keys().tolist() == prefix_keys(expect).tolist()
    for _ in range(3):
        view.pop()
        expect.pop()
    assert p.packed_now
    assert p.prefix_keys().tolist() == prefix_keys(expect).tolist()


def test_many_reads_decode_every_id_once_and_then_read_plain(monkeypatch):
    """A pass over many rows (a forgetting pass moves every unit) pays one decode, not a
    packed lookup per read; a few reads stay packed."""
    ids = [f"t{n}/f{n % 7}" for n in range(3 * PackedIds.READS_PACKED)]
    p = _packed(ids, blanks=False, saved_keys=True)
    view, rows = p.ids, p.row_of
    for row in range(0, len(ids), 7):
        assert view[row] == ids[row]
        assert rows[ids[row]] == row
    assert p.packed_now  # 2 * 1756 reads: under the budget
    for row in range(len(ids)):
        assert view[row] == ids[row]
    assert not p.packed_now
    assert [view[r] for r in range(0, len(ids), 5)] == ids[::5]
    assert rows.get(ids[-1]) == len(ids) - 1 and rows.get("absent") is None


def test_ids_looked_up_at_once_past_the_budget_are_decoded_once_and_read_plain():
    ids = [f"t{n}/f{n % 7}" for n in range(2 * PackedIds.READS_PACKED)]
    p = _packed(ids, blanks=False, saved_keys=True)
    few = [ids[5], "absent", ids[77]]
    assert p.rows_of(few) == [5, None, 77] and p.packed_now
    many = ids[::-1] + ["absent"]
    assert p.rows_of(many) == list(range(len(ids)))[::-1] + [None]
    assert not p.packed_now
