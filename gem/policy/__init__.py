"""The policy language front-end: read -> parse -> check -> compile, plus fmt and explain.

    from gem.policy import load
    policy_set = load(["team.policy"])     # the default policy, then team.policy composed on it
    policy_set.warnings                    # what C6 / C3 will hold against the set, if anything
    for p in policy_set.triggered_by("field_updated"):
        p.fire(bindings, runtime)          # runtime implements PolicyRuntime

Errors: InvalidInput (bad arguments, unreadable files), PolicySyntaxError,
PolicyCheckError; each policy error lists its diagnostics.
"""
from __future__ import annotations

from . import catalogue
from .ast import PolicyFile, Span
from .checker import PASSES, CheckedPolicies, check
from .compiler import (
    CompiledExpr,
    CompiledPolicy,
    PolicyRuntime,
    PolicySet,
    compile,
    load,
    load_sources,
    load_text,
)
from .compose import Composition, compose
from .diagnostics import CODES, WARNINGS, Diagnostic
from .explain import explain
from .fmt import fmt
from .grammar import grammar_path
from .parser import parse, parse_all
from .sources import (Source, compose_sources, default_policy_path, default_sources, is_default_policy,
                      read_sources)

__all__ = [
    "CODES", "PASSES", "WARNINGS", "CheckedPolicies", "CompiledExpr", "CompiledPolicy", "Composition",
    "Diagnostic", "PolicyFile", "PolicyRuntime", "PolicySet", "Source", "Span", "catalogue", "check", "compile",
    "compose", "compose_sources", "default_policy_path", "default_sources", "explain", "fmt", "grammar_path",
    "is_default_policy", "load", "load_sources", "load_text", "parse", "parse_all", "read_sources",
]
