"""A Dify Agent app export (``app.mode: agent-chat``) run as its agent runner's first model call: the
runner Dify picks (the export's strategy, then the model's tool calling), the instruction as that
runner sends it, the history as ``dify_agent`` replays it, and the conversation's Dify profile."""

from __future__ import annotations

import copy
import json
import types

import pytest
import yaml

from core.flow.errors import FlowError
from core.flow.granularity import granularity_line
from core.flow.graph import Flow, load_flow, parse_flow
from core.flow.node_memory import node_memory_config
from core.flow.runtime import run_conversation
from core.flow.what_if import what_if_ledger, what_if_prompt
from core.io.readers.dify_messages import dify_turn
from core.llm import client as llm_client
from core.llm.client import DemoClient, LiteLLMClient
from core.model.conversation import Conversation
from core.model.ledger import KEPT, OVER_BUDGET, REWRITTEN
from tests.conftest import ROOT
from tests.flow.test_runtime_prompt import FailsOn

SAMPLE = ROOT / "sample_data" / "flows" / "agent-app.yml"
QUERIES = ROOT / "sample_data" / "flows" / "agent-app.queries.json"
#: litellm's map: gpt-4o-mini calls tools, deepseek-reasoner does not, acme's thinker-1 is not in it.
TOOLS = {"provider": "openai", "name": "gpt-4o-mini", "mode": "chat", "completion_params": {"max_tokens": 256}}
NO_TOOLS = {
    "provider": "deepseek",
    "name": "deepseek-reasoner",
    "mode": "chat",
    "completion_params": {"max_tokens": 256},
}
UNKNOWN = {"provider": "acme", "name": "thinker-1", "mode": "chat", "completion_params": {"max_tokens": 256}}
FORM = [{"text-input": {"label": "Name", "variable": "name", "required": False, "max_length": 48, "default": ""}}]
HEAD_FC = (
    "a Dify Agent app: run as its function-calling agent's first model call — the instruction as the system "
    "message, then the history as that runner sends it (memory dify_agent), then the query"
)
REACT_PROMPT = (
    "Dify writes the instruction into its ReAct prompt with the tools' descriptions; that prompt is not "
    "sent here, so the budget shown is larger than Dify's by its size"
)
OLD_DSL = "DSL version 0.1.5 is older than 0.6.0: read with Dify's defaults for newer fields"


def doubt(model: str) -> str:
    return (
        f"MemLens does not know whether {model} calls tools: run with the export's strategy, ReAct; Dify runs "
        f"function calling for a model that calls tools (choose it as the agent runner in the config editor)"
    )


def agent_app(
    pre_prompt: str = "You help {{name}} with orders.",
    *,
    model=None,
    strategy="function_call",
    tools=(),
    agent_mode=None,
    **config,
) -> dict:
    """An Agent app export, as Dify writes one."""
    mode = (
        agent_mode
        if agent_mode is not None
        else {"enabled": True, "strategy": strategy, "max_iteration": 5, "tools": list(tools)}
    )
    return {
        "app": {"mode": "agent-chat", "name": "Order agent", "description": "Looks orders up"},
        "kind": "app",
        "version": "0.1.5",
        "model_config": {
            "model": copy.deepcopy(model or TOOLS),
            "pre_prompt": pre_prompt,
            "prompt_type": "simple",
            "user_input_form": copy.deepcopy(FORM),
            "opening_statement": "Order number?",
            "agent_mode": mode,
            "dataset_configs": {"datasets": {"datasets": []}},
            **config,
        },
    }


def tool(name: str, enabled: bool = True) -> dict:
    return {
        "enabled": enabled,
        "provider_id": name,
        "provider_name": name,
        "provider_type": "builtin",
        "tool_label": name.title(),
        "tool_name": name,
        "tool_parameters": {},
    }


def read(doc: dict) -> Flow:
    return parse_flow(yaml.safe_dump(doc, allow_unicode=True), "agent.yml")


def ask(flow: Flow, queries, **kwargs):
    return run_conversation(
        flow, [{"query": q, "inputs": {"name": "Dana"}} for q in queries], llm=DemoClient(), **kwargs
    )


def test_the_export_reads_as_one_agent_between_start_and_answer():
    flow = read(agent_app(tools=[tool("google_search")]))
    assert [(n.id, n.type) for n in flow.nodes] == [("start", "start"), ("agent", "tool-agent"), ("answer", "answer")]
    assert [(e.source, e.target) for e in flow.edges] == [("start", "agent"), ("agent", "answer")]
    assert flow.name == "Order agent" and flow.description == "Looks orders up"
    assert flow.is_chat and flow.app_mode == flow.source["app_mode"] == "agent-chat"
    assert flow.features == {"opening_statement": "Order number?"}
    assert flow.node("agent").data == {
        "type": "tool-agent",
        "title": "Agent",
        "model": {"provider": "openai", "name": "gpt-4o-mini"},
        "system_prompt": "You help {{name}} with orders.",
        "system_prompt_fill": "none",
        "tools": [],
        "memory": {"strategy": "dify_agent", "agent_strategy": "function_call", "max_tokens": 256},
    }
    assert flow.warnings == [HEAD_FC, "its 1 tool (google_search) not run: the model answers without it", OLD_DSL]
    assert (flow.start.title, flow.node("answer").title) == ("Start", "Answer")
    assert flow.node("answer").data["answer"] == "{{#agent.text#}}"
    assert flow.start.data["variables"] == [
        {"variable": "name", "label": "Name", "type": "text-input", "required": False, "max_length": 48}
    ]
    config = node_memory_config(flow, "agent")
    assert (config.strategy, config.settings.agent_strategy, config.model, config.max_tokens) == (
        "dify_agent",
        "function_call",
        "openai/gpt-4o-mini",
        256,
    )


@pytest.mark.parametrize(
    "strategy, model, runner, unsure",
    [
        ("function_call", NO_TOOLS, "function_call", False),
        ("react", TOOLS, "function_call", False),  # a model that calls tools runs function calling
        ("cot", TOOLS, "function_call", False),
        ("react", NO_TOOLS, "react", False),
        ("cot", NO_TOOLS, "react", False),
        ("react", UNKNOWN, "react", True),
        ("function_call", UNKNOWN, "function_call", False),
        ("old", {**UNKNOWN, "provider": "openai"}, "function_call", False),  # an older app: OpenAI's function calling
        ("old", {**UNKNOWN, "provider": "langgenius/openai/openai"}, "function_call", False),
        ("old", UNKNOWN, "react", True),
        ("old", NO_TOOLS, "react", False),
        ("react", {**UNKNOWN, "provider": "openai"}, "react", True),  # the export's ReAct, whoever the provider
        ("cot", {**UNKNOWN, "provider": "openai"}, "react", True),
    ],
)
def test_dify_picks_the_runner_from_the_export_s_strategy_then_the_model(strategy, model, runner, unsure):
    flow = read(agent_app(model=model, strategy=strategy))
    assert node_memory_config(flow, "agent").settings.agent_strategy == runner
    name = node_memory_config(flow, "agent").model
    assert (doubt(name) in flow.warnings) is unsure
    assert (REACT_PROMPT in flow.warnings) is (runner == "react")
    words = "function-calling" if runner == "function_call" else "ReAct"
    assert flow.warnings[0].startswith(f"a Dify Agent app: run as its {words} agent's first model call")


ROUTERLESS = (
    "agent.yml: 'model_config.agent_mode' needs 'enabled' and a strategy (function_call or react), "
    "without which Dify makes no agent and fails every call: choose the agent's mode in Dify and export the "
    "app again"
)


@pytest.mark.parametrize(
    "change, message",
    [
        ({"agent_mode": {}}, ROUTERLESS),
        ({"agent_mode": {"strategy": "react", "tools": []}}, ROUTERLESS),
        ({"agent_mode": {"enabled": True, "tools": []}}, ROUTERLESS),
        ({"agent_mode": {"enabled": True, "strategy": "router"}}, ROUTERLESS),
        ({"agent_mode": {"enabled": True, "strategy": "react_router"}}, ROUTERLESS),
        (
            {"model": {**NO_TOOLS, "mode": "completion"}},
            "agent.yml: this agent runs ReAct on a completion model, whose history Dify writes into its own prompt template, "
            "which MemLens does not emulate; choose a chat model for the agent in Dify",
        ),
        (
            {"model": {"provider": "openai"}},
            "agent.yml: 'model_config.model' must name the agent's model (provider, name, mode)",
        ),
        (
            {"pre_prompt": ["not", "text"]},
            "agent.yml: 'model_config.pre_prompt' (the agent's instruction) must be text",
        ),
        ({"user_input_form": "name"}, "agent.yml: 'model_config.user_input_form' must be a list of form fields"),
    ],
)
def test_an_app_dify_could_not_run_or_memlens_does_not_emulate_is_refused_in_one_line(change, message):
    doc = agent_app(strategy="react")
    if "agent_mode" in change:
        doc["model_config"]["agent_mode"] = change["agent_mode"]
    else:
        doc["model_config"].update(change)
    with pytest.raises(FlowError) as e:
        read(doc)
    assert str(e.value) == message


def test_an_app_without_a_model_config_is_refused_and_a_completion_model_that_calls_tools_is_run():
    doc = agent_app()
    del doc["model_config"]
    with pytest.raises(FlowError, match="needs a 'model_config' mapping"):
        read(doc)
    flow = read(agent_app(model={**TOOLS, "mode": "completion"}, strategy="react"))
    assert (
        node_memory_config(flow, "agent").settings.agent_strategy == "function_call"
    )  # the function-calling runner chats


def test_what_an_export_leaves_out_takes_dify_s_defaults():
    doc = agent_app("", model={"name": "gpt-4o-mini"}, strategy="react")
    del doc["model_config"]["pre_prompt"]
    flow = read(doc)
    config = node_memory_config(flow, "agent")
    # No provider: the model's own name; no max_tokens: none reserved; no mode: a chat model.
    assert (config.model, config.max_tokens, config.settings.agent_strategy) == ("gpt-4o-mini", 0, "function_call")
    _, [record] = ask(flow, ["Hi"])
    assert [m.role for m in record.node_run("agent").prompt] == ["user"]  # no instruction: no system message
    react = read(agent_app(model={"provider": "deepseek", "name": "deepseek-reasoner"}, strategy="react"))
    assert node_memory_config(react, "agent").settings.agent_strategy == "react"  # not refused as a completion model


def test_the_app_s_own_line_comes_before_what_its_form_says():
    doc = agent_app()
    doc["model_config"]["user_input_form"].append({"signature": {"variable": "sig"}})
    assert read(doc).warnings == [
        HEAD_FC,
        "form field 2 has type 'signature', which MemLens does not know: left out of the form",
        OLD_DSL,
    ]


def test_function_calling_sends_the_instruction_as_written_and_react_fills_the_inputs():
    prompt = "You help {{name}} ({{age}}) with orders ({{shop}}) about {{#sys.query#}}."
    doc = agent_app(prompt)
    doc["model_config"]["user_input_form"].append({"number": {"label": "Age", "variable": "age", "required": False}})
    (_, [fc]) = ask(read(doc), ["Hi"])
    assert fc.node_run("agent").prompt[0].to_dict()["content"] == prompt
    doc = agent_app(prompt, model=NO_TOOLS, strategy="react")
    doc["model_config"]["user_input_form"].append({"number": {"label": "Age", "variable": "age", "required": False}})
    (_, [react]) = ask(read(doc), ["Hi"])
    # Each input's slot holds str() of its value — None for an input given nothing and without a default, as in
    # Dify; a slot that is no input and a workflow selector stay as written.
    assert (
        react.node_run("agent").prompt[0].to_dict()["content"]
        == "You help Dana (None) with orders ({{shop}}) about {{#sys.query#}}."
    )
    (_, [given]) = run_conversation(
        read(doc), [{"query": "Hi", "inputs": {"name": "{{age}}", "age": "7.5"}}], llm=DemoClient()
    )
    # In form order: a name that holds another slot is filled by the inputs after it, as Dify's loop does.
    assert (
        given.node_run("agent").prompt[0].to_dict()["content"]
        == "You help 7.5 (7.5) with orders ({{shop}}) about {{#sys.query#}}."
    )


def test_a_logged_turn_re_scored_under_a_react_export_fills_the_instruction_with_the_inputs_it_was_logged_with():
    flow = read(agent_app("You help {{name}}; {{#sys.query#}} stays.", model=NO_TOOLS, strategy="react"))
    conv = Conversation(
        id="c",
        turns=[
            dify_turn(
                {
                    "id": f"m{i}",
                    "query": f"question {i}",
                    "answer": f"answer {i}",
                    "inputs": {"name": "Dana"},
                    "agent_thoughts": [{"position": 1, "thought": f"answer {i}"}],
                }
            )
            for i in range(2)
        ],
    )
    ledger = what_if_ledger(flow, conv, 1, "agent")
    system = what_if_prompt(flow, conv, 1, "agent", [], ledger)[0]
    assert (system["role"], system["content"]) == ("system", "You help Dana; {{#sys.query#}} stays.")


def _sent(record) -> list[tuple[str, str]]:
    return [(m.role, m.to_dict()["content"]) for m in record.node_run("agent").prompt]


def test_each_runner_sends_the_history_as_dify_s_runner_does():
    queries = ["Hi, I am Dana.", "What is my name?"]
    _, (first, second) = ask(read(agent_app()), queries)
    assert _sent(second) == [
        ("system", "You help {{name}} with orders."),
        ("user", queries[0]),
        ("assistant", first.answer),
        ("user", queries[1]),
    ]
    assert [e.reason for e in second.node_run("agent").ledger.entries] == [KEPT, KEPT]
    _, (first, second) = ask(read(agent_app(model=NO_TOOLS, strategy="react")), queries)
    # ReAct: the earlier answer is its round's scratchpad, a final answer.
    assert _sent(second) == [
        ("system", "You help Dana with orders."),
        ("user", queries[0]),
        ("assistant", f"Final Answer: {first.answer}"),
        ("user", queries[1]),
    ]
    assert [e.reason for e in second.node_run("agent").ledger.entries] == [KEPT, REWRITTEN]
    run = second.node_run("agent")
    assert run.memory["agent_strategy"] == "react" and granularity_line(run) == ""  # no granularity applies


def test_a_failed_turn_s_empty_thought_is_sent_by_both_runners_as_dify_s_runner_replays_it():
    """Dify's runner records a thought before each model request, so a turn whose request failed has
    one, empty: its history replays that thought (an empty assistant message; under ReAct an empty
    final answer) where a turn with no thought would leave its empty answer out."""
    queries = [{"query": "boom, where is 4411?", "inputs": {"name": "Dana"}}, {"query": "Hello?", "inputs": {}}]
    for doc, sent_for_failed in ((agent_app(), ""), (agent_app(model=NO_TOOLS, strategy="react"), "Final Answer: ")):
        flow = read(doc)
        _, (failed, second) = run_conversation(flow, queries, llm=FailsOn("boom", ["Hi."]))
        assert (failed.status, failed.answer, failed.agent_thoughts) == ("failed", "", 1)
        assert second.agent_thoughts == 1 and failed.to_turn().meta["agent_thoughts"] == 1
        assert _sent(second)[1:] == [("user", queries[0]["query"]), ("assistant", sent_for_failed), ("user", "Hello?")]
        assert len(second.node_run("agent").ledger.entries) == 2  # the empty answer is sent, not left out
    # A Chatflow's agent node records no thought on the message (its history is the LLM node's).
    _, (record,) = run_conversation(
        load_flow(ROOT / "sample_data" / "flows" / "agent-tools.yml"), ["Hi"], llm=DemoClient()
    )
    assert record.ran("agent") and record.agent_thoughts == 0 and "agent_thoughts" not in record.to_dict()
    assert "agent_thoughts" not in record.to_turn().meta


def test_the_conversation_s_token_counting_sets_the_agent_s_budget():
    # thinker-1 has no context size in the map: Dify's limit is then 2,000 tokens less max_tokens and the query.
    queries = [f"Note {i}: " + "parcel " * 500 for i in range(5)]
    flow = read(agent_app(model=UNKNOWN))
    _, records = ask(flow, queries)
    assert {e.reason for e in records[-1].node_run("agent").ledger.entries} == {KEPT}
    _, records = ask(flow, queries, plugin_token_counting=True)
    run = records[-1].node_run("agent")
    reasons = [e.reason for e in run.ledger.entries]
    assert run.memory["plugin_token_counting"] is True
    assert reasons[0] == OVER_BUDGET and reasons[-1] == KEPT and set(reasons) == {KEPT, OVER_BUDGET}


def test_an_agent_node_s_own_counting_setting_wins_and_other_memories_take_no_dify_profile():
    nodes = [
        {"id": "start", "type": "start"},
        {
            "id": "own",
            "type": "tool-agent",
            "tools": [],
            "memory": {"strategy": "dify_agent", "plugin_token_counting": False},
        },
        {"id": "buffer", "type": "tool-agent", "tools": [], "memory": {"strategy": "buffer"}},
        {"id": "dify", "type": "tool-agent", "tools": [], "memory": {"strategy": "dify", "window": 5}},
        {"id": "answer", "type": "answer", "answer": "{{#own.text#}} {{#buffer.text#}} {{#dify.text#}}"},
    ]
    flow = Flow.from_dict(
        {
            "format": "memlens-flow",
            "version": 1,
            "name": "three agents",
            "mode": "advanced-chat",
            "nodes": nodes,
            "edges": [["start", "own"], ["own", "buffer"], ["buffer", "dify"], ["dify", "answer"]],
        }
    )
    assert node_memory_config(flow, "own", plugin_token_counting=True).settings.plugin_token_counting is False
    dify = node_memory_config(flow, "dify", plugin_token_counting=True, fidelity="documented")
    assert (dify.settings.plugin_token_counting, dify.settings.fidelity) == (
        True,
        "documented",
    )  # Dify's LLM-node memory too
    assert (
        node_memory_config(flow, "buffer", plugin_token_counting=True, fidelity="documented").to_dict()
        == node_memory_config(flow, "buffer").to_dict()
    )
    dify = read(agent_app())
    # The Agent app's memory takes the profile's token counting; it has no fidelity of its own to take.
    assert node_memory_config(dify, "agent", plugin_token_counting=True, fidelity="documented").to_dict() == {
        **node_memory_config(dify, "agent").to_dict(),
        "plugin_token_counting": True,
    }


def test_tools_knowledge_and_moderation_are_named_as_not_run():
    doc = agent_app(
        tools=[
            tool("google_search"),
            tool("wikipedia"),
            tool("off", enabled=False),
            {"dataset": {"enabled": True, "id": "d1"}},
            {"enabled": True, "tool_name": "short"},
            {"enabled": True, "provider_id": "p", "provider_type": "builtin", "tool_name": "four"},
        ],
        sensitive_word_avoidance={"enabled": True, "type": "keywords"},
    )
    assert read(doc).warnings[1:] == [
        "its 3 tools (google_search, wikipedia, four) not run: the model answers without them",
        "its knowledge (1 dataset) is not retrieved: the prompt is sent without the context Dify would add",
        "its moderation is not run: every query reaches the model",
        OLD_DSL,
    ]


def test_the_sample_agent_app_runs_its_queries_and_remembers_the_order_number():
    flow = load_flow(SAMPLE)
    assert (
        flow.app_mode == "agent-chat" and node_memory_config(flow, "agent").settings.agent_strategy == "function_call"
    )
    queries = json.loads(QUERIES.read_text(encoding="utf-8"))
    _, records = ask(flow, queries)
    assert all(r.succeeded for r in records) and "4411" in records[-1].answer
    assert len(records[-1].node_run("agent").ledger.entries) == 2 * (len(queries) - 1)


def test_an_agent_without_tools_asks_a_real_model_without_a_tool_list(monkeypatch):
    sent = []

    def completion(**kwargs):
        sent.append(kwargs)
        message = types.SimpleNamespace(content="hello", tool_calls=None)
        return types.SimpleNamespace(choices=[types.SimpleNamespace(message=message)], usage=None)

    monkeypatch.setattr(llm_client, "_litellm", lambda: types.SimpleNamespace(completion=completion))
    monkeypatch.setattr(LiteLLMClient, "route", lambda self, model: (model, ""))
    client = LiteLLMClient()
    assert client.complete_tools("openai/gpt-4o-mini", [{"role": "user", "content": "hi"}], []).text == "hello"
    schema = {"type": "function", "function": {"name": "lookup", "parameters": {"type": "object"}}}
    client.complete_tools("openai/gpt-4o-mini", [{"role": "user", "content": "hi"}], [schema])
    assert "tools" not in sent[0] and sent[1]["tools"] == [schema]
