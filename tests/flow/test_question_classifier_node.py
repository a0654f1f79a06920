"""The Question Classifier runs as Dify ships it: its memory (with its own window rule) as text in
its prompt, one model call, and the branch of the class its reply picks."""

from __future__ import annotations

from dataclasses import replace

import pytest

from core.analysis.findings import CAUSE_WINDOW_SETTING, ledger_difference
from core.flow.errors import FlowError, NodeFailed
from core.flow.graph import Flow, load_flow
from core.flow.imported import import_report
from core.flow.nodes.question_classifier import classifier_frame, classifier_settings, read_reply
from core.flow.records import FAILED
from core.flow.runtime import run_conversation
from core.flow.templates import VariablePool
from core.flow.what_if import what_if_ledger, what_if_prompt
from core.llm.client import DemoClient
from core.model.conversation import QUERY, Conversation, FileRef, Message
from core.model.ledger import KEPT
from core.model.tokens import DEMO_MODEL, counter_for
from tests.conftest import FIXTURES
from tests.flow.test_runtime_prompt import ScriptedClient

TEMPLATE = FIXTURES / "dify_dsl" / "dify-templates__Question_Classifier_Knowledge_Chatbot.yml"
CLASSIFIER = "1711528709608"


def sorter(memory: dict | None = None, *, classes=None, selector=("sys", "query"), instruction: str = "") -> Flow:
    """Start → classifier → one answer per class (``billing`` / ``delivery``)."""
    classifier = {
        "id": "qc",
        "type": "question-classifier",
        "title": "Sorter",
        "model": {"provider": "memlens", "name": "demo", "mode": "chat", "completion_params": {}},
        "classes": classes or [{"id": "b", "name": "billing"}, {"id": "d", "name": "delivery"}],
        "query_variable_selector": list(selector),
        "instruction": instruction,
    }
    if memory is not None:
        classifier["memory"] = memory
    nodes = [
        {"id": "start", "type": "start"},
        classifier,
        {"id": "a-b", "type": "answer", "answer": "billing desk ({{#qc.class_label#}})"},
        {"id": "a-d", "type": "answer", "answer": "delivery desk ({{#qc.class_name#}})"},
    ]
    edges = [["start", "qc"], ["qc", "a-b", "b"], ["qc", "a-d", "d"]]
    return Flow.from_dict({"format": "memlens-flow", "version": 1, "name": "sorter", "nodes": nodes, "edges": edges})


def test_the_dify_template_routes_each_question_down_the_branch_of_the_class_its_model_picks():
    flow = load_flow(TEMPLATE)
    _, records = run_conversation(
        flow,
        ["Questions about how to use products: the blender?", "Other questions: what can you do?"],
        llm=DemoClient(),
    )
    how_to, other = (r.node_run(CLASSIFIER) for r in records)
    assert how_to.emulated and how_to.branch == "1711528736549"
    assert how_to.outputs["class_name"] == "Questions about how to use products"
    assert how_to.outputs["class_label"] == "CLASS 2" and how_to.outputs["class_id"] == "1711528736549"
    assert [r.type for r in records[0].node_runs].count("llm") == 1  # the how-to branch's LLM ran
    # The catch-all class named: its branch is a fixed answer, and no LLM node runs.
    assert (
        other.branch == "1711528737066" and records[1].answer.strip() == "Sorry, I can't help you with these questions."
    )
    assert not [r for r in records[1].node_runs if r.type == "llm"]
    assert CLASSIFIER not in {n.id for n in import_report(flow).pass_through}


def test_a_node_type_that_is_not_emulated_still_takes_its_first_listed_branch_and_says_so():
    flow = sorter()
    data = flow.to_dict()
    data["nodes"][1] = dict(data["nodes"][1], type="human-input")  # a multi-way node MemLens does not run
    _, records = run_conversation(Flow.from_dict(data), ["anything"], llm=DemoClient())
    run = records[0].node_run("qc")
    assert run.emulated is False and run.branch == "b"
    assert "took branch 'b'" in run.notes[0]


def test_the_class_outputs_and_branch_follow_the_reply():
    flow = sorter()
    client = ScriptedClient(
        [
            '```json\n{"category_id": "d", "category_name": "delivery"}\n```',
            '{"category_id": "zz", "category_name": "?"}',
        ]
    )
    _, records = run_conversation(flow, ["where is it?", "hm"], llm=client)
    assert [r.answer for r in records] == ["delivery desk (delivery)", "billing desk (CLASS 1)"]
    assert (
        records[1].node_run("qc").notes[-1]
        == "the reply's category_id 'zz' is not one of the classes: Dify takes the first class"
    )


def test_a_reply_without_json_fails_the_node_and_the_turn():
    _, records = run_conversation(sorter(), ["where is it?"], llm=ScriptedClient(["delivery"]))
    run = records[0].node_run("qc")
    assert records[0].status == FAILED and run.status == FAILED
    assert run.error == "the classifier's reply holds no JSON block, so the node fails"
    assert records[0].answer == ""


def test_memory_reads_the_window_size_even_with_the_window_switched_off_as_shipped():
    queries = ["I'm Dana.", "about billing", "about delivery", "and now?"]
    memory = {"window": {"enabled": False, "size": 2}}
    _, shipped = run_conversation(sorter(memory), queries, llm=DemoClient())
    _, documented = run_conversation(sorter(memory), queries, llm=DemoClient(), fidelity="documented")
    last = shipped[-1].node_run("qc")
    # Two rows, one of them the turn's own placeholder: one earlier turn.
    assert [e.turn for e in last.ledger.entries if e.kept] == [3, 3]
    assert last.memory["window"] == 2
    assert [e.turn for e in documented[-1].node_run("qc").ledger.entries if e.kept] == [1, 1, 2, 2, 3, 3]
    system = last.prompt[0]
    assert system.role == "system" and system.origin == "template"
    assert "Earlier conversation:\nHuman: about delivery\nAssistant: delivery desk (delivery)\n" in system.content
    assert "I'm Dana" not in system.content
    assert [(m.role, m.content) for m in last.prompt[1:]] == [("user", "and now?")]
    # The receipt's "docs and code disagree" names the window setting as the cause; the receipt
    # reads the other profile through a what-if override of the node's fidelity.
    state = run_conversation(sorter(memory), queries, llm=DemoClient())[0]
    flipped = what_if_ledger(sorter(memory), state.conversation, 3, "qc", {"fidelity": "documented"})
    assert [e.turn for e in flipped.entries if e.kept] == [1, 1, 2, 2, 3, 3]
    diff = ledger_difference(last.ledger, documented[-1].node_run("qc").ledger, 3)
    assert diff.causes == (CAUSE_WINDOW_SETTING,) and diff.only_docs == (1, 2)
    assert diff.text == (
        "Dify's docs say this node's window is switched off, so 3 earlier turns would be sent; "
        "Dify 1.x reads the window's size anyway (2 rows, the current turn's one of them) and sends 1."
    )
    label = import_report(sorter(memory)).llm_memory["qc"]["label"]
    assert label.startswith("window 2 turns (its window is switched off, but Dify as shipped reads the size")
    assert label.endswith("documented: no window (500-turn cap))")


def test_a_failed_turns_empty_answer_is_an_empty_line_of_the_history_text():
    b = '{"category_id": "b", "category_name": "billing"}'
    client = ScriptedClient([b, "no json here", b])
    _, records = run_conversation(sorter({"window": {"enabled": True, "size": 5}}), ["one", "two", "three"], llm=client)
    assert [r.status for r in records] == ["succeeded", FAILED, "succeeded"]
    run = records[2].node_run("qc")
    assert run.prompt[0].content.startswith(
        "Earlier conversation:\nHuman: one\nAssistant: billing desk (CLASS 1)\nHuman: two\nAssistant: \n\nSort"
    )
    assert [e.reason for e in run.ledger.entries] == [KEPT] * 4
    assert run.memory["history_as_text"] is True


def test_without_memory_the_prompt_has_no_history_and_the_ledger_says_memory_is_off():
    _, records = run_conversation(sorter(), ["billing please", "and delivery?"], llm=DemoClient())
    run = records[1].node_run("qc")
    assert "Earlier conversation" not in run.prompt[0].content and "Human:" not in run.prompt[0].content
    assert run.ledger.entries and not any(e.kept for e in run.ledger.entries)
    assert run.branch == "d"  # the demo model takes the first class named in the question


def test_instruction_and_class_names_are_rendered_and_a_legacy_start_selector_reads_the_query():
    flow = sorter(
        instruction="Customer: {{#sys.user_id#}}",
        selector=("start", "sys.query"),
        classes=[{"id": "b", "name": "billing"}, {"id": "d", "name": "{{#sys.user_id#}} desk", "label": "D"}],
    )
    client = ScriptedClient(['{"category_id": "d", "category_name": "x"}'])
    _, records = run_conversation(flow, ["parcel?"], llm=client, user_id="ana")
    run = records[0].node_run("qc")
    assert "Instructions for sorting:\nCustomer: ana" in run.prompt[0].content
    assert '"category_name": "ana desk"' in run.prompt[0].content
    assert run.prompt[-1].content == "parcel?"
    assert run.outputs["class_name"] == "ana desk" and run.outputs["class_label"] == "D"


def test_a_what_if_switches_the_classifiers_memory_and_rebuilds_its_prompt():
    flow = sorter({"window": {"enabled": True, "size": 3}})
    state, records = run_conversation(flow, ["billing", "delivery", "which?"], llm=DemoClient())
    conv = state.conversation
    off = what_if_ledger(flow, conv, 2, "qc", {"strategy": "off"}, record=records[2])
    assert not any(e.kept for e in off.entries)
    wide = what_if_ledger(flow, conv, 2, "qc", {"window": 10}, record=records[2])
    assert [e.turn for e in wide.entries if e.reason == KEPT] == [1, 1, 2, 2]
    recorded = [m.to_dict() for m in records[2].node_run("qc").prompt]
    assert what_if_prompt(flow, conv, 2, "qc", recorded, wide) == [
        m.to_dict() for m in records[2].node_run("qc").prompt
    ]
    without = what_if_prompt(flow, conv, 2, "qc", recorded, off)
    assert "Human:" not in without[0]["content"] and "Earlier conversation" not in without[0]["content"]
    assert without[-1] == {
        "role": "user",
        "content": "which?",
        "origin": "current query",
        "tokens": without[-1]["tokens"],
    }


def test_the_prompt_as_sent_to_a_chat_model_word_for_word():
    flow = sorter(
        {"window": {"enabled": True, "size": 3}},
        instruction="Parcels are delivery.",
        classes=[{"id": "b", "name": "billing"}, {"id": "d", "name": "配送"}],
    )
    _, records = run_conversation(flow, ["billing", "and now?"], llm=DemoClient())
    assert [(m.role, m.origin, m.content) for m in records[1].node_run("qc").prompt] == [
        (
            "system",
            "template",
            "Earlier conversation:\nHuman: billing\nAssistant: billing desk (CLASS 1)\n\n"
            "Sort the user's latest question into exactly one of these categories.\n"
            'Categories: [{"category_id": "b", "category_name": "billing"}, '
            '{"category_id": "d", "category_name": "配送"}]\n'
            "Instructions for sorting:\nParcels are delivery.\n"
            "Reply with one of: billing, 配送\n"
            'Give the answer as JSON only: {"category_id": "…", "category_name": "…"}',
        ),
        ("user", "current query", "and now?"),
    ]


def test_a_completion_model_gets_one_text_with_the_question_at_its_end():
    flow = sorter({"window": {"enabled": True, "size": 3}})
    data = flow.to_dict()
    data["nodes"][1]["model"] = {"provider": "memlens", "name": "demo", "mode": "completion", "completion_params": {}}
    client = ScriptedClient(['{"category_id": "d", "category_name": "delivery"}'] * 2)
    _, records = run_conversation(Flow.from_dict(data), ["one", "two"], llm=client)
    prompt = records[1].node_run("qc").prompt
    assert [(m.role, m.origin) for m in prompt] == [("user", "template")]
    assert prompt[0].content.startswith("Earlier conversation:\nHuman: one\nAssistant: delivery desk (delivery)\n\n")
    assert prompt[0].content.endswith('{"category_id": "…", "category_name": "…"}\nQuestion: two')
    assert "Instructions for sorting" not in prompt[0].content  # no instruction, no heading


def test_a_query_that_is_not_there_sends_no_user_message():
    _, records = run_conversation(
        sorter(selector=("nowhere", "text")),
        ["hi"],
        llm=ScriptedClient(['{"category_id": "b", "category_name": "billing"}']),
    )
    assert [m.role for m in records[0].node_run("qc").prompt] == ["system"]


def test_the_frame_sends_history_files_as_the_text_form_does_and_passes_its_options_on():
    frame = classifier_frame(
        [{"category_id": "b", "category_name": "billing"}],
        "",
        "q",
        counter_for(DEMO_MODEL),
        mode="chat",
        with_history=True,
        file_upload=True,
        vision=True,
    )
    assert (frame.file_upload, frame.vision, frame.role_prefix) == (
        True,
        True,
        {"user": "Human", "assistant": "Assistant"},
    )
    shot = Message("user", "look", QUERY, "t:query", files=(FileRef("image", "https://x/y.png"),))
    assert frame.build([shot])[0].content.startswith("Earlier conversation:\nHuman: [image]\nlook\n\nSort")
    assert frame.mode == "text history" and [m.content for m in frame.after] == ["q"]
    plain = classifier_frame([], "", "q", counter_for(DEMO_MODEL), mode="completion", with_history=False)
    assert (plain.file_upload, plain.vision, plain.mode, plain.after) == (False, False, "text history", ())
    assert plain.build([shot])[0].content.startswith("Sort the user's")  # no history part at all
    both = classifier_frame(
        [], "", "q", counter_for(DEMO_MODEL), mode="completion", with_history=True, file_upload=True, vision=True
    )
    assert (both.file_upload, both.vision) == (True, True)
    # No query: no user message, and none counted in what the prompt costs besides its history.
    empty = classifier_frame([], "", "", counter_for(DEMO_MODEL), mode="chat", with_history=False)
    assert empty.after == ()


def test_a_what_if_without_a_recorded_prompt_estimates_the_classifiers_fixed_prompt():
    """A conversation imported with the flow attached has no recorded prompt sizes: the what-if builds
    the classifier's prompt from its settings and the turn's query, as a run would have."""
    flow = sorter({"window": {"enabled": True, "size": 5}})
    state, _ = run_conversation(flow, ["billing", "and delivery?"], llm=DemoClient())
    bare = Conversation(id="c", turns=[replace(t, meta={}) for t in state.conversation.turns])
    ledger = what_if_ledger(flow, bare, 1, "qc")
    frame = classifier_frame(
        [{"category_id": "b", "category_name": "billing"}, {"category_id": "d", "category_name": "delivery"}],
        "",
        "and delivery?",
        counter_for(DEMO_MODEL),
        mode="chat",
        with_history=True,
    )
    assert ledger.prompt_tokens - ledger.history_tokens == frame.fixed_tokens()
    assert [e.turn for e in ledger.entries if e.kept] == [1, 1]


@pytest.mark.parametrize(
    "reply, picked, note",
    [
        ('{"category_id": "d", "category_name": "delivery"}', 1, None),
        ('```json\n[{"category_id": "d", "category_name": "delivery"}]\n```', 1, None),  # a fenced list of one
        (
            '{"category_id": "d"}',
            0,
            "the reply's JSON has no category_id and category_name: Dify takes the first class",
        ),
        ('Sure! ```json\n{"category_id": "d", "category_name": "delivery"}\n``` done', 1, None),
        ('[{"category_id": "d", "category_name": "delivery"}]', 1, None),
        ('<think>maybe {"category_id": "b"}</think>{"category_id": "d", "category_name": "delivery"}', 1, None),
        ('{"category": "d"}', 0, "the reply's JSON has no category_id and category_name: Dify takes the first class"),
    ],
)
def test_read_reply_picks_a_class_as_dify_parses_the_reply(reply, picked, note):
    assert read_reply(reply, ["b", "d"]) == (picked, note)


NO_BLOCK = "the classifier's reply holds no JSON block, so the node fails"
NOT_JSON = "the classifier's reply is not valid JSON ("
A_LIST = "the classifier's reply is a JSON list, not one object, so the node fails"


@pytest.mark.parametrize(
    "reply, error",
    [
        ("delivery", NO_BLOCK),
        ("done }", NO_BLOCK),  # an end marker but no start marker
        ('{"category_id": "d"', NO_BLOCK),  # a start marker but no end marker
        # Dify looks for its start markers in a fixed order, not by position: the backtick before the object
        # wins, and what lies between the two backticks is read as the JSON.
        ('see `x` {"category_id": "d", "category_name": "delivery"}', NOT_JSON),
        ("{category_id: d}", NOT_JSON),
        # "{" is looked for before "[": two objects in a list are read from the first "{" to the last "}".
        ('[{"category_id": "d"}, {"category_id": "b"}]', NOT_JSON),
        ("[1, 2]", A_LIST),
        ("} [1, 2]", A_LIST),  # an end marker before the start does not count
        ('```\n[{"category_id": "d"}, {"category_id": "b"}]\n```', A_LIST),
        ("```json```", NO_BLOCK),  # the fence's end is where the JSON would start
        ("`5`", "the classifier's reply is JSON but not an object, so the node fails"),
    ],
)
def test_read_reply_refuses_what_dify_cannot_parse(reply, error):
    with pytest.raises(NodeFailed) as refused:
        read_reply(reply, ["b", "d"])
    assert str(refused.value).startswith(error) if error == NOT_JSON else str(refused.value) == error


@pytest.mark.parametrize(
    "change, error",
    [
        ({"classes": []}, "'classes' must be a list of at least one {id, name} class"),
        ({"classes": "billing"}, "'classes' must be a list of at least one {id, name} class"),
        ({"classes": [{"name": "x"}]}, "class 1 needs an 'id' and a 'name'"),
        ({"classes": [{"id": "a", "name": "x"}, {"id": "", "name": "y"}]}, "class 2 needs an 'id' and a 'name'"),
        ({"classes": [{"id": "a", "name": 5}]}, "class 1 needs an 'id' and a 'name'"),
        ({"classes": ["a"]}, "class 1 needs an 'id' and a 'name'"),
        (
            {"query_variable_selector": "sys.query"},
            "'query_variable_selector' must be a selector such as ['sys', 'query']",
        ),
        (
            {"query_variable_selector": ["sys", 1]},
            "'query_variable_selector' must be a selector such as ['sys', 'query']",
        ),
        ({"instruction": 3}, "'instruction' must be text"),
        ({"memory": {"window": {"enabled": True, "size": "many"}}}, "memory window size 'many' is not a whole number"),
    ],
)
def test_a_malformed_classifier_is_refused_when_the_flow_is_read(change, error):
    data = sorter().to_dict()
    data["nodes"][1] = {**data["nodes"][1], **change}
    with pytest.raises(FlowError) as refused:
        Flow.from_dict(data)
    assert str(refused.value) == f"flow: node 'qc' (question-classifier): {error}"


def test_the_settings_reader_names_classes_without_a_label_as_dify_does():
    settings = classifier_settings(
        sorter(
            classes=[{"id": "b", "name": "billing"}, {"id": 7, "label": ""}, {"id": "x", "name": "x", "label": "Extra"}]
        ).node("qc")
    )
    assert [(c.id, c.name, c.label) for c in settings.classes] == [
        ("b", "billing", "CLASS 1"),
        ("7", "", "CLASS 2"),
        ("x", "x", "Extra"),
    ]
    assert settings.window() is None and settings.memory_label() == "off" and settings.instruction == ""
    data = sorter().to_dict()
    del data["nodes"][1]["instruction"], data["nodes"][1]["query_variable_selector"]
    bare = classifier_settings(Flow.from_dict(data).node("qc"))
    assert (bare.instruction, bare.query_selector) == ("", ())


@pytest.mark.parametrize(
    "window, shipped, documented, label",
    [
        ({"enabled": True, "size": 3}, 3, 3, "window 3 turns"),
        (
            {"enabled": False, "size": 3},
            3,
            None,
            "window 3 turns (its window is switched off, but Dify as shipped reads "
            "the size anyway; documented: no window (500-turn cap))",
        ),
        ({"enabled": False, "size": 0}, None, None, "no window (500-turn cap)"),
        ({"enabled": True}, None, None, "no window (500-turn cap)"),
    ],
)
def test_the_window_each_dify_profile_reads(window, shipped, documented, label):
    settings = classifier_settings(sorter({"window": window}).node("qc"))
    assert (settings.window("code"), settings.window("documented"), settings.memory_label()) == (
        shipped,
        documented,
        label,
    )


def test_an_older_exports_start_node_selector_reads_system_variables():
    pool = VariablePool(system={"query": "hi"})
    pool.add_outputs("start", {"name": "x"})
    assert pool.get(["start", "sys.query"]) == "hi"
    assert pool.get(["start", "name"]) == "x"


def test_with_token_counting_on_the_classifier_budgets_its_history_after_its_own_prompt():
    """graphon's classifier counts its prompt without history into the budget (the LLM node passes an
    empty list): rest = context − max_tokens − that prompt."""
    _, records = run_conversation(
        sorter({"window": {"enabled": True, "size": 5}}),
        ["billing", "delivery"],
        llm=DemoClient(),
        plugin_token_counting=True,
    )
    ledger = records[1].node_run("qc").ledger
    fixed = ledger.prompt_tokens - ledger.history_tokens
    assert records[1].node_run("qc").memory["prompt_reserve"] == 0
    assert ledger.context_size and ledger.budget == ledger.context_size - fixed
    assert ledger.budget_note == (
        f"{ledger.context_size:,} context − 0 max_tokens − {fixed:,} prompt; the history "
        f"is compared with it counted as a list (+3)"
    )
