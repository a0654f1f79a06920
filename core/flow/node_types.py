"""Every node type MemLens runs, in one table: the type's name, its settings reader and whether it
is one of MemLens's own types (not Dify's).

A flow is checked against this table when it is read (:func:`core.flow.graph.load_flow` calls
:func:`read_settings` on every node), so a malformed node is a :class:`core.flow.errors.FlowError`
before anything runs. :mod:`core.flow.runtime` runs each type through ``RUNNERS``, whose keys are
this table's (a test keeps the two equal). A type not in the table loads, runs as a pass-through
with empty outputs and is reported as not emulated (:func:`core.flow.graph.import_report`).

The readers live in ``core/flow/nodes/`` (one module per node type with settings of its own) and
in :mod:`core.flow.variables` (the Variable Assigner); none of them imports the graph back.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable

from .errors import VariableError, node_error
from .nodes.aggregator import aggregator_settings
from .nodes.if_else import check_if_else
from .nodes.llm import llm_settings
from .nodes.long_term import retrieve_settings, store_settings
from .nodes.parameter_extractor import extractor_settings
from .nodes.plugin_agent import plugin_agent_settings
from .nodes.question_classifier import classifier_settings
from .nodes.template_transform import template_settings
from .nodes.tool_agent import agent_settings
from .nodes.window_memory import window_settings
from .variables import check_assigner_data

if TYPE_CHECKING:
    from .graph import Node


def _assigner_settings(node: "Node") -> None:
    try:
        check_assigner_data(node.data)
    except VariableError as e:
        raise node_error(node, str(e)) from None


@dataclass(frozen=True)
class NodeType:
    """A node type MemLens runs."""

    name: str
    #: Reads (and so checks) a node's settings; a bad setting raises FlowError. None: nothing to read.
    read: Callable[["Node"], Any] | None = None
    #: MemLens's own type: inside an iteration or loop (never run) its settings are not checked.
    own: bool = False
    #: It reads a conversation memory whose settings a what-if can switch per node (the switchboard;
    #: ``core.flow.runtime.node_memory_config``).
    memory: bool = False
    #: It calls a model with Dify's conversation memory (``TokenBufferMemory``): each run records the
    #: node's ledger and the prompt it sent (``Flow.model_nodes``: the Debugger's receipts).
    dify_memory: bool = False
    #: Its memory goes into its prompt as ``Human:``/``Assistant:`` lines, and ``read`` returns a
    #: :class:`core.flow.nodes.text_memory.TextMemoryNode` (Question Classifier, Parameter Extractor).
    text_memory: bool = False


def _check_start(node: "Node") -> None:
    fields = node.data.get("variables")
    if fields is not None and not isinstance(fields, list):
        raise node_error(node, "'variables' must be a list of the start form's fields")


NODE_TYPES: dict[str, NodeType] = {t.name: t for t in (
    NodeType("start", _check_start),
    NodeType("llm", llm_settings, memory=True, dify_memory=True),
    NodeType("question-classifier", classifier_settings, memory=True, dify_memory=True, text_memory=True),
    NodeType("parameter-extractor", extractor_settings, memory=True, dify_memory=True, text_memory=True),
    NodeType("agent", plugin_agent_settings, memory=True, dify_memory=True),  # Dify's plugin Agent node
    NodeType("answer"),
    NodeType("assigner", _assigner_settings),
    NodeType("if-else", check_if_else),
    NodeType("end"),
    NodeType("memory-retrieve", retrieve_settings, own=True),
    NodeType("memory-store", store_settings, own=True),
    NodeType("window-memory", window_settings, own=True),
    NodeType("tool-agent", agent_settings, own=True, memory=True),
    NodeType("variable-aggregator", aggregator_settings),
    NodeType("variable-assigner", aggregator_settings),  # the aggregator's original name (Dify runs it so)
    NodeType("template-transform", template_settings),
)}

def read_settings(node: "Node") -> None:
    """Check ``node``'s settings by its type's reader; a bad setting raises FlowError naming the node."""
    kind = NODE_TYPES.get(node.type)
    if kind is None or kind.read is None or (kind.own and node.container):
        return
    kind.read(node)


__all__ = ["NodeType", "NODE_TYPES", "read_settings"]
