"""Long-term memory: browse, search, edit and delete a user's memories, each with its history."""

from __future__ import annotations

import streamlit as st

from core.errors import MemLensError
from core.memory import SHARED
from ui import data
from ui import state as keys
from ui.entry import through_app
from ui.html import plain
from ui.memories_panel import memory_frame, namespace_label, render_history, render_recall_preview

through_app()  # before anything is shown or read: the login is in app.py

page_key = keys.keys_of(keys.MEMORIES)  # this page's widget keys
svc = data.service()
summaries = svc.long_term.users()

st.title("Long-term memory")
st.caption(
    "Facts remembered per user, across conversations and flows, by memory-store steps (or by hand). "
    "Every change — added, updated, deleted — stays in the memory's history with the turn it came from."
)

flash = st.session_state.pop(keys.MEMORIES_FLASH, None)
if flash:
    (st.success if flash[0] == "ok" else st.error)(plain(flash[1]))

with st.sidebar:
    st.subheader("Namespace")
    namespaces = sorted({u.namespace for u in summaries} | {SHARED})
    # Memories from before namespaces (or added here by hand) first; else the latest app's.
    first = (
        SHARED
        if not summaries or any(u.namespace == SHARED for u in summaries)
        else max(summaries, key=lambda u: u.updated_at).namespace
    )
    namespace = st.selectbox(
        "Namespace",
        namespaces,
        index=namespaces.index(first),
        key=page_key("namespace"),
        label_visibility="collapsed",
        format_func=lambda ns: namespace_label(ns, svc),
        help="Each app (flow) keeps its own memories; memory steps that name a namespace "
        "share it with every flow that names the same one.",
    )
store = svc.long_term.in_namespace(namespace)
users = [u.user_id for u in summaries if u.namespace == namespace]
with st.sidebar:
    st.subheader("User")
    picked = st.selectbox("User", users, key=page_key("user"), label_visibility="collapsed") if users else None
    typed = st.text_input("Another user id", key=page_key("user_other"), placeholder="any user id")
user = typed.strip() or picked
if not user:
    st.info(
        "No long-term memories yet. Run a flow with a memory-store step (sample: long-term-memory), or type a "
        "user id in the sidebar to add one by hand."
    )
    st.stop()

names = {c.id: c.name for c in svc.conversations() if c.name}  # a source conversation by its name
search = st.text_input("Search", key=page_key("search"), placeholder="a word in the memory or its key")
items = store.memories(user, search)
total = len(store.memories(user))
st.subheader(plain(f"Memories of {user}"))
st.caption(f"{len(items)} of {total} shown" if search.strip() else f"{total} memories")
if items:
    st.dataframe(memory_frame(items, names), hide_index=True, key=page_key("table"), width="stretch")
elif search.strip():
    st.info("No memory of this user contains that text.")


def _act(action, ok: str) -> None:
    try:
        action()
    except MemLensError as e:
        st.session_state[keys.MEMORIES_FLASH] = ("error", str(e))
    else:
        st.session_state[keys.MEMORIES_FLASH] = ("ok", ok)
    st.rerun()


for item in items:
    with st.expander(plain(item.memory), expanded=False):
        text = st.text_area("Text", item.memory, key=page_key(f"text_{item.id}"))
        save, delete = st.columns(2)
        if save.button("Save", key=page_key(f"save_{item.id}"), icon=":material/save:"):
            _act(lambda: store.update(item.id, text), "Memory updated.")
        if delete.button("Delete", key=page_key(f"delete_{item.id}"), icon=":material/delete:"):
            _act(lambda: store.delete(item.id), "Memory deleted; its history is kept.")
        st.caption(plain(f"History · key {item.key or '—'} · id {item.id}"))
        render_history(store.history(item.id), key=page_key(f"history_{item.id}"), names=names)

with st.expander("Remember something by hand"):
    new = st.text_input("Memory", key=page_key("new"), placeholder="e.g. Your preferred seat is by the window.")
    if st.button("Remember", key=page_key("add"), icon=":material/add:"):
        _act(lambda: store.add(user, new), "Remembered.")

deleted = store.deleted(user)
if deleted:
    with st.expander(f"Deleted memories ({len(deleted)})"):
        for event in deleted:
            st.text(event.old_memory or "(empty)")
            render_history(store.history(event.memory_id), key=page_key(f"deleted_{event.memory_id}"), names=names)

st.subheader("What a new conversation recalls")
query = st.text_input(
    "First message of a new conversation",
    key=page_key("query"),
    placeholder="leave empty to see the most recent memories",
)
render_recall_preview(store, user, query or None, key=page_key("recall"), names=names)
