"""What the debugger page shows, computed without Streamlit.

* :func:`transcript` — the active thread's messages, each with one marker per LLM node (kept,
  dropped or not eligible, and why in plain words) as seen from the selected turn, and the
  places where each node's window starts;
* :func:`receipt` — one node's call: the messages sent in order with their origin and tokens, and
  the budget split by origin with the dropped tokens as overflow;
* :func:`what_if` — every turn's kept set for one node under other memory settings, without
  calling a model, and the turns where replies might now differ;
* :func:`tree_layout` — the turn tree laid out for a small overview with the active path.

The page renders these; tests check them directly.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Iterable, Mapping, Sequence

from core.memory.config import MemoryConfig
from core.memory.replay import Replay, turn_numbers
from core.memory.strategies import DEFAULT_STRATEGY, STRATEGIES, strategy_of
from core.memory.strategies.dify_agent import DifyAgentStrategy
from core.memory.words import explain
from core.model.conversation import Conversation, message_text, source_model, thread_number, turn_label
from core.model.ledger import KEPT, REASON_LABELS, Ledger, SyntheticMessage, is_dropped
from core.model.origins import CURRENT_QUERY, HISTORY, SUMMARY, SYSTEM, origin_rank
from core.model.tokens import DEFAULT_MODEL, counter_for
from core.words import plural

KEPT_STATE, DROPPED_STATE, NOT_ELIGIBLE_STATE = "kept", "dropped", "not_eligible"


def marker_state(reason: str) -> str:
    if reason == KEPT:
        return KEPT_STATE
    return DROPPED_STATE if is_dropped(reason) else NOT_ELIGIBLE_STATE


@dataclass(frozen=True)
class Marker:
    node_id: str
    title: str
    state: str
    reason: str
    why: str


@dataclass
class MessageView:
    turn_id: str
    position: int
    index: int
    role: str
    kind: str
    text: str
    number: int  # the turn's number in the conversation (creation order: an address, not shown)
    markers: list[Marker] = field(default_factory=list)
    window_starts: list[str] = field(default_factory=list)  # node titles whose window starts at this message
    selected: bool = False  # the message belongs to the selected turn
    later: bool = False  # after the selected turn: not part of its memory yet
    label: str = ""  # the turn as a person counts it: "turn 6 · 2/3" (core.model.conversation.turn_label)


def transcript(
    conversation: Conversation,
    thread: Sequence[int],
    selected: int | None,
    ledgers: Mapping[str, Ledger],
    titles: Mapping[str, str],
    *,
    node_filter: str | None = None,
) -> list[MessageView]:
    """Messages of the turns in ``thread`` (positions, oldest first) with markers from ``ledgers``.

    ``ledgers`` are the selected turn's ledgers per LLM node; ``node_filter`` keeps one node.
    """
    numbers = turn_numbers(conversation)
    nodes = [n for n in ledgers if node_filter in (None, n)]
    by_node: dict[str, dict[tuple[int, int], Any]] = {}
    first_kept: dict[str, tuple[int, int]] = {}
    for node in nodes:  # the shown turns' entries only: a long ledger is not listed whole
        ledger = ledgers[node]
        by_node[node] = {(e.position, e.index): e for e in ledger.entries_at(thread)}
        kept = [(e.position, e.index) for e in ledger.kept]
        if kept:
            first_kept[node] = min(kept)
    out: list[MessageView] = []
    for p in thread:
        turn = conversation.turns[p]
        for i, m in enumerate(turn.messages):
            view = MessageView(
                turn_id=turn.id,
                position=p,
                index=i,
                role=m.role,
                kind=m.kind,
                text=message_text(m),
                number=numbers[p],
                label=turn_label(conversation, p),
                selected=p == selected,
                later=selected is not None and p > selected,
            )
            for node in nodes:
                entry = by_node[node].get((p, i))
                if entry is not None:
                    ledger = ledgers[node]
                    view.markers.append(
                        Marker(
                            node,
                            titles.get(node, node),
                            marker_state(entry.reason),
                            entry.reason,
                            explain(entry, ledger.config, titles.get(node, node)),
                        )
                    )
                if first_kept.get(node) == (p, i):
                    view.window_starts.append(titles.get(node, node))
            out.append(view)
    return out


# -- the context receipt ------------------------------------------------------------------------------


@dataclass
class ReceiptRow:
    role: str
    origin: str
    tokens: int
    content: str
    #: Content parts when the message carries files: ``{type, name, tokens, estimated}`` each.
    parts: list[dict] = field(default_factory=list)
    #: Of ``tokens``, the memory history's text lines inside this message (a text-form prompt).
    history_tokens: int = 0


@dataclass
class Receipt:
    node_id: str
    title: str
    rows: list[ReceiptRow]
    used_by_origin: dict[str, int]
    dropped_tokens: int
    dropped_by_reason: dict[str, int]
    limit: int | None  # the history budget, None when nothing prunes
    context_size: int | None
    prompt_tokens: int
    exact: bool
    encoding: str
    budget_note: str
    reply: str | None
    model: str | None
    notes: list[str]
    #: Which Dify rules decided (e.g. "Dify 1.x as shipped · plugin token counting off"); "" for other memories.
    profile: str = ""
    #: How Dify's docs would differ from Dify 1.x here, in plain words ("" when they agree or were not compared).
    docs_vs_code: str = ""
    #: The messages the two profiles treat differently: (turn, role, "docs: kept · code: dropped (why)").
    both: list[tuple[int, str, str]] = field(default_factory=list)
    #: The node's own model when another answered in its place (the demo model, a model picked for new
    #: turns): its tokens and context are still that model's, as the real bot's are.
    configured_model: str | None = None


def memory_rules(config: Mapping[str, Any]) -> str:
    """The rules a ledger's config ran under beyond its label, in words, as its memory system says them
    (:meth:`core.memory.strategies.base.Strategy.describe`: Dify's profile; "" for most)."""
    return strategy_of(config).describe(config)


def _both(code: Ledger, docs: Ledger) -> list[tuple[int, str, str]]:
    from .findings.profiles import both_decisions

    decisions = both_decisions(code, docs)
    entries = {(e.position, e.index): e for e in code.entries_at({p for p, _ in decisions})}  # not the whole ledger
    out = []
    for key, (d, c) in sorted(decisions.items()):
        e = entries[key]
        out.append((e.turn, e.role, f"docs: {REASON_LABELS.get(d, d)} · code: {REASON_LABELS.get(c, c)}"))
    return out


def receipt(
    run: Mapping[str, Any],
    title: str,
    *,
    exact: bool,
    encoding: str,
    other: Ledger | None = None,
    position: int | None = None,
) -> Receipt:
    """The receipt of one stored node run (ledger as a :class:`Ledger`, prompt as dicts).

    ``other`` is the same node's ledger at the same turn under the other Dify profile (docs or
    code) and ``position`` the turn's position: the receipt then says how the two differ."""
    ledger: Ledger | None = run.get("ledger")
    prompt = run.get("prompt") or []
    rows = [
        ReceiptRow(
            m["role"],
            m["origin"],
            int(m.get("tokens") or 0),
            m.get("content") or "",
            [dict(p) for p in m.get("parts") or []],
            int(m.get("history_tokens") or 0),
        )
        for m in prompt
    ]
    used: dict[str, int] = {}
    for r in rows:
        # A text-form prompt's history lines count as memory history, the rest of their message as its origin.
        used[r.origin] = used.get(r.origin, 0) + r.tokens - r.history_tokens
        if r.history_tokens:
            used[HISTORY] = used.get(HISTORY, 0) + r.history_tokens
    dropped: dict[str, int] = {}
    if ledger is not None:
        dropped = {r: n for r, n in ledger.tokens_by_reason().items() if is_dropped(r)}
    profile = memory_rules(ledger.config) if ledger is not None else ""
    difference, both = "", []
    if ledger is not None and other is not None and position is not None and profile:
        from .findings.profiles import ledger_difference

        code, docs = (ledger, other) if ledger.config.get("fidelity") == "code" else (other, ledger)
        diff = ledger_difference(code, docs, position, sum(r.tokens for r in rows if r.origin == CURRENT_QUERY))
        if diff is not None:
            difference, both = diff.text, _both(code, docs)
    return Receipt(
        node_id=run["node_id"],
        title=title,
        rows=rows,
        profile=profile,
        docs_vs_code=difference,
        both=both,
        used_by_origin={o: used[o] for o in sorted(used, key=origin_rank)},
        dropped_tokens=sum(dropped.values()),
        dropped_by_reason=dropped,
        limit=ledger.budget if ledger else None,
        context_size=ledger.context_size if ledger else None,
        prompt_tokens=ledger.prompt_tokens if ledger else sum(r.tokens for r in rows) + 3,
        exact=exact,
        encoding=encoding,
        budget_note=ledger.budget_note if ledger else "",
        reply=run.get("reply"),
        model=run.get("model_called") or run.get("model"),
        notes=list(run.get("notes") or []),
        configured_model=run.get("model") if run.get("model_called") not in (None, run.get("model")) else None,
    )


def node_receipt(
    run: Mapping[str, Any],
    title: str,
    *,
    ledger: Ledger | None = None,
    prompt: list[dict] | None = None,
    model: str | None = None,
    other: Ledger | None = None,
    position: int | None = None,
) -> Receipt:
    """One node's receipt as every view assembles it: an LLM node's or an agent's recorded run, a replayed
    lens, an observed call. ``ledger`` and ``prompt`` stand in for the recorded ones under a what-if;
    tokens are counted with ``model``'s tokenizer, else the ledger's model, else the run's.

    For example, the switchboard's what-if for an LLM node passes its what-if ledger and the prompt
    that ledger would send; the receipt then reads that call, counted as its model counts."""
    shown = dict(run)
    if ledger is not None:
        shown["ledger"] = ledger
    if prompt is not None:
        shown["prompt"] = prompt
    kept_by = shown.get("ledger")
    counter = counter_for(
        model or (kept_by.config.get("model") if kept_by is not None else None) or run.get("model") or DEFAULT_MODEL
    )
    return receipt(shown, title, exact=counter.exact, encoding=counter.encoding_name, other=other, position=position)


# -- what-if ------------------------------------------------------------------------------------------


@dataclass
class WhatIf:
    node_id: str
    config: MemoryConfig
    baseline: MemoryConfig
    differs: list[int]  # turn positions (of those compared) whose kept set changes: the reply might differ
    kept_before: dict[int, int]
    kept_after: dict[int, int]


def fixed_tokens_of(conversation: Conversation, node_id: str, default: int = 3):
    """The per-turn prompt size (everything but history) recorded for a node, for a Replay."""

    def lookup(position: int) -> int:
        value = ((conversation.turns[position].meta or {}).get("prompt_tokens") or {}).get(node_id)
        return int(value) if value is not None else default

    return lookup


def what_if(
    conversation: Conversation,
    node_id: str,
    baseline: MemoryConfig,
    config: MemoryConfig,
    *,
    has_thread: bool = True,
    history_inputs=None,
    positions: Iterable[int] | None = None,
) -> WhatIf:
    """Compare the kept sets under ``baseline`` and ``config`` of every answered turn, or of those
    among ``positions`` (what is on screen: each decided from the turns its memory reads, so a page
    costs the same at any length); ``history_inputs`` as :class:`Replay` takes them (a Window
    Memory node's recorded overwrites)."""
    tokens = fixed_tokens_of(conversation, node_id)
    before = Replay(
        conversation,
        baseline,
        system_prompt="",
        has_thread=has_thread,
        prompt_tokens=tokens,
        history_inputs=history_inputs,
    )
    after = Replay(
        conversation,
        config,
        system_prompt="",
        has_thread=has_thread,
        prompt_tokens=tokens,
        history_inputs=history_inputs,
    )
    if positions is None:
        answered = conversation.answered_turns()
        pairs = zip(answered, before.summaries(), after.summaries())
    else:
        shown = sorted(set(positions))
        a_at, b_at = before.summaries_at(shown), after.summaries_at(shown)
        pairs = ((p, a_at[p], b_at[p]) for p in shown if p in a_at)
    differs, kb, ka = [], {}, {}
    for p, a, b in pairs:
        kb[p], ka[p] = a.kept, b.kept
        if (a.kept, a.oldest_kept_turn, a.history_tokens) != (b.kept, b.oldest_kept_turn, b.history_tokens):
            differs.append(p)
    return WhatIf(node_id, config, baseline, differs, kb, ka)


def focus_node(now: Mapping[str, Ledger], before: Mapping[str, Ledger], order: Sequence[str]) -> str | None:
    """The node a person should see first at a turn: the one whose memory lost the most messages
    since the previous turn of the thread (then: gained the most; then the first in ``order``)."""
    best, best_key = None, None
    for node in order:
        ledger = now.get(node)
        if ledger is None:
            continue
        kept = {(e.position, e.index) for e in ledger.kept}
        prev = before.get(node)
        kept_before = {(e.position, e.index) for e in prev.kept} if prev is not None else set()
        key = (len(kept_before - kept), ledger.dropped_count() > 0, len(kept - kept_before))
        if best_key is None or key > best_key:
            best, best_key = node, key
    return best


# -- the tree overview --------------------------------------------------------------------------------


@dataclass
class TreeNode:
    turn_id: str
    position: int
    x: int  # its place on its thread, as its label numbers it (the first question is 1)
    y: int  # lane
    parent: int | None
    active: bool
    label: str


def tree_layout(conversation: Conversation, active: Sequence[int]) -> list[TreeNode]:
    """Turns placed by depth (x) and branch lane (y); siblings after the first open new lanes."""
    tree = conversation.tree
    active_set = set(active)
    lanes: dict[int, int] = {}
    next_lane = 0
    out: list[TreeNode] = []
    roots = [i for i in range(tree.size) if tree.parent[i] is None]
    stack = list(reversed(roots))
    while stack:
        p = stack.pop()
        parent = tree.parent[p]
        siblings = tree.children[parent] if parent is not None else roots
        if parent is not None and siblings and siblings[0] == p:
            lanes[p] = lanes[parent]
        else:
            lanes[p] = next_lane
            next_lane += 1
        q = conversation.turns[p].query
        out.append(
            TreeNode(
                conversation.turns[p].id,
                p,
                thread_number(conversation, p),
                lanes[p],
                parent,
                p in active_set,
                f"{turn_label(conversation, p)}: {q[:40]}",
            )
        )
        stack.extend(reversed(tree.children[p]))
    return out


# -- conversations without a flow: memory lenses ------------------------------------------------------


@dataclass(frozen=True)
class Lens:
    """One memory config a conversation without a flow is replayed under, as if an LLM node had it."""

    id: str
    title: str
    config: MemoryConfig


def fitting_config(
    conversation: Conversation | None = None, window: int | None = None, *, agent: bool = False
) -> MemoryConfig:
    """The memory a conversation without a flow is replayed under unless asked otherwise: the memory of
    the platform that recorded it, when a memory system claims it (:meth:`Strategy.claims`, in the
    registry's order: a Dify Agent app's log as its runner builds its history, a transcript whose app
    sends the whole thread as everything on the thread); ``agent`` asks for a Dify Agent app's memory
    whatever the conversation; any other as the default memory (Dify's LLM-node memory) with the
    project's defaults, ``window`` when the source says which window the bot ran with. Each is counted
    for the model the source says answered (:data:`SOURCE_MODEL`), else the project's default."""
    recorded = source_model(conversation.meta) if conversation is not None else None
    model = {"model": recorded} if recorded else {}
    if agent:
        return MemoryConfig(DifyAgentStrategy.name, **model)
    for name, system in STRATEGIES.items():
        claim = system.claims(conversation) if conversation is not None else None
        if claim is not None:
            return MemoryConfig(name, **{**claim, **model})
    return MemoryConfig(DEFAULT_STRATEGY, window=window, **model)


def default_lens(window: int | None = None, *, agent: bool = False, conversation: Conversation | None = None) -> Lens:
    """The lens a conversation without a flow opens under: :func:`fitting_config`."""
    config = fitting_config(conversation, window, agent=agent)
    return Lens("lens-default", f"Default · {config.label()}", config)


def lens_ledgers(replays: Mapping[str, Replay], position: int) -> dict[str, Ledger]:
    """Each lens's ledger at the turn at ``position`` (a turn without a query has none)."""
    out = {}
    for lens_id, replay in replays.items():
        if replay.conversation.turns[position].query_index is None:
            continue
        out[lens_id] = replay.ledger(replay.numbers[position])
    return out


def replayed_run(conversation: Conversation, position: int, lens_id: str, ledger: Ledger, counter) -> dict:
    """A lens's call at one turn in the shape a stored node run has (what :func:`receipt` reads):
    the system prompt, the history as it would be sent (kept messages and what stands for dropped
    ones), and the current query."""
    from core.model.conversation import Message

    prompt: list[dict] = []
    if conversation.system_prompt:
        prompt.append(
            {
                "role": "system",
                "origin": SYSTEM,
                "content": conversation.system_prompt,
                "tokens": counter.message(Message("system", conversation.system_prompt, "", "system")),
            }
        )
    for row in ledger.rows():
        if isinstance(row, SyntheticMessage):
            prompt.append(
                {
                    "role": row.role,
                    "origin": SUMMARY if row.replaces is None else HISTORY,
                    "content": row.content,
                    "tokens": row.tokens,
                }
            )
        elif row.kept:
            message = conversation.turns[row.position].messages[row.index]
            prompt.append(
                {"role": message.role, "origin": HISTORY, "content": message_text(message), "tokens": row.tokens}
            )
    turn = conversation.turns[position]
    query = turn.query_message
    if query is not None:
        prompt.append(
            {"role": "user", "origin": CURRENT_QUERY, "content": query.content, "tokens": counter.message(query)}
        )
    notes = []
    steps = sum(1 for i, m in enumerate(turn.messages) if i not in (turn.query_index, turn.answer_index))
    if steps:  # the turn's own tool round or thinking: sent with its later requests, not its first
        notes.append(
            f"This is the turn's first request. Its own {plural(steps, 'step')} (tool calls, tool results, "
            "thinking) follow the query in the requests after it."
        )
    return {
        "node_id": lens_id,
        "ledger": ledger,
        "prompt": prompt,
        "model": ledger.config.get("model"),
        "reply": turn.answer,
        "notes": notes,
    }


def why_settings_note(turn: str, settings: str) -> str:
    """What "Where did it go?" replays: each node's memory over the whole thread with one config, the
    one the page shows for the inspected ``turn`` — which an earlier turn of the thread need not have
    run with (a re-run, or settings kept for new turns, since): its own markers show what it kept."""
    return (
        f"Replayed over this thread with the settings shown for {turn} ({settings}); a turn that ran with "
        f"others shows what it kept in its own markers."
    )


def rerun_rows_note(turn: str, later: int, configs: Iterable[MemoryConfig]) -> str | None:
    """Why re-running ``turn`` as a branch may keep less than its what-if (``configs``) shows, when a
    node's memory is Dify's as shipped: the re-run is the conversation's newest turn, and Dify then takes
    its window rows from the newest turns of the whole conversation (every branch), so the turn's first
    answer and the ``later`` turns written after it take rows before its own thread's
    (:meth:`core.memory.strategies.dify.DifyStrategy.window`). None when that does not apply."""
    if not any(c.system.later_turns_take_rows(c) for c in configs):
        return None
    others = f"{turn}'s first answer" + (f" and the {plural(later, 'turn')} written after it" if later else "")
    return (
        f"A re-run is the conversation's newest turn: Dify as shipped fills its window with the newest rows of "
        f"the whole conversation, so {others}, which the new branch leaves out, still take"
        f"{'s a row' if not later else ' rows'} before its own thread's."
    )


def models_note(configured: Mapping[str, str | None], runs: Sequence[Mapping[str, Any]] = ()) -> str | None:
    """What a person starting on a flow should know about who answers: before its first turn, the models
    its nodes name (``configured``: node name → model) and that the demo model stands in without a key;
    after it, which nodes the offline demo model answered for and why (``runs``: the turn's stored node
    runs, named by their ``title``), and how to use the real model. ``None`` when every node runs on the
    demo model by design, or every one ran on its own."""
    from core.model.tokens import DEMO_MODEL

    real = sorted({m for m in configured.values() if m and not m.startswith("memlens/")})
    if not runs:
        if not real:
            return None
        return (
            f"This flow's nodes call {', '.join(real)}. A node whose provider key is not in the environment "
            f"(e.g. OPENAI_API_KEY) is answered by the offline demo model {DEMO_MODEL}, and its receipt says so."
        )
    stood = [
        r
        for r in runs
        if r.get("model_called") == DEMO_MODEL
        and r.get("model") not in (None, "", DEMO_MODEL)
        and not str(r.get("model")).startswith("memlens/")
    ]
    if not stood:
        return None
    why = next((n for r in stood for n in r.get("notes") or () if DEMO_MODEL in n), "")
    names = ", ".join(dict.fromkeys(str(r.get("title") or r.get("node_id")) for r in stood))
    return (
        f"The offline demo model {DEMO_MODEL} answered for {names}" + (f" ({why})" if why else "") + ". It answers "
        "from what it is sent only: names and numbers it finds there, questions sorted by shared words. To use the "
        "real model, set its provider's key in the environment MemLens runs in and restart it, or pick a model "
        "under Model for new turns."
    )


def damage_note(
    conversation_fields: Sequence[str],
    conversation: Conversation,
    runs: Sequence[Mapping[str, Any]] = (),
    titles: Mapping[str, str] | None = None,
) -> str | None:
    """One line saying which stored values of a conversation could not be read (and are shown with
    defaults), or ``None``: the conversation's own fields, its turns' (``meta["damaged"]``) and the
    node runs on screen (their ``damaged``)."""
    parts = [f"conversation {', '.join(conversation_fields)}"] if conversation_fields else []
    for position, turn in enumerate(conversation.turns):
        fields = (turn.meta or {}).get("damaged")
        if fields:
            parts.append(f"{turn_label(conversation, position)} {', '.join(fields)}")
    for run in runs:
        if run.get("damaged"):
            name = (titles or {}).get(run.get("node_id"), run.get("node_id") or "a node")
            parts.append(f"{name}'s {', '.join(run['damaged'])}")
    if not parts:
        return None
    return (
        "Some stored values are damaged (written outside MemLens or by an older version) and are shown "
        "with defaults: " + "; ".join(parts) + "."
    )
