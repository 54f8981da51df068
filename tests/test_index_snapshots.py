"""Snapshot files of the derived indexes: round trips, updates after loading, bad files."""
import json
import os
import random
import zlib

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import gem.index
from gem.errors import GemError, InvalidInput, SnapshotError
from gem.index import LexicalIndex, VectorIndex, read_snapshot_file

VOCAB = ["alpha", "beta", "gamma", "delta", "eps", "zeta", "eta", "theta"]
# Ids that a naive string table would break: empty, separators, NUL, a lone surrogate.
IDS = ["d0", "d1", "", "a\nb", "x\x00y", "\ud800", "日本", "d7", "d8", "d9"]
QUERIES = VOCAB + ["alpha beta", "gamma delta theta", "alpha alpha eta", "nothing"]

_tmp = settings(max_examples=60, deadline=None,
                suppress_health_check=[HealthCheck.function_scoped_fixture])

lexical_ops = st.lists(
    st.one_of(
        st.tuples(st.just("upsert"), st.sampled_from(IDS),
                  st.lists(st.sampled_from(VOCAB), max_size=7).map(" ".join)),
        st.tuples(st.just("remove"), st.sampled_from(IDS), st.just("")),
    ),
    max_size=30,
)


class _SmallSegments(LexicalIndex):
    # tiny segments and blocks: saves and loads of flushed, merged and dead postings
    _BUFFER_POSTINGS = 3
    _EXHAUSTIVE_BELOW = 0
    _PRUNED_AT_MOST = 2.0
    _BLOCK = 2


def apply_lexical(ix, model, ops):
    for op, doc_id, text in ops:
        if op == "upsert":
            ix.upsert(doc_id, text)
            model[doc_id] = text
        else:
            ix.remove(doc_id)
            model.pop(doc_id, None)


def lexical_results(ix):
    return [(ix.search(q), ix.search(q, k=2), ix.search(q, max_df=0.5)) for q in QUERIES]


@_tmp
@given(lexical_ops, lexical_ops, st.booleans(), st.randoms(use_true_random=False))
def test_lexical_round_trip_then_updates(tmp_path, before, after, small, rnd):
    cls = _SmallSegments if small else LexicalIndex
    live, model = cls(), {}
    apply_lexical(live, model, before)
    path = tmp_path / "lexical.snap"
    live.save(path, {"seq": 7, "hash": "abc"})
    loaded, stamp = cls.load(path)
    assert stamp == {"seq": 7, "hash": "abc"}
    assert type(loaded) is cls
    assert len(loaded) == len(live) and set(loaded) == set(live) and loaded.avgdl == live.avgdl
    assert lexical_results(loaded) == lexical_results(live)

    # The loaded index stays updatable: the same writes keep it equal to the original, and
    # both equal an index built from scratch from the final documents, in another order.
    apply_lexical(live, dict(model), after)
    apply_lexical(loaded, model, after)
    fresh = LexicalIndex()
    items = list(model.items())
    rnd.shuffle(items)
    for doc_id, text in items:
        fresh.upsert(doc_id, text)
    assert set(loaded) == set(model)
    assert lexical_results(loaded) == lexical_results(live) == lexical_results(fresh)

    # Saving what was loaded (and partly rewritten) round-trips as well.
    loaded.save(path, {})
    again, _ = cls.load(path)
    assert lexical_results(again) == lexical_results(fresh)


def test_lexical_snapshot_without_forward_tfs_still_loads(tmp_path):
    # Snapshots written before the postings became segments have no `row_tf`: the loader
    # rebuilds it from the postings instead of refusing the file (and rebuilding everything).
    live = _SmallSegments()
    for i in range(40):
        live.upsert(f"d{i}", " ".join(VOCAB[(i * j) % 8] for j in range(i % 6)))
    live.remove("d3")
    path = tmp_path / "old.snap"
    live.save(path, {"seq": 1})
    stamp, meta, arrays = read_snapshot_file(path, "lexical")
    del arrays["row_tf"]
    gem.index.write_snapshot_file(path, "lexical", stamp, meta, dict(arrays))
    loaded, _ = _SmallSegments.load(path)
    assert lexical_results(loaded) == lexical_results(live)
    loaded.upsert("d3", "alpha beta")
    live.upsert("d3", "alpha beta")
    assert lexical_results(loaded) == lexical_results(live)


def test_lexical_snapshot_keeps_counts_in_16_bits_unless_one_is_larger(tmp_path):
    # Term counts in one document are small: 2 bytes each on disk, 4 when one is not, and
    # either file loads to the same answers.
    small, large = LexicalIndex(), LexicalIndex()
    for i in range(30):
        text = " ".join(VOCAB[(i * j) % 8] for j in range(1 + i % 5))
        small.upsert(f"d{i}", text)
        large.upsert(f"d{i}", text)
    large.upsert("big", " ".join(["alpha"] * 70000))
    for name, ix, dtype in (("small", small, "<u2"), ("large", large, "<i4")):
        path = tmp_path / f"{name}.snap"
        ix.save(path, {})
        _, _, arrays = read_snapshot_file(path, "lexical")
        assert arrays["post_tf"].dtype.str == arrays["row_tf"].dtype.str == dtype
        assert arrays["ids_offsets"].dtype.str == "<i4"
        loaded, _ = LexicalIndex.load(path)
        assert lexical_results(loaded) == lexical_results(ix)
        assert loaded.search("alpha", k=1) == ix.search("alpha", k=1)


def test_lexical_snapshot_of_an_empty_index(tmp_path):
    LexicalIndex(k1=0.9, b=0.4).save(tmp_path / "e.snap", {})
    ix, stamp = LexicalIndex.load(tmp_path / "e.snap")
    assert len(ix) == 0 and ix.search("x") == [] and stamp == {}
    assert (ix.k1, ix.b) == (0.9, 0.4)
    ix.upsert("a", "x y")
    assert [d for d, _ in ix.search("x")] == ["a"]


def random_unit(seed, dim):
    v = np.random.default_rng(seed).standard_normal(dim)
    return v / np.linalg.norm(v)


vector_ops = st.lists(
    st.one_of(
        st.tuples(st.just("upsert"), st.sampled_from(IDS), st.integers(0, 40)),
        st.tuples(st.just("remove"), st.sampled_from(IDS), st.just(0)),
    ),
    max_size=40,
)


def apply_vectors(ix, model, ops, dim):
    for op, doc_id, seed in ops:
        if op == "upsert":
            # Seeds repeat, so identical vectors (exact ties) are common.
            v = random_unit(seed, dim)
            ix.upsert(doc_id, v)
            model[doc_id] = v
        else:
            ix.remove(doc_id)
            model.pop(doc_id, None)


def vector_results(ix, dim):
    qs = np.stack([random_unit(1000 + i, dim) for i in range(4)])
    return ([ix.search(q, k=3) for q in qs], [ix.search(q) for q in qs],
            ix.search_many(qs, 2), [ix.most_similar(q, 0.1) for q in qs],
            ix.pairs_above(0.2))


@_tmp
@given(vector_ops, vector_ops, st.sampled_from([None, 1, 3]), st.randoms(use_true_random=False))
def test_vector_round_trip_then_updates(tmp_path, before, after, approximate_above, rnd):
    dim = 5
    live, model = VectorIndex(dim, approximate_above=approximate_above, code_bits=64,
                              candidate_share=0.3), {}
    apply_vectors(live, model, before, dim)
    path = tmp_path / "vectors.snap"
    live.save(path, {"seq": 1, "embedder": "hashing-5-v1"})
    loaded, stamp = VectorIndex.load(path)
    assert stamp == {"seq": 1, "embedder": "hashing-5-v1"}
    assert loaded.approximate == live.approximate
    assert set(loaded) == set(live)
    for d in model:
        assert loaded.get(d).tobytes() == live.get(d).tobytes()
    assert vector_results(loaded, dim) == vector_results(live, dim)
    if live.approximate:  # codes saved, not recomputed
        assert read_snapshot_file(path, "vector")[2]["codes"].shape == (1, len(live))
        assert loaded._codes.words[:, : len(live)].tobytes() == \
            live._codes.words[:, : len(live)].tobytes()

    apply_vectors(live, dict(model), after, dim)
    apply_vectors(loaded, model, after, dim)
    assert vector_results(loaded, dim) == vector_results(live, dim)
    if approximate_above is None:
        # Exact search: a rebuild in another order gives the same results, bit for bit.
        fresh = VectorIndex(dim, approximate_above=None)
        items = list(model.items())
        rnd.shuffle(items)
        for doc_id, v in items:
            fresh.upsert(doc_id, v)
        assert vector_results(loaded, dim) == vector_results(fresh, dim)


@_tmp
@given(st.sampled_from([3, 256, 300]), st.integers(0, 40), st.integers(0, 2**32 - 1),
       st.floats(0.0, 1.0))
def test_sparse_vectors_are_saved_packed_and_come_back_bit_for_bit(tmp_path, dim, n, seed, share):
    """Rows with few non-zero components (a hashing embedder's) are saved as (column, value)
    pairs; -0.0 components and rows that are all zero come back exactly as they were."""
    rng = np.random.default_rng(seed)
    m = rng.normal(size=(n, dim)).astype(np.float32) * (rng.random((n, dim)) < share)
    m[rng.random((n, dim)) < 0.05] = -0.0
    ix = VectorIndex(dim, approximate_above=None)
    ix.upsert_many([f"v{i}" for i in range(n)], m)
    live = {f"v{i}": ix.get(f"v{i}") for i in range(n)}
    path = tmp_path / "vectors.snap"
    ix.save(path, {"seq": 1})
    _, _, arrays = gem.index.read_snapshot_file(path, "vector")
    nonzero = sum(int(np.count_nonzero(v.view(np.int32))) for v in live.values())
    columns = 1 if dim <= 256 else 2
    packed = nonzero * (columns + 4) + 4 * n < n * dim * 4
    assert ("columns" in arrays) == packed and ("vectors" in arrays) != packed
    loaded, _ = VectorIndex.load(path)
    assert len(loaded) == n
    for doc_id, v in live.items():
        assert loaded.get(doc_id).tobytes() == v.tobytes()
    loaded.upsert("extra", np.ones(dim))  # the unpacked matrix grows as any index's does
    assert loaded.get("v0") is None or loaded.get("v0").tobytes() == live["v0"].tobytes()


def test_packed_vector_rows_that_do_not_fit_are_refused(tmp_path):
    ix = VectorIndex(256, approximate_above=None)
    ix.upsert_many(["a", "b"], np.eye(256)[:2])
    path = tmp_path / "vectors.snap"
    ix.save(path, {"seq": 1})
    stamp, meta, arrays = gem.index.read_snapshot_file(path, "vector")
    assert "columns" in arrays
    for name, bad in (("row_nonzeros", np.array([1, 2], dtype=np.int32)),
                      ("row_nonzeros", np.array([-1, 3], dtype=np.int32))):
        broken = {k: np.array(v) for k, v in arrays.items()}
        broken[name] = bad
        gem.index.write_snapshot_file(tmp_path / "bad.snap", "vector", stamp, meta, broken)
        with pytest.raises(SnapshotError, match="do not fit"):
            VectorIndex.load(tmp_path / "bad.snap")


def test_a_snapshot_written_with_float_sketches_is_read_and_given_codes(tmp_path):
    """Before sign codes, an approximate index saved float16 sketches and their axes (and
    dense rows as a matrix): such a file loads, its sketches are ignored, and it answers as
    an index built from the same vectors does."""
    dim, n = 8, 30
    ids = [f"d{i}" for i in range(n)]
    fresh = VectorIndex(dim, approximate_above=10, candidate_share=0.02)
    fresh.upsert_many(ids, np.stack([random_unit(i, dim) for i in range(n)]))
    vecs = np.stack([fresh.get(d) for d in ids])  # as stored: normalised float32
    ids_utf8, ids_offsets = gem.index.encode_strings(ids)
    meta = {"dim": dim, "rows": n, "approximate_above": 10, "sketch_dim": 3,
            "candidate_share": 0.02, "sketches_trained_at": n}
    arrays = {"ids_utf8": ids_utf8, "ids_offsets": ids_offsets, "vectors": vecs,
              "sketch_axes": np.eye(dim, 3, dtype=np.float32),
              "sketches": vecs[:, :3].astype(np.float16)}
    gem.index.write_snapshot_file(tmp_path / "old.snap", "vector", {"seq": 1}, meta, arrays)
    loaded, stamp = VectorIndex.load(tmp_path / "old.snap")
    assert stamp == {"seq": 1} and loaded.approximate
    assert loaded._codes.words[:, :n].tobytes() == fresh._codes.words[:, :n].tobytes()
    assert all(loaded.get(d).tobytes() == fresh.get(d).tobytes() for d in ids)
    qs = [random_unit(100 + i, dim) for i in range(5)]
    assert [loaded.search(q, k=3) for q in qs] == [fresh.search(q, k=3) for q in qs]


def test_codes_that_do_not_fit_the_rows_are_refused(tmp_path):
    _, vec_path = saved_pair(tmp_path)
    stamp, meta, arrays = gem.index.read_snapshot_file(vec_path, "vector")
    broken = {k: np.array(v) for k, v in arrays.items()}
    broken["codes"] = broken["codes"][:, :-1]
    gem.index.write_snapshot_file(tmp_path / "bad.snap", "vector", stamp, meta, broken)
    with pytest.raises(SnapshotError, match="codes do not match"):
        VectorIndex.load(tmp_path / "bad.snap")


# ---------------------------------------------------------------- bad files


def saved_pair(tmp_path):
    lex = LexicalIndex()
    for i in range(30):
        lex.upsert(f"d{i}", " ".join(VOCAB[j % 8] for j in range(i % 5 + 1)))
    vec = VectorIndex(8, approximate_above=10)
    vec.upsert_many([f"d{i}" for i in range(30)], np.stack([random_unit(i, 8) for i in range(30)]))
    assert vec.approximate
    lex.save(tmp_path / "lex.snap", {"seq": 1})
    vec.save(tmp_path / "vec.snap", {"seq": 1})
    return tmp_path / "lex.snap", tmp_path / "vec.snap"


LOADERS = [(LexicalIndex, "lex.snap"), (VectorIndex, "vec.snap")]


@pytest.mark.parametrize("cls, name", LOADERS)
def test_every_truncation_is_refused(tmp_path, cls, name):
    saved_pair(tmp_path)
    data = (tmp_path / name).read_bytes()
    cut = tmp_path / "cut.snap"
    for n in sorted({0, 1, 7, 8, 15, 16, 17, 100, len(data) // 2, len(data) - 5,
                     len(data) - 4, len(data) - 1}):
        cut.write_bytes(data[:n])
        with pytest.raises(SnapshotError):
            cls.load(cut)


@settings(max_examples=80, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.data())
def test_any_flipped_byte_is_refused(tmp_path, data):
    cls, name = data.draw(st.sampled_from(LOADERS))
    if not (tmp_path / name).exists():
        saved_pair(tmp_path)
    raw = bytearray((tmp_path / name).read_bytes())
    at = data.draw(st.integers(0, len(raw) - 1))
    raw[at] ^= data.draw(st.integers(1, 255))
    bad = tmp_path / "bad.snap"
    bad.write_bytes(bytes(raw))
    with pytest.raises(SnapshotError):
        cls.load(bad)


def with_valid_crc(body: bytes) -> bytes:
    return body + zlib.crc32(body).to_bytes(4, "little")


@pytest.mark.parametrize("cls, name", LOADERS)
def test_wrong_version_kind_and_foreign_files_are_refused(tmp_path, cls, name):
    lex_path, vec_path = saved_pair(tmp_path)
    data = (tmp_path / name).read_bytes()
    cases = {
        "missing": None,
        "empty": b"",
        "foreign": b"SQLite format 3\x00" + bytes(200),
        "json": json.dumps({"kind": "lexical"}).encode(),
        # Well-formed (valid checksum) but a future format version.
        "version": with_valid_crc(data[:8] + (99).to_bytes(4, "little") + data[12:-4]),
        # Well-formed but the header is not JSON.
        "header": with_valid_crc(data[:16] + b"[" + data[17:-4]),
    }
    for case, content in cases.items():
        p = tmp_path / f"{case}.snap"
        if content is not None:
            p.write_bytes(content)
        with pytest.raises(SnapshotError):
            cls.load(p)
    other = vec_path if cls is LexicalIndex else lex_path
    with pytest.raises(SnapshotError, match="index, not a"):
        cls.load(other)
    assert issubclass(SnapshotError, GemError)


def test_header_that_lies_about_its_arrays_is_refused(tmp_path):
    _, vec_path = saved_pair(tmp_path)
    data = vec_path.read_bytes()
    header_len = int.from_bytes(data[12:16], "little")
    header = json.loads(data[16 : 16 + header_len])
    for lie in ("shape", "dtype", "rows"):
        h = json.loads(json.dumps(header))
        if lie == "shape":
            h["arrays"][2]["shape"] = [10**9, 8]
        elif lie == "dtype":
            h["arrays"][2]["dtype"] = "|O"
        else:
            h["meta"]["rows"] = 31
        # Compact separators make the edited header shorter; JSON allows trailing blanks.
        text = json.dumps(h, separators=(",", ":")).encode()
        assert len(text) <= header_len
        p = tmp_path / f"{lie}.snap"
        p.write_bytes(with_valid_crc(data[:16] + text.ljust(header_len)
                                     + data[16 + header_len : -4]))
        with pytest.raises(SnapshotError):
            VectorIndex.load(p)


def test_a_failed_write_leaves_the_previous_snapshot_and_no_temp_file(tmp_path, monkeypatch):
    lex_path, _ = saved_pair(tmp_path)
    before = lex_path.read_bytes()
    ix = LexicalIndex()
    ix.upsert("new", "something else")

    def crash(*args):
        raise OSError("disk gone")

    monkeypatch.setattr(gem.index.snapfile.os, "replace", crash)
    with pytest.raises(OSError, match="disk gone"):
        ix.save(lex_path, {"seq": 2})
    assert lex_path.read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["lex.snap", "vec.snap"]
    monkeypatch.undo()
    assert LexicalIndex.load(lex_path)[1] == {"seq": 1}


def test_the_file_is_fsynced_before_it_replaces_the_old_one(tmp_path, monkeypatch):
    events = []
    real_fsync, real_replace = os.fsync, os.replace
    monkeypatch.setattr(gem.index.snapfile.os, "fsync", lambda fd: (events.append("fsync"), real_fsync(fd)))
    monkeypatch.setattr(gem.index.snapfile.os, "replace",
                        lambda a, b: (events.append("replace"), real_replace(a, b)))
    VectorIndex(3).save(tmp_path / "v.snap", {})
    assert events[:2] == ["fsync", "replace"]


def test_stamp_must_be_plain_json(tmp_path):
    ix = VectorIndex(3)
    for bad in (None, [1], {1: "x"}, {"x": object()}, {"x": float("nan")}):
        with pytest.raises(InvalidInput):
            ix.save(tmp_path / "v.snap", bad)
    assert not (tmp_path / "v.snap").exists()
    stamp = {"seq": 2**40, "hash": "ü" * 3, "nested": {"a": [1, 2.5, None, True]}}
    ix.save(tmp_path / "v.snap", stamp)
    assert VectorIndex.load(tmp_path / "v.snap")[1] == stamp


def test_rebuild_after_a_bad_snapshot_gives_the_same_results(tmp_path):
    # The caller's recovery path: any SnapshotError means "rebuild from the source".
    rng = random.Random(3)
    docs = {f"t{i}": " ".join(rng.choice(VOCAB) for _ in range(rng.randint(0, 6)))
            for i in range(200)}

    def build():
        ix = LexicalIndex()
        for d, text in docs.items():
            ix.upsert(d, text)
        return ix

    path = tmp_path / "lex.snap"
    build().save(path, {"seq": 5})
    raw = bytearray(path.read_bytes())
    raw[len(raw) // 2] ^= 0xFF
    path.write_bytes(bytes(raw))
    try:
        ix, _ = LexicalIndex.load(path)
    except SnapshotError:
        ix = build()
    assert lexical_results(ix) == lexical_results(build())
