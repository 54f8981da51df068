"""What callers pass in: facts, episodes and places, their limits and validation."""
from __future__ import annotations

import json
import math
from datetime import datetime, timezone
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, ValidationError, field_validator

from ..errors import InvalidInput

# Limits on one fact's value: deeper nesting is refused before anything walks it recursively
# (json, the summariser), and a value is a fact about a topic, not a document store.
MAX_VALUE_DEPTH = 64
MAX_VALUE_BYTES = 256 * 1024   # of its canonical JSON, UTF-8
MAX_LABELS = 32
MAX_LABEL_LENGTH = 64


def json_problem(value: Any) -> str | None:
    """Why `value` is not a JSON value gem stores exactly as given, or None when it is.

    Only the JSON types themselves are accepted (dict with str keys, list, str, int, float,
    bool), nothing that would come back as something else: no tuple (a list), no int or bool
    key (a string), no subclass such as an Enum, no NaN or infinity, nothing nested deeper than
    MAX_VALUE_DEPTH. Walked without recursion, so no value can exhaust the stack.
    """
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        kind = type(item)
        if kind in (str, int, bool) or item is None:
            continue
        if kind is float:
            if not math.isfinite(item):
                return f"{item!r} is not a JSON number"
            continue
        if kind not in (list, dict):
            return f"{kind.__name__} is not a JSON type (use a list, a dict with str keys, a " \
                   "str, an int, a float or a bool)"
        if depth > MAX_VALUE_DEPTH:
            return f"it is nested deeper than {MAX_VALUE_DEPTH} levels"
        if kind is dict:
            for key in item:
                if type(key) is not str:
                    return f"object key {key!r} is a {type(key).__name__}, not a string"
            stack.extend((v, depth + 1) for v in item.values())
        else:
            stack.extend((v, depth + 1) for v in item)
    return None


def _json_value(value: Any) -> Any:
    problem = json_problem(value)
    if problem is not None:
        raise ValueError(f"must be a JSON value: {problem}")
    text = json.dumps(value, sort_keys=True, allow_nan=False, separators=(",", ":"))
    if len(text.encode("utf-8")) > MAX_VALUE_BYTES:
        raise ValueError(f"must be at most {MAX_VALUE_BYTES} bytes as JSON")
    return json.loads(text)


def as_utc(value: datetime, what: str = "time") -> datetime:
    """An aware datetime, converted to UTC. A naive one is refused: which zone it meant is
    exactly what gem cannot know (`datetime.now()` is local time), and guessing UTC would
    shift it silently."""
    if not isinstance(value, datetime):
        raise InvalidInput(f"{what} must be a datetime, got {type(value).__name__}")
    if value.tzinfo is None or value.utcoffset() is None:
        raise InvalidInput(f"{what} must be timezone-aware (a naive datetime could be any "
                           f"zone): use datetime.now(timezone.utc) or .replace(tzinfo=...), "
                           f"got {value.isoformat()}")
    return value.astimezone(timezone.utc)


MAX_PLACE_NAME = 200


class Place(BaseModel):
    """Where something was said or held true: a point (`lat` in [-90, 90], `lon` in
    [-180, 180], degrees, finite numbers) and an optional `name` ("Lisbon office"). A fact's
    place stays with the entry it states (one place per statement); an episode has its own.
    `retrieve(near=(lat, lon, km))` finds units within `km` of a point (gem/places.py)."""

    model_config = ConfigDict(frozen=True, extra="forbid", strict=True)

    lat: float
    lon: float
    name: str | None = None

    def __init__(self, lat: Any = None, lon: Any = None, **kwargs: Any) -> None:
        try:
            super().__init__(lat=lat, lon=lon, **kwargs)
        except ValidationError as exc:
            raise InvalidInput(_describe(exc, "Place")) from None

    @field_validator("lat", mode="before")
    @classmethod
    def _lat(cls, v: Any) -> float:
        return coordinate(v, 90.0)

    @field_validator("lon", mode="before")
    @classmethod
    def _lon(cls, v: Any) -> float:
        return coordinate(v, 180.0)

    @field_validator("name", mode="before")
    @classmethod
    def _place_name(cls, v: Any) -> str | None:
        if v is None:
            return None
        name = _name(v)
        if len(name) > MAX_PLACE_NAME:
            raise ValueError(f"must be at most {MAX_PLACE_NAME} characters")
        return name


def coordinate(v: Any, bound: float) -> float:
    """A latitude (bound 90) or longitude (bound 180) in degrees: a finite int or float within
    [-bound, bound]; ValueError otherwise (no text, no bool)."""
    if type(v) not in (int, float):
        raise ValueError(f"must be an int or a float, got {_kind(v)}")
    if not math.isfinite(v) or not -bound <= v <= bound:
        raise ValueError(f"must be a finite number within [{-bound:g}, {bound:g}], got {v!r}")
    return float(v)


def as_place(v: Any) -> "Place | None":
    """A Place from a Place, a (lat, lon) or (lat, lon, name) pair, or a {lat, lon, name}
    mapping; None stays None."""
    if v is None or isinstance(v, Place):
        return v
    try:
        if isinstance(v, (tuple, list)) and len(v) in (2, 3):
            return Place(v[0], v[1], **({"name": v[2]} if len(v) == 3 else {}))
        if isinstance(v, dict):
            return Place(**v)
    except InvalidInput as exc:  # reported under the field that holds the place
        raise ValueError(str(exc).removeprefix("invalid Place: ")) from None
    raise ValueError(f"must be a gem.Place, (lat, lon), (lat, lon, name) or "
                     f"{{lat, lon, name}}, got {type(v).__name__}")


class Fact(BaseModel):
    """One observation: `topic`'s `field` has `value`, as of `at`, according to `source`.

    Nothing is coerced (strict): `confidence` is an int or float, `at` an aware datetime, the
    names are str, and `value` a JSON value that reads back exactly as given. `labels` say
    what kind of value it is ("pii", "secret"): they stay with the entry and its field, and
    policies read them (`entry.labels`, `field.labels`).
    """

    model_config = ConfigDict(frozen=True, extra="forbid", strict=True)

    topic: str
    field: str
    value: Any
    at: datetime | None = None
    source: str = "api"
    actor: str = "user"
    ref: str | None = None
    confidence: float = 1.0
    polarity: Literal["+", "-"] = "+"
    labels: tuple[str, ...] = ()
    place: Place | None = None

    def __init__(self, topic: str | None = None, field: str | None = None, value: Any = None,
                 **kwargs: Any) -> None:
        try:
            super().__init__(topic=topic, field=field, value=value, **kwargs)
        except ValidationError as exc:
            raise InvalidInput(_describe(exc, "Fact")) from None

    @classmethod
    def model_validate_json(cls, json_data: str | bytes | bytearray, **kwargs: Any) -> "Fact":
        """A Fact from its JSON (`model_dump(mode="json")`): JSON has no datetime, so `at` is
        ISO 8601 text there, with its offset; everything else is checked as always."""
        return cls(**_json_fields(json_data, "Fact"))

    @field_validator("topic", "field", "source", "actor", mode="before")
    @classmethod
    def _non_empty(cls, v: Any) -> str:
        return _name(v)

    @field_validator("ref", mode="before")
    @classmethod
    def _text_or_none(cls, v: Any) -> str | None:
        if v is not None and type(v) is not str:
            raise ValueError(f"must be a string or None, got {type(v).__name__}")
        return v

    @field_validator("value")
    @classmethod
    def _json(cls, v: Any) -> Any:
        if v is None:
            raise ValueError("must not be null (use polarity '-' to deny a value)")
        return _json_value(v)

    @field_validator("confidence", mode="before")
    @classmethod
    def _unit_interval(cls, v: Any) -> float:
        if type(v) not in (int, float):
            raise ValueError(f"must be an int or a float, got {type(v).__name__}")
        if math.isnan(v) or not 0.0 <= v <= 1.0:
            raise ValueError("must be within [0, 1]")
        return float(v)

    @field_validator("at", mode="before")
    @classmethod
    def _utc(cls, v: Any) -> datetime | None:
        return None if v is None else _aware_utc(v)

    @field_validator("place", mode="before")
    @classmethod
    def _place(cls, v: Any) -> Place | None:
        return as_place(v)

    @field_validator("labels", mode="before")
    @classmethod
    def _labels(cls, v: Any) -> tuple[str, ...]:
        if isinstance(v, (str, bytes)) or not isinstance(v, (list, tuple)):
            raise ValueError(f"must be a list of strings, got {type(v).__name__}")
        out: list[str] = []
        for x in v:
            if type(x) is not str or not x.strip():
                raise ValueError(f"each label must be a non-empty string, got {x!r}")
            label = x.strip()
            if len(label) > MAX_LABEL_LENGTH:
                raise ValueError(f"a label is at most {MAX_LABEL_LENGTH} characters")
            if label not in out:
                out.append(label)
        if len(out) > MAX_LABELS:
            raise ValueError(f"at most {MAX_LABELS} labels")
        return tuple(out)


def _json_fields(json_data: str | bytes | bytearray, what: str) -> dict[str, Any]:
    """The arguments of a Fact or an Episode from its JSON, `at` parsed from its ISO 8601 text
    (the one place text becomes a time: JSON has no other way to write one)."""
    try:
        data = json.loads(json_data)
    except ValueError as exc:
        raise InvalidInput(f"invalid {what} JSON: {exc}") from None
    if not isinstance(data, dict):
        raise InvalidInput(f"a {what}'s JSON is an object, got {type(data).__name__}")
    if isinstance(data.get("at"), str):
        try:
            data["at"] = datetime.fromisoformat(data["at"])
        except ValueError:
            raise InvalidInput(f"invalid {what}: at: not an ISO 8601 time: {data['at']!r}") from None
    return data


def _kind(v: Any) -> str:
    return repr(v) if isinstance(v, str) else type(v).__name__


# The checks Fact and Episode share, so that both take exactly the same input: nothing is
# coerced (no text or epoch number for a time, no str subclass for a name).
def _name(v: Any) -> str:
    """A name (topic, field, source, actor, speaker): a non-empty str, stripped."""
    if type(v) is not str or not v.strip():
        raise ValueError(f"must be a non-empty string, got {_kind(v)}")
    return v.strip()


def _aware_utc(v: Any) -> datetime:
    """A time: an aware datetime, in UTC."""
    if not isinstance(v, datetime):
        raise ValueError(f"must be a datetime, got {type(v).__name__}")
    if v.tzinfo is None or v.utcoffset() is None:
        raise ValueError("must be timezone-aware (a naive datetime could be any zone)")
    return v.astimezone(timezone.utc)


# An episode's time must be aware (a naive time could be any zone) and plausible: a year
# outside these bounds is a typo (9999-12-31), not an observation.
EARLIEST = datetime(1900, 1, 1, tzinfo=timezone.utc)
LATEST = datetime(2200, 1, 1, tzinfo=timezone.utc)


def returned_facts(answer: Any, who: str, expected: str = "a list of gem.Fact") -> list[Fact]:
    """The facts a caller's callable (the extractor, the reviser) returned: one gem.Fact or a
    list of them; anything else is InvalidInput naming `who`."""
    if isinstance(answer, Fact):
        return [answer]
    if answer is None or isinstance(answer, (str, bytes, dict)) or not hasattr(answer, "__iter__"):
        raise InvalidInput(f"{who} must return {expected}, got {type(answer).__name__}")
    facts = list(answer)
    for i, fact in enumerate(facts):
        if not isinstance(fact, Fact):
            raise InvalidInput(f"{who} returned a {type(fact).__name__} as item {i}, "
                               "not a gem.Fact")
    return facts


class Episode(BaseModel):
    """A raw observation, kept as said: a turn of a conversation, a message, a note.

    `at` is when it was said (aware; default: the memory's clock), `source` where it came from
    (for example the message id), `speaker` who said it. Episodes are searchable next to facts,
    have salience and descend the forgetting ladder; a fact cites the episode it was extracted
    from by its id in `Fact(ref=...)`."""

    model_config = ConfigDict(frozen=True, extra="forbid", strict=True)

    text: str
    at: datetime | None = None
    source: str = "api"
    speaker: str | None = None
    actor: str = "user"
    place: Place | None = None

    def __init__(self, text: Any = None, **kwargs: Any) -> None:
        try:
            super().__init__(text=text, **kwargs)
        except ValidationError as exc:
            raise InvalidInput(_describe(exc, "Episode")) from None

    @classmethod
    def model_validate_json(cls, json_data: str | bytes | bytearray, **kwargs: Any) -> "Episode":
        """An Episode from its JSON (`model_dump(mode="json")`), `at` as ISO 8601 text."""
        return cls(**_json_fields(json_data, "Episode"))

    @field_validator("text", mode="before")
    @classmethod
    def _text(cls, v: Any) -> str:
        if type(v) is not str or not v.strip():
            raise ValueError(f"must be a non-empty string, got {_kind(v)}")
        return v  # kept as said

    @field_validator("source", "actor", mode="before")
    @classmethod
    def _label(cls, v: Any) -> str:
        return _name(v)

    @field_validator("speaker", mode="before")
    @classmethod
    def _speaker(cls, v: Any) -> str | None:
        return None if v is None else _name(v)

    @field_validator("at", mode="before")
    @classmethod
    def _at(cls, v: Any) -> datetime | None:
        # a fact's rule, and a plausible year: an episode is something said, not a date
        return None if v is None else checked_time(_aware_utc(v), "at")

    @field_validator("place", mode="before")
    @classmethod
    def _place(cls, v: Any) -> Place | None:
        return as_place(v)


def checked_time(value: Any, what: str) -> datetime:
    """An aware datetime within [1900, 2200), in UTC; InvalidInput (ValueError inside pydantic
    validation) for anything else."""
    if not isinstance(value, datetime):
        raise ValueError(f"{what} must be a datetime, got {type(value).__name__}")
    if value.tzinfo is None or value.utcoffset() is None:
        raise ValueError(f"{what} must be timezone-aware (a naive time could be any zone)")
    value = value.astimezone(timezone.utc)
    if not EARLIEST <= value < LATEST:
        raise ValueError(f"{what} {value.isoformat()} is outside [1900, 2200)")
    return value


def _describe(exc: ValidationError, what: str) -> str:
    parts = []
    for err in exc.errors():
        loc = ".".join(str(p) for p in err["loc"]) or what
        parts.append(f"{loc}: {err['msg'].removeprefix('Value error, ')}")
    return f"invalid {what}: " + "; ".join(parts)
