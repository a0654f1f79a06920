"""The long-term memory nodes' settings: ``memory-retrieve`` (what to look up, for whom, how many)
and ``memory-store`` (what to remember, with which extractor); a malformed node is a
:class:`core.flow.errors.FlowError` naming it. The memory itself is :mod:`core.memory.long_term`;
the nodes run in :mod:`core.flow.runtime`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from core.memory.long_term import DEFAULT_TOP_K

from ..errors import node_error

if TYPE_CHECKING:
    from ..graph import Node


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
    return RetrieveSettings(query=data.get("query", RetrieveSettings.query),
                            user=data.get("user", RetrieveSettings.user), top_k=top_k,
                            threshold=float(threshold) if threshold is not None else None,
                            namespace=_namespace_setting(node))


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
    return StoreSettings(query=data.get("query", StoreSettings.query), answer=data.get("answer", ""),
                         user=data.get("user", StoreSettings.user), extractor=extractor, model=model,
                         namespace=_namespace_setting(node))


def _namespace_setting(node: "Node") -> str | None:
    """A memory node's ``namespace``: absent for the app's own, or the name of a namespace that
    flows share by naming it (a template, so ``{{#sys.app_id#}}``-style values work)."""
    value = node.data.get("namespace")
    if value is None:
        return None
    if not isinstance(value, str) or not value.strip() or len(value) > 255:
        raise node_error(node, f"namespace {value!r} must be a non-empty text of at most 255 characters "
                               "(leave it out for the app's own memories)")
    return value
