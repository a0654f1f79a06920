"""The Variable Aggregator joins branches as Dify runs it: the first of its variables whose node ran."""

from __future__ import annotations

import pytest

from core.flow.errors import FlowError
from core.flow.graph import Flow, load_flow
from core.flow.imported import import_report
from core.flow.nodes.aggregator import aggregate, aggregator_settings
from core.flow.runtime import run_conversation
from core.flow.templates import MISSING
from core.llm.client import DemoClient
from tests.conftest import FIXTURES
from tests.flow.test_runtime_prompt import ScriptedClient


def routed(
    join: dict, kind: str = "variable-aggregator", answer: str = "{{#join.output#}}", code_first: bool = False
) -> Flow:
    """Turn 1 goes to LLM ``early``, later turns to LLM ``late``; both meet at ``join``. With
    ``code_first`` a code node (not emulated) runs between the start and the if-else."""
    nodes = [
        {"id": "start", "type": "start"},
        {
            "id": "check",
            "type": "if-else",
            "cases": [
                {
                    "case_id": "late",
                    "logical_operator": "and",
                    "conditions": [
                        {"variable_selector": ["sys", "dialogue_count"], "comparison_operator": "≥", "value": "2"}
                    ],
                }
            ],
        },
        {
            "id": "early",
            "type": "llm",
            "title": "Greeter",
            "model": "memlens/demo",
            "prompt_template": [{"role": "system", "text": "early"}],
        },
        {
            "id": "late",
            "type": "llm",
            "title": "Helper",
            "model": "memlens/demo",
            "prompt_template": [{"role": "system", "text": "late"}],
        },
        dict({"id": "join", "type": kind}, **join),
        {"id": "answer", "type": "answer", "answer": answer},
    ]
    edges = [
        ["start", "check"],
        ["check", "late", "late"],
        ["check", "early", "false"],
        ["early", "join"],
        ["late", "join"],
        ["join", "answer"],
    ]
    if code_first:
        nodes.append({"id": "tool", "type": "code"})
        edges[0:1] = [["start", "tool"], ["tool", "check"]]
    return Flow.from_dict({"format": "memlens-flow", "version": 1, "name": "join", "nodes": nodes, "edges": edges})


CLIENT = {"early": ["hello from early"], "late": ["late one", "late two"]}


@pytest.mark.parametrize("kind", ["variable-aggregator", "variable-assigner"])
def test_the_answer_is_the_output_of_whichever_branch_ran(kind):
    flow = routed({"variables": [["late", "text"], ["early", "text"]]}, kind)
    _, records = run_conversation(flow, ["a", "b", "c"], llm=ScriptedClient(CLIENT))
    assert [r.answer for r in records] == ["hello from early", "late one", "late two"]
    run = records[0].node_run("join")
    assert run.emulated and run.outputs == {"output": "hello from early"}
    assert run.notes == ["took early.text (Greeter ran)"]
    assert "join" not in {n.id for n in import_report(flow).pass_through}


def test_groups_each_take_their_first_variable_that_ran():
    join = {
        "advanced_settings": {
            "group_enabled": True,
            "groups": [
                {"group_name": "reply", "output_type": "string", "variables": [["early", "text"], ["late", "text"]]},
                {"group_name": "nobody", "output_type": "string", "variables": [["ghost", "text"]]},
            ],
        }
    }
    flow = routed(join, answer="[{{#join.reply.output#}}]")
    _, records = run_conversation(flow, ["a", "b"], llm=ScriptedClient(CLIENT))
    assert [r.answer for r in records] == ["[hello from early]", "[late one]"]
    assert records[1].node_run("join").outputs == {"reply": {"output": "late one"}}


def test_an_empty_value_of_a_node_that_ran_is_taken_before_a_later_variable():
    pool = {("a", "text"): "", ("b", "text"): "b"}
    settings = aggregator_settings(routed({"variables": [["a", "text"], ["b", "text"]]}).node("join"))
    outputs, taken = aggregate(settings, lambda s: tuple(s) in pool, lambda s: pool[tuple(s)])
    assert outputs == {"output": ""} and taken == [("a", "text")]
    outputs, taken = aggregate(settings, lambda s: False, lambda s: MISSING)
    assert outputs == {} and taken == []


def test_a_value_from_a_node_memlens_does_not_emulate_stays_unknown_downstream():
    flow = routed(
        {"variables": [["tool", "text"], ["early", "text"]]}, answer="got: {{#join.output#}}", code_first=True
    )
    _, (record,) = run_conversation(flow, ["a"], llm=ScriptedClient(CLIENT))
    run = record.node_run("join")
    assert run.outputs == {} and "does not emulate" in run.notes[0]
    # The code node is listed first and ran, so Dify took its value, which MemLens cannot know.
    assert (record.status, record.answer) == ("succeeded", "got: ")
    # With groups, only the group that took the unknown value loses its output.
    join = {
        "advanced_settings": {
            "group_enabled": True,
            "groups": [
                {"group_name": "raw", "output_type": "string", "variables": [["tool", "text"]]},
                {"group_name": "reply", "output_type": "string", "variables": [["early", "text"]]},
            ],
        }
    }
    _, (record,) = run_conversation(
        routed(join, answer="{{#join.reply.output#}}", code_first=True), ["a"], llm=ScriptedClient(CLIENT)
    )
    run = record.node_run("join")
    assert run.outputs == {"reply": {"output": "hello from early"}} and record.answer == "hello from early"
    assert run.notes == [
        "took tool.text (tool ran): its value comes from a node MemLens does not emulate",
        "took early.text (Greeter ran)",
    ]


@pytest.mark.parametrize(
    "join, message",
    [
        ({"variables": "early.text"}, "variables must be a list of variable selectors"),
        ({"variables": [["early"]]}, "not a selector"),
        ({"advanced_settings": {"group_enabled": True, "groups": [{"variables": []}]}}, "needs a group_name"),
        ({"advanced_settings": {"group_enabled": True, "groups": "x"}}, "groups must be a list"),
        ({"advanced_settings": "on"}, "advanced_settings must be a mapping"),
    ],
)
def test_a_malformed_aggregator_is_refused_when_the_flow_is_read(join, message):
    with pytest.raises(FlowError, match=message) as e:
        routed(join)
    assert "'join'" in str(e.value)


def test_the_memory_test_sample_answers_through_its_aggregator():
    flow = load_flow(FIXTURES / "dify_dsl" / "svcvit__记忆测试.yml")
    _, records = run_conversation(flow, ["Hi, I am Dana", "What is my name?"], llm=DemoClient())
    assert all(r.answer for r in records)
    assert records[1].answer == records[1].node_run("1726647065155").reply
