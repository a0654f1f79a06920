"""Dify 1.17 agent compaction as shipped: the rules of pydantic-ai-harness 0.20.x's tiered
compaction as dify-agent 1.17.1 wires it (spec/dify-memory.md §6), on pydantic-ai's message shape.

pydantic-ai does not keep OpenAI-style messages: a *request* holds everything sent in one go
(the user's prompt, or all the tool results of one step, or a summary) and a *response* holds
one model reply (its text and all its tool calls). Parallel tool calls are therefore one
message, and their results another. Every count below ("20 messages", "3 pairs") is in these
messages, and the current prompt is one of them.

Before **every** model request — the first of a turn and each one inside the tool loop — the
history is estimated and, over the target, compacted:

* **estimate**: the newest reply with provider-reported usage anchors it (its input + output
  tokens cover everything up to and including it); messages after it count ``chars // 4``.
  With no usage stored, everything counts ``chars // 4`` (the instructions once);
* **target**: ``context × 4 // 5``, or ``min(that, context − max_tokens)`` when max_tokens > 0;
  a target ≤ 0 fails the run; no known context window means no compaction;
* **tier 1**: every tool result but the newest 3 becomes ``[tool result cleared]`` (calls keep
  their arguments); the fit is re-estimated by subtracting the cleared characters // 4;
* **tier 2**, still over: keep the newest 20 messages (moving the cut older until no call is
  separated from its result) and the first user message; the rest goes to the summariser with
  the previous summary, and a request holding only ``Summary of previous conversation:\\n\\n…``
  goes first. Nothing more happens if it still does not fit.

What the run stores is the compacted list. When the next run loads it, pydantic-ai merges
consecutive requests, so the summary and the first user message become one message — and at
the next compaction that message (older summary inside) is kept as "the first user message"
and also re-sent to the summariser: summaries pile up, one more per compaction.

The :class:`Compactor` is the one place these rules live; the replayed ledgers and the agent
run's per-request hook both go through it.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Callable, Mapping, Sequence

from core.model.conversation import ANSWER, INTERMEDIATE, QUERY, TOOL_RESULT, Message, ToolCall
from core.model.conversation import TOOL_CALL as TOOL_CALL_KIND

SYSTEM, USER, TOOL_RETURN, TEXT, TOOL_CALL = "system", "user", "tool_return", "text", "tool_call"
REQUEST, RESPONSE = "request", "response"
SUMMARY_HEADER = "Summary of previous conversation:\n\n"
TOOL_PLACEHOLDER = "[tool result cleared]"
KEEP_PAIRS = 3
KEEP_MESSAGES = 20
CHARS_PER_TOKEN = 4
#: How far around a cut the harness looks for a call separated from its result.
PAIR_SEARCH = 5
#: Tool output longer than this is cut (and marked "...") in what the summariser reads.
SUMMARY_TOOL_CHARS = 500
#: Which estimate decided: the provider's usage of the newest reply, or characters only.
BY_USAGE, BY_CHARS = "usage-anchored", "chars/4"


@dataclass(frozen=True)
class Part:
    """One part of a message: its kind, text, and for tools the call id and tool name.
    ``ref`` is the MemLens message it came from (none for a summary)."""

    kind: str
    content: str = ""
    call_id: str = ""
    name: str = ""
    ref: int | str | tuple[int, int] | None = None

    @property
    def is_summary(self) -> bool:
        return self.kind == SYSTEM and self.content.startswith(SUMMARY_HEADER)

    def texts(self) -> tuple[str, ...]:
        """What the estimate counts: a call counts its tool name and arguments."""
        return (self.name, self.content) if self.kind == TOOL_CALL else (self.content,)


@dataclass(frozen=True)
class Group:
    """One pydantic-ai message: a request or a response, and a response's reported usage."""

    kind: str
    parts: tuple[Part, ...]
    usage: tuple[int, int] | None = None  # (input, output) tokens as the provider reported them

    def has(self, kind: str) -> bool:
        return any(p.kind == kind for p in self.parts)


def target_tokens(context: int, max_tokens: int, trigger: float = 0.8) -> int:
    """The target (may be 0 or less: then nothing can run). In integers, as Dify computes it:
    ``context * 4 // 5`` at the fixed 0.8; another trigger (at most 1) is a what-if. Dify takes
    ``context - max_tokens`` only when max_tokens > 0; with max_tokens 0 that is the whole context,
    never below the target, so one ``min`` says both."""
    return min(context * round(trigger * 1000) // 1000, context - max_tokens)


def _chars(groups: Sequence[Group]) -> int:
    return sum(len(t) for g in groups for p in g.parts for t in p.texts())


def heuristic_tokens(groups: Sequence[Group], instructions: str = "") -> int:
    """chars // 4 of every part, the instructions counted once."""
    return (_chars(groups) + len(instructions)) // CHARS_PER_TOKEN


def estimate(groups: Sequence[Group], instructions: str = "") -> tuple[int, str]:
    """``(tokens, which estimate)`` for the request this history makes (see the module docstring)."""
    for i in range(len(groups) - 1, -1, -1):
        g = groups[i]
        if g.kind == RESPONSE and g.usage and g.usage[0]:
            return g.usage[0] + g.usage[1] + _chars(groups[i + 1 :]) // CHARS_PER_TOKEN, BY_USAGE
    return heuristic_tokens(groups, instructions), BY_CHARS


# -- tier 1 ---------------------------------------------------------------------------------------


def tool_pairs(groups: Sequence[Group]) -> list[str]:
    """Call ids of the tool results that answer a call, in the order the results appear."""
    called = {p.call_id for g in groups if g.kind == RESPONSE for p in g.parts if p.kind == TOOL_CALL and p.call_id}
    return [
        p.call_id for g in groups if g.kind == REQUEST for p in g.parts if p.kind == TOOL_RETURN and p.call_id in called
    ]


def clear_tool_results(groups: list[Group], keep: int = KEEP_PAIRS) -> tuple[list[Group], tuple[str, ...]]:
    """Every tool result but the newest ``keep`` replaced by the placeholder; also the ids newly cleared."""
    pairs = tool_pairs(groups)
    clear = set(pairs[: max(0, len(pairs) - keep)])
    if not clear:
        return groups, ()
    out, cleared = [], []
    for g in groups:
        parts = []
        for p in g.parts:
            if p.kind == TOOL_RETURN and p.call_id in clear and p.content != TOOL_PLACEHOLDER:
                parts.append(replace(p, content=TOOL_PLACEHOLDER))
                cleared.append(p.call_id)
            else:
                parts.append(p)
        out.append(replace(g, parts=tuple(parts)))
    return out, tuple(cleared)


# -- tier 2 ---------------------------------------------------------------------------------------


def _safe_cut(groups: Sequence[Group], cut: int) -> bool:
    """No call near the cut (within PAIR_SEARCH messages) has its result on the other side."""
    for i in range(max(0, cut - PAIR_SEARCH), min(len(groups), cut + PAIR_SEARCH)):
        g = groups[i]
        if g.kind != RESPONSE:
            continue
        ids = {p.call_id for p in g.parts if p.kind == TOOL_CALL and p.call_id}
        if not ids:
            continue
        for j in range(i + 1, len(groups)):
            if groups[j].kind == REQUEST and any(p.kind == TOOL_RETURN and p.call_id in ids for p in groups[j].parts):
                if (i < cut) != (j < cut):
                    return False
    return True


def fold_cut(groups: Sequence[Group], keep: int = KEEP_MESSAGES) -> int:
    """How many of the oldest messages are folded: enough to keep ``keep``, moved older past a pair."""
    if keep == 0:
        return len(groups)
    for cut in range(len(groups) - keep, 0, -1):
        if _safe_cut(groups, cut):
            return cut
    return 0  # nothing folded: all of it is kept, or no cut short of the start is safe


def previous_summary(groups: Sequence[Group]) -> str | None:
    """The summary text the summariser is asked to update: the first one met reading the
    history backwards, message by message and part by part (in a message holding several
    summaries — the pile-up — that is the *oldest* of them)."""
    for g in reversed(groups):
        if g.kind != REQUEST:
            continue
        for p in reversed(g.parts):
            if p.is_summary:
                return p.content[len(SUMMARY_HEADER) :]
    return None


def count_summaries(groups: Sequence[Group]) -> int:
    return sum(1 for g in groups if g.kind == REQUEST for p in g.parts if p.is_summary)


def first_user_message(groups: Sequence[Group]) -> int | None:
    return next((i for i, g in enumerate(groups) if g.kind == REQUEST and g.has(USER)), None)


def folded_messages(groups: Sequence[Group], skip_summaries: bool) -> list[Message]:
    """What the summariser reads, as messages: user and system text, assistant text and calls, tool
    output cut to :data:`SUMMARY_TOOL_CHARS` (``...`` marks a cut); earlier summaries are left out
    when the previous summary is given separately."""
    out: list[Message] = []
    for g in groups:
        for p in g.parts:
            ref: int | str = p.ref or ""  # type: ignore[assignment]  # also a (position, index) pair: see _ref_groups
            if p.kind == USER:
                out.append(Message("user", p.content, QUERY, ref))
            elif p.kind == SYSTEM and not (skip_summaries and p.is_summary):
                out.append(Message("system", p.content, INTERMEDIATE, ref))
            elif p.kind == TOOL_RETURN:
                text = p.content[:SUMMARY_TOOL_CHARS] + ("..." if len(p.content) > SUMMARY_TOOL_CHARS else "")
                out.append(Message("tool", text, TOOL_RESULT, ref, name=p.name, tool_call_id=p.call_id))
            elif p.kind == TEXT:
                out.append(Message("assistant", p.content, ANSWER, ref))
            elif p.kind == TOOL_CALL:
                out.append(
                    Message("assistant", "", TOOL_CALL_KIND, ref, tool_calls=(ToolCall(p.call_id, p.name, p.content),))
                )
    return out


# -- reload ---------------------------------------------------------------------------------------


def reload(groups: Sequence[Group]) -> list[Group]:
    """The stored history as the next run loads it: consecutive requests merged into one, tool
    results first (pydantic-ai's clean-up of a loaded history)."""
    out: list[Group] = []
    for g in groups:
        if g.kind == REQUEST and out and out[-1].kind == REQUEST:
            parts = out[-1].parts + g.parts
            parts = tuple(p for p in parts if p.kind == TOOL_RETURN) + tuple(p for p in parts if p.kind != TOOL_RETURN)
            out[-1] = replace(out[-1], parts=parts)
        else:
            out.append(g)
    return out


# -- one check ------------------------------------------------------------------------------------


@dataclass
class CompactionEvent:
    """What one check before a model request decided: the estimate, the tiers that ran, what changed."""

    estimate: int
    estimated_by: str
    target: int
    tiers: list[str] = field(default_factory=list)  # "clear_tool_results", "summarize"
    cleared: tuple[str, ...] = ()  # call ids whose results were cleared now
    folded: int = 0  # messages folded into the summary
    final_estimate: int = 0
    summary: str = ""
    messages_before: int = 0
    messages_after: int = 0
    summaries: int = 0  # summaries in the history sent after the check
    first_user_resent: bool = False  # the first user message went to the summariser

    @property
    def fired(self) -> bool:
        return bool(self.tiers)

    @property
    def still_over(self) -> bool:
        return self.fired and self.final_estimate > self.target

    def to_dict(self) -> dict:
        return {
            "estimate": self.estimate,
            "estimated_by": self.estimated_by,
            "target": self.target,
            "tiers": list(self.tiers),
            "cleared": list(self.cleared),
            "folded": self.folded,
            "final_estimate": self.final_estimate,
            "still_over": self.still_over,
            "messages_before": self.messages_before,
            "messages_after": self.messages_after,
            "summaries": self.summaries,
            "first_user_resent": self.first_user_resent,
            "summary": self.summary,
        }


SummariseFn = Callable[[list[Message], "str | None"], str]


class Compactor:
    """The per-request check of one agent (see the module docstring).

    ``summarize(messages, previous_summary)`` writes the summary text (``previous_summary`` is
    ``None`` the first time); ``context`` ``None`` means the window is unknown: nothing compacts.
    """

    def __init__(
        self,
        context: int | None,
        max_tokens: int,
        summarize: SummariseFn,
        instructions: str = "",
        keep_pairs: int = KEEP_PAIRS,
        keep_messages: int = KEEP_MESSAGES,
        trigger: float = 0.8,
    ):
        self.target = target_tokens(context, max_tokens, trigger) if context else None
        if self.target is not None and self.target <= 0:
            raise ValueError(
                f"compaction target is {self.target:,} tokens: 80% of the {context:,}-token context "
                f"minus max_tokens {max_tokens:,} leaves no room; lower max_tokens or raise the context"
            )
        self.summarize = summarize
        self.instructions = instructions
        self.keep_pairs = keep_pairs
        self.keep_messages = keep_messages

    def before_request(self, groups: list[Group]) -> tuple[list[Group], CompactionEvent | None]:
        """The history sent (and stored) for this request, and the check's record (``None`` when
        the window is unknown)."""
        if self.target is None:
            return groups, None
        tokens, by = estimate(groups, self.instructions)
        event = CompactionEvent(
            tokens,
            by,
            self.target,
            final_estimate=tokens,
            messages_before=len(groups),
            messages_after=len(groups),
            summaries=count_summaries(groups),
        )
        if tokens <= self.target:
            return groups, event
        baseline, heuristic = tokens, heuristic_tokens(groups, self.instructions)
        out = groups
        for tier in ("clear_tool_results", "summarize"):
            before = out
            if tier == "clear_tool_results":
                out, event.cleared = clear_tool_results(out, self.keep_pairs)
            else:
                out = self._fold(out, event)
            if out != before:  # a tier that found nothing to do is not reported as fired
                event.tiers.append(tier)
            current = max(baseline - (heuristic - heuristic_tokens(out, self.instructions)), 0)
            if current <= self.target:
                break
        event.final_estimate = current
        event.messages_after = len(out)
        event.summaries = count_summaries(out)
        return out, event

    def _fold(self, groups: list[Group], event: CompactionEvent) -> list[Group]:
        cut = fold_cut(groups, self.keep_messages)
        if cut <= 0:
            return groups
        previous = previous_summary(groups)
        text = self.summarize(folded_messages(groups[:cut], previous is not None), previous)
        event.summary = text
        event.folded = cut
        out = [Group(REQUEST, (Part(SYSTEM, SUMMARY_HEADER + text),))]
        first = first_user_message(groups)
        if first is not None and first < cut:
            out.append(groups[first])  # kept, and also summarised again (it is among the folded messages)
            event.first_user_resent = True
        return out + list(groups[cut:])


# -- MemLens messages ↔ pydantic-ai messages --------------------------------------------------------


def to_groups(messages: Sequence[Message], usage: Mapping[object, tuple[int, int]] | None = None) -> list[Group]:
    """MemLens messages as pydantic-ai would hold them: user/tool/system messages in a row make one
    request; each assistant message is one response (its text, then its calls), with the usage
    recorded for it (by ``ref``)."""
    usage = usage or {}
    out: list[Group] = []
    for m in messages:
        if m.role == "assistant":
            # A reply with neither text nor calls still is one (empty) text part, as pydantic-ai keeps it.
            parts = ((Part(TEXT, m.content, ref=m.ref),) if m.content or not m.tool_calls else ()) + tuple(
                Part(TOOL_CALL, c.arguments, c.id, c.name, ref=m.ref) for c in m.tool_calls
            )
            out.append(Group(RESPONSE, parts, usage.get(m.ref)))
            continue
        if m.role == "tool":
            part = Part(TOOL_RETURN, m.content, m.tool_call_id or "", m.name or "", ref=m.ref)
        elif m.role == "system":
            part = Part(SYSTEM, m.content, ref=m.ref)
        else:
            part = Part(USER, m.content, ref=m.ref)
        if out and out[-1].kind == REQUEST:
            out[-1] = replace(out[-1], parts=out[-1].parts + (part,))
        else:
            out.append(Group(REQUEST, (part,)))
    return out


# -- the replayed ledger ----------------------------------------------------------------------------


@dataclass(frozen=True)
class ShippedState:
    """What the agent stored after a turn: the compacted history, and the turns each summary covers."""

    stored: tuple[Group, ...] = ()
    covers: Mapping[str, tuple[int, ...]] = field(default_factory=dict)  # summary text → turns it folded


def turn_requests(messages: Sequence[Message], query_index: int | None):
    """A recorded turn as an agent run: the messages up to the query make the first request; then
    each assistant message is one model reply (a check runs before it), and the tool results after
    it make the next request. Yields lists of request messages and single reply messages."""
    if query_index is None:  # an opening turn: stored history, no request
        if messages:
            yield list(messages)
        return
    yield list(messages[: query_index + 1])
    pending: list[Message] = []
    for m in messages[query_index + 1 :]:
        if m.role == "assistant":
            if pending:
                yield pending
                pending = []
            yield m
        else:
            pending.append(m)
    if pending:
        yield pending


def _ref_groups(messages: Sequence[Message], position: int, base: int) -> list[Group]:
    """Messages as groups whose parts point at ``(turn position, message index)``."""
    # A ref outside Message's declared int | str, on purpose: covering() maps a summary's messages to turns by it.
    tagged = [replace(m, ref=(position, base + k)) for k, m in enumerate(messages)]  # type: ignore[arg-type]
    return to_groups(tagged, {m.ref: m.usage for m in tagged if m.usage})


def replay_turn(
    compactor_for: Callable[[SummariseFn], Compactor],
    summarize: SummariseFn,
    previous: ShippedState,
    messages: Sequence[Message],
    position: int,
    query_index: int | None,
    numbers: Sequence[int],
):
    """One recorded turn run as the agent runs it: ``(groups sent at its first request, that check,
    the checks that fired inside the tool loop as (request number, event), the state stored after)``.

    ``compactor_for(summarize)`` builds the turn's compactor around a summariser that also
    records which turns each summary covers (``numbers`` maps turn positions to turn numbers).
    """
    covers = dict(previous.covers)

    def covering(folded: list[Message], prev: str | None) -> str:
        text = summarize(folded, prev)
        # The turns the updated summary covered (none the first time, without a summary to update).
        turns = set(covers.get(prev, ()) if prev is not None else ())
        turns |= {
            numbers[m.ref[0]]  # type: ignore[index]  # a (position, index) ref: see _ref_groups
            for m in folded
            if isinstance(m.ref, tuple)
        }
        covers[text] = tuple(sorted(turns))
        return text

    compactor = compactor_for(covering)
    history = reload(previous.stored)
    first, first_event, loop = None, None, []
    index = request_number = 0

    def before_request(history: list) -> list:
        # Dify checks before every model request: the first one is the turn's own, later ones are inside
        # the tool loop.
        nonlocal request_number, first, first_event
        request_number += 1
        history, event = compactor.before_request(history)
        if request_number == 1:
            first, first_event = list(history), event
        elif event is not None and event.fired:
            loop.append((request_number, event))
        return history

    for item in turn_requests(messages, query_index):
        if isinstance(item, list):
            history = history + _ref_groups(item, position, index)
            index += len(item)
            continue
        history = before_request(history) + _ref_groups([item], position, index)
        index += 1
    if messages and messages[-1].role != "assistant" and query_index is not None:
        # A request still waiting for its reply (an unanswered turn, or a live run's next request) is checked too.
        history = before_request(history)
    return first, first_event, loop, ShippedState(tuple(history), covers)


__all__ = [
    "ShippedState",
    "replay_turn",
    "turn_requests",
    "Part",
    "Group",
    "Compactor",
    "CompactionEvent",
    "target_tokens",
    "estimate",
    "heuristic_tokens",
    "clear_tool_results",
    "fold_cut",
    "previous_summary",
    "folded_messages",
    "reload",
    "to_groups",
    "SUMMARY_HEADER",
    "TOOL_PLACEHOLDER",
    "BY_USAGE",
    "BY_CHARS",
    "KEEP_PAIRS",
    "KEEP_MESSAGES",
]
