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
