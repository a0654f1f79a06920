"""An Amazon Bedrock Converse request reads as the OpenAI conversation it was translated from.

The Converse bodies are written by litellm's own translation (``_bedrock_converse_messages_pt``, what
it sends Bedrock for OpenAI-format messages; the system messages go beside them as ``system`` blocks,
as its Converse config puts them): tool calls become ``toolUse`` blocks, their results ``toolResult``
blocks in a user message. Imported, both forms must give the same turns, calls and results.
"""

from __future__ import annotations

import json

from litellm.litellm_core_utils.prompt_templates.factory import _bedrock_converse_messages_pt

from core.io import import_text
from core.model.conversation import ANSWER, QUERY, REASONING, TOOL_CALL, TOOL_RESULT
from tests.builders import translated_reads_alike

MODEL = "anthropic.claude-3-5-sonnet-20240620-v1:0"


def converse_body(messages: list[dict]) -> dict:
    system = [{"text": m["content"]} for m in messages if m["role"] == "system"]
    rest = [m for m in messages if m["role"] != "system"]
    return {
        "modelId": MODEL,
        "system": system,
        "messages": _bedrock_converse_messages_pt(rest, model=MODEL, llm_provider="bedrock_converse"),
    }


def test_tau_bench_conversations_sent_to_bedrock_read_as_they_were_written():
    assert translated_reads_alike(converse_body) >= 10  # the sample calls tools: the blocks were read


def test_a_converse_request_is_counted_for_the_bedrock_model_it_was_sent_to():
    from core.analysis.debug_view import fitting_config
    from core.memory.replay import Replay
    from core.model.conversation import source_model

    body = converse_body([{"role": "user", "content": "Hi"}, {"role": "assistant", "content": "Hello."}])
    conv = import_text(json.dumps(body), name="converse.json").conversations[0]
    assert source_model(conv.meta) == MODEL and fitting_config(conv).model == MODEL
    assert Replay(conv, fitting_config(conv)).facts.context_size == 200_000  # the model's, not gpt-4o-mini's
    # An OpenAI or Anthropic request names it as ``model``; that is what stands.
    both = import_text(json.dumps({**body, "model": "claude-3-5-sonnet-20240620"}), name="c.json").conversations[0]
    assert source_model(both.meta) == "claude-3-5-sonnet-20240620"


def test_converse_blocks_reasoning_json_results_media_and_cache_points():
    body = {
        "system": [{"text": "You are a travel assistant."}, {"cachePoint": {"type": "default"}}],
        "messages": [
            {"role": "user", "content": [{"text": "Weather in Porto?"}, {"image": {"format": "png", "source": {}}}]},
            {
                "role": "assistant",
                "content": [
                    {"reasoningContent": {"reasoningText": {"text": "Look it up.", "signature": "s"}}},
                    {"text": "Checking."},
                    {"toolUse": {"toolUseId": "t1", "name": "weather", "input": {"city": "Porto"}}},
                ],
            },
            {
                "role": "user",
                "content": [
                    {"toolResult": {"toolUseId": "t1", "status": "success", "content": [{"json": {"sky": "sunny"}}]}}
                ],
            },
            {"role": "assistant", "content": [{"text": "Sunny."}, {"cachePoint": {"type": "default"}}]},
        ],
    }
    conv = import_text(json.dumps(body), name="converse.json").conversations[0]
    assert conv.system_prompt == "You are a travel assistant."
    (turn,) = conv.turns
    assert [(m.kind, m.content) for m in turn.messages] == [
        (QUERY, "Weather in Porto?\n[image]"),
        (REASONING, "Look it up."),
        (TOOL_CALL, "Checking."),
        (TOOL_RESULT, '{"sky": "sunny"}'),
        (ANSWER, "Sunny."),
    ]
    assert [(c.id, c.name, json.loads(c.arguments)) for c in turn.messages[2].tool_calls] == [
        ("t1", "weather", {"city": "Porto"})
    ]
    assert turn.messages[3].tool_call_id == "t1"
