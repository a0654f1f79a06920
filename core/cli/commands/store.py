"""``conversations``, ``export`` and ``import``: the store from the command line.

``--db URL`` selects the database (default: ``MEMLENS_DATABASE_URL``, else ``data/memlens.db``).
"""

from __future__ import annotations

import json
import os
import sys

from ..options import (
    Progress,
    add_db_option,
    add_format_option,
    add_input_format_option,
    add_skip_bad_option,
    iso_time,
    open_db,
    print_rows,
    report_skipped,
    when,
)


def cmd_conversations(args) -> int:
    from core.store import repo
    from core.store.db import resolve_url, sqlite_file
    from core.store.errors import StoreError
    from core.words import conversation_length

    missing = sqlite_file(resolve_url(args.db))
    if missing is not None and not missing.exists():  # nothing stored there: listed as such, nothing made
        print("[]" if args.format == "json" else f"no conversations yet (no database at {missing})")
        return 0
    db = open_db(args, write=False)
    rows = repo.list_conversations(db)
    if args.format in ("json", "csv"):
        print_rows(
            [
                {
                    "id": c.id,
                    "name": c.name,
                    "user_id": c.user_id,
                    "source": c.source,
                    "turns": c.turn_count,
                    "thread_turns": c.thread_turns or c.turn_count,
                    "flow_version_id": c.flow_version_id,
                    "created_at": iso_time(c.created_at),
                    "updated_at": iso_time(c.updated_at),
                    "damaged": list(c.damaged),
                }
                for c in rows
            ],
            args.format,
            (
                "id",
                "name",
                "user_id",
                "source",
                "turns",
                "thread_turns",
                "flow_version_id",
                "created_at",
                "updated_at",
                "damaged",
            ),
        )
        return 0
    if not rows:
        print("no conversations yet")
        return 0
    for c in rows:
        flow = ""
        if c.flow_version_id:
            try:
                v = repo.get_flow_version(db, c.flow_version_id)
                flow = f"{v.flow_name} v{v.version}"
            except StoreError:
                flow = "?"
        damaged = f"  [damaged: {', '.join(c.damaged)}]" if c.damaged else ""
        updated = when(c.updated_at)
        print(f"{c.id}  {conversation_length(c):<24}  {updated}  {c.source:<6}  {flow:<24}  {c.name}{damaged}")
    return 0


def cmd_export(args) -> int:
    from core.service.transfer import export_conversation

    from ..errors import UsageError

    if bool(args.conversation_id) == bool(args.conversation):
        raise UsageError("give the conversation's ID, or --conversation ID (one of them)")
    conversation_id = args.conversation_id or args.conversation
    doc = export_conversation(open_db(args, write=False), conversation_id)
    if doc.get("damaged"):
        print(
            f"warning: {conversation_id} has damaged stored values, exported with defaults in their place: "
            f"{'; '.join(doc['damaged'])}",
            file=sys.stderr,
        )
    sys.stdout.write(json.dumps(doc, ensure_ascii=False, indent=1 if args.pretty else None, allow_nan=False) + "\n")
    return 0


def cmd_import(args) -> int:
    from core.io.bundle import is_bundle, looks_like_bundle
    from core.io.errors import FormatError
    from core.io.readers.registry import import_file
    from core.limits import check_export_size
    from core.service.imports import imported_before
    from core.service.transfer import import_conversation, read_bundle, store_conversations

    from ..errors import UsageError

    db_holder = []

    def db():
        if not db_holder:
            db_holder.append(open_db(args))
        return db_holder[0]

    try:
        # Every file is held to a size before a byte of it is parsed: an export to the size of the export
        # of anything MemLens imports, any other file (import_file) to the import size.
        check_export_size(os.stat(args.file).st_size, args.file)
        with open(args.file, encoding="utf-8") as fh:
            head = fh.read(4096)
    except FileNotFoundError:
        raise UsageError(f"{args.file}: no such file") from None
    except (OSError, UnicodeDecodeError) as e:
        raise UsageError(f"{args.file}: cannot read ({e})") from None
    if looks_like_bundle(head):
        data = read_bundle(args.file)
        if is_bundle(data):
            conv_id = import_conversation(db(), data)
            print(conv_id)
            return 0

    def megabytes(done: int, total: int) -> str:
        return f"{done / 1e6:.1f} of {total / 1e6:.1f} MB read"

    with Progress("import", counting=megabytes) as progress:
        result = import_file(
            args.file,
            args.input_format,
            skip_bad=args.skip_bad,
            on_progress=lambda done, total: progress.update(done, total=total),
        )
    if not result.conversations:
        raise FormatError(f"{args.file}: nothing to import ({result.summary()})")
    again = imported_before(db(), result.conversations)
    ids = store_conversations(db(), result.conversations, user_id=args.user)
    if again:
        result.notes.append(again)
    report_skipped(result)
    print(f"imported {result.summary()}", file=sys.stderr)
    for i in ids:
        print(i)
    return 0


def register(sub) -> None:
    p = sub.add_parser("conversations")
    add_db_option(p)
    add_format_option(p)
    p.set_defaults(func=cmd_conversations)

    p = sub.add_parser("export")
    p.add_argument("conversation_id", nargs="?", metavar="ID", help="the conversation (or use --conversation ID)")
    p.add_argument("--conversation", default=None, metavar="ID", help="the conversation, as other commands name it")
    add_db_option(p)
    p.add_argument("--pretty", action="store_true")
    p.set_defaults(func=cmd_export, help_when_bare=True)

    p = sub.add_parser("import")
    p.add_argument("file")
    add_db_option(p)
    add_input_format_option(p, old=("--format",))
    add_skip_bad_option(p, "import the good records and report the bad ones")
    p.add_argument("--user", default="user", help="user id for imported transcripts")
    p.set_defaults(func=cmd_import)
