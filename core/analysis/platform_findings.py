"""What n8n's and Flowise's memories do that surprises a builder, found in a replay and said in plain words.

Each analysis reads one config's replay (its conversation, the numbers of each turn's memory, a turn's
ledger where those numbers point to one) and gives at most one :class:`Note`: the first turn it happens
at, what happened, and what to do. :mod:`core.analysis.findings` makes each note a finding of its kind
(:data:`ANALYSES`), for the configs whose memory system names that kind (``Strategy.finding_kinds``).
"""

from __future__ import annotations

from typing import Callable, NamedTuple, Sequence

from core.memory.strategies.n8n_window import FOUR_MESSAGES, USED_TOOLS, turn_items
from core.model.ledger import SUMMARY
from core.words import plural

#: The kinds of finding, as the memory systems name them.
UNSAVED_TURN = "unsaved_turn"
FEWER_EXCHANGES = "fewer_exchanges"
NO_HISTORY = "no_history"
ANSWER_WITHOUT_QUESTION = "answer_without_question"
QUESTION_FOLDED = "question_folded"
TITLES = {
    UNSAVED_TURN: "A turn never saved",
    FEWER_EXCHANGES: "A window of messages, not exchanges",
    NO_HISTORY: "The trim left no history",
    ANSWER_WITHOUT_QUESTION: "An answer without its question",
    QUESTION_FOLDED: "The question folded into the summary",
}
#: The most ledgers an analysis reads looking for its first turn (each costs the turn's thread).
MAX_LEDGERS = 200


class Note(NamedTuple):
    turn: int
    text: str
    detail: str


def _ledgers(replay, turns, wanted: Callable) -> Sequence:
    """``(turn numbers, ledger)`` of the turns ``wanted(memory turn)`` picks, oldest first, at most
    :data:`MAX_LEDGERS`."""
    picked = [t for t in turns if wanted(t)][:MAX_LEDGERS]
    return [(t, replay.ledger_at(t.position)) for t in picked]


def unsaved_turn(subject, config, replay, turns, name) -> Note | None:
    """n8n's V3 agent saves nothing of a turn whose reply is empty: a later turn never sees it was asked."""
    storage = config.settings.storage
    if storage not in (FOUR_MESSAGES, USED_TOOLS):
        return None
    conversation = replay.conversation
    for position, turn in enumerate(conversation.turns):
        if turn.query_index is not None and not turn_items(turn, position, storage):
            return Note(replay.numbers[position],
                        f"At {name(replay.numbers[position])} {subject}'s question was never saved: the reply was "
                        f"empty, and n8n's agent saves nothing of such a turn, so no later turn knows it was asked",
                        "n8n's Tools Agent V3 saves a turn only when it has an output (saveToMemory). Make the agent "
                        "always answer something, or save the question with a Chat Memory Manager node.")
    return None


def fewer_exchanges(subject, config, replay, turns, name) -> Note | None:
    """n8n's window counts messages, and a tool call and its result take two: k exchanges do not fit in k."""
    k = config.settings.k
    if not config.settings.windowed or k <= 0:
        return None
    for t, ledger in _ledgers(replay, turns, lambda t: t.outside > 0):
        sent = replay.history_messages(ledger)
        questions = sum(1 for m in sent if m.role == "user")
        if questions < k and any(m.role == "tool" for m in sent):
            return Note(t.turn, f"At {name(t.turn)} {subject} with k = {k:g} kept {plural(questions, 'exchange')}: "
                                f"n8n sends the last {2 * k:g} stored messages, and each tool call and its result "
                                f"take 2 of them",
                        "Context Window Length counts messages in pairs, not exchanges: raise k to keep as many "
                        "exchanges with tool calls as without.")
    return None


def no_history(subject, config, replay, turns, name) -> Note | None:
    """n8n's agent trim must start on a question: a newest question over the limit leaves nothing."""
    limit = config.settings.max_tokens_from_memory
    if not limit:
        return None
    for t, ledger in _ledgers(replay, turns, lambda t: t.kept == 0 and t.pruned > 0):
        if not replay.history_messages(ledger):
            return Note(t.turn, f"At {name(t.turn)} {subject} sent no history at all: the newest question alone is "
                                f"over maxTokensFromMemory ({limit:,}), and the trimmed history must start on a "
                                f"question",
                        "trimMessages keeps the newest messages that fit and then drops them up to a question. "
                        "Raise maxTokensFromMemory above the longest question.")
    return None


def answer_without_question(subject, config, replay, turns, name) -> Note | None:
    """Agentflow's window of 2N messages counts the current question: it starts on an answer."""
    if config.settings.memory_type != "windowSize":
        return None
    for t, ledger in _ledgers(replay, turns, lambda t: t.outside > 0)[:1]:
        sent = replay.history_messages(ledger)
        if sent and sent[0].role == "assistant":
            n = config.settings.window_size
            return Note(t.turn, f"At {name(t.turn)} {subject}'s history starts on an answer whose question was "
                                f"left out: Window Size {n} keeps the last {2 * n} messages with the current "
                                f"question counted",
                        "Agentflow appends the current question before it takes the window, so an odd number of "
                        "earlier messages is sent. Raise the window size by one to keep whole exchanges.")
    return None


def question_folded(subject, config, replay, turns, name) -> Note | None:
    """Agentflow's summary buffer can fold the current question itself: it is then not sent."""
    if config.settings.memory_type != "conversationSummaryBuffer":
        return None
    for t, ledger in _ledgers(replay, turns, lambda t: t.kept == 0):
        if any(s.origin == SUMMARY and ledger.turn in s.covers for s in ledger.synthetic):
            limit = config.settings.max_token_limit or 2000
            return Note(t.turn, f"At {name(t.turn)} {subject} folded the question itself into the summary: the "
                                f"messages' lines were over {limit:,} tokens, so the model never sees the question "
                                f"as asked",
                        "Agentflow's summary buffer folds the oldest messages, the current question included, "
                        "until the rest fit. Raise the Max Token Limit above the longest question.")
    return None


#: Each kind's analysis: ``(subject, config, replay, memory turns, turn namer) -> Note | None``.
ANALYSES: dict[str, Callable] = {
    UNSAVED_TURN: unsaved_turn,
    FEWER_EXCHANGES: fewer_exchanges,
    NO_HISTORY: no_history,
    ANSWER_WITHOUT_QUESTION: answer_without_question,
    QUESTION_FOLDED: question_folded,
}

__all__ = ["ANALYSES", "ANSWER_WITHOUT_QUESTION", "FEWER_EXCHANGES", "MAX_LEDGERS", "NO_HISTORY", "Note",
           "QUESTION_FOLDED", "TITLES", "UNSAVED_TURN"]
