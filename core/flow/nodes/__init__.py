"""Node types with logic of their own, run by :mod:`core.flow.runtime`: the Window Memory node
(``window_memory``) and the tool agent (``tool_agent``).
"""

from core import public_api

__all__, __getattr__ = public_api(__name__, {
    "tool_agent": ("DemoPlanner", "GranularityError", "ModelPlanner", "agent_settings", "check_granularity",
                   "granularity_line", "planner_for", "resolve_granularity", "run_agent"),
    "window_memory": ("FAIL_BRANCH", "META_KEY", "WindowInputError", "history_inputs", "message_dict",
                      "parse_overwrite", "window_call", "window_settings"),
})
