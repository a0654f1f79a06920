"""What a switchboard change can become: a re-run of the inspected turn as a branch, a replay of the
conversation from its first turn with these settings (what the what-if shows), or the settings kept for new
turns — with what a re-run will keep said first when it differs from the preview (:mod:`core.analysis.rerun`)."""

from __future__ import annotations

from typing import Callable

import streamlit as st

from core.model import DEMO_MODEL
from core.service import BRANCH, NEW
from ui.html import plain

#: The replay's answering model: the demo model, or each node's own (its key from the environment).
OWN_MODELS = "own"
REPLAY_AS = {NEW: "a new conversation", BRANCH: "a branch of this one, beside turn 1"}


def render_fix_path(
    *,
    turn: str,
    questions: int,
    rerun_note: str | None,
    other_model: str | None,
    key: str,
    on_rerun: Callable[[], None],
    on_replay: Callable[[str, str | None], None],
    on_keep: Callable[[], None],
) -> None:
    """The actions under a switchboard change. ``questions``: how many a replay asks again;
    ``other_model``: the model picked for new turns in the sidebar, offered for the replay too."""
    if rerun_note:
        st.warning(plain(rerun_note), icon=":material/call_split:")
    row = st.container(horizontal=True, gap="small", key=f"{key}-actions")
    with row:
        if st.button(
            f"Re-run {turn} as a branch",
            key=f"{key}-rerun",
            icon=":material/call_split:",
            help="The inspected turn answered again with these settings, as a new branch; the settings stay "
            "on for the turns that follow",
        ):
            on_rerun()
        with st.popover(
            "Replay the conversation with these settings",
            icon=":material/replay:",
            help="Every question of this thread asked again from turn 1 with these settings: each turn "
            "then has the history they give from the start — what this preview shows",
        ):
            mode = st.radio("Replay as", list(REPLAY_AS), format_func=REPLAY_AS.get, key=f"{key}-replay-as")
            models = {
                DEMO_MODEL: f"the demo model ({DEMO_MODEL}, offline)",
                OWN_MODELS: "each node's own model (keys from the environment)",
            }
            if other_model and other_model not in models:
                models[other_model] = f"{other_model} (the model for new turns)"
            model = st.radio(
                "Answered by", list(models), format_func=lambda m: plain(models[m]), key=f"{key}-replay-model"
            )
            if st.button(f"Replay {questions} questions", key=f"{key}-replay-go", type="primary"):
                on_replay(mode, None if model == OWN_MODELS else model)
        if st.button("Keep for new turns", key=f"{key}-keep", icon=":material/bookmark:"):
            on_keep()
