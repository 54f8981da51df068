"""What `Memory`'s operators do (gem/memory.py keeps their signatures and documentation):
check the arguments before any transition, run the operator as one transition (revise: one
per repair) and name what it did for readers in the report."""
from __future__ import annotations

from datetime import datetime
from itertools import chain, repeat
from typing import TYPE_CHECKING, Any, Iterable, Sequence

from . import extraction, usage
from .arguments import MAX_K, callable_arg, flag_arg, text_arg
from .collector import paused_gc
from .derived import Progress
from .errors import InvalidInput, UnknownUnit
from .memory_reads import unit_names
from .model import (DroppedFact, Episode, Fact, IngestResult, Resolution, RetrieveResult, as_utc,
                    checked_time, episode_label, returned_facts)
from .operators import forget as forget_op
from .operators import ingest as ingest_op
from .operators import retract as retract_op
from .operators import revise as revise_op
from .operators import retrieve as retrieve_op
from .operators.common import add_edge
from .operators.resolution import Directory
from .pipeline import run_policies
from .state.transition import Transition
from .store import allocator, queries
from .places import checked_near

if TYPE_CHECKING:  # only for annotations: gem.memory imports this module
    from .memory import Memory


def ingest(mem: "Memory", facts: Fact | Episode | Iterable[Fact | Episode], *, actor: str,
           progress: Progress | None) -> IngestResult:
    mem._check_open()
    callable_arg(progress, "progress")
    if isinstance(facts, (str, bytes, dict)) or not (isinstance(facts, (Fact, Episode))
                                                     or hasattr(facts, "__iter__")):
        raise InvalidInput(f"facts must be a gem.Fact, a gem.Episode or a list of them, got "
                           f"{type(facts).__name__}")
    text_arg(actor, "actor")
    batch: list[Any] = [facts] if isinstance(facts, (Fact, Episode)) else list(facts)
    for i, item in enumerate(batch):
        if not isinstance(item, (Fact, Episode)):
            raise InvalidInput(f"facts[{i}] is a {type(item).__name__}, not a gem.Fact or "
                               "a gem.Episode")
    if not batch:
        raise InvalidInput("ingest needs at least one fact or episode")
    plain = [f for f in batch if isinstance(f, Fact)]
    with usage.metered():  # the extractor's model calls are charged to this transition
        episodes = _extract(mem, batch)
        if episodes:
            def operator(t: Transition) -> dict[str, Any]:
                return ingest_op.ingest_with_episodes(t, plain, episodes)
        else:
            def operator(t: Transition) -> dict[str, Any]:
                return ingest_op.ingest(t, plain)
        summary, t = mem._run("ingest", operator, actor=actor, interaction=True,
                              progress=progress)
    topics, flagged = list(t.touched.topics), list(t.touched.flagged)
    created_episodes = [t.created["Episode"][e] for e in summary.get("episodes", [])]
    entry_fields = [t.created["Entry"][e]["field_id"] for e in summary["entries"]]
    title = mem.titles([*topics, *flagged, *(r["topic"] for r in summary["resolved"])]).get
    known = summary.get("known_episodes", [])
    known_labels = mem.episode_labels(known) if known else {}

    def field_name(fid: str) -> str:
        tid, _, name = fid.partition("/")
        return f"{title(tid, tid)} / {name}"
    return IngestResult(transition=mem._engine.seq,
                        topics=[title(i, i) for i in topics], topic_ids=topics,
                        created_topics=[title(i, i) for i in summary["created_topics"]],
                        created_topic_ids=summary["created_topics"],
                        new_values=[field_name(f) for f in entry_fields],
                        entry_ids=summary["entries"],
                        corroborations=summary["corroborations"], denials=summary["denials"],
                        flagged=[title(i, i) for i in flagged], flagged_ids=flagged,
                        dropped=[DroppedFact(**d) for d in summary["dropped"]],
                        resolved=[Resolution(**{**r, "topic": title(r["topic"], r["topic"]),
                                                "topic_id": r["topic"]})
                                  for r in summary["resolved"]],
                        episodes=[episode_label(e["speaker"], e["source"], e["at"], e["text"])
                                  for e in created_episodes],
                        episode_ids=[e["id"] for e in created_episodes],
                        known_episodes=[known_labels[e] for e in known],
                        known_episode_ids=known,
                        extracted=summary.get("extracted", 0))


def _extract(mem: "Memory", batch: list[Any]) -> list[tuple[int, Episode, list[Fact]]]:
    found = [(i, e) for i, e in enumerate(batch) if isinstance(e, Episode)]
    extractor = mem.extractor
    if extractor is None or not found:
        return [(i, e, []) for i, e in found]
    contexts = mem._read(lambda t: extraction.contexts(t, [e for _, e in found])) \
        if extraction.takes_context(extractor) else None
    out: list[tuple[int, Episode, list[Fact]]] = []
    so_far: list[Fact] = []
    for n, (i, episode) in enumerate(found):
        context = None if contexts is None else extraction.with_batch(contexts[n], so_far)
        facts = returned_facts(extraction.call(extractor, episode, context),
                               f"the extractor (for facts[{i}])")
        so_far += facts
        out.append((i, episode, facts))
    return out


def retrieve(mem: "Memory", query: str | None, topic: str | None,
             fields: Sequence[str] | str | None, as_of: datetime | None, history: bool,
             include_archived: bool, k: int, *, between: tuple[datetime, datetime] | None,
             near: tuple[float, float, float] | None, actor: str) -> RetrieveResult:
    mem._check_open()
    if query is not None and not isinstance(query, str):
        raise InvalidInput(f"query must be a string, got {type(query).__name__}")
    if topic is not None:
        text_arg(topic, "topic")
    all_fields = fields == "all"
    if fields is not None and not all_fields:
        if isinstance(fields, (str, bytes)) or not isinstance(fields, (list, tuple)):
            got = repr(fields) if isinstance(fields, str) else type(fields).__name__
            raise InvalidInput(f"fields must be a list of field names or \"all\", got {got}")
        for i, name in enumerate(fields):
            text_arg(name, f"fields[{i}]")
    if not isinstance(k, int) or isinstance(k, bool) or not 1 <= k <= MAX_K:
        raise InvalidInput(f"k must be an integer in [1, {MAX_K}], got {k!r}")
    flag_arg(history, "history")
    flag_arg(include_archived, "include_archived")
    text_arg(actor, "actor")
    point = None if near is None else checked_near(near)
    if point is not None and topic is not None:
        raise InvalidInput("near filters the units a retrieval ranks: give it without a topic")
    window = None
    if between is not None:
        if not isinstance(between, (tuple, list)) or len(between) != 2:
            raise InvalidInput(f"between must be a pair (start, end) of datetimes, got "
                               f"{type(between).__name__}")
        try:
            window = (checked_time(between[0], "between start"),
                      checked_time(between[1], "between end"))
        except ValueError as exc:
            raise InvalidInput(str(exc)) from None
        if window[0] > window[1]:
            raise InvalidInput(f"between: start {window[0].isoformat()} is after end "
                               f"{window[1].isoformat()}")
        if (not query and point is None) or topic is not None:
            raise InvalidInput("between filters the units a text query (or near=) ranks: "
                               "give a query or near (and no topic)")
    request = retrieve_op.Request(
        query=query.strip() if query else None, topic=topic,
        fields=None if fields is None or all_fields else tuple(fields),
        as_of=None if as_of is None else as_utc(as_of, "as_of"),
        history=history, include_archived=include_archived, k=k,
        all_fields=all_fields, between=window, near=point)
    result, _ = mem._run("retrieve", lambda t: retrieve_op.retrieve(t, request),
                                 actor=actor, interaction=True)
    return result.model_copy(update={"transition": mem._engine.seq})


def link(mem: "Memory", src: str, dst: str, kind: str, *, actor: str) -> bool:
    mem._check_open()
    text_arg(src, "src")
    text_arg(dst, "dst")
    text_arg(actor, "actor")
    if kind not in ("extension", "association"):
        raise InvalidInput(f"kind must be 'extension' or 'association', got {kind!r}")

    def op(t: Transition) -> bool:
        directory = Directory.of(t)
        a, b = directory.lookup(src), directory.lookup(dst)
        if a is None or b is None:
            raise UnknownUnit(f"no topic named {src if a is None else dst!r}")
        return add_edge(t, a, b, kind, source=actor)

    created, _ = mem._run("link", op, actor=actor)
    return created


def forget(mem: "Memory", *, actor: str, progress: Progress | None) -> dict[str, Any]:
    mem._check_open()
    text_arg(actor, "actor")
    callable_arg(progress, "progress")
    # The report is built before the collector runs again, and the transition dropped:
    # otherwise its first pass walks every row and record the pass made (0.3-0.9 s of a
    # 5 s pass over 50k fields, measured), though all of it is freed by reference counts.
    with paused_gc():
        _, t = mem._run("forget", forget_op.forget, actor=actor, event="tick",
                        progress=progress)
        by_level = forget_op.attenuated_by_level(t.detail)
        del t
        ids = list(dict.fromkeys(chain.from_iterable(units for _, units in by_level)))
        name = unit_names(mem, ids)
        # (each list made by C-level maps and chains: a pass at 100k topics names 2M moves)
        report = {"transition": mem._engine.seq,
                  "attenuated": list(map(name.__getitem__, ids)), "attenuated_ids": ids,
                  "levels": list(chain.from_iterable(
                      zip(map(name.__getitem__, units), repeat(level)) for level, units in by_level)),
                  "level_ids": list(chain.from_iterable(
                      zip(units, repeat(level)) for level, units in by_level))}
        del by_level
    allocator.give_back()  # the transition's rows, moves and record: 0.4 GB at 100k topics
    return report


def revise(mem: "Memory", *, actor: str, progress: Progress | None) -> dict[str, Any]:
    mem._check_open()
    text_arg(actor, "actor")
    callable_arg(progress, "progress")

    def step(name: str, done: int, total: int) -> None:
        if progress is not None:
            progress(f"revise: {name}", done, total)
    engine = mem._engine
    report: dict[str, Any] = {"merged": [], "merged_ids": [], "conflicts": [],
                              "conflict_ids": [], "flags_evaluated": [],
                              "flags_evaluated_ids": [], "flags_cleared": [],
                              "flags_cleared_ids": [], "flags_open": [],
                              "flags_open_ids": []}
    with engine.store.lock:  # no other commit between finding and repairing
        threshold, pairs = mem._read(lambda t: (
            t.settings["merge_similarity"],
            revise_op.duplicate_pairs(t, t.settings["merge_similarity"])))
        for i, (keep, away) in enumerate(pairs):
            step("merge", i, len(pairs))
            named = unit_names(mem, [keep, away])  # before the merged one is gone
            mem._run("revise", lambda t: revise_op.merge_topics(t, keep, away),
                     actor=actor, event="merge")
            report["merged"].append((named[keep], named[away]))
            report["merged_ids"].append((keep, away))
        step("merge", len(pairs), len(pairs))
        scope = engine.derived.scope(mem._scope)
        scope.unpaired.clear()
        scope.paired_at = threshold
        with engine.store.reading() as tx:
            fids = queries.conflicting_fields(tx, mem._scope)
        if fids:
            step("conflicts", 0, len(fids))
            mem._run("revise", lambda t: revise_op.settle_conflicts(t, fids), actor=actor,
                     event="conflicts")
            report["conflict_ids"] = fids
            step("conflicts", len(fids), len(fids))
        tids = mem._read(revise_op.open_flag_topics)
        if tids and (mem.reviser is not None or engine.shared.policies_for("revised")):
            answers: dict[str, Any] = {}  # asked once per topic, should the run restart
            step("flags", 0, len(tids))
            _, t = mem._run("revise", lambda t: revise_op.evaluate_flags(
                t, tids, run_policies, mem.reviser, answers),
                actor=actor, event="dependency_repair")
            report["flags_evaluated_ids"] = tids
            step("flags", len(tids), len(tids))
            report["flags_cleared_ids"] = list(dict.fromkeys(
                (c["topic"], c["by"]) for c in t.detail.get("flags_cleared", [])))
        report["flags_open_ids"] = mem._read(revise_op.open_flag_topics)
    name = unit_names(mem, [*report["conflict_ids"], *report["flags_evaluated_ids"],
                            *report["flags_open_ids"],
                            *(tid for tid, _ in report["flags_cleared_ids"])])
    for key in ("conflicts", "flags_evaluated", "flags_open"):
        id_key = "conflict_ids" if key == "conflicts" else key + "_ids"
        report[key] = [name[u] for u in report[id_key]]
    report["flags_cleared"] = [(name[tid], by) for tid, by in report["flags_cleared_ids"]]
    return report


def retract(mem: "Memory", topic: str, field: str, reason: str, *, source: str, actor: str) -> bool:
    mem._check_open()
    text_arg(topic, "topic")
    text_arg(field, "field")
    text_arg(reason, "reason")
    text_arg(source, "source")
    text_arg(actor, "actor")
    provenance = {"source": source, "actor": actor, "ref": None, "confidence": 1.0,
                  "polarity": "+"}

    def op(t: Transition) -> bool:
        fid = mem._require_field(t, topic, field)
        return retract_op.retract(t, fid, reason.strip(), provenance)

    changed, _ = mem._run("retract", op, actor=actor)
    return bool(changed)


def restore(mem: "Memory", topic: str, field: str | None, *, actor: str) -> bool:
    mem._check_open()
    text_arg(topic, "topic")
    if field is not None:
        text_arg(field, "field")
    text_arg(actor, "actor")

    def op(t: Transition) -> bool:
        tid = mem._topic_id(t, topic)
        if tid is None:
            raise UnknownUnit(f"no topic named {topic!r}")
        fid = None if field is None else mem._require_field(t, topic, field)
        return forget_op.restore(t, tid, fid)

    changed, _ = mem._run("restore", op, actor=actor)
    return changed
