"""The one prompt builder: what an LLM node sends, as runs, receipts, estimates and what-ifs see it.

A :class:`PromptFrame` is everything a node sends besides its history, and how the history goes
in: chat models get the template's messages, the history, then the query message (§2.4);
completion models get one text, the history as role-prefixed lines in the template (§2.6); the
Question Classifier puts the history as ``Human:``/``Assistant:`` lines into its own prompt (text
history, §1.7). A run
builds its frame from its template and sends ``frame.build(history)``; the size of everything but
the history — what Dify's documented budget subtracts — is ``frame.fixed_tokens()``; a what-if
rebuilds the frame of a recorded prompt (:meth:`PromptFrame.recorded`) and builds it with another
ledger's history; an estimate without a recorded prompt builds the frame from the template.
History messages are built by :func:`history_messages` for all of them.

Files (spec/dify-memory.md §1.5, §2.7): when the flow has file upload switched on, a history
message carries its files as content parts, files first and then the text, as Dify's
``_build_prompt_message_with_files`` does (image detail ``high`` unless set); with file upload off
the files are ignored. Before the call Dify drops the parts the model does not support — a model
without vision gets text only — and a list left with one text part becomes a plain string.
Image parts are counted with an estimate (the image's size is not known here), labelled so.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Iterable, Mapping, Sequence

from core.model.conversation import FileRef, Message
from core.model.origins import CURRENT_QUERY, HISTORY
from core.model.tokens import REPLY_PRIMING

#: OpenAI's cost of a high-detail image of unknown size (a 1024×1024 image: 85 + 4 tiles × 170).
IMAGE_TOKENS_HIGH = 765
#: …and of any image sent with detail ``low``.
IMAGE_TOKENS_LOW = 85


@dataclass(frozen=True)
class PromptMessage:
    """One message as sent to the model, with where it came from and its tokens.

    ``parts`` are its content parts when it carries files (files first, then the text), each
    ``{type, name, tokens, estimated}`` plus the part's own fields; ``()`` for a plain message."""

    role: str
    content: str
    origin: str
    tokens: int
    parts: tuple[dict, ...] = field(default=(), compare=False)
    #: A completion prompt's rendered template, before the history went in (what a what-if rebuilds it from).
    template: str | None = None
    #: Of ``tokens``, what the history's text lines inside the message add (a text-form prompt's
    #: memory, which a receipt shows as memory history rather than as template).
    history_tokens: int = field(default=0, compare=False)

    @property
    def estimated(self) -> bool:
        return any(p.get("estimated") for p in self.parts)

    def to_dict(self) -> dict:
        out = {"role": self.role, "content": self.content, "origin": self.origin, "tokens": self.tokens}
        if self.parts:
            out["parts"] = [dict(p) for p in self.parts]
        if self.template is not None:
            out["template"] = self.template
        if self.history_tokens:
            out["history_tokens"] = self.history_tokens
        return out

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> "PromptMessage":
        return cls(
            role=data["role"],
            content=data["content"],
            origin=data["origin"],
            tokens=int(data["tokens"]),
            parts=tuple(dict(p) for p in data.get("parts") or ()),
            template=data.get("template"),
            history_tokens=int(data.get("history_tokens") or 0),
        )

    def wire(self) -> dict:
        """The message in OpenAI's wire format: content parts when it has files, else a string."""
        if not self.parts:
            return {"role": self.role, "content": self.content}
        return {"role": self.role, "content": [_wire_part(p) for p in self.parts]}


def _wire_part(part: Mapping[str, Any]) -> dict:
    if part["type"] == "text":
        return {"type": "text", "text": part["text"]}
    if part["type"] == "image_url":
        return {"type": "image_url", "image_url": {"url": part["url"], "detail": part.get("detail", "high")}}
    return {"type": "file", "file": {"url": part["url"], "file_type": part.get("file_type", "document")}}


def file_part(file: FileRef, image_detail: str = "high") -> dict:
    if file.type == "image":
        return {"type": "image_url", "image_url": {"url": file.url, "detail": image_detail}}
    return {"type": "file", "file": {"url": file.url, "file_type": file.type}}


def to_prompt_message(message: Message, *, file_upload: bool = True, image_detail: str = "high") -> dict:
    """A history message in OpenAI's wire format, files first when file upload is on."""
    out = message.to_openai()
    if message.files and file_upload:
        out["content"] = [file_part(f, image_detail) for f in message.files] + [
            {"type": "text", "text": message.content}
        ]
    return out


def to_prompt_messages(messages, *, file_upload: bool = True, image_detail: str = "high") -> list[dict]:
    return [to_prompt_message(m, file_upload=file_upload, image_detail=image_detail) for m in messages]


def _file_name(file: FileRef) -> str:
    return file.name or file.url.rsplit("/", 1)[-1] or file.id or file.type


def content_parts(
    message: Message, counter, *, file_upload: bool, vision: bool, image_detail: str = "high"
) -> tuple[dict, ...]:
    """The parts a history message is sent with, after Dify's filter: ``()`` when it goes as a
    plain string (no files, file upload off, or nothing but its text left for this model)."""
    if not message.files or not file_upload:
        return ()
    parts = []
    for f in message.files:
        if f.type == "image":
            if not vision:
                continue  # the model does not take images: Dify's filter drops the part
            tokens = IMAGE_TOKENS_LOW if image_detail == "low" else IMAGE_TOKENS_HIGH
            parts.append(
                {
                    "type": "image_url",
                    "name": _file_name(f),
                    "url": f.url,
                    "detail": image_detail,
                    "tokens": tokens,
                    "estimated": True,
                }
            )
        elif vision:
            # A document's content is not here to count: its tokens are unknown (0, estimated).
            parts.append(
                {
                    "type": "file",
                    "name": _file_name(f),
                    "url": f.url,
                    "file_type": f.type,
                    "tokens": 0,
                    "estimated": True,
                }
            )
    if not parts:
        return ()
    parts.append(
        {
            "type": "text",
            "name": "text",
            "text": message.content,
            "tokens": counter.text(message.content),
            "estimated": not counter.exact,
        }
    )
    return tuple(parts)


def history_messages(
    messages: Iterable[Message], counter, *, file_upload: bool = False, vision: bool = False, origin: str = HISTORY
) -> list[PromptMessage]:
    """Memory's messages as they are sent: OpenAI's per-message count, plus the file parts' estimates."""
    out = []
    for m in messages:
        parts = content_parts(m, counter, file_upload=file_upload, vision=vision)
        extra = sum(p["tokens"] for p in parts if p["type"] != "text")
        out.append(PromptMessage(m.role, m.content, origin, counter.message(m) + extra, parts))
    return out


def message(role: str, text: str, origin: str, counter) -> PromptMessage:
    """A template or query message (plain text)."""
    return PromptMessage(role, text, origin, counter.chat(role, text))


def fixed_tokens(messages: Iterable[PromptMessage]) -> int:
    """What everything but the history costs: the messages plus the reply priming."""
    return REPLY_PRIMING + sum(m.tokens for m in messages)


def sendable(messages: Iterable[PromptMessage]) -> list[PromptMessage]:
    """Dify's last filter: a message whose content ended up empty (and has no parts) is not sent."""
    return [m for m in messages if m.content or m.parts]


def chat_prompt(
    before: Sequence[PromptMessage], history: Sequence[PromptMessage], after: Sequence[PromptMessage]
) -> list[PromptMessage]:
    """Chat-model order (§2.4): the template's messages, the history, then the query message."""
    return sendable([*before, *history, *after])


def completion_history_text(
    history: Iterable[Message], role_prefix: Mapping[str, str] | None, *, file_upload: bool = False
) -> str:
    """History as a completion model gets it: ``"{prefix}: {text}"`` lines (with file upload on,
    each image as an ``[image]`` line before the text)."""
    if role_prefix is None:
        return ""
    lines = []
    for m in history:
        if m.role not in ("user", "assistant"):
            continue
        images = "".join("[image]\n" for f in m.files if f.type == "image") if file_upload else ""
        text = (images + m.content).strip() if images else m.content
        lines.append(f"{role_prefix['user'] if m.role == 'user' else role_prefix['assistant']}: {text}")
    return "\n".join(lines)


def completion_text(template: str, histories: str, sys_query: str | None) -> str:
    """Completion-model assembly (§2.6): the history text replaces ``#histories#`` or goes first
    with a newline — merged even when it is empty, so memory off still yields the leading
    ``"\\n"`` — and the (unrendered) query template goes before everything, with a newline."""
    text = template.replace("#histories#", histories) if "#histories#" in template else histories + "\n" + template
    if sys_query:
        text = sys_query + "\n" + text
    return text


CHAT, COMPLETION = "chat", "completion"
#: The history as text lines inside one of the prompt's messages (the Question Classifier's layout).
TEXT_HISTORY = "text history"
#: Where the history's text goes in a template; replaced once, so a later copy of it in user text stays text.
HISTORY_SLOT = "#histories#"
#: The prefixes Dify's text form of memory writes (``get_history_prompt_text``'s defaults, §1.7).
HUMAN_AI = {"user": "Human", "assistant": "Assistant"}


@dataclass(frozen=True)
class PromptFrame:
    """Everything an LLM node sends besides its history, and where the history goes.

    Chat models: ``before`` (the template's messages) + the history + ``after`` (the memory's
    query message). Completion models: ``template`` (rendered, with or without ``#histories#``),
    ``sys_query`` (the unrendered query template, or ``None``) and ``role_prefix`` (``None``: no
    history text goes in). Text history: one ``template_role`` message whose ``template`` has the
    history's ``role_prefix`` lines put in at its first :data:`HISTORY_SLOT`, then ``after``.
    ``file_upload`` and ``vision`` decide how history files are sent. ``keep_empty``: no filter runs
    over the prompt, so an empty message is sent as it is (Dify's Agent node, whose frame leaves out an
    empty instruction or query itself; a basic Chatbot's call, whose frame leaves out an empty system message).
    """

    mode: str
    counter: Any
    before: tuple[PromptMessage, ...] = ()
    after: tuple[PromptMessage, ...] = ()
    template: str = ""
    sys_query: str | None = None
    role_prefix: Mapping[str, str] | None = None
    file_upload: bool = False
    vision: bool = False
    template_role: str = "user"
    keep_empty: bool = False

    def _text(self, histories: str) -> str:
        if self.mode == TEXT_HISTORY:
            return self.template.replace(HISTORY_SLOT, histories, 1)
        return completion_text(self.template, histories, self.sys_query)

    def _completion_message(self, histories: str) -> PromptMessage:
        role, text = self.template_role, self._text(histories)
        tokens = self.counter.chat(role, text)
        # The history's share: the message's tokens less those of the same message without it.
        share = tokens - self.counter.chat(role, self._text("")) if histories else 0
        # The template travels with the message, so a what-if can put another history into it.
        return PromptMessage(role, text, "template", tokens, template=self.template, history_tokens=share)

    def fixed_tokens(self) -> int:
        """What everything but the history costs (a completion prompt: its text without history)."""
        if self.mode == CHAT:
            return fixed_tokens([*self.before, *self.after])
        return fixed_tokens([self._completion_message(""), *self.after])

    def build(self, history: Sequence[Message]) -> list[PromptMessage]:
        """The prompt as sent, with ``history`` (memory's messages, oldest first)."""
        if self.mode == CHAT:
            sent = history_messages(history, self.counter, file_upload=self.file_upload, vision=self.vision)
            if self.keep_empty:
                return [*self.before, *sent, *self.after]
            return chat_prompt(self.before, sent, self.after)
        histories = completion_history_text(history, self.role_prefix, file_upload=self.file_upload)
        return chat_prompt([self._completion_message(histories)], [], self.after)

    @classmethod
    def recorded(
        cls,
        prompt: Sequence[Mapping[str, Any]],
        mode: str,
        counter,
        *,
        sys_query: str | None = None,
        role_prefix: Mapping[str, str] | None = None,
        file_upload: bool = False,
        vision: bool = False,
        keep_empty: bool = False,
    ) -> "PromptFrame | None":
        """The frame of a recorded prompt (dicts), its messages counted with ``counter``: chat — the
        messages before the recorded history (or before the query message) and after it; completion —
        the recorded template, with ``sys_query`` and ``role_prefix`` as the memory now sets them.
        ``None`` when the recorded completion prompt does not carry its template. Text history — the
        recorded template message and the messages after it, the history in ``role_prefix`` lines."""
        if mode != CHAT:
            at = [k for k, m in enumerate(prompt) if m.get("template") is not None]
            if len(at) != 1:
                return None
            if mode == TEXT_HISTORY:
                after = tuple(
                    message(m["role"], m.get("content") or "", m["origin"], counter) for m in prompt[at[0] + 1 :]
                )
                return cls(
                    TEXT_HISTORY,
                    counter,
                    template=prompt[at[0]]["template"],
                    after=after,
                    template_role=prompt[at[0]]["role"],
                    role_prefix=role_prefix,
                    file_upload=file_upload,
                    vision=vision,
                )
            return cls(
                COMPLETION,
                counter,
                template=prompt[at[0]]["template"],
                sys_query=sys_query,
                role_prefix=role_prefix,
                file_upload=file_upload,
                vision=vision,
            )
        before: list[PromptMessage] = []
        after: list[PromptMessage] = []
        side = before
        for m in prompt:
            if m.get("origin") == HISTORY or m.get("origin") == CURRENT_QUERY:
                side = after
            if m.get("origin") != HISTORY:
                side.append(message(m["role"], m.get("content") or "", m["origin"], counter))
        return cls(
            CHAT,
            counter,
            before=tuple(before),
            after=tuple(after),
            file_upload=file_upload,
            vision=vision,
            keep_empty=keep_empty,
        )


__all__ = [
    "HISTORY",
    "CHAT",
    "COMPLETION",
    "TEXT_HISTORY",
    "HISTORY_SLOT",
    "HUMAN_AI",
    "CURRENT_QUERY",
    "IMAGE_TOKENS_HIGH",
    "IMAGE_TOKENS_LOW",
    "PromptMessage",
    "PromptFrame",
    "file_part",
    "to_prompt_message",
    "to_prompt_messages",
    "content_parts",
    "history_messages",
    "message",
    "fixed_tokens",
    "sendable",
    "chat_prompt",
    "completion_history_text",
    "completion_text",
]
