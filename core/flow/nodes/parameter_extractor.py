"""The Parameter Extractor node (``parameter-extractor``): one model call turns a text into typed
parameters (a name, a number, a list of keywords, …) that later nodes read. With a ``memory`` block
the model also reads the conversation's history, which is how an extractor fills a slot the user
gave several turns ago, and how it loses it when the window is too small.

Dify's rule, as shipped (graphon ``ParameterExtractorNode``):

* The text is the value at ``query``; the ``instruction`` may hold variable templates, rendered
  first. Each parameter has a ``name``, a ``type`` (``string``, ``number``, ``boolean``,
  ``array[string]``, ``array[number]``, ``array[object]``, ``array[boolean]``; the older ``select``
  is a string limited to its ``options``, ``bool`` a boolean), a ``description`` and ``required``.
* Memory: the history as ``Human:`` / ``Assistant:`` lines in the prompt, with the Question
  Classifier's window rule (:class:`core.flow.nodes.text_memory.TextMemoryNode`). With token
  counting on, the history's budget is what the context leaves after ``max_tokens``, the prompt
  without history and 1,000 tokens more (``MemoryConfig.prompt_reserve``).
* The reply (:func:`read_reply`): the first JSON object found in it, trying each ``{`` or ``[`` in
  turn and taking the span up to its matching bracket — brackets inside JSON strings count too, so
  such a reply is not read, as in Dify. With none, every ``string``/``select`` parameter is ``""``,
  every ``number`` 0 and every ``boolean`` false (arrays are left out), and the reason says so.
  The result is then checked in order — as many keys as parameters, required ones present, each
  value of its type, a select value among its options — and the first failure is the reason
  (``__is_success`` 0); the values are kept either way. Last, each value is put into its type:
  a number from a string (``"3"`` → 3, ``"2.5"`` → 2.5), a boolean from a number, array items of
  the wrong type left out; anything else becomes the type's empty value.
* Outputs: each parameter, ``__is_success`` (1 or 0), ``__reason`` (``None`` on success) and
  ``__usage``. A failed model call fails the node.

Two differences, both said in the run's notes: Dify sends ``function_call`` mode as a tool call
(when the model supports tools); MemLens asks every model for the JSON in its reply, as Dify's
``prompt`` mode does. The history goes in the same way in both modes. The words around the history
are MemLens's own, not Dify's few-shot prompt, so the fixed part's token count is close to Dify's,
not equal to it; a type-check reason is worded by MemLens.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar, Mapping

from ..errors import node_error
from ..prompt import PromptFrame
from ..templates import VariablePool
from .llm import memory_settings, model_block
from .text_memory import TextMemoryNode, text_history_frame, text_memory_call

if TYPE_CHECKING:  # pragma: no cover
    from ..context import RunContext
    from ..graph import Node
    from ..records import NodeRun

#: The parameter types Dify accepts, by the name an export uses → the type the value is checked as.
PARAMETER_TYPES = {
    "string": "string",
    "select": "string",
    "number": "number",
    "boolean": "boolean",
    "bool": "boolean",
    "array[string]": "array[string]",
    "array[number]": "array[number]",
    "array[object]": "array[object]",
    "array[boolean]": "array[boolean]",
}
#: Output names of the node itself, which no parameter may take.
RESERVED = ("__reason", "__is_success")
#: The history's budget keeps this many tokens free besides the prompt (Dify's extractor, as shipped).
PROMPT_RESERVE = 1000
FUNCTION_CALL, PROMPT = "function_call", "prompt"
NO_JSON = "Failed to extract result from function call or text response, using empty result."
#: What the run's notes say of ``function_call`` mode.
FUNCTION_CALL_NOTE = (
    "function_call mode: Dify sends the parameters as a tool for models that take tools; MemLens "
    "asks for the JSON in the reply (the history goes in the same way)"
)


@dataclass(frozen=True)
class ExtractorParameter:
    name: str
    type: str  # one of PARAMETER_TYPES' values
    description: str
    required: bool
    options: tuple[str, ...] = ()

    def schema(self) -> dict:
        """The parameter's entry in the JSON schema the model is given."""
        out: dict[str, Any] = {"description": self.description}
        if self.type.startswith("array["):
            out["type"] = "array"
            out["items"] = {"type": self.type[len("array[") : -1]}
        else:
            out["type"] = self.type
        if self.options:
            out["enum"] = list(self.options)
        return out


@dataclass(frozen=True)
class ExtractorSettings(TextMemoryNode):
    parameters: tuple[ExtractorParameter, ...]
    reasoning_mode: str
    prompt_reserve: ClassVar[int | None] = PROMPT_RESERVE

    def schema(self) -> dict:
        """The parameters as one JSON schema object, as Dify builds it."""
        return {
            "type": "object",
            "properties": {p.name: p.schema() for p in self.parameters},
            "required": [p.name for p in self.parameters if p.required],
        }

    def frame(
        self, pool: VariablePool, query: str, instruction: str, counter, *, with_history: bool, **options: Any
    ) -> PromptFrame:
        return extractor_frame(
            self.schema(), instruction, query, counter, mode=self.mode, with_history=with_history, **options
        )


def _parameter(node: "Node", k: int, raw: Any) -> ExtractorParameter:
    if not isinstance(raw, Mapping):
        raise node_error(node, f"parameter {k} must be {{name, type, description, required}}")
    name = raw.get("name")
    if not isinstance(name, str) or not name:
        raise node_error(node, f"parameter {k} needs a name")
    if name in RESERVED:
        raise node_error(node, f"parameter {k} is named {name!r}: __reason and __is_success are the node's own outputs")
    kind = raw.get("type")
    if not isinstance(kind, str) or kind not in PARAMETER_TYPES:  # (a list is no type, and no dict key)
        raise node_error(node, f"parameter {name!r} has type {kind!r}; expected one of {', '.join(PARAMETER_TYPES)}")
    options = raw.get("options") or []
    if not isinstance(options, list) or not all(isinstance(o, str) for o in options):
        raise node_error(node, f"parameter {name!r}: 'options' must be a list of texts")
    description = raw.get("description") or ""
    if not isinstance(description, str):
        raise node_error(node, f"parameter {name!r}: 'description' must be text")
    return ExtractorParameter(name, PARAMETER_TYPES[kind], description, bool(raw.get("required")), tuple(options))


def extractor_settings(node: "Node") -> ExtractorSettings:
    """Parse a Parameter Extractor node's data; a malformed node is a :class:`FlowError` naming it."""
    data = node.data
    raw = data.get("parameters")
    if not isinstance(raw, list) or not raw:
        raise node_error(node, "'parameters' must be a list of at least one {name, type, description, required}")
    parameters = tuple(_parameter(node, k, p) for k, p in enumerate(raw, start=1))
    names = [p.name for p in parameters]
    twice = sorted({n for n in names if names.count(n) > 1})
    if twice:
        raise node_error(node, f"parameter names must differ; used more than once: {', '.join(map(repr, twice))}")
    selector = data.get("query") or []
    if not isinstance(selector, list) or not all(isinstance(x, str) for x in selector):
        raise node_error(node, "'query' must be a selector such as ['sys', 'query']")
    instruction = data.get("instruction") or ""
    if not isinstance(instruction, str):
        raise node_error(node, "'instruction' must be text")
    mode = data.get("reasoning_mode") or FUNCTION_CALL
    if mode not in (FUNCTION_CALL, PROMPT):
        raise node_error(node, f"reasoning_mode {mode!r} is unknown; expected function_call or prompt")
    return ExtractorSettings(model_block(node), memory_settings(node), tuple(selector), instruction, parameters, mode)


#: The line of the prompt that carries the parameters' schema (the demo model reads it).
SCHEMA_LEAD = "Parameters as a JSON schema: "


def extractor_frame(
    schema: dict,
    instruction: str,
    query: str,
    counter,
    *,
    mode: str,
    with_history: bool,
    file_upload: bool = False,
    vision: bool = False,
) -> PromptFrame:
    """What the node sends besides its history (:func:`text_history_frame`): the parameters' schema
    and the instruction; a completion model's text ends with the text to read."""
    body = [
        "Extract the parameters below from the user's text (the earlier conversation may hold some of them).",
        SCHEMA_LEAD + json.dumps(schema, ensure_ascii=False),
    ]
    if instruction:
        body += ["Instructions:", instruction]
    body += ["Reply with one JSON object holding a value for every parameter, and nothing else."]
    return text_history_frame(
        body,
        query,
        counter,
        mode=mode,
        with_history=with_history,
        query_label="Text",
        file_upload=file_upload,
        vision=vision,
    )


_OPEN = "{["
_PAIRS = {"}": "{", "]": "["}  # closing bracket → the opening one it closes


def _matches(text: str) -> dict[int, int]:
    """Each opening bracket → the position of its closing one, when a scan from it (as Dify's
    ``extract_json`` scans, brackets only) closes it before any bracket that does not fit. One pass:
    a closing bracket that does not fit the innermost open one ends every scan still open."""
    out: dict[int, int] = {}
    stack: list[int] = []
    for i, c in enumerate(text):
        if c in _OPEN:
            stack.append(i)
        elif c in _PAIRS:
            if stack and text[stack[-1]] == _PAIRS[c]:
                out[stack.pop()] = i
            else:
                stack.clear()
    return out


def first_object(text: str) -> dict | None:
    """The first JSON object Dify reads in a reply (``None``: none)."""
    ends = _matches(text)
    for start in sorted(ends):
        try:
            found = json.loads(text[start : ends[start] + 1])
        except (ValueError, RecursionError):
            continue
        if isinstance(found, dict):
            return found
    return None


def _type_of(value: Any) -> str:
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, (int, float)):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "array"
    if isinstance(value, dict):
        return "object"
    return "nothing"  # JSON's null: a parsed reply holds nothing else


def _fits(kind: str, value: Any) -> bool:
    """Dify's type check (``SegmentType.is_valid``, every array item checked). A boolean passes as a number."""
    if kind.startswith("array["):
        return isinstance(value, list) and all(_fits(kind[len("array[") : -1], item) for item in value)
    if kind == "boolean":
        return isinstance(value, bool)
    if kind == "number":
        return isinstance(value, (int, float))
    if kind == "object":
        return isinstance(value, dict)
    return isinstance(value, str)


def check(parameters: tuple[ExtractorParameter, ...], result: dict) -> str | None:
    """The first way ``result`` fails Dify's checks, as its reason; ``None`` when it passes."""
    if len(parameters) != len(result):
        return "Invalid number of parameters"
    for p in parameters:
        if p.required and p.name not in result:
            return f"Parameter {p.name} is required"
        value = result.get(p.name)
        if not _fits(p.type, value):
            return f"Invalid value for parameter {p.name}: expected {p.type}, got {_type_of(value)} ({value!r})"
        if p.type == "string" and p.options and value not in p.options:
            return f"Invalid `select` value for parameter {p.name}"
    return None


_MISSING = object()


def _number(value: Any) -> Any:
    if isinstance(value, bool):
        return int(value)
    if isinstance(value, (int, float)):
        return value
    if isinstance(value, str):
        try:
            return float(value) if "." in value else int(value)
        except ValueError:
            return _MISSING
    return _MISSING


def _as(kind: str, value: Any, *, item: bool = False) -> Any:
    """``value`` put into ``kind`` as Dify's transform does, or _MISSING. A boolean takes a number
    too, but an array's boolean item only a boolean."""
    if kind == "number":
        return _number(value)
    if kind == "boolean":
        if isinstance(value, bool) or (isinstance(value, int) and not item):
            return bool(value)
        return _MISSING
    if kind == "object":
        return value if isinstance(value, dict) else _MISSING
    return value if isinstance(value, str) else _MISSING


def _empty(kind: str) -> Any:
    """The empty value of a type that is not an array (an array's is ``[]``)."""
    return {"number": 0, "boolean": False}.get(kind, "")


def transform(parameters: tuple[ExtractorParameter, ...], result: dict) -> dict:
    """Every parameter's output value: ``result``'s value put into its type, else the type's empty value."""
    out = {}
    for p in parameters:
        value = result.get(p.name)  # a missing value reads as null, which no type takes
        if p.type.startswith("array["):
            element = p.type[len("array[") : -1]
            kept = [_as(element, v, item=True) for v in value] if isinstance(value, list) else []
            out[p.name] = [v for v in kept if v is not _MISSING]
        else:
            value = _as(p.type, value)
            out[p.name] = _empty(p.type) if value is _MISSING else value
    return out


def read_reply(reply: str, parameters: tuple[ExtractorParameter, ...]) -> tuple[dict, str | None]:
    """The parameter values a reply gives and the reason it is not a success (``None``: success)."""
    result = first_object(reply)
    reason = None
    if result is None:
        result = {p.name: _empty(p.type) for p in parameters if not p.type.startswith("array[")}
        reason = NO_JSON
    reason = check(parameters, result) or reason
    return transform(parameters, result), reason


def extracted(outputs: Mapping[str, Any]) -> str:
    """A run's outputs in one line: ``name = value`` per parameter (values as JSON), and the reason
    when the run is not a success."""
    values = ", ".join(
        f"{k} = {json.dumps(v, ensure_ascii=False)}" for k, v in outputs.items() if k not in (*RESERVED, "__usage")
    )
    reason = outputs.get("__reason")
    return values + (f" (not a success: {reason})" if reason else "")


def run_parameter_extractor(node: Node, ctx: RunContext, run: NodeRun) -> None:
    """The node's run: its memory's history as text in its prompt, one model call, and the parameters read
    from the reply, typed."""
    settings = extractor_settings(node)
    if settings.reasoning_mode == FUNCTION_CALL:
        run.notes.append(FUNCTION_CALL_NOTE)
    reply = text_memory_call(node, settings, ctx, run)
    values, reason = read_reply(reply.text, settings.parameters)
    if reason:
        run.notes.append(f"not a success: {reason}")
    run.outputs = {"__is_success": 0 if reason else 1, "__reason": reason, "__usage": reply.usage, **values}
    return None


__all__ = [
    "extracted",
    "ExtractorParameter",
    "ExtractorSettings",
    "PARAMETER_TYPES",
    "PROMPT_RESERVE",
    "SCHEMA_LEAD",
    "NO_JSON",
    "FUNCTION_CALL_NOTE",
    "extractor_settings",
    "extractor_frame",
    "first_object",
    "check",
    "transform",
    "read_reply",
    "run_parameter_extractor",
]
