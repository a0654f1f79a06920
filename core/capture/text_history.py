"""History sent as text inside one prompt message: ``Human: …`` / ``Assistant: …`` lines.

Dify's Question Classifier and Parameter Extractor, every completion-style prompt and many home-made
bots put the conversation's earlier turns into one message as role-prefixed lines (Dify writes
``f"{prefix}: {text}"`` per message, ``Human`` / ``Assistant`` unless the node's ``role_prefix`` says
otherwise). Such a call's history is read from those lines, so it gets an observed ledger like a call
whose history came as messages. Where the lines are (the first rule that applies):

* a ``<histories>…</histories>`` block in a system or user message (Dify's classifier and extractor
  prompts): its lines are the history, whichever two prefixes they use (the first one met is the
  user's); an empty block is an empty history (``<histories></histories>`` with nothing at all
  inside, as prose naming the tags writes it, only when the payload sends no history as messages);
* otherwise, only when the payload sends no history as messages, the longest run of lines in its
  system message or its last user message that alternate between a user prefix and an assistant
  prefix, the user's first, at least one of each: prefixes of :data:`USER_PREFIXES` and
  :data:`ASSISTANT_PREFIXES` (``Human``/``Assistant``, ``User``/``AI``, …), or any two names when the
  run holds two exchanges or more — but never ``Q``/``A``, ``Question``/``Answer`` and the like
  (:data:`NOT_ROLES`: a prompt's FAQ or examples).

A line that starts with neither prefix continues the message above it (a message of several lines);
outside a ``<histories>`` block a blank line ends the run (so a prompt that goes on right after the
last line without one has its first lines read as part of the last message, which then matches no
turn). Text that says ``Human:`` once, or lines
that do not alternate, are not a history: ``Human: hi`` alone is one line of text.

Worked example: a system message ``"Earlier conversation:\\nHuman: Hi, I'm Dana.\\nAssistant: Hello
Dana!\\n\\nSort the question…"`` holds a history of two messages (user "Hi, I'm Dana.", assistant
"Hello Dana!"); the node's prompt is the message without those lines.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Sequence

from core.model.conversation import REASONING, Message

#: Prefixes taken as the user's and the assistant's lines without a ``<histories>`` block (compared in lower
#: case), Dify's defaults ``Human`` and ``Assistant`` among them.
USER_PREFIXES = frozenset({"human", "user", "customer", "you"})
ASSISTANT_PREFIXES = frozenset({"assistant", "ai", "bot", "chatbot", "model", "agent", "chatgpt", "gpt", "claude"})
#: Names that alternate in prompts without being a conversation (a prompt's FAQ, its worked examples): never
#: read as a history's prefixes outside a ``<histories>`` block.
NOT_ROLES = frozenset({"q", "a", "question", "answer", "input", "output", "example", "note", "step"})
#: Messages a run of other names needs to be read as a history (two exchanges).
NAMED_RUN = 4
#: Dify's block around the history in its classifier and extractor prompts.
BLOCK = re.compile(r"<histories>(.*?)</histories>", re.S)
#: A prefixed line: a name of one to three words, a colon, the text (Dify puts one space after the colon).
_LINE = re.compile(r"[ \t]*([A-Za-z][A-Za-z0-9_-]{0,23}(?: [A-Za-z0-9_-]{1,23}){0,2}):(?: |$)(.*)", re.S)


@dataclass(frozen=True)
class TextHistory:
    """A history sent as text: the payload message holding it (``index``), its span in that message's text
    (``start``, ``end``), the two prefixes, and the messages its lines say (user and assistant, in order)."""

    index: int
    start: int
    end: int
    user: str
    assistant: str
    messages: tuple[Message, ...]

    def without(self, text: str) -> str:
        """The holding message's text without the history: the node's own words."""
        return text[: self.start] + text[self.end :]

    def line(self, m: Message) -> str:
        """A message as a line of this history (what it costs as text)."""
        return f"{self.user if m.role == 'user' else self.assistant}: {m.content}"


def _label(line: str) -> tuple[str, str] | None:
    match = _LINE.fullmatch(line)
    return (match.group(1), match.group(2)) if match else None


def _runs(lines: list[str], block: bool) -> list[tuple[int, int, str, str, list[tuple[str, str]]]]:
    """Accepted runs of alternating prefixed lines: ``(first line, end line, user, assistant, [(role, text)])``. In a
    block every line belongs to the run; outside one, it ends at a blank line or a broken alternation."""
    out = []
    k = 0
    while k < len(lines):
        first = _label(lines[k])
        if first is None:
            k += 1
            continue
        user, assistant = first[0], None
        messages: list[tuple[str, list[str]]] = [("user", [first[1]])]
        j = k + 1
        while j < len(lines):
            line = lines[j]
            if not block and not line.strip():
                break
            label = _label(line)
            if label is not None and assistant is None and label[0] != user:
                assistant = label[0]
            role = (
                "user"
                if label is not None and label[0] == user
                else "assistant"
                if label is not None and label[0] == assistant
                else None
            )
            if role is not None and (block or role != messages[-1][0]):
                messages.append((role, [label[1]]))
            elif role is not None:
                break  # the same prefix twice: the alternation ends
            else:
                messages[-1][1].append(line)
            j += 1
        run = (k, j, user, assistant or "", [(r, "\n".join(t)) for r, t in messages])
        if (assistant is not None or block) and _accepted(run, block):
            out.append(run)
            k = max(j, k + 1)
        else:  # not a history: the next prefixed line may begin one
            k += 1
    return out


def _accepted(run, block: bool) -> bool:
    _, _, user, assistant, messages = run
    if block:
        return True
    if user.lower() in NOT_ROLES or assistant.lower() in NOT_ROLES:
        return False
    known = user.lower() in USER_PREFIXES and assistant.lower() in ASSISTANT_PREFIXES
    return len(messages) >= (2 if known else NAMED_RUN)


def _read(text: str, index: int, base: int, block: bool) -> TextHistory | None:
    """The history in ``text`` (a message's text from ``base``, or a block's inside), or ``None``."""
    body = text.strip() if block else text
    lines = body.split("\n")
    runs = _runs(lines, block)
    if not runs:
        return None
    k, j, user, assistant, messages = max(runs, key=lambda r: (len(r[4]), -r[0]))
    if block:  # a block's history is all of its text, the newlines and indentation around it too
        start, end = 0, len(text)
    else:
        starts = [0] + [m.end() for m in re.finditer("\n", text)]
        start = starts[k]
        end = starts[j] - 1 if j < len(starts) else len(text)
    return TextHistory(
        index,
        base + start,
        base + end,
        user,
        assistant or "Assistant",
        tuple(Message(role, content, "", "text history") for role, content in messages),
    )


def read_text_history(
    messages: Sequence[Message], *, system_count: int, query: int | None, history_sent: bool
) -> TextHistory | None:
    """The history a payload sends as text lines (rules above), or ``None``. ``system_count`` and ``query``
    (the last user message's index) are the payload's split; ``history_sent``: it sends history as messages."""
    readable = [
        k
        for k, m in enumerate(messages)
        if m.role in ("system", "user") and m.kind != REASONING and isinstance(m.content, str)
    ]
    for k in readable:
        empty = None  # a first turn's empty block; prose naming the tags ("inside <histories></histories>")
        for match in BLOCK.finditer(messages[k].content):  # is one only beside no history as messages
            found = _read(match.group(1), k, match.start(1), block=True)
            if found is not None:
                return found
            if not match.group(1).strip() and (match.group(1) or not history_sent):
                empty = match
        if empty is not None:
            return TextHistory(k, empty.start(1), empty.end(1), "Human", "Assistant", ())
    if history_sent:
        return None
    for k in [*range(system_count), *([query] if query is not None else [])]:
        found = _read(messages[k].content, k, 0, block=False)
        if found is not None:
            return found
    return None


__all__ = ["ASSISTANT_PREFIXES", "NAMED_RUN", "NOT_ROLES", "TextHistory", "USER_PREFIXES", "read_text_history"]
