"""Small HTML pieces for the debugger, and the one escaping rule for every text the app shows.

Every piece of stored, imported, user or model text that reaches a place where Streamlit renders
markdown or HTML — markdown, captions, titles, headers, tab/expander/widget labels, radio options,
toasts, status lines, alerts, progress texts — goes through :func:`plain` first, so
``<img src=x onerror=alert(1)>``, ``![](//host/a)`` or ``www.host.com`` shows as typed and loads
nothing. Places that never render markup (``st.text``, ``st.code``, dataframes, selectbox and
multiselect options, input values) take the raw text; plotly's labels know no markdown, only a few
HTML tags, and are escaped with ``html.escape`` where they are built.
"""

from __future__ import annotations

import re

import streamlit as st

from core.analysis.findings import quoted
from core.model import origin_colour, origin_label

STATE_SYMBOL = {"kept": "●", "dropped": "○", "not_eligible": "◌"}
STATE_WORD = {"kept": "kept", "dropped": "dropped", "not_eligible": "not eligible"}

#: The transcript box's height in pixels as Streamlit draws it; the CSS below then gives it the window's height
#: less what is above and below it (the header and the title line above it, about 150 px; the chat input under it,
#: about 75 px), 240 px at least.
TRANSCRIPT_HEIGHT = 480
ABOVE_AND_BELOW = 225
_TRANSCRIPT_BOX = (
    'div[data-testid="stLayoutWrapper"]:has(> .st-key-ml-transcript) {'
    f"flex-basis: max(240px, calc(100vh - {ABOVE_AND_BELOW}px)) !important;"
    f" height: max(240px, calc(100vh - {ABOVE_AND_BELOW}px)) !important;}}"
)

CSS = """
<style>
/* Every page: a small title close under the header, so what the page is about is above the fold. */
div[data-testid="stMainBlockContainer"] {padding: 3.25rem 2.5rem 2rem 2.5rem;}
div[data-testid="stMainBlockContainer"] h1 {font-size: 1.6rem; line-height: 1.25; padding: .25rem 0 .25rem 0;}
div[data-testid="stColumn"]:has(.st-key-ml-side) {position: sticky; top: 3.75rem; align-self: flex-start;
  max-height: calc(100vh - 4.5rem); overflow-y: auto;}
@TRANSCRIPT@
/* The inspector's tabs: a little tighter, so their names fit its column (four from 1,280 px wide, five from 1,440). */
.st-key-ml-side [role="tablist"] {gap: .5rem !important;}
.st-key-ml-side [role="tab"], .st-key-ml-side [role="tab"] p {font-size: .8125rem !important;}
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
/* The inspector's tables (ui.ledger_table.ledger_html, ui.variables_panel.changes_html): cells wrap in its column. */
.ml-ledger table, .ml-changes table {width: 100%; border-collapse: collapse; font-size: .8rem; line-height: 1.35;}
.ml-ledger th, .ml-changes th {text-align: left; font-weight: 600; color: #6b7280; border-bottom: 1px solid #e5e7eb;
  padding: .2rem .3rem;}
.ml-ledger td, .ml-changes td {vertical-align: top; border-bottom: 1px solid #f3f4f6; padding: .2rem .3rem;
  overflow-wrap: anywhere;}
.ml-ledger td:first-child, .ml-changes td:first-child {white-space: nowrap;}
.ml-changes {margin-bottom: .5rem;}
/* Names and operations break between words only; the old and new values anywhere. */
.ml-changes td:nth-child(-n+4) {overflow-wrap: break-word;}
.ml-ledger td:nth-child(2) {cursor: help; min-width: 6rem;}
.ml-ledger .ml-num {text-align: right; white-space: nowrap;}
.ml-ledger tr.ml-not-kept td {color: #991b1b;}
.ml-ledger-role {font-size: .7rem; color: #6b7280;}
.ml-ledger-why {font-size: .75rem; color: #4b5563; margin: .4rem 0;}
.ml-glance {margin: 0 0 .4rem 0; font-size: .875rem; line-height: 1.4;}
.ml-glance-line {border-left: 3px solid #10b981; padding: .1rem 0 .1rem .5rem; margin: .15rem 0; cursor: help;
                 overflow-wrap: anywhere;}
.ml-glance-line.ml-glance-dropped {border-left-color: #ef4444; background: #fef2f2;}
/* The receipt's budget bar (ui.receipt_view.budget_html): stretches per origin, the budget and context marks. */
.ml-budget {margin: 1.5rem 0 .4rem 0; font-size: .72rem; color: #4b5563;}
.ml-budget-track {position: relative; display: flex; height: 1.5rem; background: #f3f4f6; border-radius: .25rem;
                  margin-bottom: 1.4rem;}
.ml-seg {flex: none; height: 100%; cursor: help;}
.ml-seg-dropped {opacity: .55;
  background-image: repeating-linear-gradient(45deg, rgba(255,255,255,.65) 0 3px, transparent 3px 7px);}
.ml-mark {position: absolute; top: -.3rem; bottom: -.3rem; border-left: 2px dashed #b45309;}
.ml-mark-context {border-left: 2px dotted #374151;}
.ml-mark-label {position: absolute; white-space: nowrap; padding: 0 .3rem;}
.ml-mark-label-budget {top: -1.3rem; color: #b45309;}
.ml-mark-label-context {bottom: -1.3rem; color: #374151;}
.ml-budget-legend {display: flex; flex-wrap: wrap; gap: .15rem .8rem;}
.ml-key i {display: inline-block; width: .65rem; height: .65rem; border-radius: .15rem; margin-right: .3rem;
           vertical-align: -.05rem;}
</style>
""".replace("@TRANSCRIPT@", _TRANSCRIPT_BOX)


def inject_css() -> None:
    st.markdown(CSS, unsafe_allow_html=True)


# Every ASCII punctuation character: each can start markdown (links, images, emphasis, code, math,
# Streamlit's :colour[...] directives, headings, lists, tables) or HTML (tags, entities).
_PUNCTUATION = re.compile(r"[!-/:-@\[-`{-~]")
# Auto-links and Streamlit's :emoji: / :material/…: shortcodes are found in the parsed text, after
# escapes and character references are decoded, so escaping alone cannot stop them: an invisible
# word joiner after ``:`` and ``@`` and inside ``www.`` breaks the patterns (``http://``,
# ``mailto:``, ``a@b.com``, ``www.x.com``, ``:smile:``) without changing what the reader sees.
_LINK_START = re.compile(r"(?i)(?<=www)(?=\.)|(?<=[:@])")
_INDENT = re.compile(r"^[ \t]+", re.MULTILINE)
WORD_JOINER = "\u2060"


def _reference(match: re.Match) -> str:
    return "".join(f"&#{ord(c)};" for c in match.group())


def _references(text: str) -> str:
    return _INDENT.sub(_reference, _PUNCTUATION.sub(_reference, text))


def plain(text: object) -> str:
    """``text`` for any place that renders markdown or HTML, shown exactly as written.

    Punctuation becomes numeric character references, which markdown and HTML decode back to the
    same characters but never read as markup; a reference is also not structure, so ``---`` or
    ``# x`` stay text. Leading indentation is kept as references too, so an indented line never
    turns into a code block (where references would show undecoded).
    """
    return _references(_LINK_START.sub(WORD_JOINER, str(text)))


def safe_text(text: str) -> str:
    """A multi-line text as the whole content of an HTML block, escaped like :func:`plain`.

    Only for a block: markup that opens with a block tag (``<div>``, ``<ul>``…) and has no raw
    line break, so markdown never runs inside it and auto-links cannot form — the text keeps no
    invisible word joiner, and a URL copied from a message still works. Line breaks become
    character references (``white-space: pre-wrap`` shows them), because a blank line would end
    the block.
    """
    return _references(str(text).replace("\r\n", "\n")).replace("\n", "&#10;")


def text_block(text: str, *, later: bool = False) -> str:
    cls = "ml-msg ml-later" if later else "ml-msg"
    return f'<div class="{cls}">{safe_text(text) if text else "<i>(empty)</i>"}</div>'


def chip(node_id: str, title: str, state: str, reason: str, why: str) -> str:
    label = f"{STATE_SYMBOL.get(state, '?')} {title}"
    tip = f"{title}: {STATE_WORD.get(state, state)} — {why}"
    return (
        f'<span class="ml-chip {plain(state)}" data-node="{plain(node_id)}" data-reason="{plain(reason)}" '
        f'title="{plain(tip)}">{plain(label)}</span>'
    )


def chips(markers, lead: str = "") -> str:
    if not markers and not lead:
        return ""
    return (
        '<div class="ml-chips">'
        + lead
        + "".join(chip(m.node_id, m.title, m.state, m.reason, m.why) for m in markers)
        + "</div>"
    )


def divider(titles) -> str:
    """Above the oldest message a node (or lens) keeps: what it remembers starts here, whether a
    window, a budget or nothing at all set that place."""
    return "".join(f'<div class="ml-divider">{plain(quoted(t))} remembers from here on</div>' for t in titles)


def origin_chip(origin: str) -> str:
    return f'<span class="ml-origin" style="background:{origin_colour(origin)}">{plain(origin_label(origin))}</span>'


def tokens(n: int, exact: bool) -> str:
    return f'<span class="ml-tokens">{n:,} tokens{"" if exact else " (estimated)"}</span>'


def badge(text: str) -> str:
    return f'<span class="ml-badge">{plain(text)}</span>'


def error_line(text: str) -> str:
    return f'<div class="ml-error">{plain(text)}</div>'


def muted(text: str) -> str:
    return f'<span class="ml-turn">{plain(text)}</span>'
