"""Langfuse traces and observations: each generation is one model call, read as the prompt it was sent
and its reply — as a Dify app traced to Langfuse records its LLM node's call, or as the OpenAI
integration records one — one conversation per call; a trace downloaded whole, an observations
export and an API page all read; other observations are left out with a note."""

from __future__ import annotations

import json

import pytest

from core.io import FormatError, detect_format, import_text


def dify_generation(obs_id="gen-2", **extra) -> dict:
    """A Dify Chatflow's LLM node call as Dify traces it to Langfuse: its prompt as Dify saves it
    (``{role, text, files}``), its node outputs."""
    return {
        "id": obs_id,
        "traceId": "trace-1",
        "type": "GENERATION",
        "name": "LLM",
        "startTime": "2025-05-01T09:00:01.000Z",
        "model": "gpt-4o-mini",
        "level": "DEFAULT",
        "input": [
            {"role": "system", "text": "You help with orders.", "files": []},
            {"role": "user", "text": "Hi, I'm Dana. Order 4411.", "files": []},
            {"role": "assistant", "text": "Thanks Dana, noted 4411.", "files": []},
            {"role": "user", "text": "What's my order number?", "files": []},
        ],
        "output": {"text": "It is 4411.", "usage": {"total_tokens": 60}, "finish_reason": "stop"},
        **extra,
    }


def openai_generation() -> dict:
    return {
        "id": "gen-3",
        "traceId": "trace-2",
        "type": "GENERATION",
        "name": "OpenAI-generation",
        "startTime": "2025-05-01T09:05:00.000Z",
        "model": "gpt-4o",
        "input": [{"role": "user", "content": "Where is order 4411?"}],
        "output": {"role": "assistant", "content": "It has shipped."},
    }


def span(obs_id="span-1", kind="SPAN") -> dict:
    return {
        "id": obs_id,
        "traceId": "trace-1",
        "type": kind,
        "name": "Start",
        "startTime": "2025-05-01T09:00:00.000Z",
        "input": {"sys.query": "What's my order number?"},
        "output": {},
    }


def trace() -> dict:
    """A trace downloaded as JSON from the trace view: the trace with its observations."""
    return {
        "id": "trace-1",
        "name": "support-bot",
        "sessionId": "conv-9",
        "input": {"query": "x"},
        "output": {},
        "observations": [span(), dify_generation(), span("span-3", "EVENT")],
        "scores": [],
    }


def read(text: str, name="trace.json", **kw):
    return import_text(text, name=name, **kw)


def test_a_difys_llm_node_call_traced_to_langfuse_is_its_prompt_and_its_reply():
    result = read(json.dumps(trace()))
    assert result.format == "langfuse" and detect_format(trace()) == "langfuse"
    [conv] = result.conversations
    assert (conv.id, conv.name, conv.system_prompt, conv.source_format) == (
        "gen-2",
        "LLM · 2025-05-01 09:00:01",
        "You help with orders.",
        "langfuse",
    )
    assert [(t.query, t.answer) for t in conv.turns] == [
        ("Hi, I'm Dana. Order 4411.", "Thanks Dana, noted 4411."),
        ("What's my order number?", "It is 4411."),
    ]
    assert (conv.meta["trace_id"], conv.meta["session_id"], conv.meta["model"]) == ("trace-1", "conv-9", "gpt-4o-mini")
    assert result.notes == [
        "left out the observations that are not model calls (1 event, 1 span): only a generation holds a prompt"
    ]


@pytest.mark.parametrize("layout", ["array", "lines", "api page"])
def test_an_observations_export_or_api_page_reads_each_generation(layout):
    rows = [span(), dify_generation(), openai_generation()]
    text = {
        "array": json.dumps(rows),
        "lines": "\n".join(json.dumps(r) for r in rows),
        "api page": json.dumps({"data": rows, "meta": {"cursor": None}}),
    }[layout]
    result = read(text, name="observations.jsonl" if layout == "lines" else "observations.json")
    assert [c.id for c in result.conversations] == ["gen-2", "gen-3"]
    assert result.conversations[1].turns[0].answer == "It has shipped."


def test_a_failed_generation_has_no_reply_and_keeps_its_error():
    conv = read(json.dumps(dify_generation(output=None, level="ERROR", statusMessage="rate limited"))).conversations[0]
    assert conv.turns[-1].answer_index is None and conv.meta["error"] == "rate limited"


def test_a_generation_opens_under_everything_it_was_sent():
    from core.analysis.debug_view import fitting_config

    config = fitting_config(read(json.dumps(trace())).conversations[0])
    assert (config.strategy, config.granularity) == ("buffer", "all_messages")


def test_a_trace_without_a_generation_is_refused_in_one_line():
    with pytest.raises(FormatError, match=r"holds no generation \(type GENERATION\), only 1 span") as e:
        read(json.dumps({"id": "t", "observations": [span()]}))
    assert "\n" not in str(e.value)


@pytest.mark.parametrize(
    "change,problem",
    [
        ({"input": {"question": "hi"}}, "'input' has no 'messages' (nor 'prompts')"),
        ({"input": 5}, "'input' is not a prompt"),
        ({"input": [{"role": "robot", "text": "x"}]}, "unknown role 'robot'"),
    ],
)
def test_a_malformed_generation_is_refused_naming_what_is_wrong(change, problem):
    with pytest.raises(FormatError, match=problem.replace("(", r"\(").replace(")", r"\)")):
        read(json.dumps(dify_generation(**change)))
