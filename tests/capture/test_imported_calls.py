"""Imported call logs are threaded as the proxy threads what it records: a Langfuse session's generations, a
LangSmith trace's LLM runs and a Dify run's node executions open as the conversations they form — one per
conversation, each call a node run with its observed ledger — not one conversation per call; and the rule
behind them is inferred as for a captured conversation."""

from __future__ import annotations

import json

from core.capture.inference import infer_stored
from core.io import import_text
from core.service.imports import import_upload
from core.store import repo
from core.store.db import Database


def generation(
    k: int,
    history: list[dict],
    question: str,
    answer: str,
    *,
    session="chat-1",
    name="LLM",
    system="You help with orders.",
) -> dict:
    return {
        "id": f"gen-{session}-{k}",
        "traceId": f"trace-{session}-{k}",
        "type": "GENERATION",
        "name": name,
        "startTime": f"2025-05-01T09:00:{k:02d}.000Z",
        "model": "gpt-4o-mini",
        "input": [
            {"role": "system", "text": system, "files": []},
            *history,
            {"role": "user", "text": question, "files": []},
        ],
        "output": {"text": answer},
        "metadata": {"session_id": session},
    }


def session(session_id: str, window: int, turns: int = 5) -> list[dict]:
    """A Dify app's LLM node (memory window ``window`` turns) traced to Langfuse, one generation per turn."""
    out, history = [], []
    for k in range(turns):
        question, answer = f"{session_id} question {k}", f"{session_id} answer {k}"
        out.append(generation(k, history[-2 * window :] if window else [], question, answer, session=session_id))
        history += [{"role": "user", "text": question, "files": []}, {"role": "assistant", "text": answer, "files": []}]
    return out


def test_a_file_of_calls_opens_as_the_conversations_they_form_not_one_per_call():
    observations = session("chat-1", 2) + session("chat-2", 0, turns=3)
    result = import_text(json.dumps({"data": observations}), name="observations.json")
    assert result.format == "langfuse" and len(result.conversations) == 2
    by_turns = {len(c.turns): c for c in result.conversations}
    chat = by_turns[5]
    assert [t.query for t in chat.turns] == [f"chat-1 question {k}" for k in range(5)]
    assert chat.id == "gen-chat-1-0" and chat.meta["capture"]["nodes"][0]["system"] == "You help with orders."
    runs = [r for t in chat.turns for r in t.meta["node_runs"]]
    assert [r["kept"] for r in runs][2:] == [
        [[0, 0], [0, 1], [1, 0], [1, 1]],
        [[1, 0], [1, 1], [2, 0], [2, 1]],
        [[2, 0], [2, 1], [3, 0], [3, 1]],
    ]
    # The session without memory stays one conversation: its session id pins its calls together.
    assert [t.query for t in by_turns[3].turns] == [f"chat-2 question {k}" for k in range(3)]


def test_a_stored_threaded_import_is_explained_like_a_captured_conversation(tmp_path):
    db = Database(f"sqlite:///{tmp_path / 'i.db'}")
    outcome = import_upload(db, json.dumps({"data": session("chat-1", 2, turns=6)}).encode(), "observations.json")
    [conversation_id] = outcome.ids
    [node] = infer_stored(db, conversation_id).nodes
    assert node.best.explains == 6 and node.best.rule.settings() == {
        "memory": "window",
        "window": 4,
        "model": "gpt-4o-mini",
    }
    assert any(
        e.rule.settings() == {"memory": "dify", "window": 2, "fidelity": "documented", "model": "gpt-4o-mini"}
        for e in node.equivalent
    )
    turns = repo.load_turn_rows(db, conversation_id, with_node_runs=True)
    assert [len(t["node_runs"]) for t in turns] == [1] * 6 and turns[3]["node_runs"][0]["emulated"] is False


def test_a_single_call_still_opens_as_its_own_conversation():
    [conv] = import_text(json.dumps(generation(0, [], "Hi", "Hello")), name="g.json").conversations
    assert (conv.id, conv.system_prompt, [(t.query, t.answer) for t in conv.turns]) == (
        "gen-chat-1-0",
        "You help with orders.",
        [("Hi", "Hello")],
    )


def test_an_openai_request_file_of_batch_lines_is_threaded_and_its_other_endpoints_left_out():
    lines, history = [], []
    for k in range(4):
        body = {
            "model": "gpt-4o-mini",
            "messages": [
                {"role": "system", "content": "Be brief."},
                *history[-2:],
                {"role": "user", "content": f"q{k}"},
            ],
            "user": "u-1",
        }
        lines.append(
            {
                "custom_id": f"req-{k}",
                "method": "POST",
                "url": "/v1/chat/completions",
                "body": body,
                "response": {
                    "status_code": 200,
                    "body": {"choices": [{"message": {"role": "assistant", "content": f"a{k}"}}]},
                },
            }
        )
        history += [{"role": "user", "content": f"q{k}"}, {"role": "assistant", "content": f"a{k}"}]
    lines.append({"custom_id": "emb", "method": "POST", "url": "/v1/embeddings", "body": {"input": "x"}})
    result = import_text("\n".join(json.dumps(line) for line in lines), name="batch.jsonl")
    assert result.format == "openai-requests"
    [conv] = result.conversations
    assert [(t.query, t.answer) for t in conv.turns] == [(f"q{k}", f"a{k}") for k in range(4)]
    assert result.notes == ["left out the lines that are not chat completion requests (1 /v1/embeddings)"]


def test_langsmith_runs_of_one_thread_are_one_conversation_even_without_shared_history():
    from tests.io.test_langsmith import lc

    def run(k: int, question: str, thread: str) -> dict:  # a chat model with no memory: only the question
        return {
            "id": f"run-{thread}-{k}",
            "name": "ChatOpenAI",
            "run_type": "llm",
            "start_time": f"2025-03-01T10:00:0{k}.000000",
            "extra": {"metadata": {"thread_id": thread}},
            "inputs": {"messages": [[lc("system", "Be brief."), lc("human", question)]]},
            "outputs": {"generations": [[{"text": f"re {question}", "message": lc("ai", f"re {question}")}]]},
        }

    runs = [run(k, f"q{k}", "thread-a") for k in range(3)] + [run(k, f"q{k}", "thread-b") for k in range(2)]
    result = import_text("\n".join(json.dumps(r) for r in runs), name="runs.jsonl")
    assert result.format == "langsmith"
    assert sorted(len(c.turns) for c in result.conversations) == [2, 3]
    three = max(result.conversations, key=lambda c: len(c.turns))
    assert [t.query for t in three.turns] == ["q0", "q1", "q2"]
    assert all(r["kept"] == [] for t in three.turns for r in t.meta["node_runs"])  # nothing of the thread sent


def test_an_openai_request_files_memlens_node_names_the_node_as_the_proxy_reads_it():
    from core.capture.stored import CAPTURE

    lines, history = [], []
    for k in range(2):
        for node in ("drafter", "reviewer"):  # identical prompts: only the names tell the nodes apart
            body = {
                "model": "gpt-4o-mini",
                "messages": [
                    {"role": "system", "content": "Be brief."},
                    *history,
                    {"role": "user", "content": f"q{k}"},
                ],
                "metadata": {"conversation_id": "c-1", "memlens_node": node},
            }
            lines.append(
                {
                    "custom_id": f"req-{k}-{node}",
                    "method": "POST",
                    "url": "/v1/chat/completions",
                    "body": body,
                    "response": {
                        "status_code": 200,
                        "body": {"choices": [{"message": {"role": "assistant", "content": f"a{k}"}}]},
                    },
                }
            )
        history += [{"role": "user", "content": f"q{k}"}, {"role": "assistant", "content": f"a{k}"}]
    [conv] = import_text("\n".join(json.dumps(line) for line in lines), name="batch.jsonl").conversations
    assert [n["title"] for n in conv.meta[CAPTURE]["nodes"]] == ["drafter", "reviewer"]
    assert [[run["title"] for run in t.meta["node_runs"]] for t in conv.turns] == [["drafter", "reviewer"]] * 2
