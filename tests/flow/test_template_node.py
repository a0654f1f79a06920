"""The Template node (template-transform) renders its Jinja2 template as Dify runs it."""

from __future__ import annotations

import pytest

from core.flow.errors import FlowError
from core.flow.graph import Flow, load_flow
from core.flow.imported import import_report
from core.flow.runtime import run_conversation
from core.limits import TEMPLATE_TRANSFORM_MAX_LENGTH
from core.llm.client import DemoClient
from tests.conftest import FIXTURES
from tests.flow.test_runtime_prompt import ScriptedClient


def templated(template, variables=None, *, code_first: bool = False, answer="{{#tpl.output#}}") -> Flow:
    """start → LLM ``llm`` → template ``tpl`` (reading the query and the reply) → answer."""
    if variables is None:
        variables = [
            {"variable": "reply", "value_selector": ["llm", "text"]},
            {"variable": "query", "value_selector": ["sys", "query"]},
            {"variable": "gone", "value_selector": ["nowhere", "text"]},
        ]
    nodes = [
        {"id": "start", "type": "start"},
        {
            "id": "llm",
            "type": "llm",
            "model": "memlens/demo",
            "prompt_template": [{"role": "system", "text": "Be kind."}],
        },
        {"id": "tpl", "type": "template-transform", "template": template, "variables": variables},
        {"id": "answer", "type": "answer", "answer": answer},
    ]
    edges = [["start", "llm"], ["llm", "tpl"], ["tpl", "answer"]]
    if code_first:
        nodes.append({"id": "tool", "type": "code"})
        edges[0:1] = [["start", "tool"], ["tool", "llm"]]
    return Flow.from_dict({"format": "memlens-flow", "version": 1, "name": "tpl", "nodes": nodes, "edges": edges})


def test_the_template_renders_its_variables_and_an_absent_one_is_none():
    flow = templated("{{ query | upper }} → {{ reply }} ({{ gone is none }})")
    _, (record,) = run_conversation(flow, ["hello"], llm=ScriptedClient(["hi there"]))
    assert record.answer == "HELLO → hi there (True)"
    assert record.node_run("tpl").outputs == {"output": "HELLO → hi there (True)"}
    assert "tpl" in {n.id for n in import_report(flow).emulated}


def test_a_rendering_error_fails_the_node_and_the_turn_with_its_message():
    _, (record,) = run_conversation(templated("{{ reply.nope() }}"), ["q"], llm=ScriptedClient(["x"]))
    run = record.node_run("tpl")
    assert run.status == "failed" and run.error.startswith("UndefinedError")
    assert record.status == "failed"


def test_an_output_over_difys_length_fails_the_node():
    flow = templated("{{ reply * %d }}" % (TEMPLATE_TRANSFORM_MAX_LENGTH + 1))
    _, (record,) = run_conversation(flow, ["q"], llm=ScriptedClient(["x"]))
    assert record.node_run("tpl").error == f"Output length exceeds {TEMPLATE_TRANSFORM_MAX_LENGTH} characters"
    flow = templated("{{ reply * %d }}" % TEMPLATE_TRANSFORM_MAX_LENGTH)
    _, (record,) = run_conversation(flow, ["q"], llm=ScriptedClient(["x"]))
    assert record.status == "succeeded" and len(record.answer) == TEMPLATE_TRANSFORM_MAX_LENGTH


def test_a_value_from_a_node_memlens_does_not_emulate_leaves_the_output_unknown():
    flow = templated(
        "[{{ data }}]",
        [{"variable": "data", "value_selector": ["tool", "result"]}],
        code_first=True,
        answer="got {{#tpl.output#}}",
    )
    _, (record,) = run_conversation(flow, ["q"], llm=ScriptedClient(["x"]))
    run = record.node_run("tpl")
    assert run.outputs == {} and "does not emulate" in run.notes[0]
    assert (record.status, record.answer) == ("succeeded", "got ")


@pytest.mark.parametrize(
    "template, variables, message",
    [
        (["not text"], [], "'template' must be text"),
        ("x", "reply", "'variables' must be a list"),
        ("x", [{"variable": "", "value_selector": []}], r"variables\[0\] needs a 'variable' name"),
        ("x", [{"variable": "a", "value_selector": "llm.text"}], r"variables\[0\] needs"),
    ],
)
def test_a_malformed_template_node_is_refused_when_the_flow_is_read(template, variables, message):
    with pytest.raises(FlowError, match=message) as e:
        templated(template, variables)
    assert "'tpl'" in str(e.value)


def test_the_game_sample_answers_with_its_rendered_template():
    flow = load_flow(FIXTURES / "dify_dsl" / "svcvit__完蛋！我被LLM包围了！（战绩排行版）.yml")
    _, (record,) = run_conversation(flow, ["hello"], llm=DemoClient())
    assert record.status == "succeeded"
    # Its game state comes from a template, joined by an aggregator, then tested by an if-else.
    assert record.node_run("1736306700014").outputs == {"output": "pending"}
    assert record.node_run("1736306267206").outputs == {"output": "pending"}
    assert record.answer.startswith("<div>")  # the "not started yet" answer, as the game begins
