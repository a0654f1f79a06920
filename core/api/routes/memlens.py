"""The MemLens extension: ``GET /v1/memlens/messages/{id}/ledger`` — each LLM node's ledger of that
message (every earlier message, kept or not, with its reason and tokens), its budget and the prompt
as sent — and ``GET /v1/memlens/conversations/{id}/why`` (where did a word or phrase go)."""

from __future__ import annotations

from typing import Any, Mapping

from fastapi import Depends, FastAPI, Query

from core.analysis.why import MAX_PHRASE
from core.memory.config import config_of
from core.memory.errors import ConfigError
from core.memory.words import explain
from core.model.conversation import Conversation, turn_label
from core.model.ledger import Ledger, LedgerEntry
from core.store import repo
from core.store.models import TurnRow

from ..caller import Caller, authenticate, owned, require_owned
from ..errors import invalid, not_found
from ..schemas import MessageLedger, WhyResult, check_user, error_responses, is_uuid
from .messages import STATUS


def _ledger_json(ledger: Ledger | Mapping[str, Any] | None, conversation: Conversation | None = None) -> dict | None:
    if ledger is None:
        return None
    data = ledger.to_dict() if isinstance(ledger, Ledger) else dict(ledger)
    labels = {}
    if isinstance(ledger, Ledger) and conversation is not None:
        labels = {(e.position, e.index): turn_label(conversation, e.position) for e in ledger.entries}
    positions = [(e.position, e.index) for e in ledger.entries] if isinstance(ledger, Ledger) else []
    config = dict(data.get("config") or {})
    entries = [
        {
            "ref": e.get("ref"),
            "turn": e.get("turn"),
            "turn_label": labels.get(positions[i], "") if i < len(positions) else "",
            "role": e.get("role"),
            "tokens": e.get("tokens"),
            "kept": bool(e.get("kept")),
            "reason": e.get("reason"),
            "kind": e.get("kind") or "",
            "why": _why(e, config),
        }
        for i, e in enumerate(data.get("entries") or [])
    ]
    return {
        "turn": data.get("turn"),
        "entries": entries,
        "budget": data.get("budget"),
        "budget_note": data.get("budget_note") or "",
        "prompt_tokens": data.get("prompt_tokens") or 0,
        "history_tokens": data.get("history_tokens") or 0,
        "context_size": data.get("context_size"),
        "exceeds_context": bool(data.get("exceeds_context")),
        "config": config,
        "memory": _memory_label(config),
    }


def _memory_label(config: Mapping[str, Any]) -> str:
    """The stored config's label, as its memory system words it ("" when the stored config cannot be read)."""
    try:
        return config_of(config).label() if config else ""
    except ConfigError:
        return ""


def _why(entry: Mapping[str, Any], config: Mapping[str, Any]) -> str:
    """An entry's reason in words, as the node's memory system says it."""
    reason = entry.get("reason")
    if not isinstance(reason, str):
        return ""
    try:
        return explain(
            LedgerEntry(
                entry.get("ref") or "",
                entry.get("turn") or 0,
                entry.get("role") or "",
                entry.get("tokens") or 0,
                bool(entry.get("kept")),
                reason,
            ),
            config,
        )
    except ConfigError:  # a stored config naming a memory this version does not have
        return ""


def _prompt_json(prompt: Any) -> list[dict] | None:
    if prompt is None:
        return None
    return [m.to_dict() if hasattr(m, "to_dict") else dict(m) for m in prompt]


def message_ledger(caller: Caller, message_id: str, user: str) -> dict:
    if not is_uuid(message_id):
        raise not_found("Message Not Exists.")

    def find() -> tuple | None:
        with caller.db.session(write=False) as s:
            turn = s.get(TurnRow, message_id)
            return (
                None
                if turn is None
                else (turn.conversation_id, turn.query, turn.answer, turn.status, turn.dialogue_count)
            )

    found = find()
    if found is None or owned(caller, found[0], user) is None:
        raise not_found("Message Not Exists.")
    if found[3] == repo.RUNNING and repo.settle_interrupted(caller.db, found[0]):
        found = find()
    conversation_id, query, answer, status, dialogue_count = found
    conversation = caller.service.conversation(conversation_id)
    nodes = []
    for run in caller.service.node_runs(conversation, message_id):
        if run.get("type") != "llm":
            continue
        nodes.append(
            {
                "node_id": run.get("node_id"),
                "title": run.get("title") or "",
                "type": run.get("type"),
                "status": run.get("status") or "",
                "error": run.get("error"),
                "model": run.get("model"),
                "ledger": _ledger_json(run.get("ledger"), conversation),
                "prompt": _prompt_json(run.get("prompt")),
                "reply": run.get("reply"),
                "usage": run.get("usage"),
            }
        )
    position = conversation.tree.position.get(message_id)
    return {
        "message_id": message_id,
        "turn_label": turn_label(conversation, position) if position is not None else "",
        "conversation_id": conversation_id,
        "query": query,
        "answer": answer,
        "status": STATUS.get(status, status),
        "dialogue_count": dialogue_count,
        "nodes": nodes,
    }


def where_did_it_go(caller: Caller, conversation_id: str, user: str, phrase: str) -> dict:
    """:func:`core.analysis.why.where_did_it_go` on the conversation's active thread, per LLM node of its flow."""
    from core.analysis.why import node_subjects
    from core.analysis.why import where_did_it_go as follow

    row = require_owned(caller, conversation_id, user)
    service = caller.service
    info = service.info(row.id)
    conversation = service.conversation(row.id)
    if not conversation.turns:
        raise invalid("the conversation has no message yet", "q")
    flow = service.flow(info.flow_version_id)
    thread = [conversation.tree.position[t] for t in service.active_thread(row.id, conversation)]
    subjects = node_subjects(
        flow, conversation, fidelity=info.meta.get("fidelity"), overrides=info.meta.get("memory_overrides") or None
    )
    return follow(conversation, phrase, subjects, thread=thread).to_json()


def register(app: FastAPI) -> None:
    @app.get(
        "/v1/memlens/messages/{message_id}/ledger",
        response_model=MessageLedger,
        responses=error_responses(400, 401, 404),
        tags=["memlens"],
        summary="MemLens extension: what each LLM node's memory kept and dropped for this message",
    )
    def get_ledger(message_id: str, caller: Caller = Depends(authenticate), user: str | None = Query(default=None)):
        return message_ledger(caller, message_id, check_user(user))

    @app.get(
        "/v1/memlens/conversations/{conversation_id}/why",
        response_model=WhyResult,
        responses=error_responses(400, 401, 404),
        tags=["memlens"],
        summary="MemLens extension: where did a word or phrase go — the turn that said it and, per LLM "
        "node, the first turn whose context no longer holds it, and why",
    )
    def get_why(
        conversation_id: str,
        caller: Caller = Depends(authenticate),
        user: str | None = Query(default=None),
        q: str = Query(min_length=1, max_length=MAX_PHRASE),
    ):
        return where_did_it_go(caller, conversation_id, check_user(user), q)
