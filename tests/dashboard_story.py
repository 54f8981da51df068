"""A memory with something on every page of the dashboard: a field history with an update, a
late fact, a corroboration and a denial; a contested field; an open revision flag; typed
edges of all three kinds; a topic down the forgetting ladder; and an XSS-ish topic whose
title, value and source must come out as text."""
from __future__ import annotations

from datetime import datetime, timedelta, timezone
from typing import Callable

import gem

XSS_TITLE = "<script>alert('t')</script> Evil & Co"
XSS_VALUE = "<img src=x onerror=alert('v')>"
XSS_SOURCE = "\"><svg onload=alert('s')>"
XSS_RAW = ("<script>alert(", "<img src=x", "<svg onload")  # never in a page as markup


class StoryClock:
    """Days before today, so that salience has decayed as a reader of the story would expect."""

    def __init__(self) -> None:
        today = datetime.now(timezone.utc).replace(hour=9, minute=0, second=0, microsecond=0)
        self.now = today - timedelta(days=200)

    def __call__(self) -> datetime:
        return self.now

    def advance(self, **delta: float) -> datetime:
        self.now += timedelta(**delta)
        return self.now


def build(path: str, engine: str = "kuzu", clock: Callable[[], datetime] | None = None) -> None:
    clock = clock or StoryClock()
    with gem.open(path, engine=engine, clock=clock) as mem:
        tell(mem, clock)  # type: ignore[arg-type]


def tell(mem: gem.Memory, clock: StoryClock) -> None:
    mem.ingest(gem.Fact("Old Offsite", "venue", "Lisbon", source="chat:0"))
    clock.advance(days=160)  # long forgotten: down the whole ladder
    mem.forget()
    start = clock.now
    mem.ingest([gem.Fact("Website Redesign", "deadline", "March 15", source="chat:1"),
                gem.Fact("Website Redesign", "owner", "Ana", source="chat:1", confidence=0.9),
                gem.Fact("Website Redesign", "budget", 12000, source="finance", ref="doc:7"),
                gem.Fact("Launch Milestones", "launch", "March 20", source="chat:1"),
                gem.Fact("Budget Review", "amount", 1200, source="finance"),
                gem.Fact(XSS_TITLE, "payload", XSS_VALUE, source=XSS_SOURCE)])
    # two sources, one valid time, weak evidence: contested
    mem.ingest([gem.Fact("Vendor Choice", "name", "Acme", source="sales", at=start, confidence=0.1),
                gem.Fact("Vendor Choice", "name", "Apex", source="procurement", at=start,
                         confidence=0.1)])
    mem.link("Website Redesign", "Launch Milestones", kind="extension")
    mem.link("Launch Milestones", "Budget Review", kind="association")
    mem.link("Website Redesign", XSS_TITLE, kind="association")
    mem.link("Budget Review", "Vendor Choice", kind="extension")
    clock.advance(days=3)
    mem.ingest(gem.Fact("Website Redesign", "owner", "Ana", source="chat:3"))  # corroboration
    mem.retrieve(topic="Website Redesign")
    clock.advance(days=30)  # Old Offsite and the rest fade; a forgetting pass moves them down
    mem.forget()
    clock.advance(days=2)
    mem.retrieve(topic="Website Redesign")
    mem.retrieve(topic="Budget Review")
    mem.ingest(gem.Fact("Website Redesign", "deadline", "April 20", source="chat:2"))  # update: flags
    clock.advance(days=1)
    mem.ingest(gem.Fact("Website Redesign", "deadline", "April 20", source="email:9",
                        polarity="-", confidence=0.4))  # a denial
    mem.ingest(gem.Fact("Website Redesign", "deadline", "April 1", source="chat:4",
                        at=clock.now - timedelta(days=3)))  # a late fact
    clock.advance(hours=20)
    mem.retrieve("deadline of the website redesign")


TITLES = ("Website Redesign", "Launch Milestones", "Budget Review", "Old Offsite", "Vendor Choice",
          XSS_TITLE)
