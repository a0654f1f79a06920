"""What a turn of a flow leaves behind: each node's run (:class:`NodeRun`), the turn's record
(:class:`TurnRecord`) and the conversation it extends (:class:`ConversationState`).

A record is plain data: :meth:`TurnRecord.to_dict` and :meth:`TurnRecord.from_dict` are the one form a
store, an export and the API keep, and :meth:`TurnRecord.to_turn` is the message record memory
replays (the query, the tool steps an agent added, the Answer node's text).
"""

from __future__ import annotations

import copy
import uuid
from dataclasses import dataclass, field, fields
from typing import TYPE_CHECKING, Any, Mapping

from core.memory.replay import turn_numbers
from core.memory.strategies.compaction import SUMMARIES_META
from core.memory.strategies.dify import DEFAULT_FIDELITY
from core.model.conversation import AGENT_THOUGHTS, ANSWER, QUERY, Conversation, FileRef, Message, Turn
from core.model.ledger import Ledger

from .nodes.window_memory import META_KEY as WINDOW_META
from .prompt import PromptMessage
from .variables import VariableChange, copy_value, edit_variable, initialize

if TYPE_CHECKING:  # pragma: no cover
    from .graph import Flow

SUCCEEDED = "succeeded"
FAILED = "failed"


@dataclass
class NodeRun:
    """What one node did in one turn. LLM nodes carry their ledger, prompt as sent, reply and usage."""

    node_id: str
    type: str
    title: str
    emulated: bool
    status: str = SUCCEEDED
    error: str | None = None
    ledger: Ledger | None = None
    prompt: list[PromptMessage] | None = None
    reply: str | None = None
    usage: dict | None = None
    latency_ms: float = 0.0  # LLM nodes: the model call; other nodes: the node's own work
    outputs: dict = field(default_factory=dict)
    memory: dict | None = None  # the MemoryConfig the ledger was computed with (MemoryConfig.to_dict())
    memory_override: dict | None = None
    model: str | None = None  # the node's configured model
    model_called: str | None = None  # the model that answered (memlens/demo when it stood in)
    branch: str | None = None  # the handle taken by an if-else or a multi-way pass-through
    notes: list[str] = field(default_factory=list)
    steps: list[dict] | None = None  # agent nodes: every tool call with its args, result and the state after it
    granularity: str | None = None  # agent nodes: the history granularity the run replayed earlier turns with
    granularity_source: str | None = None  # which setting decided it: request, flow or default
    recalled: list[dict] | None = None  # long-term memories in the prompt: node_id, id, memory, score, tokens
    summaries: list[dict] | None = None  # compaction summaries the run wrote: key (their input), summary, written_by

    @property
    def fixed_prompt_tokens(self) -> int | None:
        """Tokens of everything in the prompt except the history (what the budget subtracts)."""
        if self.ledger is None:
            return None
        return self.ledger.prompt_tokens - self.ledger.history_tokens

    def to_dict(self) -> dict:
        out = {f.name: copy.deepcopy(getattr(self, f.name)) for f in fields(self) if f.name not in ("ledger", "prompt")}
        out["ledger"] = self.ledger.to_dict() if self.ledger is not None else None
        out["prompt"] = [m.to_dict() for m in self.prompt] if self.prompt is not None else None
        return out

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> "NodeRun":
        values = {f.name: copy.deepcopy(data[f.name]) for f in fields(cls) if f.name in data}
        values["ledger"] = Ledger.from_dict(data["ledger"]) if data.get("ledger") is not None else None
        values["prompt"] = (
            [PromptMessage.from_dict(m) for m in data["prompt"]] if data.get("prompt") is not None else None
        )
        return cls(**values)


@dataclass
class TurnRecord:
    """One turn of a flow run: the message record, every node run, every variable change."""

    id: str
    parent_id: str | None
    conversation_id: str
    turn: int  # the turn's number in the conversation (creation order, first turn 1)
    query: str
    answer: str
    status: str
    error: str | None
    dialogue_count: int  # the turn's position on its thread: sys.dialogue_count (absent from a Workflow app's pool)
    created_at: float
    inputs: dict = field(default_factory=dict)
    user_id: str = "user"
    fidelity: str = DEFAULT_FIDELITY
    plugin_token_counting: bool = False  # Dify's PLUGIN_BASED_TOKEN_COUNTING_ENABLED for this turn's nodes
    node_runs: list[NodeRun] = field(default_factory=list)
    variable_changes: list[VariableChange] = field(default_factory=list)
    variables: dict = field(default_factory=dict)  # every conversation variable after the turn
    intermediate: list[dict] = field(default_factory=list)  # tool calls and results agent nodes produced
    window_overwrites: dict = field(default_factory=dict)  # window-memory node id → history set from its input
    files: list = field(default_factory=list)  # the user's files: {type, url, id} (sys.files)
    #: A Dify Agent app's turn: its runner's thoughts, one per model request (:func:`core.flow.runtime.agent_thoughts`).
    agent_thoughts: int = 0

    @property
    def succeeded(self) -> bool:
        return self.status == SUCCEEDED

    @property
    def usage(self) -> dict[str, int]:
        prompt = sum((r.usage or {}).get("prompt_tokens", 0) for r in self.node_runs)
        completion = sum((r.usage or {}).get("completion_tokens", 0) for r in self.node_runs)
        return {"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion}

    @property
    def answer_tokens(self) -> int:
        """Dify stores the run's total completion tokens with the answer; a failed turn stores 0."""
        return self.usage["completion_tokens"] if self.succeeded else 0

    def node_run(self, node_id: str) -> NodeRun:
        for r in self.node_runs:
            if r.node_id == node_id:
                return r
        raise KeyError(f"node {node_id!r} did not run in turn {self.turn}")

    def ran(self, node_id: str) -> bool:
        return any(r.node_id == node_id for r in self.node_runs)

    def to_turn(self) -> Turn:
        """The stored message record: query, the Answer-node output (what memory replays), status."""
        middle = tuple(Message.from_dict(m) for m in self.intermediate)
        files = tuple(FileRef.from_dict(f, "document") for f in self.files)
        messages = (
            Message("user", self.query, QUERY, f"{self.id}:query", files=files),
            *middle,
            Message("assistant", self.answer, ANSWER, f"{self.id}:answer"),
        )
        fixed = {r.node_id: r.fixed_prompt_tokens for r in self.node_runs if r.fixed_prompt_tokens is not None}
        meta = {"prompt_tokens": fixed, "inputs": copy.deepcopy(self.inputs)}
        if self.window_overwrites:
            meta[WINDOW_META] = copy.deepcopy(self.window_overwrites)
        summaries = [copy.deepcopy(e) for r in self.node_runs for e in r.summaries or ()]
        if summaries:
            meta[SUMMARIES_META] = summaries  # what the turn's later replays give back instead of writing again
        if self.agent_thoughts:
            meta[AGENT_THOUGHTS] = self.agent_thoughts
        return Turn(
            id=self.id,
            parent_id=self.parent_id,
            messages=messages,
            query_index=0,
            answer_index=len(messages) - 1,
            status="normal" if self.succeeded else "error",
            error=self.error,
            created_at=self.created_at,
            answer_tokens=self.answer_tokens,
            meta=meta,
        )

    def to_dict(self) -> dict:
        out = {
            f.name: copy.deepcopy(getattr(self, f.name))
            for f in fields(self)
            if f.name not in ("node_runs", "variable_changes")
        }
        out["node_runs"] = [r.to_dict() for r in self.node_runs]
        out["variable_changes"] = [c.to_dict() for c in self.variable_changes]
        if not self.agent_thoughts:  # only an Agent app's turn has thoughts to store
            del out["agent_thoughts"]
        return out

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> "TurnRecord":
        values = {f.name: copy.deepcopy(data[f.name]) for f in fields(cls) if f.name in data}
        values["node_runs"] = [NodeRun.from_dict(r) for r in data.get("node_runs") or []]
        values["variable_changes"] = [VariableChange.from_dict(c) for c in data.get("variable_changes") or []]
        return cls(**values)


@dataclass(frozen=True)
class ConversationState:
    """A conversation so far: its message records (a tree by parent id) and its variables' values.

    Immutable: :meth:`apply` and :meth:`edit` return new states. ``history`` is every variable
    change so far, oldest first (node writes and user edits).
    """

    conversation: Conversation
    variables: dict = field(default_factory=dict)
    history: tuple[VariableChange, ...] = ()

    @classmethod
    def new(cls, flow: Flow | None = None, *, conversation_id: str | None = None) -> "ConversationState":
        conv = Conversation(
            id=conversation_id or str(uuid.uuid4()),
            turns=[],
            source_format="memlens-run",
            name=flow.name if flow else "",
        )
        return cls(conversation=conv, variables=initialize(flow.variables, {}) if flow else {})

    @property
    def id(self) -> str:
        return self.conversation.id

    @property
    def latest_turn_id(self) -> str | None:
        turns = self.conversation.turns
        return turns[-1].id if turns else None

    def apply(self, record: TurnRecord) -> "ConversationState":
        """The state after ``record``: its turn appended (failed turns too) and its variables."""
        conv = self.conversation
        new_conv = Conversation(
            id=conv.id,
            turns=list(conv.turns) + [record.to_turn()],
            system_prompt=conv.system_prompt,
            source_format=conv.source_format,
            name=conv.name,
            meta=dict(conv.meta),
        )
        return ConversationState(
            conversation=new_conv,
            variables=copy_value(record.variables),
            history=self.history + tuple(record.variable_changes),
        )

    def edit(self, flow: Flow, name: str, value: Any) -> tuple["ConversationState", VariableChange]:
        """A live edit from outside the flow, type-checked with Dify's message (see :func:`edit_variable`)."""
        turns = self.conversation.turns
        numbers = turn_numbers(self.conversation) if turns else []
        values = initialize(flow.variables, self.variables)
        new_values, change = edit_variable(
            flow.variables,
            values,
            name,
            value,
            turn=numbers[-1] if numbers else 0,
            turn_id=turns[-1].id if turns else None,
        )
        return ConversationState(self.conversation, new_values, self.history + (change,)), change


__all__ = ["ConversationState", "FAILED", "NodeRun", "SUCCEEDED", "TurnRecord"]
