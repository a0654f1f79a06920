"""The memory rule behind a node's calls: the rules MemLens emulates whose replay gives, call after call,
the kept sets the payloads showed.

For each node of a captured (or threaded) conversation the candidates are the memory strategies with
their settings — no memory; everything (questions and answers, or every message); the last N messages
(the Window Memory node); the last k pairs (Dify as documented, window k); Dify as shipped with window
N (rows of the whole conversation, the current turn's one of them); LangChain ``trim_messages`` by
message count or by a token budget under the node's model's encoding, with or without
``start_on="human"`` and the system message counted; Dify's token pruning (plugin token counting, the
request's ``max_tokens``); a summary buffer; Dify's agent history; compaction. A candidate's settings
come from the observations (a window the size of a kept set, a token budget from the range each
call's kept set allows), and every candidate is judged the same way: its replay — the
:class:`~core.memory.replay.Replay` every view and the CLI use, built by :func:`node_replay` — must
give each call's kept set exactly.

The rule reported is the simplest that explains the most calls; the others that explain the same
calls are its equivalents (on a plain alternating conversation "last 6 messages", "3 pairs" and "Dify
as shipped, window 4" are one rule). Where a named platform's best setting does not explain a call, the
messages it would treat otherwise are named, with its reason.

The JSON (``memlens infer --format json``)::

    {"nodes": [{"node": "node-1", "calls": 41, "rule": {"memory": "window", "window": 6, "model": "gpt-4o-mini"},
                "explains": 41, "first_unexplained": null, "equivalent": [{"memory": "dify", "window": 4, …}, …]}]}

``rule`` replays with ``memlens replay --conversation ID --node NODE --memory NAME …``
(:func:`rule_args`) to the same kept and dropped sets. A node whose calls send their history as text
lines (:mod:`core.capture.text_history`) is judged the same way — which turns its lines held — and its
rules say so ("Dify as shipped, window 3, over Human:/Assistant: text lines"); its JSON adds
``"history": "text"`` and the ``role_prefix`` its lines used.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Iterable, Mapping, Sequence

from core.limits import DIFY_ROW_CAP, WINDOW_MAX_MESSAGES
from core.memory.config import MemoryConfig
from core.memory.errors import ConfigError
from core.memory.replay import Replay
from core.memory.strategies.trim import message_type, select
from core.memory.words import explain
from core.model.conversation import ANSWER, QUERY, Conversation, turn_label
from core.model.ledger import Ledger
from core.model.tokens import DEFAULT_MODEL, REPLY_PRIMING, chat_model_message_tokens, counter_for, model_facts

from .calls import Node
from .errors import CaptureError
from .stored import PROMPT_TOKENS, nodes_of

#: A token budget's largest value tried (a payload that keeps everything: any budget above its size).
MAX_BUDGET = 10_000_000
#: The settings a rule names besides its memory, as ``replay --set`` takes them (those its system has).
SETTINGS = (
    "window",
    "fidelity",
    "granularity",
    "plugin_token_counting",
    "max_tokens",
    "context_size",
    "max_history_tokens",
    "trim_strategy",
    "trim_counter",
    "include_system",
    "start_on",
    "agent_strategy",
    "model",
)
#: Named platforms, by family: where their emulation differs from the observation is said.
PLATFORMS = {
    "dify_code": "Dify as shipped",
    "dify_documented": "Dify as documented",
    "window": "the Window Memory node",
    "trim": "trim_messages",
}


@dataclass(frozen=True)
class ObservedCall:
    """One call of a node: its number (from 1), its turn's position, and the thread messages its payload held."""

    node: str
    number: int
    position: int
    kept: frozenset


@dataclass(frozen=True)
class Rule:
    """A candidate: its family (the rank it is preferred by), its config, its words, and for a token budget
    the range of budgets that keep the same sets."""

    family: str
    config: MemoryConfig
    label: str
    span: tuple[int, int] | None = None
    #: The platform setting it is, in words, when the label does not say ("the Window Memory node, window 6").
    words: str = ""

    @property
    def full(self) -> str:
        return f"{self.label} ({self.words})" if self.words else self.label

    def settings(self) -> dict:
        """``{"memory": NAME, <its settings>}``: what differs from the defaults, and the model."""
        values, default = self.config.values(), MemoryConfig(self.config.strategy).values()
        out: dict = {"memory": self.config.strategy}
        for name in SETTINGS:
            if name in values and (name == "model" or values[name] != default[name]):
                out[name] = values[name]
        return out


#: Families in the order a rule is preferred among equals: the simplest first.
FAMILY_ORDER = (
    "off",
    "buffer",
    "window",
    "dify_documented",
    "dify_code",
    "trim",
    "trim_tokens",
    "dify_budget",
    "summary_buffer",
    "dify_agent",
    "compaction",
)


@dataclass
class Explanation:
    rule: Rule
    explained: tuple[bool, ...]
    ledgers: dict[int, Ledger] = field(default_factory=dict, repr=False)  # by call number, where computed

    @property
    def explains(self) -> int:
        return sum(self.explained)

    def first_unexplained(self, calls: Sequence[ObservedCall]) -> int | None:
        return next((c.number for c, ok in zip(calls, self.explained) if not ok), None)

    def rank(self) -> tuple:
        return (-self.explains, FAMILY_ORDER.index(self.rule.family), _size(self.rule.config))


@dataclass(frozen=True)
class Difference:
    """A named platform's emulation against the observation, at one call: the messages it treats otherwise."""

    platform: str
    rule: Rule
    call: int
    turn: str
    messages: tuple[str, ...]

    def sentence(self) -> str:
        rule = self.rule
        name = rule.words or (rule.label if rule.label.startswith(self.platform) else f"{self.platform}, {rule.label}")
        return f"{name}: differs at call {self.call} ({self.turn}): " + "; ".join(self.messages)


@dataclass
class NodeInference:
    node: Node
    calls: list[ObservedCall]
    best: Explanation | None
    equivalent: list[Explanation]
    differences: list[Difference]
    #: Every other rule that explains the same calls (the equivalents and their variants).
    alike: list[Explanation] = field(default_factory=list)

    def to_json(self) -> dict:
        best = self.best
        out = {
            "node": self.node.id,
            "calls": len(self.calls),
            "rule": best.rule.settings() if best is not None and best.explains else None,
            "explains": best.explains if best is not None else 0,
            "first_unexplained": best.first_unexplained(self.calls)
            if best is not None and best.explains
            else (self.calls[0].number if self.calls else None),
            "equivalent": [e.rule.settings() for e in self.equivalent],
        }
        if self.node.text_prefixes:
            user, assistant = self.node.text_prefixes
            out.update(history="text", role_prefix={"user": user, "assistant": assistant})
        return out

    def fit(self) -> str:
        """ "explained by: last 6 messages, 41/41 calls" — or why nothing is."""
        if self.best is None or not self.best.explains:
            return f"no rule MemLens emulates explains these calls (0/{len(self.calls)})"
        return f"explained by: {self.best.rule.full}, {self.best.explains}/{len(self.calls)} calls"


# -- replaying a node --------------------------------------------------------------------------------


def node_replay(conversation: Conversation, node: Node | None, config: MemoryConfig) -> Replay:
    """A node's memory replayed over a captured conversation: its system prompt, and at each turn where it
    called, what its payload held besides history as the prompt (what a budget subtracts). The one way
    both ``infer`` and ``replay --conversation`` replay a captured node."""
    if node is None:
        return Replay(conversation, config, system_prompt="")
    turns = conversation.turns

    def prompt_tokens(position: int) -> int:
        recorded = (turns[position].meta or {}).get(PROMPT_TOKENS) or {}
        value = recorded.get(node.id) if isinstance(recorded, Mapping) else None
        if isinstance(value, int):
            return value
        query = turns[position].query_message
        counter = counter_for(config.model)
        return (counter.message(query) if query is not None else 0) + REPLY_PRIMING

    return Replay(conversation, config, system_prompt=node.system, prompt_tokens=prompt_tokens)


def rule_args(settings: Mapping) -> list[str]:
    """A rule's settings as ``replay``'s options: ``{"memory": "window", "window": 6}`` → ``--memory window
    --window 6``."""
    out = ["--memory", str(settings["memory"])]
    for name in SETTINGS:
        if name not in settings:
            continue
        value = settings[name]
        flag = "--" + name.replace("_", "-")
        if isinstance(value, bool):
            if value:
                out.append(flag)
        elif value is not None:
            out += [flag, str(value)]
    return out


def _size(config: MemoryConfig) -> int:
    values = config.values()
    return values.get("window") or values.get("max_history_tokens") or 0


def _kept(ledger: Ledger) -> frozenset:
    return frozenset((e.position, e.index) for e in ledger.kept)


# -- candidates ---------------------------------------------------------------------------------------


def _thread_messages(conversation: Conversation, position: int, granularity: str) -> list[tuple[int, int]]:
    """The places of the thread's earlier messages a memory reads, under a granularity, oldest first."""
    tree = conversation.tree
    out = []
    for p in tree.thread(position)[:-1]:
        turn = conversation.turns[p]
        for i, m in enumerate(turn.messages):
            if granularity == "all_messages" or m.kind in (QUERY, ANSWER):
                out.append((p, i))
    return out


def _window_sizes(conversation: Conversation, calls: Sequence[ObservedCall]) -> dict[str, set[int]]:
    """The window sizes each family could have, read off the kept sets: a window that keeps fewer messages
    (turns, rows) than the thread has is that size; one that keeps them all is at least that size."""
    messages, pairs, rows, counts = set(), set(), set(), set()
    for c in calls:
        kept = sorted(c.kept)
        messages.add(len(kept))
        qa = [k for k in kept if conversation.turns[k[0]].messages[k[1]].kind in (QUERY, ANSWER)]
        counts.add(len(qa))
        turns = sorted({p for p, _ in kept})
        pairs.add(len(turns))
        if turns:
            rows.add(c.position - turns[0] + 1)
            rows.add(c.position - turns[0] + 2)
        else:
            rows.add(1)
    small = set(range(1, 5))
    return {
        "window": {n for n in messages | counts | small if 1 <= n <= WINDOW_MAX_MESSAGES},
        "pairs": {n for n in pairs | small if 1 <= n <= DIFY_ROW_CAP},
        "rows": {n for n in rows | small if 1 <= n <= DIFY_ROW_CAP},
        "trim": {n for n in messages | counts | {n + 1 for n in messages | counts} if n >= 0},
    }


def _budget_span(
    conversation: Conversation, calls: Sequence[ObservedCall], model: str, granularity: str, start_on: str | None
) -> list[tuple[int, int] | None]:
    """Per call, the ``trim_messages`` token budgets (counted as the chat model counts, the strategy's own
    :func:`~core.memory.strategies.trim.select`) that keep exactly its kept set; ``None`` when none does."""
    counter = counter_for(model)
    out: list[tuple[int, int] | None] = []
    for c in calls:
        places = _thread_messages(conversation, c.position, granularity)
        messages = [conversation.turns[p].messages[i] for p, i in places]
        if not c.kept <= set(places):
            out.append(None)
            continue
        n = len(messages)
        first = next((k for k, p in enumerate(places) if p in c.kept), n)
        if any(p not in c.kept for p in places[first:]):
            out.append(None)  # not a suffix: no trim keeps it
            continue
        prefix = [0]
        for m in messages:
            prefix.append(prefix[-1] + chat_model_message_tokens(counter, m))

        def cost(i: int, j: int) -> int:
            return prefix[j] - prefix[i] + REPLY_PRIMING if j > i else 0

        def start(budget: int) -> int:
            sel = select(
                n,
                cost,
                lambda i: message_type(messages[i]),
                budget=budget,
                strategy="last",
                start_on=(start_on,) if start_on else (),
            )
            return sel.kept_range()[0]

        lo, hi = 0, MAX_BUDGET
        while lo < hi:  # the smallest budget keeping at least as much
            mid = (lo + hi) // 2
            if start(mid) <= first:
                hi = mid
            else:
                lo = mid + 1
        if start(lo) != first:
            out.append(None)
            continue
        top_lo, top_hi = lo, MAX_BUDGET
        while top_lo < top_hi:  # the largest budget keeping no more
            mid = (top_lo + top_hi + 1) // 2
            if start(mid) >= first:
                top_lo = mid
            else:
                top_hi = mid - 1
        out.append((lo, top_lo))
    return out


def roundest(lo: int, hi: int) -> int:
    """The number a person most likely set, in ``[lo, hi]``: the one with most trailing zeros (then the
    smallest)."""
    if lo <= 0 <= hi:
        return 0
    for step in (100_000, 10_000, 1000, 500, 100, 50, 10, 5, 1):
        first = -(-lo // step) * step
        if first <= hi:
            return first
    return lo


def _best_span(spans: list[tuple[int, int] | None]) -> tuple[int, int] | None:
    """The budgets inside the most calls' ranges (the first such stretch)."""
    points = sorted({p for s in spans if s for p in (s[0], s[1] + 1)})
    best, best_count = None, 0
    for a, b in zip(points, points[1:]):
        count = sum(1 for s in spans if s and s[0] <= a and b - 1 <= s[1])
        if count > best_count:
            best, best_count = (a, b - 1), count
    return best


def candidates(
    conversation: Conversation, node: Node, calls: Sequence[ObservedCall], max_tokens: int = 0
) -> list[Rule]:
    """Every rule worth replaying for a node's calls."""
    model = node.model or DEFAULT_MODEL
    base = MemoryConfig(model=model)
    sizes = _window_sizes(conversation, calls)
    rules = [
        Rule("off", base.with_(strategy="off"), "no memory"),
        Rule("buffer", base.with_(strategy="buffer"), "everything (questions and answers)"),
        Rule(
            "buffer",
            base.with_(strategy="buffer", granularity="all_messages"),
            "everything (every message, tool steps too)",
        ),
    ]
    rules += [
        Rule(
            "window",
            base.with_(strategy="window", window=n),
            f"last {n} messages" if n != 1 else "last message",
            words=f"the Window Memory node, window {n}",
        )
        for n in sorted(sizes["window"])
    ]
    rules += [
        Rule(
            "dify_documented",
            base.with_(window=k, fidelity="documented"),
            f"last {k} pairs" if k != 1 else "last pair",
            words=f"Dify as documented, window {k}",
        )
        for k in sorted(sizes["pairs"])
    ]
    rules += [Rule("dify_code", base.with_(window=n), f"Dify as shipped, window {n}") for n in sorted(sizes["rows"])]
    for start_on in (None, "human"):
        suffix = ", start on human" if start_on else ""
        rules += [
            Rule(
                "trim",
                base.with_(strategy="trim", trim_counter="messages", max_history_tokens=n, start_on=start_on),
                f"trim_messages, last {n} message{'s' if n != 1 else ''}{suffix}",
            )
            for n in sorted(sizes["trim"])
        ]
        for granularity in ("query_answer", "all_messages"):
            spans = _budget_span(conversation, calls, model, granularity, start_on)
            span = _best_span(spans)
            if span is None:
                continue
            which = "" if granularity == "query_answer" else ", every message"
            budget = roundest(*span)
            rules.append(
                Rule(
                    "trim_tokens",
                    base.with_(strategy="trim", max_history_tokens=budget, start_on=start_on, granularity=granularity),
                    f"trim_messages, {budget:,} tokens of {model}{suffix}{which}",
                    span,
                )
            )
            if node.system:
                system = chat_model_message_tokens(counter_for(model), _system_message(node.system)) + REPLY_PRIMING
                shifted = (span[0] + system, span[1] + system)
                total = roundest(*shifted)
                rules.append(
                    Rule(
                        "trim_tokens",
                        base.with_(
                            strategy="trim",
                            max_history_tokens=total,
                            start_on=start_on,
                            granularity=granularity,
                            include_system=True,
                        ),
                        f"trim_messages, {total:,} tokens of {model} with the system message{suffix}{which}",
                        shifted,
                    )
                )
            if start_on is None:
                rules.append(
                    Rule(
                        "summary_buffer",
                        base.with_(
                            strategy="summary_buffer", max_history_tokens=max(budget, 3), granularity=granularity
                        ),
                        f"summary buffer, {max(budget, 3):,} tokens{which}",
                        span,
                    )
                )
    if model_facts(model).context_size:
        for n in [None, *sorted(sizes["rows"])]:
            rules.append(
                Rule(
                    "dify_budget",
                    base.with_(window=n, plugin_token_counting=True, max_tokens=max_tokens),
                    f"Dify as shipped with token pruning (max_tokens {max_tokens:,})" + (f", window {n}" if n else ""),
                )
            )
    rules += [
        Rule("dify_agent", base.with_(strategy="dify_agent"), "a Dify Agent app's history"),
        Rule("compaction", base.with_(strategy="compaction"), "compaction (Dify 1.17 as shipped)"),
    ]
    return rules


def _system_message(text: str):
    from core.model.conversation import Message

    return Message("system", text, "", "system")


# -- judging ------------------------------------------------------------------------------------------


def judge(
    conversation: Conversation, node: Node, calls: Sequence[ObservedCall], rule: Rule, keep_ledgers: bool = False
) -> Explanation | None:
    """Which calls the rule's replay explains (``None``: the rule cannot run here)."""
    try:
        replay = node_replay(conversation, node, rule.config)
        positions = sorted({c.position for c in calls})
        summaries = replay.summaries_at(positions)
        explained, ledgers = [], {}
        cache: dict[int, Ledger] = {}
        for c in calls:
            summary = summaries.get(c.position)
            if summary is None or summary.kept != len(c.kept):
                explained.append(False)
                continue
            ledger = cache.get(c.position)
            if ledger is None:
                ledger = cache[c.position] = replay.ledger_at(c.position)
            ok = _kept(ledger) == c.kept
            explained.append(ok)
            if keep_ledgers:
                ledgers[c.number] = ledger
    except (ConfigError, ValueError):
        return None
    return Explanation(rule, tuple(explained), ledgers)


def infer_node(
    conversation: Conversation, node: Node, calls: Sequence[ObservedCall], max_tokens: int = 0
) -> NodeInference:
    """The rules explaining one node's calls, the best first, and where named platforms differ."""
    calls = sorted(calls, key=lambda c: c.number)
    rules = candidates(conversation, node, calls, max_tokens)
    if node.text_prefixes:  # the same rules, over the turns its text lines held
        lines = f", over {node.text_prefixes[0]}:/{node.text_prefixes[1]}: text lines"
        rules = [replace(r, label=r.label + lines, words=r.words and r.words + lines) for r in rules]
    judged = [e for e in (judge(conversation, node, calls, r) for r in rules) if e is not None]
    judged.sort(key=Explanation.rank)
    best = judged[0] if judged and judged[0].explains else None
    alike = [e for e in judged[1:] if best is not None and e.explained == best.explained]
    # One rule per family among the equivalents (its simplest setting): the rest are variants of it.
    families = {best.rule.family} if best is not None else set()
    equivalent = []
    for e in alike:
        if e.rule.family not in families:
            families.add(e.rule.family)
            equivalent.append(e)
    differences = []
    for family, platform in PLATFORMS.items():
        mine = [e for e in judged if e.rule.family == family]
        if not mine or mine[0].explains == len(calls):
            continue
        difference = _difference(conversation, node, calls, mine[0], platform)
        if difference is not None:
            differences.append(difference)
    return NodeInference(node, list(calls), best, equivalent, differences, alike)


def _difference(
    conversation: Conversation, node: Node, calls: Sequence[ObservedCall], explanation: Explanation, platform: str
) -> Difference | None:
    """The messages a platform's best setting treats otherwise than observed, at the first call it misses."""
    number = explanation.first_unexplained(calls)
    call = next(c for c in calls if c.number == number)
    ledger = node_replay(conversation, node, explanation.rule.config).ledger_at(call.position)
    lines = []
    for e in ledger.entries:
        observed = (e.position, e.index) in call.kept
        if observed == e.kept:
            continue
        where = f"{turn_label(conversation, e.position)}'s {e.role} message"
        if observed:
            lines.append(
                f"observed: {where} kept; {explanation.rule.words or explanation.rule.label} would drop it "
                f"({explain(e, ledger.config)})"
            )
        else:
            lines.append(f"observed: {where} dropped; {explanation.rule.words or explanation.rule.label} would keep it")
        if len(lines) == 3:
            break
    if not lines:
        return None
    return Difference(platform, explanation.rule, number, turn_label(conversation, call.position), tuple(lines))


# -- a stored conversation ------------------------------------------------------------------------------


@dataclass
class ConversationInference:
    conversation: Conversation
    nodes: list[NodeInference]

    def to_json(self) -> dict:
        return {"nodes": [n.to_json() for n in self.nodes]}


def calls_of_runs(runs_by_position: Mapping[int, Sequence[Mapping]]) -> list[ObservedCall]:
    """The observed calls a stored conversation's node runs record (their ``kept`` places)."""
    out = []
    for position, runs in runs_by_position.items():
        for run in runs:
            if "kept" not in run or not run.get("node_id"):
                continue
            out.append(
                ObservedCall(
                    str(run["node_id"]),
                    int(run.get("call_number") or 0),
                    position,
                    frozenset(tuple(p) for p in run.get("kept") or []),
                )
            )
    return out


def infer_conversation(
    conversation: Conversation,
    nodes: Mapping[str, Node],
    calls: Iterable[ObservedCall],
    max_tokens: Mapping[str, int] | None = None,
) -> ConversationInference:
    by_node: dict[str, list[ObservedCall]] = {}
    for c in calls:
        by_node.setdefault(c.node, []).append(c)
    out = []
    for node_id, node in nodes.items():
        if by_node.get(node_id):
            out.append(infer_node(conversation, node, by_node[node_id], (max_tokens or {}).get(node_id, 0)))
    return ConversationInference(conversation, out)


def stored_calls(db, conversation_id: str):
    """A stored conversation, its nodes and its observed calls (:class:`CaptureError` when it has none)."""
    from core.store import repo

    info = repo.get_conversation(db, conversation_id)
    conversation = repo.load_conversation(db, conversation_id)
    nodes = nodes_of(info.meta)
    rows = repo.load_turn_rows(db, conversation_id, with_node_runs=True)
    runs = {p: row.get("node_runs") or [] for p, row in enumerate(rows)}
    calls = calls_of_runs(runs)
    if not nodes or not calls:
        raise CaptureError(
            f"conversation {conversation_id!r} holds no captured calls: infer explains what the "
            "capture proxy recorded (memlens proxy) or a trace's calls imported"
        )
    limits = {}
    for p, node_runs in runs.items():
        for run in node_runs:
            request = (run.get("call") or {}).get("request") if isinstance(run.get("call"), Mapping) else None
            value = (request or {}).get("max_tokens", (request or {}).get("max_completion_tokens"))
            if isinstance(value, int) and run.get("node_id") not in limits:
                limits[run["node_id"]] = value
    return conversation, nodes, calls, limits


def infer_stored(db, conversation_id: str) -> ConversationInference:
    """The rules behind every node of a stored captured conversation."""
    conversation, nodes, calls, limits = stored_calls(db, conversation_id)
    return infer_conversation(conversation, nodes, calls, limits)


__all__ = [
    "ConversationInference",
    "Difference",
    "Explanation",
    "FAMILY_ORDER",
    "NodeInference",
    "ObservedCall",
    "PLATFORMS",
    "Rule",
    "calls_of_runs",
    "candidates",
    "infer_conversation",
    "infer_node",
    "infer_stored",
    "judge",
    "node_replay",
    "roundest",
    "rule_args",
    "stored_calls",
]
