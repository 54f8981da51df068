"""Whole-table reads fit a small buffer pool: the full audit reads the log and the histories in
bounded pieces (gem/store/queries/pieces.py), and a statement that outgrows the pool is a
typed error that says which setting to raise."""
from __future__ import annotations

import random

import pytest

import gem
from conftest import ENGINE
from gem.store.queries import pieces

WORDS = ("alpha", "budget", "launch", "design", "review", "hiring", "roadmap", "pricing")
EMBEDDED = pytest.mark.skipif(ENGINE == "falkordb", reason="FalkorDB has no buffer pool")

# A pool the engine opens a 1k-topic memory in and audits it in pieces (measured: kuzu 20 MiB;
# LadybugDB's fixed needs are larger: its C3 join failed at 64 MiB, passed at 80).
SMALL_POOL = {"kuzu": 20 << 20, "ladybug": 96 << 20}.get(ENGINE, 64 << 20)
# ... and one too small for the audit in one piece (kuzu's whole log read fails in 20 MiB at
# 1k topics; LadybugDB cannot even open the memory in 24 MiB).
TOO_SMALL = {"kuzu": 20 << 20, "ladybug": 24 << 20}.get(ENGINE, 16 << 20)


def _facts(start: int, topics: int) -> list[gem.Fact]:
    return [gem.Fact(f"Topic {t} {WORDS[t % 8]}", f"field {j}", f"value {t}.{j} {WORDS[(t + j) % 8]}")
            for t in range(start, start + topics) for j in range(10)]


@pytest.fixture(scope="module")
def large(tmp_path_factory):
    """1,000 topics of 10 fields in batches of 2,000 facts, and 3 batches of updates: log
    records of ~0.4 MB each (a batch's hashes), 16k entries."""
    path = str(tmp_path_factory.mktemp("pool") / "m")
    with gem.open(path, engine=ENGINE) as mem:
        for start in range(0, 1000, 200):
            mem.ingest(_facts(start, 200))
        rng = random.Random(7)
        for _ in range(3):
            mem.ingest([gem.Fact(f"Topic {p // 10} {WORDS[p // 10 % 8]}", f"field {p % 10}", f"updated {rng.random()}")
                        for p in rng.sample(range(10_000), 2000)])
    return path


@EMBEDDED
@pytest.mark.slow
def test_the_full_audit_reads_in_pieces_a_small_pool_holds_and_finds_tampering_in_the_last(large):
    # Pieces of a sixteenth of the pool: the log (~0.4 MB a batch record) and the 10k fields'
    # histories in several each.
    assert pieces.piece_bytes_of(SMALL_POOL) <= 6 << 20
    with gem.open(large, engine=ENGINE, buffer_pool_size=SMALL_POOL) as mem:
        assert mem.audit(full=True).ok
        # A record and an entry read in the last pieces, changed behind gem's back, are found.
        with mem._engine.store.transaction() as tx:
            head = tx.scalar("MATCH (x:Transition) RETURN max(x.seq)")
            tx.run("MATCH (x:Transition {seq: $s}) SET x.actor = 'forged'", {"s": head})
            [[entry]] = tx.run("MATCH (f:Field)-[:HAS_ENTRY]->(e:Entry) WITH e ORDER BY "
                               "offset(id(f)) DESC LIMIT 1 SET e.source = 'forged' RETURN e.id")
        report = mem.audit(full=True)
    assert {(v.condition, v.unit) for v in report.violations} == {("log", str(head)), ("state", entry)}


@EMBEDDED
@pytest.mark.slow
def test_a_statement_the_pool_cannot_hold_is_a_typed_error_naming_the_setting(large, monkeypatch):
    """The whole log or all histories in one statement (the audit before pieces) outgrow a
    pool the pieces fit: a StoreError that says to raise buffer_pool_size, nothing crashes."""
    monkeypatch.setattr(pieces, "POOL_SHARE", 1)  # a piece as large as the pool: one piece here
    with pytest.raises(gem.StoreError, match="buffer pool is full.*larger buffer_pool_size"):
        with gem.open(large, engine=ENGINE, buffer_pool_size=TOO_SMALL) as mem:
            mem.audit(full=True)
