"""Conversations that survive restarts: the flow runtime on top of the store, with branches.

:class:`ConversationService` is what the UI, the command line and the HTTP API call. It loads a
stored conversation, runs a turn through the flow version the conversation is pinned to, and
writes it: the turn's row when the run starts (status ``running``, as Dify writes its message row),
then the turn's end with all its node runs and its variable changes in one transaction (a failing
node keeps the changes made before it, as in Dify). The run's closing events (``message_end``,
``workflow_finished``, ``error``) reach ``on_event`` only once that transaction is committed, so a
client that saw the turn end never loses it, and a process killed before then leaves the turn
``interrupted`` with no variable changed. Turns on one conversation run one at a
time, across processes too (:mod:`core.store.locks`): a second request waits for the first and
continues after it, so no variable update is lost and no branch appears that nobody asked for.

Branches follow Dify's message tree: regenerating an answer adds a sibling turn with the same
parent; editing an earlier query adds a sibling of that turn; both become the active thread and
leave the old one intact. Memory for the next turn follows the active thread because the next
turn's parent is the active thread's last turn (Dify's thread walk, spec/dify-memory.md §1.3).

Flow versions: editing a flow's values creates a new version; a conversation stays pinned to the
version it started on (as Dify 1.17.1 does). Continuing on the newest version is explicit and
creates a new branch; it is refused when the flow's structure changed (nodes added, removed or
reordered), with Dify's ``agent_session_configuration_changed`` message.
"""

from __future__ import annotations

import copy
import dataclasses
import threading
from collections import OrderedDict
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

from core.flow.graph import Flow, classify_change, load_flow
from core.flow.records import ConversationState, TurnRecord
from core.flow.runtime import run_turn
from core.flow.variables import USER, VariableChange, copy_value, defaults, edit_variable
from core.llm.client import LLMClient
from core.memory.long_term import app_namespace
from core.memory.strategies.dify import DEFAULT_FIDELITY
from core.model.conversation import (
    QUERY,
    Conversation,
    Message,
    Turn,
    active_thread,
)
from core.store import repo
from core.store.db import Database
from core.store.errors import NotFoundError, StoreError
from core.store.ledger_codec import unpack_node_run
from core.store.memories import long_term_store
from core.words import excerpt

from .errors import SessionChangedError
from .transfer import export_conversation, import_conversation
from .turn_rows import _change_row, turn_from_record

#: How many conversations' working state (turns, thread views) a service keeps between turns.
WORKING_STATES = 64
SESSION_CHANGED = (
    "The Agent configuration changed after this conversation started. Start a new conversation to continue."
)
_ACTIVE = object()
#: The run's events that say the turn is over: held back until the turn is committed.
CLOSING_EVENTS = ("message_end", "workflow_finished", "error")
#: A conversation started without a name is named by its first message, cut at a word to this many characters.
NAME_WIDTH = 48


@dataclass
class _Working:
    """A conversation as its last turn left it, kept between turns: its turns and the nodes'
    memories (:class:`core.memory.turn_memory.TurnMemory`). ``stamp`` is what the store said then — the
    conversation row's ``updated_at`` and turn count — and tells whether anyone wrote since."""

    conversation: Conversation
    stamp: tuple
    memories: dict


@dataclass(frozen=True)
class Siblings:
    index: int  # 1-based position among the siblings, as the pager shows "n of m"
    count: int
    ids: tuple[str, ...]


class ConversationService:
    def __init__(self, db: Database, llm: LLMClient | None = None):
        self.db = db
        self.llm = llm
        self._flows: dict[str, Flow] = {}
        # Long-term memories live in the same database, keyed by namespace and user id. A turn sees
        # its app's namespace (as Dify keeps apps apart); memory nodes that name a namespace share it.
        self.long_term = long_term_store(db)
        self._flow_ids: dict[str, str] = {}
        self._working: OrderedDict[str, _Working] = OrderedDict()
        self._working_lock = threading.Lock()

    # -- flows ---------------------------------------------------------------------------------------
    def import_flow(self, source: Flow | str | Path, name: str | None = None) -> repo.FlowVersion:
        flow = source if isinstance(source, Flow) else load_flow(source)
        return repo.create_flow(
            self.db, name or flow.name, flow.to_dict(), flow.structural_signature(), note="imported"
        )

    def flow(self, version_id: str) -> Flow:
        flow = self._flows.get(version_id)
        if flow is None:
            version = repo.get_flow_version(self.db, version_id)
            flow = self._flows[version_id] = Flow.from_dict(version.definition, name=version.flow_name, stored=True)
        return flow

    def memory_of(self, version_id: str):
        """The long-term memory a flow version's turns use: its app's namespace."""
        flow_id = self._flow_ids.get(version_id)
        if flow_id is None:
            flow_id = self._flow_ids[version_id] = repo.get_flow_version(self.db, version_id).flow_id
        return self.long_term.in_namespace(app_namespace(flow_id))

    def update_flow(self, flow_id: str, flow: Flow, note: str = "") -> repo.FlowVersion:
        """Save an edited flow as a new version (conversations stay on the version they started on)."""
        latest = repo.latest_flow_version(self.db, flow_id)
        change = classify_change(self.flow(latest.id), flow)
        if change == "same":
            return latest
        return repo.add_flow_version(
            self.db,
            flow_id,
            flow.to_dict(),
            flow.structural_signature(),
            note or ("structure changed" if change == "structure" else "values changed"),
        )

    # -- conversations -------------------------------------------------------------------------------
    def start(
        self,
        flow_id: str,
        *,
        user_id: str = "user",
        name: str = "",
        source: str = "ui",
        inputs: Mapping[str, Any] | None = None,
        conversation_id: str | None = None,
        fidelity: str = DEFAULT_FIDELITY,
        plugin_token_counting: bool = False,
        version_id: str | None = None,
    ) -> repo.ConversationInfo:
        """A new conversation on the flow's newest version (or on ``version_id``). ``fidelity`` and
        ``plugin_token_counting`` are its Dify profile (Dify 1.x as shipped, token counting off, by
        default), kept for every turn."""
        version = (
            repo.get_flow_version(self.db, version_id) if version_id else repo.latest_flow_version(self.db, flow_id)
        )
        info = repo.create_conversation(
            self.db,
            flow_version_id=version.id,
            user_id=user_id,
            name=name,
            source=source,
            inputs=dict(inputs or {}),
            conversation_id=conversation_id,
            meta={"fidelity": fidelity, "plugin_token_counting": bool(plugin_token_counting)},
        )
        repo.ensure_variables(self.db, info.id, [v.to_dict() for v in self.flow(version.id).variables])
        return info

    def info(self, conversation_id: str) -> repo.ConversationInfo:
        return repo.get_conversation(self.db, conversation_id)

    # Reads the pages need: they go through the service, never to the repository themselves.
    def conversations(self) -> list[repo.ConversationInfo]:
        return repo.list_conversations(self.db)

    def flows(self) -> list[repo.FlowVersion]:
        return repo.list_flows(self.db)

    def flow_version(self, version_id: str) -> repo.FlowVersion:
        return repo.get_flow_version(self.db, version_id)

    def latest_version(self, flow_id: str) -> repo.FlowVersion:
        return repo.latest_flow_version(self.db, flow_id)

    def feedbacks(self, conversation_id: str) -> dict[str, list[dict]]:
        """A conversation's ratings, by message (turn) id."""
        return repo.feedbacks(self.db, conversation_id)

    def variables(self, conversation_id: str) -> list[repo.StoredVariable]:
        """The conversation variables as they stand now."""
        return repo.get_variables(self.db, conversation_id)

    def variable_history(self, conversation_id: str) -> list[dict]:
        return repo.variable_history(self.db, conversation_id)

    def conversation(self, conversation_id: str) -> Conversation:
        """The stored conversation: the working state of its last turn here when nobody wrote
        since (shared: treat it as read-only), else read from the store."""
        info = self.info(conversation_id)
        with self._working_lock:
            kept = self._working.get(conversation_id)
        if kept is not None and kept.stamp == (info.updated_at, info.turn_count):
            conv = kept.conversation
            if conv.meta.get("active_turn_id") == info.active_turn_id:
                return conv
        return repo.load_conversation(self.db, conversation_id)

    def state(self, conversation_id: str) -> tuple[Flow, ConversationState, repo.ConversationInfo]:
        flow, state, info, _ = self._state(conversation_id, working=False)
        return flow, state, info

    def _state(
        self, conversation_id: str, *, working: bool
    ) -> tuple[Flow, ConversationState, repo.ConversationInfo, _Working | None]:
        # working: a turn is about to run, under the conversation's lock, settled already (send)
        info = repo.get_conversation(self.db, conversation_id, settle=not working)
        if info.flow_version_id is None:
            raise StoreError(
                f"conversation {conversation_id!r} was imported without a flow; it can be inspected "
                "and replayed but not continued"
            )
        flow = self.flow(info.flow_version_id)
        stored = repo.ensure_variables(self.db, conversation_id, [v.to_dict() for v in flow.variables])
        kept = self._working_copy(info) if working else None
        conv = kept.conversation if kept else repo.load_conversation(self.db, conversation_id)
        return flow, ConversationState(conversation=conv, variables={v.name: v.value for v in stored}), info, kept

    def _working_copy(self, info: repo.ConversationInfo) -> _Working:
        """The conversation's working state, brought up to date with the store: kept as it was when
        nobody wrote since, with the turns added since appended (read from the store, not rebuilt),
        loaded afresh when anything else changed. The caller holds the conversation's lock, so no
        turn is written meanwhile."""
        stamp = (info.updated_at, info.turn_count)
        with self._working_lock:
            kept = self._working.pop(info.id, None)
        if kept is not None and kept.stamp != stamp:
            kept = self._catch_up(kept, info)
        if kept is None:
            kept = _Working(repo.load_conversation(self.db, info.id), stamp, {})
        kept.stamp = stamp
        if kept.conversation.meta.get("active_turn_id") != info.active_turn_id:
            # a new object, not an edit: readers may hold the old one (see conversation())
            kept.conversation = dataclasses.replace(
                kept.conversation, meta={**kept.conversation.meta, "active_turn_id": info.active_turn_id}
            )
        with self._working_lock:
            self._working[info.id] = kept
            while len(self._working) > WORKING_STATES:
                self._working.popitem(last=False)
        return kept

    def _catch_up(self, kept: _Working, info: repo.ConversationInfo) -> _Working | None:
        """``kept`` with the turns stored after its newest appended, or None when the store holds
        anything else than those (a turn changed, removed or replaced): then it is reloaded."""
        conv = kept.conversation
        if not conv.turns:
            return None
        last = conv.turns[-1]
        rows = repo.load_turn_rows(self.db, info.id, from_seq=last.meta.get("seq"), settle=False)
        if not rows or rows[0]["id"] != last.id or len(conv.turns) + len(rows) - 1 != info.turn_count:
            return None
        new = [repo.turn_from_dict(row) for row in rows[1:]]
        repo.remember_token_counts(new)
        for turn in new:
            conv = conv.with_turn(turn)
        kept.conversation = conv
        return kept

    def active_thread(self, conversation_id: str, conversation: Conversation | None = None) -> list[str]:
        """Turn ids of the active thread, oldest first (what the chat shows)."""
        conv = conversation or self.conversation(conversation_id)
        return [conv.turns[i].id for i in active_thread(conv)]

    def siblings(self, conversation: Conversation, turn_id: str) -> Siblings:
        tree = conversation.tree
        ids = tuple(conversation.turns[i].id for i in tree.siblings(tree.position[turn_id]))
        return Siblings(ids.index(turn_id) + 1, len(ids), ids)

    def node_runs(self, conversation: Conversation, turn_id: str) -> list[dict]:
        """The stored node runs of a turn, ledgers as :class:`~core.model.ledger.Ledger` and prompts in full."""
        position = conversation.tree.position.get(turn_id)
        if position is None:
            raise NotFoundError(f"turn {turn_id!r} is not in conversation {conversation.id!r}")
        return [unpack_node_run(r, conversation, position) for r in repo.load_node_runs(self.db, turn_id)]

    def switch(self, conversation_id: str, turn_id: str) -> str:
        """Make the thread through ``turn_id`` active (continuing to its newest descendant)."""
        conv = self.conversation(conversation_id)
        if turn_id not in conv.tree.position:
            raise NotFoundError(f"turn {turn_id!r} is not in conversation {conversation_id!r}")
        leaf = conv.turns[conv.tree.active_leaf(conv.tree.position[turn_id])].id
        repo.set_conversation_fields(self.db, conversation_id, active_turn_id=leaf)
        return leaf

    def rename(self, conversation_id: str, name: str) -> None:
        repo.rename_conversation(self.db, conversation_id, name)

    def delete(self, conversation_id: str) -> None:
        with self.db.conversation_lock(conversation_id):  # not under a running turn's feet
            repo.delete_conversation(self.db, conversation_id)

    def set_memory_overrides(self, conversation_id: str, overrides: Mapping[str, Mapping[str, Any]]) -> None:
        """Per-node memory settings this conversation runs with from now on (the switchboard)."""
        info = self.info(conversation_id)
        meta = dict(info.meta)
        meta["memory_overrides"] = {k: dict(v) for k, v in overrides.items() if v}
        repo.set_conversation_fields(self.db, conversation_id, meta=meta)

    # -- turns ---------------------------------------------------------------------------------------
    def send(
        self,
        conversation_id: str,
        query: str,
        inputs: Mapping[str, Any] | None = None,
        *,
        parent_id: Any = _ACTIVE,
        flow_version_id: str | None = None,
        overrides: Mapping[str, Mapping[str, Any]] | None = None,
        on_event: Callable[[dict], None] | None = None,
        llm: LLMClient | None = None,
        granularity: str | None = None,
        files: Sequence[Any] = (),
    ) -> TurnRecord:
        """Run one turn after ``parent_id`` (default: the active thread's last turn) and store it.

        Turns on one conversation run one at a time, also across processes: this waits for a
        turn already running on the conversation, then reads the state it left. The turn's row
        is written when the run starts (status ``running``), and its end with every node run and
        variable change in one transaction; ``on_event`` gets the run's closing events after it.

        ``granularity`` is the request's history granularity for agent nodes (None: the flow's, else
        ``query_answer``)."""
        with self.db.conversation_lock(conversation_id), self.db.pinned():
            repo.settle_interrupted(self.db, conversation_id, locked=True)
            return self._send_locked(
                conversation_id,
                query,
                inputs,
                parent_id=parent_id,
                flow_version_id=flow_version_id,
                overrides=overrides,
                on_event=on_event,
                llm=llm,
                granularity=granularity,
                files=files,
            )

    def _send_locked(
        self,
        conversation_id: str,
        query: str,
        inputs: Mapping[str, Any] | None,
        *,
        parent_id: Any,
        flow_version_id: str | None,
        overrides: Mapping[str, Mapping[str, Any]] | None,
        on_event: Callable[[dict], None] | None,
        llm: LLMClient | None,
        granularity: str | None,
        files: Sequence[Any] = (),
    ) -> TurnRecord:
        flow, state, info, working = self._state(conversation_id, working=True)
        if flow_version_id is not None:
            flow = self.flow(flow_version_id)
        version_id = flow_version_id or info.flow_version_id
        if parent_id is _ACTIVE:
            parent_id = info.active_turn_id
        if overrides is None:
            overrides = info.meta.get("memory_overrides") or {}
        merged_inputs = {**info.inputs, **dict(inputs or {})}
        turn_id, created = repo.new_id(), repo.now()
        started: dict[str, int] = {}
        closing: list[dict] = []  # the run's closing events, sent once the turn is committed

        def events(event: dict) -> None:
            # The run emits workflow_started once its input is checked and before any node runs:
            # the turn's row is written then, so everything the nodes write can point at it.
            if event.get("event") == "workflow_started" and not started:
                started["seq"] = repo.begin_turn(
                    self.db,
                    conversation_id,
                    {
                        "id": turn_id,
                        "parent_id": parent_id,
                        "flow_version_id": version_id,
                        "query": query,
                        "inputs": event.get("data", {}).get("inputs") or {},
                        "created_at": created,
                        "dialogue_count": _dialogue_count(state.conversation, turn_id, parent_id, query),
                    },
                )
            if closing or event.get("event") in CLOSING_EVENTS:
                closing.append(event)
            elif on_event is not None:
                on_event(event)

        try:
            record = run_turn(
                flow,
                state,
                query,
                merged_inputs,
                parent_id=parent_id,
                user_id=info.user_id,
                fidelity=info.meta.get("fidelity", DEFAULT_FIDELITY),
                plugin_token_counting=bool(info.meta.get("plugin_token_counting")),
                llm=llm or self.llm,
                node_memory_overrides=overrides or None,
                on_event=events,
                long_term=self.memory_of(version_id),
                granularity=granularity,
                files=files,
                turn_id=turn_id,
                created_at=created,
                memories=working.memories,
            )
            repo.finish_turn(
                self.db,
                conversation_id,
                turn_from_record(record, version_id),
                variable_changes=[_change_row(c) for c in record.variable_changes],
            )
            if not info.name and not info.turn_count:  # started without a name: named by what it opens with
                repo.set_conversation_fields(self.db, conversation_id, name=excerpt(query, NAME_WIDTH) or info.name)
            if on_event is not None:
                for event in closing:
                    on_event(event)
            # Still under the lock: the turn just written joins the working state (one short read),
            # so the next turn and a reader of the conversation start from it.
            try:
                self._working_copy(repo.get_conversation(self.db, conversation_id, settle=False))
            except StoreError:  # the turn is stored; the next one reads the conversation afresh
                with self._working_lock:
                    self._working.pop(conversation_id, None)
        except BaseException:
            if started:  # stopped half-way (an error, Ctrl-C): the turn shows as interrupted, not as a hole
                try:
                    repo.settle_interrupted(self.db, conversation_id, locked=True)
                except Exception:  # the store is unreachable: the next reader settles it
                    pass
            raise
        return record

    def regenerate(self, conversation_id: str, turn_id: str, **kwargs) -> TurnRecord:
        """A new answer to the same query: a sibling turn with the same parent."""
        conv = self.conversation(conversation_id)
        turn = _turn(conv, turn_id)
        inputs = (turn.meta or {}).get("inputs") or {}
        return self.send(conversation_id, turn.query, inputs, parent_id=turn.parent_id, **kwargs)

    def edit(self, conversation_id: str, turn_id: str, query: str, **kwargs) -> TurnRecord:
        """An edited query: a sibling of ``turn_id`` asking ``query`` instead."""
        conv = self.conversation(conversation_id)
        turn = _turn(conv, turn_id)
        return self.send(
            conversation_id, query, (turn.meta or {}).get("inputs") or {}, parent_id=turn.parent_id, **kwargs
        )

    def rerun_from(
        self, conversation_id: str, turn_id: str, overrides: Mapping[str, Mapping[str, Any]], **kwargs
    ) -> TurnRecord:
        """Re-run a turn's query with other memory settings, as a branch; the settings stay on."""
        self.set_memory_overrides(conversation_id, overrides)
        return self.regenerate(conversation_id, turn_id, overrides=overrides, **kwargs)

    def continue_on_latest(self, conversation_id: str, from_turn_id: str | None = None, **kwargs) -> TurnRecord:
        """Continue on the flow's newest version as a new branch (the turn re-run as a sibling).

        Refused, with Dify's ``agent_session_configuration_changed``, when the structure changed.
        """
        info = self.info(conversation_id)
        pinned = repo.get_flow_version(self.db, info.flow_version_id)
        latest = repo.latest_flow_version(self.db, pinned.flow_id)
        if latest.id == pinned.id:
            raise StoreError(
                f"conversation {conversation_id!r} already runs on the newest version "
                f"(v{pinned.version}) of {pinned.flow_name!r}"
            )
        if latest.structure != pinned.structure and info.turn_count:
            raise SessionChangedError(
                f"{SESSION_CHANGED} (flow {pinned.flow_name!r} v{latest.version} adds, removes or reorders nodes "
                f"compared with v{pinned.version}; start a new conversation on v{latest.version}, or keep this "
                f"one on v{pinned.version})"
            )
        conv = self.conversation(conversation_id)
        from_turn_id = from_turn_id or info.active_turn_id
        repo.set_conversation_fields(self.db, conversation_id, flow_version_id=latest.id)
        if from_turn_id is None:
            return None  # type: ignore[return-value]  # nothing to re-run yet: new turns use the new version
        return self.regenerate(conversation_id, _turn(conv, from_turn_id).id, **kwargs)

    # -- variables -----------------------------------------------------------------------------------
    def edit_variable(self, conversation_id: str, name: str, value: Any) -> VariableChange:
        """A live edit, type-checked with Dify's message; a mismatch changes nothing.

        Waits for a turn running on the conversation, so the turn's own writes cannot undo it."""
        with self.db.conversation_lock(conversation_id):
            flow, state, info = self.state(conversation_id)
            turns = state.conversation.turns
            _, change = edit_variable(
                flow.variables, state.variables, name, value, turn=len(turns), turn_id=info.active_turn_id
            )
            repo.write_variable_changes(
                self.db, conversation_id, [_change_row(change)], turn_id=change.turn_id, turn_seq=len(turns) or None
            )
        return change

    def revert_variable(self, conversation_id: str, name: str) -> VariableChange | None:
        """Undo the latest user edit of a variable (back to the value it replaced)."""
        last = next(
            (
                h
                for h in reversed(repo.variable_history(self.db, conversation_id))
                if h["name"] == name and h["node_id"] == "user"
            ),
            None,
        )
        if last is None:
            return None
        return self.edit_variable(conversation_id, name, copy.deepcopy(last["old"]))

    def reset_variables(self, conversation_id: str) -> list[VariableChange]:
        """Every variable back to its declared default (recorded as user edits)."""
        flow, state, _ = self.state(conversation_id)
        changes = []
        for name, value in defaults(flow.variables).items():
            if state.variables.get(name) != value:
                changes.append(self.edit_variable(conversation_id, name, value))
        return changes

    def variables_at(
        self,
        conversation_id: str,
        turn_id: str | None,
        *,
        conversation: Conversation | None = None,
        flow: Flow | None = None,
        history: list[dict] | None = None,
    ) -> dict[str, Any]:
        """Every variable's value as it was right after ``turn_id`` (None: before the first turn): what
        the turn left, not the user's edits made after it (an edit is filed under the newest turn, as
        the value the next turn reads).

        Pass the already loaded ``conversation``, ``flow`` and variable ``history`` to save reading
        them again.
        """
        if conversation is None or flow is None:
            flow, state, _ = self.state(conversation_id)
            conversation = state.conversation
        conv = conversation
        values = defaults(flow.variables)
        if turn_id is None:
            return values
        limit = (conv.turns[conv.tree.position[turn_id]].meta or {}).get("seq")
        if limit is None:
            return values
        if history is None:  # only each variable's last change up to the turn, not the whole history
            history = repo.variable_changes_until(self.db, conversation_id, limit)
        last: dict[str, Any] = {}
        for h in history:
            seq = h["turn_seq"]
            if seq is not None and (seq < limit or seq == limit and h["node_id"] != USER):
                last[h["name"]] = h["new"]  # (a whole history passed in: the same rule as the store's read)
        # Copied once per variable: a variable that grows every turn made copying every change quadratic.
        values.update({name: copy_value(new) for name, new in last.items()})
        return values

    # -- export / import ---------------------------------------------------------------------------
    def export(self, conversation_id: str) -> dict:
        return export_conversation(self.db, conversation_id)

    def import_(self, bundle: Mapping[str, Any]) -> str:
        return import_conversation(self.db, bundle)


def _turn(conv: Conversation, turn_id: str):
    position = conv.tree.position.get(turn_id)
    if position is None:
        raise NotFoundError(f"turn {turn_id!r} is not in conversation {conv.id!r}")
    return conv.turns[position]


def _dialogue_count(conversation: Conversation, turn_id: str, parent_id: Any, query: str) -> int:
    """``sys.dialogue_count`` of a turn about to run: its position on its thread, counted the way
    the run counts it (the conversation with the turn's placeholder appended)."""
    placeholder = Turn(
        id=turn_id,
        parent_id=parent_id,
        messages=(Message("user", query, QUERY, f"{turn_id}:query"),),
        query_index=0,
        answer_index=None,
    )
    return conversation.tree.extended(placeholder).depth[-1]


# -- export / import --------------------------------------------------------------------------------


__all__ = ["ConversationService", "SESSION_CHANGED", "Siblings"]
