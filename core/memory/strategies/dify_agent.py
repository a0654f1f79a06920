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
* The ledger is the turn's first model call. Each later call of the same run counts the run's own
  tool calls and results with the query, so it may keep fewer turns.

A ReAct agent (``react`` strategy) keeps and drops the same turns, but sends each one as a single
assistant text (its scratchpad), which this strategy does not render.
"""

from __future__ import annotations

from bisect import bisect_left

from core.model.conversation import AGENT_THOUGHTS, ANSWER, QUERY, Conversation, Turn
from core.model.ledger import EMPTY, KEPT, OVER_BUDGET
from core.model.tokens import DEFAULT_HISTORY_BUDGET, REPLY_PRIMING

from .base import Budget, PathView, Plan, Strategy, turn_at


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


class AgentView(PathView):
    """A thread view that also sums what the agent's history sends: every message but the left-out
    answers (:func:`left_out`), whose sequence indices it lists."""

    __slots__ = ("turns", "sent", "sent_count", "left")

    def __init__(self, replay):
        super().__init__(replay.numbers)
        self.turns = replay.conversation.turns
        self.sent = [0]        # tokens sent, cumulative over the sequence
        self.sent_count = [0]  # messages sent, cumulative
        self.left: list[int] = []

    def push(self, position, mark, eligible, tokens, empty, state=None):
        base = self.length
        super().push(position, mark, eligible, tokens, empty, state)
        turn = self.turns[position]
        sent, count = self.sent, self.sent_count
        for k, j in enumerate(eligible):
            if left_out(turn, j):
                self.left.append(base + k)
                sent.append(sent[-1])
                count.append(count[-1])
            else:
                sent.append(sent[-1] + tokens[j])
                count.append(count[-1] + 1)

    def pop(self):
        start = self.starts[-1]
        super().pop()
        del self.sent[start + 1:], self.sent_count[start + 1:]
        del self.left[bisect_left(self.left, start):]


class AgentPlan(Plan):
    """The turn's cut: messages before ``cut`` are over budget; after it, all but the left-out answers
    are sent. :meth:`reason` reads the view's list of those as the plan found it, so it is asked before
    the view moves on (a ledger is built right after its plan)."""

    def __init__(self, budget: Budget, cut: int, view: AgentView, replay):
        end = view.length
        self.cut = cut
        self.left = view.left
        # The first message sent: the cut, unless left-out answers follow it (each one index on).
        first, j = cut, bisect_left(view.left, cut)
        while j < len(view.left) and view.left[j] == first:
            first, j = first + 1, j + 1
        super().__init__(budget, None, view.sent_count[end] - view.sent_count[cut], view.sent[end] - view.sent[cut],
                         turn_at(view, replay, first if first < end else None))

    def reason(self, i, message):
        if i < self.cut:
            return OVER_BUDGET
        j = bisect_left(self.left, i)
        return EMPTY if j < len(self.left) and self.left[j] == i else KEPT


class DifyAgentStrategy(Strategy):
    name = "dify_agent"
    plans = True
    uses_granularity = False
    drops_empty = False

    def new_view(self, replay):
        return AgentView(replay)

    def plan(self, view, current, replay):
        cfg = replay.config
        context = cfg.context_size or replay.facts.context_size
        if not cfg.plugin_token_counting:
            return AgentPlan(Budget(None, "plugin token counting is off (Dify ships it off), so the agent's history "
                                          "is never pruned by tokens", context), 0, view, replay)
        q = replay.conversation.turns[current].query_index
        query = replay.message_tokens(current)[q] if q is not None else 0
        # The system message (and any prompt before the history) is counted with the history.
        system = replay.fixed_prompt_tokens(current) - query - REPLY_PRIMING
        if context:
            limit = max(context - cfg.max_tokens - (query + REPLY_PRIMING), 0)
            note = (f"{context:,} context − {cfg.max_tokens:,} max_tokens − {query + REPLY_PRIMING:,} query (counted "
                    f"as a list); the system message ({system:,}) and the history are counted as one list (+"
                    f"{REPLY_PRIMING}) and cut by whole turns, newest first")
        else:
            limit = DEFAULT_HISTORY_BUDGET
            note = (f"context size of {cfg.model} unknown: Dify's default budget of {DEFAULT_HISTORY_BUDGET:,} "
                    f"tokens, the system message ({system:,}) and the history counted as one list (+{REPLY_PRIMING}) "
                    f"and cut by whole turns, newest first")
        end, starts, sent = view.length, view.starts, view.sent
        # The oldest turn from which the rest fits: sent[starts[k]] grows with k.
        need = sent[end] + system + REPLY_PRIMING - limit
        k = bisect_left(range(len(starts)), need, key=lambda t: sent[starts[t]])
        cut = starts[k] if k < len(starts) else end
        return AgentPlan(Budget(limit, note, context), cut, view, replay)
