"""A turn record as the store keeps it: each node run packed (its ledger as reason runs, its prompt without
the history texts the ledger holds), its variable changes as rows, its messages' token counts."""

from __future__ import annotations

import copy
from dataclasses import fields

from core.flow.records import TurnRecord
from core.flow.variables import VariableChange
from core.memory.strategies.compaction import SUMMARIES_META
from core.model.conversation import (
    AGENT_THOUGHTS,
)
from core.model.tokens import counter_for
from core.store.ledger_codec import pack_ledger, pack_prompt
from core.store.repo.counts import TEXT_COUNTS, TOKEN_COUNTS, text_counts, token_counts


def _change_row(change: VariableChange) -> dict:
    return {
        "name": change.name,
        "old": change.old,
        "new": change.new,
        "operation": change.operation,
        "node_id": change.node_id,
    }


def _stored_run(run) -> dict:
    """A node run's stored form: its ledger as reason runs, its prompt without history texts."""
    out = {f.name: copy.deepcopy(getattr(run, f.name)) for f in fields(run) if f.name not in ("ledger", "prompt")}
    prompt = [m.to_dict() for m in run.prompt] if run.prompt is not None else None
    if run.ledger is not None:
        out["prompt"] = pack_prompt(prompt, run.ledger)
        out["ledger"] = pack_ledger(run.ledger)
    else:
        out["prompt"], out["ledger"] = prompt, None
    return out


def turn_from_record(record: TurnRecord, flow_version_id: str | None) -> dict:
    """The stored form of a turn record (every node run included; variables live in their tables)."""
    data = {
        f.name: copy.deepcopy(getattr(record, f.name))
        for f in fields(record)
        if f.name not in ("node_runs", "variable_changes", "variables", "conversation_id", AGENT_THOUGHTS)
    }
    data["node_runs"] = [_stored_run(r) for r in record.node_runs]
    data["flow_version_id"] = flow_version_id
    data["answer_tokens"] = record.answer_tokens
    turn = record.to_turn()
    meta = turn.meta
    data["prompt_tokens"] = meta.get("prompt_tokens", {})
    for key in (SUMMARIES_META, AGENT_THOUGHTS):  # what the turn's record holds only when it has it
        if key in meta:
            data[key] = meta[key]
    # Counted under every encoding the turn's memory counted with, kept so a reopen does not recount.
    encodings = {
        counter_for(r.memory.get("model") or r.model).encoding_name
        for r in record.node_runs
        if r.ledger is not None and r.memory
    }
    if encodings:
        data[TOKEN_COUNTS] = token_counts(turn.messages, encodings)
        data[TEXT_COUNTS] = text_counts(turn.messages, encodings)
    intermediate, files = data.pop("intermediate", None), data.pop("files", None)
    if intermediate or files:
        # tool calls and results, or the user's files: the turn's full message list is stored
        data["messages"] = [m.to_dict() for m in turn.messages]
    return data


__all__ = ["turn_from_record"]
