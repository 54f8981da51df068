"""Erase: the one destructive operator, for privacy (specs/design.md §10).

Forgetting never destroys; erasure does. In one transition it removes what is erased (a topic;
a field; or, within a topic, everything one source said), recomputes what remains (current
values, supersession links, latest statements; summaries and index entries are derived and
follow), redacts every log record that touched the topic, and leaves in the log a tombstone:
unit ids, the redacted records and a salted hash commitment of the erased content, never the
content itself. The salt goes to the caller in the receipt: only its holder can later show
what the commitment commits to.

Episodes are raw text that may say whatever an erased fact said, so they follow provenance: an
episode an erased entry or observation cites (`ref`) goes with it, as do, with `source`, the
scope's episodes recorded from that source, and with `erase_all` every episode of the scope. The
episode said just after an erased one no longer reads it as context (`follows`), and the log
records that touched an erased episode are redacted like a topic's.

Names are content too: the erased titles, aliases, field names, string values and `source`
are redacted wherever they were copied (other records of the log, flag evidence), unless a
surviving unit still holds the same name (gem/operators/redact.py); the receipt holds them as
salted hashes, which `verify` looks for in every stored and derived string.

The hash chain survives redaction (gem/attest.py): a redacted record keeps its commitment and
loses its content and salt. The surviving units those records attested are attested again by
the erasure's own record, with their current content, so the audit still covers them; their
salience is written to the database with it.
"""
from __future__ import annotations

import hashlib
import json
from typing import Any, Iterable

from .. import attest, history
from ..derived import EPISODE_STATUS, snapshot_dir
from ..errors import UnknownUnit
from ..state.reads import episode_order
from ..state.transition import Transition
from ..store import queries
from ..store.schema import EDGE_TABLES, Row
from ..units import dumps, is_episode
from . import redact
from .common import field_named, settle_current


def erase(t: Transition, tids: list[str], field: str | None, source: str | None,
          reason: str, every_episode: bool = False) -> dict[str, Any]:
    """Erase topics (`field` and `source` None), one field of one topic, or what `source`
    said in one topic (or one of its fields), and the episodes that said it (with
    `every_episode`, all the scope's). Returns the receipt's content."""
    erased: dict[str, list[Any]] = {"topics": [], "fields": [], "entries": [], "observations": [],
                                    "flags": [], "episodes": [], "cited": []}
    content: list[Any] = []
    changed: list[str] = []
    for tid in tids:
        topic = t.get("Topic", tid)
        fids = list(t.field_ids(tid))
        if field is not None:  # named as everywhere: "Dog name" is the field "dog name"
            named = field_named(t, tid, field)
            fids = [named] if named is not None else []
            if not fids:
                raise UnknownUnit(f"topic {topic['title']!r} has no field {field!r}")
        t.prefetch_children("HAS_ENTRY", fids)
        if source is None and field is None:
            content.append(_topic_content(t, tid))
            _erase_topic(t, tid, erased)
            continue
        changed.append(tid)
        for fid in fids:
            if source is None:
                content.append(_field_content(t, fid))
                _erase_field(t, tid, fid, erased)
            else:
                content += _erase_said_by(t, tid, fid, source, erased)
    content += _erase_episodes(t, _episodes_of(t, erased["cited"], source, every_episode), erased)
    if not any(erased[k] for k in ("topics", "fields", "entries", "observations", "episodes")):
        raise UnknownUnit("nothing to erase" + (f": no entry or observation from source {source!r}"
                                                if source is not None else ""))
    for tid in changed:
        t.content_changed(tid)
        t.touch_topic(tid)
    salt = attest.new_salt()
    commitment = hashlib.sha256((salt + "\n" + dumps(content)).encode("utf-8")).hexdigest()
    # a field left empty by erase(source=...) goes too: its name with it
    needles = redact.needles_of([*content, *({"field": f} for f in erased["fields"])], source)
    gone = {k for table in t.deleted.values() for k in table}
    with t.cache.store.reading() as tx:
        needles -= redact.still_held(tx, needles, gone)
        flags = [g for g in redact.flags_naming(tx, needles)
                 if g["id"] not in gone and _in_scope(t, g["topic_id"])]
        naming = redact.records_naming(tx, t.scope, needles)
    _scrub_flags(t, flags, needles, erased["fields"])
    # an erased field's id holds its name: its deletion is not listed, and every record that
    # listed the field is redacted (it touched the topic, or it names the field)
    t.unlisted = {fid for fid in erased["fields"] if redact.mentions(fid.split("/", 1)[1], needles)}
    redacted = _redact(t, [*tids, *erased["episodes"]], naming, needles)
    t.write_behind_now = True
    field_salt = attest.new_salt()
    t.tombstone = {
        "topics": sorted(erased["topics"]), "changed": sorted(changed),
        # a field id holds its name: the tombstone keeps a salted hash of it instead
        "fields": sorted([f.split("/", 1)[0], _hidden(field_salt, f)] for f in erased["fields"]),
        "entries": sorted(erased["entries"]), "observations": sorted(erased["observations"]),
        "flags": sorted(erased["flags"]), "episodes": sorted(erased["episodes"]),
        "redacted": redacted, "commitment": commitment,
        "field_salt": field_salt, "reason": reason}
    return {"salt": salt, "commitment": commitment, "tombstone": t.tombstone,
            "marks": redact.marks(salt, needles)}


def _in_scope(t: Transition, key: str) -> bool:
    return key[:len(key) - len(key.rsplit(":", 1)[-1])] == t.prefix


def _scrub_flags(t: Transition, flags: list[Row], needles: set[str], fields: list[str]) -> None:
    """Flags on surviving topics whose evidence names erased content: the names and values go
    from their evidence (each becomes redact.ERASED). An open flag raised by a change of a field
    now erased is cleared as well ("erasure"): the change it asks to review is gone."""
    erased_names: dict[str, set[str]] = {}
    for fid in fields:
        tid, name = fid.split("/", 1)
        erased_names.setdefault(tid, set()).add(name.lower())
    for row in flags:
        t.flags(row["topic_id"])  # the transition reads (and writes) the topic's flags
        flag = t.get("Flag", row["id"])
        evidence = json.loads(flag["evidence"])
        changes: dict[str, Any] = {"evidence": dumps(redact.scrub(evidence, needles))}
        names = erased_names.get(flag["origin_id"] or "", set())
        if flag["status"] == "open" and any(s.lower() in names for s in redact.strings(evidence)):
            changes.update(status="cleared", cleared_at=t.now, cleared_by="erasure")
        t.update("Flag", flag["id"], **changes)
        t.detail.setdefault("flags_redacted", []).append(flag["id"])


def _hidden(salt: str, fid: str) -> str:
    return hashlib.sha256(f"{salt}\n{fid}".encode("utf-8")).hexdigest()[:32]


# ---------------------------------------------------------------------- what goes
def _topic_content(t: Transition, tid: str) -> dict[str, Any]:
    row = t.get("Topic", tid)
    return {"topic": tid, "title": row["title"], "aliases": row["aliases"],
            "fields": [_field_content(t, fid) for fid in t.field_ids(tid)]}


def _field_content(t: Transition, fid: str) -> dict[str, Any]:
    return {"field": fid, "entries": [_entry_content(t, e) for e in t.entries(fid)]}


def _entry_content(t: Transition, e: Row) -> dict[str, Any]:
    out = {"entry": e["id"], "value": e["value"], "source": e["source"], "ref": e["ref"],
           "labels": e["labels"], "reason": e["reason"],
           "observations": [[o["id"], o["source"], o["ref"]] for o in t.observations(e["id"])]}
    if e.get("place_lat") is not None:  # where it was stated is content too (gem/places.py)
        out["place"] = [e["place_lat"], e["place_lon"], e["place_name"]]
    return out


def _erase_entry(t: Transition, fid: str, eid: str, erased: dict[str, list[Any]]) -> None:
    erased["cited"].append(t.get("Entry", eid)["ref"])
    for obs in list(t.observations(eid)):
        erased["cited"].append(obs["ref"])
        t.delete("Observation", obs["id"], eid)
        erased["observations"].append(obs["id"])
    t.delete("Entry", eid, fid)
    erased["entries"].append(eid)


def _erase_field(t: Transition, tid: str, fid: str, erased: dict[str, list[Any]]) -> None:
    for e in list(t.entries(fid)):
        _erase_entry(t, fid, e["id"], erased)
    t.delete("Field", fid, tid)
    erased["fields"].append(fid)


def _erase_topic(t: Transition, tid: str, erased: dict[str, list[Any]]) -> None:
    for fid in list(t.field_ids(tid)):
        _erase_field(t, tid, fid, erased)
    for flag in list(t.flags(tid)):
        t.delete("Flag", flag["id"], tid)
        erased["flags"].append(flag["id"])
    for table, a, b, _ in list(t.edges_of(tid)):
        t.remove_edge(table, a, b)
        other = b if a == tid else a
        if table in EDGE_TABLES.values() and other != tid:
            t.touch_topic(other)
            # a flag on another topic raised by a change of this one carries its evidence
            for flag in list(t.flags(other)):
                if flag["origin_id"] == tid:
                    t.delete("Flag", flag["id"], other)
                    erased["flags"].append(flag["id"])
    t.delete("Topic", tid)
    erased["topics"].append(tid)


def _erase_said_by(t: Transition, tid: str, fid: str, source: str,
                   erased: dict[str, list[Any]]) -> list[Any]:
    """Remove the entries and observations `source` made in one field, then restore the
    history rules over what remains (the field goes if nothing remains)."""
    content: list[Any] = []
    for e in list(t.entries(fid)):
        if e["source"] == source:
            heir = _heir(t, e, source)
            if heir is None:
                content.append(_entry_content(t, e))
                _erase_entry(t, fid, e["id"], erased)
                continue
            content.append(_pass_on(t, e, heir, erased))
        for obs in list(t.observations(e["id"])):
            if obs["source"] == source:
                content.append({"observation": obs["id"], "of": e["id"], "source": source,
                                "ref": obs["ref"]})
                erased["cited"].append(obs["ref"])
                t.delete("Observation", obs["id"], e["id"])
                erased["observations"].append(obs["id"])
    remaining = t.entries(fid)
    if not remaining:
        t.delete("Field", fid, tid)
        erased["fields"].append(fid)
        return content
    gone = set(erased["entries"])
    for e in remaining:
        # A latest statement that came from an erased observation is no longer stated.
        stated = [e["valid_at"]] + [o["valid_at"] for o in t.observations(e["id"])
                                    if o["polarity"] == "+"]
        if e["asserted_at"] != max(stated):
            t.update("Entry", e["id"], asserted_at=max(stated))
        if e["superseded_by"] in gone:
            # Superseded, or retracted (mem.retract), by what was erased: that statement was
            # never made, so the entry may be current again, and the retraction's reason goes.
            retracted = e["status"] == "retracted"
            t.update("Entry", e["id"], superseded_by=None, superseded_tx=None,
                     status="current" if e["status"] in ("superseded", "retracted") else e["status"],
                     **({"reason": None} if retracted else {}))
    # A field's labels are those of its history: the erased entries' go with them.
    labels = list(dict.fromkeys(x for e in remaining for x in e["labels"] or []))
    if labels != list(t.get("Field", fid)["labels"] or []):
        t.update("Field", fid, labels=labels)
    best = settle_current(t, fid)
    for e in history.mislinked(t.entries(fid)):
        if best is not None:
            t.link_successor(e, best)
    t.touch_field(fid, tid)
    return content


def _heir(t: Transition, e: Row, source: str) -> Row | None:
    """The first restatement of an entry's value by another source, with the entry's polarity:
    the statement that keeps the value when `source`'s own goes (None: the entry goes). Another
    source that said the same thing said it too, and erasing one source must not erase it."""
    if history.is_retraction(e):
        return None
    others = [o for o in t.observations(e["id"])
              if o["source"] != source and o["polarity"] == e["polarity"]]
    return min(others, key=lambda o: (o["recorded_at"], o["seq"]), default=None)


def _pass_on(t: Transition, e: Row, heir: Row, erased: dict[str, list[Any]]) -> dict[str, Any]:
    """The entry becomes `heir`'s statement: its provenance and times are the observation's,
    which goes (its statement is now the entry's own). What the erased source added to the
    entry goes with its provenance: where it said it was (one place per entry, so whose it
    was is not known) and its episode. Labels stay: a label says what the value is, whoever
    states it. Returns the erased statement's content."""
    out: dict[str, Any] = {"entry": e["id"], "source": e["source"], "ref": e["ref"],
                           "restated_by": heir["id"]}
    changes: dict[str, Any] = {k: heir[k] for k in ("source", "actor", "ref", "confidence",
                                                    "valid_at", "recorded_at")}
    if e.get("place_lat") is not None:
        out["place"] = [e["place_lat"], e["place_lon"], e["place_name"]]
        changes.update(place_lat=None, place_lon=None, place_name=None)
    if e["ref"] != heir["ref"]:
        erased["cited"].append(e["ref"])
    t.delete("Observation", heir["id"], e["id"])
    erased["observations"].append(heir["id"])
    t.update("Entry", e["id"], **changes)
    return out


# ---------------------------------------------------------------------- episodes
def _episodes_of(t: Transition, cited: Iterable[Any], source: str | None,
                 every_episode: bool) -> list[str]:
    """The scope's episodes that go: those cited by what was erased, those recorded from
    `source`, or all of them."""
    if every_episode:
        return t.episode_ids_where(frozenset(EPISODE_STATUS))
    found = [ref for ref in cited if isinstance(ref, str) and is_episode(ref)
             and ref[:len(ref) - len(ref.rsplit(":", 1)[-1])] == t.prefix]
    if source is not None:
        with t.cache.store.reading() as tx:
            found += queries.episode_ids_from(tx, t.scope, source)
    t.prefetch("Episode", found)
    return [eid for eid in dict.fromkeys(found) if t.row("Episode", eid) is not None]


def _erase_episodes(t: Transition, eids: list[str], erased: dict[str, list[Any]]) -> list[Any]:
    content: list[Any] = []
    gone = set(eids)
    for eid in eids:
        row = t.get("Episode", eid)
        content.append({"episode": eid, "text": row["text"], "source": row["source"],
                        "speaker": row["speaker"]})
        t.delete("Episode", eid)
        erased["episodes"].append(eid)
    # only the episode recorded right after one can read it as context (gem/operators/ingest.py)
    after = {f"{t.prefix}ep{episode_order(eid)[0] + 1}": eid for eid in eids}
    t.prefetch("Episode", [a for a in after if a not in gone])
    for key, before in after.items():
        follower = None if key in gone else t.row("Episode", key)
        if follower is not None and follower["follows"] == before:
            t.update("Episode", key, follows=None)
            t.touched.episodes[key] = None
    return content


# ---------------------------------------------------------------------- the log
def _redact(t: Transition, tids: Iterable[str], naming: Iterable[int],
            needles: set[str]) -> list[int]:
    """Redact every record that touched these topics and those `naming` erased content;
    attest again, with their current content, the surviving units those records attested
    (a unit gone whose key names erased content is not: every record naming it is redacted)."""
    seqs = sorted({s for tid in tids for s in t.committed.touched_by.get(tid, ())} | set(naming))
    if not seqs:
        return []
    with t.cache.store.reading() as tx:
        records = queries.read_records(tx, seqs)
    gone = {k for table in t.deleted.values() for k in table}
    survivors: set[str] = set()
    for record in records:
        if record["salt"]:
            survivors.update(json.loads(record["writes"]))
            survivors.update(json.loads(record["units"]))
            # a read's record holds salience of units it neither wrote nor lists as touched
            survivors.update(json.loads(record["salience"] or "{}"))
    survivors -= gone
    erased_topics = {k for k in t.deleted["Topic"]}
    survivors = {k for k in survivors if k.split("|", 1)[0] not in ("Policy", "Meta")
                 and k.split("/", 1)[0] not in erased_topics}
    _attest_again(t, survivors)
    for key in [k for k, v in t.attested.items() if v is None and redact.mentions(k, needles)]:
        del t.attested[key]
    t.store_writes.append(lambda tx: queries.redact_records(tx, seqs))
    return seqs


def _attest_again(t: Transition, keys: set[str]) -> None:
    """The erasure record states, for every key a redacted record wrote, what is true now:
    the current content's hash, or None for a unit already gone. (The redacted record may be
    the one that deleted it; without the None, an older record's claim would be the last.)"""
    edges = [k for k in keys if "|" in k]
    units = [k for k in keys if "|" not in k]
    for table, prefix in (("Entry", "e"), ("Observation", "o"), ("Flag", "g")):
        ids = [k for k in units if "/" not in k and k.rsplit(":", 1)[-1].startswith(prefix)
               and not is_episode(k)]
        t.prefetch(table, ids)
        for key in ids:
            row = t.row(table, key)
            if row is not None and key not in t.deleted[table]:
                t.attested[key] = attest.row_hash(table, row)
            elif row is None:
                t.attested[key] = None
    fields = [k for k in units if "/" in k]
    topics = [k for k in units if "/" not in k and k.rsplit(":", 1)[-1].startswith("t")]
    episodes = [k for k in units if is_episode(k)]
    for table, ids in (("Field", fields), ("Topic", topics), ("Episode", episodes)):
        t.prefetch(table, ids)
        for key in ids:
            row = t.row(table, key)
            if row is not None:
                t.attested[key] = attest.row_hash(table, row)
                t.salience[key] = table  # the salience its redacted records held, again
            else:
                t.attested[key] = None
    for key in edges:
        table, a, b = key.split("|")
        edge = t.edge(table, a, b)
        t.attested[key] = attest.edge_hash(table, edge[3]) if edge is not None else None


# ---------------------------------------------------------------------- verification
def _leftovers(engine: Any, receipt: Any) -> list[str]:
    """Every stored and derived string, searched for the erased names and values (by the
    receipt's marks): what still holds one that no surviving unit holds as its own."""
    if not receipt.marks:
        return []
    scan = redact.Scan(redact.Marks(receipt.salt, receipt.marks))
    with engine.store.reading() as tx:
        scan.stored(tx)
    keeps = engine.store.keeps_snapshot and engine.store.path is not None
    scan.derived(engine.derived, snapshot_dir(engine.store.path) if keeps else None)
    return scan.problems()


def verify(engine: Any, receipt: Any) -> Any:
    """Check a receipt against the memory (see `Memory.verify_erasure`)."""
    from ..errors import InvalidInput
    from ..model import ErasureCheck
    problems: list[str] = []
    with engine.store.reading() as tx:
        found = queries.read_records(tx, [receipt.transition])
        stone = json.loads(found[0]["tombstone"]) if found and found[0]["tombstone"] else None
        if stone is None or found[0]["scope"] != receipt.scope or any(
                stone[k] != getattr(receipt, k) for k in
                ("topics", "fields", "entries", "observations", "redacted", "commitment")) \
                or stone.get("episodes", []) != receipt.episodes:
            raise InvalidInput(f"the receipt matches no erasure of this memory (transition "
                               f"{receipt.transition})")
        for table, ids in (("Topic", receipt.topics), ("Entry", receipt.entries),
                           ("Observation", receipt.observations), ("Episode", receipt.episodes)):
            for row in queries.read_rows(tx, table, ids):
                problems.append(f"{table.lower()} {row['id']} is still stored")
        hidden = {tuple(pair) for pair in receipt.fields}
        owners = sorted({tid for tid, _ in hidden})
        for tid, row in queries.read_children(tx, "HAS_FIELD", owners):
            if (tid, _hidden(stone["field_salt"], row["id"])) in hidden:
                problems.append(f"an erased field of {tid} is still stored")
        for record in queries.read_records(tx, receipt.redacted):
            if record["salt"] or any(record[p] for p in attest.PARTS):
                problems.append(f"log record {record['seq']} still holds its content")
        gone = set(receipt.topics)
        erased_episodes = set(receipt.episodes)
        for seq, units in queries.touches(tx):
            if seq < receipt.transition and any(
                    u.split("/", 1)[0] in gone or u in erased_episodes or
                    (u.split("/", 1)[0], _hidden(stone["field_salt"], u)) in hidden for u in units):
                problems.append(f"log record {seq} still names an erased unit")
    problems += _leftovers(engine, receipt)
    scope = engine.derived.scope(receipt.scope)
    for tid in receipt.topics:
        if tid in scope.names.names_of or tid in scope.lexical or tid in scope.vectors or \
                tid in scope.summaries or scope.topics.status_of(tid) is not None:
            problems.append(f"derived state still holds topic {tid}")
    for eid in receipt.episodes:
        if eid in scope.unit_lexical or eid in scope.unit_vectors or eid in scope.unit_docs or \
                scope.episodes.status_of(eid) is not None:
            problems.append(f"derived state still holds episode {eid}")
    return ErasureCheck(ok=not problems, problems=problems)
