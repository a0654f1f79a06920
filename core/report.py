"""Reports: one self-contained HTML file and a JSON bundle that loads back into the same view.

A report is a comparison of memory configs on one conversation (:mod:`core.compare`) with its
findings (:mod:`core.findings`), optionally the replies re-asked under each config, and — for a
conversation recorded from a flow — the flow's own findings.

* :func:`report_html` writes one HTML file that opens in any browser with no server and no
  network: the styles are inline, the heatmaps and line charts are inline SVG (a ``<title>`` per
  cell is the hover: the message, its tokens and the reason), there is no script, no font, no
  image and no link to any other file. Every piece of text from the conversation, the configs
  or the findings is HTML-escaped.
* :func:`report_bundle` is the JSON form (``format: memlens-report``): the conversation itself,
  the configs, the facts followed and the view (selected turn, heatmap window), plus the computed
  results for readers that do not recompute. Reading it back (:func:`read_report`, or any
  importer: the format is registered in :mod:`core.readers`) gives the conversation with the
  configs and facts in ``Conversation.meta["report"]``, and :func:`source_of` turns that into
  the same view.

Also here, because the compare page, the import page and ``python -m core report`` share them:
:class:`Source` (a conversation with, when known, the flow and recorded turns it came from),
loading one from the store or from any importable file, storing an upload all-or-nothing
(:func:`import_upload`), and the saved config sets of the compare page (:func:`saved_config_sets`).
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from datetime import datetime, timezone
from html import escape
from typing import Any, Callable, Iterable, Mapping, Sequence

from .compare import (Comparison, HeatmapWindow, NamedConfig, ReplyGrid, RetentionMatrix, compare, heatmap_window,
                      named_configs, replay_replies)
from .conversation import ROLES, Conversation, Message, Turn, turn_label
from .errors import MemLensError
from .findings import Finding, config_findings, flow_findings, run_findings
from .ledger import (CLEARED, EMPTY, GRANULARITY, KEPT, MEMORY_OFF, OTHER_BRANCH, OUTSIDE_WINDOW, OVER_BUDGET,
                     REASON_LABELS, SCOPE, SUMMARIZED, TRIMMED_EARLIER, explain)
from .memory import MemoryConfig, Replay, turn_numbers

FORMAT = "memlens-report"
FORMAT_VERSION = 1
#: The settings key under which the compare page keeps its saved config sets.
CONFIG_SETS_KEY = "compare.configs"
#: A report's heatmap window: smaller than the page's, so a long conversation's file stays small.
REPORT_ROWS = 40
REPORT_COLUMNS = 160
#: Conversations up to this many answered turns list every turn's ledger in a report; longer ones
#: list :data:`LEDGER_TURNS_LONG` turns: the last, the selected one and the first findings' turns.
LEDGER_TURNS = 30
LEDGER_TURNS_LONG = 8

#: One colour per reason, shared by the page's heatmaps and the report's.
REASON_COLOURS = {
    KEPT: "#10b981", OUTSIDE_WINDOW: "#f59e0b", OVER_BUDGET: "#ef4444", TRIMMED_EARLIER: "#a855f7",
    SUMMARIZED: "#eab308", CLEARED: "#fb923c", GRANULARITY: "#93c5fd", EMPTY: "#e5e7eb", MEMORY_OFF: "#9ca3af",
    SCOPE: "#cbd5e1", OTHER_BRANCH: "#f1f5f9",
}
#: Reasons in legend order; a heatmap cell's code is its index here.
REASON_ORDER = tuple(REASON_COLOURS)
#: Line colours of the configs (a comparison has at most six).
CONFIG_COLOURS = ("#2563eb", "#db2777", "#059669", "#d97706", "#7c3aed", "#0891b2")
FACT_MODES = ("detected", "marked", "none")


class ReportError(MemLensError):
    """A report cannot be made or read; the message says what to change."""


# -- conversations as JSON ------------------------------------------------------------------------------

def message_to_json(m: Message) -> dict:
    return m.to_dict()


def conversation_to_json(conv: Conversation) -> dict:
    """A conversation as JSON, losslessly (every turn with its messages, indices and status)."""
    return {"id": conv.id, "name": conv.name, "system_prompt": conv.system_prompt,
            "source_format": conv.source_format,
            "turns": [{"id": t.id, "parent_id": t.parent_id, "query_index": t.query_index,
                       "answer_index": t.answer_index, "status": t.status, "error": t.error,
                       "created_at": t.created_at, "answer_tokens": t.answer_tokens,
                       "messages": [message_to_json(m) for m in t.messages]} for t in conv.turns]}


class _Bad(Exception):
    def __init__(self, field: str, message: str):
        super().__init__(message)
        self.field = field


def _need(cond: bool, where: str, message: str) -> None:
    if not cond:
        raise _Bad(where, f"{where}: {message}")


def _message_from_json(d: Any, where: str) -> Message:
    _need(isinstance(d, Mapping), where, "must be an object")
    _need(d.get("role") in ROLES, f"{where}.role", f"must be one of {', '.join(ROLES)}")
    _need(isinstance(d.get("content", ""), str), f"{where}.content", "must be text")
    _need(isinstance(d.get("kind", ""), str), f"{where}.kind", "must be text")
    _need(isinstance(d.get("ref", ""), (int, str)) and not isinstance(d.get("ref"), bool), f"{where}.ref",
          "must be a number or text")
    for k, c in enumerate(d.get("tool_calls") or []):
        _need(isinstance(c, Mapping) and all(isinstance(c.get(x), str) for x in ("id", "name", "arguments")),
              f"{where}.tool_calls[{k}]", "needs text 'id', 'name' and 'arguments'")
    for k, f in enumerate(d.get("files") or []):
        _need(isinstance(f, Mapping), f"{where}.files[{k}]", "must be an object")
    usage = d.get("usage")
    _need(usage is None or (isinstance(usage, list) and len(usage) == 2 and all(
        isinstance(x, int) and not isinstance(x, bool) and 0 <= x < 10**9 for x in usage)), f"{where}.usage",
        "must be [input tokens, output tokens], two whole numbers")
    return Message.from_dict(d)


def conversation_from_json(d: Any, where: str = "conversation") -> Conversation:
    """The inverse of :func:`conversation_to_json`; a malformed document raises
    :class:`ReportError` naming the field."""
    try:
        return _conversation(d, where)
    except _Bad as e:
        raise ReportError(str(e)) from None


def _conversation(d: Any, where: str) -> Conversation:
    _need(isinstance(d, Mapping), where, "must be an object")
    _need(isinstance(d.get("id"), str) and d["id"] != "", f"{where}.id", "must be non-empty text")
    _need(isinstance(d.get("turns"), list), f"{where}.turns", "must be a list")
    turns = []
    ids = set()
    for i, t in enumerate(d["turns"]):
        at = f"{where}.turns[{i}]"
        _need(isinstance(t, Mapping), at, "must be an object")
        _need(isinstance(t.get("id"), str) and t["id"] not in ids, f"{at}.id", "must be text, unique in the file")
        ids.add(t["id"])
        _need(t.get("parent_id") is None or isinstance(t.get("parent_id"), str), f"{at}.parent_id",
              "must be text or null")
        _need(isinstance(t.get("messages"), list), f"{at}.messages", "must be a list")
        messages = tuple(_message_from_json(m, f"{at}.messages[{j}]") for j, m in enumerate(t["messages"]))
        for key in ("query_index", "answer_index"):
            value = t.get(key)
            _need(value is None or (isinstance(value, int) and not isinstance(value, bool)
                                    and 0 <= value < len(messages)), f"{at}.{key}",
                  f"must be null or an index into its {len(messages)} messages")
        turns.append(Turn(id=t["id"], parent_id=t.get("parent_id"), messages=messages,
                          query_index=t.get("query_index"), answer_index=t.get("answer_index"),
                          status=str(t.get("status") or "normal"), error=t.get("error"),
                          created_at=t.get("created_at"), answer_tokens=t.get("answer_tokens")))
    return Conversation(id=d["id"], turns=turns, system_prompt=str(d.get("system_prompt") or ""),
                        source_format=str(d.get("source_format") or FORMAT), name=str(d.get("name") or ""))


# -- sources -------------------------------------------------------------------------------------------

@dataclass
class Source:
    """A conversation to compare, with where it came from.

    ``flow`` and ``records`` are set for a conversation recorded from a flow (stored, or a
    MemLens conversation export): its node ledgers give the flow's findings. ``configs``,
    ``facts`` (``(message, label)`` marks) and ``view`` come from a report bundle. ``note``
    says what was left out of a source too long to load whole.
    """

    conversation: Conversation
    origin: str = ""
    flow: Any = None
    records: list = field(default_factory=list)
    configs: list[NamedConfig] | None = None
    facts_mode: str = "detected"
    facts: list | None = None
    view: dict = field(default_factory=dict)
    title: str = ""
    note: str = ""
    #: For a stored conversation with values no reader could use: one line naming them.
    damage: str | None = None


def source_of(conversation: Conversation, origin: str = "") -> Source:
    """A conversation as a source; one read from a report bundle brings its configs, facts and view."""
    report = conversation.meta.get("report") if isinstance(conversation.meta, dict) else None
    if not isinstance(report, Mapping):
        return Source(conversation, origin)
    facts = report.get("facts") or {}
    marks = [((tuple(m["message"])), m["label"]) for m in facts.get("marks") or []]
    return Source(conversation, origin, configs=[NamedConfig.from_dict(c) for c in report.get("configs") or []],
                  facts_mode=facts.get("mode", "detected"), facts=marks, view=dict(report.get("view") or {}),
                  title=str(report.get("title") or ""))


def records_from_rows(rows: Sequence[Mapping[str, Any]], conversation: Conversation,
                      history: Sequence[Mapping[str, Any]] = (), damaged: list | None = None) -> list:
    """Turn records rebuilt from stored turn rows (``repo.load_turn_rows(..., with_node_runs=True)``
    or an export's ``turns``): node runs with their ledgers unpacked against the conversation,
    and the variable changes each turn made (from the variable history). Node runs with values
    that could not be read are appended to ``damaged`` when it is given."""
    from dataclasses import fields

    from .runtime import NodeRun, TurnRecord
    from .store.ledger_codec import unpack_node_run
    from .variables import VariableChange

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
        changes = [VariableChange(turn=numbers[p], node_id=str(h.get("node_id") or ""),
                                  operation=str(h.get("operation") or ""), name=str(h.get("name") or ""),
                                  old=h.get("old"), new=h.get("new"), turn_id=row["id"])
                   for h in by_turn.get(row["id"], [])]
        out.append(TurnRecord(id=row["id"], parent_id=row.get("parent_id"), conversation_id=conversation.id,
                              turn=numbers[p], query=row.get("query") or "", answer=row.get("answer") or "",
                              status=row.get("status") or "succeeded", error=row.get("error"),
                              dialogue_count=int(row.get("dialogue_count") or 0),
                              created_at=float(row.get("created_at") or 0), node_runs=runs, variable_changes=changes))
    return out


# Every recorded ledger lists every earlier message: rebuilding all of them costs the square of the
# conversation's length (1,000 turns: 4 million entries, seconds; 10,000 turns: more memory than a
# machine has). Longer stored conversations come without their recorded runs.
RECORDED_TURNS_LIMIT = 1_000


def load_stored(db: Any, conversation_id: str) -> Source:
    """A stored conversation; one played through a flow comes with its flow and recorded turns."""
    from .flow import Flow
    from .store import repo

    from .debug_view import damage_note

    info = repo.get_conversation(db, conversation_id)
    conv = repo.load_conversation(db, conversation_id)
    origin = f"stored conversation {info.name or info.id}"
    if not info.flow_version_id:
        return Source(conv, origin, damage=damage_note(info.damaged, conv))
    version = repo.get_flow_version(db, info.flow_version_id)
    flow = Flow.from_dict(version.definition, name=version.flow_name)
    if len(conv.turns) > RECORDED_TURNS_LIMIT:
        return Source(conv, origin, flow=flow, damage=damage_note(info.damaged, conv),
                      note=f"Longer than {RECORDED_TURNS_LIMIT:,} turns: the recorded node runs are not loaded, so "
                           "findings come from the flow and the memory configs only. The Debugger shows any "
                           "turn's recorded ledgers.")
    rows = repo.load_turn_rows(db, conversation_id, with_node_runs=True)
    damaged: list = []
    records = records_from_rows(rows, conv, repo.variable_history(db, conversation_id), damaged)
    titles = {n.id: n.title or n.id for n in flow.nodes}
    return Source(conv, origin, flow=flow, records=records,
                  damage=damage_note(info.damaged, conv, damaged, titles))


def source_from_export(bundle: Mapping[str, Any]) -> Source:
    """A MemLens conversation export (``format: memlens-conversation``) as a source, with its flow."""
    from .flow import Flow
    from .bundle import validate_bundle
    from .store.repo import turn_from_dict

    validate_bundle(bundle)
    info = bundle["conversation"]
    turns = [turn_from_dict(dict(t)) for t in bundle["turns"]]
    conv = Conversation(id=info["id"], turns=turns,
                        system_prompt=str((info.get("meta") or {}).get("system_prompt") or ""),
                        source_format="memlens", name=info.get("name") or "")
    if not bundle.get("flow"):
        return Source(conv, f"export {info.get('name') or info['id']}")
    flow = Flow.from_dict(bundle["flow"]["definition"], name=str(bundle["flow"].get("name") or "flow"))
    records = records_from_rows(bundle["turns"], conv, bundle.get("variable_history") or [])
    return Source(conv, f"export {info.get('name') or info['id']}", flow=flow, records=records)


def read_sources(data: bytes, name: str, *, fmt: str | None = None, skip_bad: bool = False,
                 on_progress: Callable[[int, int], None] | None = None) -> list[Source]:
    """Every conversation of an uploaded or local file, as sources: a transcript in any
    supported format, a report bundle (with its configs and view) or a conversation export."""
    from .readers import import_bytes

    from .bundle import is_bundle, looks_like_bundle, parse_bundle

    head = data[:4096].decode("utf-8", "ignore")
    if fmt is None and looks_like_bundle(head):
        bundle = parse_bundle(data, name)
        if is_bundle(bundle):
            return [source_from_export(bundle)]
    result = import_bytes(data, name, fmt, skip_bad=skip_bad, on_progress=on_progress)
    return [source_of(c, f"{name}") for c in result.conversations]


def read_source_file(path: Any, *, index: int = 0, fmt: str | None = None) -> tuple[Source, int]:
    """One conversation of a file (``index`` counts from 0) and how many the file holds."""
    from pathlib import Path

    from .limits import check_file_size

    path = Path(path)
    try:
        size = path.stat().st_size
        if path.is_dir():
            raise IsADirectoryError
        check_file_size(size, path.name)
        data = path.read_bytes()
    except FileNotFoundError:
        raise ReportError(f"{path}: no such file") from None
    except IsADirectoryError:
        raise ReportError(f"{path} is a directory; expected a conversation file") from None
    except OSError as e:
        raise ReportError(f"{path}: cannot read ({e.strerror})") from None
    sources = read_sources(data, path.name, fmt=fmt)
    if not 0 <= index < len(sources):
        raise ReportError(f"{path.name} holds {len(sources)} conversation{'s' if len(sources) != 1 else ''}; "
                          f"pick one with an index from 0 to {len(sources) - 1}")
    return sources[index], len(sources)


# -- the report ------------------------------------------------------------------------------------------

@dataclass
class Report:
    """Everything a report shows; :func:`report_html` and :func:`report_bundle` write it."""

    title: str
    source: Source
    comparison: Comparison
    findings: list[Finding]
    facts_mode: str
    marks: list
    replies: ReplyGrid | None = None
    selected_turn: int | None = None
    created_at: float = field(default_factory=time.time)

    @property
    def conversation(self) -> Conversation:
        return self.source.conversation

    @property
    def configs(self) -> list[NamedConfig]:
        return self.comparison.configs


def _facts_argument(mode: str, marks: Sequence | None) -> Any:
    if mode not in FACT_MODES:
        raise ReportError(f"unknown facts mode {mode!r}; expected one of {', '.join(FACT_MODES)}")
    if mode == "none":
        return []
    if mode == "marked":
        return list(marks or [])
    return None  # compare's default: the file's own facts, else the detected ones


def build_report(source: Source, configs: Iterable[Any] | None = None, *, facts_mode: str | None = None,
                 marks: Sequence | None = None, replies: bool = False, client: Any = None,
                 window: HeatmapWindow | None = None, title: str | None = None,
                 selected_turn: int | None = None, max_reply_turns: int | None = 200) -> Report:
    """Compare ``configs`` (default: the source's own, from a report bundle) on the source's
    conversation and gather the findings. ``facts_mode``: ``detected`` (the file's facts or those
    the user states), ``marked`` (``marks``: ``(message, label)`` pairs) or ``none``."""
    conv = source.conversation
    if configs is None:
        configs = source.configs
    if not configs:
        raise ReportError("a report needs 2 to 6 memory configs to compare")
    named = named_configs(configs)
    mode = facts_mode or source.facts_mode or "detected"
    marks = list(marks if marks is not None else (source.facts or []))
    facts = _facts_argument(mode, marks)
    if window is None:
        last = source.view.get("last_turn")
        try:
            window = heatmap_window(conv, last_turn=last, max_rows=int(source.view.get("rows") or REPORT_ROWS),
                                    max_columns=int(source.view.get("columns") or REPORT_COLUMNS))
        except MemLensError:
            window = heatmap_window(conv, max_rows=REPORT_ROWS, max_columns=REPORT_COLUMNS)
    comparison = compare(conv, named, facts=facts, window=window)
    found = list(config_findings(conv, named, comparison=comparison))
    if source.flow is not None:
        found += run_findings(source.flow, conv, source.records) if source.records else flow_findings(source.flow)
    found.sort(key=lambda f: (f.turn is not None, f.turn or 0))
    grid = replay_replies(conv, named, client=client, max_turns=max_reply_turns) if replies else None
    name = title or source.title or conv.name or conv.id
    if selected_turn is None:
        selected_turn = source.view.get("selected_turn")
    return Report(name, source, comparison, found, mode, marks, grid, selected_turn)


# -- the JSON bundle ----------------------------------------------------------------------------------

def _mark_json(conv: Conversation, message: Any, label: str) -> dict:
    if isinstance(message, (tuple, list)) and len(message) == 2:
        p, j = int(message[0]), int(message[1])
    else:
        p, j = next((p, j) for p, t in enumerate(conv.turns) for j, m in enumerate(t.messages) if m.ref == message)
    return {"message": [p, j], "ref": conv.turns[p].messages[j].ref, "label": label}


def report_bundle(report: Report) -> dict:
    """The report as JSON: what to recompute the same view from, and the results themselves."""
    conv = report.conversation
    marks = []
    for m in report.marks:
        if isinstance(m, Mapping):
            marks.append(_mark_json(conv, m.get("message", m.get("ref")), str(m.get("label"))))
        else:
            marks.append(_mark_json(conv, m[0], str(m[1])))
    window = report.comparison.window
    numbers = turn_numbers(conv)
    return {
        "format": FORMAT, "version": FORMAT_VERSION, "title": report.title,
        "created_at": report.created_at,
        "conversation": conversation_to_json(conv),
        "configs": [c.to_dict() for c in report.configs],
        "facts": {"mode": report.facts_mode, "marks": marks},
        "view": {"selected_turn": report.selected_turn,
                 "last_turn": numbers[window.rows[-1]] if window.rows else None,
                 "rows": max(len(window.rows), 1), "columns": max(window.last_column - window.first_column, 1),
                 "replies": report.replies is not None},
        "flow": report.source.flow.name if report.source.flow is not None else None,
        "comparison": report.comparison.to_json(),
        "findings": [f.to_json() for f in report.findings],
        "replies": report.replies.to_json() if report.replies is not None else None,
    }


def bundle_json(report: Report) -> str:
    return json.dumps(report_bundle(report), ensure_ascii=False, indent=1)


def read_report(data: Any, name: str = "report") -> Conversation:
    """A report bundle's conversation, with ``meta["report"]`` holding its configs, facts and view
    (and ``meta["facts"]`` its marked facts). Raises :class:`ReportError` naming the bad field."""
    try:
        return _read_report(data)
    except _Bad as e:
        raise ReportError(f"{name}: {e}") from None


def _read_report(data: Any) -> Conversation:
    _need(isinstance(data, Mapping), "report", "must be a JSON object")
    _need(data.get("format") == FORMAT, "format", f"must be {FORMAT!r}")
    _need(data.get("version") == FORMAT_VERSION, "version",
          f"{data.get('version')!r} is not supported (this MemLens reads version {FORMAT_VERSION})")
    conv = _conversation(data.get("conversation"), "conversation")
    configs = data.get("configs")
    _need(isinstance(configs, list), "configs", "must be a list of memory configs")
    for i, c in enumerate(configs):
        try:
            NamedConfig.from_dict(c)
        except MemLensError as e:
            raise _Bad(f"configs[{i}]", f"configs[{i}]: {e}") from None
        except TypeError as e:
            raise _Bad(f"configs[{i}]", f"configs[{i}]: {e}") from None
    facts = data.get("facts") or {"mode": "detected", "marks": []}
    _need(isinstance(facts, Mapping) and facts.get("mode", "detected") in FACT_MODES, "facts.mode",
          f"must be one of {', '.join(FACT_MODES)}")
    marks = facts.get("marks") or []
    _need(isinstance(marks, list), "facts.marks", "must be a list")
    for i, m in enumerate(marks):
        at = f"facts.marks[{i}]"
        _need(isinstance(m, Mapping) and isinstance(m.get("label"), str) and m["label"], at, "needs a 'label'")
        msg = m.get("message")
        _need(isinstance(msg, list) and len(msg) == 2 and all(isinstance(x, int) for x in msg)
              and 0 <= msg[0] < len(conv.turns) and 0 <= msg[1] < len(conv.turns[msg[0]].messages),
              f"{at}.message", "must be [turn position, message index] of a message in the conversation")
    view = data.get("view") or {}
    _need(isinstance(view, Mapping), "view", "must be an object")
    conv.meta["report"] = {"title": str(data.get("title") or ""), "configs": list(configs),
                           "facts": {"mode": facts.get("mode", "detected"), "marks": list(marks)},
                           "view": dict(view)}
    if facts.get("mode") == "marked":
        conv.meta["facts"] = [{"ref": conv.turns[m["message"][0]].messages[m["message"][1]].ref, "label": m["label"]}
                              for m in marks]
    return conv


def read_report_records(records: Any, ctx: Any) -> Iterable[Conversation]:
    """The importer's reader for report bundles (registered in :mod:`core.readers`)."""
    from .readers import RecordError

    def parse(value: Any, index: int | None) -> Conversation:
        try:
            return _read_report(value)
        except _Bad as e:
            raise RecordError(str(e), e.field) from None

    return ctx.each(records, parse)


# -- HTML ---------------------------------------------------------------------------------------------

_CSS = """
body{font:14px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;color:#111827;margin:0;background:#fff}
main{max-width:1200px;margin:0 auto;padding:1.5rem}
h1{font-size:1.6rem;margin:.2rem 0}h2{font-size:1.2rem;margin-top:2rem;border-bottom:1px solid #e5e7eb}
h3{font-size:1rem;margin:.6rem 0 .2rem}
nav a{margin-right:1rem}
table{border-collapse:collapse;margin:.5rem 0}td,th{border:1px solid #e5e7eb;padding:.2rem .45rem;
vertical-align:top;text-align:left}th{background:#f9fafb}
.meta{color:#6b7280}.warning{color:#92400e}.info{color:#1f2937}
.findings li{margin:.3rem 0}.finding-kind{font-weight:600}
.legend span{display:inline-block;margin:0 .6rem .3rem 0;font-size:.8rem}
.legend i{display:inline-block;width:.8rem;height:.8rem;margin-right:.25rem;vertical-align:-.1rem;border-radius:2px}
.heatmaps{display:flex;flex-wrap:wrap;gap:1rem}.heatmaps figure{margin:0}
figcaption{font-weight:600;margin-bottom:.2rem}
.turn{border-left:3px solid #e5e7eb;padding:.2rem .8rem;margin:.6rem 0}.turn:target{border-color:#2563eb;
background:#eff6ff}
.msg{margin:.25rem 0}.role{font-size:.75rem;font-weight:600;text-transform:uppercase;color:#6b7280;margin-right:.4rem}
.turn p{margin:.25rem 0;white-space:pre-wrap;overflow-wrap:anywhere}.turn p>b{font-size:.75rem;
text-transform:uppercase;color:#6b7280;margin-right:.4rem}
.text{white-space:pre-wrap;overflow-wrap:anywhere}
.kept{color:#047857}.dropped{color:#b91c1c}
details{margin:.3rem 0}summary{cursor:pointer}
svg text{font:11px system-ui,sans-serif;fill:#374151}
"""


def _e(value: Any) -> str:
    return escape(str(value), quote=True)


def _t(value: Any) -> str:
    """Element text (never an attribute): quotes need no escaping there."""
    return escape(str(value), quote=False)


def _run_title(matrix: RetentionMatrix, rows: tuple[int, int], start: int, end: int, why: str) -> str:
    """The hover of a block of cells with one reason: a single cell names its message; a block
    names its turns, how many messages it spans and their tokens, and the reason once."""
    first_row, last_row = matrix.rows[rows[0]], matrix.rows[rows[1]]
    turn = f"turn {first_row}: " if first_row == last_row else f"turns {first_row}–{last_row}: "
    if end - start == 1:
        return f"{turn}{matrix.message(start)} — {why}"
    first, last = matrix.columns[start], matrix.columns[end - 1]
    return f"{turn}{end - start} messages of turns {first.turn}–{last.turn}, {sum(matrix.tokens[start:end]):,} tokens — {why}"


def _blocks(matrix: RetentionMatrix) -> list[tuple[int, int, int, int, str, str]]:
    """The matrix as rectangles of one reason and one explanation: ``(first_row, last_row,
    first_column, end_column, reason, why)``. Neighbouring cells of a row with the same reason
    are one run, and the same run in consecutive rows is one block (a tool message left out by
    granularity is one tall block, not a cell per turn)."""
    done: list[tuple[int, int, int, int, str, str]] = []
    open_: dict[tuple[int, int, str, str], int] = {}
    for r, cells in enumerate(matrix.cells):
        here: list[tuple[int, int, str, str]] = []
        c = 0
        while c < len(cells):
            reason, end = cells[c], c + 1
            while end < len(cells) and cells[end] == reason:
                end += 1
            if reason is not None:
                here.append((c, end, reason, matrix.why(r, c)))
            c = end
        current = set(here)
        for key in [k for k in open_ if k not in current]:
            done.append((open_.pop(key), r - 1, *key))
        for key in here:
            open_.setdefault(key, r)
    done += [(first, len(matrix.cells) - 1, *key) for key, first in open_.items()]
    return sorted(done)


def heatmap_svg(matrix: RetentionMatrix, *, cell: int = 10, selected_turn: int | None = None) -> str:
    """One config's retention heatmap as inline SVG: rows = turns, columns = earlier messages,
    a cell's colour is its reason.

    Size grows with what changes, not with rows × columns: cells with one reason and one
    explanation form one ``<rect>`` (``data-row``/``data-rows`` and ``data-column``/``data-span``
    give the cells it covers) whose ``<title>`` gives the reason once, and each message is named
    once, by the ``<title>`` of its mark in the strip above the grid (turn, role, tokens, first words)."""
    rows, cols = len(matrix.rows), len(matrix.columns)
    cw = max(3, min(cell + 6, 720 // max(cols, 1)))
    ch = cell if rows > 30 else cell + 4
    strip = 6
    left, top = 56, 4 + strip + 2
    width, height = max(left + cols * cw + 4, 300), top + rows * ch + 22
    out = [f'<svg class="heatmap" width="{width}" height="{height}" '
           f'viewBox="0 0 {width} {height}" role="img" aria-label="{_e("retention heatmap: " + matrix.label)}">']
    out.append('<g class="messages">' + "".join(
        f'<rect class="message" x="{left + c * cw}" y="4" width="{cw}" height="{strip}" '
        f'fill="{"#9ca3af" if col.role == "user" else "#d1d5db"}"><title>{_e(matrix.message(c))}</title></rect>'
        for c, col in enumerate(matrix.columns)) + "</g>")
    step = max(1, rows // 20)
    for r, turn in enumerate(matrix.rows):
        if r % step == 0 or turn == selected_turn:
            out.append(f'<text x="{left - 4}" y="{top + r * ch + ch - 2}" text-anchor="end">turn {turn}</text>')
    for first, last, c, end, reason, why in _blocks(matrix):
        out.append(f'<rect data-reason="{reason}" data-row="{first}" data-rows="{last - first + 1}" data-column="{c}" '
                   f'data-span="{end - c}" x="{left + c * cw}" y="{top + first * ch}" width="{(end - c) * cw}" '
                   f'height="{(last - first + 1) * ch}" fill="{REASON_COLOURS.get(reason, "#000000")}">'
                   f'<title>{_e(_run_title(matrix, (first, last), c, end, why))}</title></rect>')
    if selected_turn in matrix.rows:
        y = top + matrix.rows.index(selected_turn) * ch
        out.append(f'<rect x="{left}" y="{y}" width="{cols * cw}" height="{ch}" fill="none" stroke="#111827" '
                   f'stroke-width="1.5"/>')
    out.append(f'<text x="{left}" y="{height - 6}">earlier messages, oldest → newest '
               f'({_e(cols)} shown; hover the strip above for a message)</text>')
    out.append("</svg>")
    return "".join(out)


def line_chart_svg(title: str, x: Sequence[int], series: Sequence[tuple[str, Sequence[float | None], str, bool]],
                   *, width: int = 560, height: int = 200) -> str:
    """A small line chart as inline SVG: ``series`` are (label, values, colour, dashed); ``None``
    values break the line."""
    left, right, top, bottom = 48, 12, 20, 28
    values = [v for _, vs, _, _ in series for v in vs if v is not None]
    ymax = max(values) if values else 1
    ymax = ymax if ymax > 0 else 1
    xmin, xmax = (min(x), max(x)) if x else (0, 1)
    span = (xmax - xmin) or 1
    pw, ph = width - left - right, height - top - bottom

    def px(v: float) -> float:
        return left + (v - xmin) / span * pw

    def py(v: float) -> float:
        return top + ph - v / ymax * ph

    out = [f'<svg class="chart" width="{width}" height="{height}" '
           f'viewBox="0 0 {width} {height}" role="img" aria-label="{_e(title)}">',
           f'<text x="{left}" y="13" font-weight="600">{_e(title)}</text>',
           f'<line x1="{left}" y1="{top + ph}" x2="{left + pw}" y2="{top + ph}" stroke="#9ca3af"/>',
           f'<line x1="{left}" y1="{top}" x2="{left}" y2="{top + ph}" stroke="#9ca3af"/>',
           f'<text x="{left - 4}" y="{top + 8}" text-anchor="end">{_e(f"{ymax:,.0f}")}</text>',
           f'<text x="{left - 4}" y="{top + ph}" text-anchor="end">0</text>',
           f'<text x="{left}" y="{height - 8}">turn {_e(xmin)}</text>',
           f'<text x="{left + pw}" y="{height - 8}" text-anchor="end">turn {_e(xmax)}</text>']
    for label, vs, colour, dashed in series:
        segment: list[str] = []
        segments = []
        for t, v in zip(x, vs):
            if v is None:
                if segment:
                    segments.append(segment)
                segment = []
            else:
                segment.append((round(px(t), 1), round(py(v), 1)))
        if segment:
            segments.append(segment)
        segments = [[f"{a:g},{b:g}" for a, b in _thin(seg)] for seg in segments]
        dash = ' stroke-dasharray="5 3"' if dashed else ""
        for seg in segments:
            if len(seg) == 1:
                cx, cy = seg[0].split(",")
                out.append(f'<circle cx="{cx}" cy="{cy}" r="2" fill="{colour}"><title>{_e(label)}</title></circle>')
            else:
                out.append(f'<polyline fill="none" stroke="{colour}" stroke-width="1.6"{dash} '
                           f'points="{" ".join(seg)}"><title>{_e(label)}</title></polyline>')
    out.append("</svg>")
    return "".join(out)


def _thin(points: Sequence[tuple[float, float]]) -> list[tuple[float, float]]:
    """The points of a line that can be seen: within one pixel column only the first, lowest,
    highest and last (the line's envelope there), and no middle point of a flat stretch. A
    2,000-turn series draws the same line from a few hundred points."""
    columns: list[list[tuple[float, float]]] = []
    for point in points:
        if columns and round(columns[-1][0][0]) == round(point[0]):
            columns[-1].append(point)
        else:
            columns.append([point])
    kept: list[tuple[float, float]] = []
    for col in columns:
        low, high = min(col, key=lambda q: q[1]), max(col, key=lambda q: q[1])
        for q in dict.fromkeys([col[0], *sorted({low, high}, key=col.index), col[-1]]):
            kept.append(q)
    out: list[tuple[float, float]] = []
    for i, q in enumerate(kept):
        if 0 < i < len(kept) - 1 and kept[i - 1][1] == q[1] == kept[i + 1][1]:
            continue
        out.append(q)
    return out


def _legend(reasons: Iterable[str]) -> str:
    shown = [r for r in REASON_ORDER if r in set(reasons)]
    return '<div class="legend">' + "".join(
        f'<span><i style="background:{REASON_COLOURS[r]}"></i>{_e(REASON_LABELS.get(r, r))}</span>'
        for r in shown) + "</div>"


def _config_table(configs: Sequence[NamedConfig]) -> str:
    keys = ["strategy", "window", "fidelity", "model", "context_size", "max_tokens", "granularity", "scope"]
    extra = sorted({k for c in configs for k, v in c.config.to_dict().items()
                    if k not in keys and v != MemoryConfig().to_dict()[k]})
    head = "".join(f"<th>{_e(k)}</th>" for k in ["config"] + keys + extra)
    rows = []
    for i, c in enumerate(configs):
        d = c.config.to_dict()
        cells = "".join(f"<td>{_e('—' if d.get(k) is None else d.get(k))}</td>" for k in keys + extra)
        rows.append(f'<tr><td><span style="color:{CONFIG_COLOURS[i % 6]}">■</span> {_e(c.label)}</td>{cells}</tr>')
    return f"<table><tr>{head}</tr>{''.join(rows)}</table>"


def _findings_html(findings: Sequence[Finding]) -> str:
    if not findings:
        return "<p>No findings: nothing surprising in how these configs remember this conversation.</p>"
    items = []
    for f in findings:
        link = f' <a href="#turn-{_e(f.turn)}">turn {_e(f.turn)}</a>' if f.turn is not None else ""
        detail = f'<br><span class="meta">{_e(f.detail)}</span>' if f.detail else ""
        items.append(f'<li class="{_e(f.severity)}" data-kind="{_e(f.kind)}"><span class="finding-kind">'
                     f'{_e(f.title)}</span> · {_e(f.subject)}{link}<br>{_e(f.text)}{detail}</li>')
    return f'<ol class="findings">{"".join(items)}</ol>'


def _facts_html(comparison: Comparison) -> str:
    if not comparison.facts:
        return "<p>No facts followed.</p>"
    sentences = "".join(f"<li>{_e(s)}</li>" for s in comparison.sentences)
    head = "<th>fact</th><th>stated</th>" + "".join(f"<th>{_e(c.label)}</th>" for c in comparison.configs)
    rows = []
    for fact, fates in zip(comparison.facts, comparison.fates):
        cells = []
        for fate in fates:
            if fate.lost_turn is None:
                cells.append('<td class="kept">kept</td>')
            else:
                why = REASON_LABELS.get(fate.lost_reason or "", fate.lost_reason or "")
                cells.append(f'<td class="dropped">lost at <a href="#turn-{fate.lost_turn}">{_e(fate.lost_label)}</a>'
                             f'{" (" + _e(why) + ")" if why else ""}</td>')
        stated = fates[0].stated_label if fates else ""
        rows.append(f"<tr><td>{_e(fact.label)}</td><td>{_e(stated)}</td>{''.join(cells)}</tr>")
    return f"<ul>{sentences}</ul><table><tr>{head}</tr>{''.join(rows)}</table>"


def _replies_html(grid: ReplyGrid) -> str:
    differ = set(grid.differing())
    head = "<th>turn</th><th>query</th>" + "".join(f"<th>{_e(label)}</th>" for label in grid.labels)
    rows = []
    for r, (turn, query, replies) in enumerate(zip(grid.turns, grid.queries, grid.replies)):
        mark = ' class="differ"' if r in differ else ""
        cells = "".join(f'<td class="text">{_e(x)}</td>' for x in replies)
        rows.append(f'<tr{mark}><td><a href="#turn-{turn}">{turn}</a>{" ≠" if r in differ else ""}</td>'
                    f'<td class="text">{_e(query)}</td>{cells}</tr>')
    note = f"<p class=\"meta\">{len(differ)} of {len(grid.turns)} rows differ (marked ≠). Models: " \
           f"{_e(', '.join(sorted(set(grid.models))))}.</p>"
    if grid.skipped:
        note += f'<p class="meta">The first {grid.skipped} turns were not re-asked.</p>'
    return note + f"<table><tr>{head}</tr>{''.join(rows)}</table>"


def _message_html(m: Message) -> str:
    text = m.content
    if m.tool_calls:
        calls = "; ".join(f"→ {c.name}({c.arguments})" for c in m.tool_calls)
        text = f"{text}\n{calls}" if text else calls
    kind = f" · {m.kind}" if m.kind and m.kind not in ("query", "answer") else ""
    # Terse markup: a long conversation's transcript is most of a report's size.
    return f'<p><b>{_e(m.role)}{_e(kind)}</b>{_t(text) if text else "<i>(empty)</i>"}</p>' 


def _transcript_html(conv: Conversation) -> str:
    numbers = turn_numbers(conv)
    tree = conv.tree
    out = []
    if conv.system_prompt:
        out.append(f'<div class="turn"><h3>System prompt</h3><div class="text">{_e(conv.system_prompt)}</div></div>')
    for p, t in enumerate(conv.turns):
        parent = tree.parent[p]
        note = ""
        if p and parent is not None and parent != p - 1:
            note = (f' <span class="meta">(continues <a href="#turn-{numbers[parent]}">'
                    f'{_e(turn_label(conv, parent))}</a>)</span>')
        elif p and parent is None and t.parent_id is not None:
            note = ' <span class="meta">(starts a new thread)</span>'
        messages = "".join(_message_html(m) for m in t.messages)
        # The anchor is the turn's address (creation order); the heading is its place on its thread.
        out.append(f'<article class="turn" id="turn-{numbers[p]}"><h3>{_e(turn_label(conv, p).capitalize())}{note}'
                   f'</h3>{messages}</article>')
    return "".join(out)


def _ledger_turns(report: Report) -> list[int]:
    numbers = turn_numbers(report.conversation)
    answered = [numbers[p] for p in report.conversation.answered_turns()]
    if len(answered) <= LEDGER_TURNS:
        return answered
    have = set(answered)
    wanted = [answered[-1]] + ([report.selected_turn] if report.selected_turn in have else [])
    for f in report.findings:
        if len(set(wanted)) >= LEDGER_TURNS_LONG:
            break
        if f.turn in have:
            wanted.append(f.turn)
    return sorted(set(wanted))


def _ledgers_html(report: Report, columns: int = REPORT_COLUMNS) -> str:
    conv = report.conversation
    turns = _ledger_turns(report)
    out = []
    for i, c in enumerate(report.configs):
        replay = Replay(conv, c.config)
        parts = []
        for turn in turns:
            ledger = replay.ledger(turn)
            entries = ledger.entries
            hidden = entries[:-columns] if len(entries) > columns else []
            shown = entries[len(hidden):]
            rows = [_ledger_rows(run, conv, ledger.config, len(shown) > LEDGER_LIST) for run in _reason_runs(shown)]
            more = ""
            if hidden:
                kept = sum(1 for e in hidden if e.kept)
                more = f'<p class="meta">{len(hidden):,} earlier messages not listed ({kept:,} of them kept).</p>'
            table = ("<table><tr><th>turn</th><th>role</th><th>tokens</th><th>reason</th><th>why</th>"
                     f"<th>message</th></tr>{''.join(rows)}</table>") if rows else \
                "<p>First turn: no earlier message.</p>"
            budget = f"{ledger.budget:,}" if ledger.budget is not None else "none"
            parts.append(f'<details><summary>Turn {turn}: {len(ledger.kept)} kept, {len(ledger.dropped)} dropped, '
                         f'{ledger.history_tokens:,} history tokens (budget {budget})</summary>{more}{table}</details>')
        out.append(f'<details class="ledger" data-config="{_e(c.label)}"><summary><b>{_e(c.label)}</b></summary>'
                   f'{"".join(parts)}</details>')
    return "".join(out)


LEDGER_RUN = 3  # this many or more neighbouring messages with one reason are listed as one row…
LEDGER_LIST = 40  # …kept ones only in a ledger longer than this (a short one lists everything sent)


def _reason_runs(entries: Sequence[Any]) -> list[list[Any]]:
    """Neighbouring entries grouped by reason."""
    runs: list[list[Any]] = []
    for e in entries:
        if runs and runs[-1][-1].reason == e.reason:
            runs[-1].append(e)
        else:
            runs.append([e])
    return runs


def _ledger_rows(run: Sequence[Any], conv: Conversation, config: Mapping[str, Any], long: bool) -> str:
    """One row per entry; a run of dropped ones (of kept ones too in a ledger of over
    ``LEDGER_LIST`` rows) as one row that links to the transcript."""
    first = run[0]
    cls = "kept" if first.kept else "dropped"
    label, why = _e(REASON_LABELS.get(first.reason, first.reason)), _e(explain(first, config))
    if len(run) >= LEDGER_RUN and (not first.kept or long):
        last = run[-1]
        return (f'<tr><td><a href="#turn-{first.turn}">{first.turn}</a>–<a href="#turn-{last.turn}">{last.turn}</a>'
                f'</td><td>{len(run):,} messages</td><td>{sum(e.tokens for e in run):,}</td><td class="{cls}">{label}'
                f'</td><td>{why}</td><td class="meta">in the transcript</td></tr>')
    return "".join(f'<tr><td><a href="#turn-{e.turn}">{e.turn}</a></td><td>{_e(e.role)}</td><td>{e.tokens:,}</td>'
                   f'<td class="{cls}">{label}</td><td>{why}</td>'
                   f'<td class="text">{_e(_short(conv.turns[e.position].messages[e.index], 80))}</td></tr>'
                   for e in run)


def _short(m: Message, width: int = 160) -> str:
    text = " ".join(m.content.split())
    if m.tool_calls:
        text = (text + " " if text else "") + " ".join(f"→ {c.name}({c.arguments})" for c in m.tool_calls)
    return text if len(text) <= width else text[: width - 1] + "…"


def _series_html(comparison: Comparison) -> str:
    series = comparison.series
    x = comparison.turns
    colours = [CONFIG_COLOURS[i % 6] for i in range(len(series))]
    kept = line_chart_svg("Messages kept", x, [(s.label, s.kept, colours[i], False) for i, s in enumerate(series)])
    tokens_lines = []
    top = max((t for s in series for t in s.history_tokens), default=0)
    off_chart = []
    for i, s in enumerate(series):
        tokens_lines.append((s.label, s.history_tokens, colours[i], False))
        budgets = [b for b in s.budget if b is not None]
        if budgets and max(budgets) <= 3 * max(top, 1):
            tokens_lines.append((f"{s.label} budget", s.budget, colours[i], True))
        elif budgets:
            off_chart.append(f"{s.label}: {min(budgets):,}" + (f"–{max(budgets):,}" if max(budgets) != min(budgets)
                                                               else ""))
    tokens = line_chart_svg("History tokens (dashed: budget)", x, tokens_lines)
    if off_chart:
        tokens += f'<p class="meta">Budgets far above the history (not drawn): {_e("; ".join(off_chart))}.</p>'

    oldest = line_chart_svg("Oldest turn remembered", x, [(s.label, s.oldest_kept_turn, colours[i], False)
                                                         for i, s in enumerate(series)])
    legend = '<div class="legend">' + "".join(f'<span><i style="background:{colours[i]}"></i>{_e(s.label)}</span>'
                                              for i, s in enumerate(series)) + "</div>"
    return legend + kept + tokens + oldest


def report_html(report: Report) -> str:
    """The report as one self-contained HTML document (see the module docstring)."""
    conv = report.conversation
    comparison = report.comparison
    window = comparison.window
    when = datetime.fromtimestamp(report.created_at, tz=timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    answered = len(conv.answered_turns())
    reasons = {x for m in comparison.matrices for row in m.cells for x in row if x is not None}
    scope = "the whole conversation" if window.whole else (
        f"turns {comparison.matrices[0].rows[0]}–{comparison.matrices[0].rows[-1]} × the latest "
        f"{window.last_column - window.first_column} messages before them" if comparison.matrices and window.rows
        else "no turns")
    heatmaps = "".join(
        f'<figure data-config="{_e(m.label)}"><figcaption>{_e(m.label)}</figcaption>'
        f'{heatmap_svg(m, selected_turn=report.selected_turn)}</figure>' for m in comparison.matrices)
    flow_note = f" · flow {_e(report.source.flow.name)}" if report.source.flow is not None else ""
    sections = [
        ("configs", "Configs compared", _config_table(report.configs)),
        ("findings", "Findings", _findings_html(report.findings)),
        ("heatmaps", "Retention heatmaps",
         f'<p class="meta">Rows are turns, columns the messages written before them; hover a cell for the '
         f'message, its tokens and the reason. Showing {_e(scope)}.</p>{_legend(reasons)}'
         f'<div class="heatmaps">{heatmaps}</div>'),
        ("series", "Turn by turn", _series_html(comparison)),
        ("facts", "Facts", _facts_html(comparison)),
    ]
    if report.replies is not None:
        sections.append(("replies", "Replies under each config", _replies_html(report.replies)))
    sections += [("ledgers", "Ledgers", _ledgers_html(report)),
                 ("transcript", "Transcript", _transcript_html(conv))]
    nav = "".join(f'<a href="#{key}">{_e(title)}</a>' for key, title, _ in sections)
    body = "".join(f'<section id="{key}"><h2>{_e(title)}</h2>{html}</section>' for key, title, html in sections)
    return ("<!DOCTYPE html>\n"
            '<html lang="en"><head><meta charset="utf-8">'
            '<meta name="viewport" content="width=device-width, initial-scale=1">'
            f"<title>{_e('MemLens report — ' + report.title)}</title><style>{_CSS}</style></head>"
            f"<body><main><header><h1>{_e('MemLens report — ' + report.title)}</h1>"
            f'<p class="meta">Conversation {_e(conv.name or conv.id)}{flow_note} · {len(conv.turns)} turns '
            f"({answered} answered) · {len(report.configs)} memory configs · generated {_e(when)} · "
            f"opens without a server or network</p></header><nav>{nav}</nav>{body}"
            '<footer class="meta"><p>Made with MemLens. The JSON bundle of this report loads back into the '
            "compare page (Import).</p></footer></main></body></html>\n")


# -- what one memory holds at one turn (the presentation) -----------------------------------------------

@dataclass(frozen=True)
class Remembered:
    """What one node's (or config's) memory holds at a turn, in a sentence's worth of numbers:
    the turns it still has a message of, the earlier turns of the thread it has none of, and
    what a summary stands for."""

    kept: int
    history_tokens: int
    budget: int | None
    kept_turns: tuple[int, ...]
    forgotten_turns: tuple[int, ...]
    summarized_turns: tuple[int, ...] = ()
    off: bool = False

    def sentence(self) -> str:
        from .ledger import turn_ranges

        if self.off:
            return "memory off: remembers nothing from earlier turns"
        if not self.kept_turns and not self.summarized_turns and not self.forgotten_turns:
            return "first turn: nothing earlier to remember"
        parts = []
        if self.kept_turns:
            budget = f" of a {self.budget:,} budget" if self.budget is not None else ""
            parts.append(f"remembers {turn_ranges(self.kept_turns)} ({self.kept} messages, "
                         f"{self.history_tokens:,} tokens{budget})")
        else:
            parts.append("remembers no earlier message")
        if self.summarized_turns:
            parts.append(f"has a summary of {turn_ranges(self.summarized_turns)}")
        if self.forgotten_turns:
            parts.append(f"forgot {turn_ranges(self.forgotten_turns)}")
        return "; ".join(parts)


def remembered(ledger: Any) -> Remembered:
    """A ledger as a :class:`Remembered`."""
    entries = ledger.entries
    if entries and all(e.reason == MEMORY_OFF for e in entries):
        return Remembered(0, 0, ledger.budget, (), (), (), True)
    kept = sorted({e.turn for e in entries if e.kept})
    summarized = sorted({t for s in ledger.synthetic for t in s.covers})
    on_thread = {e.turn for e in entries if e.reason not in (OTHER_BRANCH, SCOPE, MEMORY_OFF)}
    forgotten = sorted(on_thread - set(kept) - set(summarized))
    return Remembered(sum(1 for e in entries if e.kept), ledger.history_tokens, ledger.budget, tuple(kept),
                      tuple(forgotten), tuple(summarized))


# -- storing uploads and saved configs ------------------------------------------------------------------

@dataclass
class ImportOutcome:
    """What an upload stored: the conversation ids, the import's problems and summary."""

    ids: list[str]
    summary: str
    problems: list = field(default_factory=list)
    format: str = ""
    saved_configs: str | None = None


def import_upload(db: Any, data: bytes, name: str, *, fmt: str | None = None, skip_bad: bool = False,
                  on_progress: Callable[[int, int], None] | None = None, user_id: str = "user") -> ImportOutcome:
    """Store an uploaded file all-or-nothing: a MemLens conversation export as it was, a
    transcript (any format) as conversations without a flow, a report bundle as its conversation
    with its configs saved as a config set. On any error nothing is stored."""
    from .readers import FormatError, import_bytes
    from .bundle import is_bundle, looks_like_bundle, parse_bundle
    from .sessions import import_conversation, store_conversations

    head = data[:4096].decode("utf-8", "ignore")
    if fmt is None and looks_like_bundle(head):
        bundle = parse_bundle(data, name)
        if is_bundle(bundle):
            if on_progress:
                on_progress(len(data), len(data))
            conv_id = import_conversation(db, bundle)
            return ImportOutcome([conv_id], f"1 conversation from {name} (MemLens export)", [], "memlens-conversation")
    result = import_bytes(data, name, fmt, skip_bad=skip_bad, on_progress=on_progress)
    if not result.conversations:
        raise FormatError(f"{name}: nothing to import — every record was bad ({result.summary()})", result.problems)
    saved = None
    reports = [c for c in result.conversations if isinstance(c.meta.get("report"), Mapping)]
    ids = store_conversations(db, result.conversations, user_id=user_id)
    if reports:
        configs = [NamedConfig.from_dict(c) for c in reports[0].meta["report"].get("configs") or []]
        if configs:
            saved = f"from {name}"
            save_config_set(db, saved, configs)
    return ImportOutcome(ids, result.summary(), list(result.problems), result.format, saved)


def saved_config_sets(db: Any) -> dict[str, list[NamedConfig]]:
    """The compare page's saved config sets, by name (sets no longer valid are left out)."""
    from .store import repo

    raw = repo.get_setting(db, CONFIG_SETS_KEY, {}) or {}
    out: dict[str, list[NamedConfig]] = {}
    if not isinstance(raw, Mapping):
        return out
    for name, items in raw.items():
        try:
            out[str(name)] = named_configs(items)
        except (MemLensError, TypeError):
            continue
    return out


def save_config_set(db: Any, name: str, configs: Iterable[Any]) -> None:
    """Save (or replace) a named set of 2–6 configs, validated first."""
    from .compare import MAX_CONFIGS, MIN_CONFIGS
    from .store import repo

    name = (name or "").strip()
    if not name:
        raise ReportError("a saved config set needs a name")
    named = named_configs(configs)
    if not MIN_CONFIGS <= len(named) <= MAX_CONFIGS:
        raise ReportError(f"a config set holds {MIN_CONFIGS} to {MAX_CONFIGS} configs; got {len(named)}")
    raw = repo.get_setting(db, CONFIG_SETS_KEY, {}) or {}
    raw = dict(raw) if isinstance(raw, Mapping) else {}
    raw[name] = [c.to_dict() for c in named]
    repo.set_setting(db, CONFIG_SETS_KEY, raw)


def delete_config_set(db: Any, name: str) -> None:
    from .store import repo

    raw = repo.get_setting(db, CONFIG_SETS_KEY, {}) or {}
    if isinstance(raw, Mapping) and name in raw:
        raw = {k: v for k, v in raw.items() if k != name}
        repo.set_setting(db, CONFIG_SETS_KEY, raw)


#: The configs the compare page and ``python -m core report`` start from.
DEFAULT_CONFIGS = (NamedConfig("dify window 3", MemoryConfig(window=3)),
                   NamedConfig("dify window 10", MemoryConfig(window=10)),
                   NamedConfig("window 6 msgs", MemoryConfig(strategy="window", window=6)))


__all__ = ["FORMAT", "FORMAT_VERSION", "CONFIG_SETS_KEY", "REASON_COLOURS", "REASON_ORDER", "CONFIG_COLOURS",
           "FACT_MODES", "DEFAULT_CONFIGS", "ReportError", "Source", "Report", "ImportOutcome", "Remembered", "remembered", "source_of",
           "load_stored", "records_from_rows", "source_from_export", "read_sources", "read_source_file", "build_report", "report_bundle",
           "bundle_json", "read_report", "read_report_records", "report_html", "heatmap_svg", "line_chart_svg",
           "conversation_to_json", "conversation_from_json", "message_to_json", "import_upload", "saved_config_sets",
           "save_config_set", "delete_config_set"]
