"""Node types with settings of their own, one module each, read through the table in
:mod:`core.flow.node_types` and run by :mod:`core.flow.runtime`: the LLM node (``llm``), if-else
(``if_else``), the Variable Aggregator (``aggregator``), the long-term memory nodes
(``long_term``), the Template node (``template_transform``), the Window Memory node
(``window_memory``) and the tool agent (``tool_agent``). None of them imports the graph.
"""

from core import public_api

__all__, __getattr__ = public_api(__name__, {
    "aggregator": ("AggregatorSettings", "aggregate", "aggregator_settings"),
    "if_else": ("COMPARISON_OPERATORS", "OPERATOR_ALIASES", "if_else_cases"),
    "llm": ("LLMSettings", "MemorySettings", "PromptItem", "litellm_model", "llm_settings"),
    "long_term": ("RetrieveSettings", "StoreSettings", "retrieve_settings", "store_settings"),
    "template_transform": ("TemplateSettings", "template_settings"),
    "agent_loop": ("DemoPlanner", "ModelPlanner", "planner_for", "run_agent"),
    "agent_state": ("State",),
    "agent_tools": ("Tool", "demo_tools"),
    "tool_agent": ("agent_settings",),
    "window_memory": ("FAIL_BRANCH", "META_KEY", "history_inputs", "message_dict",
                      "parse_overwrite", "window_call", "window_settings"),
})
