"""LoCoMo evidence recall: gem (maintenance on and off, two embedders, observations as facts)
against BM25, dense and RRF baselines, side by side in one run.

    python bench/locomo.py [--conversations N] [--questions N] [--embedders hashing,semantic]
                           [--no-observations] [--sessions N] [--jobs N] [--k 5,10,20]
                           [--policies FILE ...]

Reads the LoCoMo development split by path (`../shared/data/locomo-dev.json` beside the
repository or its worktree folder, or the file named by GEM_LOCOMO) and skips cleanly when it
is absent. For each conversation: a fresh memory whose injected clock is set to each session's
date, every turn ingested as a `gem.Episode` (its text with a shared image's caption, source =
its dia_id, speaker, session time; one transition per turn, as an agent would record them),
`maintain()` between sessions under the
default governance (or not: "no maintenance"); then every question of categories 1-4 through
`mem.retrieve(question, k)`, asked a day after the last session. Evidence recall: does the
returned material include the turn(s) that answer the question: any@k (at least one evidence
turn in the top k) and all@k (every one).

Rows. "gem" is the default memory (hashing embedder); "gem MiniLM" uses the torch-free semantic
embedder (`gem.NumpyMiniLMEmbedder`, the `semantic` extra). "gem + observations" adds LoCoMo's
observation annotations as an extractor's output (ObservationExtractor: each turn's annotated
facts, ingested as facts citing its episode): the top-k units are fields and episodes, and a
field counts as the turn(s) its observation cites. The baselines rank the same turn documents
("speaker: text") with BM25 (plain tokens, stop words removed), dense cosine and their
reciprocal-rank fusion, with each embedder.

Tables: any@5/10/20, all@10 and ms per query (p50, p95) overall; any@10 / all@10 per category;
any@10 by evidence age (how old the question's youngest evidence turn is when it is asked: a
question in ">90 d" has no evidence younger than 90 days). Then ingest times, how much the
answers change when the questions are asked in reverse order (every read is a write), and the
targets of issue 27 with met / not met. `--jobs N` runs N conversations at once.
"""
from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import statistics
import sys
import tempfile
import time
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from multiprocessing import get_context
from pathlib import Path
from typing import Any, Callable, Iterable

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import gem  # noqa: E402
from gem.index import LexicalIndex  # noqa: E402
from gem.terms import STOP_WORDS  # noqa: E402
from gem.text import tokens  # noqa: E402


def _data() -> Path:
    """../shared/data beside the checkout (/work/main) or beside its worktree folder
    (/work/wt/NAME)."""
    if os.environ.get("GEM_LOCOMO"):
        return Path(os.environ["GEM_LOCOMO"])
    here = Path(__file__).resolve()
    candidates = [p / "shared" / "data" / "locomo-dev.json" for p in here.parents[2:4]]
    return next((c for c in candidates if c.is_file()), candidates[0])


DATA = _data()
CATEGORIES = {1: "multi-hop", 2: "temporal", 3: "open-domain", 4: "single-hop"}
AGES = [("<30 d", 0, 30), ("30-90 d", 30, 90), (">90 d", 90, 10**6)]
RRF_K = 60
EMBEDDER_LABEL = {"hashing": "", "semantic": " MiniLM", "minilm": " MiniLM-torch"}


@dataclass
class Turn:
    dia_id: str
    speaker: str
    text: str
    at: datetime

    @property
    def document(self) -> str:
        return f"{self.speaker}: {self.text}"


@dataclass
class Conversation:
    sample_id: str
    sessions: list[tuple[datetime, list[Turn]]]
    questions: list[dict[str, Any]]
    observations: list[tuple[str, str, list[str]]]  # (speaker, sentence, cited dia_ids)

    @property
    def turns(self) -> list[Turn]:
        return [t for _, turns in self.sessions for t in turns]

    @property
    def asked_at(self) -> datetime:
        """When the questions are asked: a day after the last turn."""
        return self.sessions[-1][1][-1].at + timedelta(days=1)


def parse_date(text: str) -> datetime:
    """'1:56 pm on 8 May, 2023' -> an aware UTC datetime."""
    return datetime.strptime(text.strip(), "%I:%M %p on %d %B, %Y").replace(tzinfo=timezone.utc)


def evidence_ids(raw: Iterable[str]) -> list[str]:
    """The dia_ids a question cites ('D8:6; D9:17' and 'D:11:26' occur as typos)."""
    out = []
    for item in raw:
        for m in re.finditer(r"D:?(\d+):(\d+)", item):
            out.append(f"D{m.group(1)}:{m.group(2)}")
    return list(dict.fromkeys(out))


def as_seen(turn: dict[str, Any]) -> str:
    """A turn's text as the agent in the conversation saw it: a shared image comes with its
    caption (`blip_caption`, what a captioning model says of it, as LoCoMo's own evaluation
    shows it). The `query` the dataset's authors searched images with is left out: the agent
    sees the picture, not how it was found."""
    caption = turn.get("blip_caption")
    return f"{turn['text']} [shares an image: {caption}]" if caption else str(turn["text"])


def load(path: Path, limit: int | None = None, questions: int | None = None,
         sessions: int | None = None) -> list[Conversation]:
    """The first `limit` conversations, each cut to its first `sessions` sessions (and then to
    the questions whose evidence those sessions hold), with its first `questions` questions."""
    data = json.loads(path.read_text(encoding="utf-8"))
    out = []
    for item in data[:limit]:
        conv = item["conversation"]
        numbers = sorted(int(m.group(1)) for k in conv
                         if (m := re.fullmatch(r"session_(\d+)", k)) and conv[k])[:sessions]
        parts = []
        for n in numbers:
            start = parse_date(conv[f"session_{n}_date_time"])
            # Turns a second apart: the order within a session is kept in valid time.
            turns = [Turn(t["dia_id"], t["speaker"], as_seen(t), start + timedelta(seconds=i))
                     for i, t in enumerate(conv[f"session_{n}"])]
            parts.append((start, turns))
        said = {t.dia_id for _, turns in parts for t in turns}
        selected = [q for q in item["qa"] if q.get("category") in CATEGORIES
                    and (evidence := evidence_ids(q.get("evidence", [])))
                    and (sessions is None or set(evidence) <= said)]
        observations = []
        for n in numbers:
            for speaker, items in (item.get("observation", {})
                                   .get(f"session_{n}_observation") or {}).items():
                for sentence, cited in items:
                    ids = evidence_ids([cited] if isinstance(cited, str) else cited)
                    if ids:
                        observations.append((speaker, sentence, ids))
        out.append(Conversation(item["sample_id"], parts, selected[:questions], observations))
    return out


def make_embedder(name: str) -> gem.Embedder:
    if name == "minilm":
        return gem.MiniLMEmbedder()
    if name == "semantic":
        return gem.NumpyMiniLMEmbedder()
    return gem.HashingEmbedder(256)


def age_bucket(conv: Conversation, q: dict[str, Any]) -> str | None:
    """The age bucket of the question's youngest evidence turn when it is asked."""
    said = {t.dia_id: t.at for t in conv.turns}
    times = [said[d] for d in evidence_ids(q["evidence"]) if d in said]
    if not times:
        return None
    days = (conv.asked_at - max(times)).total_seconds() / 86400
    return next(name for name, lo, hi in AGES if lo <= days < hi)


# ---------------------------------------------------------------------- observations as facts
class ObservationExtractor:
    """LoCoMo's observation annotations as an extractor's output, the governed path an LLM
    extractor feeds: called with each turn's episode, it returns the facts annotated on that
    turn (topic: the speaker; field: a short name made of its first words without stop words,
    numbered when the speaker already has it; value: the sentence). gem cites the episode in
    each fact's `ref`. An observation citing several turns is extracted from the first."""

    def __init__(self, conv: Conversation) -> None:
        self.by_turn: dict[str, list[gem.Fact]] = {}
        self.cites: dict[tuple[str, str], list[str]] = {}   # (speaker, field) -> its dia_ids
        for speaker, sentence, ids in conv.observations:
            own = set(tokens(speaker))
            words = [w for w in tokens(sentence) if w not in STOP_WORDS and w not in own][:3] \
                or ["note"]
            name, n = " ".join(words), 1
            while (speaker, name) in self.cites:
                n += 1
                name = f"{' '.join(words)} {n}"
            self.cites[(speaker, name)] = ids
            self.by_turn.setdefault(ids[0], []).append(
                gem.Fact(speaker, name, sentence, source="locomo-observation"))

    def __call__(self, episode: gem.Episode) -> list[gem.Fact]:
        return self.by_turn.get(episode.source, [])


# ---------------------------------------------------------------------- gem
class Clock:
    def __init__(self, now: datetime) -> None:
        self.now = now

    def __call__(self) -> datetime:
        return self.now


@dataclass(frozen=True)
class Variant:
    embedder: str        # hashing | semantic | minilm
    maintain: bool
    observations: bool = False

    @property
    def label(self) -> str:
        name = "gem" + EMBEDDER_LABEL[self.embedder] + (" + observations" if self.observations else "")
        return name + ("" if self.maintain else ", no maintenance")


@dataclass
class GemRun:
    ingest_seconds: float = 0.0
    turns: int = 0
    latencies: dict[int, float] = field(default_factory=dict)   # question index -> seconds
    ranked: dict[int, list[str]] = field(default_factory=dict)  # question index -> dia_ids


def ingest_conversation(conv: Conversation, path: str, embedder: gem.Embedder, variant: Variant,
                        run: GemRun, policies: list[str] | None = None
                        ) -> tuple[Clock, dict[str, str], ObservationExtractor | None]:
    """The conversation ingested turn by turn; the clock, episode id -> dia_id, the extractor."""
    clock = Clock(conv.sessions[0][0])
    extractor = ObservationExtractor(conv) if variant.observations else None
    sources: dict[str, str] = {}
    with gem.open(path, clock=clock, embedder=embedder, policies=policies,
                  extractor=extractor) as mem:
        for i, (start, turns) in enumerate(conv.sessions):
            clock.now = start
            if variant.maintain and i:
                mem.maintain()
            began = time.perf_counter()
            for turn in turns:
                clock.now = turn.at
                result = mem.ingest(gem.Episode(turn.text, at=turn.at, source=turn.dia_id,
                                                speaker=turn.speaker))
                sources.update(dict.fromkeys(result.episode_ids, turn.dia_id))
            run.ingest_seconds += time.perf_counter() - began
            run.turns += len(turns)
        clock.now = conv.asked_at
        if variant.maintain:
            mem.maintain()
    return clock, sources, extractor


def ranked_turns(r: gem.RetrieveResult, sources: dict[str, str],
                 extractor: ObservationExtractor | None) -> list[str]:
    """The dia_ids the returned units stand for, best unit first: an episode its own, a field
    the turn its entry cites (`ref`) and those its observation cites."""
    units: list[tuple[float, list[str]]] = [(e.score or 0.0, [e.source]) for e in r.episodes]
    for topic in r.topics:
        for name, f in topic.fields.items():
            if f.context or f.score is None:
                continue
            ids = [sources[f.provenance.ref]] if f.provenance and f.provenance.ref in sources else []
            if extractor is not None:
                ids += extractor.cites.get((topic.title, name), [])
            units.append((f.score, ids))
    units.sort(key=lambda u: -u[0])
    return list(dict.fromkeys(d for _, ids in units for d in ids))


def ask(conv: Conversation, path: str, embedder: gem.Embedder, clock: Clock, k: int,
        order: list[int], run: GemRun, sources: dict[str, str],
        extractor: ObservationExtractor | None) -> None:
    with gem.open(path, clock=clock, embedder=embedder) as mem:
        for qi in order:
            q = conv.questions[qi]
            clock.now += timedelta(minutes=1)
            began = time.perf_counter()
            r = mem.retrieve(str(q["question"]), k=k)
            run.latencies[qi] = time.perf_counter() - began
            run.ranked[qi] = ranked_turns(r, sources, extractor)


def copy_memory(db: str, twin: str) -> None:
    shutil.copytree(db, twin) if os.path.isdir(db) else shutil.copy(db, twin)
    if os.path.isdir(db + ".gem-derived"):
        shutil.copytree(db + ".gem-derived", twin + ".gem-derived")


# ---------------------------------------------------------------------- baselines
def bm25_text(text: str) -> str:
    return " ".join(w for w in tokens(text) if w not in STOP_WORDS)


def baselines(conv: Conversation, embedder: gem.Embedder, k: int, with_bm25: bool
              ) -> dict[str, tuple[dict[int, list[str]], dict[int, float]]]:
    """system -> (question index -> ranked dia_ids, question index -> seconds)."""
    turns = conv.turns
    lex = LexicalIndex()
    for t in turns:
        lex.upsert(t.dia_id, bm25_text(t.document))
    docs = embedder.embed([t.document for t in turns])
    ids = [t.dia_id for t in turns]
    label = EMBEDDER_LABEL[_embedder_key(embedder)]
    names = {"BM25": "BM25", "dense": f"dense{label or ' hashing'}",
             "RRF": f"RRF BM25+{'hashing' if not label else label.strip()}"}
    out: dict[str, tuple[dict[int, list[str]], dict[int, float]]] = \
        {n: ({}, {}) for n in names.values()}
    pool = max(50, 10 * k)
    for qi, q in enumerate(str(q["question"]) for q in conv.questions):
        began = time.perf_counter()
        lexical = [d for d, _ in lex.search(bm25_text(q), pool)]
        t_lex = time.perf_counter() - began
        began = time.perf_counter()
        sims = docs @ embedder.embed([q])[0]
        dense = [ids[i] for i in np.argsort(-sims, kind="stable")[:pool].tolist()]
        t_dense = time.perf_counter() - began
        began = time.perf_counter()
        fused: dict[str, float] = {}
        for ranking in (lexical, dense):
            for rank, d in enumerate(ranking):
                fused[d] = fused.get(d, 0.0) + 1.0 / (RRF_K + rank + 1)
        rrf = sorted(fused, key=lambda d: (-fused[d], d))[:k]
        t_rrf = t_lex + t_dense + time.perf_counter() - began
        for name, ranking, seconds in (("BM25", lexical, t_lex), ("dense", dense, t_dense),
                                       ("RRF", rrf, t_rrf)):
            out[names[name]][0][qi] = ranking[:k]
            out[names[name]][1][qi] = seconds
    if not with_bm25:
        del out["BM25"]
    return out


def _embedder_key(embedder: gem.Embedder) -> str:
    if isinstance(embedder, gem.HashingEmbedder):
        return "hashing"
    return "semantic" if isinstance(embedder, gem.NumpyMiniLMEmbedder) else "minilm"


# ---------------------------------------------------------------------- one conversation
@dataclass
class Scored:
    """One question as one system answered it."""
    category: int
    age: str | None
    hits: dict[int, tuple[float, float]]   # k -> (any, all)
    seconds: float


@dataclass
class ConversationResult:
    sample_id: str
    turns: int
    questions: int
    scored: dict[str, list[Scored]]
    ingest: dict[str, tuple[float, int]]    # gem system -> (seconds, turns)
    reverse: tuple[int, int, list[float], list[float]]  # changed, reordered, fwd any, rev any


def score(conv: Conversation, ranked: dict[int, list[str]], seconds: dict[int, float],
          ks: list[int]) -> list[Scored]:
    out = []
    for qi, q in enumerate(conv.questions):
        want = set(evidence_ids(q["evidence"]))
        hits = {}
        for k in ks:
            got = set(ranked.get(qi, [])[:k])
            hits[k] = (float(bool(want & got)), float(want <= got))
        out.append(Scored(int(q["category"]), age_bucket(conv, q), hits, seconds.get(qi, 0.0)))
    return out


def variants(embedders: list[str], observations: bool) -> list[Variant]:
    out = [Variant(e, m) for e in embedders for m in (True, False)]
    if observations:
        out += [Variant("hashing", m, True) for m in (True, False)]
    return out


def run_conversation(conv: Conversation, embedders: list[str], observations: bool,
                     ks: list[int], policies: list[str] | None) -> ConversationResult:
    k = max(ks)
    made = {name: make_embedder(name) for name in embedders}
    scored: dict[str, list[Scored]] = {}
    ingest: dict[str, tuple[float, int]] = {}
    reverse_stats = (0, 0, [], [])
    work = tempfile.mkdtemp(prefix="gem-locomo-")
    try:
        forward = list(range(len(conv.questions)))
        for n, variant in enumerate(variants(embedders, observations)):
            embedder, stats = made[variant.embedder], GemRun()
            db = os.path.join(work, f"{n}.db")
            clock, sources, extractor = ingest_conversation(conv, db, embedder, variant, stats,
                                                            policies)
            if n == 0:  # the default memory, asked again in reverse order on a copy
                twin, backwards = os.path.join(work, "reverse.db"), GemRun()
                copy_memory(db, twin)
                ask(conv, twin, embedder, Clock(clock.now), k, forward[::-1], backwards,
                    sources, extractor)
            ask(conv, db, embedder, clock, k, forward, stats, sources, extractor)
            if n == 0:
                changed = sum(set(stats.ranked[q][:10]) != set(backwards.ranked[q][:10])
                              for q in forward)
                reordered = sum(stats.ranked[q][:10] != backwards.ranked[q][:10] for q in forward)
                reverse_stats = (changed, reordered,
                                 [s.hits[10][0] for s in score(conv, stats.ranked, {}, [10])],
                                 [s.hits[10][0] for s in score(conv, backwards.ranked, {}, [10])])
            scored[variant.label] = score(conv, stats.ranked, stats.latencies, ks)
            ingest[variant.label] = (stats.ingest_seconds, stats.turns)
        for i, name in enumerate(embedders):
            for system, (ranked, seconds) in baselines(conv, made[name], k, i == 0).items():
                scored[system] = score(conv, ranked, seconds, ks)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return ConversationResult(conv.sample_id, len(conv.turns), len(conv.questions), scored,
                              ingest, reverse_stats)


def _job(args: tuple[Path, int, int | None, list[str], bool, list[int], list[str] | None,
                     int | None]) -> ConversationResult:
    path, index, questions, embedders, observations, ks, policies, sessions = args
    conv = load(path, index + 1, questions, sessions)[index]
    return run_conversation(conv, embedders, observations, ks, policies)


# ---------------------------------------------------------------------- tables
def mean(values: list[float]) -> float:
    return statistics.fmean(values) if values else float("nan")


def cell(value: float) -> str:
    return "-" if value != value else f"{value:.3f}"


def render(rows: list[list[str]]) -> str:
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    lines = ["  ".join(c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in enumerate(zip(r, widths)))
             for r in rows]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines)


def overall_table(results: dict[str, list[Scored]], ks: list[int]) -> str:
    rows = [["system", "n"] + [f"any@{k}" for k in ks] + ["all@10", "ms/q p50", "ms/q p95"]]
    for system, sel in results.items():
        ms = np.asarray([s.seconds for s in sel]) * 1e3
        rows.append([system, str(len(sel)), *(f"{mean([s.hits[k][0] for s in sel]):.3f}" for k in ks),
                     f"{mean([s.hits[10][1] for s in sel]):.3f}",
                     f"{np.percentile(ms, 50):.1f}", f"{np.percentile(ms, 95):.1f}"])
    return render(rows)


def category_table(results: dict[str, list[Scored]]) -> str:
    first = next(iter(results.values()))
    rows = [["any@10 / all@10"] + [f"{name} ({sum(s.category == c for s in first)})"
                                   for c, name in CATEGORIES.items()]]
    for system, sel in results.items():
        cells = []
        for c in CATEGORIES:
            part = [s for s in sel if s.category == c]
            cells.append(f"{mean([s.hits[10][0] for s in part]):.3f} / "
                         f"{mean([s.hits[10][1] for s in part]):.3f}" if part else "-")
        rows.append([system, *cells])
    return render(rows)


def age_table(results: dict[str, list[Scored]]) -> str:
    first = next(iter(results.values()))
    rows = [["any@10 by evidence age"] + [f"{name} ({sum(s.age == name for s in first)})"
                                          for name, _, _ in AGES]]
    for system, sel in results.items():
        rows.append([system, *(cell(any10(sel, age=name)) for name, _, _ in AGES)])
    return render(rows)


def any10(sel: list[Scored], category: int | None = None, age: str | None = None) -> float:
    return mean([s.hits[10][0] for s in sel if category in (None, s.category)
                 and age in (None, s.age)])


def targets(results: dict[str, list[Scored]]) -> list[tuple[str, bool]]:
    """Issue 27's targets on these questions: (what, met)."""
    out: list[tuple[str, bool]] = []
    gem_on = results.get("gem")
    hybrids = {s: any10(v) for s, v in results.items() if s.startswith("RRF")}
    if gem_on is not None and hybrids:
        best = max(hybrids, key=hybrids.__getitem__)
        out.append((f"gem any@10 {any10(gem_on):.3f} >= best hybrid ({best}) "
                    f"{hybrids[best]:.3f} + 0.05", any10(gem_on) >= hybrids[best] + 0.05))
    for system, sel in results.items():
        off = results.get(f"{system}, no maintenance")
        if off is None:
            continue
        worst = min([(any10(sel) - any10(off), "overall")] +
                    [(any10(sel, age=a) - any10(off, age=a), a) for a, _, _ in AGES
                     if any(s.age == a for s in sel)])
        out.append((f"{system}: maintenance never below no maintenance by more than 0.01 "
                    f"(any@10 overall and per evidence age; worst {worst[0]:+.3f} at {worst[1]})",
                    worst[0] >= -0.01))
    if gem_on is not None:
        multi = mean([s.hits[10][1] for s in gem_on if s.category == 1])
        out.append((f"gem multi-hop all@10 {multi:.3f} >= 0.30", multi >= 0.30))
        temporal = any10(gem_on, category=2)
        out.append((f"gem temporal any@10 {temporal:.3f} >= 0.80", temporal >= 0.80))
    return out


# ---------------------------------------------------------------------- the run
def run(path: Path, conversations: int | None, embedder_name: str | list[str], ks: list[int],
        out: Callable[[str], None] = print, policies: list[str] | None = None,
        questions: int | None = None, observations: bool = False, jobs: int = 1,
        sessions: int | None = None) -> dict[str, Any]:
    embedders = [embedder_name] if isinstance(embedder_name, str) else list(embedder_name)
    ks = sorted(set(ks) | {10})
    began = time.perf_counter()
    count = len(load(path, conversations, 0))
    args = [(path, i, questions, embedders, observations, ks, policies, sessions)
            for i in range(count)]
    done: list[ConversationResult] = []

    def finished(c: ConversationResult) -> None:
        done.append(c)
        print(f"  {c.sample_id} done ({len(done)}/{count}, {time.perf_counter() - began:.0f} s)",
              file=sys.stderr, flush=True)
    if jobs > 1:
        with ProcessPoolExecutor(jobs, mp_context=get_context("spawn")) as pool:
            for c in pool.map(_job, args):
                finished(c)
    else:
        for a in args:
            finished(_job(a))
    results: dict[str, list[Scored]] = {}
    for c in done:
        for system, sel in c.scored.items():
            results.setdefault(system, []).extend(sel)
    n_q = sum(c.questions for c in done)
    out(f"LoCoMo dev: {len(done)} conversation(s), {sum(c.turns for c in done)} turns, "
        f"{n_q} questions (categories 1-4); evidence recall; embedders "
        f"{', '.join(make_embedder(e).name for e in embedders)}")
    out(overall_table(results, ks))
    out("")
    out(category_table(results))
    out("")
    out(age_table(results))
    out("")
    for system in results:
        spent = [c.ingest[system] for c in done if system in c.ingest]
        if spent:
            seconds, turns = sum(s for s, _ in spent), sum(n for _, n in spent)
            out(f"{system}: ingest {seconds:.1f} s for {turns} turns "
                f"({1e3 * seconds / max(turns, 1):.2f} ms/turn, one transition each)")
    changed = sum(c.reverse[0] for c in done)
    reordered = sum(c.reverse[1] for c in done)
    fwd = [x for c in done for x in c.reverse[2]]
    rev = [x for c in done for x in c.reverse[3]]
    out(f"reverse order (gem): the top-10 set differs for {changed}/{n_q} questions "
        f"({100 * changed / max(n_q, 1):.1f}%), its order for {reordered}; any@10 forward "
        f"{mean(fwd):.3f}, reverse {mean(rev):.3f}")
    out("")
    out("targets (issue 27):")
    met = targets(results)
    for what, ok in met:
        out(f"  [{'met' if ok else 'NOT met'}] {what}")
    out(f"run time {time.perf_counter() - began:.0f} s (jobs {jobs})")
    summary = {system: {k: (mean([s.hits[k][0] for s in sel]), mean([s.hits[k][1] for s in sel]))
                        for k in ks} for system, sel in results.items()}
    by_age = {system: {a: any10(sel, age=a) for a, _, _ in AGES} for system, sel in results.items()}
    return {"recall": summary, "by_age": by_age, "questions": n_q, "changed": changed,
            "targets": met}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--conversations", type=int, default=None, help="only the first N")
    parser.add_argument("--embedders", default="hashing,semantic",
                        help="comma-separated: hashing, semantic (numpy MiniLM), minilm (torch)")
    parser.add_argument("--no-observations", action="store_true",
                        help="leave out the gem + observations rows")
    parser.add_argument("--k", default="5,10,20", help="comma-separated cut-offs (10 always)")
    parser.add_argument("--questions", type=int, default=None,
                        help="only the first N questions of each conversation")
    parser.add_argument("--sessions", type=int, default=None,
                        help="only the first N sessions of each conversation (and the questions "
                             "whose evidence they hold): a quick run of every system")
    parser.add_argument("--jobs", type=int, default=1, help="conversations run at once")
    parser.add_argument("--policies", nargs="*", default=None,
                        help="policy files composed on the default governance")
    args = parser.parse_args(argv)
    if not DATA.is_file():
        print(f"skipped: no LoCoMo data at {DATA} (set GEM_LOCOMO to its path)")
        return 0
    embedders = [e.strip() for e in args.embedders.split(",") if e.strip()]
    unknown = set(embedders) - set(EMBEDDER_LABEL)
    if unknown or not embedders:
        parser.error(f"unknown embedder(s) {sorted(unknown)}; choose from {sorted(EMBEDDER_LABEL)}")
    ks = sorted({int(x) for x in args.k.split(",")})
    run(DATA, args.conversations, embedders, ks, policies=args.policies,
        questions=args.questions, observations=not args.no_observations, jobs=args.jobs,
        sessions=args.sessions)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
