"""Reading and writing the store: flows and versions, conversations, turns, variables.

Every function takes a :class:`~core.store.db.Database` and does its work in one transaction, so
each call is all-or-nothing: a turn's row when it starts, then its end together with all its node
runs, a node's variable writes together, an import as a whole. A turn's or node run's error is
stored redacted (:mod:`core.redact`): no provider's echo of a key reaches the database.
"""

from __future__ import annotations

import hashlib
import json
import time
import uuid
from dataclasses import dataclass, field
from typing import Any, Iterable

from sqlalchemy import and_, delete, func, insert, null, or_, select, update
from sqlalchemy.orm import Session, aliased

from core.flow.nodes.window_memory import META_KEY as WINDOW_META
from core.flow.variables import USER as USER_EDIT
from core.memory.strategies.compaction import SUMMARIES_META
from core.model.conversation import (AGENT_THOUGHTS, ANSWER, QUERY, SHOWN_ANSWER, SOURCE_MODEL, Conversation, Message,
                                     Turn, source_model)
from core.redact import redact_optional

from . import checks
from .db import Database
from .errors import ConversationBusyError, NoFeedbackError, NotFoundError, StoreError
from .models import (ConversationRow, FeedbackRow, FlowRow, FlowVersionRow, NodeRunRow, SettingRow, TurnRow,
                     VariableChangeRow, VariableRow)


def new_id() -> str:
    return str(uuid.uuid4())


def now() -> float:
    return time.time()


def structure_hash(structure: Any) -> str:
    """A stable hash of a flow's structural signature (node ids, types, order, edges)."""
    return hashlib.sha256(json.dumps(structure, sort_keys=True, ensure_ascii=False).encode()).hexdigest()[:64]


# -- flows ------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class FlowVersion:
    id: str
    flow_id: str
    flow_name: str
    version: int
    definition: dict
    structure: str
    note: str
    created_at: float


def _flow_version(row: FlowVersionRow, name: str) -> FlowVersion:
    return FlowVersion(row.id, row.flow_id, name, row.version, row.definition, row.structure, row.note,
                       row.created_at)


def create_flow(db: Database, name: str, definition: dict, structure: str, note: str = "imported") -> FlowVersion:
    with db.session() as s:
        flow = FlowRow(id=new_id(), name=name, created_at=now())
        s.add(flow)
        s.flush()
        row = FlowVersionRow(id=new_id(), flow_id=flow.id, version=1, definition=definition, structure=structure,
                             note=note, created_at=now())
        s.add(row)
        s.flush()
        return _flow_version(row, name)


def add_flow_version(db: Database, flow_id: str, definition: dict, structure: str, note: str = "") -> FlowVersion:
    with db.session() as s:
        flow = s.get(FlowRow, flow_id)
        if flow is None:
            raise NotFoundError(f"no flow with id {flow_id!r}")
        latest = s.scalar(select(func.max(FlowVersionRow.version)).where(FlowVersionRow.flow_id == flow_id)) or 0
        row = FlowVersionRow(id=new_id(), flow_id=flow_id, version=latest + 1, definition=definition,
                             structure=structure, note=note, created_at=now())
        s.add(row)
        s.flush()
        return _flow_version(row, flow.name)


def get_flow_version(db: Database, version_id: str) -> FlowVersion:
    with db.session(write=False) as s:
        row = s.get(FlowVersionRow, version_id)
        if row is None:
            raise NotFoundError(f"no flow version with id {version_id!r}")
        return _flow_version(row, row.flow.name)


def latest_flow_version(db: Database, flow_id: str) -> FlowVersion:
    with db.session(write=False) as s:
        flow = s.get(FlowRow, flow_id)
        if flow is None:
            raise NotFoundError(f"no flow with id {flow_id!r}; list flows with `python -m core flows list`")
        row = s.scalars(select(FlowVersionRow).where(FlowVersionRow.flow_id == flow_id)
                        .order_by(FlowVersionRow.version.desc()).limit(1)).one()
        return _flow_version(row, flow.name)


def list_flows(db: Database) -> list[FlowVersion]:
    """The latest version of every flow, newest flow first."""
    with db.session(write=False) as s:
        latest = (select(FlowVersionRow.flow_id, func.max(FlowVersionRow.version).label("v"))
                  .group_by(FlowVersionRow.flow_id).subquery())
        rows = s.execute(select(FlowVersionRow, FlowRow.name)
                         .join(latest, (FlowVersionRow.flow_id == latest.c.flow_id)
                               & (FlowVersionRow.version == latest.c.v))
                         .join(FlowRow, FlowRow.id == FlowVersionRow.flow_id)
                         .order_by(FlowRow.created_at.desc())).all()
        return [_flow_version(r, name) for r, name in rows]


def find_flow_by_name(db: Database, name: str) -> FlowVersion | None:
    with db.session(write=False) as s:
        flow_id = s.scalar(select(FlowRow.id).where(FlowRow.name == name).order_by(FlowRow.created_at).limit(1))
    return latest_flow_version(db, flow_id) if flow_id else None


# -- conversations ----------------------------------------------------------------------------------

@dataclass
class ConversationInfo:
    id: str
    flow_version_id: str | None
    user_id: str
    name: str
    source: str
    inputs: dict
    active_turn_id: str | None
    created_at: float
    updated_at: float
    turn_count: int = 0  # every stored turn, branches included
    meta: dict = field(default_factory=dict)
    thread_turns: int = 0  # the turns of the active thread (its newest turn's dialogue count)
    #: Columns whose stored value was unusable (shown with their default instead).
    damaged: tuple[str, ...] = ()


def _info(row: ConversationRow, turn_count: int = 0, thread_turns: int | None = None) -> ConversationInfo:
    bad: list[str] = []
    return ConversationInfo(
        row.id, checks.as_optional_text(row.flow_version_id, "flow_version_id", bad),
        checks.as_text(row.user_id, "user_id", bad), checks.as_text(row.name, "name", bad),
        checks.as_text(row.source, "source", bad), dict(checks.as_object(row.inputs, "inputs", bad)),
        checks.as_optional_text(row.active_turn_id, "active_turn_id", bad),
        checks.as_number(row.created_at, "created_at", bad), checks.as_number(row.updated_at, "updated_at", bad),
        turn_count, dict(checks.as_object(row.meta, "meta", bad)),
        checks.as_whole(thread_turns or 0, "dialogue_count", [], 0), tuple(bad))


def create_conversation(db: Database, *, flow_version_id: str | None, user_id: str = "user", name: str = "",
                        source: str = "ui", inputs: dict | None = None, conversation_id: str | None = None,
                        meta: dict | None = None) -> ConversationInfo:
    with db.session() as s:
        t = now()
        row = ConversationRow(id=conversation_id or new_id(), flow_version_id=flow_version_id, user_id=user_id,
                              name=name, source=source, inputs=inputs or {}, active_turn_id=None, meta=meta or {},
                              created_at=t, updated_at=t)
        s.add(row)
        s.flush()
        return _info(row)


def get_conversation(db: Database, conversation_id: str, *, settle: bool = True) -> ConversationInfo:
    """A conversation with its turn count and its active thread's length, in one query.
    ``settle=False``: the caller holds the conversation's lock and has settled it already."""
    if settle:
        settle_interrupted(db, conversation_id)  # its active turn may move to a turn a killed process left
    count = (select(func.count()).select_from(TurnRow).where(TurnRow.conversation_id == ConversationRow.id)
             .scalar_subquery())
    thread = select(TurnRow.dialogue_count).where(TurnRow.id == ConversationRow.active_turn_id).scalar_subquery()
    with db.session(write=False) as s:
        found = s.execute(select(ConversationRow, count, thread).where(ConversationRow.id == conversation_id)).first()
        if found is None:
            raise NotFoundError(f"no conversation with id {conversation_id!r}; list them with "
                             "`python -m core conversations`")
        row, n, turns = found
        return _info(row, n or 0, turns if row.active_turn_id else 0)


def find_conversation(db: Database, conversation_id: str) -> ConversationInfo | None:
    try:
        return get_conversation(db, conversation_id)
    except StoreError:
        return None


def list_conversations(db: Database, *, user_id: str | None = None, source: str | None = None,
                       flow_id: str | None = None) -> list[ConversationInfo]:
    """Conversations, most recently updated first, with their turn counts."""
    with db.session(write=False) as s:
        counts = (select(TurnRow.conversation_id, func.count().label("n"))
                  .group_by(TurnRow.conversation_id).subquery())
        active = aliased(TurnRow)
        q = (select(ConversationRow, func.coalesce(counts.c.n, 0), active.dialogue_count)
             .outerjoin(counts, counts.c.conversation_id == ConversationRow.id)
             .outerjoin(active, active.id == ConversationRow.active_turn_id))
        if user_id is not None:
            q = q.where(ConversationRow.user_id == user_id)
        if source is not None:
            q = q.where(ConversationRow.source == source)
        if flow_id is not None:
            q = q.join(FlowVersionRow, FlowVersionRow.id == ConversationRow.flow_version_id) \
                 .where(FlowVersionRow.flow_id == flow_id)
        rows = s.execute(q.order_by(ConversationRow.updated_at.desc(), ConversationRow.id)).all()
        return [_info(r, n, t) for r, n, t in rows]


def imported_sources(db: Database) -> set[tuple[object, object]]:
    """The (source format, id in the source) of every imported conversation, read from the
    conversations' own rows alone (no turn is counted)."""
    with db.session(write=False) as s:
        metas = s.scalars(select(ConversationRow.meta).where(ConversationRow.source == "import")).all()
    return {(m.get("source_format"), m.get("source_id")) for m in metas if isinstance(m, dict)}


def rename_conversation(db: Database, conversation_id: str, name: str) -> None:
    with db.session() as s:
        n = s.execute(update(ConversationRow).where(ConversationRow.id == conversation_id)
                      .values(name=name, updated_at=now())).rowcount
        if not n:
            raise NotFoundError(f"no conversation with id {conversation_id!r}")


def set_conversation_fields(db: Database, conversation_id: str, **values) -> None:
    allowed = {"active_turn_id", "flow_version_id", "name", "meta", "inputs"}
    if set(values) - allowed:
        raise ValueError(f"cannot set {sorted(set(values) - allowed)}")
    with db.session() as s:
        s.execute(update(ConversationRow).where(ConversationRow.id == conversation_id)
                  .values(**values, updated_at=now()))


def delete_conversation(db: Database, conversation_id: str) -> None:
    """Delete a conversation and everything that belongs to it — turns, node runs, variables,
    their history — and nothing else."""
    with db.session() as s:
        row = s.get(ConversationRow, conversation_id)
        if row is None:
            raise NotFoundError(f"no conversation with id {conversation_id!r}")
        turn_ids = select(TurnRow.id).where(TurnRow.conversation_id == conversation_id)
        # Explicit deletes so the result never depends on the database enforcing cascades.
        s.execute(delete(NodeRunRow).where(NodeRunRow.turn_id.in_(turn_ids)))
        s.execute(delete(FeedbackRow).where(FeedbackRow.conversation_id == conversation_id))
        s.execute(delete(TurnRow).where(TurnRow.conversation_id == conversation_id))
        s.execute(delete(VariableChangeRow).where(VariableChangeRow.conversation_id == conversation_id))
        s.execute(delete(VariableRow).where(VariableRow.conversation_id == conversation_id))
        s.delete(row)


# -- turns ------------------------------------------------------------------------------------------

_TURN_FIELDS = ("id", "parent_id", "query", "answer", "status", "error", "inputs", "dialogue_count",
                "answer_tokens", "created_at", "flow_version_id")
_NODE_FIELDS = ("node_id", "type", "title", "emulated", "status", "error", "ledger", "prompt", "reply", "usage",
                "latency_ms")


def _turn_row(conversation_id: str, seq: int, turn: dict) -> TurnRow:
    meta = {k: v for k, v in turn.items() if k not in _TURN_FIELDS and k not in ("messages", "node_runs")}
    return TurnRow(id=turn.get("id") or new_id(), conversation_id=conversation_id, seq=seq,
                   parent_id=turn.get("parent_id"), flow_version_id=turn.get("flow_version_id"),
                   query=turn.get("query") or "", answer=turn.get("answer") or "",
                   status=turn.get("status") or "succeeded", error=redact_optional(turn.get("error")),
                   inputs=turn.get("inputs") or {}, dialogue_count=int(turn.get("dialogue_count") or 1),
                   answer_tokens=int(turn.get("answer_tokens") or 0), messages=turn.get("messages") or [],
                   meta=meta, created_at=float(turn.get("created_at") or now()))


def _node_values(seq: int, run: dict) -> dict:
    """A node run's columns."""
    data = {k: v for k, v in run.items() if k not in _NODE_FIELDS}
    return dict(seq=seq, node_id=str(run.get("node_id") or ""), node_type=str(run.get("type") or ""),
                title=str(run.get("title") or ""), emulated=bool(run.get("emulated", True)),
                status=str(run.get("status") or "succeeded"), error=redact_optional(run.get("error")),
                ledger=run.get("ledger"), prompt=run.get("prompt"), reply=run.get("reply"),
                usage=run.get("usage"), latency_ms=run.get("latency_ms"), data=data)


def _node_row(seq: int, run: dict) -> NodeRunRow:
    return NodeRunRow(**_node_values(seq, run))


def node_run_dict(row: NodeRunRow) -> dict:
    bad: list[str] = []
    out = dict(checks.as_object(row.data, "data", bad))
    out.update(node_id=checks.as_text(row.node_id, "node_id", bad), type=checks.as_text(row.node_type, "type", bad),
               title=checks.as_text(row.title, "title", bad),
               emulated=row.emulated if isinstance(row.emulated, bool) else bool(row.emulated),
               status=checks.as_text(row.status, "status", bad, "succeeded"),
               error=checks.as_optional_text(row.error, "error", bad),
               ledger=checks.as_object(row.ledger, "ledger", bad, nullable=True),
               prompt=checks.as_items(row.prompt, "prompt", bad, nullable=True),
               reply=checks.as_optional_text(row.reply, "reply", bad),
               usage=checks.as_object(row.usage, "usage", bad, nullable=True),
               latency_ms=checks.as_optional_number(row.latency_ms, "latency_ms", bad))
    if bad:
        out["damaged"] = bad
    return out


def _turn_columns(tid, parent, version, query, answer, status, error, inputs, count, answer_tokens, created, seq,
                  messages, meta) -> dict:
    """A stored turn as a dict, every column read leniently (see :mod:`core.store.checks`)."""
    bad: list[str] = []
    d = dict(checks.as_object(meta, "meta", bad))
    d.pop("damaged", None)
    d.update(id=tid, parent_id=checks.as_optional_text(parent, "parent_id", bad),
             flow_version_id=checks.as_optional_text(version, "flow_version_id", bad),
             query=checks.as_text(query, "query", bad), answer=checks.as_text(answer, "answer", bad),
             status=checks.as_text(status, "status", bad, "succeeded"),
             error=checks.as_optional_text(error, "error", bad), inputs=checks.as_object(inputs, "inputs", bad),
             dialogue_count=checks.as_whole(count, "dialogue_count", bad, 1),
             answer_tokens=checks.as_whole(answer_tokens, "answer_tokens", bad),
             created_at=checks.as_number(created, "created_at", bad), seq=checks.as_whole(seq, "seq", bad))
    messages = checks.as_items(messages, "messages", bad)
    if messages:
        if all(isinstance(m, dict) for m in messages):
            d["messages"] = messages
        else:
            bad.append("messages")
    if bad:
        d["damaged"] = bad
    return d


def turn_dict(row: TurnRow, *, with_node_runs: bool = True) -> dict:
    out = _turn_columns(row.id, row.parent_id, row.flow_version_id, row.query, row.answer, row.status, row.error,
                        row.inputs, row.dialogue_count, row.answer_tokens, row.created_at, row.seq, row.messages,
                        row.meta)
    if with_node_runs:
        out["node_runs"] = [node_run_dict(n) for n in row.node_runs]
    return out


def _next_seq(s: Session, conversation_id: str) -> int:
    return (s.scalar(select(func.max(TurnRow.seq)).where(TurnRow.conversation_id == conversation_id)) or 0) + 1


def _turn_with_runs(conversation_id: str, seq: int, turn: dict) -> TurnRow:
    row = _turn_row(conversation_id, seq, turn)
    row.node_runs = [_node_row(i, run) for i, run in enumerate(turn.get("node_runs") or [])]
    # Written with the runs in the same transaction: lets a check prove no run went missing.
    row.meta = {**row.meta, "node_count": len(row.node_runs)}
    return row


#: A turn's status: written ``running`` when it starts, ``succeeded`` or ``failed`` when it ends
#: (Dify's ``normal`` and ``error``), ``stopped`` when an API client stopped its answer;
#: ``interrupted`` when its process stopped before the end.
RUNNING, SUCCEEDED, FAILED, STOPPED, INTERRUPTED = "running", "succeeded", "failed", "stopped", "interrupted"
TURN_STATUSES = (RUNNING, SUCCEEDED, FAILED, STOPPED, INTERRUPTED)
INTERRUPTED_ERROR = ("the process running this turn stopped before the turn finished, so it has no answer "
                     "and changed no variable")


def begin_turn(db: Database, conversation_id: str, turn: dict) -> int:
    """Write a turn's row as it starts, as Dify writes its message row before the workflow runs:
    status ``running``, empty answer, ``answer_tokens`` 0. Returns its ``seq``.

    The caller holds the conversation's lock (:meth:`Database.conversation_lock`) until
    :func:`finish_turn`, so no other turn takes the same place in the conversation."""
    with db.session() as s:
        conv = s.get(ConversationRow, conversation_id)
        if conv is None:
            raise NotFoundError(f"no conversation with id {conversation_id!r}")
        row = _turn_row(conversation_id, _next_seq(s, conversation_id),
                        {**turn, "status": RUNNING, "answer": "", "answer_tokens": 0, "error": None})
        # Where the conversation stood: an interrupted turn takes the active place it was going to take.
        row.meta = {**row.meta, "node_count": 0, "active_before": conv.active_turn_id}
        s.add(row)
        conv.updated_at = now()
        s.flush()
        return row.seq


def finish_turn(db: Database, conversation_id: str, turn: dict, *, make_active: bool = True,
                variable_changes: list[dict] = ()) -> str:
    """Complete a turn written by :func:`begin_turn` with its answer, status, every node run and the
    variable changes its nodes made (as :func:`write_variable_changes` takes them), in one
    transaction; returns the turn id. A turn whose process stops before this leaves no variable
    change behind. Plain statements, not ORM objects: this runs on every turn."""
    tid = turn["id"]
    with db.session() as s:
        found = s.execute(select(TurnRow.seq, TurnRow.conversation_id, TurnRow.meta).where(TurnRow.id == tid)).first()
        t = now()
        conv = {"updated_at": t, **({"active_turn_id": tid} if make_active else {})}
        touched = s.execute(update(ConversationRow).where(ConversationRow.id == conversation_id).values(**conv))
        if found is None or found.conversation_id != conversation_id or not touched.rowcount:
            raise NotFoundError(f"turn {tid!r} of conversation {conversation_id!r} is gone: the conversation was "
                             "deleted while the turn ran")
        if variable_changes:
            rows = {r.name: r for r in s.scalars(select(VariableRow).where(VariableRow.conversation_id == conversation_id))}
            _record_changes(s, conversation_id, rows, list(variable_changes), tid, found.seq, t)
        done = _turn_row(conversation_id, found.seq, turn)
        runs = [_node_values(i, run) for i, run in enumerate(turn.get("node_runs") or [])]
        if not (isinstance(found.meta, dict) and found.meta.get("node_count") == 0):  # not as begin_turn left it
            s.execute(delete(NodeRunRow).where(NodeRunRow.turn_id == tid))
        if runs:
            s.execute(insert(NodeRunRow), [dict(run, turn_id=tid) for run in runs])
        s.execute(update(TurnRow).where(TurnRow.id == tid).values(
            **{column: getattr(done, column) for column in (
                "parent_id", "flow_version_id", "query", "answer", "status", "error", "inputs", "dialogue_count",
                "answer_tokens", "messages", "created_at")},
            meta={**done.meta, "node_count": len(runs)}))
        return tid


def _has_running(db: Database, conversation_id: str) -> bool:
    with db.session(write=False) as s:
        return s.scalar(select(TurnRow.id).where(TurnRow.conversation_id == conversation_id,
                                                 TurnRow.status == RUNNING).limit(1)) is not None


def settle_interrupted(db: Database, conversation_id: str, *, locked: bool = False) -> int:
    """Mark the conversation's turns left ``running`` by a stopped process as ``interrupted``;
    returns how many. A turn whose process is alive holds the conversation's lock, so it is left
    alone (``locked``: the caller holds the lock, so every running turn is a stopped one's).

    An interrupted turn stays in the conversation like a failed one (its query, an empty answer),
    and becomes the active turn if it was about to: the next turn continues after it instead of
    branching beside it."""
    if not _has_running(db, conversation_id):
        return 0
    if locked:
        return _mark_interrupted(db, conversation_id)
    try:
        with db.conversation_lock(conversation_id, timeout=0):
            return _mark_interrupted(db, conversation_id)
    except ConversationBusyError:
        return 0  # a turn is running right now


def _mark_interrupted(db: Database, conversation_id: str) -> int:
    with db.session() as s:
        rows = s.scalars(select(TurnRow).where(TurnRow.conversation_id == conversation_id, TurnRow.status == RUNNING)
                         .order_by(TurnRow.seq)).all()
        conv = s.get(ConversationRow, conversation_id)
        for row in rows:
            meta = dict(row.meta or {})
            before = meta.pop("active_before", None)
            row.meta = meta
            row.status, row.error, row.answer, row.answer_tokens = INTERRUPTED, INTERRUPTED_ERROR, "", 0
            if conv is not None and conv.active_turn_id == before:
                conv.active_turn_id = row.id
        if conv is not None and rows:
            conv.updated_at = now()
        return len(rows)


def save_turn(db: Database, conversation_id: str, turn: dict, *, make_active: bool = True) -> str:
    """Write one turn with all its node runs in one transaction; returns the turn id."""
    with db.session() as s:
        conv = s.get(ConversationRow, conversation_id)
        if conv is None:
            raise NotFoundError(f"no conversation with id {conversation_id!r}")
        row = _turn_with_runs(conversation_id, _next_seq(s, conversation_id), turn)
        s.add(row)
        conv.updated_at = now()
        if make_active:
            conv.active_turn_id = row.id
        s.flush()
        return row.id


_TURN_COLUMNS = (TurnRow.id, TurnRow.parent_id, TurnRow.flow_version_id, TurnRow.query, TurnRow.answer,
                 TurnRow.status, TurnRow.error, TurnRow.inputs, TurnRow.dialogue_count, TurnRow.answer_tokens,
                 TurnRow.created_at, TurnRow.seq, TurnRow.messages, TurnRow.meta)


def load_turn_rows(db: Database, conversation_id: str, *, with_node_runs: bool = False,
                   from_seq: int | None = None, settle: bool = True) -> list[dict]:
    """The conversation's turns in creation order (``from_seq``: only those from that ``seq``
    on); one left running by a killed process is marked interrupted first
    (:func:`settle_interrupted`; ``settle=False``: the caller holds the lock and did that)."""
    if settle:
        settle_interrupted(db, conversation_id)
    with db.session(write=False) as s:
        if from_seq is not None:
            return [_turn_columns(*row) for row in s.execute(
                select(*_TURN_COLUMNS).where(TurnRow.conversation_id == conversation_id, TurnRow.seq >= from_seq)
                .order_by(TurnRow.seq))]
        if with_node_runs:
            rows = s.scalars(select(TurnRow).where(TurnRow.conversation_id == conversation_id)
                             .order_by(TurnRow.seq)).all()
            return [turn_dict(r, with_node_runs=True) for r in rows]
        # Plain columns, no ORM objects: this runs on every turn and every page rerun.
        return [_turn_columns(*row) for row in s.execute(
            select(*_TURN_COLUMNS).where(TurnRow.conversation_id == conversation_id).order_by(TurnRow.seq))]


def load_node_runs(db: Database, turn_id: str) -> list[dict]:
    with db.session(write=False) as s:
        rows = s.scalars(select(NodeRunRow).where(NodeRunRow.turn_id == turn_id).order_by(NodeRunRow.seq)).all()
        return [node_run_dict(r) for r in rows]


def turn_from_dict(d: dict) -> Turn:
    """A core Turn from a stored turn: query and answer, or the full message list of an import."""
    tid = d["id"]
    messages = None
    if d.get("messages"):
        try:
            messages = tuple(Message.from_dict(m) for m in d["messages"])
        except (KeyError, TypeError, ValueError, AttributeError):
            # A stored message list no reader can use: the turn falls back to its query and answer.
            d = {**d, "damaged": [*(d.get("damaged") or []), "messages"]}
            messages = None
    if messages is not None:
        qi = next((i for i, m in enumerate(messages) if m.kind == QUERY), None)
        ai = max((i for i, m in enumerate(messages) if m.kind == ANSWER), default=None)
    else:
        messages = (Message("user", d.get("query") or "", QUERY, f"{tid}:query"),
                    Message("assistant", d.get("answer") or "", ANSWER, f"{tid}:answer"))
        qi, ai = 0, 1
    meta = {k: d[k] for k in ("seq", "dialogue_count", "flow_version_id", "inputs", "prompt_tokens",
                              WINDOW_META, SUMMARIES_META, "damaged", TOKEN_COUNTS, TEXT_COUNTS, AGENT_THOUGHTS,
                              SHOWN_ANSWER)
            if k in d}
    return Turn(id=tid, parent_id=d.get("parent_id"), messages=messages, query_index=qi, answer_index=ai,
                status=d.get("status") or "succeeded", error=d.get("error"), created_at=d.get("created_at"),
                answer_tokens=d.get("answer_tokens"), meta=meta)


#: A turn's stored token counts: ``{encoding: [tokens of each message's content]}``, written with
#: the turn so that reopening a conversation does not tokenise it again.
TOKEN_COUNTS = "token_counts"


#: The counts of a turn's other short texts, its messages' roles and names: ``{encoding: {text:
#: tokens}}``. Without them a reopened conversation would load the encoding (seconds) to count "user".
TEXT_COUNTS = "text_counts"


def token_counts(messages, encodings) -> dict:
    """:data:`TOKEN_COUNTS` of a turn's messages under ``encodings``."""
    from core.model.tokens import count_cache

    return {e: [count_cache(e).count(m.content) for m in messages] for e in sorted(encodings)}


def text_counts(messages, encodings) -> dict:
    """:data:`TEXT_COUNTS` of a turn's messages under ``encodings``."""
    from core.model.tokens import count_cache

    texts = dict.fromkeys(t for m in messages for t in (m.role, m.name) if t)
    return {e: {t: count_cache(e).count(t) for t in texts} for e in sorted(encodings)}


def remember_token_counts(turns: Iterable[Turn]) -> None:
    """Hand the turns' stored counts to the process's token counters (turns stored before the
    counts were kept, or with counts that do not fit their messages, are counted when needed)."""
    from core.model.tokens import remember_counts

    found: dict[str, dict[str, int]] = {}
    for turn in turns:
        stored = (turn.meta or {}).get(TOKEN_COUNTS)
        for encoding, counts in (stored.items() if isinstance(stored, dict) else ()):
            if isinstance(counts, list) and len(counts) == len(turn.messages):
                texts = found.setdefault(str(encoding), {})
                for m, n in zip(turn.messages, counts):
                    if type(n) is int and n >= 0 and m.content:
                        texts[m.content] = n
        others = (turn.meta or {}).get(TEXT_COUNTS)
        if isinstance(others, dict):
            for encoding, counts in others.items():
                if isinstance(counts, dict):
                    texts = found.setdefault(str(encoding), {})
                    texts.update((t, n) for t, n in counts.items() if t and type(n) is int and n >= 0)
    for encoding, texts in found.items():
        remember_counts(encoding, texts)


def load_conversation(db: Database, conversation_id: str, *, system_prompt: str = "") -> Conversation:
    """The stored conversation as a core Conversation (turns in creation order)."""
    info = get_conversation(db, conversation_id)
    turns = [turn_from_dict(d) for d in load_turn_rows(db, conversation_id)]
    remember_token_counts(turns)
    # An imported conversation keeps the format it was read from and the model its source names (what
    # memory fits it, and what it is counted for, depend on them).
    meta = {"active_turn_id": info.active_turn_id}
    if source_model(info.meta):
        meta[SOURCE_MODEL] = source_model(info.meta)
    return Conversation(id=info.id, turns=turns, system_prompt=system_prompt or info.meta.get("system_prompt", ""),
                        source_format=str(info.meta.get("source_format") or "memlens"), name=info.name, meta=meta)


# -- variables --------------------------------------------------------------------------------------

@dataclass(frozen=True)
class StoredVariable:
    id: str
    name: str
    value_type: str
    value: Any
    description: str
    created_at: float
    updated_at: float


def _var(row: VariableRow) -> StoredVariable:
    bad: list[str] = []
    value = None if isinstance(row.value, checks.Unreadable) else row.value
    return StoredVariable(row.id, checks.as_text(row.name, "name", bad), checks.as_text(row.value_type, "value_type", bad),
                          value, checks.as_text(row.description, "description", bad),
                          checks.as_number(row.created_at, "created_at", bad),
                          checks.as_number(row.updated_at, "updated_at", bad))


def get_variables(db: Database, conversation_id: str) -> list[StoredVariable]:
    with db.session(write=False) as s:
        rows = s.scalars(select(VariableRow).where(VariableRow.conversation_id == conversation_id)
                         .order_by(VariableRow.created_at, VariableRow.id)).all()
        return [_var(r) for r in rows]


def ensure_variables(db: Database, conversation_id: str, specs: Iterable[dict]) -> list[StoredVariable]:
    """Dify's initialisation: create missing variables (by id) with their defaults; keep the rest.
    Runs before every turn: when none is missing (the usual case) it only reads."""
    specs = list(specs)
    stored = get_variables(db, conversation_id)
    if {spec["id"] for spec in specs} <= {v.id for v in stored}:
        return stored
    with db.session() as s:
        have = set(s.scalars(select(VariableRow.id).where(VariableRow.conversation_id == conversation_id)))
        t = now()
        for spec in specs:
            if spec["id"] not in have:
                s.add(VariableRow(id=spec["id"], conversation_id=conversation_id, name=spec["name"],
                                  value_type=spec["value_type"], value=spec.get("value"),
                                  description=spec.get("description", ""), created_at=t, updated_at=t))
    return get_variables(db, conversation_id)


def write_variable_changes(db: Database, conversation_id: str, changes: list[dict], *, turn_id: str | None,
                           turn_seq: int | None) -> None:
    """Apply one node's variable writes (or one user edit) and record them, in one transaction.

    Each change: ``{name, new, old, operation, node_id}``; unknown names are a StoreError and
    nothing is written.
    """
    with db.session() as s:
        rows = {r.name: r for r in s.scalars(select(VariableRow).where(VariableRow.conversation_id == conversation_id))}
        t = now()
        _record_changes(s, conversation_id, rows, changes, turn_id, turn_seq, t)
        conv = s.get(ConversationRow, conversation_id)
        if conv is not None:
            conv.updated_at = t


#: :attr:`VariableChangeRow.delta` of a change stored as the items it appended to the variable's
#: previous value (a list that grows every turn would otherwise be written whole, twice, each turn).
APPENDED = "append"


def _appended(row: VariableRow, change: dict) -> list | None:
    """The items ``change`` appends to the variable's stored value, when it can be stored as just
    those: the value is the one its newest change row leaves (``chained``), the change says that
    value was the old one, and the new value is it with items added at the end."""
    before, old, new = row.value, change.get("old"), change["new"]
    if not row.chained or type(before) is not list or type(new) is not list or len(new) < len(before):
        return None
    if type(old) is not list or old != before or new[:len(before)] != before:
        return None
    return new[len(before):]


def _record_changes(s: Session, conversation_id: str, rows: dict, changes: list[dict], turn_id: str | None,
                    turn_seq: int | None, t: float) -> None:
    for c in changes:
        row = rows.get(c["name"])
        if row is None:
            raise StoreError(f"conversation {conversation_id!r} has no variable named {c['name']!r}")
        items = _appended(row, c)
        old, new, delta = (null(), items, APPENDED) if items is not None else (c.get("old"), c["new"], None)
        row.value = c["new"]
        row.chained = True
        if c.get("value_type"):
            row.value_type = c["value_type"]
        row.updated_at = t
        s.add(VariableChangeRow(conversation_id=conversation_id, turn_id=turn_id, turn_seq=turn_seq,
                                node_id=str(c.get("node_id") or USER_EDIT), operation=str(c.get("operation") or ""),
                                name=c["name"], old=old, new=new, delta=delta, created_at=t))


def save_turns(db: Database, conversation_id: str, turns: list[dict], variable_changes: list[list[dict]]) -> None:
    """Append many turns, each followed by its variable changes, in one transaction.

    The same rows as :func:`save_turn` and :func:`write_variable_changes` one turn at a time, for
    writing a long conversation at once; the last turn becomes the active one.
    """
    if len(variable_changes) != len(turns):
        raise StoreError("save_turns needs one list of variable changes per turn")
    with db.session() as s:
        conv = s.get(ConversationRow, conversation_id)
        if conv is None:
            raise NotFoundError(f"no conversation with id {conversation_id!r}")
        rows = {r.name: r for r in s.scalars(select(VariableRow).where(VariableRow.conversation_id == conversation_id))}
        seq = _next_seq(s, conversation_id)
        t = now()
        for turn, changes in zip(turns, variable_changes):
            row = _turn_with_runs(conversation_id, seq, turn)
            s.add(row)
            _record_changes(s, conversation_id, rows, changes, row.id, seq, t)
            conv.active_turn_id = row.id
            seq += 1
        conv.updated_at = t


def variable_history(db: Database, conversation_id: str) -> list[dict]:
    """Every recorded variable change, oldest first, each with the whole value before and after."""
    with db.session(write=False) as s:
        rows = s.scalars(select(VariableChangeRow).where(VariableChangeRow.conversation_id == conversation_id)
                         .order_by(VariableChangeRow.id)).all()
        return _changes(rows)


def variable_changes_until(db: Database, conversation_id: str, turn_seq: int) -> list[dict]:
    """Each variable's last recorded change up to ``turn_seq`` (in :func:`variable_history`'s shape,
    oldest first): what its value was after that turn, read without the whole history (a value
    that grows every turn makes that quadratic) — the user's edits filed under that turn (made
    after it ran) left out. A change stored as appended items is read with the changes of its
    variable back to the last one stored whole (each of those holds only its own items)."""
    with db.session(write=False) as s:
        last = (select(func.max(VariableChangeRow.id))
                .where(VariableChangeRow.conversation_id == conversation_id,
                       or_(VariableChangeRow.turn_seq < turn_seq,
                           and_(VariableChangeRow.turn_seq == turn_seq, VariableChangeRow.node_id != USER_EDIT)))
                .group_by(VariableChangeRow.name))
        rows = s.scalars(select(VariableChangeRow).where(VariableChangeRow.id.in_(last))
                         .order_by(VariableChangeRow.id)).all()
        out = []
        for row in rows:
            if row.delta is None:
                out += _changes([row])
                continue
            whole = s.scalar(select(func.max(VariableChangeRow.id)).where(
                VariableChangeRow.conversation_id == conversation_id, VariableChangeRow.name == row.name,
                VariableChangeRow.id < row.id, VariableChangeRow.delta.is_(None)))
            value = None
            if whole is not None:  # the whole value, then every append up to the row's own
                value = s.scalar(select(VariableChangeRow.new).where(VariableChangeRow.id == whole))
                value = list(value) if type(value) is list else None
                for items, delta in s.execute(select(VariableChangeRow.new, VariableChangeRow.delta).where(
                        VariableChangeRow.conversation_id == conversation_id, VariableChangeRow.name == row.name,
                        VariableChangeRow.id > whole, VariableChangeRow.id < row.id).order_by(VariableChangeRow.id)):
                    if value is None or delta != APPENDED or type(items) is not list:
                        value = None
                        break
                    value += items
            out += _changes([row], {row.name: value})
        return out


def _changes(rows, after: dict[str, Any] | None = None) -> list[dict]:
    """Change rows as dicts, oldest first; a row stored as appended items gets its whole values
    from the row before it of the same variable (a damaged or missing one leaves them None).
    ``after``: each variable's value after the rows before these, when they were not read."""
    out = []
    after = dict(after or {})  # each variable's value after the latest row read
    for r in rows:
        bad: list[str] = []
        name = checks.as_text(r.name, "name", bad)
        old = None if isinstance(r.old, checks.Unreadable) else r.old
        new = None if isinstance(r.new, checks.Unreadable) else r.new
        if r.delta is not None:
            before = after.get(name)
            if r.delta == APPENDED and type(before) is list and type(new) is list:
                old, new = list(before), before + new
            else:
                old = new = None
                bad.append("delta" if r.delta != APPENDED else "new")
        after[name] = new
        item = {"turn_id": checks.as_optional_text(r.turn_id, "turn_id", bad),
                "turn_seq": None if r.turn_seq is None else checks.as_whole(r.turn_seq, "turn_seq", bad, None),
                "node_id": checks.as_text(r.node_id, "node_id", bad),
                "operation": checks.as_text(r.operation, "operation", bad), "name": name,
                "old": old, "new": new,
                "created_at": checks.as_number(r.created_at, "created_at", bad)}
        if bad:
            item["damaged"] = bad
        out.append(item)
    return out


# -- settings ---------------------------------------------------------------------------------------

def get_setting(db: Database, key: str, default: Any = None) -> Any:
    with db.session(write=False) as s:
        row = s.get(SettingRow, key)
        return default if row is None else row.value


def set_setting(db: Database, key: str, value: Any) -> None:
    with db.session() as s:
        row = s.get(SettingRow, key)
        if row is None:
            s.add(SettingRow(key=key, value=value))
        else:
            row.value = value


# -- feedback and stopped answers -------------------------------------------------------------------

FEEDBACK_RATINGS = ("like", "dislike")


def set_feedback(db: Database, message_id: str, user_id: str, rating: str | None, content: str | None = None) -> None:
    """Rate an answer (one rating per message and user); ``rating=None`` revokes it, and is refused
    (:class:`NoFeedbackError`, nothing written) where the user gave no rating."""
    if rating is not None and rating not in FEEDBACK_RATINGS:
        raise StoreError(f"rating {rating!r} is unknown; expected like, dislike or null")
    with db.session() as s:
        turn = s.get(TurnRow, message_id)
        if turn is None:
            raise NotFoundError(f"no message with id {message_id!r}")
        row = s.scalars(select(FeedbackRow).where(FeedbackRow.message_id == message_id,
                                                  FeedbackRow.user_id == user_id)).first()
        if rating is None:
            if row is None:  # nothing to revoke: Dify's MessageService refuses it in these words
                raise NoFeedbackError("rating cannot be None when feedback not exists")
            s.delete(row)
            return
        t = now()
        if row is None:
            s.add(FeedbackRow(id=new_id(), message_id=message_id, conversation_id=turn.conversation_id,
                              user_id=user_id, rating=rating, content=content, created_at=t, updated_at=t))
        else:
            row.rating, row.content, row.updated_at = rating, content, t


def feedbacks(db: Database, conversation_id: str) -> dict[str, list[dict]]:
    """Every rating in a conversation: ``{message id: [{rating, content, user_id, updated_at}]}``."""
    out: dict[str, list[dict]] = {}
    with db.session(write=False) as s:
        for row in s.scalars(select(FeedbackRow).where(FeedbackRow.conversation_id == conversation_id)
                             .order_by(FeedbackRow.created_at)):
            out.setdefault(row.message_id, []).append({"rating": row.rating, "content": row.content,
                                                       "user_id": row.user_id, "updated_at": row.updated_at})
    return out


def mark_stopped(db: Database, message_id: str, answer: str) -> None:
    """A streamed answer the client stopped: the turn keeps the answer sent so far, status ``stopped``."""
    with db.session() as s:
        turn = s.get(TurnRow, message_id)
        if turn is None:
            raise NotFoundError(f"no message with id {message_id!r}")
        turn.status = STOPPED
        turn.answer = answer
        turn.messages = [dict(m, content=answer) if m.get("kind") == ANSWER else m for m in turn.messages or []]
