"""A small overview of the turn tree with the active path highlighted."""

from __future__ import annotations

from html import escape

import plotly.graph_objects as go

from core.debug_view import TreeNode


def tree_figure(nodes: list[TreeNode], *, max_nodes: int = 400) -> go.Figure:
    """Turns as dots by depth (x) and branch (y); edges to parents; the active thread in colour."""
    if len(nodes) > max_nodes:  # keep the newest part of a very long tree readable
        keep = {n.position for n in sorted(nodes, key=lambda n: n.position)[-max_nodes:]}
        nodes = [n for n in nodes if n.position in keep]
    by_pos = {n.position: n for n in nodes}
    ex, ey, ax, ay = [], [], [], []
    for n in nodes:
        parent = by_pos.get(n.parent) if n.parent is not None else None
        if parent is None:
            continue
        xs, ys = (ax, ay) if (n.active and parent.active) else (ex, ey)
        xs += [parent.x, n.x, None]
        ys += [parent.y, n.y, None]
    fig = go.Figure()
    fig.add_scatter(x=ex, y=ey, mode="lines", line=dict(color="#d1d5db", width=1), hoverinfo="skip",
                    showlegend=False)
    fig.add_scatter(x=ax, y=ay, mode="lines", line=dict(color="#059669", width=3), hoverinfo="skip",
                    showlegend=False)
    for active, colour, name in ((False, "#9ca3af", "other branches"), (True, "#059669", "active thread")):
        group = [n for n in nodes if n.active == active]
        fig.add_scatter(x=[n.x for n in group], y=[n.y for n in group], mode="markers", name=name,
                        marker=dict(color=colour, size=10 if active else 8),
                        text=[escape(n.label) for n in group], hovertemplate="%{text}<extra></extra>",
                        customdata=[n.turn_id for n in group])
    fig.update_layout(height=220, margin=dict(l=10, r=10, t=10, b=10), xaxis_title="turn on its thread",
                      yaxis=dict(visible=False, autorange="reversed"), legend=dict(orientation="h", y=-0.3))
    return fig
