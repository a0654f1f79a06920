"""Chatflows: the graph of nodes (``graph``, read from a Dify DSL export or a MemLens flow file) and its
import report (``import_report``), the node-type registry (``node_types``) over ``nodes/`` (one module per
type: its settings and its run), conversation variables and templates, the prompt an LLM node sends
(``prompt``), a node's memory config (``node_memory``), a turn run node by node (``runtime``) and what it
records (``records``), and what-if ledgers and prompts over a recorded turn (``what_if``).
"""

from core import public_api

__all__, __getattr__ = public_api(__name__, {
    "errors": ("AssignerError", "FlowError", "GranularityError", "RunError", "StateError", "ToolConfigError", "ToolError", "TypeMismatchError", "VariableError", "WindowInputError"),
    "granularity": ("check_granularity", "granularity_line", "resolve_granularity"),
    "graph": ("Flow", "Node", "classify_change", "load_flow", "parse_flow_upload"),
    "imported": ("ImportReport", "import_report"),
    "node_memory": ("node_history_inputs", "node_memory_config", "node_replay"),
    "node_types": ("NODE_TYPES", "NodeType"),
    "nodes.llm": ("llm_settings",),
    "nodes.parameter_extractor": ("extracted",),
    "records": ("ConversationState", "NodeRun", "TurnRecord"),
    "runtime": ("run_conversation", "run_turn"),
    "variables": ("VariableChange", "copy_value", "defaults", "edit_variable", "infer_type", "is_valid", "normalize_type"),
    "what_if": ("what_if_ledger", "what_if_prompt"),
})
