"""What policies can name: events and their bindings, relational names, attributes,
functions, actions and settings, with their types.

This is the single source of truth: the checker types policies against it, the
compiler evaluates against it, `explain` and the language reference describe it,
and the engine implements exactly what it lists. It is plain data (dicts of frozen
dataclasses) so that adding an event or an action is adding an entry.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import timedelta

# ---- types -------------------------------------------------------------------------


@dataclass(frozen=True)
class Type:
    """A policy-language type. `args` holds a List's element type or a Union's members;
    `fields` gives a Record a known schema (unknown keys are then errors)."""

    name: str
    args: tuple["Type", ...] = ()
    fields: tuple[tuple[str, "Type"], ...] | None = None

    def __str__(self) -> str:
        if self.name == "List":
            return f"List[{self.args[0]}]"
        if self.name == "Union":
            return "|".join(str(a) for a in self.args)
        return self.name

    def field_type(self, key: str) -> "Type | None":
        return dict(self.fields or ()).get(key)


TOPIC = Type("Topic")
FIELD = Type("Field")
ENTRY = Type("Entry")
EDGE = Type("Edge")
EPISODE = Type("Episode")
UNIT = Type("Unit")  # a Topic, a Field or an Episode
TEXT = Type("Text")
NUMBER = Type("Number")
BOOL = Type("Bool")
TIME = Type("Time")
DURATION = Type("Duration")
VALUE = Type("Value")  # any JSON value, typed at run time
RECORD = Type("Record")  # any keys, each of type Any
ANY = Type("Any")
NULL = Type("Null")  # the type of `null`, accepted wherever a value is


def list_of(t: Type) -> Type:
    return Type("List", (t,))


def union(*ts: Type) -> Type:
    return Type("Union", tuple(ts))


def record(**fields: Type) -> Type:
    return Type("Record", fields=tuple(fields.items()))


PROVENANCE = record(source=TEXT, actor=TEXT, ref=TEXT, confidence=NUMBER, polarity=TEXT)
PLACE = record(lat=NUMBER, lon=NUMBER, name=TEXT)  # gem/places.py; null where none was given

ENTITIES = frozenset({"Topic", "Field", "Entry", "Edge", "Unit", "Episode"})


def is_data(t: Type) -> bool:
    """True for types whose values are plain data (JSON-able, times and durations too)."""
    if t.name == "List":
        return is_data(t.args[0])
    if t.name == "Union":
        return all(is_data(a) for a in t.args)
    return t.name not in ENTITIES


def assignable(actual: Type, expected: Type) -> bool:
    """Can a value of type `actual` stand where `expected` is required?"""
    if expected == ANY or actual == ANY or actual == NULL:
        return True
    if actual.name == "Union":
        return all(assignable(m, expected) for m in actual.args)
    if expected.name == "Union":
        return any(assignable(actual, m) for m in expected.args)
    if expected == UNIT:
        return actual in (TOPIC, FIELD, EPISODE, UNIT)
    if expected == VALUE:
        return is_data(actual)
    if actual == VALUE:
        # A JSON value is checked when it is used; it can never be a time or an entity.
        return expected.name in ("Text", "Number", "Bool", "Record", "List") and is_data(expected)
    if expected.name == "List":
        return actual.name == "List" and assignable(actual.args[0], expected.args[0])
    if expected.name == "Record":
        return actual.name == "Record"
    return actual.name == expected.name


# ---- events ------------------------------------------------------------------------


@dataclass(frozen=True)
class EventSig:
    name: str
    bindings: tuple[tuple[str, Type], ...]
    doc: str

    def binding(self, name: str) -> Type | None:
        return dict(self.bindings).get(name)

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(n for n, _ in self.bindings)


def _event(name: str, doc: str, **bindings: Type) -> EventSig:
    # Every event carries the time it happened at.
    return EventSig(name, tuple(bindings.items()) + (("timestamp", TIME),), doc)


EVENTS: dict[str, EventSig] = {
    e.name: e
    for e in (
        _event("ingested", "facts were ingested into a topic", topic=TOPIC),
        _event("topic_created", "a new topic was created", topic=TOPIC),
        _event("field_created", "a field received its first value", topic=TOPIC, field=FIELD, entry=ENTRY,
               new_value=VALUE),
        _event("field_updated", "a field received a new current value", topic=TOPIC, field=FIELD, entry=ENTRY,
               old_value=VALUE, new_value=VALUE, updated_field=TEXT),
        _event("corroborated", "an observation agreed with a field's current value", topic=TOPIC, field=FIELD,
               entry=ENTRY),
        _event("recorded", "evidence entered a field's history without changing or confirming its current "
               "value (a late-arriving fact, or a denial: then `entry` is the denied entry)",
               topic=TOPIC, field=FIELD, entry=ENTRY),
        _event("retrieved", "a field was returned by retrieval (query is null for lookups by name)",
               topic=TOPIC, field=FIELD, query=TEXT),
        _event("flagged", "a topic was flagged for revision because `origin` changed", topic=TOPIC,
               origin=TOPIC, evidence=RECORD),
        _event("revised", "a flagged field was revised", topic=TOPIC, field=FIELD),
        _event("superseded", "an entry was superseded by a newer one", topic=TOPIC, field=FIELD, entry=ENTRY,
               by=ENTRY),
        _event("conflict_detected", "a new entry conflicts with an existing one", topic=TOPIC, field=FIELD,
               entry=ENTRY, other=ENTRY),
        _event("attenuated", "a unit moved down the forgetting ladder (level: compressed|hidden|archived)",
               unit=UNIT, level=TEXT),
        _event("archived", "a topic was archived", topic=TOPIC),
        _event("restored", "an attenuated unit was restored", unit=UNIT),
        _event("linked", "an edge was added between two topics", edge=EDGE, source=TOPIC, target=TOPIC,
               kind=TEXT),
        _event("episode_recorded", "an episode was ingested", episode=EPISODE),
        _event("episode_retrieved", "an episode was returned by a free-text retrieval",
               episode=EPISODE, query=TEXT),
        _event("tick", "scheduled maintenance", now=TIME),
        _event("commit", "the whole proposed transition, just before commit", op=TEXT,
               touched=list_of(TOPIC)),
    )
}


# ---- relational names --------------------------------------------------------------


@dataclass(frozen=True)
class RelationSig:
    name: str
    type: Type
    needs: tuple[str, ...]  # event bindings the relation is relative to
    doc: str


RELATIONS: dict[str, RelationSig] = {
    r.name: r
    for r in (
        RelationSig("dependent_topic", list_of(TOPIC), ("topic",),
                    "direct EXTENDS successors of the event's topic"),
        RelationSig("associated_topic", list_of(TOPIC), ("topic",),
                    "topics joined to the event's topic by ASSOCIATES edges"),
        RelationSig("active_fields", list_of(FIELD), (), "every active field in the memory"),
        RelationSig("visible_fields", list_of(FIELD), (),
                    "every field of an active topic that is not hidden (active or compressed)"),
        RelationSig("active_topics", list_of(TOPIC), (), "every active topic in the memory"),
        RelationSig("active_episodes", list_of(EPISODE), (),
                    "every active episode (neither compressed nor hidden)"),
        RelationSig("visible_episodes", list_of(EPISODE), (),
                    "every episode that is not hidden (active or compressed)"),
        RelationSig("said_before", list_of(EPISODE), ("episode",),
                    "the latest episodes the event's episode's speaker said before it, newest first"),
        RelationSig("flagged_topics", list_of(TOPIC), (), "topics with pending revision flags"),
        RelationSig("interactions", NUMBER, (), "ingest and retrieve transitions of this scope so far (n)"),
        RelationSig("scope", TEXT, (), "the scope (tenant) the transition runs in"),
    )
}


# ---- attributes --------------------------------------------------------------------


@dataclass(frozen=True)
class AttrSig:
    name: str
    type: Type
    doc: str = ""


def _attrs(*sigs: AttrSig) -> dict[str, AttrSig]:
    return {a.name: a for a in sigs}


_UNIT_ATTRS = (
    AttrSig("salience", NUMBER, "current (decayed) salience in [0, 1)"),
    AttrSig("status", TEXT),
    AttrSig("last_access", TIME),
)

ATTRIBUTES: dict[str, dict[str, AttrSig]] = {
    "Topic": _attrs(
        AttrSig("id", TEXT), AttrSig("title", TEXT), AttrSig("summary", TEXT), AttrSig("scope", TEXT),
        AttrSig("aliases", list_of(TEXT)), *_UNIT_ATTRS,
        AttrSig("created_at", TIME), AttrSig("updated_at", TIME),
        AttrSig("fields", list_of(FIELD)), AttrSig("field_count", NUMBER),
        AttrSig("flags", list_of(RECORD), "pending revision flags with their evidence"),
    ),
    "Field": _attrs(
        AttrSig("name", TEXT), AttrSig("topic", TOPIC), *_UNIT_ATTRS,
        AttrSig("history_length", NUMBER), AttrSig("created_at", TIME),
        AttrSig("value", VALUE, "the current value"), AttrSig("current", ENTRY, "the current entry"),
        AttrSig("contested", BOOL),
        AttrSig("labels", list_of(TEXT), "every label any entry of its history has"),
    ),
    "Entry": _attrs(
        AttrSig("value", VALUE), AttrSig("valid_at", TIME), AttrSig("recorded_at", TIME),
        AttrSig("status", TEXT), AttrSig("provenance", PROVENANCE),
        AttrSig("field", FIELD), AttrSig("topic", TOPIC),
        AttrSig("labels", list_of(TEXT), "the labels of the facts that stated it"),
        AttrSig("place", PLACE, "where it was stated: {lat, lon, name}, or null"),
    ),
    "Episode": _attrs(
        AttrSig("id", TEXT), AttrSig("text", TEXT), AttrSig("speaker", TEXT),
        AttrSig("source", TEXT), AttrSig("at", TIME, "when it was said or observed"),
        AttrSig("recorded_at", TIME), *_UNIT_ATTRS,
        AttrSig("place", PLACE, "where it was said: {lat, lon, name}, or null"),
    ),
    "Edge": _attrs(
        AttrSig("kind", TEXT), AttrSig("source", TOPIC), AttrSig("target", TOPIC), AttrSig("created_at", TIME),
    ),
    "Unit": _attrs(*_UNIT_ATTRS),
}


# ---- functions ---------------------------------------------------------------------


@dataclass(frozen=True)
class FunctionSig:
    name: str
    params: tuple[Type, ...]
    result: Type
    doc: str
    # Pure functions are evaluated by the compiled policy itself; the others go to the runtime.
    pure: bool = False


FUNCTIONS: dict[str, FunctionSig] = {
    f.name: f
    for f in (
        FunctionSig("now", (), TIME, "the memory clock's current time"),
        FunctionSig("age", (union(TIME, UNIT, ENTRY),), DURATION,
                    "time since a time, since a unit's last access, or since an entry was recorded"),
        FunctionSig("count", (list_of(ANY),), NUMBER, "number of elements", pure=True),
        FunctionSig("reliability", (FIELD,), NUMBER, "evidence reliability R in [-1, 1] (specs/design.md §6)"),
        FunctionSig("state_action", (FIELD,), NUMBER, "S_action = P+(1 - P-)"),
        FunctionSig("state_inaction", (FIELD,), NUMBER, "S_inaction = P-(1 - P+)"),
        FunctionSig("state_conflict", (FIELD,), NUMBER, "S_conflict = P+ P-"),
        FunctionSig("state_ignorance", (FIELD,), NUMBER, "S_ignorance = (1 - P+)(1 - P-)"),
        FunctionSig("similarity", (union(TOPIC, TEXT), union(TOPIC, TEXT)), NUMBER,
                    "embedding similarity in [-1, 1]"),
        FunctionSig("min", (NUMBER, NUMBER), NUMBER, "the smaller number", pure=True),
        FunctionSig("max", (NUMBER, NUMBER), NUMBER, "the larger number", pure=True),
        FunctionSig("abs", (NUMBER,), NUMBER, "absolute value", pure=True),
        FunctionSig("lower", (TEXT,), TEXT, "the text in lower case", pure=True),
        FunctionSig("canon", (TEXT,), TEXT, "the canonical key of a name, as the store compares "
                    "names (gem.text.name_key)", pure=True),
        FunctionSig("distance_km", (PLACE, NUMBER, NUMBER), NUMBER, "great-circle distance "
                    "in km from a place to the point (lat, lon); null for no place", pure=True),
        FunctionSig("matches", (TEXT, TEXT), BOOL, "whether a regular expression (a string "
                    "literal, checked with the policy) matches anywhere in the text", pure=True),
        FunctionSig("capture", (TEXT, TEXT), TEXT, "what the first group of a regular expression "
                    "(a string literal, checked with the policy) captures at its first match in "
                    "the text, or null", pure=True),
    )
}

# What holds a name of a topic or a field: `=`, `!=` and `IN` compare these by canonical key
# (gem.text.name_key), as the store matches names, so a policy sees "API-Key" as "api key".
NAME_ATTRIBUTES = frozenset({"name", "title", "aliases"})  # Field.name, Topic.title, Topic.aliases
NAME_BINDINGS = frozenset({"updated_field"})


# ---- actions -----------------------------------------------------------------------


@dataclass(frozen=True)
class ActionSig:
    name: str
    params: tuple[Type, ...]
    emits: frozenset[str]  # events the action may emit (drives cascade analysis)
    doc: str
    aborts: bool = False


def _action(name: str, params: tuple[Type, ...], emits: str, doc: str, aborts: bool = False) -> ActionSig:
    return ActionSig(name, params, frozenset(emits.split()), doc, aborts)


ACTIONS: dict[str, ActionSig] = {
    a.name: a
    for a in (
        _action("flag_for_revision", (TOPIC,), "flagged", "flag a topic for revision, with the WITH evidence"),
        _action("propagate", (TOPIC,), "flagged", "pass a change on to a topic (flags it)"),
        _action("supersede", (ENTRY,), "superseded", "mark an entry superseded"),
        _action("merge", (TOPIC, TOPIC), "revised archived linked",
                "merge the second topic into the first (its edges are re-pointed)"),
        _action("promote", (TOPIC, list_of(TEXT), TEXT), "topic_created linked",
                "move fields of a topic into a new topic with the given title"),
        _action("link", (TOPIC, TOPIC, TEXT), "linked", "add an edge: kind 'extension' or 'association'"),
        _action("compress", (union(FIELD, EPISODE),), "attenuated",
                "compress a field's history, or an episode to its searchable summary (recoverable)"),
        _action("hide", (union(FIELD, EPISODE),), "attenuated",
                "hide a field or an episode from default retrieval"),
        _action("archive", (TOPIC,), "archived attenuated", "archive a topic (restorable)"),
        _action("restore", (UNIT,), "restored", "undo attenuation of a unit"),
        _action("contest", (FIELD,), "", "mark a field's current value contested"),
        _action("reinforce", (UNIT, NUMBER), "",
                "raise salience: strength x += amount, s = 1 - exp(-x), i.e. "
                "s <- s + (1 - exp(-amount)) * (1 - s)"),
        _action("reinforce_associated", (union(FIELD, EPISODE), NUMBER), "",
                "reinforce, by amount, the few visible episodes that share the "
                "unit's rarest terms (associative reinforcement)"),
        _action("set_salience", (UNIT, NUMBER), "", "set salience"),
        _action("annotate", (union(UNIT, ENTRY), TEXT, VALUE), "", "attach a key/value note"),
        _action("reject", (TEXT,), "", "abort the whole transition with this message", aborts=True),
        _action("drop", (ENTRY, TEXT), "",
                "leave out of the ingest the fact that stated this entry, with a reason"),
        _action("clear_flags", (TOPIC, TEXT), "",
                "mark the topic's open revision flags handled, with a reason"),
        _action("mark_stale", (EPISODE, EPISODE), "",
                "mark the first episode stale: the second, said later, contradicts it"),
    )
}


# ---- settings ----------------------------------------------------------------------


@dataclass(frozen=True)
class SettingSig:
    name: str
    type: Type
    default: object  # used when no policy file SETs it; None means "none"
    doc: str
    minimum: float | None = None
    maximum: float | None = None
    min_exclusive: bool = False
    integer: bool = False
    nullable: bool = False  # null is a value ("none"), not a mistake

    def validate(self, value: object) -> str | None:
        """Why `value` cannot be this setting's value, or None when it can.

        One rule for both times a setting is judged: the checker calls it on a setting
        whose expression is constant, and the engine must call it on every value it
        evaluates (a setting computed from `interactions` or `active_topics` is only
        known then), rejecting the transition with this message.
        """
        if value is None and self.nullable:
            return None
        if self.type == RECORD:
            return self._validate_record(value)
        if self.type == DURATION:
            if isinstance(value, timedelta) and value > timedelta(0):
                return None
            return f"setting '{self.name}' must be a positive duration, got {_describe(value)}"
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            ok = math.isfinite(value)
            lo, hi = self.minimum, self.maximum
            if ok and lo is not None:
                ok = value > lo if self.min_exclusive else value >= lo
            if ok and hi is not None:
                ok = value <= hi
            if ok and self.integer:
                ok = value == int(value)
            if ok:
                return None
        return f"setting '{self.name}' must be {self.range_text()}, got {_describe(value)}"

    def _validate_record(self, value: object) -> str | None:
        """A record of label -> positive duration or null (label_half_life)."""
        if not isinstance(value, dict):
            return f"setting '{self.name}' must be a record of label: duration or null, " \
                   f"got {_describe(value)}"
        for key, item in value.items():
            if not isinstance(key, str) or not key.strip():
                return f"setting '{self.name}' needs non-empty labels as keys, got {key!r}"
            if item is not None and not (isinstance(item, timedelta) and item > timedelta(0)):
                return f"setting '{self.name}' must give each label a positive duration or " \
                       f"null, got {key}: {_describe(item)}"
        return None

    def range_text(self) -> str:
        """`a number in [0, 1]`, `an integer in [1, inf)`, ... (Number settings)."""
        lo, hi = self.minimum, self.maximum
        left = "(" if self.min_exclusive or lo is None else "["
        low = _number_text(lo) if lo is not None else "-inf"
        high = _number_text(hi) if hi is not None else "inf"
        text = f"{left}{low}, {high}" + ("]" if hi is not None else ")")
        kind = "an integer" if self.integer else "a number"
        return f"{kind} in {text}" + (" or null" if self.nullable else "")


def _number_text(x: float) -> str:
    return str(int(x)) if float(x).is_integer() else str(x)


def duration_text(d: timedelta) -> str:
    """A duration as the language writes it: 30d, 1d12h, 0s, -2h, 0.5s."""
    seconds = d.total_seconds()
    if seconds < 0:
        return "-" + duration_text(-d)
    whole, fraction = divmod(seconds, 1)
    if fraction:
        return f"{seconds:g}s"
    parts, rest = [], int(whole)
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60), ("s", 1)):
        if rest >= size:
            parts.append(f"{rest // size}{unit}")
            rest %= size
    return "".join(parts) or "0s"


def _describe(value: object) -> str:
    """A value in a message: as the language would write it where it can."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, timedelta):
        return duration_text(value)
    if isinstance(value, (int, float)):
        return _number_text(value) if math.isfinite(value) else str(value)
    if isinstance(value, str):
        return f"text {value!r}"
    return type(value).__name__


SETTINGS: dict[str, SettingSig] = {
    s.name: s
    for s in (
        SettingSig("half_life", DURATION, timedelta(days=30), "salience half-life"),
        SettingSig("reinforce_amount", NUMBER, 0.5, "default strength added by reinforce: "
                   "s <- s + (1 - exp(-amount)) (1 - s)", 0, 1),
        SettingSig("relevance_floor", NUMBER, 0.1, "relevance (the query's lexical coverage and "
                   "embedding cosine, each weighted 0.5) below which a unit is not returned by a "
                   "text query, and so not reinforced", 0, 1),
        SettingSig("recall_floor", NUMBER, 0.3, "relevance (as for relevance_floor) at or above "
                   "which a text query recalls a field of an archived topic, returns it marked "
                   "with its ladder level and revives it", 0, 1),
        SettingSig("hidden_recall_floor", NUMBER, 0.3, "relevance (as for relevance_floor) at or "
                   "above which a text query recalls a hidden field or episode (faded from default "
                   "context, its topic not put away), returns it marked hidden and revives it",
                   0, 1),
        SettingSig("associative_factor", NUMBER, 0, "share of reinforce_amount that the "
                   "episodes sharing a retrieved unit's rarest terms gain "
                   "(reinforce_associated); 0 turns associative reinforcement off", 0, 1),
        SettingSig("cascade_depth", NUMBER, 8, "how deep policy cascades may go in one transition", 1, None,
                   integer=True),
        SettingSig("active_bound", NUMBER, None,
                   "C5 bound beta(n) on active units; may use `interactions`; none means unbounded", 0, None,
                   nullable=True),
        SettingSig("merge_similarity", NUMBER, 0.92, "similarity above which topics are merge candidates", 0, 1),
        SettingSig("reliability_decay", NUMBER, 0.8, "lambda in (0, 1] for evidence weights", 0, 1,
                   min_exclusive=True),
        SettingSig("label_half_life", RECORD, {},
                   "half-life of fields by label: label -> duration, or null for no decay"),
    )
}
