"""What n8n's and Flowise's memories do that surprises a builder, found in a replay and said in plain words.

Each analysis reads one config's replay (its conversation, the numbers of each turn's memory, a turn's
ledger where those numbers point to one) and gives at most one :class:`Note`: the first turn it happens
at, what happened, and what to do. :mod:`core.analysis.findings.platform_rule` makes each note a finding of its kind
(:data:`ANALYSES`), for the configs whose memory system names that kind (``Strategy.finding_kinds``).
"""

from __future__ import annotations

from typing import Callable, NamedTuple

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


def _first(replay, turns, wanted: Callable, happened: Callable):
    """The first turn ``wanted(memory turn)`` picks where ``happened(ledger, history sent)``, and what it sent;
    ``None`` when there is none among the first :data:`MAX_LEDGERS` picked (each ledger costs its thread)."""
    for t in [t for t in turns if wanted(t)][:MAX_LEDGERS]:
        ledger = replay.ledger_at(t.position)
        sent = replay.history_messages(ledger)
        if happened(ledger, sent):
            return t.turn, sent
    return None


def unsaved_turn(subject, config, replay, turns, name) -> Note | None:
    """n8n's V3 agent saves nothing of a turn whose reply is empty: a later turn never sees it was asked."""
    storage = config.settings.storage
    if storage not in (FOUR_MESSAGES, USED_TOOLS):
        return None
    for position, turn in enumerate(replay.conversation.turns):
        if turn.query_index is not None and not turn_items(turn, position, storage):
            number = replay.numbers[position]
            return Note(
                number,
                f"At {name(number)} {subject}'s question was never saved: the reply was empty, and "
                f"n8n's agent saves nothing of such a turn, so no later turn knows it was asked",
                "n8n's Tools Agent V3 saves a turn only when it has an output (saveToMemory). Make the agent "
                "always answer something, or save the question with a Chat Memory Manager node.",
            )
    return None


def fewer_exchanges(subject, config, replay, turns, name) -> Note | None:
    """n8n's window counts messages, and a tool call and its result take two: k exchanges do not fit in k."""
    k = config.settings.k
    if not config.settings.windowed or k <= 0:
        return None
    found = _first(
        replay,
        turns,
        lambda t: t.outside > 0,
        lambda ledger, sent: _questions(sent) < k and any(m.role == "tool" for m in sent),
    )
    if found is None:
        return None
    turn, sent = found
    return Note(
        turn,
        f"At {name(turn)} {subject} with k = {k:g} kept {plural(_questions(sent), 'exchange')}: n8n "
        f"sends the last {2 * k:g} stored messages, and each tool call and its result take 2 of them",
        "Context Window Length counts messages in pairs, not exchanges: raise k to keep as many exchanges "
        "with tool calls as without.",
    )


def _questions(sent) -> int:
    return sum(1 for m in sent if m.role == "user")


def no_history(subject, config, replay, turns, name) -> Note | None:
    """n8n's agent trim must start on a question: a newest question over the limit leaves nothing."""
    limit = config.settings.max_tokens_from_memory
    found = limit and _first(replay, turns, lambda t: t.kept == 0 and t.pruned > 0, lambda ledger, sent: not sent)
    if not found:
        return None
    turn = found[0]
    return Note(
        turn,
        f"At {name(turn)} {subject} sent no history at all: the newest question alone is over "
        f"maxTokensFromMemory ({limit:,}), and the trimmed history must start on a question",
        "trimMessages keeps the newest messages that fit and then drops them up to a question. Raise "
        "maxTokensFromMemory above the longest question.",
    )


def answer_without_question(subject, config, replay, turns, name) -> Note | None:
    """Agentflow's window of 2N messages counts the current question: it starts on an answer."""
    if config.settings.memory_type != "windowSize":
        return None
    first_cut = next((t for t in turns if t.outside > 0), None)
    found = first_cut and _first(
        replay, [first_cut], lambda t: True, lambda ledger, sent: bool(sent) and sent[0].role == "assistant"
    )
    if not found:
        return None
    turn, n = found[0], config.settings.window_size
    return Note(
        turn,
        f"At {name(turn)} {subject}'s history starts on an answer whose question was left out: Window "
        f"Size {n} keeps the last {2 * n} messages with the current question counted",
        "Agentflow appends the current question before it takes the window, so an odd number of earlier "
        "messages is sent. Raise the window size by one to keep whole exchanges.",
    )


def question_folded(subject, config, replay, turns, name) -> Note | None:
    """Agentflow's summary buffer can fold the current question itself: it is then not sent."""
    if config.settings.memory_type != "conversationSummaryBuffer":
        return None
    found = _first(
        replay,
        turns,
        lambda t: t.kept == 0,
        lambda ledger, sent: any(s.origin == SUMMARY and ledger.turn in s.covers for s in ledger.synthetic),
    )
    if found is None:
        return None
    turn, limit = found[0], config.settings.max_token_limit or 2000
    return Note(
        turn,
        f"At {name(turn)} {subject} folded the question itself into the summary: the messages' lines "
        f"were over {limit:,} tokens, so the model never sees the question as asked",
        "Agentflow's summary buffer folds the oldest messages, the current question included, until the "
        "rest fit. Raise the Max Token Limit above the longest question.",
    )


#: Each kind's analysis: ``(subject, config, replay, memory turns, turn namer) -> Note | None``.
ANALYSES: dict[str, Callable] = {
    UNSAVED_TURN: unsaved_turn,
    FEWER_EXCHANGES: fewer_exchanges,
    NO_HISTORY: no_history,
    ANSWER_WITHOUT_QUESTION: answer_without_question,
    QUESTION_FOLDED: question_folded,
}

__all__ = [
    "ANALYSES",
    "ANSWER_WITHOUT_QUESTION",
    "FEWER_EXCHANGES",
    "MAX_LEDGERS",
    "NO_HISTORY",
    "Note",
    "QUESTION_FOLDED",
    "TITLES",
    "UNSAVED_TURN",
]
