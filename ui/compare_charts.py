"""Per-turn line charts across configs: kept messages, history tokens against the budget, and the
oldest turn still remembered."""

from __future__ import annotations

from html import escape

import plotly.graph_objects as go
import streamlit as st

from core.compare import Comparison
from core.report import CONFIG_COLOURS


def _figure(title: str, y_title: str) -> go.Figure:
    fig = go.Figure()
    fig.update_layout(title=dict(text=title, font=dict(size=14)), height=300, margin=dict(l=10, r=10, t=40, b=30),
                      xaxis_title="turn", yaxis_title=y_title, legend=dict(orientation="h", y=-0.25),
                      hovermode="x unified")
    return fig


def kept_figure(comparison: Comparison) -> go.Figure:
    fig = _figure("Messages kept", "messages")
    for i, s in enumerate(comparison.series):
        fig.add_scatter(x=s.turns, y=s.kept, mode="lines+markers", name=escape(s.label),
                        line=dict(color=CONFIG_COLOURS[i % 6]), marker=dict(size=4))
    return fig


def tokens_figure(comparison: Comparison) -> go.Figure:
    fig = _figure("History tokens vs budget (dashed)", "tokens")
    for i, s in enumerate(comparison.series):
        colour = CONFIG_COLOURS[i % 6]
        fig.add_scatter(x=s.turns, y=s.history_tokens, mode="lines", name=escape(s.label), line=dict(color=colour))
        if any(b is not None for b in s.budget):
            fig.add_scatter(x=s.turns, y=s.budget, mode="lines", name=escape(f"{s.label} budget"),
                            line=dict(color=colour, dash="dash"), visible="legendonly"
                            if max(b for b in s.budget if b is not None) > 3 * max(max(s.history_tokens), 1)
                            else True)
    return fig


def oldest_figure(comparison: Comparison) -> go.Figure:
    fig = _figure("Oldest turn still remembered", "turn")
    for i, s in enumerate(comparison.series):
        fig.add_scatter(x=s.turns, y=s.oldest_kept_turn, mode="lines+markers", name=escape(s.label),
                        line=dict(color=CONFIG_COLOURS[i % 6]), marker=dict(size=4), connectgaps=False)
    return fig


def render_series(comparison: Comparison, *, key: str) -> None:
    cols = st.columns(3)
    for col, (name, make) in zip(cols, (("kept", kept_figure), ("tokens", tokens_figure),
                                        ("oldest", oldest_figure))):
        with col:
            st.plotly_chart(make(comparison), key=f"{key}-{name}", config={"displayModeBar": False})
    st.caption("A budget far above the history is hidden at first: click its name in the legend to show it.")
