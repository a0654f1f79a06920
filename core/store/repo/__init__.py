"""The store's repository: every read and write of the database, by aggregate — flows and their
versions (``flows``), conversations (``conversations``), turns and their node runs (``turns``, with the
token counts stored beside them: ``counts``), conversation variables (``variables``), settings
(``settings``) and feedback (``feedback``); ids and times in ``ids``.

Every function takes a :class:`~core.store.db.Database` and does its work in one transaction, so
each call is all-or-nothing: a turn's row when it starts, then its end together with all its node
runs, a node's variable writes together, an import as a whole. A turn's or node run's error is
stored redacted (:mod:`core.redact`): no provider's echo of a key reaches the database. Callers use
the package (``from core.store import repo``; ``repo.load_conversation(db, id)``).
"""

from core import public_api

__all__, __getattr__ = public_api(
    __name__,
    {
        "conversations": (
            "ConversationInfo",
            "create_conversation",
            "delete_conversation",
            "find_conversation",
            "get_conversation",
            "imported_sources",
            "list_conversations",
            "load_conversation",
            "rename_conversation",
            "set_conversation_fields",
        ),
        "feedback": ("FEEDBACK_RATINGS", "feedbacks", "mark_stopped", "set_feedback"),
        "flows": (
            "FlowVersion",
            "add_flow_version",
            "create_flow",
            "find_flow_by_name",
            "get_flow_version",
            "latest_flow_version",
            "list_flows",
        ),
        "ids": ("new_id", "now", "structure_hash"),
        "settings": ("get_setting", "set_setting"),
        "counts": ("TEXT_COUNTS", "TOKEN_COUNTS", "remember_token_counts"),
        "turns": (
            "FAILED",
            "INTERRUPTED",
            "INTERRUPTED_ERROR",
            "RUNNING",
            "STOPPED",
            "SUCCEEDED",
            "TURN_STATUSES",
            "begin_turn",
            "finish_turn",
            "load_node_runs",
            "load_turn_rows",
            "node_row",
            "node_run_dict",
            "node_values",
            "save_turn",
            "save_turns",
            "settle_interrupted",
            "turn_dict",
            "turn_from_dict",
            "turn_row",
        ),
        "variables": (
            "APPENDED",
            "StoredVariable",
            "ensure_variables",
            "get_variables",
            "record_changes",
            "variable_changes_until",
            "variable_history",
            "write_variable_changes",
        ),
    },
)
