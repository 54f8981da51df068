"""Reading a snapshot file maps it without making its arrays resident: a page read once
through a mapping stays in the process's RSS while the mapping lives."""
import os
import sys

import numpy as np
import pytest

from gem.index.snapfile import read_snapshot_file, write_snapshot_file

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc/self/smaps")


def _resident_kb(path: str) -> int:
    total, mine = 0, False
    with open("/proc/self/smaps") as f:
        for line in f:
            head = line.split()
            if "-" in head[0] and not head[0].endswith(":"):
                mine = len(head) > 5 and head[5] == path
            elif mine and head[0] == "Rss:":
                total += int(head[1])
    return total


def test_reading_a_snapshot_leaves_its_arrays_unread_until_they_are_used(tmp_path):
    path = str(tmp_path / "big.snap")
    big = np.arange(4 << 20, dtype=np.int32)  # 16 MB
    write_snapshot_file(path, "test", {"seq": 1}, {}, {"big": big})
    stamp, _, arrays = read_snapshot_file(path, "test")
    assert stamp == {"seq": 1}
    assert _resident_kb(os.path.realpath(path)) < 1024  # the header and the checksum's page
    assert int(arrays["big"][::1024].sum()) == int(big[::1024].sum())
    assert _resident_kb(os.path.realpath(path)) > 8 * 1024  # now read through the mapping


def test_a_damaged_snapshot_is_still_refused(tmp_path):
    from gem.errors import SnapshotError
    path = str(tmp_path / "big.snap")
    write_snapshot_file(path, "test", {}, {}, {"big": np.arange(100_000, dtype=np.int64)})
    with open(path, "r+b") as f:
        f.seek(500_000)
        byte = f.read(1)
        f.seek(500_000)
        f.write(bytes([byte[0] ^ 1]))
    with pytest.raises(SnapshotError, match="checksum"):
        read_snapshot_file(path, "test")
    with open(path, "r+b") as f:
        f.truncate(os.path.getsize(path) - 3)
    with pytest.raises(SnapshotError):
        read_snapshot_file(path, "test")


def test_loading_a_vector_index_reads_neither_its_rows_nor_its_codes(tmp_path):
    from gem.index import VectorIndex
    rng = np.random.default_rng(3)
    n, dim = 60_000, 256
    ix = VectorIndex(dim, approximate_above=20_000)
    m = np.zeros((n, dim), dtype=np.float32)
    cols = rng.integers(0, dim, size=(n, 30))
    np.put_along_axis(m, cols, rng.random((n, 30), dtype=np.float32) + 0.1, axis=1)
    ix.upsert_many([f"u{i}" for i in range(n)], m)
    path = str(tmp_path / "units.snap")
    ix.save(path, {"seq": 1})
    loaded, _ = VectorIndex.load(path)
    # 13 MB of codes and entries: what is resident is the ids' offsets and the row counts
    assert _resident_kb(os.path.realpath(path)) < (os.path.getsize(path) // 1024) // 8
    q = m[17] + 0.01
    assert loaded.search(q, 10) == ix.search(q, 10)


@pytest.mark.parametrize("dim, column", [(8, 8), (300, 300), (300, -1)])
def test_packed_vector_columns_past_the_last_are_refused(tmp_path, dim, column):
    from gem.errors import SnapshotError
    from gem.index import VectorIndex
    ix = VectorIndex(dim, approximate_above=None)
    ix.upsert_many(["a", "b"], np.eye(dim)[:2])
    path = str(tmp_path / "v.snap")
    ix.save(path, {"seq": 1})
    stamp, meta, arrays = read_snapshot_file(path, "vector")
    broken = {k: np.array(v) for k, v in arrays.items()}
    if column < 0:
        broken["columns"] = broken["columns"].astype(np.int32)
    broken["columns"][1] = column
    write_snapshot_file(tmp_path / "bad.snap", "vector", stamp, meta, broken)
    with pytest.raises(SnapshotError, match="do not fit"):
        VectorIndex.load(tmp_path / "bad.snap")


@pytest.mark.parametrize("write", ["upsert", "upsert_many", "remove"])
def test_a_loaded_vector_index_lets_go_of_its_file_at_its_first_write(tmp_path, write):
    from gem.index import VectorIndex
    rng = np.random.default_rng(5)
    n, dim = 30_000, 256
    m = np.zeros((n, dim), dtype=np.float32)
    np.put_along_axis(m, rng.integers(0, dim, size=(n, 30)), 1.0, axis=1)
    ids = [f"u{i}" for i in range(n)]
    built = VectorIndex(dim, approximate_above=20_000)
    built.upsert_many(ids, m)
    path = str(tmp_path / "units.snap")
    built.save(path, {"seq": 1})
    loaded, _ = VectorIndex.load(path)
    for q in m[:40]:  # reads rows and codes through the mapping
        assert loaded.search(q, 10) == built.search(q, 10)
    assert _resident_kb(os.path.realpath(path)) > 1024
    for ix in (loaded, built):
        if write == "upsert":
            ix.upsert("u3", m[4])
        elif write == "upsert_many":
            ix.upsert_many(["new", "u5"], m[6:8])
        else:
            ix.remove("u7")
    assert _resident_kb(os.path.realpath(path)) == 0  # the mapping is gone with its last view
    for q in m[:40]:
        assert loaded.search(q, 10) == built.search(q, 10)
    assert sorted(loaded) == sorted(built)
    assert all(loaded.get(d).tobytes() == built.get(d).tobytes() for d in ("u3", "u5", "u8"))


def test_a_loaded_lexical_index_keeps_nothing_of_its_file_mapped(tmp_path):
    """Its postings are copied into a segment as they are read; its ids are copied too, or
    they would keep every page of the file the load read resident."""
    import gc

    from gem.index import LexicalIndex
    ix = LexicalIndex(0.9, 0.4, analyzer="search")
    for i in range(20_000):
        ix.upsert(f"t{i}/f{i % 7}", f"value {i} of field {i % 7} budget review {i * 31 % 977}")
    path = str(tmp_path / "units.snap")
    ix.save(path, {"seq": 1})
    loaded, _ = LexicalIndex.load(path)
    gc.collect()
    assert _resident_kb(os.path.realpath(path)) == 0
    assert loaded.search("budget 42", 10) == ix.search("budget 42", 10)
