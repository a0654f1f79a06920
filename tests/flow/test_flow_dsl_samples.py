"""Every shared Dify DSL sample imports and runs three queries on the demo model without error."""

from __future__ import annotations

import pytest

from core.flow.graph import load_flow
from core.flow.imported import import_report
from core.flow.node_types import NODE_TYPES
from core.flow.runtime import run_conversation
from core.llm.client import LiteLLMClient
from tests.conftest import FIXTURES

DSL_FILES = sorted((FIXTURES / "dify_dsl").glob("*.yml"))
QUERIES = ["Hi, I'm Dana and my order number is 4411.", "What's my name?", "How many earlier messages can you see?"]


def required_inputs(flow) -> dict:
    """Values for the start form's required fields (Dify refuses a run without them)."""
    out = {}
    for var in flow.start.data.get("variables") or []:
        if var.get("required"):
            kind = var.get("type")
            out[var["variable"]] = var["options"][0] if kind == "select" else (1 if kind == "number" else "a topic")
    return out


@pytest.fixture(scope="module")
def client():
    return LiteLLMClient(demo_only=True)  # never a real provider, whatever keys the machine has


@pytest.mark.parametrize("path", DSL_FILES, ids=lambda p: p.name)
def test_dsl_sample_runs_three_queries_without_error(path, client):
    flow = load_flow(path)
    report = import_report(flow)
    inputs = required_inputs(flow)
    state, records = run_conversation(flow, [{"query": q, "inputs": inputs} for q in QUERIES], llm=client)
    assert [r.status for r in records] == ["succeeded"] * 3, [r.error for r in records]
    assert [r.error for r in records] == [None] * 3
    assert [r.dialogue_count for r in records] == [1, 2, 3]
    assert len(state.conversation.turns) == 3
    statuses = {n.id: n for n in report.nodes}
    for record in records:
        assert record.node_runs[0].node_id == flow.start.id
        for run in record.node_runs:
            assert statuses[run.node_id].status in ("emulated", "pass-through")
            assert run.emulated == (statuses[run.node_id].status == "emulated")
            if not run.emulated:
                assert run.outputs == {} and any("not emulated" in n for n in run.notes)
            if NODE_TYPES.get(run.type) and NODE_TYPES[run.type].dify_memory:  # LLM, classifier, extractor, agent
                assert run.ledger is not None and run.prompt and run.reply is not None
                assert run.model_called == "memlens/demo"
                assert run.usage["prompt_tokens"] > 0
        assert set(record.variables) >= {v.name for v in flow.variables}


def test_the_v1_overwrite_fixture_writes_the_query_into_the_variable_before_the_answer(client):
    flow = load_flow(FIXTURES / "dify_dsl" / "dify-fixtures__test_streaming_conversation_variables_v1_overwrite.yml")
    _, records = run_conversation(flow, ["first", "second"], llm=client)
    assert [r.answer for r in records] == [
        "Current Value Of `conv_var` is:first",
        "Current Value Of `conv_var` is:second",
    ]
    change = records[1].variable_changes[0]
    assert (change.name, change.operation, change.old, change.new, change.node_id) == (
        "conv_var",
        "over-write",
        "first",
        "second",
        "assigner",
    )


def test_a_dsl_chatflow_whose_model_has_no_key_runs_on_the_demo_model_and_says_so(monkeypatch):
    flow = load_flow(FIXTURES / "dify_dsl" / "svcvit__Artifact.yml")
    monkeypatch.delenv("VOLCENGINE_API_KEY", raising=False)  # the node's provider: its key is absent
    _, records = run_conversation(flow, ["Hello"], llm=LiteLLMClient(fallback_to_demo=True))
    run = records[0].node_run("llm")
    assert run.model == "volcengine/deepseek-v3-250324"
    assert run.model_called == "memlens/demo"
    assert any("ran on memlens/demo" in n for n in run.notes)
