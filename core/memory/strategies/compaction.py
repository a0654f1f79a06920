"""Dify 1.17's agent history compaction (the Dify Agent history layer; spec/dify-memory.md §6
says Dify main had none before it; spec/memory-models.md §G for the conflicts it sides with).

Two profiles (``MemoryConfig.compaction_profile``):

* ``shipped`` (default) — Dify 1.17 as shipped: the rules of pydantic-ai-harness 0.20.x as
  dify-agent 1.17.1 runs them, checked before every model request, on pydantic-ai's messages,
  with the usage-anchored chars/4 estimate and the summary pile-up on reload. They live in
  :mod:`core.memory.strategies.shipped_compaction`; a recorded turn is replayed request by request.
* ``exact`` — MemLens's own variant, described below: the same thresholds with an exact token
  count of the prompt, checked once per turn, one running summary.

The rest of this docstring describes the ``exact`` profile.

Before each model request the whole prompt is estimated against a target of
``floor(context × 0.8)`` — ``min(that, context − max_tokens)`` when ``max_tokens`` is set. Over
the target, old tool results are cleared first: every tool result but the latest three keeps its
place and its call, with its content replaced by ``[tool result cleared]``. Still over, older
history is folded into one summary, keeping the latest twenty messages and the first user
message; the compacted history is what the conversation stores, so it carries to later turns.

Thresholds (``MemoryConfig`` fields, pinned by tests):

* ``compaction_trigger`` 0.8 — the target as a fraction of the model's context window
  (``context_size`` or the model map); a target of 0 or less rejects the config, as Dify
  rejects the run; an unknown context window means no compaction, as Dify only compacts when
  the model's window is known;
* ``compaction_keep_tool_results`` 3 — the newest tool results never cleared;
* ``compaction_keep_messages`` 20 — the newest messages never summarised.

Decisions pinned here:

* the estimate is MemLens's exact count of the prompt as sent (system prompt, history with the
  summary and placeholders, current query, reply priming), checked once per turn, before the
  turn's first request; compaction inside a turn's own tool loop is not replayed;
* every message of a turn counts (tool calls and results too): an agent replays its full
  history as stored, so granularity does not apply and an empty message is sent too (an empty
  tool result still answers its call);
* a tool result is cleared, not paired: calls keep their arguments, so pairs stay valid;
* the cut before the kept messages never lands on a tool result (it moves to older messages
  until it does not), so a tool call is never separated from its results;
* the summary is a system message ``"Summary of previous conversation (turns 1–9):\\n\\n…"``,
  sent first, then the first user message, then the kept messages; a later compaction updates
  it from the previous summary text and the newly folded messages. The first user message is
  given to the summariser once, when it is first kept apart: given again, its old facts would
  overwrite newer ones in the offline summary.

A turn's state — where the kept part starts, which tool results are cleared, the summary — is
carried along the thread, with running sums over tool results, so a turn costs O(log n) plus
one summariser call when something is folded.
"""

from __future__ import annotations

import hashlib
from bisect import bisect_left
from dataclasses import dataclass, replace
from typing import Mapping, Sequence
from weakref import WeakKeyDictionary

from core.model.conversation import INTERMEDIATE, Message
from core.model.ledger import CLEARED, KEPT, PLACEHOLDER, SUMMARIZED, SUMMARY, SyntheticMessage, format_spans

from ..errors import ConfigError
from ..summarize import SECTIONS_OFFLINE, section_prompt
from . import shipped_compaction as shipped
from .base import Budget, PathView, Plan, Spans, Strategy, add_turns, message_at, span_turns, tokens_between, turn_at
from .settings import CHOICE, FLOAT, NUMBER, SLIDER, TEXT, Setting, Widget

DEFAULT_TRIGGER = 0.8
DEFAULT_KEEP_MESSAGES = 20
DEFAULT_KEEP_TOOL_RESULTS = 3
TOOL_PLACEHOLDER = shipped.TOOL_PLACEHOLDER
SHIPPED, EXACT = "shipped", "exact"
COMPACTION_PROFILES = {SHIPPED: "Dify 1.17 as shipped", EXACT: "exact estimate (MemLens's own)"}


#: Dify's compaction target for a context window: one rule for both profiles.
compaction_target = shipped.target_tokens
#: Where a turn keeps the compaction summaries its run wrote (``Turn.meta`` and the stored turn).
SUMMARIES_META = "compaction_summaries"


@dataclass(frozen=True)
class CompactionState:
    """The stored history after a turn's request: ``[summary] + [pinned] + thread[start:]``,
    with the tool results in ``[start, clear_before)`` sent as placeholders."""

    start: int = 0
    pinned: int | None = None  # the first user message, kept although older than ``start``
    clear_before: int = 0
    text: str = ""
    covers: Spans = ()
    content: str = ""
    tokens: int = 0


def summary_content(covers: Spans, text: str) -> str:
    return f"Summary of previous conversation ({format_spans(covers)}):\n\n{text}"


class ToolView:
    """Running sums over the tool results of a thread view, kept in step with it."""

    def __init__(self, view, replay):
        self.view = view
        self.replay = replay
        self.at: list[int] = []  # view indices of tool results
        self.tokens = [0]  # their tokens, cumulative
        self.placeholder_tokens = [0]  # tokens of their placeholders, cumulative
        self.marks: list[int] = []

    def push(self, position, eligible, tokens):
        self.marks.append(len(self.at))
        base = self.view.length - len(eligible)
        messages = self.replay.conversation.turns[position].messages
        for k, j in enumerate(eligible):
            msg = messages[j]
            if msg.role != "tool":
                continue
            self.at.append(base + k)
            self.tokens.append(self.tokens[-1] + tokens[j])
            self.placeholder_tokens.append(self.placeholder_tokens[-1] + placeholder_tokens(self.replay, msg))

    def pop(self):
        keep = self.marks.pop()
        del self.at[keep:], self.tokens[keep + 1 :], self.placeholder_tokens[keep + 1 :]

    def cleared(self, lo: int, hi: int) -> tuple[int, int, int]:
        """(count, tokens, placeholder tokens) of the tool results in [lo, hi)."""
        if hi <= lo:
            return 0, 0, 0
        a, b = bisect_left(self.at, lo), bisect_left(self.at, hi)
        return b - a, self.tokens[b] - self.tokens[a], self.placeholder_tokens[b] - self.placeholder_tokens[a]


def placeholder_tokens(replay, message) -> int:
    return replay.counter.message(replace(message, content=TOOL_PLACEHOLDER))


class CompactionView(PathView):
    """A thread view that also tracks tool results and the thread's first user message."""

    __slots__ = ("tools", "first_user", "replay")

    def __init__(self, replay):
        super().__init__(replay.numbers)
        self.replay = replay
        self.tools = ToolView(self, replay)
        self.first_user: list[int | None] = []

    def push(self, position, mark, eligible, tokens, empty, state=None):
        super().push(position, mark, eligible, tokens, empty, state)
        self.tools.push(position, eligible, tokens)
        first = self.first_user[-1] if self.first_user else None
        if first is None:
            messages = self.replay.conversation.turns[position].messages
            base = self.length - len(eligible)
            first = next((base + k for k, j in enumerate(eligible) if messages[j].role == "user"), None)
        self.first_user.append(first)

    def pop(self):
        super().pop()
        self.tools.pop()
        self.first_user.pop()


class CompactionPlan(Plan):
    def __init__(self, budget, state: CompactionState, view, replay):
        end = view.length
        n_cleared, cleared_tokens, placeholders = view.tools.cleared(state.start, min(state.clear_before, end))
        kept = end - state.start - n_cleared
        history = tokens_between(view, state.start, end) - cleared_tokens + placeholders + state.tokens
        oldest = state.pinned
        if oldest is not None:
            kept += 1
            history += tokens_between(view, oldest, oldest + 1)
        else:
            oldest = state.start
            while oldest < min(state.clear_before, end) and message_at(view, replay, oldest).role == "tool":
                oldest += 1  # a cleared tool result is not kept; runs of them are short
            if oldest >= end:
                oldest = None
        super().__init__(budget, state, kept, history, turn_at(view, replay, oldest))

    def reason(self, i, message):
        s = self.state
        if i < s.start and i != s.pinned:
            return SUMMARIZED
        if i < s.clear_before and i >= s.start and message.role == "tool":
            return CLEARED
        return KEPT

    def synthetic(self, view, replay):
        s = self.state
        out = []
        if s.content:
            out.append(
                SyntheticMessage(
                    role="system",
                    content=s.content,
                    tokens=s.tokens,
                    origin=SUMMARY,
                    turn=s.covers[-1][1],
                    covers=span_turns(s.covers),
                    ref="summary",
                )
            )
        for k in range(bisect_left(view.tools.at, s.start), bisect_left(view.tools.at, s.clear_before)):
            i = view.tools.at[k]
            msg = message_at(view, replay, i)
            number = replay.numbers[view.seq_pos[i]]
            out.append(
                SyntheticMessage(
                    role="tool",
                    content=TOOL_PLACEHOLDER,
                    tokens=placeholder_tokens(replay, msg),
                    origin=PLACEHOLDER,
                    turn=number,
                    covers=(number,),
                    replaces=(view.seq_pos[i], view.seq_msg[i]),
                    ref=f"cleared:{msg.ref}",
                )
            )
        return out


_TRIGGER_RULE = "it is a fraction of the context size, above 0 and at most 1"
#: The most the config editor offers for compaction_keep_messages (a bound on what is typed).
EDITOR_MOST = 500


class CompactionStrategy(Strategy):
    name = "compaction"
    help = "clear old tool results, then summarise older history"
    settings = (
        Setting(
            "compaction_profile",
            SHIPPED,
            "shipped = Dify 1.17 as shipped (per request, usage-anchored "
            "chars/4); exact = MemLens's exact-count estimate, once per turn",
            kind=TEXT,
            choices=tuple(COMPACTION_PROFILES),
            labels=COMPACTION_PROFILES,
            words="compaction profile",
            flag="--compaction-profile",
            widget=Widget(
                CHOICE,
                "Profile",
                key="compaction_profile",
                help="Dify 1.17 as shipped: checked before every model request (inside the tool loop "
                "too), estimated from the provider's reported usage plus characters/4, summaries "
                "pile up on reload. Exact estimate: MemLens's own variant, an exact token count "
                "checked once per turn.",
            ),
        ),
        Setting(
            "compaction_trigger",
            DEFAULT_TRIGGER,
            "the target as a fraction of the context size",
            kind=FLOAT,
            maximum=1,
            words="compaction trigger",
            rule=_TRIGGER_RULE,
            flag="--compaction-trigger",
            widget=Widget(
                SLIDER, "Compact at (share of context)", key="compaction_trigger", minimum=0.1, maximum=1.0, step=0.05
            ),
        ),
        Setting(
            "compaction_keep_messages",
            DEFAULT_KEEP_MESSAGES,
            "the newest messages never summarised",
            minimum=0,
            flag="--compaction-keep-messages",
            widget=Widget(NUMBER, "Keep newest messages", key="compaction_keep", minimum=1, maximum=EDITOR_MOST),
        ),
        Setting(
            "compaction_keep_tool_results",
            DEFAULT_KEEP_TOOL_RESULTS,
            "the newest tool results never cleared",
            minimum=0,
            flag="--compaction-keep-tool-results",
        ),
    )
    plans = True
    uses_granularity = False
    drops_empty = False

    def label(self, config):
        s = config.settings
        return f"compaction at {s.compaction_trigger:.0%} of context, {COMPACTION_PROFILES[s.compaction_profile]}"

    def explain(self, entry, config):
        if entry.reason == SUMMARIZED:
            return "folded into the compaction summary (the prompt was over the compaction target)"
        return None

    def finding_kinds(self, config):
        return ("compaction",) if self.compacts_per_request(config) else ()

    def compacts_per_request(self, config):
        return config.settings.compaction_profile == SHIPPED

    def validate(self, config):
        trigger = config.settings.compaction_trigger
        if not 0 < trigger <= 1:
            raise ConfigError(f"compaction trigger {trigger} is out of range: {_TRIGGER_RULE}")

    def new_view(self, replay):
        return CompactionView(replay)

    def check(self, config, facts):
        context = config.context_size or facts.context_size
        if context and compaction_target(context, config.max_tokens, config.settings.compaction_trigger) <= 0:
            return (
                f"compaction target is {compaction_target(context, config.max_tokens, config.settings.compaction_trigger):,} "
                f"tokens: {config.settings.compaction_trigger:.0%} of the {context:,}-token context minus max_tokens "
                f"{config.max_tokens:,} leaves no room; lower max_tokens or raise the context size"
            )
        return None

    def default_summarizer(self, config):
        return SECTIONS_OFFLINE if config.settings.compaction_profile == SHIPPED else super().default_summarizer(config)

    def plan(self, view, current, replay):
        if replay.config.settings.compaction_profile == SHIPPED:
            return shipped_plan(view, current, replay)
        cfg = replay.config
        context = cfg.context_size or replay.facts.context_size
        previous: CompactionState = (view.states[-1] if view.states else None) or CompactionState()
        fixed = replay.fixed_prompt_tokens(current)
        if not context:
            budget = Budget(
                None,
                f"context size of {cfg.model} unknown: Dify compacts only when the model's context window is known",
                None,
            )
            return CompactionPlan(budget, previous, view, replay)
        target = compaction_target(context, cfg.max_tokens, cfg.settings.compaction_trigger)
        limit = max(target - fixed, 0)
        budget = Budget(
            limit,
            f"compaction target {target:,} ({cfg.settings.compaction_trigger:.0%} of {context:,}"
            + (f", at most context − {cfg.max_tokens:,} max_tokens" if cfg.max_tokens else "")
            + f") − {fixed:,} prompt",
            context,
        )
        state = previous
        plan = CompactionPlan(budget, state, view, replay)
        if plan.history_tokens <= limit:
            return plan
        # Tier 1: clear every tool result but the newest few.
        tools = view.tools.at
        keep_tools = cfg.settings.compaction_keep_tool_results
        if len(tools) > keep_tools:
            boundary = tools[len(tools) - keep_tools] if keep_tools else view.length
            if boundary > state.clear_before:
                state = replace(state, clear_before=boundary)
                plan = CompactionPlan(budget, state, view, replay)
                if plan.history_tokens <= limit:
                    return plan
        # Tier 2: fold everything but the newest messages (and the first user message) into the summary.
        end = view.length
        cut = end - cfg.settings.compaction_keep_messages
        while state.start < cut < end and message_at(view, replay, cut).role == "tool":
            cut -= 1
        first_user = view.first_user[-1] if view.first_user else None
        pinned = state.pinned
        if pinned is None and first_user is not None and first_user < cut:
            pinned = first_user
        if cut > state.start and any(i != pinned for i in range(state.start, cut)):
            folded_at = range(state.start, cut)
            folded = []
            for i in folded_at:
                msg = message_at(view, replay, i)
                if msg.role == "tool" and i < state.clear_before:
                    msg = replace(msg, content=TOOL_PLACEHOLDER)
                folded.append(msg)
            covers = add_turns(
                state.covers, (replay.numbers[view.seq_pos[i]] for i in range(state.start, cut) if i != pinned)
            )
            text = replay.summarizer.summarize(folded, state.text)
            content = summary_content(covers, text)
            state = replace(
                state,
                start=cut,
                pinned=pinned,
                text=text,
                covers=covers,
                content=content,
                tokens=replay.counter.chat("system", content),
            )
            plan = CompactionPlan(budget, state, view, replay)
        return plan


# -- the shipped profile ----------------------------------------------------------------------------


def summary_key(model: str, messages: Sequence[Message], previous_summary: str) -> str:
    """What a summary was written from — the run's model and the summariser's whole prompt — as a digest."""
    return hashlib.sha256(f"{model}\n{section_prompt(messages, previous_summary)}".encode()).hexdigest()


def stored_summaries(meta: Mapping | None) -> list[Mapping]:
    """The summaries a stored turn holds; an entry a reader cannot use (a damaged or hand-edited row)
    is left out, so that compaction writes that summary again rather than failing."""
    entries = (meta or {}).get(SUMMARIES_META)
    if not isinstance(entries, list):
        return []
    return [
        e
        for e in entries
        if isinstance(e, Mapping) and isinstance(e.get("key"), str) and isinstance(e.get("summary"), str)
    ]


class RecordedSummaries:
    """The shipped profile's summaries for one replay: a summary written before from the same input —
    stored with an earlier turn, or written earlier in this replay — is given back as it was written;
    any other is written by the replay's summariser and kept in :attr:`written`, so a run stores it
    with its turn. Reopening, replaying and what-if with the run's settings thus show the summary the
    run's model wrote, not one written again."""

    def __init__(self, replay):
        self.replay = replay
        self.known: dict[str, Mapping] = {}
        self.scanned = 0
        self.written: list[dict] = []

    def summarize(self, messages: Sequence[Message], previous_summary: str | None) -> str:
        turns = self.replay.conversation.turns
        for turn in turns[self.scanned :]:  # turns recorded since the last call too
            for entry in stored_summaries(turn.meta):
                self.known.setdefault(entry["key"], entry)
        self.scanned = len(turns)
        previous = previous_summary or ""
        key = summary_key(self.replay.config.model, messages, previous)
        if key not in self.known:
            summarizer = self.replay.summarizer
            entry = {
                "key": key,
                "summary": summarizer.summarize(messages, previous),
                "written_by": getattr(summarizer, "model", None) or summarizer.name,
            }
            self.known[key] = entry
            self.written.append(entry)
        return self.known[key]["summary"]


_RECORDED: "WeakKeyDictionary[object, RecordedSummaries]" = WeakKeyDictionary()


def recorded_summaries(replay) -> RecordedSummaries:
    """The one :class:`RecordedSummaries` of ``replay`` (its ledgers and a live run's checks share it)."""
    found = _RECORDED.get(replay)
    if found is None:
        found = _RECORDED[replay] = RecordedSummaries(replay)
    return found


class ShippedPlan(Plan):
    """A turn's first request as Dify 1.17 sends it: which earlier messages are there as they are,
    which as a cleared result, which only inside a summary — and every check that fired this turn."""

    def __init__(self, budget, state, sent, view, replay, current, compactions):
        self._view = view
        self.status: dict[tuple[int, int], str] = {}
        self.summary_parts: list = []
        self.placeholder_parts: list = []
        for g in sent:
            for p in g.parts:
                if p.is_summary:
                    self.summary_parts.append(p)
                elif isinstance(p.ref, tuple) and p.ref[0] != current:
                    cleared = p.kind == shipped.TOOL_RETURN and p.content == TOOL_PLACEHOLDER
                    if cleared and p.ref not in self.status:
                        self.placeholder_parts.append(p)
                    self.status.setdefault(p.ref, CLEARED if cleared else KEPT)
        kept = [ref for ref, reason in self.status.items() if reason == KEPT]
        history = sum(replay.message_tokens(pos)[idx] for pos, idx in kept)
        self.covers = state.covers
        self._synthetic = self._build_synthetic(replay)
        history += sum(s.tokens for s in self._synthetic)
        oldest = min((replay.numbers[pos] for pos, _ in kept), default=None)
        super().__init__(budget, state, len(kept), history, oldest)
        self.compactions = compactions

    def reason(self, i, message):
        return SUMMARIZED if self._ref(i) not in self.status else self.status[self._ref(i)]

    def _ref(self, i):
        return (self._view.seq_pos[i], self._view.seq_msg[i])

    def _build_synthetic(self, replay):
        out = []
        for k, p in enumerate(self.summary_parts):
            covers = tuple(self.covers.get(p.content[len(shipped.SUMMARY_HEADER) :], ()))
            tokens = replay.counter.chat("system", p.content)
            out.append(
                SyntheticMessage(
                    role="system",
                    content=p.content,
                    tokens=tokens,
                    origin=SUMMARY,
                    turn=covers[-1] if covers else 0,
                    covers=covers,
                    ref=f"summary:{k + 1}",
                )
            )
        for p in self.placeholder_parts:
            pos, idx = p.ref
            msg = replay.conversation.turns[pos].messages[idx]
            number = replay.numbers[pos]
            out.append(
                SyntheticMessage(
                    role="tool",
                    content=TOOL_PLACEHOLDER,
                    tokens=placeholder_tokens(replay, msg),
                    origin=PLACEHOLDER,
                    turn=number,
                    covers=(number,),
                    replaces=(pos, idx),
                    ref=f"cleared:{msg.ref}",
                )
            )
        return out

    def synthetic(self, view, replay):
        return list(self._synthetic)


def _compactor_for(replay):
    """How a turn's compactor is built from the replay's settings (the ledger's and a live run's checks)."""
    cfg = replay.config
    context = cfg.context_size or replay.facts.context_size

    def build(summarize):
        return shipped.Compactor(
            context,
            cfg.max_tokens,
            summarize,
            instructions=replay.system_prompt,
            keep_pairs=cfg.settings.compaction_keep_tool_results,
            keep_messages=cfg.settings.compaction_keep_messages,
            trigger=cfg.settings.compaction_trigger,
        )

    return build


def shipped_plan(view, current, replay) -> ShippedPlan:
    cfg = replay.config
    context = cfg.context_size or replay.facts.context_size
    previous = (view.states[-1] if view.states else None) or shipped.ShippedState()
    turn = replay.conversation.turns[current]
    number = replay.numbers[current]
    target = compaction_target(context, cfg.max_tokens, cfg.settings.compaction_trigger) if context else None
    sent, first, loop, state = shipped.replay_turn(
        _compactor_for(replay),
        recorded_summaries(replay).summarize,
        previous,
        turn.messages,
        current,
        turn.query_index,
        replay.numbers,
    )
    compactions = []
    for request, event in ([(1, first)] if first is not None and first.fired else []) + loop:
        compactions.append({"turn": number, "request": request, "in_tool_loop": request > 1, **event.to_dict()})
    fixed = replay.fixed_prompt_tokens(current)
    if target is None:
        budget = Budget(
            None,
            f"context size of {cfg.model} unknown: Dify compacts only when the model's context window is known",
            None,
        )
    else:
        note = (
            f"Dify 1.17 as shipped: compaction target {target:,} for the whole request "
            f"({cfg.settings.compaction_trigger:.0%} of {context:,}"
            + (f", at most context − {cfg.max_tokens:,} max_tokens" if cfg.max_tokens else "")
            + ")"
        )
        if first is not None:
            note += f"; estimated {first.estimate:,} tokens ({first.estimated_by})"
            if first.fired:
                note += f", compacted by {' then '.join(first.tiers)} to about {first.final_estimate:,}"
        budget = Budget(max(target - fixed, 0), note, context)
    return ShippedPlan(budget, state, sent or [], view, replay, current, compactions)


class ShippedRunHook:
    """Dify's check before each model request of a live agent run (``run_agent(before_model=...)``).

    The turn's first request was checked by its ledger (the replay that gave the run its
    history); every later request — inside the tool loop — is checked here, through the same
    :func:`shipped_compaction.replay_turn` the ledger uses, so a live run and its later replay
    agree. A check that fires replaces the run's messages with the compacted ones and is kept
    in :attr:`events` as ``(request number, event)``.
    """

    def __init__(self, replay, position: int, query: "Message", system_prompt: str):
        view, _ = replay.view_for(position)
        self.replay = replay
        self.position = position
        self.previous = (view.states[-1] if view.states else None) or shipped.ShippedState()
        self.turn: list = [query]
        self.system_prompt = system_prompt
        self.seen: int | None = None  # messages in the state after the previous check
        self.events: list[tuple[int, shipped.CompactionEvent]] = []

    def __call__(self, state, step: int) -> None:
        messages = state.data["messages"]
        if self.seen is None:
            self.seen = len(messages)
            return  # the first request: checked by the turn's ledger
        self.turn.extend(messages[self.seen :])
        replay = self.replay
        _, _, loop, after = shipped.replay_turn(
            _compactor_for(replay),
            recorded_summaries(replay).summarize,
            self.previous,
            self.turn,
            self.position,
            0,
            replay.numbers,
        )
        if loop and loop[-1][0] == step:
            self.events.append(loop[-1])
            sent = self._messages(after.stored)
            if self.system_prompt:
                sent = [messages[0]] + sent
            state.replace("messages", sent)  # as Dify stores it: compacted
        self.seen = len(state.data["messages"])

    def _messages(self, groups) -> list:
        out = []
        for g in groups:
            # A reply's parts (its text and its calls) all come from one message: it is sent once.
            for p in g.parts if g.kind == shipped.REQUEST else g.parts[:1]:
                if p.is_summary:
                    out.append(Message("system", p.content, INTERMEDIATE, "summary"))
                    continue
                pos, idx = p.ref
                msg = self.turn[idx] if pos == self.position else self.replay.conversation.turns[pos].messages[idx]
                if p.kind == shipped.TOOL_RETURN and p.content == TOOL_PLACEHOLDER:
                    msg = replace(msg, content=TOOL_PLACEHOLDER)
                out.append(msg)
        return out
