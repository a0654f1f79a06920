"""The Window Memory node in a flow, completely (spec/memory-models.md §C.1, §C.6; DESIGN.md "window").

A ``window-memory`` node holds a message store that an LLM or agent node reads through
``memory_node: <id>``. The store follows the core ``window`` strategy
(:mod:`core.memory.strategies.window`): the last N messages (1..200, default 10), every message counted —
queries, answers, tool calls and tool results — and trimming is permanent. Scopes ``thread``
(per chat thread across turns), ``session`` (one execution, i.e. one turn) and ``call`` (fresh
every call); a flow without chat threads (workflow mode) behaves like ``session``. One turn is
one call of the memory: the round it adds is the turn's query, its intermediate messages and its
answer, whichever nodes read the store during the turn.

The node's options::

    - id: memory
      type: window-memory
      window: 10                          # N, 1..200
      scope: thread                       # thread | session | call
      overwrite_from_input: [start, history]   # a messages input that replaces the stored history
      expose_messages_output: true        # output `messages`: the windowed list, as data
      expose_error_output: true           # a failure follows the `fail-branch` edge

Outputs: ``history_set`` (true in the call whose input was written over the stored history),
``count`` (messages in the window), ``messages`` when exposed (``[{role, content, …}]``, what the
reading node receives), and on the error path ``error_message`` / ``error_type``.

Decisions where the node's documentation is ambiguous (C.1's list), each pinned by a test:

1. **Stored list.** After a call the store is ``last_N(old) + new_round`` (reading (a)); it may
   exceed N until the next call, which sees only its last N (C.6: N=3, stored ``[u1,a1,u2,a2]``,
   round ``[u3,tc3,tr3,a3]`` → ``[a1,u2,a2,u3,tc3,tr3,a3]``).
2. **System messages** are node configuration: never stored, never counted. A system message in
   an overwrite input is dropped (and the record says so).
3. **Tool pairs.** The cut is a pure message count: it may separate a tool call from its result
   or leave a tool result first; the node does not repair the window.
4. **N out of range** (0, 201, not a whole number) is rejected when the flow is loaded, not clamped.
5. **Overwrite** applies *before* the call: the input replaces the stored history and is the
   history this call sees — windowed like any stored list, so only its last N are seen and the
   rest is trimmed permanently; after the call the store is ``last_N(input) + round``. An input
   that is absent, null or empty text (an unfilled form field) means "not provided" (the store is
   untouched, ``history_set`` false); an empty list is provided and clears the history. With
   scope ``session`` or ``call`` the input is this call's history and nothing persists; with
   ``thread`` it persists for the thread's later turns (recorded in the turn,
   ``Turn.meta["window_overwrites"]``).
6. **Error output.** Only the node's own failures (a malformed overwrite input) take the error
   path; with ``expose_error_output`` off they fail the turn, as any failing node does.

Which messages a call keeps, and why, is decided by the core ``window`` strategy alone
(:mod:`core.memory.strategies.window`): :func:`window_call` replays it with the inputs as
``Replay(history_inputs=…)``, so a recorded run and a what-if of it are one computation. This
module holds the node's settings, its input parsing, its outputs and its run (:func:`run_window_memory`);
a node that reads the store finds this turn's call with :func:`window_source`. In the ledger, messages
that were written over by an input are ``trimmed_earlier`` (gone from the store for good) and the
input's messages still in the window are synthetic messages of origin ``history set``.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable, Mapping, Sequence

from core.memory.config import MemoryConfig
from core.memory.replay import Replay
from core.memory.strategies.window import DEFAULT_WINDOW, HISTORY_SET, MAX_WINDOW, WindowStrategy
from core.model.conversation import INTERMEDIATE, Conversation, Message, ToolCall
from core.model.ledger import Ledger
from core.model.tokens import DEMO_MODEL

from ..errors import NodeFailed, WindowInputError, node_error
from ..templates import MISSING, NONE

if TYPE_CHECKING:  # pragma: no cover
    from ..context import RunContext
    from ..graph import Node
    from ..records import NodeRun

SCOPES = ("thread", "session", "call")
FAIL_BRANCH = "fail-branch"  # Dify's handle for a node's error path
META_KEY = "window_overwrites"


@dataclass(frozen=True)
class WindowSettings:
    window: int = DEFAULT_WINDOW
    scope: str = "thread"
    overwrite_from_input: tuple[str, ...] | None = None
    expose_messages_output: bool = False
    expose_error_output: bool = False
    model: str = DEMO_MODEL

    def config(self, model: str | None = None) -> MemoryConfig:
        return MemoryConfig(WindowStrategy.name, window=self.window, scope=self.scope, model=model or self.model)


def window_settings(node: "Node") -> WindowSettings:
    """Read a ``window-memory`` node (options in the module docstring); bad values are a FlowError."""
    data = node.data
    window = data.get("window", DEFAULT_WINDOW)
    if isinstance(window, bool) or not isinstance(window, int) or not 1 <= window <= MAX_WINDOW:
        raise node_error(
            node,
            f"window {window!r} is out of range: the Window Memory node keeps 1..{MAX_WINDOW} "
            f"messages (default {DEFAULT_WINDOW})",
        )
    scope = data.get("scope", "thread")
    if scope not in SCOPES:
        raise node_error(node, f"scope {scope!r} is unknown; expected thread, session or call")
    selector = data.get("overwrite_from_input")
    if selector is not None:
        if isinstance(selector, str):
            selector = selector.strip().removeprefix("{{#").removesuffix("#}}").split(".")
        if (
            not isinstance(selector, (list, tuple))
            or len(selector) < 2
            or not all(isinstance(s, str) and s for s in selector)
        ):
            raise node_error(
                node, "overwrite_from_input must name a variable, e.g. [start, history] or '{{#start.history#}}'"
            )
        selector = tuple(selector)
    flags = {}
    for key in ("expose_messages_output", "expose_error_output"):
        value = data.get(key, False)
        if not isinstance(value, bool):
            raise node_error(node, f"{key} must be true or false")
        flags[key] = value
    model = data.get("model", DEMO_MODEL)
    if not isinstance(model, str) or not model:
        raise node_error(node, "'model' (the tokenizer its ledger counts with) must be a model name")
    return WindowSettings(window=window, scope=scope, overwrite_from_input=selector, model=model, **flags)


def parse_overwrite(value: Any) -> tuple[list[Message], list[str]]:
    """An overwrite input as messages, and notes (dropped system messages). ``None`` is not an input."""
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except ValueError:
            raise WindowInputError(
                "overwrite_from_input: the input is text that is not a JSON list of messages; pass [{role, content}, …]"
            ) from None
    if not isinstance(value, (list, tuple)):
        raise WindowInputError(
            f"overwrite_from_input: expected a list of {{role, content}} messages, got {type(value).__name__}"
        )
    out: list[Message] = []
    dropped = 0
    for i, m in enumerate(value, start=1):
        if not isinstance(m, Mapping):
            raise WindowInputError(f"overwrite_from_input: message {i} is not a {{role, content}} mapping")
        role = m.get("role")
        if role == "system":
            dropped += 1
            continue
        if role not in ("user", "assistant", "tool"):
            raise WindowInputError(
                f"overwrite_from_input: message {i} has role {role!r}; expected user, assistant or tool"
            )
        content = m.get("content")
        if content is None:
            content = ""
        if not isinstance(content, str):
            raise WindowInputError(f"overwrite_from_input: message {i} has content that is not text")
        calls = m.get("tool_calls") or []
        try:
            tool_calls = tuple(
                ToolCall(
                    str(c.get("id", "")),
                    str((c.get("function") or c).get("name", "")),
                    str((c.get("function") or c).get("arguments", "")),
                )
                for c in calls
            )
        except AttributeError:
            raise WindowInputError(f"overwrite_from_input: message {i} has malformed tool_calls") from None
        out.append(
            Message(
                role,
                content,
                INTERMEDIATE,
                f"input:{i}",
                name=m.get("name"),
                tool_calls=tool_calls,
                tool_call_id=m.get("tool_call_id"),
            )
        )
    notes = (
        [
            f"{dropped} system message{'s' if dropped != 1 else ''} in the input dropped: the system prompt is "
            "node configuration, never stored"
        ]
        if dropped
        else []
    )
    return out, notes


def message_dict(m: Message) -> dict:
    """A stored message as data (the ``messages`` output and the recorded overwrite)."""
    return m.to_openai()


def overwrites_of(turn_meta: Mapping[str, Any] | None, node_id: str) -> list[Message] | None:
    raw = ((turn_meta or {}).get(META_KEY) or {}).get(node_id)
    if raw is None:
        return None
    messages, _ = parse_overwrite(raw)
    return messages


@dataclass
class WindowCall:
    """One call of a window memory: the ledger, and the messages the reading node receives, in order."""

    ledger: Ledger
    messages: list[Message]
    history_set: bool
    notes: list[str] = field(default_factory=list)


def history_inputs(
    conversation: Conversation, node_id: str, *, position: int | None = None, overwrite: Sequence[Message] | None = None
) -> Callable[[int], Sequence[Message] | None] | None:
    """What an input wrote over the node's store before each turn's call: earlier turns' inputs
    from their ``Turn.meta``, and at ``position`` the call's own ``overwrite`` (``None``: not
    provided); ``None`` when no input ever did (the replay then needs no inputs)."""
    turns = conversation.turns
    if overwrite is None and not any(
        ((t.meta or {}).get(META_KEY) or {}).get(node_id) is not None for p, t in enumerate(turns) if p != position
    ):
        return None

    def at(p: int) -> Sequence[Message] | None:
        if p == position:
            return overwrite
        return overwrites_of(turns[p].meta, node_id)

    return at


def window_call(
    conversation: Conversation,
    position: int,
    node_id: str,
    config: MemoryConfig,
    *,
    overwrite: Sequence[Message] | None = None,
    has_thread: bool = True,
    prompt_tokens: int = 0,
) -> WindowCall:
    """The store as the call at ``position`` sees it (see the module docstring for the rules),
    decided by the core ``window`` strategy, as every replay of the node is.

    ``overwrite`` is this call's input (``None``: not provided); earlier turns' inputs are read
    from their ``Turn.meta``. ``prompt_tokens`` is the rest of the reading node's prompt.
    """
    replay = Replay(
        conversation,
        config,
        system_prompt="",
        has_thread=has_thread,
        prompt_tokens=lambda _position: prompt_tokens,
        history_inputs=history_inputs(conversation, node_id, position=position, overwrite=overwrite),
    )
    _, decision = replay.view_for(position)
    ledger = replay.ledger_at(position)
    # The reading node receives the input's messages as they came (tool calls and names included),
    # then the stored messages, in store order.
    turns = conversation.turns
    messages = [m for _, _, m in (decision.plan.inputs if decision.plan is not None else ())] + [
        turns[e.position].messages[e.index] for e in ledger.entries if e.kept
    ]
    return WindowCall(
        ledger=ledger,
        messages=messages,
        history_set=overwrite is not None,
        notes=list(decision.plan.notes) if decision.plan is not None else [],
    )


def window_source(node: Node, ctx: RunContext) -> tuple[str, MemoryConfig, Any] | None:
    """``(window node id, its config, this call's overwrite)`` when the node reads a window-memory node."""
    source = node.data.get("memory_node")
    if not source:
        return None
    if source not in ctx.window_calls:
        if not ctx.flow.has_node(source) or ctx.flow.node(source).type != "window-memory":
            raise NodeFailed(f"memory_node {source!r} is not a window-memory node of this flow")
        raise NodeFailed(
            f"window memory {source!r} has not run before {node.id!r} in this turn; connect it before {node.id!r}"
        )
    config, overwrite = ctx.window_calls[source]
    return source, config, overwrite


def run_window_memory(node: Node, ctx: RunContext, run: NodeRun) -> str | None:
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
    call = window_call(
        ctx.conversation, ctx.position, node.id, config, overwrite=overwrite, has_thread=ctx.flow.is_chat
    )
    ctx.window_calls[node.id] = (config, overwrite)
    if overwrite is not None and config.scope == "thread" and ctx.flow.is_chat:
        ctx.window_overwrites[node.id] = [message_dict(m) for m in overwrite]
    run.ledger = call.ledger
    run.notes.extend(call.notes)
    run.outputs = {"history_set": call.history_set, "count": len(call.messages)}
    if settings.expose_messages_output:
        run.outputs["messages"] = [message_dict(m) for m in call.messages]
    return "source" if settings.expose_error_output else None


__all__ = [
    "WindowSettings",
    "window_settings",
    "parse_overwrite",
    "window_call",
    "WindowCall",
    "overwrites_of",
    "history_inputs",
    "message_dict",
    "FAIL_BRANCH",
    "HISTORY_SET",
    "META_KEY",
    "SCOPES",
    "run_window_memory",
    "window_source",
]
