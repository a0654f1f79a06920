"""Langfuse traces: a trace downloaded as JSON (the trace with its ``observations``), a session's
download (its ``traces``), the observations table exported as JSON or JSON Lines, or a page of the
observations API (``{data, meta}``). Each generation (an observation of ``type: GENERATION``) is one
model call, read as the prompt it was sent and its reply (:mod:`.calls`) — as a Dify app traced to
Langfuse records each LLM node's call (Dify's ``{role, text, files}`` prompt, its node outputs), or as
the OpenAI and LangChain integrations record theirs. The calls are threaded into the conversations they
form, a trace's session pinning its calls together; a conversation is named after its first observation,
with its trace, session and model; spans, events, tools and other observations sent no prompt and are
left out, with a note saying how many."""

from __future__ import annotations

from typing import Any, Iterator

from core.capture.calls import Call
from core.io.errors import RecordError
from core.model.conversation import SOURCE_MODEL, Conversation

from .calls import call_conversation, call_name, prompt_messages, read_calls, reply_message
from .common import label_of
from .records import ReadContext, Records
from .registry import Format

GENERATION = "GENERATION"


def is_observation(value: Any) -> bool:
    return (
        isinstance(value, dict)
        and isinstance(value.get("type"), str)
        and "input" in value
        and ("traceId" in value or "startTime" in value)
    )


def _observations(value: Any) -> tuple[list, dict]:
    """The observations a record holds, and the trace they belong to ({} when it is not given): a
    trace's, a session's traces', an API page's, or the record itself."""
    if isinstance(value, dict):
        if isinstance(value.get("observations"), list):
            return value["observations"], value
        if isinstance(value.get("traces"), list):
            return [
                o
                for t in value["traces"]
                if isinstance(t, dict) and isinstance(t.get("observations"), list)
                for o in t["observations"]
            ], {"sessionId": value.get("sessionId", value.get("id"))}
        if isinstance(value.get("data"), list):
            return value["data"], {}
    return [value], {}


def _conversation(obs: Any, trace: dict, n: int | None, stem: str) -> Call:
    if not isinstance(obs, dict):
        raise RecordError("is not an observation (an object with 'type' and 'input')", "")
    at = f"observation {label_of(obs, 'id', 'name')!r}" if label_of(obs, "id", "name") else "the observation"
    if "input" not in obs:
        raise RecordError(f"{at} has no 'input'", "input")
    prompt = prompt_messages(obs["input"], at, "input")
    metadata = obs.get("metadata") if isinstance(obs.get("metadata"), dict) else {}
    meta = {
        "observation": obs.get("name"),
        "start_time": obs.get("startTime"),
        "trace_id": obs.get("traceId") or trace.get("id"),
        "session_id": trace.get("sessionId") or metadata.get("session_id"),
        SOURCE_MODEL: obs.get("model"),
        "error": obs.get("statusMessage") if obs.get("level") == "ERROR" else None,
    }
    return call_conversation(
        prompt,
        reply_message(obs.get("output")),
        str(obs.get("id") or (stem if n is None else f"{stem}#{n}")),
        name=call_name(obs.get("name"), obs.get("startTime")),
        meta=meta,
        source_format="langfuse",
        pin=trace.get("sessionId") or metadata.get("session_id"),
    )


def _other_kind(obs: Any) -> str | None:
    """An observation that is no model call: its type, in lower case (None for a generation)."""
    kind = obs.get("type") if isinstance(obs, dict) else None
    return kind.lower() if isinstance(kind, str) and kind != GENERATION else None


def _read(records: Records, ctx: ReadContext) -> Iterator[Conversation]:
    yield from read_calls(
        ctx,
        records,
        lambda obs, trace, n: _conversation(obs, trace or {}, n, ctx.stem),
        lambda obs: label_of(obs, "name", "id"),
        other_kind=_other_kind,
        expand=_observations,
        left_out="left out the observations that are not model calls ({left}): only a generation holds a prompt",
        none="{name} holds no generation (type GENERATION), only {left} observations: export the "
        "trace's generations, which hold the prompt sent",
        field="type",
    )


def _sniff(first: Any, layout: str) -> bool:
    if is_observation(first):
        return True
    if not isinstance(first, dict):
        return False
    for key in ("observations", "data"):
        items = first.get(key)
        if isinstance(items, list) and items and is_observation(items[0]):
            return True
    traces = first.get("traces")
    return (
        isinstance(traces, list)
        and bool(traces)
        and isinstance(traces[0], dict)
        and isinstance(traces[0].get("observations"), list)
    )


FORMAT = Format(
    "langfuse",
    "Langfuse traces and observations (each generation's prompt and reply; other observations left out)",
    _sniff,
    _read,
)
