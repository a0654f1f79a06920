"""A small overview of the turn tree with the active path highlighted.

Long linear runs (turns with one parent and one child) collapse into a dotted edge that says how
many turns it stands for, so the figure grows with the number of branches, not the conversation's
length.
"""

from __future__ import annotations

from html import escape

import plotly.graph_objects as go

from core.analysis import TreeNode
from core.words import distinct, plural

KEEP_NEWEST = 5  # the newest turns of the active thread stay dots even in a linear run
MAX_TICKS = 12  # a short thread gets a tick per turn; a longer one, Plotly's own (whole) steps


def collapse(nodes: list[TreeNode], *, keep_newest: int = KEEP_NEWEST) -> list[TreeNode]:
    """The nodes worth a dot: roots, branch points, each branch's first and last turn, and the
    newest turns of the active thread."""
    children: dict[int, int] = {}
    for n in nodes:
        if n.parent is not None:
            children[n.parent] = children.get(n.parent, 0) + 1
    newest = {n.position for n in sorted((n for n in nodes if n.active), key=lambda n: n.x)[-keep_newest:]}
    return [
        n
        for n in nodes
        if n.parent is None
        or children.get(n.position, 0) != 1
        or children.get(n.parent, 0) != 1
        or n.position in newest
    ]


def tree_figure(nodes: list[TreeNode], *, max_nodes: int = 400) -> go.Figure:
    """Turns as dots by depth (x) and branch (y); edges to parents; the active thread in colour."""
    all_nodes = {n.position: n for n in nodes}
    nodes = collapse(nodes)
    if len(nodes) > max_nodes:  # a very bushy tree: keep its newest part readable
        keep = {n.position for n in sorted(nodes, key=lambda n: n.position)[-max_nodes:]}
        nodes = [n for n in nodes if n.position in keep]
    drawn = {n.position for n in nodes}
    ex, ey, ax, ay, gx, gy, gap_x, gap_y, gap_text = [], [], [], [], [], [], [], [], []
    for n in nodes:
        gap, p = 0, all_nodes.get(n.parent) if n.parent is not None else None
        while p is not None and p.position not in drawn:  # the turns a dotted edge stands for
            gap += 1
            p = all_nodes.get(p.parent) if p.parent is not None else None
        if p is None:
            continue
        if gap:
            xs, ys = gx, gy
            gap_x.append((p.x + n.x) / 2)
            gap_y.append((p.y + n.y) / 2)
            gap_text.append(f"{plural(gap, 'turn')} in a row, not drawn")
        else:
            xs, ys = (ax, ay) if (n.active and p.active) else (ex, ey)
        xs += [p.x, n.x, None]
        ys += [p.y, n.y, None]
    fig = go.Figure()
    fig.add_scatter(x=ex, y=ey, mode="lines", line=dict(color="#d1d5db", width=1), hoverinfo="skip", showlegend=False)
    fig.add_scatter(x=ax, y=ay, mode="lines", line=dict(color="#059669", width=3), hoverinfo="skip", showlegend=False)
    if gx:
        fig.add_scatter(
            x=gx,
            y=gy,
            mode="lines",
            line=dict(color="#9ca3af", width=2, dash="dot"),
            hoverinfo="skip",
            showlegend=False,
        )
        # A line-shaped marker is drawn by its outline alone: without one the legend shows nothing.
        fig.add_scatter(
            x=gap_x,
            y=gap_y,
            mode="markers",
            marker=dict(color="#9ca3af", size=8, symbol="line-ns", line=dict(color="#9ca3af", width=2)),
            text=gap_text,
            hovertemplate="%{text}<extra></extra>",
            name="collapsed run",
        )
    for active, colour, name in ((False, "#9ca3af", "other branches"), (True, "#059669", "active thread")):
        group = [n for n in nodes if n.active == active]
        fig.add_scatter(
            x=[n.x for n in group],
            y=[n.y for n in group],
            mode="markers",
            name=name,
            marker=dict(color=colour, size=10 if active else 8),
            text=[escape(n.label) for n in group],
            hovertemplate="%{text}<extra></extra>",
            customdata=[n.turn_id for n in group],
        )
    # Turns are counted as their labels count them (the first question is turn 1), in whole numbers:
    # a tick per turn on a short thread, where Plotly's own ticks fall on halves ("1 2 2 3 3" once
    # rounded); the legend sits above the plot, clear of the axis title.
    xs = [n.x for n in nodes]
    per_turn = bool(xs) and max(xs) - min(xs) <= MAX_TICKS
    fig.update_layout(
        height=240,
        margin=dict(l=10, r=10, t=30, b=10),
        xaxis=dict(title="turn on its thread", tickformat="d", dtick=1 if per_turn else None),
        yaxis=dict(visible=False, autorange="reversed"),
        legend=dict(orientation="h", x=0, y=1.02, yanchor="bottom"),
    )
    return fig


def branch_figure(conversation, thread: list[int]) -> go.Figure:
    """The tree of ``conversation`` with ``thread`` (positions) as the active path."""
    from core.analysis import tree_layout

    return tree_figure(tree_layout(conversation, thread))


def render_branches(
    conversation, thread: list[int], *, on_switch, keys: tuple[str, str, str], figure: go.Figure | None = None
) -> None:
    """The Branches tab: the tree, a picker of the branch to follow and the counts. ``keys`` are the
    chart's, the picker's and the button's widget keys; ``on_switch(turn_id)`` follows another branch;
    ``figure``: the tree already drawn (a cached :func:`branch_figure`)."""
    import streamlit as st

    from core.model import leaves as branch_ends
    from core.model import turn_label

    if not conversation.turns:
        return
    chart_key, picker_key, button_key = keys
    st.plotly_chart(figure or branch_figure(conversation, thread), key=chart_key, config={"displayModeBar": False})
    ends = branch_ends(conversation)
    turns = conversation.turns
    labels = distinct({turns[i].id: f"…{turn_label(conversation, i)}: {turns[i].query[:50]}" for i in ends})
    current = turns[thread[-1]].id
    pick = st.selectbox(
        "Switch to the branch ending at",
        list(labels),
        format_func=labels.get,
        index=list(labels).index(current) if current in labels else 0,
        key=picker_key,
    )
    if pick != current and st.button("Switch branch", key=button_key):
        on_switch(pick)
    st.caption(
        f"{plural(len(turns), 'turn')} in all, {plural(len(ends), 'branch', 'branches')}; "
        "off-branch turns never reach memory."
    )
