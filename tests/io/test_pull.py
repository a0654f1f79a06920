"""``python -m core pull``: conversations from a running Dify app into the store — against recorded
Dify answers (paging, a regenerated branch, message files) and end to end against
``python -m core serve`` on loopback; a second pull changes nothing; server errors are one line."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import httpx
import pytest

from benchmarks.api_load import ServerProcess
from core.io.errors import PullError
from core.llm.client import DemoClient
from core.model.conversation import UUID_NIL
from core.service.dify_pull import pull
from core.service.sessions import ConversationService
from core.service.transfer import PULLED_SOURCE
from core.store import keys as app_keys
from core.store import repo
from core.store.db import Database
from tests.conftest import FIXTURES, ROOT

RECORDED = json.loads((FIXTURES / "dify_pull" / "app_responses.json").read_text(encoding="utf-8"))
C1, C2 = list(RECORDED["messages"])
BASE = "https://dify.example.com/v1"
KEY = "app-recorded-key-0123456789"


def recorded_app(calls: list | None = None, status: int = 200, body: bytes | None = None):
    """A transport answering like the recorded Dify app (or with a fixed status and body)."""

    def handler(request: httpx.Request) -> httpx.Response:
        if calls is not None:
            calls.append((request.url.path, dict(request.url.params)))
        assert request.headers["authorization"] == f"Bearer {KEY}"
        if body is not None or status != 200:
            return httpx.Response(status, content=body or b'{"code": "x", "message": "no", "status": 500}')
        params = request.url.params
        if request.url.path.endswith("/conversations"):
            page = next(p for p in RECORDED["conversations"] if p["last_id"] == params.get("last_id"))
            return httpx.Response(200, json=page["body"])
        pages = RECORDED["messages"].get(params.get("conversation_id"))
        if pages is None:
            return httpx.Response(404, json={"code": "not_found", "message": "Conversation Not Exists.", "status": 404})
        page = next(p for p in pages if p["first_id"] == params.get("first_id"))
        return httpx.Response(200, json=page["body"])

    return httpx.MockTransport(handler)


@pytest.fixture
def store(tmp_path):
    db = Database(f"sqlite:///{tmp_path / 'pull.db'}")
    yield db
    db.dispose()


def _stored(db, conv_id):
    return ConversationService(db).conversation(conv_id)


def test_pull_all_pages_through_conversations_and_messages(store):
    calls = []
    result = pull(store, BASE, KEY, "abc-123", everything=True, transport=recorded_app(calls))
    assert set(result.ids) == {C1, C2} and len(result.created) == 2
    assert ("/v1/conversations", {"user": "abc-123", "limit": "100", "last_id": C2}) in calls
    assert (
        "/v1/messages",
        {"conversation_id": C2, "user": "abc-123", "limit": "100", "first_id": "b0000000-0000-4000-8000-000000000003"},
    ) in calls
    info = repo.get_conversation(store, result.ids[C2])
    assert info.source == PULLED_SOURCE and info.name == "Porto day"
    assert info.meta["base_url"] == BASE and info.meta["source_id"] == C2


def test_pulled_branches_survive_and_the_thread_follows_parent_ids(store):
    result = pull(store, BASE, KEY, "abc-123", conversation_id=C2, transport=recorded_app())
    conv = _stored(store, result.ids[C2])
    assert [t.query for t in conv.turns] == [
        "Plan a day in Porto",
        "Make it rainy-day friendly",
        "Make it rainy-day friendly",
        "Where do I eat?",
    ]
    tree = conv.tree
    assert tree.siblings(1) == [1, 2]  # the regenerated answer is a branch
    assert tree.thread(3) == [0, 2, 3]
    assert conv.turns[3].answer == "Café Santiago for a francesinha."
    assert conv.meta["active_turn_id"] == conv.turns[3].id


def test_pulled_message_files_keep_their_owner(store):
    result = pull(store, BASE, KEY, "abc-123", everything=True, transport=recorded_app())
    c1 = _stored(store, result.ids[C1])
    assert c1.turns[1].query_message.files[0].url == "https://example.com/files/phone.png"
    assert all(t.parent_id == UUID_NIL for t in c1.turns[1:])
    c2 = _stored(store, result.ids[C2])
    assert c2.turns[2].answer_message.files[0].url == "https://example.com/files/map.png"
    assert not c2.turns[2].query_message.files


def test_a_second_pull_changes_nothing_and_a_changed_history_updates_in_place(store):
    first = pull(store, BASE, KEY, "abc-123", everything=True, transport=recorded_app())
    before = {i: repo.load_turn_rows(store, i) for i in first.ids.values()}
    listed = [(c.id, c.updated_at) for c in repo.list_conversations(store)]
    second = pull(store, BASE, KEY, "abc-123", everything=True, transport=recorded_app())
    assert second.ids == first.ids and len(second.unchanged) == 2 and not second.created
    assert {i: repo.load_turn_rows(store, i) for i in first.ids.values()} == before
    assert [(c.id, c.updated_at) for c in repo.list_conversations(store)] == listed
    RECORDED["messages"][C1][0]["body"]["data"][2]["answer"] = "It started at $999 in the US."
    try:
        third = pull(store, BASE, KEY, "abc-123", conversation_id=C1, transport=recorded_app())
    finally:
        RECORDED["messages"][C1][0]["body"]["data"][2]["answer"] = "It started at $999."
    assert third.updated == [first.ids[C1]] and len(repo.list_conversations(store)) == 2
    assert _stored(store, first.ids[C1]).turns[2].answer == "It started at $999 in the US."


@pytest.mark.parametrize(
    "status, body, needle",
    [
        (
            401,
            b'{"code": "unauthorized", "message": "Access token is invalid", "status": 401}',
            "refused the key (401: Access token is invalid); check --key",
        ),
        (
            404,
            b'{"code": "not_found", "message": "Conversation Not Exists.", "status": 404}',
            "not found (404: Conversation Not Exists.)",
        ),
        (200, b"<html>login</html>", "not JSON; --base-url must be the app's API base"),
        (502, b'{"message": "bad gateway"}', "the app answered 502 (bad gateway)"),
    ],
)
def test_server_errors_are_one_clear_line_and_store_nothing(store, status, body, needle):
    with pytest.raises(PullError) as info:
        pull(store, BASE, KEY, "abc-123", everything=True, transport=recorded_app(status=status, body=body))
    assert needle in str(info.value) and "\n" not in str(info.value)
    assert repo.list_conversations(store) == []


def test_a_timeout_is_one_clear_line(store):
    def slow(request):
        raise httpx.ReadTimeout("timed out", request=request)

    with pytest.raises(PullError, match=r"no answer within 30 s \(3 attempts over [\d.]+ s\); is the app running\?"):
        pull(store, BASE, KEY, "abc-123", everything=True, transport=httpx.MockTransport(slow))


def test_unknown_conversation_fails_whole_and_bad_arguments_say_what_to_do(store):
    with pytest.raises(PullError, match="Conversation Not Exists"):
        pull(store, BASE, KEY, "abc-123", conversation_id="no-such", transport=recorded_app())
    with pytest.raises(PullError, match="--conversation ID, or pull every one with --all"):
        pull(store, BASE, KEY, "abc-123", transport=recorded_app())
    with pytest.raises(PullError, match="must be an http:// or https:// URL"):
        pull(store, "dify.example.com", KEY, "abc-123", everything=True)
    with pytest.raises(PullError, match="no API key"):
        pull(store, BASE, "", "abc-123", everything=True)
    assert repo.list_conversations(store) == []


# -- end to end: pull from `python -m core serve` --------------------------------------------------


def test_pull_from_a_served_memlens_app_reproduces_turns_branches_and_answers(tmp_path):
    served_url = f"sqlite:///{tmp_path / 'served.db'}"
    served = Database(served_url)
    service = ConversationService(served, DemoClient())
    flow_id = service.import_flow(ROOT / "sample_data" / "flows" / "support-bot.yml").flow_id
    _, key = app_keys.create_key(served, flow_id)
    with (
        ServerProcess(served_url) as server,
        httpx.Client(base_url=server.base_url, timeout=60, headers={"Authorization": f"Bearer {key}"}) as http,
    ):
        first = http.post("/chat-messages", json={"inputs": {}, "query": "Hi, I'm Dana.", "user": "dana"}).json()
        cid = first["conversation_id"]
        for q in ("Where is my order 4411?", "Thanks!"):
            assert (
                http.post(
                    "/chat-messages", json={"inputs": {}, "query": q, "user": "dana", "conversation_id": cid}
                ).status_code
                == 200
            )
        conv = service.conversation(cid)
        service.regenerate(cid, conv.turns[1].id)  # a branch, as the UI makes one
        original = service.conversation(cid)
        target = f"sqlite:///{tmp_path / 'local.db'}"
        env = {**os.environ, "DIFY_API_KEY": key}
        cmd = [
            sys.executable,
            "-m",
            "core",
            "pull",
            "--base-url",
            server.base_url,
            "--user",
            "dana",
            "--all",
            "--db",
            target,
            "--format",
            "json",
        ]
        proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=120, env=env)
        assert proc.returncode == 0, proc.stderr
        rows = json.loads(proc.stdout)
        assert [(r["dify_id"], r["outcome"]) for r in rows] == [(cid, "created")]
        again = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=120, env=env)
        assert [r["outcome"] for r in json.loads(again.stdout)] == ["unchanged"]
        assert "0 new, 0 updated, 1 unchanged" in again.stderr
        bad = subprocess.run(
            cmd, cwd=ROOT, capture_output=True, text=True, timeout=120, env={**env, "DIFY_API_KEY": "app-wrong"}
        )
        assert bad.returncode == 1 and len(bad.stderr.strip().splitlines()) == 1  # a runtime failure
        assert "refused the key (401" in bad.stderr
    local = Database(target)
    pulled = ConversationService(local).conversation(rows[0]["id"])
    assert [(t.query, t.answer) for t in pulled.turns] == [(t.query, t.answer) for t in original.turns]
    position = {t.id: i for i, t in enumerate(original.turns)}
    assert [original.tree.parent[i] for i in range(len(original.turns))] == [
        pulled.tree.parent[i] for i in range(len(pulled.turns))
    ]
    assert [pulled.tree.thread(i) for i in range(len(pulled.turns))] == [
        original.tree.thread(position[t.id]) for t in original.turns
    ]
    assert key not in json.dumps(repo.get_conversation(local, rows[0]["id"]).meta)
    local.dispose()
    served.dispose()
    stored_bytes = b"".join(p.read_bytes() for p in tmp_path.glob("local.db*"))
    assert stored_bytes and key.encode() not in stored_bytes  # the key is never stored
