"""A commit acknowledged to a process is in the log after a restart, or the open fails
loudly (`<db>.gem-head` records the acknowledged head; gem/store/owner.py)."""
from __future__ import annotations

import os
import shutil

import pytest

import gem
from conftest import ENGINE
from gem.store.compact import DB_SUFFIXES

pytestmark = pytest.mark.skipif(ENGINE == "falkordb", reason="an embedded database's files")


def fact(n: int) -> gem.Fact:
    return gem.Fact(f"Topic {n}", "note", f"value {n}")


def recorded_head(path: str) -> tuple[int, str]:
    with open(path + ".gem-head", "rb") as f:
        words = f.read().rstrip(b"\0").decode().split()
    return int(words[2].removeprefix("seq=")), words[3].removeprefix("hash=")


def move_files(src: str, dst: str) -> None:
    for suffix in DB_SUFFIXES:
        if os.path.exists(dst + suffix):
            os.remove(dst + suffix)
        if os.path.exists(src + suffix):
            shutil.copyfile(src + suffix, dst + suffix)


def test_old_files_put_back_fail_the_open_loudly_until_accepted(tmp_path, clock):
    path, aside = str(tmp_path / "db.kz"), str(tmp_path / "aside.kz")
    with gem.open(path, clock=clock, engine=ENGINE) as mem:
        mem.ingest(fact(1))
        kept = mem.head()
    move_files(path, aside)  # a copy taken while the database is closed
    with gem.open(path, clock=clock, engine=ENGINE) as mem:
        mem.ingest(fact(2))
        mem.ingest(fact(3))
        lost = mem.head()
    assert recorded_head(path) == (lost["seq"], lost["hash"])
    move_files(aside, path)  # the old files back: two acknowledged commits are gone
    for suffix in DB_SUFFIXES:
        if os.path.exists(aside + suffix):
            os.remove(aside + suffix)

    with pytest.raises(gem.LostCommits) as failed:
        gem.open(path, clock=clock, engine=ENGINE)
    assert failed.value.seq == lost["seq"] and failed.value.path == os.path.abspath(path)
    message = str(failed.value)
    assert f"transition {lost['seq']}" in message and f"ends at transition {kept['seq']}" in message
    assert "accept_head=True" in message
    with pytest.raises(gem.LostCommits):  # refused again: nothing was accepted by the failure
        gem.open(path, clock=clock, engine=ENGINE)

    with gem.open(path, clock=clock, engine=ENGINE, accept_head=True) as mem:
        assert mem.head() == kept
        assert mem.inspect("Topic 2") is None
        assert mem.audit(full=True).ok
        mem.ingest(fact(4))
        now = mem.head()
    with gem.open(path, clock=clock, engine=ENGINE) as mem:  # accepted for good
        assert mem.head() == now


def test_a_log_whose_record_at_the_acknowledged_seq_differs_fails_the_open(tmp_path, clock):
    path = str(tmp_path / "db.kz")
    with gem.open(path, clock=clock, engine=ENGINE) as mem:
        mem.ingest(fact(1))
        seq = mem.head()["seq"]
    # As if the acknowledged transition was lost and another one took its seq.
    with open(path + ".gem-head", "r+b") as f:
        f.write(f"gem-head 1 seq={seq} hash={'ab' * 32}\n".encode())
    with pytest.raises(gem.LostCommits, match=f"transition {seq} is another one"):
        gem.open(path, clock=clock, engine=ENGINE)


def test_an_unreadable_head_record_fails_the_open(tmp_path, clock):
    path = str(tmp_path / "db.kz")
    with gem.open(path, clock=clock, engine=ENGINE) as mem:
        mem.ingest(fact(1))
    with open(path + ".gem-head", "r+b") as f:
        f.write(b"garbage")
    with pytest.raises(gem.LostCommits) as failed:
        gem.open(path, clock=clock, engine=ENGINE)
    assert failed.value.seq is None
    gem.open(path, clock=clock, engine=ENGINE, accept_head=True).close()


def test_a_new_database_where_a_deleted_one_was_starts_a_new_head(tmp_path, clock):
    path = str(tmp_path / "db.kz")
    with gem.open(path, clock=clock, engine=ENGINE) as mem:
        mem.ingest([fact(1), fact(2)])
        mem.ingest(fact(3))
    for suffix in DB_SUFFIXES:
        if os.path.exists(path + suffix):
            os.remove(path + suffix)
    shutil.rmtree(path + ".gem-derived", ignore_errors=True)
    with gem.open(path, clock=clock, engine=ENGINE) as mem:  # the head file is left: no matter
        assert recorded_head(path) == (mem.head()["seq"], mem.head()["hash"])


def test_compaction_keeps_the_head(tmp_path, clock):
    path = str(tmp_path / "db.kz")
    with gem.open(path, clock=clock, engine=ENGINE) as mem:
        mem.ingest([fact(1), fact(2)])
        mem.erase("Topic 1", reason="test")
        mem.compact()
        assert recorded_head(path) == (mem.head()["seq"], mem.head()["hash"])
        mem.ingest(fact(3))
        head = mem.head()
    with gem.open(path, clock=clock, engine=ENGINE) as mem:
        assert mem.head() == head and mem.audit(full=True).ok


def test_erasure_keeps_the_head(tmp_path, clock):
    path = str(tmp_path / "db.kz")
    with gem.open(path, clock=clock, engine=ENGINE) as mem:
        mem.ingest(gem.Fact("Ann", "phone", "555-0101", source="chat:1"))
        mem.ingest(fact(1))
        mem.erase("Ann", reason="test")  # redacts the records that held the value; their hashes stay
        head = mem.head()
        assert recorded_head(path) == (head["seq"], head["hash"])
    with gem.open(path, clock=clock, engine=ENGINE) as mem:
        assert mem.head() == head and mem.audit(full=True).ok


def test_an_import_carries_the_head_of_its_export(tmp_path, clock):
    path, copy, dump = str(tmp_path / "db.kz"), str(tmp_path / "copy.kz"), str(tmp_path / "x.jsonl")
    with gem.open(path, clock=clock, engine=ENGINE) as mem:
        mem.ingest([fact(1), fact(2)])
        mem.export(dump)
        head = mem.head()
    report = gem.import_jsonl(dump, copy, engine=ENGINE)
    assert report.head == head
    assert recorded_head(copy) == (head["seq"], head["hash"])
    assert not os.path.exists(copy + ".importing.gem-head")
    with gem.open(copy, clock=clock, engine=ENGINE) as mem:
        mem.ingest(fact(3))
        after = mem.head()
    with gem.open(copy, clock=clock, engine=ENGINE) as mem:
        assert mem.head() == after


def test_an_export_or_import_never_opens_a_file_of_a_database_open_here(tmp_path, clock):
    path, dump = str(tmp_path / "db.kz"), str(tmp_path / "x.jsonl")
    with gem.open(path, clock=clock, engine=ENGINE) as mem:
        mem.ingest(fact(1))
        for target in (path, path + ".wal", path + ".gem-head"):
            with pytest.raises(gem.InvalidInput, match="open in this process"):
                mem.export(target)
            with pytest.raises(gem.InvalidInput, match="open in this process"):
                gem.import_jsonl(target, str(tmp_path / "new.kz"), engine=ENGINE)
        mem.export(dump)
        with pytest.raises(gem.InvalidInput, match="open in this process"):
            gem.import_jsonl(dump, path, engine=ENGINE)
        assert mem.audit(full=True).ok
    assert not os.path.exists(str(tmp_path / "new.kz"))
