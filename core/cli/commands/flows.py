"""``flows import FILE`` and ``flows list``: the flows the Service API and the UI serve.

``flows import`` reads a Dify DSL export or a MemLens flow file, stores it as a new flow (version 1)
and prints the new flow's id on standard output (what ``keys create`` takes); what MemLens emulates
of it goes to standard error. ``--db URL`` selects the database (default: ``MEMLENS_DATABASE_URL``,
else ``data/memlens.db``).
"""

from __future__ import annotations

import sys

from ..options import add_db_option, add_format_option, iso_time, open_db, print_rows, when


def cmd_flows_import(args) -> int:
    from core.flow.graph import load_flow
    from core.flow.imported import import_report
    from core.service.sessions import ConversationService

    flow = load_flow(args.file)  # a bad file fails here, before the database is touched
    version = ConversationService(open_db(args)).import_flow(flow, name=args.name)
    print(import_report(flow).to_text(), file=sys.stderr)
    print(version.flow_id)
    return 0


def cmd_flows_list(args) -> int:
    from core.flow.graph import Flow
    from core.store import repo

    flows = repo.list_flows(open_db(args, write=False))
    if args.format in ("json", "csv"):
        print_rows(
            [
                {
                    "id": v.flow_id,
                    "name": v.flow_name,
                    "version": v.version,
                    "version_id": v.id,
                    "mode": v.definition.get("mode"),
                    "created_at": iso_time(v.created_at),
                }
                for v in flows
            ],
            args.format,
            ("id", "name", "version", "version_id", "mode", "created_at"),
        )
        return 0
    if not flows:
        print("no flows yet: add one with `memlens flows import FILE`")
        return 0
    for v in flows:
        mode = Flow.from_dict(v.definition, name=v.flow_name, stored=True).app_mode
        print(f"{v.flow_id}  v{v.version:<3}  {when(v.created_at)}  {mode:<13}  {v.flow_name}")
    return 0


def register(sub) -> None:
    p = sub.add_parser("flows")
    flows = p.add_subparsers(dest="flows_command", metavar="{import,list}")
    flows.required = True
    q = flows.add_parser("import", help="store a Dify DSL export or MemLens flow file; prints the new flow's id")
    q.add_argument("file")
    q.add_argument("--name", default=None, help="the flow's name (default: the file's)")
    add_db_option(q)
    q.set_defaults(func=cmd_flows_import)
    q = flows.add_parser("list", help="every flow's id, newest version and name")
    add_db_option(q)
    add_format_option(q)
    q.set_defaults(func=cmd_flows_list)
