"""``pull --base-url URL --user USER (--conversation ID | --all)``: conversations from a running Dify app.

The key comes from ``--key`` or, better (it stays out of the shell history), the ``DIFY_API_KEY``
environment variable; it is used for the requests only and never stored. Prints one line per
conversation (stored id, new / updated / unchanged, Dify id) and a summary on standard error; while
it reads, a progress line on standard error when that is a terminal. A timeout, a 429 or a 5xx is
tried again with growing pauses (:mod:`core.retry`), and the error says how many tries there were.
"""

from __future__ import annotations

import os
import sys

from ..options import Progress, add_db_option, add_format_option, open_db, print_rows

KEY_ENV = "DIFY_API_KEY"


def cmd_pull(args) -> int:
    from core.service.dify_pull import pull

    key = args.key or os.environ.get(KEY_ENV, "")
    with Progress("pull") as progress:
        result = pull(
            open_db(args),
            args.base_url,
            key,
            args.user,
            conversation_id=args.conversation,
            everything=args.all,
            timeout=args.timeout,
            on_progress=lambda what: progress.step(what),
        )
    outcome = {i: name for name in ("created", "updated", "unchanged") for i in getattr(result, name)}
    if args.format in ("json", "csv"):
        print_rows(
            [{"dify_id": d, "id": i, "outcome": outcome[i]} for d, i in result.ids.items()],
            args.format,
            ("dify_id", "id", "outcome"),
        )
    else:
        for dify_id, stored in result.ids.items():
            print(f"{stored}  {outcome[stored]:<9}  {dify_id}")
    print(f"pulled {result.summary()}", file=sys.stderr)
    return 0


def register(sub) -> None:
    from core.service.dify_pull import TIMEOUT_SECONDS

    p = sub.add_parser("pull")
    p.add_argument("--base-url", required=True, help="the app's API base, e.g. https://api.dify.ai/v1")
    p.add_argument("--key", default=None, help=f"the app's API key (default: ${KEY_ENV}); never stored")
    p.add_argument("--user", required=True, help="the end user whose conversations to pull (Dify's `user`)")
    which = p.add_mutually_exclusive_group(required=True)
    which.add_argument("--conversation", default=None, metavar="ID", help="one conversation, by its Dify id")
    which.add_argument("--all", action="store_true", help="every conversation of --user")
    add_db_option(p)
    p.add_argument("--timeout", type=float, default=TIMEOUT_SECONDS, help="seconds to wait for each answer")
    add_format_option(p)
    p.set_defaults(func=cmd_pull)
