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


class LostCommits(StoreError):
    """The database's log lacks a commit it acknowledged (`<db>.gem-head` records the last
    one): its files were replaced by older ones, or restored from a backup. Nothing was
    opened. `gem.open(path, accept_head=True)` accepts the database as it is now."""

    def __init__(self, path: str, seq: int | None, detail: str) -> None:
        self.path = path
        self.seq = seq
        what = f"transition {seq} was acknowledged as committed but" if seq is not None else \
            "the record of its last acknowledged commit is unusable:"
        super().__init__(
            f"database at {path!r} may have lost committed transitions: {what} {detail} (its "
            f"files were replaced by older ones or restored from a backup?). To accept the "
            f"database as it is now, open it once with gem.open({path!r}, accept_head=True)")


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
