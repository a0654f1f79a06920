"""Storing ledgers and prompts in space that grows with the decision, not the conversation.

A turn's ledger lists every message of every earlier turn, so storing it verbatim for each turn
grows with the square of the conversation (2,000 turns ≈ 4 million entries per node). Everything
an entry holds except its reason is a function of the conversation itself: the candidates are
exactly the messages of the turns before it, in order, and each one's token count is what the
recorded model's tokenizer says. So the store keeps, per ledger, its header and the reasons as
runs (``[["outside_window", 812], ["kept", 6]]``), and rebuilds the entries from the stored
conversation when they are read. Likewise the prompt's memory-history messages are the ledger's
kept messages in order; their text is left out and filled back in from the conversation.

Packing is lossless relative to the conversation it was recorded in; :func:`unpack_ledger` checks
that the conversation still has the entries the ledger counted.
"""

from __future__ import annotations

from dataclasses import asdict, fields
from itertools import accumulate
from typing import Any, Mapping, Sequence

from core.memory.entries import expand_runs, pick_entries
from core.memory.replay import turn_numbers
from core.model.conversation import Conversation
from core.model.ledger import HEADER_FIELDS, KEPT, Ledger, LedgerEntry, RunLedger, reason_runs
from core.model.origins import HISTORY
from core.model.tokens import DEFAULT_MODEL, counter_for, message_token_sums

from .errors import LedgerMismatchError

PACKED = "runs-v1"


def is_packed(data: Any) -> bool:
    return isinstance(data, Mapping) and data.get("packed") == PACKED


def pack_ledger(data: "Mapping[str, Any] | Ledger") -> dict:
    """A ledger (a :class:`Ledger` or :meth:`Ledger.to_dict`'s dict) without its per-entry
    data: reasons as runs."""
    if isinstance(data, RunLedger):  # recorded as runs: its entries are not listed to be packed
        out = {k: getattr(data, k) for k in HEADER_FIELDS}
        out["config"] = dict(data.config)
        out.update(
            packed=PACKED,
            count=data.count,
            runs=[list(r) for r in data.runs],
            first_ref=data.first_ref,
            last_ref=data.last_ref,
        )
    elif isinstance(data, Ledger):
        entries = data.entries
        out = {k: getattr(data, k) for k in HEADER_FIELDS}
        out["config"] = dict(data.config)
        out.update(
            packed=PACKED,
            count=len(entries),
            runs=reason_runs(e.reason for e in entries),
            first_ref=entries[0].ref if entries else None,
            last_ref=entries[-1].ref if entries else None,
        )
    if isinstance(data, Ledger):
        if data.synthetic:
            out["synthetic"] = [asdict(m) for m in data.synthetic]
        if data.compactions:
            out["compactions"] = [dict(c) for c in data.compactions]
        return out
    if is_packed(data):
        return dict(data)
    out = {k: data.get(k) for k in HEADER_FIELDS}
    entries = data.get("entries") or []
    out.update(
        packed=PACKED,
        count=len(entries),
        runs=reason_runs(e["reason"] for e in entries),
        first_ref=entries[0]["ref"] if entries else None,
        last_ref=entries[-1]["ref"] if entries else None,
    )
    if data.get("synthetic"):
        out["synthetic"] = list(data["synthetic"])
    if data.get("compactions"):
        out["compactions"] = list(data["compactions"])
    return out


def unpack_entries(data: Mapping[str, Any], conversation: Conversation, position: int) -> list[LedgerEntry]:
    """The full entries of a packed ledger recorded at the turn at ``position``."""
    model = (data.get("config") or {}).get("model") or DEFAULT_MODEL
    counter = counter_for(model)
    candidates = [(p, i, m) for p in range(position) for i, m in enumerate(conversation.turns[p].messages)]
    if len(candidates) != data.get("count"):
        raise LedgerMismatchError(
            f"stored ledger of turn {data.get('turn')} counts {data.get('count')} earlier "
            f"messages but the conversation has {len(candidates)} before it"
        )
    if candidates and (candidates[0][2].ref != data.get("first_ref") or candidates[-1][2].ref != data.get("last_ref")):
        raise LedgerMismatchError(
            f"stored ledger of turn {data.get('turn')} does not match this conversation's messages"
        )
    counter.prepare(m for _, _, m in candidates)  # a long history: one batch across the cores
    if sum(int(n) for _, n in data.get("runs") or []) != len(candidates):
        raise LedgerMismatchError(
            f"stored ledger of turn {data.get('turn')} gives reasons for a different number of messages than it counts"
        )
    turns = conversation.turns
    return expand_runs(
        conversation,
        position,
        data.get("runs") or [],
        turn_numbers(conversation),
        lambda p: counter.messages(turns[p].messages),
    )


def unpack_ledger(data: Mapping[str, Any], conversation: Conversation, position: int) -> Ledger:
    """A :class:`Ledger` from its stored form (packed or full). A packed one is a :class:`RunLedger`: its
    reasons' runs and kept entries at hand, every earlier message listed only when first read — opening a
    turn of a long conversation (the Debugger's Inspect) builds the few entries a view shows, not tens of
    thousands."""
    if not is_packed(data):
        return Ledger.from_dict(data)
    turns = conversation.turns
    before = list(accumulate((len(t.messages) for t in turns[:position]), initial=0))
    count, runs = data.get("count"), [list(r) for r in data.get("runs") or []]
    if before[-1] != count:
        raise LedgerMismatchError(
            f"stored ledger of turn {data.get('turn')} counts {count} earlier "
            f"messages but the conversation has {before[-1]} before it"
        )
    first = next((t.messages[0] for t in turns[:position] if t.messages), None)
    last = next((t.messages[-1] for t in reversed(turns[:position]) if t.messages), None)
    if first is not None and (first.ref != data.get("first_ref") or last.ref != data.get("last_ref")):
        raise LedgerMismatchError(
            f"stored ledger of turn {data.get('turn')} does not match this conversation's messages"
        )
    if sum(int(n) for _, n in runs) != count:
        raise LedgerMismatchError(
            f"stored ledger of turn {data.get('turn')} gives reasons for a different number of messages than it counts"
        )
    counter = counter_for((data.get("config") or {}).get("model") or DEFAULT_MODEL)
    numbers = turn_numbers(conversation)

    def tokens(p: int):
        return counter.messages(turns[p].messages)

    def pick(ranges):
        return pick_entries(conversation, runs, ranges, numbers, tokens, before)

    kept_ranges, at = [], 0
    for reason, n in runs:
        if reason == KEPT:
            kept_ranges.append((at, at + int(n)))
        at += int(n)
    header = Ledger.from_dict(data, [])
    return RunLedger(
        runs=runs,
        kept=pick(kept_ranges),
        count=count,
        first_ref=data.get("first_ref"),
        last_ref=data.get("last_ref"),
        expand=lambda r: expand_runs(conversation, position, r, numbers, tokens),
        pick=pick,
        offset=lambda p: before[min(max(p, 0), position)],
        tokens=tokens,
        token_sums=lambda: message_token_sums(conversation, counter, position),
        **{f.name: getattr(header, f.name) for f in fields(Ledger) if f.name != "entries"},
    )


def pack_prompt(prompt: Sequence[Mapping[str, Any]] | None, ledger: "Mapping[str, Any] | Ledger | None") -> list | None:
    """The prompt with its memory-history texts left out when they are exactly the kept messages."""
    if not prompt or not ledger:
        return list(prompt) if prompt is not None else None
    if isinstance(ledger, Ledger):
        if ledger.synthetic:
            return list(prompt)
        kept_roles = [e.role for e in ledger.kept]
    else:
        if ledger.get("synthetic"):
            return list(prompt)
        kept_roles = [e["role"] for e in ledger.get("entries") or [] if e.get("kept")]
    history = [m for m in prompt if m.get("origin") == HISTORY]
    if len(history) != len(kept_roles) or any(m["role"] != r for m, r in zip(history, kept_roles)):
        return list(prompt)
    return [{**m, "content": None, "from_ledger": True} if m.get("origin") == HISTORY else dict(m) for m in prompt]


def unpack_prompt(
    prompt: Sequence[Mapping[str, Any]] | None, ledger: Ledger | None, conversation: Conversation
) -> list[dict] | None:
    if prompt is None:
        return None
    if not any(m.get("from_ledger") for m in prompt):
        return [dict(m) for m in prompt]
    kept = ledger.kept if ledger else []
    texts = iter(conversation.turns[e.position].messages[e.index].content for e in kept)
    out = []
    for m in prompt:
        m = dict(m)
        if m.pop("from_ledger", False):
            m["content"] = next(texts, "")
        out.append(m)
    return out


def unpack_node_run(run: Mapping[str, Any], conversation: Conversation, position: int) -> dict:
    """A stored node run with its ledger as a :class:`Ledger` and its prompt's texts filled in."""
    out = dict(run)
    try:
        ledger = unpack_ledger(run["ledger"], conversation, position) if run.get("ledger") else None
        prompt = unpack_prompt(run.get("prompt"), ledger, conversation)
    except (KeyError, TypeError, ValueError, AttributeError, IndexError):
        # A ledger or prompt the codec cannot read, or one that does not fit its conversation
        # (LedgerMismatchError is a ValueError): shown as damaged, not as a crash.
        out["damaged"] = [*(run.get("damaged") or []), "ledger"]
        ledger = prompt = None
    out["ledger"] = ledger
    out["prompt"] = prompt
    return out
