"""Conversations in and out: every format MemLens reads (``readers/``, one module per format), the
MemLens conversation export (``bundle``); the package's exceptions in ``errors`` (with those of
:mod:`core.service.dify_pull`, which reads a running Dify app through these readers).

Where each rule lives:

* Every format MemLens reads: `core/io/readers/` — one module per format, their detection order in
  `__init__.py`, the registry and the entry points in `registry.py` (every conversation read, by any format,
  has each turn id once: `_each_turn_once` there, by `read_once` in `core/model/conversation.py`, which
  `core/service/dify_pull.py` uses too), record-by-record reading and problems in `records.py` (each record
  held to the depth limit there, or by the format's own `check` where a message tree nests reply by reply:
  `librechat.py`; a CSV table's rows are records only for a format whose `Format` says it reads `tables`:
  `n8n_chat_histories.py`), what the formats share in `common.py` (how a flat message list splits into turns,
  and which message is a turn's answer — none when the turn ends in a tool step: `turn_messages`); a message
  LangChain stored, a Responses API item (an OpenAI Agents SDK session's row), a Bedrock Converse message, a
  Gemini content and a Vercel AI SDK UI message, read as the OpenAI (or Anthropic) messages they stand for in
  `langchain.py`, `responses.py`, `converse.py`, `gemini.py` and `ui_messages.py` (used by `openai.py`); one
  model call a tracer recorded (its prompt, its reply) read as a conversation, and a file's calls in one loop
  (`read_calls`: what is no call left out with a note), in `calls.py`, used by `langsmith.py` (LangSmith
  runs), `langfuse.py` (Langfuse generations) and `dify_node_runs.py` (a Dify run's node executions);
  `core/io/bundle.py` (conversation exports), `core/report/bundle.py` (report bundles).
* A format read from a binary file (an OpenAI Agents SDK `SQLiteSession` database): the bytes it starts with
  and how it reads them, before any text decoding: `Format.magic`, `Format.binary` and `import_bytes` in
  `core/io/readers/registry.py`; the database in `core/io/readers/openai_agents.py`.
"""

from core import public_api

__all__, __getattr__ = public_api(
    __name__,
    {
        "bundle": ("FORMAT", "FORMAT_VERSION", "is_bundle", "looks_like_bundle", "parse_bundle", "validate_bundle"),
        "errors": ("BundleError", "FormatError", "PullError", "PullFailedError", "RecordError"),
        "readers.common": ("conversation_from_messages",),
        "readers.dify_messages": ("dify_turn",),
        "readers.records": ("MAX_PROBLEMS", "Problem", "ReadContext", "Record", "Records"),
        "readers.registry": (
            "FORMATS",
            "MAX_IMPORT_BYTES",
            "Format",
            "ImportResult",
            "detect_format",
            "formats",
            "import_bytes",
            "import_file",
            "import_text",
            "parse_conversations",
            "read_conversations",
            "read_file",
            "register_format",
            "unregister_format",
            "UPLOAD_EXTENSIONS",
        ),
    },
)
