"""What tracing tools record of one model call — the prompt it was sent and its reply — read as the
conversations a file's calls form (LangSmith runs: :mod:`.langsmith`; Langfuse generations:
:mod:`.langfuse`; a Dify run's node executions: :mod:`.dify_node_runs`).

A prompt is a list of messages: OpenAI's ``{role, content}``, LangChain's stored messages, or Dify's
``{role, text, files}`` (an LLM node's prompt as Dify saves and traces it), which is read as OpenAI's
with ``text`` for ``content``. A reply is a message, LangChain's first generation, an OpenAI
completion's first choice, Dify's LLM node outputs (``{text, usage, …}``) or a bare text. Each call
is one :class:`~core.capture.calls.Call`; a file's calls are threaded as the capture proxy threads
what it records (:mod:`core.capture.threader`): calls whose histories repeat one another's messages are
turns of one conversation, calls of one turn with other system prompts its nodes, a session or thread
id the trace names pins its calls together. Each call is stored with its turn as a node run whose
ledger is what its payload held (observed). A file of one call opens as that call's conversation, as
ever, under everything it was sent (:data:`core.model.conversation.WHOLE_THREAD_SOURCES`)."""

from __future__ import annotations

from datetime import datetime, timezone
from typing import Any, Callable, Iterable, Iterator

from core.capture.calls import FAILED, SUCCEEDED, Call
from core.capture.stored import as_conversation
from core.capture.threader import thread_calls
from core.io.errors import RecordError
from core.model.conversation import SOURCE_MODEL, Conversation, Message

from .common import iso_time
from .openai import openai_messages
from .records import Problem, ReadContext, Record


def prompt_messages(value: Any, at: str, key: str) -> list:
    """The messages a call was sent, from its recorded input ``value`` (named ``key`` in problems): a
    list of messages, LangChain's batch of lists (its first prompt), ``{messages}``, ``{prompts}`` or
    one text (a completion model's prompt)."""
    if isinstance(value, dict):
        if isinstance(value.get("messages"), list):
            value = value["messages"]
        elif isinstance(value.get("prompts"), list) and value["prompts"] and isinstance(value["prompts"][0], str):
            value = value["prompts"][0]
        else:
            raise RecordError(f"{at}: '{key}' has no 'messages' (nor 'prompts'): no prompt to read", key)
    if isinstance(value, str):
        return [{"role": "user", "content": value}]
    if not isinstance(value, list):
        raise RecordError(f"{at}: '{key}' is not a prompt (a list of messages)", key)
    if value and all(isinstance(batch, list) for batch in value):
        value = value[0]  # LangChain: one list of messages per prompt of the batch
    return [_openai(m) for m in value]


def _openai(m: Any) -> Any:
    """A prompt message as OpenAI's: Dify's ``text`` (and ``files``, which carry no text) as ``content``."""
    if isinstance(m, dict) and "role" in m and "content" not in m and isinstance(m.get("text"), str):
        return {k: v for k, v in m.items() if k not in ("text", "files")} | {"content": m["text"]}
    return m


def reply_message(value: Any) -> Any | None:
    """The call's reply as a message, or None when it has none (it failed, or is still running)."""
    if isinstance(value, str):
        return {"role": "assistant", "content": value}
    if not isinstance(value, dict):
        return None
    if "role" in value and ("content" in value or "tool_calls" in value):
        return value
    generations = value.get("generations")
    if isinstance(generations, list) and generations:
        first = generations[0][0] if isinstance(generations[0], list) and generations[0] else generations[0]
        if isinstance(first, dict):
            if isinstance(first.get("message"), dict):
                return first["message"]
            if isinstance(first.get("text"), str):
                return {"role": "assistant", "content": first["text"]}
    choices = value.get("choices")
    if (
        isinstance(choices, list)
        and choices
        and isinstance(choices[0], dict)
        and isinstance(choices[0].get("message"), dict)
    ):
        return choices[0]["message"]
    for key in ("text", "content"):  # Dify's LLM node outputs; a bare reply object
        if isinstance(value.get(key), str):
            return {"role": "assistant", "content": value[key]}
    return None


def call_conversation(
    prompt: list,
    reply: Any | None,
    conv_id: str,
    *,
    name: str,
    meta: dict,
    source_format: str,
    pin: Any = None,
    node_name: str | None = None,
) -> Call:
    """One traced call (its prompt, its reply when there is one), as threading reads it; ``conv_id``,
    ``name`` and ``meta`` name the conversation it opens as when no other call joins it. ``pin``: the
    session or thread the trace puts it in; ``node_name``: the node the call names (its ``metadata.memlens_node``)."""
    messages = openai_messages(prompt)
    if not any(m.role in ("user", "assistant") for m in messages):
        raise RecordError("the call's prompt has no user or assistant message", "input")
    replied = [m for m in openai_messages([reply]) if m.role == "assistant"] if reply is not None else []
    kept = {k: v for k, v in meta.items() if isinstance(v, str) and v}
    model = kept.get(SOURCE_MODEL, "")
    answer = (
        Message(
            "assistant",
            "\n".join(m.content for m in replied if m.content and m.kind != "reasoning"),
            "",
            "reply",
            tool_calls=tuple(c for m in replied for c in m.tool_calls),
        )
        if replied
        else None
    )
    return Call(
        id=conv_id,
        messages=tuple(messages),
        reply=answer,
        model=model,
        api=source_format,
        started_at=iso_time(kept.get("start_time")) or 0.0,
        pin=f"{source_format}:{pin}" if isinstance(pin, (str, int)) and str(pin) else None,
        status=FAILED if kept.get("error") and answer is None else SUCCEEDED,
        error=kept.get("error"),
        node_name=node_name,
        record={"conversation": conv_id, "name": name or conv_id, "meta": kept, "source_format": source_format},
    )


def threaded(calls: list[Call]) -> Iterator[Conversation]:
    """The conversations ``calls`` form, each named after its first call (a file of one call: that call's)."""
    counter = iter(range(1, 1 << 62))
    for thread in thread_calls(calls, new_id=lambda: str(next(counter))):
        first = min(thread.calls, key=lambda c: c.call.started_at).call.record
        conv = as_conversation(thread, source_format=first["source_format"], meta=first["meta"])
        conv.id, conv.name = first["conversation"], first["name"]
        if len(thread.nodes) == 1:
            conv.system_prompt = next(iter(thread.nodes.values())).system
        yield conv


def call_name(name: Any, start: Any) -> str:
    """A call's conversation name: its recorded name and when it started, to the second in UTC
    ("ChatOpenAI · 2025-03-01 10:00:02"; a time that is not ISO 8601 as written), those it has."""
    when = iso_time(start) if isinstance(start, str) else None
    if when is not None:
        start = datetime.fromtimestamp(when, tz=timezone.utc).strftime("%Y-%m-%d %H:%M:%S")
    return " · ".join(p for p in (name, start) if isinstance(p, str) and p)


def read_calls(
    ctx: ReadContext,
    records: Iterable[Record],
    convert: Callable[[Any, Any, int | None], Call],
    label: Callable[[Any], str],
    *,
    other_kind: Callable[[Any], str | None],
    expand: Callable[[Any], tuple[list, Any]] = lambda value: ([value], None),
    left_out: str,
    none: str,
    field: str,
) -> Iterator[Conversation]:
    """The conversations the traced calls in ``records`` form (:func:`threaded`), each call read by
    :meth:`ReadContext.each`.

    ``expand(value)`` gives what a record holds — its items (a trace's observations; by default the
    record itself) and what they share, handed to ``convert(item, shared, index)`` with each call;
    ``other_kind(item)`` names the kind of an item that is no model call (None for a call). A record
    holding one item keeps its own index in problems, the items of a record holding several are
    numbered in the file's order. What is not a call is counted by kind and named in a note
    (``left_out``, its ``{left}`` the counts); a file of nothing else is refused in one line
    (``none``, with ``{name}`` the file's name; ``field`` the problem's field)."""
    others: dict[str, int] = {}
    shared: dict[int | None, Any] = {}

    def calls() -> Iterator[Record]:
        k = 0
        for rec in records:
            if rec.error:
                yield rec
                continue
            items, common = expand(rec.value)
            for item in items:
                kind = other_kind(item)
                if kind is not None:
                    others[kind] = others.get(kind, 0) + 1
                    continue
                index = rec.index if len(items) == 1 else k
                shared[index] = common
                yield Record(index, item)
                k += 1
        ctx.records += sum(others.values())

    calls_read = list(ctx.each(calls(), lambda item, n: convert(item, shared.get(n), n), label))
    read = len(calls_read)
    yield from threaded(calls_read)
    if others:
        left = ", ".join(f"{count} {kind}" for kind, count in sorted(others.items()))
        ctx.notes.append(left_out.format(left=left))
        if not read and not ctx.problems:
            ctx.report(Problem(None, field, none.format(name=ctx.name, left=left)))
