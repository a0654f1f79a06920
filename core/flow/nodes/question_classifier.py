"""The Question Classifier node (``question-classifier``): one model call sorts the query into one of
the node's classes, and the flow goes on down that class's branch. With a ``memory`` block the
model also reads the conversation's history, as Dify's memory gives it.

Dify's rule, as shipped (graphon ``QuestionClassifierNode``):

* The query is the value at ``query_variable_selector``. The instruction and the class names may
  hold variable templates; they are rendered first.
* Memory is the LLM node's (``TokenBufferMemory``: the thread, the row window, token pruning when
  token counting is on), with one difference: the row limit is the window's ``size`` whether the
  window is enabled or not (the LLM node reads the size only when it is enabled); without a size,
  500 rows. The documented behaviour, a window that is off keeping every turn up to 500, is the
  ``documented`` fidelity (:meth:`core.flow.nodes.text_memory.TextMemoryNode.window`). The budget is what the model's
  context leaves after ``max_tokens`` and the prompt without history (2,000 tokens when the
  context size is unknown), as for the LLM node.
* The history goes in as text, ``Human: …`` / ``Assistant: …`` lines (``get_history_prompt_text``),
  inside the prompt, not as messages.
* The reply must hold a JSON object (:func:`read_reply`). Without one the node fails. A
  ``category_id`` that is one of the classes picks that class; anything else picks the first.
  Outputs: ``class_name``, ``class_label`` (the class's label, else ``CLASS n``), ``class_id`` and
  ``usage``. The branch taken is the class id.

The words around the history are MemLens's own (:func:`classifier_frame`), not Dify's few-shot
prompt. So the fixed part's token count is close to Dify's, not equal to it. Which turns the
history keeps does not depend on it while token counting is off, as Dify ships.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Mapping

from ..errors import NodeFailed, node_error
from ..prompt import PromptFrame
from ..templates import VariablePool, render
from .llm import memory_settings, model_block
from .text_memory import TextMemoryNode, text_history_frame, text_memory_call

if TYPE_CHECKING:  # pragma: no cover
    from ..context import RunContext
    from ..graph import Node
    from ..records import NodeRun


@dataclass(frozen=True)
class ClassifierClass:
    id: str
    name: str  # may hold variable templates, rendered at run time
    label: str  # the class's label; ``CLASS n`` (1-based) when it has none, as Dify names it


@dataclass(frozen=True)
class ClassifierSettings(TextMemoryNode):
    classes: tuple[ClassifierClass, ...]

    def frame(
        self, pool: VariablePool, query: str, instruction: str, counter, *, with_history: bool, **options: Any
    ) -> PromptFrame:
        return classifier_frame(
            categories(self, pool), instruction, query, counter, mode=self.mode, with_history=with_history, **options
        )


def classifier_settings(node: "Node") -> ClassifierSettings:
    """Parse a Question Classifier node's data; a malformed node is a :class:`FlowError` naming it."""
    data = node.data
    raw = data.get("classes")
    if not isinstance(raw, list) or not raw:
        raise node_error(node, "'classes' must be a list of at least one {id, name} class")
    classes = []
    for k, c in enumerate(raw, start=1):
        if not isinstance(c, Mapping) or c.get("id") in (None, "") or not isinstance(c.get("name", ""), str):
            raise node_error(node, f"class {k} needs an 'id' and a 'name'")
        label = c.get("label")
        classes.append(
            ClassifierClass(
                str(c["id"]), c.get("name") or "", label if isinstance(label, str) and label else f"CLASS {k}"
            )
        )
    selector = data.get("query_variable_selector") or []
    if not isinstance(selector, list) or not all(isinstance(x, str) for x in selector):
        raise node_error(node, "'query_variable_selector' must be a selector such as ['sys', 'query']")
    instruction = data.get("instruction") or ""
    if not isinstance(instruction, str):
        raise node_error(node, "'instruction' must be text")
    return ClassifierSettings(model_block(node), memory_settings(node), tuple(selector), instruction, tuple(classes))


def classifier_frame(
    categories: list[dict],
    instruction: str,
    query: str,
    counter,
    *,
    mode: str,
    with_history: bool,
    file_upload: bool = False,
    vision: bool = False,
) -> PromptFrame:
    """What the node sends besides its history (:func:`text_history_frame`): the categories as JSON
    and the instruction; a completion model's text ends with the question. ``categories``:
    ``{category_id, category_name}`` per class, names rendered."""
    body = [
        "Sort the user's latest question into exactly one of these categories.",
        "Categories: " + json.dumps(categories, ensure_ascii=False),
    ]
    if instruction:
        body += ["Instructions for sorting:", instruction]
    body += [
        "Reply with one of: " + ", ".join(c["category_name"] for c in categories),
        'Give the answer as JSON only: {"category_id": "…", "category_name": "…"}',
    ]
    return text_history_frame(
        body,
        query,
        counter,
        mode=mode,
        with_history=with_history,
        query_label="Question",
        file_upload=file_upload,
        vision=vision,
    )


_THINK = re.compile(r"<think[^>]*>[\s\S]*?</think>", re.I)
_STARTS = ("```json", "```", "``", "`", "{", "[")
_ENDS = ("```", "``", "`", "}", "]")


def _json_block(text: str) -> Any:
    """The JSON Dify's parser finds in a reply: it looks for the first of its start markers that occurs
    at all (in this order, not by position), then from there for the last of its end markers. A
    bracket belongs to the JSON; a backtick fence does not."""
    text = text.strip()
    start = next(
        (at + (0 if marker in ("{", "[") else len(marker)) for marker in _STARTS if (at := text.find(marker)) >= 0),
        None,
    )
    end = (
        None
        if start is None
        else next(
            (at + (1 if marker in ("}", "]") else 0) for marker in _ENDS if (at := text.rfind(marker, start)) != -1),
            None,
        )
    )
    if end is None or start >= end:
        raise NodeFailed("the classifier's reply holds no JSON block, so the node fails")
    try:
        return json.loads(text[start:end].strip())
    except json.JSONDecodeError as e:
        raise NodeFailed(f"the classifier's reply is not valid JSON ({e}), so the node fails") from None


def read_reply(reply: str, class_ids: list[str]) -> tuple[int, str | None]:
    """The class a reply picks, as an index into ``class_ids``, and a note when it fell back to the
    first class. ``<think>`` blocks are left out first. Raises :class:`NodeFailed` (Dify fails the
    node) when the reply holds no JSON object, or a list that is not one object."""
    found = _json_block(_THINK.sub("", reply))
    if isinstance(found, list):
        if len(found) != 1 or not isinstance(found[0], dict):
            raise NodeFailed("the classifier's reply is a JSON list, not one object, so the node fails")
        found = found[0]
    if not isinstance(found, dict):
        raise NodeFailed("the classifier's reply is JSON but not an object, so the node fails")
    if "category_id" not in found or "category_name" not in found:
        return 0, "the reply's JSON has no category_id and category_name: Dify takes the first class"
    picked = found["category_id"]
    if isinstance(picked, str) and picked in class_ids:
        return class_ids.index(picked), None
    return 0, f"the reply's category_id {picked!r} is not one of the classes: Dify takes the first class"


def categories(settings: ClassifierSettings, pool: VariablePool) -> list[dict]:
    """A Question Classifier's classes as its prompt lists them: ``{category_id, category_name}``, names rendered."""
    return [{"category_id": c.id, "category_name": render(c.name, pool)} for c in settings.classes]


def run_question_classifier(node: Node, ctx: RunContext, run: NodeRun) -> str:
    """The node's run: its memory's history as text in its prompt, one model call, and the branch of the
    class the reply picks."""
    settings = classifier_settings(node)
    reply = text_memory_call(node, settings, ctx, run)
    listed = categories(settings, ctx.pool)
    index, note = read_reply(reply.text, [c["category_id"] for c in listed])  # no JSON: the node fails
    if note:
        run.notes.append(note)
    chosen = settings.classes[index]
    run.outputs = {
        "class_name": listed[index]["category_name"],
        "class_label": chosen.label,
        "class_id": chosen.id,
        "usage": reply.usage,
    }
    return chosen.id


__all__ = [
    "ClassifierClass",
    "ClassifierSettings",
    "categories",
    "classifier_frame",
    "classifier_settings",
    "read_reply",
    "run_question_classifier",
]
