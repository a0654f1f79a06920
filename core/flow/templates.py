"""Dify template rendering and the variable pool a flow run reads from (spec/dify-memory.md §2.4–§2.6).

A template holds selectors ``{{#node.field#}}`` — ``{{#sys.query#}}``, ``{{#sys.dialogue_count#}}``,
``{{#conversation.x#}}``, ``{{#<node id>.text#}}`` — which are resolved against the pool the way
Dify's ``VariablePool.convert_template`` does it:

* a selector needs at least one dot (``{{#histories#}}`` is left as it is);
* a selector the pool does not hold renders as its bare text (``{{#llm.text#}}`` on a flow where
  ``llm`` has not run becomes ``llm.text``) — Dify's own behaviour, kept because it is visible in
  real prompts;
* ``{{#context#}}`` is not a selector: the LLM node replaces it with the retrieved context before
  rendering (:func:`render` does that when given ``context``).

Values become text as follows: strings as they are, numbers with ``str``, booleans as
``true``/``false``, objects and arrays as JSON (non-ASCII kept), a NONE value as empty text, and a
file list (``sys.files``) as empty text, as Dify renders file arrays.

Outputs of a node that ran as a pass-through (a node type MemLens does not emulate) are NONE:
known to exist but empty, so templates render them as empty text rather than as their selector.
"""

from __future__ import annotations

import json
import re
from typing import Any, Iterable, Mapping, Sequence

from .errors import NodeFailed

#: Dify's selector pattern: a node id, then 1..10 dotted names.
SELECTOR_PATTERN = re.compile(r"\{\{#([a-zA-Z0-9_]{1,50}(?:\.[a-zA-Z_][a-zA-Z0-9_]{0,29}){1,10})#\}\}")
CONTEXT_PLACEHOLDER = "{{#context#}}"


class _Sentinel:
    __slots__ = ("name",)

    def __init__(self, name: str):
        self.name = name

    def __repr__(self) -> str:
        return self.name

    def __bool__(self) -> bool:
        return False


#: The pool does not hold the selector at all.
MISSING: Any = _Sentinel("MISSING")
#: The pool holds the selector but its value is empty/unknown (Dify's NONE segment).
NONE: Any = _Sentinel("NONE")


class FileList(list):
    """A list of files (``sys.files``); renders as empty text like Dify's file arrays."""


def value_text(value: Any) -> str:
    """The text a value contributes to a rendered template."""
    if value is None or value is NONE or value is MISSING or isinstance(value, FileList):
        return ""
    if isinstance(value, str):
        return value
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return str(value)
    return json.dumps(value, ensure_ascii=False)


class VariablePool:
    """Everything a node can read during one turn: system, conversation, environment and node outputs.

    ``conversation`` is the live mapping of conversation-variable values for this run (the runtime
    replaces it as assigners write). Node outputs are added as nodes finish.
    """

    def __init__(
        self,
        system: Mapping[str, Any] | None = None,
        conversation: Mapping[str, Any] | None = None,
        environment: Mapping[str, Any] | None = None,
    ):
        self.system: dict[str, Any] = dict(system or {})
        self.conversation: dict[str, Any] = dict(conversation or {})
        self.environment: dict[str, Any] = dict(environment or {})
        self.outputs: dict[str, dict[str, Any]] = {}
        self.pass_through: set[str] = set()

    def add_outputs(self, node_id: str, outputs: Mapping[str, Any]) -> None:
        self.outputs[node_id] = dict(outputs)

    def mark_pass_through(self, node_id: str) -> None:
        self.pass_through.add(node_id)
        self.outputs.setdefault(node_id, {})

    def get(self, selector: Sequence[str]) -> Any:
        """The value at ``selector``; :data:`MISSING` if absent; :data:`NONE` for a pass-through node's output."""
        if (
            not isinstance(selector, (list, tuple))
            or len(selector) < 2
            or not all(isinstance(part, str) for part in selector)
        ):
            return MISSING  # a selector of anything but names (a malformed export) names no variable
        head, name, rest = selector[0], selector[1], list(selector[2:])
        if head == "sys":
            scope: Mapping[str, Any] | None = self.system
        elif head == "conversation":
            scope = self.conversation
        elif head == "env":
            scope = self.environment
        elif head == "userinput":
            # Newer Dify exports address the chat input as ``userinput.query`` / ``userinput.files``.
            scope = self.system
        else:
            scope = self.outputs.get(head)
            if scope is None:
                return MISSING
            if name not in scope and name.startswith("sys.") and name[4:] in self.system:
                # Older exports read system variables through the start node: ``[start id, "sys.query"]``.
                scope, name = self.system, name[4:]
            elif head in self.pass_through and name not in scope:
                return NONE
        if name not in scope:
            return MISSING
        value = scope[name]
        for key in rest:  # object fields: {{#node.obj.key#}}
            if isinstance(value, Mapping) and key in value:
                value = value[key]
            else:
                return MISSING
        return value


def selectors_in(template: str) -> list[tuple[str, ...]]:
    """Every selector a template refers to, in order of appearance."""
    return [tuple(m.group(1).split(".")) for m in SELECTOR_PATTERN.finditer(template or "")]


def refers_to(template: str, head: str) -> bool:
    """Whether a template reads any selector under ``head`` (``conversation``, ``sys`` or a node id)."""
    return any(s[0] == head for s in selectors_in(template))


def render(template: str, pool: VariablePool, *, context: str | None = None) -> str:
    """Render a basic (non-Jinja) Dify template.

    ``context`` — when given, ``{{#context#}}`` is replaced by it first (the LLM node's retrieved
    context; pass ``""`` to remove the placeholder, as Dify does for the memory query template).
    """
    text = template or ""
    if context is not None and CONTEXT_PLACEHOLDER in text:
        text = text.replace(CONTEXT_PLACEHOLDER, context)
    parts = SELECTOR_PATTERN.split(text)
    out: list[str] = []
    # re.split with one group alternates literal text and captured selectors.
    for i, part in enumerate(parts):
        if not part:
            continue
        if i % 2 == 0:
            out.append(part)
            continue
        value = pool.get(part.split("."))
        out.append(part if value is MISSING else value_text(value))
    return "".join(out)


#: A slot of a basic Chatbot's pre-prompt (Dify's PromptTemplateParser, without selectors): an
#: input's name, or one of the three special slots, which a chat model's system message leaves as written.
SLOT_PATTERN = re.compile(r"\{\{([a-zA-Z_][a-zA-Z0-9_]{0,29}|#histories#|#query#|#context#)\}\}")
#: What PromptTemplateParser strips from a whole prompt: a model's special tokens.
SPECIAL_TOKENS = re.compile(r"<\|.*?\|>")


def render_slots(
    template: str, pool: VariablePool, node: str = "start", *, expert: bool = False, context: str | None = None
) -> str:
    """Render a basic Chatbot's prompt text as Dify's PromptTemplateParser does: each ``{{name}}``
    slot of an input of ``node`` holds its value, any slot in a text value is unwrapped to
    ``{name}``, every other slot stays as written, and ``<|…|>`` tokens are stripped from the result.

    A pre-prompt (SimplePromptTransform) has every value made text first (``str``: a missing
    optional input with no default reads ``None``). An ``expert``-mode message
    (AdvancedPromptTransform) takes the values as they are: a missing one (``None``) fills its slot
    with nothing, and any other value that is not text fails the call, as the parser's ``re.sub``
    does in Dify; its ``{{#context#}}`` holds ``context`` (nothing without one)."""

    def fill(m: re.Match) -> str:
        key = m.group(1)
        if expert and key == CONTEXT_SLOT:
            return context or ""
        value = pool.get([node, key])
        if value is MISSING:
            return m.group(0)
        if isinstance(value, str):
            return SLOT_PATTERN.sub(r"{\1}", value)
        if not expert:
            return str(value)
        if value is None:
            return ""
        raise NodeFailed(
            f"expected str instance, {type(value).__name__} found: input {key!r} fills a slot of the "
            f"expert-mode prompt, which Dify renders from text inputs only"
        )

    return SPECIAL_TOKENS.sub("", SLOT_PATTERN.sub(fill, template))


def render_introduction(template: str, inputs: Mapping[str, Any]) -> str:
    """A conversation's introduction as Dify writes it when the conversation starts: the app's
    opening statement with each ``{{name}}`` slot of a start input filled from ``inputs`` (a text
    value's own slots unwrapped to ``{name}``, any other value as its text), every other slot as
    written, and ``<|…|>`` tokens stripped (PromptTemplateParser)."""

    def fill(m: re.Match) -> str:
        value = inputs.get(m.group(1))
        if value is None:
            return m.group(0)
        return SLOT_PATTERN.sub(r"{\1}", value) if isinstance(value, str) else value_text(value)

    return SPECIAL_TOKENS.sub("", SLOT_PATTERN.sub(fill, template or ""))


#: The edition of a prompt message written as a basic Chatbot's pre-prompt (rendered by :func:`render_slots`).
SIMPLE = "simple"
#: The edition of a basic Chatbot's expert-mode prompt message (:func:`render_slots` with ``expert``).
EXPERT = "expert"
#: The slot an expert-mode message's retrieved context goes in.
CONTEXT_SLOT = "#context#"


def render_message(text: str, edition: str, pool: VariablePool, *, context: str | None = None) -> str:
    """A prompt message's text rendered by its edition's rule, but Jinja2's (which needs the node's
    variables): a basic Chatbot's pre-prompt or expert-mode message by :func:`render_slots`, else
    :func:`render`."""
    if edition == SIMPLE:
        return render_slots(text, pool)
    if edition == EXPERT:
        return render_slots(text, pool, expert=True, context=context)
    return render(text, pool, context=context)


def render_jinja(template: str, variables: Iterable[Mapping[str, Any]], pool: VariablePool) -> str:
    """Render a Jinja2-edition prompt with its ``jinja2_variables`` (``{variable, value_selector}``)."""
    from jinja2.sandbox import SandboxedEnvironment

    values: dict[str, Any] = {}
    for var in variables or ():
        name = var.get("variable")
        selector = var.get("value_selector") or []
        if not name:
            continue
        value = pool.get(selector)
        values[name] = None if value is MISSING or value is NONE else value
    return SandboxedEnvironment().from_string(template or "").render(**values)


__all__ = [
    "SELECTOR_PATTERN",
    "SLOT_PATTERN",
    "CONTEXT_PLACEHOLDER",
    "MISSING",
    "NONE",
    "FileList",
    "VariablePool",
    "SIMPLE",
    "render",
    "render_jinja",
    "render_message",
    "render_slots",
    "selectors_in",
    "refers_to",
    "value_text",
]
