"""Running one turn of a flow: every node in order, what each LLM node saw, and what changed.

:func:`run_turn` is persistence-agnostic: it takes a :class:`ConversationState` (the conversation's
message records with their parent ids, and the conversation variables' current values) and
returns a :class:`TurnRecord`; it never modifies the state. :meth:`ConversationState.apply` gives
the state after the turn. A store persists records; a server streams :func:`run_turn`'s events.

How a turn runs (spec/dify-memory.md §1–§3):

* The new turn is appended as Dify's placeholder row (answer ``""``, ``answer_tokens`` 0) under its
  parent — by default the newest turn, or any earlier turn id to branch. ``sys.dialogue_count`` is
  its position on its thread (first turn 1; failed turns count).
* Conversation variables not stored yet start at their defaults; values stored for variables the
  flow no longer declares are kept (§3.2).
* Nodes run from the start node along the edges. A node runs once all its incoming edges are
  decided and at least one was taken; an if-else takes the handle of its first true case, or
  ``false``; branches not taken are skipped. Nodes MemLens does not emulate run as pass-throughs
  with empty outputs and are recorded ``emulated: false`` (a multi-way pass-through takes its
  first branch and says so). Nodes inside an iteration or loop do not run.
* Each LLM node's memory is the ``dify`` strategy with the node's own window over the
  conversation's stored answers (§2.8), computed as a ledger; the history sent to the model is
  exactly the ledger's kept messages. Prompt assembly follows §2.4–§2.7 (chat) and §2.6
  (completion models with role prefixes). A Question Classifier's memory is the same strategy with
  its own window rule, its history text lines in its prompt; the class its model picks decides the
  branch (:mod:`core.flow.nodes.question_classifier`). A Parameter Extractor's memory is the
  classifier's; its reply gives typed parameters (:mod:`core.flow.nodes.parameter_extractor`).
* MemLens's own nodes: ``memory-retrieve`` / ``memory-store`` read and write the long-term memory
  passed in as ``long_term`` (keyed by ``sys.user_id``; :mod:`core.memory.long_term`), and a prompt message
  that reads a retrieve node's output has origin ``long-term memory``; ``window-memory`` holds a
  Window Memory store that LLM and agent nodes read through ``memory_node`` (:mod:`core.flow.nodes.window_memory`);
  ``tool-agent`` runs tools on a per-run state and adds its tool calls and results to the turn
  (:mod:`core.flow.nodes.tool_agent`).
* An assigner's writes are applied when the node finishes and reported through
  ``on_variables_updated``; they stay if a later node fails. A failing node fails the turn: the
  record keeps status ``failed``, the error and an empty answer.
* ``on_event`` receives Dify's streaming events in order: ``workflow_started``, ``node_started`` /
  ``node_finished`` per node, ``message`` (answer text), ``message_end``, ``workflow_finished``;
  on failure ``workflow_finished`` (status ``failed``) then ``error``.
"""

from __future__ import annotations

import copy
import json
import math
import time
import uuid
from collections import deque
from dataclasses import dataclass, field, fields, replace
from typing import Any, Callable, Mapping, Sequence

from core.limits import TEMPLATE_TRANSFORM_MAX_LENGTH, LimitError, check_query, check_value, nulled_non_finite
from core.llm.client import DemoClient, LLMClient, default_client, one_line
from core.llm.errors import LLMError
from core.memory.errors import ConfigError, LongTermMemoryError
from core.memory.long_term import LLMExtractor, Source, memories_text
from core.memory.entries import history_of
from core.memory.replay import MemoryConfig, Replay, turn_number, turn_numbers
from core.memory.turn_memory import TurnMemory
from core.memory.config import setting_names
from core.memory.strategies import OFF, get_strategy, remembers
from core.memory.strategies.compaction import SUMMARIES_META, ShippedRunHook, recorded_summaries
from core.memory.strategies.dify import DEFAULT_FIDELITY, FIDELITIES, DifyStrategy
from core.memory.summarize import ModelSectionSummarizer
from core.model.conversation import AGENT_THOUGHTS, ANSWER, QUERY, UUID_NIL, Conversation, FileRef, Message, Turn
from core.model.ledger import Ledger
from core.model.tokens import DEMO_MODEL, counter_for, model_supports_vision

from .errors import AssignerError, GranularityError, NodeFailed, RunError, WindowInputError
from .agent_chat import AGENT_CHAT
from .graph import Flow, Node
from .node_types import NODE_TYPES
from .nodes.aggregator import aggregate, aggregator_settings
from .nodes.if_else import OPERATOR_ALIASES, if_else_cases
from .nodes.llm import LLMSettings, llm_settings
from .nodes.long_term import retrieve_settings, store_settings
from .nodes.parameter_extractor import FUNCTION_CALL, FUNCTION_CALL_NOTE, ExtractorSettings, extractor_frame
from .nodes.parameter_extractor import read_reply as read_parameters
from .nodes.question_classifier import ClassifierSettings, classifier_frame, read_reply
from .nodes.plugin_agent import VARIABLE, AgentInput, PluginAgentSettings, agent_frame, agent_notes
from .nodes.text_memory import ShippedWindowNode, TextMemoryNode
from .nodes.template_transform import template_settings
from .nodes.tool_agent import (DemoPlanner, ModelPlanner, agent_settings, check_granularity, planner_for,
                               resolve_granularity, run_agent, template_selectors)
from .nodes.tool_agent import system_text as agent_system_text
from .nodes.window_memory import (FAIL_BRANCH, META_KEY as WINDOW_META, history_inputs, message_dict, parse_overwrite,
                                  window_call, window_settings)
from .prompt import (CHAT, COMPLETION, CURRENT_QUERY, HISTORY_SLOT, HUMAN_AI, TEXT_HISTORY, PromptFrame, PromptMessage,
                     fixed_tokens, history_messages, message)
from .templates import (CONTEXT_PLACEHOLDER, MISSING, NONE, FileList, VariablePool, refers_to, render, render_jinja,
                        render_message, selectors_in, value_text)
from .variables import (VariableChange, check_sizes, copy_value, edit_variable, initialize, run_assigner_v1,
                        run_assigner_v2)

SUCCEEDED = "succeeded"
FAILED = "failed"
#: Where a prompt message came from (the context receipt's origin chips).
ORIGINS = ("system", "template", "conversation variable", "memory history", "current query", "context",
           "long-term memory")
NO_PROMPT = "No prompt found in the LLM configuration. Please ensure a prompt is properly configured before proceeding."
ROLE_PREFIX_REQUIRED = "Memory role prefix is required for completion model."


class _Latest:
    def __repr__(self) -> str:
        return "LATEST"


#: ``parent_id`` default: the newest turn of the conversation (the end of the thread just answered).
LATEST: Any = _Latest()


# -- records ----------------------------------------------------------------------------------------

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
        values["prompt"] = [PromptMessage.from_dict(m) for m in data["prompt"]] if data.get("prompt") is not None \
            else None
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
    #: A Dify Agent app's turn: its runner's thoughts, one per model request (:func:`agent_thoughts`).
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
        messages = (Message("user", self.query, QUERY, f"{self.id}:query", files=files), *middle,
                    Message("assistant", self.answer, ANSWER, f"{self.id}:answer"))
        fixed = {r.node_id: r.fixed_prompt_tokens for r in self.node_runs if r.fixed_prompt_tokens is not None}
        meta = {"prompt_tokens": fixed, "inputs": copy.deepcopy(self.inputs)}
        if self.window_overwrites:
            meta[WINDOW_META] = copy.deepcopy(self.window_overwrites)
        summaries = [copy.deepcopy(e) for r in self.node_runs for e in r.summaries or ()]
        if summaries:
            meta[SUMMARIES_META] = summaries  # what the turn's later replays give back instead of writing again
        if self.agent_thoughts:
            meta[AGENT_THOUGHTS] = self.agent_thoughts
        return Turn(id=self.id, parent_id=self.parent_id, messages=messages, query_index=0,
                    answer_index=len(messages) - 1, status="normal" if self.succeeded else "error", error=self.error,
                    created_at=self.created_at, answer_tokens=self.answer_tokens, meta=meta)

    def to_dict(self) -> dict:
        out = {f.name: copy.deepcopy(getattr(self, f.name)) for f in fields(self)
               if f.name not in ("node_runs", "variable_changes")}
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


# -- conversation state -----------------------------------------------------------------------------

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
        conv = Conversation(id=conversation_id or str(uuid.uuid4()), turns=[], source_format="memlens-run",
                            name=flow.name if flow else "")
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
        new_conv = Conversation(id=conv.id, turns=list(conv.turns) + [record.to_turn()], system_prompt=conv.system_prompt,
                                source_format=conv.source_format, name=conv.name, meta=dict(conv.meta))
        return ConversationState(conversation=new_conv, variables=copy_value(record.variables),
                                 history=self.history + tuple(record.variable_changes))

    def edit(self, flow: Flow, name: str, value: Any) -> tuple["ConversationState", VariableChange]:
        """A live edit from outside the flow, type-checked with Dify's message (see :func:`edit_variable`)."""
        turns = self.conversation.turns
        numbers = turn_numbers(self.conversation) if turns else []
        values = initialize(flow.variables, self.variables)
        new_values, change = edit_variable(flow.variables, values, name, value,
                                           turn=numbers[-1] if numbers else 0,
                                           turn_id=turns[-1].id if turns else None)
        return ConversationState(self.conversation, new_values, self.history + (change,)), change


# -- memory configuration ---------------------------------------------------------------------------

def _check_override(node_id: str, override: Mapping[str, Any]) -> dict:
    if not isinstance(override, Mapping):
        raise RunError(f"memory override for node {node_id!r} must be a mapping of memory settings")
    known = setting_names()
    unknown = set(override) - known
    if unknown:
        raise RunError(f"memory override for node {node_id!r}: unknown setting(s) {', '.join(sorted(unknown))}; "
                       f"expected some of {', '.join(sorted(known))}")
    return dict(override)


def node_memory_config(flow: Flow, node_id: str, *, fidelity: str = DEFAULT_FIDELITY,
                       plugin_token_counting: bool = False, granularity: str | None = None,
                       override: Mapping[str, Any] | None = None) -> MemoryConfig:
    """The memory config an LLM or agent node runs with; ``override`` replaces any of its fields for a
    what-if (runs, the switchboard and the recorded-run checks all take a node's config from here).

    An LLM node: ``dify`` with its window, ``off`` without a memory block, or the ``window`` of the
    window-memory node it reads (``memory_node``). A Question Classifier, Parameter Extractor or
    Dify Agent node: the same, with their own window rule (:meth:`ShippedWindowNode.window`) and
    budget (``prompt_reserve``, ``history_budget``). All read their history as text
    (``history_as_text``) when it goes into their prompt as lines: the Question Classifier and the
    Parameter Extractor always, an LLM node with a completion model. ``model`` is the node's configured model
    (``memlens/demo`` when none is set): its context size and tokenizer are what Dify would budget
    with, whichever model stands in to answer. ``max_tokens`` is the node's user-set completion
    parameter (0 when unset). ``fidelity`` and ``plugin_token_counting`` are the conversation's Dify
    profile (shipped code by default, token counting off as Dify ships it).

    A tool-agent node: its ``memory`` setting with its model, and the history ``granularity`` of the
    request (``None``: the flow's, else the default), or the window-memory node it reads.
    """
    node = flow.node(node_id)
    # The node's settings, flat: what its memory is, and the Dify profile its window and budget read,
    # which an override switching a memory on takes up (a setting its memory system lacks is left out).
    if node.type == "tool-agent":
        base = _agent_memory_config(flow, node, granularity, fidelity, plugin_token_counting)
        values = {"strategy": base.strategy, **base.values()}
    elif node.type != "llm" and isinstance(shipped := _shipped_window_settings(node), ShippedWindowNode):
        # (An LLM node's settings are read once, below: they are not a ShippedWindowNode.)
        # Its window depends on the Dify profile: an override's profile (docs ↔ code) reads it its way.
        profile = (override or {}).get("fidelity", fidelity)
        values = dict(strategy=DifyStrategy.name if shipped.memory is not None else OFF,
                      window=shipped.window(profile),
                      fidelity=fidelity, plugin_token_counting=plugin_token_counting,
                      model=shipped.model or DEMO_MODEL, max_tokens=shipped.max_tokens,
                      history_as_text=shipped.history_as_text, prompt_reserve=shipped.prompt_reserve,
                      history_budget=shipped.history_budget, sends_empty=shipped.sends_empty)
    else:
        settings = flow.llm(node_id)
        # A basic Chatbot's call budgets after the prompt before its history, its query added later, and no filter
        # drops an empty history message (basic_chat).
        basic = settings.basic_chat
        values = dict(strategy=DifyStrategy.name if settings.memory is not None else OFF,
                      window=settings.memory.window if settings.memory is not None else None,
                      fidelity=fidelity, plugin_token_counting=plugin_token_counting,
                      model=settings.model or DEMO_MODEL, max_tokens=settings.max_tokens,
                      history_as_text=settings.mode != "chat",  # a completion prompt's history is text
                      prompt_reserve=0 if basic else None, query_after_budget=basic, sends_empty=basic)
        source = node.data.get("memory_node")
        if source and flow.has_node(source) and flow.node(source).type == "window-memory":
            # The node reads a Window Memory store: its window and scope (an overwrite input is not replayed here).
            store = window_settings(flow.node(source)).config(values["model"]).with_(max_tokens=values["max_tokens"])
            values = {"strategy": store.strategy, **store.values()}
    try:
        if override:
            values = {**values, **_check_override(node_id, override)}
        return MemoryConfig(**values).validate()
    except ConfigError as e:
        raise RunError(f"memory settings for node {node_id!r}: {e}") from None
    except TypeError as e:
        raise RunError(f"memory override for node {node_id!r}: {e}") from None


def _agent_memory_config(flow: Flow, node: Node, granularity: str | None, fidelity: str,
                         plugin_token_counting: bool) -> MemoryConfig:
    """An agent node's memory as configured: the window-memory node it reads, or its ``memory``
    setting with its model and the history granularity (the request's, else the flow's, else the
    default); a Dify strategy takes the conversation's Dify profile unless the setting gives one
    (a Dify Agent app's node, :mod:`core.flow.agent_chat`)."""
    settings = agent_settings(node)
    source = settings.memory_node
    if source and flow.has_node(source) and flow.node(source).type == "window-memory":
        return window_settings(flow.node(source)).config(settings.model)
    try:
        granularity, _ = resolve_granularity(granularity, flow.history.get("granularity"))
    except GranularityError as e:
        raise RunError(str(e)) from None
    profile = {"fidelity": fidelity, "plugin_token_counting": plugin_token_counting} \
        if get_strategy(settings.memory["strategy"]).follows_dify_profile else {}
    return MemoryConfig.from_dict({**profile, **settings.memory, "model": settings.memory.get("model", settings.model),
                                   "granularity": granularity})


#: The node types a memory override (a what-if) applies to.
OVERRIDABLE_TYPES = tuple(name for name, kind in NODE_TYPES.items() if kind.memory)


def node_history_inputs(flow: Flow, conversation: Conversation, node_id: str):
    """For an LLM or agent node that reads a Window Memory node: what inputs wrote over that store
    before each turn's call, as recorded with the turns (for :class:`Replay`'s ``history_inputs``);
    ``None`` for a node with its own memory."""
    source = flow.node(node_id).data.get("memory_node")
    if source and flow.has_node(source) and flow.node(source).type == "window-memory":
        return history_inputs(conversation, source)
    return None


def node_replay(flow: Flow, conversation: Conversation, node_id: str, config: MemoryConfig,
                prompt_tokens: Callable[[int], int], *, system_prompt: str = "") -> Replay:
    """An LLM or agent node's memory replayed over a recorded conversation under ``config``, as its
    runs decided it: its flow's thread mode, the prompt sizes and any inputs written over its store
    (``system_prompt``: what an agent's shipped compaction counts besides them, see :func:`_agent_replays_system`)."""
    return Replay(conversation, config, system_prompt=system_prompt, has_thread=flow.is_chat,
                  prompt_tokens=prompt_tokens, history_inputs=node_history_inputs(flow, conversation, node_id))


def _agent_replays_system(config: MemoryConfig) -> bool:
    """An agent node under Dify 1.17's shipped compaction checks the whole request, its system prompt
    included (every other memory counts only the history against the prompt's size)."""
    return config.system.compacts_per_request(config)


# -- if-else (graphon's condition processor, spec §5.2) ---------------------------------------------

def _number_pair(value: Any, expected: Any) -> tuple[Any, Any]:
    if isinstance(expected, str):
        try:
            exp = float(expected)
        except ValueError:
            raise NodeFailed(f"Cannot convert '{expected}' to number") from None
        if isinstance(value, int) and exp.is_integer():
            return value, int(exp)
        return float(value), exp
    if isinstance(expected, (int, float)):
        return value, expected
    raise NodeFailed(f"Cannot convert {type(expected)} to number")


def _equality_expected(value: Any, expected: Any) -> Any:
    try:
        if isinstance(value, bool):
            return bool(expected)
        if isinstance(value, int):
            return int(float(expected)) if isinstance(expected, str) else int(expected)
        if isinstance(value, float):
            return float(expected)
    except (TypeError, ValueError):
        raise NodeFailed(f"Cannot convert {expected!r} to number") from None
    raise NodeFailed("Invalid actual value type: number or boolean")


def _compare(op: str, value: Any, expected: Any) -> bool:
    """One comparison, with Dify's handling of empty and missing values and its error messages."""
    if op == "contains" or op == "not contains":
        negate = op == "not contains"
        if not value:
            return negate
        if isinstance(value, str):
            hit = str(expected) in value
        elif isinstance(value, list):
            hit = expected in value
        else:
            raise NodeFailed("Invalid actual value type: string or array")
        return not hit if negate else hit
    if op in ("start with", "end with"):
        if not value:
            return False
        if not isinstance(value, str):
            raise NodeFailed("Invalid actual value type: string")
        return value.startswith(str(expected)) if op == "start with" else value.endswith(str(expected))
    if op in ("is", "is not"):
        if value is None:
            return False
        if not isinstance(value, (str, bool)):
            raise NodeFailed("Invalid actual value type: string or boolean")
        return (value == expected) if op == "is" else (value != expected)
    if op == "empty":
        return not value
    if op == "not empty":
        return bool(value)
    if op in ("=", "≠"):
        if value is None:
            return False
        exp = _equality_expected(value, expected)
        return (value == exp) if op == "=" else (value != exp)
    if op in (">", "<", "≥", "≤"):
        if value is None:
            return False
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise NodeFailed("Invalid actual value type: number")
        a, b = _number_pair(value, expected)
        return {">": a > b, "<": a < b, "≥": a >= b, "≤": a <= b}[op]
    if op in ("null", "not exists"):
        return value is None
    if op in ("not null", "exists"):
        return value is not None
    if op in ("in", "not in"):
        if not value:
            return op == "not in"
        if not isinstance(expected, list):
            raise NodeFailed("Invalid expected value type: array")
        return (value in expected) if op == "in" else (value not in expected)
    if op == "all of":
        if not value or not isinstance(expected, list):
            return False
        return isinstance(value, (list, str)) and all(item in value for item in expected)
    raise NodeFailed(f"Unsupported operator: {op}")


def _to_bool(value: Any) -> bool:
    if isinstance(value, bool):
        return value
    if isinstance(value, int):
        return bool(value)
    if isinstance(value, str):
        try:
            loaded = json.loads(value)
        except ValueError:
            loaded = None
        if isinstance(loaded, (bool, int)):
            return bool(loaded)
    raise NodeFailed(f"unexpected value: type={type(value)}, value={value}")


def _condition(cond: Mapping[str, Any], pool: VariablePool) -> bool:
    selector = list(cond.get("variable_selector") or [])
    op = OPERATOR_ALIASES.get(cond.get("comparison_operator"), cond.get("comparison_operator"))
    raw = pool.get(selector)
    if raw is MISSING:
        raise NodeFailed(f"Variable {selector} not found")
    value = None if raw is NONE else raw
    if isinstance(value, FileList) and op in ("contains", "not contains", "all of"):
        sub = cond.get("sub_variable_condition")
        if not sub:
            raise NodeFailed("Sub variable is required")
        # MemLens carries no files, so every per-file check sees an empty list (any → false, all → true).
        results = [("not" in str(c.get("comparison_operator"))) for c in sub.get("conditions") or []]
        return all(results) if sub.get("logical_operator", "and") == "and" else any(results)
    if op in ("empty", "not empty", "null", "not null", "exists", "not exists"):
        return _compare(op, value, None)
    expected = cond.get("value")
    if isinstance(expected, str):
        expected = render(expected, pool)
    if isinstance(value, bool) or (isinstance(value, list) and value and all(isinstance(v, bool) for v in value)):
        if expected is not None:
            expected = [_to_bool(e) for e in expected] if isinstance(expected, list) else _to_bool(expected)
    return _compare(op, value, expected)


def evaluate_if_else(node: Node, pool: VariablePool) -> str:
    """The handle an if-else takes: the first true case's id, or ``false`` (the else branch)."""
    for case in if_else_cases(node):
        logic = case.get("logical_operator", "and")
        result = logic == "and"
        for cond in case.get("conditions") or []:
            ok = _condition(cond, pool)
            if logic == "and" and not ok:
                result = False
                break
            if logic == "or" and ok:
                result = True
                break
        else:
            result = logic == "and"  # Dify: all([]) / any([]) when no condition decided early
        if result:
            return str(case.get("case_id") or case.get("id") or "true")
    return "false"


# -- the run ----------------------------------------------------------------------------------------

@dataclass
class _Context:
    flow: Flow
    conversation: Conversation  # with the placeholder turn appended
    position: int
    turn_id: str
    turn_number: int
    pool: VariablePool
    variables: dict
    fidelity: str
    llm: LLMClient | None
    overrides: dict
    on_variables_updated: Callable[[str, list[VariableChange]], None] | None
    emit: Callable[..., None]
    changes: list[VariableChange] = field(default_factory=list)
    answers: list[str] = field(default_factory=list)
    long_term: Any = None  # a core.memory.long_term.LongTermMemory, or None when no store is connected
    granularity: str | None = None  # the request's history granularity (None: the flow's, else the default)
    recalled: dict = field(default_factory=dict)  # memory-retrieve node id → its results (dicts)
    window_calls: dict = field(default_factory=dict)  # window-memory node id → (config, overwrite or None)
    window_overwrites: dict = field(default_factory=dict)  # persisted inputs (thread scope)
    intermediate: list = field(default_factory=list)  # Messages agent nodes added to the turn
    plugin_token_counting: bool = False
    memories: dict | None = None  # the conversation's TurnMemory per memory config, kept between its turns
    inputs: dict = field(default_factory=dict)  # the start node's inputs, as checked

    def client(self) -> LLMClient:
        if self.llm is None:
            self.llm = default_client()
        return self.llm


def _check_inputs(flow: Flow, query: str, inputs: Mapping[str, Any] | None) -> dict:
    """The start form's inputs, checked and converted as Dify's ``BaseAppGenerator._validate_inputs``
    does before a run (nothing runs on error): only a missing value (``None``) is "not given" — it
    takes the field's default, else stays ``None``, and fails a required field; an empty text is
    a value like any other (an empty number is ``None``); NUL characters are taken out of text."""
    given = dict(inputs or {})
    out: dict[str, Any] = {}
    for var in flow.start_fields:
        name = str(var["variable"])
        kind = var.get("type") or "text-input"
        label = var.get("label") or name
        if not flow.is_chat and name == "query" and name not in given:
            given[name] = query  # a Workflow app's form usually carries the question as its `query` input
        value = given.get(name)
        defaulted = value is None
        if defaulted:
            if var.get("required"):
                raise RunError(f"input {name!r} ({label}) is required by the start form; pass it in inputs")
            value = var.get("default")
        out[name] = _input_value(name, kind, var, value, defaulted=defaulted)
    return out


#: The texts Dify reads as a checkbox's value (any other text is kept as it is).
CHECKBOX_WORDS = {"true": True, "1": True, "yes": True, "on": True, "false": False, "0": False, "no": False,
                  "off": False}


def _input_value(name: str, kind: str, var: Mapping[str, Any], value: Any, *, defaulted: bool = False) -> Any:
    """One start-form value as Dify takes it (``_validate_inputs`` and ``_sanitize_value``);
    ``defaulted``: the value is the field's default, the input not being given."""
    if value is None:
        return None
    if kind in ("file", "file-list") and not var.get("required") and value == "":
        return None  # the form's empty placeholder for an optional file: no file
    if kind in ("text-input", "paragraph", "select") and not isinstance(value, str):
        raise RunError(f"input {name!r} must be text")
    if kind == "number":
        if isinstance(value, str):
            if not value.strip():
                return None
            try:
                value = float(value) if "." in value else int(value)
            except ValueError:  # (a whole number past Python's 4,300 digits too)
                shown = repr(value) if len(value) <= 40 else f"{value[:40]!r}… ({len(value):,} characters)"
                raise RunError(f"input {name!r} must be a valid number, not {shown}") from None
        if not isinstance(value, (int, float)):
            raise RunError(f"input {name!r} must be a number")
        if isinstance(value, float) and not math.isfinite(value):  # "1.5e400" reads as inf
            raise RunError(f"input {name!r} must be a finite number, not {value!r}")
        return value
    if kind == "select":
        options = var.get("options") or []
        if value not in options:
            # An optional select left unset whose default is no option (often ''): Dify fails the run
            # too (langgenius/dify#33069), so the message says where the value came from.
            why = f" (not given, so its default {value!r}, which Dify refuses too)" if defaulted else ""
            raise RunError(f"input {name!r} must be one of the following: {list(options)}{why}")
    elif kind in ("text-input", "paragraph"):
        limit = var.get("max_length")
        if isinstance(limit, int) and limit > 0 and len(value) > limit:
            raise RunError(f"input {name!r} must be less than {limit} characters")
    elif kind == "checkbox":
        if isinstance(value, str):
            value = CHECKBOX_WORDS.get(value.strip().lower(), value)
        elif isinstance(value, (int, float)) and value in (0, 1):
            value = value == 1
    elif kind == "json_object":
        if value and not isinstance(value, Mapping):
            raise RunError(f"input {name!r} must be an object")
    return value.replace("\x00", "") if isinstance(value, str) else value


def _pass_through_branch(node: Node, flow: Flow) -> str | None:
    handles = [e.handle for e in flow.outgoing(node.id)]
    if not handles or "source" in handles:
        return None
    order = [str(c.get("id")) for c in node.data.get("classes") or [] if isinstance(c, Mapping)]
    for h in order:
        if h in handles:
            return h
    return handles[0]


def _template_origin(item_text: str, role: str, context_used: bool) -> str:
    if context_used:
        return "context"
    if refers_to(item_text, "conversation"):
        return "conversation variable"
    return "system" if role == "system" else "template"


def _history(ctx: "_Context", config: MemoryConfig, window,
             fixed_tokens: int) -> tuple[Ledger, list[Message], Replay | None]:
    """The node's ledger and the history it sends: from a Window Memory node it reads, or its own memory;
    and the replay that made it (``None`` for a Window Memory node's)."""
    if window is not None:
        call = window_call(ctx.conversation, ctx.position, window[0], config, overwrite=window[2],
                           has_thread=ctx.flow.is_chat, prompt_tokens=fixed_tokens)
        return call.ledger, call.messages, None
    if ctx.memories is None:
        memory = TurnMemory(config, has_thread=ctx.flow.is_chat)
    else:
        key = (json.dumps(config.to_dict(), sort_keys=True, default=str), ctx.flow.is_chat)
        memory = ctx.memories.get(key)
        if memory is None:
            memory = ctx.memories[key] = TurnMemory(config, has_thread=ctx.flow.is_chat)
    ledger, history = memory.ledger(ctx.conversation, ctx.position, fixed_tokens)
    return ledger, history, memory.replay


def node_frame(settings: LLMSettings, render_item, counter, sys_query: str | None, pool: VariablePool, *,
               ctx: "_Context | None" = None, context_used: bool = False,
               role_prefix: Mapping[str, str] | None = None, file_upload: bool = False,
               vision: bool = False) -> PromptFrame:
    """Everything an LLM node sends besides its history (:class:`core.flow.prompt.PromptFrame`), from
    its template rendered with ``render_item``: runs and the estimate without a recorded prompt
    both build it here.

    Chat models: the rendered template messages (empty ones left out), then the memory's query
    message. Completion models: the rendered template, the unrendered query template before it
    and the history as ``role_prefix`` lines."""
    if settings.mode != "chat":
        template = render_item(settings.prompt[0]) if settings.prompt else ""
        return PromptFrame(COMPLETION, counter, template=template, sys_query=sys_query, role_prefix=role_prefix,
                           file_upload=file_upload, vision=vision)
    basic = settings.basic_chat  # no filter: only an empty system message is left out, the query goes as typed
    before = []
    for item in settings.prompt:
        text = render_item(item)
        if text or basic and item.role != "system":
            used_context = context_used and CONTEXT_PLACEHOLDER in item.text
            origin = "long-term memory" if ctx is not None and _recall_sources(item, settings, ctx) else \
                _template_origin(item.text, item.role, used_context)
            before.append(message(item.role, text, origin, counter))
    after = []
    if sys_query:
        text = sys_query if basic else render(sys_query, pool, context="")
        if text:
            after.append(message("user", text, CURRENT_QUERY, counter))
    return PromptFrame(CHAT, counter, before=tuple(before), after=tuple(after), file_upload=file_upload,
                       vision=vision, keep_empty=basic)


def _run_llm(node: Node, ctx: _Context, run: NodeRun) -> None:
    settings: LLMSettings = llm_settings(node)
    override = ctx.overrides.get(node.id)
    config = node_memory_config(ctx.flow, node.id, fidelity=ctx.fidelity,
                                plugin_token_counting=ctx.plugin_token_counting, override=override)
    window = None if override else _window_memory(node, ctx)  # a what-if override replays as usual
    if window is not None:
        config = window[1].with_(model=settings.model or DEMO_MODEL, max_tokens=settings.max_tokens)
    memory_on = config.remembers
    block = settings.memory if memory_on else None  # Dify's memory block, as this run sees it
    run.memory = config.to_dict()
    run.memory_override = copy.deepcopy(dict(override)) if override else None
    run.model = settings.model or DEMO_MODEL
    counter = counter_for(config.model)
    pool = ctx.pool

    context_text = ""
    if settings.context_enabled and settings.context_selector:
        value = pool.get(list(settings.context_selector))
        context_text = "" if value is MISSING else value_text(value)

    def render_item(item) -> str:
        if item.edition_type == "jinja2":
            try:
                return render_jinja(item.jinja2_text or item.text, settings.jinja2_variables, pool)
            except Exception as e:  # a broken Jinja template fails the node, as in Dify
                raise NodeFailed(f"Jinja2 template error: {one_line(str(e))}") from None
        return render_message(item.text, item.edition_type, pool, context=context_text)

    raw_query = pool.get(["sys", "query"])
    raw_query = None if raw_query in (MISSING, NONE) else raw_query
    if memory_on:
        qpt = block.query_prompt_template if block is not None else None
        sys_query = qpt if qpt else raw_query  # empty/absent template → the raw query (§2.5)
    else:
        sys_query = None  # no memory block → no automatic query message

    with_history = memory_on and ctx.flow.is_chat
    if settings.mode != "chat" and with_history and (block is None or block.role_prefix is None):
        raise NodeFailed(ROLE_PREFIX_REQUIRED)
    frame = node_frame(settings, render_item, counter, sys_query, pool, ctx=ctx, context_used=bool(context_text),
                       role_prefix=block.role_prefix if with_history and block is not None else None,
                       file_upload=ctx.flow.file_upload, vision=model_supports_vision(config.model))
    ledger, history, planned = _history(ctx, config, window, frame.fixed_tokens())
    if planned is not None and config.system.compacts_per_request(config):
        # The summaries its compaction wrote, stored with the turn as an agent node's are, so later replays
        # give them back rather than writing them again.
        run.summaries = copy.deepcopy(recorded_summaries(planned).written) or None
    run.ledger = ledger
    run.memory = config.to_dict()
    run.recalled = _recalled(settings.prompt, settings, ctx, counter) or None
    prompt = frame.build(history)
    run.prompt = prompt
    if not prompt:
        raise NodeFailed(NO_PROMPT)
    model = config.model if override and "model" in override else settings.model
    reply = _complete(ctx, run, model, prompt, settings.max_tokens)
    run.outputs = {"text": reply.text, "usage": reply.usage, "finish_reason": "stop"}


def _complete(ctx: "_Context", run: NodeRun, model: str, prompt: Sequence[PromptMessage], max_tokens: int):
    """The model call of an LLM or Question Classifier node: timed, its reply, usage and stand-in note
    recorded on ``run``; a failed call fails the node."""
    started = time.perf_counter()
    try:
        reply = ctx.client().complete(model, [m.wire() for m in prompt], max_tokens or None)
    except LLMError as e:
        run.latency_ms = (time.perf_counter() - started) * 1000
        raise NodeFailed(str(e)) from None
    run.latency_ms = (time.perf_counter() - started) * 1000
    run.reply = reply.text
    run.usage = reply.usage
    run.model_called = reply.model
    if reply.note:
        run.notes.append(reply.note)
    return reply


def _text_memory(node: Node) -> bool:
    """Whether the node puts its memory into its prompt as text lines (Question Classifier, Parameter Extractor)."""
    kind = NODE_TYPES.get(node.type)
    return kind is not None and kind.text_memory


def _text_settings(node: Node) -> TextMemoryNode:
    return NODE_TYPES[node.type].read(node)  # type: ignore[misc]


def _categories(settings: ClassifierSettings, pool: VariablePool) -> list[dict]:
    """A Question Classifier's classes as its prompt lists them: ``{category_id, category_name}``, names rendered."""
    return [{"category_id": c.id, "category_name": render(c.name, pool)} for c in settings.classes]


def _node_query(settings: TextMemoryNode, pool: VariablePool) -> str:
    """The text a Question Classifier sorts or a Parameter Extractor reads: the value at its selector, as text."""
    selector = settings.query_selector
    value = pool.get(list(selector)) if selector else MISSING
    return "" if value is MISSING or value is NONE or value is None else value_text(value)


def _text_frame(settings: TextMemoryNode, pool: VariablePool, counter, *, with_history: bool, query: str = "",
                **options: Any) -> PromptFrame:
    """The frame of a Question Classifier's or Parameter Extractor's prompt, its settings rendered with
    ``pool``; ``query`` stands in when the node's own query reads as nothing (an estimate without its run)."""
    text = _node_query(settings, pool) or query
    instruction = render(settings.instruction, pool)
    if isinstance(settings, ClassifierSettings):
        return classifier_frame(_categories(settings, pool), instruction, text, counter, mode=settings.mode,
                                with_history=with_history, **options)
    assert isinstance(settings, ExtractorSettings)
    return extractor_frame(settings.schema(), instruction, text, counter, mode=settings.mode,
                           with_history=with_history, **options)


def _text_memory_call(node: Node, settings: TextMemoryNode, ctx: _Context, run: NodeRun):
    """The model call of a node whose memory goes into its prompt as text (:func:`_memory_call`)."""
    return _memory_call(node, settings, ctx, run, lambda counter, with_history, **options: _text_frame(
        settings, ctx.pool, counter, with_history=with_history, **options))


def _memory_call(node: Node, settings: ShippedWindowNode, ctx: _Context, run: NodeRun,
                 frame_of: Callable[..., PromptFrame]):
    """The model call of a node with Dify's memory and the window rule of :class:`ShippedWindowNode`: its
    config, ledger and prompt recorded on ``run``, the reply returned (a failed call fails the node).
    ``frame_of(counter, with_history, file_upload=…, vision=…)`` builds what it sends besides its history."""
    override = ctx.overrides.get(node.id)
    config = node_memory_config(ctx.flow, node.id, fidelity=ctx.fidelity,
                                plugin_token_counting=ctx.plugin_token_counting, override=override)
    run.memory = config.to_dict()
    run.memory_override = copy.deepcopy(dict(override)) if override else None
    run.model = settings.model or DEMO_MODEL
    frame = frame_of(counter_for(config.model), config.remembers and ctx.flow.is_chat,
                     file_upload=ctx.flow.file_upload, vision=model_supports_vision(config.model))
    run.ledger, history, _ = _history(ctx, config, None, frame.fixed_tokens())
    run.prompt = frame.build(history)
    if not run.prompt:
        raise NodeFailed("the node has nothing to send to its model: no instruction, no query and no history")
    model = config.model if override and "model" in override else settings.model
    return _complete(ctx, run, model, run.prompt, settings.max_tokens)


def _run_question_classifier(node: Node, ctx: _Context, run: NodeRun) -> str:
    """Dify's Question Classifier (:mod:`core.flow.nodes.question_classifier`): its memory's history as
    text in its prompt, one model call, and the branch of the class the reply picks."""
    settings = _text_settings(node)
    assert isinstance(settings, ClassifierSettings)
    reply = _text_memory_call(node, settings, ctx, run)
    categories = _categories(settings, ctx.pool)
    index, note = read_reply(reply.text, [c["category_id"] for c in categories])  # no JSON: the node fails
    if note:
        run.notes.append(note)
    chosen = settings.classes[index]
    run.outputs = {"class_name": categories[index]["category_name"], "class_label": chosen.label,
                   "class_id": chosen.id, "usage": reply.usage}
    return chosen.id


def _run_parameter_extractor(node: Node, ctx: _Context, run: NodeRun) -> None:
    """Dify's Parameter Extractor (:mod:`core.flow.nodes.parameter_extractor`): its memory's history as
    text in its prompt, one model call, and the parameters read from the reply, typed."""
    settings = _text_settings(node)
    assert isinstance(settings, ExtractorSettings)
    if settings.reasoning_mode == FUNCTION_CALL:
        run.notes.append(FUNCTION_CALL_NOTE)
    reply = _text_memory_call(node, settings, ctx, run)
    values, reason = read_parameters(reply.text, settings.parameters)
    if reason:
        run.notes.append(f"not a success: {reason}")
    run.outputs = {"__is_success": 0 if reason else 1, "__reason": reason, "__usage": reply.usage, **values}
    return None


def _shipped_window_settings(node: Node) -> ShippedWindowNode | None:
    """The settings of a node with the window rule of :class:`ShippedWindowNode`, else ``None``."""
    kind = NODE_TYPES.get(node.type)
    settings = kind.read(node) if kind is not None and kind.dify_memory and kind.read is not None else None
    return settings if isinstance(settings, ShippedWindowNode) else None


def _agent_input(value: AgentInput | None, pool: VariablePool, name: str, *, strict: bool = True) -> str:
    """An Agent node's instruction or query as its strategy gets it: a template rendered, or a
    variable's value as text. A missing variable fails the node, as in Dify (``strict``; an estimate
    without the run reads it as nothing)."""
    if value is None:
        return ""
    if value.kind != VARIABLE:
        return render(value.template, pool)
    found = pool.get(list(value.selector))
    if found is MISSING:
        if strict:
            raise NodeFailed(f"agent parameter {name!r} reads the variable {'.'.join(value.selector)}, "
                             f"which does not exist")
        return ""
    return "" if found is NONE or found is None else value_text(found)


def _plugin_agent_frame(settings: PluginAgentSettings, pool: VariablePool, counter, *, strict: bool = True,
                        query: str = "", **options: Any) -> PromptFrame:
    """A Dify Agent node's frame, its inputs read from ``pool``; ``query`` stands in when its own
    query reads as nothing (an estimate without its run)."""
    return agent_frame(_agent_input(settings.instruction, pool, "instruction", strict=strict),
                       _agent_input(settings.query, pool, "query", strict=strict) or query, counter, **options)


def _run_plugin_agent(node: Node, ctx: _Context, run: NodeRun) -> None:
    """Dify's plugin Agent node (:mod:`core.flow.nodes.plugin_agent`): its memory's history handed to
    its strategy, laid out as ``function_calling`` sends it, and one model call without tools."""
    settings = NODE_TYPES[node.type].read(node)  # type: ignore[misc]
    assert isinstance(settings, PluginAgentSettings)
    run.notes.extend(agent_notes(settings))
    reply = _memory_call(node, settings, ctx, run, lambda counter, with_history, **options: _plugin_agent_frame(
        settings, ctx.pool, counter, **options))
    run.outputs = {"text": reply.text, "usage": reply.usage, "files": [], "json": []}
    return None


# -- long-term memory, window memory and agent nodes (logic in core.memory.long_term, core.flow.nodes.window_memory,
# core.flow.nodes.tool_agent) --

def _recall_sources(item, settings: LLMSettings, ctx: _Context) -> list[str]:
    """The memory-retrieve nodes a prompt item reads (its template or its Jinja2 variables)."""
    heads = {s[0] for s in selectors_in(item.text or "")}
    if item.edition_type == "jinja2":
        heads |= {str((v.get("value_selector") or [""])[0]) for v in settings.jinja2_variables}
    return [h for h in heads if h in ctx.recalled]


def _recalled(items, settings: LLMSettings, ctx: _Context, counter) -> list[dict]:
    """The retrieved memories a node's prompt carries, each with its tokens and score (for the receipt)."""
    out = []
    for source in sorted({h for item in items for h in _recall_sources(item, settings, ctx)}):
        for row in ctx.recalled[source]:
            out.append({"node_id": source, "id": row["id"], "memory": row["memory"], "score": row["score"],
                        "tokens": counter.text(row["memory"])})
    return out


def _window_memory(node: Node, ctx: _Context) -> tuple[str, MemoryConfig, Any] | None:
    """``(window node id, its config, this call's overwrite)`` when the node reads a window-memory node."""
    source = node.data.get("memory_node")
    if not source:
        return None
    if source not in ctx.window_calls:
        if not ctx.flow.has_node(source) or ctx.flow.node(source).type != "window-memory":
            raise NodeFailed(f"memory_node {source!r} is not a window-memory node of this flow")
        raise NodeFailed(f"window memory {source!r} has not run before {node.id!r} in this turn; connect it "
                          f"before {node.id!r}")
    config, overwrite = ctx.window_calls[source]
    return source, config, overwrite


def _run_window_memory(node: Node, ctx: _Context, run: NodeRun) -> str | None:
    settings = window_settings(node)
    config = settings.config()
    run.memory = config.to_dict()
    overwrite = None
    try:
        if settings.overwrite_from_input:
            raw = ctx.pool.get(list(settings.overwrite_from_input))
            if raw not in (MISSING, NONE, None, ""):  # an empty form field is no input
                overwrite, notes = parse_overwrite(raw)
                run.notes.extend(notes)
    except WindowInputError as e:
        if not settings.expose_error_output:
            raise NodeFailed(str(e)) from None
        run.status, run.error = "exception", str(e)
        run.outputs = {"error_message": str(e), "error_type": type(e).__name__, "history_set": False}
        return FAIL_BRANCH
    call = window_call(ctx.conversation, ctx.position, node.id, config, overwrite=overwrite,
                       has_thread=ctx.flow.is_chat)
    ctx.window_calls[node.id] = (config, overwrite)
    if overwrite is not None and config.scope == "thread" and ctx.flow.is_chat:
        ctx.window_overwrites[node.id] = [message_dict(m) for m in overwrite]
    run.ledger = call.ledger
    run.notes.extend(call.notes)
    run.outputs = {"history_set": call.history_set, "count": len(call.messages)}
    if settings.expose_messages_output:
        run.outputs["messages"] = [message_dict(m) for m in call.messages]
    return "source" if settings.expose_error_output else None


def _run_memory_retrieve(node: Node, ctx: _Context, run: NodeRun) -> None:
    settings = retrieve_settings(node)
    user = render(settings.user, ctx.pool).strip()
    query = render(settings.query, ctx.pool)
    results = []
    store = _memory_in_namespace(ctx, settings.namespace)
    if store is None:
        run.notes.append("no long-term memory store is connected: nothing to retrieve")
    else:
        try:
            results = store.retrieve(user, query, settings.top_k, threshold=settings.threshold)
        except LongTermMemoryError as e:
            raise NodeFailed(str(e)) from None
    rows = [r.to_dict() for r in results]
    ctx.recalled[node.id] = rows
    run.outputs = {"text": memories_text(results), "memories": rows, "count": len(rows), "user_id": user,
                   "query": query, "namespace": store.namespace if store is not None else None}


def _memory_in_namespace(ctx: _Context, setting: str | None):
    """The long-term memory a node reads and writes: the one the caller connected (scoped to the
    app's namespace), or the namespace the node names."""
    if ctx.long_term is None or setting is None:
        return ctx.long_term
    try:
        return ctx.long_term.in_namespace(render(setting, ctx.pool).strip())
    except LongTermMemoryError as e:
        raise NodeFailed(str(e)) from None


def _run_memory_store(node: Node, ctx: _Context, run: NodeRun) -> None:
    settings = store_settings(node)
    user = render(settings.user, ctx.pool).strip()
    messages = [{"role": "user", "content": render(settings.query, ctx.pool)}]
    answer = render(settings.answer, ctx.pool) if settings.answer else ""
    if answer:
        messages.append({"role": "assistant", "content": answer})
    store = _memory_in_namespace(ctx, settings.namespace)
    if store is None:
        run.notes.append("no long-term memory store is connected: nothing stored")
        run.outputs = {"events": [], "added": 0, "updated": 0, "deleted": 0, "unchanged": [], "user_id": user}
        return
    extractor = None
    if settings.extractor == "llm":
        client = ctx.client()
        route = getattr(client, "route", None)
        if route is not None:
            target = route(settings.model)[0]
        else:
            target = DEMO_MODEL if isinstance(client, DemoClient) else settings.model
        if target.startswith("memlens/"):
            run.notes.append(f"{settings.model} runs on the demo model, which extracts no JSON: "
                             "facts extracted offline")
        else:
            extractor = LLMExtractor(client, settings.model)
    source = Source(conversation_id=ctx.conversation.id, turn_id=ctx.turn_id, flow=ctx.flow.name, turn=ctx.turn_number)
    try:
        # Written at once, like Dify's plugin call: the change stays even if a later node fails.
        result = store.store(user, messages, source=source, extractor=extractor)
    except (LongTermMemoryError, LLMError) as e:
        raise NodeFailed(str(e)) from None
    counts = result.counts()
    run.outputs = {"events": [{"memory_id": e.memory_id, "event": e.event, "memory": e.new_memory,
                               "previous_memory": e.old_memory} for e in result.events],
                   "added": counts["ADD"], "updated": counts["UPDATE"], "deleted": counts["DELETE"],
                   "unchanged": list(result.unchanged), "user_id": user, "namespace": store.namespace}


def _agent_frame(system_text: str, query: str, counter, *, recalled: bool = False, file_upload: bool = False,
                 vision: bool = False) -> PromptFrame:
    """What an agent node sends besides its history: its rendered system prompt (from long-term
    memory when it reads a memory-retrieve node) and the query message."""
    before = (message("system", system_text, "long-term memory" if recalled else "system", counter),) \
        if system_text else ()
    return PromptFrame(CHAT, counter, before=before, after=(message("user", query, CURRENT_QUERY, counter),),
                       file_upload=file_upload, vision=vision)


def _agent_prompt(frame: PromptFrame, history: Sequence[Message]) -> list[PromptMessage]:
    """An agent node's first model request: its frame around the history, every message kept (an
    agent sends an empty query or a tool call's empty text as it is)."""
    return [*frame.before, *history_messages(history, frame.counter, file_upload=frame.file_upload,
                                             vision=frame.vision), *frame.after]


def _run_tool_agent(node: Node, ctx: _Context, run: NodeRun) -> None:
    settings = agent_settings(node)
    try:
        granularity, source = resolve_granularity(ctx.granularity, ctx.flow.history.get("granularity"))
    except GranularityError as e:
        raise NodeFailed(str(e)) from None
    run.granularity, run.granularity_source = granularity, source
    run.model = settings.model
    override = ctx.overrides.get(node.id)
    # A what-if override replays as usual, as an LLM node's does.
    window = _window_memory(node, ctx) if settings.memory_node and not override else None
    if window is not None:
        config = window[1].with_(model=settings.model)
    else:
        config = node_memory_config(ctx.flow, node.id, granularity=ctx.granularity, fidelity=ctx.fidelity,
                                    plugin_token_counting=ctx.plugin_token_counting, override=override)
    run.memory = config.to_dict()
    run.memory_override = copy.deepcopy(dict(override)) if override else None
    counter = counter_for(config.model)
    system_text = agent_system_text(settings, ctx.pool, ctx.inputs)
    raw_query = ctx.pool.get(["sys", "query"])
    query = "" if raw_query in (MISSING, NONE) else str(raw_query)
    read = {s[0] for s in template_selectors(settings)}
    recalled = bool(read & set(ctx.recalled))
    frame = _agent_frame(system_text, query, counter, recalled=recalled, file_upload=ctx.flow.file_upload,
                         vision=model_supports_vision(config.model))
    fixed_total = frame.fixed_tokens()
    compaction_hook = None
    planner = planner_for(ctx.client(), settings.model)
    if window is None and _agent_replays_system(config):
        # Dify 1.17 checks before every model request: the ledger made the first check, the hook makes the rest.
        # A real model writes the summaries itself, as Dify's runtime has the run's model do.
        summarizer = ModelSectionSummarizer(planner.client, settings.model) if isinstance(planner, ModelPlanner) \
            else None
        replay = Replay(ctx.conversation, config, system_prompt=system_text, has_thread=ctx.flow.is_chat,
                        prompt_tokens=lambda _position: fixed_total, summarizer=summarizer)
        ledger = replay.ledger_at(ctx.position)
        history = replay.history_messages(ledger)
        compaction_hook = ShippedRunHook(replay, ctx.position, Message("user", query, QUERY, "query"), system_text)
    else:
        ledger, history, _ = _history(ctx, config, window, fixed_total)
    run.ledger = ledger
    run.prompt = _agent_prompt(frame, history)
    if recalled:
        run.recalled = [{"node_id": h, "id": r["id"], "memory": r["memory"], "score": r["score"],
                         "tokens": counter.text(r["memory"])}
                        for h in sorted(read & set(ctx.recalled))
                        for r in ctx.recalled[h]]
    started = time.perf_counter()
    try:
        result = run_agent(query, tools=settings.tools, planner=planner, schema=settings.schema,
                           system_prompt=system_text, history=history, max_agent_steps=settings.max_agent_steps,
                           exit_conditions=settings.exit_conditions, ref_prefix=f"{ctx.turn_id}:{node.id}",
                           version=settings.haystack_version, before_model=compaction_hook)
    except LLMError as e:
        raise NodeFailed(str(e)) from None
    finally:
        run.latency_ms = (time.perf_counter() - started) * 1000
        if compaction_hook is not None:  # written before a failure too: they were sent
            run.summaries = copy.deepcopy(recorded_summaries(replay).written) or None
    run.steps = [s.to_dict() for s in result.steps]
    if compaction_hook is not None:
        for request, event in compaction_hook.events:
            record = {"turn": ctx.turn_number, "request": request, "in_tool_loop": True, **event.to_dict()}
            ledger.compactions.append(record)
            for step in run.steps:
                if step["step"] == request:  # the tool calls of the reply this compacted request got
                    step["compaction"] = record
    run.reply = result.text
    run.usage = result.usage
    run.model_called = "memlens/demo" if isinstance(planner, DemoPlanner) else settings.model
    run.notes.extend(result.notes)
    ctx.intermediate.extend(result.intermediate)
    # The state is gone after the run; its public keys are the node's outputs (Haystack's output dict).
    # Haystack 3.x outputs its run metadata itself; with 2.x MemLens reports the same facts.
    run.outputs = {"step_count": result.step_count, "exit_reason": result.exit_reason,
                   "tool_call_counts": result.tool_call_counts, **result.outputs, "text": result.text,
                   "usage": result.usage}


def _run_assigner(node: Node, ctx: _Context, run: NodeRun) -> None:
    version = str(node.data.get("version") or "1")
    try:
        if version == "2":
            result = run_assigner_v2(node.data.get("items") or [], ctx.flow.variables, ctx.variables, ctx.pool.get)
        else:
            result = run_assigner_v1(node.data, ctx.flow.variables, ctx.variables, ctx.pool.get)
    except AssignerError as e:
        raise NodeFailed(str(e)) from None
    for name, _, _, new in result.changes:
        try:  # NaN and infinities (1e308 *= 10) have no JSON spelling: no store, export or answer could carry one
            check_value(new, f"conversation.{name}")
        except LimitError as e:
            raise NodeFailed(f"{e}; nothing was written") from None
    run.notes.extend(result.notes)
    changes = [VariableChange(turn=ctx.turn_number, node_id=node.id, operation=op, name=name, old=old, new=new,
                              turn_id=ctx.turn_id) for name, op, old, new in result.changes]
    # Dify persists an assigner's writes when the node finishes, whatever happens later (§3.2).
    ctx.variables = result.values
    ctx.pool.conversation = copy_value(result.values)
    ctx.changes.extend(changes)
    run.outputs = {}
    if changes and ctx.on_variables_updated is not None:
        ctx.on_variables_updated(node.id, list(changes))


def _run_start(node: Node, ctx: _Context, run: NodeRun) -> None:
    run.outputs = dict(ctx.inputs)


def _run_answer(node: Node, ctx: _Context, run: NodeRun) -> None:
    text = render(str(node.data.get("answer") or ""), ctx.pool)
    run.outputs = {"answer": text}
    ctx.answers.append(text)
    if text:
        ctx.emit("message", answer=text, from_variable_selector=[node.id, "answer"])


def _run_if_else(node: Node, ctx: _Context, run: NodeRun) -> str:
    branch = evaluate_if_else(node, ctx.pool)
    run.outputs = {"result": branch != "false", "selected_case_id": branch}
    return branch


def _run_variable_aggregator(node: Node, ctx: _Context, run: NodeRun) -> None:
    outputs, taken = aggregate(aggregator_settings(node), lambda s: ctx.pool.get(s) is not MISSING, ctx.pool.get)
    unknown = [k for k, v in outputs.items() if v is NONE or isinstance(v, Mapping) and v.get("output") is NONE]
    for name in unknown:  # from a node MemLens does not emulate: as unknown here as it was there
        del outputs[name]
    if unknown:
        ctx.pool.mark_pass_through(node.id)
    run.outputs = outputs
    titles = ctx.flow.node_names
    for selector in taken:
        run.notes.append(f"took {'.'.join(selector)} ({titles.get(selector[0], selector[0])} ran)"
                         + (": its value comes from a node MemLens does not emulate"
                            if ctx.pool.get(selector) is NONE else ""))
    if not taken:
        run.notes.append("none of its variables was set on this run: no output")


def _run_template_transform(node: Node, ctx: _Context, run: NodeRun) -> None:
    settings = template_settings(node)
    unknown = [v["variable"] for v in settings.variables if ctx.pool.get(v["value_selector"]) is NONE]
    if unknown:  # a value from a node MemLens does not emulate: the rendering is as unknown as it is
        ctx.pool.mark_pass_through(node.id)
        run.outputs = {}
        run.notes.append(f"{', '.join(unknown)} {'comes' if len(unknown) == 1 else 'come'} from a node MemLens "
                         f"does not emulate: output unknown")
        return
    try:
        text = render_jinja(settings.template, settings.variables, ctx.pool)
    except Exception as e:  # noqa: BLE001 — any rendering error fails the node with its message, as in Dify
        raise NodeFailed(f"{type(e).__name__}: {e}") from None
    if len(text) > TEMPLATE_TRANSFORM_MAX_LENGTH:
        raise NodeFailed(f"Output length exceeds {TEMPLATE_TRANSFORM_MAX_LENGTH} characters")
    run.outputs = {"output": text}


def _run_end(node: Node, ctx: _Context, run: NodeRun) -> None:
    outputs = {}
    for out in node.data.get("outputs") or []:
        if isinstance(out, Mapping) and out.get("variable"):
            value = ctx.pool.get(list(out.get("value_selector") or []))
            outputs[str(out["variable"])] = None if value in (MISSING, NONE) else copy.deepcopy(value)
    run.outputs = outputs


#: How each node type in :data:`core.flow.node_types.NODE_TYPES` runs: it records what it did on its
#: ``NodeRun`` (``outputs`` are what later nodes read) and returns the handle it takes (None: every
#: outgoing edge); a failure raises ``NodeFailed``.
RUNNERS: dict[str, Callable[[Node, _Context, NodeRun], str | None]] = {
    "start": _run_start, "llm": _run_llm, "answer": _run_answer, "assigner": _run_assigner,
    "if-else": _run_if_else, "end": _run_end, "memory-retrieve": _run_memory_retrieve,
    "memory-store": _run_memory_store, "window-memory": _run_window_memory, "tool-agent": _run_tool_agent,
    "variable-aggregator": _run_variable_aggregator, "variable-assigner": _run_variable_aggregator,
    "template-transform": _run_template_transform, "question-classifier": _run_question_classifier,
    "parameter-extractor": _run_parameter_extractor, "agent": _run_plugin_agent}

#: The node types that time their model calls themselves (:func:`_complete`, the agent's loop).
_TIMES_ITSELF = ("llm", "tool-agent", "question-classifier", "parameter-extractor", "agent")


def _run_node(node: Node, ctx: _Context) -> tuple[NodeRun, str | None]:
    """Run one node; returns its record and the handle it takes (None: every outgoing edge)."""
    run = NodeRun(node_id=node.id, type=node.type, title=node.title, emulated=node.emulated)
    started = time.perf_counter()
    branch: str | None = None
    try:
        runner = RUNNERS.get(node.type)
        if runner is not None:
            branch = runner(node, ctx, run)
            # A model may answer 1e999 (a Parameter Extractor reads it as inf): no JSON carries it — not the
            # stream, the store or an export — so it is null from here on, and the run says so.
            run.notes.extend(nulled_non_finite(run.outputs, f"{node.type} node {node.id!r}: outputs"))
            ctx.pool.add_outputs(node.id, run.outputs)
        else:
            ctx.pool.mark_pass_through(node.id)
            branch = _pass_through_branch(node, ctx.flow)
            note = f"{node.type} is not emulated: ran as a pass-through with empty outputs"
            if branch is not None:
                note += f"; took branch {branch!r}"
            run.notes.append(note)
    except NodeFailed as e:
        run.status = FAILED
        run.error = str(e)
    if node.type not in _TIMES_ITSELF:
        run.latency_ms = (time.perf_counter() - started) * 1000
    run.branch = branch
    return run, branch


def _event_node_data(node: Node, index: int, execution_id: str, predecessor: str | None, started: float) -> dict:
    """The fields ``node_started`` and ``node_finished`` share, each of them one Dify's stream
    responses require (a typed client refuses an event without ``created_at``); ``predecessor``:
    the node that ran before it, ``None`` for the first."""
    return {"id": execution_id, "node_id": node.id, "node_type": node.type, "title": node.title, "index": index,
            "predecessor_node_id": predecessor, "inputs": None, "created_at": int(started)}


def run_turn(flow: Flow, state: ConversationState, query: str, inputs: Mapping[str, Any] | None = None, *,
             parent_id: Any = LATEST, user_id: str = "user", fidelity: str = DEFAULT_FIDELITY,
             plugin_token_counting: bool = False,
             llm: LLMClient | None = None, node_memory_overrides: Mapping[str, Mapping[str, Any]] | None = None,
             on_variables_updated: Callable[[str, list[VariableChange]], None] | None = None,
             on_event: Callable[[dict], None] | None = None, turn_id: str | None = None,
             created_at: float | None = None, long_term: Any = None, granularity: str | None = None,
             files: Sequence[FileRef] = (), memories: dict | None = None) -> TurnRecord:
    """Run one turn of ``flow`` on ``state``; returns its record and leaves ``state`` unchanged.

    ``parent_id``: the turn this one answers after — :data:`LATEST` (the newest turn), ``None`` (a
    new thread root, as Dify's web app sends for a first message), ``UUID_NIL`` (linear: the next
    older turn, as Dify's Service API stores every message), or any earlier turn's id (a branch).
    ``llm``: the client to call models with (default: :class:`core.llm.client.LiteLLMClient`).
    ``node_memory_overrides``: ``{node_id: {MemoryConfig field: value}}`` for a what-if run.
    ``long_term``: the long-term memory (:class:`core.memory.long_term.LongTermMemory`) memory-retrieve and
    memory-store nodes use, keyed by ``user_id``; ``None`` leaves them with nothing to read or write.
    ``fidelity``: Dify's memory rules — ``code`` (Dify 1.x as shipped, the default) or ``documented``
    (as Dify's docs describe); ``plugin_token_counting``: Dify's PLUGIN_BASED_TOKEN_COUNTING_ENABLED
    (off by default, as Dify ships it), which makes the shipped rules prune history by tokens.
    ``files``: the files the user sent with the query (``sys.files``); they stay with the turn's
    query, so later turns' history carries them when the flow has file upload on.
    ``granularity``: the request's history granularity for agent nodes (``None``: the flow's
    ``history.granularity``, else ``query_answer``).
    ``memories``: a dict the caller keeps for this conversation between its turns, in which the
    nodes' memories keep their thread views (:class:`core.memory.replay.TurnMemory`), so a turn of a
    long conversation is not a replay of it; each checks that it is given the conversation it
    saw last (else it starts again).
    Bad input (unknown parent, bad fidelity, missing required inputs, a bad override) raises
    :class:`RunError` before anything runs.
    """
    if fidelity not in FIDELITIES:
        raise RunError(f"unknown fidelity {fidelity!r}; expected code (Dify 1.x as shipped) or documented "
                       f"(as Dify's docs describe)")
    if not isinstance(query, str):
        raise RunError("query must be text")
    try:
        check_query(query)
    except LimitError as e:
        raise RunError(str(e)) from None
    if granularity is not None:
        try:
            granularity = check_granularity(granularity, "request")
        except GranularityError as e:
            raise RunError(str(e)) from None
    overrides: dict[str, dict] = {}
    for node_id, override in (node_memory_overrides or {}).items():
        if not flow.has_node(node_id) or flow.node(node_id).type not in OVERRIDABLE_TYPES:
            ids = ", ".join(n.id for n in flow.nodes if n.type in OVERRIDABLE_TYPES) or "none"
            raise RunError(f"memory override for {node_id!r}: the flow has no LLM or agent node with that id "
                           f"(LLM and agent nodes: {ids})")
        overrides[node_id] = _check_override(node_id, override)
        node_memory_config(flow, node_id, fidelity=fidelity, plugin_token_counting=plugin_token_counting,
                           granularity=granularity, override=overrides[node_id])
    conv = state.conversation
    if parent_id is LATEST:
        parent_id = state.latest_turn_id
    elif parent_id is not None and parent_id != UUID_NIL and parent_id not in conv.tree.position:
        raise RunError(f"parent turn {parent_id!r} is not in conversation {conv.id}")
    checked_inputs = _check_inputs(flow, query, inputs)

    turn_id = turn_id or str(uuid.uuid4())
    created = time.time() if created_at is None else created_at
    files = tuple(files)
    placeholder = Turn(id=turn_id, parent_id=parent_id,
                       messages=(Message("user", query, QUERY, f"{turn_id}:query", files=files),
                                 Message("assistant", "", ANSWER, f"{turn_id}:answer")),
                       query_index=0, answer_index=1, created_at=created, answer_tokens=0)
    working = conv.with_turn(placeholder, system_prompt="", meta={})
    position = len(conv.turns)
    number = turn_number(working, position)
    dialogue_count = working.tree.depth[position]
    variables = initialize(flow.variables, state.variables)
    run_id = str(uuid.uuid4())
    system: dict[str, Any] = {"files": FileList(f.to_dict() for f in files),
                              "user_id": user_id, "app_id": flow.name,
                              "workflow_id": flow.structural_signature()[:32], "workflow_run_id": run_id}
    if flow.is_chat:
        system.update(query=query, conversation_id=conv.id, dialogue_count=dialogue_count)
    pool = VariablePool(system=system, conversation=variables, environment=flow.environment)

    def emit(event: str, **payload: Any) -> None:
        if on_event is not None:
            on_event({"event": event, "conversation_id": conv.id, "message_id": turn_id, "task_id": run_id,
                      "created_at": int(created), **payload})

    ctx = _Context(flow=flow, conversation=working, position=position, turn_id=turn_id, turn_number=number, pool=pool,
                   variables=variables, fidelity=fidelity, llm=llm, overrides=overrides,
                   on_variables_updated=on_variables_updated, emit=emit, long_term=long_term,
                   granularity=granularity, plugin_token_counting=bool(plugin_token_counting), memories=memories,
                   inputs=checked_inputs)
    emit("workflow_started", workflow_run_id=run_id,
         data={"id": run_id, "workflow_id": system["workflow_id"], "inputs": copy.deepcopy(checked_inputs),
               "created_at": int(created)})
    # Dify checks a variable's size when the run loads it, not when a node wrote it: a value that
    # grew too big in an earlier turn fails this one before any node runs.
    too_big = check_sizes(variables)
    runs, error = ([], too_big) if too_big else _execute(flow, ctx)
    failed = error is not None
    answer = "" if failed else "".join(ctx.answers)
    record = TurnRecord(id=turn_id, parent_id=parent_id, conversation_id=conv.id, turn=number, query=query,
                        answer=answer, status=FAILED if failed else SUCCEEDED, error=error,
                        dialogue_count=dialogue_count, created_at=created, inputs=copy.deepcopy(checked_inputs),
                        user_id=user_id, fidelity=fidelity, plugin_token_counting=bool(plugin_token_counting),
                        node_runs=runs, variable_changes=list(ctx.changes),
                        variables=copy_value(ctx.variables),
                        intermediate=[m.to_dict() for m in ctx.intermediate],
                        window_overwrites=copy.deepcopy(ctx.window_overwrites),
                        files=[f.to_dict() for f in files], agent_thoughts=agent_thoughts(flow, runs))
    elapsed = round(sum(r.latency_ms for r in runs) / 1000, 6)
    if not failed:
        emit("message_end", id=turn_id, metadata={"usage": record.usage}, files=[])
    emit("workflow_finished", workflow_run_id=run_id,
         data={"id": run_id, "workflow_id": system["workflow_id"], "status": record.status,
               "outputs": {"answer": answer}, "error": error, "elapsed_time": elapsed,
               "total_tokens": record.usage["total_tokens"], "total_steps": len(runs),
               "created_by": {"id": user_id, "user": user_id}, "created_at": int(created),
               "finished_at": int(time.time()), "exceptions_count": 0, "files": []})
    if failed:
        emit("error", status=400, code="invalid_param", message=f"Run failed: {error}")
    return record


def agent_thoughts(flow: Flow, runs: Sequence[NodeRun]) -> int:
    """The thoughts a Dify Agent app's runner records for a turn: one per model request, made before
    the request is sent (so a failed request has one too). MemLens asks the app's model once a turn
    (its tools are not run): one when the agent ran. A Chatflow's message records none. Dify's agent
    history replays a turn's thoughts, an empty one too, and leaves out the empty answer of a turn
    with none (:func:`core.memory.strategies.dify_agent.left_out`)."""
    if flow.app_mode != AGENT_CHAT:
        return 0
    return sum(1 for r in runs if r.type == "tool-agent")


def _execute(flow: Flow, ctx: _Context) -> tuple[list[NodeRun], str | None]:
    """Walk the graph from the start node; returns the node runs in order and the failure, if any."""
    start = flow.start
    edges = [e for e in flow.edges]
    reachable = {start.id}
    frontier = [start.id]
    while frontier:
        nid = frontier.pop()
        for e in edges:
            if e.source == nid and e.target not in reachable and not flow.node(e.target).container:
                reachable.add(e.target)
                frontier.append(e.target)
    incoming: dict[str, list[int]] = {n: [] for n in reachable}
    outgoing: dict[str, list[int]] = {n: [] for n in reachable}
    for i, e in enumerate(edges):
        if e.source in reachable and e.target in reachable:
            incoming[e.target].append(i)
            outgoing[e.source].append(i)
    decided: dict[int, bool] = {}  # edge index → taken?
    queue: deque[str] = deque([start.id])
    queued = {start.id}
    skipped: set[str] = set()
    runs: list[NodeRun] = []

    def settle(target: str) -> None:
        if target in queued or target in skipped:
            return
        states = [decided.get(i) for i in incoming[target]]
        if any(s is None for s in states):
            return
        if any(states):
            queue.append(target)
            queued.add(target)
        else:
            skipped.add(target)
            for i in outgoing[target]:
                decided[i] = False
                settle(edges[i].target)

    while queue:
        node = flow.node(queue.popleft())
        execution_id = str(uuid.uuid4())
        index = len(runs) + 1
        predecessor, started = (runs[-1].node_id if runs else None), time.time()
        ctx.emit("node_started", workflow_run_id=ctx.pool.system["workflow_run_id"],
                 data={**_event_node_data(node, index, execution_id, predecessor, started), "extras": {}})
        run, branch = _run_node(node, ctx)
        runs.append(run)
        data = _event_node_data(node, index, execution_id, predecessor, started)
        data.update(status=run.status, error=run.error, outputs=copy.deepcopy(run.outputs), process_data=None,
                    elapsed_time=round(run.latency_ms / 1000, 6), emulated=run.emulated,
                    execution_metadata={"total_tokens": (run.usage or {}).get("total_tokens", 0)},
                    finished_at=int(time.time()), files=[])
        if run.prompt is not None:
            data["process_data"] = {"prompts": [{"role": m.role, "text": m.content} for m in run.prompt]}
        ctx.emit("node_finished", workflow_run_id=ctx.pool.system["workflow_run_id"], data=data)
        if run.status == FAILED:
            return runs, run.error
        for i in outgoing[node.id]:
            decided[i] = branch is None or edges[i].handle == branch
        for i in outgoing[node.id]:
            settle(edges[i].target)
    return runs, None


# -- what-if ----------------------------------------------------------------------------------------

def what_if_ledger(flow: Flow, conversation: Conversation, position: int, node_id: str,
                   override: Mapping[str, Any] | None = None, *, fidelity: str = DEFAULT_FIDELITY,
                   plugin_token_counting: bool = False, record: TurnRecord | None = None,
                   lazy: bool = False) -> Ledger:
    """The ledger node ``node_id`` would have had at the turn at ``position`` under other memory settings.

    No model is called: the history is recomputed from the stored conversation. The rest of the
    prompt (template, query) is taken from ``record``'s run of the node when given, else from the
    turn's stored prompt size (``Turn.meta["prompt_tokens"]``), else estimated by rendering the
    node's template with the turn's query. ``lazy`` as :meth:`Replay.ledger_at` takes it.
    """
    if not 0 <= position < len(conversation.turns):
        raise RunError(f"turn position {position} is out of range: the conversation has {len(conversation.turns)} turns")
    ran = record is not None and record.ran(node_id)
    config = node_memory_config(flow, node_id, fidelity=fidelity, plugin_token_counting=plugin_token_counting,
                                granularity=record.node_run(node_id).granularity if ran else None, override=override)
    fixed = _fixed_tokens(flow, conversation, position, node_id, config, record)
    system_prompt = ""
    if flow.node(node_id).type == "tool-agent" and _agent_replays_system(config):
        prompt = record.node_run(node_id).prompt if ran else None
        if prompt is not None:
            system_prompt = next((m.content for m in prompt if m.role == "system"), "")
        else:
            frame = _estimated_agent_frame(flow, conversation, position, node_id, counter_for(config.model))
            system_prompt = frame.before[0].content if frame.before else ""
    return node_replay(flow, conversation, node_id, config, lambda _position: fixed,
                       system_prompt=system_prompt).ledger_at(position, lazy=lazy)


def _fixed_tokens(flow: Flow, conversation: Conversation, position: int, node_id: str, config: MemoryConfig,
                  record: TurnRecord | None) -> int:
    counter = counter_for(config.model)
    if record is not None and record.ran(node_id):
        run = record.node_run(node_id)
        if run.prompt is not None and (run.memory or {}).get("model") == config.model \
                and run.fixed_prompt_tokens is not None:
            return run.fixed_prompt_tokens
        if run.prompt is not None and _node_mode(flow, node_id) == CHAT:
            # Another model counts the recorded messages with its own tokenizer.
            return PromptFrame.recorded([m.to_dict() for m in run.prompt], CHAT, counter).fixed_tokens()
        if run.fixed_prompt_tokens is not None:
            return run.fixed_prompt_tokens
    stored = (conversation.turns[position].meta or {}).get("prompt_tokens", {}).get(node_id)
    if stored is not None:
        return int(stored)
    if flow.node(node_id).type == "tool-agent":
        return _estimated_agent_frame(flow, conversation, position, node_id, counter).fixed_tokens()
    if flow.node(node_id).type == "agent":
        return _estimated_plugin_agent_frame(flow, conversation, position, node_id, counter,
                                             file_upload=flow.file_upload,
                                             vision=model_supports_vision(config.model)).fixed_tokens()
    if _text_memory(flow.node(node_id)):
        return _estimated_text_frame(flow, conversation, position, node_id, counter,
                                     with_history=config.remembers and flow.is_chat).fixed_tokens()
    sys_query = None
    if config.remembers:
        settings = flow.llm(node_id)
        qpt = settings.memory.query_prompt_template if settings.memory is not None else None
        sys_query = qpt or conversation.turns[position].query
    return _estimated_frame(flow, conversation, position, node_id, counter, sys_query).fixed_tokens()


def _node_mode(flow: Flow, node_id: str) -> str:
    """How a node's prompt is laid out: an agent always chats; a Question Classifier puts its history
    as text in its prompt; an LLM node as its model's mode says."""
    node = flow.node(node_id)
    if _text_memory(node):
        return TEXT_HISTORY
    return CHAT if node.type in ("tool-agent", "agent") else llm_settings(node).mode


def _turn_pool(conversation: Conversation, position: int) -> VariablePool:
    """The variables known at a turn without its run: the turn's query and system variables only
    (other nodes' outputs and the context are not known here)."""
    turn = conversation.turns[position]
    return VariablePool(system={"query": turn.query, "files": FileList(), "conversation_id": conversation.id,
                                "dialogue_count": conversation.tree.depth[position]})


def _estimated_frame(flow: Flow, conversation: Conversation, position: int, node_id: str, counter,
                     sys_query: str | None, **options: Any) -> PromptFrame:
    """An LLM node's frame at a turn without its recorded prompt: the template rendered with
    :func:`_turn_pool`."""
    pool = _turn_pool(conversation, position)
    return node_frame(flow.llm(node_id), lambda item: render_message(item.text, item.edition_type, pool, context=""),
                      counter, sys_query, pool, **options)


def _estimated_agent_frame(flow: Flow, conversation: Conversation, position: int, node_id: str, counter,
                           **options: Any) -> PromptFrame:
    """An agent node's frame at a turn without its recorded prompt: its system prompt filled with
    :func:`_turn_pool` and the inputs the turn was logged with, and the turn's query."""
    settings = agent_settings(flow.node(node_id))
    turn = conversation.turns[position]
    inputs = turn.meta.get("inputs")
    inputs = inputs if isinstance(inputs, Mapping) else {}
    text = agent_system_text(settings, _turn_pool(conversation, position), inputs)
    return _agent_frame(text, turn.query, counter, **options)


def _estimated_plugin_agent_frame(flow: Flow, conversation: Conversation, position: int, node_id: str, counter,
                                  **options: Any) -> PromptFrame:
    """A Dify Agent node's frame at a turn without its recorded prompt: its inputs read with
    :func:`_turn_pool` (a variable not known there as nothing); its query there, else the turn's query."""
    settings = NODE_TYPES["agent"].read(flow.node(node_id))  # type: ignore[misc]
    return _plugin_agent_frame(settings, _turn_pool(conversation, position), counter, strict=False,
                               query=conversation.turns[position].query, **options)


def _estimated_text_frame(flow: Flow, conversation: Conversation, position: int, node_id: str, counter, *,
                          with_history: bool, **options: Any) -> PromptFrame:
    """A Question Classifier's or Parameter Extractor's frame at a turn without its recorded prompt:
    its settings rendered with :func:`_turn_pool`; its query read there too, else the turn's query."""
    return _text_frame(_text_settings(flow.node(node_id)), _turn_pool(conversation, position), counter,
                       with_history=with_history, query=conversation.turns[position].query, **options)


def what_if_prompt(flow: Flow, conversation: Conversation, position: int, node_id: str,
                   recorded: Sequence[Mapping[str, Any]], ledger: Ledger) -> list[dict]:
    """The prompt node ``node_id`` would have sent at the turn at ``position`` with ``ledger``'s
    history (a what-if ledger), built by the builder runs use: the recorded prompt's frame — a chat
    prompt's messages around its history, a completion prompt's template with the query template and
    role prefixes the ledger's memory sets — with the what-if history put in. No model is called.

    A completion prompt recorded without its template is rebuilt from the node's template rendered
    with the turn's query only (as the fixed-token estimate does). An agent node's prompt is its
    recorded system prompt and query around the what-if history, as its run lays them out."""
    if flow.node(node_id).type == "tool-agent":
        model = ledger.config.get("model") or agent_settings(flow.node(node_id)).model
        counter = counter_for(model)
        options = dict(file_upload=flow.file_upload, vision=model_supports_vision(model))
        frame = PromptFrame.recorded(recorded, CHAT, counter, **options) if recorded else \
            _estimated_agent_frame(flow, conversation, position, node_id, counter, **options)
        return [m.to_dict() for m in _agent_prompt(frame, history_of(conversation, ledger))]
    if flow.node(node_id).type == "agent":
        model = ledger.config.get("model") or DEMO_MODEL
        counter = counter_for(model)
        options = dict(file_upload=flow.file_upload, vision=model_supports_vision(model))
        frame = PromptFrame.recorded(recorded, CHAT, counter, keep_empty=True, **options) if recorded else \
            _estimated_plugin_agent_frame(flow, conversation, position, node_id, counter, **options)
        return [m.to_dict() for m in frame.build(history_of(conversation, ledger))]
    if _text_memory(flow.node(node_id)):
        model = ledger.config.get("model") or _text_settings(flow.node(node_id)).model or DEMO_MODEL
        counter = counter_for(model)
        options = dict(file_upload=flow.file_upload, vision=model_supports_vision(model))
        with_history = remembers(ledger.config) and flow.is_chat
        frame = PromptFrame.recorded(recorded, TEXT_HISTORY, counter, role_prefix=HUMAN_AI, **options) \
            if recorded else None
        if frame is None or (HISTORY_SLOT in frame.template) != with_history:
            # Memory switched on or off: the prompt's history part comes or goes with it.
            frame = _estimated_text_frame(flow, conversation, position, node_id, counter,
                                          with_history=with_history, **options)
        return [m.to_dict() for m in frame.build(history_of(conversation, ledger))]
    settings = flow.llm(node_id)
    model = ledger.config.get("model") or settings.model or DEMO_MODEL
    counter = counter_for(model)
    memory_on = remembers(ledger.config)
    block = settings.memory if memory_on else None
    sys_query = None
    if memory_on:
        query = conversation.turns[position].query if flow.is_chat else None
        sys_query = (block.query_prompt_template if block is not None else None) or query
    options = dict(role_prefix=block.role_prefix if block is not None and flow.is_chat else None,
                   file_upload=flow.file_upload, vision=model_supports_vision(model))
    frame = PromptFrame.recorded(recorded, settings.mode, counter, sys_query=sys_query, keep_empty=settings.basic_chat,
                                 **options)
    if frame is None:
        frame = _estimated_frame(flow, conversation, position, node_id, counter, sys_query, **options)
    elif frame.mode == CHAT and any(m.origin == CURRENT_QUERY for m in frame.after) != bool(sys_query):
        # Memory switched on or off: the memory's query message comes or goes with it.
        after = tuple(m for m in frame.after if m.origin != CURRENT_QUERY)
        if sys_query:
            after = _estimated_frame(flow, conversation, position, node_id, counter, sys_query).after + after
        frame = replace(frame, after=after)
    return [m.to_dict() for m in frame.build(history_of(conversation, ledger))]


# -- a whole conversation ---------------------------------------------------------------------------

def run_conversation(flow: Flow, queries: Sequence[str | Mapping[str, Any]], *, state: ConversationState | None = None,
                     **kwargs: Any) -> tuple[ConversationState, list[TurnRecord]]:
    """Run queries in order as one conversation (each turn after the previous); returns the final state and records.

    A query is a string or ``{"query": str, "inputs": {...}}``. Keyword arguments go to :func:`run_turn`.
    """
    state = state or ConversationState.new(flow)
    if kwargs.get("long_term") is None and any(n.type in ("memory-retrieve", "memory-store") for n in flow.nodes):
        from core.memory.long_term import LongTermMemory

        kwargs["long_term"] = LongTermMemory()  # one conversation's worth, in memory
    records = []
    for item in queries:
        if isinstance(item, Mapping):
            query, inputs = item.get("query", ""), item.get("inputs")
        else:
            query, inputs = item, None
        record = run_turn(flow, state, query, inputs, **kwargs)
        records.append(record)
        state = state.apply(record)
    return state, records


__all__ = ["SUCCEEDED", "FAILED", "ORIGINS", "LATEST", "PromptMessage", "NodeRun", "TurnRecord", "ConversationState",
           "run_turn", "run_conversation", "what_if_ledger", "what_if_prompt", "node_memory_config", "evaluate_if_else",
           "node_replay", "node_history_inputs"]
