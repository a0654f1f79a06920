"""The Import page's "From a Dify app" tab: pull conversations from a running Dify app."""

from __future__ import annotations

import streamlit as st

from core.errors import MemLensError
from core.service import pull
from ui import state as keys
from ui.html import plain


def render_pull_form(db, *, key: str) -> None:
    st.caption(
        "Fetch conversations from a running Dify app through its Service API (the app's API base and key "
        "from Dify's API Access page). Branches and files are kept; pulling again updates a conversation "
        "instead of copying it. The key is used for this pull only and never stored."
    )
    base_url = st.text_input("API base URL", placeholder="https://api.dify.ai/v1", key=f"{key}_base")
    api_key = st.text_input("App API key", type="password", key=f"{key}_key")
    left, right = st.columns(2)
    user = left.text_input("End user (Dify's `user`)", key=f"{key}_user")
    conversation = right.text_input("Conversation id (empty: every conversation of the user)", key=f"{key}_conv")
    if st.button("Pull", key=f"{key}_go", type="primary", disabled=not (base_url and api_key and user)):
        try:
            with st.spinner("Pulling…"):
                result = pull(
                    db,
                    base_url.strip(),
                    api_key.strip(),
                    user.strip(),
                    conversation_id=conversation.strip() or None,
                    everything=not conversation.strip(),
                )
        except MemLensError as e:
            st.session_state[keys.result(key)] = {"ok": False, "message": str(e)}
        else:
            st.session_state[keys.result(key)] = {"ok": True, "message": f"Pulled {result.summary()}."}
    outcome = st.session_state.get(keys.result(key))
    if outcome:
        (st.success if outcome["ok"] else st.error)(plain(outcome["message"]))
        if not outcome["ok"]:
            st.warning("Nothing was stored.")
