"""Running one turn of a flow: every node in order, what each LLM node saw, and what changed.

:func:`run_turn` is persistence-agnostic: it takes a :class:`ConversationState` (the conversation's
message records with their parent ids, and the conversation variables' current values) and
returns a :class:`TurnRecord`; it never modifies the state. :meth:`ConversationState.apply` gives
the state after the turn. A store persists records; a server streams :func:`run_turn`'s events.

How a turn runs (spec/dify-memory.md §1–§3):

* The new turn is appended as Dify's placeholder row (answer ``""``, ``answer_tokens`` 0) under its
  parent — by default the newest turn, or any earlier turn id to branch. ``sys.dialogue_count`` is
  its position on its thread (first turn 1; failed turns count).
* Conversation variables not stored yet start at their defaults; values stored for variables the
  flow no longer declares are kept (§3.2).
* Nodes run from the start node along the edges. A node runs once all its incoming edges are
  decided and at least one was taken; an if-else takes the handle of its first true case, or
  ``false``; branches not taken are skipped. Nodes MemLens does not emulate run as pass-throughs
  with empty outputs and are recorded ``emulated: false`` (a multi-way pass-through takes its
  first branch and says so). Nodes inside an iteration or loop do not run.
* Each node runs through its type's runner in the registry (:mod:`core.flow.node_types`), which
  lives beside the type's settings in ``core/flow/nodes/``: the LLM node's memory and prompt in
  :mod:`core.flow.nodes.llm`, the Question Classifier's and Parameter Extractor's text memory in
  :mod:`core.flow.nodes.text_memory`, MemLens's own long-term memory, Window Memory and tool-agent
  nodes in :mod:`core.flow.nodes.long_term`, :mod:`core.flow.nodes.window_memory` and
  :mod:`core.flow.nodes.tool_agent`. A node's memory config comes from :mod:`core.flow.node_memory`.
* An assigner's writes are applied when the node finishes and reported through
  ``on_variables_updated``; they stay if a later node fails. A failing node fails the turn: the
  record keeps status ``failed``, the error and an empty answer.
* ``on_event`` receives Dify's streaming events in order: ``workflow_started``, ``node_started`` /
  ``node_finished`` per node, ``message`` (answer text), ``message_end``, ``workflow_finished``;
  on failure ``workflow_finished`` (status ``failed``) then ``error``.
"""

from __future__ import annotations

import copy
import time
import uuid
from collections import deque
from typing import Any, Callable, Mapping, Sequence

from core.limits import LimitError, check_query, nulled_non_finite
from core.llm.client import LLMClient
from core.memory.replay import turn_number
from core.memory.strategies.dify import DEFAULT_FIDELITY, FIDELITIES
from core.model.conversation import ANSWER, QUERY, UUID_NIL, FileRef, Message, Turn

from .agent_chat import AGENT_CHAT
from .context import RunContext
from .errors import GranularityError, NodeFailed, RunError
from .granularity import check_granularity
from .graph import Flow, Node
from .node_memory import check_override, node_memory_config
from .node_types import OVERRIDABLE_TYPES
from .nodes.start import check_inputs
from .records import FAILED, SUCCEEDED, ConversationState, NodeRun, TurnRecord
from .templates import FileList, VariablePool
from .variables import VariableChange, check_sizes, copy_value, initialize


class _Latest:
    def __repr__(self) -> str:
        return "LATEST"


#: ``parent_id`` default: the newest turn of the conversation (the end of the thread just answered).
LATEST: Any = _Latest()


def _pass_through_branch(node: Node, flow: Flow) -> str | None:
    handles = [e.handle for e in flow.outgoing(node.id)]
    if not handles or "source" in handles:
        return None
    order = [str(c.get("id")) for c in node.data.get("classes") or [] if isinstance(c, Mapping)]
    for h in order:
        if h in handles:
            return h
    return handles[0]


def _run_node(node: Node, ctx: RunContext) -> tuple[NodeRun, str | None]:
    """Run one node; returns its record and the handle it takes (None: every outgoing edge)."""
    run = NodeRun(node_id=node.id, type=node.type, title=node.title, emulated=node.emulated)
    started = time.perf_counter()
    branch: str | None = None
    kind = node.kind
    try:
        if kind is not None and kind.run is not None:
            branch = kind.run(node, ctx, run)
            # A model may answer 1e999 (a Parameter Extractor reads it as inf): no JSON carries it — not the
            # stream, the store or an export — so it is null from here on, and the run says so.
            run.notes.extend(nulled_non_finite(run.outputs, f"{node.type} node {node.id!r}: outputs"))
            ctx.pool.add_outputs(node.id, run.outputs)
        else:
            ctx.pool.mark_pass_through(node.id)
            branch = _pass_through_branch(node, ctx.flow)
            note = f"{node.type} is not emulated: ran as a pass-through with empty outputs"
            if branch is not None:
                note += f"; took branch {branch!r}"
            run.notes.append(note)
    except NodeFailed as e:
        run.status = FAILED
        run.error = str(e)
    if kind is None or not kind.times_itself:
        run.latency_ms = (time.perf_counter() - started) * 1000
    run.branch = branch
    return run, branch


def _event_node_data(node: Node, index: int, execution_id: str, predecessor: str | None, started: float) -> dict:
    """The fields ``node_started`` and ``node_finished`` share, each of them one Dify's stream
    responses require (a typed client refuses an event without ``created_at``); ``predecessor``:
    the node that ran before it, ``None`` for the first."""
    return {
        "id": execution_id,
        "node_id": node.id,
        "node_type": node.type,
        "title": node.title,
        "index": index,
        "predecessor_node_id": predecessor,
        "inputs": None,
        "created_at": int(started),
    }


def run_turn(
    flow: Flow,
    state: ConversationState,
    query: str,
    inputs: Mapping[str, Any] | None = None,
    *,
    parent_id: Any = LATEST,
    user_id: str = "user",
    fidelity: str = DEFAULT_FIDELITY,
    plugin_token_counting: bool = False,
    llm: LLMClient | None = None,
    node_memory_overrides: Mapping[str, Mapping[str, Any]] | None = None,
    on_variables_updated: Callable[[str, list[VariableChange]], None] | None = None,
    on_event: Callable[[dict], None] | None = None,
    turn_id: str | None = None,
    created_at: float | None = None,
    long_term: Any = None,
    granularity: str | None = None,
    files: Sequence[FileRef] = (),
    memories: dict | None = None,
) -> TurnRecord:
    """Run one turn of ``flow`` on ``state``; returns its record and leaves ``state`` unchanged.

    ``parent_id``: the turn this one answers after — :data:`LATEST` (the newest turn), ``None`` (a
    new thread root, as Dify's web app sends for a first message), ``UUID_NIL`` (linear: the next
    older turn, as Dify's Service API stores every message), or any earlier turn's id (a branch).
    ``llm``: the client to call models with (default: :class:`core.llm.client.LiteLLMClient`).
    ``node_memory_overrides``: ``{node_id: {MemoryConfig field: value}}`` for a what-if run.
    ``long_term``: the long-term memory (:class:`core.memory.long_term.LongTermMemory`) memory-retrieve and
    memory-store nodes use, keyed by ``user_id``; ``None`` leaves them with nothing to read or write.
    ``fidelity``: Dify's memory rules — ``code`` (Dify 1.x as shipped, the default) or ``documented``
    (as Dify's docs describe); ``plugin_token_counting``: Dify's PLUGIN_BASED_TOKEN_COUNTING_ENABLED
    (off by default, as Dify ships it), which makes the shipped rules prune history by tokens.
    ``files``: the files the user sent with the query (``sys.files``); they stay with the turn's
    query, so later turns' history carries them when the flow has file upload on.
    ``granularity``: the request's history granularity for agent nodes (``None``: the flow's
    ``history.granularity``, else ``query_answer``).
    ``memories``: a dict the caller keeps for this conversation between its turns, in which the
    nodes' memories keep their thread views (:class:`core.memory.turn_memory.TurnMemory`), so a turn of a
    long conversation is not a replay of it; each checks that it is given the conversation it
    saw last (else it starts again).
    Bad input (unknown parent, bad fidelity, missing required inputs, a bad override) raises
    :class:`RunError` before anything runs.
    """
    if fidelity not in FIDELITIES:
        raise RunError(
            f"unknown fidelity {fidelity!r}; expected code (Dify 1.x as shipped) or documented "
            f"(as Dify's docs describe)"
        )
    if not isinstance(query, str):
        raise RunError("query must be text")
    try:
        check_query(query)
    except LimitError as e:
        raise RunError(str(e)) from None
    if granularity is not None:
        try:
            granularity = check_granularity(granularity, "request")
        except GranularityError as e:
            raise RunError(str(e)) from None
    overrides: dict[str, dict] = {}
    for node_id, override in (node_memory_overrides or {}).items():
        if not flow.has_node(node_id) or flow.node(node_id).type not in OVERRIDABLE_TYPES:
            ids = ", ".join(n.id for n in flow.nodes if n.type in OVERRIDABLE_TYPES) or "none"
            raise RunError(
                f"memory override for {node_id!r}: the flow has no LLM or agent node with that id "
                f"(LLM and agent nodes: {ids})"
            )
        overrides[node_id] = check_override(node_id, override)
        node_memory_config(
            flow,
            node_id,
            fidelity=fidelity,
            plugin_token_counting=plugin_token_counting,
            granularity=granularity,
            override=overrides[node_id],
        )
    conv = state.conversation
    if parent_id is LATEST:
        parent_id = state.latest_turn_id
    elif parent_id is not None and parent_id != UUID_NIL and parent_id not in conv.tree.position:
        raise RunError(f"parent turn {parent_id!r} is not in conversation {conv.id}")
    checked_inputs = check_inputs(flow, query, inputs)

    turn_id = turn_id or str(uuid.uuid4())
    created = time.time() if created_at is None else created_at
    files = tuple(files)
    placeholder = Turn(
        id=turn_id,
        parent_id=parent_id,
        messages=(
            Message("user", query, QUERY, f"{turn_id}:query", files=files),
            Message("assistant", "", ANSWER, f"{turn_id}:answer"),
        ),
        query_index=0,
        answer_index=1,
        created_at=created,
        answer_tokens=0,
    )
    working = conv.with_turn(placeholder, system_prompt="", meta={})
    position = len(conv.turns)
    number = turn_number(working, position)
    dialogue_count = working.tree.depth[position]
    variables = initialize(flow.variables, state.variables)
    run_id = str(uuid.uuid4())
    system: dict[str, Any] = {
        "files": FileList(f.to_dict() for f in files),
        "user_id": user_id,
        "app_id": flow.name,
        "workflow_id": flow.structural_signature()[:32],
        "workflow_run_id": run_id,
    }
    if flow.is_chat:
        system.update(query=query, conversation_id=conv.id, dialogue_count=dialogue_count)
    pool = VariablePool(system=system, conversation=variables, environment=flow.environment)

    def emit(event: str, **payload: Any) -> None:
        if on_event is not None:
            on_event(
                {
                    "event": event,
                    "conversation_id": conv.id,
                    "message_id": turn_id,
                    "task_id": run_id,
                    "created_at": int(created),
                    **payload,
                }
            )

    ctx = RunContext(
        flow=flow,
        conversation=working,
        position=position,
        turn_id=turn_id,
        turn_number=number,
        pool=pool,
        variables=variables,
        fidelity=fidelity,
        llm=llm,
        overrides=overrides,
        on_variables_updated=on_variables_updated,
        emit=emit,
        long_term=long_term,
        granularity=granularity,
        plugin_token_counting=bool(plugin_token_counting),
        memories=memories,
        inputs=checked_inputs,
    )
    emit(
        "workflow_started",
        workflow_run_id=run_id,
        data={
            "id": run_id,
            "workflow_id": system["workflow_id"],
            "inputs": copy.deepcopy(checked_inputs),
            "created_at": int(created),
        },
    )
    # Dify checks a variable's size when the run loads it, not when a node wrote it: a value that
    # grew too big in an earlier turn fails this one before any node runs.
    too_big = check_sizes(variables)
    runs, error = ([], too_big) if too_big else _execute(flow, ctx)
    failed = error is not None
    answer = "" if failed else "".join(ctx.answers)
    record = TurnRecord(
        id=turn_id,
        parent_id=parent_id,
        conversation_id=conv.id,
        turn=number,
        query=query,
        answer=answer,
        status=FAILED if failed else SUCCEEDED,
        error=error,
        dialogue_count=dialogue_count,
        created_at=created,
        inputs=copy.deepcopy(checked_inputs),
        user_id=user_id,
        fidelity=fidelity,
        plugin_token_counting=bool(plugin_token_counting),
        node_runs=runs,
        variable_changes=list(ctx.changes),
        variables=copy_value(ctx.variables),
        intermediate=[m.to_dict() for m in ctx.intermediate],
        window_overwrites=copy.deepcopy(ctx.window_overwrites),
        files=[f.to_dict() for f in files],
        agent_thoughts=agent_thoughts(flow, runs),
    )
    elapsed = round(sum(r.latency_ms for r in runs) / 1000, 6)
    if not failed:
        emit("message_end", id=turn_id, metadata={"usage": record.usage}, files=[])
    emit(
        "workflow_finished",
        workflow_run_id=run_id,
        data={
            "id": run_id,
            "workflow_id": system["workflow_id"],
            "status": record.status,
            "outputs": {"answer": answer},
            "error": error,
            "elapsed_time": elapsed,
            "total_tokens": record.usage["total_tokens"],
            "total_steps": len(runs),
            "created_by": {"id": user_id, "user": user_id},
            "created_at": int(created),
            "finished_at": int(time.time()),
            "exceptions_count": 0,
            "files": [],
        },
    )
    if failed:
        emit("error", status=400, code="invalid_param", message=f"Run failed: {error}")
    return record


def agent_thoughts(flow: Flow, runs: Sequence[NodeRun]) -> int:
    """The thoughts a Dify Agent app's runner records for a turn: one per model request, made before
    the request is sent (so a failed request has one too). MemLens asks the app's model once a turn
    (its tools are not run): one when the agent ran. A Chatflow's message records none. Dify's agent
    history replays a turn's thoughts, an empty one too, and leaves out the empty answer of a turn
    with none (:func:`core.memory.strategies.dify_agent.left_out`)."""
    if flow.app_mode != AGENT_CHAT:
        return 0
    return sum(1 for r in runs if r.type == "tool-agent")


def _execute(flow: Flow, ctx: RunContext) -> tuple[list[NodeRun], str | None]:
    """Walk the graph from the start node; returns the node runs in order and the failure, if any."""
    start = flow.start
    edges = [e for e in flow.edges]
    reachable = {start.id}
    frontier = [start.id]
    while frontier:
        nid = frontier.pop()
        for e in edges:
            if e.source == nid and e.target not in reachable and not flow.node(e.target).container:
                reachable.add(e.target)
                frontier.append(e.target)
    incoming: dict[str, list[int]] = {n: [] for n in reachable}
    outgoing: dict[str, list[int]] = {n: [] for n in reachable}
    for i, e in enumerate(edges):
        if e.source in reachable and e.target in reachable:
            incoming[e.target].append(i)
            outgoing[e.source].append(i)
    decided: dict[int, bool] = {}  # edge index → taken?
    queue: deque[str] = deque([start.id])
    queued = {start.id}
    skipped: set[str] = set()
    runs: list[NodeRun] = []

    def settle(target: str) -> None:
        if target in queued or target in skipped:
            return
        states = [decided.get(i) for i in incoming[target]]
        if any(s is None for s in states):
            return
        if any(states):
            queue.append(target)
            queued.add(target)
        else:
            skipped.add(target)
            for i in outgoing[target]:
                decided[i] = False
                settle(edges[i].target)

    while queue:
        node = flow.node(queue.popleft())
        execution_id = str(uuid.uuid4())
        index = len(runs) + 1
        predecessor, started = (runs[-1].node_id if runs else None), time.time()
        ctx.emit(
            "node_started",
            workflow_run_id=ctx.pool.system["workflow_run_id"],
            data={**_event_node_data(node, index, execution_id, predecessor, started), "extras": {}},
        )
        run, branch = _run_node(node, ctx)
        runs.append(run)
        data = _event_node_data(node, index, execution_id, predecessor, started)
        data.update(
            status=run.status,
            error=run.error,
            outputs=copy.deepcopy(run.outputs),
            process_data=None,
            elapsed_time=round(run.latency_ms / 1000, 6),
            emulated=run.emulated,
            execution_metadata={"total_tokens": (run.usage or {}).get("total_tokens", 0)},
            finished_at=int(time.time()),
            files=[],
        )
        if run.prompt is not None:
            data["process_data"] = {"prompts": [{"role": m.role, "text": m.content} for m in run.prompt]}
        ctx.emit("node_finished", workflow_run_id=ctx.pool.system["workflow_run_id"], data=data)
        if run.status == FAILED:
            return runs, run.error
        for i in outgoing[node.id]:
            decided[i] = branch is None or edges[i].handle == branch
        for i in outgoing[node.id]:
            settle(edges[i].target)
    return runs, None


def run_conversation(
    flow: Flow, queries: Sequence[str | Mapping[str, Any]], *, state: ConversationState | None = None, **kwargs: Any
) -> tuple[ConversationState, list[TurnRecord]]:
    """Run queries in order as one conversation (each turn after the previous); returns the final state and records.

    A query is a string or ``{"query": str, "inputs": {...}}``. Keyword arguments go to :func:`run_turn`.
    """
    state = state or ConversationState.new(flow)
    if kwargs.get("long_term") is None and any(n.type in ("memory-retrieve", "memory-store") for n in flow.nodes):
        from core.memory.long_term import LongTermMemory

        kwargs["long_term"] = LongTermMemory()  # one conversation's worth, in memory
    records = []
    for item in queries:
        if isinstance(item, Mapping):
            query, inputs = item.get("query", ""), item.get("inputs")
        else:
            query, inputs = item, None
        record = run_turn(flow, state, query, inputs, **kwargs)
        records.append(record)
        state = state.apply(record)
    return state, records


__all__ = ["LATEST", "agent_thoughts", "run_conversation", "run_turn"]
