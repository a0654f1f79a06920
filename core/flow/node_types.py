"""Every node type MemLens runs, in one registry: the type's name, its settings reader, its runner and
what else the runtime and the views ask of it. A new node type is one module under ``core/flow/nodes/``
(its reader and its runner) and one line of :data:`NODE_TYPES`.

A flow is checked against this table when it is read (:func:`core.flow.graph.load_flow` calls
:func:`read_settings` on every node), so a malformed node is a :class:`core.flow.errors.FlowError`
before anything runs; :func:`core.flow.runtime.run_turn` runs each node through its type's ``run``. A
type not in the table loads, runs as a pass-through with empty outputs and is reported as not emulated
(:func:`core.flow.imported.import_report`). None of the node modules imports the graph or this table.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable

from .nodes.aggregator import aggregator_settings, run_variable_aggregator
from .nodes.answer import run_answer
from .nodes.assigner import assigner_settings, run_assigner
from .nodes.end import end_settings, run_end
from .nodes.if_else import check_if_else, run_if_else
from .nodes.llm import llm_settings, run_llm
from .nodes.long_term import retrieve_settings, run_memory_retrieve, run_memory_store, store_settings
from .nodes.parameter_extractor import extractor_settings, run_parameter_extractor
from .nodes.plugin_agent import plugin_agent_settings, run_plugin_agent
from .nodes.question_classifier import classifier_settings, run_question_classifier
from .nodes.start import check_start, run_start
from .nodes.template_transform import run_template_transform, template_settings
from .nodes.tool_agent import agent_settings, run_tool_agent
from .nodes.window_memory import run_window_memory, window_settings

if TYPE_CHECKING:  # pragma: no cover
    from .context import RunContext
    from .graph import Node
    from .records import NodeRun

#: How a node runs: it records what it did on its ``NodeRun`` (``outputs`` are what later nodes read) and
#: returns the handle it takes (None: every outgoing edge); a failure raises ``NodeFailed``.
Runner = Callable[["Node", "RunContext", "NodeRun"], "str | None"]


@dataclass(frozen=True)
class NodeType:
    """A node type MemLens runs."""

    name: str
    #: Reads (and so checks) a node's settings; a bad setting raises FlowError. None: nothing to read.
    read: Callable[["Node"], Any] | None = None
    #: Runs the node (:data:`Runner`).
    run: Runner | None = None
    #: MemLens's own type: inside an iteration or loop (never run) its settings are not checked.
    own: bool = False
    #: It reads a conversation memory whose settings a what-if can switch per node (the switchboard;
    #: ``core.flow.node_memory.node_memory_config``).
    memory: bool = False
    #: It calls a model with Dify's conversation memory (``TokenBufferMemory``): each run records the
    #: node's ledger and the prompt it sent (``Flow.model_nodes``: the Debugger's receipts).
    dify_memory: bool = False
    #: Its memory goes into its prompt as ``Human:``/``Assistant:`` lines, and ``read`` returns a
    #: :class:`core.flow.nodes.text_memory.TextMemoryNode` (Question Classifier, Parameter Extractor).
    text_memory: bool = False
    #: Its runner times its own model calls (``NodeRun.latency_ms`` is the call's, not the node's).
    times_itself: bool = False


NODE_TYPES: dict[str, NodeType] = {
    t.name: t
    for t in (
        NodeType("start", check_start, run_start),
        NodeType("llm", llm_settings, run_llm, memory=True, dify_memory=True, times_itself=True),
        NodeType(
            "question-classifier",
            classifier_settings,
            run_question_classifier,
            memory=True,
            dify_memory=True,
            text_memory=True,
            times_itself=True,
        ),
        NodeType(
            "parameter-extractor",
            extractor_settings,
            run_parameter_extractor,
            memory=True,
            dify_memory=True,
            text_memory=True,
            times_itself=True,
        ),
        NodeType(
            "agent",
            plugin_agent_settings,
            run_plugin_agent,
            memory=True,
            dify_memory=True,  # Dify's plugin Agent
            times_itself=True,
        ),
        NodeType("answer", None, run_answer),
        NodeType("assigner", assigner_settings, run_assigner),
        NodeType("if-else", check_if_else, run_if_else),
        NodeType("end", end_settings, run_end),
        NodeType("memory-retrieve", retrieve_settings, run_memory_retrieve, own=True),
        NodeType("memory-store", store_settings, run_memory_store, own=True),
        NodeType("window-memory", window_settings, run_window_memory, own=True),
        NodeType("tool-agent", agent_settings, run_tool_agent, own=True, memory=True, times_itself=True),
        NodeType("variable-aggregator", aggregator_settings, run_variable_aggregator),
        # The aggregator's original name, which Dify still runs as the aggregator.
        NodeType("variable-assigner", aggregator_settings, run_variable_aggregator),
        NodeType("template-transform", template_settings, run_template_transform),
    )
}

#: The node types a memory override (a what-if) applies to.
OVERRIDABLE_TYPES = tuple(name for name, kind in NODE_TYPES.items() if kind.memory)


def read_settings(node: "Node") -> None:
    """Check ``node``'s settings by its type's reader; a bad setting raises FlowError naming the node."""
    kind = NODE_TYPES.get(node.type)
    if kind is None or kind.read is None or (kind.own and node.container):
        return
    kind.read(node)


__all__ = ["NODE_TYPES", "NodeType", "OVERRIDABLE_TYPES", "Runner", "read_settings"]
