"""``memlens run FLOW --queries FILE`` — run a chatflow over a list of user queries.

``FLOW`` is a Dify DSL export or a MemLens flow file; ``FILE`` a JSON array of queries (strings, or
objects ``{"query": str, "inputs": {...}}``), run in order as one conversation. Every LLM node
runs on the demo model (``memlens/demo``), whatever model the flow names and whatever keys the
machine has, so the output depends only on the inputs; the ledgers are still computed with each
node's configured model (its context size and tokenizer).

``--format json`` prints one JSON document::

    {"conversation_id": str,
     "turns": [{"turn": int, "dialogue_count": int, "query": str, "answer": str,
                "status": "succeeded"|"failed", "error": str|null,
                "nodes": [{"id": str, "type": str, "emulated": bool,
                           "ledger": [{"ref", "turn", "role", "tokens", "kept", "reason"}] | null,
                           "prompt": [{"role": str, "content": str}] | null, "reply": str | null}],
                "variables": {name: value}}]}

``nodes`` lists the nodes that ran, in order; ``ledger`` and ``prompt`` are set for LLM and
Question Classifier nodes; a ledger entry's ``ref`` is ``"<turn>:query"`` / ``"<turn>:answer"``.
The default ``table`` format is
the same run for people. Bad input (an unreadable flow, an unknown DSL version, a queries file that
is not a list) prints one line and exits with status 2.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from core.analysis.debug_view import memory_rules
from core.flow.granularity import granularity_line
from core.flow.graph import Flow, load_flow
from core.flow.node_types import NODE_TYPES
from core.flow.nodes.parameter_extractor import extracted
from core.flow.records import ConversationState, NodeRun, TurnRecord
from core.flow.runtime import run_turn
from core.limits import check_file_size, load_json
from core.llm.client import LiteLLMClient
from core.memory.config import MemoryConfig
from core.memory.long_term import LongTermMemory
from core.memory.strategies import remembers
from core.memory.strategies.dify import DEFAULT_FIDELITY, FIDELITIES
from core.memory.words import reason_words
from core.model.conversation import QUERY
from core.model.ledger import Ledger

from ..errors import UsageError
from ..options import Progress, add_db_option, open_db


def read_queries(path: str) -> list[dict[str, Any]]:
    """The queries file as ``[{"query": str, "inputs": dict}]``; anything else is a :class:`UsageError`."""
    p = Path(path)
    try:
        check_file_size(p.stat().st_size, path)
        text = p.read_text(encoding="utf-8-sig")
    except FileNotFoundError:
        raise UsageError(f"{path}: no such file") from None
    except (IsADirectoryError, UnicodeDecodeError):
        raise UsageError(f"{path} is not a text file; expected a JSON array of queries") from None
    except OSError as e:
        raise UsageError(f"{path}: cannot read ({e.strerror})") from None
    data = load_json(text, path, finite=True)
    shape = 'a JSON array of queries (strings or {"query": str, "inputs": {...}})'
    if not isinstance(data, list):
        raise UsageError(f"{path} must be {shape}, not a JSON {type(data).__name__.replace('dict', 'object')}")
    if not data:
        raise UsageError(f"{path} holds no queries; expected {shape}")
    out = []
    for i, item in enumerate(data, start=1):
        if isinstance(item, str):
            out.append({"query": item, "inputs": {}})
        elif isinstance(item, dict) and isinstance(item.get("query"), str):
            inputs = item.get("inputs") or {}
            if not isinstance(inputs, dict):
                raise UsageError(f"{path}: query {i} has 'inputs' that is not an object")
            unknown = set(item) - {"query", "inputs"}
            if unknown:
                raise UsageError(
                    f"{path}: query {i} has unknown key(s) {', '.join(sorted(unknown))}; expected 'query' and 'inputs'"
                )
            out.append({"query": item["query"], "inputs": inputs})
        else:
            raise UsageError(f"{path}: query {i} must be a string or an object with a string 'query'")
    return out


def _ref(entry) -> str:
    return f"{entry.turn}:{'query' if entry.kind == QUERY else 'answer'}"


def ledger_entries(ledger: Ledger) -> list[dict]:
    """A ledger's entries as ``memlens replay`` prints them, with refs by turn number."""
    return [dict(e.to_json(), ref=_ref(e)) for e in ledger.entries]


def node_json(run: NodeRun) -> dict:
    return {
        "id": run.node_id,
        "type": run.type,
        "emulated": run.emulated,
        "ledger": ledger_entries(run.ledger) if run.ledger is not None else None,
        "prompt": [{"role": m.role, "content": m.content} for m in run.prompt] if run.prompt is not None else None,
        "reply": run.reply,
    }


def turn_json(record: TurnRecord) -> dict:
    return {
        "turn": record.turn,
        "dialogue_count": record.dialogue_count,
        "query": record.query,
        "answer": record.answer,
        "status": record.status,
        "error": record.error,
        "nodes": [node_json(r) for r in record.node_runs],
        "variables": record.variables,
    }


def _short(text: str, width: int = 72) -> str:
    text = " ".join((text or "").split())
    return text if len(text) <= width else text[: width - 1] + "…"


def _ledger_head(ledger: Ledger | None) -> str:
    return (
        ""
        if ledger is None
        else f" · kept {len(ledger.kept)} of {len(ledger.entries)} earlier · prompt {ledger.prompt_tokens} tok"
    )


def _ledger_lines(run: NodeRun) -> list[str]:
    """A line per earlier message of the node's ledger: kept or not, and why not (in the ledger's short words)."""
    ledger = run.ledger
    if ledger is None:
        return []
    return [
        f"      {'✓' if e.kept else '✗'} {_ref(e):<10} {e.tokens:>5} tok"
        + ("" if e.kept else f" — {reason_words(e.reason, ledger.config)}")
        for e in ledger.entries
    ]


def _node_line(run: NodeRun, name: str) -> list[str]:
    """The node's lines; ``name`` is its title (with its id when another node's title reads the same)."""
    head = f"  {'✗' if run.status == 'failed' else '·'} {name:<16} {run.type:<14}"
    if not run.emulated:
        return [head + " not emulated (pass-through)" + (f", branch {run.branch}" if run.branch else "")]
    lines = []
    # LLM, Question Classifier and Parameter Extractor nodes: each run records its ledger.
    if run.type in NODE_TYPES and NODE_TYPES[run.type].dify_memory:
        ledger = run.ledger
        memory = run.memory or {}
        label = (
            "memory off"
            if not remembers(memory)
            else (f"window {memory.get('window')}" if memory.get("window") else "no window")
        )
        rules = memory_rules(memory)
        detail = f" {label}" + (f" ({rules})" if rules else "")
        lines.append(head + detail + _ledger_head(ledger))
        lines += _ledger_lines(run)
        if run.reply is not None:
            lines.append(f"      reply: {_short(run.reply)}")
        if run.type == "question-classifier" and run.branch is not None:
            lines.append(f"      → {run.outputs.get('class_name', '')} (branch {run.branch})")
        if run.type == "parameter-extractor" and run.outputs:
            lines.append(f"      → {_short(extracted(run.outputs))}")
        for note in run.notes:
            lines.append(f"      note: {note}")
    elif run.type == "if-else":
        lines.append(head + f" → {run.branch}")
    else:
        if run.ledger is not None:  # an agent's memory: its strategy, then the ledger as an LLM node's
            head += f" {MemoryConfig.from_dict(run.memory or {}).label()}{_ledger_head(run.ledger)}"
        lines.append(head)
        lines += _ledger_lines(run)
        if granularity_line(run):
            lines.append(f"      {granularity_line(run)}")
        for note in run.notes:
            lines.append(f"      note: {note}")
    if run.error:
        lines.append(f"      error: {run.error}")
    return lines


def _table(flow: Flow, conversation_id: str, records: list[TurnRecord]) -> str:
    lines = [f"flow {flow.name} ({flow.source.get('format', '')}) · conversation {conversation_id}"]
    lines += [f"  note: {w}" for w in flow.warnings]  # what the import noted: what runs otherwise than in Dify
    names = flow.node_names
    for r in records:
        lines.append("")
        lines.append(f"Turn {r.turn} · dialogue_count {r.dialogue_count} · {r.status}")
        lines.append(f"  Q: {_short(r.query)}")
        lines.append(f"  A: {_short(r.answer) if r.answer else '(empty)'}")
        if r.error:
            lines.append(f"  error: {r.error}")
        for run in r.node_runs:
            lines.extend(_node_line(run, names.get(run.node_id, run.node_id)))
        changes = [
            f"{c.name}: {json.dumps(c.old, ensure_ascii=False)} → {json.dumps(c.new, ensure_ascii=False)}"
            f" ({c.operation} by {names.get(c.node_id, c.node_id)})"
            for c in r.variable_changes
        ]
        for c in changes:
            lines.append(f"  variable {c}")
        if r.variables:
            values = ", ".join(f"{k}={json.dumps(v, ensure_ascii=False)}" for k, v in r.variables.items())
            lines.append(f"  variables: {_short(values, 200)}")
    return "\n".join(lines)


def _run_stored(args: argparse.Namespace, flow: Flow, queries: list[dict]) -> tuple[str, list[TurnRecord], Flow]:
    """Run the queries in a stored conversation (``--conversation``) or a new stored one (``--db``)."""
    from core.flow.graph import classify_change
    from core.service.sessions import ConversationService
    from core.store import repo

    service = ConversationService(open_db(args), llm=LiteLLMClient(demo_only=True))
    if args.conversation:
        pinned = service.flow(service.info(args.conversation).flow_version_id)
        if classify_change(pinned, flow) == "structure":
            version = repo.get_flow_version(service.db, service.info(args.conversation).flow_version_id)
            raise UsageError(
                f"conversation {args.conversation} runs on flow {version.flow_name!r} v{version.version}, "
                f"and {args.flow} differs from it in structure; start a new conversation instead"
            )
        conv_id, flow = args.conversation, pinned
    else:
        version = service.import_flow(flow)
        conv_id = service.start(
            version.flow_id,
            user_id=args.user,
            name=f"{flow.name} (command line)",
            source="cli",
            fidelity=args.fidelity,
            plugin_token_counting=args.plugin_token_counting,
        ).id
    with Progress("run", total=len(queries), unit="turns") as progress:
        records = []
        for item in queries:
            records.append(service.send(conv_id, item["query"], item["inputs"], granularity=args.granularity))
            progress.step()
    return conv_id, records, flow


def cmd_run(args: argparse.Namespace) -> int:
    flow = load_flow(args.flow)
    queries = read_queries(args.queries)
    if args.conversation or args.db:
        conv_id, records, flow = _run_stored(args, flow, queries)
        if args.format == "json":
            doc = {"conversation_id": conv_id, "turns": [turn_json(r) for r in records]}
            sys.stdout.write(json.dumps(doc, ensure_ascii=False) + "\n")
        else:
            sys.stdout.write(_table(flow, conv_id, records) + "\n")
        return 0
    client = LiteLLMClient(demo_only=True)
    state = ConversationState.new(flow)
    long_term = LongTermMemory()  # memory-retrieve/memory-store nodes: this run's own, in memory
    records: list[TurnRecord] = []
    with Progress("run", total=len(queries), unit="turns") as progress:
        for item in queries:
            record = run_turn(
                flow,
                state,
                item["query"],
                item["inputs"],
                user_id=args.user,
                fidelity=args.fidelity,
                plugin_token_counting=args.plugin_token_counting,
                llm=client,
                long_term=long_term,
                granularity=args.granularity,
            )
            records.append(record)
            state = state.apply(record)
            progress.step()
    if args.format == "json":
        doc = {"conversation_id": state.id, "turns": [turn_json(r) for r in records]}
        sys.stdout.write(json.dumps(doc, ensure_ascii=False) + "\n")
    else:
        sys.stdout.write(_table(flow, state.id, records) + "\n")
    return 0


def _granularity(text: str) -> str:
    import argparse

    from core.flow.errors import GranularityError
    from core.flow.granularity import check_granularity

    try:
        return check_granularity(text, "--granularity")
    except GranularityError as e:
        raise argparse.ArgumentTypeError(str(e)) from None


def register(subparsers) -> None:
    p = subparsers.add_parser(
        "run",
        description="Run a chatflow (a Dify DSL export or a MemLens flow file) over a "
        "list of queries with the demo model and print each turn's node "
        "ledgers, prompts, replies and variables.",
    )
    p.add_argument("flow", help="a Dify DSL export or a MemLens flow file (YAML)")
    p.add_argument(
        "--queries", required=True, help='a JSON array of queries: strings, or {"query": str, "inputs": {...}}'
    )
    p.add_argument("--user", default="user", help="the end user's id (sys.user_id)")
    p.add_argument(
        "--fidelity",
        choices=FIDELITIES,
        default=DEFAULT_FIDELITY,
        help="Dify's memory rules: code = Dify 1.x as shipped (default), documented = as Dify's docs describe",
    )
    p.add_argument(
        "--plugin-token-counting",
        action="store_true",
        help="Dify's PLUGIN_BASED_TOKEN_COUNTING_ENABLED (off by default, as Dify ships it): with it on, "
        "history is pruned by tokens",
    )
    p.add_argument(
        "--granularity",
        default=None,
        type=_granularity,
        help="history granularity for agent nodes: query_answer or all_messages (any case; default: "
        "the flow's history.granularity, else query_answer)",
    )
    p.add_argument("--format", choices=("table", "json"), default="table")
    add_db_option(
        p, help="store the run in this database (default with --conversation: MEMLENS_DATABASE_URL or data/memlens.db)"
    )
    p.add_argument(
        "--conversation", default=None, help="continue this stored conversation: new turns append to its active thread"
    )
    p.set_defaults(func=cmd_run)
