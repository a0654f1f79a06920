"""A real file with anything changed anywhere is read or refused with one clear error — never another
exception. Each example takes a sample of one format, puts an arbitrary JSON value at one to three
places in it, and imports the result, all-or-nothing and skipping bad records."""

from __future__ import annotations

import copy
import json

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from core.io import FormatError, import_text
from tests.builders import places, put
from tests.conftest import FIXTURES
from tests.io.test_claude_code import TRANSCRIPT
from tests.io.test_dify_node_runs import llm_run, other_run
from tests.io.test_langfuse import dify_generation, openai_generation, span
from tests.io.test_langfuse import trace as _langfuse_trace
from tests.io.test_langsmith import chat_model_run, openai_run
from tests.io.test_librechat import export as _librechat
from tests.io.test_open_webui import export as _open_webui
from tests.io.test_responses_items import SESSION

T, E = FIXTURES / "transcripts", FIXTURES / "exports"


def _lines(path, n=3):
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()][:n]


def _oasst_rows():
    def rows(node, tree, parent=None):
        row = {k: v for k, v in node.items() if k != "replies"} | {"parent_id": parent, "message_tree_id": tree}
        return [row] + [r for reply in node.get("replies", []) for r in rows(reply, tree, node["message_id"])]

    tree = _lines(T / "oasst__en_100_tree.subset.jsonl", 1)[0]
    return rows(tree["prompt"], tree["message_tree_id"])[:8]


def _anthropic():
    return {
        "system": [{"type": "text", "text": "Be brief."}],
        "messages": [
            {"role": "user", "content": "Weather in Porto?"},
            {
                "role": "assistant",
                "content": [
                    {"type": "thinking", "thinking": "Look it up."},
                    {"type": "tool_use", "id": "t1", "name": "weather", "input": {"city": "Porto"}},
                ],
            },
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1", "content": "sunny"}]},
            {"role": "assistant", "content": [{"type": "text", "text": "Sunny."}]},
        ],
    }


def _converse():
    return {
        "system": [{"text": "Be brief."}],
        "messages": [
            {"role": "user", "content": [{"text": "Weather in Porto?"}]},
            {
                "role": "assistant",
                "content": [
                    {"reasoningContent": {"reasoningText": {"text": "Look it up."}}},
                    {"toolUse": {"toolUseId": "t1", "name": "weather", "input": {"city": "P"}}},
                ],
            },
            {"role": "user", "content": [{"toolResult": {"toolUseId": "t1", "content": [{"json": {"sky": "sun"}}]}}]},
            {"role": "assistant", "content": [{"text": "Sunny."}]},
        ],
    }


def _ui_messages():
    return [
        {"id": "u1", "role": "user", "parts": [{"type": "text", "text": "Weather?"}]},
        {
            "id": "a1",
            "role": "assistant",
            "parts": [
                {"type": "step-start"},
                {"type": "reasoning", "text": "Look it up."},
                {
                    "type": "tool-weather",
                    "toolCallId": "c1",
                    "state": "output-available",
                    "input": {"city": "P"},
                    "output": {"sky": "sun"},
                },
                {"type": "step-start"},
                {"type": "text", "text": "Sunny."},
            ],
        },
    ]


def _gemini():
    return {
        "systemInstruction": {"parts": [{"text": "Be brief."}]},
        "contents": [
            {"role": "user", "parts": [{"text": "Weather?"}]},
            {"role": "model", "parts": [{"functionCall": {"name": "weather", "args": {"city": "P"}}}]},
            {"role": "user", "parts": [{"functionResponse": {"name": "weather", "response": {"sky": "sun"}}}]},
            {"role": "model", "parts": [{"text": "Sunny.", "thought": False}]},
        ],
    }


def _hermes():
    call = json.dumps({"name": "weather", "arguments": {"city": "Porto"}})
    return [
        {
            "conversations": [
                {"from": "human", "value": "Weather?"},
                {"from": "gpt", "value": f"<tool_call>{call}</tool_call>"},
                {"from": "tool", "value": "<tool_response>sunny</tool_response>"},
                {"from": "gpt", "value": "Sunny."},
            ]
        }
    ]


#: (name, how it is written, the document): one sample of every format and layout MemLens reads.
SAMPLES = [
    ("tau-bench", "lines", _lines(T / "taubench__gpt-4o-airline.sample.jsonl", 1)),
    (
        "tau-bench traj",
        "array",
        [
            {"traj" if k == "messages" else k: v for k, v in r.items()}
            for r in _lines(T / "taubench__gpt-4o-airline.sample.jsonl", 1)
        ],
    ),
    ("glaive", "array", json.loads((T / "llamafactory__glaive_toolcall_en_demo.subset.json").read_text())[:2]),
    ("hermes", "array", _hermes()),
    ("reasoning v1", "lines", _lines(T / "llamafactory__reason_tool_use_demo_50.subset.jsonl", 2)),
    ("oasst trees", "lines", _lines(T / "oasst__en_100_tree.subset.jsonl", 1)),
    ("oasst rows", "lines", _oasst_rows()),
    ("dify messages", "document", json.loads((T / "dify-docs__messages_api_examples.json").read_text())),
    ("dify web", "array", json.loads((T / "dify-web__branchedTestMessages.json").read_text())),
    ("chatgpt", "array", json.loads((E / "chatgpt__conversations.json").read_text())[:1]),
    ("claude", "array", json.loads((E / "claude__conversations.json").read_text())[:1]),
    ("claude code", "lines", TRANSCRIPT),
    ("agents sdk", "array", SESSION),
    ("anthropic", "document", _anthropic()),
    ("bedrock converse", "document", _converse()),
    ("ai sdk ui messages", "array", _ui_messages()),
    ("gemini", "document", _gemini()),
    ("open webui", "array", json.loads(json.dumps(_open_webui()))),
    ("librechat", "document", _librechat()),
    ("librechat recursive", "document", _librechat(recursive=True)),
    ("langsmith runs", "lines", [chat_model_run(), openai_run()]),
    ("langfuse trace", "document", _langfuse_trace()),
    ("langfuse observations", "lines", [span(), dify_generation(), openai_generation()]),
    ("dify node runs", "document", {"data": [other_run("start", "e1"), llm_run()]}),
]

JSON = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-3, 3)
    | st.floats(allow_nan=False)
    | st.sampled_from(
        [
            "",
            "x",
            "user",
            "assistant",
            "tool",
            "tool_use",
            "tool_result",
            "text",
            "function_call",
            "prompter",
            "<tool_call>{}</tool_call>",
            "model",
            "toolUse",
            "step-start",
            "tool-x",
            "output-available",
            "GENERATION",
        ]
    ),
    lambda inner: (
        st.lists(inner, max_size=3)
        | st.dictionaries(
            st.sampled_from(
                [
                    "type",
                    "role",
                    "content",
                    "id",
                    "name",
                    "text",
                    "message",
                    "parent_id",
                    "tool_use_id",
                    "call_id",
                    "replies",
                    "uuid",
                    "parentUuid",
                    "parts",
                    "toolUse",
                    "toolResult",
                    "functionCall",
                    "functionResponse",
                    "state",
                    "toolCallId",
                    "output",
                    "input",
                    "messageId",
                    "parentMessageId",
                    "children",
                    "isCreatedByUser",
                    "tool_call",
                    "think",
                    "args",
                    "run_type",
                    "inputs",
                    "outputs",
                    "generations",
                    "choices",
                    "traceId",
                    "observations",
                    "startTime",
                    "node_type",
                    "process_data",
                    "prompts",
                ]
            ),
            inner,
            max_size=3,
        )
    ),
    max_leaves=6,
)


@pytest.mark.parametrize("name,layout,doc", SAMPLES, ids=[s[0] for s in SAMPLES])
@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_a_sample_changed_anywhere_is_read_or_refused_in_one_line(name, layout, doc, data):
    doc = copy.deepcopy(doc)
    for _ in range(data.draw(st.integers(1, 3))):
        where = list(places(doc))
        doc = put(doc, where[data.draw(st.integers(0, len(where) - 1))], data.draw(JSON))
    text = "\n".join(json.dumps(x) for x in doc) if layout == "lines" and isinstance(doc, list) else json.dumps(doc)
    for skip_bad in (False, True):
        try:
            result = import_text(text, name="sample.jsonl" if layout == "lines" else "sample.json", skip_bad=skip_bad)
        except FormatError as e:
            assert str(e) and "\n" not in str(e).strip()
        else:
            assert result.conversations or result.problems
