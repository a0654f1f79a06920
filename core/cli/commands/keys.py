"""``keys create FLOW_ID``, ``keys revoke KEY_ID``, ``keys list``: Service API app keys.

``keys create`` prints the new key on standard output — the only time it is shown: the store keeps
its hash — and the key's id on standard error. A key serves one flow; revoking it is immediate.
``--db URL`` selects the database (default: ``MEMLENS_DATABASE_URL``, else ``data/memlens.db``).
"""

from __future__ import annotations

import sys

from ..options import add_db_option, add_format_option, iso_time, open_db, print_rows, when


def cmd_keys_create(args) -> int:
    from core.store.keys import create_key

    key, secret = create_key(open_db(args), args.flow_id, name=args.name)
    print(f"key {key.id} for flow {key.flow_name!r}: copy it now, it is not shown again", file=sys.stderr)
    print(secret)
    return 0


def cmd_keys_revoke(args) -> int:
    from core.store.keys import revoke_key

    key = revoke_key(open_db(args), args.key_id)
    print(f"revoked {key.id} ({key.hint}, flow {key.flow_name!r})")
    return 0


def cmd_keys_list(args) -> int:
    from core.store.keys import list_keys

    rows = list_keys(open_db(args, write=False), flow_id=args.flow)
    if args.format in ("json", "csv"):
        print_rows(
            [
                {
                    "id": k.id,
                    "flow_id": k.flow_id,
                    "flow_name": k.flow_name,
                    "hint": k.hint,
                    "name": k.name,
                    "created_at": iso_time(k.created_at),
                    "revoked_at": iso_time(k.revoked_at),
                }
                for k in rows
            ],
            args.format,
            ("id", "flow_id", "flow_name", "hint", "name", "created_at", "revoked_at"),
        )
        return 0
    if not rows:
        print("no API keys yet: make one with `memlens keys create FLOW_ID`")
        return 0
    for k in rows:
        state = f"revoked {when(k.revoked_at)}" if k.revoked_at else "active"
        print(f"{k.id}  {k.hint}  {when(k.created_at)}  {state:<24}  {k.flow_name}  {k.name}".rstrip())
    return 0


def register(sub) -> None:
    p = sub.add_parser("keys")
    keys = p.add_subparsers(dest="keys_command", metavar="{create,revoke,list}")
    keys.required = True
    q = keys.add_parser("create", help="a new key for a flow, printed once")
    q.add_argument("flow_id")
    q.add_argument("--name", default="", help="a label to recognise the key by")
    add_db_option(q)
    q.set_defaults(func=cmd_keys_create)
    q = keys.add_parser("revoke", help="revoke a key at once")
    q.add_argument("key_id")
    add_db_option(q)
    q.set_defaults(func=cmd_keys_revoke)
    q = keys.add_parser("list", help="every key: id, hint, created, active or revoked, flow")
    q.add_argument("--flow", default=None, help="only this flow's keys")
    add_db_option(q)
    add_format_option(q)
    q.set_defaults(func=cmd_keys_list)
