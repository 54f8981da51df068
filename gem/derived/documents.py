"""The documents derived state indexes (summaries, unit documents), and where its snapshot lives."""
from __future__ import annotations

import itertools
import json
from typing import TYPE_CHECKING, Any, Callable, Generator, Iterator, Sequence


from ..history import NO_VALUE, is_retraction
from ..store import queries
from ..store.schema import Row
from ..terms import content_words
from ..text import value_text
from ..units import unit_table
from .tables import DEFAULT_SCOPE, NameDirectory, Summarizer, seconds

if TYPE_CHECKING:
    from ..state.cache import CommittedCache
    from ..state.transition import Transition


def unmoved(tx: Any, last: Row | None) -> bool:
    """Whether the log's head is still `last` (no later record; its hash unchanged)."""
    seq = 0 if last is None else last["seq"]
    return queries.record_hash(tx, seq + 1) is None and \
        (last is None or queries.record_hash(tx, seq) == last["hash"])


def summaries_of(cache: "CommittedCache", tids: Sequence[str], summarizer: Summarizer) -> dict[str, str]:
    """Summaries of committed topics: the title and each visible field's current value."""
    cache.load_rows("Topic", tids)
    cache.load_children("HAS_FIELD", tids)
    fids = [f for t in tids for f in cache.children["HAS_FIELD"][t]]
    cache.load_children("HAS_ENTRY", fids)
    out = {}
    for tid in tids:
        row = cache.rows["Topic"][tid]
        if row is None:
            continue
        values = {}
        for fid in cache.children["HAS_FIELD"][tid]:
            f = cache.rows["Field"][fid]
            if f is None or f["status"] == "hidden":
                continue
            for eid in reversed(cache.children["HAS_ENTRY"][fid]):
                e = cache.rows["Entry"][eid]
                if e is not None and e["status"] == "current":
                    if not is_retraction(e):  # a retracted value says nothing any more
                        values[f["name"]] = json.loads(e["value"])
                    break
        out[tid] = summarizer(row["title"], values)
    return out


def cached_whole(cache: "CommittedCache", tid: str) -> bool:
    """Whether the row cache holds all a summary of committed topic `tid` reads (its row, its
    fields and their histories): then `summaries_of` sends the engine no statement."""
    rows, children = cache.rows, cache.children
    fields = children["HAS_FIELD"].get(tid)
    if rows["Topic"].get(tid) is None or fields is None:
        return False
    for fid in fields:
        entries = children["HAS_ENTRY"].get(fid)
        if fid not in rows["Field"] or entries is None or \
                any(eid not in rows["Entry"] for eid in entries):
            return False
    return True


def scanned_summaries(tx: Any, lo: int, hi: int, summarizer: Summarizer,
                      wanted: Callable[[str, str], bool]) -> dict[str, dict[str, str]]:
    """scope -> topic -> summary of the topics at node offsets [lo, hi) that are `wanted(scope,
    topic)`, from one read of the
    range (`queries.summary_values`): what `summaries_of` gives them, field by field (a field's
    latest current entry, nothing if that is a retraction), in the order of the fields'
    creation (a topic's child list)."""
    topics = [(tid, scope, title) for tid, scope, title in queries.topics_in_range(tx, lo, hi)
              if wanted(scope, tid)]
    if not topics:  # (a range a previous pass, or readers, made fresh: its values unread)
        return {}
    values = queries.summary_values(tx, lo, hi)
    keep = {tid for tid, _, _ in topics}
    latest: dict[tuple[str, str], tuple[Any, int, str]] = {}
    for tid, name, created, seq, value in values:
        if tid not in keep:
            continue
        held = latest.get((tid, name))
        if held is None or seq > held[1]:
            latest[tid, name] = (created, seq, value)
    current: dict[str, dict[str, Any]] = {}
    for (tid, name), (_, _, value) in sorted(latest.items(), key=lambda kv: (kv[1][0], kv[0])):
        if value != NO_VALUE:  # a retracted value says nothing any more
            current.setdefault(tid, {})[name] = json.loads(value)
    out: dict[str, dict[str, str]] = {}
    for tid, scope, title in topics:
        out.setdefault(scope, {})[tid] = summarizer(title, current.get(tid, {}))
    return out


def units_rewritten(t: "Transition") -> list[str]:
    """The fields whose search document a committed transition may have changed: new fields,
    fields that gained or changed entries (a compression, which only moves older entries out
    of the active history, changes no document), and every field a revision touched (a merge
    moves entries away). A ladder step alone changes none: status is read at query time, so a
    forgetting pass does not make the next query re-embed what it attenuated."""
    out = dict.fromkeys(t.created["Field"])
    for table in ("created", "updated"):
        for eid, props in getattr(t, table)["Entry"].items():
            if table == "updated" and set(props) <= {"active"}:
                continue
            row = t.rows["Entry"].get(eid)
            if row is not None:
                out[row["field_id"]] = None
    if t.op == "revise":
        out.update(dict.fromkeys(t.touched.fields))
    return list(out)


# A compressed episode is searched by at most this many of its distinct content words (its
# own first, then those of the turn it follows): a LoCoMo turn has 10-15.
COMPRESSED_WORDS = 24

# Above this many stale units, their documents come from one scan of every current value
# (seconds at 1M entries) rather than reads by key (about 0.5 ms a unit on kuzu, cold).
SCAN_ABOVE = 20_000


def unit_documents(cache: "CommittedCache", names: NameDirectory, units: Sequence[str],
                   scan: bool | None = None) -> dict[str, tuple[str, float]]:
    """unit -> (its searchable document, its valid time in seconds) for committed fields with a
    current value (the topic's names, the field's name, the value) and episodes (speaker and
    text). Units without a current value, or gone, are left out. `scan`: read the fields'
    current values in one scan instead of by key (default: when there are many)."""
    fids = [u for u in units if unit_table(u) == "Field"]
    eids = [u for u in units if unit_table(u) == "Episode"]
    out: dict[str, tuple[str, float]] = {}
    if scan if scan is not None else len(fids) > SCAN_ABOVE:
        out.update(_scanned_field_documents(cache, names, fids))
        fids = []
    cache.load_rows("Field", fids)
    cache.load_children("HAS_ENTRY", fids)
    cache.load_rows("Episode", eids)
    # an episode is read in the context of the one it follows (gem/operators/ingest.py)
    cache.load_rows("Episode", [r["follows"] for r in (cache.rows["Episode"][e] for e in eids)
                                if r is not None and r["follows"]])
    for fid in fids:
        f = cache.rows["Field"][fid]
        if f is None:
            continue
        current = None
        for eid in reversed(cache.children["HAS_ENTRY"][fid]):
            e = cache.rows["Entry"][eid]
            if e is not None and e["status"] == "current":
                current = e
                break
        if current is None:
            continue
        out[fid] = _field_document(names, f["topic_id"], f["name"], current["value"],
                                   current["valid_at"])
    for eid in eids:
        row = cache.rows["Episode"][eid]
        if row is None:
            continue
        text = f"{row['speaker']}: {row['text']}" if row["speaker"] else row["text"]
        before = cache.rows["Episode"].get(row["follows"]) if row["follows"] else None
        if before is not None:
            text += " " + before["text"]
        if row["status"] == "compressed":  # the ladder's compressed turn: its summary
            text = content_words(text, COMPRESSED_WORDS)
        out[eid] = (text, seconds(row["at"]))
    return out


def _field_document(names: NameDirectory, tid: str, name: str, value: str,
                    valid_at: Any) -> tuple[str, float]:
    text = " ".join([*names.names_of.get(tid, []), name, value_text(json.loads(value))])
    return text, seconds(valid_at)


def _scanned_field_documents(cache: "CommittedCache", names: NameDirectory,
                             fids: Sequence[str]) -> dict[str, tuple[str, float]]:
    out: dict[str, tuple[str, float]] = {}
    for _, docs in _scanned_pieces(cache, names, fids):
        out.update(docs)
    return out


# Units whose documents a derivation of many holds at once (`unit_document_pieces`): their
# documents, vectors (dense float32 before they are packed) and rows read. At 1M units,
# deriving them all in one step held 1 GB per copy of their vectors, and several copies.
UNITS_PIECE = 8192


def unit_document_pieces(cache: "CommittedCache", names: NameDirectory, units: Sequence[str]
                         ) -> Generator[tuple[list[str], dict[str, tuple[str, float]]], None, None]:
    """`unit_documents` of `units` a piece at a time: (some of the units, the documents of
    those that have one). Every unit is in one piece; many fields' documents come from one
    scan of the current values, read a piece at a time, the rest by key."""
    fids = [u for u in units if unit_table(u) == "Field"]
    rest: Sequence[str] = units
    if len(fids) > SCAN_ABOVE:
        yield from _scanned_pieces(cache, names, fids)
        rest = [u for u in units if unit_table(u) != "Field"]
    for i in range(0, len(rest), UNITS_PIECE):
        part = list(rest[i:i + UNITS_PIECE])
        yield part, unit_documents(cache, names, part, scan=False)


def _scanned_pieces(cache: "CommittedCache", names: NameDirectory, fids: Sequence[str]
                    ) -> Iterator[tuple[list[str], dict[str, tuple[str, float]]]]:
    """The documents of fields `fids` from one scan of every current value, UNITS_PIECE
    values at a time; then the fields it did not find (no current value), with none."""
    wanted = set(fids)
    with cache.store.reading() as tx:
        found = queries.current_values(tx)
        while piece := list(itertools.islice(found, UNITS_PIECE)):
            docs = {fid: _field_document(names, tid, name, value, valid_at)
                    for fid, tid, name, value, valid_at in piece if fid in wanted}
            wanted.difference_update(docs)
            del piece
            yield list(docs), docs
    missing = [f for f in fids if f in wanted]
    for i in range(0, len(missing), UNITS_PIECE):
        yield missing[i:i + UNITS_PIECE], {}


def scope_of(unit: str) -> str:
    """The scope a unit belongs to, from its id: "t1", "t1/deadline", "e5" are in "default";
    "acme:t1", "acme:t1/deadline", "acme:e5" are in "acme" (scope names hold no ":" or "/")."""
    head = unit.split("/", 1)[0]
    return head.split(":", 1)[0] if ":" in head else DEFAULT_SCOPE


def snapshot_dir(db_path: str) -> str:
    return db_path + ".gem-derived"
