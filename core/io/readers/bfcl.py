"""BFCL memory prerequisite conversations (user-only turns); recall probes, when the file has them,
are attached to the conversation that states their answer."""

from __future__ import annotations

import re
from typing import Any, Iterator

from core.io.errors import RecordError
from core.model.conversation import Conversation

from .common import conversation_from_messages, conversation_id, excerpt, label_of, read_each, record_field
from .openai import openai_messages
from .records import Problem, ReadContext, Records
from .registry import Format


def _conversation(rec: Any, n: int | None, stem: str) -> Conversation:
    question = record_field(
        rec, "question", list, "a 'question' list", "'question' must be a list of turns (each a list of messages)"
    )
    flat: list = []
    for t, group in enumerate(question):
        if isinstance(group, dict):
            group = [group]
        if not isinstance(group, list):
            raise RecordError(f"turn {t} must be a list of messages", f"turn {t}")
        flat.extend(group)
    conv_id = conversation_id(rec, n, stem, "id")
    meta = {k: v for k, v in rec.items() if k != "question" and isinstance(v, (str, int, float, bool))}
    conv = conversation_from_messages(
        openai_messages(flat), conv_id, source_format="bfcl", meta=meta, name=str(rec.get("topic") or conv_id)
    )
    if not conv.turns:
        raise RecordError("the conversation has no message", "question")
    return conv


def _normalise(text: str) -> str:
    text = re.sub(r"\s*([—–-])\s*", r"\1", text.replace("’", "'"))
    return " ".join(text.split()).casefold()


def _probe_text(question: Any) -> str:
    while isinstance(question, list) and question:
        question = question[0]
    if isinstance(question, dict):
        question = question.get("content")
    return question if isinstance(question, str) else ""


def _attach_probes(conversations: list[Conversation], probes: list, ctx: ReadContext) -> None:
    """Each probe names the sentence that answers it; attach it to the message stating it."""
    where = [
        (c, t.query_message.ref, _normalise(t.query), pos)
        for c in conversations
        for pos, t in enumerate(c.turns)
        if t.query_message is not None
    ]
    for i, probe in enumerate(probes):
        if not isinstance(probe, dict) or not isinstance(probe.get("source"), str):
            ctx.report(Problem(None, f"probe {i}", f"probe {i} has no 'source' sentence"))
            continue
        source = _normalise(probe["source"])
        hits = [w for w in where if source in w[2]]
        if not hits:
            m = re.match(r"^([^:]{1,40}):\s*(.+)$", source)
            if m:
                hits = [w for w in where if f"{m.group(1)}:" in w[2] and m.group(2) in w[2]]
        question = _probe_text(probe.get("question"))
        if not hits:
            ctx.notes.append(f"probe {probe.get('id', i)}: its source sentence is in no conversation of this file")
            continue
        conv, ref, _, pos = hits[0]
        label = excerpt(probe["source"], 60)
        conv.meta.setdefault("probes", []).append(
            {
                "id": probe.get("id"),
                "question": question,
                "ground_truth": probe.get("ground_truth"),
                "source": probe["source"],
                "ref": ref,
                "position": pos,
            }
        )
        conv.meta.setdefault("facts", []).append({"ref": ref, "label": label})


def _sniff(first: Any, layout: str) -> bool:
    if not isinstance(first, dict):
        return False
    if layout == "document" and isinstance(first.get("prereq_conversations"), list):
        return True
    q = first.get("question")
    return isinstance(q, list) and bool(q) and isinstance(q[0], list) and "messages" not in first


def _read(records: Records, ctx: ReadContext) -> Iterator[Conversation]:
    doc = records.first
    if records.layout == "document" and isinstance(doc, dict) and "prereq_conversations" in doc:
        convs = list(_read_each(records.inner(doc["prereq_conversations"]), ctx))
        probes = doc.get("probes") or []
        if not isinstance(probes, list):
            ctx.report(Problem(None, "probes", "'probes' must be a list"))
        else:
            _attach_probes(convs, probes, ctx)
        yield from convs
        return
    yield from _read_each(records, ctx)


def _label(rec: Any) -> str:
    return label_of(rec, "id")


_read_each = read_each(_conversation, _label)

FORMAT = Format("bfcl", "BFCL memory prerequisite conversations (user-only turns, recall probes)", _sniff, _read)
