"""Reading conversations from real formats, auto-detected; one module per format.

* ``openai`` (:mod:`.openai`) — OpenAI chat messages: an array, an object with ``messages`` (or
  tau-bench's ``traj``), or JSON Lines; typed content parts, LLaMA-Factory "v1" reasoning and tool calls;
  LangChain's stored messages (``messages_to_dict``, ``dumpd``: :mod:`.langchain`) and Responses API items (an
  OpenAI Agents SDK session: :mod:`.responses`) as the messages they stand for; an Anthropic Messages
  request (``tool_use`` / ``tool_result`` blocks, ``system``), a Bedrock Converse request (its blocks:
  :mod:`.converse`), Gemini contents (:mod:`.gemini`) and Vercel AI SDK UI messages (:mod:`.ui_messages`).
* ``sharegpt`` (:mod:`.sharegpt`) — ``{conversations: [{from, value}], tools?, system?}`` records, tool
  calls as ``function_call`` / ``observation`` messages or in Hermes ``<tool_call>`` tags; LLaMA-Factory's
  preference (``chosen`` / ``rejected``) and multimodal (``images``, ``videos``, ``audios``) records.
* ``open-webui`` (:mod:`.open_webui`) — Open WebUI chat exports: the message tree, every branch kept.
* ``librechat`` (:mod:`.librechat`) — LibreChat conversation exports, flat or recursive: every branch
  kept, agents' content parts (thinking, tool calls and their output) as the messages they stand for.
* ``langsmith`` (:mod:`.langsmith`) — LangSmith runs: each LLM run's prompt as sent and its reply, the
  runs threaded into the conversations they form (:mod:`.calls`); a trace's other runs left out.
* ``langfuse`` (:mod:`.langfuse`) — Langfuse traces and observations: each generation's prompt as sent
  (a Dify app's LLM node calls traced to Langfuse too) and its reply, threaded likewise.
* ``oasst`` (:mod:`.oasst`) — OpenAssistant message trees (wrapped, nested from the first message, or
  one message per row); sibling replies become branches.
* ``bfcl`` (:mod:`.bfcl`) — BFCL memory prerequisite conversations, with their recall probes.
* ``chatgpt`` (:mod:`.chatgpt`) and ``claude`` (:mod:`.claude`) — the two chat apps' exports, every
  branch kept (:mod:`.tree`); ``claude-code`` (:mod:`.claude_code`) — Claude Code session transcripts.
* ``dify-messages`` (:mod:`.dify_messages`) — Dify Service API history (``GET /v1/messages``).
* ``dify-node-runs`` (:mod:`.dify_node_runs`) — a Dify workflow run's node executions (its console's
  list): each LLM node's prompt as Dify saved it and its reply, one conversation per call.
* ``openai-requests`` (:mod:`.openai_requests`) — OpenAI request files (Batch API lines): each chat completion
  request and its response, threaded into the conversations the calls form.
* ``dify-web`` (:mod:`.dify_web`) — Dify web chat items (``isAnswer`` / ``parentMessageId``).
* ``n8n-chat-histories`` (:mod:`.n8n_chat_histories`) — n8n's chat history table (``session_id``,
  ``message`` rows, CSV or JSON), one conversation per session, as n8n stored it.
* ``n8n-execution`` (:mod:`.n8n_execution`) — an n8n execution's JSON, one conversation per memory node:
  the chat history its newest run logged.
* ``flowise-messages`` (:mod:`.flowise_messages`) — Flowise's chat message export (View Messages →
  Export), one conversation per chat.
* ``openai-agents`` (:mod:`.openai_agents`) — an OpenAI Agents SDK session: a ``SQLiteSession`` database
  file (a binary upload, detected by its first bytes), one conversation per session, or one session's
  items as JSON (``to_input_list()``; named, not detected).
* ``llamaindex-chat-store`` (:mod:`.llamaindex_chat_store`) — a LlamaIndex ``SimpleChatStore`` persisted as
  JSON, one conversation per key.
* ``langgraph-checkpoint`` (:mod:`.langgraph_checkpoint`) — a LangGraph thread's state (its checkpoint's
  messages) as JSON, one conversation per thread.
* ``memlens-report`` (:mod:`.report`) — a MemLens report bundle.

Import is record by record (:mod:`.records`; a CSV table's rows are records for the formats that read
tables, a database's rows for a format read from a database file): a bad record is reported as a :class:`Problem`
naming the record (counted from 0, like the file's own array), the conversation when known, and
the field. By default the import is all-or-nothing (any problem raises :class:`FormatError`
listing them); ``skip_bad=True`` returns the good conversations with the problems instead. A
conversation is either read whole or left out whole, never half. Large inputs are read one record
at a time (a top-level JSON array element by element, JSON Lines line by line) with a progress
callback. What the formats share (ids, labels, turns from a flat message list) is in
:mod:`.common`; the registry and the entry points in :mod:`.registry`.

Each format module defines its ``FORMAT`` (a :class:`Format`: ``sniff`` and ``read``); this
package registers them below in detection order. Other formats plug in with :func:`register_format`.
"""

from core.io.errors import FormatError, RecordError

from . import (
    bfcl,
    chatgpt,
    claude,
    claude_code,
    dify_messages,
    dify_node_runs,
    dify_web,
    flowise_messages,
    langfuse,
    langgraph_checkpoint,
    langsmith,
    librechat,
    llamaindex_chat_store,
    n8n_chat_histories,
    n8n_execution,
    oasst,
    open_webui,
    openai,
    openai_agents,
    openai_requests,
    report,
    sharegpt,
)
from .common import conversation_from_messages
from .dify_messages import dify_turn
from .records import MAX_PROBLEMS, Problem, ReadContext, Record, Records
from .registry import (
    FORMATS,
    MAX_IMPORT_BYTES,
    UPLOAD_EXTENSIONS,
    Format,
    ImportResult,
    detect_format,
    formats,
    import_bytes,
    import_file,
    import_text,
    parse_conversations,
    read_conversations,
    read_file,
    register_format,
    unregister_format,
)

# Detection order: distinctive shapes first (a report bundle's header), the generic OpenAI message list last.
for _module in (
    report,
    bfcl,
    chatgpt,
    claude,
    claude_code,
    open_webui,
    librechat,
    langsmith,
    langfuse,
    dify_node_runs,
    openai_requests,
    n8n_chat_histories,
    n8n_execution,
    flowise_messages,
    openai_agents,
    llamaindex_chat_store,
    langgraph_checkpoint,
    oasst,
    sharegpt,
    dify_web,
    dify_messages,
    openai,
):
    register_format(_module.FORMAT)
del _module

__all__ = [
    "FORMATS",
    "MAX_IMPORT_BYTES",
    "MAX_PROBLEMS",
    "UPLOAD_EXTENSIONS",
    "Format",
    "FormatError",
    "ImportResult",
    "Problem",
    "ReadContext",
    "Record",
    "RecordError",
    "Records",
    "conversation_from_messages",
    "detect_format",
    "dify_turn",
    "formats",
    "import_bytes",
    "import_file",
    "import_text",
    "parse_conversations",
    "read_conversations",
    "read_file",
    "register_format",
    "unregister_format",
]
