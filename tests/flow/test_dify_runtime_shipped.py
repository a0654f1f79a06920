"""Dify 1.x as shipped, in flow runs: the next turn after a variable grew too big, files in
history as content parts, the request's history granularity."""

from __future__ import annotations

from core.flow.graph import Flow
from core.flow.prompt import IMAGE_TOKENS_HIGH
from core.flow.records import ConversationState
from core.flow.runtime import run_turn
from core.flow.variables import MAX_VARIABLE_SIZE, variable_size
from core.model.conversation import FileRef
from core.model.tokens import counter_for
from tests.flow.test_runtime_prompt import ScriptedClient, chat_flow


def growing_flow() -> Flow:
    return Flow.from_dict(
        {
            "format": "memlens-flow",
            "version": 1,
            "name": "grow",
            "variables": [{"name": "log", "type": "array[string]", "default": []}],
            "nodes": [
                {"id": "start", "type": "start"},
                {
                    "id": "save",
                    "type": "assigner",
                    "version": "2",
                    "items": [
                        {
                            "variable_selector": ["conversation", "log"],
                            "input_type": "variable",
                            "operation": "append",
                            "value": ["sys", "query"],
                        }
                    ],
                },
                {"id": "answer", "type": "answer", "answer": "ok"},
            ],
            "edges": [["start", "save"], ["save", "answer"]],
        }
    )


def test_an_array_grown_past_200_kib_fails_the_next_turn_not_the_write():
    flow = growing_flow()
    # The first length whose loaded size is over the limit: one item less still loads.
    over = next(k for k in range(20_000, 30_000) if variable_size(["x"] * k) > MAX_VARIABLE_SIZE)
    state = ConversationState(ConversationState.new(flow).conversation, {"log": ["x"] * (over - 1)})
    first = run_turn(flow, state, "x", llm=ScriptedClient())
    assert first.status == "succeeded" and len(first.variables["log"]) == over  # the write is not checked
    state = state.apply(first)
    size = variable_size(first.variables["log"])
    assert size > MAX_VARIABLE_SIZE
    second = run_turn(flow, state, "again", llm=ScriptedClient())
    assert second.status == "failed"
    assert second.error == f"variable size {size} exceeds limit 204800"
    assert second.node_runs == []


def file_flow(file_upload: bool, model: str) -> Flow:
    flow = chat_flow({"model": model, "memory": {"window": 5}})
    return Flow.from_dict({**flow.to_dict(), "features": {"file_upload": {"enabled": file_upload}}})


def test_history_files_are_content_parts_files_first_for_a_vision_model():
    flow = file_flow(True, "gpt-4o-mini")
    client = ScriptedClient(["a cat", "x"])
    state = ConversationState.new(flow)
    photo = FileRef("image", "https://example.com/cat.png", "f1")
    r1 = run_turn(flow, state, "look at this", llm=client, files=[photo])
    state = state.apply(r1)
    r2 = run_turn(flow, state, "what was it?", llm=client)
    history = [m for m in r2.node_run("llm").prompt if m.origin == "memory history"]
    user = history[0]
    assert [p["type"] for p in user.parts] == ["image_url", "text"]
    assert user.parts[0]["name"] == "cat.png" and user.parts[0]["estimated"] is True
    counter = counter_for("gpt-4o-mini")
    assert user.tokens == 3 + counter.text("user") + counter.text("look at this") + IMAGE_TOKENS_HIGH
    sent = client.calls[-1][1]
    assert sent[0]["content"][0] == {
        "type": "image_url",
        "image_url": {"url": "https://example.com/cat.png", "detail": "high"},
    }
    assert sent[0]["content"][1] == {"type": "text", "text": "look at this"}


def test_history_files_are_dropped_for_a_model_without_vision_and_with_file_upload_off():
    for flow in (file_flow(True, "memlens/demo"), file_flow(False, "gpt-4o-mini")):
        client = ScriptedClient(["a cat", "x"])
        state = ConversationState.new(flow)
        r1 = run_turn(flow, state, "look", llm=client, files=[FileRef("image", "https://e.x/c.png", "f")])
        r2 = run_turn(flow, state.apply(r1), "again", llm=client)
        history = [m for m in r2.node_run("llm").prompt if m.origin == "memory history"]
        assert history[0].parts == () and client.calls[-1][1][0] == {"role": "user", "content": "look"}


def test_a_dsl_export_says_whether_file_upload_is_on():
    from core.flow.graph import load_flow

    flows = __import__("tests.conftest", fromlist=["ROOT"]).ROOT / "sample_data" / "flows"
    assert load_flow(flows / "support-bot.yml").file_upload is False
    flow = file_flow(True, "gpt-4o-mini")
    assert Flow.from_dict(flow.to_dict()).file_upload is True


def test_the_request_granularity_is_case_insensitive_and_recorded():
    from core.flow.granularity import check_granularity, granularity_line

    assert check_granularity("QUERY_ANSWER", "request") == "query_answer"
    assert check_granularity("All_Messages", "request") == "all_messages"
    line = granularity_line({"granularity": "all_messages", "granularity_source": "request"})
    assert line == "history granularity all_messages — set on the request"
