"""Claude Code session transcripts: ``~/.claude/projects/<project>/<session>.jsonl``, one event a line.

The ``user`` and ``assistant`` lines hold a Messages API ``message`` and name the line before them
(``parentUuid``), so a session is a tree: a prompt edited or a session resumed from an earlier point is
a branch. A reply is written one content block a line — thinking, text, each tool call — chained, and
tool results come back as user lines of ``tool_result`` blocks (read as :mod:`.openai` reads an
Anthropic request); a turn runs from a prompt to the reply that ends it. After ``/compact`` the
session goes on from a line without a parent (the summary Claude Code writes), so what came before is
a thread of its own. Lines of other types (the title ``summary``, ``file-history-snapshot``,
``queue-operation``, ``system`` notices) are not messages and are skipped; so are a subagent's lines
(``isSidechain``), which are its own conversation with the model. One file is one conversation.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any, Iterator

from core.io.errors import RecordError
from core.model.conversation import SOURCE_MODEL, Conversation

from .common import excerpt, iso_time
from .openai import openai_messages
from .records import Problem, ReadContext, Records
from .registry import Format
from .tree import Node, check_acyclic, tree_turns

_MESSAGE_LINES = ("user", "assistant")
#: Line types that only Claude Code's own bookkeeping writes: one of them first marks a transcript too.
_OTHER_LINES = ("summary", "file-history-snapshot", "queue-operation")


def _node(rec: Any) -> Node | None:
    """The tree node of one line (None for a line that holds no message of the main conversation)."""
    if not isinstance(rec, dict):
        raise RecordError("the line is not an object", "")
    if rec.get("type") not in _MESSAGE_LINES or rec.get("isSidechain") is True:
        return None
    uid = rec.get("uuid")
    if not isinstance(uid, str) or not uid:
        raise RecordError(f"a {rec['type']} line has no 'uuid'", "uuid")
    message = rec.get("message")
    if not isinstance(message, dict) or message.get("role") not in _MESSAGE_LINES:
        raise RecordError(f"line {uid!r} has no 'message' with a user or assistant role", "message")
    parent = rec.get("parentUuid")
    if parent is not None and not isinstance(parent, str):
        raise RecordError(f"line {uid!r}: 'parentUuid' must be a line's uuid or null", "parentUuid")
    try:
        messages = openai_messages([message])
    except RecordError as e:  # "message 0: …" names the line instead
        raise RecordError(str(e).replace("message 0", f"line {uid!r}", 1), "message") from None
    messages = [replace(m, ref=_ref(uid, m.ref)) for m in messages]
    user = any(m.role == "user" for m in messages)  # a line of tool results only follows the call
    return Node(uid, parent, user, tuple(messages), iso_time(rec.get("timestamp")))


def _ref(uid: str, ref: int | str) -> str:
    """A message's ref: its line's uuid, and what the line's reading added to it (``:reasoning``, ``:result1``)."""
    rest = str(ref)[1:] if str(ref).startswith("0") else f":{ref}"
    return uid + rest


def _read(records: Records, ctx: ReadContext) -> Iterator[Conversation]:
    nodes: list[Node] = []
    first: dict[str, Any] = {}
    titles: list[str] = []
    models: list[str] = []  # each reply line's model, in order: the last one is the model the session ran on
    sidechain = 0
    before = len(ctx.problems)

    def parse(rec: Any, n: int | None) -> None:
        nonlocal sidechain
        node = _node(rec)
        if isinstance(rec.get("summary"), str) and rec.get("type") == "summary":
            titles.append(rec["summary"])
        if rec.get("isSidechain") is True and rec.get("type") in _MESSAGE_LINES:
            sidechain += 1
        for key in ("sessionId", "cwd", "version"):
            if isinstance(rec.get(key), str) and key not in first:
                first[key] = rec[key]
        message = rec.get("message")
        if (
            rec.get("type") == "assistant"
            and isinstance(message, dict)
            and isinstance(message.get("model"), str)
            and message["model"]
            and not message["model"].startswith("<")
        ):  # "<synthetic>": no model's
            models.append(message["model"])
        if node is not None:
            nodes.append(node)

    for _ in ctx.each(records, parse):
        pass
    if len(ctx.problems) > before:  # one file, one conversation: read whole or left out whole
        return
    ids = [n.id for n in nodes]
    seen: set[str] = set()
    twice = next((i for i in ids if i in seen or seen.add(i)), None)
    if twice is not None:
        ctx.report(Problem(None, "uuid", f"two lines share the uuid {excerpt(twice, 60)!r}"))
        return
    try:
        check_acyclic({n.id: n.parent for n in nodes})
    except RecordError as e:
        ctx.report(Problem(None, "parentUuid", str(e).replace("'parent' links", "'parentUuid' links")))
        return
    turns, active = tree_turns(nodes, ids[-1] if ids else None)
    if not turns:
        ctx.report(Problem(None, "type", "the transcript has no user or assistant line"))
        return
    conv_id = first.get("sessionId") or ctx.stem
    meta = {k: first[k] for k in ("cwd", "version") if k in first}
    if active:
        meta["active_turn_id"] = active
    if sidechain:
        meta["sidechain_lines_left_out"] = sidechain
    if models:
        meta[SOURCE_MODEL] = models[-1]
    query = next((t.query for t in turns if t.query_index is not None), "")
    yield Conversation(
        id=conv_id,
        turns=turns,
        source_format="claude-code",
        name=titles[-1] if titles else excerpt(query, 60) or conv_id,
        meta=meta,
    )


def _sniff(first: Any, layout: str) -> bool:
    if not isinstance(first, dict) or layout == "array":
        return False
    if first.get("type") in _MESSAGE_LINES:
        return "sessionId" in first and "parentUuid" in first and isinstance(first.get("message"), dict)
    return first.get("type") in _OTHER_LINES and ("sessionId" in first or "leafUuid" in first or "snapshot" in first)


FORMAT = Format(
    "claude-code", "Claude Code session transcripts (one event a line; branches and compactions kept)", _sniff, _read
)
