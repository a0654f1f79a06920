"""Findings: memory surprises in plain words, each linked to the turn (and node) where it shows.

A ledger explains one message; a finding explains a pattern across a conversation. ``base`` holds the
:class:`Finding`, the kinds and how a finding names turns; each kind is computed in a module of its own
(``fact_not_seen``, ``foreign_answers``, ``no_conversation``, ``window_zero``, ``silent_pruning``,
``dominant_message``, ``trimmed_window``, ``history_twice``, ``compaction``, ``profiles`` for
``docs_vs_code``, ``platform_rule`` with the n8n and Flowise ``platforms``). They are gathered for memory
configs (``configs``), for a flow file (``flows``), for a flow's recorded turns (``runs``) and for a
source, all of these at once (``sources``: :func:`findings_for`).
"""

from core import public_api

__all__, __getattr__ = public_api(
    __name__,
    {
        "base": (
            "COMPACTION_IN_TOOL_LOOP",
            "DOCS_VS_CODE",
            "DOMINANT_MESSAGE",
            "FACT_NOT_SEEN",
            "FIRST_MESSAGE_RESUMMARISED",
            "FOREIGN_ANSWERS",
            "HISTORY_TWICE",
            "INFO",
            "KINDS",
            "KIND_TITLES",
            "NO_CONVERSATION",
            "PLATFORM_RULE",
            "SILENT_PRUNING",
            "SUMMARY_PILE_UP",
            "TRIMMED_WINDOW",
            "WARNING",
            "WINDOW_ZERO",
            "Finding",
            "TurnNamer",
            "findings_at",
            "quoted",
            "turn_namer",
        ),
        "compaction": ("compaction_findings",),
        "configs": ("SYSTEM_FINDINGS", "config_findings"),
        "dominant_message": ("DOMINANT_MIN_TOKENS", "DOMINANT_SHARE"),
        "fact_not_seen": ("FACT_FINDINGS_LISTED",),
        "flow_reads": ("history_variables",),
        "flows": ("flow_findings",),
        "turns": ("MemoryTurn", "memory_turn", "memory_turns"),
        "profiles": (
            "CAUSE_BUDGET",
            "CAUSE_NOT_COUNTED",
            "CAUSE_PLACEHOLDER",
            "CAUSE_SIBLINGS",
            "CAUSE_WINDOW_SETTING",
            "Difference",
            "ProfileCut",
            "both_decisions",
            "docs_vs_code",
            "ledger_difference",
        ),
        "runs": ("run_findings",),
        "sources": ("findings_for",),
        "trimmed_window": ("larger_window_what_if",),
    },
)
