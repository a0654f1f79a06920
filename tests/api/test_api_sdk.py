"""Dify's official Python SDK (``dify-client``) unchanged against the served app, and the endpoints
it and other Dify clients call besides chat: parameters, meta, info, feedback, suggested questions,
stop and file upload."""

from __future__ import annotations

import inspect
import json
import threading

import httpx
import pytest
from dify_client import ChatClient, CompletionClient

from benchmarks.api_load import parse_sse
from core.api.app import create_app
from core.api.routes import files as api_files
from core.api.routes import messages as api_messages
from core.llm.client import DemoClient, LLMReply
from core.service.sessions import ConversationService
from core.store import keys as app_keys
from core.store import repo
from core.store.db import Database
from tests.api.test_api import ThreadServer

FEATURED_FLOW = """\
format: memlens-flow
version: 1
name: featured
description: A chatflow with every feature a client reads at start-up.
features:
  opening_statement: Hello! Ask me about trains from {{city}}.<|im_end|>
  suggested_questions: ["First train to Lisbon?", "Last train to Porto?"]
  suggested_questions_after_answer: {enabled: true}
  file_upload:
    enabled: true
    allowed_file_types: [image]
    image: {enabled: true, number_limits: 2, detail: low, transfer_methods: [local_file]}
nodes:
  - id: start
    type: start
    title: Start
    variables:
      - {variable: city, label: City, type: text-input, required: true, max_length: 48}
      - {variable: day, label: Day, type: select, required: false, options: [weekday, sunday]}
  - id: llm
    type: llm
    title: LLM
    model: memlens/demo
    prompt_template:
      - {role: system, text: "You help with trains from {{#start.city#}}."}
    memory: {window: 10}
  - {id: answer, type: answer, title: Answer, answer: "{{#llm.text#}}"}
edges:
  - [start, llm]
  - [llm, answer]
"""

SUGGESTIONS = '["When is the next train?", "How long is the trip?", "Is there a dining car?"]'


class GatedClient:
    """The demo model, except that answering waits until the test opens the gate; a request for
    suggestions gets a fixed JSON array."""

    def __init__(self):
        self.gate = threading.Event()
        self.gate.set()
        self.entered = threading.Event()
        self.demo = DemoClient()

    def complete(self, model, messages, max_tokens=None):
        if "three questions" in str(messages[0].get("content", "")):
            return LLMReply(text=SUGGESTIONS, prompt_tokens=1, completion_tokens=1, model=model)
        self.entered.set()
        assert self.gate.wait(30), "the test never opened the gate"
        return self.demo.complete(model, messages, max_tokens)


class App:
    def __init__(self, tmp_path):
        self.db = Database(f"sqlite:///{tmp_path / 'memlens.db'}")
        flow = tmp_path / "featured.yml"
        flow.write_text(FEATURED_FLOW, encoding="utf-8")
        self.flow_id = ConversationService(self.db, DemoClient()).import_flow(flow).flow_id
        self.key = app_keys.create_key(self.db, self.flow_id)[1]
        self.llm = GatedClient()
        self.server = ThreadServer(create_app(self.db, llm=self.llm, ping_interval=0.1))
        self.http = httpx.Client(
            base_url=self.server.base_url, timeout=60, headers={"Authorization": f"Bearer {self.key}"}
        )

    def sdk(self) -> ChatClient:
        client = ChatClient(self.key)
        client.base_url = self.server.base_url
        return client

    def ask(self, query="First train?", user="sam", conversation_id=""):
        r = self.http.post(
            "/chat-messages",
            json={"inputs": {"city": "Porto"}, "query": query, "user": user, "conversation_id": conversation_id},
        )
        assert r.status_code == 200, r.text
        return r.json()

    def close(self):
        self.http.close()
        self.server.stop()
        self.db.dispose()


@pytest.fixture(scope="module")
def app(tmp_path_factory):
    a = App(tmp_path_factory.mktemp("sdk"))
    yield a
    a.close()


# -- the SDK, method by method ----------------------------------------------------------------------

SDK_CALLS = {
    "create_chat_message",
    "get_conversation_messages",
    "get_conversations",
    "rename_conversation",
    "message_feedback",
    "get_application_parameters",
    "file_upload",
}


def test_every_chat_client_method_is_covered_by_this_test():
    methods = {name for name, _ in inspect.getmembers(ChatClient, inspect.isfunction) if not name.startswith("_")}
    assert methods == SDK_CALLS


def test_every_chat_client_method_answers_2xx(app):
    client = app.sdk()
    seen = {}
    r = client.get_application_parameters("sam")
    seen["get_application_parameters"] = r.status_code
    r = client.create_chat_message({"city": "Porto"}, "When is the first train?", "sam")
    seen["create_chat_message"] = r.status_code
    first = r.json()
    r = client.create_chat_message(
        {"city": "Porto"},
        "And the last one?",
        "sam",
        response_mode="streaming",
        conversation_id=first["conversation_id"],
    )
    events = parse_sse(r.text)
    assert r.status_code == 200 and events[-1]["event"] == "workflow_finished"
    r = client.get_conversation_messages("sam", conversation_id=first["conversation_id"], limit=10)
    seen["get_conversation_messages"] = r.status_code
    assert [m["query"] for m in r.json()["data"]] == ["When is the first train?", "And the last one?"]
    r = client.get_conversations("sam")
    seen["get_conversations"] = r.status_code
    assert first["conversation_id"] in [c["id"] for c in r.json()["data"]]
    r = client.rename_conversation(first["conversation_id"], "Trains", "sam")
    seen["rename_conversation"] = r.status_code
    r = client.message_feedback(first["message_id"], "like", "sam")
    seen["message_feedback"] = r.status_code
    r = client.file_upload("sam", {"file": ("ticket.png", b"\x89PNG\r\n\x1a\n" + b"0" * 64, "image/png")})
    seen["file_upload"] = r.status_code
    assert r.json()["name"] == "ticket.png" and r.json()["size"] == 72 and r.json()["extension"] == "png"
    assert set(seen) == SDK_CALLS
    assert all(200 <= code < 300 for code in seen.values()), seen


# -- parameters, meta, info -------------------------------------------------------------------------


def test_parameters_come_from_the_flow_features_and_start_form(app):
    body = app.http.get("/parameters", params={"user": "sam"}).json()
    assert body["opening_statement"] == "Hello! Ask me about trains from {{city}}.<|im_end|>"  # as written
    assert body["suggested_questions"] == ["First train to Lisbon?", "Last train to Porto?"]
    assert body["suggested_questions_after_answer"] == {"enabled": True}
    assert body["speech_to_text"] == {"enabled": False}
    assert body["user_input_form"] == [
        {"text-input": {"label": "City", "variable": "city", "required": True, "default": "", "max_length": 48}},
        {
            "select": {
                "label": "Day",
                "variable": "day",
                "required": False,
                "default": "",
                "options": ["weekday", "sunday"],
            }
        },
    ]
    assert body["file_upload"]["image"] == {
        "enabled": True,
        "number_limits": 2,
        "detail": "low",
        "transfer_methods": ["local_file"],
    }
    assert body["system_parameters"]["image_file_size_limit"] == 10


def test_a_conversation_introduces_itself_with_the_opening_statement_filled_from_its_inputs(app):
    # Dify writes the introduction when the conversation starts: the statement's slots hold the inputs.
    answer = app.ask(user="intro")
    listed = app.http.get("/conversations", params={"user": "intro"}).json()["data"]
    assert [(c["id"], c["introduction"]) for c in listed] == [
        (answer["conversation_id"], "Hello! Ask me about trains from Porto.")
    ]


def test_routes_of_other_app_modes_answer_difys_errors_for_a_chat_app(app):
    # The SDK's CompletionClient against a chat app: Dify's app_unavailable, not an unknown route.
    client = CompletionClient(app.key)
    client.base_url = app.server.base_url
    r = client.create_completion_message({"city": "Porto"}, "blocking", "sam")
    assert (r.status_code, r.json()) == (
        400,
        {"code": "app_unavailable", "status": 400, "message": "App unavailable, please check your app configurations."},
    )
    r = app.http.post("/workflows/run", json={"inputs": {}, "user": "sam"})
    assert (r.status_code, r.json()["code"], r.json()["message"]) == (
        400,
        "not_workflow_app",
        "Only support workflow app.",
    )
    for path in ("/completion-messages", "/workflows/run"):  # the user is checked first, as in Dify
        assert app.http.post(path, json={"inputs": {}}).json()["message"] == "Arg user must be provided."


@pytest.mark.parametrize("enabled", [False, True])
def test_speech_routes_answer_as_dify_without_a_speech_model(app, tmp_path, enabled):
    flow = tmp_path / "speech.yml"
    on = str(enabled).lower()
    flow.write_text(
        FEATURED_FLOW.replace(
            "features:\n",
            f"features:\n  speech_to_text: {{enabled: {on}}}\n  text_to_speech: {{enabled: {on}, voice: alloy}}\n",
        ),
        encoding="utf-8",
    )
    flow_id = ConversationService(app.db, DemoClient()).import_flow(flow, name=f"speech-{enabled}").flow_id
    headers = {"Authorization": f"Bearer {app_keys.create_key(app.db, flow_id)[1]}"}
    params = app.http.get("/parameters", params={"user": "sam"}, headers=headers).json()
    assert (params["speech_to_text"]["enabled"], params["text_to_speech"]["enabled"]) == (enabled, enabled)
    stt = app.http.post(
        "/audio-to-text", data={"user": "sam"}, files={"file": ("a.mp3", b"ID3", "audio/mpeg")}, headers=headers
    )
    tts = app.http.post("/text-to-audio", json={"text": "Hello", "user": "sam"}, headers=headers)
    if enabled:  # configured, but MemLens has no speech model: Dify's answer for a workspace without one
        assert (stt.status_code, stt.json()["code"]) == (400, "provider_not_support_speech_to_text")
        assert (tts.status_code, tts.json()["code"]) == (400, "provider_not_support_text_to_speech")
    else:
        assert (stt.status_code, stt.json()["message"]) == (400, "Speech to text is not enabled")
        assert (tts.status_code, tts.json()["message"]) == (400, "TTS is not enabled")


def test_meta_and_info_describe_the_app(app):
    from core import __version__

    assert app.http.get("/meta").json() == {"tool_icons": {}, "memlens_version": __version__}
    info = app.http.get("/info").json()
    assert info["memlens_version"] == __version__ == "1.0.0"
    assert info["name"] == "featured" and info["mode"] == "advanced-chat"
    assert info["description"] == "A chatflow with every feature a client reads at start-up."


def test_app_endpoints_need_a_valid_key(app):
    r = httpx.get(f"{app.server.base_url}/parameters", headers={"Authorization": "Bearer app-nope"})
    assert r.status_code == 401 and r.json()["code"] == "unauthorized"


# -- feedback ---------------------------------------------------------------------------------------


def test_feedback_is_stored_listed_with_the_message_and_revocable(app):
    answer = app.ask(user="fay")
    mid, cid = answer["message_id"], answer["conversation_id"]
    r = app.http.post(f"/messages/{mid}/feedbacks", json={"rating": "dislike", "user": "fay", "content": "too slow"})
    assert r.status_code == 200 and r.json() == {"result": "success"}
    assert repo.feedbacks(app.db, cid)[mid] == [
        {
            "rating": "dislike",
            "content": "too slow",
            "user_id": "fay",
            "updated_at": repo.feedbacks(app.db, cid)[mid][0]["updated_at"],
        }
    ]
    listed = app.http.get("/messages", params={"user": "fay", "conversation_id": cid}).json()["data"]
    assert listed[0]["feedback"] == {"rating": "dislike"}
    app.http.post(f"/messages/{mid}/feedbacks", json={"rating": "like", "user": "fay"})
    assert [f["rating"] for f in repo.feedbacks(app.db, cid)[mid]] == ["like"]  # one rating per user, updated
    app.http.post(f"/messages/{mid}/feedbacks", json={"rating": None, "user": "fay"})
    assert repo.feedbacks(app.db, cid) == {}
    listed = app.http.get("/messages", params={"user": "fay", "conversation_id": cid}).json()["data"]
    assert listed[0]["feedback"] is None
    # Nothing left to revoke: Dify's MessageService refuses it as a bad request, and nothing changes
    again = app.http.post(f"/messages/{mid}/feedbacks", json={"rating": None, "user": "fay"})
    assert again.status_code == 400 and again.json() == {
        "code": "invalid_param",
        "message": "rating cannot be None when feedback not exists",
        "status": 400,
    }
    assert repo.feedbacks(app.db, cid) == {}


def test_feedback_on_someone_elses_or_an_unknown_message_is_404_and_stores_nothing(app):
    answer = app.ask(user="gil")
    for mid, user in (
        (answer["message_id"], "mallory"),
        ("00000000-0000-4000-8000-000000000009", "gil"),
        ("not-a-uuid", "gil"),
    ):
        r = app.http.post(f"/messages/{mid}/feedbacks", json={"rating": "like", "user": user})
        assert r.status_code == 404 and r.json()["message"] == "Message Not Exists."
    assert repo.feedbacks(app.db, answer["conversation_id"]) == {}
    r = app.http.post(f"/messages/{answer['message_id']}/feedbacks", json={"rating": "love", "user": "gil"})
    assert r.status_code == 400 and r.json()["code"] == "invalid_param"


# -- suggested questions ----------------------------------------------------------------------------


def test_suggested_questions_come_from_the_model_when_the_flow_enables_them(app):
    answer = app.ask(user="hal")
    r = app.http.get(f"/messages/{answer['message_id']}/suggested", params={"user": "hal"})
    assert r.status_code == 200
    assert r.json() == {"result": "success", "data": json.loads(SUGGESTIONS)}


def test_suggested_questions_are_refused_when_the_flow_disables_them(tmp_path):
    db = Database(f"sqlite:///{tmp_path / 'm.db'}")
    flow = tmp_path / "plain.yml"
    flow.write_text(
        FEATURED_FLOW.replace(
            "suggested_questions_after_answer: {enabled: true}", "suggested_questions_after_answer: {enabled: false}"
        ),
        encoding="utf-8",
    )
    flow_id = ConversationService(db, DemoClient()).import_flow(flow).flow_id
    key = app_keys.create_key(db, flow_id)[1]
    server = ThreadServer(create_app(db, llm=DemoClient()))
    try:
        with httpx.Client(base_url=server.base_url, headers={"Authorization": f"Bearer {key}"}) as http:
            answer = http.post("/chat-messages", json={"inputs": {"city": "Porto"}, "query": "hi", "user": "u"}).json()
            r = http.get(f"/messages/{answer['message_id']}/suggested", params={"user": "u"})
            assert r.status_code == 400 and r.json()["code"] == "bad_request"
            assert r.json()["message"] == "Function Suggested questions after answer disabled."
    finally:
        server.stop()
        db.dispose()


@pytest.mark.parametrize(
    "reply, questions",
    [
        ('Sure: ["a?", "b?", "c?", "d?"]', ["a?", "b?", "c?"]),
        ("1. first?\n2) second?\n- third?", ["first?", "second?", "third?"]),
        ("", []),
    ],
)
def test_suggestions_are_read_from_a_json_array_or_from_lines(reply, questions):
    assert api_messages.parse_questions(reply) == questions


# -- stop -------------------------------------------------------------------------------------------


def stopped_midway(app, body: dict) -> list[dict]:
    """A Chatflow's streaming answer stopped while the model answers: every event the client received."""
    app.llm.gate.clear()
    app.llm.entered.clear()
    events: list[dict] = []
    try:
        with app.http.stream("POST", "/chat-messages", json=body) as response:
            assert response.status_code == 200
            lines = response.iter_lines()
            assert app.llm.entered.wait(30)  # the model is answering
            for line in lines:
                if line.startswith("data: "):
                    events.append(json.loads(line[6:]))
                    if events[-1].get("task_id"):
                        break
            r = app.http.post(f"/chat-messages/{events[0]['task_id']}/stop", json={"user": body["user"]})
            assert r.status_code == 200 and r.json() == {"result": "success"}
            for line in lines:
                if line.startswith("data: "):
                    events.append(json.loads(line[6:]))
    finally:
        app.llm.gate.set()
    return events


def test_stop_ends_the_stream_and_stores_the_turn_as_stopped(app):
    events = stopped_midway(
        app, {"inputs": {"city": "Porto"}, "query": "Tell me everything", "user": "ivy", "response_mode": "streaming"}
    )
    names = [e["event"] for e in events]
    # Dify's advanced chat: the run finishes as stopped, then the answer ends
    assert names[-2:] == ["workflow_finished", "message_end"] and "message" not in names
    finished = events[-2]
    assert finished["workflow_run_id"] == events[0]["workflow_run_id"] == finished["data"]["id"]
    assert (finished["data"]["status"], finished["data"]["error"], finished["data"]["outputs"]) == (
        "stopped",
        "Stopped by user.",
        {},
    )
    assert finished["data"]["workflow_id"] == events[0]["data"]["workflow_id"]
    assert {
        "elapsed_time",
        "total_tokens",
        "total_steps",
        "created_by",
        "created_at",
        "finished_at",
        "exceptions_count",
        "files",
    } <= set(finished["data"])
    message_id = events[0]["message_id"]
    conversation_id = events[0]["conversation_id"]
    for _ in range(200):  # the run finishes after the stream closed; then the turn is marked
        rows = app.http.get("/messages", params={"user": "ivy", "conversation_id": conversation_id}).json()["data"]
        if rows and rows[0]["status"] == "stopped":
            break
        threading.Event().wait(0.05)
    assert rows[0]["id"] == message_id and rows[0]["status"] == "stopped" and rows[0]["answer"] == ""


def test_stop_by_another_user_changes_nothing(app):
    app.llm.gate.clear()
    app.llm.entered.clear()
    body = {"inputs": {"city": "Porto"}, "query": "Go on", "user": "jo", "response_mode": "streaming"}
    try:
        with app.http.stream("POST", "/chat-messages", json=body) as response:
            lines = response.iter_lines()
            started = next(json.loads(line[6:]) for line in lines if line.startswith("data: "))
            assert app.llm.entered.wait(30)
            r = app.http.post(f"/chat-messages/{started['task_id']}/stop", json={"user": "mallory"})
            assert r.status_code == 200  # as Dify: success, whoever asks
            app.llm.gate.set()
            rest = [json.loads(line[6:])["event"] for line in lines if line.startswith("data: ")]
    finally:
        app.llm.gate.set()
    assert "message" in rest and rest[-1] == "workflow_finished"
    rows = app.http.get("/messages", params={"user": "jo", "conversation_id": started["conversation_id"]}).json()
    assert rows["data"][0]["status"] == "normal" and rows["data"][0]["answer"]


def test_stop_needs_a_user(app):
    r = app.http.post("/chat-messages/whatever/stop", json={})
    assert r.status_code == 400 and r.json()["message"] == "Arg user must be provided."


# -- file upload ------------------------------------------------------------------------------------


def test_upload_checks_type_size_and_count(app, monkeypatch):
    def post(files, user="kim"):
        return app.http.post("/files/upload", data={"user": user}, files=files)

    r = post([("file", ("notes.pdf", b"%PDF-1.4 tiny", "application/pdf"))])
    assert r.status_code == 201 and r.json()["mime_type"] == "application/pdf" and r.json()["created_by"] == "kim"
    # Dify 1.x takes any other file too (a type it does not name is custom), held to the document limit.
    for name in ("data.json", "app.py", "README", "tool.exe"):
        r = post([("file", (name, b"{}", "application/octet-stream"))])
        assert r.status_code == 201 and (r.json()["name"], r.json()["extension"]) == (
            name,
            name.rpartition(".")[2] if "." in name else "",
        ), r.text
    r = post([("file", ("a.png", b"1", "image/png")), ("file", ("b.png", b"2", "image/png"))])
    assert r.status_code == 400 and r.json()["code"] == "too_many_files"
    r = app.http.post("/files/upload", data={"user": "kim"})
    assert r.status_code == 400 and r.json()["code"] == "no_file_uploaded"
    monkeypatch.setitem(api_files.SIZE_LIMIT_MB, "image", 1)
    r = post([("file", ("big.png", b"0" * (1024 * 1024 + 1), "image/png"))])
    assert r.status_code == 413 and r.json()["code"] == "file_too_large"
    r = post([("file", ("fits.png", b"0" * (1024 * 1024), "image/png"))])
    assert r.status_code == 201
    monkeypatch.setitem(api_files.SIZE_LIMIT_MB, "document", 1)
    r = post([("file", ("big.json", b"0" * (1024 * 1024 + 1), "application/json"))])
    assert r.status_code == 413 and "custom limit of 1 MB" in r.json()["message"]
    monkeypatch.setitem(api_files.SIZE_LIMIT_MB, "document", 15)
    # A file may be larger than the JSON body limit (1 MB): it is held to its type's own limit.
    r = post([("file", ("report.pdf", b"%PDF" + b"0" * (3 * 1024 * 1024), "application/pdf"))])
    assert r.status_code == 201, r.text
    r = app.http.post(
        "/chat-messages", content=b"{" + b" " * (2 * 1024 * 1024) + b"}", headers={"Content-Type": "application/json"}
    )
    assert r.status_code == 413 and r.json()["code"] == "request_entity_too_large"


def test_dify_dsl_features_are_kept_with_the_flow_and_survive_storage():
    from core.flow.graph import Flow, load_flow
    from tests.conftest import FIXTURES

    flow = load_flow(FIXTURES / "dify_dsl" / "dify-fixtures__basic_chatflow.yml")
    assert flow.features["retriever_resource"] == {"enabled": True}
    assert flow.features["suggested_questions"] == []
    assert Flow.from_dict(flow.to_dict()).features == flow.features
