"""Comparing memory configs on one conversation: the data behind the compare page.

Given a conversation and 2–6 labelled memory configs (``configs``), :func:`compare` (``comparison``)
computes, per config, the retention matrix for the heatmap and the window of it shown (``heatmap``), the
per-turn series (``series``) and each fact's fate (``facts``), reading every cell and fact in one walk of
the turn tree per config (``config_pass`` over ``walk``); the turn diff of one config (``diff``) and the
replies each config's history gets (``replies``) are computed on demand.
"""

from core import public_api

__all__, __getattr__ = public_api(
    __name__,
    {
        "comparison": ("Comparison", "compare"),
        "config_pass": ("retention_matrix",),
        "configs": ("MAX_CONFIGS", "MIN_CONFIGS", "NamedConfig", "named_configs"),
        "diff": ("DiffItem", "TurnDiff", "turn_diff"),
        "facts": (
            "FactFate",
            "TrackedFact",
            "detect_facts",
            "fact_course",
            "fact_presence",
            "fact_sentence",
            "track_facts",
        ),
        "heatmap": (
            "HEATMAP_COLUMNS",
            "HEATMAP_ROWS",
            "Column",
            "HeatmapWindow",
            "RetentionMatrix",
            "heatmap_window",
            "message_columns",
        ),
        "replies": ("ReplyGrid", "replay_replies", "reply_at"),
        "series": ("Series", "turn_series"),
        "walk": ("walk_rows",),
    },
)
