"""Long-term memory pieces: what a new conversation would recall, a node's recalled memories, a memory's history.

Everything is shown with Streamlit's own widgets: memory texts written by users or models sit in
tables (never markup), and captions naming a user go through ``plain``.

Use in the debugger (a new conversation, before its first turn)::

    from ui.memories_panel import render_recall_preview
    render_recall_preview(svc.memory_of(info.flow_version_id), info.user_id, draft_query_or_None, key="dbg-recall")

next to a node's receipt, the memories its prompt carried (``NodeRun.recalled``)::

    from ui.memories_panel import render_recalled
    render_recalled(run.get("recalled"), key=f"recalled-{run['node_id']}")

and for a ``tool-agent`` node run, which setting decided its history granularity and the state
after each tool call (``NodeRun.granularity_source`` and ``NodeRun.steps``)::

    from ui.memories_panel import render_agent_run
    render_agent_run(run, key=f"agent-{run['node_id']}")
"""

from __future__ import annotations

import datetime as _dt
import json
from typing import Any, Mapping, Sequence

import pandas as pd
import streamlit as st

from core.flow import granularity_line  # noqa: F401  (one wording for UI and CLI)
from core.memory import DEFAULT_TOP_K, LongTermMemory, MemoryEvent, MemoryItem, recall_preview
from ui.html import plain


def when(timestamp: float | None) -> str:
    if timestamp is None:
        return ""
    return _dt.datetime.fromtimestamp(timestamp).strftime("%Y-%m-%d %H:%M:%S")


def memory_frame(items: Sequence[MemoryItem], names: Mapping[str, str] | None = None) -> pd.DataFrame:
    """One row per memory: its text, fact key, last change and where that change came from (a
    conversation by its name, ``names`` by id)."""
    return pd.DataFrame(
        [
            {
                "memory": m.memory,
                "key": m.key or "",
                "updated": when(m.updated_at),
                "created": when(m.created_at),
                "source": m.source.label(names),
                "id": m.id,
            }
            for m in items
        ],
        columns=["memory", "key", "updated", "created", "source", "id"],
    )


def history_frame(events: Sequence[MemoryEvent], names: Mapping[str, str] | None = None) -> pd.DataFrame:
    """A memory's history, oldest first: event, old and new text, who changed it, from which turn."""
    return pd.DataFrame(
        [
            {
                "when": when(e.created_at),
                "event": e.event,
                "old": e.old_memory or "",
                "new": e.new_memory or "",
                "by": e.actor,
                "source": e.source.label(names),
                "turn id": e.source.turn_id or "",
            }
            for e in events
        ],
        columns=["when", "event", "old", "new", "by", "source", "turn id"],
    )


def render_history(events: Sequence[MemoryEvent], *, key: str, names: Mapping[str, str] | None = None) -> None:
    if not events:
        st.caption("No history.")
        return
    st.dataframe(history_frame(events, names), hide_index=True, key=key, width="stretch")


def render_recall_preview(
    store: LongTermMemory,
    user_id: str,
    query: str | None = None,
    *,
    k: int = DEFAULT_TOP_K,
    key: str = "recall",
    names: Mapping[str, str] | None = None,
) -> None:
    """What a memory-retrieve step would give a new conversation of ``user_id`` (top ``k``, with scores)."""
    preview = recall_preview(user_id, query, store=store, k=k)
    if not preview.total:
        st.info(
            plain(
                f"No long-term memories for user {user_id!r} yet: a new conversation starts knowing nothing about them."
            )
        )
        return
    shown = len(preview.results)
    if preview.query is None:
        st.caption(plain(f"{preview.total} memories for {user_id!r}; the {shown} most recent (a query ranks them)."))
    else:
        st.caption(plain(f"{preview.total} memories for {user_id!r}; the top {shown} for this query, best first."))
    # Without a query nothing is scored: a column of empty scores would only say "None" on every row.
    columns = ["memory", "key", "from"] if preview.query is None else ["memory", "score", "key", "from"]
    frame = pd.DataFrame(
        [
            {
                "memory": r.memory,
                "score": None if r.score is None else round(r.score, 3),
                "key": r.item.key or "",
                "from": r.item.source.label(names),
            }
            for r in preview.results
        ],
        columns=columns,
    )
    st.dataframe(frame, hide_index=True, key=key, width="stretch")


def render_recalled(recalled: Sequence[dict[str, Any]] | None, *, key: str) -> None:
    """The long-term memories a node's prompt carried, with their scores and tokens (``NodeRun.recalled``)."""
    if not recalled:
        return
    total = sum(int(r.get("tokens") or 0) for r in recalled)
    st.caption(f"Long-term memory: {len(recalled)} recalled, {total:,} tokens")
    frame = pd.DataFrame(
        [
            {
                "memory": r.get("memory", ""),
                "score": r.get("score"),
                "tokens": r.get("tokens"),
                "from": r.get("node_id", ""),
            }
            for r in recalled
        ],
        columns=["memory", "score", "tokens", "from"],
    )
    st.dataframe(frame, hide_index=True, key=key, width="stretch")


def _short(value: Any, width: int = 120) -> str:
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, default=str)
    return text if len(text) <= width else text[: width - 1] + "…"


def compaction_text(event: Mapping[str, Any] | None) -> str:
    """A compaction check that fired before a model request, in a few words (Dify 1.17 as shipped)."""
    if not event:
        return ""
    did = []
    if "clear_tool_results" in (event.get("tiers") or []):
        did.append(f"cleared {len(event.get('cleared') or [])} tool result(s)")
    if "summarize" in (event.get("tiers") or []):
        did.append(f"summarised {event.get('folded', 0)} message(s)")
    return (
        f"estimated {event.get('estimate', 0):,} > target {event.get('target', 0):,} "
        f"({event.get('estimated_by', '')}): " + ", ".join(did)
    )


def steps_frame(steps: Sequence[Mapping[str, Any]]) -> pd.DataFrame:
    """One row per tool call, in the order of its result message: the tool, its place in the order the
    reply's calls ran (writers of a state key before its readers), its arguments, its result or error,
    the state right after it, and the compaction that ran before the request that asked for the call."""
    return pd.DataFrame(
        [
            {
                "step": s.get("step"),
                "tool": s.get("tool"),
                "ran": str(s["ran"]) if s.get("ran") else "not run",
                "args": _short(s.get("args") or {}),
                "result": f"error: {s['error']}" if s.get("error") else _short(s.get("result")),
                "state after": _short(s.get("state") or {}),
                "messages": s.get("messages"),
                "compaction before": compaction_text(s.get("compaction")),
            }
            for s in steps
        ],
        columns=["step", "tool", "ran", "args", "result", "state after", "messages", "compaction before"],
    )


def render_agent_run(run: Mapping[str, Any], *, key: str) -> None:
    """A tool-agent run: which setting decided its granularity, and the state after each tool call."""
    line = granularity_line(run)
    if line:
        st.caption(plain(line))
    steps = run.get("steps")
    if steps is None:
        return
    if not steps:
        st.caption("No tool was called; the state is discarded at the end of the run.")
        return
    st.caption(f"{len(steps)} tool call{'s' if len(steps) != 1 else ''} · the state is discarded at the end of the run")
    st.dataframe(steps_frame(steps), hide_index=True, key=key, width="stretch")


def namespace_label(namespace: str, service: Any) -> str:
    """A namespace as people know it: the app's flow name, the name flows share, or "(none)"."""
    from core.memory import SHARED
    from core.store import StoreError

    if namespace == SHARED:
        return "(none) — memories stored before namespaces"
    if namespace.startswith("app:"):
        try:
            return f"app {service.latest_version(namespace[4:]).flow_name}"
        except StoreError:
            return f"{namespace} (flow deleted)"
    return namespace
