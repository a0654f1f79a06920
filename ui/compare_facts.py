"""The compare page's Facts table: one row per fact, one column per config, as an HTML table that
wraps its cells to the page's width (a dataframe of six configs needs horizontal scrolling)."""

from __future__ import annotations

from html import escape

import streamlit as st

from core.analysis.compare import Comparison
from core.model import message_text
from ui.html import safe_text

CSS = (
    "<style>.ml-facts{width:100%;table-layout:fixed;border-collapse:collapse;font-size:.85rem}"
    ".ml-facts th,.ml-facts td{border:1px solid #e5e7eb;padding:.3rem .45rem;text-align:left;vertical-align:top;"
    "overflow-wrap:anywhere;white-space:normal}.ml-facts th{background:#f9fafb;font-weight:600}"
    ".ml-facts td.lost{color:#b91c1c}.ml-facts td.kept{color:#047857}.ml-facts td.back{color:#b45309}</style>"
)


def facts_table_html(comparison: Comparison) -> str:
    """The table, every text escaped; the first two columns narrow, the configs sharing the rest."""
    labels = [c.label for c in comparison.configs]
    head = "".join(f"<th>{safe_text(x)}</th>" for x in ["fact", "stated at", *labels])
    rows = []
    for fact, fates in zip(comparison.facts, comparison.fates):
        stated = fates[0].stated_label if fates else ""
        cells = "".join(
            f'<td class="{f.state}" data-config="{escape(f.label, quote=True)}">{safe_text(f.cell_text())}</td>'
            for f in fates
        )
        rows.append(f"<tr><td>{safe_text(fact.label)}</td><td>{safe_text(stated)}</td>{cells}</tr>")
    widths = '<col style="width:16%"><col style="width:9%">' + "<col>" * len(labels)
    return (
        f'{CSS}<table class="ml-facts"><colgroup>{widths}</colgroup><thead><tr>{head}</tr></thead>'
        f"<tbody>{''.join(rows)}</tbody></table>"
    )


def render_facts_table(comparison: Comparison) -> None:
    st.markdown(facts_table_html(comparison), unsafe_allow_html=True)


def message_name(conversation, numbers: list[int], key: str) -> str:
    """``"p:j"`` (turn position, message index) as a person reads it: turn, role, the text's start."""
    p, j = (int(x) for x in key.split(":"))
    messages = conversation.turns[p].messages

    def name(m) -> str:
        text = " ".join(message_text(m).split()) or "(empty)"
        return f"turn {numbers[p]} · {m.role}: {text[:60] + ('…' if len(text) > 60 else '')}"

    label = name(messages[j])
    # A select box sends a choice back as its label: a turn's tool calls (no text) would all read
    # "turn 4 · assistant: ", so a label its turn repeats names the message's place in the turn.
    if sum(1 for m in messages if name(m) == label) > 1:
        label += f" (message {j + 1})"
    return label


def marked_message(conversation, key: object) -> bool:
    """Whether ``key`` names a message of the conversation as ``"p:j"``."""
    try:
        p, j = (int(x) for x in str(key).split(":"))
    except ValueError:
        return False
    return 0 <= p < len(conversation.turns) and 0 <= j < len(conversation.turns[p].messages)


def pick_marks(conversation, numbers: list[int], *, key: str) -> list[str]:
    """The messages a person marks as stating a fact, as ``"p:j"`` keys in ``st.session_state[key]``.

    A turn number, then one of that turn's messages, then *Mark*: the widgets hold one turn's
    messages, whatever the conversation's length; the marked ones are listed (and removed) below.
    ``numbers`` are the turns' numbers by position (:func:`core.memory.replay.turn_numbers`)."""
    state = st.session_state
    state[key] = [k for k in state.get(key, []) if marked_message(conversation, k)]
    first = numbers[0]
    number = st.number_input(
        "Turn",
        min_value=first,
        max_value=numbers[-1],
        value=first,
        step=1,
        key=f"{key}_turn",
        help="The number of the turn whose message states the fact",
    )
    position = int(number) - first  # turn numbers count positions from the first turn's number
    options = [f"{position}:{j}" for j in range(len(conversation.turns[position].messages))]
    options.sort(key=lambda k: conversation.turns[position].messages[int(k.split(":")[1])].role != "user")
    pick = st.selectbox(
        "Message", options, key=f"{key}_pick-{position}", format_func=lambda k: message_name(conversation, numbers, k)
    )

    def mark() -> None:
        if pick is not None and pick not in state[key]:
            state[key] = [*state[key], pick]

    st.button("Mark it", key=f"{key}_add", on_click=mark, disabled=pick is None or pick in state[key])
    return st.multiselect(
        "Messages that state a fact",
        list(state[key]),
        key=key,
        format_func=lambda k: message_name(conversation, numbers, k),
        placeholder="None marked yet: pick a turn and a message above",
    )
