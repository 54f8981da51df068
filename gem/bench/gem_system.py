"""gem as a system under test of the trajectory benchmark: its default policies plus the
benchmark's C5 bound, in a temporary memory."""
from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

from .stream import StreamConfig, Turn
from .system import Provenance, System


class GemSystem(System):
    """gem with its default policies plus the benchmark's C5 bound."""

    name = "gem"
    family = "governed evolving memory (this project)"

    def __init__(self, config: StreamConfig, *, engine: str = "kuzu",
                 extra_policies: str = "", maintain_every: int = 0,
                 name: str | None = None, path: str | None = None) -> None:
        """`path`: where the memory lives (None: a temporary embedded database; with engine
        "falkordb", a server's URL without a name is a temporary memory on it)."""
        super().__init__()
        import gem
        self._gem = gem
        if name:
            self.name = name
        self._dir = tempfile.TemporaryDirectory(prefix="gem-bench-")
        bound = Path(self._dir.name) / "trajectory-bound.policy"
        bound.write_text("# the trajectory benchmark's C5 bound\n" + config.bound_policy()
                         + extra_policies, encoding="utf-8")
        self.policy_files = [str(bound)]  # composed on the default governance
        self.mem = gem.open(path=path, policies=self.policy_files,
                            embedder=gem.HashingEmbedder(), clock=lambda: self.now,
                            engine=engine)
        self.config = config
        self.maintain_every = maintain_every
        self._turns = 0
        self._flagged: set[str] = set()
        self.errors: list[dict[str, Any]] = []
        self.bound_mismatches: list[dict[str, Any]] = []
        self._turn = -1

    def begin(self, turn: Turn) -> None:
        super().begin(turn)
        self._turn = turn.index

    def ingest(self, turn: Turn) -> None:
        gem = self._gem
        facts = [gem.Fact(f.topic, f.field, f.value, at=f.at, source=f.source, actor="user",
                          ref=f"turn-{turn.index}") for f in turn.facts]
        self._flagged = set()
        try:
            result = self.mem.ingest(facts)
        except gem.GemError as exc:
            self.errors.append({"turn": turn.index, "op": "ingest", "error": type(exc).__name__,
                                "detail": str(exc)})
            return
        self._flagged = set(result.flagged)
        self._maintain()

    def _maintain(self) -> None:
        self._turns += 1
        if self.maintain_every and self._turns % self.maintain_every == 0:
            try:
                self.mem.maintain()
            except self._gem.GemError as exc:
                self.errors.append({"turn": self._turn, "op": "maintain",
                                    "error": type(exc).__name__, "detail": str(exc)})

    def link(self, turn: Turn) -> None:
        assert turn.link is not None
        try:
            self.mem.link(turn.link.src, turn.link.dst, kind=turn.link.kind)
        except self._gem.GemError as exc:
            self.errors.append({"turn": turn.index, "op": "link", "error": type(exc).__name__,
                                "detail": str(exc)})

    def query(self, topic: str, field: str, text: str) -> Any:
        try:
            result = self.mem.retrieve(topic=topic, fields=[field])
        except self._gem.GemError as exc:
            self.errors.append({"turn": self._turn, "op": "retrieve",
                                "error": type(exc).__name__, "detail": str(exc)})
            return None
        finally:
            self._maintain()
        return result.value(topic, field)

    def flagged_after_update(self) -> set[str]:
        return set(self._flagged)

    def footprint(self) -> int:
        stats = self.mem.stats()
        want = self.config.bound(self.n)
        got = stats.get("active_bound")
        if stats.get("interactions") != self.n or got is None or abs(got - want) > 1e-9:
            self.bound_mismatches.append({"turn": self._turn, "n": self.n,
                                          "gem_interactions": stats.get("interactions"),
                                          "beta": want, "gem_active_bound": got})
        return int(stats["active_fields"])

    def provenance(self, topic: str, field: str, text: str | None = None) -> Provenance | None:
        try:
            history = self.mem.history(topic, field)
            view = self.mem.inspect(topic, field)
        except self._gem.GemError:
            return None
        if view is None:
            return None
        # In order of statement: a re-stated value counts from its latest statement.
        entries = sorted((h for h in history if h.status != "retracted"
                          and h.provenance.polarity == "+"), key=lambda h: (h.asserted_at, h.recorded_at))
        current = [i for i, h in enumerate(entries) if h.status == "current"]
        if not current:
            return None
        i = current[0]
        cur = entries[i]
        older = [h for h in entries[:i] if h.value != cur.value]
        # The source of the latest statement: the entry's own, or a later re-statement's.
        statements = [(cur.valid_at, cur.provenance.source)] + [
            (o.valid_at, o.provenance.source) for o in cur.observations
            if o.provenance.polarity == "+"]
        source = max(statements, key=lambda s: s[0])[1]
        return Provenance(cur.value, source, older[-1].value if older else None)

    def diagnose(self, topic: str, field: str) -> dict[str, Any]:
        out: dict[str, Any] = {}
        try:
            tv = self.mem.inspect(topic)
            fv = self.mem.inspect(topic, field)
            out["topic_status"] = None if tv is None else tv.status
            if fv is not None:
                out.update(field_status=fv.status, salience=round(fv.salience, 4),
                           contested=fv.contested, stored_current=fv.value)
            out["history"] = [(h.value, h.valid_at.isoformat(), h.status, h.provenance.source,
                               len(h.observations)) for h in self.mem.history(topic, field)]
        except self._gem.GemError as exc:
            out["error"] = str(exc)
        return out

    def summary(self) -> dict[str, Any]:
        audit = self.mem.audit()
        stats = self.mem.stats()
        return {"errors": self.errors, "bound_mismatches": self.bound_mismatches[:20],
                "bound_mismatch_count": len(self.bound_mismatches),
                "audit_ok": audit.ok, "audit_violations": [v.model_dump() for v in audit.violations][:20],
                "stats": {k: v for k, v in stats.items() if k != "topics"},
                "policies": [p.name for p in self.mem.policies.policies],
                "maintain_every": self.maintain_every}

    def close(self) -> None:
        self.mem.close()
        self._dir.cleanup()
