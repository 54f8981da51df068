"""Composition: an ordered list of policy files read as one policy set.

Files are composed in order, the default policy first when the caller asks for it
(gem.policy.load, the `defaults` flag). Each file is read against what the files
before it left in force:

- `SET name = ...` sets a setting no earlier file sets;
- `OVERRIDE SET name = ...` replaces the value an earlier file set;
- `POLICY name ...` defines a policy whose name no earlier file uses;
- `OVERRIDE POLICY name ...` replaces the policy an earlier file defines (and puts it
  back in force if an earlier file disabled it);
- `DISABLE POLICY name` takes a policy an earlier file defines out of force.

Inside one file each name appears once, so the order of a file's items carries no
meaning. `compose` never raises: it returns what is in force and the problems it
found; the checker reports them as diagnostics, and explain works on files that do
not check yet.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

from . import ast as A
from . import catalogue as C
from .diagnostics import did_you_mean


@dataclass(frozen=True)
class Problem:
    code: str
    message: str
    span: A.Span
    hint: str | None = None


@dataclass(frozen=True)
class Change:
    """What one OVERRIDE or DISABLE did to the set the earlier files left."""

    kind: str  # "OVERRIDE SET" | "OVERRIDE POLICY" | "DISABLE POLICY"
    name: str
    span: A.Span  # the name in the OVERRIDE / DISABLE item
    replaced: A.Span  # the name in the definition it replaced or disabled
    # The policy that was in force before (None if an earlier file had disabled it),
    # and the one in force after (None for DISABLE).
    before: A.Policy | None = None
    after: A.Policy | None = None


@dataclass(frozen=True)
class Composition:
    policies: tuple[A.Policy, ...]  # in force, in order of first definition
    settings: tuple[A.Setting, ...]  # in force: the last SET or OVERRIDE SET of each name
    changes: tuple[Change, ...]  # in composition order
    problems: tuple[Problem, ...]


def compose(files: Sequence[A.PolicyFile]) -> Composition:
    settings: dict[str, A.Setting] = {}
    policies: dict[str, A.Policy] = {}
    defined: dict[str, A.Policy] = {}  # every policy name an earlier file defined, first definition
    disabled: dict[str, A.Disable] = {}  # out of force, and the DISABLE that did it
    changes: list[Change] = []
    problems: list[Problem] = []

    for f in files:
        own_settings, own_policies, own_disables = _unique_names(f, problems)
        earlier_defined = dict(defined)
        for s in own_settings:
            earlier = settings.get(s.name)
            if s.override:
                if earlier is not None:
                    changes.append(Change("OVERRIDE SET", s.name, s.name_span, earlier.name_span))
                elif s.name in C.SETTINGS:  # an unknown name is reported by the unknown-settings pass
                    problems.append(Problem(
                        "gem_nothing_to_override", f"no earlier file sets '{s.name}'", s.name_span,
                        f"to set it, write SET {s.name} = ... without OVERRIDE"))
                settings[s.name] = s
            elif earlier is not None:
                problems.append(Problem(
                    "gem_duplicate_setting", f"setting '{s.name}' is already set at {earlier.name_span}",
                    s.name_span, f"to change it, write OVERRIDE SET {s.name} = ..."))
            else:
                settings[s.name] = s

        for d in own_disables:
            if d.name in policies:
                before = policies.pop(d.name)
                changes.append(Change("DISABLE POLICY", d.name, d.name_span, before.name_span, before=before))
                disabled[d.name] = d
            elif d.name in disabled:
                problems.append(Problem(
                    "gem_nothing_to_disable", f"policy '{d.name}' is already disabled at {disabled[d.name].name_span}",
                    d.name_span))
            else:
                problems.append(Problem(
                    "gem_nothing_to_disable", f"no earlier file defines policy '{d.name}'", d.name_span,
                    did_you_mean(d.name, policies) or _in_force(policies)))

        for p in own_policies:
            first = earlier_defined.get(p.name)
            if p.override:
                if first is None:
                    problems.append(Problem(
                        "gem_nothing_to_override", f"no earlier file defines policy '{p.name}'", p.name_span,
                        did_you_mean(p.name, earlier_defined)
                        or f"to add a policy, write POLICY {p.name} without OVERRIDE"))
                else:
                    current = policies.get(p.name)  # None when an earlier file disabled it
                    replaced = current.name_span if current is not None else first.name_span
                    changes.append(Change("OVERRIDE POLICY", p.name, p.name_span, replaced, before=current, after=p))
                disabled.pop(p.name, None)
                policies[p.name] = p
            elif first is not None:
                if p.name in disabled:
                    problems.append(Problem(
                        "gem_duplicate_policy",
                        f"policy '{p.name}' is already defined at {first.name_span} "
                        f"(disabled at {disabled[p.name].name_span})", p.name_span,
                        f"to define it anew, write OVERRIDE POLICY {p.name}"))
                else:
                    problems.append(Problem(
                        "gem_duplicate_policy", f"policy '{p.name}' is already defined at {first.name_span}",
                        p.name_span,
                        f"to replace it, write OVERRIDE POLICY {p.name}; to remove it, DISABLE POLICY {p.name}"))
            else:
                policies[p.name] = p
            defined.setdefault(p.name, p)

    return Composition(tuple(policies.values()), tuple(settings.values()), tuple(changes), tuple(problems))


# A hint lists the policies in force up to this many (the default set's 12 and a few more).
IN_FORCE_LISTED = 16


def _in_force(policies: dict[str, A.Policy]) -> str | None:
    if not policies or len(policies) > IN_FORCE_LISTED:
        return None
    return "the policies in force are: " + ", ".join(sorted(policies))


def _unique_names(f: A.PolicyFile, problems: list[Problem]):
    """A file's settings, policies and disables with every repeated name reported and dropped."""
    seen: dict[str, A.Setting] = {}
    settings = []
    for s in f.settings:
        if s.name in seen:
            problems.append(Problem("gem_duplicate_setting", f"setting '{s.name}' is already set at "
                                    f"{seen[s.name].name_span}", s.name_span, "a file sets each setting once"))
        else:
            seen[s.name] = s
            settings.append(s)
    # Policies and disables share one namespace: a file says one thing about each name.
    named: dict[str, A.Policy | A.Disable] = {}
    keep: set[int] = set()
    items: list[A.Policy | A.Disable] = [*f.policies, *f.disables]
    for item in sorted(items, key=lambda it: (it.span.line, it.span.col)):
        first = named.get(item.name)
        if first is None:
            named[item.name] = item
            keep.add(id(item))
            continue
        what = "disabled" if isinstance(first, A.Disable) else "defined"
        problems.append(Problem("gem_duplicate_policy", f"policy '{item.name}' is already {what} at "
                                f"{first.name_span}", item.name_span, "a file names each policy once"))
    return (settings, [p for p in f.policies if id(p) in keep], [d for d in f.disables if id(d) in keep])


# ---- governance: what a composed set can never satisfy ------------------------------------


@dataclass(frozen=True)
class Role:
    """A job some policy in force must do, or a correctness condition rejects transitions.

    Decided statically and generously: any policy in force that listens to `event` and
    has one of `actions` in DO counts, whatever its WHEN and its arguments. So a warning
    is never a false alarm about the set as written, but its absence proves nothing.
    """

    condition: str
    event: str
    actions: frozenset[str]
    code: str
    needs: str  # what the condition needs, for explain
    does: str  # what such a policy did, for the hint naming the last one
    message: str
    hint: str

    def played_by(self, p: A.Policy) -> bool:
        return self.event in p.events and any(a.name in self.actions for a in p.actions)


ROLES = (
    Role("C6", "retrieved", frozenset({"reinforce"}), "gem_c6_no_reinforcement",
         "a policy that reinforces on 'retrieved'", "reinforced on 'retrieved'",
         "no policy reinforces on 'retrieved', so C6 will reject every retrieval that returns something",
         "add a policy ON retrieved DO reinforce(field, reinforce_amount), reinforce(topic, reinforce_amount)"),
    Role("C3", "field_updated", frozenset({"flag_for_revision", "propagate"}), "gem_c3_no_propagation",
         "a policy that flags dependents on 'field_updated'", "flagged dependents on 'field_updated'",
         "no policy flags dependents on 'field_updated', so C3 will reject every update of a topic "
         "that another topic extends",
         "add a policy ON field_updated WHEN EXISTS dependent_topic DO flag_for_revision(dependent_topic)"),
)


def governance(comp: Composition, files: Sequence[A.PolicyFile]) -> tuple[list[Problem], list[Problem]]:
    """(errors, warnings) about the set as a whole: no policy in force at all is an error;
    a role of ROLES no policy in force plays is a warning naming its condition."""
    start = _start(files)
    if not comp.policies:
        culprit = next((c for c in reversed(comp.changes) if c.kind == "DISABLE POLICY"), None)
        if culprit is not None:
            hint = f"this took '{culprit.name}', the last policy in force, out of force"
        else:
            hint = "compose them with the default policy (defaults=True; gem policy check without --no-defaults)"
        return [Problem("gem_no_policies", "no policy is in force: these files would leave a memory without "
                        "governance", culprit.span if culprit else start, hint)], []
    warnings = []
    for role in ROLES:
        if any(role.played_by(p) for p in comp.policies):
            continue
        culprit = next((c for c in reversed(comp.changes) if c.before is not None and role.played_by(c.before)
                        and (c.after is None or not role.played_by(c.after))), None)
        hint = role.hint
        if culprit is not None:
            verb = "took" if culprit.after is None else "replaced"
            what = "out of force" if culprit.after is None else "with one that does not"
            hint = f"this {verb} '{culprit.name}', the last policy that {role.does}, {what}"
        warnings.append(Problem(role.code, role.message, culprit.span if culprit else start, hint))
    return [], warnings


def _start(files: Sequence[A.PolicyFile]) -> A.Span:
    """The beginning of the composition: where a problem of the whole set is reported."""
    if not files:
        return A.NO_SPAN
    return A.Span(files[0].file, 1, 1, 1, 2)
