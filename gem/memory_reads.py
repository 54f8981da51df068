"""What `Memory`'s administrative reads and views do (gem/memory.py keeps their signatures and
documentation): side-effect free, nothing reinforced, nothing logged; and naming units for
readers (titles, "Title / field", episodes as "speaker, time: excerpt")."""
from __future__ import annotations

import json
from itertools import filterfalse
from operator import add, itemgetter, methodcaller
from typing import TYPE_CHECKING, Any, Iterable, Sequence

from . import audit as audit_mod
from . import history as history_rules
from . import usage
from .arguments import flag_arg, page_args, text_arg
from .derived import Progress
from .errors import InvalidInput, UnknownUnit
from .model import (AuditReport, EpisodePage, Explanation, FieldView, HistoryEntry, Neighbourhood,
                    PendingRevision, SalienceHistory, TopicPage, TopicView, episode_label)
from .operators import revise as revise_op
from .operators import retrieve as retrieve_op
from .operators import views
from .operators.common import field_evidence, field_named
from .reliability import evidence_states
from .state.transition import Transition
from .store import allocator, queries
from .units import is_episode

if TYPE_CHECKING:  # only for annotations: gem.memory imports this module
    from .memory import Memory


LOG_HEADS = ("seq", "op", "event", "at", "actor", "units", "prev_hash", "hash")


def json_time(record: dict[str, Any]) -> dict[str, Any]:
    """A log record as plain JSON: its time as ISO 8601 text with its offset, exactly the text
    its hash covers (and what GET /v1/log shows)."""
    record["at"] = record["at"].isoformat()
    return record


def unit_names(mem: "Memory", ids: Sequence[str]) -> dict[str, str]:
    """Each id's name for readers: a topic's title, a field's "Title / field", an episode's
    label (an id of nothing is its own name). A forgetting pass names ~20 units a topic: the
    fields, most of them, go through one comprehension."""
    fields = list(filter(_SLASHED, ids))
    parts = list(map(_PARTITION, fields))
    tids = list(map(_FIRST, parts))
    rest = list(filterfalse(_SLASHED, ids))
    episodes = [u for u in rest if is_episode(u)]
    titles = mem.titles(set(tids).union(rest).difference(episodes))
    said = mem.episode_labels(episodes)
    out = {u: said.get(u, u) for u in episodes}
    out.update((u, titles.get(u, u)) for u in rest if u not in out)
    if titles.keys() >= set(tids):  # (C-level: "Title / " joined to each name)
        heads = {tid: f"{title} / " for tid, title in titles.items()}
        out.update(zip(fields, map(add, map(heads.__getitem__, tids), map(_LAST, parts))))
    else:
        out.update(zip(fields, [f"{titles[tid]} / {name}" if tid in titles else u
                                for u, (tid, _, name) in zip(fields, parts)]))
    return out


_SLASHED = methodcaller("__contains__", "/")
_PARTITION = methodcaller("partition", "/")
_FIRST, _LAST = itemgetter(0), itemgetter(2)


def pending_revisions(mem: "Memory") -> list[PendingRevision]:
    return mem._read(lambda t: [revise_op.pending_revision(t, tid)
                                for tid in revise_op.open_flag_topics(t)])


def inspect(mem: "Memory", topic: str, field: str | None) -> TopicView | FieldView | None:
    def read(t: Transition) -> TopicView | FieldView | None:
        tid = mem._topic_id(t, topic)
        if tid is None:
            return None
        if field is None:
            return retrieve_op.topic_view(t, tid, flags=True)
        fid = field_named(t, tid, text_arg(field, "field"))
        return None if fid is None else retrieve_op.field_view(t, fid)
    return mem._read(read)


def history(mem: "Memory", topic: str, field: str) -> list[HistoryEntry]:
    def read(t: Transition) -> list[HistoryEntry]:
        fid = mem._require_field(t, topic, field)
        return [retrieve_op.history_entry(t, e) for e in history_rules.chronological(t.entries(fid))]
    return mem._read(read)


def explain(mem: "Memory", topic: str, field: str) -> Explanation:
    def read(t: Transition) -> Explanation:
        fid = mem._require_field(t, topic, field)
        decay = t.settings["reliability_decay"]
        states = evidence_states(field_evidence(t, fid), decay)
        current = t.current_entry(fid)
        if current is not None and history_rules.is_retraction(current):
            current = None  # retracted: no current value
        entries = history_rules.chronological(t.entries(fid))
        view = retrieve_op.field_view(t, fid)
        return Explanation(
            contested=view.contested, why_current=view.why_current,
            topic=t.get("Topic", t.get("Field", fid)["topic_id"])["title"],
            topic_id=t.get("Field", fid)["topic_id"], field=t.get("Field", fid)["name"],
            value=None if current is None else json.loads(current["value"]),
            entries=[retrieve_op.history_entry(t, e) for e in entries],
            reliability=states.reliability, decay=decay,
            states={"action": states.action, "inaction": states.inaction,
                    "conflict": states.conflict, "ignorance": states.ignorance})
    return mem._read(read)


def stats(mem: "Memory") -> dict[str, Any]:
    def read(t: Transition) -> dict[str, Any]:
        with mem._engine.store.reading() as tx:
            counts = queries.status_counts(tx, mem._scope)
            entries, active_entries = queries.entry_counts(tx, mem._scope)
            transitions = queries.count(tx, "Transition", "n.scope = $s", {"s": mem._scope})
            llm = usage.totals(queries.details_mentioning(tx, mem._scope, '"llm"'))
        return {"topics": counts["topics"], "fields": counts["fields"],
                "active_fields": counts["fields"].get("active", 0),
                "entries": entries, "active_entries": active_entries,
                "episodes": counts["episodes"],
                "interactions": t.counters.interactions,
                "active_bound": t.settings.get("active_bound"),
                "transitions": transitions, "llm": llm}
    return mem._read(read)


def transitions(mem: "Memory", since: int) -> list[dict[str, Any]]:
    mem._check_open()
    if not isinstance(since, int) or isinstance(since, bool) or since < 0:
        raise InvalidInput(f"since must be an integer >= 0, got {since!r}")
    with mem._engine.store.reading() as tx:
        rows = queries.transitions(tx, since, scope=mem._scope if mem._root else None)
    return [json_time(audit_mod.log_entry(r)) for r in rows]


def audit(mem: "Memory", *, full: bool, progress: Progress | None,
          expected_head: dict[str, Any] | None) -> AuditReport:
    mem._check_open()
    flag_arg(full, "full")
    if expected_head is not None and not (isinstance(expected_head, dict)
                                          and {"seq", "hash"} <= set(expected_head)):
        raise InvalidInput("expected_head must be a head() record: {'seq': ..., 'hash': ...}")
    with mem._engine.store.lock:
        report = audit_mod.audit(mem._engine, full=full, progress=progress,
                                 expected_head=expected_head)
    if mem._root is None and mem._engines.per_scope:
        # Each scope of a FalkorDB memory is its own store with its own log: the memory's
        # audit is every scope's.
        for name in mem._engines.scopes():
            if name != mem._scope:
                engine = mem._engines.get(name)
                with engine.store.lock:
                    report = audit_mod.merge(report, name, audit_mod.audit(
                        engine, full=full, progress=progress))
    if full:
        allocator.give_back()  # the columns of every row and record it read
    return report


def topics(mem: "Memory", *, status: str | None, flagged: bool, text: str | None, order: str,
           offset: int, limit: int) -> TopicPage:
    if status not in (None, "active", "archived"):
        raise InvalidInput(f"status must be 'active' or 'archived', got {status!r}")
    flag_arg(flagged, "flagged")
    if order not in views.ORDERS:
        raise InvalidInput(f"order must be one of {', '.join(views.ORDERS)}, got {order!r}")
    page_args(text, offset, limit)
    derived = mem._engine.derived.scope(mem._scope)
    return mem._read(lambda t: views.topic_listing(
        t, derived, status=status, flagged=flagged, text=text, order=order,
        offset=offset, limit=limit))


def episodes(mem: "Memory", *, text: str | None, status: str | None, offset: int, limit: int) -> EpisodePage:
    if status not in (None, "active", "compressed", "hidden"):
        raise InvalidInput(f"status must be 'active', 'compressed' or 'hidden', got {status!r}")
    page_args(text, offset, limit)
    derived = mem._engine.derived.scope(mem._scope)
    return mem._read(lambda t: views.episode_listing(
        t, derived, text=text, status=status, offset=offset, limit=limit))


def titles(mem: "Memory", topic_ids: Iterable[str]) -> dict[str, str]:
    mem._check_open()
    if isinstance(topic_ids, (str, bytes, dict)) or not hasattr(topic_ids, "__iter__"):
        raise InvalidInput(f"topic_ids must be a list of topic ids, got {type(topic_ids).__name__}")
    topic_ids = list(topic_ids)
    for i, tid in enumerate(topic_ids):
        if not isinstance(tid, str):
            raise InvalidInput(f"topic_ids[{i}] must be a string, got {type(tid).__name__}")
    with mem._engine.store.lock:
        title_of = mem._engine.derived.scope(mem._scope).names.title_of
        return {tid: title_of[tid] for tid in topic_ids if tid in title_of}


def episode_labels(mem: "Memory", episode_ids: Iterable[str]) -> dict[str, str]:
    if isinstance(episode_ids, (str, bytes, dict)) or not hasattr(episode_ids, "__iter__"):
        raise InvalidInput(f"episode_ids must be a list of episode ids, got "
                           f"{type(episode_ids).__name__}")
    episode_ids = list(episode_ids)
    for i, eid in enumerate(episode_ids):
        if not isinstance(eid, str):
            raise InvalidInput(f"episode_ids[{i}] must be a string, got {type(eid).__name__}")
    wanted = [e for e in episode_ids if is_episode(e)]

    def read(t: Transition) -> dict[str, str]:
        rows = ((e, t.row("Episode", e)) for e in wanted)
        return {e: episode_label(r["speaker"], r["source"], r["at"], r["text"])
                for e, r in rows if r is not None and r["scope"] == mem._scope}
    return mem._read(read)


def graph(mem: "Memory", topic: str, depth: int, *, limit: int) -> Neighbourhood:
    for name, value in (("depth", depth), ("limit", limit)):
        if not isinstance(value, int) or isinstance(value, bool) or value < 1:
            raise InvalidInput(f"{name} must be a positive integer")
    derived = mem._engine.derived.scope(mem._scope)

    def read(t: Transition) -> Neighbourhood:
        tid = mem._topic_id(t, topic)
        if tid is None:
            raise UnknownUnit(f"no topic named {topic!r}")
        return views.neighbourhood(t, derived, tid, depth, limit)
    return mem._read(read)


def salience_history(mem: "Memory", topic: str) -> SalienceHistory:
    def read(t: Transition) -> SalienceHistory:
        tid = mem._topic_id(t, topic)
        if tid is None:
            raise UnknownUnit(f"no topic named {topic!r}")
        with mem._engine.store.reading() as tx:
            records = queries.log_records(tx, mentioning=views.log_needles(tid),
                                          newest_first=False)
        return views.salience_history(t, tid, records)
    return mem._read(read)


def recent_transitions(mem: "Memory", limit: int, *, before: int | None, topic: str | None,
                       details: bool) -> list[dict[str, Any]]:
    if not isinstance(limit, int) or isinstance(limit, bool) or limit < 1:
        raise InvalidInput("limit must be a positive integer")
    if before is not None and (not isinstance(before, int) or isinstance(before, bool)):
        raise InvalidInput("before must be an integer")
    flag_arg(details, "details")

    def read(t: Transition) -> list[dict[str, Any]]:
        needles: tuple[str, ...] = ()
        if topic is not None:
            tid = mem._topic_id(t, topic)
            if tid is None:
                raise UnknownUnit(f"no topic named {topic!r}")
            needles = views.log_needles(tid)
        with mem._engine.store.reading() as tx:
            rows = queries.log_records(tx, before=before, limit=limit, mentioning=needles,
                                       columns=None if details else LOG_HEADS)
        if not details:
            # an erasure redacted a record's units with the rest of its content
            return [json_time({**r, "units": json.loads(r["units"]) if r["units"] else []})
                    for r in rows]
        return [json_time(audit_mod.decode(r)) for r in rows]
    return mem._read(read)
