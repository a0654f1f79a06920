"""``history_twice``: the conversation (or the current question) reaching one node twice — memory on,
and the prompt also rendering a history variable, or ``{{#sys.query#}}`` while memory appends the
query again.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Mapping

from .base import HISTORY_TWICE, WARNING, Finding, quoted
from .flow_reads import NODE_SKIP, selectors, value_origins

if TYPE_CHECKING:
    from core.flow.graph import Flow, Node
    from core.flow.nodes.llm import MemorySettings


def memory_block(node: Node) -> MemorySettings | None:
    from core.flow.nodes.llm import llm_settings

    return llm_settings(node).memory if node.type == "llm" else None


def _query_template_has_query(memory: MemorySettings) -> bool:
    qpt = memory.query_prompt_template
    return not qpt or "sys.query" in {".".join(s) for s in selectors(qpt)}


def history_twice_findings(
    flow: Flow, node: Node, memory: MemorySettings, histories: Mapping[str, str]
) -> list[Finding]:
    from core.flow.nodes.llm import llm_settings

    out = []
    reads = set()
    for s in selectors(node.data, skip=NODE_SKIP):
        reads |= value_origins(flow, s)
    for name, why in histories.items():
        if f"conversation.{name}" in reads:
            text = (
                f"{quoted(node.label)} gets the conversation twice: its memory replays the chat history, and its prompt "
                f"also renders conversation.{name}, which holds the history ({why})"
            )
            out.append(
                Finding(
                    HISTORY_TWICE,
                    text + ".",
                    node.label,
                    None,
                    node.id,
                    WARNING,
                    "Every earlier turn reaches the model twice: it costs tokens and can confuse the "
                    "model about what was said when. Keep one source: switch memory off, or stop rendering "
                    "the variable.",
                    {"variable": name},
                )
            )
    settings = llm_settings(node)
    template_reads = set()
    for item in settings.prompt:
        text = item.jinja2_text if item.edition_type == "jinja2" and item.jinja2_text else item.text
        template_reads |= {".".join(s) for s in selectors(text)}
    for v in settings.jinja2_variables:
        sel = v.get("value_selector")
        if isinstance(sel, list):
            template_reads.add(".".join(map(str, sel)))
    if "sys.query" in template_reads and _query_template_has_query(memory):
        text = (
            f"{quoted(node.label)} receives the current question twice: its prompt renders {{{{#sys.query#}}}} and its "
            f"memory adds the query again as the last user message"
        )
        out.append(
            Finding(
                HISTORY_TWICE,
                text + ".",
                node.label,
                None,
                node.id,
                WARNING,
                "With memory on, Dify appends the memory's query template (default {{#sys.query#}}) after "
                "the history; remove the query from the prompt template, or change the query template.",
                {"variable": "sys.query"},
            )
        )
    return out
