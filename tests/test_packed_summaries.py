"""A scope's summaries as a snapshot holds them (gem/derived/summaries.py) answer as a dict
would, through writes and removals, and are saved as they answer."""
from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from gem.derived.summaries import Summaries

tids = st.sampled_from(["t1", "t2", "t3", "acme:t4", "t\u00e9", "t\ud800", "t5"])
texts = st.text(max_size=12)
operations = st.lists(st.one_of(st.tuples(st.just("set"), tids, texts),
                                st.tuples(st.just("del"), tids, st.just(""))), max_size=25)


def reopened(summaries: Summaries) -> Summaries:
    return Summaries.packed(summaries.arrays(), "test summaries")


@settings(max_examples=150, deadline=None)
@given(saved=st.dictionaries(tids, texts, max_size=6), ops=operations)
def test_packed_summaries_answer_as_a_dict_through_writes_and_removals(saved, ops):
    want = dict(saved)
    have = reopened(Summaries(saved))
    for op, tid, text in ops:
        if op == "set":
            want[tid] = have[tid] = text
        elif tid in want:
            del want[tid]
            del have[tid]
        else:
            assert tid not in have
        assert len(have) == len(want)
    assert sorted(have) == sorted(want)  # each once
    assert dict(have.items()) == want
    assert all((t in have) == (t in want) for t in ["t1", "t2", "t3", "acme:t4", "t\u00e9", "t\ud800", "t5"])
    assert dict(reopened(have).items()) == want


def test_unchanged_packed_summaries_are_saved_as_they_were_read():
    saved = Summaries({"t1": "one", "t2": "two"}).arrays()
    again = Summaries.packed(saved, "test summaries").arrays()
    assert all(again[k] is saved[k] for k in saved if k != "summary_ids_keys")
