"""What the recorder writes: a captured conversation whole, in one transaction per batch, on SQLite and
PostgreSQL alike; read back, a restarted proxy threads new calls into the conversations it captured before."""

from __future__ import annotations

import json
import time

from core.capture.threader import Threader
from core.proxy.exchange import Exchange
from core.proxy.recorder import Recorder, load_threader, save_threads
from core.store import repo
from tests.capture.test_threader import Bot


def exchange(k: int, history: list[dict], answer: str) -> Exchange:
    body = {"model": "gpt-4o-mini", "messages": history, "user": "u-7"}
    reply = {
        "choices": [{"index": 0, "message": {"role": "assistant", "content": answer}}],
        "usage": {"prompt_tokens": 5, "completion_tokens": 2, "total_tokens": 7},
    }
    return Exchange(
        id=f"call-{k}",
        api="chat",
        request=json.dumps(body).encode(),
        started_at=time.time() + k,
        status=200,
        response=json.dumps(reply).encode(),
        latency_ms=12.5,
        request_headers={"content-type": "application/json", "user-agent": "test"},
    )


def test_a_recorded_conversation_is_stored_whole_and_a_restarted_recorder_continues_it(db):
    history = [{"role": "system", "content": "Be brief."}]
    recorder = Recorder(db, say=lambda line: None).start()
    recorder.expect()
    recorder.expect()
    for k in range(2):
        history.append({"role": "user", "content": f"q{k}"})
        recorder.submit(exchange(k, list(history), f"a{k}"))
        history.append({"role": "assistant", "content": f"a{k}"})
    assert recorder.wait()
    recorder.close()
    # A new recorder on the same store (a proxy restarted) continues the conversation it finds there.
    again = Recorder(db, say=lambda line: None).start()
    again.expect()
    history.append({"role": "user", "content": "q2"})
    again.submit(exchange(2, list(history), "a2"))
    assert again.wait()
    again.close()
    [info] = repo.list_conversations(db, source="capture")
    turns = repo.load_turn_rows(db, info.id, with_node_runs=True)
    assert [(t["query"], t["answer"]) for t in turns] == [("q0", "a0"), ("q1", "a1"), ("q2", "a2")]
    run = turns[2]["node_runs"][0]
    assert (run["call_number"], run["kept"], run["latency_ms"], run["usage"]["total_tokens"]) == (
        3,
        [[0, 0], [0, 1], [1, 0], [1, 1]],
        12.5,
        7,
    )
    assert run["call"]["request_headers"] == {"content-type": "application/json", "user-agent": "test"}
    assert info.user_id == "u-7" and info.meta["capture"]["user"] == "u-7"


def test_changed_turns_are_rewritten_with_all_their_calls(db):
    threader = Threader()
    bot = Bot(threader)
    bot.ask("one")
    save_threads(db, threader.threads)
    bot.ask("one", "again", keep=False)  # regenerated: a new turn; the first keeps its one call
    bot.ask("two")
    save_threads(db, threader.threads)
    [info] = repo.list_conversations(db, source="capture")
    turns = repo.load_turn_rows(db, info.id, with_node_runs=True)
    assert [len(t["node_runs"]) for t in turns] == [1, 1, 1] and turns[0]["node_count"] == 1
    reloaded = load_threader(db).threads[0]
    assert [t.id for t in reloaded.turns] == [t.id for t in threader.threads[0].turns]
    assert [c.node for c in reloaded.calls] == ["node-1"] * 3 and reloaded.in_store
