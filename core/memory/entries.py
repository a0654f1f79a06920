"""A ledger's entries read from its reasons as runs, and the history a ledger sends."""

from __future__ import annotations

from bisect import bisect_right
from dataclasses import replace
from typing import Callable, Sequence

from core.model.conversation import INTERMEDIATE, TOOL_CALL, TOOL_RESULT, Conversation, Message, ToolCall
from core.model.ledger import KEPT, SCRATCHPAD, STORED, Ledger, LedgerEntry


def history_of(conversation: Conversation, ledger: Ledger) -> list[Message]:
    """The history a ledger sends, in the order it is sent: a summary or an input's messages first
    (as synthetic messages), then the kept messages, each cleared or partially kept one replaced by
    what was sent instead of it (its content; a scratchpad is an assistant text of its own, without
    the tool calls or files of the message it stands in for; a message stored in another shape is
    that message: its role, text, tool calls and call id)."""
    turns = conversation.turns
    if not ledger.synthetic:  # no stand-ins: the kept messages (a RunLedger lists only those)
        return [turns[e.position].messages[e.index] for e in ledger.kept]
    out: list[Message] = [
        Message(s.role, s.content, INTERMEDIATE, s.ref or s.origin) for s in ledger.synthetic if s.replaces is None
    ]
    stand_ins = ledger.stand_ins()
    for e in ledger.entries:
        sent = stand_ins.get((e.position, e.index))
        if sent:
            message = turns[e.position].messages[e.index]
            for stand_in in sent:
                if stand_in.origin == SCRATCHPAD:
                    out.append(Message(stand_in.role, stand_in.content, message.kind, message.ref))
                elif stand_in.origin == STORED:
                    kind = TOOL_RESULT if stand_in.role == "tool" else TOOL_CALL if stand_in.calls else message.kind
                    out.append(
                        Message(
                            stand_in.role,
                            stand_in.content,
                            kind,
                            stand_in.ref,
                            tool_calls=tuple(ToolCall(*c) for c in stand_in.calls),
                            tool_call_id=stand_in.call_id or None,
                        )
                    )
                else:
                    out.append(replace(message, content=stand_in.content))
        elif e.kept:
            out.append(turns[e.position].messages[e.index])
    return out


def expand_runs(
    conversation: Conversation, position: int, runs, numbers: Sequence[int], tokens: Callable[[int], tuple[int, ...]]
) -> list[LedgerEntry]:
    """The entries of the ledger of the turn at ``position`` from its reasons as runs: the
    candidates are exactly the messages of the turns before it, in order; ``tokens(p)`` gives
    the token counts of turn ``p``'s messages and ``numbers`` the turn numbers."""
    reasons: list[str] = []
    for reason, n in runs:
        reasons += [reason] * int(n)
    turns = conversation.turns
    entries: list[LedgerEntry] = []
    add, entry, k = entries.append, LedgerEntry, 0
    for p in range(position):
        toks, number = tokens(p), numbers[p]
        for m, msg in enumerate(turns[p].messages):
            reason = reasons[k]
            k += 1
            # positional: ref, turn, role, tokens, kept, reason, kind, position, index (a long ledger's
            # listing builds one entry per earlier message)
            add(entry(msg.ref, number, msg.role, toks[m], reason == KEPT, reason, msg.kind, p, m))
    return entries


def pick_entries(
    conversation: Conversation,
    runs,
    ranges: Sequence[tuple[int, int]],
    numbers: Sequence[int],
    tokens: Callable[[int], tuple[int, ...]],
    before: Sequence[int],
) -> list[LedgerEntry]:
    """The entries at the candidates' offsets in ``ranges`` (``[lo, hi)`` pairs, ascending) of a
    ledger whose reasons are ``runs``: what :func:`expand_runs` lists there, without the rest.
    ``before[p]`` counts the messages of the turns before ``p``."""
    starts, at = [], 0
    for _, n in runs:
        starts.append(at)
        at += int(n)
    turns = conversation.turns
    out: list[LedgerEntry] = []
    for lo, hi in ranges:
        for k in range(lo, hi):
            p = bisect_right(before, k) - 1  # the turn holding candidate k (a turn without messages holds none)
            m = k - before[p]
            reason = runs[bisect_right(starts, k) - 1][0]
            msg = turns[p].messages[m]
            out.append(LedgerEntry(msg.ref, numbers[p], msg.role, tokens(p)[m], reason == KEPT, reason, msg.kind, p, m))
    return out
