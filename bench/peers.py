"""Other agent memories driven through bench/scale.py's workload, for its peer rows.

Each peer stores a fact (topic, field, value) as one memory whose text is
"TOPIC, FIELD: VALUE" and whose metadata holds the topic and the field, and answers:
a batch of facts, one fact, a free-text search for the best k, and (where the peer has an
equivalent) a structured lookup of a topic's field. Neither peer supersedes: an update is
one more memory, as each peer's own API without an LLM offers. The peers are not gem's
dependencies: install them into a benchmark venv (bench/README.md); `load(name)` returns
None when a peer's package is missing, and the table says so.

- mem0 (`mem0ai`), `infer=False` (no LLM): its qdrant store in local mode, persisted under
  the benchmark's directory (`on_disk`), and gem's HashingEmbedder (256 dims) as its
  embedder. mem0 accepts only its listed embedder providers (its config validator rejects
  others) and has none that runs offline without downloading a model, so the memory is
  built with the "openai" provider and a placeholder key (its client is made, never
  called) and its `embedding_model` is then replaced by `GemHashing`, a subclass of mem0's
  EmbeddingBase around gem.embed.HashingEmbedder. Without fastembed and spaCy (mem0's
  extras, which download models) mem0 searches by vector only. Structured: `get_all` with
  the topic and field as metadata filters.
- kuzu-memory (`kuzu-memory`): `batch_store_memories` for batches, `remember` for one
  fact, `attach_memories` (its default recall, no sentence-transformers) for free text;
  git sync off. It has no lookup by metadata, so no structured row. Its background
  enrichment (run over the whole database every 5 `remember` calls: co-occurrence,
  shared-entity and centrality edges, TF-IDF keywords) is switched off
  (`kuzu_memory.core.memory._ENRICHMENT_INTERVAL`, its only switch): on this workload, where
  every memory shares words, it contends with the writes for Kuzu's single write
  transaction (one `remember` took 51 s at 6,000 memories, 14 s to open at 320) and the run
  never reached 1k topics.
"""
from __future__ import annotations

import importlib.util
import os
from pathlib import Path
from typing import Any

Fact = tuple[str, str, str]  # topic, field, value

USER = "bench"


def text(fact: Fact) -> str:
    topic, field, value = fact
    return f"{topic}, {field}: {value}"


class Mem0:
    name = "mem0"
    structured_op = True

    def __init__(self, directory: str) -> None:
        os.environ["MEM0_TELEMETRY"] = "False"  # offline: no posthog events
        from mem0 import Memory
        from mem0.embeddings.base import EmbeddingBase

        from gem.embed import HashingEmbedder

        class GemHashing(EmbeddingBase):
            """gem's HashingEmbedder behind mem0's embedder interface."""

            def __init__(self) -> None:
                super().__init__(None)
                self.hashing = HashingEmbedder()

            def embed(self, text: str, memory_action: Any = None) -> list[float]:
                return self.hashing.embed([text])[0].tolist()

            def embed_batch(self, texts: list[str], memory_action: Any = "add") -> list[list[float]]:
                return self.hashing.embed(list(texts)).tolist()

        self.path = directory
        config = {
            "vector_store": {"provider": "qdrant", "config": {
                "path": os.path.join(directory, "qdrant"), "collection_name": "bench",
                "embedding_model_dims": 256, "on_disk": True}},
            "embedder": {"provider": "openai", "config": {"api_key": "unused", "embedding_dims": 256}},
            "llm": {"provider": "openai", "config": {"api_key": "unused"}},
            "history_db_path": os.path.join(directory, "history.db"),
        }
        self.memory = Memory.from_config(config)
        self.memory.embedding_model = GemHashing()

    def add(self, facts: list[Fact]) -> None:
        # A call per fact: mem0 takes one metadata dict per call (for the structured lookup),
        # and with infer=False it stores each message as its own memory anyway.
        for fact in facts:
            self.memory.add([{"role": "user", "content": text(fact)}], user_id=USER, infer=False,
                            metadata={"topic": fact[0], "field": fact[1]})

    def search(self, query: str, k: int) -> list[str]:
        return [r["memory"] for r in
                self.memory.search(query, filters={"user_id": USER}, top_k=k)["results"]]

    def structured(self, topic: str, field: str) -> list[str]:
        return [r["memory"] for r in self.memory.get_all(
            filters={"user_id": USER, "topic": topic, "field": field}, top_k=100)["results"]]

    def close(self) -> None:
        self.memory.close()
        self.memory.vector_store.client.close()


class KuzuMemory:
    name = "kuzu-memory"
    structured_op = False

    def __init__(self, directory: str) -> None:
        import kuzu_memory.core.memory as upkeep
        from kuzu_memory import KuzuMemory as Peer
        upkeep._ENRICHMENT_INTERVAL = 1 << 62  # never: see the module's docstring
        self.path = directory
        self.memory = Peer(db_path=Path(directory) / "memories.db", enable_git_sync=False,
                           auto_sync=False)
        self.memory.get_memory_count()  # it connects lazily: open means ready to answer

    def add(self, facts: list[Fact]) -> None:
        from kuzu_memory import Memory, MemoryType
        if len(facts) == 1:
            topic, field, _ = facts[0]
            self.memory.remember(text(facts[0]), source="bench",
                                 metadata={"topic": topic, "field": field})
            return
        self.memory.batch_store_memories([
            Memory(content=text(f), memory_type=MemoryType.SEMANTIC, source_type="bench",
                   metadata={"topic": f[0], "field": f[1]}) for f in facts])

    def search(self, query: str, k: int) -> list[str]:
        return [m.content for m in self.memory.attach_memories(query, max_memories=k).memories]

    def structured(self, topic: str, field: str) -> list[str]:
        raise NotImplementedError

    def close(self) -> None:
        self.memory.close()


PEERS = {"mem0": (Mem0, "mem0"), "kuzu-memory": (KuzuMemory, "kuzu_memory")}


def installed(name: str) -> bool:
    return importlib.util.find_spec(PEERS[name][1]) is not None


def open_peer(name: str, directory: str) -> Any:
    return PEERS[name][0](directory)
