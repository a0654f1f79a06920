"""The debugger page (AppTest): defaults, a chat turn, the switchboard, branches, variables."""

import re

import pytest
from streamlit.testing.v1 import AppTest

from core.llm import client as llm
from core.service.sessions import ConversationService
from core.store import repo
from core.store.db import Database
from tests.conftest import ROOT
from tests.rendered import open_tab, shown


@pytest.fixture
def app(tmp_path, monkeypatch):
    url = f"sqlite:///{tmp_path / 'memlens.db'}"
    monkeypatch.setenv("MEMLENS_DATABASE_URL", url)
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=60)
    at.run()
    assert not at.exception, at.exception
    at.db_url = url
    return at


def chips(at):
    """(node, reason) of every marker on the page, message by message."""
    out = []
    for m in at.chat_message:
        html = shown("".join(md.value for md in m.markdown))
        out.append(re.findall(r'data-node="([^"]+)" data-reason="([^"]+)"', html))
    return out


def db(at):
    return Database(at.db_url)


def test_the_app_opens_on_a_ready_demo_where_memory_drops_something(app):
    assert shown(app.title[0].value) == "Demo: support-bot forgets a name"
    assert len(app.chat_message) == 16  # 8 turns
    markers = chips(app)
    responder = [dict(m).get("responder") for m in markers[:14]]
    assert responder[:8] == ["outside_window"] * 8 and responder[8:14] == ["kept"] * 6  # window: turns 5–7
    assert all(dict(m).get("classifier") == "memory_off" for m in markers[:14])
    page = shown("".join(md.value for m in app.chat_message for md in m.markdown))
    assert "“Responder” remembers from here on" in shown("".join(md.value for md in app.markdown))
    assert "I don't know your name" in page  # the demo model forgot the name at turn 6


def test_new_conversation_starts_one_on_a_sample_flow_while_others_are_listed(app):
    """The conversation picker is drawn before the popover: Start used to set its key after it
    was drawn, which Streamlit refuses, so every Start beside a listed conversation failed."""
    flows = {f.flow_id: f.flow_name for f in ConversationService(db(app)).flows()}
    window = next(i for i, name in flows.items() if name == "window-memory")
    app.selectbox(key="new_flow").set_value(window)
    app.text_input(key="new_name").set_value("Trying the window node")
    app.button(key="new_start").click().run()
    assert not app.exception, app.exception
    assert shown(app.title[0].value) == "Trying the window node"
    app.chat_input(key="chat_input").set_value("Hello there").run()
    assert not app.exception and len(app.chat_message) == 2
    assert shown(app.title[0].value) == "Trying the window node"
    started = [c for c in ConversationService(db(app)).conversations() if c.name == "Trying the window node"]
    assert len(started) == 1 and ConversationService(db(app)).flow_version(started[0].flow_version_id).flow_id == window


def own_file(app, name: str, content: bytes, round_: int = 0, *, startable: bool = True):
    """Choose "your own file" in the New conversation popover and upload ``content`` as ``name``;
    ``startable``: Start is on once it arrived (not while a required start input is empty)."""
    app.radio(key="new_source").set_value("file").run()
    assert app.button(key="new_start").disabled  # nothing to start on until the file has arrived
    assert "Start waits for the file to arrive." in [shown(c.value) for c in app.caption]
    app.file_uploader(key=f"new_flow_file-{round_}").set_value((name, content, "text/yaml")).run()
    assert app.button(key="new_start").disabled is not startable


def test_new_conversation_runs_the_users_own_dify_export(app):
    dsl = (ROOT / "tests" / "fixtures" / "dify_dsl" / "svcvit__记忆测试.yml").read_bytes()
    own_file(app, "memory-test.yml", dsl)
    assert "Start uses memory-test.yml." in [shown(c.value) for c in app.caption]
    app.button(key="new_start").click().run()
    assert not app.exception, app.exception
    assert shown(app.title[0].value) == "New conversation"
    assert "记忆测试" in "".join(c.value for c in app.sidebar.caption)
    app.chat_input(key="chat_input").set_value("Hi, I am Dana").run()
    assert not app.exception
    reply = shown("".join(md.value for md in app.chat_message[-1].markdown))
    assert "Dana" in reply  # answered through the flow's Variable Aggregator, not "(empty)"
    # The demo model answered in place of the flow's own model, whose tokens the receipt still counts.
    stand_in = [shown(c.value) for c in app.caption if "in its place" in shown(c.value)]
    assert stand_in and all(
        "for the node's model " in c and "· answered by memlens/demo in its place" in c for c in stand_in
    ), [shown(c.value) for c in app.caption]
    # The popover is back on stored flows, the imported one picked: the next Start uses it again
    # without importing the file twice, and the uploader is empty.
    assert app.radio(key="new_source").value == "flow"
    chosen = app.selectbox(key="new_flow").value
    app.button(key="new_start").click().run()
    assert not app.exception
    flows = {f.flow_id: f for f in repo.list_flows(db(app))}
    assert flows[chosen].flow_name == "记忆测试"
    assert [f.version for f in flows.values() if f.flow_name == "记忆测试"] == [1]  # not imported twice
    app.radio(key="new_source").set_value("file").run()
    assert app.file_uploader(key="new_flow_file-1").value is None and app.button(key="new_start").disabled


def test_new_conversation_asks_for_the_flows_start_form_before_it_starts(app):
    # A flow whose start form requires an input: Dify's web app asks for it before the first message;
    # before, Start made a conversation whose every message was refused for the missing input.
    dsl = (ROOT / "tests" / "fixtures" / "dify_dsl" / "svcvit__Deep Researcher On Dify .yml").read_bytes()
    own_file(app, "researcher.yml", dsl, startable=False)
    assert "Start needs: Research Theme" in [shown(c.value) for c in app.caption]
    field = app.text_area(key="new_inputs-Research_Theme")
    assert shown(field.label) == "Research Theme *" and field.max_chars == 1024
    field.set_value("Tide pools of Porto").run()
    assert not app.button(key="new_start").disabled
    app.button(key="new_start").click().run()
    assert not app.exception, app.exception
    started = [c for c in ConversationService(db(app)).conversations() if c.flow_version_id]
    newest = max(started, key=lambda c: c.created_at)
    assert newest.inputs == {"Research_Theme": "Tide pools of Porto"}
    app.chat_input(key="chat_input").set_value("Start the research").run()
    assert not app.exception
    page = shown("".join(md.value for md in app.markdown) + "".join(e.value for e in app.error))
    assert "is required by the start form" not in page
    assert repo.get_conversation(db(app), newest.id).turn_count == 1


def test_the_start_form_offers_each_field_as_its_type_and_shows_labels_as_written(app):
    flow = (
        "format: memlens-flow\nversion: 1\nname: form\nmode: advanced-chat\nnodes:\n"
        "  - id: start\n    type: start\n    title: Start\n    variables:\n"
        "      - {variable: day, label: '**Day** [x](https://e.x)', type: select, required: false,"
        " options: [weekday, '<b>sunday</b>']}\n"
        "      - {variable: seats, label: Seats, type: number, required: true}\n"
        "      - {variable: vip, label: VIP, type: checkbox, required: false}\n"
        "      - {variable: doc, label: Doc, type: file, required: false}\n"
        "  - {id: answer, type: answer, title: Answer, answer: 'ok {{#start.seats#}}'}\n"
        "edges: [[start, answer]]\n"
    )
    own_file(app, "form.yml", flow.encode(), startable=False)  # Seats is required
    day = app.selectbox(key="new_inputs-day")
    assert [shown(o) for o in day.options] == ["(not set)", "weekday", "<b>sunday</b>"] and day.value == "(not set)"
    assert "**" not in day.label and "](" not in day.label  # markdown in a flow's label stays text
    assert app.checkbox(key="new_inputs-vip").value is False
    assert "Doc: a file input, not offered here" in [shown(c.value) for c in app.caption]
    app.text_input(key="new_inputs-seats").set_value("2").run()
    day.set_value("<b>sunday</b>").run()
    app.button(key="new_start").click().run()
    assert not app.exception, app.exception
    newest = max(
        (c for c in ConversationService(db(app)).conversations() if c.flow_version_id), key=lambda c: c.created_at
    )
    assert newest.inputs == {"day": "<b>sunday</b>", "seats": "2", "vip": False}


def test_a_turn_answered_by_a_node_memlens_does_not_emulate_says_so_under_its_receipt(app):
    flow = (
        "format: memlens-flow\nversion: 1\nname: lookup\nmode: advanced-chat\nnodes:\n"
        "  - {id: start, type: start, title: Start}\n  - {id: lookup, type: http-request, title: Lookup}\n"
        "  - {id: answer, type: answer, title: Answer, answer: 'Found: {{#lookup.body#}}'}\n"
        "edges: [[start, lookup], [lookup, answer]]\n"
    )
    own_file(app, "lookup.yml", flow.encode())
    app.button(key="new_start").click().run()
    app.chat_input(key="chat_input").set_value("Where is my parcel?").run()
    assert not app.exception
    captions = [shown(c.value) for c in app.caption]
    assert (
        "Ran as pass-throughs, their outputs empty (MemLens does not emulate them): “Lookup” (http-request)" in captions
    )
    assert [shown(i.value) for i in app.info] == ["No node that calls a model ran in this turn."]
    assert [shown(i.value) for i in open_tab(app, "Variables").info] == [
        "This flow declares no conversation variables."
    ]


def chat_on_export(app, sample: str, change) -> None:
    """Start a conversation on the sample export ``sample`` (``change`` edits its document first, as
    ``change(doc)``) uploaded as the user's own file, and tell it an order number, then ask for it."""
    import yaml

    doc = yaml.safe_load((ROOT / "sample_data" / "flows" / sample).read_text(encoding="utf-8"))
    change(doc)
    own_file(app, sample, yaml.safe_dump(doc, allow_unicode=True).encode())
    app.button(key="new_start").click().run()
    for query in ("Hi, I am Dana.", "My order number is 4411.", "What is my order number?"):
        app.chat_input(key="chat_input").set_value(query).run()
    assert not app.exception, app.exception
    assert "4411" in shown("".join(md.value for md in app.chat_message[-1].markdown))


def test_a_basic_chatbot_export_runs_as_its_one_model_call_and_its_import_notes_show(app):
    def odd_form_field(doc):  # a form field of a type MemLens does not know, named with markup
        doc["model_config"]["user_input_form"].append({"[x](http://e.com) **b**": {"variable": "v"}})

    chat_on_export(app, "basic-chatbot.yml", odd_form_field)  # its note shows it as written
    tab = next(t for t in app.tabs if t.label == "Chatbot")
    assert tab.text[0].value.startswith("You are the shop's helper.")  # the pre-prompt: the system message
    notes = next(e for e in app.sidebar.expander if e.label.startswith("How MemLens runs this flow"))
    assert notes.label == "How MemLens runs this flow (3 notes)"
    captions = [c.value for c in notes.caption]
    assert [shown(c) for c in captions] == [
        "a basic Chatbot: run as its one model call — the pre-prompt as the system message, then the history "
        "with no window (Dify fetches up to 500 rows), then the query",
        "form field 3 has type '[x](http://e.com) **b**', which MemLens does not know: left out of the form",
        "DSL version 0.1.5 is older than 0.6.0: read with Dify's defaults for newer fields",
    ]
    assert "](http" not in captions[1] and "**b**" not in captions[1]  # escaped, never a link or bold


def test_an_agent_app_export_runs_as_its_agent_and_its_history_shows_in_the_agent_s_receipt(app):
    def tool_named_in_markdown(doc):  # imported text
        doc["model_config"]["agent_mode"]["tools"][0]["tool_name"] = "[x](http://e.com) **b**"

    chat_on_export(app, "agent-app.yml", tool_named_in_markdown)
    tab = next(t for t in app.tabs if t.label == "Agent")  # its receipt: what its model call held
    texts = [t.value for t in tab.text]
    assert (
        texts[0] == "You are the shop's order agent. Answer {{name}} briefly and look orders up before you answer."
    )  # the instruction as written: function calling fills no slot
    assert texts[1:5] == ["Hi, I am Dana.", texts[2], "My order number is 4411.", texts[4]]  # the turns, whole
    assert texts[5] == "What is my order number?" and "4411" in texts[-1]  # the query, then the reply
    assert any("plugin token counting is off" in shown(c.value) for c in tab.caption)
    notes = next(e for e in app.sidebar.expander if e.label.startswith("How MemLens runs this flow"))
    captions = [shown(c.value) for c in notes.caption]
    assert captions[0].startswith("a Dify Agent app: run as its function-calling agent's first model call")
    assert "its 1 tool ([x](http://e.com) **b**) not run: the model answers without it" in captions
    assert not any("](http" in c.value or "**b**" in c.value for c in notes.caption)  # escaped, never a link


def test_a_dify_agent_nodes_prompt_shows_in_its_own_receipt(app):
    """svcvit's travel demo: its Agent node runs (no memory block; its query is the History variable)."""
    dsl = (ROOT / "tests" / "fixtures" / "dify_dsl" / "svcvit__旅行Demo.yml").read_bytes()
    own_file(app, "travel.yml", dsl)
    app.button(key="new_start").click().run()
    app.chat_input(key="chat_input").set_value("Plan a trip to Lisbon").run()
    assert not app.exception, app.exception
    assert "Ran as pass-throughs" not in " ".join(shown(c.value) for c in app.caption)
    tab = next(t for t in app.tabs if t.label == "Agent")
    texts = [t.value for t in tab.text]
    assert "Plan a trip to Lisbon" in texts[1]  # the query: the History variable, this message appended
    assert "its tools are not called (ddgo_search)" in " ".join(shown(c.value) for c in tab.caption)


def test_a_parameter_extractors_memory_and_prompt_show_in_its_own_receipt(app):
    """The sample order desk: its extractor's window (3 rows) has lost turn 2, where the order number
    was given, by turn 5; its receipt shows the history lines it still had and what it extracted."""
    import json

    flows = {f.flow_name: f.flow_id for f in ConversationService(db(app)).flows()}
    app.selectbox(key="new_flow").set_value(flows["order-desk"])
    app.button(key="new_start").click().run()
    for query in json.loads((ROOT / "sample_data" / "flows" / "order-desk.queries.json").read_text()):
        app.chat_input(key="chat_input").set_value(query).run()
        assert not app.exception, app.exception
    assert "Which order is it about?" in shown(app.chat_message[-1].markdown[0].value)
    tab = next(t for t in app.tabs if t.label == "Order slots")
    texts = [t.value for t in tab.text]
    assert texts[0].startswith("Earlier conversation:\nHuman: Where is my parcel?\n")
    assert "4411" not in texts[0] and "Dana" not in texts[0]
    assert texts[1] == "Any update on it?"
    assert texts[-1] == '{"order_number": 0, "name": ""}'  # its reply
    assert any(
        c.value.endswith("of its tokens are the memory history's lines (counted as memory history in the bar above).")
        for c in tab.caption
    )
    # The transcript marks turns 1–2 as outside the extractor's window, turns 3–4 as kept.
    slots = [dict(m).get("slots") for m in chips(app)[:8]]
    assert slots == ["outside_window"] * 4 + ["kept"] * 4


def test_a_question_classifiers_memory_and_prompt_show_in_its_own_receipt(app):
    """Dify's Question Classifier template, its classifier given memory with the window switched off:
    as shipped it still reads the window's size (2 rows: one earlier turn), as text in its prompt."""
    import yaml

    doc = yaml.safe_load(
        (
            ROOT / "tests" / "fixtures" / "dify_dsl" / "dify-templates__Question_Classifier_Knowledge_Chatbot.yml"
        ).read_text(encoding="utf-8")
    )
    classifier = next(n for n in doc["workflow"]["graph"]["nodes"] if n["data"]["type"] == "question-classifier")
    classifier["data"]["memory"] = {"window": {"enabled": False, "size": 2}}
    own_file(app, "classifier.yml", yaml.safe_dump(doc).encode())
    app.button(key="new_start").click().run()
    for query in (
        "Hi, I'm Dana.",
        "Questions about how to use products: the kettle",
        "Other questions: and the toaster?",
    ):
        app.chat_input(key="chat_input").set_value(query).run()
        assert not app.exception, app.exception
    tab = next(t for t in app.tabs if t.label == "Question Classifier")  # the node's receipt
    texts = [t.value for t in tab.text]
    assert "Earlier conversation:\nHuman: Questions about how to use products: the kettle\nAssistant: " in texts[0]
    assert "Dana" not in texts[0]  # turn 1 is outside the two-row window
    assert texts[1] == "Other questions: and the toaster?"
    assert '"category_name": "Other questions"' in texts[-1]  # its reply, in the receipt
    # The history's lines inside the prompt are counted as memory history, not as template.
    assert any(
        c.value.endswith("of its tokens are the memory history's lines (counted as memory history in the bar above).")
        for c in tab.caption
    )
    said = shown("".join(md.value for md in tab.markdown))
    assert (
        "Dify's docs say this node's window is switched off, so 2 earlier turns would be sent; Dify 1.x reads "
        "the window's size anyway (2 rows, the current turn's one of them) and sends 1."
    ) in said
    # The transcript marks turn 1 as outside the classifier's window, turn 2 as kept.
    marks = [dict(m).get("1711528709608") for m in chips(app)]
    assert marks[:4] == ["outside_window", "outside_window", "kept", "kept"]


def test_a_broken_flow_file_is_refused_in_one_line_and_starts_nothing(app):
    before = len(ConversationService(db(app)).conversations())
    own_file(app, "broken.yml", b"app: [unclosed")
    app.button(key="new_start").click().run()
    assert not app.exception
    assert len(app.error) == 1 and shown(app.error[0].value).startswith("broken.yml is not valid YAML at line 1")
    assert len(ConversationService(db(app)).conversations()) == before
    assert shown(app.title[0].value) == "Demo: support-bot forgets a name"


@pytest.mark.parametrize(
    "button, title, prefix", [("to_compare", "Compare memory configs", "cmp"), ("to_present", "Present", "pre")]
)
def test_the_open_conversation_opens_on_the_compare_and_present_pages(app, button, title, prefix):
    other = next(c.id for c in ConversationService(db(app)).conversations() if c.name.startswith("Demo: long-term"))
    app.selectbox(key="conv_id").set_value(other).run()  # not the first one listed, which they would open anyway
    app.button(key=button).click().run()
    assert not app.exception, app.exception
    assert app.title[0].value == title
    assert app.radio(key=f"{prefix}_from").value == "Stored"
    assert app.selectbox(key=f"{prefix}_stored").value == other


def test_a_chat_turn_runs_and_its_ledger_appears(app):
    app.chat_input(key="chat_input").set_value("Hi again, I'm Dana.").run()
    assert not app.exception
    assert len(app.chat_message) == 18
    last_user = shown("".join(md.value for md in app.chat_message[-2].markdown))
    assert "Hi again, I'm Dana." in last_user and "inspected" in last_user
    markers = chips(app)
    assert dict(markers[-3]).get("responder") == "kept"  # turn 8's answer is in the new turn's window
    assert "Turn 9" in "".join(md.value for md in app.markdown)


def test_switching_memory_off_marks_the_node_memory_off_without_calling_a_model(app, monkeypatch):
    def no_model(*args, **kwargs):
        raise AssertionError("a model was called")

    monkeypatch.setattr(llm.DemoClient, "complete", no_model)
    monkeypatch.setattr(llm.LiteLLMClient, "complete", no_model)
    conv_id = app.session_state["conv_id"]
    turns_before = repo.get_conversation(db(app), conv_id).turn_count
    selected = app.session_state["selected_turn"]
    app.selectbox(key=f"sb-{conv_id}-{selected}-responder_strategy").set_value("off").run()
    assert not app.exception
    markers = chips(app)
    assert {dict(m)["responder"] for m in markers[:14]} == {"memory_off"}
    assert repo.get_conversation(db(app), conv_id).turn_count == turns_before
    badges = shown("".join(md.value for m in app.chat_message for md in m.markdown))
    assert "replies might now differ: Responder" in badges


def test_regenerate_creates_a_sibling_and_the_pager_shows_two_of_two(app):
    conv_id = app.session_state["conv_id"]
    database = db(app)
    last = repo.load_turn_rows(database, conv_id)[-1]
    app.button(key=f"tx-{conv_id}-{last['id']}-1-regen").click().run()
    assert not app.exception
    rows = repo.load_turn_rows(database, conv_id)
    assert len(rows) == 9 and rows[-1]["parent_id"] == last["parent_id"] and rows[-1]["query"] == last["query"]
    texts = [shown(md.value) for md in app.markdown]
    assert '<span class="ml-turn">2/2</span>' in texts
    # The pager flips back to the first version, which is then the one inspected.
    app.button(key=f"tx-{conv_id}-{rows[-1]['id']}-0-prev").click().run()
    assert '<span class="ml-turn">1/2</span>' in [shown(md.value) for md in app.markdown]
    assert app.session_state["selected_turn"] == last["id"]


def _var_input(app, name):
    if app.session_state["inspector_tab"] != "Variables":
        open_tab(app, "Variables")
    conv_id = app.session_state["conv_id"]
    prefix = f"vars-{conv_id}-{name}-"
    return next(t for t in app.text_input if t.key and t.key.startswith(prefix) and t.key[len(prefix) :].isdigit())


def test_the_variable_field_holds_the_value_now_and_says_so(app):
    from ui.variables_panel import VALUE_NOW

    field = _var_input(app, "turn_count")
    stored = {v.name: v.value for v in repo.get_variables(db(app), app.session_state["conv_id"])}
    # The field is what the next turn reads, whichever turn is inspected; its label says so, apart
    # from the caption with the value at the inspected turn.
    assert field.label == VALUE_NOW and field.value == str(stored["turn_count"])


def test_a_variable_edit_with_the_wrong_type_shows_difys_error_and_changes_nothing(app):
    conv_id = app.session_state["conv_id"]
    before = {v.name: v.value for v in repo.get_variables(db(app), conv_id)}
    _var_input(app, "turn_count").set_value("many")
    app.button(key=f"vars-{conv_id}-turn_count-save").click().run()
    assert [shown(e.value) for e in app.error] == [
        "Type mismatch: variable 'turn_count' expects number, but got string type"
    ]
    assert {v.name: v.value for v in repo.get_variables(db(app), conv_id)} == before


def test_a_variable_edit_with_the_right_type_is_recorded_as_a_user_edit(app):
    conv_id = app.session_state["conv_id"]
    _var_input(app, "turn_count").set_value("42")
    app.button(key=f"vars-{conv_id}-turn_count-save").click().run()
    assert not app.error
    values = {v.name: v.value for v in repo.get_variables(db(app), conv_id)}
    assert values["turn_count"] == 42
    last = repo.variable_history(db(app), conv_id)[-1]
    assert (last["node_id"], last["operation"], last["old"], last["new"]) == ("user", "edit", 8, 42)
    assert any("(edited by user)" in shown(s.value) for s in app.success)


def test_conversation_only_hides_every_marker(app):
    app.toggle(key="conversation_only").set_value(True).run()
    assert chips(app) == [[] for _ in app.chat_message]
    assert not app.tabs


def test_inspecting_an_earlier_turn_moves_the_markers_to_that_turn(app):
    conv_id = app.session_state["conv_id"]
    turns = repo.load_turn_rows(db(app), conv_id)
    app.button(key=f"tx-{conv_id}-{turns[2]['id']}-1-inspect").click().run()
    markers = chips(app)
    assert [dict(m).get("responder") for m in markers[:4]] == ["kept"] * 4  # turn 3 saw turns 1–2
    assert markers[6] == []  # turn 4 is after the inspected turn


def test_a_new_conversation_shows_what_the_bot_recalls_from_earlier_ones(app):
    from core.llm.client import DemoClient
    from core.service.sessions import ConversationService

    service = ConversationService(db(app), llm=DemoClient())
    flow = repo.find_flow_by_name(service.db, "long-term-memory")
    first = service.start(flow.flow_id, user_id="user").id
    service.send(first, "Hi, I'm Dana and I'm vegetarian.")
    fresh = service.start(flow.flow_id, user_id="user", name="Fresh start").id
    app.run()  # the sidebar now lists the new conversations
    app.selectbox(key="conv_id").set_value(fresh).run()
    assert not app.exception
    frames = [df.value for df in app.dataframe]
    recalled = next(f for f in frames if "memory" in f.columns)
    assert "Your name is Dana." in set(recalled["memory"])


def test_the_switchboard_shows_what_the_inspected_turn_ran_with_after_a_rerun_and_a_flip_back(app):
    """Window 6 on turn 6, re-run it as a branch, flip back to the first version: the switchboard
    shows that version's window again, agrees with its markers, and names the newer setting apart."""
    conv_id = app.session_state["conv_id"]
    database = db(app)
    turn6 = repo.load_turn_rows(database, conv_id)[5]["id"]
    recorded = ConversationService(database).node_runs(ConversationService(database).conversation(conv_id), turn6)
    window = next(r for r in recorded if r["node_id"] == "responder")["memory"]["window"]
    app.button(key=f"tx-{conv_id}-{turn6}-1-inspect").click().run()
    app.number_input(key=f"sb-{conv_id}-{turn6}-responder_window_turns").set_value(6).run()
    assert not app.exception
    app.button(key=f"fix-{conv_id}-rerun").click().run()
    assert not app.exception
    rerun = app.session_state["selected_turn"]
    assert rerun != turn6 and repo.load_turn_rows(database, conv_id)[-1]["parent_id"] is not None
    assert app.number_input(key=f"sb-{conv_id}-{rerun}-responder_window_turns").value == 6  # what the re-run ran with

    app.button(key=f"tx-{conv_id}-{rerun}-0-prev").click().run()  # back to the first version of turn 6
    assert not app.exception
    # The version flipped to is inspected (its line active, through its newest turn), as recorded.
    assert app.session_state["selected_turn"] == turn6
    assert ConversationService(database).active_thread(conv_id)[-1] == repo.load_turn_rows(database, conv_id)[7]["id"]
    assert app.number_input(key=f"sb-{conv_id}-{turn6}-responder_window_turns").value == window
    leaf = repo.load_turn_rows(database, conv_id)[7]["id"]
    app.button(key=f"tx-{conv_id}-{leaf}-1-inspect").click().run()
    assert app.number_input(key=f"sb-{conv_id}-{leaf}-responder_window_turns").value == window
    app.button(key=f"tx-{conv_id}-{turn6}-1-inspect").click().run()
    captions = " ".join(c.value for c in app.caption)
    assert "No change: ledgers are as recorded." in captions
    assert "new turns use dify window 6" in shown(captions)
    # The markers are turn 6's recorded ledger: the same window the switchboard shows.
    ledger = next(r for r in recorded if r["node_id"] == "responder")["ledger"]
    reasons = [dict(m).get("responder") for m in chips(app)[:10]]  # turns 1–5 as turn 6 saw them
    assert reasons == [e.reason for e in ledger.entries] and "outside_window" in reasons


def test_a_regenerated_turn_keeps_its_place_on_the_thread_everywhere_it_is_named(app):
    conv_id = app.session_state["conv_id"]
    last = repo.load_turn_rows(db(app), conv_id)[-1]
    app.button(key=f"tx-{conv_id}-{last['id']}-1-regen").click().run()
    assert not app.exception
    page = shown(" ".join(md.value for md in app.markdown) + " ".join(c.value for c in app.caption))
    assert "turn 8 · 2/2" in page  # the chat's turn label: the 8th turn of the thread, the second answer
    assert "Turn 8 · 2/2" in page  # the receipt header
    assert "turn 9" not in page and "Turn 9" not in page  # creation order never shows
    labels = [o for o in open_tab(app, "Branches").selectbox(key=f"branch-{conv_id}").options]
    assert any("turn 8 · 2/2" in o for o in labels) and any("turn 8 · 1/2" in o for o in labels)


def test_focus_goes_to_the_node_whose_memory_lost_the_most_at_the_turn():
    from core.analysis.debug_view import focus_node
    from core.memory.config import MemoryConfig
    from core.memory.replay import Replay
    from tests.builders import linear

    conv = linear(6)
    window, off, buffer = (
        Replay(conv, MemoryConfig(**c))
        for c in ({"window": 2, "fidelity": "documented"}, {"strategy": "off"}, {"strategy": "buffer"})
    )
    now = {"w": window.ledger_at(4), "off": off.ledger_at(4), "all": buffer.ledger_at(4)}
    before = {"w": window.ledger_at(3), "off": off.ledger_at(3), "all": buffer.ledger_at(3)}
    assert focus_node(now, before, ["off", "all", "w"]) == "w"  # turn 1 left the window at turn 5
    assert focus_node({"off": now["off"], "all": now["all"]}, before, ["off", "all"]) == "all"  # gained most
    assert focus_node({}, {}, ["off"]) is None


def test_a_turn_whose_process_was_killed_shows_as_interrupted_on_the_thread(app):
    conv_id = app.session_state["conv_id"]
    database = db(app)
    last = repo.load_turn_rows(database, conv_id)[-1]
    # What a killed process leaves: the turn's row written at its start, never finished.
    repo.begin_turn(
        database,
        conv_id,
        {
            "id": "killed-turn",
            "parent_id": last["id"],
            "query": "Are you still there?",
            "dialogue_count": last["dialogue_count"] + 1,
        },
    )
    app.run()
    assert not app.exception
    assert len(app.chat_message) == 18  # on the thread, not a hole
    answer = "".join(md.value for md in app.chat_message[-1].markdown)
    assert "Turn interrupted" in answer and "stopped before the turn finished" in answer
    assert "Are you still there" in "".join(md.value for md in app.chat_message[-2].markdown)


def test_the_receipt_says_which_dify_rules_decided_and_where_the_docs_disagree(app):
    text = shown("".join(md.value for md in app.markdown))
    captions = shown(" ".join(c.value for c in app.caption))
    assert "Dify memory rules: Dify 1.x as shipped · plugin token counting off" in captions
    # The Responder's window of 4 rows holds turns 5–7 at turn 8; Dify's docs would send turn 4 too.
    assert 'data-kind="docs_vs_code"' in text
    assert (
        "Dify's docs say the window holds 4 turns, so 4 earlier turns would be sent; Dify 1.x sends 3 — "
        "the current turn's row is one of the 4 fetched"
    ) in text
    assert "turn 4 user: docs: kept · code: outside window" in captions


def test_switchboard_plugin_token_counting_prunes_as_dify_does(app):
    conv_id = app.session_state["conv_id"]
    key = f"sb-{conv_id}-{app.session_state['selected_turn']}-responder"
    app.number_input(key=f"{key}_context").set_value(120).run()
    assert "over_budget" not in {dict(m).get("responder") for m in chips(app)}  # counting off: nothing pruned
    app.toggle(key=f"{key}_counting").set_value(True).run()
    assert not app.exception
    reasons = [dict(m).get("responder") for m in chips(app)[:14]]
    # rest = 120 − 0 − 3; the oldest messages in the window go first, single messages at a time.
    assert "over_budget" in reasons and reasons[-1] == "kept"
    first_kept = reasons.index("kept")
    assert all(r == "over_budget" for r in reasons[8:first_kept])


def test_a_switchboard_change_replays_as_many_turns_on_a_long_conversation_as_on_a_short_one(tmp_path, monkeypatch):
    """The what-if ledgers of the inspected turn and the "replies might now differ" badges of the
    transcript's page are decided from the turns the memory reads, not from every turn."""
    from benchmarks.workload import seed_support_conversation
    from core.memory.replay import Replay

    pushed = []
    push = Replay._push
    monkeypatch.setattr(Replay, "_push", lambda self, view, p, d: (pushed.append(p), push(self, view, p, d))[1])
    work = {}
    for n in (30, 600):
        url = f"sqlite:///{tmp_path / f'{n}.db'}"
        monkeypatch.setenv("MEMLENS_DATABASE_URL", url)
        db = Database(url)
        conv_id = seed_support_conversation(db, n)
        repo.set_setting(db, "demo.seeded", True)
        at = AppTest.from_file(str(ROOT / "pages" / "debugger.py"), default_timeout=120)
        at.run()
        assert not at.exception, at.exception
        selected = at.session_state["selected_turn"]
        pushed.clear()
        at.number_input(key=f"sb-{conv_id}-{selected}-responder_window_turns").set_value(6).run()
        assert not at.exception, at.exception
        work[n] = len(pushed)
        badges = shown("".join(md.value for m in at.chat_message for md in m.markdown))
        assert "replies might now differ: Responder" in badges
        assert "What-if" in "".join(w.value for w in at.warning)
    assert 0 < work[30] == work[600]


def test_the_switchboard_changes_an_agent_nodes_memory_and_shows_what_it_would_have_received(tmp_path, monkeypatch):
    """The agent node has a switchboard entry like an LLM node: switching its memory off is a what-if
    (no model call, nothing stored) whose receipt holds no history, and the transcript says its replies
    might now differ."""
    url = f"sqlite:///{tmp_path / 'agent.db'}"
    monkeypatch.setenv("MEMLENS_DATABASE_URL", url)
    database = Database(url)
    repo.set_setting(database, "demo.seeded", True)
    service = ConversationService(database, llm=llm.DemoClient())
    version = service.import_flow(ROOT / "sample_data" / "flows" / "agent-tools.yml", name="agent-tools")
    conv_id = service.start(version.flow_id, name="agent").id
    for query in ("Hi, I'm Dana.", "what is 12*7", "What's my name?"):
        service.send(conv_id, query)

    def no_model(*args, **kwargs):
        raise AssertionError("a model was called")

    monkeypatch.setattr(llm.DemoClient, "complete", no_model)
    at = AppTest.from_file(str(ROOT / "pages" / "debugger.py"), default_timeout=60)
    at.session_state["conv_id"] = conv_id
    at.run()
    assert not at.exception, at.exception
    selected = at.session_state["selected_turn"]
    strategy = at.selectbox(key=f"sb-{conv_id}-{selected}-agent_strategy")
    assert strategy.value == "buffer"  # what the inspected turn ran with
    assert "What-if" not in "".join(w.value for w in at.warning)
    strategy.set_value("off").run()
    assert not at.exception, at.exception
    assert "What-if" in "".join(w.value for w in at.warning)
    badges = shown("".join(md.value for m in at.chat_message for md in m.markdown))
    assert "replies might now differ: Agent" in badges
    assert repo.get_conversation(database, conv_id).turn_count == 3


def test_after_a_regenerate_the_variables_say_they_belong_to_the_whole_conversation(app):
    from ui.variables_panel import WHOLE_CONVERSATION

    assert WHOLE_CONVERSATION not in [c.value for c in open_tab(app, "Variables").caption]  # no branch yet
    conv_id = app.session_state["conv_id"]
    turn6 = repo.load_turn_rows(db(app), conv_id)[5]["id"]
    app.button(key=f"tx-{conv_id}-{turn6}-1-regen").click().run()
    assert not app.exception
    assert WHOLE_CONVERSATION in [c.value for c in app.caption]


def test_before_a_rerun_it_says_what_the_rerun_keeps_where_that_differs_from_the_preview_and_why(app):
    """Window 6 on turn 6 (Dify as shipped): the preview keeps turns 1–5, but a re-run is the conversation's
    newest turn, whose window the first turn 6 and turns 7–8 still take rows of. Said before the click, with
    the numbers the re-run then really keeps."""
    from core.analysis.debug_view import rerun_rows_note
    from core.memory.config import MemoryConfig

    conv_id = app.session_state["conv_id"]
    database = db(app)
    turn6 = repo.load_turn_rows(database, conv_id)[5]["id"]
    app.button(key=f"tx-{conv_id}-{turn6}-1-inspect").click().run()
    app.number_input(key=f"sb-{conv_id}-{turn6}-responder_window_turns").set_value(6).run()
    assert not app.exception
    warned = [shown(w.value) for w in app.warning if "Re-running turn 6 as a branch" in shown(w.value)]
    assert warned == [
        "Re-running turn 6 as a branch: Responder would keep 4 earlier messages (turns 4–5), not the 10 this preview "
        "shows (turns 1–5). " + rerun_rows_note("turn 6", 2, [MemoryConfig(window=6)]) + " Replaying the "
        "conversation from turn 1 with these settings gives what the preview shows."
    ]
    app.button(key=f"fix-{conv_id}-rerun").click().run()
    assert not app.exception
    service = ConversationService(database)
    conv = service.conversation(conv_id)
    rerun = next(r for r in service.node_runs(conv, app.session_state["selected_turn"]) if r["node_id"] == "responder")
    kept = sorted({conv.turns[e.position].query for e in rerun["ledger"].kept})
    assert kept == sorted(conv.turns[p].query for p in (3, 4))  # turns 4 and 5: what the warning said
    # Dify as documented walks the thread's own turns: a re-run keeps what the preview shows.
    assert rerun_rows_note("turn 6", 2, [MemoryConfig(window=6, fidelity="documented")]) is None
    assert rerun_rows_note("turn 6", 2, [MemoryConfig(strategy="buffer")]) is None


def test_where_did_it_go_names_the_settings_it_replays_the_thread_with(app):
    from core.analysis.debug_view import why_settings_note

    conv_id = app.session_state["conv_id"]
    app.text_input(key=f"why-{conv_id}").input("Dana").run()
    assert not app.exception
    note = why_settings_note("turn 8", "Classifier: memory off; Responder: dify window 4")
    captions = [shown(c.value) for c in app.caption]
    assert note in captions, captions


def test_a_newly_inspected_turn_shows_its_own_settings_whatever_its_widgets_were_left_holding(app):
    """Widgets can outlive a look at a turn (a run cut short by a click leaves them): inspecting the
    turn again shows what it ran with, never the leftover value (once seen in a browser as window 0
    over markers of window 4)."""
    conv_id = app.session_state["conv_id"]
    database = db(app)
    turn6 = repo.load_turn_rows(database, conv_id)[5]["id"]
    service = ConversationService(database)
    recorded = service.node_runs(service.conversation(conv_id), turn6)
    window = next(r for r in recorded if r["node_id"] == "responder")["memory"]["window"]
    widget = f"sb-{conv_id}-{turn6}-responder_window_turns"
    app.session_state[widget] = 0  # left over
    app.session_state[f"sb-{conv_id}-{turn6}-responder_window_on"] = False
    app.button(key=f"tx-{conv_id}-{turn6}-1-inspect").click().run()
    assert not app.exception
    assert window not in (0, None)
    assert app.number_input(key=widget).value == window
    assert app.toggle(key=f"sb-{conv_id}-{turn6}-responder_window_on").value is True
    assert "No change: ledgers are as recorded." in " ".join(c.value for c in app.caption)
    # A change made while the turn stays inspected is kept across reruns (only a newly inspected turn starts over).
    app.number_input(key=widget).set_value(window + 1).run()
    app.run()
    assert app.number_input(key=widget).value == window + 1


def test_the_glance_opens_the_inspector_on_what_each_node_left_out(app):
    glance = shown("".join(md.value for md in app.markdown if "ml-glance" in md.value))
    assert "<b>Classifier</b>: memory off: sends no earlier message" in glance
    assert (
        "<b>Responder</b>: dropped turns 1–4 — “Hi, I'm Dana. My order…”, “I'm vegetarian, so the…” — outside "
        "window of 4"
    ) in glance
    assert 'title="outside window of 4 rows: the conversation' in glance  # the long words on hover


def test_replay_the_conversation_with_these_settings_opens_a_new_one_that_keeps_what_the_preview_showed(app):
    conv_id = app.session_state["conv_id"]
    turn6 = repo.load_turn_rows(db(app), conv_id)[5]["id"]
    app.button(key=f"tx-{conv_id}-{turn6}-1-inspect").click().run()
    app.number_input(key=f"sb-{conv_id}-{turn6}-responder_window_turns").set_value(6).run()
    preview = shown("".join(md.value for md in app.markdown if "ml-glance" in md.value))
    assert "<b>Responder</b>: dropped nothing: kept all 10 earlier" in preview
    assert app.radio(key=f"fix-{conv_id}-replay-as").value == "new"
    app.button(key=f"fix-{conv_id}-replay-go").click().run()
    assert not app.exception, app.exception
    opened = app.session_state["conv_id"]
    assert opened != conv_id
    assert shown(app.title[0].value) == "Demo: support-bot forgets a name · replayed with Responder: dify window 6"
    glance = shown("".join(md.value for md in app.markdown if "ml-glance" in md.value))
    assert "<b>Responder</b>: dropped nothing: kept all 10 earlier" in glance  # turn 6, as the preview showed
    page = shown("".join(md.value for m in app.chat_message for md in m.markdown))
    assert "I don't know your name" not in page and "Your name is Dana." in page


def test_the_inspectors_full_ledger_is_a_table_whose_snippets_are_whole(app):
    """The inspector's full ledger wraps its cells (no data frame cutting a snippet at its column's edge)."""
    app.toggle(key="lt-on-responder").set_value(True).run()
    assert not app.exception
    table = shown("".join(md.value for md in app.markdown if "ml-ledger" in md.value))
    assert table.count("<tr") == 1 + 14  # the heading and every earlier message of turn 8
    assert "The delivery was due on Monday and it still hasn't arrived." in table
    assert "<b>outside window</b>: outside window of 4 rows: the conversation's newest on any branch" in table


def test_litellm_warms_up_once_a_person_acts_not_while_the_first_page_is_drawn(tmp_path, monkeypatch):
    """The first page has the interpreter to itself; the session's next drawing (here an Inspect) starts the
    background import, so the first turn a person runs does not wait for it."""
    from ui import data

    started = []
    monkeypatch.setattr(data, "warm_up", lambda: started.append(True))
    monkeypatch.setenv("MEMLENS_DATABASE_URL", f"sqlite:///{tmp_path / 'memlens.db'}")
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=60)
    at.run()
    at.db_url = f"sqlite:///{tmp_path / 'memlens.db'}"
    assert not at.exception and started == []
    conv_id = at.session_state["conv_id"]
    turn3 = repo.load_turn_rows(db(at), conv_id)[2]["id"]
    at.button(key=f"tx-{conv_id}-{turn3}-1-inspect").click().run()
    assert not at.exception and started == [True]


def test_only_the_open_inspector_tab_is_drawn_and_a_closed_one_says_it_is_opening(app):
    """A closed tab holds one caption, shown the moment it is clicked until the rerun draws the tab; the
    switchboard is always drawn, since its widgets hold the what-if every part of the page shows."""
    from ui.workspace import INSPECTOR_TABS, OPENING

    for label in ("Context receipt", "Variables", "Branches"):
        tabs = {t.label: t for t in open_tab(app, label).tabs if t.label in INSPECTOR_TABS}
        assert set(tabs) == set(INSPECTOR_TABS)
        for name, tab in tabs.items():
            captions = [c.value for c in tab.caption]
            if name == label:
                assert OPENING not in captions and tab.children, name
            elif name == "Switchboard":
                assert OPENING not in captions and tab.number_input, name
            else:
                assert captions == [OPENING] and len(tab.children) == 1, (label, name)
