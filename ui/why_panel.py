"""“Where did X go?” on the debugger: a search box and the answer, with a jump to the turn."""

from __future__ import annotations

from typing import Callable

import streamlit as st

from core.analysis import WhyAnswer
from ui import html

#: The search box's help, on the debugger of a flow (per LLM node) and of an import (per memory lens).
WHY_HELP = (
    "Finds the turn that said it and, for each node that calls a model or memory lens, the first turn whose "
    "context no longer holds it and why, and where it came back when it was said again. No model is called."
)


#: The search box's placeholder, which names it: its label is hidden, to keep the inspector short.
WHY_PLACEHOLDER = "Where did it go? Type a name, a number, a phrase… and press Enter"


def render_why(answer: WhyAnswer | None, *, on_jump: Callable[[int], None], key: str) -> None:
    """The answer's sentences (escaped: the phrase and excerpts are user text) and one button per
    turn where it left a node's memory (the first time, and the last when it came back between),
    which inspects that turn."""
    if answer is None:
        return
    for sentence in answer.sentences():
        st.markdown(html.text_block(sentence), unsafe_allow_html=True)
    # One button per turn, naming the nodes (or lenses) whose memory lost it there (node titles are user
    # text, and button labels render markdown).
    for position, (label, subjects) in sorted(jumps(answer).items()):
        if st.button(
            html.plain(f"Inspect {label} ({', '.join(subjects)})"),
            key=f"{key}-jump-{position}",
            help="Open this turn's context receipt: the ledger there gives the reason",
        ):
            on_jump(position)


def jumps(answer: WhyAnswer) -> dict[int, tuple[str, list[str]]]:
    """Position → (the turn's label, the subjects that lost the phrase there): where it first left each
    subject's memory, and where it left last when it came back in between."""
    out: dict[int, tuple[str, list[str]]] = {}
    for x in answer.losses:
        places = [(x.lost_position, x.lost_turn)]
        if x.comeback is not None:
            places.append((x.comeback.gone_position, x.comeback.gone_turn))
        for position, label in places:
            if position is not None and x.subject not in out.setdefault(position, (label, []))[1]:
                out[position][1].append(x.subject)
    return out
