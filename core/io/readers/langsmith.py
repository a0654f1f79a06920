"""LangSmith runs (a trace's runs as the SDK's ``list_runs`` or the app's export give them: ``{id, name,
run_type, inputs, outputs, start_time, extra, …}``, an array or JSON Lines). Each LLM run (``run_type:
llm``) is one model call, and its ``inputs`` are exactly what the model was sent: LangChain's chat
model runs hold them as ``{messages: [[message, …]]}`` (LangChain's stored messages), runs traced around
an OpenAI client as ``{messages: [{role, content}, …]}``. The call's reply — ``outputs.generations``
(LangChain) or ``outputs.choices`` (OpenAI) — is the last turn's answer. A run becomes one conversation
named after the run, its thread (``extra.metadata.thread_id``) and model kept; the other runs of a trace
(chains, tools, retrievers) sent no prompt and are left out, with a note saying how many."""

from __future__ import annotations

from typing import Any, Iterator

from core.io.errors import RecordError
from core.model.conversation import Conversation

from .common import conversation_from_messages, label_of
from .openai import openai_messages
from .records import Problem, ReadContext, Records
from .registry import Format

LLM = "llm"


def _prompt(inputs: Any, at: str) -> list:
    """The messages an LLM run was sent: the first (usually only) prompt of its batch."""
    if not isinstance(inputs, dict):
        raise RecordError("has no 'inputs' object", "inputs")
    messages = inputs.get("messages")
    if isinstance(messages, list) and messages and all(isinstance(batch, list) for batch in messages):
        return list(messages[0])  # LangChain: one list of messages per prompt of the batch
    if isinstance(messages, list):
        return list(messages)
    prompts = inputs.get("prompts")  # a completion model: its prompt is one text
    if isinstance(prompts, list) and prompts and isinstance(prompts[0], str):
        return [{"role": "user", "content": prompts[0]}]
    raise RecordError(f"{at}: 'inputs' has no 'messages' (nor 'prompts'): no prompt to read", "inputs")


def _reply(outputs: Any) -> Any | None:
    """The call's reply as a message: LangChain's first generation, or an OpenAI completion's first
    choice; None when the run has none (it failed, or is still running)."""
    if not isinstance(outputs, dict):
        return None
    generations = outputs.get("generations")
    if isinstance(generations, list) and generations:
        first = generations[0][0] if isinstance(generations[0], list) and generations[0] else generations[0]
        if isinstance(first, dict):
            if isinstance(first.get("message"), dict):
                return first["message"]
            if isinstance(first.get("text"), str):
                return {"role": "assistant", "content": first["text"]}
    choices = outputs.get("choices")
    if isinstance(choices, list) and choices and isinstance(choices[0], dict) \
            and isinstance(choices[0].get("message"), dict):
        return choices[0]["message"]
    return None


def _conversation(run: Any, n: int | None, stem: str) -> Conversation:
    if not isinstance(run, dict):
        raise RecordError("is not a run (an object with 'run_type' and 'inputs')", "")
    at = f"run {label_of(run, 'id', 'name')!r}" if label_of(run, "id", "name") else "the run"
    raw = _prompt(run.get("inputs"), at)
    reply = _reply(run.get("outputs"))
    if reply is not None:
        raw.append(reply)
    extra = run.get("extra") if isinstance(run.get("extra"), dict) else {}
    metadata = extra.get("metadata") if isinstance(extra.get("metadata"), dict) else {}
    params = extra.get("invocation_params") if isinstance(extra.get("invocation_params"), dict) else {}
    inputs = run["inputs"]
    model = metadata.get("ls_model_name") or params.get("model") or params.get("model_name") or inputs.get("model")
    meta = {key: value for key, value in (("run_name", run.get("name")), ("start_time", run.get("start_time")),
                                          ("trace_id", run.get("trace_id")), ("thread_id", metadata.get("thread_id")),
                                          ("model", model), ("error", run.get("error")))
            if isinstance(value, str) and value}
    conv_id = str(run.get("id") or (stem if n is None else f"{stem}#{n}"))
    name = " · ".join(str(v) for v in (run.get("name"), run.get("start_time")) if isinstance(v, str) and v)
    conv = conversation_from_messages(openai_messages(raw), conv_id, source_format="langsmith",
                                      name=name or conv_id, meta=meta)
    if not conv.turns:
        raise RecordError("the run's prompt has no user or assistant message", "inputs")
    return conv


def _label(rec: Any) -> str:
    return label_of(rec, "name", "id")


def _read(records: Records, ctx: ReadContext) -> Iterator[Conversation]:
    others: dict[str, int] = {}

    def llm_runs() -> Iterator:
        for rec in records:
            value = rec.value
            if not rec.error and isinstance(value, dict) and value.get("run_type") != LLM:
                kind = str(value.get("run_type") or "unknown")
                others[kind] = others.get(kind, 0) + 1
                ctx.records += 1
                continue
            yield rec

    read = 0
    for conv in ctx.each(llm_runs(), lambda rec, n: _conversation(rec, n, ctx.stem), _label):
        read += 1
        yield conv
    if others:
        left = ", ".join(f"{count} {kind}" for kind, count in sorted(others.items()))
        ctx.notes.append(f"left out the runs that are not model calls ({left}): only an LLM run holds a prompt")
        if not read and not ctx.problems:
            ctx.report(Problem(None, "run_type", f"{ctx.name} holds no LLM run (run_type 'llm'), only {left} runs: "
                                                 "export the trace's model calls, whose runs hold the prompt sent"))


def _sniff(first: Any, layout: str) -> bool:
    return isinstance(first, dict) and isinstance(first.get("run_type"), str) and "inputs" in first


FORMAT = Format("langsmith", "LangSmith runs (each LLM run's prompt and reply; other runs left out)", _sniff, _read)
