"""Dify's Agent app (``agent-chat``, function calling): the history its agent runner sends.

The rules, read from Dify's source:

* **History** (``api/core/agent/base_agent_runner.py``, ``organize_agent_history``): every row of
  the conversation, newest first, then the thread walk (:mod:`core.model.conversation`) — no
  row cap and no window. Each earlier turn replays its query, then its agent thoughts: one
  assistant message with a thought's text and tool calls followed by its tool results, or an
  assistant message of a thought's text (how a Dify log's thoughts become a turn's messages:
  :mod:`core.io.readers.dify_messages`). A turn with no thoughts replays its answer, unless it is
  empty (``if message.answer``): that one is left out (``empty``). Nothing else is filtered, so an
  empty thought or tool result is sent. Every message counts: granularity does not apply.
* **Budget** (``api/core/prompt/agent_history_prompt_transform.py``; the function-calling runner's
  ``_organize_prompt_messages``; ``prompt_transform.py``, ``_calculate_rest_token``): with plugin
  token counting off (Dify ships it off) every count is 0, so nothing is pruned. On, the limit is
  ``max(context_size − max_tokens − count([query]), 0)`` (2,000 when the model has no context size);
  the system message and the history are counted as one list (+3). When that is over the limit,
  whole turns are kept newest first while the system message and the turns so far fit; the first
  turn that does not fit and every older one are ``over_budget`` — even when that is the newest.
  (Dify counts at each user message, so the unit is a round — a user message and what follows it:
  a turn with no query goes with the turn before it, and what comes before the first user message
  is kept whenever the oldest round is.)
* The ledger is the turn's first model call. Each later call of the same run counts the run's own
  tool calls and results with the query, so it may keep fewer turns.

**ReAct** (``agent_strategy="react"``: Dify runs an Agent app this way when its model has no tool
calling; ``api/core/agent/cot_agent_runner.py``, ``_organize_historic_prompt_messages`` and
``_format_assistant_message``; ``cot_chat_agent_runner.py``; ``entities.py``): the same history is
rewritten round by round — a round is a user message and what follows it — into the user message and
one assistant text, the round's *scratchpad* (:func:`react_turn`):

* its first assistant message gives the words: ``agent_response`` = its text, ``thought`` = its
  text or "I am thinking about how to help you";
* every assistant message with tool calls sets the action from its *first* call, when that call's
  arguments parse as JSON to an object or a string (``Union[dict, str]``); otherwise the action
  stays as it was;
* every tool message (after an assistant one) sets the observation: the last one wins;
* the text is ``Final Answer: {agent_response}`` when there is no action or its name holds "final"
  and "answer"; else ``Thought: …`` then ``Action: {"action": …, "action_input": …}`` then, when
  the observation is not empty, ``Observation: …`` (each followed by a blank line).

So a run that called a tool and then answered is remembered as its first thought, its call and the
tool's result: its final answer is never sent again. The scratchpad is sent instead of the round's
first assistant message (``rewritten``, like every message whose words it carries); the turn's other
messages are ``omitted``. The budget counts the system message and the current query as the prompt
(``max(context_size − max_tokens − count([system, query]), 0)``) and the history alone as a list
(+3), cut by whole rounds the same way. Dify's system message is its ReAct template filled with the
app's instruction and tools; MemLens counts the conversation's system prompt in its place. A ReAct
run on a completion model (``CotCompletionAgentRunner``) writes its history as text; it is not
modelled.
"""

from __future__ import annotations

import json
from bisect import bisect_left
from dataclasses import dataclass, replace

from core.model.conversation import AGENT_THOUGHTS, ANSWER, QUERY, Conversation, ToolCall, Turn
from core.model.ledger import EMPTY, KEPT, OMITTED, OVER_BUDGET, REWRITTEN, SCRATCHPAD, SyntheticMessage
from core.model.tokens import DEFAULT_HISTORY_BUDGET, REPLY_PRIMING

from .base import Budget, PathView, Plan, Strategy, turn_at
from .dify import PLUGIN_TOKEN_COUNTING, PLUGIN_TOKEN_COUNTING_WIDGET
from .settings import CHOICE, TEXT, Setting, Widget

FUNCTION_CALL = "function_call"
REACT = "react"
#: The agent runners of an Agent app (Dify's ``agent_mode.strategy`` values), in words.
AGENT_STRATEGIES = {FUNCTION_CALL: "function calling", REACT: "ReAct"}
#: The thought of a scratchpad whose first assistant message has no text.
THINKING = "I am thinking about how to help you"


def left_out(turn: Turn, index: int) -> bool:
    """Whether Dify's agent history leaves out message ``index`` of ``turn``: the empty answer of a
    turn with no agent thoughts (neither counted from a log nor recorded as steps)."""
    if index != turn.answer_index or turn.messages[index].content:
        return False
    return not turn.meta.get(AGENT_THOUGHTS) and all(m.kind in (QUERY, ANSWER) for m in turn.messages)


def agent_app(conversation: Conversation) -> bool:
    """Whether a conversation was logged by a Dify Agent app: one of its turns has agent thoughts (an
    Agent app's run makes one for every step, a tool or none)."""
    return any(t.meta.get(AGENT_THOUGHTS) for t in conversation.turns)


def _action(call: ToolCall) -> tuple[str, str] | None:
    """A scratchpad's action for a tool call — its name and its ``Action:`` JSON — or ``None`` when the
    call's arguments are not JSON of an object or a string (the action input is ``Union[dict, str]``)."""
    try:
        value = json.loads(call.arguments)
    except (ValueError, RecursionError):
        return None
    if not isinstance(value, (dict, str)):
        return None
    return call.name, json.dumps({"action": call.name, "action_input": value})


def _final(name: str) -> bool:
    """Whether an action of this name ends the run: its name holds "final" and "answer"."""
    name = name.lower()
    return "final" in name and "answer" in name


@dataclass(frozen=True, slots=True)
class AgentTurn:
    """What the agent's history makes of one turn: a reason per message (``kept``, ``empty``, and under
    ReAct ``rewritten`` or ``omitted``) and, under ReAct, each scratchpad as the index of the message
    it is sent instead of and its text."""

    reasons: tuple[str, ...]
    pads: tuple[tuple[int, str], ...] = ()


def function_call_turn(turn: Turn) -> AgentTurn:
    """A turn as the function-calling runner sends it: every message but a left-out answer."""
    return AgentTurn(tuple(EMPTY if left_out(turn, j) else KEPT for j in range(len(turn.messages))))


def react_turn(turn: Turn) -> AgentTurn:
    """A turn as the ReAct runner sends it: each user message, and for the messages after it one
    scratchpad (see the module's docstring). A message whose text is in the scratchpad is
    ``rewritten`` (the first assistant message, the observed tool result), as is a step with no text
    whose call is the action; any other is ``omitted`` — a later step's text too, even when its call
    is the action. A turn starts with no scratchpad: in the middle of a thread, a turn with no user
    message would go on with the round before it in Dify's fold, which is not rendered (a Dify log
    has a query in every message)."""
    reasons: list[str] = []
    pads: list[tuple[int, str]] = []
    messages = turn.messages
    # The round's first assistant message, the one holding its action, its last tool result (indices).
    first = action_at = seen_at = None
    action: tuple[str, str] | None = None

    def flush() -> None:
        if first is None:
            return
        response = messages[first].content
        if action is None or _final(action[0]):
            text = f"Final Answer: {response}"
        else:
            text = f"Thought: {response or THINKING}\n\nAction: {action[1]}\n\n"
            if not messages[action_at].content:  # a step that only calls: its call is its part
                reasons[action_at] = REWRITTEN
            if seen_at is not None and messages[seen_at].content:
                text += f"Observation: {messages[seen_at].content}\n\n"
                reasons[seen_at] = REWRITTEN
        reasons[first] = REWRITTEN
        pads.append((first, text))

    for j, m in enumerate(messages):
        if left_out(turn, j):
            reasons.append(EMPTY)
        elif m.role == "user":
            flush()
            first = action_at = seen_at = action = None
            reasons.append(KEPT)
        else:
            reasons.append(OMITTED)
            if m.role == "assistant":
                if first is None:
                    first = j
                found = _action(m.tool_calls[0]) if m.tool_calls else None
                if found is not None:
                    action, action_at = found, j
            elif m.role == "tool" and first is not None:
                seen_at = j
    flush()
    return AgentTurn(tuple(reasons), tuple(pads))


class AgentView(PathView):
    """A thread view that also sums what the agent's history sends, message by message: a kept
    message's tokens; a scratchpad's at the message it is sent instead of; nothing for the rest."""

    __slots__ = ("turns", "plans", "react", "counter", "sent", "sent_count", "rounds")

    def __init__(self, replay):
        super().__init__(replay.numbers)
        self.turns = replay.conversation.turns
        self.react = replay.config.settings.agent_strategy == REACT
        self.counter = replay.counter
        self.plans: dict[int, tuple[AgentTurn, dict[int, int]]] = {}  # by position: the turn, its pads' tokens
        self.sent = [0]  # tokens sent, cumulative over the sequence
        self.sent_count = [0]  # messages sent as they are, cumulative
        self.rounds: list[int] = []  # the sequence index of each user message sent: where a round starts

    def turn_plan(self, position: int) -> tuple[AgentTurn, dict[int, int]]:
        found = self.plans.get(position)
        if found is None:
            turn = self.turns[position]
            plan = react_turn(turn) if self.react else function_call_turn(turn)
            found = self.plans[position] = (plan, {j: self.counter.chat("assistant", text) for j, text in plan.pads})
        return found

    def push(self, position, mark, eligible, tokens, empty, state=None):
        base = self.length
        super().push(position, mark, eligible, tokens, empty, state)
        plan, pad_tokens = self.turn_plan(position)
        sent, count = self.sent, self.sent_count
        messages = self.turns[position].messages
        for k, j in enumerate(eligible):
            if plan.reasons[j] == KEPT:
                if messages[j].role == "user":
                    self.rounds.append(base + k)
                sent.append(sent[-1] + tokens[j])
                count.append(count[-1] + 1)
            else:
                sent.append(sent[-1] + pad_tokens.get(j, 0))
                count.append(count[-1])

    def pop(self):
        start = self.starts[-1]
        super().pop()
        del self.sent[start + 1 :], self.sent_count[start + 1 :]
        del self.rounds[bisect_left(self.rounds, start) :]


class AgentPlan(Plan):
    """The turn's cut: messages before ``cut`` are over budget; after it, each has its turn's reason
    and each scratchpad is sent. :meth:`reason` and :meth:`synthetic` read the view as the plan found
    it, so they are asked before the view moves on (a ledger is built right after its plan)."""

    def __init__(self, budget: Budget, cut: int, view: AgentView, replay):
        end = view.length
        self.cut = cut
        self.view = view
        sent = view.sent
        first = cut  # the first message that sends anything (a left-out or omitted one sends nothing)
        while first < end and sent[first + 1] == sent[first]:
            first += 1
        super().__init__(
            budget,
            None,
            view.sent_count[end] - view.sent_count[cut],
            sent[end] - sent[cut],
            turn_at(view, replay, first if first < end else None),
        )

    def reason(self, i, message):
        if i < self.cut:
            return OVER_BUDGET
        view = self.view
        return view.turn_plan(view.seq_pos[i])[0].reasons[view.seq_msg[i]]

    def synthetic(self, view, replay):
        out = []
        for k in range(bisect_left(view.starts, self.cut), len(view.positions)):
            position = view.positions[k]
            plan, pad_tokens = view.turn_plan(position)
            number = replay.numbers[position]
            for j, text in plan.pads:
                out.append(
                    SyntheticMessage(
                        role="assistant",
                        content=text,
                        tokens=pad_tokens[j],
                        origin=SCRATCHPAD,
                        turn=number,
                        covers=(number,),
                        replaces=(position, j),
                        ref=f"{SCRATCHPAD}:{view.turns[position].messages[j].ref}",
                    )
                )
        return out


class DifyAgentStrategy(Strategy):
    name = "dify_agent"
    help = (
        "a Dify Agent app (agent-chat): the whole thread with its tool calls (a ReAct agent: one scratchpad "
        "text per turn), cut by whole turns when token counting is on"
    )
    settings = (
        Setting(
            "agent_strategy",
            FUNCTION_CALL,
            "the Agent app's runner — function_call (default; a model with tool "
            "calls) or react (a model without: each earlier turn is sent as one scratchpad text)",
            kind=TEXT,
            choices=tuple(AGENT_STRATEGIES),
            labels=AGENT_STRATEGIES,
            words="agent strategy",
            flag="--agent-strategy",
            omit_default=True,
            widget=Widget(
                CHOICE,
                "Agent runner",
                key="agent_strategy",
                help="Dify runs an Agent app with function calling when its model has tool calls, else "
                "with ReAct. ReAct sends each earlier turn as one assistant text: its first "
                "step's words, its last tool call and the last tool result (the final answer is "
                "not sent again).",
            ),
        ),
        replace(
            PLUGIN_TOKEN_COUNTING,
            widget=replace(
                PLUGIN_TOKEN_COUNTING_WIDGET,
                enabled_if=None,
                help="Dify's PLUGIN_BASED_TOKEN_COUNTING_ENABLED (off as shipped). On: keep whole turns, newest first, "
                "while the system message and the history fit in context size − max_tokens − the query (ReAct: "
                "the history alone, in context size − max_tokens − the system message and the query).",
            ),
        ),
    )
    lenses = (("Dify Agent app (agent-chat)", {}), ("Dify Agent app, ReAct (no tool calls)", {"agent_strategy": REACT}))
    plans = True
    uses_granularity = False
    drops_empty = False
    follows_dify_profile = True

    def label(self, config):
        react = " (ReAct)" if config.settings.agent_strategy == REACT else ""
        return f"dify agent app{react}" + (" + token counting" if config.settings.plugin_token_counting else "")

    def short_words(self, reason, config):
        if reason == REWRITTEN:
            return "sent in its turn's scratchpad"
        return "left out of its turn's scratchpad" if reason == OMITTED else None

    def explain(self, entry, config):
        r = entry.reason
        if r == OVER_BUDGET:
            budget = config.get("budget")
            return (
                f"token budget {budget:,}: older turns pruned whole"
                if isinstance(budget, int)
                else "token budget: older turns pruned whole"
            )
        if r == EMPTY:
            return "empty answer of a run with no agent step: Dify's agent history leaves it out"
        if r == REWRITTEN:
            return (
                "sent inside its turn's ReAct scratchpad (one assistant text: the first step's words, the last "
                "tool call and the last tool result), not as a message of its own"
            )
        if r == OMITTED:
            return (
                "left out of its turn's ReAct scratchpad, which keeps only the first step's words, the last tool "
                "call and the last tool result: its words are never sent again"
            )
        return None

    def pruning_words(self, config):
        counted = (
            "the history is over its budget (with plugin token counting on: context size − max_tokens − the "
            "system message and the query)"
            if config.get("agent_strategy") == REACT
            else "the system message "
            "and the history are over its budget (with plugin token counting on: context size − max_tokens − "
            "the query)"
        )
        return (
            f"Dify's Agent app drops the oldest whole turns — their tool calls and results too — while {counted} "
            f"and nothing in the run says so. Raise the context size or lower max_tokens, or keep tool results "
            f"short.",
            True,
        )

    def claims(self, conversation):
        return {} if agent_app(conversation) else None

    def new_view(self, replay):
        return AgentView(replay)

    def plan(self, view, current, replay):
        cfg = replay.config
        context = cfg.context_size or replay.facts.context_size
        if not cfg.settings.plugin_token_counting:
            return AgentPlan(
                Budget(
                    None,
                    "plugin token counting is off (Dify ships it off), so the agent's history "
                    "is never pruned by tokens",
                    context,
                ),
                0,
                view,
                replay,
            )
        fixed = replay.fixed_prompt_tokens(current)
        if cfg.settings.agent_strategy == REACT:
            # The system message and the query are the prompt; the history is counted on its own.
            prompt, system = fixed, 0
            what = f"{fixed:,} system message and query (counted as a list)"
            how = f"the history is counted as a list (+{REPLY_PRIMING}) and cut by whole turns, newest first"
        else:
            q = replay.conversation.turns[current].query_index
            query = replay.message_tokens(current)[q] if q is not None else 0
            # The system message (and any prompt before the history) is counted with the history.
            prompt, system = query + REPLY_PRIMING, fixed - query - REPLY_PRIMING
            what = f"{prompt:,} query (counted as a list)"
            how = (
                f"the system message ({system:,}) and the history are counted as one list (+{REPLY_PRIMING}) and "
                f"cut by whole turns, newest first"
            )
        if context:
            limit = max(context - cfg.max_tokens - prompt, 0)
            note = f"{context:,} context − {cfg.max_tokens:,} max_tokens − {what}; {how}"
        else:
            limit = DEFAULT_HISTORY_BUDGET
            note = (
                f"context size of {cfg.model} unknown: Dify's default budget of {DEFAULT_HISTORY_BUDGET:,} tokens; "
                f"{how}"
            )
        end, rounds, sent = view.length, view.rounds, view.sent
        # Dify walks the history newest first and checks the count at each user message, so it keeps
        # whole rounds (a user message and what follows it); what comes before the first user message is
        # never checked, so it goes with the oldest round. The oldest round from which the rest fits:
        # sent[r] grows with r.
        need = sent[end] + system + REPLY_PRIMING - limit
        i = bisect_left(rounds, need, key=lambda r: sent[r])
        cut = 0 if i == 0 else rounds[i] if i < len(rounds) else end
        return AgentPlan(Budget(limit, note, context), cut, view, replay)
