"""A streamed turn is saved before it is acknowledged: SIGKILL of a real server process at each event of a
streaming answer (Service API, ``response_mode: streaming``).

Once the client has received ``message_end`` or ``workflow_finished``, the turn is stored whole — its
answer as streamed, every node run, its variable change. Killed before that, the turn is either stored
whole (the server got there first) or ``interrupted`` with no variable changed: never a change
without its turn. The server is ``tests.api.paced_server`` (the Service API on uvicorn, in its own
process) with a demo model that takes a moment per call, so kills land inside the turn.
"""

from __future__ import annotations

import json
import os
import signal
import sys
import time

import httpx

from benchmarks.api_load import ServerProcess
from core.service.sessions import ConversationService
from core.store import keys as app_keys
from core.store import repo
from core.store.db import Database
from tests.processes import gone

#: A counter the turn raises before its model answers; a second model call after the Answer node, so
#: the answer streams out while the turn is still running.
PACED_FLOW = """\
format: memlens-flow
version: 1
name: paced
mode: advanced-chat
variables:
  - {name: counter, type: number, default: 0}
nodes:
  - {id: start, type: start, title: Start}
  - id: count
    type: assigner
    title: Count the turn
    version: "2"
    items:
      - {variable_selector: [conversation, counter], input_type: constant, operation: "+=", value: 1}
  - id: llm
    type: llm
    title: Responder
    model: memlens/demo
    prompt_template:
      - {role: system, text: You are a helpful assistant.}
    memory: {window: 10}
  - {id: answer, type: answer, title: Answer, answer: "{{#llm.text#}}"}
  - id: follow_up
    type: llm
    title: Follow-up
    model: memlens/demo
    prompt_template:
      - {role: system, text: Suggest a follow-up question.}
      - {role: user, text: "{{#sys.query#}}"}
edges:
  - [start, count]
  - [count, llm]
  - [llm, answer]
  - [answer, follow_up]
"""
PACE_SECONDS = 0.4
ACKNOWLEDGED = ("message_end", "workflow_finished")
QUERY = "Hi, I'm Dana."


class PacedServer(ServerProcess):
    """``python -m tests.api.paced_server`` on ``db_url``."""

    def __init__(self, db_url: str):
        super().__init__(
            db_url,
            startup_timeout=120,
            command=[sys.executable, "-m", "tests.api.paced_server", db_url, str(PACE_SECONDS)],
        )

    def kill(self) -> None:
        """SIGKILL, and wait until the process is gone (reaped: its connections and locks are released)."""
        if self.proc.poll() is None:
            os.kill(self.proc.pid, signal.SIGKILL)
        self.proc.wait(30)
        assert gone(self.proc.pid), "the server survived SIGKILL"


def _stream_until(server: PacedServer, key: str, kill_at: int | None) -> list[dict]:
    """Stream one turn of a new conversation; SIGKILL the server as soon as event ``kill_at`` (0-based,
    pings not counted) has arrived. Returns the events the client had taken in by then."""
    seen: list[dict] = []
    body = {"query": QUERY, "user": "dana", "inputs": {}, "response_mode": "streaming"}
    with (
        httpx.Client(timeout=60) as http,
        http.stream(
            "POST",
            f"http://127.0.0.1:{server.port}/v1/chat-messages",
            json=body,
            headers={"Authorization": f"Bearer {key}"},
        ) as response,
    ):
        assert response.status_code == 200
        buffer = ""
        try:
            for text in response.iter_text():
                buffer += text
                while "\n\n" in buffer:
                    frame, buffer = buffer.split("\n\n", 1)
                    if not frame.startswith("data: "):
                        continue  # event: ping
                    seen.append(json.loads(frame[len("data: ") :]))
                    if kill_at is not None and len(seen) == kill_at + 1:
                        server.kill()
                        return seen
        except httpx.HTTPError:  # the killed server's connection ended mid-stream
            pass
    return seen


def _stored_turn(db: Database, conversation_id: str) -> tuple[dict, list[dict], int]:
    """The conversation's one turn (a turn its killed process left running settled as interrupted), its
    variable history and the counter's value.

    PostgreSQL frees a killed client's advisory lock only once it notices the connection is gone, which on
    a busy machine can take a moment after the process is reaped; until then the turn is, rightly, still
    ``running`` (its lock is held), so this waits for the lock as a reader coming later would."""
    deadline = time.monotonic() + 60
    repo.settle_interrupted(db, conversation_id)
    while (
        any(row["status"] == repo.RUNNING for row in repo.load_turn_rows(db, conversation_id))
        and time.monotonic() < deadline
    ):
        time.sleep(0.2)
        repo.settle_interrupted(db, conversation_id)
    rows = repo.load_turn_rows(db, conversation_id, with_node_runs=True)
    assert len(rows) == 1, rows
    values = {v.name: v.value for v in repo.get_variables(db, conversation_id)}
    return rows[0], repo.variable_history(db, conversation_id), values["counter"]


def _is_whole(turn: dict, history: list[dict], counter: int, answer: str | None = None) -> bool:
    return (
        turn["status"] == "succeeded"
        and len(turn["node_runs"]) == 5
        and (answer is None or turn["answer"] == answer)
        and [(h["turn_id"], h["old"], h["new"]) for h in history] == [(turn["id"], 0, 1)]
        and counter == 1
    )


def test_a_streamed_turn_survives_a_kill_at_every_event_once_acknowledged(db_url, tmp_path):
    db = Database(db_url)
    flow_file = tmp_path / "paced.yml"
    flow_file.write_text(PACED_FLOW, encoding="utf-8")
    flow = ConversationService(db).import_flow(flow_file).flow_id
    key = app_keys.create_key(db, flow)[1]

    server = PacedServer(db_url)
    try:
        whole = _stream_until(server, key, None)  # the events of a turn left to finish
    finally:
        server.kill()
    names = [e["event"] for e in whole]
    assert names[0] == "workflow_started" and names[-2:] == ["message_end", "workflow_finished"]
    assert "message" in names and len(names) == 14
    full_answer = "".join(e["answer"] for e in whole if e["event"] == "message")
    assert _is_whole(*_stored_turn(db, whole[0]["conversation_id"]), full_answer)

    outcomes = []
    for kill_at in range(len(names)):
        server = PacedServer(db_url)
        try:
            seen = _stream_until(server, key, kill_at)
        finally:
            server.kill()
        assert [e["event"] for e in seen] == names[: len(seen)]
        turn, history, counter = _stored_turn(db, seen[0]["conversation_id"])
        streamed = "".join(e["answer"] for e in seen if e["event"] == "message")
        if any(e["event"] in ACKNOWLEDGED for e in seen):
            # The client has the whole answer: the store has the whole turn.
            assert _is_whole(turn, history, counter, streamed), (names[kill_at], turn, history)
        elif turn["status"] != "succeeded":
            # Killed inside the turn: it shows as interrupted, and changed nothing.
            assert (turn["status"], turn["answer"], turn["node_runs"], history, counter) == (
                "interrupted",
                "",
                [],
                [],
                0,
            ), names[kill_at]
        else:
            assert _is_whole(turn, history, counter, full_answer), names[kill_at]
        outcomes.append((names[kill_at], turn["status"]))
    # The pace puts the kills before the answer's end inside the turn (not after it by luck).
    assert [status for name, status in outcomes[: names.index("message_end")]] == ["interrupted"] * names.index(
        "message_end"
    ), outcomes
    db.dispose()
