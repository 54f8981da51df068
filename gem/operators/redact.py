"""What an erasure removes from where it was copied: the erased names and values as text.

Names are content as much as values: a topic's title and aliases, a field's name, a source
(with `erase(..., source=S)`) and the string values of the erased entries are copied into flag
evidence, policy evidence, the log's parts (a field's id is "<topic>/<name>") and derived state.
These strings are the erasure's *needles*. A needle a surviving unit still holds as its own
content (a title, an alias, a field name, a value, a source, an episode's text...) legitimately
remains, and so do its copies: they cannot be told apart. Numbers and booleans carry no text
to find; they leave with the rows that held them.

A needle is found as text at word boundaries, case-insensitively: "ssn" in "t1/ssn" or
"updated ssn", not in "lesson"; it runs from its name's first word character to its last. The same rule drives the redaction (`mentions`, `scrub`) and
the verification, which holds only salted hashes of the needles (`marks`, `Marks`): the
receipt must not hold the erased content.
"""
from __future__ import annotations

import functools
import hashlib
import json
import os
import re
from typing import Any, Iterable, Iterator

import numpy as np

from ..attest import EDGE_KINDS, PARTS
from ..index import read_snapshot_file, snapshot_strings
from ..store import queries
from ..store.schema import TABLES
from ..units import dumps

ERASED = "[erased]"  # what a scrubbed copy says in place of an erased name or value

# Columns that hold a row's own content (what a surviving unit says): a needle found there is
# still in use. Every other stored string (ids, flag evidence, log parts) is a copy.
OWN = {"Topic": ("title", "aliases", "annotations"),
       "Field": ("name", "summary", "annotations", "labels"),
       "Entry": ("value", "source", "actor", "ref", "reason", "annotations", "labels",
                 "place_name"),
       "Observation": ("source", "actor", "ref"),
       "Episode": ("text", "source", "actor", "speaker", "annotations", "place_name"),
       "Policy": ("name", "file", "source")}


def needles_of(content: Iterable[Any], source: str | None) -> set[str]:
    """The strings an erasure's content (erase._*_content) holds as names and values."""
    found: set[str] = set() if source is None else {source}

    def walk(item: Any) -> None:
        if isinstance(item, dict):
            if "title" in item:
                found.add(item["title"])
                found.update(item["aliases"] or [])
            if "field" in item:
                found.add(item["field"].split("/", 1)[1])
            if "value" in item:
                found.update(strings(_loads(item["value"])))
            if item.get("place") and item["place"][2]:  # a place's name, as a value's text
                found.add(item["place"][2])
            for key in ("fields", "entries"):
                for child in item.get(key, ()):
                    walk(child)

    for item in content:
        walk(item)
    return {core for n in found if (core := _core(n))}


def _core(text: str) -> str:
    """A needle from its first word character to its last ("" with none: nothing to find)."""
    words = list(_WORDS.finditer(text))
    return text[words[0].start():words[-1].end()] if words else ""


def _loads(text: Any) -> Any:
    try:
        return json.loads(text) if isinstance(text, str) else text
    except ValueError:
        return text


def strings(value: Any) -> Iterator[str]:
    """The string leaves of a JSON value, dictionary keys included."""
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for k, v in value.items():
            yield str(k)
            yield from strings(v)
    elif isinstance(value, (list, tuple)):
        for v in value:
            yield from strings(v)


@functools.lru_cache(maxsize=64)
def _pattern(needles: frozenset[str]) -> re.Pattern[str] | None:
    parts = [("(?<!\\w)" if re.match(r"\w", n[0]) else "") + re.escape(n) +
             ("(?!\\w)" if re.match(r"\w", n[-1]) else "")
             for n in sorted(needles, key=lambda n: (-len(n), n))]
    return re.compile("|".join(parts), re.IGNORECASE) if parts else None


def mentions(text: str, needles: Iterable[str]) -> bool:
    pattern = _pattern(frozenset(needles))
    return pattern is not None and pattern.search(text) is not None


def scrub(value: Any, needles: Iterable[str]) -> Any:
    """`value` (JSON) with every needle in its strings (keys too) replaced by ERASED."""
    pattern = _pattern(frozenset(needles))
    if pattern is None:
        return value

    def walk(item: Any) -> Any:
        if isinstance(item, str):
            return pattern.sub(ERASED, item)
        if isinstance(item, dict):
            return {walk(str(k)): walk(v) for k, v in item.items()}
        if isinstance(item, list):
            return [walk(v) for v in item]
        return item

    return walk(value)


# ---------------------------------------------------------------------- what is stored
def _stored_text(needle: str) -> str:
    return dumps(needle)[1:-1]  # as it reads inside a stored JSON text


def _containing(tx: Any, table: str, columns: Iterable[str], needles: Iterable[str],
                where: str = "", returns: tuple[str, ...] | None = None,
                **bound: Any) -> list[dict[str, Any]]:
    """Rows of `table` whose string `columns` contain a needle as stored (a prefilter: the
    caller checks boundaries and case)."""
    texts = sorted({t for n in needles for t in (n, _stored_text(n))})
    if not texts:
        return []
    params = {**bound, **{f"n{i}": text for i, text in enumerate(texts)}}
    alternatives = " OR ".join(f"n.{c} CONTAINS $n{i}" for c in columns for i in range(len(texts)))
    condition = f"({where}) AND ({alternatives})" if where else alternatives
    return queries.scan(tx, table, condition, params, columns=returns)


def named(text: str, needles: Iterable[str]) -> set[str]:
    """The needles `text` names."""
    pattern = _pattern(frozenset(needles))
    if pattern is None:
        return set()
    by_case = {n.lower(): n for n in needles}
    return {by_case[m.group(0).lower()] for m in pattern.finditer(text)
            if m.group(0).lower() in by_case}


def still_held(tx: Any, needles: set[str], gone: set[str]) -> set[str]:
    """The needles a stored row not in `gone` (being erased) holds as its own content: a
    surviving unit says it."""
    held: set[str] = set()
    for table, columns in OWN.items():
        key = "name" if table == "Policy" else "id"
        # list columns are read where not empty: topics' aliases and fields' labels (the union
        # of their entries', so entries are not read)
        lists = [c for c in columns if c in ("aliases", "labels") and table != "Entry"]
        plain = [c for c in columns if c not in ("aliases", "labels")]
        for row in _containing(tx, table, plain, needles - held) if needles - held else ():
            if row[key] not in gone:
                held |= {n for c in plain for n in named(str(row[c] or ""), needles)}
        for column in lists if needles - held else ():
            for row in queries.scan(tx, table, f"size(n.{column}) > 0", columns=(key, column)):
                if row[key] not in gone:
                    held |= {n for text in row[column] for n in named(text, needles)}
    return held


def flags_naming(tx: Any, needles: set[str]) -> list[dict[str, Any]]:
    """The stored flags whose evidence names a needle."""
    return [row for row in _containing(tx, "Flag", ("evidence",), needles)
            if mentions(row["evidence"], needles)]


def records_naming(tx: Any, scope: str, needles: set[str]) -> list[int]:
    """The log records of `scope` not yet redacted whose content parts name a needle."""
    found = _containing(tx, "Transition", PARTS, needles, where="n.salt <> '' AND n.scope = $scope",
                        returns=("seq", *PARTS), scope=scope) if needles else []
    return sorted(r["seq"] for r in found if any(mentions(r[p] or "", needles) for p in PARTS))


# ---------------------------------------------------------------------- verification
def marks(salt: str, needles: Iterable[str]) -> list[str]:
    """What a receipt holds of the needles: "<length>:<words>:<salted hash>" each (its length,
    its number of runs of word characters), never the text."""
    return sorted({f"{len(n.lower())}:{len(_WORDS.findall(n.lower()))}:{_digest(salt, n.lower())}"
                   for n in needles})


def _digest(salt: str, text: str) -> str:
    return hashlib.sha256(f"{salt}\n{text}".encode("utf-8")).hexdigest()[:32]


_WORDS = re.compile(r"\w+")


class Marks:
    """Finds the needles a receipt's marks stand for in a text: a needle starts where a run of
    word characters starts and ends where one ends, so only the pieces of the text spanning
    as many runs as a needle, with its length, are hashed."""

    def __init__(self, salt: str, marked: Iterable[str]) -> None:
        self.salt = salt
        self.digests: dict[tuple[int, int], set[str]] = {}
        for mark in marked:
            length, words, digest = mark.split(":", 2)
            self.digests.setdefault((int(length), int(words)), set()).add(digest)
        self.shortest = min((length for length, _ in self.digests), default=0)
        self.runs = sorted({words for _, words in self.digests})

    def found(self, text: str) -> set[str]:
        """The marks of the needles `text` holds."""
        if not self.digests or len(text) < self.shortest:
            return set()
        low = text.lower()
        spans = [m.span() for m in _WORDS.finditer(low)]
        hits: set[str] = set()
        for i, (start, _) in enumerate(spans):
            for words in self.runs:
                if i + words > len(spans):
                    break
                end = spans[i + words - 1][1]
                digests = self.digests.get((end - start, words))
                if digests is not None:
                    digest = _digest(self.salt, low[start:end])
                    if digest in digests:
                        hits.add(f"{end - start}:{words}:{digest}")
        return hits


def _texts(value: Any) -> Iterator[str]:
    """A stored value's strings; a JSON text's decoded strings too, when escapes could hide
    a needle from the text as stored."""
    if isinstance(value, str):
        yield value
        if "\\" in value:
            yield from strings(_loads(value))
    elif isinstance(value, (list, tuple)):
        for v in value:
            yield from _texts(v)


def _snap_strings(path: str) -> list[str]:
    """The strings of an index snapshot file (gem/index/snapfile.py): its meta and string tables."""
    with open(path, "rb") as f:
        head = f.read(16)
        kind = json.loads(f.read(int.from_bytes(head[12:16], "little")))["kind"]
    _, meta, arrays = read_snapshot_file(path, kind)
    found = list(strings(meta))
    for name in arrays:
        if name.endswith("_utf8") and name[:-5] + "_offsets" in arrays:
            found += snapshot_strings(arrays, name[:-5])
    return found


class Scan:
    """Where the needles a receipt's marks stand for are still found: which marks surviving
    units hold as their own content (`held`), and the other places (copies) that hold one."""

    def __init__(self, marks: Marks) -> None:
        self.marks = marks
        self.held: set[str] = set()
        self.copies: list[tuple[str, set[str]]] = []

    def text(self, where: str, text: str, own: bool = False) -> None:
        found = self.marks.found(text)
        if found and own:
            self.held |= found
        elif found:
            self.copies.append((where, found))

    def stored(self, tx: Any) -> None:
        """Every string of every stored row and typed edge."""
        for table, spec in TABLES.items():
            own = ("key", "value") if table == "Meta" else OWN.get(table, ())
            for row in queries.stream_rows(tx, table):
                name = "log record" if table == "Transition" else table.lower()
                for column, value in row.items():
                    if table == "Transition" and column not in (*PARTS, "tombstone"):
                        continue  # who, when and the chain: the log's metadata, not content
                    if column == "tombstone" and value:  # but its reason, the caller's words
                        value = dumps({k: v for k, v in json.loads(value).items() if k != "reason"})
                    for text in _texts(value):
                        self.text(f"{name} {row[spec.key]} ({column})", text, column in own)
        for kind in EDGE_KINDS:
            for a, b, props in queries.scan_edges(tx, kind):
                for text in (a, b, *(t for v in props.values() for t in _texts(v))):
                    self.text(f"{kind} edge {a}->{b}", text)

    def derived(self, state: Any, folder: str | None) -> None:
        """The derived state in memory (names, summaries, unit documents, the ids it keeps),
        and its snapshot files beside the database."""
        for name, scope in state.scopes.items():
            where = f"derived state of scope {name!r}"
            texts = [n for names in scope.names.names_of.values() for n in names]
            texts += [*scope.summaries.values(), *scope.topics.ids, *scope.fields.ids,
                      *scope.episodes.ids, *scope.touched_by, *scope.stale_units,
                      *scope.field_labels]
            units = scope.units()
            texts += [t for unit, doc in units.docs.items() for t in (unit, doc)]
            for text in texts:
                self.text(where, str(text))
        if folder is None or not os.path.isdir(folder):
            return
        for file in sorted(os.listdir(folder)):
            path = os.path.join(folder, file)
            if file.endswith(".npz"):  # fixed-width strings (format 7) or string tables
                with np.load(path, allow_pickle=False) as npz:
                    arrays = {key: npz[key] for key in npz.files}
                for key, values in arrays.items():
                    texts = values.tolist() if values.dtype.kind == "U" else \
                        snapshot_strings(arrays, key[:-5]) \
                        if key.endswith("_utf8") and key[:-5] + "_offsets" in arrays else []
                    for text in texts:
                        self.text(f"derived snapshot file {file}", text)
            elif file.endswith(".snap"):
                for text in _snap_strings(path):
                    self.text(f"derived snapshot file {file}", text)
            elif file.endswith(".json"):
                with open(path, "rb") as f:
                    for text in strings(json.loads(f.read())):
                        self.text(f"derived snapshot file {file}", text)

    def problems(self) -> list[str]:
        return [f"{where} still holds an erased name or value"
                for where in dict.fromkeys(w for w, found in self.copies if found - self.held)]
