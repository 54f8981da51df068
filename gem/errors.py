"""Every error gem raises on purpose derives from GemError."""
from __future__ import annotations


class GemError(Exception):
    """Root of all errors raised on purpose by gem."""


class InvalidInput(GemError, ValueError):
    """A caller passed something gem cannot accept; nothing was changed."""


class UnknownUnit(GemError, KeyError):
    """A topic or field named by the caller does not exist."""

    def __str__(self) -> str:  # KeyError quotes its message; we want it plain
        return str(self.args[0]) if self.args else ""


class StoreLocked(GemError):
    """Another process holds the database at this path."""

    def __init__(self, path: str, detail: str = "") -> None:
        self.path = path
        msg = f"database at {path!r} is locked by another process"
        super().__init__(msg + (f" ({detail})" if detail else ""))


class StoreError(GemError):
    """The storage engine failed in a way that is not the caller's fault."""


class WriteConflict(StoreError):
    """Another process committed to the same scope first, every time this transition was
    tried (a store several processes write: FalkorDB). Nothing of it was written; calling again
    runs it on the state as it is then."""


class TransitionRejected(GemError):
    """A transition violated a correctness condition or a policy and was rolled back whole."""

    def __init__(self, condition: str, unit: str | None, detail: str) -> None:
        self.condition = condition
        self.unit = unit
        self.detail = detail
        where = f" on {unit}" if unit else ""
        super().__init__(f"{condition}{where}: {detail}")


class PolicyError(GemError):
    """A policy source could not be accepted. `diagnostics` lists every problem found."""

    def __init__(self, diagnostics: list) -> None:
        self.diagnostics = list(diagnostics)
        super().__init__("\n".join(d.render() for d in self.diagnostics))


class PolicySyntaxError(PolicyError):
    """A policy source does not parse."""


class PolicyCheckError(PolicyError):
    """A policy source parses but does not check (names, types, arities, cascades)."""


class SnapshotError(GemError):
    """A derived-index snapshot file cannot be used (missing, truncated, corrupted, of another
    version or not a snapshot at all). The caller rebuilds the index from the database."""
