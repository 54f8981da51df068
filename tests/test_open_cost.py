"""Opening a memory costs the same whatever its size: it reads the snapshot and the log
records after it, not the rows of every unit (issue 28 item 6). Counted in rows the engine
hands back, not in time."""
from __future__ import annotations

import os
import tempfile

import pytest

import gem
from conftest import ENGINE
from gem.store import graph


def _rows_read_at_open(topics: int, monkeypatch) -> int:
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "m")
        mem = gem.open(path, engine=ENGINE)
        step = topics // 3  # as many transitions at either size
        for start in range(0, topics, step):
            mem.ingest([gem.Fact(f"Topic {i}", f"field {j}", f"value {i}.{j}")
                        for i in range(start, start + step) for j in range(3)])
        # Nothing is pending at close (an ingest writes its units' salience with them): the
        # stored columns must still say they are current, or the next open replays the log.
        mem.close()
        counted = [0]
        rows = graph._rows

        def counting(result, times=None):
            for row in rows(result, times):
                counted[0] += 1
                yield row

        with monkeypatch.context() as m:
            m.setattr(graph, "_rows", counting)
            mem = gem.open(path, engine=ENGINE)
        try:
            assert mem.retrieve(topic=f"Topic {topics - 1}").topics  # the state is all there
        finally:
            mem.close()
        return counted[0]


@pytest.mark.skipif(ENGINE == "falkordb", reason="a FalkorDB memory keeps no snapshot")
def test_open_reads_as_many_rows_at_30_topics_as_at_300(monkeypatch):
    assert _rows_read_at_open(30, monkeypatch) == _rows_read_at_open(300, monkeypatch)


def test_open_builds_no_policy_parser_from_the_grammar(monkeypatch, tmp_path):
    # Building the LALR parser from the grammar cost ~1 s of every open (its terminals are
    # compared pairwise): an open loads the shipped tables instead (gem/policy/grammar.py).
    import lark

    from gem.policy import grammar
    path = str(tmp_path / "m")
    with gem.open(path, engine=ENGINE) as mem:
        mem.ingest([gem.Fact("Topic", "field", "value")])
    built = [0]
    init = lark.Lark.__init__

    def counting(self, *args, **kwargs):
        built[0] += 1
        init(self, *args, **kwargs)

    grammar.lark_parser.cache_clear()  # as in a fresh process
    monkeypatch.setattr(lark.Lark, "__init__", counting)
    with gem.open(path, engine=ENGINE) as mem:
        assert mem.retrieve(topic="Topic").topics
    assert built[0] == 0


def _count_whole_decodes(m, built: list[int], terms_too: bool) -> None:
    """Add to built[0] the strings of ids and documents decoded as whole tables, with
    `terms_too` also those snapfile decodes (a lexical index's terms, the summaries' tables),
    and the names the name directory indexes."""
    from gem.derived import tables
    from gem.index import packed, snapfile
    decode, fill = packed.decode_strings, tables.NameDirectory._fill

    def decoding(blob, offsets):
        out = decode(blob, offsets)
        built[0] += len(out)
        return out

    def filling(self, names_of, keys_of):
        built[0] += len(names_of)
        fill(self, names_of, keys_of)

    for module in (packed, snapfile) if terms_too else (packed,):
        m.setattr(module, "decode_strings", decoding)
    m.setattr(tables.NameDirectory, "_fill", filling)


def _items_built_at_open(topics: int, monkeypatch) -> int:
    from gem import snapshot
    from gem.index import LexicalIndex
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "m")
        with gem.open(path, engine=ENGINE) as mem:
            mem.ingest([gem.Fact(f"Topic {i}", f"field {j}", f"value {i}.{j}")
                        for i in range(topics) for j in range(3)])
            mem.retrieve("value 1.1")  # summaries, search documents: all derived and saved
        built = [0]
        touches, lexical = snapshot.Touches.build, LexicalIndex.load.__func__

        def building(self):
            out = touches(self)
            built[0] += len(out)
            return out

        def loading(cls, file):
            ix, stamp = lexical(cls, file)
            built[0] += len(ix)
            return ix, stamp

        with monkeypatch.context() as m:
            _count_whole_decodes(m, built, terms_too=True)
            m.setattr(snapshot.Touches, "build", building)
            m.setattr(LexicalIndex, "load", classmethod(loading))
            mem = gem.open(path, engine=ENGINE)
            at_open = built[0]
            try:  # what was left packed is still all there when first used
                assert mem.retrieve(topic=f"Topic {topics - 1}").topics
                assert built[0] > at_open
            finally:
                mem.close()
        return at_open


@pytest.mark.skipif(ENGINE == "falkordb", reason="a FalkorDB memory keeps no snapshot")
def test_open_builds_as_many_ids_names_and_lists_at_30_topics_as_at_300(monkeypatch):
    # Unit ids, titles' ids, the name directory, each topic's log records and the summary
    # index are kept as the snapshot has them until first used (gem/snapshot.py): decoding
    # and putting them into dicts was most of an open at 100k topics (issue 28 item 6).
    assert _items_built_at_open(30, monkeypatch) == _items_built_at_open(300, monkeypatch)


@pytest.mark.skipif(ENGINE == "falkordb", reason="an embedded memory in a child process")
def test_pyarrow_is_loaded_by_a_full_audit_and_nothing_else(tmp_path):
    """pyarrow holds ~60 MB resident once imported: only the full audit's reads of whole
    tables use it (gem/audit_tables.py), so an agent's process that opens, writes, searches,
    forgets and audits incrementally never pays for it."""
    import subprocess
    import sys
    path = str(tmp_path / "m")
    first = f"""
import gem
with gem.open({path!r}, engine={ENGINE!r}) as mem:
    mem.ingest([gem.Fact("Website Redesign", "deadline", "March 15")])
    assert mem.audit(full=True).ok  # a clean audit: the next one is incremental
"""
    later = f"""
import sys, gem
mem = gem.open({path!r}, engine={ENGINE!r})
mem.ingest([gem.Fact("Website Redesign", "deadline", "April 20")])
mem.retrieve("redesign deadline")
mem.retrieve(topic="Website Redesign")
mem.forget()
assert mem.audit().ok
print("pyarrow" in sys.modules)
assert mem.audit(full=True).ok
print("pyarrow" in sys.modules)
mem.close()
"""
    subprocess.run([sys.executable, "-c", first], capture_output=True, text=True, check=True)
    out = subprocess.run([sys.executable, "-c", later], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["False", "True"]


def _whole_tables_decoded_by_first_search(topics: int, monkeypatch) -> tuple[int, int]:
    """(items decoded whole, field ids decoded) by the first free-text query after an open."""
    from gem.index import packed
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "m")
        with gem.open(path, engine=ENGINE) as mem:
            mem.ingest([gem.Fact(f"Topic {i}", f"field {j}", f"value {i}.{j}")
                        for i in range(topics) for j in range(3)])
            mem.retrieve("value 1.1")  # the unit layer derived and saved with the rest
        built, rows = [0], [0]
        one = packed.PackedStrings.__getitem__

        def reading(self, i):
            rows[0] += 1
            return one(self, i)

        with monkeypatch.context() as m:
            _count_whole_decodes(m, built, terms_too=False)
            m.setattr(packed.PackedStrings, "__getitem__", reading)
            mem = gem.open(path, engine=ENGINE)
            try:
                found = mem.retrieve(f"value {topics - 1}.2", k=3)
                counts = built[0], rows[0]  # (a save at close writes what changed)
                assert f"Topic {topics - 1}" in [t.title for t in found.topics]
            finally:
                mem.close()
        return counts


@pytest.mark.skipif(ENGINE == "falkordb", reason="a FalkorDB memory keeps no snapshot")
def test_the_first_free_text_query_after_an_open_decodes_no_table_of_ids_or_documents_whole(
        monkeypatch):
    # Decoding the unit layer's 1M ids and documents, the field table's ids and indexing the
    # name directory was most of the first query after an open at 100k topics (4.9 s against
    # 75 ms for later ones): a query decodes the rows it reads (gem/index/packed.py).
    small, large = (_whole_tables_decoded_by_first_search(n, monkeypatch) for n in (30, 300))
    assert small[0] == large[0] == 0
    assert large[1] < 3 * 300  # rows read one at a time: not one per field
