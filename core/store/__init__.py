"""Persistence: flows with versions, conversations as turn trees, node runs, variables; the store's
exceptions in ``errors``.

Where each rule lives:

* How a variable change is stored (whole values, or only the items it appended to the value its previous
  change left) and read back whole: `core/store/repo/variables.py` (`record_changes`, `_changes`; `APPENDED`).
* The token counts stored with a turn so a reopen never tokenises (contents: `TOKEN_COUNTS`; roles and names:
  `TEXT_COUNTS`): `core/store/repo/counts.py`.
* Who writes when: one turn per conversation across processes (PostgreSQL advisory locks, lock files on
  SQLite); on SQLite one writer at a time, this process's writers queued in turn: `core/store/locks.py` /
  `core/store/db.py` (`Database.session`).
* A number kept as written in a SQLite JSON column (a bare number bound as bytes, past the column's NUMERIC
  affinity); a command that only reads makes no database (`Database(create=False)`, the CLI's
  `open_db(write=False)`); a writer refused a SQLite file it cannot write or that fails `quick_check`:
  `core/store/db.py` (`sqlite_json`, `Database._check_writable`).
* PostgreSQL connections: a turn's transactions on one pinned connection (`Database.pinned`, held by
  `ConversationService.send` under the turn lock); both pools (sessions, turn locks) keep `PG_POOL_SIZE`
  connections: `core/store/db.py`.
"""

from core import public_api

__all__, __getattr__ = public_api(
    __name__,
    {
        "checks": ("check_conversations",),
        "db": ("Database", "resolve_url"),
        "errors": (
            "ConversationBusyError",
            "ImportCheckError",
            "LedgerMismatchError",
            "NotFoundError",
            "StoreError",
            "StoreUnavailableError",
        ),
        "keys": ("create_key", "list_keys", "revoke_key"),
        "ledger_codec": ("pack_ledger", "pack_prompt", "unpack_node_run"),
        "memories": ("long_term_store",),
        "models": (
            "ConversationRow",
            "FeedbackRow",
            "FlowRow",
            "FlowVersionRow",
            "NodeRunRow",
            "TurnRow",
            "VariableChangeRow",
            "VariableRow",
        ),
        "repo.conversations": ("ConversationInfo",),
        "repo.turns": ("turn_from_dict",),
    },
    modules=("checks", "keys", "repo"),
)
