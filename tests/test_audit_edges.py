"""The full audit's reads of ownership edges: an entry's HAS_ENTRY edge is checked against its
`field_id` as the histories are read (gem/audit_tables.py), not by a second join; each edge
edit below is still named, by the message the separate query gave."""
from __future__ import annotations

import pytest

import gem
from conftest import ENGINE, Clock, drop_location, memory_location, raw_write

# edit -> (statements, the misowned entry, its holder, the owner its row names)
EDITS = {
    "an entry's edge moved to another field": (
        ["MATCH (:Field {id: 't1/owner'})-[r:HAS_ENTRY]->(:Entry {id: 'e2'}) DELETE r",
         "MATCH (f:Field {id: 't2/launch'}), (e:Entry {id: 'e2'}) CREATE (f)-[:HAS_ENTRY]->(e)"],
        "e2", "t2/launch", "t1/owner"),
    "a second edge from another field": (
        ["MATCH (f:Field {id: 't2/launch'}), (e:Entry {id: 'e1'}) CREATE (f)-[:HAS_ENTRY]->(e)"],
        "e1", "t2/launch", "t1/deadline"),
}


@pytest.mark.parametrize("edit", sorted(EDITS))
def test_an_entry_held_by_a_field_its_row_does_not_name_is_found(tmp_path, edit):
    location = memory_location(tmp_path)
    statements, entry, holder, owner = EDITS[edit]
    clock = Clock()
    try:
        with gem.open(location, clock=clock, engine=ENGINE) as mem:
            mem.ingest([gem.Fact("Website Redesign", "deadline", "March 15"),
                        gem.Fact("Website Redesign", "owner", "Alice"),
                        gem.Fact("Launch Milestones", "launch", "March 20")])
            clock.advance(days=1)
            mem.ingest(gem.Fact("Website Redesign", "deadline", "April 20"))
            assert mem.audit(full=True).ok
            for statement in statements:
                raw_write(mem, statement)
            report = mem.audit(full=True)
    finally:
        drop_location(location)
    assert not report.ok
    assert ("C4", entry, f"held by {holder} (HAS_ENTRY) but names {owner} as its owner") in \
        {(v.condition, v.unit, v.detail) for v in report.violations}, report.violations
