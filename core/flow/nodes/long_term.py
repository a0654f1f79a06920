"""The long-term memory nodes: ``memory-retrieve`` (what to look up, for whom, how many) and
``memory-store`` (what to remember, with which extractor), their settings (a malformed node is a
:class:`core.flow.errors.FlowError` naming it) and their runs. The memory itself is
:mod:`core.memory.long_term`, passed to a run as ``long_term`` and keyed by ``sys.user_id``; a prompt
message that reads a retrieve node's output has origin ``long-term memory`` (:func:`recall_sources`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from core.llm.client import DemoClient
from core.llm.errors import LLMError
from core.memory.errors import LongTermMemoryError
from core.memory.long_term import DEFAULT_TOP_K, LLMExtractor, Source, memories_text
from core.model.tokens import DEMO_MODEL

from ..errors import NodeFailed, node_error
from ..templates import render, selectors_in

if TYPE_CHECKING:  # pragma: no cover
    from ..context import RunContext
    from ..graph import Node
    from ..records import NodeRun
    from .llm import LLMSettings


@dataclass(frozen=True)
class RetrieveSettings:
    """A ``memory-retrieve`` node: ``query`` and ``user`` are templates; ``top_k`` defaults to 5."""

    query: str = "{{#sys.query#}}"
    user: str = "{{#sys.user_id#}}"
    top_k: int = DEFAULT_TOP_K
    threshold: float | None = None
    namespace: str | None = None  # None: the app's own namespace; a text (template): that namespace


@dataclass(frozen=True)
class StoreSettings:
    """A ``memory-store`` node: the turn's ``query`` and ``answer`` (templates) are stored for ``user``;
    ``extractor`` is ``offline`` or ``llm`` (with ``model``)."""

    query: str = "{{#sys.query#}}"
    answer: str = ""
    user: str = "{{#sys.user_id#}}"
    extractor: str = "offline"
    model: str = ""
    namespace: str | None = None


def retrieve_settings(node: "Node") -> RetrieveSettings:
    data = node.data
    top_k = data.get("top_k", DEFAULT_TOP_K)
    if isinstance(top_k, bool) or not isinstance(top_k, int) or top_k < 1:
        raise node_error(node, f"top_k {top_k!r} must be a whole number of memories, 1 or more (default 5)")
    threshold = data.get("threshold")
    if threshold is not None and (isinstance(threshold, bool) or not isinstance(threshold, (int, float))):
        raise node_error(node, f"threshold {threshold!r} must be a number (or absent for no threshold)")
    for key in ("query", "user"):
        if key in data and not isinstance(data[key], str):
            raise node_error(node, f"'{key}' must be a template text such as {{{{#sys.{key}#}}}}")
    return RetrieveSettings(
        query=data.get("query", RetrieveSettings.query),
        user=data.get("user", RetrieveSettings.user),
        top_k=top_k,
        threshold=float(threshold) if threshold is not None else None,
        namespace=_namespace_setting(node),
    )


def store_settings(node: "Node") -> StoreSettings:
    data = node.data
    for key in ("query", "answer", "user", "model"):
        if key in data and not isinstance(data[key], str):
            raise node_error(node, f"'{key}' must be text")
    extractor = data.get("extractor", "offline")
    if extractor not in ("offline", "llm"):
        raise node_error(node, f"extractor {extractor!r} is unknown; expected offline or llm")
    model = data.get("model", "")
    if extractor == "llm" and not model:
        raise node_error(node, "extractor llm needs a 'model' to extract facts with")
    return StoreSettings(
        query=data.get("query", StoreSettings.query),
        answer=data.get("answer", ""),
        user=data.get("user", StoreSettings.user),
        extractor=extractor,
        model=model,
        namespace=_namespace_setting(node),
    )


def _namespace_setting(node: "Node") -> str | None:
    """A memory node's ``namespace``: absent for the app's own, or the name of a namespace that
    flows share by naming it (a template, so ``{{#sys.app_id#}}``-style values work)."""
    value = node.data.get("namespace")
    if value is None:
        return None
    if not isinstance(value, str) or not value.strip() or len(value) > 255:
        raise node_error(
            node,
            f"namespace {value!r} must be a non-empty text of at most 255 characters "
            "(leave it out for the app's own memories)",
        )
    return value


# -- their runs -------------------------------------------------------------------------------------


def recall_sources(item, settings: LLMSettings, ctx: RunContext) -> list[str]:
    """The memory-retrieve nodes a prompt item reads (its template or its Jinja2 variables)."""
    heads = {s[0] for s in selectors_in(item.text or "")}
    if item.edition_type == "jinja2":
        heads |= {str((v.get("value_selector") or [""])[0]) for v in settings.jinja2_variables}
    return [h for h in heads if h in ctx.recalled]


def recalled_rows(items, settings: LLMSettings, ctx: RunContext, counter) -> list[dict]:
    """The retrieved memories a node's prompt carries, each with its tokens and score (for the receipt)."""
    out = []
    for source in sorted({h for item in items for h in recall_sources(item, settings, ctx)}):
        for row in ctx.recalled[source]:
            out.append(
                {
                    "node_id": source,
                    "id": row["id"],
                    "memory": row["memory"],
                    "score": row["score"],
                    "tokens": counter.text(row["memory"]),
                }
            )
    return out


def run_memory_retrieve(node: Node, ctx: RunContext, run: NodeRun) -> None:
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
    run.outputs = {
        "text": memories_text(results),
        "memories": rows,
        "count": len(rows),
        "user_id": user,
        "query": query,
        "namespace": store.namespace if store is not None else None,
    }


def _memory_in_namespace(ctx: RunContext, setting: str | None):
    """The long-term memory a node reads and writes: the one the caller connected (scoped to the
    app's namespace), or the namespace the node names."""
    if ctx.long_term is None or setting is None:
        return ctx.long_term
    try:
        return ctx.long_term.in_namespace(render(setting, ctx.pool).strip())
    except LongTermMemoryError as e:
        raise NodeFailed(str(e)) from None


def run_memory_store(node: Node, ctx: RunContext, run: NodeRun) -> None:
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
            run.notes.append(
                f"{settings.model} runs on the demo model, which extracts no JSON: facts extracted offline"
            )
        else:
            extractor = LLMExtractor(client, settings.model)
    source = Source(conversation_id=ctx.conversation.id, turn_id=ctx.turn_id, flow=ctx.flow.name, turn=ctx.turn_number)
    try:
        # Written at once, like Dify's plugin call: the change stays even if a later node fails.
        result = store.store(user, messages, source=source, extractor=extractor)
    except (LongTermMemoryError, LLMError) as e:
        raise NodeFailed(str(e)) from None
    counts = result.counts()
    run.outputs = {
        "events": [
            {"memory_id": e.memory_id, "event": e.event, "memory": e.new_memory, "previous_memory": e.old_memory}
            for e in result.events
        ],
        "added": counts["ADD"],
        "updated": counts["UPDATE"],
        "deleted": counts["DELETE"],
        "unchanged": list(result.unchanged),
        "user_id": user,
        "namespace": store.namespace,
    }
