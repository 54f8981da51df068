"""The snapshot file of a LexicalIndex: one segment, terms sorted, postings by term and by row."""
from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

import numpy as np

from gem.errors import SnapshotError

from . import postings
from .postings import FREE
from .packed import PackedIds, id_keys, packed_of
from .snapfile import encode_strings, read_snapshot_file, snapshot_strings, write_snapshot_file


def all_postings(ix: Any) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(term id, row, tf) of every live posting."""
    ts, rs, fs = [], [], []
    for seg in ix._segments:
        t = np.repeat(seg.terms, np.diff(seg.ptr))
        rows, t, tf = ix._live(seg, seg.rows, t, seg.tf)
        ts.append(t.astype(np.int64))
        rs.append(rows.astype(np.int64))
        fs.append(tf.astype(np.int64))
    for tid, p in ix._buf_post.items():
        ts.append(np.full(len(p), tid, dtype=np.int64))
        rs.append(np.fromiter(p.keys(), dtype=np.int64, count=len(p)))
        fs.append(np.fromiter(p.values(), dtype=np.int64, count=len(p)))
    if not ts:
        return (np.zeros(0, dtype=np.int64),) * 3  # type: ignore[return-value]
    return np.concatenate(ts), np.concatenate(rs), np.concatenate(fs)


def save(ix: Any, path: str | os.PathLike, stamp: Mapping[str, Any]) -> None:
    """Write this index to `path` (atomically), with the caller's JSON-able `stamp`.

    The file holds one segment: terms in sorted order, each term's postings in descending
    order of what they score now (the blocks a loaded index builds then bound tightly),
    and the same postings by row."""
    tids, rows, tf = all_postings(ix)
    live = np.unique(tids)
    terms = sorted(ix._vocab[t] for t in live.tolist())
    rank = np.zeros(max(len(ix._vocab), 1), dtype=np.int64)
    rank[[ix._term_id[t] for t in terms]] = np.arange(len(terms), dtype=np.int64)
    t = rank[tids]
    n_rows = len(ix._id_of_row)
    avgdl = max(ix.avgdl, 1e-9)
    f = tf.astype(np.float64)
    impact = f / (f + ix.k1 * (1.0 - ix.b + ix.b * ix._doc_len[rows] / avgdl))
    by_term = np.lexsort((rows, -impact, t))
    term_ptr = np.zeros(len(terms) + 1, dtype=np.int64)
    np.cumsum(np.bincount(t, minlength=len(terms)), out=term_ptr[1:])
    by_row = np.lexsort((t, rows))
    row_ptr = np.zeros(n_rows + 1, dtype=np.int64)
    np.cumsum(np.bincount(rows, minlength=n_rows), out=row_ptr[1:])
    packed = packed_of(ix._id_of_row)  # as it was read, if no id was written since
    if packed is not None:
        ids_utf8, ids_offsets, ids_keys = packed.packed_with_keys()
    else:
        ids_utf8, ids_offsets = encode_strings(ix._id_of_row)
        ids_keys = id_keys(ids_utf8, ids_offsets)
    terms_utf8, terms_offsets = encode_strings(terms)
    # a term's count in one document: 16 bits unless one is larger (half of 5.8 MB at 10k topics)
    tf_type = np.uint16 if not len(tf) or tf.max() < 2**16 else np.int32
    write_snapshot_file(path, "lexical", stamp,
                        {"k1": ix.k1, "b": ix.b, "analyzer": ix.analyzer,
                         "total_len": ix._total_len,
                         "rows": n_rows},
                        {"ids_utf8": ids_utf8, "ids_offsets": ids_offsets,
                         # each id's hash and row: a reader finds a row without decoding ids
                         "ids_keys": ids_keys,
                         "free_rows": np.asarray(ix._free_rows, dtype=np.int64),
                         "doc_len": ix._doc_len[:n_rows].astype(np.float64),
                         "terms_utf8": terms_utf8, "terms_offsets": terms_offsets,
                         "term_ptr": term_ptr, "post_rows": rows[by_term].astype(np.int32),
                         "post_tf": tf[by_term].astype(tf_type),
                         "row_ptr": row_ptr, "row_terms": t[by_row].astype(np.int32),
                         "row_tf": tf[by_row].astype(tf_type)})


def load(cls: Any, path: str | os.PathLike) -> tuple[Any, dict[str, Any]]:
    """(index, stamp) from a file written by save(); SnapshotError if it is unusable."""
    stamp, meta, a = read_snapshot_file(path, "lexical")
    try:
        ix = cls(meta["k1"], meta["b"], meta.get("analyzer", "tokens"))
        n_rows = int(meta["rows"])
        # the ids stay packed: a query decodes those of its hits (gem/index/packed.py); copies,
        # as every other array is copied into the segment below: a view would keep the whole
        # file mapped, and every page of it read here resident (121 MB at 100k topics)
        free = a["free_rows"].tolist()
        keys = PackedIds(f"lexical snapshot {str(path)!r}")
        saved_keys = a.get("ids_keys")
        keys.adopt_packed(a["ids_utf8"].copy(), a["ids_offsets"].copy(), n_rows,
                          None if saved_keys is None else saved_keys.copy(), free)
        ids = keys.ids
        terms = snapshot_strings(a, "terms")
        term_ptr, post_rows, post_tf = a["term_ptr"], a["post_rows"], a["post_tf"].astype(np.int32)
        row_ptr, row_terms = a["row_ptr"], a["row_terms"]
        n = post_rows.shape[0]
        if not (len(ids) == n_rows == a["doc_len"].shape[0] == row_ptr.shape[0] - 1
                and term_ptr.shape[0] == len(terms) + 1
                and term_ptr[-1] == n == post_tf.shape[0] == row_terms.shape[0]
                == row_ptr[-1]
                and (n == 0 or (0 <= post_rows.min() and post_rows.max() < n_rows
                                and 0 <= row_terms.min() and row_terms.max() < len(terms)
                                and post_tf.min() >= 1))):
            raise ValueError("array sizes disagree")
        if "row_tf" in a:
            row_tf = a["row_tf"].astype(np.int32)
            if row_tf.shape[0] != n:
                raise ValueError("array sizes disagree")
        else:  # a snapshot from before the forward index kept tfs
            t = np.repeat(np.arange(len(terms), dtype=np.int32), np.diff(term_ptr))
            by_row = np.lexsort((t, post_rows))
            row_terms, row_tf = t[by_row], post_tf[by_row]
        ix._row_of = keys.row_of
        if (np.diff(term_ptr) <= 0).any() or len(set(terms)) != len(terms):
            raise ValueError("empty or repeated terms")
        ix._id_of_row = ids
        ix._keys = None  # the first large tie reads them from the packed ids
        ix._free_rows = free
        ix._vocab = terms
        ix._term_id = {t: i for i, t in enumerate(terms)}
        ix._df = np.zeros(max(64, len(terms)), dtype=np.int64)
        ix._df[:len(terms)] = np.diff(term_ptr)
        size = max(16, n_rows)
        ix._doc_len = np.zeros(size, dtype=np.float64)
        ix._doc_len[:n_rows] = a["doc_len"]
        ix._owner = np.full(size, FREE, dtype=np.int32)
        ix._pos = np.zeros(size, dtype=np.int32)
        ix._total_len = int(meta["total_len"])
        if n_rows:
            seg = postings.build(ix._next_id(), np.arange(len(terms), dtype=np.int32),
                                 term_ptr, post_rows, post_tf,
                                 np.arange(n_rows, dtype=np.int32), row_ptr, row_terms,
                                 row_tf, ix._doc_len, ix._BLOCK)
            seg.live_docs = n_rows - len(free)
            ix._adopt(seg, [])
            ix._owner[np.asarray(free, dtype=np.int64)] = FREE
    except SnapshotError:
        raise
    except (KeyError, ValueError, TypeError) as e:
        raise SnapshotError(f"snapshot {str(path)!r} is inconsistent: {e}") from e
    return ix, stamp
