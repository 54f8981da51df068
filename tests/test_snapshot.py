"""The derived-state snapshot beside the database: loaded when current, caught up from the log
when behind, rebuilt when missing or unusable, and never a source of different answers."""
from __future__ import annotations

import json
import os
import shutil

import pytest

import gem
import gem.snapshot
from conftest import ENGINE, evict_rows
from gem.derived import snapshot_dir
from gem.derived.summaries import Summaries
from gem.testing.consistency import cache_disagreements, derived_disagreements

QUERIES = ["deadline of the website redesign", "lunch preferences", "launch date", "owner"]


def seed(mem: gem.Memory, clock) -> None:
    mem.ingest([gem.Fact("Website Redesign", "deadline", "March 15"),
                gem.Fact("Website Redesign", "owner", "Alice"),
                gem.Fact("Lunch", "preferences", "sushi on Fridays", labels=["pii"]),
                gem.Fact("Launch Milestones", "launch date", "March 20")])
    mem.link("Website Redesign", "Launch Milestones")
    clock.advance(days=2)
    mem.ingest(gem.Fact("Website Redesign", "deadline", "April 20"))
    mem.ingest([gem.Episode("We moved the redesign deadline to April 20", speaker="Alice",
                            at=clock.now, source="chat:7"),
                gem.Episode("Sushi again on Friday?", speaker="Bob", source="chat:8")])
    mem.retrieve("deadline")


def answers(mem: gem.Memory) -> list:
    """What a caller would see, read without changing anything (no reinforcement)."""
    engine = mem._engine
    out = []
    for q in QUERIES:
        from gem.operators.retrieve import rank_units
        hits = engine.read(lambda t: (t.committed.refresh_units(t.cache),
                                      rank_units(t, q, 5, False, None, 0.05, 0.45))[1])
        out.append(hits)
    for title in ("Website Redesign", "Lunch", "Launch Milestones"):
        view = mem.inspect(title)
        out.append(view.model_dump(mode="json") if view else None)
    return out


def reopen(path, clock, progress=None):
    return gem.open(path, clock=clock, engine=ENGINE, progress=progress)


def reopened_answers(path: str, clock, steps_wanted: list[str]) -> list:
    """Open again and check what opening did (the progress steps it reported) and that the
    state it reached agrees with the database; what a caller sees then."""
    steps: list[str] = []
    with reopen(path, clock, progress=lambda step, done, total: steps.append(step)) as mem:
        assert steps == steps_wanted
        assert derived_disagreements(mem) == [] and cache_disagreements(mem) == []
        return answers(mem)


def test_a_current_snapshot_is_loaded_not_rebuilt(tmp_path, clock):
    path = str(tmp_path / "db")
    with reopen(path, clock) as mem:
        seed(mem, clock)
        before = answers(mem)
    meta = json.loads(open(os.path.join(snapshot_dir(path), "meta.json")).read())
    steps = []
    with reopen(path, clock, progress=lambda step, done, total: steps.append(step)) as mem:
        assert meta["seq"] == mem.stats()["transitions"]
        assert steps == []                         # nothing rebuilt, nothing to catch up
        assert answers(mem) == before
        assert derived_disagreements(mem) == [] and cache_disagreements(mem) == []


def test_closing_after_reads_alone_does_not_write_the_snapshot_again(tmp_path, clock):
    path = str(tmp_path / "db")
    with reopen(path, clock) as mem:
        seed(mem, clock)
    meta_file = os.path.join(snapshot_dir(path), "meta.json")

    def generation() -> int:
        return json.loads(open(meta_file).read())["generation"]
    written = generation()
    with reopen(path, clock) as mem:
        mem.inspect("Website Redesign")
        mem.history("Website Redesign", "deadline")
    assert generation() == written                 # nothing it describes changed
    with reopen(path, clock) as mem:
        mem.audit()                                # a clean audit is a new checkpoint
    assert generation() == written + 1
    with reopen(path, clock) as mem:
        mem.retrieve("deadline")                   # a transition
    assert generation() == written + 2
    with reopen(path, clock) as mem:
        assert answers(mem)
        assert derived_disagreements(mem) == [] and cache_disagreements(mem) == []


def seeded_snapshot(tmp_path, clock) -> tuple[str, object, str, str, dict]:
    """A seeded memory closed with its snapshot: (path, its answers, the snapshot folder, the
    path of its meta.json, what that says)."""
    path = str(tmp_path / "db")
    with reopen(path, clock) as mem:
        seed(mem, clock)
        before = answers(mem)
    folder = snapshot_dir(path)
    meta_path = os.path.join(folder, "meta.json")
    return path, before, folder, meta_path, json.loads(open(meta_path).read())


@pytest.mark.parametrize("damage", ["deleted", "meta torn", "index corrupted", "other embedder",
                                    "another database's", "an older format"])
def test_an_unusable_snapshot_means_a_rebuild_with_identical_answers(tmp_path, clock, damage):
    path, before, folder, meta_path, meta = seeded_snapshot(tmp_path, clock)
    if damage == "deleted":
        shutil.rmtree(folder)
    elif damage == "meta torn":
        open(meta_path, "w").write(json.dumps(meta)[:40])
    elif damage == "index corrupted":
        target = os.path.join(folder, meta["files"]["scopes"]["default"]["vectors"])
        data = bytearray(open(target, "rb").read())
        data[len(data) // 2] ^= 0xFF
        open(target, "wb").write(bytes(data))
    elif damage == "other embedder":
        open(meta_path, "w").write(json.dumps({**meta, "embedder": "hashing-128-v1"}))
    elif damage == "an older format":  # one gem no longer reads: rebuilt
        open(meta_path, "w").write(json.dumps({**meta, "format": min(gem.snapshot.READS) - 1}))
    else:  # a snapshot copied from a database with another history
        other = str(tmp_path / "other")
        with reopen(other, clock) as mem:
            mem.ingest(gem.Fact("Something else", "x", 1))
            for _ in range(8):
                mem.retrieve("x")
        shutil.rmtree(folder)
        shutil.copytree(snapshot_dir(other), folder)
    steps = []
    with reopen(path, clock, progress=lambda step, done, total: steps.append(step)) as mem:
        assert "index titles" in steps             # rebuilt from the database
        assert answers(mem) == before
        assert derived_disagreements(mem) == []


def test_a_format_6_snapshot_is_read_and_its_field_lists_ignored(tmp_path, clock):
    """Format 6 saved each topic's field list; format 7 derives it from the field table. A
    format-6 snapshot is read (not rebuilt), whatever its lists say."""
    path, before, folder, meta_path, meta = seeded_snapshot(tmp_path, clock)
    state_path = os.path.join(folder, meta["files"]["state"])
    state = json.loads(open(state_path).read())
    for part in state["scopes"].values():
        part["fields_by_topic"] = {"t1": ["t1/not a field"]}
    open(state_path, "w").write(json.dumps(state))
    open(meta_path, "w").write(json.dumps({**meta, "format": 6}))
    steps = []
    with reopen(path, clock, progress=lambda step, done, total: steps.append(step)) as mem:
        assert "index titles" not in steps  # loaded, not rebuilt
        assert answers(mem) == before
        assert derived_disagreements(mem) == []


def test_names_are_saved_as_one_json_text_and_a_format_8_snapshot_of_lists_is_still_read(
        tmp_path, clock):
    """Format 9 keeps each scope's names as a JSON text inside the state's JSON (parsed when
    a name is first looked up, not at open); format 8's list of rows is read, not rebuilt."""
    path, before, folder, meta_path, meta = seeded_snapshot(tmp_path, clock)
    state_path = os.path.join(folder, meta["files"]["state"])
    state = json.loads(open(state_path).read())
    part = state["scopes"]["default"]
    assert isinstance(part["names"], str)
    assert not [n for n in part["open_flags"].values() if n == 0]
    part["names"] = json.loads(part["names"])
    part["open_flags"].update({tid: 0 for tid, _, _ in part["names"]  # as format 8 had them
                               if tid not in part["open_flags"]})
    open(state_path, "w").write(json.dumps(state))
    open(meta_path, "w").write(json.dumps({**meta, "format": 8}))
    steps = []
    with reopen(path, clock, progress=lambda step, done, total: steps.append(step)) as mem:
        assert "index titles" not in steps  # loaded, not rebuilt
        assert answers(mem) == before
        assert derived_disagreements(mem) == [] and cache_disagreements(mem) == []


def test_the_tables_file_keeps_ids_as_utf8_and_a_format_7_one_is_still_read(tmp_path, clock):
    """Format 8 writes the tables' ids as UTF-8 and offsets (numpy's fixed-width strings take
    4 bytes a character) and row numbers in 32 bits; a format-7 file is read, not rebuilt."""
    import numpy as np

    path, before, folder, meta_path, meta = seeded_snapshot(tmp_path, clock)
    tables_path = os.path.join(folder, meta["files"]["scopes"]["default"]["tables"])
    with np.load(tables_path, allow_pickle=False) as f:
        arrays = {k: f[k] for k in f.files}
    assert not [k for k, a in arrays.items() if a.dtype.kind == "U"]
    assert arrays["fields_owner"].dtype == np.int32 and arrays["touched_seqs"].dtype == np.int32
    old = {}
    for name, a in arrays.items():
        if name.endswith("_ids_utf8"):
            base = name[:-len("_utf8")]
            old[base] = np.asarray(gem.snapshot.snapshot_strings(arrays, base), dtype=str)
        elif not name.endswith("_ids_offsets"):
            old[name] = a.astype(np.int64) if a.dtype == np.int32 else a
    summaries = Summaries.packed(arrays, "the summaries")
    old = {k: a for k, a in old.items() if not k.startswith("summary_")}  # format 11's
    with open(tables_path, "wb") as f:
        np.savez(f, allow_pickle=False, **old)
    state_path = os.path.join(folder, meta["files"]["state"])
    state = json.loads(open(state_path).read())
    state["scopes"]["default"]["summaries"] = dict(summaries.items())  # before format 11
    open(state_path, "w").write(json.dumps(state))
    open(meta_path, "w").write(json.dumps({**meta, "format": 7}))
    steps = []
    with reopen(path, clock, progress=lambda step, done, total: steps.append(step)) as mem:
        assert "index titles" not in steps  # loaded, not rebuilt
        assert answers(mem) == before
        assert derived_disagreements(mem) == [] and cache_disagreements(mem) == []


def unit_files(path: str) -> dict[str, str]:
    meta = json.loads(open(os.path.join(snapshot_dir(path), "meta.json")).read())
    return {k: v for k, v in meta["files"]["scopes"]["default"].items()
            if k in ("units", "unitvec", "unitdocs")}


def test_the_unit_layer_is_read_when_first_used_and_kept_while_unchanged(tmp_path, clock):
    path = str(tmp_path / "db")
    with reopen(path, clock) as mem:
        seed(mem, clock)
        before = answers(mem)
    saved = unit_files(path)
    with reopen(path, clock) as mem:
        scope = mem._engine.derived.scope("default")
        assert not scope.units_loaded              # opening did not read the unit files
        mem.inspect("Website Redesign")
        mem.ingest(gem.Fact("Lunch", "place", "the canteen"))
        assert not scope.units_loaded              # nor did a read by key or a commit
    assert unit_files(path) == saved               # a new generation keeps them
    assert sorted(n for n in os.listdir(snapshot_dir(path)) if n.startswith("unit")) == \
        sorted(saved.values())
    with reopen(path, clock) as mem:
        assert answers(mem)[:len(QUERIES)] != before[:len(QUERIES)]  # "the canteen" is found
        assert mem._engine.derived.scope("default").units_loaded
        assert derived_disagreements(mem) == [] and cache_disagreements(mem) == []
    assert unit_files(path) != saved               # refreshed: written again


@pytest.mark.parametrize("damage", ["unitvec", "unitdocs", "units"])
def test_unusable_unit_files_mean_only_the_unit_layer_is_derived_again(tmp_path, clock, damage):
    path = str(tmp_path / "db")
    with reopen(path, clock) as mem:
        seed(mem, clock)
        before = answers(mem)
    target = os.path.join(snapshot_dir(path), unit_files(path)[damage])
    data = bytearray(open(target, "rb").read())
    data[len(data) // 2] ^= 0xFF
    open(target, "wb").write(bytes(data))
    assert reopened_answers(path, clock, []) == before  # the rest of the snapshot was used


def test_an_unusable_summary_index_means_only_it_is_derived_again_when_first_used(tmp_path, clock):
    # The BM25 index over the summaries is read when first used, not at open (gem/snapshot.py
    # `SavedLexical`): a corrupted file found then makes every summary stale, not a rebuild.
    path = str(tmp_path / "db")
    with reopen(path, clock) as mem:
        seed(mem, clock)
        before = answers(mem)
    meta = json.loads(open(os.path.join(snapshot_dir(path), "meta.json")).read())
    target = os.path.join(snapshot_dir(path), meta["files"]["scopes"]["default"]["lexical"])
    data = bytearray(open(target, "rb").read())
    data[len(data) // 2] ^= 0xFF
    open(target, "wb").write(bytes(data))
    steps = []
    with reopen(path, clock, progress=lambda step, done, total: steps.append(step)) as mem:
        assert mem._engine.derived.scope("default").saved_lexical is not None  # not read yet
        assert answers(mem) == before
        assert "index titles" not in steps         # the rest of the snapshot was used
        assert derived_disagreements(mem) == [] and cache_disagreements(mem) == []


def test_a_snapshot_with_erased_units_is_loaded_not_rebuilt(tmp_path, clock):
    path = str(tmp_path / "db")
    with reopen(path, clock) as mem:
        seed(mem, clock)
        mem.erase("Website Redesign", "owner", reason="test")  # leaves empty rows in the salience columns
        mem.erase("Lunch", "preferences", reason="test")
        before = answers(mem)
    assert reopened_answers(path, clock, []) == before


def test_only_topics_with_edges_or_open_flags_have_them_read_and_reopening_keeps_that_exact(
        tmp_path, clock, monkeypatch):
    from gem.store import graph
    seen: list[str] = []
    run = graph.Tx.run

    def counting(tx, query, params=None):  # every statement that reads typed edges or flags
        if "EXTENDS|ASSOCIATES" in query or "FLAGS" in query:
            seen.append(query)
        return run(tx, query, params)
    path = str(tmp_path / "db")
    with reopen(path, clock) as mem:
        seed(mem, clock)                           # Website Redesign extends to Launch Milestones
    with reopen(path, clock) as mem:               # nothing cached
        monkeypatch.setattr(graph.Tx, "run", counting)
        mem.ingest(gem.Fact("Lunch", "preferences", "ramen"))  # a change: C3 looks for dependents
        mem.retrieve(topic="Lunch")
        assert seen == []                          # Lunch has neither: none read
    with reopen(path, clock) as mem:               # found again by a scan of the edges
        assert mem._engine.derived.scope("default").edge_holders == \
            {mem.inspect(t).id for t in ("Website Redesign", "Launch Milestones")}
        mem.ingest(gem.Fact("Website Redesign", "deadline", "May 2"))
        assert seen                                # and read for the one that has them
        assert [p.title for p in mem.pending_revisions()] == ["Launch Milestones"]
    with reopen(path, clock) as mem:
        (topic,) = mem.retrieve(topic="Launch Milestones").topics
        assert topic.needs_review and {f.origin for f in topic.needs_review} == {"Website Redesign"}
        assert derived_disagreements(mem) == []


def test_a_snapshot_behind_the_log_catches_up(tmp_path, clock):
    path = str(tmp_path / "db")
    with reopen(path, clock) as mem:
        seed(mem, clock)
    saved = str(tmp_path / "saved")
    shutil.copytree(snapshot_dir(path), saved)
    with reopen(path, clock) as mem:               # more history after the saved snapshot
        clock.advance(days=1)
        mem.ingest([gem.Fact("Website Redesign", "owner", "Bob"),
                    gem.Fact("New Topic", "x", 1, labels=["secret"])])
        mem.retrieve(topic="Lunch")
        clock.advance(days=60)
        mem.forget()
        mem.revise()
        after = answers(mem)
    shutil.rmtree(snapshot_dir(path))
    shutil.copytree(saved, snapshot_dir(path))     # the old snapshot is back
    assert reopened_answers(path, clock, ["catch up from the log"]) == after


def test_a_crash_leaves_salience_in_the_log_and_the_next_open_replays_it(tmp_path, clock):
    path = str(tmp_path / "db")
    mem = reopen(path, clock)
    seed(mem, clock)
    for _ in range(5):
        mem.retrieve(topic="Lunch")
    want = mem.inspect("Lunch", "preferences").salience
    mem._engine.store.close()                      # no write-behind, no snapshot: a crash
    with reopen(path, clock) as again:
        assert again.inspect("Lunch", "preferences").salience == want
        assert derived_disagreements(again) == []


def test_search_documents_are_the_same_read_by_key_or_by_scan(tmp_path):
    """Many stale units (a rebuild, a big import) are documented from one scan of the current
    values (gem.derived.SCAN_ABOVE); it must give what reads by key give."""
    from gem.derived import unit_documents

    with gem.open(tmp_path / "db", engine=ENGINE) as mem:
        mem.ingest([gem.Fact(f"Topic {i}", f"field {j}", f"value {i}.{j}") for i in range(30)
                    for j in range(3)])
        mem.ingest([gem.Fact("Topic 1", "field 1", ["a", "list"]), gem.Fact("Alias Test", "x", 1)])
        mem.retract("Topic 2", "field 2", "wrong")
        evict_rows(mem)  # the deriving worker idle: nothing pending
        engine = mem._engine
        scope = engine.derived.scope("default")
        units = sorted(scope.fields.ids)
        by_key = unit_documents(engine.cache, scope.names, units, scan=False)
        engine.cache.clear()
        by_scan = unit_documents(engine.cache, scope.names, units, scan=True)
    assert by_scan == by_key and len(by_key) >= len(units) - 1


def test_names_kept_unread_are_built_whole_or_refused_each_time():
    from gem.derived import NameDirectory
    from gem.errors import SnapshotError
    names = NameDirectory.deferred('[["default:t1", ["Alpha"], ["alpha"]], ["default:t2", ["B"], []]]')
    for _ in range(2):  # a name without its key: refused, and nothing half-built is kept
        with pytest.raises(SnapshotError):
            names.by_name
    good = NameDirectory.deferred('[["default:t1", ["Alpha", "A"], ["alpha", "a"]]]')
    assert good.saved() == '[["default:t1", ["Alpha", "A"], ["alpha", "a"]]]'  # as it was read
    assert good.key_holders("a") == ["default:t1"] and good.title_of == {"default:t1": "Alpha"}


def test_ids_keep_their_keys_and_unit_documents_are_by_row_and_a_format_9_snapshot_is_still_read(
        tmp_path, clock):
    """Format 10 saves each table's ids with their hash keys (a row is found without decoding
    the ids) and the unit documents by the unit lexical index's rows, without their ids; a
    format-9 snapshot (no keys, documents by unit id) is read, not rebuilt, and its unit files
    are written again in the new layout by the next save."""
    import numpy as np

    from gem.index import read_snapshot_file, snapshot_strings, write_snapshot_file
    from gem.index.packed import id_keys

    path, before, folder, meta_path, meta = seeded_snapshot(tmp_path, clock)
    files = meta["files"]["scopes"]["default"]
    tables_path = os.path.join(folder, files["tables"])
    with np.load(tables_path, allow_pickle=False) as f:
        arrays = {k: f[k] for k in f.files}
    for kind in ("topics", "fields", "episodes"):
        assert np.array_equal(arrays[f"{kind}_ids_keys"],
                              id_keys(arrays[f"{kind}_ids_utf8"], arrays[f"{kind}_ids_offsets"]))
    with open(tables_path, "wb") as f:
        np.savez(f, allow_pickle=False, **{k: a for k, a in arrays.items() if not k.endswith("_keys")})
    units_path, docs_path = (os.path.join(folder, files[k]) for k in ("units", "unitdocs"))
    stamp, lex_meta, lex = read_snapshot_file(units_path, "lexical")
    assert "ids_keys" in lex
    write_snapshot_file(units_path, "lexical", stamp, lex_meta,
                        {k: a for k, a in lex.items() if k != "ids_keys"})
    stamp, docs_meta, docs = read_snapshot_file(docs_path, "unitdocs")
    assert docs_meta == {"by": "row"} and "ids_utf8" not in docs
    rows = np.flatnonzero(docs["docs_has"]).tolist()
    ids, texts = snapshot_strings(lex, "ids"), snapshot_strings(docs, "docs")
    old_ids, old_docs = gem.index.encode_strings([ids[r] for r in rows]), \
        gem.index.encode_strings([texts[r] for r in rows])
    write_snapshot_file(docs_path, "unitdocs", stamp, {},
                        {"ids_utf8": old_ids[0], "ids_offsets": old_ids[1], "docs_utf8": old_docs[0],
                         "docs_offsets": old_docs[1], "valid": docs["valid"][rows]})
    open(meta_path, "w").write(json.dumps({**meta, "format": 9}))
    steps = []
    with reopen(path, clock, progress=lambda step, done, total: steps.append(step)) as mem:
        assert "index titles" not in steps  # loaded, not rebuilt
        assert answers(mem) == before
        assert derived_disagreements(mem) == [] and cache_disagreements(mem) == []
    assert unit_files(path)["unitdocs"] != files["unitdocs"]  # written again, by row
    _, docs_meta, _ = read_snapshot_file(os.path.join(folder, unit_files(path)["unitdocs"]),
                                         "unitdocs")
    assert docs_meta == {"by": "row"}
    with reopen(path, clock) as mem:
        assert answers(mem) == before
        assert derived_disagreements(mem) == [] and cache_disagreements(mem) == []
