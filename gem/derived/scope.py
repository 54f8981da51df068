"""ScopeState: one scope's derived state (names, summaries, unit indexes, salience, places)."""
from __future__ import annotations

import contextlib
import itertools
from array import array
from operator import itemgetter, methodcaller
from typing import TYPE_CHECKING, Any, Iterable, Mapping, Sequence

import numpy as np

from ..errors import SnapshotError
from ..index import LexicalIndex, VectorIndex
from ..places import PlaceGrid, unit_places
from ..store.schema import Row
from .documents import SCAN_ABOVE, summaries_of, unit_document_pieces, units_rewritten
from .salience_reads import SalienceReads
from .summaries import Summaries
from .tables import (EPISODE_STATUS, FIELD_STATUS, TOPIC_STATUS, NameDirectory, SalienceTable,
                     SavedUnits, Summarizer, UnitIndexes, said_key)

if TYPE_CHECKING:
    from ..embed import Embedder
    from ..state.cache import CommittedCache
    from ..state.transition import Transition


class ScopeState(SalienceReads):
    """What gem derives from the units of one scope. Nothing here depends on another scope, so
    what a tenant sees (rankings, document frequencies, title matches, ids, salience, C5) is
    the same whatever other tenants do."""

    def __init__(self, name: str, embedder: "Embedder") -> None:
        self.name = name
        self.embedder = embedder
        self.counters: dict[str, int] = {}  # id sequences and interactions of this scope
        self.names = NameDirectory()
        # The resolver needs the exact nearest title (a match decides where a fact goes).
        self.title_vectors = VectorIndex(embedder.dim, approximate_above=None)
        self._lexical: LexicalIndex | None = LexicalIndex()
        self.saved_lexical: Any = None  # where it is read from, while _lexical is None
        self.vectors = VectorIndex(embedder.dim)
        self.summaries = Summaries()
        self.stale: dict[str, None] = {}  # topics whose summary and index entries are out of date
        self.topics = SalienceTable(TOPIC_STATUS)
        self.fields = SalienceTable(FIELD_STATUS)
        self.episodes = SalienceTable(EPISODE_STATUS)
        # The unit indexes (fields and episodes), their documents and valid times; units in
        # `stale_units` are re-derived by the next reader (`refresh_units`).
        self._units: UnitIndexes | None = UnitIndexes(embedder)
        # The files that hold the unit layer as it is (None once it changed since they were
        # written or read). A loaded snapshot leaves the layer on disk until something reads it:
        # at 100k topics it is 1M documents and vectors, most of a snapshot's bytes and of the
        # time to open one, and most opens never search units.
        self.saved_units: SavedUnits | None = None
        self.stale_units: dict[str, None] = {}
        # topic -> its fields in creation order: derived from the field table's ids when first
        # asked for (topic status changes, C5's bound, erasure), not saved (19 of the 27 MB of a
        # 100k-topic snapshot's state file) nor kept up to date until then
        self._fields_by_topic: dict[str, list[str]] | None = {}
        # Labels of the fields that have any (field id -> labels), and for each label the rows
        # of the field table that carry it: a label's half-life applies to all of them at once.
        self.field_labels: dict[str, tuple[str, ...]] = {}
        self._label_rows: dict[str, np.ndarray] | None = None
        self.open_flags: dict[str, int] = {}
        # What each episode said, where, by whom and when (`said_key`) -> its id: an ingest
        # stores an episode it repeats only once. Built by one scan of the scope's episodes
        # when an ingest first needs it (not saved), then kept by `_put_episode`; an erasure
        # drops it (rare). A hit is checked against the episode's row, so a stale one is
        # harmless.
        self.said: dict[bytes, str] | None = None
        # The placed units by geohash (gem/places.py): built by one scan when a `near=` query
        # first needs it (not saved), then kept by `refresh_units` and `_forget_unit`.
        self.places: PlaceGrid | None = None
        self._active_fields: int | None = None
        # Duplicate detection compares only titles that changed since its last pass, unless its
        # threshold changed (gem/operators/revise.py).
        self.unpaired: dict[str, None] = {}
        self.paired_at: float | None = None
        # topic -> the log records that touched it (an erasure redacts them); a loaded
        # snapshot's are built when first used (`touched_from`)
        self._touched_by: dict[str, array] | None = {}
        self.touched_packed: Any = None  # what builds them, while _touched_by is None
        self.touched_later: dict[str, array] = {}  # records after those, while _touched_by is None
        # The topics with any typed edge: a transition reads the edges of no other topic (most
        # have none; reading that they have none cost two statements). Found by one scan of
        # the edges when the state is loaded or rebuilt, not saved.
        self.edge_holders: set[str] = set()

    # ------------------------------------------------------------------ the unit layer
    def units(self) -> "UnitIndexes":
        """The unit layer, read from the snapshot's files when first asked for; if they are
        unusable, an empty one with every unit stale, which the next reader derives again from
        the database (as a rebuild does)."""
        if self._units is None:
            assert self.saved_units is not None
            try:
                self._units = self.saved_units.load(self.embedder)
                if self._units.outdated:  # written again in the current layout by the next save
                    self.saved_units = None
            except SnapshotError:
                self._units = UnitIndexes(self.embedder)
                self.saved_units = None
                self.stale_units.update(dict.fromkeys(
                    u for table in (self.fields, self.episodes) for u in table.ids if u))
        return self._units

    def changed_units(self) -> "UnitIndexes":
        """The unit layer, about to change: the files that held it no longer do."""
        units = self.units()
        self.saved_units = None
        return units

    @property
    def units_loaded(self) -> bool:
        return self._units is not None

    @property
    def unit_lexical(self) -> LexicalIndex:
        return self.units().lexical

    @property
    def unit_vectors(self) -> VectorIndex:
        return self.units().vectors

    @property
    def unit_docs(self) -> Mapping[str, str]:
        return self.units().docs

    @property
    def unit_valid(self) -> Mapping[str, float]:
        return self.units().valid

    @property
    def lexical(self) -> LexicalIndex:
        """The BM25 index over the summaries, read from the snapshot when first used; if its
        file is unusable, an empty one with every topic stale, which the next reader derives
        again (as after a rebuild)."""
        if self._lexical is None:
            try:
                self._lexical = self.saved_lexical.load()
            except SnapshotError:
                self._lexical = LexicalIndex()
                self.stale.update(dict.fromkeys(tid for tid in self.topics.ids if tid))
            self.saved_lexical = None
        return self._lexical

    @lexical.setter
    def lexical(self, index: LexicalIndex) -> None:
        self._lexical, self.saved_lexical = index, None

    @property
    def lexical_loaded(self) -> bool:
        return self._lexical is not None

    def lexical_from(self, saved: Any) -> None:
        """Take the summaries' index as saved (an object whose `load()` reads it)."""
        self._lexical, self.saved_lexical = None, saved

    @property
    def touched_by(self) -> dict[str, array]:
        if self._touched_by is None:
            built = self.touched_packed.build()
            for tid, seqs in self.touched_later.items():
                built.setdefault(tid, array("q")).extend(seqs)
            self._touched_by, self.touched_packed, self.touched_later = built, None, {}
        return self._touched_by

    @touched_by.setter
    def touched_by(self, value: dict[str, array]) -> None:
        self._touched_by, self.touched_packed, self.touched_later = value, None, {}

    def touched_from(self, packed: Any) -> None:
        """Take a snapshot's record of the log records that touched each topic, as it was
        read (an object whose `build()` makes the dict), until something uses it: at 100k
        topics, 100k arrays an open need not make."""
        self._touched_by, self.touched_packed, self.touched_later = None, packed, {}

    def touch(self, tid: str, seq: int) -> None:
        """Log record `seq` touched `tid` (kept apart while the snapshot's record is unread: a
        commit after an open need not build 100k arrays)."""
        touched = self.touched_later if self._touched_by is None else self._touched_by
        touched.setdefault(tid, array("q")).append(seq)

    # ------------------------------------------------------------------ the Committed view
    def topic_status(self, tid: str) -> str | None:
        return self.topics.status_of(tid)

    def has_edges(self, tid: str) -> bool:
        return tid in self.edge_holders

    def has_open_flags(self, tid: str) -> bool:
        return self.open_flags.get(tid, 0) > 0

    def field_status(self, fid: str) -> str | None:
        return self.fields.status_of(fid)

    def fields_of(self, tid: str) -> list[str]:
        if self._fields_by_topic is None:
            return self._fields_in_table(tid)
        return self._fields_by_topic.get(tid, [])

    def _fields_in_table(self, tid: str) -> list[str]:
        """A topic's fields from the field table, before `fields_by_topic` is built (it decodes
        every field id: 0.7 s at 100k topics): the rows whose owner is the topic's row, and
        those without one, whose ids name it."""
        n = len(self.fields)
        live = self.fields.live()
        owner = self.fields.owner[:n]
        row = self.topics.row_of.get(tid)
        rows = np.flatnonzero(live & ((owner == row) | (owner < 0)) if row is not None
                              else live & (owner < 0))
        ids = self.fields.ids
        return [fid for fid in map(ids.__getitem__, rows.tolist())
                if fid.split("/", 1)[0] == tid]

    def summary_stale(self, tid: str) -> bool:
        """Whether the topic's summary (and its index entries) wait for a refresh."""
        return tid in self.stale

    @property
    def fields_by_topic(self) -> dict[str, list[str]]:
        if self._fields_by_topic is None:
            grouped: dict[str, list[str]] = {}
            for fid in self.fields.ids:  # rows in the order fields were first put
                if fid:  # "": an erased field's row
                    grouped.setdefault(fid.split("/", 1)[0], []).append(fid)
            self._fields_by_topic = grouped
        return self._fields_by_topic

    def derive_fields_by_topic(self) -> None:
        """Group the fields by topic from the field table when next asked (a loaded table)."""
        self._fields_by_topic = None

    # ------------------------------------------------------------------ units
    def _put_topic(self, row: Row) -> None:
        self.topics.put(row["id"], row["strength"], row["last_access"], row["status"])

    def _put_field(self, row: Row) -> None:
        owner = self.topics.row_of.get(row["topic_id"], -1)
        self.fields.put(row["id"], row["strength"], row["last_access"], row["status"], owner)
        labels = tuple(row.get("labels") or ())
        if labels != self.field_labels.get(row["id"], ()):
            if labels:
                self.field_labels[row["id"]] = labels
            else:
                del self.field_labels[row["id"]]
            self._label_rows = None
        if self._fields_by_topic is not None:
            fids = self._fields_by_topic.setdefault(row["topic_id"], [])
            if row["id"] not in fids:
                fids.append(row["id"])

    def _put_episode(self, row: Row) -> None:
        self.episodes.put(row["id"], row["strength"], row["last_access"], row["status"])
        if self.said is not None:
            self.said[said_key(row["text"], row["source"], row["speaker"], row["at"])] = row["id"]

    def _put_names(self, rows: Sequence[Row], vectors: dict[str, np.ndarray]) -> None:
        retitled = [r for r in rows if self.names.title_of.get(r["id"]) != r["title"]]
        missing = [r for r in retitled if r["id"] not in vectors]
        if missing:
            embedded = self.embedder.embed([r["title"] for r in missing])
            vectors = {**vectors, **{r["id"]: v for r, v in zip(missing, embedded)}}
        for r in rows:
            self.names.set(r["id"], r["title"], list(r["aliases"] or []))
        for r in retitled:
            self.unpaired[r["id"]] = None
            vec = vectors[r["id"]]
            if np.any(vec):
                self.title_vectors.upsert(r["id"], vec)
            else:
                self.title_vectors.remove(r["id"])

    def take(self, t: "Transition", title_vectors: dict[str, np.ndarray] | None) -> None:
        """Take in what a committed transition of this scope changed."""
        def changed(table: str) -> dict[str, Row]:
            keys = [*t.updated[table],  # (units moved in bulk are not: set below)
                    *(k for k, kind in t.salience.items() if kind == table)]
            out: dict[str, Row] = {k: t.rows[table][k] for k in keys}  # type: ignore[misc]
            out.update(t.created[table])
            return out

        self.topics.set_status(t.moved["Topic"])
        self.fields.set_status(t.moved["Field"])
        topics = changed("Topic")
        for row in topics.values():
            self._put_topic(row)
        for row in changed("Field").values():
            self._put_field(row)
        # a compressed episode is searched by its summary: compressing or reviving it changes
        # its document (other ladder steps change none, status is read at query time)
        statuses = itertools.chain(((k, props["status"]) for k, props in t.updated["Episode"].items()
                          if "status" in props), t.moved["Episode"].items())
        recompacted = [k for k, status in statuses
                       if "compressed" in (status, self.episodes.status_of(k))]
        self.stale_units.update(dict.fromkeys(recompacted))
        self.episodes.set_status(t.moved["Episode"])
        for row in changed("Episode").values():
            self._put_episode(row)
        self.stale_units.update(dict.fromkeys(t.created["Episode"]))
        # an episode whose context (`follows`) an erasure removed reads differently
        self.stale_units.update(dict.fromkeys(k for k, props in t.updated["Episode"].items()
                                              if "follows" in props))
        self.stale_units.update(dict.fromkeys(units_rewritten(t)))
        for tid in t.touched.reindex:  # a new title or alias changes every field's document
            self.stale_units.update(dict.fromkeys(self.fields_of(tid)))
        renamed = [topics[k] for k in t.touched.reindex if k in topics]
        self._put_names([r for r in renamed if r is not None], title_vectors or {})
        for tid in t.children["FLAGS"]:
            self.open_flags[tid] = sum(1 for g in t.open_flags(tid))
        for tid, edges in t.edges.items():  # every topic whose edges it read or changed
            if edges:
                self.edge_holders.add(tid)
            else:
                self.edge_holders.discard(tid)
        for tid in t.touched.content:
            self.stale[tid] = None
        if t.tombstone:  # records an erasure redacted touch nothing any more
            gone = set(t.tombstone["redacted"])
            for tid, seqs in list(self.touched_by.items()):
                if gone.intersection(seqs):
                    self.touched_by[tid] = array("q", [s for s in seqs if s not in gone])
        touched = set(t.touched.topics).union(t.touched.episodes)  # and each field's topic:
        touched.update(map(itemgetter(0), map(methodcaller("partition", "/"), t.touched.fields)))
        for tid in touched:
            self.touch(tid, t.seq)
        self.forget_units(t.deleted["Topic"], t.deleted["Field"], t.deleted["Episode"])
        self._active_fields = None
        self.counters = dict(vars(t.counters))

    def forget_units(self, topics: Iterable[str], fields: Iterable[str],
                     episodes: Iterable[str] = ()) -> None:
        """Remove erased topics, fields and episodes from everything derived (their index
        entries, names, summaries, salience, flags, and the record of what touched them)."""
        for eid in episodes:
            self.said = None
            self.episodes.remove(eid)
            self._forget_unit(eid)
            self.touched_by.pop(eid, None)
        for fid in fields:
            self._forget_field(fid)
            tid = fid.split("/", 1)[0]
            if fid in self.fields_by_topic.get(tid, ()):
                self.fields_by_topic[tid].remove(fid)
        for tid in topics:
            self.topics.remove(tid)
            for fid in self.fields_by_topic.pop(tid, []):
                self._forget_field(fid)
            self.names.drop(tid)
            self.title_vectors.remove(tid)
            self.lexical.remove(tid)
            self.vectors.remove(tid)
            for mapping in (self.summaries, self.stale, self.open_flags, self.unpaired,
                            self.touched_by):
                mapping.pop(tid, None)  # type: ignore[attr-defined]
            self.edge_holders.discard(tid)

    def _forget_unit(self, unit: str) -> None:
        """A field or an episode leaves the unit indexes."""
        self.stale_units.pop(unit, None)
        if self.places is not None:
            self.places.remove(unit)
        units = self.units()
        if unit in units.docs or unit in units.lexical or unit in units.vectors:
            self.changed_units().drop(unit)

    def _forget_field(self, fid: str) -> None:
        self.fields.remove(fid)
        self._forget_unit(fid)
        if self.field_labels.pop(fid, None) is not None:
            self._label_rows = None

    # ------------------------------------------------------------------ summaries, lazily
    def refresh(self, cache: "CommittedCache", summarizer: Summarizer,
                only: Iterable[str] | None = None) -> None:
        """Recompute stale summaries (all, or those of `only`) from committed state, and their
        lexical and vector index entries, in one embedder call."""
        self.lexical  # an unusable snapshot file makes every topic stale
        stale = list(self.stale) if only is None else [t for t in only if t in self.stale]
        if stale:
            self.set_summaries(summaries_of(cache, stale, summarizer))

    def set_summaries(self, texts: dict[str, str]) -> None:
        """Take these topics' fresh summaries (read from committed state) with their lexical
        and vector index entries, in one embedder call: they are stale no more."""
        lexical = self.lexical
        tids = list(texts)
        vectors = self.embedder.embed([texts[t] for t in tids])
        for tid in tids:
            text = texts[tid]
            self.summaries[tid] = text
            lexical.upsert(tid, " ".join([*self.names.names_of.get(tid, []), text]))
            del self.stale[tid]
        nonzero = np.any(vectors, axis=1).tolist() if tids else []
        for tid in (t for t, has in zip(tids, nonzero) if not has):
            self.vectors.remove(tid)
        if any(nonzero):
            self.vectors.upsert_many([t for t, has in zip(tids, nonzero) if has],
                                     vectors[np.asarray(nonzero)])

    def refresh_units(self, cache: "CommittedCache", limit: int | None = None) -> None:
        """Re-derive the stale units' documents, valid times and index entries from committed
        state (all of them, or the `limit` oldest), a piece of units at a time
        (`unit_document_pieces`): one embedder call and one bulk upsert each, and no more of
        their rows, documents and vectors held at once (a rebuild makes every unit stale)."""
        self.units()  # unusable files make every unit stale
        if not self.stale_units:
            return
        units = self.changed_units()
        stale = list(self.stale_units) if limit is None else \
            list(itertools.islice(self.stale_units, limit))
        if self.places is not None and len(stale) > SCAN_ABOVE:
            self.places = None  # too many to read by key: its own scan rebuilds it
        # closed at once if a piece fails: a scan's pieces are read under the store's lock
        with contextlib.closing(unit_document_pieces(cache, self.names, stale)) as pieces:
            for part, docs in pieces:
                self._index_units(units, part, docs)
                if self.places is not None:
                    self.places.update(unit_places(cache, part))
                for unit in part:
                    del self.stale_units[unit]

    def _index_units(self, units: UnitIndexes, part: list[str],
                     docs: dict[str, tuple[str, float]]) -> None:
        """Index the documents of units `part` (those without one leave the layer)."""
        keep = [u for u in part if u in docs]
        vectors = self.embedder.embed([docs[u][0] for u in keep]) if keep else \
            np.zeros((0, self.embedder.dim), dtype=np.float32)
        for unit in part:
            if unit not in docs:  # no current value (or gone): nothing to find it by
                units.drop(unit)
        for unit in keep:
            units.put(unit, *docs[unit])
        nonzero = np.any(vectors, axis=1) if keep else np.zeros(0, dtype=bool)
        for unit in (u for u, has in zip(keep, nonzero.tolist()) if not has):
            units.vectors.remove(unit)
        if nonzero.any():
            units.vectors.upsert_many([u for u, has in zip(keep, nonzero.tolist()) if has],
                                      vectors[nonzero])

    # Stale units derived after a commit beyond those the commit itself made stale: a backlog
    # (a rebuild makes every unit stale) drains without any one commit paying for all of it.
    UNIT_STEP = 256

    def derive_step(self, cache: "CommittedCache", made: int) -> None:
        """On a store other processes write (an embedded one derives off the commit path,
        gem/derived/pending.py), after a commit that made `made` units stale: derive them and
        a bounded step of the older ones, while the commit's rows are in the row cache. A
        free-text query after a bulk load then finds nothing left to derive (it derived 1M
        documents, ~50 s, before).
        While the unit layer is still in the snapshot's files, up to UNIT_STEP stale units wait
        for the first reader (a process that writes a little and never searches does not read
        the layer); past that, the layer is read (arrays: 0.5 s for 100k units, where deriving
        90k took 7 s) and derived after each commit from then on. A bulk load into a reopened
        memory left it all to the first reader: 45 s at 10k topics, 338x a later query."""
        if self.stale_units and (self.units_loaded or len(self.stale_units) > self.UNIT_STEP):
            self.refresh_units(cache, made + self.UNIT_STEP)

    def summary(self, cache: "CommittedCache", summarizer: Summarizer, tid: str) -> str:
        self.refresh(cache, summarizer, [tid])
        summary = self.summaries.get(tid)  # the title only without one: names parsed then
        return summary if summary is not None else self.names.title_of.get(tid, "")

    # ------------------------------------------------------------------ comparison
    def fingerprint(self) -> dict[str, Any]:
        """Everything this state holds, in a canonical form (by key, not by insertion order),
        so two states compare equal exactly when they would answer every question alike."""
        def table(t: SalienceTable) -> dict[str, tuple[float, float, str, str | None]]:
            return {key: (float(t.strength[i]), float(t.last[i]), t.names[int(t.status[i])],
                          self.topics.ids[int(t.owner[i])] if t.owner[i] >= 0 else None)
                    for i, key in enumerate(t.ids) if key}

        def vectors(index: VectorIndex) -> dict[str, bytes]:
            return {key: index.get(key).tobytes() for key in index}  # type: ignore[union-attr]

        return {
            "counters": dict(self.counters),
            "names": sorted(self.names.by_name.items()), "keys": sorted(self.names.by_key.items()),
            "titles": sorted(self.names.title_of.items()),
            "title_vectors": vectors(self.title_vectors), "vectors": vectors(self.vectors),
            "lexical": sorted(self.lexical), "summaries": dict(sorted(self.summaries.items())),
            "stale": sorted(self.stale), "topics": table(self.topics), "fields": table(self.fields),
            "fields_by_topic": {k: sorted(v) for k, v in sorted(self.fields_by_topic.items()) if v},
            "field_labels": dict(sorted(self.field_labels.items())),
            "open_flags": {k: v for k, v in sorted(self.open_flags.items()) if v},
            "episodes": table(self.episodes), "unit_docs": dict(sorted(self.unit_docs.items())),
            "unit_valid": dict(sorted(self.unit_valid.items())),
            "unit_lexical": sorted(self.unit_lexical), "unit_vectors": vectors(self.unit_vectors),
            "stale_units": sorted(self.stale_units),
            "touched_by": {k: list(v) for k, v in sorted(self.touched_by.items()) if v},
            "edge_holders": sorted(self.edge_holders),
        }
