"""Dify's plugin Agent node (``type: agent``): its memory's history handed to its strategy with the
classifier's window rule and a fixed 2,000-token budget, laid out as ``function_calling`` sends it."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from core.analysis.debug_view import receipt
from core.flow.errors import FlowError
from core.flow.graph import Flow, load_flow
from core.flow.imported import import_report
from core.flow.node_memory import node_memory_config
from core.flow.nodes.plugin_agent import (
    AGENT_HISTORY_BUDGET,
    TEMPLATE,
    VARIABLE,
    AgentInput,
    agent_frame,
    agent_notes,
    plugin_agent_settings,
)
from core.flow.records import FAILED
from core.flow.runtime import run_conversation
from core.flow.what_if import what_if_ledger, what_if_prompt
from core.llm.client import DemoClient
from core.model.conversation import Conversation
from core.model.ledger import KEPT, OUTSIDE_WINDOW, OVER_BUDGET
from core.model.tokens import DEFAULT_HISTORY_BUDGET, counter_for
from tests.flow.test_runtime_prompt import FailsOn, ScriptedClient

ROOT = Path(__file__).resolve().parents[2]
MODEL = {
    "provider": "langgenius/openai/openai",
    "model": "gpt-4o-mini",
    "mode": "chat",
    "model_type": "llm",
    "type": "model-selector",
    "completion_params": {},
}
SEARCH = {
    "enabled": True,
    "provider_name": "langgenius/duckduckgo/duckduckgo",
    "tool_name": "ddgo_search",
    "type": "builtin",
    "parameters": {},
}


def agent(
    memory: dict | None = None,
    *,
    instruction: dict | None = None,
    query: dict | None = None,
    model: dict | None = None,
    tools=(SEARCH,),
    strategy: str = "function_calling",
    **params,
) -> Flow:
    """Start → Dify Agent node → an answer that shows its text."""
    parameters = {
        "model": {"type": "constant", "value": model or MODEL},
        "instruction": instruction or {"type": "constant", "value": "You plan trips."},
        "query": query or {"type": "constant", "value": "{{#sys.query#}}"},
        "tools": {"type": "constant", "value": [dict(t) for t in tools]},
        "maximum_iterations": {"type": "constant", "value": 3},
        **params,
    }
    node = {
        "id": "ag",
        "type": "agent",
        "title": "Planner",
        "agent_strategy_name": strategy,
        "agent_strategy_provider_name": "langgenius/agent/agent",
        "agent_parameters": parameters,
    }
    if memory is not None:
        node["memory"] = memory
    nodes = [{"id": "start", "type": "start"}, node, {"id": "answer", "type": "answer", "answer": "{{#ag.text#}}"}]
    return Flow.from_dict(
        {
            "format": "memlens-flow",
            "version": 1,
            "name": "trip",
            "nodes": nodes,
            "edges": [["start", "ag"], ["ag", "answer"]],
        }
    )


QUERIES = ["My destination is Lisbon.", "I travel in May.", "Find me a quiet hotel.", "What is my destination?"]


def test_memory_hands_the_strategy_earlier_turns_and_a_small_window_loses_them():
    _, wide = run_conversation(agent({"window": {"enabled": True, "size": 5}}), QUERIES, llm=DemoClient())
    assert "Lisbon" in wide[-1].answer
    # Three rows, one of them the turn's own placeholder: two earlier turns, so turn 1 is gone by turn 4.
    _, narrow = run_conversation(agent({"window": {"enabled": True, "size": 3}}), QUERIES, llm=DemoClient())
    assert narrow[-1].answer == "I don't know your destination — it is not in what I was given."
    run = narrow[-1].node_run("ag")
    assert [(e.turn, e.reason) for e in run.ledger.entries] == [
        (1, OUTSIDE_WINDOW),
        (1, OUTSIDE_WINDOW),
        (2, KEPT),
        (2, KEPT),
        (3, KEPT),
        (3, KEPT),
    ]
    assert run.memory["history_budget"] == AGENT_HISTORY_BUDGET == DEFAULT_HISTORY_BUDGET
    assert "prompt_reserve" not in run.memory and "history_as_text" not in run.memory
    assert run.outputs == {"text": narrow[-1].answer, "usage": run.outputs["usage"], "files": [], "json": []}
    assert run.outputs["usage"]["prompt_tokens"] > 0


def test_the_prompt_is_the_instruction_the_history_then_the_query():
    flow = agent(
        {"window": {"enabled": True, "size": 5}}, instruction={"type": "mixed", "value": "Plan for {{#sys.user_id#}}."}
    )
    _, records = run_conversation(flow, QUERIES[:2], llm=ScriptedClient(["Lisbon noted.", "May noted."]), user_id="ana")
    run = records[1].node_run("ag")
    assert [(m.role, m.origin, m.content) for m in run.prompt] == [
        ("system", "system", "Plan for ana."),
        ("user", "memory history", "My destination is Lisbon."),
        ("assistant", "memory history", "Lisbon noted."),
        ("user", "current query", "I travel in May."),
    ]
    assert records[1].answer == "May noted."


def test_without_memory_only_the_instruction_and_the_query_go():
    _, records = run_conversation(agent(), QUERIES[:2], llm=DemoClient())
    run = records[1].node_run("ag")
    assert [m.content for m in run.prompt] == ["You plan trips.", "I travel in May."]
    assert run.memory["strategy"] == "off" and not any(e.kept for e in run.ledger.entries)


def test_a_variable_input_is_read_as_it_is_and_a_missing_one_fails_the_node():
    flow = agent(
        query={"type": "variable", "value": ["sys", "query"]},
        instruction={"type": "variable", "value": ["sys", "user_id"]},
    )
    _, records = run_conversation(flow, ["Hello"], llm=ScriptedClient(["Hi"]), user_id="ana")
    assert [m.content for m in records[0].node_run("ag").prompt] == ["ana", "Hello"]
    missing = agent(query={"type": "variable", "value": ["nowhere", "text"]})
    _, failed = run_conversation(missing, ["Hello"], llm=ScriptedClient(["Hi"]))
    assert failed[0].status == FAILED
    assert failed[0].node_run("ag").error == (
        "agent parameter 'query' reads the variable nowhere.text, which does not exist"
    )


def test_an_agent_with_nothing_to_send_fails_and_a_failed_call_fails_the_node():
    empty = agent(instruction={"type": "constant", "value": ""}, query={"type": "constant", "value": ""})
    _, records = run_conversation(empty, ["Hello"], llm=ScriptedClient(["Hi"]))
    assert records[0].node_run("ag").error == (
        "the node has nothing to send to its model: no instruction, no query and no history"
    )
    _, down = run_conversation(agent(), ["boom"], llm=FailsOn("boom", []))
    assert down[0].status == FAILED and down[0].node_run("ag").error == "the provider is down"


def test_a_failed_turns_empty_answer_is_sent_to_the_agent_as_an_empty_message():
    """No filter runs between Dify's memory and the agent's strategy: the empty answer a failed turn
    left is in the history it sends (the LLM node's filter drops it: ``empty``)."""
    flow = agent({"window": {"enabled": True, "size": 5}})
    state, records = run_conversation(flow, ["one", "boom", "three"], llm=FailsOn("boom", ["A1", "A3"]))
    assert records[1].status == FAILED
    run = records[2].node_run("ag")
    assert [(e.turn, e.role, e.reason) for e in run.ledger.entries] == [
        (1, "user", KEPT),
        (1, "assistant", KEPT),
        (2, "user", KEPT),
        (2, "assistant", KEPT),
    ]
    assert run.memory["sends_empty"] is True
    assert [(m.role, m.content) for m in run.prompt] == [
        ("system", "You plan trips."),
        ("user", "one"),
        ("assistant", "A1"),
        ("user", "boom"),
        ("assistant", ""),
        ("user", "three"),
    ]
    assert run.ledger.history_tokens == sum(m.tokens for m in run.prompt[1:5])
    # A what-if rebuilds the same prompt, the empty message kept, from the record and without it.
    conv = state.conversation
    recorded = [m.to_dict() for m in run.prompt]
    ledger = what_if_ledger(flow, conv, 2, "ag", record=records[2])
    assert ledger == run.ledger
    assert what_if_prompt(flow, conv, 2, "ag", recorded, ledger) == recorded
    bare = Conversation(id="c", turns=[replace(t, meta={}) for t in conv.turns])
    assert what_if_prompt(flow, bare, 2, "ag", [], what_if_ledger(flow, bare, 2, "ag")) == recorded


def test_its_notes_say_what_is_not_emulated():
    _, records = run_conversation(
        agent(
            strategy="ReAct",
            tools=(SEARCH, dict(SEARCH, tool_name="maps"), dict(SEARCH, tool_name="off", enabled=False)),
        ),
        ["Hello"],
        llm=ScriptedClient(["Hi"]),
    )
    notes = records[0].node_run("ag").notes
    assert notes[:2] == [
        "its strategy is 'ReAct': MemLens sends function_calling's layout (the instruction, the history, the query); "
        "the history is the same, its strategy's own wording is not emulated",
        "its tools are not called (ddgo_search, maps): MemLens's model client has none, so the reply is the "
        "model's first answer",
    ]
    assert agent_notes(plugin_agent_settings(agent(tools=()).node("ag"))) == []
    assert agent_notes(plugin_agent_settings(agent(tools=(), strategy="").node("ag"))) == [
        "its strategy is not named: MemLens sends function_calling's layout (the instruction, the history, the "
        "query); the history is the same, its strategy's own wording is not emulated"
    ]


def test_the_window_is_read_as_the_classifier_reads_it_in_each_profile():
    memory = {"window": {"enabled": False, "size": 2}}
    _, shipped = run_conversation(agent(memory), QUERIES, llm=DemoClient())
    _, documented = run_conversation(agent(memory), QUERIES, llm=DemoClient(), fidelity="documented")
    assert [e.turn for e in shipped[-1].node_run("ag").ledger.entries if e.kept] == [3, 3]
    assert [e.turn for e in documented[-1].node_run("ag").ledger.entries if e.kept] == [1, 1, 2, 2, 3, 3]
    label = import_report(agent(memory)).llm_memory["ag"]["label"]
    assert label.startswith("window 2 turns (its window is switched off, but Dify as shipped reads the size")


def long_turns(model=None):
    """Three turns of about 900 tokens and a short fourth, token counting on: the 2,000-token budget
    holds two of them whatever the model's context."""
    flow = agent({"window": {"enabled": True, "size": 10}}, model=model)
    words = "word " * 900
    state, records = run_conversation(
        flow,
        [f"one {words}", f"two {words}", f"three {words}", "four"],
        llm=ScriptedClient(["ok"] * 4),
        plugin_token_counting=True,
    )
    return flow, state, records


@pytest.mark.parametrize("context_model", ["gpt-4o-mini", "gpt-4"])
def test_with_token_counting_on_the_budget_is_2000_tokens_whatever_the_context(context_model):
    flow, _, records = long_turns(dict(MODEL, model=context_model, completion_params={"max_tokens": 100}))
    ledger = records[-1].node_run("ag").ledger
    assert ledger.budget == 2000
    assert ledger.budget_note == (
        "2,000 tokens whatever the context: the node passes its memory no limit, so Dify's "
        "default applies; the history is compared with it counted as a list (+3)"
    )
    # Dify pops single messages, oldest first, until the list (+3) fits 2,000: turn 1's query goes, its
    # short answer stays.
    assert [(e.turn, e.role, e.reason) for e in ledger.entries] == [
        (1, "user", OVER_BUDGET),
        (1, "assistant", KEPT),
        (2, "user", KEPT),
        (2, "assistant", KEPT),
        (3, "user", KEPT),
        (3, "assistant", KEPT),
    ]
    assert sum(e.tokens for e in ledger.entries if e.kept) + 3 <= 2000
    # Without counting, nothing prunes: no budget at all.
    _, off = run_conversation(flow, ["one", "two"], llm=DemoClient())
    assert off[1].node_run("ag").ledger.budget is None


def test_the_documented_profile_budgets_the_same_2000_without_the_lists_3():
    flow, state, records = long_turns()
    docs = what_if_ledger(flow, state.conversation, 3, "ag", {"fidelity": "documented"}, record=records[-1])
    assert docs.budget == 2000 and docs.budget_note.startswith("2,000 tokens whatever the context")
    assert "(+3)" not in docs.budget_note


def test_the_receipts_docs_versus_code_sentence_and_the_findings_name_the_fixed_budget():
    from core.analysis.findings import CAUSE_BUDGET, SILENT_PRUNING, ledger_difference, run_findings

    flow, state, records = long_turns()
    (found,) = [f for f in run_findings(flow, state.conversation, records) if f.kind == SILENT_PRUNING]
    assert found.subject == "Planner" and found.data["budget"] == 2000
    assert "a fixed 2,000 tokens, the memory's default, since the node passes it no limit" in found.detail
    assert "Raise the context size" not in found.detail
    # A history of 1,998 tokens: the docs' count fits it, the list's +3 does not.
    words = "word " * 489
    state, edge = run_conversation(
        flow,
        [f"one {words}", f"two {words}", f"three {words}", "four"],
        llm=ScriptedClient(["x " * 166] * 4),
        plugin_token_counting=True,
    )
    code = edge[-1].node_run("ag").ledger
    docs = what_if_ledger(
        flow, state.conversation, 3, "ag", {"fidelity": "documented"}, record=edge[-1], plugin_token_counting=True
    )
    assert sum(e.tokens for e in docs.entries) == 1998
    assert [e.kept for e in docs.entries] == [True] * 6 and [e.kept for e in code.entries] == [False] + [True] * 5
    diff = ledger_difference(code, docs, 3)
    assert diff.causes == (CAUSE_BUDGET,)
    assert diff.text == (
        "Both budgets are a fixed 2,000 tokens (the node passes its memory no limit); the docs count "
        "the history's messages, pruning 0 messages, and Dify 1.x counts it as a list (+3), pruning "
        "1 message."
    )


def test_a_what_if_switches_its_memory_and_rebuilds_its_prompt():
    flow = agent({"window": {"enabled": True, "size": 2}})
    state, records = run_conversation(flow, QUERIES, llm=DemoClient())
    conv = state.conversation
    wide = what_if_ledger(flow, conv, 3, "ag", {"window": 10}, record=records[3])
    assert [e.turn for e in wide.entries if e.reason == KEPT] == [1, 1, 2, 2, 3, 3]
    recorded = [m.to_dict() for m in records[3].node_run("ag").prompt]
    narrow = what_if_ledger(flow, conv, 3, "ag", record=records[3])
    assert what_if_prompt(flow, conv, 3, "ag", recorded, narrow) == recorded
    prompt = what_if_prompt(flow, conv, 3, "ag", recorded, wide)
    assert [m["content"] for m in prompt][:2] == ["You plan trips.", "My destination is Lisbon."]
    off = what_if_prompt(flow, conv, 3, "ag", recorded, what_if_ledger(flow, conv, 3, "ag", {"strategy": "off"}))
    assert [m["content"] for m in off] == ["You plan trips.", "What is my destination?"]
    # Without a recorded prompt the what-if builds it from the settings and the turn's query.
    bare = Conversation(id="c", turns=[replace(t, meta={}) for t in conv.turns])
    estimated = what_if_ledger(flow, bare, 3, "ag")
    frame = agent_frame(
        "You plan trips.", "What is my destination?", counter_for("gpt-4o-mini"), file_upload=False, vision=False
    )
    assert estimated.prompt_tokens - estimated.history_tokens == frame.fixed_tokens()
    rebuilt = what_if_prompt(flow, bare, 3, "ag", [], estimated)
    # Its own window of 2 rows: one earlier turn.
    assert [m["content"] for m in rebuilt] == [
        "You plan trips.",
        "Find me a quiet hotel.",
        records[2].answer,
        "What is my destination?",
    ]


def test_an_estimate_reads_a_variable_it_cannot_know_as_nothing_and_takes_the_turns_query():
    state, _ = run_conversation(agent({"window": {"enabled": True, "size": 5}}), QUERIES[:2], llm=DemoClient())
    bare = Conversation(id="c", turns=[replace(t, meta={}) for t in state.conversation.turns])
    # Another node's output and a conversation variable are not known without the run.
    flow = agent(
        {"window": {"enabled": True, "size": 5}},
        query={"type": "variable", "value": ["llm", "text"]},
        instruction={"type": "variable", "value": ["conversation", "notes"]},
    )
    estimated = what_if_ledger(flow, bare, 1, "ag")
    assert (
        estimated.prompt_tokens - estimated.history_tokens
        == agent_frame(
            "", "I travel in May.", counter_for("gpt-4o-mini"), file_upload=False, vision=False
        ).fixed_tokens()
    )
    assert [m["content"] for m in what_if_prompt(flow, bare, 1, "ag", [], estimated)] == [
        "My destination is Lisbon.",
        bare.turns[0].answer,
        "I travel in May.",
    ]


def test_the_switchboard_config_and_an_override():
    flow = agent({"window": {"enabled": True, "size": 4}}, model=dict(MODEL, completion_params={"max_tokens": 64}))
    config = node_memory_config(flow, "ag", plugin_token_counting=True)
    assert (
        config.strategy,
        config.settings.window,
        config.model,
        config.max_tokens,
        config.history_budget,
        config.history_as_text,
        config.prompt_reserve,
        config.sends_empty,
    ) == ("dify", 4, "openai/gpt-4o-mini", 64, 2000, False, None, True)
    assert node_memory_config(flow, "ag", override={"window": 9}).settings.window == 9
    assert node_memory_config(agent(), "ag").strategy == "off"


def test_its_receipt_counts_the_history_as_memory_history():
    _, records = run_conversation(agent({"window": {"enabled": True, "size": 5}}), QUERIES[:2], llm=DemoClient())
    run = records[1].node_run("ag")
    r = receipt(
        {"node_id": "ag", "prompt": [m.to_dict() for m in run.prompt], "ledger": run.ledger},
        "Planner",
        exact=True,
        encoding="o200k_base",
    )
    assert r.used_by_origin["memory history"] == run.ledger.history_tokens > 0
    assert sum(r.used_by_origin.values()) == sum(m.tokens for m in run.prompt)


def test_the_sample_flow_loses_the_destination_at_turn_four():
    import json

    flow = load_flow(ROOT / "sample_data" / "flows" / "trip-agent.yml")
    queries = json.loads((ROOT / "sample_data" / "flows" / "trip-agent.queries.json").read_text(encoding="utf-8"))
    _, records = run_conversation(flow, queries, llm=DemoClient())
    assert "Lisbon" not in records[-1].answer
    assert [e.turn for e in records[-1].node_run("planner").ledger.entries if e.kept] == [2, 2, 3, 3]
    assert [e.turn for e in records[2].node_run("planner").ledger.entries if e.kept] == [1, 1, 2, 2]


def test_a_real_exports_agent_runs_on_its_instruction_and_the_variable_it_is_given_as_its_query():
    """svcvit's travel demo: no memory block; its query is a conversation variable holding the chat so far."""
    from tests.conftest import FIXTURES

    flow = load_flow(FIXTURES / "dify_dsl" / "svcvit__旅行Demo.yml")
    (agent_id,) = [n.id for n in flow.nodes if n.type == "agent"]
    assert {n.id: n.status for n in import_report(flow).nodes}[agent_id] == "emulated"
    assert import_report(flow).llm_memory[agent_id]["label"] == "off"
    _, records = run_conversation(flow, ["我想去伦敦玩3天", "预算一万元"], llm=ScriptedClient(["好的", "明白"]))
    run = records[1].node_run(agent_id)
    assert [r.answer for r in records] == ["好的", "明白"]
    assert run.memory["strategy"] == "off" and run.prompt[0].role == "system"
    assert "我想去伦敦玩3天" in run.prompt[-1].content and "好的" in run.prompt[-1].content  # the History variable


# -- settings ---------------------------------------------------------------------------------------


def test_the_settings_read_from_a_dify_export():
    unnamed, no_switch = (
        {k: v for k, v in SEARCH.items() if k != "tool_name"},
        {k: v for k, v in SEARCH.items() if k != "enabled"},
    )
    settings = plugin_agent_settings(
        agent(
            {"window": {"enabled": True, "size": 4}},
            tools=(SEARCH, dict(SEARCH, enabled=False, tool_name="x"), unnamed, no_switch),
        ).node("ag")
    )
    # Enabled tools only (a tool without the switch is off, as Dify reads it).
    assert (settings.model, settings.mode, settings.strategy, settings.tools) == (
        "openai/gpt-4o-mini",
        "chat",
        "function_calling",
        ("ddgo_search", "unnamed tool"),
    )
    assert settings.instruction == AgentInput(TEMPLATE, template="You plan trips.")
    assert settings.query == AgentInput(TEMPLATE, template="{{#sys.query#}}")
    assert settings.window() == 4 and settings.memory_label() == "window 4 turns"
    variable = plugin_agent_settings(agent(query={"type": "variable", "value": ["sys", "query"]}).node("ag"))
    assert variable.query == AgentInput(VARIABLE, selector=("sys", "query"))
    # A strategy that names its model parameter otherwise is still read; one without a model calls the demo.
    other = agent(model=None, llm_model={"type": "constant", "value": dict(MODEL, model="gpt-4")})
    other_node = other.node("ag")
    other_node.data["agent_parameters"].pop("model")
    assert plugin_agent_settings(other_node).model == "openai/gpt-4"
    bare = agent()
    bare.node("ag").data["agent_parameters"] = {}
    empty = plugin_agent_settings(bare.node("ag"))
    assert (empty.model, empty.mode, empty.query, empty.instruction, empty.tools, empty.strategy) == (
        "",
        "chat",
        None,
        None,
        (),
        "function_calling",
    )
    completion = plugin_agent_settings(
        agent(model={"type": "model-selector", "model": "gpt-4", "mode": "completion"}).node("ag")
    )
    assert (completion.model, completion.mode) == ("gpt-4", "completion")  # no provider: the name alone


def test_the_model_is_the_parameter_that_holds_one_not_the_first_mapping():
    # A strategy's other mapping-valued parameter before the model is not taken for it; a model block
    # without Dify's "model-selector" type is known by its provider and model.
    flow = agent(model={"provider": "openai", "model": "gpt-4"})
    node = flow.node("ag")
    node.data["agent_parameters"] = {
        "context": {"type": "constant", "value": {"type": "retrieval", "model": "x"}},
        "filters": {"type": "constant", "value": {"provider": "p"}},
        **node.data["agent_parameters"],
    }
    assert plugin_agent_settings(node).model == "openai/gpt-4"
    node.data["agent_parameters"]["model"]["value"] = {"type": "model-selector", "model": "gpt-4o"}
    assert plugin_agent_settings(node).model == "gpt-4o"


def test_an_empty_instruction_or_query_is_not_sent_nor_counted():
    counter = counter_for("gpt-4o-mini")
    both = agent_frame("Plan.", "Go", counter, file_upload=False, vision=False)
    assert both.fixed_tokens() == 3 + counter.chat("system", "Plan.") + counter.chat("user", "Go")
    assert agent_frame("", "Go", counter, file_upload=False, vision=False).fixed_tokens() == 3 + counter.chat(
        "user", "Go"
    )
    assert agent_frame("Plan.", "", counter, file_upload=False, vision=False).fixed_tokens() == 3 + counter.chat(
        "system", "Plan."
    )


def test_a_history_image_goes_to_a_vision_model_when_the_flow_takes_files():
    from core.model.conversation import QUERY, FileRef, Message

    counter = counter_for("gpt-4o-mini")
    shot = Message("user", "look", QUERY, "t:query", files=(FileRef("image", "https://x/y.png"),))
    sent = agent_frame("Plan.", "Go", counter, file_upload=True, vision=True).build([shot])
    assert [p["type"] for p in sent[1].parts] == ["image_url", "text"]
    assert agent_frame("Plan.", "Go", counter, file_upload=False, vision=True).build([shot])[1].parts == ()
    assert agent_frame("Plan.", "Go", counter, file_upload=True, vision=False).build([shot])[1].parts == ()


@pytest.mark.parametrize(
    "change, error",
    [
        ({"agent_parameters": ["model"]}, "'agent_parameters' must be a mapping of parameter name to {type, value}"),
        ({"agent_parameters": {"query": "hi"}}, "agent parameter 'query' must be {type, value}"),
        (
            {"agent_parameters": {"query": {"type": "variable", "value": "sys.query"}}},
            "agent parameter 'query' is a variable, so its value must be a selector such as ['sys', 'query']",
        ),
        (
            {"agent_parameters": {"query": {"type": "variable", "value": []}}},
            "agent parameter 'query' is a variable, so its value must be a selector such as ['sys', 'query']",
        ),
        (
            {"agent_parameters": {"query": {"type": "variable", "value": ["sys", 1]}}},
            "agent parameter 'query' is a variable, so its value must be a selector such as ['sys', 'query']",
        ),
        (
            {"agent_parameters": {"instruction": {"type": "constant", "value": 5}}},
            "agent parameter 'instruction' must be text",
        ),
        ({"agent_parameters": {"query": {"type": "mixed", "value": ["a"]}}}, "agent parameter 'query' must be text"),
        (
            {"agent_parameters": {"instruction": {"type": "file", "value": "x"}}},
            "agent parameter 'instruction' has type 'file'; expected constant, mixed or variable",
        ),
        (
            {"agent_parameters": {"model": {"type": "constant", "value": dict(MODEL, mode="edit")}}},
            "model mode 'edit' is unknown; expected chat or completion",
        ),
        (
            {"agent_parameters": {"model": {"type": "constant", "value": dict(MODEL, completion_params=[1])}}},
            "the agent's 'completion_params' must be a mapping",
        ),
        ({"memory": {"window": {"enabled": True, "size": "many"}}}, "memory window size 'many' is not a whole number"),
    ],
)
def test_a_malformed_agent_node_is_refused_when_the_flow_is_read(change, error):
    node = {"id": "ag", "type": "agent", "title": "Planner", **change}
    with pytest.raises(FlowError) as e:
        Flow.from_dict(
            {
                "format": "memlens-flow",
                "version": 1,
                "name": "x",
                "nodes": [{"id": "start", "type": "start"}, node],
                "edges": [["start", "ag"]],
            }
        )
    assert str(e.value) == f"flow: node 'ag' (agent): {error}"
