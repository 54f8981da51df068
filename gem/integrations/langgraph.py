"""LangGraph's long-term memory store (`langgraph.store.base.BaseStore`) backed by gem.

Needs `pip install 'gem-memory[langgraph]'`. How LangGraph's model maps onto gem's (the
LangGraph guide, docs/guides/langgraph.md):

- A **namespace** is a gem scope, so namespaces are as isolated as tenants. One whose labels
  are all a-z, 0-9, '_' and '-' is the scope `lg.label.label` (LangGraph labels never contain
  '.', so the name reads back); any other (capitals, '@', too long for a scope name) is
  `lg-<sha256>`, and its labels are kept as a fact in the scope `lg-namespaces`. A namespace
  prefix selects the namespaces that start with those labels, whole labels only.
- An **item** is a topic titled by its key, and each key of its value a field of that topic,
  so every key has its own history, provenance, salience and place on the forgetting ladder.
- `put` is one `ingest` (re-putting a value corroborates it), then a `retract` of each key the
  new value leaves out (or sets to None: gem has no null value), kept in the history.
- `get` is `inspect`: side-effect free, the item whole (hidden fields and archived topics too).
- `search` is `retrieve`, a transition that reinforces what it reads. With a `query`, gem
  ranks the items (BM25 and vectors, one retrieve per namespace, merged by score) and reinforces
  what it ranked, which can be more than the page when there is an offset or a filter; without
  one, items come in (namespace, key) order and only the page is read (one retrieve per item).
  Either way an item shows the fields retrieval shows: what forgetting hid is left out until a
  query recalls it.
- `delete` (a put of None) is `erase`: LangGraph's delete means remove, so the item's values,
  history and index entries go and a tombstone is logged.
"""
from __future__ import annotations

import asyncio
import hashlib
import json
import logging
import math
import re
from collections.abc import Iterable, Mapping
from datetime import datetime
from pathlib import Path
from typing import Any

from langgraph.store.base import (BaseStore, GetOp, InvalidNamespaceError, Item,
                                  ListNamespacesOp, MatchCondition, Op, PutOp, Result, SearchItem,
                                  SearchOp)

from gem.errors import InvalidInput
from gem.memory import SCOPE_NAME, Memory, open as open_memory
from gem.model import Fact, FieldView, HistoryEntry, TopicView
from gem.resolve import TieredResolver
from gem.text import name_key

log = logging.getLogger("gem")

# A LangGraph key names exactly one item, so the memory must never host a key's facts in a
# topic of another name by similarity ("preferences" in "preference"): exact names and
# canonical keys only (the canonical-key case is refused by the store, see `_own_topic`).
KEY_RESOLVER = TieredResolver(similarity_threshold=math.inf)

_LABEL = re.compile(r"[a-z0-9][a-z0-9_-]*")
_HASHED = re.compile(r"[0-9a-f]{40}")
_OPERATORS = ("$eq", "$ne", "$gt", "$gte", "$lt", "$lte")
_SOURCE = "langgraph"


class GemStore(BaseStore):
    """A LangGraph `BaseStore` on a gem memory: `StateGraph(...).compile(store=GemStore.open(
    path))`. The memory must resolve topic names by exact name or canonical key only (open it
    with `resolver=KEY_RESOLVER`; `GemStore.open` does). Operations of a batch run in order,
    each its own transition."""

    def __init__(self, memory: Memory, *, prefix: str = "lg") -> None:
        if not isinstance(memory, Memory):
            raise InvalidInput(f"GemStore needs a gem.Memory, got {type(memory).__name__}")
        if not isinstance(prefix, str) or len(prefix) > 16 or not _LABEL.fullmatch(prefix):
            raise InvalidInput(f"prefix must be 1-16 characters of a-z, 0-9, '_', '-', starting "
                               f"with a letter or digit; got {prefix!r}")
        resolver = memory._engine.services.resolver
        if not (isinstance(resolver, TieredResolver) and resolver.similarity_threshold > 1):
            raise InvalidInput("GemStore needs a memory that matches topic names exactly or by "
                               "canonical key, never by similarity: open it with gem.open(..., "
                               "resolver=gem.integrations.langgraph.KEY_RESOLVER)")
        self.memory = memory
        self.prefix = prefix
        self._owned = False
        self._views: dict[str, Memory] = {}
        self._hashed: dict[str, tuple[str, ...]] = {}  # hashed scope names, as registered

    @classmethod
    def open(cls, path: str | Path | None = None, *, prefix: str = "lg",
             **options: Any) -> "GemStore":
        """A store on the memory at `path` (`None`: a temporary one), opened with
        `gem.open(path, resolver=KEY_RESOLVER, **options)` and closed by `close()`."""
        if "resolver" in options:
            raise InvalidInput("GemStore.open sets the resolver (KEY_RESOLVER)")
        memory = open_memory(path, resolver=KEY_RESOLVER, **options)
        try:
            store = cls(memory, prefix=prefix)
        except BaseException:
            memory.close()
            raise
        store._owned = True
        return store

    def close(self) -> None:
        """Close the memory if `GemStore.open` opened it; a memory passed in stays open."""
        if self._owned:
            self.memory.close()

    def __enter__(self) -> "GemStore":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    # ------------------------------------------------------------------ BaseStore
    def batch(self, ops: Iterable[Op]) -> list[Result]:
        return [self._run(op) for op in ops]

    async def abatch(self, ops: Iterable[Op]) -> list[Result]:
        # gem's calls block on the database: run them off the event loop, in order.
        return await asyncio.to_thread(self.batch, list(ops))

    def _run(self, op: Op) -> Result:
        if isinstance(op, GetOp):
            _check_labels(op.namespace)
            return self._get(op.namespace, _check_key(op.key))
        if isinstance(op, PutOp):
            _check_labels(op.namespace, writing=True)
            if op.value is None:
                self._delete(op.namespace, _check_key(op.key))
            else:
                self._put(op.namespace, _check_key(op.key), op.value)
            return None
        if isinstance(op, SearchOp):
            return self._search(op)
        if isinstance(op, ListNamespacesOp):
            return self._list_namespaces(op)
        raise InvalidInput(f"unknown store operation {type(op).__name__}")

    # ------------------------------------------------------------------ namespaces
    def scope_of(self, namespace: tuple[str, ...]) -> str:
        """The gem scope that holds `namespace`'s items."""
        readable = ".".join((self.prefix, *namespace))
        if all(_LABEL.fullmatch(label) for label in namespace) and SCOPE_NAME.fullmatch(readable):
            return readable
        digest = hashlib.sha256(json.dumps(list(namespace)).encode()).hexdigest()[:40]
        return f"{self.prefix}-{digest}"

    def _view(self, namespace: tuple[str, ...]) -> Memory:
        scope = self.scope_of(namespace)
        if scope not in self._views:
            self._views[scope] = self.memory.scope(scope)
        return self._views[scope]

    @property
    def _registry(self) -> Memory:
        return self.memory.scope(f"{self.prefix}-namespaces")

    def _register(self, namespace: tuple[str, ...]) -> None:
        """Keep the labels of a namespace whose scope name is a hash, so listing finds them."""
        scope = self.scope_of(namespace)
        if scope.startswith(self.prefix + ".") or scope in self._hashed:
            return
        if self._registry.inspect(scope, "namespace") is None:
            self._registry.ingest(Fact(scope, "namespace", list(namespace), source=_SOURCE),
                                  actor=_SOURCE)
        self._hashed[scope] = namespace

    def _namespace_of(self, scope: str) -> tuple[str, ...] | None:
        if scope.startswith(self.prefix + "."):
            return tuple(scope[len(self.prefix) + 1:].split("."))
        if scope in self._hashed:
            return self._hashed[scope]
        if scope.startswith(self.prefix + "-") and _HASHED.fullmatch(scope[len(self.prefix) + 1:]):
            kept = self._registry.inspect(scope, "namespace")
            if kept is not None and kept.value is not None:
                self._hashed[scope] = tuple(kept.value)
                return self._hashed[scope]
        return None

    def _namespaces(self) -> list[tuple[str, ...]]:
        """The namespaces that hold at least one item, in order."""
        found = []
        for scope in self.memory.scopes():
            namespace = self._namespace_of(scope)
            if namespace is not None and self._view(namespace).topics(limit=1).matching:
                found.append(namespace)
        return sorted(found)

    def _list_namespaces(self, op: ListNamespacesOp) -> list[tuple[str, ...]]:
        _check_page(op.limit, op.offset)
        conditions = op.match_conditions or ()
        for condition in conditions:
            if condition.match_type not in ("prefix", "suffix"):
                raise InvalidInput(f"match_type must be 'prefix' or 'suffix', got "
                                   f"{condition.match_type!r}")
            _check_labels(tuple(label for label in condition.path if label != "*"))
        if op.max_depth is not None and (not isinstance(op.max_depth, int) or op.max_depth < 1):
            raise InvalidInput(f"max_depth must be a positive integer, got {op.max_depth!r}")
        found = [ns for ns in self._namespaces() if all(_matches_path(c, ns) for c in conditions)]
        if op.max_depth is not None:
            found = sorted({ns[:op.max_depth] for ns in found})
        return found[op.offset:op.offset + op.limit]

    # ------------------------------------------------------------------ items
    def _own_topic(self, view: Memory, key: str) -> TopicView | None:
        """The topic titled `key`, or None. gem also finds a topic by another spelling of its
        title (canonical key: "User 1" for "user_1"), which is another LangGraph key."""
        topic = view.inspect(key)
        return topic if topic is not None and topic.title == key else None

    def _get(self, namespace: tuple[str, ...], key: str) -> Item | None:
        view = self._view(namespace)
        topic = self._own_topic(view, key)
        if topic is None:
            return None
        value = _value(topic.fields.values())
        if not value:
            return None
        created, updated = _times([view.history(key, name) for name in topic.fields])
        return Item(value=value, key=key, namespace=namespace, created_at=created,
                    updated_at=updated)

    def _put(self, namespace: tuple[str, ...], key: str, value: Any) -> None:
        if not isinstance(value, Mapping):
            raise InvalidInput(f"an item's value is a dict, got {type(value).__name__}")
        names: dict[str, str] = {}
        for name in value:
            if not isinstance(name, str) or not name.strip() or name != name.strip():
                raise InvalidInput(f"the keys of an item's value are non-empty strings without "
                                   f"surrounding spaces (gem fields); got {name!r}")
            if name_key(name) in names:
                raise InvalidInput(f"{names[name_key(name)]!r} and {name!r} are one gem field "
                                   "(names match by canonical key: case and separators do not "
                                   "count)")
            names[name_key(name)] = name
        kept = {name: v for name, v in value.items() if v is not None}
        if not kept:
            raise InvalidInput("an item needs at least one key with a value (gem keeps an item "
                               "as its fields); delete the item instead")
        view = self._view(namespace)
        topic = view.inspect(key)
        if topic is not None and topic.title != key:
            raise InvalidInput(f"key {key!r} names the item {topic.title!r} in gem (names match "
                               "by canonical key: case and separators do not count)")
        fields = topic.fields if topic is not None else {}
        for existing in fields:
            mine = names.get(name_key(existing))
            if mine is not None and mine != existing:
                raise InvalidInput(f"key {mine!r} is the field {existing!r} of item {key!r} in "
                                   "gem (names match by canonical key)")
        self._register(namespace)
        result = view.ingest([Fact(key, name, v, source=_SOURCE) for name, v in kept.items()],
                             actor=_SOURCE)
        if result.dropped:
            log.warning("gem: a policy left out of item %r in %r: %s", key, namespace,
                        "; ".join(f"{d.field} ({d.reason})" for d in result.dropped))
        for name, field in fields.items():
            if name not in kept and field.retracted is None:
                view.retract(key, name, "not in the value LangGraph put", source=_SOURCE,
                             actor=_SOURCE)

    def _delete(self, namespace: tuple[str, ...], key: str) -> None:
        view = self._view(namespace)
        if self._own_topic(view, key) is not None:
            view.erase(key, reason="LangGraph deleted the item", actor=_SOURCE)

    # ------------------------------------------------------------------ search
    def _search(self, op: SearchOp) -> list[SearchItem]:
        _check_labels(op.namespace_prefix)
        _check_page(op.limit, op.offset)
        if op.filter is not None:
            if not isinstance(op.filter, Mapping):
                raise InvalidInput(f"filter must be a dict, got {type(op.filter).__name__}")
            _check_filter(op.filter)
        if op.query is not None and not isinstance(op.query, str):
            raise InvalidInput(f"query must be a string, got {type(op.query).__name__}")
        n = len(op.namespace_prefix)
        namespaces = [ns for ns in self._namespaces() if ns[:n] == op.namespace_prefix]
        if op.limit == 0:
            return []
        if op.query and op.query.strip():
            return self._ranked(op, namespaces)
        return self._listed(op, namespaces)

    def _ranked(self, op: SearchOp, namespaces: list[tuple[str, ...]]) -> list[SearchItem]:
        # k counts fields, not items; a filter discards some: rank more than the page needs.
        k = min(1000, max(10, 4 * (op.offset + op.limit)) * (4 if op.filter else 1))
        hits: list[SearchItem] = []
        for namespace in namespaces:
            found = self._view(namespace).retrieve(op.query, k=k, fields="all", history=True,
                                                   actor=_SOURCE)
            for topic in found.topics:
                if topic.context_of is None:
                    item = _search_item(namespace, topic)
                    if item is not None and _matches_filter(item.value, op.filter):
                        hits.append(item)
        hits.sort(key=lambda i: (-(i.score or 0.0), i.namespace, i.key))
        return hits[op.offset:op.offset + op.limit]

    def _listed(self, op: SearchOp, namespaces: list[tuple[str, ...]]) -> list[SearchItem]:
        chosen: list[tuple[tuple[str, ...], str]] = []
        for namespace in namespaces:
            view = self._view(namespace)
            keys = sorted(self._titles(view))
            for key in keys:
                if op.filter:
                    topic = view.inspect(key)
                    shown = [] if topic is None else \
                        [f for f in topic.fields.values() if f.status != "hidden"]
                    if not _matches_filter(_value(shown), op.filter):
                        continue
                chosen.append((namespace, key))
        items = []
        for namespace, key in chosen[op.offset:op.offset + op.limit]:
            found = self._view(namespace).retrieve(topic=key, fields="all", history=True,
                                                   actor=_SOURCE)
            for topic in found.topics:
                if topic.title == key and topic.context_of is None:
                    item = _search_item(namespace, topic)
                    if item is not None:
                        items.append(item)
        return items

    @staticmethod
    def _titles(view: Memory) -> list[str]:
        """The titles of the scope's active topics (archived ones are out of default
        retrieval)."""
        titles: list[str] = []
        while True:
            page = view.topics(status="active", order="title", offset=len(titles), limit=500)
            titles += [t.title for t in page.topics]
            if len(titles) >= page.matching or not page.topics:
                return titles


def _check_labels(namespace: Any, *, writing: bool = False) -> None:
    """LangGraph's rules for namespace labels, for ops that reach `batch` directly."""
    if not isinstance(namespace, tuple):
        raise InvalidNamespaceError(f"a namespace is a tuple of strings, got "
                                    f"{type(namespace).__name__}")
    if writing and not namespace:
        raise InvalidNamespaceError("Namespace cannot be empty.")
    if writing and namespace[0] == "langgraph":
        raise InvalidNamespaceError(f'Root label for namespace cannot be "langgraph". Got: '
                                    f"{namespace}")
    for label in namespace:
        if not isinstance(label, str) or not label or "." in label or "\x00" in label:
            raise InvalidNamespaceError(f"Invalid namespace label {label!r} in {namespace}: "
                                        "labels are non-empty strings without '.' or NUL")


def _check_key(key: Any) -> str:
    if not isinstance(key, str) or not key.strip() or key != key.strip():
        raise InvalidInput(f"an item's key is a non-empty string without surrounding spaces "
                           f"(a gem topic title); got {key!r}")
    return key


def _check_page(limit: Any, offset: Any) -> None:
    for name, number in (("limit", limit), ("offset", offset)):
        if not isinstance(number, int) or isinstance(number, bool) or number < 0:
            raise InvalidInput(f"{name} must be an integer >= 0, got {number!r}")


def _check_filter(want: Any) -> None:
    if isinstance(want, Mapping):
        for name, inner in want.items():
            if isinstance(name, str) and name.startswith("$") and name not in _OPERATORS:
                raise InvalidInput(f"unknown filter operator {name!r}; one of "
                                   f"{', '.join(_OPERATORS)}")
            _check_filter(inner)
    elif isinstance(want, (list, tuple)):
        for inner in want:
            _check_filter(inner)


def _matches_filter(value: dict[str, Any], want: Mapping[str, Any] | None) -> bool:
    return not want or all(_matches(value.get(name), w) for name, w in want.items())


def _matches(value: Any, want: Any) -> bool:
    """LangGraph's filter semantics (as its stores apply them, like JSONB containment)."""
    if isinstance(want, Mapping):
        if any(isinstance(name, str) and name.startswith("$") for name in want):
            return all(_compare(value, op, arg) for op, arg in want.items())
        return isinstance(value, Mapping) and all(_matches(value.get(n), w)
                                                  for n, w in want.items())
    if isinstance(want, (list, tuple)):
        return isinstance(value, (list, tuple)) and len(value) == len(want) and \
            all(_matches(v, w) for v, w in zip(value, want))
    return bool(value == want)


def _compare(value: Any, op: str, arg: Any) -> bool:
    if op == "$eq":
        return bool(value == arg)
    if op == "$ne":
        return bool(value != arg)
    try:  # a value that is not a number matches no order comparison
        x, y = float(value), float(arg)
    except (TypeError, ValueError):
        return False
    return {"$gt": x > y, "$gte": x >= y, "$lt": x < y, "$lte": x <= y}[op]


def _matches_path(condition: MatchCondition, namespace: tuple[str, ...]) -> bool:
    path = tuple(condition.path)
    if len(namespace) < len(path):
        return False
    part = namespace[:len(path)] if condition.match_type == "prefix" else \
        namespace[len(namespace) - len(path):]
    return all(p == "*" or p == label for p, label in zip(path, part))


def _value(fields: Iterable[FieldView]) -> dict[str, Any]:
    """The item's value: each field with a current (not retracted) value."""
    return {f.name: f.value for f in fields if f.retracted is None and f.value is not None}


def _times(histories: list[list[HistoryEntry]]) -> tuple[datetime, datetime]:
    """When the item was first written, and last written (a put that corroborates a value
    moves its latest statement; one that leaves a key out writes a retraction)."""
    entries = [entry for history in histories for entry in history]
    return (min(e.recorded_at for e in entries),
            max(max(e.asserted_at, e.recorded_at) for e in entries))


def _search_item(namespace: tuple[str, ...], topic: TopicView) -> SearchItem | None:
    value = _value(topic.fields.values())
    if not value:
        return None
    scores = [f.score for f in topic.fields.values() if f.score is not None]
    score = topic.score if topic.score is not None else max(scores, default=None)
    created, updated = _times([f.history or [] for f in topic.fields.values()])
    return SearchItem(namespace=namespace, key=topic.title, value=value, created_at=created,
                      updated_at=updated, score=score)
