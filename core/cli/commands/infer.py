"""``infer``: the memory rule behind each node of a captured conversation::

    memlens infer --conversation ID [--db URL] [--format json]

For each node (the calls sharing a system prompt and tools), the rule MemLens emulates that explains
the most of its calls — its replay gives each call's kept set — how many calls it explains, the first
it does not, the rules that explain them as well, and where a named platform's emulation differs
from what was observed. The JSON is ``{"nodes": [{"node", "calls", "rule", "explains",
"first_unexplained", "equivalent"}]}``; ``rule`` replays with ``memlens replay --conversation ID
--node NODE --memory NAME …`` to the same kept and dropped sets.
"""

from __future__ import annotations

import json
import shlex
import sys

from ..options import add_db_option, add_format_option, open_db


def cmd_infer(args) -> int:
    from core.capture.inference import infer_stored, rule_args

    result = infer_stored(open_db(args), args.conversation)
    if args.format == "json":
        sys.stdout.write(json.dumps(result.to_json(), ensure_ascii=False) + "\n")
        return 0
    conv = result.conversation
    lines = [
        f"Conversation {conv.name or conv.id!r} ({conv.id}): "
        f"{len(result.nodes)} node{'s' if len(result.nodes) != 1 else ''}"
    ]
    for node in result.nodes:
        lines += [
            "",
            f"{node.node.id} · {node.node.title.split(' · ', 1)[-1]} · {len(node.calls)} calls",
            f"  {node.fit()}",
        ]
        best = node.best
        if best is not None and best.explains:
            first = best.first_unexplained(node.calls)
            if first is not None:
                lines.append(f"  first call it does not explain: call {first}")
            if node.equivalent:
                lines.append("  equally well: " + "; ".join(e.rule.full for e in node.equivalent))
            args_ = rule_args(best.rule.settings())
            lines.append(
                f"  replay: memlens replay --conversation {conv.id} --node {node.node.id} "
                + " ".join(shlex.quote(a) for a in args_)
            )
        for difference in node.differences:
            lines.append(f"  {difference.sentence()}")
    sys.stdout.write("\n".join(lines) + "\n")
    return 0


def register(sub) -> None:
    p = sub.add_parser(
        "infer",
        help="name the memory rule behind each node of a captured conversation",
        description="For each node of a conversation the capture proxy recorded (or a trace's calls "
        "imported), the memory rule whose replay gives the kept sets its calls showed.",
    )
    p.add_argument("--conversation", required=True, metavar="ID", help="a stored conversation's id")
    add_db_option(p)
    add_format_option(p, ("table", "json"))
    p.set_defaults(func=cmd_infer)
