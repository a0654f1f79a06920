"""The import page (AppTest): every transcript format uploads and is stored whole, with its turns
and branches; a malformed file stores nothing and names its bad records by record and field;
skipping bad records stores the rest; exports and report bundles are stored too."""

import json

import pytest
from streamlit.testing.v1 import AppTest

from core.analysis.compare import NamedConfig
from core.analysis.source import Source
from core.io import import_bytes, import_file
from core.llm.client import DemoClient
from core.memory.config import MemoryConfig
from core.report.build import build_report
from core.report.bundle import bundle_json
from core.service.config_sets import CONFIG_SETS_KEY
from core.service.samples import load_sample
from core.service.sessions import ConversationService
from core.service.transfer import export_conversation
from core.store import repo
from core.store.db import Database
from tests.conftest import FIXTURES, ROOT
from tests.rendered import shown

T = FIXTURES / "transcripts"
FILES = {
    "openai": "taubench__gpt-4o-airline.sample.jsonl",
    "openai (typed parts)": "llamafactory__reason_tool_use_demo_50.subset.jsonl",
    "sharegpt": "llamafactory__glaive_toolcall_en_demo.subset.json",
    "oasst": "oasst__en_100_tree.subset.jsonl",
    "dify-messages": "dify-docs__messages_api_examples.json",
    "dify-web": "dify-web__realWorldMessages.json",
    "bfcl": "bfcl__memory_notetaker.json",
    "chatgpt": "../exports/chatgpt__conversations.json",
    "claude": "../exports/claude__conversations.json",
}


def sample_file(fmt):
    """(file name, bytes) of a shared sample; the Dify messages sample is the documented response body."""
    path = T / FILES[fmt]
    if fmt == "dify-messages":
        doc = json.loads(path.read_text())
        body = doc["GET /messages"]["response_example"]["conversationHistory"]["value"]
        return "dify-messages.json", json.dumps(body).encode()
    return path.name, path.read_bytes()


def text(element):
    """What a message element shows."""
    return shown(element.value)


def imported(at):
    return repo.list_conversations(at.db, source="import")


@pytest.fixture
def page(tmp_path, monkeypatch):
    url = f"sqlite:///{tmp_path / 'memlens.db'}"
    monkeypatch.setenv("MEMLENS_DATABASE_URL", url)
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=60)
    at.run()
    at.switch_page("pages/import.py").run()
    assert not at.exception, at.exception
    at.db = Database(url)
    return at


def upload(at, name, data, mode="all"):
    at.file_uploader(key="imp_file").set_value((name, data, "application/json")).run()
    at.radio(key="imp_mode").set_value(mode).run()
    at.button(key="imp_go").click().run()
    assert not at.exception, at.exception
    return at


def shape(conv):
    """Turns, and how many turns have siblings (branches), of a conversation."""
    tree = conv.tree
    return len(conv.turns), sum(1 for i in range(len(conv.turns)) if len(tree.siblings(i)) > 1)


@pytest.mark.parametrize("fmt", list(FILES))
def test_every_transcript_format_uploads_and_is_stored_with_its_turns_and_branches(page, fmt):
    name, data = sample_file(fmt)
    expected = import_bytes(data, name)
    assert expected.format == fmt.split(" ")[0]
    upload(page, name, data)
    assert page.success and text(page.success[0]).startswith(f"Imported {len(expected.conversations)} conversation")
    assert f"({expected.format})" in text(page.success[0])
    stored = imported(page)
    assert len(stored) == len(expected.conversations)
    by_source = {}
    for info in stored:
        conv = repo.load_conversation(page.db, info.id)
        by_source[info.id] = shape(conv)
    assert sorted(by_source.values()) == sorted(shape(c) for c in expected.conversations)
    progress = page.get("progress")
    assert progress and progress[-1].proto.value == 100


def test_a_malformed_file_stores_nothing_and_names_records_and_fields(page):
    path = T / "llamafactory__glaive_toolcall_zh_demo.subset.json"
    upload(page, path.name, path.read_bytes())
    assert page.error and "record 7" in text(page.error[0]) and "nothing was imported" in text(page.error[0])
    assert text(page.warning[0]) == "Nothing was stored."
    problems = page.dataframe[-1].value
    assert list(problems.columns) == ["record", "conversation", "field", "problem"]
    assert len(problems) == 2 and all(problems["field"]) and all(problems["problem"])
    assert imported(page) == []


def test_skipping_bad_records_stores_the_rest_and_lists_what_was_left_out(page):
    path = T / "llamafactory__glaive_toolcall_zh_demo.subset.json"
    expected = import_file(path, skip_bad=True)
    upload(page, path.name, path.read_bytes(), mode="skip")
    assert page.success and "2 bad records left out" in text(page.success[0])
    assert "**Left out: 2 bad records**" in [m.value for m in page.markdown]
    problems = next(d.value for d in page.dataframe if "problem" in d.value.columns)
    assert list(problems["record"]) == [p.record for p in expected.problems]
    assert len(imported(page)) == len(expected.conversations)


@pytest.mark.parametrize(
    "name, data, message",
    [
        ("notes.json", b"this is not json", "is not JSON or JSON Lines"),
        ("empty.json", b"   ", "is empty"),
        ("odd.json", b'{"hello": "world"}', "unknown format"),
    ],
)
def test_a_file_that_is_not_a_conversation_stores_nothing(page, name, data, message):
    upload(page, name, data)
    assert page.error and message in text(page.error[0])
    assert imported(page) == []


def test_a_forced_format_that_does_not_fit_stores_nothing(page):
    path = T / "taubench__gpt-4o-airline.sample.jsonl"
    page.selectbox(key="imp_format").set_value("sharegpt").run()
    upload(page, path.name, path.read_bytes())
    assert page.error and imported(page) == []


def test_a_report_bundle_is_stored_and_its_configs_saved(page):
    configs = [NamedConfig("short", MemoryConfig(window=2)), NamedConfig("long", MemoryConfig(window=9))]
    report = build_report(Source(load_sample("lisbon-trip.json")[0]), configs)
    upload(page, "lisbon.report.json", bundle_json(report).encode())
    assert page.info and "“from lisbon.report.json”" in text(page.info[0])
    assert list(repo.get_setting(page.db, CONFIG_SETS_KEY)) == ["from lisbon.report.json"]
    assert [c.turn_count for c in imported(page)] == [12]


def test_a_conversation_export_is_stored_with_its_node_runs(page, tmp_path):
    src = Database(f"sqlite:///{tmp_path / 'src.db'}")
    service = ConversationService(src, llm=DemoClient())
    version = service.import_flow(ROOT / "sample_data" / "flows" / "support-bot.yml")
    conv = service.start(version.flow_id, name="support").id
    service.send(conv, "Hi, I'm Dana.")
    upload(page, "export.json", json.dumps(export_conversation(src, conv)).encode())
    assert page.success and "MemLens export" in text(page.success[0])
    rows = repo.load_turn_rows(page.db, conv, with_node_runs=True)
    assert len(rows) == 1 and rows[0]["node_runs"]


def test_an_imported_conversation_opens_on_the_compare_page(page):
    path = T / "dify-web__realWorldMessages.json"
    upload(page, path.name, path.read_bytes())
    assert len(imported(page)) == 1  # one conversation: "it", not "the first one"
    assert page.button(key="imp_compare").label == "Compare it"
    assert page.button(key="imp_debug").label == "Open it in the debugger"
    page.button(key="imp_compare").click().run()
    assert not page.exception, page.exception
    assert page.title[0].value == "Compare memory configs"
    assert page.radio(key="cmp_from").value == "Stored"
    assert page.selectbox(key="cmp_stored").value == imported(page)[0].id  # the one just imported
    assert len([c for c in page.get("plotly_chart")]) >= 3


def test_an_imported_chatgpt_export_opens_in_the_debugger_on_its_active_branch(page):
    path = FIXTURES / "exports" / "chatgpt__conversations.json"
    upload(page, path.name, path.read_bytes())
    # Two conversations: the first one is opened (one alone would be "it").
    assert (page.button(key="imp_debug").label, page.button(key="imp_compare").label) == (
        "Open the first one in the debugger",
        "Compare the first one",
    )
    page.button(key="imp_debug").click().run()
    assert not page.exception, page.exception
    assert shown(page.title[0].value) == "Lisbon trip"
    queries = [shown(m.markdown[0].value) for m in page.chat_message if m.name == "user"]
    assert [q for q in queries if "Cascais" in q or "museum" in q]  # the current node's branch
    assert not [q for q in queries if "Sintra" in q]


def test_file_names_and_contents_in_messages_never_become_markup(page):
    name = "![x](http://example.invalid/p.png).json"
    upload(page, name, b'[{"conversations": [{"from": "robot", "value": "**hi** <img src=x>"}]}]')
    raw = page.error[0].value
    assert "![x](" not in raw and "http:" not in raw and "<img" not in raw
    assert text(page.error[0]).startswith(name)


def test_the_dify_app_tab_pulls_a_served_conversation_and_a_bad_key_stores_nothing(page, tmp_path):
    from core.api.app import create_app
    from core.store import keys as app_keys
    from tests.api.test_api import ThreadServer

    served = Database(f"sqlite:///{tmp_path / 'served.db'}")
    flow_id = (
        ConversationService(served, DemoClient())
        .import_flow(ROOT / "sample_data" / "flows" / "support-bot.yml")
        .flow_id
    )
    _, key = app_keys.create_key(served, flow_id)
    server = ThreadServer(create_app(served, llm=DemoClient()))
    try:
        import httpx

        answer = httpx.post(
            f"{server.base_url}/chat-messages",
            headers={"Authorization": f"Bearer {key}"},
            json={"inputs": {}, "query": "Hi, I'm Dana.", "user": "dana"},
            timeout=60,
        ).json()
        page.text_input(key="imp_pull_base").input(server.base_url)
        page.text_input(key="imp_pull_key").input("app-wrong")
        page.text_input(key="imp_pull_user").input("dana").run()
        page.button(key="imp_pull_go").click().run()
        assert not page.exception, page.exception
        assert "refused the key (401" in text(page.error[0]) and text(page.warning[0]) == "Nothing was stored."
        assert repo.list_conversations(page.db, source="dify-pull") == []
        page.text_input(key="imp_pull_key").input(key).run()
        page.button(key="imp_pull_go").click().run()
        assert text(page.success[0]).startswith(f"Pulled 1 conversation from {server.base_url}: 1 new")
        (pulled,) = repo.list_conversations(page.db, source="dify-pull")
        assert repo.load_conversation(page.db, pulled.id).turns[0].answer == answer["answer"]
        assert key not in json.dumps(pulled.meta)
    finally:
        server.stop()
        served.dispose()


def test_an_upload_over_the_size_limit_is_refused_before_it_is_read(page, monkeypatch):
    import core.limits

    monkeypatch.setattr(core.limits, "MAX_IMPORT_BYTES", 1000)
    name, data = sample_file("openai")
    assert len(data) > 1000
    upload(page, name, data)
    assert page.error and "MemLens imports files up to 1,000 bytes" in text(page.error[0])
    assert imported(page) == []


def test_the_page_points_a_dify_dsl_export_to_new_conversation(page):
    assert (
        "A Dify DSL export (YAML) is a flow, not a conversation: start a conversation on it with *New "
        "conversation* in the Debugger's sidebar." in shown(page.caption[0].value)
    )


def test_what_a_file_held_besides_conversations_is_said_in_a_note(page):
    """A LangSmith trace's chain and tool runs sent no prompt: the import says it left them out."""
    from tests.io.test_langsmith import chat_model_run

    runs = [
        {"id": "r1", "name": "LangGraph", "run_type": "chain", "inputs": {}, "outputs": {}},
        chat_model_run(),
        {"id": "r3", "name": "find_order", "run_type": "tool", "inputs": {}, "outputs": {}},
    ]
    upload(page, "runs.jsonl", "\n".join(json.dumps(r) for r in runs).encode())
    assert page.success and "1 conversation" in text(page.success[0])
    assert [text(i) for i in page.info] == [
        "Note: left out the runs that are not model calls (1 chain, 1 tool): only an LLM run holds a prompt."
    ]


def test_a_branched_import_is_listed_as_long_as_the_debugger_counts_it(page):
    """Its active thread's turns, and the total with its branches, as the Debugger's list says it."""
    from tests.io.test_librechat import export

    upload(page, "librechat.json", json.dumps(export()).encode())
    listed = page.dataframe[-1].value
    assert list(listed["turns"]) == ["2 turns (3 with branches)"]


def test_a_file_imported_again_is_stored_as_new_copies_and_the_page_says_so(page):
    from tests.io.test_librechat import export

    data = json.dumps(export()).encode()
    upload(page, "librechat.json", data)
    assert not page.info  # the first time: nothing to say
    page.file_uploader(key="imp_file").set_value(None).run()  # the same file chosen again
    upload(page, "librechat.json", data)
    assert [text(i) for i in page.info] == [
        "Note: 1 conversation of this file was imported before (the same source and id): stored again as new copies."
    ]
    assert len(imported(page)) == 2


def test_an_agents_sdk_session_database_uploads_and_is_stored_per_session(page):
    path = ROOT / "tests" / "fixtures" / "platforms" / "openai_agents_session.db"
    uploader = page.file_uploader(key="imp_file")
    assert {"db", ".db"} & set(uploader.proto.type), uploader.proto.type  # the picker offers database files
    expected = import_bytes(path.read_bytes(), path.name)
    upload(page, path.name, path.read_bytes())
    assert page.success and f"({expected.format})" in text(page.success[0]), [text(s) for s in page.success]
    assert len(imported(page)) == len(expected.conversations) > 0
