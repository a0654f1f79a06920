"""The agent's tools and how a call maps to and from its state, as Haystack's tool invoker does it
(spec/memory-models.md §A.2), and the offline demo tools.

``inputs_from_state = {state_key: param}`` fills a parameter the model did not supply from the state
(a deep copy); model arguments always win. A mapping naming a parameter the tool lacks is refused
when the tool is built (:class:`ToolConfigError`). 3.x fills nothing else; 2.x, for a tool that
declares no mapping (``None``), also fills every parameter named like a state key — an explicit empty
mapping ``{}`` turns that off. ``outputs_to_state = {state_key: {"source": out_key, "handler": f}}``
merges a dict result's ``out_key`` into the state (the whole result when ``source`` is missing or
empty); a result that is not a dict writes nothing, and a ``source`` the result lacks is skipped (3.x,
and 2.x from 2.27; up to 2.26 it merged ``None``). When a reply calls several tools, 3.x runs the ones
that write a state key before the ones that read it (:func:`schedule_calls`).
"""

from __future__ import annotations

import ast
import inspect
import json
import operator
import re
import typing
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping, Sequence

from ..errors import ToolConfigError, ToolError
from .agent_state import DEFAULT_HAYSTACK_VERSION, State


@dataclass(frozen=True)
class Tool:
    """A tool the agent can call: a function, its JSON-schema parameters and its state mappings.

    ``inputs_from_state`` is ``None`` when the tool declares no mapping — which in Haystack 2.x means
    "fill parameters named like state keys", while an explicit ``{}`` turns that off. A mapping that
    names a parameter neither the function nor the JSON schema has is a :class:`ToolConfigError`
    here, when the tool is built (Haystack's ``Tool.__post_init__``), not a failure at run time.
    """

    name: str
    description: str
    parameters: dict
    function: Callable[..., Any]
    inputs_from_state: Mapping[str, str] | None = None
    outputs_to_state: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.inputs_from_state is None:
            return
        valid = set(inspect.signature(self.function).parameters) | set(self.parameters.get("properties") or {})
        for state_key, param in self.inputs_from_state.items():
            if not isinstance(param, str):
                raise ToolConfigError(
                    f"tool {self.name}: inputs_from_state values must be parameter names, not "
                    f"{param!r} (state key {state_key!r})"
                )
            if param not in valid:
                raise ToolConfigError(
                    f"tool {self.name}: inputs_from_state maps {state_key!r} to {param!r}, which "
                    f"is not one of its parameters ({', '.join(sorted(valid)) or 'none'})"
                )

    def llm_schema(self) -> dict:
        """The OpenAI tool schema; parameters filled from the state are not shown to the model."""
        mapped = set((self.inputs_from_state or {}).values())
        props = {k: v for k, v in (self.parameters.get("properties") or {}).items() if k not in mapped}
        required = [r for r in self.parameters.get("required") or [] if r not in mapped]
        return {
            "type": "function",
            "function": {
                "name": self.name,
                "description": self.description,
                "parameters": {"type": "object", "properties": props, "required": required},
            },
        }

    def with_mappings(
        self,
        inputs_from_state: Mapping[str, str] | None = None,
        outputs_to_state: Mapping[str, Mapping[str, Any]] | None = None,
    ) -> "Tool":
        """The same tool with other mappings (``None`` keeps the tool's own)."""
        ins = self.inputs_from_state if inputs_from_state is None else inputs_from_state
        return Tool(
            self.name,
            self.description,
            self.parameters,
            self.function,
            None if ins is None else dict(ins),
            dict(self.outputs_to_state if outputs_to_state is None else outputs_to_state),
        )

    def takes_state(self) -> list[str]:
        """The parameters annotated ``State`` (or ``State | None``): they receive the live state."""
        return [
            name
            for name, p in inspect.signature(self.function).parameters.items()
            if p.annotation in (State, "State", State | None, "State | None", typing.Optional[State])
        ]


def prepare_args(tool: Tool, arguments: Mapping[str, Any], state: State, *, version: int = 3) -> dict:
    """The arguments a call runs with: the model's, then what the state fills in (model arguments win).

    3.x fills only the parameters ``inputs_from_state`` maps; 2.x also fills every parameter named
    like a state key when the tool declares no mapping at all (``inputs_from_state is None``).
    """
    args = dict(arguments)
    mapping = tool.inputs_from_state
    if mapping is None and version < 3:
        mapping = {name: name for name in inspect.signature(tool.function).parameters}
    for state_key, param in (mapping or {}).items():
        if param not in args and state.has(state_key):
            args[param] = state.get(state_key)
    for name in tool.takes_state():
        args[name] = state
    return args


def call_tool(tool: Tool, args: Mapping[str, Any]) -> Any:
    """Run the tool's function; any failure becomes a :class:`ToolError` worded as Haystack's
    ``ToolInvocationError`` (the text the model then reads)."""
    try:
        return tool.function(**args)
    except Exception as e:  # a tool's own failure is reported to the model, not raised
        raise ToolError(f"Failed to invoke Tool `{tool.name}` with parameters {dict(args)}. Error: {e}") from e


def merge_outputs(tool: Tool, result: Any, state: State) -> None:
    """Write a dict result into the state through ``outputs_to_state``: ``source`` picks a key (a
    missing or empty ``source`` takes the whole result; a ``source`` the result lacks is skipped, as
    in 3.x and 2.27+ — up to 2.26 it merged ``None``); a result that is not a dict writes nothing."""
    if not isinstance(result, Mapping):
        return
    for state_key, mapping in tool.outputs_to_state.items():
        mapping = mapping or {}
        source = mapping.get("source")
        if source and source not in result:
            continue
        state.set(state_key, result[source] if source else dict(result), handler_override=mapping.get("handler"))


def invoke_tool(tool: Tool, arguments: Mapping[str, Any], state: State, *, version: int = 3) -> Any:
    """One call outside a run: prepare the arguments, call, merge the outputs; returns the raw result."""
    result = call_tool(tool, prepare_args(tool, arguments, state, version=version))
    merge_outputs(tool, result, state)
    return result


def result_text(result: Any, version: int = DEFAULT_HAYSTACK_VERSION) -> str:
    """A tool result message's text, as Haystack writes it: a string as it is; anything else as JSON
    (non-ASCII kept, ``str()`` when JSON cannot hold it) in 3.x, and as ``str()`` — Python's
    notation, ``{'note': 'a', 'saved': True}`` — in 2.x, whose ToolInvoker converts to JSON only
    with ``convert_result_to_json_string=True``, which the Agent does not set."""
    if isinstance(result, str) or version < 3:
        return str(result)
    try:
        return json.dumps(result, ensure_ascii=False)
    except (TypeError, ValueError):
        return str(result)


def unknown_tool_text(name: str, tools: Sequence[str]) -> str:
    """Haystack's ``ToolNotFoundException`` text, which the model reads for a call to a missing tool."""
    return f"Tool '{name}' not found. Available tools: {', '.join(tools)}"


def _state_io(tool: Tool, arguments: Mapping[str, Any]) -> tuple[set[str] | None, set[str] | None]:
    """The state keys a call reads and writes (``None``: every key, for a tool that takes the state)."""
    if tool.takes_state():
        return None, None
    reads = {k for k, p in (tool.inputs_from_state or {}).items() if p not in arguments}
    return reads, set(tool.outputs_to_state)


def _overlap(a: set[str] | None, b: set[str] | None) -> bool:
    if a is None:
        return b is None or bool(b)
    if b is None:
        return bool(a)
    return bool(a & b)


def schedule_calls(calls: Sequence[tuple[Tool, Mapping[str, Any]]]) -> list[list[int]]:
    """Haystack 3.x's batches for one reply's calls (indices, in the order they run).

    A call that reads a state key runs in a later batch than every call that writes it, whatever
    order the model asked for them in; calls in one batch see the state as it was before the batch,
    and their outputs are merged in call order after it. When no call is ready (a cycle, e.g. a
    tool that reads and writes one key called twice) the first remaining call runs alone.
    """
    io = [_state_io(tool, args) for tool, args in calls]
    deps = [{i for i in range(len(io)) if i != j and _overlap(io[j][0], io[i][1])} for j in range(len(io))]
    done: set[int] = set()
    batches: list[list[int]] = []
    while len(done) < len(io):
        ready = [k for k in range(len(io)) if k not in done and deps[k] <= done]
        if not ready:
            ready = [min(k for k in range(len(io)) if k not in done)]
        done.update(ready)
        batches.append(ready)
    return batches


# -- the demo tools ---------------------------------------------------------------------------------

_BINARY = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.Div: operator.truediv,
    ast.FloorDiv: operator.floordiv,
    ast.Mod: operator.mod,
    ast.Pow: operator.pow,
}
_UNARY = {ast.UAdd: operator.pos, ast.USub: operator.neg}


def _evaluate(node: ast.AST) -> float | int:
    if isinstance(node, ast.Expression):
        return _evaluate(node.body)
    if isinstance(node, ast.Constant) and isinstance(node.value, (int, float)) and not isinstance(node.value, bool):
        return node.value
    if isinstance(node, ast.BinOp) and type(node.op) in _BINARY:
        left, right = _evaluate(node.left), _evaluate(node.right)
        if isinstance(node.op, ast.Pow) and abs(right) > 100:
            raise ToolError("exponent too large")
        try:
            return _BINARY[type(node.op)](left, right)
        except ZeroDivisionError:
            raise ToolError("division by zero") from None
    if isinstance(node, ast.UnaryOp) and type(node.op) in _UNARY:
        return _UNARY[type(node.op)](_evaluate(node.operand))
    raise ToolError("only numbers, + - * / // % ** and parentheses are allowed")


def calculate(expression: str) -> dict:
    """The calculator tool: arithmetic on numbers, nothing else is evaluated."""
    text = str(expression).replace("×", "*").replace("÷", "/").replace("^", "**").strip()
    text = re.sub(r"(?<=\d),(?=\d{3}\b)", "", text)  # thousands separators
    try:
        tree = ast.parse(text, mode="eval")
    except SyntaxError:
        raise ToolError(f"{expression!r} is not an arithmetic expression") from None
    value = _evaluate(tree)
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    return {"expression": str(expression), "result": value}


def save_note(text: str) -> dict:
    """The note tool: the note is written to the run's state (``notes``)."""
    return {"note": str(text).strip(), "saved": True}


def list_notes(notes: list | None = None) -> dict:
    """Lists the notes; ``notes`` comes from the state (``inputs_from_state``), not from the model."""
    notes = list(notes or [])
    return {"notes": notes, "count": len(notes)}


#: The lookup tool's default table (a node can give its own ``lookup_table``).
DEMO_LOOKUP = {
    "flight AA100": "on time, departs 09:40 from gate B12",
    "flight BA249": "delayed 35 minutes, departs 11:15 from gate C3",
    "order 4411": "shipped on Monday, arriving Thursday",
    "order 5120": "being packed",
    "refund policy": "full refund within 30 days of delivery",
    "opening hours": "Monday to Friday, 9:00 to 17:00",
}


def make_lookup(table: Mapping[str, Any]) -> Callable[[str], dict]:
    index = {" ".join(str(k).lower().split()): (str(k), v) for k, v in table.items()}

    def lookup(key: str) -> dict:
        wanted = " ".join(str(key).lower().strip(" ?.!").split())
        hit = index.get(wanted)
        if hit is None:
            hit = next((v for k, v in index.items() if wanted and (wanted in k or k in wanted)), None)
        if hit is None:
            return {"key": str(key), "found": False, "value": None}
        return {"key": hit[0], "found": True, "value": hit[1]}

    return lookup


def demo_tools(lookup_table: Mapping[str, Any] | None = None) -> dict[str, Tool]:
    """The offline demo tools with their default state mappings."""
    text = {"type": "string"}
    return {
        "calculator": Tool(
            "calculator",
            "Evaluate an arithmetic expression such as 12*7 or (3+4)/2.",
            {"type": "object", "properties": {"expression": text}, "required": ["expression"]},
            calculate,
            outputs_to_state={"last_result": {"source": "result"}},
        ),
        "note": Tool(
            "note",
            "Save a short note for later in this run.",
            {"type": "object", "properties": {"text": text}, "required": ["text"]},
            save_note,
            outputs_to_state={"notes": {"source": "note"}},
        ),
        "list_notes": Tool(
            "list_notes",
            "List the notes saved so far in this run.",
            {"type": "object", "properties": {"notes": {"type": "array", "items": text}}},
            list_notes,
            inputs_from_state={"notes": "notes"},
        ),
        "lookup": Tool(
            "lookup",
            "Look up a key (a flight, an order, a policy) in the reference table.",
            {"type": "object", "properties": {"key": text}, "required": ["key"]},
            make_lookup(DEMO_LOOKUP if lookup_table is None else lookup_table),
            outputs_to_state={"lookups": {}},
        ),
    }


#: The state the demo tools write: notes (list merge), the last calculator result (replace),
#: every lookup result (list merge of whole result dicts).
DEMO_SCHEMA: dict[str, dict[str, Any]] = {
    "notes": {"type": list[str]},
    "last_result": {"type": float | int | None},
    "lookups": {"type": list[dict]},
}


__all__ = [
    "DEMO_LOOKUP",
    "DEMO_SCHEMA",
    "Tool",
    "calculate",
    "call_tool",
    "demo_tools",
    "invoke_tool",
    "list_notes",
    "make_lookup",
    "merge_outputs",
    "prepare_args",
    "result_text",
    "save_note",
    "schedule_calls",
    "unknown_tool_text",
]
