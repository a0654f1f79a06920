"""Conversations into and out of the store as whole documents: the export bundle and its import, transcripts
stored all at once, and conversations pulled from a running Dify app. Each is all-or-nothing: a bundle that
does not check out stores nothing."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Mapping

from core.capture.stored import CAPTURE, NODE_RUNS, PROMPT_TOKENS
from core.io.bundle import FORMAT, FORMAT_VERSION, parse_bundle, validate_bundle
from core.limits import check_export_size, nulled_non_finite
from core.model.conversation import (
    AGENT_THOUGHTS,
    SHOWN_ANSWER,
    SOURCE_MODEL,
    UUID_NIL,
    Conversation,
    source_model,
)
from core.store import repo
from core.store.db import Database
from core.store.errors import StoreError

#: The ``source`` of a conversation pulled from a Dify app (``python -m core pull``).
PULLED_SOURCE = "dify-pull"


def export_conversation(db: Database, conversation_id: str) -> dict:
    """A conversation with its tree, node runs, variables and their history, as one JSON document."""
    info = repo.get_conversation(db, conversation_id)
    flow = None
    if info.flow_version_id:
        v = repo.get_flow_version(db, info.flow_version_id)
        flow = {
            "flow_id": v.flow_id,
            "name": v.flow_name,
            "version_id": v.id,
            "version": v.version,
            "definition": v.definition,
            "structure": v.structure,
            "note": v.note,
            "created_at": v.created_at,
        }
    doc = {
        "format": FORMAT,
        "version": FORMAT_VERSION,
        "conversation": {
            "id": info.id,
            "user_id": info.user_id,
            "name": info.name,
            "source": info.source,
            "inputs": info.inputs,
            "active_turn_id": info.active_turn_id,
            "meta": info.meta,
            "created_at": info.created_at,
            "updated_at": info.updated_at,
        },
        "flow": flow,
        "turns": repo.load_turn_rows(db, conversation_id, with_node_runs=True),
        "variables": [
            {
                "id": v.id,
                "name": v.name,
                "value_type": v.value_type,
                "value": v.value,
                "description": v.description,
                "created_at": v.created_at,
                "updated_at": v.updated_at,
            }
            for v in repo.get_variables(db, conversation_id)
        ],
        "variable_history": repo.variable_history(db, conversation_id),
    }
    damaged = damaged_fields(info, doc["turns"], doc["variable_history"]) + nulled_non_finite(doc, "export")
    if damaged:
        doc["damaged"] = damaged
    return doc


def damaged_fields(info: repo.ConversationInfo, turns: list[dict], history: list[dict] = ()) -> list[str]:
    """Where a stored conversation holds values no reader could use (shown with defaults instead),
    as ``"turn 3: seq"``; each record's own ``damaged`` mark is taken off as it is listed."""
    out = [f"conversation: {f}" for f in info.damaged]
    for i, t in enumerate(turns):
        out += [f"turn {i}: {f}" for f in t.pop("damaged", ())]
        for j, run in enumerate(t.get("node_runs") or ()):
            out += [f"turn {i} node run {j}: {f}" for f in run.pop("damaged", ())]
    for i, h in enumerate(history):
        out += [f"variable change {i}: {f}" for f in h.pop("damaged", ())]
    return out


def import_conversation(db: Database, bundle: Mapping[str, Any], *, shipped: bool = False) -> str:
    """Store an exported conversation under its own ids, all or nothing. ``shipped``: a bundle MemLens ships
    (the demo's, checked by tests/service/test_demo_bundle.py), stored without reading every ledger back
    first — which would load a tokenizer on a fresh install's first page."""
    from sqlalchemy import select

    from core.store.models import ConversationRow, FlowRow, FlowVersionRow, VariableChangeRow, VariableRow

    if not shipped:
        validate_bundle(bundle)
    conv = bundle["conversation"]
    with db.session() as s:
        if s.get(ConversationRow, conv["id"]) is not None:
            raise StoreError(
                f"conversation {conv['id']!r} already exists in this database; delete it first "
                "(or import into another database with --db)"
            )
        flow = bundle.get("flow")
        version_id = None
        if flow is not None:
            version_id = flow.get("version_id")
            existing = s.get(FlowVersionRow, version_id) if version_id else None
            if existing is None:
                flow_id = flow.get("flow_id") or repo.new_id()
                if s.get(FlowRow, flow_id) is None:
                    s.add(
                        FlowRow(
                            id=flow_id,
                            name=str(flow.get("name") or "flow"),
                            created_at=float(flow.get("created_at") or repo.now()),
                        )
                    )
                    s.flush()
                taken = set(s.scalars(select(FlowVersionRow.version).where(FlowVersionRow.flow_id == flow_id)))
                number = int(flow.get("version") or 1)
                while number in taken:
                    number += 1
                version_id = version_id or repo.new_id()
                s.add(
                    FlowVersionRow(
                        id=version_id,
                        flow_id=flow_id,
                        version=number,
                        definition=flow["definition"],
                        structure=str(flow.get("structure") or ""),
                        note=str(flow.get("note") or ""),
                        created_at=float(flow.get("created_at") or repo.now()),
                    )
                )
                s.flush()
        s.add(
            ConversationRow(
                id=conv["id"],
                flow_version_id=version_id,
                user_id=conv["user_id"],
                name=conv["name"],
                source=conv["source"],
                inputs=conv.get("inputs") or {},
                active_turn_id=conv.get("active_turn_id"),
                meta=conv.get("meta") or {},
                created_at=float(conv["created_at"]),
                updated_at=float(conv["updated_at"]),
            )
        )
        s.flush()
        for i, t in enumerate(bundle["turns"]):
            row = repo.turn_row(conv["id"], int(t.get("seq") or i + 1), {k: v for k, v in t.items() if k != "seq"})
            row.node_runs = [repo.node_row(j, run) for j, run in enumerate(t.get("node_runs") or [])]
            s.add(row)
        for v in bundle["variables"]:
            s.add(
                VariableRow(
                    id=v["id"],
                    conversation_id=conv["id"],
                    name=v["name"],
                    value_type=v["value_type"],
                    value=v.get("value"),
                    description=v.get("description") or "",
                    created_at=float(v.get("created_at") or 0),
                    updated_at=float(v.get("updated_at") or 0),
                )
            )
        for h in bundle["variable_history"]:
            s.add(
                VariableChangeRow(
                    conversation_id=conv["id"],
                    turn_id=h.get("turn_id"),
                    turn_seq=h.get("turn_seq"),
                    node_id=h["node_id"],
                    operation=str(h.get("operation") or ""),
                    name=h["name"],
                    old=h.get("old"),
                    new=h.get("new"),
                    created_at=float(h.get("created_at") or 0),
                )
            )
    return conv["id"]


def _imported_turn_rows(conv: Conversation, conv_id: str, t: float) -> tuple[list, str | None]:
    """The turn rows of an imported conversation under new ids (the source's ids stay in each turn's
    ``source_id``), and the id of the turn to make active."""
    from core.store.models import TurnRow

    rows = []
    mapping = {turn.id: repo.new_id() for turn in conv.turns}
    last = None
    for i, turn in enumerate(conv.turns):
        parent = turn.parent_id
        if parent and parent in mapping:
            parent = mapping[parent]
        elif parent and parent != UUID_NIL:
            parent = None  # a parent outside the file ends the thread, as the walk would
        last = mapping[turn.id]
        rows.append(
            TurnRow(
                id=last,
                conversation_id=conv_id,
                seq=i + 1,
                parent_id=parent,
                flow_version_id=None,
                query=turn.query,
                answer=turn.shown_answer,
                status=turn.status or "succeeded",
                error=turn.error,
                inputs={},
                dialogue_count=conv.tree.depth[i],
                answer_tokens=int(turn.answer_tokens or 0),
                messages=[m.to_dict() for m in turn.messages],
                meta={
                    "source_id": turn.id,
                    "created_at_source": turn.created_at,
                    **{k: turn.meta[k] for k in (AGENT_THOUGHTS, SHOWN_ANSWER, PROMPT_TOKENS) if k in turn.meta},
                },
                created_at=float(turn.created_at or t),
            )
        )
        # A trace's calls threaded into this conversation (core.capture.stored): each call a node run of its turn.
        runs = turn.meta.get(NODE_RUNS) or []
        rows[-1].node_runs = [repo.node_row(k, run) for k, run in enumerate(runs)]
        rows[-1].meta = {**rows[-1].meta, "node_count": len(runs)}
    # The export's own active branch (ChatGPT's current node) stays the active thread.
    return rows, mapping.get(conv.meta.get("active_turn_id"), last)


def store_conversations(
    db: Database, conversations: list[Conversation], *, user_id: str = "user", source: str = "import"
) -> list[str]:
    """Store imported conversations (no flow: they can be inspected, replayed and compared) in one
    transaction. Turn ids are made unique; the source's ids stay in each turn's ``source_id``."""
    from core.store.checks import check_conversations
    from core.store.models import ConversationRow

    check_conversations(conversations)
    ids: list[str] = []
    with db.session() as s:
        for conv in conversations:
            conv_id = repo.new_id()
            t = repo.now()
            rows, active = _imported_turn_rows(conv, conv_id, t)
            s.add_all(rows)
            s.add(
                ConversationRow(
                    id=conv_id,
                    flow_version_id=None,
                    user_id=user_id,
                    name=(conv.name or conv.id)[:255],
                    source=source,
                    inputs={},
                    active_turn_id=active,
                    meta={
                        "system_prompt": conv.system_prompt,
                        "source_format": conv.source_format,
                        "source_id": conv.id,
                        **_source_model(conv),
                        **({CAPTURE: conv.meta[CAPTURE]} if CAPTURE in conv.meta else {}),
                    },
                    created_at=t,
                    updated_at=t,
                )
            )
            ids.append(conv_id)
    return ids


def _source_model(conv: Conversation) -> dict:
    """The model the source says answered, kept with the stored conversation (when it names one)."""
    model = source_model(conv.meta)
    return {SOURCE_MODEL: model} if model else {}


def store_pulled(db: Database, conv: Conversation, *, base_url: str, user_id: str, digest: str) -> tuple[str, str]:
    """Store a conversation pulled from a Dify app, or refresh the one pulled before.

    The conversation is found again by its app (base URL), end user and Dify id. Returns the stored
    id and ``"created"``, ``"updated"`` (its turns replaced, in one transaction) or ``"unchanged"``.
    """
    from sqlalchemy import delete, select

    from core.store.checks import check_conversations
    from core.store.models import ConversationRow, FeedbackRow, NodeRunRow, TurnRow

    check_conversations([conv], base_url)
    with db.session() as s:
        existing = None
        for row in s.scalars(
            select(ConversationRow).where(ConversationRow.source == PULLED_SOURCE, ConversationRow.user_id == user_id)
        ):
            meta = row.meta or {}
            if meta.get("source_id") == conv.id and meta.get("base_url") == base_url:
                existing = row
                break
        if existing is not None and (existing.meta or {}).get("digest") == digest:
            return existing.id, "unchanged"
        t = repo.now()
        first_query = next((turn.query for turn in conv.turns if turn.query), "")
        name = conv.name if conv.name and conv.name != conv.id else (first_query[:40] or conv.id)
        meta = {
            "system_prompt": conv.system_prompt,
            "source_format": conv.source_format,
            "source_id": conv.id,
            "base_url": base_url,
            "digest": digest,
            "pulled_at": t,
        }
        if existing is None:
            conv_id = repo.new_id()
            rows, active = _imported_turn_rows(conv, conv_id, t)
            s.add_all(rows)
            s.add(
                ConversationRow(
                    id=conv_id,
                    flow_version_id=None,
                    user_id=user_id,
                    name=name[:255],
                    source=PULLED_SOURCE,
                    inputs={},
                    active_turn_id=active,
                    meta=meta,
                    created_at=t,
                    updated_at=t,
                )
            )
            return conv_id, "created"
        turn_ids = select(TurnRow.id).where(TurnRow.conversation_id == existing.id)
        s.execute(delete(NodeRunRow).where(NodeRunRow.turn_id.in_(turn_ids)))
        s.execute(delete(FeedbackRow).where(FeedbackRow.conversation_id == existing.id))
        s.execute(delete(TurnRow).where(TurnRow.conversation_id == existing.id))
        s.flush()
        rows, active = _imported_turn_rows(conv, existing.id, t)
        s.add_all(rows)
        existing.meta = {**(existing.meta or {}), **meta}
        existing.active_turn_id = active
        existing.updated_at = t
        return existing.id, "updated"


def read_bundle(path: str | Path) -> dict:
    """An export file's document, refused over the size limit before it is read."""
    path = Path(path)
    try:
        check_export_size(path.stat().st_size, path.name)
        data = path.read_bytes()
    except FileNotFoundError:
        raise StoreError(f"{path}: no such file") from None
    except OSError as e:
        raise StoreError(f"{path}: cannot read ({e.strerror or e})") from None
    return parse_bundle(data, path.name)


__all__ = [
    "PULLED_SOURCE",
    "damaged_fields",
    "export_conversation",
    "import_conversation",
    "read_bundle",
    "store_conversations",
    "store_pulled",
]
