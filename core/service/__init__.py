"""What the UI, the command line and the Service API call: conversations that survive restarts
(``sessions``), the sample conversations (``samples``), a conversation to compare or report on, from
the store, an export or any file (``sources``), saved config sets (``config_sets``) and an uploaded
file stored all-or-nothing (``imports``) and conversations pulled from a running Dify app (``dify_pull``);
the package's exception in ``errors``.

Where each rule lives:

* A streamed turn committed before its closing events (`message_end`, `workflow_finished`, `error`) reach the
  client; its variable changes written with its end: `ConversationService.send` (`core/service/sessions.py`,
  `CLOSING_EVENTS`), `finish_turn` (`core/store/repo/turns.py`).
* Storing an uploaded file all-or-nothing: `core/service/imports.py`.
* The compare page's saved config sets: `core/service/config_sets.py`.
* The store as the pages read it: `core/service/sessions.py` (`ConversationService`), cached in `ui/data.py`.
"""

from core import public_api

__all__, __getattr__ = public_api(
    __name__,
    {
        "config_sets": ("delete_config_set", "save_config_set", "saved_config_sets"),
        "errors": ("SessionChangedError",),
        "imports": ("import_upload",),
        "dify_pull": ("TIMEOUT_SECONDS", "pull"),
        "replays": ("BRANCH", "NEW", "replay_thread", "replayed_name"),
        "samples": ("load_sample", "sample_files", "seed_demo"),
        "sessions": ("ConversationService",),
        "transfer": (
            "export_conversation",
            "import_conversation",
            "read_bundle",
            "store_conversations",
            "store_pulled",
        ),
        "turn_rows": ("turn_from_record",),
        "sources": ("load_stored", "read_source_file", "read_sources"),
    },
)
