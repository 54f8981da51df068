"""A scope's topic summaries, those a snapshot held kept as it holds them.

Once the deriving worker has summarised every topic (gem/derived/pending.py), a snapshot of
100k topics holds 34 MB of summaries: in the state's JSON they cost an open 0.4 s of parsing
and ~120 MB of str and dict. Here they stay as the snapshot's UTF-8 blobs (the topics' ids,
with their hash keys, and the texts with their ends in bytes), a text decoded when its
topic's summary is read; writes and removals go to overlays, and a save writes the blobs back
as read when nothing changed.
"""
from __future__ import annotations

from collections.abc import Iterator, MutableMapping

import numpy as np

from ..errors import SnapshotError
from ..index.packed import PackedStrings, encode_strings, id_keys


class Summaries(MutableMapping[str, str]):
    """topic id -> summary."""

    def __init__(self, summaries: dict[str, str] | None = None) -> None:
        self._ids: PackedStrings | None = None  # as a snapshot held them
        self._texts: tuple[np.ndarray, np.ndarray] | None = None  # UTF-8, each text's end
        self._new: dict[str, str] = dict(summaries or {})  # written since (or all, unpacked)
        self._gone: set[str] = set()  # of the packed ones, removed or written since
        self._len = len(self._new)

    @classmethod
    def packed(cls, arrays: dict[str, np.ndarray], what: str) -> "Summaries":
        """Those a snapshot's `arrays()` held; SnapshotError (when read) if malformed."""
        out = cls()
        ids = PackedStrings(arrays["summary_ids_utf8"], arrays["summary_ids_offsets"], what)
        if "summary_ids_keys" in arrays:  # else computed when first needed
            ids.use_keys(arrays["summary_ids_keys"])
        blob, ends = arrays["summary_texts_utf8"], arrays["summary_texts_ends"]
        if ends.shape != (ids.n,) or (ids.n and (int(ends[-1]) != blob.shape[0] or
                                                 (np.diff(ends) < 0).any() or ends[0] < 0)):
            raise ValueError(f"{what}: the summaries do not match their topics")
        out._ids, out._texts, out._len = ids, (blob, ends), ids.n
        return out

    def _text(self, row: int) -> str:
        assert self._texts is not None
        blob, ends = self._texts
        start = int(ends[row - 1]) if row else 0
        try:
            return blob[start:int(ends[row])].tobytes().decode("utf-8", "surrogatepass")
        except UnicodeDecodeError as exc:
            raise SnapshotError(f"a summary in the snapshot is malformed: {exc}") from exc

    def _packed_row(self, tid: str) -> int | None:
        if self._ids is None or tid in self._gone:
            return None
        rows = self._ids.find(tid)
        return rows[0] if rows else None

    def __getitem__(self, tid: str) -> str:
        text = self._new.get(tid)
        if text is not None:
            return text
        row = self._packed_row(tid)
        if row is None:
            raise KeyError(tid)
        return self._text(row)

    def __contains__(self, tid: object) -> bool:
        return isinstance(tid, str) and (tid in self._new or self._packed_row(tid) is not None)

    def __setitem__(self, tid: str, text: str) -> None:
        if tid not in self._new:
            if self._packed_row(tid) is None:
                self._len += 1
            else:
                self._gone.add(tid)
        self._new[tid] = text

    def __delitem__(self, tid: str) -> None:
        if self._new.pop(tid, None) is None:
            if self._packed_row(tid) is None:
                raise KeyError(tid)
        self._gone.add(tid)
        self._len -= 1

    def __len__(self) -> int:
        return self._len

    def __iter__(self) -> Iterator[str]:
        if self._ids is not None:
            yield from (tid for tid in self._ids.all() if tid not in self._gone)
        yield from list(self._new)

    def arrays(self) -> dict[str, np.ndarray]:
        """What a snapshot saves (the blobs as read, when nothing was written since)."""
        if self._ids is not None and self._texts is not None and not self._new and not self._gone:
            ids, (text_blob, ends) = self._ids, self._texts
            return {"summary_ids_utf8": ids.blob, "summary_ids_offsets": ids.offsets,
                    "summary_ids_keys": ids.keys(), "summary_texts_utf8": text_blob,
                    "summary_texts_ends": ends}
        tids = list(self)
        id_blob, id_offsets = encode_strings(tids)
        # texts by their ends in bytes: a summary holds non-ASCII (default_summary's dash),
        # and finding a text by character offsets means reading the whole blob first
        encoded = [self[t].encode("utf-8", "surrogatepass") for t in tids]
        ends = np.cumsum(np.fromiter(map(len, encoded), dtype=np.int64, count=len(encoded)))
        return {"summary_ids_utf8": id_blob, "summary_ids_offsets": id_offsets,
                "summary_ids_keys": id_keys(id_blob, id_offsets),
                "summary_texts_utf8": np.frombuffer(b"".join(encoded), dtype=np.uint8),
                "summary_texts_ends": ends}
