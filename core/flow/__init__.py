"""Chatflows: the graph of nodes (``graph``, read from a Dify DSL export or a MemLens flow file) and its
import report (``import_report``), the node-type registry (``node_types``) over ``nodes/`` (one module per
type: its settings and its run), conversation variables and templates, the prompt an LLM node sends
(``prompt``), a node's memory config (``node_memory``), a turn run node by node (``runtime``) and what it
records (``records``), and what-if ledgers and prompts over a recorded turn (``what_if``).

Where each rule lives:

* The prompt an LLM node sends (chat order, completion text, files as parts; a text-form prompt's history
  share, `PromptMessage.history_tokens`, which the receipt counts as memory history): `core/flow/prompt.py`
  (`PromptFrame`: runs, the fixed-token estimate, receipts and what-if prompts all build with it); a node's
  frame from its template: `core/flow/runtime.py` (`node_frame`, `what_if_prompt`).
* The nodes whose window's size is read even with the window off (Question Classifier, Parameter Extractor,
  Dify's Agent node), their budget after their own prompt (`prompt_reserve`) or a fixed one (`history_budget`:
  the Agent node passes its memory no limit) and whether their history is text:
  `core/flow/nodes/text_memory.py` (`ShippedWindowNode.window` and its class settings; `TextMemoryNode` for
  the two text-history nodes), `NodeType.text_memory`; the budget itself in `core/memory/strategies/dify.py`
  (`budget_limit`); the run in `_memory_call` (`core/flow/runtime.py`).
* A Dify Agent app export (`app.mode: agent-chat`) read as its runner's first model call: the runner Dify
  picks (export strategy, then the model's tool calling), the instruction as that runner sends it (the
  `tool-agent` node's `system_prompt_fill`: `system_text` in `core/flow/nodes/tool_agent.py`), the tools and
  prompts not run; the Service API's Agent-app differences: `core/flow/agent_chat.py` (`read_agent_chat`,
  `runner_of`, called by `_read_app` in `core/flow/graph.py`; the model's tool calling in
  `model_supports_tool_calls`, `core/model/tokens.py`); the form, features and what is not run shared with
  `core/flow/basic_chat.py` (`read_form`, `app_features`, `not_run`); a Dify strategy on an agent node takes
  the conversation's Dify profile in `_agent_memory_config` (`core/flow/runtime.py`), for the strategies that
  say `follows_dify_profile` (`core/memory/strategies/base.py`); `agent_thought` and `agent_message` events,
  blocking refused and 404 for an unknown conversation in `core/api/routes/chat.py`, the thought a message
  lists in `core/api/routes/messages.py` (`agent_thought`, shared by both).
* A Dify basic Chatbot export (`app.mode: chat`) read as its one LLM call: the pre-prompt as the system
  message (or, in expert mode, its prompt messages), no window, the features; what is refused:
  `core/flow/basic_chat.py` (`read_basic_chat`, called by `_read_app` in `core/flow/graph.py`;
  `Flow.app_mode`); its prompt's `{{name}}` slots rendered in `core/flow/templates.py` (`render_slots`,
  editions `SIMPLE` and `EXPERT`, via `render_message`); no filter over its call — an empty system message
  left out, the query as typed, empty history messages sent — in `node_frame` (`core/flow/runtime.py`,
  `LLMSettings.basic_chat`, `PromptFrame.keep_empty`) and `MemoryConfig.sends_empty`; its budget — the prompt
  before the history subtracted, not the query (`MemoryConfig.query_after_budget`, set by `node_memory_config`
  for a node with `basic_chat`) — in `budgeted_prompt` (`core/memory/replay.py`: `Replay.budget_prompt_tokens`
  for a replay, `ledger_difference` for a pair of ledgers); the Service API's chat-app differences in
  `core/api/routes/chat.py`.
* Dify's Agent node (its inputs, its memory, the prompt `function_calling` sends, what is not emulated):
  `core/flow/nodes/plugin_agent.py` (`plugin_agent_settings`, `agent_frame`, `agent_notes`); its run
  `_run_plugin_agent` in `core/flow/runtime.py`.
* The Parameter Extractor (its prompt, how its reply is read, checked and typed, its outputs):
  `core/flow/nodes/parameter_extractor.py` (`extractor_frame`, `first_object`, `check`, `transform`,
  `read_reply`).
* The Question Classifier (its history as `Human:`/`Assistant:` text in its prompt, how its reply picks a
  class and fails the node): `core/flow/nodes/question_classifier.py` (`classifier_frame`, `read_reply`); the
  text-history prompt in `core/flow/prompt.py` (`TEXT_HISTORY`); the nodes whose runs record a ledger:
  `Flow.model_nodes` (`NodeType.dify_memory`).
* The start form's inputs as Dify validates and converts them (a missing input's default or `None`, numbers,
  checkboxes, select options, lengths): `_check_inputs` and `_input_value` in `core/flow/runtime.py`
  (`CHECKBOX_WORDS`).
* Conversation variables and the Variable Assigner: `core/flow/variables.py`.
* Haystack-style agent loop and state: `core/flow/nodes/tool_agent.py`.
* The node types MemLens runs, each with its settings reader / its runner: `core/flow/node_types.py`
  (`NODE_TYPES`; readers in `core/flow/nodes/`) / `core/flow/runtime.py` (`RUNNERS`).
* A flow's graph: every node reached from Start, no cycle (the closing edge named): `check_paths` in
  `core/flow/paths.py` (a flow already stored opens unchecked: `Flow.from_dict(stored=True)`).
"""

from core import public_api

__all__, __getattr__ = public_api(
    __name__,
    {
        "errors": (
            "AssignerError",
            "FlowError",
            "GranularityError",
            "RunError",
            "StateError",
            "ToolConfigError",
            "ToolError",
            "TypeMismatchError",
            "VariableError",
            "WindowInputError",
        ),
        "granularity": ("check_granularity", "granularity_line", "resolve_granularity"),
        "graph": ("Flow", "Node", "classify_change", "load_flow", "parse_flow_upload"),
        "imported": ("ImportReport", "import_report"),
        "node_memory": ("node_history_inputs", "node_memory_config", "node_replay"),
        "node_types": ("NODE_TYPES", "NodeType"),
        "nodes.llm": ("llm_settings",),
        "nodes.parameter_extractor": ("extracted",),
        "records": ("ConversationState", "NodeRun", "TurnRecord"),
        "runtime": ("run_conversation", "run_turn"),
        "variables": (
            "VariableChange",
            "copy_value",
            "defaults",
            "edit_variable",
            "infer_type",
            "is_valid",
            "normalize_type",
        ),
        "what_if": ("what_if_ledger", "what_if_prompt"),
    },
)
