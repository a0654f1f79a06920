"""Turns and their node runs: a turn's row when it starts, its end together with all its node runs, and
the turns read back (a turn that a stopped process left running is settled as interrupted).
"""

from __future__ import annotations

from sqlalchemy import delete, func, insert, select, update
from sqlalchemy.orm import Session

from core.flow.nodes.window_memory import META_KEY as WINDOW_META
from core.memory.strategies.compaction import SUMMARIES_META
from core.model.conversation import AGENT_THOUGHTS, ANSWER, QUERY, SHOWN_ANSWER, Message, Turn
from core.redact import redact_optional

from .. import checks
from ..db import Database
from ..errors import ConversationBusyError, NotFoundError, StoreError
from ..models import ConversationRow, NodeRunRow, TurnRow, VariableRow
from .counts import TEXT_COUNTS, TOKEN_COUNTS
from .ids import new_id, now
from .variables import record_changes

_TURN_FIELDS = (
    "id",
    "parent_id",
    "query",
    "answer",
    "status",
    "error",
    "inputs",
    "dialogue_count",
    "answer_tokens",
    "created_at",
    "flow_version_id",
)


_NODE_FIELDS = (
    "node_id",
    "type",
    "title",
    "emulated",
    "status",
    "error",
    "ledger",
    "prompt",
    "reply",
    "usage",
    "latency_ms",
)


#: What a turn's stored form sets on its row besides its place (id, conversation, seq): the columns a
#: finished turn updates and the capture's recorder writes.
TURN_VALUES = (
    "parent_id",
    "flow_version_id",
    "query",
    "answer",
    "status",
    "error",
    "inputs",
    "dialogue_count",
    "answer_tokens",
    "messages",
    "created_at",
)


def turn_row(conversation_id: str, seq: int, turn: dict) -> TurnRow:
    meta = {k: v for k, v in turn.items() if k not in _TURN_FIELDS and k not in ("messages", "node_runs")}
    return TurnRow(
        id=turn.get("id") or new_id(),
        conversation_id=conversation_id,
        seq=seq,
        parent_id=turn.get("parent_id"),
        flow_version_id=turn.get("flow_version_id"),
        query=turn.get("query") or "",
        answer=turn.get("answer") or "",
        status=turn.get("status") or "succeeded",
        error=redact_optional(turn.get("error")),
        inputs=turn.get("inputs") or {},
        dialogue_count=int(turn.get("dialogue_count") or 1),
        answer_tokens=int(turn.get("answer_tokens") or 0),
        messages=turn.get("messages") or [],
        meta=meta,
        created_at=float(turn.get("created_at") or now()),
    )


def node_values(seq: int, run: dict) -> dict:
    """A node run's columns."""
    data = {k: v for k, v in run.items() if k not in _NODE_FIELDS}
    return dict(
        seq=seq,
        node_id=str(run.get("node_id") or ""),
        node_type=str(run.get("type") or ""),
        title=str(run.get("title") or ""),
        emulated=bool(run.get("emulated", True)),
        status=str(run.get("status") or "succeeded"),
        error=redact_optional(run.get("error")),
        ledger=run.get("ledger"),
        prompt=run.get("prompt"),
        reply=run.get("reply"),
        usage=run.get("usage"),
        latency_ms=run.get("latency_ms"),
        data=data,
    )


def node_row(seq: int, run: dict) -> NodeRunRow:
    return NodeRunRow(**node_values(seq, run))


def node_run_dict(row: NodeRunRow) -> dict:
    bad: list[str] = []
    out = dict(checks.as_object(row.data, "data", bad))
    out.update(
        node_id=checks.as_text(row.node_id, "node_id", bad),
        type=checks.as_text(row.node_type, "type", bad),
        title=checks.as_text(row.title, "title", bad),
        emulated=row.emulated if isinstance(row.emulated, bool) else bool(row.emulated),
        status=checks.as_text(row.status, "status", bad, "succeeded"),
        error=checks.as_optional_text(row.error, "error", bad),
        ledger=checks.as_object(row.ledger, "ledger", bad, nullable=True),
        prompt=checks.as_items(row.prompt, "prompt", bad, nullable=True),
        reply=checks.as_optional_text(row.reply, "reply", bad),
        usage=checks.as_object(row.usage, "usage", bad, nullable=True),
        latency_ms=checks.as_optional_number(row.latency_ms, "latency_ms", bad),
    )
    if bad:
        out["damaged"] = bad
    return out


def _turn_columns(
    tid, parent, version, query, answer, status, error, inputs, count, answer_tokens, created, seq, messages, meta
) -> dict:
    """A stored turn as a dict, every column read leniently (see :mod:`core.store.checks`)."""
    bad: list[str] = []
    d = dict(checks.as_object(meta, "meta", bad))
    d.pop("damaged", None)
    d.update(
        id=tid,
        parent_id=checks.as_optional_text(parent, "parent_id", bad),
        flow_version_id=checks.as_optional_text(version, "flow_version_id", bad),
        query=checks.as_text(query, "query", bad),
        answer=checks.as_text(answer, "answer", bad),
        status=checks.as_text(status, "status", bad, "succeeded"),
        error=checks.as_optional_text(error, "error", bad),
        inputs=checks.as_object(inputs, "inputs", bad),
        dialogue_count=checks.as_whole(count, "dialogue_count", bad, 1),
        answer_tokens=checks.as_whole(answer_tokens, "answer_tokens", bad),
        created_at=checks.as_number(created, "created_at", bad),
        seq=checks.as_whole(seq, "seq", bad),
    )
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
    out = _turn_columns(
        row.id,
        row.parent_id,
        row.flow_version_id,
        row.query,
        row.answer,
        row.status,
        row.error,
        row.inputs,
        row.dialogue_count,
        row.answer_tokens,
        row.created_at,
        row.seq,
        row.messages,
        row.meta,
    )
    if with_node_runs:
        out["node_runs"] = [node_run_dict(n) for n in row.node_runs]
    return out


def next_seq(s: Session, conversation_id: str) -> int:
    return (s.scalar(select(func.max(TurnRow.seq)).where(TurnRow.conversation_id == conversation_id)) or 0) + 1


def _turn_with_runs(conversation_id: str, seq: int, turn: dict) -> TurnRow:
    row = turn_row(conversation_id, seq, turn)
    row.node_runs = [node_row(i, run) for i, run in enumerate(turn.get("node_runs") or [])]
    # Written with the runs in the same transaction: lets a check prove no run went missing.
    row.meta = {**row.meta, "node_count": len(row.node_runs)}
    return row


#: A turn's status: written ``running`` when it starts, ``succeeded`` or ``failed`` when it ends
#: (Dify's ``normal`` and ``error``), ``stopped`` when an API client stopped its answer;
#: ``interrupted`` when its process stopped before the end.
RUNNING, SUCCEEDED, FAILED, STOPPED, INTERRUPTED = "running", "succeeded", "failed", "stopped", "interrupted"


TURN_STATUSES = (RUNNING, SUCCEEDED, FAILED, STOPPED, INTERRUPTED)


INTERRUPTED_ERROR = (
    "the process running this turn stopped before the turn finished, so it has no answer and changed no variable"
)


def begin_turn(db: Database, conversation_id: str, turn: dict) -> int:
    """Write a turn's row as it starts, as Dify writes its message row before the workflow runs:
    status ``running``, empty answer, ``answer_tokens`` 0. Returns its ``seq``.

    The caller holds the conversation's lock (:meth:`Database.conversation_lock`) until
    :func:`finish_turn`, so no other turn takes the same place in the conversation."""
    with db.session() as s:
        conv = s.get(ConversationRow, conversation_id)
        if conv is None:
            raise NotFoundError(f"no conversation with id {conversation_id!r}")
        row = turn_row(
            conversation_id,
            next_seq(s, conversation_id),
            {**turn, "status": RUNNING, "answer": "", "answer_tokens": 0, "error": None},
        )
        # Where the conversation stood: an interrupted turn takes the active place it was going to take.
        row.meta = {**row.meta, "node_count": 0, "active_before": conv.active_turn_id}
        s.add(row)
        conv.updated_at = now()
        s.flush()
        return row.seq


def finish_turn(
    db: Database, conversation_id: str, turn: dict, *, make_active: bool = True, variable_changes: list[dict] = ()
) -> str:
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
            raise NotFoundError(
                f"turn {tid!r} of conversation {conversation_id!r} is gone: the conversation was "
                "deleted while the turn ran"
            )
        if variable_changes:
            rows = {
                r.name: r for r in s.scalars(select(VariableRow).where(VariableRow.conversation_id == conversation_id))
            }
            record_changes(s, conversation_id, rows, list(variable_changes), tid, found.seq, t)
        done = turn_row(conversation_id, found.seq, turn)
        runs = [node_values(i, run) for i, run in enumerate(turn.get("node_runs") or [])]
        if not (isinstance(found.meta, dict) and found.meta.get("node_count") == 0):  # not as begin_turn left it
            s.execute(delete(NodeRunRow).where(NodeRunRow.turn_id == tid))
        if runs:
            s.execute(insert(NodeRunRow), [dict(run, turn_id=tid) for run in runs])
        s.execute(
            update(TurnRow)
            .where(TurnRow.id == tid)
            .values(
                **{column: getattr(done, column) for column in TURN_VALUES},
                meta={**done.meta, "node_count": len(runs)},
            )
        )
        return tid


def _has_running(db: Database, conversation_id: str) -> bool:
    with db.session(write=False) as s:
        return (
            s.scalar(
                select(TurnRow.id).where(TurnRow.conversation_id == conversation_id, TurnRow.status == RUNNING).limit(1)
            )
            is not None
        )


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
        rows = s.scalars(
            select(TurnRow)
            .where(TurnRow.conversation_id == conversation_id, TurnRow.status == RUNNING)
            .order_by(TurnRow.seq)
        ).all()
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
        row = _turn_with_runs(conversation_id, next_seq(s, conversation_id), turn)
        s.add(row)
        conv.updated_at = now()
        if make_active:
            conv.active_turn_id = row.id
        s.flush()
        return row.id


_TURN_COLUMNS = (
    TurnRow.id,
    TurnRow.parent_id,
    TurnRow.flow_version_id,
    TurnRow.query,
    TurnRow.answer,
    TurnRow.status,
    TurnRow.error,
    TurnRow.inputs,
    TurnRow.dialogue_count,
    TurnRow.answer_tokens,
    TurnRow.created_at,
    TurnRow.seq,
    TurnRow.messages,
    TurnRow.meta,
)


def load_turn_rows(
    db: Database,
    conversation_id: str,
    *,
    with_node_runs: bool = False,
    from_seq: int | None = None,
    settle: bool = True,
) -> list[dict]:
    """The conversation's turns in creation order (``from_seq``: only those from that ``seq``
    on); one left running by a killed process is marked interrupted first
    (:func:`settle_interrupted`; ``settle=False``: the caller holds the lock and did that)."""
    if settle:
        settle_interrupted(db, conversation_id)
    with db.session(write=False) as s:
        if from_seq is not None:
            return [
                _turn_columns(*row)
                for row in s.execute(
                    select(*_TURN_COLUMNS)
                    .where(TurnRow.conversation_id == conversation_id, TurnRow.seq >= from_seq)
                    .order_by(TurnRow.seq)
                )
            ]
        if with_node_runs:
            rows = s.scalars(
                select(TurnRow).where(TurnRow.conversation_id == conversation_id).order_by(TurnRow.seq)
            ).all()
            return [turn_dict(r, with_node_runs=True) for r in rows]
        # Plain columns, no ORM objects: this runs on every turn and every page rerun.
        return [
            _turn_columns(*row)
            for row in s.execute(
                select(*_TURN_COLUMNS).where(TurnRow.conversation_id == conversation_id).order_by(TurnRow.seq)
            )
        ]


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
        messages = (
            Message("user", d.get("query") or "", QUERY, f"{tid}:query"),
            Message("assistant", d.get("answer") or "", ANSWER, f"{tid}:answer"),
        )
        qi, ai = 0, 1
    meta = {
        k: d[k]
        for k in (
            "seq",
            "dialogue_count",
            "flow_version_id",
            "inputs",
            "prompt_tokens",
            WINDOW_META,
            SUMMARIES_META,
            "damaged",
            TOKEN_COUNTS,
            TEXT_COUNTS,
            AGENT_THOUGHTS,
            SHOWN_ANSWER,
        )
        if k in d
    }
    return Turn(
        id=tid,
        parent_id=d.get("parent_id"),
        messages=messages,
        query_index=qi,
        answer_index=ai,
        status=d.get("status") or "succeeded",
        error=d.get("error"),
        created_at=d.get("created_at"),
        answer_tokens=d.get("answer_tokens"),
        meta=meta,
    )


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
        seq = next_seq(s, conversation_id)
        t = now()
        for turn, changes in zip(turns, variable_changes):
            row = _turn_with_runs(conversation_id, seq, turn)
            s.add(row)
            record_changes(s, conversation_id, rows, changes, row.id, seq, t)
            conv.active_turn_id = row.id
            seq += 1
        conv.updated_at = t
