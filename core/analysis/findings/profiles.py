"""``docs_vs_code``: Dify's docs and Dify 1.x's code send a node different history at a turn; each
difference with its cause in plain words.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Sequence

from core.memory.config import MemoryConfig
from core.memory.decision import budgeted_prompt
from core.memory.replay import Replay
from core.model.conversation import Conversation
from core.model.ledger import EMPTY, KEPT, OTHER_BRANCH, OVER_BUDGET, Ledger
from core.words import plural

from .base import DOCS_VS_CODE, INFO, Finding, TurnNamer, named_ranges, quoted

#: Causes of a docs-vs-code difference, in the order they are named.
CAUSE_PLACEHOLDER = "placeholder_row"


CAUSE_SIBLINGS = "other_branch_rows"


CAUSE_NOT_COUNTED = "tokens_not_counted"


CAUSE_BUDGET = "different_budget"


CAUSE_WINDOW_SETTING = "window_read_when_off"


@dataclass(frozen=True)
class ProfileCut:
    """What one profile did at one turn: the earlier thread turns inside its window, the
    messages it pruned by tokens, its budget, and the turns it sent."""

    window_turns: int
    pruned: int
    budget: int | None
    kept_turns: tuple[int, ...] = ()


@dataclass(frozen=True)
class Difference:
    """How Dify's docs and Dify 1.x differ for one node at one turn, and why."""

    turn: int
    causes: tuple[str, ...]
    text: str
    docs: ProfileCut
    code: ProfileCut
    only_docs: tuple[int, ...]  # turns the docs would send and the code does not
    only_code: tuple[int, ...]

    def to_json(self) -> dict:
        return {
            "turn": self.turn,
            "causes": list(self.causes),
            "text": self.text,
            "docs_kept_turns": list(self.docs.kept_turns),
            "code_kept_turns": list(self.code.kept_turns),
            "only_docs": list(self.only_docs),
            "only_code": list(self.only_code),
        }


def _explain_difference(
    window: int | None,
    docs: ProfileCut,
    code: ProfileCut,
    siblings: int,
    counting: bool,
    fixed_prompt_tokens: int | None,
    off_in_docs: bool = False,
    reserve: int | None = None,
    fixed: int | None = None,
) -> tuple[tuple[str, ...], str]:
    """The causes of a difference and the sentence that names them (one rule for every caller).
    ``off_in_docs``: the docs read no window where the code reads ``window`` (a Question Classifier
    whose window is switched off: Dify 1.x reads its size anyway). ``reserve``: the config's
    ``prompt_reserve`` (a node that budgets after its own prompt; ``None``: the LLM node's rule);
    ``fixed``: its ``history_budget`` (a node that passes its memory no limit: both profiles' budget)."""
    from core.memory.strategies.dify import EMPTY_LIST_TOKENS, row_limit

    causes: list[str] = []
    parts: list[str] = []
    if off_in_docs:
        causes.append(CAUSE_WINDOW_SETTING)
        parts.append(
            f"Dify's docs say this node's window is switched off, so "
            f"{plural(docs.window_turns, 'earlier turn')} would be sent; Dify 1.x reads the window's size anyway ({plural(row_limit(window), 'row')}, "
            f"the current turn's one of them) and sends {code.window_turns}"
        )
    elif code.window_turns != docs.window_turns:
        n = row_limit(window)
        causes.append(CAUSE_PLACEHOLDER)
        text = (
            f"Dify's docs say the window holds {plural(n, 'turn')}, so {plural(docs.window_turns, 'earlier turn')} "
            f"would be sent; Dify 1.x sends {code.window_turns} — the current turn's row is one of the {n} fetched"
        )
        if siblings:
            causes.append(CAUSE_SIBLINGS)
            # Rows of other branches: a regenerated reply, or a turn an edit left behind on the old thread.
            text += (
                f", and {plural(siblings, 'turn')} on another branch (regenerated, or left by an edit) "
                f"used {'a window row' if siblings == 1 else f'{siblings} window rows'}"
            )
        parts.append(text)
    if docs.pruned and not counting:
        causes.append(CAUSE_NOT_COUNTED)
        budget = f"{docs.budget:,} tokens" if docs.budget is not None else "the budget"
        parts.append(
            f"the docs say older messages are pruned to fit {budget} ({plural(docs.pruned, 'message')} "
            f"here); Dify as shipped does not count tokens (plugin token counting is off), so nothing "
            f"was pruned"
        )
    elif counting and (docs.pruned or code.pruned) and fixed is not None and docs.pruned != code.pruned:
        causes.append(CAUSE_BUDGET)
        parts.append(
            f"both budgets are a fixed {fixed:,} tokens (the node passes its memory no limit); the docs "
            f"count the history's messages, pruning {plural(docs.pruned, 'message')}, and Dify 1.x counts "
            f"it as a list (+{EMPTY_LIST_TOKENS}), pruning {plural(code.pruned, 'message')}"
        )
    elif counting and (docs.pruned or code.pruned) and (docs.pruned != code.pruned or docs.budget != code.budget):
        causes.append(CAUSE_BUDGET)
        prompt = f"the prompt ({fixed_prompt_tokens:,} tokens)" if fixed_prompt_tokens is not None else "the prompt"
        subtracts = (
            f"subtracts only {EMPTY_LIST_TOKENS} (it counts an empty list) and"
            if reserve is None
            else "subtracts the prompt too" + (f" and {reserve:,} tokens more" if reserve else "") + ", then"
        )
        parts.append(
            f"the docs' budget subtracts {prompt} and is {docs.budget:,} tokens, pruning "
            f"{plural(docs.pruned, 'message')}; Dify 1.x {subtracts} compares the history counted as "
            f"a list with {code.budget:,} tokens, pruning {plural(code.pruned, 'message')}"
        )
    if not parts:
        parts.append("Dify's docs and Dify 1.x send different history")
    sentence = "; ".join(parts)
    return tuple(causes), sentence[0].upper() + sentence[1:] + "."


def _difference(
    turn: int,
    window: int | None,
    docs: ProfileCut,
    code: ProfileCut,
    siblings: int,
    counting: bool,
    fixed_prompt_tokens: int | None,
    off_in_docs: bool = False,
    reserve: int | None = None,
    fixed: int | None = None,
) -> Difference:
    causes, text = _explain_difference(
        window, docs, code, siblings, counting, fixed_prompt_tokens, off_in_docs, reserve, fixed
    )
    d, c = set(docs.kept_turns), set(code.kept_turns)
    return Difference(turn, causes, text, docs, code, tuple(sorted(d - c)), tuple(sorted(c - d)))


def _cut_from_ledger(ledger: Ledger) -> ProfileCut:
    windowed = ledger.entries_with((KEPT, OVER_BUDGET, EMPTY))  # inside the window: not the whole listing
    in_window = {e.turn for e in windowed}
    pruned = sum(1 for e in windowed if e.reason == OVER_BUDGET)
    kept = tuple(sorted({e.turn for e in ledger.kept}))
    return ProfileCut(len(in_window), pruned, ledger.budget, kept)


def ledger_difference(code: Ledger, docs: Ledger, position: int, query_tokens: int = 0) -> Difference | None:
    """How the two profiles' ledgers of one node at one turn differ (``None``: they agree).

    ``position`` is the turn's position in the conversation: the rows of other branches among
    the newest window rows are the entries ``other_branch`` from there on. ``query_tokens``: the
    current query's tokens, which a ledger's prompt holds and the budget of a node whose query
    joins after the budget (``query_after_budget``) does not subtract."""
    # One turn's two ledgers list the same earlier messages: they agree when they keep the same ones
    # (read from the kept entries, so a ledger kept as runs is not listed whole to find that out).
    if [(e.position, e.index) for e in code.kept] == [(e.position, e.index) for e in docs.kept]:
        return None
    from core.memory.strategies.dify import row_limit

    window = code.config.get("window")
    first_row = position - row_limit(window) + 1
    siblings = len(
        {e.position for e in code.entries_at(range(max(first_row, 0), position)) if e.reason == OTHER_BRANCH}
    )
    fixed = budgeted_prompt(
        docs.prompt_tokens - docs.history_tokens, query_tokens, bool(docs.config.get("query_after_budget"))
    )
    return _difference(
        code.turn,
        window,
        _cut_from_ledger(docs),
        _cut_from_ledger(code),
        siblings,
        bool(code.config.get("plugin_token_counting")),
        fixed,
        window is not None and docs.config.get("window") is None,
        code.config.get("prompt_reserve"),
        code.config.get("history_budget"),
    )


def both_decisions(code: Ledger, docs: Ledger) -> dict[tuple[int, int], tuple[str, str]]:
    """``{(position, index): (docs reason, code reason)}`` for the messages the two profiles treat
    differently — what the UI shows as "docs: kept · code: dropped"."""
    # Kept by one of them only: the turns of those messages are all that is read of either ledger.
    turns = {e.position for e in code.kept} | {e.position for e in docs.kept}
    theirs = {(e.position, e.index): e.reason for e in docs.entries_at(turns)}
    return {
        (e.position, e.index): (theirs[(e.position, e.index)], e.reason)
        for e in code.entries_at(turns)
        if (e.position, e.index) in theirs
        and theirs[(e.position, e.index)] != e.reason
        and (theirs[(e.position, e.index)] == KEPT) != e.kept
    }


def docs_vs_code(
    conversation: Conversation,
    config: MemoryConfig,
    *,
    system_prompt: str | None = None,
    has_thread: bool = True,
    prompt_tokens: Callable[[int], int] | None = None,
    replay: Replay | None = None,
) -> list[Difference]:
    """Every answered turn where Dify's docs and Dify 1.x send different history under ``config``
    (a config whose memory system :attr:`~core.memory.strategies.base.Strategy.has_profiles`: Dify's; any
    other has no such difference), in turn order.

    Read from one walk, not a ledger per turn: the two profiles see the same thread view (the same
    messages and counts; Dify's window reads no marks, its reach being bounded), so the documented
    profile decides each turn on the view the shipped one walks. ``replay``: a replay of ``config``
    made with the same settings, whose counts are reused (it stands for one profile when its config
    is that profile's)."""
    profiles = config.system.profiles(config)
    if profiles is None:
        return []
    code_cfg, docs_cfg = profiles
    kwargs = {"system_prompt": system_prompt, "has_thread": has_thread, "prompt_tokens": prompt_tokens}
    prompt = conversation.system_prompt if system_prompt is None else system_prompt

    def replay_of(cfg: MemoryConfig) -> Replay:
        if (
            replay is not None
            and replay.config == cfg
            and replay.conversation is conversation
            and replay.system_prompt == prompt
            and replay.has_thread == has_thread
            and replay._prompt_tokens is prompt_tokens
        ):
            return replay
        return Replay(conversation, cfg, **kwargs)

    code_replay, docs_replay = replay_of(code_cfg), replay_of(docs_cfg)
    turns = conversation.turns
    numbers = code_replay.numbers
    from bisect import bisect_left, bisect_right

    from core.memory.strategies.dify import row_limit

    n = row_limit(config.settings.window)

    def sent_turns(view, dec) -> tuple[int, ...]:
        """The turns ``dec`` sends a message of: a non-empty one at or after its cut, as a ledger's
        kept entries list them (a turn the cut splits counts; one whose sent messages are all
        empty does not)."""
        cut, end, counts = dec.budget_cut, dec.end, view.count_prefix
        if counts[end] == counts[cut]:
            return ()
        starts, positions = view.starts, view.positions
        first, last = bisect_right(starts, cut) - 1, bisect_left(starts, end)
        if counts[end] - counts[cut] == end - cut:  # no empty message among them: every turn counts
            if positions[last - 1] - positions[first] == last - 1 - first:  # a stretch without branches:
                return tuple(range(numbers[positions[first]], numbers[positions[last - 1]] + 1))  # numbered on
            return tuple(map(numbers.__getitem__, positions[first:last]))
        return tuple(
            numbers[positions[i]]
            for i in range(first, last)
            if counts[min(view.turn_start(i + 1), end)] > counts[max(starts[i], cut)]
        )

    # Both profiles decide on the same view and send a suffix of its turns each, less the turns with
    # nothing to send, so the shorter tuple is the longer one's tail and what only one of them sends
    # is the head before it (turn numbers rise along a thread, so every tuple is in order). A
    # difference's text depends on a handful of numbers that repeat from turn to turn: each is
    # written once.
    explained: dict[tuple, tuple[tuple[str, ...], str]] = {}
    counting, window, reserve, fixed = (
        config.settings.plugin_token_counting,
        config.settings.window,
        config.prompt_reserve,
        config.history_budget,
    )
    out: list[Difference] = []
    for _ in docs_replay._tokens_in_order():  # its counts set in batches, as its own walk would
        pass
    for p, view, c in code_replay._walk():
        if turns[p].query_index is None or c.blocked:
            continue
        d = docs_replay._decide(view, p)  # blocked alike: memory and scope do not depend on the profile
        if c.budget_cut == d.budget_cut:
            continue
        kept_c = view.count_prefix[c.end] - view.count_prefix[c.budget_cut]
        kept_d = view.count_prefix[d.end] - view.count_prefix[d.budget_cut]
        if kept_c == kept_d and view.kept_prefix[c.budget_cut] == view.kept_prefix[d.budget_cut]:
            continue  # only empty messages moved across the cut: the same history is sent
        first_row = p - n + 1
        on_thread = len(view.positions)
        on_thread_rows = on_thread - bisect_left(view.positions, max(first_row, 0))
        siblings = (p - max(first_row, 0)) - on_thread_rows
        counted = docs_replay.budget_prompt_tokens(p, d.fixed_prompt_tokens)  # what the docs' budget subtracts
        docs_sent, code_sent = sent_turns(view, d), sent_turns(view, c)
        docs_cut = ProfileCut(
            on_thread - bisect_left(view.starts, d.window_start),
            d.budget_cut - d.window_start,
            d.budget.limit,
            docs_sent,
        )
        code_cut = ProfileCut(
            on_thread - bisect_left(view.starts, c.window_start),
            c.budget_cut - c.window_start,
            c.budget.limit,
            code_sent,
        )
        key = (
            docs_cut.window_turns,
            docs_cut.pruned,
            docs_cut.budget,
            code_cut.window_turns,
            code_cut.pruned,
            code_cut.budget,
            siblings,
            counted,
        )
        why = explained.get(key)
        if why is None:
            why = explained[key] = _explain_difference(
                window, docs_cut, code_cut, siblings, counting, counted, reserve=reserve, fixed=fixed
            )
        extra = len(docs_sent) - len(code_sent)
        out.append(
            Difference(
                numbers[p], why[0], why[1], docs_cut, code_cut, docs_sent[: max(extra, 0)], code_sent[: max(-extra, 0)]
            )
        )
    return out


def docs_vs_code_findings(
    subject: str, differences: Sequence[Difference], name: TurnNamer, node_id: str | None = None
) -> list[Finding]:
    """One finding per set of causes, linked to the first turn it shows at, listing the others."""
    groups: dict[tuple[str, ...], list[Difference]] = {}
    for diff in differences:
        groups.setdefault(diff.causes, []).append(diff)
    out = []
    for causes, diffs in groups.items():
        first = diffs[0]
        text = f"At {name(first.turn)}" + (f", {quoted(subject)}" if subject else "") + f": {first.text}"
        if len(diffs) > 1:
            text = (
                text[:-1] + f"; the same happens at {plural(len(diffs) - 1, 'later turn')} "
                f"({named_ranges(name, (d.turn for d in diffs[1:]))})."
            )
        detail = (
            "MemLens follows Dify 1.x as shipped by default; Dify's docs describe a simpler memory. "
            "Switch the Dify memory rules to \"as Dify's docs describe\" to see the docs' version."
        )
        out.append(
            Finding(
                DOCS_VS_CODE,
                text,
                subject,
                first.turn,
                node_id,
                INFO,
                detail,
                {
                    "causes": list(causes),
                    "turns": [d.turn for d in diffs],
                    "differences": [d.to_json() for d in diffs[:50]],
                },
            )
        )
    return out


def docs_vs_code_config_findings(label, config, replay, turns, name, system_prompt) -> list[Finding]:
    return docs_vs_code_findings(
        label, docs_vs_code(replay.conversation, config, system_prompt=system_prompt, replay=replay), name
    )
