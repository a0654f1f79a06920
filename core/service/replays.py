"""Replaying a conversation from its first turn with other memory settings: the fix a what-if previews.

The switchboard's what-if recomputes one turn's memory over the conversation as it was recorded. A
re-run of that turn as a branch is not the same thing under Dify as shipped: the re-run is the
conversation's newest turn, and the turns written after the original still take window rows
(:mod:`core.analysis.rerun` says what it will keep). Asking the thread's queries again from the first,
with the new settings, as a new conversation or as a branch beside the first turn, gives every turn the
history those settings would have given it from the start — what the preview shows.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Mapping

from core.flow.records import TurnRecord
from core.limits import REPLAY_TURNS
from core.memory.strategies.dify import DEFAULT_FIDELITY
from core.store import repo

from .errors import ReplayError

NEW, BRANCH = "new", "branch"


@dataclass(frozen=True)
class ReplayResult:
    """Where the replay went: the conversation (new, or the same one for a branch) and its turns' records."""

    conversation_id: str
    records: list[TurnRecord]


def replay_thread(
    service,
    conversation_id: str,
    overrides: Mapping[str, Mapping[str, Any]],
    *,
    mode: str = NEW,
    model: str | None = None,
    name: str | None = None,
    on_event: Callable[[dict], None] | None = None,
    on_turn: Callable[[int, int], None] | None = None,
) -> ReplayResult:
    """Ask the active thread's queries again, in order, from its first turn, with ``overrides`` (whole
    memory configs per node id, as the switchboard gives them) on for every turn; ``model`` (a litellm
    name) answers for every node that calls a model when given, else each node's own (or the demo model
    in its place). ``mode`` is :data:`NEW` (a new conversation on the same flow version, its settings,
    inputs and user, named ``name``) or :data:`BRANCH` (a sibling of the thread's first turn in this
    conversation, which then carries the settings on, as a re-run does). ``on_turn(n, total)`` is told
    before each turn. At most :data:`core.limits.REPLAY_TURNS` turns; a longer thread is refused."""
    if mode not in (NEW, BRANCH):
        raise ReplayError(f"replay mode {mode!r} is unknown; expected {NEW!r} or {BRANCH!r}")
    info = service.info(conversation_id)
    if info.flow_version_id is None:
        raise ReplayError("this conversation has no flow to replay it through: attach one first")
    conv = service.conversation(conversation_id)
    thread = [conv.tree.position[t] for t in service.active_thread(conversation_id, conv)]
    turns = [conv.turns[p] for p in thread if conv.turns[p].query_index is not None]
    if not turns:
        raise ReplayError("the conversation has no question to replay")
    if len(turns) > REPLAY_TURNS:
        raise ReplayError(
            f"the thread has {len(turns):,} questions; a replay asks at most {REPLAY_TURNS:,} "
            "(each one calls the flow's models)"
        )
    stored = info.meta.get("memory_overrides") or {}
    settings = {**stored, **{k: dict(v) for k, v in overrides.items()}}
    sent = {k: {**v, "model": model} for k, v in settings.items()} if model else dict(settings)
    if model:  # every node that calls a model answers on it, its memory as before
        flow = service.flow(info.flow_version_id)
        sent.update({n.id: {**settings.get(n.id, {}), "model": model} for n in flow.model_nodes})
    if mode == NEW:
        version = repo.get_flow_version(service.db, info.flow_version_id)
        target = service.start(
            version.flow_id,
            user_id=info.user_id,
            name=name or "",
            inputs=info.inputs,
            fidelity=info.meta.get("fidelity") or DEFAULT_FIDELITY,
            plugin_token_counting=bool(info.meta.get("plugin_token_counting")),
            version_id=version.id,
        ).id
        parent: Any = None  # the new conversation's first turn
    else:
        target, parent = conversation_id, turns[0].parent_id  # a sibling of the thread's first turn
    service.set_memory_overrides(target, settings)  # the settings stay on for the turns that follow
    records = []
    for n, turn in enumerate(turns, start=1):
        if on_turn is not None:
            on_turn(n, len(turns))
        inputs = (turn.meta or {}).get("inputs") or {}
        record = service.send(target, turn.query, inputs, parent_id=parent, overrides=sent, on_event=on_event)
        records.append(record)
        parent = record.id
    return ReplayResult(target, records)


def replayed_name(name: str, labels: list[str]) -> str:
    """The new conversation's name: the original's and the settings it was replayed with."""
    return f"{name or 'Conversation'} · replayed with {'; '.join(labels)}"[:255]


__all__ = ["NEW", "BRANCH", "ReplayResult", "replay_thread", "replayed_name"]
