"""Small HTML pieces for the debugger: every text that reaches the page is escaped here.

Only this module builds HTML for ``unsafe_allow_html``; callers pass raw text and get escaped
markup back, so a message like ``<img src=x onerror=alert(1)>`` shows as text.
"""

from __future__ import annotations

from html import escape

import streamlit as st

STATE_SYMBOL = {"kept": "●", "dropped": "○", "not_eligible": "◌"}
STATE_WORD = {"kept": "kept", "dropped": "dropped", "not_eligible": "not eligible"}
ORIGIN_COLOUR = {
    "system": "#6b7280", "template": "#2563eb", "conversation variable": "#7c3aed", "context": "#0891b2",
    "long-term memory": "#db2777", "memory history": "#059669", "summary": "#ca8a04", "current query": "#ea580c",
}

CSS = """
<style>
.ml-msg {white-space: pre-wrap; overflow-wrap: anywhere; line-height: 1.45;}
.ml-later {opacity: .55;}
.ml-chips {margin: 0 0 .25rem 0; display: flex; flex-wrap: wrap; gap: .25rem; align-items: center;}
.ml-chip {font-size: .72rem; border-radius: .6rem; padding: .05rem .45rem; border: 1px solid; cursor: help;
          white-space: nowrap;}
.ml-chip.kept {color: #047857; border-color: #10b981; background: #ecfdf5;}
.ml-chip.dropped {color: #b91c1c; border-color: #f87171; background: #fef2f2;}
.ml-chip.not_eligible {color: #6b7280; border-color: #d1d5db; background: #f9fafb;}
.ml-divider {border-top: 2px dashed #f59e0b; color: #b45309; font-size: .75rem; margin: .4rem 0 .2rem 0;
             padding-top: .1rem;}
.ml-origin {font-size: .7rem; color: white; border-radius: .5rem; padding: .05rem .45rem; margin-right: .35rem;}
.ml-tokens {font-size: .72rem; color: #6b7280;}
.ml-badge {font-size: .72rem; color: #92400e; background: #fef3c7; border-radius: .5rem; padding: .05rem .45rem;}
.ml-error {font-size: .8rem; color: #b91c1c;}
.ml-turn {font-size: .72rem; color: #6b7280;}
</style>
"""


def inject_css() -> None:
    st.markdown(CSS, unsafe_allow_html=True)


def safe_text(text: str) -> str:
    """Text for an HTML block: escaped, and with its line breaks as character references.

    A blank line would end the HTML block and hand the rest to the markdown parser, where
    ``![x](url)`` becomes an image and ``**x**`` bold; with no raw line break the whole message
    stays text (``white-space: pre-wrap`` still shows the breaks).
    """
    return escape(text).replace("\r\n", "\n").replace("\n", "&#10;")


def text_block(text: str, *, later: bool = False) -> str:
    cls = "ml-msg ml-later" if later else "ml-msg"
    return f'<div class="{cls}">{safe_text(text) if text else "<i>(empty)</i>"}</div>'


def chip(node_id: str, title: str, state: str, reason: str, why: str) -> str:
    label = f"{STATE_SYMBOL.get(state, '?')} {title}"
    tip = f"{title}: {STATE_WORD.get(state, state)} — {why}"
    return (f'<span class="ml-chip {escape(state)}" data-node="{escape(node_id)}" data-reason="{escape(reason)}" '
            f'title="{escape(tip)}">{escape(label)}</span>')


def chips(markers, lead: str = "") -> str:
    if not markers and not lead:
        return ""
    return '<div class="ml-chips">' + lead + "".join(chip(m.node_id, m.title, m.state, m.reason, m.why)
                                                      for m in markers) + "</div>"


def divider(titles) -> str:
    return "".join(f'<div class="ml-divider">{escape(t)}\'s window starts here</div>' for t in titles)


def origin_chip(origin: str) -> str:
    colour = ORIGIN_COLOUR.get(origin, "#374151")
    return f'<span class="ml-origin" style="background:{colour}">{escape(origin)}</span>'


def tokens(n: int, exact: bool) -> str:
    return f'<span class="ml-tokens">{n:,} tokens{"" if exact else " (estimated)"}</span>'


def badge(text: str) -> str:
    return f'<span class="ml-badge">{escape(text)}</span>'


def error_line(text: str) -> str:
    return f'<div class="ml-error">{escape(text)}</div>'


def muted(text: str) -> str:
    return f'<span class="ml-turn">{escape(text)}</span>'
