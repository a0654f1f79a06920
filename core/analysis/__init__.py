"""What the pages show, computed without Streamlit: memory configs compared (``compare``), findings,
the debugger's views (``debug_view``), "where did X go?" (``why``) and the
conversation they read (``source``).
"""

from core import public_api

__all__, __getattr__ = public_api(__name__, {
    "compare": ("Comparison", "HeatmapWindow", "MAX_CONFIGS", "MIN_CONFIGS", "NamedConfig", "ReplyGrid", "RetentionMatrix", "heatmap_window", "named_configs", "replay_replies", "reply_at", "retention_matrix", "turn_diff"),
    "debug_view": ("Lens", "MessageView", "Receipt", "TreeNode", "WhatIf", "damage_note", "default_lens", "focus_node", "lens_ledgers", "memory_rules", "models_note", "node_receipt", "receipt", "replayed_run", "transcript", "tree_layout", "what_if", "why_settings_note"),
    "errors": ("CompareError", "WhyError"),
    "findings.base": ("Finding", "TurnNamer", "WARNING", "findings_at", "turn_namer"),
    "findings.configs": ("config_findings",),
    "findings.sources": ("findings_for",),
    "glance": ("LeftOut", "left_out"),
    "rerun": ("rerun_ledgers", "rerun_note"),
    "source": ("Source", "source_of"),
    "why": ("MAX_PHRASE", "Subject", "WhyAnswer", "node_subjects", "where_did_it_go"),
})
