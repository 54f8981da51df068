"""The operations agents call, on a `Memory`, returning the title-based schemas.

One function per operation; the HTTP routes, the MCP tools and the CLI all call these,
so the three surfaces say the same thing. They use only the public `Memory` API. Each
takes the Memory as its first argument so the server can run it on its worker thread:
`await amem.run(ops.recall, request)`.
"""
from __future__ import annotations

import json
import os
import re
import shutil
import tempfile
from datetime import datetime
from pathlib import Path
from typing import Any, Callable, Iterable, Sequence

from ..errors import InvalidInput, TransitionRejected, UnknownUnit
from ..memory import Memory
from ..memory import open as open_memory
from ..model import (Episode, Fact, FieldView, HistoryEntry, PendingRevision, Place, StaleMark,
                     TopicView)
from ..units import TopicId
from . import schemas as s

# Unit ids, after their scope's prefix ("acme:t3"; none in the default scope).
_SCOPE = r"(?:[a-z0-9][a-z0-9_.-]*:)?"
_TOPIC_ID = re.compile(rf"^{_SCOPE}t\d+$")
_FIELD_ID = re.compile(rf"^({_SCOPE}t\d+)/(.+)$")
_ENTRY_ID = re.compile(rf"^{_SCOPE}e\d+$")
_EPISODE_ID = re.compile(rf"^{_SCOPE}ep\d+$")
_MENTION = re.compile(rf"(?<![\w:.-]){_SCOPE}t\d+(?:/[\w-]+)?\b")


class Namer:
    """Turns internal unit ids into what a reader can use: topic titles, 'Topic / field',
    an entry as its field and value, an episode as who said what when. Caches per instance
    (one call's worth)."""

    def __init__(self, mem: Memory) -> None:
        self.mem = mem
        self._titles: dict[str, str | None] = {}
        self._episodes: dict[str, str | None] = {}

    def title(self, topic_id: str) -> str | None:
        if topic_id not in self._titles:
            found = self.mem.titles([topic_id]) if _TOPIC_ID.match(topic_id) else {}
            self._titles[topic_id] = found.get(topic_id)
        return self._titles[topic_id]

    def unit(self, unit: str, entry_fields: Iterable[str] = ()) -> str:
        """A readable name for a unit id; text that is not a known id comes back as is."""
        if _TOPIC_ID.match(unit):
            return self.title(unit) or "a new topic (not committed)"
        match = _FIELD_ID.match(unit)
        if match:
            title = self.title(match.group(1))
            return f"{title} / {match.group(2)}" if title else \
                f"{match.group(2)} (of a new topic, not committed)"
        if _EPISODE_ID.match(unit):
            if unit not in self._episodes:
                self._episodes[unit] = self.mem.episode_labels([unit]).get(unit)
            return self._episodes[unit] or "an episode no longer kept"
        if _ENTRY_ID.match(unit):
            for fid in entry_fields:
                named = self._entry(unit, fid)
                if named:
                    return named
        return unit

    def _entry(self, entry_id: str, field_unit: str) -> str | None:
        match = _FIELD_ID.match(field_unit)
        title = self.title(match.group(1)) if match else None
        if match is None or not title:
            return None
        try:
            entries = self.mem.history(title, match.group(2))
        except UnknownUnit:
            return None
        for e in entries:
            if e.id == entry_id:
                return f"{title} / {match.group(2)} = {json.dumps(e.value)}"
        return None

    def text(self, text: str) -> str:
        """Ids mentioned in a message (a rejection's detail), named where they resolve."""
        def name(match: re.Match[str]) -> str:
            named = self.unit(match.group(0))
            return match.group(0) if "not committed" in named else named
        return _MENTION.sub(name, text)

    def rewrite(self, value: Any, entry_fields: Iterable[str] = ()) -> Any:
        """Every id inside a JSON value (log details, policy evidence), named."""
        fields = list(entry_fields)
        if isinstance(value, str):
            return self.unit(value, fields)
        if isinstance(value, list):
            return [self.rewrite(v, fields) for v in value]
        if isinstance(value, dict):
            return {k: self.rewrite(v, fields) for k, v in value.items()}
        return value


# ---------------------------------------------------------------------- conversions
def _history(entries: list[HistoryEntry]) -> list[s.HistoryItem]:
    position = {e.id: i for i, e in enumerate(entries, 1)}
    return [s.HistoryItem(position=position[e.id], value=e.value, status=e.status,
                          valid_at=e.valid_at, asserted_at=e.asserted_at,
                          recorded_at=e.recorded_at, provenance=e.provenance,
                          superseded_by=position.get(e.superseded_by) if e.superseded_by else None,
                          active=e.active, observations=list(e.observations),
                          labels=list(e.labels), reason=e.reason, place=_place(e.place))
            for e in entries]


def _place(place: Place | None) -> s.PlaceIn | None:
    return None if place is None else s.PlaceIn(**place.model_dump())


def _field(view: FieldView) -> s.FieldCard:
    return s.FieldCard(
        name=view.name, value=view.value, valid_at=view.valid_at, recorded_at=view.recorded_at,
        provenance=view.provenance, status=view.status, salience=view.salience,
        contested=view.contested,
        candidates=None if view.candidates is None else [
            s.CandidateCard(value=c.value, provenance=c.provenance, valid_at=c.valid_at,
                            reliability=c.reliability, current=c.current) for c in view.candidates],
        history=None if view.history is None else _history(view.history),
        labels=list(view.labels), retracted=view.retracted, reliability=view.reliability,
        why_current=view.why_current, context=view.context, place=_place(view.place),
        distance_km=view.distance_km)


def _flags(namer: Namer, view: TopicView) -> list[s.ReviewFlag]:
    return [s.ReviewFlag(topic=view.title,
                         because_of=f.origin,
                         policy=f.policy, evidence=namer.rewrite(f.evidence), since=f.created_at)
            for f in view.flags]


def _topic(namer: Namer, view: TopicView, full: TopicView | None = None) -> s.TopicCard:
    """`view` as returned (by retrieve or inspect); `full`, from inspect, adds the hidden
    field names and open flags that retrieval leaves out."""
    full = full or view
    return s.TopicCard(
        title=view.title, aliases=list(view.aliases), summary=view.summary, status=view.status,
        salience=view.salience, score=view.score,
        fields={name: _field(f) for name, f in view.fields.items()},
        hidden_fields=sorted(n for n, f in full.fields.items()
                             if f.status == "hidden" and n not in view.fields),
        needs_review=_flags(namer, full), context_of=view.context_of)


def _require_topic(mem: Memory, topic: str) -> TopicView:
    view = mem.inspect(topic)
    if view is None:
        raise UnknownUnit(f"no topic named {topic!r}")
    return view


# ---------------------------------------------------------------------- operations
def remember(mem: Memory, facts: list[s.FactIn], actor: str = "api",
             episodes: Sequence[s.EpisodeIn] = ()) -> s.RememberResult:
    batch: list[Fact | Episode] = [Fact(**f.model_dump()) for f in facts]
    batch += [Episode(**e.model_dump()) for e in episodes]
    return mem.ingest(batch, actor=actor)


def recall(mem: Memory, request: s.RetrieveRequest) -> s.RecallResult:
    if request.query is None and request.topic is None and request.near is None:
        raise InvalidInput("give a query, a topic, or both (or near)")
    result = mem.retrieve(request.query, topic=request.topic, fields=request.fields,
                          as_of=request.as_of, history=request.history,
                          include_archived=request.include_archived, k=request.k,
                          between=request.between, near=request.near, actor=request.actor)
    namer = Namer(mem)
    return s.RecallResult(
        transition=result.transition, query=result.query, as_of=result.as_of,
        topics=[_topic(namer, t, mem.inspect(TopicId(t.id))) for t in result.topics],
        episodes=[s.EpisodeCard(text=e.text, at=e.at, speaker=e.speaker, source=e.source,
                                score=e.score, recalled=e.recalled, place=_place(e.place),
                                distance_km=e.distance_km, stale=[_stale(m) for m in e.stale])
                  for e in result.episodes],
        truncated=result.truncated, near=result.near)


def _stale(m: StaleMark) -> s.StaleCard:
    return s.StaleCard(since=m.since, topic=m.topic, field=m.field, value=m.value,
                       retracted=m.retracted, reason=m.reason, said=m.text)


def inspect(mem: Memory, topic: str, field: str | None = None) -> s.TopicCard:
    """Side-effect free: nothing is reinforced. With `field`, the card holds that field only
    (whatever its status)."""
    view = _require_topic(mem, topic)
    card = _topic(Namer(mem), view)
    if field is None:
        return card
    found = mem.inspect(topic, field)
    if found is None:
        raise UnknownUnit(f"topic {topic!r} has no field {field!r}")
    return card.model_copy(update={"fields": {field: _field(found)}, "hidden_fields": []})


def history(mem: Memory, topic: str, field: str) -> s.HistoryResult:
    entries = mem.history(topic, field)
    return s.HistoryResult(topic=_require_topic(mem, topic).title, field=field,
                           entries=_history(entries))


def explain(mem: Memory, topic: str, field: str) -> s.ExplainResult:
    e = mem.explain(topic, field)
    return s.ExplainResult(topic=e.topic, field=e.field, value=e.value,
                           reliability=e.reliability, states=dict(e.states), decay=e.decay,
                           contested=e.contested, why_current=e.why_current,
                           entries=_history(e.entries))


def link(mem: Memory, request: s.LinkRequest) -> s.LinkResult:
    created = mem.link(request.from_topic, request.to_topic, kind=request.kind,
                       actor=request.actor)
    return s.LinkResult(created=created, from_topic=_require_topic(mem, request.from_topic).title,
                        to_topic=_require_topic(mem, request.to_topic).title, kind=request.kind)


def restore(mem: Memory, request: s.RestoreRequest) -> s.RestoreResult:
    changed = mem.restore(request.topic, request.field, actor=request.actor)
    return s.RestoreResult(changed=changed, topic=_require_topic(mem, request.topic).title,
                           field=request.field)


def erase(mem: Memory, request: s.EraseRequest) -> s.EraseResult:
    """Erase a topic, a field, or what a source said; the topic is named before it goes."""
    title = _require_topic(mem, request.topic).title
    r = mem.erase(request.topic, request.field, source=request.source, reason=request.reason,
                  actor=request.actor)
    return s.EraseResult(
        transition=r.transition, at=r.at, topic=title, field=request.field,
        source=request.source, reason=r.reason, topic_erased=bool(r.topics),
        fields_erased=len(r.fields), entries_erased=len(r.entries),
        observations_erased=len(r.observations), episodes_erased=len(r.episodes),
        redacted_log_records=list(r.redacted), topic_ids=list(r.topics),
        field_ids=[list(f) for f in r.fields], entry_ids=list(r.entries),
        observation_ids=list(r.observations), episode_ids=list(r.episodes),
        commitment=r.commitment, salt=r.salt)


def retract(mem: Memory, request: s.RetractRequest) -> s.RetractResult:
    changed = mem.retract(request.topic, request.field, request.reason, source=request.source,
                          actor=request.actor)
    return s.RetractResult(changed=changed, topic=_require_topic(mem, request.topic).title,
                           field=request.field, reason=request.reason.strip())


def pending_revisions(mem: Memory) -> list[PendingRevision]:
    """Topics with open revision flags, oldest flag first (Memory.pending_revisions)."""
    return mem.pending_revisions()


def review(mem: Memory) -> s.ReviewResult:
    namer = Namer(mem)
    return s.ReviewResult(flags=[
        s.ReviewFlag(topic=p.title, because_of=f.origin, policy=f.policy,
                     evidence=namer.rewrite(f.evidence), since=f.created_at)
        for p in pending_revisions(mem) for f in p.flags])


def _maintain_report(namer: Namer, report: dict[str, Any], dry_run: bool) -> s.MaintainResult:
    """The wire form of `Memory.maintain`'s report, which names its units already (a dry
    run's memory is a copy: its names are those of the real one)."""
    forget, revise = report["forget"], report["revise"]
    return s.MaintainResult(
        dry_run=dry_run,
        forget=s.ForgetReport(transition=None if dry_run else forget["transition"],
                              attenuated=[s.UnitChange(unit=unit, level=level)
                                          for unit, level in forget["levels"]]),
        revise=s.ReviseReport(
            merged=[s.MergedPair(kept=k, merged=a) for k, a in revise["merged"]],
            conflicts_settled=revise["conflicts"],
            flags_evaluated=revise["flags_evaluated"],
            flags_cleared=list(dict.fromkeys(t for t, _ in revise["flags_cleared"])),
            flags_open=revise["flags_open"]))


def maintain(mem: Memory, dry_run: bool = False, actor: str = "maintenance",
             clock: Callable[[], datetime] | None = None,
             progress: Callable[[str, int, int], None] | None = None) -> s.MaintainResult:
    """One forget + revise run, on `mem`'s scope. `dry_run` runs it on a copy of the
    database (`Memory.copy_database`: a committed state, copied by a child process; opened
    with the same engine, stored policies and `clock`) and reports what it did there: the
    real database is not touched."""
    if not dry_run:
        return _maintain_report(Namer(mem), mem.maintain(actor=actor, progress=progress),
                                dry_run=False)
    if not os.path.exists(mem.path):
        raise InvalidInput("a dry run needs a database on disk")
    scratch = tempfile.mkdtemp(prefix="gem-dry-run-")
    try:
        copy = os.path.join(scratch, os.path.basename(mem.path))
        mem.copy_database(copy)
        with open_memory(copy, engine=mem.engine_name, clock=clock, create=False) as trial:
            # The same scope as the caller's (an API key's), with the same unit ids: named
            # the same way.
            view = trial.scope(mem.scope_name)
            return _maintain_report(Namer(view), view.maintain(actor=actor, progress=progress),
                                    dry_run=True)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def audit(mem: Memory, full: bool = False,
          progress: Callable[[str, int, int], None] | None = None) -> s.AuditResult:
    report = mem.audit(full=full, progress=progress)
    namer = Namer(mem)
    return s.AuditResult(ok=report.ok, chain_ok=report.chain_ok, transitions=report.transitions,
                         since=report.since,
                         checked=dict(report.checked),
                         violations=[s.ViolationView(condition=v.condition,
                                                     unit=None if v.unit is None else namer.unit(v.unit),
                                                     detail=v.detail) for v in report.violations])


def stats(mem: Memory) -> s.StatsResult:
    return s.StatsResult(**mem.stats())


def log(mem: Memory, since: int = 0, limit: int = 100) -> s.LogPage:
    if limit < 1:
        raise InvalidInput("limit must be a positive integer")
    if since < 0:
        raise InvalidInput("since must be 0 or more")
    records = mem.transitions(since)
    page, more = records[:limit], len(records) > limit
    namer = Namer(mem)
    out = []
    for r in page:
        fields = [u for u in r["units"] or () if _FIELD_ID.match(u)]
        out.append(s.LogRecord(
            seq=r["seq"], op=r["op"], event=r["event"], at=r["at"], actor=r["actor"],
            units=[namer.unit(u) for u in r["units"] or ()],
            policies=[s.PolicyFired(policy=p.get("policy", ""), event=p.get("event"),
                                    action=p.get("action"),
                                    evidence=namer.rewrite(p.get("evidence") or {}, fields))
                      for p in r["policies"] or ()],
            detail=namer.rewrite(r["detail"] or {}, fields), hash=r["hash"]))
    return s.LogPage(records=out, next_since=page[-1]["seq"] if more else None)


def recent_log(mem: Memory, limit: int = 100) -> s.LogPage:
    """The newest `limit` transitions (of the memory, or of a scope view), oldest first."""
    newest = mem.recent_transitions(limit, details=False)
    return log(mem, newest[-1]["seq"] - 1 if newest else 0, limit)


def policies(mem: Memory) -> s.PoliciesResult:
    current = mem.policies
    return s.PoliciesResult(names=[p.name for p in current.policies], hash=current.hash,
                            sources=[s.PolicySource(file=Path(src.file).name, text=src.text)
                                     for src in current.sources])


def status(mem: Memory, maintenance: s.MaintenanceInfo | None = None) -> s.StatusResult:
    return s.StatusResult(path=mem.path, engine=mem.engine_name, stats=stats(mem),
                          audit=audit(mem), policies=[p.name for p in mem.policies.policies],
                          maintenance=maintenance)


def describe_rejection(mem: Memory, exc: TransitionRejected) -> s.ErrorBody:
    """A rejected transition with its unit named (after the rollback it may not exist)."""
    namer = Namer(mem)
    unit = None if exc.unit is None else namer.unit(exc.unit)
    detail = namer.text(exc.detail)
    return s.ErrorBody(error="transition_rejected",
                       message=f"{exc.condition}{f' on {unit}' if unit else ''}: {detail}",
                       condition=exc.condition, unit=unit, detail=detail)
