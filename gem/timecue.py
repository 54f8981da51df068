"""Time cues in text: 'last year', 'in May', 'two weeks ago', 'on 3 May 2023', 'before June'.

A query's cue becomes a soft window against the memory's clock (`cue`): retrieval raises
units whose time falls inside it and, less and less, those near it (`TimeCue.weight`); it never
filters (a date said loosely is still evidence). `mentions_time` says whether a text speaks of a
time at all ('yesterday', 'last week', 'in May'): for a question asking *when*, the turn that
answers usually says when relative to the moment it was said. `refers_to` resolves such a
mention against that moment ('yesterday', said on 8 May, refers to 7 May).

Pure functions of the text and a reference time; English only.
"""
from __future__ import annotations

import math
import re
from dataclasses import dataclass
from functools import lru_cache
from datetime import datetime, timedelta, timezone

MONTHS = {m: i + 1 for i, m in enumerate(
    ["january", "february", "march", "april", "may", "june", "july", "august", "september",
     "october", "november", "december"])}
MONTHS.update({m[:3]: n for m, n in list(MONTHS.items())})
MONTHS["sept"] = 9
WEEKDAYS = {d: i for i, d in enumerate(
    ["monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday"])}
NUMBERS = {"a": 1, "an": 1, "one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6,
           "seven": 7, "eight": 8, "nine": 9, "ten": 10, "eleven": 11, "twelve": 12,
           "couple of": 2, "few": 3, "a few": 3, "several": 3}
UNITS = {"day": 1, "week": 7, "weekend": 7, "month": 30, "year": 365}

_MONTH = r"(?P<month>" + "|".join(sorted(MONTHS, key=len, reverse=True)) + r")\.?"
_DAY = r"(?P<day>[0-3]?\d)(?:st|nd|rd|th)?"
_YEAR = r"(?P<year>(?:19|20|21)\d\d)"
_NUM = r"(?P<n>\d+|" + "|".join(sorted(NUMBERS, key=len, reverse=True)) + r")"
_UNIT = r"(?P<unit>day|week|weekend|month|year)s?"

# Each pattern names its kind; they are tried in this order and the first match is the cue.
_PATTERNS: list[tuple[str, re.Pattern[str]]] = [(kind, re.compile(p, re.I)) for kind, p in [
    ("iso", r"\b(?P<year>(?:19|20|21)\d\d)-(?P<month>[01]?\d)-(?P<day>[0-3]?\d)\b"),
    ("day_month_year", rf"\b{_DAY}\s+(?:of\s+)?{_MONTH},?\s+{_YEAR}\b"),
    ("month_day_year", rf"\b{_MONTH}\s+{_DAY},?\s+{_YEAR}\b"),
    ("month_year", rf"\b{_MONTH},?\s+{_YEAR}\b"),
    ("day_month", rf"\b{_DAY}\s+(?:of\s+)?{_MONTH}\b"),
    ("month_day", rf"\b{_MONTH}\s+{_DAY}\b(?!\s*(?:am|pm|%|:))"),
    ("ago", rf"\b{_NUM}\s+{_UNIT}\s+(?:ago|back|before)\b"),
    ("relative", r"\b(?P<which>last|past|previous|this|next|coming)\s+"
                 r"(?P<unit>day|week|weekend|month|year|"
                 r"monday|tuesday|wednesday|thursday|friday|saturday|sunday)\b"),
    ("word", r"\b(?P<word>today|tonight|yesterday|tomorrow|recently|lately|"
             r"the other day|earlier this (?:week|month|year))\b"),
    ("month", rf"\b(?:in|during|since|by|until|before|after|of|early|late|mid)[\s-]+{_MONTH}\b"
              r"(?!\s*\d)"),
    ("year", rf"\b(?:in|during|since|by|until|before|after|of)\s+{_YEAR}\b"),
]]
# Words without which no pattern matches: most texts name no time, and one pass over their
# words says so (cues are read on every turn retrieval weighs or shows).
_TRIGGERS = frozenset([*MONTHS, *WEEKDAYS, *(u + s for u in UNITS for s in ("", "s")),
                       "today", "tonight", "yesterday", "tomorrow", "recently", "lately"])
_WORD = re.compile(r"[a-z]+|(?:19|20|21)\d\d\b", re.I)


def _may_name_a_time(text: str) -> bool:
    return any(w.lower() in _TRIGGERS or w[0].isdigit() for w in _WORD.findall(text))


_DIRECTION = re.compile(r"\b(before|until|by|after|since)\s+$", re.I)
_WHEN = re.compile(r"\b(when|what (?:date|day|time|year|month)|how long ago|which (?:year|month|day))\b",
                   re.I)
EARLIEST = datetime(1900, 1, 1, tzinfo=timezone.utc)


@dataclass(frozen=True)
class TimeCue:
    """A window [lo, hi) a text names, and the words that named it."""
    lo: datetime
    hi: datetime
    phrase: str

    def weight(self, at: datetime) -> float:
        """1 inside the window, decaying outside it with the window's width as the scale (a
        day at least): a month named loosely still favours its neighbours' days."""
        if self.lo <= at < self.hi:
            return 1.0
        width = max((self.hi - self.lo).total_seconds(), 86400.0)
        gap = (self.lo - at if at < self.lo else at - self.hi).total_seconds()
        return math.exp(-gap / width)


def _number(text: str) -> int:
    text = text.lower()
    return int(text) if text.isdigit() else NUMBERS.get(text, 1)


def _day_start(at: datetime) -> datetime:
    return at.replace(hour=0, minute=0, second=0, microsecond=0)


def _month_window(year: int, month: int) -> tuple[datetime, datetime]:
    lo = datetime(year, month, 1, tzinfo=timezone.utc)
    hi = datetime(year + (month == 12), month % 12 + 1, 1, tzinfo=timezone.utc)
    return lo, hi


def _date(year: int, month: int, day: int) -> tuple[datetime, datetime] | None:
    try:
        lo = datetime(year, month, day, tzinfo=timezone.utc)
    except ValueError:
        return None
    return lo, lo + timedelta(days=1)


def _latest_before(now: datetime, month: int, day: int | None) -> int:
    """The year of the latest such month (or date) not after now: 'in May' said in March
    means last May."""
    year = now.year
    if (month, day or 1) > (now.month, now.day if day else 1):
        year -= 1
    return year


def _resolve(kind: str, m: re.Match[str], now: datetime) -> tuple[datetime, datetime] | None:
    g = m.groupdict()
    today = _day_start(now)
    if kind == "iso":
        return _date(int(g["year"]), int(g["month"]), int(g["day"]))
    if kind in ("day_month_year", "month_day_year"):
        return _date(int(g["year"]), MONTHS[g["month"].lower()], int(g["day"]))
    if kind == "month_year":
        return _month_window(int(g["year"]), MONTHS[g["month"].lower()])
    if kind in ("day_month", "month_day"):
        month, day = MONTHS[g["month"].lower()], int(g["day"])
        return _date(_latest_before(now, month, day), month, day)
    if kind == "month":
        month = MONTHS[g["month"].lower()]
        return _month_window(_latest_before(now, month, None), month)
    if kind == "year":
        year = int(g["year"])
        return datetime(year, 1, 1, tzinfo=timezone.utc), datetime(year + 1, 1, 1, tzinfo=timezone.utc)
    if kind == "ago":
        days = _number(g["n"]) * UNITS[g["unit"].lower()]
        centre = today - timedelta(days=days)
        slack = timedelta(days=max(1, days // 4))  # 'two weeks ago' is roughly two weeks
        return centre - slack, centre + slack + timedelta(days=1)
    if kind == "relative":
        which, unit = g["which"].lower(), g["unit"].lower()
        step = {"last": -1, "past": -1, "previous": -1, "this": 0, "next": 1, "coming": 1}[which]
        if unit in WEEKDAYS:
            back = (today.weekday() - WEEKDAYS[unit]) % 7 or 7
            on = today - timedelta(days=back) + timedelta(days=7 * (step + 1) if step >= 0 else 0)
            return on, on + timedelta(days=1)
        if unit == "day":
            return today + timedelta(days=step), today + timedelta(days=step + 1)
        if unit in ("week", "weekend"):
            monday = today - timedelta(days=today.weekday()) + timedelta(weeks=step)
            lo = monday + timedelta(days=5) if unit == "weekend" else monday
            return lo, monday + timedelta(days=7)
        if unit == "month":
            y, mo = divmod(today.year * 12 + today.month - 1 + step, 12)
            return _month_window(y, mo + 1)
        year = today.year + step
        return datetime(year, 1, 1, tzinfo=timezone.utc), datetime(year + 1, 1, 1, tzinfo=timezone.utc)
    word = g["word"].lower()
    if word in ("today", "tonight"):
        return today, today + timedelta(days=1)
    if word == "yesterday":
        return today - timedelta(days=1), today
    if word == "tomorrow":
        return today + timedelta(days=1), today + timedelta(days=2)
    if word.startswith("earlier this"):
        unit = word.rsplit(" ", 1)[1]
        lo = {"week": today - timedelta(days=today.weekday()),
              "month": today.replace(day=1), "year": today.replace(month=1, day=1)}[unit]
        return lo, today + timedelta(days=1)
    return today - timedelta(days=14), today + timedelta(days=1)  # recently, lately, the other day


def _find(text: str, now: datetime) -> tuple[str, re.Match[str], tuple[datetime, datetime]] | None:
    if not _may_name_a_time(text):
        return None
    best: tuple[int, str, re.Match[str], tuple[datetime, datetime]] | None = None
    for kind, pattern in _PATTERNS:
        for m in pattern.finditer(text):
            window = _resolve(kind, m, now)
            if window is not None and (best is None or m.start() < best[0]):
                best = (m.start(), kind, m, window)
            if window is not None:
                break
        if best is not None and kind in ("iso", "day_month_year", "month_day_year"):
            break  # a full date outranks any vaguer cue
    return None if best is None else best[1:]


def cue(text: str, now: datetime) -> TimeCue | None:
    """The soft window the first time cue of `text` names, read against `now` (aware); None
    when it names no time. 'before X' opens the window back to 1900, 'after X'/'since X' up
    to now."""
    found = _find(text, now)
    if found is None:
        return None
    kind, m, (lo, hi) = found
    direction = _DIRECTION.search(text[:m.start()])
    word = direction.group(1).lower() if direction else None
    inner = re.match(r"(before|until|by|after|since)\b", m.group(0), re.I)
    word = inner.group(1).lower() if inner else word
    if word == "before":
        lo, hi = EARLIEST, lo
    elif word in ("until", "by"):
        lo = EARLIEST
    elif word in ("after", "since"):
        lo, hi = hi if word == "after" else lo, max(now, hi + timedelta(days=1))
    return TimeCue(lo, hi, m.group(0).strip())


def without_cue(text: str, now: datetime) -> str:
    """`text` without the words of its time cue ('What did we plan in May?' -> 'What did we
    plan ?'): the words name a time, not something the evidence says."""
    found = cue(text, now)
    if found is None:
        return text
    at = text.find(found.phrase)
    return text[:at] + text[at + len(found.phrase):]


def asks_when(text: str) -> bool:
    """Whether a question asks for a time ('When did ...', 'What year ...')."""
    return _WHEN.search(text) is not None


@lru_cache(maxsize=1 << 16)  # retrieval asks again of the turns it weighs and shows
def mentions_time(text: str) -> bool:
    """Whether a text speaks of a time (an absolute date or a relative one)."""
    return _may_name_a_time(text) and any(p.search(text) for _, p in _PATTERNS)


@lru_cache(maxsize=1 << 16)
def refers_to(text: str, said_at: datetime) -> datetime | None:
    """The start of the day (or period) the first time cue of `text` refers to, read against
    the moment it was said; None when it names no time."""
    found = cue(text, said_at)
    return None if found is None or found.lo == EARLIEST else found.lo


__all__ = ["TimeCue", "cue", "without_cue", "asks_when", "mentions_time", "refers_to"]
