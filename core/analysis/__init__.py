"""What the pages show, computed without Streamlit: memory configs compared (``compare``), findings,
the debugger's views (``debug_view``), "where did X go?" (``why``) and the
conversation they read (``source``).

Where each rule lives:

* Why re-running an earlier turn as a branch (Dify as shipped) may keep less than the switchboard's what-if:
  the turns written after it still take window rows: `rerun_rows_note` in `core/analysis/debug_view.py`, shown
  by `pages/debugger.py`.
* Findings (memory surprises in words): `core/analysis/findings/`: the `Finding` and the kinds in `base.py`,
  one module per kind, gathered in `configs.py`, `flows.py`, `runs.py` and `sources.py`.
* A followed fact's course under one config (first loss, comeback, last departure) — Compare's facts and
  "where did X go?" alike — and its words in the sentence, the facts tables and the findings:
  `core/analysis/compare/facts.py` (`fact_course`, `FactFate`).
* A fact's presence held as the turns where it changes, and how a conversation that never branched asks a fact
  only where it may change (a statement joins the thread, is the turn's query, or is passed by where the
  memory starts sending) — so a report costs the conversation's length, not its square; a branched one asks
  every fact at every turn, within `MEMLENS_MAX_FACT_CHECKS`: `core/analysis/timeline.py` (`Timeline`);
  `ChainFacts` and `EveryTurnFacts` in `core/analysis/compare/facts.py`, `walk_rows` (what a row of the walk
  says without a ledger) in `core/analysis/compare/walk.py`; the "fact not seen" findings read the same walk
  (`_asked_without` in `core/analysis/findings/fact_not_seen.py`); measured by `benchmarks/report_scale.py`.
* "where did X go?" (the first time a phrase leaves each node's or lens's memory, and where it came back or
  left last): `core/analysis/why.py`; shown by `ui/why_panel.py`.
* A conversation to compare or report on, with its flow and recorded turns (`Source`, `source_of`):
  `core/analysis/source.py`; loaded from the store, an export or a file in `core/service/sources.py`.
* A finding's subject named in its sentence (in quotes): `core/analysis/findings/base.py` (`quoted`).
* Every finding about a conversation (its configs, its flow, its recorded turns), for each page and the
  report: `core/analysis/findings/sources.py` (`findings_for`).
* The findings a memory system's configs get besides every config's (a Dify window of 0, the profiles'
  difference, the Window Memory node's permanent trimming, the shipped compaction's, a platform's own rule at
  work in its system's words; n8n's and Flowise's surprises: a turn never saved, k exchanges that do not fit
  in k, a trim that leaves nothing, an answer without its question, a question folded into the summary):
  `SYSTEM_FINDINGS` in `core/analysis/findings/configs.py`, by the kinds each system names
  (`Strategy.finding_kinds`; `platform_rule` asks the system's `Strategy.turn_surprise` of each turn's
  ledger); n8n's and Flowise's analyses in `core/analysis/findings/platforms.py`; what its budget pruning
  means in words, `Strategy.pruning_words`.
"""

from core import public_api

__all__, __getattr__ = public_api(
    __name__,
    {
        "compare": (
            "Comparison",
            "HeatmapWindow",
            "MAX_CONFIGS",
            "MIN_CONFIGS",
            "NamedConfig",
            "ReplyGrid",
            "RetentionMatrix",
            "heatmap_window",
            "named_configs",
            "replay_replies",
            "reply_at",
            "retention_matrix",
            "turn_diff",
        ),
        "debug_view": (
            "Lens",
            "MessageView",
            "Receipt",
            "TreeNode",
            "WhatIf",
            "damage_note",
            "default_lens",
            "focus_node",
            "lens_ledgers",
            "memory_rules",
            "models_note",
            "node_receipt",
            "receipt",
            "replayed_run",
            "transcript",
            "tree_layout",
            "what_if",
            "why_settings_note",
        ),
        "errors": ("CompareError", "WhyError"),
        "findings.base": ("Finding", "TurnNamer", "WARNING", "findings_at", "turn_namer"),
        "findings.configs": ("config_findings",),
        "findings.sources": ("findings_for",),
        "glance": ("LeftOut", "left_out"),
        "rerun": ("rerun_ledgers", "rerun_note"),
        "source": ("Source", "source_of"),
        "why": ("MAX_PHRASE", "Subject", "WhyAnswer", "node_subjects", "where_did_it_go"),
    },
)
