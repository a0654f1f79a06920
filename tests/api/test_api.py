"""The Dify-compatible Service API (core/api/): a real server on a loopback port, driven over HTTP.

Contract: spec/dify-memory.md §3.6, §3.7, §4 and checklist items 25–43. Most tests share one
server (a uvicorn thread on 127.0.0.1) over a SQLite store; the documented-client test runs the
README's commands (``flows import``, ``keys create``, ``serve``) in their own processes.
"""

from __future__ import annotations

import hashlib
import json
import socket
import subprocess
import sys
import threading
import time
import uuid

import httpx
import pytest
import requests
import schemathesis
import uvicorn
from hypothesis import HealthCheck, settings

from benchmarks.api_load import ServerProcess, parse_sse
from core.api.app import create_app
from core.io.readers.dify_messages import dify_turn
from core.llm.client import DemoClient
from core.llm.errors import LLMError
from core.model.conversation import AGENT_THOUGHTS, ANSWER, QUERY, SHOWN_ANSWER, UUID_NIL
from core.service.sessions import ConversationService
from core.store import keys as app_keys
from core.store import repo
from core.store.db import Database
from tests.conftest import ROOT

SUPPORT_BOT = ROOT / "sample_data" / "flows" / "support-bot.yml"
MINIMAL_CHAT = ROOT / "sample_data" / "flows" / "minimal-chat.yml"
BASIC_CHATBOT = ROOT / "sample_data" / "flows" / "basic-chatbot.yml"
AGENT_APP = ROOT / "sample_data" / "flows" / "agent-app.yml"

# A chatflow whose start form requires an input, with boolean, object and float variables.
PREFS_FLOW = """\
format: memlens-flow
version: 1
name: prefs
variables:
  - {name: vip, type: boolean, default: false}
  - {name: profile, type: object, default: {tier: gold}}
  - {name: score, type: number, default: 1.5}
  - {name: tags, type: "array[string]", default: [a, b]}
nodes:
  - id: start
    type: start
    title: Start
    variables: [{variable: region, label: Region, type: text-input, required: true}]
  - {id: answer, type: answer, title: Answer, answer: "Region {{#start.region#}}"}
edges:
  - [start, answer]
"""

WORKFLOW_FLOW = """\
format: memlens-flow
version: 1
name: a-workflow
mode: workflow
nodes:
  - {id: start, type: start, title: Start}
  - {id: end, type: end, title: End, outputs: []}
edges:
  - [start, end]
"""

FAIL = "please fail"
SLOW = "take your time"


class ScriptedClient:
    """The demo model, except that a query saying FAIL makes the model call fail and SLOW slows it."""

    def __init__(self):
        self.demo = DemoClient()

    def complete(self, model, messages, max_tokens=None):
        text = " ".join(str(m.get("content", "")) for m in messages[-1:])
        if FAIL in text:
            raise LLMError(f"{model}: the provider refused the request (scripted)")
        if SLOW in text:
            time.sleep(0.4)
        return self.demo.complete(model, messages, max_tokens)


class ThreadServer:
    """A uvicorn server for an app, on a free loopback port, in a thread of the test process."""

    def __init__(self, app):
        sock = socket.socket()
        sock.bind(("127.0.0.1", 0))
        sock.listen(128)
        self.port = sock.getsockname()[1]
        self.server = uvicorn.Server(uvicorn.Config(app, log_level="critical", lifespan="off"))
        self.thread = threading.Thread(target=self.server.run, kwargs={"sockets": [sock]}, daemon=True)
        self.thread.start()
        deadline = time.monotonic() + 20
        while not self.server.started:
            if time.monotonic() > deadline or not self.thread.is_alive():
                raise RuntimeError("the test server did not start")
            time.sleep(0.02)

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def stop(self) -> None:
        self.server.should_exit = True
        self.thread.join(10)


def _flow_file(tmp_path, name: str, text: str):
    path = tmp_path / f"{name}.yml"
    path.write_text(text, encoding="utf-8")
    return path


class Api:
    """The shared server, its store, and the apps (flows with keys) it serves."""

    def __init__(self, tmp_path):
        self.url = f"sqlite:///{tmp_path / 'memlens.db'}"
        self.db = Database(self.url)
        self.service = ConversationService(self.db, DemoClient())
        self.bot = self.service.import_flow(SUPPORT_BOT).flow_id
        self.other = self.service.import_flow(MINIMAL_CHAT).flow_id
        self.prefs = self.service.import_flow(_flow_file(tmp_path, "prefs", PREFS_FLOW)).flow_id
        self.workflow = self.service.import_flow(_flow_file(tmp_path, "wf", WORKFLOW_FLOW)).flow_id
        self.basic = self.service.import_flow(BASIC_CHATBOT).flow_id
        self.agent = self.service.import_flow(AGENT_APP).flow_id
        self.key = app_keys.create_key(self.db, self.bot)[1]
        self.other_key = app_keys.create_key(self.db, self.other)[1]
        self.prefs_key = app_keys.create_key(self.db, self.prefs)[1]
        self.workflow_key = app_keys.create_key(self.db, self.workflow)[1]
        self.basic_key = app_keys.create_key(self.db, self.basic)[1]
        self.agent_key = app_keys.create_key(self.db, self.agent)[1]
        self.server = ThreadServer(create_app(self.db, llm=ScriptedClient(), ping_interval=0.1))
        self.http = httpx.Client(base_url=self.server.base_url, timeout=60)

    def request(self, method: str, path: str, key: str | None = None, **kwargs) -> httpx.Response:
        headers = dict(kwargs.pop("headers", {}))
        if key is not False:
            headers.setdefault("Authorization", f"Bearer {key or self.key}")
        return self.http.request(method, path, headers=headers, **kwargs)

    def chat(
        self, query: str, conversation_id: str = "", user: str = "abc-123", key: str | None = None, **extra
    ) -> httpx.Response:
        body = {
            "inputs": {},
            "query": query,
            "user": user,
            "conversation_id": conversation_id,
            "response_mode": "blocking",
            **extra,
        }
        return self.request("POST", "/chat-messages", key, json=body)

    def stream(
        self, query: str, conversation_id: str = "", user: str = "abc-123", key: str | None = None, **extra
    ) -> tuple[str, list]:
        body = {
            "inputs": {},
            "query": query,
            "user": user,
            "conversation_id": conversation_id,
            "response_mode": "streaming",
            **extra,
        }
        response = self.request("POST", "/chat-messages", key, json=body)
        assert response.status_code == 200, response.text
        assert response.headers["content-type"].startswith("text/event-stream")
        return response.text, parse_sse(response.text)

    def new_conversation(
        self, user: str = "abc-123", queries=("Hi, I'm Dana. My order number is 4411.",), key: str | None = None
    ) -> tuple[str, list[dict]]:
        answers = []
        conversation_id = ""
        for q in queries:
            r = self.chat(q, conversation_id, user=user, key=key)
            assert r.status_code == 200, r.text
            answers.append(r.json())
            conversation_id = r.json()["conversation_id"]
        return conversation_id, answers

    def close(self) -> None:
        self.http.close()
        self.server.stop()
        self.db.dispose()


@pytest.fixture(scope="module")
def api(tmp_path_factory):
    a = Api(tmp_path_factory.mktemp("api"))
    yield a
    a.close()


def _error(response: httpx.Response, status: int, code: str, message: str | None = None) -> dict:
    assert response.status_code == status, response.text
    body = response.json()
    assert body["code"] == code and body["status"] == status, body
    if message is not None:
        assert body["message"] == message, body
    return body


# -- the documented client, against the real commands -------------------------------------------


def _cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "core", *args], cwd=ROOT, capture_output=True, text=True, timeout=120)


def test_dify_documented_client_drives_an_imported_flow_and_the_second_turn_keeps_the_first(tmp_path):
    url = f"sqlite:///{tmp_path / 'memlens.db'}"
    imported = _cli("flows", "import", str(SUPPORT_BOT), "--db", url)
    assert imported.returncode == 0, imported.stderr
    flow_id = imported.stdout.strip()
    created = _cli("keys", "create", flow_id, "--db", url)
    assert created.returncode == 0, created.stderr
    api_key = created.stdout.strip()

    with ServerProcess(url) as server:
        # -- Dify's Python example, unchanged except for the base URL and the key ------------------
        API_KEY = api_key
        BASE_URL = server.base_url

        headers = {"Authorization": f"Bearer {API_KEY}", "Content-Type": "application/json"}
        data = {
            "inputs": {},
            "query": "Hi, I'm Dana. My order number is 4411.",
            "response_mode": "blocking",
            "conversation_id": "",
            "user": "abc-123",
        }
        response = requests.post(f"{BASE_URL}/chat-messages", headers=headers, json=data)
        first = response.json()
        conversation_id = first["conversation_id"]

        data = {
            "inputs": {},
            "query": "What's my name?",
            "response_mode": "blocking",
            "conversation_id": conversation_id,
            "user": "abc-123",
        }
        response = requests.post(f"{BASE_URL}/chat-messages", headers=headers, json=data)
        second = response.json()

        response = requests.get(
            f"{BASE_URL}/conversations/{conversation_id}/variables", headers=headers, params={"user": "abc-123"}
        )
        variables = response.json()
        # -------------------------------------------------------------------------------------------

        # The UI's store has the conversation at once (same database, another connection).
        ui_db = Database(url)
        try:
            info = ConversationService(ui_db).info(conversation_id)
            assert (info.source, info.user_id, info.turn_count) == ("api", "abc-123", 2)
            assert conversation_id in [c.id for c in repo.list_conversations(ui_db)]
        finally:
            ui_db.dispose()

        ledger = requests.get(
            f"{BASE_URL}/memlens/messages/{second['message_id']}/ledger", headers=headers, params={"user": "abc-123"}
        ).json()

    assert first["event"] == "message" and first["mode"] == "advanced-chat"
    assert second["conversation_id"] == conversation_id
    assert "Dana" in second["answer"]
    by_name = {v["name"]: v for v in variables["data"]}
    assert by_name["turn_count"]["value"] == "2" and by_name["turn_count"]["value_type"] == "number"
    assert by_name["topics"]["value"] == str(["order", "other"])

    nodes = {n["node_id"]: n for n in ledger["nodes"]}
    responder = nodes["responder"]
    rows = [(e["turn"], e["role"], e["kept"], e["reason"]) for e in responder["ledger"]["entries"]]
    assert rows == [(1, "user", True, "kept"), (1, "assistant", True, "kept")]
    history = [m["content"] for m in responder["prompt"] if m["origin"] == "memory history"]
    assert history == ["Hi, I'm Dana. My order number is 4411.", first["answer"]]
    assert [e["reason"] for e in nodes["classifier"]["ledger"]["entries"]] == ["memory_off", "memory_off"]
    assert ledger["dialogue_count"] == 2


def test_flows_and_keys_commands_import_list_create_and_revoke(tmp_path, capsys):
    from core.cli.app import main

    url = f"sqlite:///{tmp_path / 'memlens.db'}"
    assert main(["flows", "import", str(MINIMAL_CHAT), "--db", url]) == 0
    flow_id = capsys.readouterr().out.strip()
    assert main(["flows", "list", "--db", url]) == 0
    listed = capsys.readouterr().out
    assert flow_id in listed and "minimal-chat" in listed
    assert main(["keys", "create", flow_id, "--name", "ci", "--db", url]) == 0
    created = capsys.readouterr()
    key = created.out.strip()
    key_id = created.err.split()[1]
    assert key.startswith("app-") and "not shown again" in created.err
    db = Database(url)
    try:
        assert app_keys.authenticate(db, key).id == key_id
        assert main(["keys", "list", "--format", "json", "--db", url]) == 0
        out = capsys.readouterr().out
        assert key not in out
        (row,) = json.loads(out)
        assert (row["id"], row["flow_id"], row["name"], row["revoked_at"]) == (key_id, flow_id, "ci", None)
        assert main(["keys", "revoke", key_id, "--db", url]) == 0
        assert key_id in capsys.readouterr().out
        assert app_keys.authenticate(db, key) is None
        assert main(["keys", "list", "--db", url]) == 0
        assert "revoked" in capsys.readouterr().out
    finally:
        db.dispose()


def test_commands_refuse_bad_input_with_one_line(tmp_path, capsys):
    from core.cli.app import main

    url = f"sqlite:///{tmp_path / 'memlens.db'}"
    # A stored id that is not there is a runtime failure (1); a file or port to change is bad input (2).
    cases = [
        (["keys", "create", str(uuid.uuid4()), "--db", url], "no flow with id", 1),
        (["keys", "revoke", "no-such-key", "--db", url], "no API key with id", 1),
        (["flows", "import", str(tmp_path / "missing.yml"), "--db", url], "no such file", 2),
    ]
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen(1)
        cases.append((["serve", "--port", str(busy.getsockname()[1]), "--db", url], "cannot listen", 2))
        for argv, message, status in cases:
            assert main(argv) == status, argv
            err = capsys.readouterr().err
            assert message in err and err.count("\n") == 1, err


def test_a_conversation_stays_on_its_flow_version_and_new_ones_start_on_the_newest(api):
    from core.flow.graph import load_flow

    flow_id = api.service.import_flow(MINIMAL_CHAT, name="pinned").flow_id
    _, key = app_keys.create_key(api.db, flow_id)
    v1 = repo.latest_flow_version(api.db, flow_id)
    old_id, _ = api.new_conversation(key=key, queries=("Hi, I'm Dana.",))
    edited = load_flow(MINIMAL_CHAT)
    edited.description = "an edited copy"
    v2 = api.service.update_flow(flow_id, edited)
    assert v2.id != v1.id
    assert api.chat("What's my name?", conversation_id=old_id, key=key).json()["conversation_id"] == old_id
    new_id, _ = api.new_conversation(key=key, queries=("Hello",))

    def versions(conversation_id):
        return [t["flow_version_id"] for t in repo.load_turn_rows(api.db, conversation_id)]

    assert versions(old_id) == [v1.id, v1.id]
    assert versions(new_id) == [v2.id]


# -- chat-messages ------------------------------------------------------------------------------


def test_blocking_answer_has_difys_fields_and_messages_are_stored_linear(api):
    conversation_id, (first, second) = api.new_conversation(queries=("Hi, I'm Dana.", "What's my name?"))
    for answer in (first, second):
        assert set(answer) == {
            "event",
            "task_id",
            "id",
            "message_id",
            "conversation_id",
            "mode",
            "answer",
            "metadata",
            "created_at",
        }
        assert answer["id"] == answer["message_id"] and answer["event"] == "message"
        usage = answer["metadata"]["usage"]
        assert usage["total_tokens"] == usage["prompt_tokens"] + usage["completion_tokens"] > 0
        assert answer["metadata"]["retriever_resources"] == []
    messages = api.request("GET", "/messages", params={"conversation_id": conversation_id, "user": "abc-123"}).json()[
        "data"
    ]
    assert [m["parent_message_id"] for m in messages] == [UUID_NIL, UUID_NIL]
    assert [m["answer"] for m in messages] == [first["answer"], second["answer"]]
    assert "Dana" in second["answer"]


def test_new_conversation_is_named_after_the_first_20_characters_of_the_query(api):
    long_id, _ = api.new_conversation(queries=("Hi, I'm Dana. My order number is 4411.",))
    short_id, _ = api.new_conversation(queries=("Hello there",))
    assert api.service.info(long_id).name == "Hi, I'm Dana. My ord…"
    assert api.service.info(short_id).name == "Hello there"


def test_streaming_events_arrive_in_difys_order_and_the_deltas_make_the_stored_answer(api):
    text, events = api.stream("Hi, I'm Dana. Where is my parcel?")
    frames = [f for f in text.split("\n\n") if f]
    assert all(f.startswith("data: {") or f == "event: ping" for f in frames)
    events = [e for e in events if e["event"] != "ping"]
    names = [e["event"] for e in events]
    assert names[0] == "workflow_started" and names[-1] == "workflow_finished"
    assert names[-2] == "message_end"
    node_events = [n for n in names if n.startswith("node_")]
    assert node_events == ["node_started", "node_finished"] * (len(node_events) // 2)
    assert "message" in names and names.index("message") < names.index("message_end")
    for e in events:
        assert {"event", "conversation_id", "message_id", "created_at", "task_id"} <= set(e)
    message_id = events[0]["message_id"]
    streamed = "".join(e["answer"] for e in events if e["event"] == "message")
    stored = api.request(
        "GET", "/messages", params={"conversation_id": events[0]["conversation_id"], "user": "abc-123"}
    ).json()["data"]
    assert [(m["id"], m["answer"]) for m in stored] == [(message_id, streamed)]
    assert streamed
    end = next(e for e in events if e["event"] == "message_end")
    assert end["metadata"]["usage"]["total_tokens"] > 0
    assert events[-1]["data"]["status"] == "succeeded"
    # The fields Dify's stream responses require (a client typed on them refuses an event without one).
    started = [e["data"] for e in events if e["event"] == "node_started"]
    finished = [e["data"] for e in events if e["event"] == "node_finished"]
    assert all(
        {"id", "node_id", "node_type", "title", "index", "predecessor_node_id", "inputs", "created_at", "extras"}
        <= set(d)
        for d in started
    )
    assert all(
        {
            "id",
            "node_id",
            "node_type",
            "title",
            "index",
            "predecessor_node_id",
            "inputs",
            "process_data",
            "outputs",
            "status",
            "error",
            "elapsed_time",
            "execution_metadata",
            "created_at",
            "finished_at",
            "files",
        }
        <= set(d)
        for d in finished
    )
    assert started[0]["predecessor_node_id"] is None
    assert [d["predecessor_node_id"] for d in started[1:]] == [d["node_id"] for d in started[:-1]]
    assert all(isinstance(d["created_at"], int) and d["finished_at"] >= d["created_at"] for d in finished)
    assert [d["id"] for d in started] == [d["id"] for d in finished]
    assert {"created_by", "exceptions_count", "files"} <= set(events[-1]["data"])


def test_a_quiet_stream_sends_ping_keep_alives(api):
    _, events = api.stream(f"Hi, {SLOW} please.")
    names = [e["event"] for e in events]
    assert "ping" in names
    real = [n for n in names if n != "ping"]
    assert real[-2:] == ["message_end", "workflow_finished"]


def test_a_failed_run_answers_400_when_blocking_and_an_error_event_when_streaming(api):
    r = api.chat(f"Hi, {FAIL}.")
    body = _error(r, 400, "invalid_param")
    assert body["message"].startswith("Run failed: ") and "scripted" in body["message"]

    _, events = api.stream(f"Hi, {FAIL}.")
    names = [e["event"] for e in events if e["event"] != "ping"]
    assert "message_end" not in names
    assert names[-2:] == ["workflow_finished", "error"]
    finished, error = [e for e in events if e["event"] in ("workflow_finished", "error")]
    assert finished["data"]["status"] == "failed"
    assert (error["status"], error["code"]) == (400, "invalid_param")
    assert error["message"].startswith("Run failed: ")
    stored = api.request(
        "GET", "/messages", params={"conversation_id": error["conversation_id"], "user": "abc-123"}
    ).json()["data"]
    assert [(m["status"], m["answer"]) for m in stored] == [("error", "")]
    assert stored[0]["error"]


def test_unknown_conversation_id_starts_a_new_conversation(api):
    unknown = str(uuid.uuid4())
    r = api.chat("Hello", conversation_id=unknown)
    assert r.status_code == 200
    assert r.json()["conversation_id"] != unknown
    assert repo.find_conversation(api.db, unknown) is None
    assert api.service.info(r.json()["conversation_id"]).turn_count == 1


def test_a_basic_chatbot_answers_as_difys_chat_app_does(api):
    assert api.request("GET", "/info", api.basic_key).json()["mode"] == "chat"
    assert api.request("GET", "/info").json()["mode"] == "advanced-chat"
    params = api.request("GET", "/parameters", api.basic_key).json()
    assert params["opening_statement"] == "Hello! How can I help with your order?"
    assert [
        (kind, field["variable"], field["default"])
        for item in params["user_input_form"]
        for kind, field in item.items()
    ] == [("text-input", "name", ""), ("select", "language", "English")]
    conversation_id, (first, second) = api.new_conversation(
        queries=("Hi, I am Dana. My order number is 4411.", "What is my order number?"), key=api.basic_key
    )
    assert first["mode"] == second["mode"] == "chat" and "4411" in second["answer"]
    # Its stream has no workflow: messages, then their end.
    _, events = api.stream("Where is my parcel?", conversation_id, key=api.basic_key)
    names = [e["event"] for e in events if e["event"] != "ping"]
    assert names[-1] == "message_end" and set(names) == {"message", "message_end"}
    stored = api.request(
        "GET", "/messages", api.basic_key, params={"conversation_id": conversation_id, "user": "abc-123"}
    ).json()["data"]
    assert len(stored) == 3
    # An unknown conversation is not found, where a Chatflow would start a new one.
    unknown = str(uuid.uuid4())
    _error(api.chat("Hello", conversation_id=unknown, key=api.basic_key), 404, "not_found", "Conversation Not Exists.")
    assert repo.find_conversation(api.db, unknown) is None


def test_an_agent_app_streams_agent_messages_and_refuses_blocking_as_dify_s_agent_chat_app_does(api):
    assert api.request("GET", "/info", api.agent_key).json()["mode"] == "agent-chat"
    assert (
        api.request("GET", "/parameters", api.agent_key).json()["opening_statement"]
        == "Hi! Tell me your order number and I will look it up."
    )
    before = len(repo.list_conversations(api.db))
    _error(
        api.chat("Hi, I am Dana.", key=api.agent_key),
        400,
        "invalid_param",
        "Agent Chat App does not support blocking mode",
    )
    assert len(repo.list_conversations(api.db)) == before  # refused before anything is stored
    _, events = api.stream("Hi, I am Dana. My order number is 4411.", key=api.agent_key)
    names = [e["event"] for e in events if e["event"] != "ping"]
    # Dify's function-calling runner: the thought announced with the first chunk, sent whole before the end.
    assert names[0] == "agent_thought" and names[-2:] == ["agent_thought", "message_end"]
    assert set(names[1:-2]) == {"agent_message"}
    conversation_id = events[0]["conversation_id"]
    _, events = api.stream("What is my order number?", conversation_id, key=api.agent_key)
    answer = "".join(e["answer"] for e in events if e["event"] == "agent_message")
    assert "4411" in answer
    thoughts = [e for e in events if e["event"] == "agent_thought"]
    end = next(e for e in events if e["event"] == "message_end")
    assert [t["thought"] for t in thoughts] == ["", answer]
    assert {t["id"] for t in thoughts} == {thoughts[0]["id"]} and thoughts[0]["id"] != end["message_id"]
    for t in thoughts:
        assert (t["message_id"], t["conversation_id"], t["task_id"], t["position"]) == (
            end["message_id"],
            conversation_id,
            end["task_id"],
            1,
        )
        assert (t["tool"], t["tool_input"], t["observation"], t["message_files"]) == ("", "", "", [])
    stored = api.request(
        "GET", "/messages", api.agent_key, params={"conversation_id": conversation_id, "user": "abc-123"}
    ).json()["data"]
    assert [m["answer"] for m in stored][-1] == answer
    # The message lists the thought the stream sent, so a pull reads the turn as an Agent app's run.
    [listed] = stored[-1]["agent_thoughts"]
    assert (listed["id"], listed["message_id"], listed["position"], listed["thought"], listed["tool"]) == (
        thoughts[0]["id"],
        end["message_id"],
        1,
        answer,
        "",
    )
    assert listed["created_at"] == stored[-1]["created_at"] and listed["files"] == []
    turn = dify_turn(stored[-1])
    assert turn.meta[AGENT_THOUGHTS] == 1 and SHOWN_ANSWER not in turn.meta
    assert [(m.kind, m.content) for m in turn.messages] == [(QUERY, "What is my order number?"), (ANSWER, answer)]
    unknown = str(uuid.uuid4())
    response = api.request(
        "POST",
        "/chat-messages",
        api.agent_key,
        json={
            "inputs": {},
            "query": "Hello",
            "user": "abc-123",
            "conversation_id": unknown,
            "response_mode": "streaming",
        },
    )
    _error(response, 404, "not_found", "Conversation Not Exists.")
    assert repo.find_conversation(api.db, unknown) is None


@pytest.mark.parametrize(
    "body, message",
    [
        ({"inputs": {}, "query": "hi"}, "Arg user must be provided."),
        ({"inputs": {}, "query": "hi", "user": ""}, "Arg user must be provided."),
        ({"inputs": {}, "query": "", "user": "u"}, "query is required"),
        ({"inputs": {}, "user": "u"}, "query is required"),
        ({"inputs": {}, "query": "\x00\x00", "user": "u"}, "query is required"),
        ({"query": "hi", "user": "u"}, "inputs is required"),
        (
            {"inputs": {}, "query": "hi", "user": "u", "conversation_id": "not-a-uuid"},
            "conversation_id must be a valid UUID",
        ),
    ],
)
def test_chat_messages_bad_input_gets_difys_400(api, body, message):
    before = len(repo.list_conversations(api.db))
    _error(api.request("POST", "/chat-messages", json=body), 400, "invalid_param", message)
    assert len(repo.list_conversations(api.db)) == before


@pytest.mark.parametrize(
    "body",
    [
        {"inputs": {}, "query": "hi", "user": "u", "response_mode": "sometimes"},
        {"inputs": "x", "query": "hi", "user": "u"},
        {"inputs": {}, "query": 5, "user": "u"},
    ],
)
def test_chat_messages_fields_of_the_wrong_type_get_invalid_param(api, body):
    _error(api.request("POST", "/chat-messages", json=body), 400, "invalid_param")


def test_malformed_json_body_is_a_bad_request(api):
    r = api.request("POST", "/chat-messages", content=b"{not json", headers={"Content-Type": "application/json"})
    _error(r, 400, "bad_request")


def test_a_missing_required_input_is_refused_and_leaves_no_conversation(api):
    before = len(repo.list_conversations(api.db))
    r = api.chat("Hello", key=api.prefs_key)
    body = _error(r, 400, "invalid_param")
    assert "region" in body["message"] and "required" in body["message"]
    streamed = api.chat("Hello", key=api.prefs_key, response_mode="streaming")
    assert _error(streamed, 400, "invalid_param") == body  # refused before the stream starts
    assert len(repo.list_conversations(api.db)) == before
    ok = api.chat("Hello", key=api.prefs_key, inputs={"region": "EU"})
    assert ok.status_code == 200 and ok.json()["answer"] == "Region EU"


def test_a_workflow_app_is_not_a_chat_app(api):
    _error(
        api.chat("Hello", key=api.workflow_key),
        400,
        "not_chat_app",
        "Please check if your app mode matches the right API route.",
    )


def test_workflow_id_runs_that_version_of_the_app_and_no_other(api):
    version = repo.latest_flow_version(api.db, api.bot)
    assert api.chat("Hello", workflow_id=version.id).status_code == 200
    other = repo.latest_flow_version(api.db, api.other)
    _error(api.chat("Hello", workflow_id=other.id), 404, "not_found", f"Workflow not found with id: {other.id}")
    _error(api.chat("Hello", workflow_id="v1"), 400, "bad_request")


# -- authentication and ownership --------------------------------------------------------------


def test_missing_malformed_and_wrong_keys_are_401(api):
    body = {"inputs": {}, "query": "hi", "user": "u"}
    _error(
        api.request("POST", "/chat-messages", key=False, json=body),
        401,
        "unauthorized",
        "Authorization header must be provided and start with 'Bearer'",
    )
    _error(
        api.request("POST", "/chat-messages", json=body, headers={"Authorization": f"Basic {api.key}"}),
        401,
        "unauthorized",
        "Authorization scheme must be 'Bearer'",
    )
    _error(
        api.request("POST", "/chat-messages", key=api.key + "x", json=body),
        401,
        "unauthorized",
        "Access token is invalid",
    )
    _error(api.request("GET", "/conversations", key="app-" + "A" * 43), 401, "unauthorized", "Access token is invalid")


def test_a_revoked_key_is_refused_at_once(api):
    record, key = app_keys.create_key(api.db, api.bot, name="short-lived")
    assert api.chat("Hello", key=key).status_code == 200
    app_keys.revoke_key(api.db, record.id)
    _error(api.chat("Hello", key=key), 401, "unauthorized", "Access token is invalid")
    assert [k.active for k in app_keys.list_keys(api.db, api.bot) if k.id == record.id] == [False]


def test_keys_are_stored_only_as_hashes(api):
    record, key = app_keys.create_key(api.db, api.bot)
    from core.store.models import AppKeyRow

    with api.db.session() as s:
        row = s.get(AppKeyRow, record.id)
        stored = [row.id, row.flow_id, row.key_hash, row.hint, row.name]
    assert key not in json.dumps(stored)
    assert row.key_hash == hashlib.sha256(key.encode()).hexdigest()
    assert key.startswith("app-") and len(key) > 40


def _conversation_endpoints(api, conversation_id: str, message_id: str, variable_id: str, user: str, key: str):
    """Every endpoint that reads or changes one conversation, as (label, response)."""
    return [
        ("messages", api.request("GET", "/messages", key, params={"conversation_id": conversation_id, "user": user})),
        ("variables", api.request("GET", f"/conversations/{conversation_id}/variables", key, params={"user": user})),
        (
            "put variable",
            api.request(
                "PUT",
                f"/conversations/{conversation_id}/variables/{variable_id}",
                key,
                json={"value": 99, "user": user},
            ),
        ),
        (
            "rename",
            api.request("POST", f"/conversations/{conversation_id}/name", key, json={"name": "stolen", "user": user}),
        ),
        ("delete", api.request("DELETE", f"/conversations/{conversation_id}", key, json={"user": user})),
    ]


@pytest.mark.parametrize("who", ["another user", "another app's key"])
def test_another_users_or_another_apps_conversation_is_404_and_left_untouched(api, who):
    conversation_id, (answer,) = api.new_conversation(user="alice")
    variable_id = next(v.id for v in repo.get_variables(api.db, conversation_id) if v.name == "turn_count")
    user, key = ("mallory", api.key) if who == "another user" else ("alice", api.other_key)
    for label, r in _conversation_endpoints(api, conversation_id, answer["message_id"], variable_id, user, key):
        _error(r, 404, "not_found", "Conversation Not Exists.")
    _error(
        api.request("GET", f"/memlens/messages/{answer['message_id']}/ledger", key, params={"user": user}),
        404,
        "not_found",
        "Message Not Exists.",
    )
    # chat-messages cannot continue it either: it starts a conversation of the caller's own.
    r = api.chat("What's my order number?", conversation_id=conversation_id, user=user, key=key)
    assert r.status_code == 200 and r.json()["conversation_id"] != conversation_id
    info = api.service.info(conversation_id)
    assert (info.turn_count, info.name, info.user_id) == (1, "Hi, I'm Dana. My ord…", "alice")
    assert {v.name: v.value for v in repo.get_variables(api.db, conversation_id)}["turn_count"] == 1
    listed = api.request("GET", "/conversations", key, params={"user": user, "limit": 100}).json()["data"]
    assert conversation_id not in [c["id"] for c in listed]


def test_a_ui_conversation_is_not_visible_through_the_api(api):
    info = api.service.start(api.bot, user_id="abc-123", source="ui")
    _error(
        api.request("GET", f"/conversations/{info.id}/variables", params={"user": "abc-123"}),
        404,
        "not_found",
        "Conversation Not Exists.",
    )


def test_requests_without_user_act_as_default_user(api):
    conversation_id, _ = api.new_conversation(user="DEFAULT-USER")
    r = api.request("GET", f"/conversations/{conversation_id}/variables")
    assert r.status_code == 200 and r.json()["data"]
    r = api.request("DELETE", f"/conversations/{conversation_id}")
    assert r.status_code == 204


def test_a_numeric_user_is_that_user_as_text_as_dify_reads_it(api):
    # Dify takes ``user`` from the raw JSON and uses its text: integer user ids work on every call.
    r = api.chat("Hi, I'm Dana.", user=12345)
    assert r.status_code == 200, r.text
    conversation_id, message_id = r.json()["conversation_id"], r.json()["message_id"]
    assert api.service.info(conversation_id).user_id == "12345"
    r = api.chat("What's my name?", conversation_id, user=12345)
    assert r.json()["conversation_id"] == conversation_id  # the same user continues the same conversation
    listed = api.request("GET", "/conversations", params={"user": "12345"}).json()["data"]
    assert [c["id"] for c in listed] == [conversation_id]
    assert api.request("POST", f"/messages/{message_id}/feedbacks", json={"rating": "like", "user": 12345}).json() == {
        "result": "success"
    }
    assert repo.feedbacks(api.db, conversation_id)[message_id][0]["user_id"] == "12345"
    # A false value is no user, as in Dify: refused where a user is required.
    _error(api.chat("Hello", user=0), 400, "invalid_param", "Arg user must be provided.")
    _error(
        api.request(
            "POST",
            "/chat-messages",
            headers={"Content-Type": "application/json"},
            content='{"inputs": {}, "query": "Hello", "user": Infinity}',
        ),
        400,
        "invalid_param",
    )


def test_feedback_and_suggested_questions_need_a_user_as_in_dify(api):
    conversation_id, (answer,) = api.new_conversation()
    mid = answer["message_id"]
    _error(
        api.request("POST", f"/messages/{mid}/feedbacks", json={"rating": "like"}),
        400,
        "invalid_param",
        "Arg user must be provided.",
    )
    _error(api.request("GET", f"/messages/{mid}/suggested"), 400, "invalid_param", "Arg user must be provided.")
    assert repo.feedbacks(api.db, conversation_id) == {}


# -- messages and conversations ----------------------------------------------------------------


def test_messages_page_backwards_from_first_id_oldest_first_with_has_more(api):
    queries = [f"Message number {i}" for i in range(1, 6)]
    conversation_id, answers = api.new_conversation(queries=queries)
    ids = [a["message_id"] for a in answers]
    page = api.request(
        "GET", "/messages", params={"conversation_id": conversation_id, "user": "abc-123", "limit": 2}
    ).json()
    assert (page["limit"], page["has_more"], [m["id"] for m in page["data"]]) == (2, True, ids[3:5])
    page = api.request(
        "GET",
        "/messages",
        params={"conversation_id": conversation_id, "user": "abc-123", "limit": 2, "first_id": ids[3]},
    ).json()
    assert (page["has_more"], [m["id"] for m in page["data"]]) == (True, ids[1:3])
    page = api.request(
        "GET",
        "/messages",
        params={"conversation_id": conversation_id, "user": "abc-123", "limit": 2, "first_id": ids[1]},
    ).json()
    assert (page["has_more"], [m["id"] for m in page["data"]]) == (False, ids[0:1])
    item = page["data"][0]
    assert set(item) == {
        "id",
        "conversation_id",
        "parent_message_id",
        "inputs",
        "query",
        "answer",
        "feedback",
        "retriever_resources",
        "created_at",
        "agent_thoughts",
        "message_files",
        "status",
        "error",
        "extra_contents",
    }
    assert item["query"] == "Message number 1" and item["agent_thoughts"] == []  # a Chatflow's run has none


def test_messages_include_every_branch(api):
    conversation_id, answers = api.new_conversation(queries=("Hi, I'm Dana.", "What's my name?"))
    regenerated = api.service.regenerate(conversation_id, answers[1]["message_id"])  # a branch made in the UI
    data = api.request("GET", "/messages", params={"conversation_id": conversation_id, "user": "abc-123"}).json()[
        "data"
    ]
    assert [m["id"] for m in data] == [answers[0]["message_id"], answers[1]["message_id"], regenerated.id]


def test_messages_errors(api):
    conversation_id, _ = api.new_conversation()
    empty = api.request("GET", "/messages", params={"user": "abc-123", "conversation_id": ""})
    assert empty.status_code == 200 and empty.json() == {"limit": 20, "has_more": False, "data": []}
    # Dify's query model: the id is required, and both ids are checked as UUIDs before any look-up
    _error(
        api.request("GET", "/messages", params={"user": "abc-123"}),
        400,
        "invalid_param",
        "conversation_id: Field required",
    )
    for params in (
        {"conversation_id": "not-a-uuid"},
        {"conversation_id": conversation_id, "first_id": "nope"},
        {"conversation_id": "", "first_id": "nope"},
    ):
        name = "first_id" if "first_id" in params else "conversation_id"
        bad = api.request("GET", "/messages", params={"user": "abc-123", **params})
        _error(bad, 400, "invalid_param", f"{name} must be a valid UUID")
        assert bad.json()["params"] == name
    _error(
        api.request(
            "GET",
            "/messages",
            params={"conversation_id": conversation_id, "user": "abc-123", "first_id": str(uuid.uuid4())},
        ),
        404,
        "not_found",
        "First Message Not Exists.",
    )
    _error(
        api.request("GET", "/messages", params={"conversation_id": str(uuid.uuid4()), "user": "abc-123"}),
        404,
        "not_found",
        "Conversation Not Exists.",
    )
    for limit in (0, 101, "x"):
        _error(
            api.request(
                "GET", "/messages", params={"conversation_id": conversation_id, "user": "abc-123", "limit": limit}
            ),
            400,
            "invalid_param",
        )


def test_conversations_list_the_callers_api_conversations_newest_updated_first_with_paging(api):
    user = "lister"
    ids = [api.new_conversation(user=user, queries=(f"Conversation {i}",))[0] for i in range(3)]
    api.chat("Again", conversation_id=ids[0], user=user)  # now the most recently updated
    api.new_conversation(user="someone-else")
    listed = api.request("GET", "/conversations", params={"user": user}).json()
    assert listed["limit"] == 20 and listed["has_more"] is False
    assert [c["id"] for c in listed["data"]] == [ids[0], ids[2], ids[1]]
    item = listed["data"][0]
    assert set(item) == {"id", "name", "inputs", "status", "introduction", "created_at", "updated_at"}
    assert (item["name"], item["status"]) == ("Conversation 0", "normal")

    page = api.request("GET", "/conversations", params={"user": user, "limit": 2}).json()
    assert (page["has_more"], [c["id"] for c in page["data"]]) == (True, [ids[0], ids[2]])
    page = api.request("GET", "/conversations", params={"user": user, "limit": 2, "last_id": ids[2]}).json()
    assert (page["has_more"], [c["id"] for c in page["data"]]) == (False, [ids[1]])

    oldest_first = api.request("GET", "/conversations", params={"user": user, "sort_by": "created_at"}).json()
    assert [c["id"] for c in oldest_first["data"]] == ids
    _error(
        api.request("GET", "/conversations", params={"user": user, "last_id": str(uuid.uuid4())}),
        404,
        "not_found",
        "Last Conversation Not Exists.",
    )
    _error(api.request("GET", "/conversations", params={"user": user, "sort_by": "name"}), 400, "invalid_param")
    _error(api.request("GET", "/conversations", params={"user": user, "limit": 101}), 400, "invalid_param")


def test_rename_sets_the_name_or_derives_it_from_the_first_query(api):
    conversation_id, _ = api.new_conversation(queries=("Where is my parcel? It was due Monday.", "Thanks"))
    r = api.request("POST", f"/conversations/{conversation_id}/name", json={"name": "Parcel", "user": "abc-123"})
    assert r.status_code == 200
    assert r.json()["name"] == "Parcel" and r.json()["id"] == conversation_id
    assert api.service.info(conversation_id).name == "Parcel"
    r = api.request("POST", f"/conversations/{conversation_id}/name", json={"auto_generate": True, "user": "abc-123"})
    assert r.json()["name"] == "Where is my parcel? …"
    _error(
        api.request("POST", f"/conversations/{conversation_id}/name", json={"user": "abc-123"}),
        400,
        "invalid_param",
        "name is required when auto_generate is false",
    )
    _error(
        api.request("POST", f"/conversations/{conversation_id}/name", json={"name": "", "user": "abc-123"}),
        400,
        "invalid_param",
        "name is required when auto_generate is false",
    )
    _error(
        api.request("POST", f"/conversations/{conversation_id}/name", json={"name": "   ", "user": "abc-123"}),
        400,
        "invalid_param",
        "name is required when auto_generate is false",
    )
    assert api.service.info(conversation_id).name == "Where is my parcel? …"


def test_delete_answers_204_with_an_empty_body_and_removes_everything(api):
    conversation_id, (answer,) = api.new_conversation()
    r = api.request("DELETE", f"/conversations/{conversation_id}", json={"user": "abc-123"})
    assert r.status_code == 204 and r.content == b""
    assert repo.find_conversation(api.db, conversation_id) is None
    assert repo.get_variables(api.db, conversation_id) == []
    _error(
        api.request("GET", "/messages", params={"conversation_id": conversation_id, "user": "abc-123"}),
        404,
        "not_found",
        "Conversation Not Exists.",
    )
    _error(
        api.request("DELETE", f"/conversations/{conversation_id}", json={"user": "abc-123"}),
        404,
        "not_found",
        "Conversation Not Exists.",
    )
    _error(
        api.request("DELETE", "/conversations/not-a-uuid", json={"user": "abc-123"}),
        404,
        "not_found",
        "Conversation Not Exists.",
    )


# -- conversation variables --------------------------------------------------------------------


def _variables(api, conversation_id, key=None, **params):
    params.setdefault("user", "abc-123")
    return api.request("GET", f"/conversations/{conversation_id}/variables", key, params=params)


def test_variables_are_listed_with_difys_fields_and_values_stringified(api):
    r = api.chat("Hello", key=api.prefs_key, inputs={"region": "EU"})
    conversation_id = r.json()["conversation_id"]
    listed = _variables(api, conversation_id, api.prefs_key).json()
    assert listed["limit"] == 20 and listed["has_more"] is False
    by_name = {v["name"]: v for v in listed["data"]}
    assert {n: (v["value_type"], v["value"]) for n, v in by_name.items()} == {
        "vip": ("boolean", "False"),
        "profile": ("object", "{'tier': 'gold'}"),
        "score": ("number", "1.5"),
        "tags": ("array[string]", "['a', 'b']"),
    }
    assert set(by_name["vip"]) == {"id", "name", "value_type", "value", "description", "created_at", "updated_at"}
    assert isinstance(by_name["vip"]["created_at"], int)


def test_variables_paging_and_the_case_insensitive_name_filter(api):
    conversation_id, _ = api.new_conversation(queries=("Hi",))
    everything = _variables(api, conversation_id).json()["data"]
    first = _variables(api, conversation_id, limit=1).json()
    assert first["has_more"] is True and first["data"] == everything[:1]
    filtered = _variables(api, conversation_id, variable_name="TOPIC").json()["data"]
    assert sorted(v["name"] for v in filtered) == ["last_topic", "topics"]
    # Dify pages by created_at alone: variables created together are all "not newer" than the first.
    after = _variables(api, conversation_id, last_id=everything[0]["id"]).json()
    assert after["data"] == [] and after["has_more"] is False
    _error(_variables(api, conversation_id, last_id=str(uuid.uuid4())), 400, "invalid_param")
    _error(_variables(api, conversation_id, variable_name="no spaces"), 400, "invalid_param")
    _error(_variables(api, conversation_id, limit=0), 400, "invalid_param")


def test_updating_a_variable_is_type_checked_stringified_and_used_by_the_next_turn(api):
    conversation_id, _ = api.new_conversation(queries=("Hi",))
    ids = {v.name: v.id for v in repo.get_variables(api.db, conversation_id)}
    url = f"/conversations/{conversation_id}/variables/{ids['turn_count']}"
    r = api.request("PUT", url, json={"value": 7, "user": "abc-123"})
    assert r.status_code == 200
    body = r.json()
    assert (body["id"], body["name"], body["value_type"], body["value"]) == (
        ids["turn_count"],
        "turn_count",
        "number",
        "7",
    )
    assert body["updated_at"] >= body["created_at"]
    edits = [h for h in repo.variable_history(api.db, conversation_id) if h["node_id"] == "user"]
    assert [(h["name"], h["old"], h["new"]) for h in edits] == [("turn_count", 1, 7)]
    api.chat("Again", conversation_id=conversation_id)
    values = {v["name"]: v["value"] for v in _variables(api, conversation_id).json()["data"]}
    assert values["turn_count"] == "8"  # the flow's += 1 ran on the edited value


@pytest.mark.parametrize(
    "name, value, message",
    [
        ("turn_count", "7", "Type mismatch: variable 'turn_count' expects number, but got string type"),
        ("turn_count", None, "Type mismatch: variable 'turn_count' expects number, but got none type"),
        ("topics", ["a", 1], "Type mismatch: variable 'topics' expects array[string], but got array[any] type"),
        ("last_topic", {"k": 1}, "Type mismatch: variable 'last_topic' expects string, but got object type"),
    ],
)
def test_updating_a_variable_with_the_wrong_type_is_a_bad_request_and_changes_nothing(api, name, value, message):
    conversation_id, _ = api.new_conversation(queries=("Hi",))
    before = {v.name: v.value for v in repo.get_variables(api.db, conversation_id)}
    variable_id = next(v.id for v in repo.get_variables(api.db, conversation_id) if v.name == name)
    r = api.request(
        "PUT", f"/conversations/{conversation_id}/variables/{variable_id}", json={"value": value, "user": "abc-123"}
    )
    _error(r, 400, "bad_request", message)
    assert {v.name: v.value for v in repo.get_variables(api.db, conversation_id)} == before


def test_updating_a_number_variable_that_holds_a_float_names_the_float_segment_as_dify_does(api):
    conversation_id, _ = api.new_conversation(queries=("Hi",))
    variable_id = next(v.id for v in repo.get_variables(api.db, conversation_id) if v.name == "turn_count")
    url = f"/conversations/{conversation_id}/variables/{variable_id}"
    assert api.request("PUT", url, json={"value": 2.5, "user": "abc-123"}).status_code == 200
    _error(
        api.request("PUT", url, json={"value": "7", "user": "abc-123"}),
        400,
        "bad_request",
        "Type mismatch: variable 'turn_count' expects float, but got string type",
    )


def test_a_400_digit_integer_is_kept_exact_in_the_store_the_api_and_an_export_that_imports_back(api, tmp_path):
    from core.service.transfer import export_conversation, import_conversation

    conversation_id, _ = api.new_conversation(queries=("Hi",))
    variable_id = next(v.id for v in repo.get_variables(api.db, conversation_id) if v.name == "turn_count")
    big = 10**400 + 7
    r = api.request(
        "PUT",
        f"/conversations/{conversation_id}/variables/{variable_id}",
        content=json.dumps({"value": big, "user": "abc-123"}),
        headers={"Content-Type": "application/json"},
    )
    assert r.status_code == 200 and r.json()["value"] == str(big)
    assert api.chat("Again", conversation_id=conversation_id).status_code == 200  # the flow adds 1 to it
    values = {v["name"]: v["value"] for v in _variables(api, conversation_id).json()["data"]}
    assert values["turn_count"] == str(big + 1)
    text = json.dumps(export_conversation(api.db, conversation_id), allow_nan=False)
    doc = json.loads(text, parse_constant=lambda name: pytest.fail(f"the export holds {name}"))
    assert [v["value"] for v in doc["variables"] if v["name"] == "turn_count"] == [big + 1]
    other = Database(f"sqlite:///{tmp_path / 'again.db'}")
    try:
        import_conversation(other, doc)
        assert {v.name: v.value for v in repo.get_variables(other, conversation_id)}["turn_count"] == big + 1
    finally:
        other.dispose()


def test_an_infinity_stored_before_is_exported_as_null_and_named(api, tmp_path):
    """A value SQLite turned into inf (a 400-digit integer, before numbers were stored as written)."""
    conversation_id, _ = api.new_conversation(queries=("Hi",))
    with api.db.engine.begin() as conn:
        conn.exec_driver_sql(
            "UPDATE conversation_variables SET value = 1e999 WHERE conversation_id = ? AND name = ?",
            (conversation_id, "turn_count"),
        )
    done = subprocess.run(
        [sys.executable, "-m", "core", "export", conversation_id, "--db", api.url],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    doc = json.loads(done.stdout, parse_constant=lambda name: pytest.fail(f"the export holds {name}"))
    assert [v["value"] for v in doc["variables"] if v["name"] == "turn_count"] == [None]
    assert "export: 'variables[1].value' was inf, written as null" in done.stderr


def test_updating_boolean_object_and_number_variables_stringifies_like_python(api):
    conversation_id = api.chat("Hello", key=api.prefs_key, inputs={"region": "EU"}).json()["conversation_id"]
    ids = {v.name: v.id for v in repo.get_variables(api.db, conversation_id)}
    for name, value, shown in [
        ("vip", True, "True"),
        ("profile", {"k": [1, 2]}, "{'k': [1, 2]}"),
        ("score", 2, "2"),
        ("score", True, "True"),
        ("tags", [], "[]"),
    ]:
        r = api.request(
            "PUT",
            f"/conversations/{conversation_id}/variables/{ids[name]}",
            api.prefs_key,
            json={"value": value, "user": "abc-123"},
        )
        assert r.status_code == 200 and r.json()["value"] == shown, (name, r.text)


def test_updating_an_unknown_variable_or_without_a_value(api):
    conversation_id, _ = api.new_conversation(queries=("Hi",))
    _error(
        api.request(
            "PUT", f"/conversations/{conversation_id}/variables/{uuid.uuid4()}", json={"value": 1, "user": "abc-123"}
        ),
        404,
        "not_found",
        "Conversation Variable Not Exists.",
    )
    variable_id = repo.get_variables(api.db, conversation_id)[0].id
    _error(
        api.request("PUT", f"/conversations/{conversation_id}/variables/{variable_id}", json={"user": "abc-123"}),
        400,
        "invalid_param",
        "value is required",
    )


# -- the ledger extension, the OpenAPI document, unknown routes ---------------------------------


def test_ledger_extension_shows_each_llm_nodes_entries_budget_and_prompt(api):
    queries = ["Hi, I'm Dana.", "My order is 4411.", "It is late.", "Any news?", "What's my name?"]
    conversation_id, answers = api.new_conversation(queries=queries)
    ledger = api.request(
        "GET", f"/memlens/messages/{answers[-1]['message_id']}/ledger", params={"user": "abc-123"}
    ).json()
    assert (ledger["message_id"], ledger["conversation_id"], ledger["query"]) == (
        answers[-1]["message_id"],
        conversation_id,
        "What's my name?",
    )
    responder = next(n for n in ledger["nodes"] if n["node_id"] == "responder")
    assert responder["title"] == "Responder" and responder["type"] == "llm"
    kept = {(e["turn"], e["role"]): e["reason"] for e in responder["ledger"]["entries"]}
    assert len(kept) == 8  # every message of the four earlier turns
    assert kept[(1, "user")] == "outside_window" and kept[(4, "assistant")] == "kept"
    # The memory system words the config and each reason (Dify's window counts rows, the newest on any branch).
    assert responder["ledger"]["memory"] == "dify window 4"
    whys = {(e["turn"], e["role"]): e["why"] for e in responder["ledger"]["entries"]}
    assert whys[(1, "user")].startswith("outside window of 4 rows") and whys[(4, "assistant")] == "sent to the model"
    assert ledger["turn_label"] == "turn 5"
    assert [e["turn_label"] for e in responder["ledger"]["entries"]][:2] == ["turn 1", "turn 1"]
    assert responder["ledger"]["budget"] is None  # Dify 1.x: no token counting, no budget
    assert responder["prompt"][-1]["content"] == "What's my name?"
    _error(
        api.request("GET", f"/memlens/messages/{uuid.uuid4()}/ledger", params={"user": "abc-123"}),
        404,
        "not_found",
        "Message Not Exists.",
    )


def test_why_extension_names_the_turn_that_said_it_and_where_each_node_lost_it(api):
    queries = ["Hi, I'm Dana.", "My order is 4411.", "It is late.", "Any news?", "What's my name?"]
    conversation_id, _ = api.new_conversation(queries=queries)
    why = api.request("GET", f"/memlens/conversations/{conversation_id}/why", params={"user": "abc-123", "q": "dana"})
    assert why.status_code == 200, why.text
    body = why.json()
    assert body["mentions"][0]["turn"] == "turn 1" and body["mentions"][0]["role"] == "user"
    losses = {x["node_id"]: x for x in body["losses"]}
    assert losses["classifier"]["reason"] == "memory_off"
    assert losses["responder"]["reason"] == "outside_window" and losses["responder"]["lost_turn"] is not None
    assert any(s.startswith("Responder: had it through") for s in body["sentences"])
    _error(
        api.request(
            "GET", f"/memlens/conversations/{conversation_id}/why", params={"user": "someone-else", "q": "Dana"}
        ),
        404,
        "not_found",
    )
    _error(
        api.request("GET", f"/memlens/conversations/{conversation_id}/why", params={"user": "abc-123"}),
        400,
        "invalid_param",
    )


def test_unknown_routes_and_methods_answer_in_difys_error_shape(api):
    _error(api.request("GET", "/no-such-endpoint"), 404, "not_found")
    _error(api.request("PATCH", "/chat-messages", json={}), 405, "method_not_allowed")


def test_openapi_document_describes_every_endpoint(api):
    doc = httpx.get(api.server.base_url.replace("/v1", "/openapi.json")).json()
    assert {
        ("post", "/v1/chat-messages"),
        ("get", "/v1/messages"),
        ("get", "/v1/conversations"),
        ("delete", "/v1/conversations/{conversation_id}"),
        ("post", "/v1/conversations/{conversation_id}/name"),
        ("get", "/v1/conversations/{conversation_id}/variables"),
        ("put", "/v1/conversations/{conversation_id}/variables/{variable_id}"),
        ("get", "/v1/memlens/messages/{message_id}/ledger"),
        ("get", "/v1/memlens/conversations/{conversation_id}/why"),
    } <= {(m, p) for p, ops in doc["paths"].items() for m in ops}
    chat = doc["paths"]["/v1/chat-messages"]["post"]
    assert {"application/json", "text/event-stream"} <= set(chat["responses"]["200"]["content"])
    assert {"400", "401"} <= set(chat["responses"])
    assert "422" not in json.dumps(doc["paths"])


# -- property-based: the OpenAPI document against the live server ------------------------------


@pytest.fixture(params=["sqlite", "postgresql"])
def live(request, tmp_path):
    """A server on SQLite or PostgreSQL with one conversation of DEFAULT-USER (requests without a
    ``user`` reach it), its key, and the ids of that conversation, its first message and a variable."""
    url = (
        f"sqlite:///{tmp_path / 'memlens.db'}"
        if request.param == "sqlite"
        else request.getfixturevalue("postgres").create_database()
    )
    db = Database(url)
    service = ConversationService(db, DemoClient())
    flow_id = service.import_flow(SUPPORT_BOT).flow_id
    _, key = app_keys.create_key(db, flow_id)
    server = ThreadServer(create_app(db, llm=DemoClient(), ping_interval=0.5))
    with httpx.Client(base_url=server.base_url, headers={"Authorization": f"Bearer {key}"}) as client:
        answer = client.post(
            "/chat-messages", json={"inputs": {}, "query": "Hi, I'm Dana.", "user": "DEFAULT-USER"}
        ).json()
    variable_id = next(v.id for v in repo.get_variables(db, answer["conversation_id"]) if v.name == "topics")
    yield {
        "base_url": server.base_url,
        "key": key,
        "conversation_id": answer["conversation_id"],
        "message_id": answer["message_id"],
        "variable_id": variable_id,
    }
    server.stop()
    db.dispose()


def test_property_based_requests_from_the_openapi_document_never_get_a_server_error(live):
    """Valid and invalid requests generated from /openapi.json, a bounded number per operation, on
    random ids and on the ids of a real conversation."""
    from hypothesis import given
    from hypothesis import strategies as st
    from schemathesis import GenerationMode
    from schemathesis.checks import (
        content_type_conformance,
        not_a_server_error,
        response_schema_conformance,
        status_code_conformance,
    )

    schema = schemathesis.openapi.from_url(live["base_url"].replace("/v1", "/openapi.json"))
    operations = [result.ok() for result in schema.get_all_operations()]
    documented = httpx.get(live["base_url"].replace("/v1", "/openapi.json")).json()["paths"]
    assert len(operations) == sum(len(ops) for ops in documented.values())  # every operation is exercised
    real_ids = {
        "conversation_id": live["conversation_id"],
        "variable_id": live["variable_id"],
        "message_id": live["message_id"],
        "task_id": live["message_id"],
    }
    codes: dict[str, list[int]] = {}
    for operation in operations:
        strategies = [operation.as_strategy(mode) for mode in (GenerationMode.POSITIVE, GenerationMode.NEGATIVE)]
        names = {p.name for p in operation.path_parameters}
        if names and operation.method.upper() != "DELETE":  # deleting the real conversation would end the test
            strategies += [
                operation.as_strategy(mode, path_parameters={n: real_ids[n] for n in names})
                for mode in (GenerationMode.POSITIVE, GenerationMode.NEGATIVE)
            ]
        seen = codes.setdefault(operation.label, [])

        @settings(
            max_examples=25, deadline=None, derandomize=True, database=None, suppress_health_check=list(HealthCheck)
        )
        @given(case=st.one_of(strategies))
        def check(case):
            response = case.call_and_validate(
                base_url=live["base_url"].removesuffix("/v1"),
                headers={"Authorization": f"Bearer {live['key']}"},
                checks=[
                    not_a_server_error,
                    status_code_conformance,
                    content_type_conformance,
                    response_schema_conformance,
                ],
            )
            seen.append(response.status_code)

        check()
    everything = [c for seen in codes.values() for c in seen]
    assert all(len(seen) >= 10 for seen in codes.values()), {k: len(v) for k, v in codes.items()}
    assert all(code < 500 for code in everything)
    assert 200 in codes["POST /v1/chat-messages"]
    assert any(400 <= code < 500 for code in everything)


# -- Dify 1.x request fields: history granularity and files ------------------------------------------


def test_chat_history_granularity_is_accepted_in_any_case_and_a_bad_value_is_refused(api):
    for value in ("ALL_MESSAGES", "query_answer", "Query_Answer"):
        assert api.chat("Hello", chat_history_granularity=value).status_code == 200, value
    before = len(repo.list_conversations(api.db))
    _error(
        api.chat("Hello", chat_history_granularity="everything"),
        400,
        "invalid_param",
        "chat_history_granularity must be QUERY_ANSWER or ALL_MESSAGES",
    )
    assert len(repo.list_conversations(api.db)) == before


def test_files_stay_with_their_message_and_bad_files_are_refused(api):
    from core.model.conversation import FileRef

    uploaded = api.request(
        "POST",
        "/files/upload",
        files={"file": ("manual.pdf", b"%PDF-1.4 tiny", "application/pdf")},
        data={"user": "abc-123"},
    )
    assert uploaded.status_code == 201, uploaded.text
    upload_id = uploaded.json()["id"]
    files = [
        {"type": "image", "transfer_method": "remote_url", "url": "https://example.com/a.png"},
        {"type": "document", "transfer_method": "local_file", "upload_file_id": upload_id},
    ]
    r = api.chat("Look at these", files=files)
    assert r.status_code == 200, r.text
    turn = repo.load_conversation(api.db, r.json()["conversation_id"]).turns[0]
    assert turn.query_message.files == (
        FileRef("image", "https://example.com/a.png", ""),
        FileRef("document", "", upload_id, "manual.pdf"),
    )
    # GET /v1/messages lists them as Dify does, so a client rebuilding the chat keeps the attachments.
    listed = api.request(
        "GET", "/messages", params={"conversation_id": r.json()["conversation_id"], "user": "abc-123"}
    ).json()["data"][0]["message_files"]
    assert [
        {
            k: f[k]
            for k in ("filename", "type", "url", "mime_type", "size", "transfer_method", "belongs_to", "upload_file_id")
        }
        for f in listed
    ] == [
        {
            "filename": "a.png",
            "type": "image",
            "url": "https://example.com/a.png",
            "mime_type": "image/png",
            "size": -1,
            "transfer_method": "remote_url",
            "belongs_to": "user",
            "upload_file_id": None,
        },
        {
            "filename": "manual.pdf",
            "type": "document",
            "url": "",
            "mime_type": "application/pdf",
            "size": -1,
            "transfer_method": "local_file",
            "belongs_to": "user",
            "upload_file_id": upload_id,
        },
    ]
    assert len({f["id"] for f in listed}) == 2
    before = len(repo.list_conversations(api.db))
    for bad, needle in [
        ([{"type": "image", "transfer_method": "ftp", "url": "x"}], "transfer_method 'ftp' is unknown"),
        ([{"type": "image", "transfer_method": "local_file", "upload_file_id": "nope"}], "is not a file uploaded"),
        ([{"type": "image", "transfer_method": "remote_url", "url": "file:///etc/passwd"}], "remote_url needs a url"),
        ([{"type": "spreadsheet", "transfer_method": "remote_url", "url": "https://e.x/a"}], "type 'spreadsheet'"),
    ]:
        body = _error(api.chat("Look", files=bad), 400, "invalid_param")
        assert needle in body["message"], body
    assert len(repo.list_conversations(api.db)) == before
