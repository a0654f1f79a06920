"""The context receipt: what one LLM node was sent, in order, with origins, tokens and a budget bar."""

from __future__ import annotations

import json

import plotly.graph_objects as go
import streamlit as st

from core.debug_view import Receipt
from core.ledger import Ledger
from ui.html import ORIGIN_COLOUR, origin_chip, tokens

DROPPED_COLOUR = "#ef4444"


def budget_figure(r: Receipt) -> go.Figure:
    """Used tokens per origin as one stacked bar, dropped tokens as overflow, limits as lines."""
    fig = go.Figure()
    for origin, n in r.used_by_origin.items():
        fig.add_bar(y=["prompt"], x=[n], name=origin, orientation="h",
                    marker_color=ORIGIN_COLOUR.get(origin, "#374151"),
                    hovertemplate=f"{origin}: %{{x:,}} tokens<extra></extra>")
    if r.dropped_tokens:
        detail = ", ".join(f"{k.replace('_', ' ')} {v:,}" for k, v in r.dropped_by_reason.items())
        fig.add_bar(y=["prompt"], x=[r.dropped_tokens], name="dropped (overflow)", orientation="h",
                    marker_color=DROPPED_COLOUR, marker_pattern_shape="/", opacity=0.55,
                    hovertemplate=f"dropped: %{{x:,}} tokens ({detail})<extra></extra>")
    fixed = r.prompt_tokens - r.used_by_origin.get("memory history", 0) - r.used_by_origin.get("summary", 0)
    if r.limit is not None:
        fig.add_vline(x=fixed + r.limit, line_dash="dash", line_color="#b45309",
                      annotation_text=f"history budget {r.limit:,}", annotation_position="top")
    if r.context_size:
        fig.add_vline(x=r.context_size, line_dash="dot", line_color="#374151",
                      annotation_text=f"context {r.context_size:,}", annotation_position="bottom")
    fig.update_layout(barmode="stack", height=170, margin=dict(l=10, r=10, t=30, b=10), showlegend=True,
                      legend=dict(orientation="h", y=-0.35), xaxis_title=None, yaxis_visible=False)
    return fig


def render_receipt(r: Receipt, ledger: Ledger | None, *, key: str, what_if: bool = False) -> None:
    label = "exact" if r.exact else "estimated"
    st.caption(f"{len(r.rows)} messages · {r.prompt_tokens:,} prompt tokens · tokens {label} ({r.encoding})"
               + (f" · model {r.model}" if r.model else ""))
    if what_if:
        st.warning("What-if: history recomputed under the switchboard's settings; the other messages are as recorded.")
    if r.budget_note:
        st.caption(f"Budget: {r.budget_note}")
    st.plotly_chart(budget_figure(r), key=f"{key}-budget", config={"displayModeBar": False})
    expand_all = st.toggle("Expand all messages", key=f"{key}-expand")
    for i, row in enumerate(r.rows):
        head = f"{origin_chip(row.origin)} **{row.role}** {tokens(row.tokens, r.exact)}"
        is_history = row.origin == "memory history"
        newest = i == len(r.rows) - 1
        with st.container(border=True):
            st.markdown(head, unsafe_allow_html=True)
            if is_history and not expand_all and not newest:
                first = row.content.strip().splitlines()[0] if row.content.strip() else ""
                st.text(first[:140] + ("…" if len(first) > 140 or "\n" in row.content.strip() else ""))
            else:
                st.text(row.content)
    if r.reply is not None:
        st.markdown("**Reply**")
        st.text(r.reply)
    for note in r.notes:
        st.caption(note)
    with st.expander("Raw JSON"):
        doc = {"prompt": [{"role": x.role, "origin": x.origin, "tokens": x.tokens, "content": x.content}
                          for x in r.rows]}
        if ledger is not None:
            doc["ledger"] = {"turn": ledger.turn, "budget": ledger.budget, "history_tokens": ledger.history_tokens,
                             "prompt_tokens": ledger.prompt_tokens, "config": ledger.config,
                             "entries": [e.to_json() for e in ledger.entries]}
        st.code(json.dumps(doc, ensure_ascii=False, indent=1), language="json")
