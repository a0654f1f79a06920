"""Persistence: flows with versions, conversations as turn trees, node runs, variables; the store's
exceptions in ``errors``."""

from core import public_api

__all__, __getattr__ = public_api(__name__, {
    "checks": ("check_conversations",),
    "db": ("Database", "resolve_url"),
    "errors": ("ConversationBusyError", "ImportCheckError", "LedgerMismatchError", "NotFoundError", "StoreError",
               "StoreUnavailableError"),
    "keys": ("create_key", "list_keys", "revoke_key"),
    "ledger_codec": ("pack_ledger", "pack_prompt", "unpack_node_run"),
    "memories": ("long_term_store",),
    "models": ("ConversationRow", "FeedbackRow", "FlowRow", "FlowVersionRow", "NodeRunRow", "TurnRow",
               "VariableChangeRow", "VariableRow"),
    "repo.conversations": ("ConversationInfo",),
    "repo.turns": ("turn_from_dict",),
}, modules=("checks", "keys", "repo"))
