"""What a captured call's payload held, as a ledger and as a receipt: observed, not emulated.

The ledger lists every earlier message of the conversation, as a replay's does (the turns before
the call's, in creation order), and says for each whether the payload held it. A message it did not
hold gets the reason that describes where the gap is, in the shared vocabulary
(:mod:`core.model.ledger`), without claiming a rule:

* on another branch → ``other_branch`` (never this call's to send);
* older than every message of the thread the payload held (or the payload held none) →
  ``outside_window``: the payload's history starts after it;
* between messages the payload held: a tool call, tool result or reasoning → ``granularity``; an
  empty message → ``empty``; any other → ``not_sent``.

Which memory rule explains those sets is :mod:`core.capture.inference`'s question. A payload message
that no turn holds (a summary, a rewritten message) is listed as a synthetic message of origin
``payload only``. The receipt is the payload itself, row by row, each counted under the call's model.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Iterable, Mapping, Sequence

from core.memory.replay import turn_numbers
from core.model.conversation import INTERMEDIATE, REASONING, TOOL_CALL, TOOL_RESULT, Conversation, Message, message_text
from core.model.ledger import (
    EMPTY,
    GRANULARITY,
    KEPT,
    NOT_SENT,
    OBSERVED,
    OTHER_BRANCH,
    OUTSIDE_WINDOW,
    PAYLOAD_ONLY,
    Ledger,
    LedgerEntry,
    SyntheticMessage,
)
from core.model.origins import CURRENT_QUERY, HISTORY, PAYLOAD_ONLY_ORIGIN, TOOL_ROUND
from core.model.origins import SYSTEM as SYSTEM_ORIGIN
from core.model.origins import TEMPLATE as TEMPLATE_ORIGIN
from core.model.tokens import DEFAULT_MODEL, REPLY_PRIMING, counter_for, model_facts

from .calls import HISTORY as HISTORY_ROLE
from .calls import QUERY, STEP, SYSTEM, TEMPLATE, UNMATCHED

#: The receipt's origin of each role the threader gives a payload message: the words around a history sent as
#: text lines are the node's template.
ORIGINS = {
    SYSTEM: SYSTEM_ORIGIN,
    HISTORY_ROLE: HISTORY,
    UNMATCHED: PAYLOAD_ONLY_ORIGIN,
    QUERY: CURRENT_QUERY,
    STEP: TOOL_ROUND,
    TEMPLATE: TEMPLATE_ORIGIN,
}
#: A receipt row's key for the tokens of the history its text holds (a history sent as text lines).
HISTORY_TOKENS = "history_tokens"
#: Kinds the payload may leave out between messages it holds (an app that keeps questions and answers only).
_INTERMEDIATE = {TOOL_CALL, TOOL_RESULT, REASONING, INTERMEDIATE}


def payload_rows(
    messages: Sequence[Message], roles: Sequence[str], model: str, text: Mapping | None = None
) -> list[dict]:
    """The receipt of a payload: each message as sent, in order, with its origin and its tokens under
    ``model``'s encoding (estimated where no exact tokenizer exists). With a history sent as text
    (``text``, :func:`core.capture.threader.text_record`), the message holding it also says how many of
    its tokens the history's lines are (:data:`HISTORY_TOKENS`): its tokens less those without them."""
    counter = counter_for(model or DEFAULT_MODEL)
    rows = [
        {"role": m.role, "origin": ORIGINS.get(role, role), "tokens": counter.message(m), "content": message_text(m)}
        for m, role in zip(messages, roles)
    ]
    if text is not None and 0 <= int(text["index"]) < len(messages):
        k = int(text["index"])
        m = messages[k]
        bare = replace(m, content=m.content[: int(text["start"])] + m.content[int(text["end"]) :])
        rows[k][HISTORY_TOKENS] = max(rows[k]["tokens"] - counter.message(bare), 0)
    return rows


def observed_ledger(
    conversation: Conversation,
    position: int,
    kept: Iterable[tuple[int, int]],
    *,
    rows: Sequence[dict],
    model: str,
    node: str = "",
    text: Mapping | None = None,
) -> Ledger:
    """The ledger of a call at the turn at ``position`` whose payload held the thread messages ``kept``
    (``(position, index)`` pairs) and the receipt ``rows`` (:func:`payload_rows`). With a history sent as
    text (``text``), each message counts as its line and the history as the lines' share of the message
    that held them; a line no turn holds is a payload-only message."""
    counter = counter_for(model or DEFAULT_MODEL)
    prefixes = {"user": str(text["user"]), "assistant": str(text["assistant"])} if text is not None else None

    def tokens(m: Message) -> int:
        if prefixes is None:
            return counter.message(m)
        return counter.text(f"{prefixes.get(m.role, m.role)}: {message_text(m)}")

    kept = set(kept)
    thread = set(conversation.tree.thread(position)) if conversation.turns else set()
    oldest = min(kept) if kept else None
    entries: list[LedgerEntry] = []
    numbers = turn_numbers(conversation)
    for p in range(position):
        turn = conversation.turns[p]
        for i, m in enumerate(turn.messages):
            if (p, i) in kept:
                reason = KEPT
            elif p not in thread:
                reason = OTHER_BRANCH
            elif oldest is None or (p, i) < oldest:
                reason = OUTSIDE_WINDOW
            elif m.kind in _INTERMEDIATE:
                reason = GRANULARITY
            elif m.is_empty:
                reason = EMPTY
            else:
                reason = NOT_SENT
            entries.append(LedgerEntry(m.ref, numbers[p], m.role, tokens(m), reason == KEPT, reason, m.kind, p, i))
    synthetic = [
        SyntheticMessage(
            role=r["role"],
            content=r["content"],
            tokens=int(r["tokens"]),
            origin=PAYLOAD_ONLY,
            turn=numbers[position],
            ref=f"payload:{k}",
        )
        for k, r in enumerate(rows)
        if r["origin"] == PAYLOAD_ONLY_ORIGIN
    ]
    if text is not None:
        synthetic += [
            SyntheticMessage(
                role=line["role"],
                content=line["content"],
                tokens=tokens(Message(line["role"], line["content"], "", k)),
                origin=PAYLOAD_ONLY,
                turn=numbers[position],
                ref=f"text:{k}",
            )
            for k, line in enumerate(text.get("lines") or [])
            if line.get("place") is None
        ]
        history = sum(int(r.get(HISTORY_TOKENS) or 0) for r in rows)
    else:
        history = sum(e.tokens for e in entries if e.kept) + sum(s.tokens for s in synthetic)
    prompt = sum(int(r["tokens"]) for r in rows) + REPLY_PRIMING
    context = model_facts(model or DEFAULT_MODEL).context_size
    return Ledger(
        turn=numbers[position],
        entries=entries,
        prompt_tokens=prompt,
        history_tokens=history,
        budget=None,
        budget_note="observed: what the payload held, not a memory's budget",
        config={OBSERVED: True, "model": model or DEFAULT_MODEL, "node": node},
        context_size=context,
        exceeds_context=bool(context) and prompt > context,
        synthetic=synthetic,
    )


def fixed_tokens(rows: Sequence[dict]) -> int:
    """What a call's prompt held besides its history (system, query, its own tool round, the reply's
    priming): what a replay of the node's memory subtracts as the prompt. A message holding a history sent as
    text counts without its lines."""
    return (
        sum(
            int(r["tokens"]) - int(r.get(HISTORY_TOKENS) or 0)
            for r in rows
            if r["origin"] not in (HISTORY, PAYLOAD_ONLY_ORIGIN)
        )
        + REPLY_PRIMING
    )


__all__ = ["HISTORY_TOKENS", "ORIGINS", "fixed_tokens", "observed_ledger", "payload_rows"]
