"""The interface every system under test of the trajectory benchmark implements (gem and
the baselines), and the provenance of an answer."""
from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import Any

from .stream import START, Turn
from .truth import ProbeTruth


@dataclass(frozen=True)
class Provenance:
    """What a system can show about its current answer: the value, where it came from,
    and the value it replaced (None when it replaced nothing)."""

    value: Any
    source: str | None
    replaced: Any


class System(ABC):
    """The interface every system under test implements (gem and the five baselines)."""

    name: str = "system"
    family: str = ""

    def __init__(self) -> None:
        self.now = START
        self.n = 0  # interactions seen (ingest and query turns)

    def begin(self, turn: Turn) -> None:
        """Called before every turn: the simulated clock moves to the turn's time."""
        self.now = turn.time
        if turn.interaction:
            self.n += 1

    @abstractmethod
    def ingest(self, turn: Turn) -> None:
        """Take in the facts one turn states (turn.text is the raw utterance)."""

    @abstractmethod
    def link(self, turn: Turn) -> None:
        """Take in a declared relation between two projects (turn.link)."""

    @abstractmethod
    def query(self, topic: str, field: str, text: str) -> Any:
        """Answer the question `text` about topic.field: the current value, or None."""

    def flagged_after_update(self) -> set[str]:
        """Topics (titles) the last ingest marked for re-evaluation as a consequence of it."""
        return set()

    @abstractmethod
    def footprint(self) -> int:
        """Units in the active state: what default retrieval ranks over (C5)."""

    @abstractmethod
    def provenance(self, topic: str, field: str, text: str | None = None) -> Provenance | None:
        """Where the current answer to `text` came from and what it replaced, without side
        effects (systems that answer by search look it up the way they answered)."""

    def provenance_complete(self, topic: str, field: str, truth: ProbeTruth,
                            text: str | None = None) -> bool:
        """Can the system show the right answer, a source that asserted it, and the value
        it replaced?"""
        p = self.provenance(topic, field, text)
        return (p is not None and p.value == truth.value and p.source in truth.sources
                and p.replaced == truth.replaced)

    def diagnose(self, topic: str, field: str) -> dict[str, Any]:
        """System-specific detail for a failed probe (read-only)."""
        return {}

    def summary(self) -> dict[str, Any]:
        """System-specific facts for the report (errors, audits, ...)."""
        return {}

    def close(self) -> None:
        pass
