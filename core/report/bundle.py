"""The report bundle: a report as JSON (``format: memlens-report``) and back.

The bundle holds the conversation itself (losslessly, :func:`conversation_to_json`), the configs,
the facts followed and the view (selected turn, heatmap window), plus the computed results for
readers that do not recompute. Reading it back (:func:`read_report`, or any importer: the format is
registered in :mod:`core.io.readers` through :func:`parse_report`) gives the conversation with the
configs and facts in ``Conversation.meta["report"]``; :func:`core.analysis.source.source_of` turns that into
the same view.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any, Mapping

from core.analysis.compare.configs import NamedConfig
from core.errors import MemLensError
from core.limits import nulled_non_finite
from core.memory.replay import turn_numbers
from core.model.conversation import ROLES, Conversation, Message, Turn

from .errors import BundleFieldError, ReportError

if TYPE_CHECKING:  # pragma: no cover
    from .build import Report

FORMAT = "memlens-report"
FORMAT_VERSION = 1
FACT_MODES = ("detected", "marked", "none")


def conversation_to_json(conv: Conversation) -> dict:
    """A conversation as JSON, losslessly (every turn with its messages, indices and status)."""
    return {
        "id": conv.id,
        "name": conv.name,
        "system_prompt": conv.system_prompt,
        "source_format": conv.source_format,
        "turns": [
            {
                "id": t.id,
                "parent_id": t.parent_id,
                "query_index": t.query_index,
                "answer_index": t.answer_index,
                "status": t.status,
                "error": t.error,
                "created_at": t.created_at,
                "answer_tokens": t.answer_tokens,
                "messages": [m.to_dict() for m in t.messages],
            }
            for t in conv.turns
        ],
    }


def _need(cond: bool, where: str, message: str) -> None:
    if not cond:
        raise BundleFieldError(where, f"{where}: {message}")


def _message_from_json(d: Any, where: str) -> Message:
    _need(isinstance(d, Mapping), where, "must be an object")
    _need(d.get("role") in ROLES, f"{where}.role", f"must be one of {', '.join(ROLES)}")
    _need(isinstance(d.get("content", ""), str), f"{where}.content", "must be text")
    _need(isinstance(d.get("kind", ""), str), f"{where}.kind", "must be text")
    _need(
        isinstance(d.get("ref", ""), (int, str)) and not isinstance(d.get("ref"), bool),
        f"{where}.ref",
        "must be a number or text",
    )
    for k, c in enumerate(d.get("tool_calls") or []):
        _need(
            isinstance(c, Mapping) and all(isinstance(c.get(x), str) for x in ("id", "name", "arguments")),
            f"{where}.tool_calls[{k}]",
            "needs text 'id', 'name' and 'arguments'",
        )
    for k, f in enumerate(d.get("files") or []):
        _need(isinstance(f, Mapping), f"{where}.files[{k}]", "must be an object")
    usage = d.get("usage")
    _need(
        usage is None
        or (
            isinstance(usage, list)
            and len(usage) == 2
            and all(isinstance(x, int) and not isinstance(x, bool) and 0 <= x < 10**9 for x in usage)
        ),
        f"{where}.usage",
        "must be [input tokens, output tokens], two whole numbers",
    )
    return Message.from_dict(d)


def conversation_from_json(d: Any, where: str = "conversation") -> Conversation:
    """The inverse of :func:`conversation_to_json`; a malformed document raises
    :class:`ReportError` naming the field."""
    try:
        return _conversation(d, where)
    except BundleFieldError as e:
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
        _need(
            t.get("parent_id") is None or isinstance(t.get("parent_id"), str), f"{at}.parent_id", "must be text or null"
        )
        _need(isinstance(t.get("messages"), list), f"{at}.messages", "must be a list")
        messages = tuple(_message_from_json(m, f"{at}.messages[{j}]") for j, m in enumerate(t["messages"]))
        for key in ("query_index", "answer_index"):
            value = t.get(key)
            _need(
                value is None
                or (isinstance(value, int) and not isinstance(value, bool) and 0 <= value < len(messages)),
                f"{at}.{key}",
                f"must be null or an index into its {len(messages)} messages",
            )
        turns.append(
            Turn(
                id=t["id"],
                parent_id=t.get("parent_id"),
                messages=messages,
                query_index=t.get("query_index"),
                answer_index=t.get("answer_index"),
                status=str(t.get("status") or "normal"),
                error=t.get("error"),
                created_at=t.get("created_at"),
                answer_tokens=t.get("answer_tokens"),
            )
        )
    return Conversation(
        id=d["id"],
        turns=turns,
        system_prompt=str(d.get("system_prompt") or ""),
        source_format=str(d.get("source_format") or FORMAT),
        name=str(d.get("name") or ""),
    )


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
        "format": FORMAT,
        "version": FORMAT_VERSION,
        "title": report.title,
        "created_at": report.created_at,
        "conversation": conversation_to_json(conv),
        "configs": [c.to_dict() for c in report.configs],
        "facts": {"mode": report.facts_mode, "marks": marks},
        "view": {
            "selected_turn": report.selected_turn,
            "last_turn": numbers[window.rows[-1]] if window.rows else None,
            "rows": max(len(window.rows), 1),
            "columns": max(window.last_column - window.first_column, 1),
            "replies": report.replies is not None,
        },
        "flow": report.source.flow.name if report.source.flow is not None else None,
        "comparison": report.comparison.to_json(),
        "findings": [f.to_json() for f in report.findings],
        "replies": report.replies.to_json() if report.replies is not None else None,
    }


def bundle_json(report: Report) -> str:
    """The bundle as JSON text; a NaN or infinity held by the conversation (a stored value) is written as
    null, since JSON has no spelling for it."""
    doc = report_bundle(report)
    nulled_non_finite(doc, "bundle")
    return json.dumps(doc, ensure_ascii=False, indent=1, allow_nan=False)


def read_report(data: Any, name: str = "report") -> Conversation:
    """A report bundle's conversation, with ``meta["report"]`` holding its configs, facts and view
    (and ``meta["facts"]`` its marked facts). Raises :class:`ReportError` naming the bad field."""
    try:
        return parse_report(data)
    except BundleFieldError as e:
        raise ReportError(f"{name}: {e}") from None


def parse_report(data: Any) -> Conversation:
    """:func:`read_report` without the file name: a bad field raises :class:`BundleFieldError`."""
    _need(isinstance(data, Mapping), "report", "must be a JSON object")
    _need(data.get("format") == FORMAT, "format", f"must be {FORMAT!r}")
    _need(
        data.get("version") == FORMAT_VERSION,
        "version",
        f"{data.get('version')!r} is not supported (this MemLens reads version {FORMAT_VERSION})",
    )
    conv = _conversation(data.get("conversation"), "conversation")
    configs = data.get("configs")
    _need(isinstance(configs, list), "configs", "must be a list of memory configs")
    for i, c in enumerate(configs):
        try:
            NamedConfig.from_dict(c)
        except MemLensError as e:
            raise BundleFieldError(f"configs[{i}]", f"configs[{i}]: {e}") from None
        except TypeError as e:
            raise BundleFieldError(f"configs[{i}]", f"configs[{i}]: {e}") from None
    facts = data.get("facts") or {"mode": "detected", "marks": []}
    _need(
        isinstance(facts, Mapping) and facts.get("mode", "detected") in FACT_MODES,
        "facts.mode",
        f"must be one of {', '.join(FACT_MODES)}",
    )
    marks = facts.get("marks") or []
    _need(isinstance(marks, list), "facts.marks", "must be a list")
    for i, m in enumerate(marks):
        at = f"facts.marks[{i}]"
        _need(isinstance(m, Mapping) and isinstance(m.get("label"), str) and m["label"], at, "needs a 'label'")
        msg = m.get("message")
        _need(
            isinstance(msg, list)
            and len(msg) == 2
            and all(isinstance(x, int) for x in msg)
            and 0 <= msg[0] < len(conv.turns)
            and 0 <= msg[1] < len(conv.turns[msg[0]].messages),
            f"{at}.message",
            "must be [turn position, message index] of a message in the conversation",
        )
    view = data.get("view") or {}
    _need(isinstance(view, Mapping), "view", "must be an object")
    conv.meta["report"] = {
        "title": str(data.get("title") or ""),
        "configs": list(configs),
        "facts": {"mode": facts.get("mode", "detected"), "marks": list(marks)},
        "view": dict(view),
    }
    if facts.get("mode") == "marked":
        conv.meta["facts"] = [
            {"ref": conv.turns[m["message"][0]].messages[m["message"][1]].ref, "label": m["label"]} for m in marks
        ]
    return conv


__all__ = [
    "FORMAT",
    "FORMAT_VERSION",
    "FACT_MODES",
    "BundleFieldError",
    "conversation_to_json",
    "conversation_from_json",
    "report_bundle",
    "bundle_json",
    "read_report",
    "parse_report",
]
