"""The snapshot file format of gem's derived indexes: a preamble, a JSON header, raw arrays, a CRC."""
from __future__ import annotations

import json
import math
import mmap
import os
import zlib
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

from gem.errors import InvalidInput, SnapshotError

from .packed import PackedIds, decode_strings, encode_strings

__all__ = ["PackedIds", "decode_strings", "encode_strings", "read_snapshot_file", "snapshot_strings",
           "write_snapshot_file"]

# ---------------------------------------------------------------------- snapshot files
#
# One file per index: a fixed preamble, a JSON header, then raw little-endian arrays, each
# starting on a 64-byte boundary, then a CRC-32 of everything before it.
#
#   b"GEMSNAP\0" | u32 format version | u32 header length | header | pad | arrays | pad | u32 crc
#
# Only plain numeric arrays and JSON are read back: no pickle, so a file beside a database
# can be corrupted but cannot run code. The CRC is for torn and damaged files, not for
# tampering (the database, not the snapshot, is what gem trusts).

_MAGIC = b"GEMSNAP\0"
_FORMAT_VERSION = 1
_ALIGN = 64
_DTYPES = {"<f2", "<f4", "<f8", "<i4", "<i8", "|u1", "<u2", "<u8"}  # the only element types a snapshot holds


def _pad(n: int) -> int:
    return -n % _ALIGN


def _check_stamp(stamp: object) -> dict[str, Any]:
    if not isinstance(stamp, Mapping) or not all(isinstance(k, str) for k in stamp):
        raise InvalidInput("a snapshot stamp must be a dict with str keys")
    stamp = dict(stamp)
    try:
        json.dumps(stamp, allow_nan=False)
    except (TypeError, ValueError) as e:
        raise InvalidInput(f"a snapshot stamp must be plain JSON: {e}") from e
    return stamp


def write_snapshot_file(path: str | os.PathLike, kind: str, stamp: Mapping[str, Any],
                        meta: dict[str, Any], arrays: dict[str, np.ndarray]) -> None:
    """Write the file atomically: a temp file beside it, fsync'ed, then renamed over it."""
    stamp = _check_stamp(stamp)
    layout = []
    offset = 0
    for name, a in arrays.items():
        a = np.ascontiguousarray(a)
        dt = a.dtype.newbyteorder("<") if a.dtype.byteorder == ">" else a.dtype
        arrays[name] = a.astype(dt, copy=False)
        if arrays[name].dtype.str not in _DTYPES:
            raise AssertionError(f"snapshot array {name} has dtype {a.dtype}")
        layout.append({"name": name, "dtype": arrays[name].dtype.str, "shape": list(a.shape),
                       "offset": offset, "nbytes": a.nbytes})
        offset += a.nbytes + _pad(a.nbytes)
    header = json.dumps({"kind": kind, "stamp": stamp, "meta": meta, "arrays": layout},
                        ensure_ascii=True, allow_nan=False).encode("ascii")
    preamble = _MAGIC + _FORMAT_VERSION.to_bytes(4, "little") + len(header).to_bytes(4, "little")
    head = preamble + header
    head += b"\0" * _pad(len(head))
    path = Path(path)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    crc = zlib.crc32(head)
    try:
        with open(tmp, "wb") as f:
            f.write(head)
            for a in arrays.values():
                data = a.reshape(-1).tobytes() if a.size else b""
                f.write(data)
                crc = zlib.crc32(data, crc)
                pad = b"\0" * _pad(a.nbytes)
                f.write(pad)
                crc = zlib.crc32(pad, crc)
            f.write(crc.to_bytes(4, "little"))
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    try:  # make the rename itself durable (POSIX; directories cannot be opened on Windows)
        fd = os.open(path.parent, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


_CRC_PIECE = 1 << 20  # bytes read at a time to check a file's CRC


def _crc_of(f: Any, size: int) -> int:
    """CRC-32 of the first `size` bytes of an open file (-1 if it has fewer)."""
    crc, done = 0, 0
    piece = bytearray(min(_CRC_PIECE, max(size, 0)))
    view = memoryview(piece)
    f.seek(0)
    while done < size:
        got = f.readinto(view[:min(len(piece), size - done)])
        if not got:
            return -1
        crc = zlib.crc32(view[:got], crc)
        done += got
    return crc


def read_snapshot_file(path: str | os.PathLike, kind: str
                       ) -> tuple[dict[str, Any], dict[str, Any], dict[str, np.ndarray]]:
    """(stamp, meta, arrays) of a snapshot of this kind; SnapshotError if it is not one.

    The arrays are writable views of one buffer holding the file's bytes (an index can adopt
    its largest arrays instead of copying them: at 1M unit vectors, 1.4 GB). On POSIX that
    buffer is a private (copy-on-write) mapping of the file: reading 500 MB of unit files into
    a fresh buffer was 1 s of the first query after an open at 100k topics, twice what
    mapping them and checking their CRC costs. A snapshot file is never rewritten in place
    (`write_snapshot_file` renames a new one over it), so the mapping stays whole.

    The CRC is computed over the file read a piece at a time, not over the mapping: a page
    of a mapping read once stays in the process's RSS for as long as it is mapped (at 10k
    topics 47 MB of unit files after the first query, most of which no query reads again).
    """
    data: bytearray | mmap.mmap
    crc: int | None = None
    try:
        with open(path, "rb") as f:
            size = os.fstat(f.fileno()).st_size
            if os.name == "posix" and size:
                data = mmap.mmap(f.fileno(), size, access=mmap.ACCESS_COPY)
                crc = _crc_of(f, size - 4)
            else:  # elsewhere a mapped file cannot be removed or replaced: a copy
                data = bytearray(size)
                if f.readinto(data) != len(data):
                    raise OSError("the file shrank while it was read")
    except (OSError, ValueError) as e:
        raise SnapshotError(f"cannot read snapshot {str(path)!r}: {e}") from e
    where = f"snapshot {str(path)!r}"
    if len(data) < 20 or data[:8] != _MAGIC:
        raise SnapshotError(f"{where} is not a gem index snapshot")
    version = int.from_bytes(data[8:12], "little")
    if version != _FORMAT_VERSION:
        raise SnapshotError(f"{where} has format version {version}, this gem reads "
                            f"{_FORMAT_VERSION}")
    if crc is None:
        crc = zlib.crc32(memoryview(data)[:-4])
    if crc != int.from_bytes(data[-4:], "little"):
        raise SnapshotError(f"{where} is truncated or corrupted (checksum mismatch)")
    header_len = int.from_bytes(data[12:16], "little")
    try:
        header = json.loads(data[16 : 16 + header_len].decode("ascii"))
        if header["kind"] != kind:
            raise SnapshotError(f"{where} holds a {header['kind']} index, not a {kind} index")
        base = 16 + header_len + _pad(16 + header_len)
        arrays = {}
        for a in header["arrays"]:
            if a["dtype"] not in _DTYPES:
                raise ValueError(f"dtype {a['dtype']!r}")
            dt = np.dtype(a["dtype"])
            shape = tuple(int(d) for d in a["shape"])
            count = math.prod(shape)
            start = base + int(a["offset"])
            if count * dt.itemsize != a["nbytes"] or start + a["nbytes"] > len(data) - 4:
                raise ValueError(f"array {a['name']!r} does not fit the file")
            arrays[a["name"]] = np.frombuffer(data, dtype=dt, count=count,
                                              offset=start).reshape(shape)
        return header["stamp"], header["meta"], arrays
    except SnapshotError:
        raise
    except (ValueError, KeyError, TypeError, UnicodeDecodeError) as e:
        raise SnapshotError(f"{where} has a malformed header: {e}") from e


def snapshot_strings(arrays: dict[str, np.ndarray], name: str) -> list[str]:
    try:
        return decode_strings(arrays[f"{name}_utf8"], arrays[f"{name}_offsets"])
    except (KeyError, ValueError, UnicodeDecodeError) as e:
        raise SnapshotError(f"snapshot string table {name!r} is malformed: {e}") from e
