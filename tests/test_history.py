"""gem/history.py's rules on plain rows: what the C1/C2 verdict on a history depends on."""
from __future__ import annotations

from datetime import datetime, timedelta, timezone

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gem import history
from gem.store.schema import TABLES

T0 = datetime(2026, 1, 1, tzinfo=timezone.utc)
OTHER = sorted(set(TABLES["Entry"].columns) - history.JUDGED)
times = st.integers(0, 4).map(lambda d: T0 + timedelta(days=d))
anything = st.one_of(st.none(), st.booleans(), st.integers(-2, 2), st.text(max_size=3), times,
                     st.floats(0, 1), st.lists(st.text(max_size=2), max_size=2))


@st.composite
def histories(draw):
    n = draw(st.integers(0, 5))
    ids = [f"e{i}" for i in range(n)]
    return [{"id": ids[i], "seq": draw(st.integers(0, 3)),
             "status": draw(st.sampled_from(["current", "superseded", "retracted"])),
             "polarity": draw(st.sampled_from(["+", "-"])),
             "asserted_at": draw(times), "recorded_at": draw(times),
             "superseded_by": draw(st.sampled_from([None, "gone", *ids])),
             **{c: draw(anything) for c in OTHER}} for i in range(n)]


@pytest.mark.slow
@settings(max_examples=300, deadline=None)
@given(histories(), st.data())
def test_a_verdict_depends_on_the_judged_columns_only(entries, data):
    """Conditions C1/C2 skip a field whose entries changed only outside history.JUDGED (a
    forgetting pass's `active`): every other column of an entry may change, and the verdict
    stays the same. A rule reading a new column must add it to JUDGED, or this fails."""
    changed = [{**e, **{c: data.draw(anything) for c in OTHER}} for e in entries]
    assert history.violations(changed) == history.violations(entries)
