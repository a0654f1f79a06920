"""LangSmith runs (a trace's runs as the SDK's ``list_runs`` or the app's export give them: ``{id, name,
run_type, inputs, outputs, start_time, extra, …}``, an array or JSON Lines). Each LLM run (``run_type:
llm``) is one model call, and its ``inputs`` are exactly what the model was sent: LangChain's chat
model runs hold them as ``{messages: [[message, …]]}`` (LangChain's stored messages), runs traced around
an OpenAI client as ``{messages: [{role, content}, …]}``. The call's reply — ``outputs.generations``
(LangChain) or ``outputs.choices`` (OpenAI) — is the last turn's answer. The runs are threaded into the
conversations they form, a thread (``extra.metadata.thread_id``) pinning its runs together; a conversation
is named after its first run, its model kept; the other runs of a trace (chains, tools, retrievers) sent
no prompt and are left out, with a note saying how many."""

from __future__ import annotations

from typing import Any, Iterator

from core.capture.calls import Call
from core.io.errors import RecordError
from core.model.conversation import SOURCE_MODEL, Conversation

from .calls import call_conversation, call_name, prompt_messages, read_calls, reply_message
from .common import label_of
from .records import ReadContext, Records
from .registry import Format

LLM = "llm"


def _conversation(run: Any, n: int | None, stem: str) -> Call:
    if not isinstance(run, dict):
        raise RecordError("is not a run (an object with 'run_type' and 'inputs')", "")
    at = f"run {label_of(run, 'id', 'name')!r}" if label_of(run, "id", "name") else "the run"
    inputs = run.get("inputs")
    if not isinstance(inputs, dict):
        raise RecordError("has no 'inputs' object", "inputs")
    prompt = prompt_messages(inputs, at, "inputs")
    extra = run.get("extra") if isinstance(run.get("extra"), dict) else {}
    metadata = extra.get("metadata") if isinstance(extra.get("metadata"), dict) else {}
    params = extra.get("invocation_params") if isinstance(extra.get("invocation_params"), dict) else {}
    model = metadata.get("ls_model_name") or params.get("model") or params.get("model_name") or inputs.get("model")
    meta = {
        "run_name": run.get("name"),
        "start_time": run.get("start_time"),
        "trace_id": run.get("trace_id"),
        "thread_id": metadata.get("thread_id"),
        SOURCE_MODEL: model,
        "error": run.get("error"),
    }
    return call_conversation(
        prompt,
        reply_message(run.get("outputs")),
        str(run.get("id") or (stem if n is None else f"{stem}#{n}")),
        name=call_name(run.get("name"), run.get("start_time")),
        meta=meta,
        source_format="langsmith",
        pin=metadata.get("thread_id"),
    )


def _label(rec: Any) -> str:
    return label_of(rec, "name", "id")


def _other_kind(value: Any) -> str | None:
    """A run that is no model call: its kind (None for an LLM run, or for what is no run at all)."""
    if isinstance(value, dict) and value.get("run_type") != LLM:
        return str(value.get("run_type") or "unknown")
    return None


def _read(records: Records, ctx: ReadContext) -> Iterator[Conversation]:
    yield from read_calls(
        ctx,
        records,
        lambda run, _, n: _conversation(run, n, ctx.stem),
        _label,
        other_kind=_other_kind,
        left_out="left out the runs that are not model calls ({left}): only an LLM run holds a prompt",
        none="{name} holds no LLM run (run_type 'llm'), only {left} runs: export the trace's model "
        "calls, whose runs hold the prompt sent",
        field="run_type",
    )


def _sniff(first: Any, layout: str) -> bool:
    return isinstance(first, dict) and isinstance(first.get("run_type"), str) and "inputs" in first


FORMAT = Format("langsmith", "LangSmith runs (each LLM run's prompt and reply; other runs left out)", _sniff, _read)
