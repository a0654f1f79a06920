"""The node types, one module each holding the type's settings reader and its runner, both registered by
one line of :data:`core.flow.node_types.NODE_TYPES`: start, answer, end, the Variable Assigner
(``assigner``), the LLM node (``llm``), if-else (``if_else``), the Variable Aggregator (``aggregator``),
the Template node (``template_transform``), the Question Classifier, the Parameter Extractor, Dify's
Agent node (``plugin_agent``), the long-term memory nodes (``long_term``), the Window Memory node
(``window_memory``) and the tool agent (``tool_agent``, its loop, state and tools beside it). What the
model-calling nodes share is in ``text_memory``. None of them imports the graph or the registry.
"""

from core import public_api

__all__, __getattr__ = public_api(
    __name__,
    {
        "aggregator": ("AggregatorSettings", "aggregate", "aggregator_settings"),
        "if_else": ("evaluate_if_else", "if_else_cases"),
        "llm": ("LLMSettings", "MemorySettings", "PromptItem", "litellm_model", "llm_settings"),
        "long_term": ("RetrieveSettings", "StoreSettings", "retrieve_settings", "store_settings"),
        "template_transform": ("TemplateSettings", "template_settings"),
        "agent_loop": ("DemoPlanner", "ModelPlanner", "planner_for", "run_agent"),
        "agent_state": ("State",),
        "agent_tools": ("Tool", "demo_tools"),
        "tool_agent": ("agent_settings",),
        "window_memory": (
            "FAIL_BRANCH",
            "META_KEY",
            "history_inputs",
            "message_dict",
            "parse_overwrite",
            "window_call",
            "window_settings",
        ),
    },
)
