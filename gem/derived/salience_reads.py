"""What a scope's salience tables answer: salience now, units by status and salience, the
least relevant fields, the most salient topics (the `Committed` view's reads of them,
vectorised over the tables; ScopeState holds the tables and keeps them up to date)."""
from __future__ import annotations

import itertools
import math
from datetime import datetime, timedelta
from typing import Sequence

import numpy as np

from ..units import unit_table
from .tables import SALIENCE_SLACK, SalienceTable, seconds


def _salience(table: SalienceTable, row: int | None, now: float, half_life: float) -> float:
    """Committed salience now of a unit at `row` of `table` (0 if it has none)."""
    if row is None:
        return 0.0
    age = now - float(table.last[row])
    age = 0.0 if math.isnan(age) else max(age, 0.0)
    return -math.expm1(-max(float(table.strength[row]), 0.0)) * 2.0 ** (-age / half_life)


def _ids_where(table: SalienceTable, statuses: frozenset[str], below: float | None,
               now: datetime, half_life: timedelta) -> list[str]:
    """The ids of `table`'s units in `statuses`, and with a salience now below `below`."""
    keep = table.mask(statuses)
    if below is not None:
        keep &= table.salience(now, half_life) < below + SALIENCE_SLACK
    return table.ids_where(keep)


class SalienceReads:
    """The reads of `ScopeState`'s salience tables (a mixin: the tables are its)."""

    topics: SalienceTable
    fields: SalienceTable
    episodes: SalienceTable
    field_labels: dict[str, tuple[str, ...]]
    open_flags: dict[str, int]
    _label_rows: dict[str, np.ndarray] | None
    _active_fields: int | None

    def _topic_active(self) -> np.ndarray:
        """For each field row: is its topic active?"""
        n = len(self.fields)
        owner = self.fields.owner[:n]
        active = np.zeros(n, dtype=bool)
        known = owner >= 0
        active[known] = self.topics.status[owner[known]] == 0
        return active

    def field_half_lives(self, half_life: timedelta,
                         by_label: dict[str, timedelta | None] | None) -> np.ndarray | None:
        """Each field row's half-life in seconds (inf: it does not fade) under the setting
        `label_half_life`, one vectorised step per label it names (gem/salience.py has the
        rule); None when no field's half-life differs from `half_life`."""
        if not by_label or not self.field_labels:
            return None
        if self._label_rows is None:
            rows: dict[str, list[int]] = {}
            for fid, labels in self.field_labels.items():
                for label in labels:
                    rows.setdefault(label, []).append(self.fields.row_of[fid])
            self._label_rows = {k: np.asarray(v, dtype=np.int64) for k, v in rows.items()}
        n = len(self.fields)
        shortest = np.full(n, np.inf)
        kept = np.zeros(n, dtype=bool)
        for label, duration in by_label.items():
            rows_of = self._label_rows.get(label)
            if rows_of is None:
                continue
            if duration is None:
                kept[rows_of] = True
            else:
                shortest[rows_of] = np.minimum(shortest[rows_of], duration.total_seconds())
        return np.where(np.isfinite(shortest), shortest,
                        np.where(kept, np.inf, half_life.total_seconds()))

    def field_salience(self, now: datetime, half_life: timedelta,
                       by_label: dict[str, timedelta | None] | None = None) -> np.ndarray:
        return self.fields.salience(now, half_life, self.field_half_lives(half_life, by_label))

    def field_ids_where(self, statuses: frozenset[str], below: float | None, now: datetime,
                        half_life: timedelta,
                        by_label: dict[str, timedelta | None] | None = None) -> list[str]:
        keep = self.fields.mask(statuses) & self._topic_active()
        if below is not None:
            keep &= self.field_salience(now, half_life, by_label) < below + SALIENCE_SLACK
        return self.fields.ids_where(keep, by_id=True)

    def topic_ids_where(self, statuses: frozenset[str], below: float | None, now: datetime,
                        half_life: timedelta) -> list[str]:
        return _ids_where(self.topics, statuses, below, now, half_life)

    def active_field_count(self) -> int:
        if self._active_fields is None:
            self._active_fields = int(np.count_nonzero(self.fields.mask(("active",))
                                                       & self._topic_active()))
        return self._active_fields

    def flagged_topics(self) -> list[str]:
        return [tid for tid, n in self.open_flags.items() if n > 0]

    def episode_ids_where(self, statuses: frozenset[str], below: float | None, now: datetime,
                          half_life: timedelta) -> list[str]:
        return _ids_where(self.episodes, statuses, below, now, half_life)

    def unit_columns(self, table: str, ids: Sequence[str], now: datetime, half_life: timedelta,
                     by_label: dict[str, timedelta | None] | None = None
                     ) -> tuple[np.ndarray, list[str], list[tuple[str, ...]]]:
        """Committed salience now, status and labels of `ids` (all of `table`'s), for the
        tick plans (gem/operators/tick_plan.py)."""
        units = {"Topic": self.topics, "Field": self.fields, "Episode": self.episodes}[table]
        rows = np.fromiter(map(units.row_of.__getitem__, ids), dtype=np.int64, count=len(ids))
        s = self.field_salience(now, half_life, by_label) if table == "Field" else \
            units.salience(now, half_life)
        names = np.asarray(units.names, dtype=object)  # (each code's name, by numpy: no loop)
        labels = list(map(self.field_labels.get, ids, itertools.repeat(()))) if table == "Field" else []
        return s[rows], names[units.status[rows]].tolist(), labels

    def unit_salience(self, key: str, now: datetime, half_life: timedelta) -> float:
        """A field's or an episode's committed salience now (0 if unknown)."""
        table = self.episodes if unit_table(key) == "Episode" else self.fields
        return _salience(table, table.row_of.get(key), seconds(now), half_life.total_seconds())

    def unit_status(self, key: str) -> tuple[str | None, str | None]:
        """(the unit's ladder status, its topic's status; None for an episode)."""
        if unit_table(key) == "Episode":
            return self.episodes.status_of(key), None
        return self.fields.status_of(key), self.topics.status_of(key.split("/", 1)[0])

    def unit_states(self, keys: Sequence[str], now: datetime, half_life: timedelta
                    ) -> list[tuple[str | None, str | None, float]]:
        """`unit_status` and `unit_salience` of each key, the rows of all of them found at
        once (a free-text query's hundred candidates)."""
        fids = [k for k in keys if unit_table(k) != "Episode"]
        eids = [k for k in keys if unit_table(k) == "Episode"]
        tids = list(dict.fromkeys(f.split("/", 1)[0] for f in fids))
        rows = {**dict(zip(fids, self.fields.rows_of(fids))),
                **dict(zip(eids, self.episodes.rows_of(eids)))}
        topic_rows = dict(zip(tids, self.topics.rows_of(tids)))
        now_s, half = seconds(now), half_life.total_seconds()
        out = []
        for key in keys:
            row = rows[key]
            if unit_table(key) == "Episode":
                table, topic_status = self.episodes, None
            else:
                table, trow = self.fields, topic_rows[key.split("/", 1)[0]]
                topic_status = None if trow is None else \
                    self.topics.names[int(self.topics.status[trow])]
            status = None if row is None else table.names[int(table.status[row])]
            out.append((status, topic_status, _salience(table, row, now_s, half)))
        return out

    def least_relevant_fields(self, n: int, exclude: set[str], now: datetime,
                              half_life: timedelta,
                              by_label: dict[str, timedelta | None] | None = None
                              ) -> list[tuple[float, str]]:
        """The n active fields of active topics with the lowest relevance (the mean of field
        and topic salience), skipping `exclude`, as (relevance, field id)."""
        if n <= 0 or not len(self.fields):
            return []
        keep = self.fields.mask(("active",)) & self._topic_active()
        for fid in exclude:
            row = self.fields.row_of.get(fid)
            if row is not None:
                keep[row] = False
        rows = np.flatnonzero(keep)
        if rows.shape[0] == 0:
            return []
        nf = len(self.fields)
        fs = self.field_salience(now, half_life, by_label)[rows]
        ts = self.topics.salience(now, half_life)[self.fields.owner[:nf][rows]]
        relevance = (fs + ts) / 2
        if rows.shape[0] > n:
            cut = np.partition(relevance, n - 1)[n - 1]
            pick = np.flatnonzero(relevance <= cut)
        else:
            pick = np.arange(rows.shape[0])
        found = sorted((float(relevance[i]), self.fields.ids[int(rows[i])]) for i in pick.tolist())
        return found[:n]

    def most_salient_topics(self, k: int, now: datetime, half_life: timedelta,
                            statuses: Sequence[str]) -> list[str]:
        s = self.topics.salience(now, half_life)
        rows = np.flatnonzero(self.topics.mask(statuses))
        if rows.shape[0] == 0:
            return []
        order = sorted(rows.tolist(), key=lambda r: (-s[r], self.topics.ids[r]))
        return [self.topics.ids[r] for r in order[:k]]
