"""`gem export` / `gem import`: a lossless round trip (the same rows, the same log, the same
answers afterwards), refused bad files, and nothing partial left behind."""
from __future__ import annotations

import io
import json
import os
import subprocess
import sys
import textwrap

import pytest

import gem
from conftest import ENGINE, snapshot
from dashboard_story import StoryClock, tell
from servers import HANG  # a guard against hangs only (tests/servers.py)

OTHER_ENGINE = {"kuzu": "ladybug", "ladybug": "kuzu"}[ENGINE]


def _logical(snap: dict) -> dict:
    """A snapshot without the engine's internal row offsets (not state: an import may place
    rows at other offsets, e.g. after an erasure left holes)."""
    tables = {name: sorted(row.replace(_offset(row), "") for row in rows)
              for name, rows in snap["tables"].items()}
    return {"tables": tables, "derived": snap["derived"]}


def _offset(row: str) -> str:
    start = row.lower().find("'_id': {")  # ladybug spells it _ID
    return row[start:row.index("}", start) + 3] if start >= 0 else ""


def _records(path: str) -> list[str]:
    """The file's records (the header's export time and engine left out), in a stable order."""
    with open(path, encoding="utf-8") as f:
        lines = f.read().splitlines()
    header = json.loads(lines[0])
    assert header["format"] == "gem-export" and json.loads(lines[-1])["end"] is True
    return sorted(lines[1:-1])


@pytest.fixture
def rich(tmp_path):
    """A memory with every kind of row: histories, a corroboration and a denial, a contested
    field, flags, three edge kinds, the forgetting ladder, episodes, a second scope, and an
    erasure (redacted log records, a tombstone, an erased episode)."""
    path = str(tmp_path / "rich.db")
    clock = StoryClock()
    with gem.open(path, engine=ENGINE, clock=clock) as mem:
        tell(mem, clock)
        mem.ingest(gem.Episode("The website deadline moved again", speaker="Ann", source="chat:7"))
        acme = mem.scope("acme")
        acme.ingest(gem.Episode("Our secret is s3cr3t", speaker="Bo", source="chat:acme"))
        acme.ingest([gem.Fact("Acme Launch", "deadline", "May 2", source="chat:acme"),
                     gem.Fact("Acme Launch", "secret", "s3cr3t", source="chat:acme",
                              ref="acme:ep1")])
        acme.ingest(gem.Episode("See you in May", speaker="Bo", source="chat:acme2"))
        assert acme.erase("Acme Launch", "secret", reason="asked to").episodes == ["acme:ep1"]
        mem.retrieve("deadline")  # salience pending, not yet written behind
    return path, clock


def test_a_round_trip_is_the_same_database(rich, tmp_path):
    path, clock = rich
    out = str(tmp_path / "rich.jsonl")
    with gem.open(path, engine=ENGINE, clock=clock, create=False) as mem:
        report = mem.export(out)
        before, log, head = snapshot(mem), mem.transitions(), mem.head()
    assert report.head == head and report.transitions == head["seq"]
    steps: list[tuple[str, int, int]] = []
    copy = str(tmp_path / "copy.db")
    loaded = gem.import_jsonl(out, copy, engine=ENGINE, progress=lambda *a: steps.append(a))
    assert (loaded.records, loaded.head, loaded.sha256) == (report.records, head, report.sha256)
    assert {s[0] for s in steps} >= {"audit histories"}
    with gem.open(copy, engine=ENGINE, clock=clock, create=False) as mem:
        assert _logical(snapshot(mem)) == _logical(before)
        assert len(before["tables"]["Episode"]) == 2  # the erased one is not exported
        assert mem.transitions() == log and mem.head() == head
        assert mem.audit(full=True).ok
        assert mem.scopes() == ["acme", "default"]
        mem.export(str(tmp_path / "again.jsonl"))
    assert _records(str(tmp_path / "again.jsonl")) == _records(out)

    # Both go on identically: same ids, same answers, same log records (but for each record's
    # random salt, and so its commitment and hash).
    results = []
    for where in (path, copy):
        with gem.open(where, engine=ENGINE, clock=clock, create=False) as mem:
            clock.advance(days=1)
            ingested = mem.ingest(gem.Fact("Website Redesign", "deadline", "April 20", source="chat:9"))
            answer = mem.retrieve("website redesign deadline")
            salted = ("salt", "commit", "prev_hash", "hash")
            records = [{k: v for k, v in r.items() if k not in salted}
                       for r in mem.transitions(head["seq"])]
            results.append((ingested.model_dump(mode="json"), answer.model_dump(mode="json"),
                            records))
            clock.advance(days=-1)
    assert results[0] == results[1]


def test_a_stream_round_trip_and_an_empty_database(tmp_path):
    buffer = io.StringIO()
    with gem.open(str(tmp_path / "empty.db"), engine=ENGINE) as mem:
        mem.export(buffer)
    buffer.seek(0)
    report = gem.import_jsonl(buffer, str(tmp_path / "copy.db"), engine=ENGINE)
    assert report.head is not None and report.transitions == report.head["seq"]  # the policy load
    with gem.open(str(tmp_path / "copy.db"), engine=ENGINE, create=False) as mem:
        assert not mem.stats()["topics"] and mem.audit(full=True).ok


def _export(tmp_path) -> tuple[str, list[str]]:
    path, out = str(tmp_path / "src.db"), str(tmp_path / "src.jsonl")
    with gem.open(path, engine=ENGINE) as mem:
        mem.ingest([gem.Fact("Website Redesign", "deadline", "March 15", source="chat:1"),
                    gem.Fact("Launch", "date", "April 1", source="chat:1")])
        mem.link("Website Redesign", "Launch", kind="extension")
        mem.export(out)
    with open(out, encoding="utf-8") as f:
        return out, f.read().splitlines(keepends=True)


def _write(tmp_path, name: str, lines: list[str]) -> str:
    where = str(tmp_path / name)
    with open(where, "w", encoding="utf-8") as f:
        f.writelines(lines)
    return where


def _reseal(lines: list[str]) -> list[str]:
    """Recompute the end line, as someone editing the file on purpose would."""
    import hashlib
    body = lines[1:-1]
    digest = hashlib.sha256("".join(body).encode("utf-8")).hexdigest()
    end = json.dumps({"end": True, "records": len(body), "sha256": digest}) + "\n"
    return [lines[0], *body, end]


def _edit_entry_value(lines: list[str]) -> list[str]:
    out = []
    for line in lines:
        record = json.loads(line)
        if record.get("table") == "Entry" and record["row"]["value"] == '"March 15"':
            record["row"]["value"] = '"March 16"'
            line = json.dumps(record) + "\n"
        out.append(line)
    return out


BAD = {
    "cut short": (lambda ls: ls[:-3], "no end line"),
    "a line edited": (_edit_entry_value, "cut or edited"),
    "an edit resealed": (lambda ls: _reseal(_edit_entry_value(ls)), "fails the audit"),
    "a row deleted and resealed": (lambda ls: _reseal([l for l in ls if '"table":"Observation"' not in l
                                                       and '"Launch"' not in l]),
                                   "fails the audit"),
    "not JSON": (lambda ls: [ls[0], "{not json\n", *ls[1:]], "line 2: not JSON"),
    "another format": (lambda ls: [json.dumps({"format": "other"}) + "\n", *ls[1:]],
                       "not a gem export"),
    "another schema": (lambda ls: [ls[0].replace('"schema":"2"', '"schema":"1"'), *ls[1:]],
                       "schema '1'"),
    "an unknown table": (lambda ls: _reseal([ls[0], '{"table":"Secret","row":{"id":"x"}}\n', *ls[1:]]),
                         "unknown table 'Secret'"),
    "an unknown column": (lambda ls: _reseal([l.replace('"title":', '"admin":true,"title":', 1)
                                              for l in ls]), "columns the schema does not know"),
    "a record after the end": (lambda ls: [*ls, ls[1]], "after the end line"),
    "empty": (lambda ls: [], "empty"),
}


@pytest.mark.parametrize("case", sorted(BAD))
def test_a_bad_export_is_refused_and_leaves_nothing(tmp_path, case):
    _, lines = _export(tmp_path)
    edit, message = BAD[case]
    bad = _write(tmp_path, "bad.jsonl", edit(lines))
    target = str(tmp_path / "target.db")
    with pytest.raises(gem.InvalidInput, match=message):
        gem.import_jsonl(bad, target, engine=ENGINE)
    left = sorted(os.listdir(tmp_path))
    assert [n for n in left if n.startswith("target")] == []


def test_an_import_never_replaces_a_memory(tmp_path):
    out, _ = _export(tmp_path)
    target = str(tmp_path / "held.db")
    with gem.open(target, engine=ENGINE) as mem:
        mem.ingest(gem.Fact("Mine", "x", 1))
    # as it was closed: closing records where the salience written behind stands
    with gem.open(target, engine=ENGINE, create=False) as mem:
        before = snapshot(mem)
    with pytest.raises(gem.InvalidInput, match="already holds a memory"):
        gem.import_jsonl(out, target, engine=ENGINE)
    with gem.open(target, engine=ENGINE, create=False) as mem:
        assert snapshot(mem) == before


def test_export_of_a_scope_view_is_refused(tmp_path):
    with gem.open(str(tmp_path / "db"), engine=ENGINE) as mem:
        with pytest.raises(gem.InvalidInput, match="not a scope view"):
            mem.scope("acme").export(str(tmp_path / "x.jsonl"))
    assert not os.path.exists(tmp_path / "x.jsonl")


def _gem(*args: str, stdin: str | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "gem", *args], input=stdin, capture_output=True,
                          text=True, timeout=HANG)


@pytest.mark.slow
def test_the_cli_pipes_an_export_into_an_import(tmp_path):
    src, _ = _export(tmp_path)
    path = str(tmp_path / "src.db")
    exported = _gem("export", path, "--engine", ENGINE)
    assert exported.returncode == 0, exported.stderr
    assert "exported" in exported.stderr and exported.stdout.startswith('{"engine"')
    copy = str(tmp_path / "copy.db")
    imported = _gem("import", copy, "-", "--engine", ENGINE, "--json", stdin=exported.stdout)
    assert imported.returncode == 0, imported.stderr
    assert json.loads(imported.stdout)["records"] == len(exported.stdout.splitlines()) - 2
    again = _gem("import", copy, src, "--engine", ENGINE)
    assert again.returncode == 1 and "already holds a memory" in again.stderr
    missing = _gem("export", str(tmp_path / "nope.db"), "--engine", ENGINE)
    assert missing.returncode == 1 and "no database" in missing.stderr


@pytest.mark.slow
def test_an_export_moves_a_database_to_the_other_engine(rich, tmp_path):
    """kuzu <-> ladybug: the two engines cannot share a process, so the import runs in a child."""
    try:
        __import__("importlib").util.find_spec(OTHER_ENGINE) or pytest.skip(f"{OTHER_ENGINE} missing")
    except ImportError:
        pytest.skip(f"{OTHER_ENGINE} is not installed")
    path, clock = rich
    out = str(tmp_path / "rich.jsonl")
    with gem.open(path, engine=ENGINE, clock=clock, create=False) as mem:
        head = mem.export(out).head
    script = textwrap.dedent(f"""
        import json, gem
        report = gem.import_jsonl({out!r}, {str(tmp_path / 'other.db')!r}, engine={OTHER_ENGINE!r})
        with gem.open({str(tmp_path / 'other.db')!r}, engine={OTHER_ENGINE!r}, create=False) as mem:
            mem.export({str(tmp_path / 'back.jsonl')!r})
            print(json.dumps([report.head, mem.audit(full=True).ok, mem.scopes()]))
    """)
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          timeout=HANG)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == [head, True, ["acme", "default"]]
    assert _records(str(tmp_path / "back.jsonl")) == _records(out)


def test_a_memory_exported_while_open_imports_as_the_same_database(tmp_path):
    """Salience is written behind (gem/derived/): an export taken from a memory that was
    never closed must still carry every unit's salience and the log position it reflects."""
    clock = StoryClock()
    out, copy = str(tmp_path / "open.jsonl"), str(tmp_path / "copy.db")
    with gem.open(str(tmp_path / "open.db"), engine=ENGINE, clock=clock) as mem:
        tell(mem, clock)
        mem.retrieve("deadline")
        mem.ingest(gem.Fact("Late Topic", "note", "created after the last write-behind"))
        mem.export(out)
        before = snapshot(mem)
    gem.import_jsonl(out, copy, engine=ENGINE)
    with gem.open(copy, engine=ENGINE, clock=clock, create=False) as mem:
        assert _logical(snapshot(mem)) == _logical(before)
