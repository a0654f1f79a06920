"""Dify's own graph-engine cases, run by MemLens: each fixture Dify's unit tests run (api/tests/fixtures/workflow),
with the query, start inputs and mocked model replies those tests give, must end with the outputs they expect.

Dify's tests mock a model call per node; here a stand-in model answers each node by a phrase of its prompt (the
nodes' system prompts differ), which gives every node the reply Dify's test gives it. Cases whose nodes MemLens
does not run (code, tool, iteration, loop) are not here: their outputs would be the pass-through's, not Dify's.
"""

from __future__ import annotations

from typing import Any, Mapping

import pytest

from core.flow.graph import load_flow
from core.flow.runtime import run_conversation
from core.llm.client import LLMReply
from tests.conftest import FIXTURES

DSL = FIXTURES / "dify_dsl"
MOCKED = "This is a mocked LLM response"  # Dify's MockConfig default reply


class ByPrompt:
    """Replies as Dify's tests mock each node: the reply of the first phrase found in the prompt, else MOCKED."""

    def __init__(self, replies: Mapping[str, str] | None = None) -> None:
        self.replies = dict(replies or {})
        self.prompts: list[list[dict]] = []

    def complete(self, model: str, messages, max_tokens=None) -> LLMReply:
        self.prompts.append([dict(m) for m in messages])
        text = "\n".join(str(m.get("content")) for m in messages)
        reply = next((r for phrase, r in self.replies.items() if phrase in text), MOCKED)
        return LLMReply(text=reply, prompt_tokens=1, completion_tokens=1, model=model)


def _run(fixture: str, query: str = "", inputs: Mapping[str, Any] | None = None, replies=None):
    flow = load_flow(DSL / f"dify-fixtures__{fixture}.yml")
    client = ByPrompt(replies)
    _, records = run_conversation(flow, [{"query": query, "inputs": dict(inputs or {})}], llm=client)
    (record,) = records
    assert record.succeeded, record.error
    return flow, record, client


def _end_outputs(record) -> dict:
    """A Workflow app's outputs: those of the End node the run reached (Dify's GraphRunSucceededEvent.outputs)."""
    (end,) = [r for r in record.node_runs if r.type == "end"]
    return end.outputs


# -- Chatflows: the answer ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    "fixture,query,replies,answer",
    [
        # test_answer_end_with_text
        ("answer_end_with_text", "Hello, AI!", None, "prefixHello, AI!suffix"),
        # test_basic_chatflow
        ("basic_chatflow", "", {"": "mocked llm response"}, "mocked llm response"),
        # test_answer_nodes_emit_in_order: two Answer nodes' texts join in graph order, nothing added between.
        # Dify's test sends "" to a mocked node; a real LLM node with an empty prompt fails (No prompt found).
        (
            "test-answer-order",
            "hi",
            {"": "mocked llm text"},
            "--- answer 1 ---\n\nfoo\n--- answer 2 ---\n\nmocked llm text\n",
        ),
        # TestComplexBranchWorkflow: "hello" takes the true branch (a constant answer) and the LLM's answer follows
        (
            "test_complex_branch",
            "hello world",
            {"": "This is a mocked LLM response for hello world"},
            "contains 'hello'This is a mocked LLM response for hello world",
        ),
        (
            "test_complex_branch",
            "say hello to everyone",
            {"": "Mocked response for greeting"},
            "contains 'hello'Mocked response for greeting",
        ),
        (
            "test_complex_branch",
            "goodbye world",
            {"": "Mocked LLM response for goodbye"},
            "Mocked LLM response for goodbye",
        ),
        ("test_complex_branch", "test message", {"": "Mocked response for test"}, "Mocked response for test"),
        # test_streaming_conversation_variables: the answer reads the variable the assigner just wrote
        ("test_streaming_conversation_variables", "Hello, this is my test query", None, "Hello, this is my test query"),
        # test_streaming_conversation_variables_v1_overwrite_waits_for_assignment: never the default
        (
            "test_streaming_conversation_variables_v1_overwrite",
            "overwrite-value",
            None,
            "Current Value Of `conv_var` is:overwrite-value",
        ),
        # test_parallel_streaming_workflow: the answer's order, not the order the parallel nodes finish in
        (
            "multilingual_parallel_llm_streaming_workflow",
            "Tell me about yourself",
            {"Always speak English.": "Hello, I am an AI assistant.", "Always speak Chinese.": "你好，我是AI助手。"},
            "你好，我是AI助手。Hello, I am an AI assistant.",
        ),
    ],
)
def test_a_chatflow_answers_as_difys_graph_engine_test_expects(fixture, query, replies, answer):
    _, record, _ = _run(fixture, query, replies=replies)
    assert record.answer == answer


def test_two_system_only_prompts_in_parallel_answer_in_the_answer_nodes_order():
    """test_dify_response_stream_filter_handles_issue_170_shape (compared after strip(), as Dify's test does)."""
    _, record, client = _run(
        "response_stream_filter_issue_170_workflow",
        "1",
        replies={"by Li Bai": "Quiet Night Thought", "by Du Fu": "Spring View"},
    )
    assert record.answer.strip() == "# Du Fu\n\nSpring View\n\n# Li Bai\n\nQuiet Night Thought"
    assert len(client.prompts) == 2  # each model node called once


# -- Workflow apps: the End node's outputs -----------------------------------------------------------

_HELLO_CASES = [
    # test_if_else_workflow_true_branch / _false_branch / _edge_cases: "contains" is case-sensitive, spaces kept
    *[
        (q, "true")
        for q in ("hello world", "say hello to everyone", "hello", "hellohello", "hello123", "hello!@#", " hello ")
    ],
    *[
        (q, "false")
        for q in ("goodbye world", "hi there", "", "test message", "Hello world", "HELLO", "helllo", "helo")
    ],
]


@pytest.mark.parametrize("query,branch", _HELLO_CASES)
def test_the_hello_branching_workflow_ends_on_the_branch_difys_test_expects(query, branch):
    _, record, _ = _run("conditional_hello_branching_workflow", inputs={"query": query})
    assert _end_outputs(record) == {branch: query}


@pytest.mark.parametrize(
    "fixture,query",
    [
        ("end_node_without_value_type_field_workflow", "test query"),
        # test_echo_workflow_robustness_smoke_test and the diverse inputs of its property tests
        ("simple_passthrough_workflow", "smoke test"),
        ("simple_passthrough_workflow", ""),
        ("simple_passthrough_workflow", " " * 100),
        ("simple_passthrough_workflow", "\n\t\r\f\v"),
        ("simple_passthrough_workflow", '{"json": "like", "data": [1, 2, 3]}'),
        ("simple_passthrough_workflow", "SELECT * FROM users; DROP TABLE users;--"),
        ("simple_passthrough_workflow", "<script>alert('xss')</script>"),
        ("simple_passthrough_workflow", "../../etc/passwd"),
        ("simple_passthrough_workflow", "🎉 Ελληνικά 中文"),
    ],
)
def test_a_passthrough_workflow_echoes_its_input_exactly(fixture, query):
    _, record, _ = _run(fixture, inputs={"query": query})
    assert _end_outputs(record) == {"query": query}


def test_an_llm_node_whose_prompt_renders_empty_fails_as_dify_does():
    """The same flow with an empty query: the node's system prompt is "" and its user message is the query, so
    there is nothing to send and Dify's LLM node fails with NoPromptFoundError; the turn fails with its words."""
    from core.flow.nodes.llm import NO_PROMPT

    flow = load_flow(DSL / "dify-fixtures__test-answer-order.yml")
    _, (record,) = run_conversation(flow, [""], llm=ByPrompt())
    assert not record.succeeded and record.error == NO_PROMPT
