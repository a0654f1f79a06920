"""Turns on one conversation run one at a time: parallel requests, threads and processes all end up
as one thread with exact counters, and a turn is shown running while it runs, interrupted when its
process is gone — on SQLite and PostgreSQL."""

from __future__ import annotations

import json
import subprocess
import sys
import threading

import httpx
import pytest

from core.api.app import create_app
from core.llm.client import DemoClient
from core.service.sessions import ConversationService
from core.store import keys as app_keys
from core.store import repo
from core.store.db import Database
from core.store.errors import ConversationBusyError
from tests.api.test_api import ThreadServer
from tests.conftest import ROOT

FLOW = ROOT / "sample_data" / "flows" / "support-bot.yml"


def _one_thread(rows: list[dict]) -> None:
    """Every turn answers after the one before it: no branch, and the thread counts them all."""
    assert [r["seq"] for r in rows] == list(range(1, len(rows) + 1))
    assert [r["parent_id"] for r in rows[1:]] == [r["id"] for r in rows[:-1]]
    assert [r["dialogue_count"] for r in rows] == list(range(1, len(rows) + 1))


def _counter_exact(db: Database, conversation_id: str, rows: list[dict]) -> None:
    """The flow's turn_count went up by one in every turn, in turn order: no update was lost."""
    values = {v.name: v.value for v in repo.get_variables(db, conversation_id)}
    assert values["turn_count"] == len(rows)
    assert len(values["topics"]) == len(rows)
    counted = [h for h in repo.variable_history(db, conversation_id) if h["name"] == "turn_count"]
    assert [(h["old"], h["new"]) for h in counted] == [(i, i + 1) for i in range(len(rows))]
    assert [h["turn_id"] for h in counted] == [r["id"] for r in rows]
    assert [h["turn_seq"] for h in counted] == [r["seq"] for r in rows]


def test_parallel_api_requests_on_one_conversation_are_turns_of_one_thread_with_exact_counters(db_url):
    db = Database(db_url)
    service = ConversationService(db, DemoClient())
    key = app_keys.create_key(db, service.import_flow(FLOW).flow_id)[1]
    server = ThreadServer(create_app(db, llm=DemoClient(), ping_interval=0.1))
    headers = {"Authorization": f"Bearer {key}"}
    try:
        with httpx.Client(base_url=server.base_url, timeout=120, headers=headers) as http:
            first = http.post(
                "/chat-messages",
                json={"inputs": {}, "query": "Hi, order 4411 is late.", "user": "dana", "response_mode": "blocking"},
            )
            assert first.status_code == 200, first.text
            conversation_id = first.json()["conversation_id"]
        answers: dict[str, str] = {first.json()["id"]: first.json()["answer"]}
        failures: list[str] = []

        def ask(i: int) -> None:
            mode = "streaming" if i % 2 else "blocking"
            body = {
                "inputs": {},
                "query": f"Question {i}: where is my parcel?",
                "user": "dana",
                "conversation_id": conversation_id,
                "response_mode": mode,
            }
            with httpx.Client(base_url=server.base_url, timeout=120, headers=headers) as c:
                r = c.post("/chat-messages", json=body)
            if r.status_code != 200:
                failures.append(r.text)
            elif mode == "blocking":
                answers[r.json()["id"]] = r.json()["answer"]
            else:
                events = [json.loads(line[6:]) for line in r.text.splitlines() if line.startswith("data: ")]
                message = next(e["message_id"] for e in events if e["event"] == "message_end")
                answers[message] = "".join(e["answer"] for e in events if e["event"] == "message")

        for round_ in range(5):
            threads = [threading.Thread(target=ask, args=(round_ * 4 + k,)) for k in range(4)]
            for t in threads:
                t.start()
            for t in threads:
                t.join()
        assert failures == []
        rows = repo.load_turn_rows(db, conversation_id)
        assert len(rows) == 21
        assert {r["status"] for r in rows} == {"succeeded"}
        assert {r["id"]: r["answer"] for r in rows} == answers  # each client got the answer stored for its turn
        # Service API turns are linear (parent UUID_NIL, as Dify stores them): one thread by definition,
        # so the thread's count is what shows a lost update.
        assert [r["seq"] for r in rows] == list(range(1, 22))
        assert [r["dialogue_count"] for r in rows] == list(range(1, 22))
        _counter_exact(db, conversation_id, rows)
        with httpx.Client(base_url=server.base_url, timeout=60, headers=headers) as http:
            listed = http.get(
                "/messages", params={"conversation_id": conversation_id, "user": "dana", "limit": 100}
            ).json()["data"]
        assert [m["id"] for m in listed] == [r["id"] for r in rows]
        assert {m["status"] for m in listed} == {"normal"}
    finally:
        server.stop()
        db.dispose()


def test_threads_sending_to_one_conversation_continue_its_active_thread(db):
    service = ConversationService(db, DemoClient())
    conversation_id = service.start(service.import_flow(FLOW).flow_id).id
    errors: list[BaseException] = []

    def sender(k: int) -> None:
        try:
            for i in range(4):
                service.send(conversation_id, f"Sender {k}, message {i}: my order is {k}{i}.")
        except BaseException as e:  # reported below
            errors.append(e)

    threads = [threading.Thread(target=sender, args=(k,)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    rows = repo.load_turn_rows(db, conversation_id)
    assert len(rows) == 16
    _one_thread(rows)
    _counter_exact(db, conversation_id, rows)
    assert service.active_thread(conversation_id) == [r["id"] for r in rows]


def test_two_command_line_writers_on_one_conversation_keep_one_thread(db_url, tmp_path):
    db = Database(db_url)
    service = ConversationService(db)
    conversation_id = service.start(service.import_flow(FLOW).flow_id, source="cli").id
    turns = 20
    procs = []
    for writer in "AB":
        queries = tmp_path / f"{writer}.json"
        queries.write_text(json.dumps([f"{writer}{i}: my order number is {1000 + i}." for i in range(turns)]))
        procs.append(
            subprocess.Popen(
                [
                    sys.executable,
                    "-m",
                    "core",
                    "run",
                    str(FLOW),
                    "--queries",
                    str(queries),
                    "--db",
                    db_url,
                    "--conversation",
                    conversation_id,
                    "--format",
                    "json",
                ],
                cwd=ROOT,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
            )
        )
    outputs = [p.communicate(timeout=300) for p in procs]
    for p, (_, err) in zip(procs, outputs):
        assert p.returncode == 0, err
    rows = repo.load_turn_rows(db, conversation_id)
    assert len(rows) == 2 * turns
    assert {r["status"] for r in rows} == {"succeeded"}
    writers = [r["query"][0] for r in rows]
    assert sum(a != b for a, b in zip(writers, writers[1:])) >= 2, "the two writers never ran at the same time"
    _one_thread(rows)
    _counter_exact(db, conversation_id, rows)
    # Each process printed the counts its turns really had: between them, every place once.
    reported = [t["dialogue_count"] for out, _ in outputs for t in json.loads(out)["turns"]]
    assert sorted(reported) == list(range(1, 2 * turns + 1))
    db.dispose()


def test_a_turn_shows_running_while_its_process_holds_the_conversation_and_interrupted_after(db):
    service = ConversationService(db, DemoClient())
    conversation_id = service.start(service.import_flow(FLOW).flow_id).id
    first = service.send(conversation_id, "Hi, I'm Dana. My order number is 4411.")
    # A turn that started (its row, then an assigner's write pointing at it) and never finished.
    with db.conversation_lock(conversation_id):
        seq = repo.begin_turn(
            db, conversation_id, {"id": "t-killed", "parent_id": first.id, "query": "Still there?", "dialogue_count": 2}
        )
        repo.write_variable_changes(
            db,
            conversation_id,
            [{"name": "turn_count", "old": 1, "new": 2, "operation": "+=", "node_id": "log"}],
            turn_id="t-killed",
            turn_seq=seq,
        )
        running = repo.load_turn_rows(db, conversation_id)[-1]
        assert (running["id"], running["status"], running["answer"], running["answer_tokens"]) == (
            "t-killed",
            "running",
            "",
            0,
        )
        with pytest.raises(ConversationBusyError):  # a second turn waits for it (here: not at all)
            with db.conversation_lock(conversation_id, timeout=0):
                pass
    # Its holder is gone: every reader now sees it interrupted, on the active thread, never a hole.
    exported = service.export(conversation_id)
    killed = exported["turns"][-1]
    assert (killed["id"], killed["status"], killed["error"]) == ("t-killed", "interrupted", repo.INTERRUPTED_ERROR)
    assert exported["conversation"]["active_turn_id"] == "t-killed"
    assert {h["turn_id"] for h in exported["variable_history"]} <= {t["id"] for t in exported["turns"]}
    assert "active_before" not in killed
    # The next turn continues after it and counts it, as Dify counts a failed turn.
    third = service.send(conversation_id, "Where is my parcel?")
    assert third.parent_id == "t-killed" and third.dialogue_count == 3
    assert service.variables_at(conversation_id, third.id)["turn_count"] == 3
    kept = {e.ref for e in third.node_run("responder").ledger.entries if e.kept}
    assert "t-killed:query" in kept


def test_an_api_client_sees_a_killed_turn_as_an_error_and_a_running_one_as_unanswered(tmp_path):
    db = Database(f"sqlite:///{tmp_path / 'memlens.db'}")
    service = ConversationService(db, DemoClient())
    key = app_keys.create_key(db, service.import_flow(FLOW).flow_id)[1]
    server = ThreadServer(create_app(db, llm=DemoClient()))
    try:
        with httpx.Client(base_url=server.base_url, timeout=60, headers={"Authorization": f"Bearer {key}"}) as http:
            first = http.post(
                "/chat-messages", json={"inputs": {}, "query": "Hi", "user": "dana", "response_mode": "blocking"}
            ).json()
            conversation_id = first["conversation_id"]

            def messages() -> list[dict]:
                return http.get("/messages", params={"conversation_id": conversation_id, "user": "dana"}).json()["data"]

            with db.conversation_lock(conversation_id):
                repo.begin_turn(
                    db,
                    conversation_id,
                    {
                        "id": "00000000-0000-4000-8000-000000000001",
                        "parent_id": "00000000-0000-0000-0000-000000000000",
                        "query": "Still there?",
                        "dialogue_count": 2,
                    },
                )
                shown = messages()[-1]
                assert (shown["status"], shown["answer"], shown["error"]) == ("normal", "", None)
            shown = messages()[-1]
    finally:
        server.stop()
        db.dispose()
    assert (shown["status"], shown["answer"], shown["error"]) == ("error", "", repo.INTERRUPTED_ERROR)
