"""The unit documents as UTF-8 in one buffer (gem/derived/text_column.py): a column of texts
by row that reads and saves what a list of str would, without a str object per row."""
import random

import numpy as np
import pytest

from gem.derived.tables import UnitIndexes
from gem.derived.text_column import TextColumn
from gem.embed import HashingEmbedder
from gem.errors import SnapshotError
from gem.index.packed import encode_strings

WORDS = ["deadline", "größe", "日本語", "\ud800", "", "a", "Ünïcode ✓", "\udc00x"]


def _text(rnd: random.Random) -> str | None:
    if rnd.random() < 0.15:
        return None
    return " ".join(rnd.choice(WORDS) for _ in range(rnd.randrange(0, 6)))


def _saved(model: list[str | None]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    blob, offsets = encode_strings([t or "" for t in model])
    return blob, offsets, np.asarray([t is not None for t in model], dtype=np.uint8)


def _same(got, want) -> None:
    for a, b in zip(got, want):
        assert a.dtype == b.dtype and np.array_equal(a, b)


@pytest.mark.parametrize("seed", range(4))
def test_a_column_reads_and_saves_what_a_list_of_texts_would_through_rewrites(seed):
    rnd = random.Random(seed)
    column = TextColumn("test")
    model: list[str | None] = []
    for step in range(3000):
        if not model or rnd.random() < 0.1:
            grow = rnd.randrange(1, 40)
            column.grow(len(model) + grow)
            model.extend([None] * grow)
        row = rnd.randrange(len(model))
        model[row] = _text(rnd)
        column[row] = model[row]
        if step % 500 == 0:
            assert [column[r] for r in range(len(model))] == model
    assert len(column) == len(model)
    assert [column[r] for r in range(len(model))] == model
    assert column.used - column.garbage <= sum(len((t or "").encode("utf-8", "surrogatepass"))
                                               for t in model)
    _same(column.packed(), _saved(model))
    with pytest.raises(IndexError):
        column[len(model)]
    with pytest.raises(IndexError):
        column[len(model)] = "x"


@pytest.mark.parametrize("seed", range(3))
def test_an_adopted_snapshot_is_read_as_saved_and_saved_again_with_what_was_written_since(seed):
    rnd = random.Random(seed)
    model = [_text(rnd) for _ in range(400)]
    saved = _saved(model)
    column = TextColumn.adopted(*saved, "test")
    assert [column[r] for r in range(len(model))] == model
    assert all(a is b for a, b in zip(column.packed()[:2], saved[:2]))  # unchanged: as read
    _same(column.packed(), saved)
    for _ in range(300):
        if rnd.random() < 0.1:
            column.grow(len(model) + 3)
            model.extend([None] * 3)
        row = rnd.randrange(len(model))
        model[row] = _text(rnd)
        column[row] = model[row]
    assert [column[r] for r in range(len(model))] == model
    _same(column.packed(), _saved(model))
    again = TextColumn.adopted(*column.packed(), "test")
    assert [again[r] for r in range(len(model))] == model


def test_a_snapshot_whose_rows_disagree_is_refused():
    blob, offsets, has = _saved(["a", "b"])
    with pytest.raises(SnapshotError):
        TextColumn.adopted(blob, offsets, has[:1], "test")


def test_unit_documents_hold_their_bytes_not_an_object_per_unit():
    units = UnitIndexes(HashingEmbedder())
    text = "value {} of a field, with a few words"
    for rewrite in range(3):
        for i in range(2000):
            units.put(f"t{i}/f0", text.format(i + rewrite), float(i))
    texts = units.columns.texts
    assert units.docs["t7/f0"] == text.format(9)
    live = sum(len(text.format(i + 2)) for i in range(2000))
    # the bytes, a start and a size a row, and room to grow (a list of str: ~100 bytes a row)
    assert texts.data.nbytes + texts.start.nbytes + texts.size.nbytes < 1.6 * live + 2000 * 16
    assert not any(isinstance(v, (list, dict)) for v in vars(texts).values())
