"""The policy set in force: its trigger graph (events, policies, actions, cascades), the
policies, their sources and `gem policy explain`."""
from __future__ import annotations

from pathlib import Path

from ...memory import Memory
from ...policy import catalogue, compose, explain, parse_all
from ...policy.cascades import cascade_edges, unbounded_cycles
from .. import svg
from ..html import card, esc, page, table
from .common import policy_anchor, where_of


def policies(mem: Memory) -> str:
    current = mem.policies
    trees = parse_all([(src.file, src.text) for src in current.sources])
    comp = compose(trees)
    in_force = sorted(comp.policies, key=lambda p: (-p.priority, p.name))
    cycles = unbounded_cycles(cascade_edges(in_force))
    looping = {(e.policy, e.target) for cycle in cycles for e in cycle}
    boxes: list[svg.Box] = []
    arrows: list[svg.Arrow] = []
    # events next to the policies they trigger (by the mean row of those policies)
    row_of = {p.name: i for i, p in enumerate(in_force)}
    listened = sorted({ev for p in in_force for ev in p.events}, key=lambda ev: (
        sum(row_of[p.name] for p in in_force if ev in p.events) /
        sum(1 for p in in_force if ev in p.events), ev))
    for ev in listened:
        event = catalogue.EVENTS.get(ev)
        boxes.append(svg.Box(f"event:{ev}", ev, 0, "event", event.doc if event else "unknown event"))
    actions: dict[str, None] = {}
    emitted: dict[str, None] = {}
    for p in in_force:
        boxes.append(svg.Box(f"policy:{p.name}", p.name + (f" [{p.priority}]" if p.priority else ""),
                             1, "policy", f"POLICY {p.name}: ON {', '.join(p.events)} DO "
                             f"{', '.join(a.name for a in p.actions)}", "#" + policy_anchor(p.name)))
        for ev in p.events:
            arrows.append(svg.Arrow(f"event:{ev}", f"policy:{p.name}", "listens", f"{ev} triggers {p.name}"))
        for a in dict.fromkeys(a.name for a in p.actions):
            actions[a] = None
            arrows.append(svg.Arrow(f"policy:{p.name}", f"action:{a}", "does", f"{p.name} does {a}"))
            sig = catalogue.ACTIONS.get(a)
            for ev in sorted(sig.emits) if sig else ():
                emitted[ev] = None
    for a in actions:
        sig = catalogue.ACTIONS.get(a)
        boxes.append(svg.Box(f"action:{a}", a, 2, "action", sig.doc if sig else "unknown action"))
        for ev in sorted(sig.emits) if sig else ():
            arrows.append(svg.Arrow(f"action:{a}", f"emitted:{ev}", "emits", f"{a} may emit {ev}"))
    for ev in emitted:
        triggers = [p.name for p in in_force if ev in p.events]
        tip = f"{ev} triggers {', '.join(triggers)} (a cascade)" if triggers else \
            f"{ev}: no policy listens"
        boxes.append(svg.Box(f"emitted:{ev}", ev, 3, "emitted", tip, strong=bool(triggers)))
        for name in triggers:
            kind = "loop" if any(target == ev for _, target in looping) else "emits"
            arrows.append(svg.Arrow(f"emitted:{ev}", f"event:{ev}", kind,
                                    f"{ev} cascades into {name}"))
    graph_svg = svg.layered(["event", "policy (priority)", "action", "may emit"], boxes, arrows)
    legend = ('<div class="legend"><span><i class="sw" style="background:#94a3b8"></i>triggers</span>'
              '<span><i class="sw" style="background:#2563eb"></i>does</span>'
              '<span><i class="sw" style="background:#7c3aed"></i>may emit (back to the events: a '
              'cascade)</span><span><i class="sw" style="background:#dc2626"></i>unbounded loop'
              '</span></div>')
    rows = [[f'<a id="{esc(policy_anchor(p.name))}"></a><b>{esc(p.name)}</b>',
             esc(p.priority), esc(", ".join(sorted(p.events))), esc(", ".join(p.actions)),
             f'<code class="muted">{esc(p.source_hash[:12])}</code>',
             f"<details><summary>source</summary><pre>{esc(p.source)}</pre></details>"]
            for p in current.policies]
    sources = "".join(f"<details><summary>{esc(Path(src.file).name)} "
                      f'<span class="muted">{len(src.text.splitlines())} lines · '
                      f'{esc(src.hash[:12])}</span></summary><pre>{esc(src.text)}</pre></details>'
                      for src in current.sources)
    warnings = "".join(f"<li>{esc(w.render())}</li>" for w in current.warnings)
    body = (card("Trigger graph", legend + graph_svg)
            + card(f"Policies in force ({len(current.policies)})",
                   table(["policy", "priority", "events", "actions", "hash", ""], rows)
                   + (f"<h3>Warnings</h3><ul>{warnings}</ul>" if warnings else ""))
            + card("Sources, in composition order", sources)
            + card("gem policy explain", f"<pre>{esc(explain(trees))}</pre>"))
    return page("Policies", body, active="/policies", where=where_of(mem),
                subtitle=f"The policy set in force (hash {esc(current.hash[:16])}): which events "
                         "trigger which policies and what may cascade.")
