"""The presentation page (AppTest): it steps through a conversation turn by turn, shows what each
memory holds and what the demo model answers with it (no API key), puts findings on their turn,
plays by itself, and shows a recorded flow's nodes."""

import json

import pytest
from streamlit.testing.v1 import AppTest

from core.llm.client import DemoClient
from core.service.sessions import ConversationService
from core.store.db import Database
from tests.conftest import ROOT
from tests.rendered import shown

KEYS = ("OPENAI_API_KEY", "ANTHROPIC_API_KEY", "GEMINI_API_KEY", "AZURE_API_KEY", "MISTRAL_API_KEY")


@pytest.fixture
def page(tmp_path, monkeypatch):
    for key in KEYS:
        monkeypatch.delenv(key, raising=False)
    url = f"sqlite:///{tmp_path / 'memlens.db'}"
    monkeypatch.setenv("MEMLENS_DATABASE_URL", url)
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=60)
    at.run()
    # As on a first visit by the page's address: no conversation being debugged to open on (that is
    # tests/pages/test_follow_debugged.py's subject).
    at.session_state["debugged"] = None
    at.switch_page("pages/present.py").run()
    assert not at.exception, at.exception
    at.db_url = url
    return at


def heading(at):
    return shown(next(m.value for m in at.markdown if "<b>Turn " in m.value))


def cards(at):
    """(title, sentence, reply) of every memory card, in order."""
    values = [shown(m.value) for m in at.markdown]
    out = []
    for i, v in enumerate(values):
        if v.startswith('<div style="font-weight:600">'):
            title = v[len('<div style="font-weight:600">') : -len("</div>")]
            out.append((title, values[i + 1], values[i + 2] if i + 2 < len(values) else ""))
    return out


def captions(at):
    return [shown(m.value) for m in at.markdown if "border-left:3px solid #f59e0b" in m.value]


def go_to(at, index):
    at.session_state["pre_i"] = index
    return at.run()


def test_it_steps_through_the_conversation_turn_by_turn(page):
    assert "<b>Turn 1</b> · 1 of 12" in heading(page)
    assert page.button(key="pre_prev").disabled
    page.button(key="pre_next").click().run()
    assert "<b>Turn 2</b> · 2 of 12" in heading(page)
    page.button(key="pre_next").click().run()
    page.button(key="pre_prev").click().run()
    assert "<b>Turn 2</b>" in heading(page)
    page.button(key="pre_last").click().run()
    assert "<b>Turn 12</b> · 12 of 12" in heading(page) and page.button(key="pre_next").disabled
    page.button(key="pre_first").click().run()
    assert "<b>Turn 1</b>" in heading(page)


def test_each_memory_shows_what_it_holds_and_how_the_demo_model_answers_with_it(page):
    go_to(page, 10)  # turn 11: "Remind me, what's my name and my booking reference?"
    seen = cards(page)
    assert [c[0] for c in seen] == ["dify window 3", "dify window 10", "window 6 msgs"]
    # Dify 1.x: a window of N rows holds the N − 1 turns before the current one.
    assert "remembers turns 9–10" in seen[0][1] and "forgot turns 1–8" in seen[0][1]
    assert "remembers turns 2–10" in seen[1][1] and "forgot turn 1" in seen[1][1]
    assert "I don't know your name" in seen[0][2] and "I don't know your booking number" in seen[0][2]
    assert "I don't know your name" in seen[1][2] and "Your booking is 4411" in seen[1][2]
    chat = [m.value for m in page.markdown if "Remind me, what's my name" in shown(m.value)]
    assert chat  # the chat shows the current turn


def test_findings_are_captions_on_their_turn(page):
    assert captions(page) == []
    go_to(page, 10)
    seen = captions(page)
    # name and booking number for dify window 3 and window 6 msgs, the name for dify window 10, and
    # where dify window 10's docs and Dify 1.x first disagree
    assert len(seen) == 6
    assert sum('data-kind="fact_not_seen"' in c for c in seen) == 5
    assert sum('data-kind="docs_vs_code"' in c for c in seen) == 1
    assert "At turn 11 the question is about the user's name, but “dify window 3” no longer has turn 1" in seen[0]


def test_autoplay_moves_one_turn_per_interval_and_stops_at_the_end(page):
    page.toggle(key="pre_play").set_value(True).run()
    assert "<b>Turn 2</b>" in heading(page)  # the first step is due at once
    page.run()
    assert "<b>Turn 2</b>" in heading(page)  # the interval has not passed yet
    page.session_state["pre_last_step"] = 0.0  # as if the interval had passed
    page.run()
    assert "<b>Turn 3</b>" in heading(page)
    go_to(page, 11)
    page.session_state["pre_last_step"] = 0.0
    page.run()
    assert "<b>Turn 12</b> · 12 of 12" in heading(page)


def test_a_recorded_flow_shows_each_node_with_its_recorded_reply(page):
    db = Database(page.db_url)
    service = ConversationService(db, llm=DemoClient())
    version = service.import_flow(ROOT / "sample_data" / "flows" / "support-bot.yml")
    conv = service.start(version.flow_id, name="support").id
    for q in json.loads((ROOT / "sample_data" / "flows" / "support-bot.queries.json").read_text()):
        service.send(conv, q)
    page.radio(key="pre_from").set_value("Stored").run()
    page.selectbox(key="pre_stored").set_value(conv).run()
    assert page.radio(key="pre_subject").value == "nodes"
    go_to(page, 5)  # turn 6: "What's my name?"
    seen = dict((title, (sentence, reply)) for title, sentence, reply in cards(page))
    assert list(seen) == ["Classifier", "Responder"]
    assert "memory off" in seen["Classifier"][0]
    assert "remembers turns 3–5" in seen["Responder"][0] and "forgot turns 1–2" in seen["Responder"][0]
    assert "I don't know your name" in seen["Responder"][1]
    assert any("“Responder” no longer has turn 1" in c for c in captions(page))


def test_a_question_classifier_shows_what_it_remembers_and_the_class_it_sorted_into(page, tmp_path):
    import yaml

    doc = yaml.safe_load(
        (
            ROOT / "tests" / "fixtures" / "dify_dsl" / "dify-templates__Question_Classifier_Knowledge_Chatbot.yml"
        ).read_text(encoding="utf-8")
    )
    classifier = next(n for n in doc["workflow"]["graph"]["nodes"] if n["data"]["type"] == "question-classifier")
    classifier["data"]["memory"] = {"window": {"enabled": True, "size": 2}}
    (tmp_path / "qc.yml").write_text(yaml.safe_dump(doc), encoding="utf-8")
    service = ConversationService(Database(page.db_url), llm=DemoClient())
    conv = service.start(service.import_flow(tmp_path / "qc.yml").flow_id, name="sorting").id
    for q in ("Hi, I'm Dana.", "Question related to after sales: a refund", "Other questions: anything else?"):
        service.send(conv, q)
    page.radio(key="pre_from").set_value("Stored").run()
    page.selectbox(key="pre_stored").set_value(conv).run()
    go_to(page, 2)
    seen = {title: (sentence, reply) for title, sentence, reply in cards(page)}
    assert list(seen) == ["Question Classifier"]  # the "other" branch is a fixed answer: no LLM ran
    assert "remembers turn 2" in seen["Question Classifier"][0] and "forgot turn 1" in seen["Question Classifier"][0]
    assert (
        "sorted the question as" in seen["Question Classifier"][1]
        and "Other questions" in seen["Question Classifier"][1]
    )


def test_a_parameter_extractor_shows_what_it_remembers_and_what_it_extracted(page):
    service = ConversationService(Database(page.db_url), llm=DemoClient())
    conv = service.start(
        service.import_flow(ROOT / "sample_data" / "flows" / "order-desk.yml").flow_id, name="orders"
    ).id
    for q in json.loads((ROOT / "sample_data" / "flows" / "order-desk.queries.json").read_text()):
        service.send(conv, q)
    page.radio(key="pre_from").set_value("Stored").run()
    page.selectbox(key="pre_stored").set_value(conv).run()
    go_to(page, 4)  # turn 5: the order number has left the window
    seen = {title: (sentence, reply) for title, sentence, reply in cards(page)}
    assert list(seen) == ["Order slots"]
    assert "remembers turns 3–4" in seen["Order slots"][0] and "forgot turns 1–2" in seen["Order slots"][0]
    assert "extracted" in seen["Order slots"][1] and 'order_number = 0, name = ""' in seen["Order slots"][1]


def test_a_dify_agent_node_shows_what_it_remembers_and_its_reply(page):
    service = ConversationService(Database(page.db_url), llm=DemoClient())
    conv = service.start(service.import_flow(ROOT / "sample_data" / "flows" / "trip-agent.yml").flow_id, name="trip").id
    for q in json.loads((ROOT / "sample_data" / "flows" / "trip-agent.queries.json").read_text()):
        service.send(conv, q)
    page.radio(key="pre_from").set_value("Stored").run()
    page.selectbox(key="pre_stored").set_value(conv).run()
    go_to(page, 3)  # turn 4: the destination (turn 1) has left the window
    seen = {title: (sentence, reply) for title, sentence, reply in cards(page)}
    assert list(seen) == ["Trip planner"]
    assert "remembers turns 2–3" in seen["Trip planner"][0] and "forgot turn 1" in seen["Trip planner"][0]
    assert "replied" in seen["Trip planner"][1] and "I don't know your destination" in seen["Trip planner"][1]


def test_present_follows_the_active_branch_and_another_can_be_picked(page):
    db = Database(page.db_url)
    service = ConversationService(db, llm=DemoClient())
    version = service.import_flow(ROOT / "sample_data" / "flows" / "support-bot.yml")
    conv = service.start(version.flow_id, name="branched").id
    first = service.send(conv, "Hi, I'm Dana.")
    second = service.send(conv, "My order is 4411.")
    service.send(conv, "Where is it?")
    service.regenerate(conv, second.id)  # a sibling of turn 2: the active branch is now 2 turns long
    page.radio(key="pre_from").set_value("Stored").run()
    page.selectbox(key="pre_stored").set_value(conv).run()
    assert not page.exception, page.exception
    assert "1 of 2" in heading(page)
    go_to(page, 1)
    assert "<b>Turn 2 · 2/2</b> · 2 of 2" in heading(page)
    assert page.button(key="pre_next").disabled  # the end of this branch, never a turn of another one
    branch = page.selectbox(key="pre_leaf")
    assert [o for o in branch.options] == ["turn 3: Where is it?", "turn 2 · 2/2: My order is 4411. (active)"]
    branch.set_value(branch.options[0]).run()  # the branch with the first answer to turn 2
    go_to(page, 2)
    assert "<b>Turn 3</b> · 3 of 3" in heading(page)
    go_to(page, 0)
    assert "<b>Turn 1</b>" in heading(page) and first.query == "Hi, I'm Dana."  # shared by both branches


def test_present_starts_from_the_configs_set_on_the_compare_page(page):
    page.switch_page("pages/compare.py").run()
    page.number_input(key="cmp_c0_window_turns").set_value(7).run()
    assert not page.exception, page.exception
    page.switch_page("pages/present.py").run()
    # A sample has no recorded flow: memory configs are what there is to show, said, not a choice of one.
    assert not [r for r in page.radio if r.key == "pre_subject"]
    assert "Memory configs (replayed)" in [c.value for c in page.sidebar.caption]
    assert page.selectbox(key="pre_set").value == "the Compare page's"
    assert "dify window 7" in [title for title, _, _ in cards(page)][0]


def test_on_a_conversation_over_200_turns_surprises_are_looked_for_when_asked(page):
    from core.analysis.compare import compare
    from core.analysis.findings import config_findings
    from core.io import parse_conversations
    from core.report.build import DEFAULT_CONFIGS
    from ui.on_request import LONG_CONVERSATION

    messages = [{"role": "user", "content": "Hi, my name is Dana."}, {"role": "assistant", "content": "Hello Dana."}]
    for i in range(2, LONG_CONVERSATION + 2):
        messages += [{"role": "user", "content": f"question {i}"}, {"role": "assistant", "content": f"answer {i}"}]
    data = json.dumps(messages)
    conv = parse_conversations(data, "long.json")[0]
    found = [
        f
        for f in config_findings(conv, list(DEFAULT_CONFIGS), comparison=compare(conv, list(DEFAULT_CONFIGS)))
        if f.turn is not None
    ]
    assert found  # a window of 3 turns forgets the name
    page.radio(key="pre_from").set_value("File").run()
    page.file_uploader(key="pre_upload").set_value(("long.json", data.encode(), "application/json")).run()
    assert not page.exception, page.exception
    index = found[0].turn - 1  # turn n is the n-th answered turn
    go_to(page, index)
    assert captions(page) == []
    assert [b.label for b in page.button if b.key == "pre_whole"] == [
        f"Look for surprises in all {LONG_CONVERSATION + 1:,} turns"
    ]
    page.button(key="pre_whole").click().run()
    assert not page.exception, page.exception
    assert captions(page) and not [b for b in page.button if b.key == "pre_whole"]


@pytest.mark.parametrize("target, prefix", [("pages/present.py", "pre"), ("pages/compare.py", "cmp")])
def test_a_flow_s_import_notes_show_on_present_and_compare_escaped(page, tmp_path, target, prefix):
    """What the import said about a flow (here a basic Chatbot, with a form field MemLens does not know,
    named with markup) sits in the sidebar of every page that shows its runs, as written."""
    import yaml

    doc = yaml.safe_load((ROOT / "sample_data" / "flows" / "basic-chatbot.yml").read_text(encoding="utf-8"))
    doc["model_config"]["user_input_form"].append({"[x](http://e.com) **b**": {"variable": "v"}})
    path = tmp_path / "shop.yml"
    path.write_text(yaml.safe_dump(doc, allow_unicode=True), encoding="utf-8")
    service = ConversationService(Database(page.db_url), llm=DemoClient())
    conv = service.start(service.import_flow(path).flow_id, name="shop").id
    for q in ("Hi, I am Dana.", "What is my name?"):
        service.send(conv, q)
    page.switch_page(target).run()
    page.radio(key=f"{prefix}_from").set_value("Stored").run()
    page.selectbox(key=f"{prefix}_stored").set_value(conv).run()
    assert not page.exception, page.exception
    notes = next(e for e in page.sidebar.expander if e.label.startswith("How MemLens runs this flow"))
    assert notes.label == "How MemLens runs this flow (3 notes)"
    captions = [c.value for c in notes.caption]
    assert shown(captions[0]).startswith("a basic Chatbot: run as its one model call")
    assert shown(captions[1]) == (
        "form field 3 has type '[x](http://e.com) **b**', which MemLens does not know: left out of the form"
    )
    assert "](http" not in captions[1] and "**b**" not in captions[1]  # escaped, never a link or bold


def test_the_last_turn_is_on_stage_with_only_the_two_turns_before_it_open(page):
    # On a laptop screen the current turn stays in view under the controls and the findings.
    page.button(key="pre_last").click().run()
    assert not page.exception, page.exception
    (folded,) = [e for e in page.expander if e.label.endswith("earlier turns")]
    every = [c.value for m in page.chat_message if m.name == "user" for c in m.caption]
    folded_turns = [c.value for m in folded.chat_message if m.name == "user" for c in m.caption]
    assert int(folded.label.split()[0]) == len(folded_turns) == len(every) - 3
    assert every[-1].endswith(" · now") and not any(t.endswith(" · now") for t in folded_turns)
