"""A Dify basic Chatbot export (``app.mode: chat``) read as the one-LLM-node Chatflow Dify runs.

A basic Chatbot has no graph: its ``model_config`` holds a model, a pre-prompt with ``{{name}}``
slots for the user's inputs, the inputs' form and the app's features. Dify builds its prompt for a
chat model in ``SimplePromptTransform`` (``api/core/prompt/simple_prompt_transform.py``):

* a system message of the pre-prompt and a newline, the inputs in its slots (none without a
  pre-prompt); a slot whose name is not an input stays as written;
* the history: ``TokenBufferMemory`` with no window, so the newest 500 message rows (a basic
  Chatbot has no window setting, Dify issue #8526); with plugin token counting on, pruned to
  ``context − max_tokens − count([system message])`` (``prompt_transform.py``): the query is
  appended after the history, so the budget does not subtract it
  (``MemoryConfig.query_after_budget``);
* the query as the user's message.

That is an LLM node whose template is the system message, rendered as Dify renders a pre-prompt
(edition ``simple``: :func:`core.flow.templates.render_slots`), with memory on and its window
switched off — the LLM node's memory adds the query after the history (with no query template,
the query as it is). Its node data carries ``basic_chat: true``, which gives it the budget above
and no filter: Dify sends what the transform builds, so a failed turn's empty answer stays in the
history (``MemoryConfig.sends_empty``; a Chatflow's LLM node drops it) and the query is not read
as a template.

In expert mode (``prompt_type: advanced``) Dify's ``AppRunner.organize_prompt_messages`` hands the
``chat_prompt_config`` messages to ``AdvancedPromptTransform`` with the same memory (no window, no
query template): each message rendered by the prompt parser without making the values text
(edition ``expert``), an empty system message left out, then the history and the query, with the
same budget. Completion models, whose history is text in Dify's own template, are refused with a
line saying so.
"""

from __future__ import annotations

import copy
from typing import Any, Mapping

from core.limits import DIFY_ROW_CAP

from .errors import FlowError
from .templates import EXPERT, SIMPLE

#: The app mode of a basic Chatbot export.
BASIC_CHAT = "chat"
#: The LLM node's data key that marks it as a basic Chatbot's call (its budget rule).
BASIC_CHAT_KEY = "basic_chat"
#: The ``model_config`` keys that are the app's features, served by ``GET /v1/parameters``.
_FEATURES = (
    "opening_statement",
    "suggested_questions",
    "suggested_questions_after_answer",
    "speech_to_text",
    "text_to_speech",
    "retriever_resource",
    "annotation_reply",
    "more_like_this",
    "sensitive_word_avoidance",
    "file_upload",
)
#: The start form's field types (Dify's ``user_input_form`` keys).
_FORM_TYPES = ("text-input", "paragraph", "select", "number", "checkbox", "file", "file-list", "json_object")
_WORKFLOW = "switch the app to workflow orchestration in Dify (its menu) and export that"


def read_basic_chat(data: Mapping[str, Any], name: str) -> dict[str, Any]:
    """The parts of a :class:`core.flow.graph.Flow` a basic Chatbot export makes: ``nodes`` (raw node
    data by id), ``edges``, ``features`` and ``warnings``; a :class:`FlowError` when it cannot be run."""
    config = data.get("model_config")
    if not isinstance(config, Mapping):
        raise FlowError(f"{name}: a basic Chatbot export (app.mode chat) needs a 'model_config' mapping")
    prompt_type = config.get("prompt_type") or "simple"
    if prompt_type not in ("simple", "advanced"):
        raise FlowError(
            f"{name}: 'model_config.prompt_type' must be simple or advanced (expert mode), not {prompt_type!r}"
        )
    model = config.get("model")
    if not isinstance(model, Mapping) or not model.get("name"):
        raise FlowError(f"{name}: 'model_config.model' must name the Chatbot's model (provider, name, mode)")
    if (model.get("mode") or "chat") != "chat":
        raise FlowError(
            f"{name}: this Chatbot's model is a completion model, whose history Dify writes into its "
            f"own prompt template, which MemLens does not emulate; {_WORKFLOW}"
        )
    variables, warnings = read_form(config.get("user_input_form"), name)
    if prompt_type == "advanced":
        template, layout = _expert_prompt(config, name), "its prompt messages"
    else:
        template, layout = _pre_prompt(config, name), "the pre-prompt as the system message"
    upload = config.get("file_upload")
    llm = {
        "type": "llm",
        "title": "Chatbot",
        BASIC_CHAT_KEY: True,
        "model": {
            "provider": str(model.get("provider") or ""),
            "name": str(model["name"]),
            "mode": "chat",
            "completion_params": copy.deepcopy(dict(model.get("completion_params") or {})),
        },
        # Rendered as Dify renders a basic Chatbot's prompt (its {{name}} slots), not as a workflow template.
        "prompt_template": template,
        "memory": {"window": {"enabled": False}},  # the query template left unset: the query itself
        "vision": {"enabled": uploads_images(upload)},
    }
    nodes = {
        "start": {"type": "start", "title": "Start", "variables": variables},
        "llm": llm,
        "answer": {"type": "answer", "title": "Answer", "answer": "{{#llm.text#}}"},
    }
    warnings.insert(
        0,
        f"a basic Chatbot{' in expert mode' if prompt_type == 'advanced' else ''}: run as its one "
        f"model call — {layout}, then the history with no window (Dify fetches up to "
        f"{DIFY_ROW_CAP} rows), then the query",
    )
    return {
        "nodes": nodes,
        "edges": [("start", "llm"), ("llm", "answer")],
        "features": app_features(config),
        "warnings": warnings + not_run(config),
    }


def app_features(config: Mapping[str, Any]) -> dict[str, Any]:
    """The ``model_config`` keys of an app without a graph (a basic Chatbot, an Agent app) that are its
    features, served by ``GET /v1/parameters``."""
    return {k: copy.deepcopy(config[k]) for k in _FEATURES if k in config}


def not_run(config: Mapping[str, Any]) -> list[str]:
    """Warnings for what such an app's ``model_config`` switches on that MemLens does not run: its
    knowledge, external data tools, moderation and annotation replies."""
    warnings = []
    datasets = _datasets(config)
    if datasets:
        warnings.append(
            f"its knowledge ({datasets} dataset{'s' if datasets != 1 else ''}) is not retrieved: "
            f"the prompt is sent without the context Dify would add"
        )
    tools = [t for t in (config.get("external_data_tools") or []) if isinstance(t, Mapping) and t.get("enabled")]
    if tools:
        warnings.append(
            f"{len(tools)} external data tool{'s' if len(tools) != 1 else ''} not run: "
            f"their inputs stay as the user gave them"
        )
    for key, what in (
        ("sensitive_word_avoidance", "its moderation is not run: every query reaches the model"),
        ("annotation_reply", "its annotation replies are not run: every query reaches the model"),
    ):
        if isinstance(config.get(key), Mapping) and config[key].get("enabled"):
            warnings.append(what)
    return warnings


def _pre_prompt(config: Mapping[str, Any], name: str) -> list[dict]:
    """The simple mode's one template message: the pre-prompt and a newline as the system message
    (none without a pre-prompt)."""
    pre_prompt = config.get("pre_prompt") or ""
    if not isinstance(pre_prompt, str):
        raise FlowError(f"{name}: 'model_config.pre_prompt' must be text")
    return [{"role": "system", "text": pre_prompt + "\n", "edition_type": SIMPLE}] if pre_prompt else []


def _expert_prompt(config: Mapping[str, Any], name: str) -> list[dict]:
    """The expert mode's template messages (``chat_prompt_config.prompt``), each rendered as
    AdvancedPromptTransform renders them (:data:`EXPERT`)."""
    block = config.get("chat_prompt_config")
    messages = block.get("prompt") if isinstance(block, Mapping) else None
    if messages is None:
        raise FlowError(
            f"{name}: this Chatbot's prompt is in expert mode but has no "
            f"'model_config.chat_prompt_config.prompt' (Dify fails every call with \"Advanced chat "
            f'prompt template is required."): write its prompt in Dify and export it again'
        )
    if not isinstance(messages, list):
        raise FlowError(f"{name}: 'model_config.chat_prompt_config.prompt' must be a list of {{role, text}} messages")
    out = []
    for i, item in enumerate(messages, start=1):
        text = item.get("text") or "" if isinstance(item, Mapping) else None
        if not isinstance(text, str) or item.get("role") not in ("system", "user", "assistant"):
            raise FlowError(
                f"{name}: expert-mode prompt message {i} must be a mapping with a role (system, user "
                f"or assistant) and a text"
            )
        out.append({"role": item["role"], "text": text, "edition_type": EXPERT})
    return out


def read_form(raw: Any, name: str) -> tuple[list[dict], list[str]]:
    """The start node's variables from ``user_input_form``, and warnings."""
    if raw is None:
        raw = []
    if not isinstance(raw, list):
        raise FlowError(f"{name}: 'model_config.user_input_form' must be a list of form fields")
    variables: list[dict] = []
    warnings: list[str] = []
    for i, item in enumerate(raw, start=1):
        if not isinstance(item, Mapping) or len(item) != 1:
            raise FlowError(
                f"{name}: form field {i} must be a mapping with one key, its type (text-input, "
                f"paragraph, select, number, …)"
            )
        ((kind, field),) = item.items()
        if kind == "external_data_tool":
            continue  # filled by a tool Dify calls: no form field
        if kind not in _FORM_TYPES:
            warnings.append(f"form field {i} has type {kind!r}, which MemLens does not know: left out of the form")
            continue
        if not isinstance(field, Mapping) or not field.get("variable"):
            raise FlowError(f"{name}: form field {i} ({kind}) must be a mapping with a 'variable'")
        variable = {
            "variable": str(field["variable"]),
            "label": str(field.get("label") or field["variable"]),
            "type": kind,
            "required": bool(field.get("required")),
        }
        for key in (
            "max_length",
            "options",
            "default",
            "allowed_file_types",
            "allowed_file_extensions",
            "allowed_file_upload_methods",
        ):
            if field.get(key) not in (None, "", []):
                variable[key] = copy.deepcopy(field[key])
        variables.append(variable)
    return variables, warnings


def uploads_images(upload: Any) -> bool:
    """Whether the app takes images with a query (either shape Dify has exported)."""
    if not isinstance(upload, Mapping):
        return False
    image = upload.get("image")
    if isinstance(image, Mapping) and image.get("enabled"):
        return True
    return bool(upload.get("enabled")) and "image" in (upload.get("allowed_file_types") or [])


def _datasets(config: Mapping[str, Any]) -> int:
    """How many knowledge datasets the Chatbot retrieves from (either shape Dify has exported)."""
    found = (config.get("dataset_configs") or {}).get("datasets") or {}
    listed = found.get("datasets") if isinstance(found, Mapping) else found
    count = len(listed) if isinstance(listed, list) else 0
    for tool in (config.get("agent_mode") or {}).get("tools") or []:
        if isinstance(tool, Mapping) and "dataset" in tool:
            count += 1
    return count
