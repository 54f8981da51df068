"""What the check stage's passes share: the files, their sources, the composition, and the
diagnostics and warnings each pass reports into."""
from __future__ import annotations

from . import ast as A
from .cascades import CascadeEdge
from .compose import Composition
from .diagnostics import Diagnostic, at


class CheckContext:
    def __init__(self, files: tuple[A.PolicyFile, ...], available: frozenset[str] | None) -> None:
        self.files = files
        self.available = available
        self.sources = {f.file: f.source for f in files}
        self.diagnostics: list[Diagnostic] = []
        self.warnings: list[Diagnostic] = []
        self.cascades: list[CascadeEdge] = []
        self.composition = Composition((), (), (), ())

    def report(self, code: str, message: str, span: A.Span, hint: str | None = None,
               severity: str = "error") -> None:
        d = at(code, message, span, self.sources.get(span.file, ""), hint, severity)
        (self.warnings if severity == "warning" else self.diagnostics).append(d)

    @property
    def policies(self):
        """Every policy definition, also those a later file overrides or disables: all are checked."""
        return [p for f in self.files for p in f.policies]

    @property
    def settings(self):
        return [s for f in self.files for s in f.settings]
