"""Agent state: Haystack 3.x schema, merge handlers and tool mappings (spec/memory-models.md §A.1, §A.2, §A.7)."""

from __future__ import annotations

from typing import Union

import pytest

from core.flow.errors import StateError
from core.flow.nodes.agent_loop import DemoPlanner, run_agent
from core.flow.nodes.agent_state import State, dedup_append, merge_lists, parse_type, replace_values
from core.flow.nodes.agent_tools import DEMO_SCHEMA, Tool, demo_tools, invoke_tool
from core.model.conversation import Message


def tool(function, **mappings) -> Tool:
    return Tool(function.__name__, "", {"type": "object", "properties": {}}, function, **mappings)


# -- A.7 one-liners ---------------------------------------------------------------------------------


def test_a_list_key_merges_by_default():
    state = State(schema={"d": {"type": list}})
    state.set("d", [1])
    state.set("d", [2])
    assert state.get("d") == [1, 2]


def test_a_value_is_wrapped_when_merged_and_an_override_replaces():
    state = State(schema={"d": {"type": list}})
    state.set("d", [1])
    state.set("d", [2])
    state.set("d", 3)
    assert state.get("d") == [1, 2, 3]
    state.set("d", [4], handler_override=replace_values)
    assert state.get("d") == [4]


def test_a_non_list_key_is_replaced():
    state = State(schema={"n": {"type": str}})
    state.set("n", "a")
    state.set("n", "b")
    assert state.get("n") == "b"


def test_an_unknown_key_and_a_messages_key_that_is_not_a_message_list_are_value_errors():
    state = State(schema={"n": {"type": str}})
    with pytest.raises(ValueError, match="not in the schema"):
        state.set("unknown", 1)
    with pytest.raises(ValueError, match="messages"):
        State(schema={"messages": {"type": list[str]}})
    with pytest.raises(StateError):  # MemLens's error is a ValueError and a MemLensError
        State(schema={"messages": {"type": str}})


def test_initial_data_is_stored_without_calling_the_handler():
    calls = []

    def recording(current, new):
        calls.append((current, new))
        return merge_lists(current, new)

    state = State(schema={"d": {"type": list, "handler": recording}}, data={"d": [1]})
    assert state.get("d") == [1] and calls == []
    state.set("d", 2)
    assert calls == [([1], 2)] and state.get("d") == [1, 2]


def test_get_returns_a_deep_copy():
    state = State(schema={"d": {"type": list[dict]}})
    state.set("d", [{"x": 1}])
    copy = state.get("d")
    copy[0]["x"] = 99
    copy.append({"y": 2})
    assert state.get("d") == [{"x": 1}]
    assert state.data["d"] == [{"x": 1}]  # data is the live dict


def test_a_tool_result_that_is_not_a_dict_writes_nothing():
    def search() -> list:
        return ["a document"]

    state = State(schema={"docs": {"type": list}})
    result = invoke_tool(tool(search, outputs_to_state={"docs": {"source": "documents"}}), {}, state)
    assert result == ["a document"] and not state.has("docs")


def test_a_missing_source_key_is_skipped_in_3x_and_in_2x_since_2_27():
    def search() -> dict:
        return {}

    t = tool(search, outputs_to_state={"docs": {"source": "documents"}})
    for version in (3, 2):
        state = State(schema={"docs": {"type": list}})
        invoke_tool(t, {}, state, version=version)
        assert not state.has("docs")


def test_model_arguments_win_over_state_inputs():
    seen = []

    def clone(repo_name: str) -> dict:
        seen.append(repo_name)
        return {}

    state = State(schema={"repo": {"type": str}})
    state.set("repo", "from-state")
    t = tool(clone, inputs_from_state={"repo": "repo_name"})
    invoke_tool(t, {"repo_name": "from-model"}, state)
    invoke_tool(t, {}, state)
    assert seen == ["from-model", "from-state"]
    assert "repo_name" not in str(t.llm_schema())  # mapped parameters are hidden from the model


def test_a_parameter_named_like_a_state_key_is_filled_only_in_2x():
    def greet(user: str = "nobody") -> dict:
        return {"greeting": f"hi {user}"}

    state = State(schema={"user": {"type": str}})
    state.set("user", "dana")
    assert invoke_tool(tool(greet), {}, state)["greeting"] == "hi nobody"
    assert invoke_tool(tool(greet), {}, state, version=2)["greeting"] == "hi dana"


def test_each_run_starts_from_an_empty_state_and_outputs_system_input_and_new_messages():
    tools = list(demo_tools().values())
    history = [Message("user", "earlier", "query", "h:1"), Message("assistant", "earlier answer", "answer", "h:2")]
    first = run_agent(
        "note: buy milk",
        tools=tools,
        planner=DemoPlanner(),
        schema=DEMO_SCHEMA,
        system_prompt="You are an agent.",
        history=history,
    )
    assert first.outputs["notes"] == ["buy milk"]
    roles = [m.role for m in first.messages]
    assert roles == ["system", "user", "assistant", "user", "assistant", "tool", "assistant"]
    assert [m.content for m in first.messages[1:3]] == ["earlier", "earlier answer"]
    assert first.messages[3].content == "note: buy milk" and first.new_messages == first.messages[4:]
    second = run_agent("list my notes", tools=tools, planner=DemoPlanner(), schema=DEMO_SCHEMA)
    assert second.steps[0].args == {} and second.steps[0].result == {"notes": [], "count": 0}
    assert "notes" not in second.outputs and second.text == "You have no notes in this run."


# -- A.1 schema rules -------------------------------------------------------------------------------


def test_types_must_be_classes_generics_or_unions_and_handlers_callables():
    State(schema={"a": {"type": str | None}, "b": {"type": list[str]}, "c": {"type": dict}})
    with pytest.raises(ValueError, match="bare Union"):
        State(schema={"a": {"type": Union}})
    with pytest.raises(ValueError, match="not a type"):
        State(schema={"a": {"type": "str"}})
    with pytest.raises(ValueError, match="not callable"):
        State(schema={"a": {"type": str, "handler": "merge"}})
    with pytest.raises(ValueError, match="needs a 'type'"):
        State(schema={"a": {}})


def test_messages_is_added_as_a_merged_list_of_messages_and_defaults_follow_the_type():
    state = State(schema={"tags": {"type": list[str]}, "count": {"type": int}, "maybe": {"type": list[int] | None}})
    assert state.schema["messages"]["handler"] is merge_lists
    assert state.schema["tags"]["handler"] is merge_lists
    assert state.schema["count"]["handler"] is replace_values
    assert state.schema["maybe"]["handler"] is replace_values  # a union is not a list type
    assert state.to_dict()["schema"]["messages"] == {"type": "list[Message]", "handler": "merge_lists"}


def test_merge_lists_treats_none_as_empty_and_keeps_duplicates():
    assert merge_lists(None, 1) == [1]
    assert merge_lists("a", ["a"]) == ["a", "a"]
    assert merge_lists([1, 2], [2, 3]) == [1, 2, 2, 3]


def test_a_custom_handler_decides_the_merge():
    state = State(schema={"tags": {"type": list[str], "handler": dedup_append}})
    state.set("tags", ["a", "b"])
    state.set("tags", ["b", "c"])
    assert state.get("tags") == ["a", "b", "c"]


def test_types_written_in_a_flow_file_read_as_python_types():
    assert parse_type("list[str]") == list[str]
    assert parse_type("int | None") == int | None
    assert parse_type("list[Message]") == list[Message]
    with pytest.raises(StateError, match="unknown type"):
        parse_type("strng")


def test_reserved_agent_keys_cannot_be_declared():
    with pytest.raises(StateError, match="reserved"):
        run_agent("hi", tools=[], planner=DemoPlanner(), schema={"tools": {"type": list}})


def test_a_non_serialisable_value_is_dropped_from_to_dict_field_by_field():
    state = State(schema={"ok": {"type": int}, "odd": {"type": object}})
    state.set("ok", 1)
    state.set("odd", object())
    assert state.to_dict()["data"] == {"ok": 1}
