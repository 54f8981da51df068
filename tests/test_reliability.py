from datetime import datetime, timedelta, timezone

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gem.errors import InvalidInput
from gem.reliability import EvidenceStates, Observation, evidence_states

T0 = datetime(2026, 1, 1, tzinfo=timezone.utc)


def at(days: int) -> datetime:
    return T0 + timedelta(days=days)


def test_three_observation_example_by_hand():
    obs = [
        Observation("+", 0.8, at(3)),  # given out of order: ordering is by time
        Observation("+", 0.9, at(1)),
        Observation("-", 0.6, at(2)),
    ]
    s = evidence_states(obs, decay=0.8)
    # T = 3; w1 = 0.9 * 0.8^2 = 0.576 (+), w2 = 0.6 * 0.8 = 0.48 (-), w3 = 0.8 (+)
    # P+ = 1 - (1 - 0.576)(1 - 0.8) = 0.9152 ; P- = 0.48
    assert s.p_plus == pytest.approx(0.9152)
    assert s.p_minus == pytest.approx(0.48)
    assert s.action == pytest.approx(0.9152 * 0.52)  # 0.475904
    assert s.inaction == pytest.approx(0.48 * 0.0848)  # 0.040704
    assert s.conflict == pytest.approx(0.9152 * 0.48)  # 0.439296
    assert s.ignorance == pytest.approx(0.0848 * 0.52)  # 0.044096
    # R = (0.475904 - 0.040704)(1 - 0.439296 - 0.044096) = 0.4352 * 0.516608
    assert s.reliability == pytest.approx(0.2248278016)


def test_empty_is_pure_ignorance():
    s = evidence_states([])
    assert s == EvidenceStates(0.0, 0.0, 0.0, 0.0, 0.0, 1.0, 0.0)


def test_ties_in_time_keep_given_order():
    # Same instant: the later-listed one is the newer (exponent 0).
    a = evidence_states([Observation("+", 1.0, T0), Observation("-", 0.5, T0)], decay=0.5)
    assert a.p_plus == pytest.approx(0.5) and a.p_minus == pytest.approx(0.5)
    b = evidence_states([Observation("-", 0.5, T0), Observation("+", 1.0, T0)], decay=0.5)
    assert b.p_plus == pytest.approx(1.0) and b.p_minus == pytest.approx(0.25)


def test_decay_one_means_no_decay():
    s = evidence_states([Observation("+", 0.5, at(i)) for i in range(3)], decay=1.0)
    assert s.p_plus == pytest.approx(1 - 0.5**3)


def test_newer_evidence_outweighs_older():
    old_pos_new_neg = evidence_states([Observation("+", 0.9, at(1)), Observation("-", 0.9, at(2))])
    assert old_pos_new_neg.reliability < 0


def test_appending_weak_positive_can_lower_p_plus():
    # Position-based decay: a new observation ages every older one, so "more positive
    # evidence" only raises P+ when the new one outweighs that ageing.
    before = evidence_states([Observation("+", 1.0, at(1))])
    after = evidence_states([Observation("+", 1.0, at(1)), Observation("+", 0.0, at(2))])
    assert before.p_plus == 1.0
    assert after.p_plus == pytest.approx(0.8)


def test_validation():
    with pytest.raises(InvalidInput):
        Observation("?", 0.5, T0)
    with pytest.raises(InvalidInput):
        Observation("+", 1.5, T0)
    with pytest.raises(InvalidInput):
        Observation("+", float("nan"), T0)
    with pytest.raises(InvalidInput):
        Observation("+", 0.5, "2026-01-01")  # type: ignore[arg-type]
    for bad in (0.0, -0.1, 1.01, float("nan")):
        with pytest.raises(InvalidInput):
            evidence_states([], decay=bad)
    with pytest.raises(InvalidInput):
        # naive and aware datetimes cannot be ordered
        evidence_states([Observation("+", 0.5, T0), Observation("+", 0.5, datetime(2026, 1, 2))])


class _Row:
    """A store row that is not an Observation but quacks like one."""

    def __init__(self, polarity, confidence, at):
        self.polarity, self.confidence, self.at = polarity, confidence, at


def test_duck_typed_rows_are_validated():
    assert evidence_states([_Row("+", 1.0, T0)]).p_plus == 1.0
    with pytest.raises(InvalidInput):
        evidence_states([_Row("+", 2.0, T0)])


observation = st.builds(
    Observation,
    polarity=st.sampled_from(["+", "-"]),
    confidence=st.floats(0.0, 1.0),
    at=st.integers(0, 30).map(at),
)
observations = st.lists(observation, max_size=12)
decays = st.floats(0.01, 1.0)


def flip(o: Observation) -> Observation:
    return Observation("-" if o.polarity == "+" else "+", o.confidence, o.at)


@settings(max_examples=300)
@given(observations, decays)
def test_states_are_a_distribution_and_r_is_bounded(obs, decay):
    s = evidence_states(obs, decay)
    parts = (s.action, s.inaction, s.conflict, s.ignorance)
    assert all(0.0 <= p <= 1.0 for p in parts)
    assert sum(parts) == pytest.approx(1.0, abs=1e-12)
    assert 0.0 <= s.p_plus <= 1.0 and 0.0 <= s.p_minus <= 1.0
    assert -1.0 <= s.reliability <= 1.0


@settings(max_examples=300)
@given(observations, decays)
def test_mirror_symmetry(obs, decay):
    s = evidence_states(obs, decay)
    m = evidence_states([flip(o) for o in obs], decay)
    assert m.reliability == -s.reliability
    assert (m.p_plus, m.p_minus) == (s.p_minus, s.p_plus)
    assert (m.action, m.inaction) == (s.inaction, s.action)


@settings(max_examples=300)
@given(st.lists(observation.map(lambda o: Observation("+", o.confidence, o.at)), max_size=12), decays)
def test_all_positive_gives_non_negative_r(obs, decay):
    s = evidence_states(obs, decay)
    assert s.p_minus == 0.0 and s.reliability >= 0.0
    assert s.reliability == pytest.approx(s.p_plus**2)


@settings(max_examples=300)
@given(observations, st.floats(0.0, 1.0), st.data())
def test_added_positive_never_lowers_p_plus_without_decay(obs, c, data):
    # With decay 1 position does not matter: a positive observation anywhere can only add.
    new = Observation("+", c, at(data.draw(st.integers(0, 30))))
    assert evidence_states(obs + [new], 1.0).p_plus >= evidence_states(obs, 1.0).p_plus


@settings(max_examples=300)
@given(observations, st.floats(0.0, 1.0), decays)
def test_added_older_positive_never_lowers_p_plus(obs, c, decay):
    # An observation older than all others leaves every other weight unchanged.
    new = Observation("+", c, at(-1))
    assert evidence_states([new] + obs, decay).p_plus >= evidence_states(obs, decay).p_plus
