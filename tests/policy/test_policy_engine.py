"""Compiled policies in the real engine: rejection, the cascade bound, refused policy sets."""
from __future__ import annotations

import pytest
from conftest import ENGINE, snapshot

import gem
from gem.errors import PolicyCheckError, PolicySyntaxError, TransitionRejected


def write(tmp_path, name: str, text: str) -> str:
    path = tmp_path / name
    path.write_text(text)
    return str(path)


def test_listing_1_end_to_end_flags_extension_dependents_only(mem, clock):
    mem.ingest([gem.Fact("Website Redesign", "deadline", "March 15"),
                gem.Fact("Launch Milestones", "launch date", "March 20"),
                gem.Fact("Brand Colors", "primary", "blue")])
    mem.link("Website Redesign", "Launch Milestones", kind="extension")
    mem.link("Website Redesign", "Brand Colors", kind="association")
    clock.advance(days=7)
    mem.ingest(gem.Fact("Website Redesign", "deadline", "April 20"))
    flags = mem.inspect("Launch Milestones").flags
    assert len(flags) == 1 and flags[0].evidence["updated_field"] == "deadline"
    assert mem.inspect("Brand Colors").flags == []


def test_reject_on_commit_rolls_the_transition_back_completely(tmp_path, clock):
    guard = write(tmp_path, "guard.policy",
                  'POLICY no-secrets ON commit WHEN EXISTS t IN touched WHERE t.title = "Secret" '
                  'DO reject("secrets are not stored")\n')
    with gem.open(tmp_path / "db", clock=clock, engine=ENGINE,
                  policies=[guard]) as mem:
        mem.ingest(gem.Fact("Public", "x", 1))
        before = snapshot(mem)
        with pytest.raises(TransitionRejected, match="secrets are not stored"):
            mem.ingest([gem.Fact("Public", "y", 2), gem.Fact("Secret", "code", "1234")])
        assert snapshot(mem) == before
        assert mem.inspect("Secret") is None


def test_cascades_past_cascade_depth_reject_the_transition(tmp_path, clock):
    chain = write(tmp_path, "chain.policy",
                  "SET cascade_depth = 2\n"
                  "POLICY propagate-on-change ON field_updated WHEN EXISTS dependent_topic "
                  "DO flag_for_revision(dependent_topic)\n"
                  "POLICY pass-it-on ON flagged WHEN EXISTS dependent_topic DO propagate(dependent_topic)\n")
    with gem.open(tmp_path / "db", clock=clock, engine=ENGINE, policies=[chain],
                  defaults=False) as mem:
        names = [f"T{i}" for i in range(6)]
        mem.ingest([gem.Fact(n, "v", 0) for n in names])
        for a, b in zip(names, names[1:]):
            mem.link(a, b, kind="extension")
        before = snapshot(mem)
        with pytest.raises(TransitionRejected, match="cascade_depth=2"):
            mem.ingest(gem.Fact("T0", "v", 1))
        assert snapshot(mem) == before
        # A short chain stays within the bound.
        mem.ingest(gem.Fact("T4", "v", 1))
        assert len(mem.inspect("T5").flags) == 1


def test_a_refused_policy_set_leaves_the_old_one_in_force(tmp_path, clock):
    with gem.open(tmp_path / "db", clock=clock, engine=ENGINE) as mem:
        names = [p.name for p in mem.policies.policies]
        before = snapshot(mem)
        bad_syntax = write(tmp_path, "bad.policy", "POLICY p ON tick WITH a = 1 DO x()\n")
        with pytest.raises(PolicySyntaxError, match="gem_with_before_do"):
            mem.load_policies([bad_syntax])
        bad_check = write(tmp_path, "loop.policy", "POLICY a ON flagged DO flag_for_revision(topic)\n")
        with pytest.raises(PolicyCheckError, match="gem_cascade_loop"):
            mem.load_policies([bad_check])
        assert [p.name for p in mem.policies.policies] == names
        assert snapshot(mem) == before


def test_mem_policies_iterates_over_the_policies_in_force(tmp_path, clock):
    team = write(tmp_path, "team.policy", "DISABLE POLICY hide-faded-fields\n"
                 "POLICY watch ON retrieved DO reinforce(field, 0.1)\n")
    with gem.open(tmp_path / "db", clock=clock, engine=ENGINE, policies=[team]) as mem:
        policies = list(mem.policies)
        names = [p.name for p in policies]
        assert names == [p.name for p in mem.policies.policies]  # the tuple is still there
        assert len(mem.policies) == len(names) and "watch" in names
        assert "hide-faded-fields" not in names and "hide-faded-fields" not in mem.policies
        assert "watch" in mem.policies
        watch = next(p for p in mem.policies if p.name == "watch")
        assert watch.enabled and watch.file == team
        assert watch.source == "POLICY watch\nON retrieved\nDO reinforce(field, 0.1)"
        assert all(p.enabled for p in mem.policies)


NO_PASSWORDS = '''
POLICY no-passwords
ON field_created OR field_updated OR corroborated OR recorded
WHEN field.name = "password" OR field.name = "api key" OR "secret" IN entry.labels
DO drop(entry, "passwords and secrets are not stored")
'''
SECRETS = ["password", "PASSWORD", "Password", "API key", "API-Key", "api_key"]


def test_names_in_policies_match_by_canonical_key_whatever_the_batch_order(tmp_path, clock):
    """The field a fact lands in is named by the first spelling the batch (or the store) gave
    it; compared exactly, "PASSWORD" was dropped only when "password" came first in its batch.
    Compared by canonical key, every spelling of the name is dropped, in every order."""
    guard = write(tmp_path, "guard.policy", NO_PASSWORDS)
    names = SECRETS + ["email"]
    orders = [names[i:] + names[:i] for i in range(len(names))]
    orders += [list(reversed(o)) for o in orders]
    for i, order in enumerate(orders):
        with gem.open(tmp_path / f"db{i}", clock=clock, engine=ENGINE, policies=[guard]) as mem:
            r = mem.ingest([gem.Fact("Ada", name, f"value of {name}") for name in order])
            assert sorted(d.field for d in r.dropped) == sorted(SECRETS), order
            assert list(mem.inspect("Ada").fields) == ["email"], order


def test_a_name_stored_before_the_policy_is_matched_by_key_too(tmp_path, clock):
    path = tmp_path / "db"
    with gem.open(path, clock=clock, engine=ENGINE) as mem:
        mem.ingest(gem.Fact("Ada", "API-Key", "sk-1"))                 # the field is named "API-Key"
    guard = write(tmp_path, "guard.policy", NO_PASSWORDS)
    with gem.open(path, clock=clock, engine=ENGINE, policies=[guard]) as mem:
        r = mem.ingest(gem.Fact("Ada", "api key", "sk-2"))
        assert [(d.field, d.policy) for d in r.dropped] == [("api key", "no-passwords")]
        assert mem.inspect("Ada", "API-Key").value == "sk-1"


def test_lower_canon_matches_and_titles_at_run_time(tmp_path, clock):
    policy = write(tmp_path, "p.policy", '''
POLICY no-tokens ON field_created WHEN matches(field.name, "(?i)token$") DO drop(entry, "token")
POLICY no-pins ON field_created WHEN lower(field.name) = "pin" DO drop(entry, "pin")
POLICY no-ssn ON field_created WHEN canon(entry.value) = "ssn" DO drop(entry, "ssn")
POLICY no-ops ON field_created WHEN topic.title = "ops team" DO drop(entry, "ops")
''')
    with gem.open(tmp_path / "db", clock=clock, engine=ENGINE, policies=[policy]) as mem:
        r = mem.ingest([gem.Fact("Ada", "GitHub Token", "x"), gem.Fact("Ada", "PIN", "1234"),
                        gem.Fact("Ada", "kind", " SSN! "), gem.Fact("Ada", "tokens", "kept"),
                        gem.Fact("Ops-Team", "lead", "Bo")])
        assert sorted((d.field, d.reason) for d in r.dropped) == [
            ("GitHub Token", "token"), ("PIN", "pin"), ("kind", "ssn"), ("lead", "ops")]
        assert list(mem.inspect("Ada").fields) == ["tokens"]
