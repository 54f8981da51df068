"""The policy language front-end: parse -> check -> compile, plus fmt and explain.

    from gem.policy import load
    policy_set = load(["policies/default.policy"])      # PolicySyntaxError / PolicyCheckError
    for p in policy_set.triggered_by("field_updated"):
        p.fire(bindings, runtime)                       # runtime implements PolicyRuntime
"""
from __future__ import annotations

from pathlib import Path

from . import catalogue
from .ast import PolicyFile, Span
from .checker import PASSES, CheckedPolicies, check
from .compiler import (
    CompiledExpr,
    CompiledPolicy,
    PolicyRuntime,
    PolicySet,
    Source,
    compile,
    load,
    load_sources,
    load_text,
)
from .diagnostics import CODES, Diagnostic
from .explain import explain
from .fmt import fmt
from .parser import data_file, grammar_path, parse


def default_policy_path() -> Path:
    """policies/default.policy: inside the wheel (gem/_data/policies) or the source checkout."""
    return data_file("policies", "default.policy")


__all__ = [
    "CODES", "PASSES", "CheckedPolicies", "CompiledExpr", "CompiledPolicy", "Diagnostic", "PolicyFile",
    "PolicyRuntime", "PolicySet", "Source", "Span", "catalogue", "check", "compile", "default_policy_path",
    "explain", "fmt", "grammar_path", "load", "load_sources", "load_text", "parse",
]
