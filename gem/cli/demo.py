"""`gem demo`: the paper's Figure 1 story, told by a governed memory."""
from __future__ import annotations

import os
import sys
from datetime import datetime, timedelta, timezone
from typing import TextIO, TypeVar

_T = TypeVar("_T")


class SimulatedClock:
    """A clock the demo moves by hand, so the story is reproducible to the second."""

    def __init__(self, start: datetime) -> None:
        self.now = start

    def __call__(self) -> datetime:
        return self.now

    def advance(self, **delta: float) -> None:
        self.now += timedelta(**delta)


def _present(view: _T | None) -> _T:
    # The story wrote every topic and field it inspects: a missing one is a bug in the demo.
    assert view is not None
    return view


def demo(out: TextIO = sys.stdout, path: str | None = None, engine: str = "kuzu") -> int:
    """The paper's Figure 1 story, told by a governed memory. It starts on a new database:
    `path`, if given, must not exist yet (the story's week 0 would be in its past)."""
    import gem

    def say(text: str = "") -> None:
        print(text, file=out)

    if path is not None and os.path.exists(path):
        raise gem.InvalidInput(f"{path!r} exists: the demo tells its story on a new database "
                               "(give another --path, or none for a temporary one)")

    def reviser(revision: "gem.PendingRevision") -> list["gem.Fact"] | None:
        # An LLM in real use; here one rule: a launch moves to five days after the deadline.
        deadline = revision.origins.get("Website Redesign", {}).get("deadline")
        if revision.title != "Launch Milestones" or deadline is None:
            return None
        month, day = str(deadline).split()
        return [gem.Fact("Launch Milestones", "launch date", f"{month} {int(day) + 5}",
                         source="reviser", actor="demo-reviser")]

    clock = SimulatedClock(datetime(2026, 3, 2, 9, 0, tzinfo=timezone.utc))
    week0 = clock.now
    with gem.open(path=path, clock=clock, engine=engine, reviser=reviser) as mem:
        say(f"gem demo: the Figure 1 story on a {mem.engine_name} database at {mem.path}")
        say(f"policies in force: {', '.join(p.name for p in mem.policies.policies)}")
        say()
        say("Week 0 — the user introduces a project and chats about lunch")
        r = mem.ingest([
            gem.Fact("Website Redesign", "deadline", "March 15", source="chat:week0", at=week0),
            gem.Fact("Website Redesign", "team", ["Alice", "Bob"], source="chat:week0", at=week0),
            gem.Fact("Lunch", "preferences", "Discussed lunch preferences: sushi on Fridays",
                     source="chat:week0", at=week0),
            gem.Fact("Launch Milestones", "launch date", "March 20", source="chat:week0", at=week0),
        ])
        mem.link("Website Redesign", "Launch Milestones", kind="extension")
        say(f"  ingested {len(r.new_values)} values into {len(r.created_topics)} new topics; "
            "Launch Milestones extends Website Redesign")

        clock.advance(days=7)
        say()
        say("Week 1 — the user re-explains the project, then moves the deadline")
        r = mem.ingest([gem.Fact("website redesign", "deadline", "March 15", source="chat:week1"),
                        gem.Fact("Website Redesign", "team", ["Alice", "Bob"], source="chat:week1")])
        say(f"  re-explanation: {len(r.new_values)} new values, {r.corroborations} corroborations "
            "(failure mode 1 avoided: no duplicate)")
        clock.advance(minutes=5)
        r = mem.ingest(gem.Fact("Website Redesign", "deadline", "April 20", source="chat:week1"))
        say(f"  deadline update: new value for {r.new_values[0]}; March 15 kept as history "
            f"(failure mode 2 avoided); flagged for revision: {r.flagged}")
        flags = _present(mem.inspect("Launch Milestones")).flags
        if flags:
            say(f"  Launch Milestones flag evidence: {flags[0].evidence}")

        say()
        say("Weeks 1-4 — the user asks for the deadline every week")
        for week in range(1, 5):
            before = _present(mem.inspect("Website Redesign", "deadline")).salience
            answer = mem.retrieve("What is the deadline of the Website Redesign?")
            after = answer.topics[0].fields["deadline"].salience
            say(f"  week {week}: answer {answer.value('Website Redesign', 'deadline')!r}; "
                f"deadline salience {before:.3f} -> {after:.3f}")
            clock.advance(days=7)
        say("  (failure mode 4 avoided: every read reinforced what it returned; between reads "
            "salience decays with a 30-day half-life)")

        say()
        say("Week 5 — maintenance: forgetting by relevance, not by age")
        salience_before = {name: _present(mem.inspect(*name.split(" / "))).salience
                           for name in ("Website Redesign / deadline", "Lunch / preferences")}
        report = mem.forget()
        for name, value in salience_before.items():
            view = _present(mem.inspect(*name.split(" / ")))
            say(f"  {name}: salience {value:.3f} -> status {view.status}")
        say(f"  attenuated this pass: {report['attenuated'] or 'nothing'} "
            "(failure mode 3 avoided: the queried deadline survives, lunch fades)")
        revised = mem.revise()
        titles = revised["flags_evaluated"]
        launch = mem.inspect("Launch Milestones", "launch date")
        say(f"  revision asked the reviser about {titles}: Launch Milestones / launch date is now "
            f"{None if launch is None else launch.value!r} "
            f"(cleared by {sorted({by for _, by in revised['flags_cleared']})})")

        say()
        final = mem.retrieve(topic="Website Redesign", fields=["deadline"])
        say(f"Final answer: the deadline of Website Redesign is "
            f"{final.value('Website Redesign', 'deadline')}")
        say("History view (only here does March 15 appear):")
        entries = mem.history("Website Redesign", "deadline")
        position = {h.id: i for i, h in enumerate(entries, 1)}
        for i, h in enumerate(entries, 1):
            say(f"  #{i} {h.value!r:12} {h.status:10} valid {h.valid_at:%Y-%m-%d} recorded "
                f"{h.recorded_at:%Y-%m-%d %H:%M} source {h.provenance.source}"
                + (f" superseded by #{position[h.superseded_by]}" if h.superseded_by else ""))
        audit = mem.audit()
        say(f"Audit of C1-C6 over the whole state: {'clean' if audit.ok else audit.violations}; "
            f"{audit.transitions} transitions, hash chain {'intact' if audit.chain_ok else 'BROKEN'}")
        return 0 if audit.ok and final.value("Website Redesign", "deadline") == "April 20" else 1
