"""An agent with tools and a per-run state, run as Haystack's Agent and tool invoker run it (spec/memory-models.md §A).

``version`` / the node's ``haystack_version`` picks the rules: ``3`` (default) follows
haystack-ai 3.4.1, ``2`` the newest 2.x (2.31.0). Where releases up to 2.26 differed it is said.

**State** (§A.1). A schema maps each key to ``{"type": <type>, "handler": <callable or None>}``;
a type is a class, a parameterised generic or a union — bare ``typing.List``, ``Literal[...]``
and ``Annotated[...]`` are refused as Haystack refuses them. ``messages`` is added as
``list[Message]`` with :func:`merge_lists` when the schema lacks it. The default handler is
:func:`merge_lists` for list types and :func:`replace_values` for everything else; any
``f(current, new) -> merged`` is a custom handler (:func:`dedup_append` is one). ``set`` merges
through the handler (an override wins), ``get`` returns a deep copy, and data given to the
constructor — a run's ``state_inputs`` — is stored as it is (no handler, ``None`` kept).
``to_dict`` keeps sets, frozensets and tuples; ``from_dict`` gives the same state back. Schema
errors raise :class:`StateError`, a ``ValueError``; 3.x also refuses its run-metadata and
internal keys (:data:`RESERVED_KEYS`) in a schema.

**Tools** (§A.2). ``inputs_from_state = {state_key: param}`` fills a parameter the model did not
supply from the state (a deep copy); model arguments always win. A mapping naming a parameter
the tool lacks is refused when the tool is built (:class:`ToolConfigError`). 3.x fills nothing
else; 2.x, for a tool that declares no mapping (``None``), also fills every parameter named like
a state key — an explicit empty mapping ``{}`` turns that off. ``outputs_to_state = {state_key:
{"source": out_key, "handler": f}}`` merges a dict result's ``out_key`` into the state (the whole
result when ``source`` is missing or empty); a result that is not a dict writes nothing, and a
``source`` the result lacks is skipped (3.x, and 2.x from 2.27; up to 2.26 it merged ``None``).

**A run** (§A.3). Every run starts from a fresh state whose ``messages`` are the system prompt,
the history replayed from earlier turns, and the user's query. Each step appends the model's
reply, then the tool results. When a reply calls several tools, 3.x runs the ones that write a
state key before the ones that read it (:func:`schedule_calls`); 2.x prepares every call's
arguments first, so a reader never sees a writer of the same reply. The result messages list
calls to unknown tools first, then the others in call order; a result message's text is the
result itself (:func:`result_text`), a failure's text Haystack's error text. The run ends on a
reply with text and no tool calls — exit reason ``text`` whatever ``exit_conditions`` says —,
after a tool named in ``exit_conditions`` ran (unless a call of an exit tool in the same reply
failed), or after ``max_agent_steps`` (default 100). ``tool_call_counts`` lists every tool (0 for
an unused one) and counts calls to unknown tools too. The state is then discarded — nothing
carries over to the next run except what the conversation stores: the turn's tool calls and
results become its intermediate messages (kinds ``tool_call`` and ``tool_result``), and the final
text its answer. ``before_model`` is called before every model request (a hook for in-run
context management).

**Tool choice.** Offline, a deterministic :class:`DemoPlanner` picks tools from the query
("what is 12*7" → ``calculator``, "note: X" → ``note``, "look up X" → ``lookup``, "list my notes"
→ ``list_notes``) and, once results are in, words a reply from them; a query that asks for no
tool is answered by the demo model from the prompt. With a real model, :class:`ModelPlanner` asks
the model through litellm tool calling (:meth:`core.llm.client.LiteLLMClient.complete_tools`).

**History granularity** (§A.6, this project's own rule): ``query_answer`` (default) replays only
each earlier turn's query and answer, ``all_messages`` also its tool calls and results. The value
is resolved as: explicit value on the request → the flow's ``history.granularity`` → the default;
:func:`resolve_granularity` also says which of the three decided it.
"""

from __future__ import annotations

import ast
import copy
import inspect
import json
import operator
import re
import types
import typing
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable, Mapping, Protocol, Sequence

from core.memory.errors import ConfigError
from core.memory.strategies import OFF, STRATEGIES
from core.memory.strategies.buffer import BufferStrategy
from core.model.conversation import ANSWER, INTERMEDIATE, QUERY, TOOL_CALL, TOOL_RESULT, Message, ToolCall

from ..errors import GranularityError, StateError, ToolConfigError, ToolError, node_error
from ..templates import VariablePool, render, selectors_in
from .llm import litellm_model

if TYPE_CHECKING:  # pragma: no cover
    from ..graph import Node
    from core.llm.client import LLMClient
    from ..runtime import NodeRun

GRANULARITIES = ("query_answer", "all_messages")
DEFAULT_GRANULARITY = "query_answer"
#: An agent's memory when its node names none: the whole thread.
AGENT_DEFAULT = BufferStrategy.name
#: Which setting decided the granularity of a run.
FROM_REQUEST, FROM_FLOW, FROM_DEFAULT = "request", "flow", "default"
GRANULARITY_SOURCES = {FROM_REQUEST: "set on the request", FROM_FLOW: "the flow's history.granularity",
                       FROM_DEFAULT: "the default"}


def granularity_line(run: Mapping[str, Any] | NodeRun) -> str:
    """``history granularity all_messages — set on the request`` for a node run (a mapping or a
    :class:`core.flow.runtime.NodeRun`); empty for nodes without one, and for a memory that sends
    every message whatever the granularity."""
    get = run.get if isinstance(run, dict) else (lambda k: getattr(run, k, None))
    strategy = STRATEGIES.get((get("memory") or {}).get("strategy"))
    if not get("granularity") or strategy is not None and not strategy.uses_granularity:
        return ""  # dify_agent, a window's store
    source = get("granularity_source") or ""
    return f"history granularity {get('granularity')} — {GRANULARITY_SOURCES.get(source, source)}"
DEFAULT_MAX_STEPS = 100
#: Keys the Agent keeps for itself (Haystack 3.x ``_INTERNAL_STATE_KEYS``), never outputs.
INTERNAL_KEYS = ("continue_run", "stop_run", "tools", "hook_context", "context_tokens")
#: Run metadata the Agent writes into its state and outputs (Haystack 3.x ``_RUN_METADATA_STATE_KEYS``).
RUN_METADATA_KEYS = ("step_count", "token_usage", "tool_call_counts", "exit_reason")
#: No state schema may declare these (Haystack raises ValueError for either group).
RESERVED_KEYS = INTERNAL_KEYS + RUN_METADATA_KEYS
#: The node's own outputs besides the state's keys.
NODE_OUTPUTS = ("text", "last_message", "usage") + RUN_METADATA_KEYS
HAYSTACK_VERSIONS = (3, 2)
DEFAULT_HAYSTACK_VERSION = 3


# -- merge handlers ---------------------------------------------------------------------------------

def merge_lists(current: Any, new: Any) -> list:
    """``None`` counts as ``[]``; a non-list value is wrapped in a list; the result is ``current + new``."""
    cur = [] if current is None else (list(current) if isinstance(current, list) else [current])
    add = list(new) if isinstance(new, list) else [new]
    return cur + add


def replace_values(current: Any, new: Any) -> Any:
    return new


def dedup_append(current: Any, new: Any) -> list:
    """A custom handler (the Haystack docs' example): append the items not already present."""
    out = merge_lists(current, [])
    for item in (new if isinstance(new, list) else [new]):
        if item not in out:
            out.append(item)
    return out


def add_numbers(current: Any, new: Any) -> Any:
    """A custom handler: a running total (``None`` counts as 0)."""
    return (current or 0) + new


HANDLERS: dict[str, Callable[[Any, Any], Any]] = {"merge_lists": merge_lists, "replace_values": replace_values,
                                                  "dedup_append": dedup_append, "add_numbers": add_numbers}


def handler_name(handler: Callable) -> str:
    for name, h in HANDLERS.items():
        if h is handler:
            return name
    return getattr(handler, "__name__", repr(handler))


# -- types ------------------------------------------------------------------------------------------

_TYPE_NAMES: dict[str, Any] = {"str": str, "int": int, "float": float, "bool": bool, "dict": dict, "list": list,
                               "set": set, "frozenset": frozenset, "tuple": tuple, "object": object,
                               "None": type(None), "Message": Message, "ChatMessage": Message, "Any": Any}


def _is_union(t: Any) -> bool:
    return isinstance(t, types.UnionType) or typing.get_origin(t) is typing.Union


def _check_type(key: str, t: Any) -> None:
    """Haystack's rule: a class, a parameterised generic (``list[str]``, ``typing.List[str]``) or a union.

    Bare ``typing.List``, ``Literal[...]``, ``Annotated[...]`` and ``Callable[...]`` are refused, as Haystack's
    ``_is_valid_type`` refuses every typing alias but the plain generic one.
    """
    if _is_union(t):
        return
    if t is typing.Union:
        raise StateError(f"state key {key!r}: a bare Union is not a type; write e.g. str | None")
    if inspect.isclass(t) or type(t).__name__ in ("_GenericAlias", "GenericAlias"):
        return
    raise StateError(f"state key {key!r}: {t!r} is not a type; use a class (str), a generic (list[str]) "
                     "or a union (str | None)")


def _is_list_type(t: Any) -> bool:
    return t is list or typing.get_origin(t) is list


def parse_type(text: str) -> Any:
    """A type written in a flow file: ``str``, ``list[str]``, ``int | None``, ``list[Message]``…"""
    if not isinstance(text, str) or not text.strip():
        raise StateError(f"{text!r} is not a type name")
    parts = [p.strip() for p in _split_top(text, "|")]
    if len(parts) > 1:
        out = parse_type(parts[0])
        for p in parts[1:]:
            out = out | parse_type(p)
        return out
    m = re.fullmatch(r"(list|set|frozenset|dict)\[(.+)\]", text.strip())
    if m:
        inner = [parse_type(p) for p in _split_top(m.group(2), ",")]
        if m.group(1) == "dict":
            return dict[inner[0], inner[1] if len(inner) > 1 else Any]
        return _TYPE_NAMES[m.group(1)][inner[0]]
    t = _TYPE_NAMES.get(text.strip())
    if t is None:
        raise StateError(f"unknown type {text!r}; use str, int, float, bool, dict, list, set, list[...] or a union "
                         "with |")
    return t


def _split_top(text: str, sep: str) -> list[str]:
    out, depth, cur = [], 0, ""
    for ch in text:
        if ch == "[":
            depth += 1
        elif ch == "]":
            depth -= 1
        if ch == sep and depth == 0:
            out.append(cur)
            cur = ""
        else:
            cur += ch
    out.append(cur)
    return out


def type_name(t: Any) -> str:
    if t is type(None):
        return "None"
    if isinstance(t, type) and typing.get_origin(t) is None:
        return t.__name__
    return str(t).replace("typing.", "").replace("core.model.conversation.", "")


# -- state ------------------------------------------------------------------------------------------

class State:
    """A run's state: a schema and the data written through its merge handlers (see the module docstring)."""

    def __init__(self, schema: Mapping[str, Mapping[str, Any]], data: dict[str, Any] | None = None):
        self.schema: dict[str, dict[str, Any]] = {}
        for key, spec in schema.items():
            if not isinstance(spec, Mapping) or "type" not in spec:
                raise StateError(f"state key {key!r} needs a 'type'")
            t = spec["type"]
            _check_type(key, t)
            handler = spec.get("handler")
            if handler is not None and not callable(handler):
                raise StateError(f"state key {key!r}: handler {handler!r} is not callable")
            if handler is None:
                handler = merge_lists if _is_list_type(t) else replace_values
            self.schema[key] = {"type": t, "handler": handler}
        if "messages" in self.schema:
            t = self.schema["messages"]["type"]
            args = typing.get_args(t)
            if not (_is_list_type(t) and args and isinstance(args[0], type) and issubclass(args[0], Message)):
                raise StateError("state key 'messages' must be a list of messages (list[Message]), "
                                 f"not {type_name(t)}")
        else:
            self.schema["messages"] = {"type": list[Message], "handler": merge_lists}
        # The caller's dict itself, as Haystack keeps it (``data or {}``): a change to either shows in the
        # other; an empty one is replaced by a new dict. Stored as given: handlers are not applied.
        self._data: dict[str, Any] = data or {}

    def set(self, key: str, value: Any, handler_override: Callable[[Any, Any], Any] | None = None) -> None:
        if key not in self.schema:
            raise StateError(f"state key {key!r} is not in the schema; declared keys: {', '.join(self.schema)}")
        handler = handler_override or self.schema[key]["handler"]
        self._data[key] = handler(self._data.get(key), value)

    def replace(self, key: str, value: Any) -> None:
        """Store ``value`` as the key's new value, whatever its merge handler (``replace_values``)."""
        self.set(key, value, handler_override=replace_values)

    def get(self, key: str, default: Any = None) -> Any:
        return copy.deepcopy(self._data.get(key, default))

    def has(self, key: str) -> bool:
        return key in self._data

    @property
    def data(self) -> dict[str, Any]:
        return self._data

    def snapshot(self) -> dict[str, Any]:
        """The state as JSON-friendly data: every key but ``messages`` (which the record counts)."""
        out = {}
        for key, value in self._data.items():
            if key == "messages":
                continue
            try:
                json.dumps(value)
            except (TypeError, ValueError):
                value = repr(value)  # a non-serialisable field is shown, not dropped from the record
            out[key] = copy.deepcopy(value)
        return out

    def to_dict(self) -> dict:
        """Schema (types and handlers by name) and data as JSON; a field that cannot be encoded is dropped by
        itself (Haystack's field-level fallback). Sets, frozensets and tuples keep their kind (see
        :func:`encode_value`), so :meth:`from_dict` gives the same state back."""
        data = {}
        for key, value in self._data.items():
            try:
                data[key] = encode_value(value)
            except TypeError:
                continue
        return {"schema": {k: {"type": type_name(v["type"]), "handler": handler_name(v["handler"])}
                           for k, v in self.schema.items()}, "data": data}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> "State":
        """The inverse of :meth:`to_dict`; handlers are found by name among :data:`HANDLERS`."""
        schema = {}
        for key, spec in (data.get("schema") or {}).items():
            handler = spec.get("handler")
            if handler is not None and handler not in HANDLERS:
                raise StateError(f"state key {key!r}: handler {handler!r} is unknown; expected one of "
                                 f"{', '.join(HANDLERS)}")
            schema[key] = {"type": parse_type(spec["type"]), "handler": HANDLERS.get(handler)}
        return cls(schema, {k: decode_value(v) for k, v in (data.get("data") or {}).items()})


#: The marker of an encoded set, frozenset, tuple or message (a one-key object: ``{"$set": [...]}``).
_KINDS = {"$set": set, "$frozenset": frozenset, "$tuple": tuple}


def encode_value(value: Any) -> Any:
    """A state value as JSON data: containers keep their kind, messages become :meth:`Message.to_dict` (``exchanged_only``);
    ``TypeError`` for anything else that JSON cannot hold."""
    if value is None or isinstance(value, (str, bool, int, float)):
        return value
    if isinstance(value, Message):
        return {"$message": value.to_dict(exchanged_only=True)}
    if isinstance(value, list):
        return [encode_value(v) for v in value]
    if isinstance(value, (set, frozenset)):
        items = [encode_value(v) for v in value]
        items.sort(key=lambda v: json.dumps(v, sort_keys=True))  # a set has no order: make the output stable
        return {"$frozenset" if isinstance(value, frozenset) else "$set": items}
    if isinstance(value, tuple):
        return {"$tuple": [encode_value(v) for v in value]}
    if isinstance(value, dict):
        if not all(isinstance(k, str) for k in value):
            raise TypeError("only text keys can be encoded")
        out = {k: encode_value(v) for k, v in value.items()}
        return {"$dict": out} if len(out) == 1 and next(iter(out)).startswith("$") else out
    raise TypeError(f"a {type(value).__name__} cannot be encoded")


def decode_value(value: Any) -> Any:
    """The inverse of :func:`encode_value`."""
    if isinstance(value, list):
        return [decode_value(v) for v in value]
    if not isinstance(value, dict):
        return value
    if len(value) == 1:
        (key, inner), = value.items()
        if key in _KINDS:
            return _KINDS[key](decode_value(v) for v in inner)
        if key == "$message":
            return Message.from_dict(inner)
        if key == "$dict":
            return {k: decode_value(v) for k, v in inner.items()}
    return {k: decode_value(v) for k, v in value.items()}


# -- tools ------------------------------------------------------------------------------------------

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
                raise ToolConfigError(f"tool {self.name}: inputs_from_state values must be parameter names, not "
                                      f"{param!r} (state key {state_key!r})")
            if param not in valid:
                raise ToolConfigError(f"tool {self.name}: inputs_from_state maps {state_key!r} to {param!r}, which "
                                      f"is not one of its parameters ({', '.join(sorted(valid)) or 'none'})")

    def llm_schema(self) -> dict:
        """The OpenAI tool schema; parameters filled from the state are not shown to the model."""
        mapped = set((self.inputs_from_state or {}).values())
        props = {k: v for k, v in (self.parameters.get("properties") or {}).items() if k not in mapped}
        required = [r for r in self.parameters.get("required") or [] if r not in mapped]
        return {"type": "function", "function": {"name": self.name, "description": self.description,
                                                 "parameters": {"type": "object", "properties": props,
                                                                "required": required}}}

    def with_mappings(self, inputs_from_state: Mapping[str, str] | None = None,
                      outputs_to_state: Mapping[str, Mapping[str, Any]] | None = None) -> "Tool":
        """The same tool with other mappings (``None`` keeps the tool's own)."""
        ins = self.inputs_from_state if inputs_from_state is None else inputs_from_state
        return Tool(self.name, self.description, self.parameters, self.function,
                    None if ins is None else dict(ins),
                    dict(self.outputs_to_state if outputs_to_state is None else outputs_to_state))

    def takes_state(self) -> list[str]:
        """The parameters annotated ``State`` (or ``State | None``): they receive the live state."""
        return [name for name, p in inspect.signature(self.function).parameters.items()
                if p.annotation in (State, "State", State | None, "State | None", typing.Optional[State])]


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

_BINARY = {ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul, ast.Div: operator.truediv,
           ast.FloorDiv: operator.floordiv, ast.Mod: operator.mod, ast.Pow: operator.pow}
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
        "calculator": Tool("calculator", "Evaluate an arithmetic expression such as 12*7 or (3+4)/2.",
                           {"type": "object", "properties": {"expression": text}, "required": ["expression"]},
                           calculate, outputs_to_state={"last_result": {"source": "result"}}),
        "note": Tool("note", "Save a short note for later in this run.",
                     {"type": "object", "properties": {"text": text}, "required": ["text"]},
                     save_note, outputs_to_state={"notes": {"source": "note"}}),
        "list_notes": Tool("list_notes", "List the notes saved so far in this run.",
                           {"type": "object", "properties": {"notes": {"type": "array", "items": text}}},
                           list_notes, inputs_from_state={"notes": "notes"}),
        "lookup": Tool("lookup", "Look up a key (a flight, an order, a policy) in the reference table.",
                       {"type": "object", "properties": {"key": text}, "required": ["key"]},
                       make_lookup(DEMO_LOOKUP if lookup_table is None else lookup_table),
                       outputs_to_state={"lookups": {}}),
    }


#: The state the demo tools write: notes (list merge), the last calculator result (replace),
#: every lookup result (list merge of whole result dicts).
DEMO_SCHEMA: dict[str, dict[str, Any]] = {"notes": {"type": list[str]}, "last_result": {"type": float | int | None},
                                          "lookups": {"type": list[dict]}}


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
    def step(self, messages: Sequence[Message], tools: Sequence[Tool], call_id: Callable[[], str]) -> PlannerReply:
        ...


_EXPRESSION = re.compile(r"[-+(]*\s*\d[\d.,]*(?:\s*(?:\*\*|//|[-+*/%^×÷x])\s*[-+(]*\s*\d[\d.,]*\)*)+\)*")
_MATH_CUE = re.compile(r"\b(?:what(?:'s| is)|calculate|compute|how much is|evaluate|solve)\b", re.I)
_NOTE = re.compile(r"\b(?:take a note|make a note|note(?: down)?)\s*(?::|that)\s*(.+?)\s*(?=$|[.;!?](?:\s|$)|"
                   r"(?:\band\s+)?(?:take a note|make a note|note|what is|what's|calculate|compute|look up|lookup|"
                   r"list my notes)\b)", re.I)
_LOOKUP = re.compile(r"\b(?:look up|lookup|find info(?:rmation)? (?:on|about))\s+(?:the\s+)?(.+?)\s*"
                     r"(?=$|[?!]|\.(?:\s|$)|\band\b)", re.I)
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
        after = list(messages[last_user + 1:]) if last_user is not None else []
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
        reply = self.client.complete_tools(self.model, [m.to_openai() for m in messages],
                                           [t.llm_schema() for t in tools], self.max_tokens)
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
        return {"step": self.step, "tool": self.tool, "call_id": self.call_id, "args": copy.deepcopy(self.args),
                "result": copy.deepcopy(self.result), "error": self.error, "state": copy.deepcopy(self.state),
                "messages": self.messages, "ran": self.ran}


@dataclass
class AgentResult:
    text: str
    messages: list[Message]        # the state's messages at the end: system, history, query, new ones
    new_messages: list[Message]    # what the run added after the query (model replies and tool results)
    steps: list[AgentStep]
    outputs: dict                  # public state keys, the run metadata and last_message
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


def check_schema(schema: Mapping[str, Any]) -> None:
    reserved = sorted(set(schema) & set(RESERVED_KEYS))
    if reserved:
        raise StateError(f"state key(s) {', '.join(reserved)} are reserved by the agent (run metadata or "
                         f"internal keys: {', '.join(RESERVED_KEYS)}); choose another name")


def run_agent(query: str, *, tools: Sequence[Tool], planner: Planner, schema: Mapping[str, Mapping] | None = None,
              system_prompt: str = "", history: Sequence[Message] = (), state_inputs: Mapping[str, Any] | None = None,
              max_agent_steps: int = DEFAULT_MAX_STEPS, exit_conditions: Sequence[str] = ("text",),
              ref_prefix: str = "agent", version: int = DEFAULT_HAYSTACK_VERSION,
              before_model: BeforeModel | None = None) -> AgentResult:
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
            asked = tuple(ToolCall(c.id, c.name, json.dumps(c.arguments, ensure_ascii=False))
                          for c in reply.tool_calls)
            append([Message("assistant", reply.text, TOOL_CALL, ref(), tool_calls=asked, usage=reported)])
        # A reply without tool calls that has text ends the run whatever exit_conditions says; so does
        # any reply when the agent has no tools. An empty reply without calls goes round again.
        if not tools or (not reply.tool_calls and reply.text):
            step_count += 1
            text, exit_reason = reply.text, "text"
            break
        results = _run_tools(reply.tool_calls, by_name, state, step_count + 1, version)
        before = len(state.data["messages"])
        append([Message("tool", step.error if step.error is not None else result_text(step.result, version),
                        TOOL_RESULT,
                        ref(), name=step.tool, tool_call_id=step.call_id) for step in results])
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
        outputs.update({"step_count": step_count, "token_usage": dict(usage), "tool_call_counts": dict(counts),
                        "exit_reason": exit_reason})
    outputs["last_message"] = messages[-1].to_dict(exchanged_only=True) if messages else None
    return AgentResult(text=text, messages=messages, new_messages=added, steps=steps, outputs=outputs,
                       exit_reason=exit_reason, step_count=step_count, tool_call_counts=counts, usage=usage,
                       notes=notes)


def _run_tools(requests: Sequence[ToolRequest], by_name: Mapping[str, Tool], state: State, step: int,
               version: int) -> list[AgentStep]:
    """One reply's tool calls, as Haystack's tool invoker runs them; the steps come back in the order of
    the result messages: calls to unknown tools first, then the others in call order."""
    unknown = [AgentStep(step, c.name, c.id, dict(c.arguments), None, unknown_tool_text(c.name, list(by_name)), {}, 0)
               for c in requests if c.name not in by_name]
    known = [c for c in requests if c.name in by_name]
    for s in unknown:
        s.state = state.snapshot()
    out: list[AgentStep | None] = [None] * len(known)
    ran = 0
    # 2.x's ToolInvoker prepares every call's arguments first and runs them all at once: a reader
    # never sees what a writer of the same reply wrote.
    batches = (schedule_calls([(by_name[c.name], c.arguments) for c in known]) if version >= 3
               else [list(range(len(known)))] if known else [])
    for batch in batches:
        # Every call of a batch starts from the state as it was before the batch.
        prepared = {i: prepare_args(by_name[known[i].name], known[i].arguments, state, version=version)
                    for i in batch}
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


# -- granularity ------------------------------------------------------------------------------------

def check_granularity(value: Any, where: str) -> str:
    """The granularity named by ``value``, case-insensitively (Dify's request spells the modes
    ``QUERY_ANSWER`` / ``ALL_MESSAGES``)."""
    if isinstance(value, str) and value.lower() in GRANULARITIES:
        return value.lower()
    if value not in GRANULARITIES:
        raise GranularityError(f"{where}: granularity {value!r} is unknown; expected query_answer or all_messages")
    return value


def resolve_granularity(request: str | None, flow: str | None) -> tuple[str, str]:
    """``(granularity, source)``: the request's value, else the flow's ``history.granularity``, else
    ``query_answer``; ``source`` is ``request``, ``flow`` or ``default``."""
    if request is not None:
        return check_granularity(request, "request"), FROM_REQUEST
    if flow is not None:
        return check_granularity(flow, "flow history"), FROM_FLOW
    return DEFAULT_GRANULARITY, FROM_DEFAULT


# -- the flow node ----------------------------------------------------------------------------------

@dataclass(frozen=True)
class AgentSettings:
    """A ``tool-agent`` node's settings (see :func:`agent_settings`)."""

    model: str
    system_prompt: str
    tools: tuple[Tool, ...]
    schema: dict
    memory: dict  # MemoryConfig fields for replaying earlier turns (granularity excluded)
    max_agent_steps: int
    exit_conditions: tuple[str, ...]
    memory_node: str | None = None
    haystack_version: int = DEFAULT_HAYSTACK_VERSION
    system_prompt_fill: str = "template"  # one of PROMPT_FILLS


#: How a ``tool-agent`` node's ``system_prompt`` becomes its system message (``system_prompt_fill``):
#: ``template`` renders it as a workflow template (``{{#node.var#}}``); ``none`` sends it as written, as a
#: Dify Agent app's function-calling runner sends its instruction; ``inputs`` replaces each start input's
#: ``{{name}}``, as that app's ReAct runner does (:func:`system_text`).
PROMPT_FILLS = ("template", "none", "inputs")


def system_text(settings: AgentSettings, pool: VariablePool, inputs: Mapping[str, Any]) -> str:
    """The system message an agent sends: its ``system_prompt`` filled as ``system_prompt_fill`` says.
    ``inputs`` is the start form's values as the run took them. For ``inputs`` this is Dify's
    ``CotAgentRunner._fill_in_inputs_from_external_data_tools``: every input in form order, its
    ``{{name}}`` replaced by ``str(value)`` — so an optional input not given and without a default
    reads ``None`` — and nothing else (a ``{{#…#}}`` stays as written)."""
    prompt = settings.system_prompt
    if not prompt or settings.system_prompt_fill == "none":
        return prompt
    if settings.system_prompt_fill == "inputs":
        for name, value in inputs.items():
            prompt = prompt.replace(f"{{{{{name}}}}}", str(value))
        return prompt
    return render(prompt, pool)


def template_selectors(settings: AgentSettings) -> list[tuple[str, ...]]:
    """The variables an agent's system prompt reads when rendered (none unless it is a template)."""
    return selectors_in(settings.system_prompt) if settings.system_prompt_fill == "template" else []


def agent_settings(node: "Node") -> AgentSettings:
    """Read a ``tool-agent`` node::

        - id: agent
          type: tool-agent
          model: memlens/demo
          system_prompt: You are a helpful agent.      # a template ({{#retrieve.text#}} works)
          system_prompt_fill: template                 # none: as written; inputs: {{name}} of start inputs
          tools: [calculator, note, list_notes, lookup]  # or {name, inputs_from_state, outputs_to_state}
          state_schema: {visits: {type: int, handler: add_numbers}}  # added to the demo tools' keys
          lookup_table: {flight AA100: on time}
          memory: {strategy: buffer}                   # how earlier turns are replayed; `off` for none
          max_agent_steps: 10
          exit_conditions: [text]
          haystack_version: 3                          # 2: the newest Haystack 2.x's rules
    """
    data = node.data
    model = data.get("model") or "memlens/demo"
    if isinstance(model, Mapping):
        model = litellm_model(str(model.get("provider") or ""), str(model.get("name") or "")) or "memlens/demo"
    if not isinstance(model, str):
        raise node_error(node, "'model' must be a model name such as memlens/demo or openai/gpt-4o-mini")
    prompt = data.get("system_prompt", "")
    if not isinstance(prompt, str):
        raise node_error(node, "'system_prompt' must be text")
    fill = data.get("system_prompt_fill", "template")
    if fill not in PROMPT_FILLS:
        raise node_error(node, f"'system_prompt_fill' must be one of {', '.join(PROMPT_FILLS)}")
    table = data.get("lookup_table")
    if table is not None and not isinstance(table, Mapping):
        raise node_error(node, "'lookup_table' must be a mapping of keys to values")
    available = demo_tools(table)
    raw_tools = data.get("tools", list(available))
    if not isinstance(raw_tools, list):
        raise node_error(node, "'tools' must be a list of tool names or {name, inputs_from_state, outputs_to_state}")
    schema: dict[str, dict[str, Any]] = {k: dict(v) for k, v in DEMO_SCHEMA.items()}
    raw_schema = data.get("state_schema") or {}
    if not isinstance(raw_schema, Mapping):
        raise node_error(node, "'state_schema' must map state keys to {type, handler}")
    for key, spec in raw_schema.items():
        if key in RESERVED_KEYS or key in NODE_OUTPUTS:
            raise node_error(node, f"state key {key!r} is reserved; choose another name")
        if not isinstance(spec, Mapping) or "type" not in spec:
            raise node_error(node, f"state key {key!r} needs {{type: ...}} (e.g. list[str], int, str | None)")
        try:
            t = parse_type(str(spec["type"]))
        except StateError as e:
            raise node_error(node, f"state key {key!r}: {e}") from None
        handler = spec.get("handler")
        if handler is not None and handler not in HANDLERS:
            raise node_error(node, f"state key {key!r}: handler {handler!r} is unknown; expected one of "
                                   f"{', '.join(HANDLERS)}")
        schema[str(key)] = {"type": t, "handler": HANDLERS[handler] if handler else None}
    try:
        State(schema)
    except StateError as e:
        raise node_error(node, str(e)) from None
    tools = []
    for item in raw_tools:
        spec = {"name": item} if isinstance(item, str) else item
        if not isinstance(spec, Mapping) or spec.get("name") not in available:
            name = spec.get("name") if isinstance(spec, Mapping) else spec
            raise node_error(node, f"unknown tool {name!r}; the demo tools are {', '.join(available)}")
        tool = available[spec["name"]]
        ins = spec.get("inputs_from_state")
        outs = spec.get("outputs_to_state")
        if ins is not None and not isinstance(ins, Mapping):
            raise node_error(node, f"tool {tool.name}: inputs_from_state must map state keys to parameter names")
        if outs is not None:
            if not isinstance(outs, Mapping) or not all(isinstance(v, Mapping) or v is None for v in outs.values()):
                raise node_error(node, f"tool {tool.name}: outputs_to_state must map state keys to "
                                       "{source, handler}")
            for v in outs.values():
                if (v or {}).get("handler") is not None and (v or {})["handler"] not in HANDLERS:
                    raise node_error(node, f"tool {tool.name}: handler {v['handler']!r} is unknown; expected one "
                                           f"of {', '.join(HANDLERS)}")
            outs = {k: {kk: (HANDLERS[vv] if kk == "handler" and vv is not None else vv)
                        for kk, vv in (v or {}).items()} for k, v in outs.items()}
        try:
            tool = tool.with_mappings(ins, outs)
        except ToolConfigError as e:
            raise node_error(node, str(e)) from None
        for key in list(tool.inputs_from_state or {}) + list(tool.outputs_to_state):
            if key not in schema and key != "messages":
                raise node_error(node, f"tool {tool.name} maps state key {key!r}, which the state schema does not "
                                       f"declare; add it to state_schema")
        tools.append(tool)
    memory = data.get("memory", {"strategy": AGENT_DEFAULT})
    if memory in (None, False, OFF, "none"):
        memory = {"strategy": OFF}
    if not isinstance(memory, Mapping):
        raise node_error(node, "'memory' must be {strategy: buffer|dify|window|…, window: N} or off")
    memory = dict(memory)
    if "granularity" in memory:
        raise node_error(node, "granularity is set on the flow (history: {granularity: …}) or on the request, "
                               "not on the node")
    memory.setdefault("strategy", AGENT_DEFAULT)
    from core.memory.replay import MemoryConfig

    try:
        MemoryConfig.from_dict({**memory, "model": memory.get("model", model)})
    except (ConfigError, TypeError) as e:
        raise node_error(node, f"memory: {e}") from None
    steps = data.get("max_agent_steps", DEFAULT_MAX_STEPS)
    if isinstance(steps, bool) or not isinstance(steps, int) or steps < 1:
        raise node_error(node, f"max_agent_steps {steps!r} must be a whole number, 1 or more")
    exits = data.get("exit_conditions", ["text"])
    if not isinstance(exits, list) or not exits or not all(isinstance(x, str) for x in exits):
        raise node_error(node, "exit_conditions must be a list such as [text] or [text, calculator]")
    unknown = [x for x in exits if x != "text" and x not in {t.name for t in tools}]
    if unknown:
        raise node_error(node, f"exit condition {unknown[0]!r} is neither 'text' nor one of the node's tools")
    memory_node = data.get("memory_node")
    if memory_node is not None and not isinstance(memory_node, str):
        raise node_error(node, "'memory_node' must be the id of a window-memory node")
    version = data.get("haystack_version", DEFAULT_HAYSTACK_VERSION)
    if isinstance(version, str) and version.strip().isdigit():
        version = int(version)
    if isinstance(version, bool) or version not in HAYSTACK_VERSIONS:
        raise node_error(node, f"haystack_version {version!r} is unknown; expected 3 (default) or 2")
    return AgentSettings(model=model, system_prompt=prompt, tools=tuple(tools), schema=schema, memory=memory,
                         max_agent_steps=steps, exit_conditions=tuple(exits), memory_node=memory_node,
                         haystack_version=version, system_prompt_fill=fill)


__all__ = ["State", "encode_value", "decode_value", "prepare_args", "call_tool", "merge_outputs", "result_text",
           "unknown_tool_text", "schedule_calls", "check_schema", "BeforeModel", "HAYSTACK_VERSIONS",
           "DEFAULT_HAYSTACK_VERSION", "INTERNAL_KEYS", "RUN_METADATA_KEYS", "merge_lists", "replace_values",
           "dedup_append", "add_numbers", "HANDLERS", "parse_type", "Tool", "invoke_tool", "calculate", "save_note",
           "list_notes", "make_lookup", "demo_tools", "DEMO_SCHEMA", "DEMO_LOOKUP", "ToolRequest", "PlannerReply",
           "Planner", "plan_tools", "DemoPlanner", "ModelPlanner", "planner_for", "AgentStep", "AgentResult",
           "run_agent", "GRANULARITIES", "DEFAULT_GRANULARITY", "FROM_REQUEST", "FROM_FLOW", "FROM_DEFAULT",
           "check_granularity", "resolve_granularity", "AgentSettings", "agent_settings", "RESERVED_KEYS"]
