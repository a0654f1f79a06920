"""Long-term memory pieces: what a new conversation would recall, a node's recalled memories, a memory's history.

Everything is shown with Streamlit's own widgets (tables, captions): no HTML is built here, so
memory texts written by users or models are never interpreted as markup.

Use in the debugger (a new conversation, before its first turn)::

    from ui.memories_panel import render_recall_preview
    render_recall_preview(svc.long_term, info.user_id, draft_query_or_None, key="dbg-recall")

and next to a node's receipt, the memories its prompt carried (``NodeRun.recalled``)::

    from ui.memories_panel import render_recalled
    render_recalled(run.get("recalled"), key=f"recalled-{run['node_id']}")
"""

from __future__ import annotations

import datetime as _dt
from typing import Any, Sequence

import pandas as pd
import streamlit as st

from core.long_term import DEFAULT_TOP_K, LongTermMemory, MemoryEvent, MemoryItem, recall_preview


def when(timestamp: float | None) -> str:
    if timestamp is None:
        return ""
    return _dt.datetime.fromtimestamp(timestamp).strftime("%Y-%m-%d %H:%M:%S")


def memory_frame(items: Sequence[MemoryItem]) -> pd.DataFrame:
    """One row per memory: its text, fact key, last change and where that change came from."""
    return pd.DataFrame([{"memory": m.memory, "key": m.key or "", "updated": when(m.updated_at),
                          "created": when(m.created_at), "source": m.source.label(), "id": m.id} for m in items],
                        columns=["memory", "key", "updated", "created", "source", "id"])


def history_frame(events: Sequence[MemoryEvent]) -> pd.DataFrame:
    """A memory's history, oldest first: event, old and new text, who changed it, from which turn."""
    return pd.DataFrame([{"when": when(e.created_at), "event": e.event, "old": e.old_memory or "",
                          "new": e.new_memory or "", "by": e.actor, "source": e.source.label(),
                          "turn id": e.source.turn_id or ""} for e in events],
                        columns=["when", "event", "old", "new", "by", "source", "turn id"])


def render_history(events: Sequence[MemoryEvent], *, key: str) -> None:
    if not events:
        st.caption("No history.")
        return
    st.dataframe(history_frame(events), hide_index=True, key=key, width="stretch")


def render_recall_preview(store: LongTermMemory, user_id: str, query: str | None = None, *,
                          k: int = DEFAULT_TOP_K, key: str = "recall") -> None:
    """What a memory-retrieve step would give a new conversation of ``user_id`` (top ``k``, with scores)."""
    preview = recall_preview(user_id, query, store=store, k=k)
    if not preview.total:
        st.info(f"No long-term memories for user {user_id!r} yet: a new conversation starts knowing nothing "
                "about them.")
        return
    shown = len(preview.results)
    if preview.query is None:
        st.caption(f"{preview.total} memories for {user_id!r}; the {shown} most recent (a query ranks them).")
    else:
        st.caption(f"{preview.total} memories for {user_id!r}; the top {shown} for this query, best first.")
    frame = pd.DataFrame([{"memory": r.memory, "score": None if r.score is None else round(r.score, 3),
                           "key": r.item.key or "", "from": r.item.source.label()} for r in preview.results],
                         columns=["memory", "score", "key", "from"])
    st.dataframe(frame, hide_index=True, key=key, width="stretch")


def render_recalled(recalled: Sequence[dict[str, Any]] | None, *, key: str) -> None:
    """The long-term memories a node's prompt carried, with their scores and tokens (``NodeRun.recalled``)."""
    if not recalled:
        return
    total = sum(int(r.get("tokens") or 0) for r in recalled)
    st.caption(f"Long-term memory: {len(recalled)} recalled, {total:,} tokens")
    frame = pd.DataFrame([{"memory": r.get("memory", ""), "score": r.get("score"), "tokens": r.get("tokens"),
                           "from": r.get("node_id", "")} for r in recalled],
                         columns=["memory", "score", "tokens", "from"])
    st.dataframe(frame, hide_index=True, key=key, width="stretch")
