"""An agent run, step by step as Haystack's ``Agent.run`` (spec/memory-models.md §A.3), and the
planners that choose its tool calls.

Every run starts from a fresh state whose ``messages`` are the system prompt, the history replayed
from earlier turns, and the user's query. Each step appends the model's reply, then the tool results.
2.x prepares every call's arguments first, so a reader never sees a writer of the same reply. The
result messages list calls to unknown tools first, then the others in call order; a result message's
text is the result itself (:func:`core.flow.nodes.agent_tools.result_text`), a failure's text
Haystack's error text. The run ends on a reply with text and no tool calls — exit reason ``text``
whatever ``exit_conditions`` says —, after a tool named in ``exit_conditions`` ran (unless a call of an
exit tool in the same reply failed), or after ``max_agent_steps`` (default 100). ``tool_call_counts``
lists every tool (0 for an unused one) and counts calls to unknown tools too. The state is then
discarded — nothing carries over to the next run except what the conversation stores: the turn's
tool calls and results become its intermediate messages (kinds ``tool_call`` and ``tool_result``), and
the final text its answer. ``before_model`` is called before every model request (a hook for in-run
context management).

**Tool choice.** Offline, a deterministic :class:`DemoPlanner` picks tools from the query ("what is
12*7" → ``calculator``, "note: X" → ``note``, "look up X" → ``lookup``, "list my notes" →
``list_notes``) and, once results are in, words a reply from them; a query that asks for no tool is
answered by the demo model from the prompt. With a real model, :class:`ModelPlanner` asks the model
through litellm tool calling (:meth:`core.llm.client.LiteLLMClient.complete_tools`).
"""

from __future__ import annotations

import ast
import copy
import json
import re
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable, Mapping, Protocol, Sequence

from core.model.conversation import ANSWER, INTERMEDIATE, QUERY, TOOL_CALL, TOOL_RESULT, Message, ToolCall

from ..errors import ToolError
from .agent_state import DEFAULT_HAYSTACK_VERSION, State, check_schema
from .agent_tools import Tool, call_tool, merge_outputs, prepare_args, result_text, schedule_calls, unknown_tool_text

if TYPE_CHECKING:  # pragma: no cover
    from core.llm.client import LLMClient

DEFAULT_MAX_STEPS = 100

# -- planners ---------------------------------------------------------------------------------------


@dataclass(frozen=True)
class ToolRequest:
    id: str
    name: str
    arguments: dict


@dataclass(frozen=True)
class PlannerReply:
    """One model step: text and/or tool calls, with usage."""

    text: str
    tool_calls: tuple[ToolRequest, ...] = ()
    usage: dict = field(default_factory=lambda: {"prompt_tokens": 0, "completion_tokens": 0, "total_tokens": 0})
    model: str = ""
    note: str = ""


class Planner(Protocol):
    def step(self, messages: Sequence[Message], tools: Sequence[Tool], call_id: Callable[[], str]) -> PlannerReply: ...


_EXPRESSION = re.compile(r"[-+(]*\s*\d[\d.,]*(?:\s*(?:\*\*|//|[-+*/%^×÷x])\s*[-+(]*\s*\d[\d.,]*\)*)+\)*")
_MATH_CUE = re.compile(r"\b(?:what(?:'s| is)|calculate|compute|how much is|evaluate|solve)\b", re.I)
_NOTE = re.compile(
    r"\b(?:take a note|make a note|note(?: down)?)\s*(?::|that)\s*(.+?)\s*(?=$|[.;!?](?:\s|$)|"
    r"(?:\band\s+)?(?:take a note|make a note|note|what is|what's|calculate|compute|look up|lookup|"
    r"list my notes)\b)",
    re.I,
)
_LOOKUP = re.compile(
    r"\b(?:look up|lookup|find info(?:rmation)? (?:on|about))\s+(?:the\s+)?(.+?)\s*"
    r"(?=$|[?!]|\.(?:\s|$)|\band\b)",
    re.I,
)
_LIST_NOTES = re.compile(r"\b(?:list|show|read)(?: me)? (?:my |the |all )*notes\b|\bwhat (?:are|were) my notes\b", re.I)


def plan_tools(query: str) -> list[tuple[str, dict]]:
    """The demo planner's tool choice for a query, in the order the query asks: ``(tool, args)``.

    An expression goes to the calculator when it has an operator other than ``-`` or follows a
    cue such as "what is" or "calculate" (so a date like 2024-05-15 is not arithmetic); numbers
    inside a note's text stay in the note.
    """
    found: list[tuple[int, str, dict]] = []
    spans: list[tuple[int, int]] = []
    for m in _NOTE.finditer(query):
        text = m.group(1).strip().rstrip(".!?,; ")
        if text:
            found.append((m.start(), "note", {"text": text}))
            spans.append(m.span(1))
    for m in _LOOKUP.finditer(query):
        if not any(a <= m.start() < b for a, b in spans):
            found.append((m.start(), "lookup", {"key": m.group(1).strip()}))
            spans.append(m.span(1))
    listing = _LIST_NOTES.search(query)
    if listing:
        found.append((listing.start(), "list_notes", {}))
    cue = bool(_MATH_CUE.search(query))
    for m in _EXPRESSION.finditer(query):
        if any(a <= m.start() < b for a, b in spans):
            continue
        expr = m.group(0).strip().rstrip(".,")
        operators = set(re.sub(r"[\d.,\s()]", "", expr))
        if not (operators - {"-"} or (cue and operators)):
            continue
        found.append((m.start(), "calculator", {"expression": re.sub(r"(?<=\d)\s*x\s*(?=\d)", "*", expr)}))
    found.sort(key=lambda x: x[0])
    return [(name, args) for _, name, args in found]


def _describe(name: str, result: Any, error: str | None) -> str:
    if error:
        # A failed call's text is Haystack's "Failed to invoke Tool `x` with parameters {...}. Error: <cause>".
        return f"The {name} tool failed: {error.rsplit('Error: ', 1)[-1].rstrip('.')}."
    if not isinstance(result, Mapping):
        return f"{name} returned {result}."
    if name == "calculator":
        return f"{result.get('expression')} = {result.get('result')}."
    if name == "note":
        return f"Noted: {result.get('note')}."
    if name == "list_notes":
        notes = result.get("notes") or []
        return ("Your notes: " + "; ".join(str(n) for n in notes) + ".") if notes else "You have no notes in this run."
    if name == "lookup":
        if result.get("found"):
            return f"{result.get('key')}: {result.get('value')}."
        return f"I found nothing for {result.get('key')!r} in the table."
    return f"{name}: {json.dumps(result, ensure_ascii=False)}."


def _read_result(text: str) -> Any:
    if len(text) > 100_000:  # a demo tool's result is small; anything this big is not one
        return None
    try:
        return json.loads(text)
    except ValueError:
        pass
    try:
        return ast.literal_eval(text)
    except (ValueError, SyntaxError, MemoryError, RecursionError):
        return None


def _demo_usage(messages: Sequence[Message], reply: str) -> dict:
    """The usage the demo model reports for a reply (its prompt and reply, counted as it counts them)."""
    from core.llm.demo_model import demo_usage

    return demo_usage([m.to_openai() for m in messages], reply)


def reported_usage(usage: Mapping[str, Any]) -> tuple[int, int] | None:
    """A reply's usage as stored on its message: ``(input, output)``, or ``None`` when the provider
    reported no input tokens (nothing to anchor an estimate on)."""
    prompt = int(usage.get("prompt_tokens") or 0)
    return (prompt, int(usage.get("completion_tokens") or 0)) if prompt else None


class DemoPlanner:
    """Deterministic tool choice offline (see the module docstring); plain questions go to the demo model."""

    def __init__(self, client: "LLMClient | None" = None, model: str = ""):
        self.client = client
        self.model = model

    def step(self, messages, tools, call_id) -> PlannerReply:
        last_user = max((i for i, m in enumerate(messages) if m.role == "user"), default=None)
        after = list(messages[last_user + 1 :]) if last_user is not None else []
        if not any(m.role == "tool" for m in after):
            query = messages[last_user].content if last_user is not None else ""
            names = {t.name for t in tools}
            calls = tuple(ToolRequest(call_id(), name, args) for name, args in plan_tools(query) if name in names)
            if calls:
                asked = json.dumps([{"name": c.name, "arguments": c.arguments} for c in calls], ensure_ascii=False)
                return PlannerReply("", calls, _demo_usage(messages, asked), model="memlens/demo")
            return self._answer(messages)
        calls = {c.id: c.name for m in after for c in m.tool_calls}
        lines = []
        for m in after:
            if m.role == "tool":
                # The demo tools return dicts (JSON in 3.x, Python notation in 2.x), so a result that is
                # neither is an error text.
                result = _read_result(m.content)
                error = None if isinstance(result, dict) else m.content
                lines.append(_describe(calls.get(m.tool_call_id or "", m.name or "tool"), result, error))
        text = " ".join(lines)
        return PlannerReply(text, usage=_demo_usage(messages, text), model="memlens/demo")

    def _answer(self, messages) -> PlannerReply:
        from core.llm.client import DemoClient

        client = self.client or DemoClient()
        reply = client.complete(self.model, [m.to_openai() for m in messages])
        return PlannerReply(reply.text, usage=reply.usage, model=reply.model, note=reply.note)


class ModelPlanner:
    """Tool calls chosen by a real model through litellm tool calling."""

    def __init__(self, client: LLMClient, model: str, max_tokens: int | None = None):
        self.client = client
        self.model = model
        self.max_tokens = max_tokens

    def step(self, messages, tools, call_id) -> PlannerReply:
        reply = self.client.complete_tools(
            self.model, [m.to_openai() for m in messages], [t.llm_schema() for t in tools], self.max_tokens
        )
        calls = []
        for c in reply.tool_calls:
            try:
                args = json.loads(c.arguments or "{}")
            except ValueError:
                args = {"__invalid__": c.arguments}
            calls.append(ToolRequest(c.id or call_id(), c.name, args if isinstance(args, dict) else {}))
        return PlannerReply(reply.text, tuple(calls), reply.usage, reply.model, reply.note)


def planner_for(client: "LLMClient | None", model: str, max_tokens: int | None = None) -> Planner:
    """:class:`ModelPlanner` when ``model`` is a real model the client can call with tools, else the demo planner."""
    route = getattr(client, "route", None)
    if client is not None and route is not None and hasattr(client, "complete_tools"):
        target, _ = route(model)
        if not target.startswith("memlens/"):
            return ModelPlanner(client, model, max_tokens)
    return DemoPlanner(client, model)


# -- a run ------------------------------------------------------------------------------------------


@dataclass
class AgentStep:
    """One tool call: which tool, its arguments as called (state-filled ones included), its
    result or error, and the state right after its outputs were merged.

    Steps are listed in the order of the tool messages (unknown tools first, then call order);
    ``ran`` is the call's place in the order the calls actually ran within the reply (writers of
    a state key before its readers; 0 for a call to an unknown tool, which does not run)."""

    step: int
    tool: str
    call_id: str
    args: dict
    result: Any
    error: str | None
    state: dict
    messages: int  # messages in the state once this call's result message is in
    ran: int = 0

    def to_dict(self) -> dict:
        return {
            "step": self.step,
            "tool": self.tool,
            "call_id": self.call_id,
            "args": copy.deepcopy(self.args),
            "result": copy.deepcopy(self.result),
            "error": self.error,
            "state": copy.deepcopy(self.state),
            "messages": self.messages,
            "ran": self.ran,
        }


@dataclass
class AgentResult:
    text: str
    messages: list[Message]  # the state's messages at the end: system, history, query, new ones
    new_messages: list[Message]  # what the run added after the query (model replies and tool results)
    steps: list[AgentStep]
    outputs: dict  # public state keys, the run metadata and last_message
    exit_reason: str
    step_count: int
    tool_call_counts: dict[str, int]
    usage: dict[str, int]
    notes: list[str] = field(default_factory=list)

    @property
    def intermediate(self) -> list[Message]:
        """Tool calls and results: the messages the turn stores between its query and its answer."""
        return [m for m in self.new_messages if m.kind in (TOOL_CALL, TOOL_RESULT)]


#: ``before_model(state, step)`` runs before every model request of a run (``step`` counts from 1);
#: it may rewrite ``state`` — e.g. replace ``messages`` — and the model then gets what it left.
BeforeModel = Callable[[State, int], None]


def run_agent(
    query: str,
    *,
    tools: Sequence[Tool],
    planner: Planner,
    schema: Mapping[str, Mapping] | None = None,
    system_prompt: str = "",
    history: Sequence[Message] = (),
    state_inputs: Mapping[str, Any] | None = None,
    max_agent_steps: int = DEFAULT_MAX_STEPS,
    exit_conditions: Sequence[str] = ("text",),
    ref_prefix: str = "agent",
    version: int = DEFAULT_HAYSTACK_VERSION,
    before_model: BeforeModel | None = None,
) -> AgentResult:
    """One agent run on a fresh state, step by step as Haystack's ``Agent.run`` (see the module docstring).

    ``state_inputs`` are stored as given (no merge handler, ``None`` kept), keys outside the schema
    ignored, as the Agent's state keyword inputs are. The state is discarded at the end.
    """
    if version >= 3:
        check_schema(schema or {})  # 2.x reserves no state key
    state = State(schema or {}, {k: v for k, v in (state_inputs or {}).items() if k in (schema or {})})
    by_name = {t.name: t for t in tools}
    counter = {"n": 0}

    def ref() -> str:
        counter["n"] += 1
        return f"{ref_prefix}:{counter['n']}"

    calls = {"n": 0}

    def call_id() -> str:
        calls["n"] += 1
        return f"call_{ref_prefix.replace(':', '_')}_{calls['n']}"

    initial: list[Message] = []
    if system_prompt:
        initial.append(Message("system", system_prompt, INTERMEDIATE, ref()))
    initial.extend(history)
    initial.append(Message("user", query, QUERY, ref()))
    state.set("messages", initial)
    added: list[Message] = []

    def append(messages: list[Message]) -> None:
        added.extend(messages)
        state.set("messages", messages)

    steps: list[AgentStep] = []
    counts: dict[str, int] = {t.name: 0 for t in tools}
    usage = {"prompt_tokens": 0, "completion_tokens": 0, "total_tokens": 0}
    notes: list[str] = []
    only_text = list(exit_conditions) == ["text"]
    text, exit_reason, step_count = "", "max_agent_steps", 0
    while step_count < max_agent_steps:
        if before_model is not None:
            before_model(state, step_count + 1)
        reply = planner.step(state.get("messages"), list(tools), call_id)
        for k in usage:
            usage[k] += int(reply.usage.get(k, 0))
        if reply.note and reply.note not in notes:
            notes.append(reply.note)
        reported = reported_usage(reply.usage)  # kept on the reply: Dify's compaction estimate anchors on it
        if not reply.tool_calls:
            append([Message("assistant", reply.text, ANSWER, ref(), usage=reported)])
        else:
            asked = tuple(ToolCall(c.id, c.name, json.dumps(c.arguments, ensure_ascii=False)) for c in reply.tool_calls)
            append([Message("assistant", reply.text, TOOL_CALL, ref(), tool_calls=asked, usage=reported)])
        # A reply without tool calls that has text ends the run whatever exit_conditions says; so does
        # any reply when the agent has no tools. An empty reply without calls goes round again.
        if not tools or (not reply.tool_calls and reply.text):
            step_count += 1
            text, exit_reason = reply.text, "text"
            break
        results = _run_tools(reply.tool_calls, by_name, state, step_count + 1, version)
        before = len(state.data["messages"])
        append(
            [
                Message(
                    "tool",
                    step.error if step.error is not None else result_text(step.result, version),
                    TOOL_RESULT,
                    ref(),
                    name=step.tool,
                    tool_call_id=step.call_id,
                )
                for step in results
            ]
        )
        for i, step in enumerate(results):
            step.messages = before + i + 1
            counts[step.tool] = counts.get(step.tool, 0) + 1
        steps.extend(results)
        step_count += 1
        exit_tool = None if only_text else _exit_tool(reply.tool_calls, results, exit_conditions)
        if exit_tool is not None:
            exit_reason = exit_tool
            text = state.data["messages"][-1].content
            break
    messages = list(state.data["messages"])
    outputs = {k: copy.deepcopy(v) for k, v in state.data.items() if k != "messages"}
    if version >= 3:  # 3.x's run metadata outputs; 2.x outputs the state alone
        outputs.update(
            {
                "step_count": step_count,
                "token_usage": dict(usage),
                "tool_call_counts": dict(counts),
                "exit_reason": exit_reason,
            }
        )
    outputs["last_message"] = messages[-1].to_dict(exchanged_only=True) if messages else None
    return AgentResult(
        text=text,
        messages=messages,
        new_messages=added,
        steps=steps,
        outputs=outputs,
        exit_reason=exit_reason,
        step_count=step_count,
        tool_call_counts=counts,
        usage=usage,
        notes=notes,
    )


def _run_tools(
    requests: Sequence[ToolRequest], by_name: Mapping[str, Tool], state: State, step: int, version: int
) -> list[AgentStep]:
    """One reply's tool calls, as Haystack's tool invoker runs them; the steps come back in the order of
    the result messages: calls to unknown tools first, then the others in call order."""
    unknown = [
        AgentStep(step, c.name, c.id, dict(c.arguments), None, unknown_tool_text(c.name, list(by_name)), {}, 0)
        for c in requests
        if c.name not in by_name
    ]
    known = [c for c in requests if c.name in by_name]
    for s in unknown:
        s.state = state.snapshot()
    out: list[AgentStep | None] = [None] * len(known)
    ran = 0
    # 2.x's ToolInvoker prepares every call's arguments first and runs them all at once: a reader
    # never sees what a writer of the same reply wrote.
    batches = (
        schedule_calls([(by_name[c.name], c.arguments) for c in known])
        if version >= 3
        else [list(range(len(known)))]
        if known
        else []
    )
    for batch in batches:
        # Every call of a batch starts from the state as it was before the batch.
        prepared = {i: prepare_args(by_name[known[i].name], known[i].arguments, state, version=version) for i in batch}
        outcomes = {}
        for i in batch:
            try:
                outcomes[i] = (call_tool(by_name[known[i].name], prepared[i]), None)
            except ToolError as e:
                outcomes[i] = (None, str(e))
        for i in batch:
            result, error = outcomes[i]
            if error is None:
                merge_outputs(by_name[known[i].name], result, state)
            ran += 1
            args = {k: v for k, v in prepared[i].items() if not isinstance(v, State)}
            out[i] = AgentStep(step, known[i].name, known[i].id, args, result, error, state.snapshot(), 0, ran)
    return unknown + [s for s in out if s is not None]


def _exit_tool(requests: Sequence[ToolRequest], results: Sequence[AgentStep], exit_conditions: Sequence[str]):
    """The exit-condition tool the reply called, or ``None``: a call of an exit tool that errored in
    the same reply cancels the exit, even when another exit tool succeeded (Haystack 3.x)."""
    errored = {s.tool for s in results if s.error is not None}
    first = None
    for c in requests:
        if c.name not in exit_conditions:
            continue
        if c.name in errored:
            return None
        first = first or c.name
    return first


__all__ = [
    "AgentResult",
    "AgentStep",
    "BeforeModel",
    "DEFAULT_MAX_STEPS",
    "DemoPlanner",
    "ModelPlanner",
    "Planner",
    "PlannerReply",
    "ToolRequest",
    "plan_tools",
    "planner_for",
    "reported_usage",
    "run_agent",
]
