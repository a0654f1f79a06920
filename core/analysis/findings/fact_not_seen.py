"""``fact_not_seen``: a fact or a variable a memory lacks at a turn that needs it — a question about a
fact no statement of which (nor its value restated) is in memory, or a variable set at a turn out of
the node's memory and out of its prompt.
"""

from __future__ import annotations

import heapq
from bisect import bisect_right
from typing import TYPE_CHECKING, Any, Iterator, Mapping, Sequence

from core.memory.replay import Replay, turn_numbers
from core.memory.strategies import remembers
from core.memory.words import explain
from core.model.conversation import Conversation
from core.model.facts import asked_keys
from core.model.ledger import OTHER_BRANCH, Ledger, LedgerEntry
from core.words import plural

from .base import FACT_NOT_SEEN, INFO, WARNING, Finding, TurnNamer, quoted, turn_namer
from .flow_reads import node_reads

if TYPE_CHECKING:
    from ..compare.comparison import Comparison
    from .recorded import Recorded

#: A config's "question about a fact its memory lacks" findings listed one by one; one more counts the rest
#: (a conversation stating a fact in every turn would list one per fact, and the facts table has them all).
FACT_FINDINGS_LISTED = 25


def value_kept(ledger: Ledger, conversation: Conversation, value: str) -> bool:
    """Whether a kept message (or a summary) restates the value, e.g. an answer repeating "4411"."""
    needle = (value or "").casefold()
    if not needle:
        return False
    turns = conversation.turns
    for e in ledger.kept:
        if needle in turns[e.position].messages[e.index].content.casefold():
            return True
    return any(needle in s.content.casefold() for s in ledger.synthetic)


def newest_statement(ledger: Ledger, messages: Sequence[tuple[int, int]]) -> LedgerEntry | None:
    where = set(messages)
    found = [e for e in ledger.entries_at({q for q, _ in where}) if (e.position, e.index) in where]
    return found[-1] if found else None


def fact_findings(conversation: Conversation, comparison: Comparison, replays: Sequence[Replay]) -> list[Finding]:
    answered = conversation.answered_turns()
    numbers = turn_numbers(conversation)
    name = turn_namer(conversation)
    questions: dict[str, list[int]] = {}  # fact key -> indices of the answered turns that ask for it
    if any(f.key for f in comparison.facts):
        for k, p in enumerate(answered):
            for key in asked_keys(conversation.turns[p].query):
                questions.setdefault(key, []).append(k)
    found: dict[tuple[int, int], tuple] = {}  # (fact, config) -> the first turn asking for it that lacks it
    for c, replay in enumerate(replays):
        found.update(_asked_without(conversation, comparison, c, replay, questions))
    out: list[Finding] = []
    listed = [0] * len(comparison.configs)
    unlisted: list[list[int]] = [[] for _ in comparison.configs]  # per config: the turns of the findings not listed
    for f, fact in enumerate(comparison.facts):
        if not fact.messages:
            continue
        stated = numbers[fact.messages[0][0]]
        for c, fate in enumerate(comparison.fates[f]):
            if (f, c) in found:
                if listed[c] < FACT_FINDINGS_LISTED:
                    listed[c] += 1
                    out.append(_fact_not_seen(comparison, f, c, *found[(f, c)], name=name, numbers=numbers))
                else:
                    unlisted[c].append(found[(f, c)][0])
            elif not fact.key and fate.lost_turn is not None:  # a fact the user marked: say when it goes
                subject = comparison.configs[c].label
                reason = fate.lost_reason
                why = f" ({reason.replace('_', ' ')})" if reason else ""
                course = fate.comeback_words()
                out.append(
                    Finding(
                        FACT_NOT_SEEN,
                        f"{fact.label} ({name(stated)}) leaves {quoted(subject)}'s memory at "
                        f"{name(fate.lost_turn)}{why}" + (f"; {course}" if course else "") + ".",
                        subject,
                        fate.lost_turn,
                        None,
                        INFO,
                        "",
                        {"fact": fact.label, "stated_turn": stated},
                    )
                )
    for c, turns in enumerate(unlisted):
        if turns:
            subject = comparison.configs[c].label
            first = min(turns)
            out.append(
                Finding(
                    FACT_NOT_SEEN,
                    f"{quoted(subject)} also lacks {plural(len(turns), 'more fact')} when a "
                    f"question is about them, the first at {name(numbers[first])} (the "
                    f"first {FACT_FINDINGS_LISTED} are listed one by one).",
                    subject,
                    numbers[first],
                    None,
                    WARNING,
                    "Where each fact left memory is in the comparison's facts.",
                    {"facts": len(turns)},
                )
            )
    return out


def _fact_not_seen(
    comparison: Comparison,
    f: int,
    c: int,
    p: int,
    q: int,
    said: int,
    why: str,
    seen_before: bool,
    *,
    name: TurnNamer,
    numbers: Sequence[int],
) -> Finding:
    """Turn ``p`` asks for fact ``f`` while config ``c``'s memory lacks it; its newest statement was at
    turn ``q`` (``why``: that statement's reason, in words), its first at ``said``."""
    fact, subject = comparison.facts[f], comparison.configs[c].label
    verb = "no longer has" if seen_before else "never saw"
    text = (
        f"At {name(numbers[p])} the question is about {fact.label}, but {quoted(subject)} {verb} "
        f"{name(numbers[q])}, where it was stated ({why})"
    )
    return Finding(
        FACT_NOT_SEEN,
        text + ".",
        subject,
        numbers[p],
        None,
        WARNING,
        "The model is asked for something its memory does not hold; it will guess or say it does not know.",
        {"fact": fact.label, "stated_turn": numbers[said]},
    )


def _asked_without(
    conversation: Conversation, comparison: Comparison, c: int, replay: Replay, questions: Mapping[str, list[int]]
) -> dict[tuple[int, int], tuple]:
    """For each fact with a key, the first turn that asks for it while config ``c``'s memory holds no
    statement of it, nor a message repeating its value (an answer restating "4411"). The turns where a
    fact is out of memory come from its timeline; each is looked at in one walk of the replay, in turn
    order, so a long conversation costs a walk, not a ledger per fact."""
    answered = conversation.answered_turns()
    one_thread = conversation.one_thread()
    heap: list[tuple[int, int, Iterator[int]]] = []  # (answered index, fact, that fact's later such turns)
    for f, fact in enumerate(comparison.facts):
        if fact.key and fact.messages and fact.key in questions:
            after_stated = bisect_right(answered, fact.messages[0][0])  # the first answered turn after it
            candidates = comparison.fates[f][c].present.where(False, questions[fact.key], after_stated)
            k = next(candidates, None)
            if k is not None:
                heapq.heappush(heap, (k, f, candidates))
    from ..compare.walk import walk_rows

    out: dict[tuple[int, int], tuple] = {}

    def ask(k: int, f: int, candidates: Iterator[int], row: Any, thread: set[int] | None) -> None:
        """Turn ``k`` for fact ``f``: its finding, or (its value restated) the fact's next such turn."""
        finding = _asked_at(comparison, replay, answered, f, c, k, row, thread)
        if finding is not None:
            out[(f, c)] = finding
        elif (later := next(candidates, None)) is not None:
            heapq.heappush(heap, (later, f, candidates))

    if one_thread:
        by_position = {p: k for k, p in enumerate(answered)} if heap else {}
        for p, row in walk_rows(replay) if heap else ():
            k = by_position[p]
            while heap and heap[0][0] == k:
                ask(k, *heapq.heappop(heap)[1:], row, None)
            if not heap:
                break
    # A branched conversation's walk goes depth first: its turns are asked for one by one instead.
    threads: dict[int, set[int]] = {}
    while heap:
        k, f, candidates = heapq.heappop(heap)
        p = answered[k]
        thread = threads.get(p)
        if thread is None:  # the same turns for every fact
            thread = threads[p] = set(conversation.tree.thread(p))
        ask(k, f, candidates, _LedgerRow(replay, p), thread)
    return out


class _LedgerRow:
    """A turn's ledger read as :func:`core.analysis.compare.walk.walk_rows` reads a row."""

    def __init__(self, replay: Replay, position: int):
        self.ledger = replay.ledger_at(position, lazy=True)
        self.turns = replay.conversation.turns

    @property
    def budget(self) -> int | None:
        return self.ledger.budget

    def thread_reason(self, q: int, j: int) -> str | None:
        found = [e for e in self.ledger.entries_at((q,)) if e.index == j]
        return found[0].reason if found and found[0].reason != OTHER_BRANCH else None

    def sent_texts(self) -> Iterator[str]:
        for e in self.ledger.kept:
            yield self.turns[e.position].messages[e.index].content
        for s in self.ledger.synthetic:
            yield s.content


def _asked_at(
    comparison: Comparison,
    replay: Replay,
    answered: Sequence[int],
    f: int,
    c: int,
    k: int,
    row: Any,
    thread: set[int] | None,
) -> tuple | None:
    """When answered turn ``k`` asks for fact ``f`` while config ``c``'s memory (``replay``, read at that
    turn as ``row``) lacks it, what :func:`_fact_not_seen` says of it; ``None`` when the memory restates
    its value after all, or (``thread``: the turn's thread, on a branched conversation) no statement of
    it is on the thread."""
    conversation, numbers, p = replay.conversation, replay.numbers, answered[k]
    fact, fate = comparison.facts[f], comparison.fates[f][c]
    # Only what this turn's own thread said: a fact stated on another branch (a regenerated or edited
    # line) was never told to this one.
    said = [m for m in fact.messages if m[0] < p and (thread is None or m[0] in thread)]
    if not said:
        return None
    needle = (fact.value or "").casefold()
    if needle and any(needle in text.casefold() for text in row.sent_texts()):
        return None
    q, j = said[-1]
    reason = row.thread_reason(q, j)
    if reason is None:
        why = "not on this branch"
    else:
        message = conversation.turns[q].messages[j]
        entry = LedgerEntry(
            ref=message.ref,
            turn=numbers[q],
            role=message.role,
            tokens=replay.message_tokens(q)[j],
            kept=False,
            reason=reason,
            kind=message.kind,
            position=q,
            index=j,
        )
        why = explain(entry, {**replay.config.to_dict(), "budget": row.budget})
    after = bisect_right(answered, said[0][0])
    seen_before = (
        fate.present.true_in(after, k)
        if thread is None
        else any(fate.present[j] is True for j in range(after, k) if answered[j] in thread)
    )
    return p, q, said[0][0], why, seen_before


def unseen_variables(recorded: Recorded) -> list[Finding]:
    """A node with memory that does not have the turn where a conversation variable it does not read was
    set (by a node, not the user), once per node, variable and turn."""
    name, numbers, label, flow = recorded.name, recorded.numbers, recorded.label, recorded.flow
    memory_on = {nid for nid, runs in recorded.by_node.items() if any(remembers(run.memory) for _, _, run in runs)}
    out: list[Finding] = []
    reported: set[tuple[str, str, int]] = set()
    latest_set: dict[str, int] = {}  # variable -> position of the turn that last wrote it (by a node)
    for rec in recorded.records:
        p = recorded.position[rec.id]
        for node_id, runs in recorded.by_node.items():
            if node_id not in memory_on:
                continue
            run = recorded.run_at(node_id, p)
            if run is None or not remembers(run.memory):
                continue
            reads = node_reads(flow, flow.node(node_id)) if flow.has_node(node_id) else set()
            kept_turns = {e.position for e in run.ledger.entries if e.kept}
            for var, q in latest_set.items():
                if f"conversation.{var}" in reads or q in kept_turns:
                    continue
                key = (node_id, var, q)
                if key in reported:
                    continue
                reported.add(key)
                entry = next((e for e in run.ledger.entries if e.position == q), None)
                why = explain(entry, run.ledger.config, label(node_id)) if entry else "not in its memory"
                had = any(any(e.position == q and e.kept for e in r.ledger.entries) for x, _, r in runs if x < p)
                verb = "no longer has" if had else "never saw"
                text = (
                    f"{quoted(label(node_id))} {verb} {name(numbers[q])}, where `{var}` was set: at {name(numbers[p])} "
                    f"that turn is out of its memory ({why}), and its prompt does not read the variable"
                )
                out.append(
                    Finding(
                        FACT_NOT_SEEN,
                        text + ".",
                        label(node_id),
                        numbers[p],
                        node_id,
                        INFO,
                        "If the node needs the value, render the variable in its prompt; memory alone "
                        "will not carry it.",
                        {"variable": var, "set_turn": numbers[q]},
                    )
                )
        for change in rec.variable_changes:
            if change.node_id != "user":
                latest_set[change.name] = p
    return out


def unseen_facts(recorded: Recorded) -> list[Finding]:
    """A fact the user stated and later asked about, not in a node's memory at that turn (on its thread):
    once per node and fact."""
    from ..compare.facts import detect_facts

    conversation, name, numbers, label = recorded.conversation, recorded.name, recorded.numbers, recorded.label
    out: list[Finding] = []
    reported: set[tuple[str, str]] = set()
    facts = [f for f in detect_facts(conversation) if f.messages and f.key]
    for rec in recorded.records:
        p = recorded.position[rec.id]
        asked = asked_keys(rec.query or "")
        thread = set(conversation.tree.thread(p))  # what another branch said was never told to this one
        for fact in facts:
            earlier = [m for m in fact.messages if m[0] < p and m[0] in thread]
            if fact.key not in asked or not earlier:
                continue
            for node_id, runs in recorded.by_node.items():
                run = recorded.run_at(node_id, p)
                if run is None or not remembers(run.memory) or (node_id, fact.label) in reported:
                    continue
                where = set(earlier)
                if any(e.kept and (e.position, e.index) in where for e in run.ledger.entries) or value_kept(
                    run.ledger, conversation, fact.value
                ):
                    continue
                reported.add((node_id, fact.label))
                entry = newest_statement(run.ledger, earlier)
                q = earlier[-1][0]
                why = explain(entry, run.ledger.config, label(node_id)) if entry else "not in its memory"
                had = any(
                    any(e.kept and (e.position, e.index) in where for e in r.ledger.entries)
                    for x, _, r in runs
                    if q < x < p and x in thread
                )
                verb = "no longer has" if had else "never saw"
                text = (
                    f"At {name(numbers[p])} the question is about {fact.label}, but {quoted(label(node_id))} {verb} "
                    f"{name(numbers[q])}, where it was stated ({why})"
                )
                out.append(
                    Finding(
                        FACT_NOT_SEEN,
                        text + ".",
                        label(node_id),
                        numbers[p],
                        node_id,
                        WARNING,
                        "The model is asked for something its memory does not hold; it will guess or say "
                        "it does not know.",
                        {"fact": fact.label, "stated_turn": numbers[q]},
                    )
                )
    return out
