"""The presentation's stage: the chat up to the current turn and, beside it, what each memory holds.

Every text from the conversation is escaped before it reaches the page.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import streamlit as st

from core.analysis.findings import Finding
from core.model import Conversation, turn_label
from ui.compare_findings import finding_html
from ui.html import safe_text

_TEXT = '<div style="white-space:pre-wrap;overflow-wrap:anywhere;line-height:1.45">{}</div>'


@dataclass(frozen=True)
class Card:
    """One memory at the current turn: a node of the flow or a memory config."""

    title: str
    sentence: str
    reply: str | None = None
    reply_label: str = "answers"
    warning: bool = False


def text_html(text: str) -> str:
    return _TEXT.format(safe_text(text) if text else "<i>(empty)</i>")


#: Turns shown open on the stage, the current one last; older ones fold into an expander, so the
#: current turn is in view under the controls and the findings on a laptop screen.
RECENT = 3


def render_chat(conversation: Conversation, thread: Sequence[int], current: int, *, shown: int = RECENT) -> None:
    """The thread's turns up to the current one; older turns fold into an expander."""
    upto = [p for p in thread if p <= current]
    older, recent = upto[:-shown], upto[-shown:]

    def turn(p: int) -> None:
        t = conversation.turns[p]
        here = p == current
        if t.query_message is not None:
            with st.chat_message("user"):
                st.caption(turn_label(conversation, p) + (" · now" if here else ""))
                st.markdown(text_html(t.query), unsafe_allow_html=True)
        if t.answer_message is not None and (t.answer or not here):
            with st.chat_message("assistant"):
                st.markdown(text_html(t.answer), unsafe_allow_html=True)

    if older:
        with st.expander(f"{len(older)} earlier turn{'s' if len(older) != 1 else ''}"):
            for p in older:
                turn(p)
    for p in recent:
        turn(p)


def render_cards(cards: Sequence[Card]) -> None:
    for card in cards:
        with st.container(border=True):
            st.markdown(f'<div style="font-weight:600">{safe_text(card.title)}</div>', unsafe_allow_html=True)
            colour = "#b91c1c" if card.warning else "#374151"
            st.markdown(f'<div style="color:{colour}">{safe_text(card.sentence)}</div>', unsafe_allow_html=True)
            if card.reply is not None:
                # The card's last line of text needs room below it: Streamlit pulls a markdown
                # element's bottom up to the container's border.
                st.markdown(
                    f'<div style="color:#6b7280;font-size:.8rem;margin-top:.3rem">{safe_text(card.reply_label)}'
                    f'</div><div style="padding-bottom:.4rem">{text_html(card.reply)}</div>',
                    unsafe_allow_html=True,
                )


def render_captions(findings: Sequence[Finding]) -> None:
    for f in findings:
        st.markdown(
            f'<div style="font-size:.9rem;border-left:3px solid #f59e0b;padding:.2rem .6rem;'
            f'margin:.3rem 0;background:#fffbeb">{finding_html(f, detail=False)}</div>',
            unsafe_allow_html=True,
        )
