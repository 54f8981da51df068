"""Events a transition emits for the policies, and the record of what the policies did."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class Event:
    name: str
    bindings: dict[str, Any] = field(hash=False)
    depth: int  # 0 for events the operator emitted; one more for each policy action in between


@dataclass(frozen=True)
class Fired:
    """One action a policy took, with the evidence it gave (logged with the transition)."""
    policy: str
    event: str
    action: str
    args: tuple[Any, ...]
    evidence: dict[str, Any] = field(hash=False)
