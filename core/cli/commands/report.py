"""``report``: compare memory configs on one conversation and write a one-file HTML report.

One config per flag group: every ``--memory STRATEGY`` starts a new config, and the settings
after it (``--set KEY=VALUE``, each setting's own flag — ``--window``, ``--fidelity``, ``--model``,
``--max-tokens``… — and ``--label``) belong to that config until the next ``--memory``::

    memlens report chat.jsonl --memory dify --window 3 --memory dify --window 10 \\
        --memory window --window 6 --label "Window Memory, 6" -o report.html --bundle report.json

With no ``--memory`` the configs are the file's own (a report bundle) or MemLens's defaults.
"""

from __future__ import annotations

import argparse
import gc
import sys
from pathlib import Path

from ..options import Progress, add_db_option, add_input_format_option, open_db

EPILOG = """\
one config per flag group:
  every --memory STRATEGY starts a new config; --set KEY=VALUE, each setting's own flag (--window, --fidelity,
  --plugin-token-counting, --agent-strategy, --model, --context-size, --max-tokens, --granularity, --scope,
  --window-change TURN:N, --max-history-tokens…) and --label after it apply to that config, until the next
  --memory (memlens memories lists each memory's settings). Compare 2 to 6 configs, e.g.
    --memory dify --window 3 --memory dify --window 10 --memory window --window 6
  Without --memory: the configs saved in a report bundle, else dify window 3, dify window 10 and
  window 6 msgs.

input:
  FILE is any conversation MemLens imports (OpenAI JSON/JSONL, ShareGPT, OpenAssistant trees, Dify
  messages or web items, BFCL, a MemLens conversation export, a report bundle); --index picks one
  conversation of a file holding several. --conversation ID reads a stored conversation instead
  (--db URL, default MEMLENS_DATABASE_URL or data/memlens.db); one recorded from a flow adds the
  flow's findings.

output:
  -o FILE writes one self-contained HTML file (no server, no network); --bundle FILE writes the
  JSON bundle that the compare page's Import loads back into the same view.
"""


class _NewConfig(argparse.Action):
    """``--memory STRATEGY``: start a new config."""

    def __call__(self, parser, namespace, value, option_string=None):
        configs = list(getattr(namespace, "configs", None) or [])
        configs.append({"strategy": value})
        namespace.configs = configs


class _Setting(argparse.Action):
    """A setting of the config the latest ``--memory`` started."""

    def __call__(self, parser, namespace, value, option_string=None):
        from core.memory.strategies.settings import CHANGES

        from ..errors import UsageError
        from ..memory_options import memory_flags, parse_setting

        configs = getattr(namespace, "configs", None) or []
        shown = value if option_string != "--set" else "=".join(value)
        if not configs:
            raise UsageError(
                f"{option_string} {shown} comes before any --memory: start each config with "
                f"--memory STRATEGY, then its settings (one config per flag group)"
            )
        current = configs[-1]
        if option_string == "--set":
            field, value = parse_setting(current["strategy"], *value)
            changes = False
        elif option_string == "--label":
            field, changes = "label", False
        else:
            setting = memory_flags()[option_string][0][1]
            field, changes = setting.name, setting.kind == CHANGES
        if self.nargs == 0:  # a switch: present means on
            value = True
        if changes:
            current.setdefault(field, []).extend(value)
        elif field in current:
            raise UsageError(
                f"{option_string if option_string != '--set' else field} is given twice for config "
                f"{len(configs)} (--memory {current['strategy']}); start another config with --memory"
            )
        else:
            current[field] = value


def _whole(flag: str, minimum: int):
    from ..options import whole_number

    return whole_number(flag, minimum)


def _fact(text: str) -> tuple[str, str]:
    ref, sep, label = text.partition("=")
    if not sep or not ref or not label:
        raise argparse.ArgumentTypeError(f"--fact must be REF=LABEL (a message's ref, e.g. 1=name), not {text!r}")
    return ref, label


class _Counted:
    """A model client that counts its replies on a :class:`Progress` line (``--replies`` asks the
    demo model once per turn and config)."""

    def __init__(self, client, progress: Progress):
        self.client, self.progress = client, progress

    def complete(self, model, messages, max_tokens=None):
        reply = self.client.complete(model, messages, max_tokens)
        self.progress.step()
        return reply


def cmd_report(args: argparse.Namespace) -> int:
    from core.analysis.compare.configs import named_configs
    from core.errors import MemLensError
    from core.llm.client import DemoClient
    from core.report.build import DEFAULT_CONFIGS, build_report
    from core.report.bundle import bundle_json
    from core.report.html import report_html
    from core.service.sources import load_stored, read_source_file

    from ..errors import UsageError

    if bool(args.file) == bool(args.conversation):
        raise UsageError("give a conversation FILE or --conversation ID (one of them)")
    if args.conversation:
        source = load_stored(open_db(args, write=False), args.conversation)
    else:
        source, _ = read_source_file(args.file, index=args.index, fmt=args.input_format)
    # The conversation lives as long as the command: the collector need not walk it again each time
    # the report's own objects make it run, a walk over every turn of a long conversation.
    gc.freeze()
    if args.configs:
        try:
            configs = named_configs(args.configs)
        except (MemLensError, TypeError) as e:
            raise UsageError(f"memory config: {e}") from None
    else:
        configs = source.configs or list(DEFAULT_CONFIGS)
    marks = None
    mode = args.facts
    if args.fact:
        conv = source.conversation
        refs = {str(m.ref): m.ref for t in conv.turns for m in t.messages}
        marks = []
        for ref, label in args.fact:
            if ref not in refs:
                raise UsageError(f"--fact {ref}={label}: no message with ref {ref!r} in the conversation")
            marks.append((refs[ref], label))
        mode = "marked"
    window = None
    if args.rows or args.columns:
        from core.analysis.compare.heatmap import heatmap_window
        from core.report.build import REPORT_COLUMNS, REPORT_ROWS

        window = heatmap_window(
            source.conversation, max_rows=args.rows or REPORT_ROWS, max_columns=args.columns or REPORT_COLUMNS
        )
    with Progress("report", unit="replies asked again") as progress:
        client = _Counted(DemoClient(), progress) if args.replies else None
        report = build_report(
            source,
            configs,
            facts_mode=mode,
            marks=marks,
            replies=args.replies,
            window=window,
            title=args.title,
            client=client,
        )
    try:
        Path(args.output).write_text(report_html(report), encoding="utf-8")
        if args.bundle:
            Path(args.bundle).write_text(bundle_json(report), encoding="utf-8")
    except OSError as e:
        raise UsageError(f"cannot write the report: {e.strerror} ({e.filename})") from None
    turns = len(source.conversation.answered_turns())
    print(
        f"report: {turns} turns, {len(report.configs)} configs ({', '.join(c.label for c in report.configs)}), "
        f"{len(report.findings)} findings → {args.output}" + (f" and {args.bundle}" if args.bundle else ""),
        file=sys.stderr,
    )
    return 0


def register(sub) -> None:
    p = sub.add_parser(
        "report",
        description="Compare 2–6 memory configs on one conversation and write a self-contained "
        "HTML report (and optionally its JSON bundle).",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("file", nargs="?", help="an importable conversation file (or use --conversation)")
    p.add_argument("--conversation", default=None, metavar="ID", help="a stored conversation's id instead of FILE")
    add_db_option(p)
    p.add_argument("--index", type=_whole("--index", 0), default=0, help="which conversation of FILE (from 0)")
    add_input_format_option(p, old=("--format",))
    from core.memory.strategies import STRATEGIES

    from ..memory_options import add_memory_flags, setting_pair

    g = p.add_argument_group("memory configs (one per flag group; see below)")
    g.add_argument(
        "--memory",
        action=_NewConfig,
        choices=tuple(STRATEGIES),
        metavar="STRATEGY",
        help=f"start a new config with this strategy ({', '.join(STRATEGIES)})",
    )
    g.add_argument(
        "--set",
        action=_Setting,
        type=setting_pair,
        metavar="KEY=VALUE",
        help="a setting of this config's memory, or one every config has, e.g. --set window=6",
    )
    g.add_argument("--label", action=_Setting, help="the config's name in the report")
    add_memory_flags(g, action=_Setting)
    p.add_argument(
        "--facts",
        choices=("detected", "none"),
        default=None,
        help="facts to follow: those the user states (default) or none",
    )
    p.add_argument(
        "--fact",
        action="append",
        type=_fact,
        default=[],
        metavar="REF=LABEL",
        help="follow the message with this ref as a fact named LABEL (repeatable)",
    )
    p.add_argument("--replies", action="store_true", help="re-ask every query under each config with the demo model")
    p.add_argument("--rows", type=_whole("--rows", 1), default=None, help="heatmap rows (turns), default 40")
    p.add_argument("--columns", type=_whole("--columns", 1), default=None, help="heatmap columns, default 160")
    p.add_argument("--title", default=None)
    p.add_argument("-o", "--output", required=True, help="the HTML file to write")
    p.add_argument("--bundle", default=None, help="also write the JSON bundle here")
    p.set_defaults(func=cmd_report, configs=[])
