"""LoCoMo evidence recall: gem (maintenance on and off) against BM25, dense and RRF baselines.

    python bench/locomo.py [--conversations N] [--embedder hashing|semantic|minilm] [--k 5,10,20]
                           [--policies FILE ...]

Reads the LoCoMo development split by path (`../shared/data/locomo-dev.json` from the
repository root, or the file named by GEM_LOCOMO) and skips cleanly when it is absent. For each
conversation: a fresh memory whose injected clock is set to each session's date, every turn
ingested as a `gem.Episode` (source = its dia_id, speaker, session time; one transition per
turn, as an agent would record them), `maintain()` between sessions under the default
governance (or not: "maintenance off"); then every question of categories 1-4 through
`mem.retrieve(question, k)`. Evidence recall: does the returned material include the turn(s)
that answer the question: any@k (at least one evidence turn in the top k) and all@k (every
one). The baselines rank the same turn documents ("speaker: text") with BM25 (plain tokens,
stop words removed), dense cosine (the same embedder gem uses) and their reciprocal-rank
fusion. Also printed: gem's ingest time, retrieve p50/p95, and how much the answers change when
the questions are asked in reverse order (every read is a write, so order can matter).
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
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any, Callable

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import gem  # noqa: E402
from gem.index import LexicalIndex  # noqa: E402
from gem.terms import STOP_WORDS  # noqa: E402
from gem.text import tokens  # noqa: E402

DATA = Path(os.environ.get("GEM_LOCOMO") or
            Path(__file__).resolve().parents[2] / "shared" / "data" / "locomo-dev.json")
CATEGORIES = {1: "multi-hop", 2: "temporal", 3: "open-domain", 4: "single-hop"}
RRF_K = 60


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

    @property
    def turns(self) -> list[Turn]:
        return [t for _, turns in self.sessions for t in turns]


def parse_date(text: str) -> datetime:
    """'1:56 pm on 8 May, 2023' -> an aware UTC datetime."""
    return datetime.strptime(text.strip(), "%I:%M %p on %d %B, %Y").replace(tzinfo=timezone.utc)


def evidence_ids(raw: list[str]) -> list[str]:
    """The dia_ids a question cites ('D8:6; D9:17' and 'D:11:26' occur as typos)."""
    out = []
    for item in raw:
        for m in re.finditer(r"D:?(\d+):(\d+)", item):
            out.append(f"D{m.group(1)}:{m.group(2)}")
    return list(dict.fromkeys(out))


def load(path: Path, limit: int | None = None, questions: int | None = None) -> list[Conversation]:
    data = json.loads(path.read_text(encoding="utf-8"))
    out = []
    for item in data[:limit]:
        conv = item["conversation"]
        numbers = sorted(int(m.group(1)) for k in conv
                         if (m := re.fullmatch(r"session_(\d+)", k)) and conv[k])
        sessions = []
        for n in numbers:
            start = parse_date(conv[f"session_{n}_date_time"])
            # Turns a second apart: the order within a session is kept in valid time.
            turns = [Turn(t["dia_id"], t["speaker"], t["text"], start + timedelta(seconds=i))
                     for i, t in enumerate(conv[f"session_{n}"])]
            sessions.append((start, turns))
        selected = [q for q in item["qa"] if q.get("category") in CATEGORIES
                    and evidence_ids(q.get("evidence", []))]
        out.append(Conversation(item["sample_id"], sessions, selected[:questions]))
    return out


def make_embedder(name: str) -> gem.Embedder:
    if name == "minilm":
        return gem.MiniLMEmbedder()
    if name == "semantic":
        return gem.NumpyMiniLMEmbedder()
    return gem.HashingEmbedder(256)


# ---------------------------------------------------------------------- gem
class Clock:
    def __init__(self, now: datetime) -> None:
        self.now = now

    def __call__(self) -> datetime:
        return self.now


@dataclass
class GemRun:
    ingest_seconds: float = 0.0
    turns: int = 0
    latencies: list[float] = field(default_factory=list)
    ranked: dict[int, list[str]] = field(default_factory=dict)  # question index -> dia_ids


def ingest_conversation(conv: Conversation, path: str, embedder: gem.Embedder, maintain: bool,
                        run: GemRun, policies: list[str] | None = None) -> Clock:
    clock = Clock(conv.sessions[0][0])
    with gem.open(path, clock=clock, embedder=embedder, policies=policies) as mem:
        for i, (start, turns) in enumerate(conv.sessions):
            clock.now = start
            if maintain and i:
                mem.maintain()
            began = time.perf_counter()
            for turn in turns:
                clock.now = turn.at
                mem.ingest(gem.Episode(turn.text, at=turn.at, source=turn.dia_id,
                                       speaker=turn.speaker))
            run.ingest_seconds += time.perf_counter() - began
            run.turns += len(turns)
        clock.now = conv.sessions[-1][1][-1].at + timedelta(days=1)
        if maintain:
            mem.maintain()
    return clock


def ask(conv: Conversation, path: str, embedder: gem.Embedder, clock: Clock, k: int,
        order: list[int], run: GemRun) -> None:
    with gem.open(path, clock=clock, embedder=embedder) as mem:
        for qi in order:
            q = conv.questions[qi]
            clock.now += timedelta(minutes=1)
            began = time.perf_counter()
            r = mem.retrieve(str(q["question"]), k=k)
            run.latencies.append(time.perf_counter() - began)
            run.ranked[qi] = [e.source for e in r.episodes]


# ---------------------------------------------------------------------- baselines
def bm25_text(text: str) -> str:
    return " ".join(w for w in tokens(text) if w not in STOP_WORDS)


def baselines(conv: Conversation, embedder: gem.Embedder, k: int) -> dict[str, dict[int, list[str]]]:
    turns = conv.turns
    lex = LexicalIndex()
    for t in turns:
        lex.upsert(t.dia_id, bm25_text(t.document))
    docs = embedder.embed([t.document for t in turns])
    ids = [t.dia_id for t in turns]
    qs = [str(q["question"]) for q in conv.questions]
    qvecs = embedder.embed(qs)
    out: dict[str, dict[int, list[str]]] = {"BM25": {}, "dense": {}, "RRF": {}}
    pool = max(50, 10 * k)
    for qi, (q, qv) in enumerate(zip(qs, qvecs)):
        lexical = [d for d, _ in lex.search(bm25_text(q), pool)]
        sims = docs @ qv
        dense = [ids[i] for i in np.argsort(-sims, kind="stable")[:pool].tolist()]
        fused: dict[str, float] = {}
        for ranking in (lexical, dense):
            for rank, d in enumerate(ranking):
                fused[d] = fused.get(d, 0.0) + 1.0 / (RRF_K + rank + 1)
        out["BM25"][qi] = lexical[:k]
        out["dense"][qi] = dense[:k]
        out["RRF"][qi] = sorted(fused, key=lambda d: (-fused[d], d))[:k]
    return out


# ---------------------------------------------------------------------- scoring
def recall(ranked: dict[int, list[str]], conv: Conversation, k: int) -> list[tuple[int, float, float]]:
    """(category, any@k, all@k) per question."""
    out = []
    for qi, q in enumerate(conv.questions):
        want = set(evidence_ids(q["evidence"]))
        got = set(ranked.get(qi, [])[:k])
        out.append((int(q["category"]), float(bool(want & got)), float(want <= got)))
    return out


def table(results: dict[str, list[tuple[int, dict[int, tuple[float, float]]]]], ks: list[int]) -> str:
    """One row per system and category: any@k and all@k for each k."""
    head = ["system", "category", "n"] + [f"any@{k}" for k in ks] + [f"all@{k}" for k in ks]
    rows = [head]
    for system, per_question in results.items():
        for cat, name in [*CATEGORIES.items(), (0, "overall")]:
            sel = [scores for c, scores in per_question if cat in (0, c)]
            if not sel:
                continue
            anys = [f"{statistics.fmean(s[k][0] for s in sel):.3f}" for k in ks]
            alls = [f"{statistics.fmean(s[k][1] for s in sel):.3f}" for k in ks]
            rows.append([system, name, str(len(sel)), *anys, *alls])
    widths = [max(len(r[i]) for r in rows) for i in range(len(head))]
    lines = ["  ".join(c.ljust(w) if i < 2 else c.rjust(w) for i, (c, w) in enumerate(zip(r, widths)))
             for r in rows]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines)


def percentile(values: list[float], p: float) -> float:
    return float(np.percentile(np.asarray(values), p)) if values else float("nan")


def run(path: Path, conversations: int | None, embedder_name: str, ks: list[int],
        out: Callable[[str], None] = print, policies: list[str] | None = None,
        questions: int | None = None) -> dict[str, Any]:
    convs = load(path, conversations, questions)
    embedder = make_embedder(embedder_name)
    k = max(ks)
    systems = ["gem (maintenance on)", "gem (maintenance off)", "BM25", "dense", "RRF"]
    results: dict[str, list[tuple[int, dict[int, tuple[float, float]]]]] = {s: [] for s in systems}
    on, off, reverse = GemRun(), GemRun(), GemRun()
    changed = reordered = total = 0
    reverse_any: list[float] = []
    forward_any: list[float] = []
    for conv in convs:
        work = tempfile.mkdtemp(prefix="gem-locomo-")
        try:
            runs: dict[str, dict[int, list[str]]] = {}
            forward = list(range(len(conv.questions)))
            for system, maintain, stats in (("gem (maintenance on)", True, on),
                                            ("gem (maintenance off)", False, off)):
                db = os.path.join(work, "on.db" if maintain else "off.db")
                clock = ingest_conversation(conv, db, embedder, maintain, stats, policies)
                if maintain:  # the same memory, asked in reverse order
                    twin = os.path.join(work, "reverse.db")
                    shutil.copytree(db, twin) if os.path.isdir(db) else shutil.copy(db, twin)
                    if os.path.isdir(db + ".gem-derived"):
                        shutil.copytree(db + ".gem-derived", twin + ".gem-derived")
                    ask(conv, twin, embedder, Clock(clock.now), k, forward[::-1], reverse)
                ask(conv, db, embedder, clock, k, forward, stats)
                runs[system] = dict(stats.ranked)
                if maintain:
                    for qi in forward:
                        total += 1
                        a, b = stats.ranked[qi][:10], reverse.ranked[qi][:10]
                        changed += set(a) != set(b)
                        reordered += a != b
                    forward_any += [x[1] for x in recall(stats.ranked, conv, 10)]
                    reverse_any += [x[1] for x in recall(reverse.ranked, conv, 10)]
                stats.ranked.clear()
                reverse.ranked.clear()
            runs.update(baselines(conv, embedder, k))
            for system in systems:
                per_k = {kk: recall(runs[system], conv, kk) for kk in ks}
                for qi in range(len(conv.questions)):
                    results[system].append((per_k[ks[0]][qi][0],
                                            {kk: per_k[kk][qi][1:] for kk in ks}))
        finally:
            shutil.rmtree(work, ignore_errors=True)
    n_q = sum(len(c.questions) for c in convs)
    out(f"LoCoMo dev: {len(convs)} conversation(s), {sum(len(c.turns) for c in convs)} turns, "
        f"{n_q} questions (categories 1-4); embedder {embedder.name}; evidence recall")
    out(table(results, ks))
    out("")
    for name, stats in (("maintenance on", on), ("maintenance off", off)):
        out(f"gem {name}: ingest {stats.ingest_seconds:.1f} s for {stats.turns} turns "
            f"({1e3 * stats.ingest_seconds / max(stats.turns, 1):.2f} ms/turn, one transition each); "
            f"retrieve k={k} p50 {1e3 * percentile(stats.latencies, 50):.1f} ms, "
            f"p95 {1e3 * percentile(stats.latencies, 95):.1f} ms")
    out(f"reverse order (maintenance on): the top-10 set differs for {changed}/{total} questions "
        f"({100 * changed / max(total, 1):.1f}%), its order for {reordered}; any@10 forward {statistics.fmean(forward_any or [0]):.3f}, "
        f"reverse {statistics.fmean(reverse_any or [0]):.3f}")
    summary = {system: {kk: (statistics.fmean(s[kk][0] for _, s in rows),
                             statistics.fmean(s[kk][1] for _, s in rows)) for kk in ks}
               for system, rows in results.items() if rows}
    return {"recall": summary, "questions": n_q, "changed": changed}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--conversations", type=int, default=None, help="only the first N")
    parser.add_argument("--embedder", choices=("hashing", "semantic", "minilm"), default="hashing")
    parser.add_argument("--k", default="5,10,20", help="comma-separated cut-offs")
    parser.add_argument("--questions", type=int, default=None,
                        help="only the first N questions of each conversation")
    parser.add_argument("--policies", nargs="*", default=None,
                        help="policy files composed on the default governance")
    args = parser.parse_args(argv)
    if not DATA.is_file():
        print(f"skipped: no LoCoMo data at {DATA} (set GEM_LOCOMO to its path)")
        return 0
    ks = sorted({int(x) for x in args.k.split(",")})
    run(DATA, args.conversations, args.embedder, ks, policies=args.policies,
        questions=args.questions)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
