"""Hypothesis strategies for policy ASTs: every tree they draw is one the parser can produce."""
from __future__ import annotations

from datetime import datetime, timezone

from hypothesis import strategies as st

from gem.policy import ast as A
from gem.policy.syntax import KEYWORDS

names = st.from_regex(r"[A-Za-z_][A-Za-z0-9_]{0,6}", fullmatch=True).filter(lambda s: s not in KEYWORDS)

numbers = st.one_of(
    st.integers(min_value=0, max_value=10**15),
    st.floats(min_value=0, allow_nan=False, allow_infinity=False).map(abs),  # -0.0 would print as "-0.0"
).map(lambda v: A.Literal(v, "number"))
strings = st.text(st.characters(blacklist_categories=("Cs",)), max_size=8).map(lambda s: A.Literal(s, "string"))
constants = st.sampled_from([A.Literal(True, "bool"), A.Literal(False, "bool"), A.Literal(None, "null")])

_UNITS = {"w": 604800, "d": 86400, "h": 3600, "m": 60, "s": 1}
durations = st.lists(st.tuples(st.integers(0, 999), st.sampled_from(sorted(_UNITS))), min_size=1, max_size=3).map(
    lambda parts: A.Duration(sum(n * _UNITS[u] for n, u in parts), "".join(f"{n}{u}" for n, u in parts))
)
dates = st.dates(min_value=datetime(1000, 1, 1).date()).map(
    lambda d: A.DateLit(datetime(d.year, d.month, d.day, tzinfo=timezone.utc), d.isoformat())
)
datetimes = st.datetimes(min_value=datetime(1000, 1, 1), max_value=datetime(9999, 12, 31)).map(
    lambda t: t.replace(microsecond=0, tzinfo=timezone.utc)
).map(lambda t: A.DateLit(t, t.strftime("%Y-%m-%dT%H:%M:%SZ")))

atoms = st.one_of(names.map(A.Name), numbers, strings, constants, durations, dates, datetimes)


def _extend(children):
    small = st.lists(children, max_size=3).map(tuple)
    return st.one_of(
        st.builds(A.Attr, children, names),
        st.builds(A.Call, names, small),
        st.builds(A.Unary, st.sampled_from(["-", "NOT"]), children),
        st.builds(A.Binary, st.sampled_from(["+", "-", "*", "/", "AND", "OR"]), children, children),
        st.builds(A.Compare, st.sampled_from(["=", "!=", "<", "<=", ">", ">="]), children, children),
        st.builds(A.In, children, children),
        st.builds(A.Exists, names, st.none() | children, st.none() | children),
        st.builds(A.SetLit, st.lists(children, min_size=1, max_size=3).map(tuple)),
        st.builds(A.ListLit, small),
        st.builds(A.RecordLit, st.lists(st.tuples(st.text(max_size=5) | names, children), max_size=3).map(tuple)),
    )


exprs = st.recursive(atoms, _extend, max_leaves=10)

policy_names = st.tuples(
    names, st.lists(names | st.from_regex(r"[0-9]{1,3}", fullmatch=True), max_size=3)
).map(lambda t: "-".join([t[0], *t[1]]))

actions = st.builds(A.ActionCall, names, st.lists(exprs, max_size=3).map(tuple))
with_items = st.builds(A.WithItem, names, exprs)

policies = st.builds(
    A.Policy,
    name=policy_names,
    priority=st.integers(-1000, 1000),
    events=st.lists(names, min_size=1, max_size=3).map(tuple),
    condition=st.none() | exprs,
    actions=st.lists(actions, min_size=1, max_size=3).map(tuple),
    with_=st.lists(with_items, max_size=3).map(tuple),
    override=st.booleans(),
)
settings = st.builds(A.Setting, names, exprs, override=st.booleans())
disables = st.builds(A.Disable, policy_names)
files = st.builds(A.PolicyFile, st.lists(settings, max_size=3).map(tuple), st.lists(policies, max_size=3).map(tuple),
                  st.lists(disables, max_size=3).map(tuple))
