"""Sources loaded: a conversation to compare or report on (:class:`core.analysis.source.Source`), with
(when known) the flow and recorded turns it came from — from the store, from a MemLens conversation
export or from any file the importer reads (a report bundle brings its configs, facts and view)."""

from __future__ import annotations

from dataclasses import fields
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Mapping, Sequence

from core.analysis.debug_view import damage_note
from core.analysis.source import Source, source_of
from core.flow.graph import Flow
from core.flow.records import NodeRun, TurnRecord
from core.flow.variables import VariableChange
from core.io.bundle import is_bundle, looks_like_bundle, parse_bundle, validate_bundle
from core.io.readers.registry import import_bytes, read_file
from core.memory.replay import turn_numbers
from core.model.conversation import Conversation
from core.report.errors import ReportError
from core.store import repo
from core.store.ledger_codec import unpack_node_run
from core.store.repo.turns import turn_from_dict

if TYPE_CHECKING:  # pragma: no cover
    from core.store.db import Database


def records_from_rows(
    rows: Sequence[Mapping[str, Any]],
    conversation: Conversation,
    history: Sequence[Mapping[str, Any]] = (),
    damaged: list | None = None,
) -> list[TurnRecord]:
    """Turn records rebuilt from stored turn rows (``repo.load_turn_rows(..., with_node_runs=True)``
    or an export's ``turns``): node runs with their ledgers unpacked against the conversation,
    and the variable changes each turn made (from the variable history). Node runs with values
    that could not be read are appended to ``damaged`` when it is given."""
    position = conversation.tree.position
    numbers = turn_numbers(conversation)
    run_fields = {f.name for f in fields(NodeRun)}
    by_turn: dict[str, list] = {}
    for h in history:
        if h.get("turn_id"):
            by_turn.setdefault(h["turn_id"], []).append(h)
    out = []
    for row in rows:
        p = position.get(row["id"])
        if p is None:
            continue
        runs = []
        for raw in row.get("node_runs") or []:
            run = unpack_node_run(raw, conversation, p)
            if run.get("damaged") and damaged is not None:
                damaged.append(run)
            runs.append(NodeRun(**{k: v for k, v in run.items() if k in run_fields}))
        changes = [
            VariableChange(
                turn=numbers[p],
                node_id=str(h.get("node_id") or ""),
                operation=str(h.get("operation") or ""),
                name=str(h.get("name") or ""),
                old=h.get("old"),
                new=h.get("new"),
                turn_id=row["id"],
            )
            for h in by_turn.get(row["id"], [])
        ]
        out.append(
            TurnRecord(
                id=row["id"],
                parent_id=row.get("parent_id"),
                conversation_id=conversation.id,
                turn=numbers[p],
                query=row.get("query") or "",
                answer=row.get("answer") or "",
                status=row.get("status") or "succeeded",
                error=row.get("error"),
                dialogue_count=int(row.get("dialogue_count") or 0),
                created_at=float(row.get("created_at") or 0),
                node_runs=runs,
                variable_changes=changes,
            )
        )
    return out


# Every recorded ledger lists every earlier message: rebuilding all of them costs the square of the
# conversation's length (1,000 turns: 4 million entries, seconds; 10,000 turns: more memory than a
# machine has). Longer stored conversations come without their recorded runs.
RECORDED_TURNS_LIMIT = 1_000


def load_stored(db: Database, conversation_id: str) -> Source:
    """A stored conversation; one played through a flow comes with its flow and recorded turns."""
    info = repo.get_conversation(db, conversation_id)
    conv = repo.load_conversation(db, conversation_id)
    origin = f"stored conversation {info.name or info.id}"
    if not info.flow_version_id:
        return Source(conv, origin, damage=damage_note(info.damaged, conv))
    version = repo.get_flow_version(db, info.flow_version_id)
    flow = Flow.from_dict(version.definition, name=version.flow_name, stored=True)
    if len(conv.turns) > RECORDED_TURNS_LIMIT:
        return Source(
            conv,
            origin,
            flow=flow,
            damage=damage_note(info.damaged, conv),
            note=f"Longer than {RECORDED_TURNS_LIMIT:,} turns: the recorded node runs are not loaded, so "
            "findings come from the flow and the memory configs only. The Debugger shows any "
            "turn's recorded ledgers.",
        )
    rows = repo.load_turn_rows(db, conversation_id, with_node_runs=True)
    damaged: list = []
    records = records_from_rows(rows, conv, repo.variable_history(db, conversation_id), damaged)
    titles = flow.node_names
    return Source(conv, origin, flow=flow, records=records, damage=damage_note(info.damaged, conv, damaged, titles))


def source_from_export(bundle: Mapping[str, Any]) -> Source:
    """A MemLens conversation export (``format: memlens-conversation``) as a source, with its flow."""
    validate_bundle(bundle)
    info = bundle["conversation"]
    turns = [turn_from_dict(dict(t)) for t in bundle["turns"]]
    conv = Conversation(
        id=info["id"],
        turns=turns,
        system_prompt=str((info.get("meta") or {}).get("system_prompt") or ""),
        source_format="memlens",
        name=info.get("name") or "",
    )
    if not bundle.get("flow"):
        return Source(conv, f"export {info.get('name') or info['id']}")
    flow = Flow.from_dict(bundle["flow"]["definition"], name=str(bundle["flow"].get("name") or "flow"))
    records = records_from_rows(bundle["turns"], conv, bundle.get("variable_history") or [])
    return Source(conv, f"export {info.get('name') or info['id']}", flow=flow, records=records)


def read_sources(
    data: bytes,
    name: str,
    *,
    fmt: str | None = None,
    skip_bad: bool = False,
    on_progress: Callable[[int, int], None] | None = None,
) -> list[Source]:
    """Every conversation of an uploaded or local file, as sources: a transcript in any
    supported format, a report bundle (with its configs and view) or a conversation export."""
    head = data[:4096].decode("utf-8", "ignore")
    if fmt is None and looks_like_bundle(head):
        bundle = parse_bundle(data, name)
        if is_bundle(bundle):
            return [source_from_export(bundle)]
    result = import_bytes(data, name, fmt, skip_bad=skip_bad, on_progress=on_progress)
    return [source_of(c, f"{name}") for c in result.conversations]


def read_source_file(path: str | Path, *, index: int = 0, fmt: str | None = None) -> tuple[Source, int]:
    """One conversation of a file (``index`` counts from 0) and how many the file holds."""
    path = Path(path)
    sources = read_sources(read_file(path), path.name, fmt=fmt)
    if not 0 <= index < len(sources):
        raise ReportError(
            f"{path.name} holds {len(sources)} conversation{'s' if len(sources) != 1 else ''}; "
            f"pick one with an index from 0 to {len(sources) - 1}"
        )
    return sources[index], len(sources)


__all__ = [
    "records_from_rows",
    "RECORDED_TURNS_LIMIT",
    "load_stored",
    "source_from_export",
    "read_sources",
    "read_source_file",
]
