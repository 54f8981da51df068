"""C1-C6 as invariants of a hypothesis state machine over a real memory.

CI runs a moderate profile; GEM_STATEFUL_EXAMPLES and GEM_STATEFUL_STEPS scale it up:
    GEM_STATEFUL_EXAMPLES=2000 GEM_STATEFUL_STEPS=50 python -m pytest tests/test_stateful.py
"""
from __future__ import annotations

import os

import pytest
from hypothesis import HealthCheck, settings

from conftest import ENGINE
from gem.testing.stateful import memory_machine

Machine = memory_machine(engine=ENGINE)


@pytest.fixture(autouse=True)
def _server(request):
    if ENGINE == "falkordb":  # each example is a temporary memory on the session's server
        Machine.server = request.getfixturevalue("falkordb_server")
Machine.TestCase.settings = settings(
    max_examples=int(os.environ.get("GEM_STATEFUL_EXAMPLES", "20")),
    stateful_step_count=int(os.environ.get("GEM_STATEFUL_STEPS", "30")),
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
TestMemoryStateMachine = pytest.mark.slow(Machine.TestCase)
