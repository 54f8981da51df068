"""Cascades between policies: which event a policy's actions may emit back (the cascade
graph), and the cycles in it nothing bounds, which the check stage refuses and explain and
the dashboard show."""
from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from typing import Iterable

from . import ast as A
from . import catalogue as C
from .ast import positive_exists


@dataclass(frozen=True)
class CascadeEdge:
    """Policy `policy` (triggered by `source`) runs `action`, which may emit `target`."""

    source: str
    policy: str
    action: str
    target: str
    # True when the action acts on an element of dependent_topic: each step then moves
    # to a new topic along EXTENDS and the engine flags a topic once per transition,
    # so a cycle through this edge is bounded.
    bounded: bool
    span: A.Span = field(compare=False)


def cascade_edges(policies: Iterable[A.Policy]) -> list[CascadeEdge]:
    """event -> policy -> (events its actions may emit), for known events and actions."""
    edges = []
    for p in policies:
        safe_vars = {
            ex.var for ex in positive_exists(p.condition)
            if (ex.source is None and ex.var == "dependent_topic")
            or (isinstance(ex.source, A.Name) and ex.source.id == "dependent_topic")
        }
        for a in p.actions:
            sig = C.ACTIONS.get(a.name)
            if sig is None:
                continue
            bounded = any(isinstance(x, A.Name) and x.id in safe_vars for x in a.args)
            for source in p.events:
                if source not in C.EVENTS:
                    continue
                for target in sorted(sig.emits):
                    edges.append(CascadeEdge(source, p.name, a.name, target, bounded, a.span))
    return edges


def unbounded_cycles(edges: list[CascadeEdge]) -> list[list[CascadeEdge]]:
    """One concrete cycle per strongly connected component of the unbounded edges."""
    graph: dict[str, list[CascadeEdge]] = defaultdict(list)
    for e in edges:
        if not e.bounded:
            graph[e.source].append(e)
    cycles = []
    for comp in _sccs(graph):
        start = min(comp)
        path = _cycle_from(start, graph, comp)
        if path:
            cycles.append(path)
    return cycles


def _sccs(graph: dict[str, list[CascadeEdge]]) -> list[set[str]]:
    """Tarjan's algorithm, iterative (cascade graphs are tiny, but recursion is no tool for a library)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    on_stack: set[str] = set()
    stack: list[str] = []
    out: list[set[str]] = []
    counter = 0
    nodes = sorted(set(graph) | {e.target for es in graph.values() for e in es})
    for root in nodes:
        if root in index:
            continue
        work = [(root, iter(graph.get(root, [])))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on_stack.add(root)
        while work:
            node, it = work[-1]
            advanced = False
            for e in it:
                w = e.target
                if w not in index:
                    index[w] = low[w] = counter
                    counter += 1
                    stack.append(w)
                    on_stack.add(w)
                    work.append((w, iter(graph.get(w, []))))
                    advanced = True
                    break
                if w in on_stack:
                    low[node] = min(low[node], index[w])
            if advanced:
                continue
            work.pop()
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[node])
            if low[node] == index[node]:
                comp = set()
                while True:
                    w = stack.pop()
                    on_stack.discard(w)
                    comp.add(w)
                    if w == node:
                        break
                looped = len(comp) > 1 or any(e.target == node for e in graph.get(node, []))
                if looped:
                    out.append(comp)
    return out


def _cycle_from(start: str, graph, comp: set[str]) -> list[CascadeEdge]:
    # Breadth-first: the shortest way back to `start` inside the component.
    frontier: list[tuple[str, list[CascadeEdge]]] = [(start, [])]
    seen = {start}
    while frontier:
        nxt = []
        for node, path in frontier:
            for e in sorted(graph.get(node, []), key=lambda e: (e.target, e.policy, e.action)):
                if e.target == start:
                    return path + [e]
                if e.target in comp and e.target not in seen:
                    seen.add(e.target)
                    nxt.append((e.target, path + [e]))
        frontier = nxt
    return []  # pragma: no cover - every component handed in has a cycle


def describe_cycle(path: list[CascadeEdge]) -> str:
    parts = [f"'{e.policy}' -[{e.action}]-> {e.target}" for e in path]
    # Close the loop on the policy the first event triggers, so the cycle reads whole.
    return " -> ".join(parts) + f" -> '{path[0].policy}'"
