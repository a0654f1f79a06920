"""The context receipt: what one LLM node was sent, in order, with origins, tokens and a budget bar."""

from __future__ import annotations

import json
from html import escape

import plotly.graph_objects as go
import streamlit as st

from core.analysis import Receipt
from core.model import HISTORY, REASON_LABELS, REASONS, SUMMARY, Ledger, origin_colour, origin_label
from core.words import plural
from ui.html import origin_chip, plain, safe_text, tokens
from ui.paging import page_slice

#: Under *Reply* when the turn recorded an empty one (no answer, or only tool steps).
NO_REPLY = "No reply text was recorded for this turn."

DROPPED_COLOUR = "#ef4444"
RECEIPT_PAGE = 30  # memory-history messages shown at once


def budget_figure(r: Receipt) -> go.Figure:
    """Used tokens per origin as one stacked bar, dropped tokens after them, the history budget as a line.

    The scale is what the budget is about — the prompt, the dropped tokens and the budget line — not the
    whole context window, where a prompt of a few hundred tokens would be a sliver; the context is
    summarised in words under the bar (:func:`context_summary`) unless it is on the scale anyway.
    The legend sits under the axis, outside the plot, and the two labels sit on opposite sides."""
    fig = go.Figure()
    for origin, n in r.used_by_origin.items():
        fig.add_bar(
            y=["prompt"],
            x=[n],
            name=escape(origin_label(origin)),
            orientation="h",
            marker_color=origin_colour(origin),
            hovertemplate=f"{escape(origin_label(origin)).replace('%', '&#37;')}: %{{x:,}} tokens<extra></extra>",
        )
    if r.dropped_tokens:
        # Named "dropped", not "overflow": a window or granularity drops messages with no budget at
        # all. Its reasons are in the hover and under the chart (:func:`dropped_summary`): in the
        # legend they made one item too wide for the side column, and the legend covered the axis.
        detail = escape(_by_reason(r)).replace("%", "&#37;")
        fig.add_bar(
            y=["prompt"],
            x=[r.dropped_tokens],
            name="dropped",
            orientation="h",
            marker_color=DROPPED_COLOUR,
            marker_pattern_shape="/",
            opacity=0.55,
            hovertemplate=f"dropped: %{{x:,}} tokens ({detail})<extra></extra>",
        )
    fixed = r.prompt_tokens - r.used_by_origin.get(HISTORY, 0) - r.used_by_origin.get(SUMMARY, 0)
    budget_end = fixed + r.limit if r.limit is not None else None
    scale = max(sum(r.used_by_origin.values()) + r.dropped_tokens, budget_end or 0, 1) * 1.1
    if budget_end is not None:
        fig.add_vline(
            x=budget_end,
            line_dash="dash",
            line_color="#b45309",
            annotation_text=f"history budget {r.limit:,}",
            annotation_position="top left",
        )
    if r.context_size and r.context_size <= scale:
        fig.add_vline(
            x=r.context_size,
            line_dash="dot",
            line_color="#374151",
            annotation_text=f"context {r.context_size:,}",
            annotation_position="bottom right",
        )
    fig.update_layout(
        barmode="stack",
        height=160,
        margin=dict(l=10, r=10, t=28, b=10),
        showlegend=True,
        legend=dict(orientation="h", yanchor="top", y=-0.45, xanchor="left", x=0),
        xaxis=dict(range=[0, scale], title=None, tickformat=",d"),
        yaxis_visible=False,
    )
    return fig


def _by_reason(r: Receipt) -> str:
    """The dropped tokens per reason, in the pipeline's order and the ledger's words."""
    reasons = sorted(r.dropped_by_reason, key=lambda k: REASONS.index(k) if k in REASONS else len(REASONS))
    return ", ".join(f"{REASON_LABELS.get(k, k.replace('_', ' '))} {r.dropped_by_reason[k]:,}" for k in reasons)


def dropped_summary(r: Receipt) -> str:
    """What the dropped bar stands for, in words: "Dropped 812 tokens: intermediate message 700, …"."""
    return f"Dropped {r.dropped_tokens:,} tokens: {_by_reason(r)}." if r.dropped_tokens else ""


def context_summary(r: Receipt) -> str:
    """The context window in words, for when it is far off the bar's scale."""
    if not r.context_size:
        return "Context size unknown."
    free = max(r.context_size - r.prompt_tokens, 0)
    share = r.prompt_tokens / r.context_size
    return f"Context {r.context_size:,} tokens: this call used {r.prompt_tokens:,} ({share:.0%}), {free:,} were left."


def receipt_caption(r: Receipt) -> str:
    """The receipt's first line: how many messages and tokens the call sent, how they were counted."""
    counted = (
        f"{plural(len(r.rows), 'message')} · {plural(r.prompt_tokens, 'prompt token')} · tokens "
        f"{'exact' if r.exact else 'estimated'} ({r.encoding})"
    )
    if r.configured_model:  # another model answered: the counts are still the node's own model's
        return f"{counted} for the node's model {r.configured_model} · answered by {r.model} in its place"
    return counted + (f" · model {r.model}" if r.model else "")


def render_receipt(r: Receipt, ledger: Ledger | None, *, key: str, what_if: bool = False) -> None:
    """The receipt: what was sent and how it was counted, the budget bar, the messages in order, the reply;
    then how Dify's docs would differ (after the receipt: what the turn did comes first)."""
    st.caption(plain(receipt_caption(r) + (f" · Dify memory rules: {r.profile}" if r.profile else "")))
    if what_if:
        st.warning("What-if: history recomputed under the switchboard's settings; the other messages are as recorded.")
    st.plotly_chart(budget_figure(r), key=f"{key}-budget", config={"displayModeBar": False})
    st.caption(
        plain(
            " ".join(filter(None, [dropped_summary(r), context_summary(r)]))
            + (f" Budget: {r.budget_note}" if r.budget_note else "")
            + ("" if r.limit is not None or r.budget_note else " No history budget: nothing is pruned by tokens.")
        )
    )
    expand_all = st.toggle("Expand all messages", key=f"{key}-expand")
    history = [i for i, row in enumerate(r.rows) if row.origin == HISTORY]
    # A long history shows one page of messages (the newest first); the others are one click away.
    shown = set(history[page_slice(len(history), RECEIPT_PAGE, key=f"{key}-page", noun="memory-history messages")])
    skipped = 0
    for i, row in enumerate(r.rows):
        is_history = row.origin == HISTORY
        if is_history and i not in shown:
            skipped += 1
            continue
        if skipped:
            st.caption(f"… {skipped:,} memory-history messages on other pages")
            skipped = 0
        head = f"{origin_chip(row.origin)} **{plain(row.role)}** {tokens(row.tokens, r.exact)}"
        newest = i == len(r.rows) - 1
        with st.container(border=True):
            st.markdown(head, unsafe_allow_html=True)
            if is_history and not expand_all and not newest:
                st.text(first_line(row.content))
            else:
                st.text(row.content)
            if row.history_tokens:
                st.caption(
                    f"{row.history_tokens:,} of its tokens are the memory history's lines (counted as "
                    "memory history in the bar above)."
                )
            for part in row.parts:
                how = "estimated" if part.get("estimated") else "exact"
                st.caption(
                    plain(f"{part.get('type')} · {part.get('name') or ''} · {part.get('tokens', 0):,} tokens ({how})")
                )
    if skipped:
        st.caption(f"… {skipped:,} memory-history messages on other pages")
    if r.reply is not None:
        st.markdown("**Reply**")
        if r.reply:
            st.text(r.reply)
        else:
            st.caption(NO_REPLY)
    for note in r.notes:
        st.caption(plain(note))
    if r.docs_vs_code:
        st.markdown(
            f'<div data-kind="docs_vs_code">ℹ️ <b>Dify\'s docs and code disagree</b><br>'
            f"{safe_text(r.docs_vs_code)}</div>",
            unsafe_allow_html=True,
        )
        for turn, role, decisions in r.both:
            st.caption(plain(f"turn {turn} {role}: {decisions}"))
    # Built only when clicked: the whole ledger of a long conversation is megabytes of JSON.
    st.download_button(
        "Raw JSON: the prompt and the full ledger",
        data=lambda: raw_json(r, ledger),
        file_name=f"{key}.json",
        mime="application/json",
        key=f"{key}-raw",
        on_click="ignore",
        icon=":material/download:",
    )


def first_line(content: str, width: int = 140) -> str:
    """A folded history message's first line: cut inside the line, "…" goes on from the word; more
    lines after a whole one, " …" stands apart (after a full stop, "….…" read as a typo)."""
    text = content.strip()
    first = text.splitlines()[0] if text else ""
    if len(first) > width:
        return first[:width] + "…"
    return first + (" …" if "\n" in text else "")


def raw_json(r: Receipt, ledger: Ledger | None) -> str:
    """The receipt as JSON: every prompt message and, for a node with memory, its whole ledger."""
    doc = {"prompt": [{"role": x.role, "origin": x.origin, "tokens": x.tokens, "content": x.content} for x in r.rows]}
    if ledger is not None:
        doc["ledger"] = {
            "turn": ledger.turn,
            "budget": ledger.budget,
            "history_tokens": ledger.history_tokens,
            "prompt_tokens": ledger.prompt_tokens,
            "config": ledger.config,
            "entries": [e.to_json() for e in ledger.entries],
        }
    return json.dumps(doc, ensure_ascii=False, indent=1)
