"""The Parameter Extractor (graphon ``ParameterExtractorNode``): its memory read as text lines with the
classifier's window rule, its budget with the prompt and 1,000 tokens reserved, and its reply read,
checked and typed as Dify does."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest

from core.analysis.debug_view import receipt
from core.flow.errors import FlowError
from core.flow.graph import Flow
from core.flow.imported import import_report
from core.flow.nodes.parameter_extractor import (
    FUNCTION_CALL_NOTE,
    NO_JSON,
    check,
    extracted,
    extractor_frame,
    extractor_settings,
    first_object,
    read_reply,
    transform,
)
from core.flow.records import FAILED
from core.flow.runtime import run_conversation
from core.flow.what_if import what_if_ledger, what_if_prompt
from core.llm.client import DemoClient
from core.model.conversation import Conversation
from core.model.ledger import KEPT
from core.model.tokens import counter_for
from tests.flow.test_runtime_prompt import FailsOn, ScriptedClient

ORDER = {"name": "order_number", "type": "number", "description": "the order number", "required": True}
NAME = {"name": "name", "type": "string", "description": "the customer's name", "required": False}
MODEL = {"provider": "openai", "name": "gpt-4o-mini", "mode": "chat", "completion_params": {}}


def extractor(
    memory: dict | None = None,
    *,
    parameters=(ORDER, NAME),
    mode: str = "prompt",
    model=None,
    instruction: str = "",
    query=("sys", "query"),
) -> Flow:
    """Start → extractor → an answer that shows what it extracted."""
    node = {
        "id": "pe",
        "type": "parameter-extractor",
        "title": "Slots",
        "model": model or MODEL,
        "query": list(query),
        "reasoning_mode": mode,
        "instruction": instruction,
        "parameters": [dict(p) for p in parameters],
    }
    if memory is not None:
        node["memory"] = memory
    nodes = [
        {"id": "start", "type": "start"},
        node,
        {
            "id": "answer",
            "type": "answer",
            "answer": "order={{#pe.order_number#}} name={{#pe.name#}} ok={{#pe.__is_success#}}",
        },
    ]
    return Flow.from_dict(
        {
            "format": "memlens-flow",
            "version": 1,
            "name": "slots",
            "nodes": nodes,
            "edges": [["start", "pe"], ["pe", "answer"]],
        }
    )


QUERIES = ["Hi, I'm Dana.", "My order number is 4411.", "Where is it?", "Any news?"]


def test_memory_fills_a_slot_given_turns_ago_and_a_small_window_loses_it():
    _, wide = run_conversation(extractor({"window": {"enabled": True, "size": 5}}), QUERIES, llm=DemoClient())
    assert [r.answer for r in wide] == [
        "order=0 name=Dana ok=1",
        "order=4411 name=Dana ok=1",
        "order=4411 name=Dana ok=1",
        "order=4411 name=Dana ok=1",
    ]
    # Two rows, one of them the turn's own placeholder: one earlier turn, so the order number is gone by turn 4.
    _, narrow = run_conversation(extractor({"window": {"enabled": True, "size": 2}}), QUERIES, llm=DemoClient())
    assert [r.answer for r in narrow] == [
        "order=0 name=Dana ok=1",
        "order=4411 name=Dana ok=1",
        "order=4411 name= ok=1",
        "order=0 name= ok=1",
    ]
    last = narrow[-1].node_run("pe")
    assert [(e.turn, e.reason) for e in last.ledger.entries if e.kept] == [(3, KEPT), (3, KEPT)]
    assert last.memory["history_as_text"] is True and last.memory["prompt_reserve"] == 1000
    assert last.outputs == {
        "__is_success": 1,
        "__reason": None,
        "__usage": last.outputs["__usage"],
        "order_number": 0,
        "name": "",
    }
    assert last.outputs["__usage"]["prompt_tokens"] > 0


def test_without_memory_only_the_text_itself_is_read():
    _, records = run_conversation(extractor(), QUERIES, llm=DemoClient())
    assert [r.answer for r in records] == [
        "order=0 name=Dana ok=1",
        "order=4411 name= ok=1",
        "order=0 name= ok=1",
        "order=0 name= ok=1",
    ]
    run = records[1].node_run("pe")
    assert "Human:" not in run.prompt[0].content and not any(e.kept for e in run.ledger.entries)


def test_the_prompt_as_sent_to_a_chat_model_word_for_word():
    flow = extractor({"window": {"enabled": True, "size": 3}}, instruction="Numbers only for {{#sys.user_id#}}.")
    _, records = run_conversation(flow, ["Hi, I'm Dana.", "Order 7730 please"], llm=DemoClient(), user_id="ana")
    assert [(m.role, m.origin, m.content) for m in records[1].node_run("pe").prompt] == [
        (
            "system",
            "template",
            "Earlier conversation:\nHuman: Hi, I'm Dana.\nAssistant: order=0 name=Dana ok=1\n\n"
            "Extract the parameters below from the user's text (the earlier conversation may hold some of them).\n"
            'Parameters as a JSON schema: {"type": "object", "properties": {"order_number": {"description": '
            '"the order number", "type": "number"}, "name": {"description": "the customer\'s name", "type": '
            '"string"}}, "required": ["order_number"]}\n'
            "Instructions:\nNumbers only for ana.\n"
            "Reply with one JSON object holding a value for every parameter, and nothing else.",
        ),
        ("user", "current query", "Order 7730 please"),
    ]
    assert records[1].answer == "order=7730 name=Dana ok=1"


def test_a_number_no_json_carries_is_null_in_the_outputs_and_the_run_says_so():
    """A model answering 1e999 (or "1.5e400") gives inf; the stream, the store and an export carry JSON."""
    events = []
    client = ScriptedClient(['{"order_number": 1e999, "name": "a"}'])
    _, records = run_conversation(
        extractor({"window": {"enabled": True, "size": 3}}), ["one"], llm=client, on_event=events.append
    )
    run = records[0].node_run("pe")
    assert run.outputs["order_number"] is None
    assert "parameter-extractor node 'pe': outputs: 'order_number' was inf, written as null" in run.notes
    assert "Infinity" not in json.dumps(events, default=str) and "Infinity" not in json.dumps(run.outputs)


def test_a_completion_model_gets_one_text_with_the_text_at_its_end():
    model = dict(MODEL, mode="completion")
    client = ScriptedClient(['{"order_number": 1, "name": "a"}'] * 2)
    _, records = run_conversation(
        extractor({"window": {"enabled": True, "size": 3}}, model=model), ["one", "two"], llm=client
    )
    prompt = records[1].node_run("pe").prompt
    assert [(m.role, m.origin) for m in prompt] == [("user", "template")]
    assert prompt[0].content.startswith("Earlier conversation:\nHuman: one\nAssistant: order=1 name=a ok=1\n\n")
    assert prompt[0].content.endswith("and nothing else.\nText: two")
    assert "Instructions:" not in prompt[0].content


def test_the_window_is_read_as_the_classifier_reads_it_in_each_profile():
    memory = {"window": {"enabled": False, "size": 2}}
    _, shipped = run_conversation(extractor(memory), QUERIES, llm=DemoClient())
    _, documented = run_conversation(extractor(memory), QUERIES, llm=DemoClient(), fidelity="documented")
    assert [e.turn for e in shipped[-1].node_run("pe").ledger.entries if e.kept] == [3, 3]
    assert [e.turn for e in documented[-1].node_run("pe").ledger.entries if e.kept] == [1, 1, 2, 2, 3, 3]
    label = import_report(extractor(memory)).llm_memory["pe"]["label"]
    assert label.startswith("window 2 turns (its window is switched off, but Dify as shipped reads the size")


def test_with_token_counting_on_the_budget_keeps_the_prompt_and_1000_tokens_free():
    """graphon's extractor budgets its history with its own prompt counted plus 1,000 tokens; the
    Question Classifier with its prompt alone; the LLM node with neither (an empty list: 3 tokens)."""
    model = dict(MODEL, completion_params={"max_tokens": 100})
    flow = extractor({"window": {"enabled": True, "size": 5}}, model=model)
    _, records = run_conversation(flow, ["one", "two"], llm=DemoClient(), plugin_token_counting=True)
    run = records[1].node_run("pe")
    fixed = run.ledger.prompt_tokens - run.ledger.history_tokens
    assert run.ledger.budget == 128_000 - 100 - fixed - 1000
    assert run.ledger.budget_note == (
        f"128,000 context − 100 max_tokens − {fixed:,} prompt − 1,000 reserved; the "
        f"history is compared with it counted as a list (+3)"
    )
    # Without counting, nothing prunes: no budget at all.
    _, off = run_conversation(flow, ["one", "two"], llm=DemoClient())
    assert off[1].node_run("pe").ledger.budget is None


def long_turns():
    """Three turns of about 2,500 tokens and a short fourth on an 8,192-token model, token counting on:
    the fourth turn's history (about 7,500 tokens) fits under 8,192 less the prompt, not 1,000 less."""
    flow = extractor({"window": {"enabled": True, "size": 10}}, model=dict(MODEL, name="gpt-4"))
    words = "word " * 2500
    state, records = run_conversation(
        flow,
        [f"one {words}", f"two {words}", f"three {words}", "four"],
        llm=ScriptedClient(['{"order_number": 1, "name": ""}'] * 4),
        plugin_token_counting=True,
    )
    return flow, state, records


def test_a_small_context_prunes_the_oldest_history_first():
    flow, state, records = long_turns()
    ledger = records[-1].node_run("pe").ledger
    assert ledger.budget == 8_192 - (ledger.prompt_tokens - ledger.history_tokens) - 1000
    # Dify pops single messages, oldest first: turn 1's query goes, its short answer stays. (The LLM
    # node's budget, the prompt not counted, would have kept all of it.)
    assert [(e.turn, e.role, e.reason) for e in ledger.entries] == [
        (1, "user", "over_budget"),
        (1, "assistant", KEPT),
        (2, "user", KEPT),
        (2, "assistant", KEPT),
        (3, "user", KEPT),
        (3, "assistant", KEPT),
    ]
    assert sum(e.tokens for e in ledger.entries) + 3 < 8_192


def test_function_call_mode_says_it_asks_for_json_in_the_reply_and_a_failed_read_says_why():
    flow = extractor(mode="function_call")
    _, records = run_conversation(flow, ["no digits here"], llm=ScriptedClient(["I could not find them."]))
    run = records[0].node_run("pe")
    assert run.notes[0] == FUNCTION_CALL_NOTE
    assert run.notes[-1] == f"not a success: {NO_JSON}"
    assert run.outputs["__is_success"] == 0 and run.outputs["__reason"] == NO_JSON
    assert records[0].answer == "order=0 name= ok=0"


def test_a_failed_model_call_fails_the_node():
    _, records = run_conversation(extractor(), ["boom"], llm=FailsOn("boom", []))
    assert records[0].status == FAILED and records[0].node_run("pe").error == "the provider is down"


def test_a_what_if_switches_its_memory_and_rebuilds_its_prompt():
    flow = extractor({"window": {"enabled": True, "size": 2}})
    state, records = run_conversation(flow, QUERIES, llm=DemoClient())
    conv = state.conversation
    wide = what_if_ledger(flow, conv, 3, "pe", {"window": 10}, record=records[3])
    assert [e.turn for e in wide.entries if e.reason == KEPT] == [1, 1, 2, 2, 3, 3]
    recorded = [m.to_dict() for m in records[3].node_run("pe").prompt]
    narrow = what_if_ledger(flow, conv, 3, "pe", record=records[3])
    assert what_if_prompt(flow, conv, 3, "pe", recorded, narrow) == recorded
    prompt = what_if_prompt(flow, conv, 3, "pe", recorded, wide)
    assert "Human: My order number is 4411." in prompt[0]["content"]
    off = what_if_prompt(flow, conv, 3, "pe", recorded, what_if_ledger(flow, conv, 3, "pe", {"strategy": "off"}))
    assert "Earlier conversation" not in off[0]["content"] and off[-1]["content"] == "Any news?"
    # Without a recorded prompt the what-if builds it from the settings and the turn's query.
    bare = Conversation(id="c", turns=[replace(t, meta={}) for t in conv.turns])
    estimated = what_if_ledger(flow, bare, 3, "pe")
    frame = extractor_frame(
        extractor_settings(flow.node("pe")).schema(),
        "",
        "Any news?",
        counter_for("gpt-4o-mini"),
        mode="chat",
        with_history=True,
    )
    assert estimated.prompt_tokens - estimated.history_tokens == frame.fixed_tokens()


def test_its_receipt_counts_the_history_lines_as_memory_history():
    _, records = run_conversation(extractor({"window": {"enabled": True, "size": 5}}), QUERIES[:2], llm=DemoClient())
    run = records[1].node_run("pe")
    r = receipt(
        {"node_id": "pe", "prompt": [m.to_dict() for m in run.prompt], "ledger": run.ledger},
        "Slots",
        exact=True,
        encoding="o200k_base",
    )
    assert r.used_by_origin["memory history"] == run.prompt[0].history_tokens > 0
    assert sum(r.used_by_origin.values()) == sum(m.tokens for m in run.prompt)


# -- settings ---------------------------------------------------------------------------------------


def test_the_settings_and_the_schema_dify_builds_from_them():
    parameters = [
        dict(ORDER, type="number"),
        {"name": "tier", "type": "select", "options": ["gold", "basic"], "description": "", "required": False},
        {"name": "urgent", "type": "bool", "description": "is it urgent", "required": False},
        {"name": "tags", "type": "array[string]", "description": "tags", "required": True},
    ]
    settings = extractor_settings(extractor(parameters=parameters, mode="").node("pe"))
    assert settings.reasoning_mode == "function_call"  # unset: Dify's default
    assert [(p.name, p.type, p.options) for p in settings.parameters] == [
        ("order_number", "number", ()),
        ("tier", "string", ("gold", "basic")),
        ("urgent", "boolean", ()),
        ("tags", "array[string]", ()),
    ]
    assert settings.schema() == {
        "type": "object",
        "properties": {
            "order_number": {"description": "the order number", "type": "number"},
            "tier": {"description": "", "type": "string", "enum": ["gold", "basic"]},
            "urgent": {"description": "is it urgent", "type": "boolean"},
            "tags": {"description": "tags", "type": "array", "items": {"type": "string"}},
        },
        "required": ["order_number", "tags"],
    }
    assert (settings.instruction, settings.query_selector, settings.window(), settings.memory_label()) == (
        "",
        ("sys", "query"),
        None,
        "off",
    )


@pytest.mark.parametrize(
    "change, error",
    [
        ({"parameters": []}, "'parameters' must be a list of at least one {name, type, description, required}"),
        ({"parameters": "order"}, "'parameters' must be a list of at least one {name, type, description, required}"),
        ({"parameters": ["order"]}, "parameter 1 must be {name, type, description, required}"),
        ({"parameters": [dict(ORDER, name="")]}, "parameter 1 needs a name"),
        (
            {"parameters": [ORDER, dict(NAME, name="__reason")]},
            "parameter 2 is named '__reason': __reason and __is_success are the node's own outputs",
        ),
        (
            {"parameters": [dict(ORDER, type="date")]},
            "parameter 'order_number' has type 'date'; expected one of string, select, number, boolean, bool, "
            "array[string], array[number], array[object], array[boolean]",
        ),
        (
            {"parameters": [dict(ORDER, type=["{{#sys.query#}}", 1])]},
            "parameter 'order_number' has type ['{{#sys.query#}}', 1]; expected one of string, select, number, boolean, bool, "
            "array[string], array[number], array[object], array[boolean]",
        ),
        ({"parameters": [dict(ORDER, options="a")]}, "parameter 'order_number': 'options' must be a list of texts"),
        ({"parameters": [dict(ORDER, description=3)]}, "parameter 'order_number': 'description' must be text"),
        ({"parameters": [ORDER, ORDER]}, "parameter names must differ; used more than once: 'order_number'"),
        (
            {"parameters": [NAME, ORDER, NAME, ORDER]},
            "parameter names must differ; used more than once: 'name', 'order_number'",
        ),
        ({"query": "sys.query"}, "'query' must be a selector such as ['sys', 'query']"),
        ({"instruction": 3}, "'instruction' must be text"),
        ({"reasoning_mode": "react"}, "reasoning_mode 'react' is unknown; expected function_call or prompt"),
        ({"memory": {"window": {"enabled": True, "size": "many"}}}, "memory window size 'many' is not a whole number"),
    ],
)
def test_a_malformed_extractor_is_refused_when_the_flow_is_read(change, error):
    data = extractor().to_dict()
    data["nodes"][1] = {**data["nodes"][1], **change}
    with pytest.raises(FlowError) as refused:
        Flow.from_dict(data)
    assert str(refused.value) == f"flow: node 'pe' (parameter-extractor): {error}"


# -- reading the reply ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "reply, found",
    [
        ('{"a": 1}', {"a": 1}),
        ('Sure: ```json\n{"a": 1}\n``` done', {"a": 1}),
        ('[{"a": 1}]', {"a": 1}),  # the list is not an object; the object inside it is the next start
        ('[1] then {"b": 2}', {"b": 2}),
        ('{oops} {"b": 2}', {"b": 2}),  # a span that is not JSON is passed over
        ('{"outer": {"inner": 1}}', {"outer": {"inner": 1}}),
        ('{"a": "}"}', None),  # a bracket inside a string ends the span, as Dify's scan has it
        ('{"a": [1}', None),  # a bracket that does not fit ends every span still open
        ('{"a": 1', None),
        ("no json at all", None),
        ("} ] {", None),
        ("[" * 3000 + "]" * 3000 + ' {"deep": false}', {"deep": False}),  # too deep to parse: passed over
    ],
)
def test_first_object_finds_what_difys_scan_finds(reply, found):
    assert first_object(reply) == found


P = extractor_settings(
    extractor(
        parameters=[
            ORDER,
            NAME,
            {"name": "tier", "type": "select", "options": ["gold", "basic"], "description": "", "required": False},
            {"name": "urgent", "type": "boolean", "description": "", "required": False},
            {"name": "tags", "type": "array[string]", "description": "", "required": False},
        ]
    ).node("pe")
).parameters
GOOD = {"order_number": 5, "name": "Dana", "tier": "gold", "urgent": True, "tags": ["a"]}


@pytest.mark.parametrize(
    "result, reason",
    [
        (GOOD, None),
        (dict(GOOD, order_number=True), None),  # a boolean passes as a number (Python's bool is an int)
        (dict(GOOD, tags=[]), None),
        ({k: v for k, v in GOOD.items() if k != "tags"}, "Invalid number of parameters"),
        (dict(GOOD, extra=1), "Invalid number of parameters"),
        ({**{k: v for k, v in GOOD.items() if k != "order_number"}, "x": 1}, "Parameter order_number is required"),
        (
            {**{k: v for k, v in GOOD.items() if k != "name"}, "x": 1},
            "Invalid value for parameter name: expected string, got nothing (None)",
        ),
        (dict(GOOD, order_number="5"), "Invalid value for parameter order_number: expected number, got string ('5')"),
        (dict(GOOD, urgent=1), "Invalid value for parameter urgent: expected boolean, got number (1)"),
        (dict(GOOD, tags=["a", 2]), "Invalid value for parameter tags: expected array[string], got array (['a', 2])"),
        (dict(GOOD, tags="a"), "Invalid value for parameter tags: expected array[string], got string ('a')"),
        (dict(GOOD, name={"x": 1}), "Invalid value for parameter name: expected string, got object ({'x': 1})"),
        (dict(GOOD, tier="silver"), "Invalid `select` value for parameter tier"),
        (dict(GOOD, name=True), "Invalid value for parameter name: expected string, got boolean (True)"),
        (dict(GOOD, name=[1]), "Invalid value for parameter name: expected string, got array ([1])"),
    ],
)
def test_check_gives_the_first_way_a_result_fails_difys_checks(result, reason):
    assert check(P, result) == reason


@pytest.mark.parametrize(
    "kind, value, fits",
    [
        ("array[number]", [1, 2.5, True], True),
        ("array[number]", ["1"], False),
        ("array[boolean]", [True], True),
        ("array[boolean]", [1], False),
        ("array[object]", [{"a": 1}], True),
        ("array[object]", ["a"], False),
        ("array[string]", [], True),
        ("number", 0.5, True),
        ("boolean", False, True),
    ],
)
def test_each_array_item_is_checked_against_the_item_type(kind, value, fits):
    parameter = extractor_settings(
        extractor(parameters=[{"name": "v", "type": kind, "description": "", "required": False}]).node("pe")
    ).parameters
    reason = check(parameter, {"v": value})
    assert (reason is None) is fits
    assert fits or reason.startswith(f"Invalid value for parameter v: expected {kind}, got ")


def typed(kind: str, value):
    parameter = extractor_settings(
        extractor(parameters=[{"name": "v", "type": kind, "description": "", "required": False}]).node("pe")
    ).parameters
    return transform(parameter, {"v": value} if value is not ... else {})["v"]


@pytest.mark.parametrize(
    "kind, value, out",
    [
        ("number", 3, 3),
        ("number", 2.5, 2.5),
        ("number", "3", 3),
        ("number", "2.5", 2.5),
        ("number", True, 1),
        ("number", "three", 0),
        ("number", "1e3", 0),
        ("number", None, 0),
        ("number", [1], 0),
        ("number", ..., 0),
        ("boolean", True, True),
        ("boolean", 0, False),
        ("boolean", 2, True),
        ("boolean", 1.0, False),
        ("boolean", "true", False),
        ("boolean", ..., False),
        ("string", "x", "x"),
        ("string", 5, ""),
        ("string", ..., ""),
        ("select", "gold", "gold"),
        ("array[string]", ["a", 1, "b"], ["a", "b"]),
        ("array[string]", "a", []),
        ("array[string]", ..., []),
        ("array[number]", ["1", "a", 2, True, 2.5], [1, 2, 1, 2.5]),
        ("array[boolean]", [True, 1, False, "x"], [True, False]),
        ("array[object]", [{"a": 1}, 1, []], [{"a": 1}]),
    ],
)
def test_transform_puts_each_value_into_its_type_as_dify_does(kind, value, out):
    result = typed(kind, value)
    assert result == out and type(result) is type(out)


def test_every_parameter_is_typed_whatever_its_place():
    assert transform((P[4], P[0], P[3]), {"tags": "x", "order_number": "7", "urgent": 1}) == {
        "tags": [],
        "order_number": 7,
        "urgent": True,
    }


def test_a_reply_without_json_gives_the_empty_values_and_a_reason():
    assert read_reply("nothing to see", P[:4]) == (
        {"order_number": 0, "name": "", "tier": "", "urgent": False},
        "Invalid `select` value for parameter tier",
    )  # the empty select value fails the check after
    assert read_reply("nothing", P[:2]) == ({"order_number": 0, "name": ""}, NO_JSON)
    # Arrays get no empty value in the stand-in result, so the count check fails first.
    assert read_reply("nothing", (P[0], P[4])) == ({"order_number": 0, "tags": []}, "Invalid number of parameters")
    # A reply that reads but fails a check keeps its values.
    assert read_reply('{"order_number": "12", "name": "Dana"}', P[:2]) == (
        {"order_number": 12, "name": "Dana"},
        "Invalid value for parameter order_number: expected number, got string ('12')",
    )


def test_the_frame_passes_its_options_on_and_writes_the_schema_as_it_is():
    schema = {
        "type": "object",
        "properties": {"关键词": {"description": "提取关键词", "type": "string"}},
        "required": [],
    }
    counter = counter_for("gpt-4o-mini")
    for mode in ("chat", "completion"):
        frame = extractor_frame(schema, "", "q", counter, mode=mode, with_history=False, file_upload=True, vision=True)
        assert (frame.mode, frame.file_upload, frame.vision, frame.role_prefix) == (
            "text history",
            True,
            True,
            {"user": "Human", "assistant": "Assistant"},
        )
        assert '{"关键词": {"description": "提取关键词"' in frame.template
        plain = extractor_frame(schema, "", "q", counter, mode=mode, with_history=False)
        assert (plain.file_upload, plain.vision) == (False, False)
    assert extractor_frame(schema, "", "", counter, mode="chat", with_history=True).after == ()


def test_extracted_says_the_values_and_why_a_run_is_not_a_success():
    assert (
        extracted({"__is_success": 1, "__reason": None, "__usage": {}, "order": 4411, "name": "Dana"})
        == 'order = 4411, name = "Dana"'
    )
    assert (
        extracted({"__is_success": 0, "__reason": "Invalid number of parameters", "tags": []})
        == "tags = [] (not a success: Invalid number of parameters)"
    )
    assert extracted({"name": "Zoë"}) == 'name = "Zoë"'  # as written, not escaped


def test_the_receipts_docs_versus_code_sentence_says_the_extractor_subtracts_its_prompt_and_1000_more():
    from core.analysis.findings import CAUSE_BUDGET, ledger_difference

    flow, state, records = long_turns()
    code = records[-1].node_run("pe").ledger
    docs = what_if_ledger(
        flow, state.conversation, 3, "pe", {"fidelity": "documented"}, record=records[-1], plugin_token_counting=True
    )
    diff = ledger_difference(code, docs, 3)
    fixed = docs.prompt_tokens - docs.history_tokens
    assert diff.causes == (CAUSE_BUDGET,)
    assert diff.text == (
        f"The docs' budget subtracts the prompt ({fixed:,} tokens) and is {docs.budget:,} tokens, "
        f"pruning 0 messages; Dify 1.x subtracts the prompt too and 1,000 tokens more, then compares "
        f"the history counted as a list with {code.budget:,} tokens, pruning 1 message."
    )


def test_its_run_findings_say_the_budget_it_pruned_to():
    from core.analysis.findings import SILENT_PRUNING, run_findings

    flow, state, records = long_turns()
    (found,) = [f for f in run_findings(flow, state.conversation, records) if f.kind == SILENT_PRUNING]
    assert found.subject == "Slots" and found.data["turns"] == [3, 4]
    assert "context size − max_tokens − the prompt − 1,000)" in found.detail
