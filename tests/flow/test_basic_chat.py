"""A Dify basic Chatbot export (``app.mode: chat``) run as Dify's SimplePromptTransform builds its
prompt: the pre-prompt and a newline as the system message, the history with no window, the query
last; with plugin token counting on, a budget that subtracts the system message but not the query."""

from __future__ import annotations

import copy

import pytest
import yaml

from core.analysis.findings import SILENT_PRUNING, run_findings
from core.flow.errors import FlowError, NodeFailed
from core.flow.graph import Flow, load_flow, parse_flow
from core.flow.imported import import_report
from core.flow.node_memory import node_memory_config
from core.flow.runtime import run_conversation
from core.flow.templates import EXPERT, SIMPLE, VariablePool, render_message, render_slots
from core.flow.what_if import what_if_ledger, what_if_prompt
from core.llm.client import DemoClient
from core.memory.config import MemoryConfig
from core.memory.replay import Replay
from core.model.ledger import KEPT, OVER_BUDGET
from core.model.tokens import REPLY_PRIMING, counter_for, model_facts
from tests.conftest import ROOT
from tests.flow.test_runtime_prompt import FailsOn

SAMPLE = ROOT / "sample_data" / "flows" / "basic-chatbot.yml"
MODEL = {"provider": "openai", "name": "gpt-4o-mini", "mode": "chat", "completion_params": {"max_tokens": 512}}


def chatbot(
    pre_prompt: str = "You help {{name}} plan trips. Answer in a {{tone}} way.", *, model=None, form=None, **config
) -> dict:
    """A basic Chatbot export, as Dify writes one."""
    form = (
        form
        if form is not None
        else [
            {"text-input": {"label": "Name", "variable": "name", "required": True, "max_length": 48, "default": ""}},
            {
                "select": {
                    "label": "Tone",
                    "variable": "tone",
                    "required": False,
                    "options": ["short", "warm"],
                    "default": "short",
                }
            },
        ]
    )
    return {
        "app": {"mode": "chat", "name": "Trip helper", "description": "Plans trips"},
        "kind": "app",
        "version": "0.1.5",
        "model_config": {
            "model": copy.deepcopy(model or MODEL),
            "pre_prompt": pre_prompt,
            "prompt_type": "simple",
            "user_input_form": form,
            "opening_statement": "Where to?",
            "suggested_questions": ["Lisbon?"],
            "file_upload": {"image": {"enabled": False}},
            "sensitive_word_avoidance": {"enabled": False, "type": "", "configs": []},
            "dataset_configs": {"datasets": {"datasets": []}},
            **config,
        },
    }


def read(doc: dict) -> Flow:
    return parse_flow(yaml.safe_dump(doc, allow_unicode=True), "bot.yml")


def ask(flow: Flow, queries, **kwargs):
    inputs = {"name": "Dana"}
    return run_conversation(flow, [{"query": q, "inputs": inputs} for q in queries], llm=DemoClient(), **kwargs)


def test_the_export_reads_as_one_model_call_between_start_and_answer():
    flow = read(chatbot())
    assert [(n.id, n.type) for n in flow.nodes] == [("start", "start"), ("llm", "llm"), ("answer", "answer")]
    assert [(e.source, e.target) for e in flow.edges] == [("start", "llm"), ("llm", "answer")]
    assert flow.name == "Trip helper" and flow.is_chat and flow.source["app_mode"] == "chat"
    assert flow.description == "Plans trips" and flow.app_mode == "chat"
    assert flow.features == {
        "opening_statement": "Where to?",
        "suggested_questions": ["Lisbon?"],
        "file_upload": {"image": {"enabled": False}},
        "sensitive_word_avoidance": {"enabled": False, "type": "", "configs": []},
    }
    assert flow.warnings == [
        "a basic Chatbot: run as its one model call — the pre-prompt as the system message, then the history with "
        "no window (Dify fetches up to 500 rows), then the query",
        "DSL version 0.1.5 is older than 0.6.0: read with Dify's defaults for newer fields",
    ]
    assert flow.start.data["variables"] == [
        {"variable": "name", "label": "Name", "type": "text-input", "required": True, "max_length": 48},
        {
            "variable": "tone",
            "label": "Tone",
            "type": "select",
            "required": False,
            "options": ["short", "warm"],
            "default": "short",
        },
    ]
    assert [n.title for n in flow.nodes] == ["Start", "Chatbot", "Answer"]
    assert flow.node("llm").data["model"] == MODEL
    assert flow.node("answer").data["answer"] == "{{#llm.text#}}"
    report = import_report(flow)
    assert report.mode == "chat" and report.to_text().startswith("Trip helper: Trip helper (dify-dsl 0.1.5, chat)")
    memory = report.llm_memory["llm"]
    assert memory["label"] == "no window (500-turn cap)" and memory["model"] == "openai/gpt-4o-mini"
    # The canonical form keeps the marker, so a stored copy runs the same way.
    again = Flow.from_dict(flow.to_dict())
    assert again.to_dict() == flow.to_dict() and again.node("llm").data["basic_chat"] is True


def test_the_prompt_is_the_pre_prompt_and_a_newline_then_the_history_then_the_query():
    flow = read(chatbot("You help {{name}} plan trips. Answer in a {{tone}} way. {{missing}} and {{#sys.x#}}"))
    _, records = ask(flow, ["I'm going to Lisbon.", "In May.", "Where am I going?"])
    prompt = records[-1].node_run("llm").prompt
    assert [(m.role, m.content) for m in prompt] == [
        # Inputs fill their slots (the select's default too); a slot that is no input stays as written.
        ("system", "You help Dana plan trips. Answer in a short way. {{missing}} and {{#sys.x#}}\n"),
        ("user", "I'm going to Lisbon."),
        ("assistant", records[0].answer),
        ("user", "In May."),
        ("assistant", records[1].answer),
        ("user", "Where am I going?"),
    ]


def test_what_an_older_export_leaves_out_takes_dify_s_defaults():
    doc = chatbot()
    config = doc["model_config"]
    for key in ("prompt_type", "user_input_form"):
        del config[key]
    config["model"] = {"name": "gpt-4o-mini"}  # no provider, no mode: a chat model
    del doc["app"]["description"]
    flow = read(doc)
    assert flow.start.data["variables"] == [] and flow.description == ""
    assert flow.node("llm").data["model"] == {
        "provider": "",
        "name": "gpt-4o-mini",
        "mode": "chat",
        "completion_params": {},
    }
    # A label falls back to the variable's name; empty settings are left out.
    form = [
        {"paragraph": {"variable": "notes", "max_length": 0, "options": [], "default": ""}},
        {
            "file": {
                "variable": "cv",
                "label": "CV",
                "required": True,
                "allowed_file_types": ["document"],
                "allowed_file_extensions": [".pdf"],
                "allowed_file_upload_methods": ["local_file"],
            }
        },
    ]
    assert read(chatbot(user_input_form=form)).start.data["variables"] == [
        {"variable": "notes", "label": "notes", "type": "paragraph", "required": False, "max_length": 0},
        {
            "variable": "cv",
            "label": "CV",
            "type": "file",
            "required": True,
            "allowed_file_types": ["document"],
            "allowed_file_extensions": [".pdf"],
            "allowed_file_upload_methods": ["local_file"],
        },
    ]


def test_an_answer_is_the_model_s_reply_as_it_is():
    _, records = ask(read(chatbot()), ["Hi, I am Dana."])
    assert records[0].answer == records[0].node_run("llm").reply


def test_without_a_pre_prompt_there_is_no_system_message():
    _, records = ask(read(chatbot("")), ["Hi.", "Again."])
    assert [m.role for m in records[-1].node_run("llm").prompt] == ["user", "assistant", "user"]


def test_the_history_has_no_window():
    flow = read(chatbot())
    config = node_memory_config(flow, "llm")
    assert (config.strategy, config.settings.window, config.prompt_reserve, config.query_after_budget) == (
        "dify",
        None,
        0,
        True,
    )
    _, records = ask(flow, [f"fact number {i}" for i in range(1, 13)])
    ledger = records[-1].node_run("llm").ledger
    assert len(ledger.entries) == 22 and {e.reason for e in ledger.entries} == {KEPT}


@pytest.mark.parametrize("fidelity", ["code", "documented"])
def test_with_token_counting_the_budget_subtracts_the_system_message_but_not_the_query(fidelity):
    queries = [
        "I'm going to Lisbon in May with two friends.",
        "We like quiet hotels by the sea.",
        "Which neighbourhood should we stay in, given everything I told you so far?",
    ]
    context = model_facts("openai/gpt-4o-mini").context_size
    counter = counter_for("openai/gpt-4o-mini")
    overhead = REPLY_PRIMING if fidelity == "code" else 0  # Dify 1.x counts the history as a list

    def last_run(max_tokens: int):
        flow = read(chatbot(model={**MODEL, "completion_params": {"max_tokens": max_tokens}}))
        state, records = ask(flow, queries, plugin_token_counting=True, fidelity=fidelity)
        return flow, state, records[-1].node_run("llm")

    _, _, wide = last_run(512)
    system = counter.chat("system", wide.prompt[0].content)
    history = sum(e.tokens for e in wide.ledger.entries) + overhead
    # max_tokens that leaves the budget exactly the history's size: all of it is kept...
    fit = context - (system + REPLY_PRIMING) - history
    flow, state, run = last_run(fit)
    assert run.ledger.budget == history and all(e.kept for e in run.ledger.entries)
    assert (
        f"− {system + REPLY_PRIMING} prompt before the history (the query is added after it)" in run.ledger.budget_note
    )
    # ...though with the query subtracted too it would not fit; one token less and the oldest goes.
    assert history > run.ledger.budget - counter.chat("user", queries[-1])
    _, _, tight = last_run(fit + 1)
    assert [e.reason for e in tight.ledger.entries] == [OVER_BUDGET, KEPT, KEPT, KEPT]
    # A what-if replays the same rule from the stored conversation.
    again = what_if_ledger(flow, state.conversation, 2, "llm", fidelity=fidelity, plugin_token_counting=True)
    assert again.budget == history and [e.reason for e in again.entries] == [KEPT] * 4


def test_the_receipt_says_the_docs_budget_subtracts_the_prompt_before_the_history_not_the_query():
    """A basic Chatbot's query joins after the budget: the receipt's docs-versus-code sentence names
    the prompt the docs' budget subtracted (the system message and the reply priming), not the
    whole prompt the ledger holds."""
    from core.analysis.debug_view import receipt

    queries = [
        "I'm going to Lisbon in May with two friends.",
        "We like quiet hotels by the sea.",
        "Which neighbourhood should we stay in, given everything I told you so far?",
    ]
    counter = counter_for("openai/gpt-4o-mini")
    context = model_facts("openai/gpt-4o-mini").context_size
    for room in range(40, 140, 4):  # the first budget where the two profiles prune differently (the list's +3)
        flow = read(chatbot(model={**MODEL, "completion_params": {"max_tokens": context - room}}))
        state, records = ask(flow, queries, plugin_token_counting=True)
        run = records[-1].node_run("llm")
        docs = what_if_ledger(flow, state.conversation, 2, "llm", fidelity="documented", plugin_token_counting=True)
        if [e.kept for e in run.ledger.entries] != [e.kept for e in docs.entries]:
            break
    else:
        raise AssertionError("no budget here where the two profiles differ")
    r = receipt(
        {"node_id": "llm", "prompt": [m.to_dict() for m in run.prompt], "ledger": run.ledger},
        "LLM",
        exact=True,
        encoding="o200k_base",
        other=docs,
        position=2,
    )
    before_history = counter.chat("system", run.prompt[0].content) + REPLY_PRIMING
    assert docs.budget == room - before_history  # what the docs' budget took away
    assert r.docs_vs_code.startswith(f"The docs' budget subtracts the prompt ({before_history:,} tokens) ")


def test_silent_pruning_names_the_prompt_before_the_history_as_what_the_budget_subtracts():
    flow = read(chatbot(model={**MODEL, "completion_params": {"max_tokens": 127_950}}))
    state, records = ask(
        flow,
        ["I'm going to Lisbon in May with two friends.", "We like quiet hotels by the sea.", "Where should we stay?"],
        plugin_token_counting=True,
    )
    found = [f for f in run_findings(flow, state.conversation, records) if f.kind == SILENT_PRUNING]
    assert len(found) == 1 and "context size − max_tokens − the prompt before the history)" in found[0].detail


def test_query_after_budget_leaves_the_query_out_of_the_budget_in_every_replay_path():
    from tests.builders import linear

    conv = linear(6, query=lambda i: "a question with a good many words in it " * (i % 3 + 1))
    conv.system_prompt = "You are brief."
    base = MemoryConfig(fidelity="documented", model="gpt-4o-mini", context_size=90, prompt_reserve=0)
    after = Replay(conv, base.with_(query_after_budget=True))
    plain = Replay(conv, base)
    for position, turn in enumerate(conv.turns):
        query = after.message_tokens(position)[turn.query_index]
        assert after.budget_prompt_tokens(position, 50) == 50 - query
        assert plain.budget_prompt_tokens(position, 50) == 50
        assert after.ledger_at(position).budget == plain.ledger_at(position).budget + query
    # The one-walk summaries agree with each turn's ledger.
    for summary, position in zip(after.summaries(), range(6)):
        ledger = Replay(conv, after.config).ledger_at(position)
        assert (summary.budget, summary.kept) == (ledger.budget, len(ledger.kept))
    assert "query_after_budget" not in base.to_dict()
    assert MemoryConfig.from_dict(after.config.to_dict()) == after.config


def test_knowledge_and_external_tools_are_named_as_not_run():
    doc = chatbot(
        dataset_configs={
            "datasets": {
                "datasets": [{"dataset": {"enabled": True, "id": "d1"}}, {"dataset": {"enabled": True, "id": "d2"}}]
            }
        },
        agent_mode={"enabled": False, "tools": [{"dataset": {"enabled": True, "id": "d3"}}]},
        external_data_tools=[{"enabled": True, "variable": "weather", "type": "api"}],
        sensitive_word_avoidance={"enabled": True, "type": "keywords"},
        annotation_reply={"enabled": True},
        more_like_this={"enabled": True},
        user_input_form=[
            {"external_data_tool": {"variable": "weather"}},
            {"rating": {"variable": "stars"}},
            {"paragraph": {"label": "Notes", "variable": "notes", "required": False}},
        ],
    )
    flow = read(doc)
    assert [v["variable"] for v in flow.start.data["variables"]] == ["notes"]
    # Served by GET /v1/parameters as the app's settings, though not run.
    assert (flow.features["annotation_reply"], flow.features["more_like_this"]) == ({"enabled": True},) * 2
    assert flow.warnings[1:] == [
        "form field 2 has type 'rating', which MemLens does not know: left out of the form",
        "its knowledge (3 datasets) is not retrieved: the prompt is sent without the context Dify would add",
        "1 external data tool not run: their inputs stay as the user gave them",
        "its moderation is not run: every query reaches the model",
        "its annotation replies are not run: every query reaches the model",
        "DSL version 0.1.5 is older than 0.6.0: read with Dify's defaults for newer fields",
    ]


@pytest.mark.parametrize(
    "change, note",
    [
        ({"dataset_configs": {"datasets": [{"dataset": {"id": "d1"}}]}}, "its knowledge (1 dataset) is not retrieved"),
        ({"dataset_configs": {"datasets": {"datasets": "d1"}}}, None),
        ({"agent_mode": {"tools": ["dataset"]}}, None),
        (
            {"external_data_tools": [{"enabled": True}, {"enabled": True}, {"enabled": False}, "tool"]},
            "2 external data tools not run",
        ),
        ({"external_data_tools": [{"enabled": False}]}, None),
    ],
)
def test_knowledge_and_tools_are_counted_in_either_shape_dify_exported(change, note):
    notes = [w for w in read(chatbot(**change)).warnings if "knowledge" in w or "external" in w]
    assert [n.split(":")[0] for n in notes] == ([note] if note else [])


def test_a_chatbot_that_takes_images_sends_them_to_the_model():
    assert read(chatbot(file_upload={"image": {"enabled": True}})).node("llm").data["vision"] == {"enabled": True}
    new_shape = {"enabled": True, "allowed_file_types": ["image", "document"]}
    assert read(chatbot(file_upload=new_shape)).node("llm").data["vision"] == {"enabled": True}
    for off in (
        {"image": {"enabled": False}},
        {"enabled": True, "allowed_file_types": ["document"]},
        {"enabled": False, "allowed_file_types": ["image"]},
        None,
    ):
        assert read(chatbot(file_upload=off)).node("llm").data["vision"] == {"enabled": False}, off


@pytest.mark.parametrize(
    "change, message",
    [
        (
            {"prompt_type": "advanced"},
            "bot.yml: this Chatbot's prompt is in expert mode but has no "
            "'model_config.chat_prompt_config.prompt' (Dify fails every call with \"Advanced chat prompt template is "
            'required."): write its prompt in Dify and export it again',
        ),
        (
            {"prompt_type": "advanced", "chat_prompt_config": {}},
            "bot.yml: this Chatbot's prompt is in expert mode but has "
            "no 'model_config.chat_prompt_config.prompt' (Dify fails every call with \"Advanced chat prompt template is "
            'required."): write its prompt in Dify and export it again',
        ),
        (
            {"prompt_type": "advanced", "chat_prompt_config": {"prompt": "Be brief."}},
            "bot.yml: 'model_config.chat_prompt_config.prompt' must be a list of {role, text} messages",
        ),
        (
            {
                "prompt_type": "advanced",
                "chat_prompt_config": {"prompt": [{"role": "system", "text": "a"}, {"role": "tool", "text": "b"}]},
            },
            "bot.yml: expert-mode prompt message 2 must be a mapping with a role (system, user or assistant) and a text",
        ),
        (
            {"prompt_type": "advanced", "chat_prompt_config": {"prompt": [{"role": "user", "text": ["a"]}]}},
            "bot.yml: expert-mode prompt message 1 must be a mapping with a role (system, user or assistant) and a text",
        ),
        (
            {"prompt_type": "advanced", "chat_prompt_config": {"prompt": ["Be brief."]}},
            "bot.yml: expert-mode prompt message 1 must be a mapping with a role (system, user or assistant) and a text",
        ),
        (
            {"prompt_type": "expert"},
            "bot.yml: 'model_config.prompt_type' must be simple or advanced (expert mode), not 'expert'",
        ),
        (
            {"prompt_type": "advanced", "chat_prompt_config": {"prompt": []}, "model": {**MODEL, "mode": "completion"}},
            "bot.yml: this Chatbot's model is a completion model, whose history Dify writes into its own prompt template, "
            "which MemLens does not emulate; switch the app to workflow orchestration in Dify (its menu) and export that",
        ),
        (
            {"model": {**MODEL, "mode": "completion"}},
            "bot.yml: this Chatbot's model is a completion model, whose history "
            "Dify writes into its own prompt template, which MemLens does not emulate; switch the app to workflow "
            "orchestration in Dify (its menu) and export that",
        ),
        (
            {"model": {"provider": "openai"}},
            "bot.yml: 'model_config.model' must name the Chatbot's model (provider, name, mode)",
        ),
        ({"pre_prompt": ["not", "text"]}, "bot.yml: 'model_config.pre_prompt' must be text"),
        ({"user_input_form": {"name": "x"}}, "bot.yml: 'model_config.user_input_form' must be a list of form fields"),
        (
            {"user_input_form": [{"text-input": {"label": "x"}}]},
            "bot.yml: form field 1 (text-input) must be a mapping with a 'variable'",
        ),
        (
            {"user_input_form": [{"a": {}, "b": {}}]},
            "bot.yml: form field 1 must be a mapping with one key, its type (text-input, paragraph, select, number, …)",
        ),
    ],
)
def test_what_cannot_be_run_is_refused_in_one_line(change, message):
    doc = chatbot()
    doc["model_config"].update(change)
    with pytest.raises(FlowError) as e:
        read(doc)
    assert str(e.value) == message
    del doc["model_config"]
    with pytest.raises(FlowError) as e:
        read(doc)
    assert str(e.value) == "bot.yml: a basic Chatbot export (app.mode chat) needs a 'model_config' mapping"


def test_the_sample_chatbot_remembers_everything_and_runs_its_queries():
    flow = load_flow(SAMPLE)
    assert flow.source["app_mode"] == "chat" and import_report(flow).pass_through == []
    queries = yaml.safe_load(SAMPLE.with_suffix(".queries.json").read_text(encoding="utf-8"))
    _, records = run_conversation(flow, queries, llm=DemoClient())
    assert all(r.succeeded for r in records)
    assert "4411" in records[-1].answer


def test_a_pre_prompt_renders_as_dify_s_prompt_template_parser_does():
    pool = VariablePool()
    pool.add_outputs("start", {"name": "Dana {{tone}}", "age": 41, "nick": None, "vip": True})
    text = (
        "Hi {{name}}, {{age}}, {{nick}}, {{vip}}; {{tone}} {{#query#}} {{#sys.query#}} {{ name }} "
        "{{a_name_longer_than_thirty_chars_x}}<|endoftext|>.\n"
    )
    # A value's own slots are unwrapped; other slots and selectors stay; special tokens go.
    assert render_slots(text, pool) == (
        "Hi Dana {tone}, 41, None, True; {{tone}} {{#query#}} {{#sys.query#}} "
        "{{ name }} {{a_name_longer_than_thirty_chars_x}}.\n"
    )
    assert render_message(text, SIMPLE, pool) == render_slots(text, pool)
    assert render_message("{{#start.name#}} {{name}}", "basic", pool) == "Dana {{tone}} {{name}}"
    assert render_message("{{#context#}} {{name}}", "basic", pool, context="retrieved") == "retrieved {{name}}"


def expert(messages, **config) -> dict:
    """A basic Chatbot export in expert mode (``prompt_type: advanced``), as Dify writes one."""
    return chatbot("ignored in expert mode", prompt_type="advanced", chat_prompt_config={"prompt": messages}, **config)


def test_an_expert_mode_prompt_is_its_messages_then_the_history_then_the_query():
    flow = read(
        expert(
            [
                {
                    "role": "system",
                    "text": "You help {{name}}, {{tone}}. {{#context#}}|{{#query#}}|"
                    "{{#histories#}}|{{nick}}|{{#sys.query#}}<|im_end|>",
                },
                {"role": "user", "text": "Example question"},
                {"role": "assistant", "text": "Example answer"},
            ],
            user_input_form=[
                {"text-input": {"label": "Name", "variable": "name", "required": True, "default": ""}},
                {"select": {"label": "Tone", "variable": "tone", "options": ["short"], "default": "short"}},
                {"text-input": {"label": "Nick", "variable": "nick", "required": False}},
            ],
        )
    )
    assert flow.warnings[0] == (
        "a basic Chatbot in expert mode: run as its one model call — its prompt messages, "
        "then the history with no window (Dify fetches up to 500 rows), then the query"
    )
    assert [i["edition_type"] for i in flow.node("llm").data["prompt_template"]] == [EXPERT] * 3
    _, records = ask(flow, ["I'm going to Lisbon.", "Where am I going?"])
    assert records[0].node_run("llm").prompt[0].content == records[1].node_run("llm").prompt[0].content
    assert [(m.role, m.content) for m in records[-1].node_run("llm").prompt] == [
        # The context slot is emptied (no knowledge retrieved), a missing optional input fills its slot with
        # nothing, the query and histories slots and a selector stay as written, special tokens go.
        ("system", "You help Dana, short. |{{#query#}}|{{#histories#}}||{{#sys.query#}}"),
        ("user", "Example question"),
        ("assistant", "Example answer"),
        ("user", "I'm going to Lisbon."),
        ("assistant", records[0].answer),
        ("user", "Where am I going?"),
    ]
    config = node_memory_config(flow, "llm")
    assert (config.settings.window, config.query_after_budget, config.sends_empty) == (None, True, True)


def test_an_expert_mode_prompt_leaves_out_an_empty_system_message_only():
    flow = read(
        expert(
            [
                {"role": "system", "text": "{{nick}}"},
                {"role": "user", "text": ""},
                {"role": "assistant", "text": "{{nick}}"},
            ],
            user_input_form=[{"text-input": {"label": "Nick", "variable": "nick"}}],
        )
    )
    _, records = ask(flow, ["Hi."])
    assert [(m.role, m.content) for m in records[0].node_run("llm").prompt] == [
        ("user", ""),
        ("assistant", ""),
        ("user", "Hi."),
    ]
    # With no prompt messages at all, the call is the history and the query.
    _, records = ask(read(expert([])), ["Hi.", "Again."])
    assert [m.role for m in records[-1].node_run("llm").prompt] == ["user", "assistant", "user"]


def test_a_number_in_an_expert_mode_prompt_fails_the_call_as_in_dify_but_a_pre_prompt_makes_it_text():
    form = [{"number": {"label": "Age", "variable": "age", "required": True}}]
    flow = read(expert([{"role": "system", "text": "The user is {{age}}."}], user_input_form=form))
    _, (record,) = run_conversation(flow, [{"query": "Hi.", "inputs": {"age": 41}}], llm=DemoClient())
    assert (record.status, record.answer) == ("failed", "")
    assert record.error == (
        "expected str instance, int found: input 'age' fills a slot of the expert-mode prompt, "
        "which Dify renders from text inputs only"
    )
    simple = read(chatbot("The user is {{age}}.", user_input_form=form))
    _, (record,) = run_conversation(simple, [{"query": "Hi.", "inputs": {"age": 41}}], llm=DemoClient())
    assert record.succeeded and record.node_run("llm").prompt[0].content == "The user is 41.\n"


def test_an_expert_mode_slot_renders_as_dify_s_advanced_prompt_transform_does():
    pool = VariablePool()
    pool.add_outputs("start", {"name": "Dana {{tone}}", "nick": None, "vip": True})
    text = "{{name}} {{nick}}. {{#context#}} {{tone}} {{#query#}}<|endoftext|>"
    assert render_slots(text, pool, expert=True) == "Dana {tone} .  {{tone}} {{#query#}}"
    assert render_slots(text, pool, expert=True, context="docs") == "Dana {tone} . docs {{tone}} {{#query#}}"
    assert render_message(text, EXPERT, pool, context="docs") == "Dana {tone} . docs {{tone}} {{#query#}}"
    # A pre-prompt leaves the context slot as written and makes every value text.
    assert render_slots(text, pool, context="docs") == "Dana {tone} None. {{#context#}} {{tone}} {{#query#}}"
    with pytest.raises(NodeFailed, match="expected str instance, bool found: input 'vip'"):
        render_slots("{{vip}}", pool, expert=True)


def test_no_filter_runs_over_a_basic_chatbot_s_call():
    """Dify's basic Chatbot sends what SimplePromptTransform builds as it is: a failed turn's empty
    answer stays in the history (a Chatflow's LLM node filters it out), and the query is not a template."""
    flow = read(chatbot("Help {{name}}."))
    state, (r1, r2, r3) = run_conversation(
        flow,
        [{"query": q, "inputs": {"name": "Dana"}} for q in ["one", "two boom", "three {{#sys.dialogue_count#}}"]],
        llm=FailsOn("two", ["A1", "A3"]),
    )
    assert (r2.status, r2.answer) == ("failed", "")
    run = r3.node_run("llm")
    assert [(m.role, m.content) for m in run.prompt] == [
        ("system", "Help Dana.\n"),
        ("user", "one"),
        ("assistant", "A1"),
        ("user", "two boom"),
        ("assistant", ""),
        ("user", "three {{#sys.dialogue_count#}}"),
    ]
    assert [e.reason for e in run.ledger.entries] == [KEPT] * 4
    # A what-if rebuilds the same prompt from the stored turn.
    what_if = what_if_prompt(flow, state.conversation, 2, "llm", [m.to_dict() for m in run.prompt], run.ledger)
    assert [(m["role"], m["content"]) for m in what_if] == [(m.role, m.content) for m in run.prompt]


def test_a_missing_optional_input_reads_none_in_a_pre_prompt_and_nothing_in_an_expert_prompt():
    """Dify makes every value text for a pre-prompt (``str(None)``); the expert mode's parser leaves a
    None slot empty."""
    form = [{"text-input": {"label": "Nick", "variable": "nick", "required": False}}]
    _, (simple,) = run_conversation(read(chatbot("Hi {{nick}}.", user_input_form=form)), ["Hi."], llm=DemoClient())
    assert simple.node_run("llm").prompt[0].content == "Hi None.\n"
    _, (advanced,) = run_conversation(
        read(expert([{"role": "system", "text": "Hi {{nick}}."}], user_input_form=form)), ["Hi."], llm=DemoClient()
    )
    assert advanced.node_run("llm").prompt[0].content == "Hi ."


def test_the_expert_mode_sample_sends_its_example_before_the_history():
    path = ROOT / "sample_data" / "flows" / "expert-chatbot.yml"
    flow = load_flow(path)
    assert flow.warnings[0].startswith("a basic Chatbot in expert mode: run as its one model call — its prompt")
    queries = yaml.safe_load(path.with_suffix(".queries.json").read_text(encoding="utf-8"))
    _, records = run_conversation(flow, queries, llm=DemoClient())
    assert all(r.succeeded for r in records)
    prompt = [(m.role, m.content) for m in records[-1].node_run("llm").prompt]
    # The restaurant's default fills its slot; the guest's name was never given, so its slot is empty.
    assert prompt[0] == (
        "system",
        "You take table bookings for Casa Lisboa. The guest's name is . Keep every answer to one sentence.",
    )
    assert prompt[1:3] == [
        ("user", "Can I book for two tonight?"),
        ("assistant", "Certainly — two guests tonight; what time suits you?"),
    ]
    assert prompt[3] == ("user", "Hi, I am Dana.") and prompt[-1] == ("user", queries[-1])
    assert len(prompt) == 3 + 2 * (len(queries) - 1) + 1


def test_a_conversation_introduction_fills_the_opening_statements_slots_as_dify_does():
    from core.flow.templates import render_introduction

    statement = "Hi {{name}}! Trains from {{city}} on {{day}}, {{seats}} seats, {{#query#}}<|endoftext|>"
    assert render_introduction(statement, {"name": "{{city}} fan", "city": "Porto", "seats": 2, "day": None}) == (
        "Hi {city} fan! Trains from Porto on {{day}}, 2 seats, {{#query#}}"
    )
    assert render_introduction("", {"city": "Porto"}) == ""
