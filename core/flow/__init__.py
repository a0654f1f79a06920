"""Chatflows: the graph of nodes (``graph``, read from a Dify DSL export or a MemLens flow file),
conversation variables and templates, the prompt an LLM node sends (``prompt``) and a turn run node
by node (``runtime``); ``nodes/`` holds the node types with logic of their own.
"""

from core import public_api

__all__, __getattr__ = public_api(__name__, {
    "errors": ("AssignerError", "FlowError", "GranularityError", "RunError", "StateError", "ToolConfigError",
               "ToolError", "TypeMismatchError", "VariableError", "WindowInputError"),
    "granularity": ("check_granularity", "granularity_line", "resolve_granularity"),
    "graph": ("Flow", "Node", "classify_change", "import_report", "load_flow", "parse_flow_upload"),
    "node_types": ("NODE_TYPES", "NodeType"),
    "nodes.llm": ("llm_settings",),
    "runtime": ("ConversationState", "NodeRun", "TurnRecord", "node_history_inputs", "node_memory_config",
                "node_replay", "run_turn", "what_if_ledger", "what_if_prompt"),
    "variables": ("VariableChange", "copy_value", "defaults", "edit_variable", "infer_type",
                  "is_valid", "normalize_type"),
})
