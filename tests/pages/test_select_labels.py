"""Select boxes show each choice under its own label (core.words.distinct): Streamlit sends the choice back as the label
shown, so two equal labels (the same file imported twice, two flows of one name) opened the first
of them whichever was picked — and the first thing typed on the page was lost with it."""

from streamlit.testing.v1 import AppTest

from core.io import import_bytes
from core.service.transfer import store_conversations
from core.store.db import Database
from core.words import distinct
from tests.conftest import FIXTURES, ROOT
from tests.rendered import shown


def test_a_repeated_label_is_numbered_from_its_second_use_and_never_takes_a_label_in_use():
    labels = {"a": "Lisbon", "b": "Lisbon", "c": "Porto", "d": "Lisbon", "e": "Lisbon (2)"}
    out = distinct(labels)
    assert out == {"a": "Lisbon", "b": "Lisbon (3)", "c": "Porto", "d": "Lisbon (4)", "e": "Lisbon (2)"}
    assert len(set(out.values())) == len(out)
    assert distinct({1: "x", 2: "y"}) == {1: "x", 2: "y"}


def test_the_same_file_imported_twice_opens_the_copy_picked_and_keeps_what_is_typed_there(tmp_path, monkeypatch):
    url = f"sqlite:///{tmp_path / 'memlens.db'}"
    monkeypatch.setenv("MEMLENS_DATABASE_URL", url)
    db = Database(url)
    data = (FIXTURES / "transcripts" / "taubench__gpt-4o-airline.sample.jsonl").read_bytes()
    first = store_conversations(db, import_bytes(data, "t.jsonl").conversations[:1], source="import")[0]
    second = store_conversations(db, import_bytes(data, "t.jsonl").conversations[:1], source="import")[0]
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=120).run()
    picker = at.sidebar.selectbox(key="conv_id")
    labels = [picker.format_func(i) for i in picker.options]
    assert len(set(labels)) == len(labels)  # the two copies read apart
    picker.set_value(second).run()
    at.text_input(key=f"rwhy-{second}").input("user ID").run()
    assert not at.exception, at.exception
    assert at.session_state["conv_id"] == second != first
    assert at.text_input(key=f"rwhy-{second}").value == "user ID"
    assert any("“user ID” was first said" in shown(m.value) for m in at.markdown)
    db.dispose()


def test_a_turns_tool_calls_without_text_are_named_apart_and_a_unique_message_keeps_its_plain_name():
    from tests.builders import openai
    from ui.compare_facts import message_name

    call = {"id": "c1", "type": "function", "function": {"name": "lookup", "arguments": "{}"}}
    conv = openai(
        [
            {"role": "user", "content": "Where is my order?"},
            {"role": "assistant", "content": None, "tool_calls": [call]},
            {"role": "tool", "tool_call_id": "c1", "content": "in transit"},
            {"role": "assistant", "content": None, "tool_calls": [{**call, "id": "c2"}]},
            {"role": "tool", "tool_call_id": "c2", "content": "arrives Monday"},
            {"role": "assistant", "content": "It arrives Monday."},
        ]
    )
    numbers = [1]
    names = [message_name(conv, numbers, f"0:{j}") for j in range(len(conv.turns[0].messages))]
    assert len(set(names)) == len(names)
    assert names[0] == "turn 1 · user: Where is my order?"
    # no text: named by the call it makes (as every page words it), and by its place when the turn makes it twice
    assert names[1] == "turn 1 · assistant: → lookup({}) (message 2)"
    assert names[3] == "turn 1 · assistant: → lookup({}) (message 4)"
    assert names[5] == "turn 1 · assistant: It arrives Monday."
