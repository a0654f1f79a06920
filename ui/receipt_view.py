"""The context receipt: what one LLM node was sent, in order, with origins, tokens and a budget bar."""

from __future__ import annotations

import json
from dataclasses import dataclass

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


@dataclass(frozen=True)
class Segment:
    """One stretch of the budget bar: an origin's tokens, or the dropped tokens after them."""

    label: str
    tokens: int
    colour: str
    hover: str
    dropped: bool = False


@dataclass(frozen=True)
class Line:
    """A mark across the bar at ``at`` tokens: the history budget's end (dashed, its label above the bar) or the
    context window (dotted, its label under the bar)."""

    at: int
    label: str
    kind: str  # "budget" or "context"


@dataclass(frozen=True)
class BudgetBar:
    """The receipt's bar: its segments in order, its lines, and the token count its full width stands for."""

    segments: list[Segment]
    lines: list[Line]
    scale: float


def budget_bar(r: Receipt) -> BudgetBar:
    """Used tokens per origin as one stacked bar, dropped tokens after them, the history budget as a line.

    The scale is what the budget is about — the prompt, the dropped tokens and the budget line — not the
    whole context window, where a prompt of a few hundred tokens would be a sliver; the context is
    summarised in words under the bar (:func:`context_summary`) unless it is on the scale anyway.
    E.g. 155 prompt tokens and 60 dropped under no budget: the bar is 215 × 1.1 tokens wide, and a
    16,384-token context is said in words only."""
    segments = [
        Segment(origin_label(o), n, origin_colour(o), f"{origin_label(o)}: {n:,} tokens")
        for o, n in r.used_by_origin.items()
    ]
    if r.dropped_tokens:
        # Named "dropped", not "overflow": a window or granularity drops messages with no budget at all.
        # Its reasons are in the hover and under the bar (:func:`dropped_summary`).
        hover = f"dropped: {r.dropped_tokens:,} tokens ({_by_reason(r)})"
        segments.append(Segment("dropped", r.dropped_tokens, DROPPED_COLOUR, hover, dropped=True))
    fixed = r.prompt_tokens - r.used_by_origin.get(HISTORY, 0) - r.used_by_origin.get(SUMMARY, 0)
    budget_end = fixed + r.limit if r.limit is not None else None
    scale = max(sum(r.used_by_origin.values()) + r.dropped_tokens, budget_end or 0, 1) * 1.1
    lines = []
    if budget_end is not None:
        lines.append(Line(budget_end, f"history budget {r.limit:,}", "budget"))
    if r.context_size and r.context_size <= scale:
        lines.append(Line(r.context_size, f"context {r.context_size:,}", "context"))
    return BudgetBar(segments, lines, scale)


def budget_html(bar: BudgetBar) -> str:
    """The bar as one HTML block: coloured stretches with their counts on hover, the lines with their labels,
    and a legend of every stretch's tokens under it. Every label is escaped (:func:`ui.html.plain`).

    Plain HTML rather than a chart: it is on the page with the receipt, without a charting library's
    script to fetch and run first, and costs a few elements."""

    def share(tokens: float) -> str:
        return f"{max(0.0, min(tokens / bar.scale, 1.0)) * 100:.2f}%"

    stretches = "".join(
        f'<span class="ml-seg{" ml-seg-dropped" if s.dropped else ""}" style="width:{share(s.tokens)};'
        f'background-color:{s.colour}" title="{plain(s.hover)}"></span>'
        for s in bar.segments
    )
    marks = ""
    for line in bar.lines:
        x = max(0.0, min(line.at / bar.scale, 1.0)) * 100
        # A label runs away from the nearer edge, so it stays inside the bar's width.
        side = f"right:{100 - x:.2f}%" if x > 50 else f"left:{x:.2f}%"
        marks += (
            f'<span class="ml-mark ml-mark-{line.kind}" style="left:{x:.2f}%"></span>'
            f'<span class="ml-mark-label ml-mark-label-{line.kind}" style="{side}">{plain(line.label)}</span>'
        )
    hatched = ' class="ml-seg-dropped"'
    legend = "".join(
        f'<span class="ml-key"><i style="background-color:{s.colour}"{hatched if s.dropped else ""}></i>'
        f"{plain(s.label)} {s.tokens:,}</span>"
        for s in bar.segments
    )
    said = plain("; ".join(s.hover for s in bar.segments) + "".join(f"; {line.label}" for line in bar.lines))
    return (
        f'<div class="ml-budget" role="img" aria-label="{said}"><div class="ml-budget-track">{stretches}{marks}'
        f'</div><div class="ml-budget-legend">{legend}</div></div>'
    )


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
    st.markdown(budget_html(budget_bar(r)), unsafe_allow_html=True)
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
