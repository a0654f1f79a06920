"""Whether a turn can walk a flow's graph: every node reached from Start, and no cycle (named by the edge that
closes it)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from .errors import FlowError

if TYPE_CHECKING:  # pragma: no cover
    from .graph import Flow


def check_paths(flow: Flow, file: str) -> None:
    """Refuse a graph a turn cannot walk: a cycle (Dify refuses one when it builds the graph; here its
    nodes would wait for each other and never run, so every turn would end with an empty answer) or a
    node no path from Start reaches (it would never run). Nodes inside an iteration or loop are left out:
    their container runs them, and MemLens does not."""
    outgoing: dict[str, list[str]] = {n.id: [] for n in flow.nodes if not n.container}
    for e in flow.edges:
        if e.source in outgoing and e.target in outgoing:
            outgoing[e.source].append(e.target)
    start = flow.start.id
    # Depth first from Start, iteratively; an edge to a node still on the path closes a cycle.
    path, on_path, seen = [start], {start}, {start}
    stack = [iter(outgoing[start])]
    while stack:
        target = next(stack[-1], None)
        if target is None:
            stack.pop()
            on_path.discard(path.pop())
            continue
        if target in on_path:
            loop = " → ".join(path[path.index(target) :] + [target])
            raise FlowError(
                f"{file}: the edge {path[-1]!r} → {target!r} makes a cycle ({loop}); a turn runs each node "
                f"once, from Start on, so remove that edge (Dify's Loop node repeats steps)"
            )
        if target not in seen:
            seen.add(target)
            path.append(target)
            on_path.add(target)
            stack.append(iter(outgoing[target]))
    stray = next((n for n in flow.nodes if n.id in outgoing and n.id not in seen), None)
    if stray is not None:
        raise FlowError(
            f"{file}: node {stray.id!r} ({stray.type}) is not reached from the Start node: no edge path "
            f"leads to it, so it would never run; connect it or delete it"
        )


__all__ = ["check_paths"]
