"""``memlens replay`` and ``memlens ls``; the memory-config options they share with ``why`` and ``report``
are in :mod:`core.cli.memory_options`.

The entry point, the exit statuses and the other commands are in :mod:`core.cli.main` and
``commands/``; ``main`` and ``build_parser`` are importable from here too.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Sequence

from core.io.errors import FormatError
from core.io.readers.registry import import_file, read_conversations
from core.memory.config import MemoryConfig
from core.memory.replay import Replay
from core.memory.words import explain
from core.model.conversation import Conversation
from core.model.ledger import SyntheticMessage
from core.model.ledger_words import branch_copies, copy_words
from core.words import plural

from .errors import UsageError
from .main import build_parser, main  # noqa: F401  (the entry point, importable from here too)
from .memory_options import add_memory_options, config_from_args  # noqa: F401  (why and the tests take it from here)
from .options import (
    add_db_option,
    add_format_option,
    add_input_format_option,
    add_skip_bad_option,
    open_db,
    print_rows,
    report_skipped,
    whole_number,
)

# -- replay -----------------------------------------------------------------------------------------


def _short(text: str, width: int = 60) -> str:
    text = " ".join(text.split())
    return text if len(text) <= width else text[: width - 1] + "…"


def _table(replay: Replay, turn_numbers: Sequence[int]) -> str:
    cfg = replay.config
    lines = [f"memory: {cfg.label()} · model {cfg.model} · tokens {replay.counter.describe()}"]
    facts = replay.facts
    if cfg.context_size or facts.context_size:
        lines.append(
            f"context size {cfg.context_size or facts.context_size:,} tokens"
            f" ({'set' if cfg.context_size else facts.source})"
        )
    else:
        lines.append(f"context size of {cfg.model} unknown")
    turns = replay.conversation.turns
    for number in turn_numbers:
        ledger = replay.ledger(number)
        position = replay.position_of(number)
        lines.append("")
        lines.append(f"Turn {number}: {_short(turns[position].query)!r}")
        if not ledger.entries:
            lines.append("  (no earlier messages)")
        copies = branch_copies(ledger, (m.ref for m in turns[position].messages), position)
        for e in ledger.rows():
            if isinstance(e, SyntheticMessage):  # sent in place of earlier messages
                lines.append(
                    f"  + {e.origin:<15} {e.covers_label:<9} {e.role:<9} {e.tokens:>6} tok  {_short(e.content)}"
                )
                continue
            mark = "✓" if e.kept else "✗"
            holder = copies.get((e.position, e.index))
            if holder is not None:  # the same message as one on the branch: say whose
                why = (
                    "  — "
                    + copy_words(
                        "this turn" if holder == position else f"turn {replay.numbers[holder]}", holder == position
                    )[1]
                )
            else:
                why = "" if e.kept else f"  — {explain(e, ledger.config)}"
            lines.append(f"  {mark} {e.reason:<15} turn {e.turn:<4} {e.role:<9} {e.tokens:>6} tok  {e.ref}{why}")
        budget = f"{ledger.budget:,}" if ledger.budget is not None else "none"
        kept = len(ledger.kept)
        lines.append(
            f"  history {ledger.history_tokens:,} tokens / budget {budget}"
            f" · prompt {ledger.prompt_tokens:,} tokens · kept {kept} of {len(ledger.entries)}"
        )
        if ledger.budget_note:
            lines.append(f"  budget: {ledger.budget_note}")
        if ledger.exceeds_context:
            lines.append(f"  warning: the prompt plus max_tokens exceeds the context size of {ledger.context_size:,}")
    return "\n".join(lines)


#: ``--format summary``'s columns: (heading, the summary's field), right-aligned numbers.
SUMMARY_COLUMNS = (
    ("turn", "turn"),
    ("kept", "kept"),
    ("dropped", "dropped"),
    ("not eligible", "not_eligible"),
    ("history tok", "history_tokens"),
    ("prompt tok", "prompt_tokens"),
    ("budget", "budget"),
    ("oldest kept", "oldest_kept_turn"),
)


def summary_table(config: MemoryConfig, summaries) -> str:
    """One row per turn for people: what its memory kept and dropped, in messages and tokens."""
    rows = [
        [("–" if getattr(s, field) is None else f"{getattr(s, field):,}") for _, field in SUMMARY_COLUMNS]
        for s in summaries
    ]
    widths = [max([len(head)] + [len(r[k]) for r in rows]) for k, (head, _) in enumerate(SUMMARY_COLUMNS)]
    lines = [
        f"memory: {config.label()} · model {config.model}",
        "  ".join(head.rjust(w) for (head, _), w in zip(SUMMARY_COLUMNS, widths)),
    ]
    lines += ["  ".join(cell.rjust(w) for cell, w in zip(r, widths)) for r in rows]
    return "\n".join(lines)


def _first_query(conv: Conversation) -> str:
    return next((t.query for t in conv.turns if t.query_index is not None), "")


def _conversations(args: argparse.Namespace, doing: str) -> list[Conversation]:
    """Every conversation of the file; with ``--skip-bad`` the good ones, each record left out said on stderr."""
    if not args.skip_bad:
        return read_conversations(args.file, args.input_format)
    result = import_file(args.file, args.input_format, skip_bad=True, max_bytes=None)
    report_skipped(result)
    if not result.conversations:
        raise FormatError(f"{args.file}: nothing to {doing} ({result.summary()})")
    return result.conversations


def _stored(args: argparse.Namespace) -> Conversation:
    """The stored conversation ``--conversation`` names (in ``--db``)."""
    from core.service.sources import load_stored

    return load_stored(open_db(args, write=False), args.conversation).conversation


def _captured_replay(args: argparse.Namespace, conversation: Conversation, config: MemoryConfig) -> Replay | None:
    """A captured conversation replayed as one of its nodes replays it (``--node``, by default its first): with
    that node's system prompt and, where it called, its prompt's size (:func:`core.capture.inference.node_replay`,
    what ``infer`` judges its rules by). ``None`` for a conversation the capture did not record."""
    if args.node is not None and not args.conversation:
        raise UsageError("--node applies to a stored conversation: give --conversation ID")
    if not args.conversation:
        return None
    from core.capture.inference import node_replay
    from core.capture.stored import nodes_of
    from core.store import repo

    nodes = nodes_of(repo.get_conversation(open_db(args), args.conversation).meta)
    if args.node is not None and args.node not in nodes:
        raise UsageError(
            f"--node {args.node!r} is not a node of this conversation; its nodes: "
            f"{', '.join(nodes) or 'none (it was not captured)'}"
        )
    return node_replay(conversation, nodes[args.node or next(iter(nodes))], config) if nodes else None


def cmd_replay(args: argparse.Namespace) -> int:
    if bool(args.file) == bool(args.conversation):
        raise UsageError("give a conversation FILE or --conversation ID (one of them)")
    config = config_from_args(args)
    if args.conversation:
        conversations, where = [_stored(args)], f"conversation {args.conversation}"
    else:
        conversations, where = _conversations(args, "replay"), args.file
    if not 0 <= args.index < len(conversations):
        raise UsageError(
            f"--index {args.index} is out of range: {where} holds "
            f"{plural(len(conversations), 'conversation')} (0..{len(conversations) - 1})"
        )
    chosen = conversations[args.index]
    config = config_from_args(args, chosen)
    replay = _captured_replay(args, chosen, config) or Replay(chosen, config, system_prompt=args.system)
    answered = [replay.numbers[p] for p in replay.conversation.answered_turns()]
    if not answered:
        raise UsageError(f"{where}: the conversation has no user turn to replay")
    if args.turn is not None:
        if args.turn not in answered:
            raise UsageError(
                f"--turn {args.turn} is out of range: the conversation has turns {answered[0]}..{answered[-1]}"
            )
        numbers = [args.turn]
    else:
        numbers = answered
    if len(conversations) > 1:
        # Said on stderr (so that --format json stays one JSON document on stdout), and only once the
        # input is known to be good: a refusal stays one line.
        print(
            f"{args.file} holds {len(conversations)} conversations; replaying --index {args.index} "
            f"({_short(chosen.name or chosen.id, 40)!r}, {plural(len(chosen.turns), 'turn')}). "
            f"List them with: memlens ls {args.file}",
            file=sys.stderr,
        )
    out = sys.stdout
    if args.format in ("summary", "jsonl"):
        wanted = set(numbers)
        chosen_summaries = (s for s in replay.summaries() if s.turn in wanted)
        if args.format == "jsonl":
            for s in chosen_summaries:
                out.write(json.dumps(s.to_json()) + "\n")
        else:
            out.write(summary_table(config, chosen_summaries) + "\n")
    elif args.format == "json":
        doc = {
            "memory": config.strategy,
            "model": config.model,
            "encoding": replay.counter.encoding_name,
            "tokens_exact": replay.counter.exact,
            "turns": [replay.ledger(n).to_json() for n in numbers],
        }
        out.write(json.dumps(doc, ensure_ascii=False) + "\n")
    elif args.format == "csv":  # one row per earlier message of each turn's ledger, as --format json lists them
        print_rows(
            [
                {"turn": n, **{("message_turn" if k == "turn" else k): v for k, v in entry.items()}}
                for n in numbers
                for entry in replay.ledger(n).to_json()["ledger"]
            ],
            "csv",
            ("turn", "ref", "message_turn", "role", "tokens", "kept", "reason"),
        )
    else:
        out.write(_table(replay, numbers) + "\n")
    return 0


def cmd_ls(args: argparse.Namespace) -> int:
    conversations = _conversations(args, "list")
    rows = [
        {
            "index": i,
            "id": c.id,
            "name": c.name,
            "format": c.source_format,
            "turns": len(c.turns),
            "first_query": _first_query(c),
        }
        for i, c in enumerate(conversations)
    ]
    if args.format in ("json", "csv"):
        print_rows(rows, args.format)
        return 0
    lines = [f"{'index':>5}  {'turns':>5}  first query"]
    lines += [f"{r['index']:>5}  {r['turns']:>5}  {_short(r['first_query'])!r}" for r in rows]
    lines.append(
        f"{plural(len(rows), 'conversation')} in {args.file}; replay one with: memlens replay {args.file} --index N"
    )
    sys.stdout.write("\n".join(lines) + "\n")
    return 0


def register(sub) -> None:
    p = sub.add_parser("replay")
    p.add_argument("file", nargs="?", help="an importable conversation file (or use --conversation)")
    p.add_argument("--conversation", default=None, metavar="ID", help="a stored conversation's id instead of FILE")
    p.add_argument(
        "--node",
        default=None,
        metavar="NODE",
        help="with --conversation, a captured conversation's node to replay as (default: its first)",
    )
    add_db_option(p)
    add_memory_options(p)
    p.add_argument("--system", default=None, help="system prompt (default: the file's leading system messages)")
    p.add_argument(
        "--turn",
        type=whole_number("--turn"),
        default=None,
        help="replay only this turn (numbered from 1 in file order, an opening without a query is 0; "
        "default: every turn)",
    )
    p.add_argument(
        "--index",
        type=whole_number("--index", 0),
        default=0,
        help="which conversation of a file with several (from 0; default 0; see `ls`)",
    )
    add_input_format_option(p)
    add_format_option(p, ("table", "json", "summary", "jsonl", "csv"))
    add_skip_bad_option(p, "replay from the good records, each bad one reported (--index counts the good ones)")
    p.set_defaults(func=cmd_replay, help_when_bare=True)
    p = sub.add_parser("ls")
    p.add_argument("file")
    add_input_format_option(p)
    add_format_option(p)
    add_skip_bad_option(p, "list the good records, each bad one reported (their indexes are what replay takes)")
    p.set_defaults(func=cmd_ls)
