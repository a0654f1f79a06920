"""The LLM node: its settings (spec/dify-memory.md §2.2) — model, prompt template, memory block and
context, read from Dify's node ``data``; a malformed node is a :class:`core.flow.errors.FlowError`
naming it — and its run.

Its memory is the ``dify`` strategy with the node's own window over the conversation's stored answers
(§2.8), or the store of a Window Memory node it reads (``memory_node``), computed as a ledger; the
history sent to the model is exactly the ledger's kept messages. The prompt follows §2.4–§2.7 (chat)
and §2.6 (completion models with role prefixes); what it sends besides its history is
:func:`node_frame`, which runs and what-if estimates both build with.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Mapping

from core.limits import DIFY_ROW_CAP, MAX_DIFY_WINDOW
from core.llm.client import one_line
from core.memory.strategies.compaction import recorded_summaries
from core.model.origins import CONTEXT, CONVERSATION_VARIABLE, CURRENT_QUERY, LONG_TERM_MEMORY, SYSTEM, TEMPLATE
from core.model.tokens import DEMO_MODEL, counter_for, model_supports_vision

from ..basic_chat import BASIC_CHAT_KEY
from ..context import complete, node_history
from ..errors import NodeFailed, node_error
from ..node_memory import node_memory_config
from ..prompt import CHAT, COMPLETION, PromptFrame, message
from ..templates import (
    CONTEXT_PLACEHOLDER,
    MISSING,
    NONE,
    VariablePool,
    refers_to,
    render,
    render_jinja,
    render_message,
    value_text,
)
from .long_term import recall_sources, recalled_rows
from .window_memory import window_source

if TYPE_CHECKING:  # pragma: no cover
    from ..context import RunContext
    from ..graph import Node
    from ..records import NodeRun

NO_PROMPT = "No prompt found in the LLM configuration. Please ensure a prompt is properly configured before proceeding."
ROLE_PREFIX_REQUIRED = "Memory role prefix is required for completion model."

#: Dify model-provider names → litellm provider prefixes (the rest are passed through unchanged).
PROVIDER_ALIASES = {
    "azure_openai": "azure",
    "google": "gemini",
    "tongyi": "dashscope",
    "volcengine_maas": "volcengine",
    "mistralai": "mistral",
    "zhipuai": "zai",
    "vertex_ai": "vertex_ai",
    "openai": "openai",
}


@dataclass(frozen=True)
class MemorySettings:
    """An LLM node's ``memory`` block (spec §2.2). Its presence means memory is on."""

    window_enabled: bool
    window_size: int | None
    query_prompt_template: str | None  # None: the key is absent (older exports)
    role_prefix: dict | None  # {"user": ..., "assistant": ...}; needed by completion-mode models

    @property
    def window(self) -> int | None:
        """Turns of history for the ``dify`` strategy: the size when enabled and above 0, else no window
        (the 500-row cap, which a size of 0 or less means to Dify too). A size above 500 stays as set: the
        strategy runs it as 500 and says so (:func:`core.memory.strategies.dify.window_note`)."""
        size = self.window_size
        return size if self.window_enabled and size is not None and size > 0 else None

    def label(self) -> str:
        if self.window is not None:
            capped = f" (runs as {DIFY_ROW_CAP}: Dify's row cap)" if self.window > DIFY_ROW_CAP else ""
            return f"window {self.window} turns{capped}"
        if self.window_enabled and self.window_size is not None:
            return f"window {self.window_size}: no window, as Dify reads 0 or less ({DIFY_ROW_CAP}-turn cap)"
        return f"no window ({DIFY_ROW_CAP}-turn cap)"

    def to_report(self) -> dict:
        return {
            "memory": "on",
            "window_enabled": self.window_enabled,
            "window_size": self.window_size,
            "query_prompt_template": self.query_prompt_template,
            "role_prefix": self.role_prefix,
            "label": self.label(),
        }


@dataclass(frozen=True)
class PromptItem:
    role: str
    text: str
    edition_type: str = "basic"
    jinja2_text: str = ""


@dataclass(frozen=True)
class LLMSettings:
    """The parts of an LLM node's data that decide what it sends (spec §2.2)."""

    provider: str
    name: str
    mode: str  # chat | completion
    completion_params: dict
    prompt: tuple[PromptItem, ...]
    memory: MemorySettings | None
    context_enabled: bool = False
    context_selector: tuple[str, ...] = ()
    jinja2_variables: tuple[dict, ...] = ()
    #: A basic Chatbot's one call (:mod:`core.flow.basic_chat`): no filter runs over what it sends.
    basic_chat: bool = False

    @property
    def model(self) -> str:
        """The model as litellm names it (``openai/gpt-4o-mini``); ``""`` when none is configured."""
        return self.block.model

    @property
    def max_tokens(self) -> int:
        """The user-set ``max_tokens`` completion parameter; 0 when unset (Dify ignores the rule default)."""
        return self.block.max_tokens

    @property
    def block(self) -> "ModelBlock":
        return ModelBlock(self.provider, self.name, self.mode, self.completion_params)


def litellm_model(provider: str, name: str) -> str:
    """A Dify ``model {provider, name}`` as a litellm model name."""
    name = (name or "").strip()
    if not name:
        return ""
    provider = (provider or "").strip().strip("/")
    if "/" in provider:  # plugin ids: langgenius/openai/openai
        provider = provider.rsplit("/", 1)[-1]
    if not provider:
        return name
    if f"{provider}/{name}" == DEMO_MODEL:
        return DEMO_MODEL
    return f"{PROVIDER_ALIASES.get(provider, provider)}/{name}"


def _memory_settings(node: "Node", raw: Any) -> MemorySettings | None:
    if raw is None:
        return None
    if not isinstance(raw, Mapping):
        raise node_error(node, "'memory' must be a mapping with a 'window' block, or absent for memory off")
    window = raw.get("window")
    if window is None:
        # graphon's MemoryConfig requires the window block; exports always carry it.
        raise node_error(node, "'memory' needs a 'window' block ({enabled: true|false, size: N})")
    if not isinstance(window, Mapping):
        raise node_error(node, "'memory.window' must be {enabled: true|false, size: N}")
    enabled = bool(window.get("enabled", False))
    size = window.get("size")
    if size is not None:
        try:
            size = int(size)
        except (TypeError, ValueError):
            raise node_error(node, f"memory window size {size!r} is not a whole number") from None
        # Dify takes any whole number: it fetches at most 500 rows, and 0 or less means 500.
        if not -MAX_DIFY_WINDOW <= size <= MAX_DIFY_WINDOW:
            raise node_error(
                node,
                f"memory window size {size:,} is out of range: Dify runs any size above "
                f"{DIFY_ROW_CAP} as {DIFY_ROW_CAP} (and 0 or less as no window); give at most "
                f"{MAX_DIFY_WINDOW:,}",
            )
    qpt = raw.get("query_prompt_template") if "query_prompt_template" in raw else None
    if qpt is not None and not isinstance(qpt, str):
        raise node_error(node, "'memory.query_prompt_template' must be text")
    prefix = raw.get("role_prefix")
    if prefix is not None:
        if not isinstance(prefix, Mapping):
            raise node_error(node, "'memory.role_prefix' must be {user: ..., assistant: ...}")
        prefix = {"user": str(prefix.get("user") or ""), "assistant": str(prefix.get("assistant") or "")}
    return MemorySettings(window_enabled=enabled, window_size=size, query_prompt_template=qpt, role_prefix=prefix)


@dataclass(frozen=True)
class ModelBlock:
    """A node's ``model`` block (LLM, Question Classifier and Parameter Extractor nodes): provider, name,
    mode and parameters."""

    provider: str
    name: str
    mode: str  # chat | completion
    completion_params: dict

    @property
    def model(self) -> str:
        """The model as litellm names it (``openai/gpt-4o-mini``); ``""`` when none is configured."""
        return litellm_model(self.provider, self.name)

    @property
    def max_tokens(self) -> int:
        """The user-set ``max_tokens`` completion parameter; 0 when unset (Dify ignores the rule default)."""
        value = self.completion_params.get("max_tokens")
        try:
            return max(int(value), 0) if value is not None else 0
        except (TypeError, ValueError):
            return 0


def model_block(node: "Node") -> ModelBlock:
    """Read a node's ``model`` block; a malformed one is a :class:`FlowError` naming the node."""
    model = node.data.get("model") or {}
    if not isinstance(model, Mapping):
        raise node_error(node, "'model' must be {provider, name, mode, completion_params} or 'provider/name'")
    return read_model_block(node, model)


def read_model_block(
    node: "Node", model: Mapping, *, name_key: str = "name", params_name: str = "'model.completion_params'"
) -> ModelBlock:
    """A :class:`ModelBlock` from a mapping of provider, name (``name_key``), mode and completion
    parameters — a node's ``model`` block, or a Dify Agent node's model-selector value."""
    mode = model.get("mode") or "chat"
    if mode not in ("chat", "completion"):
        raise node_error(node, f"model mode {mode!r} is unknown; expected chat or completion")
    params = model.get("completion_params") or {}
    if not isinstance(params, Mapping):
        raise node_error(node, f"{params_name} must be a mapping")
    return ModelBlock(str(model.get("provider") or ""), str(model.get(name_key) or ""), mode, dict(params))


def memory_settings(node: "Node") -> MemorySettings | None:
    """Read a node's ``memory`` block (LLM, Question Classifier and Parameter Extractor nodes); ``None``: memory off."""
    return _memory_settings(node, node.data.get("memory"))


def llm_settings(node: "Node") -> LLMSettings:
    """Parse an LLM node's data; a malformed node is a :class:`FlowError` naming it."""
    data = node.data
    block = model_block(node)
    mode = block.mode
    raw_prompt = data.get("prompt_template")
    items: list[PromptItem] = []
    if raw_prompt is None:
        raw_prompt = []
    if isinstance(raw_prompt, Mapping):
        raw_prompt = [dict(raw_prompt, role=raw_prompt.get("role") or "user")]
    if not isinstance(raw_prompt, list):
        raise node_error(node, "'prompt_template' must be a list of {role, text} messages")
    for i, item in enumerate(raw_prompt, start=1):
        if not isinstance(item, Mapping):
            raise node_error(node, f"prompt message {i} must be a mapping with 'role' and 'text'")
        role = item.get("role") or "user"
        if role not in ("system", "user", "assistant"):
            raise node_error(node, f"prompt message {i} has role {role!r}; expected system, user or assistant")
        edition = item.get("edition_type") or "basic"
        items.append(
            PromptItem(
                role=role,
                text=str(item.get("text") or ""),
                edition_type=edition,
                jinja2_text=str(item.get("jinja2_text") or ""),
            )
        )
    if mode == "completion" and len(items) > 1:
        raise node_error(node, "a completion-mode model takes one prompt text, not a list of messages")
    context = data.get("context") or {}
    if not isinstance(context, Mapping) or not isinstance(context.get("variable_selector") or [], list):
        raise node_error(node, "'context' must be {enabled: true|false, variable_selector: [node id, variable]}")
    prompt_config = data.get("prompt_config") or {}
    jinja_vars = prompt_config.get("jinja2_variables") or () if isinstance(prompt_config, Mapping) else None
    if not isinstance(jinja_vars, (list, tuple)):
        raise node_error(node, "'prompt_config' must be {jinja2_variables: [{variable, value_selector}, …]}")
    return LLMSettings(
        provider=block.provider,
        name=block.name,
        mode=mode,
        completion_params=block.completion_params,
        prompt=tuple(items),
        memory=memory_settings(node),
        context_enabled=bool(context.get("enabled")),
        context_selector=tuple(context.get("variable_selector") or ()),
        jinja2_variables=tuple(dict(v) for v in jinja_vars if isinstance(v, Mapping)),
        basic_chat=data.get(BASIC_CHAT_KEY) is True,
    )


# -- its run ----------------------------------------------------------------------------------------


def _template_origin(item_text: str, role: str, context_used: bool) -> str:
    if context_used:
        return CONTEXT
    if refers_to(item_text, "conversation"):
        return CONVERSATION_VARIABLE
    return SYSTEM if role == "system" else TEMPLATE


def node_frame(
    settings: LLMSettings,
    render_item,
    counter,
    sys_query: str | None,
    pool: VariablePool,
    *,
    ctx: RunContext | None = None,
    context_used: bool = False,
    role_prefix: Mapping[str, str] | None = None,
    file_upload: bool = False,
    vision: bool = False,
) -> PromptFrame:
    """Everything an LLM node sends besides its history (:class:`core.flow.prompt.PromptFrame`), from
    its template rendered with ``render_item``: runs and the estimate without a recorded prompt
    both build it here.

    Chat models: the rendered template messages (empty ones left out), then the memory's query
    message. Completion models: the rendered template, the unrendered query template before it
    and the history as ``role_prefix`` lines."""
    if settings.mode != "chat":
        template = render_item(settings.prompt[0]) if settings.prompt else ""
        return PromptFrame(
            COMPLETION,
            counter,
            template=template,
            sys_query=sys_query,
            role_prefix=role_prefix,
            file_upload=file_upload,
            vision=vision,
        )
    basic = settings.basic_chat  # no filter: only an empty system message is left out, the query goes as typed
    before = []
    for item in settings.prompt:
        text = render_item(item)
        if text or basic and item.role != "system":
            used_context = context_used and CONTEXT_PLACEHOLDER in item.text
            origin = (
                LONG_TERM_MEMORY
                if ctx is not None and recall_sources(item, settings, ctx)
                else _template_origin(item.text, item.role, used_context)
            )
            before.append(message(item.role, text, origin, counter))
    after = []
    if sys_query:
        text = sys_query if basic else render(sys_query, pool, context="")
        if text:
            after.append(message("user", text, CURRENT_QUERY, counter))
    return PromptFrame(
        CHAT,
        counter,
        before=tuple(before),
        after=tuple(after),
        file_upload=file_upload,
        vision=vision,
        keep_empty=basic,
    )


def run_llm(node: Node, ctx: RunContext, run: NodeRun) -> None:
    settings: LLMSettings = llm_settings(node)
    override = ctx.overrides.get(node.id)
    config = node_memory_config(
        ctx.flow, node.id, fidelity=ctx.fidelity, plugin_token_counting=ctx.plugin_token_counting, override=override
    )
    window = None if override else window_source(node, ctx)  # a what-if override replays as usual
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
    frame = node_frame(
        settings,
        render_item,
        counter,
        sys_query,
        pool,
        ctx=ctx,
        context_used=bool(context_text),
        role_prefix=block.role_prefix if with_history and block is not None else None,
        file_upload=ctx.flow.file_upload,
        vision=model_supports_vision(config.model),
    )
    ledger, history, planned = node_history(ctx, config, window, frame.fixed_tokens())
    if planned is not None and config.system.compacts_per_request(config):
        # The summaries its compaction wrote, stored with the turn as an agent node's are, so later replays
        # give them back rather than writing them again.
        run.summaries = copy.deepcopy(recorded_summaries(planned).written) or None
    run.ledger = ledger
    run.memory = config.to_dict()
    run.recalled = recalled_rows(settings.prompt, settings, ctx, counter) or None
    prompt = frame.build(history)
    run.prompt = prompt
    if not prompt:
        raise NodeFailed(NO_PROMPT)
    model = config.model if override and "model" in override else settings.model
    reply = complete(ctx, run, model, prompt, settings.max_tokens)
    run.outputs = {"text": reply.text, "usage": reply.usage, "finish_reason": "stop"}
