"""``why``: where did a word or phrase go? The turns that state it, and for each LLM node (or the
memory config given by flags) the first turn whose context no longer holds it, and the reason::

    memlens why chat.json "Dana" --memory dify --window 3
    memlens why --conversation ID "4411" [--db URL]
"""

from __future__ import annotations

import argparse
import json
import sys

from ..options import add_db_option, add_input_format_option, open_db


def cmd_why(args: argparse.Namespace) -> int:
    from core.analysis.why import Subject, node_subjects, where_did_it_go
    from core.memory.replay import Replay

    from ..errors import UsageError
    from ..memory_options import config_from_args

    if bool(args.file) == bool(args.conversation):
        raise UsageError("give a conversation FILE or --conversation ID (one of them)")
    if args.conversation:
        from core.service.sources import load_stored

        source = load_stored(open_db(args, write=False), args.conversation)
        conversation = source.conversation
        if source.flow is not None:
            subjects = node_subjects(source.flow, conversation)
        else:
            config = config_from_args(args, conversation)
            subjects = [Subject(config.label(), Replay(conversation, config))]
    else:
        from core.service.sources import read_source_file

        source, count = read_source_file(args.file, index=args.index, fmt=args.input_format)
        conversation = source.conversation
        config = config_from_args(args, conversation)
        subjects = [Subject(config.label(), Replay(conversation, config, system_prompt=args.system))]
    answer = where_did_it_go(conversation, args.phrase, subjects)
    if args.format == "json":
        sys.stdout.write(json.dumps(answer.to_json(), ensure_ascii=False) + "\n")
    else:
        sys.stdout.write("\n".join(answer.sentences()) + "\n")
    return 0


def register(sub) -> None:
    from ..app import whole_number
    from ..memory_options import add_memory_options

    p = sub.add_parser(
        "why",
        description="Find the turns that state a word or phrase, and for each LLM node of a "
        "stored conversation (or the memory config given by the flags) the first "
        "turn whose context no longer holds it, with the reason. No model is called.",
    )
    p.add_argument("file", nargs="?", help="an importable conversation file (or use --conversation)")
    p.add_argument("phrase", help="what to look for, e.g. a name or an order number (case-insensitive)")
    p.add_argument("--conversation", default=None, metavar="ID", help="a stored conversation's id instead of FILE")
    add_db_option(p)
    p.add_argument("--index", type=whole_number("--index", 0), default=0, help="which conversation of FILE (from 0)")
    p.add_argument("--system", default=None, help="system prompt (default: the file's leading system messages)")
    add_input_format_option(p)
    p.add_argument("--format", choices=("text", "json"), default="text", help="output format (default text)")
    add_memory_options(p)
    p.set_defaults(func=cmd_why)
