"""Agent runs to compare with Haystack's Agent: the same scripted model replies, tools and state on both sides.

Plain Python only (no MemLens, no Haystack imports), so that the reference runner can load the
cases in an environment with another Haystack release (``scripts/refresh_reference_outcomes.py``).

A case is a dict: ``schema`` (key → ``{"type": name, "handler": name}``), ``tools`` (names from
:data:`TOOLS`, or ``{"name", "inputs_from_state", "outputs_to_state"}`` overrides), ``replies``
(each ``{"text", "calls": [[tool, args], ...]}``), and optional ``exit_conditions``,
``max_agent_steps``, ``state_inputs``, ``versions`` (the Haystack majors the case is meant for).
"""

from __future__ import annotations

import typing


def save_note(text: str) -> dict:
    return {"note": text, "saved": True}


def list_notes(notes: list | None = None) -> dict:
    notes = list(notes or [])
    return {"notes": notes, "count": len(notes)}


def divide(a: float, b: float) -> dict:
    return {"quotient": a / b}


def finish(answer: str) -> str:
    return f"final: {answer}"


def visit(visits: int = 0) -> dict:
    """Reads the counter and writes it back plus one (a tool that both reads and writes a key)."""
    return {"visits": (visits or 0) + 1}


def greet(user: str = "nobody") -> dict:
    return {"greeting": f"hi {user}"}


def add_numbers(current, new):
    return (current or 0) + new


def dedup_append(current, new):
    out = list(current or [])
    for item in new if isinstance(new, list) else [new]:
        if item not in out:
            out.append(item)
    return out


HANDLERS = {"add_numbers": add_numbers, "dedup_append": dedup_append}
TYPES = {
    "list[str]": list[str],
    "list[dict]": list[dict],
    "int": int,
    "str": str,
    "dict": dict,
    "list": list,
    "float | None": typing.Optional[float],
    "set": set,
}

_TEXT = {"type": "string"}
_NUMBER = {"type": "number"}
#: name -> (function, JSON-schema parameters, inputs_from_state, outputs_to_state)
TOOLS = {
    "note": (
        save_note,
        {"type": "object", "properties": {"text": _TEXT}, "required": ["text"]},
        None,
        {"notes": {"source": "note"}},
    ),
    "list_notes": (list_notes, {"type": "object", "properties": {}}, {"notes": "notes"}, {}),
    "divide": (
        divide,
        {"type": "object", "properties": {"a": _NUMBER, "b": _NUMBER}, "required": ["a", "b"]},
        None,
        {"last": {"source": "quotient"}},
    ),
    "finish": (finish, {"type": "object", "properties": {"answer": _TEXT}, "required": ["answer"]}, None, {}),
    "visit": (visit, {"type": "object", "properties": {}}, {"visits": "visits"}, {"visits": {"source": "visits"}}),
    "greet": (greet, {"type": "object", "properties": {}}, None, {"greetings": {"source": "greeting"}}),
}

NOTES = {"notes": {"type": "list[str]"}}
BOTH = (2, 3)

CASES: dict[str, dict] = {
    "writer_before_reader": {
        "schema": NOTES,
        "tools": ["note", "list_notes"],
        "replies": [{"text": "", "calls": [["list_notes", {}], ["note", {"text": "a"}]]}, {"text": "done"}],
    },
    "reader_after_writer_in_call_order": {
        "schema": NOTES,
        "tools": ["note", "list_notes"],
        "replies": [{"text": "", "calls": [["note", {"text": "a"}], ["list_notes", {}]]}, {"text": "done"}],
    },
    "model_argument_wins_so_no_dependency": {
        "schema": NOTES,
        "tools": ["note", "list_notes"],
        "replies": [
            {"text": "", "calls": [["list_notes", {"notes": ["given"]}], ["note", {"text": "a"}]]},
            {"text": "done"},
        ],
    },
    "text_reply_ends_the_run_when_only_tools_are_exit_conditions": {
        "schema": NOTES,
        "tools": ["note", "finish"],
        "exit_conditions": ["finish"],
        "max_agent_steps": 5,
        "replies": [{"text": "hello there"}],
    },
    "empty_reply_goes_round_again": {
        "schema": NOTES,
        "tools": ["note"],
        "max_agent_steps": 5,
        "replies": [{"text": ""}, {"text": "", "calls": [["note", {"text": "x"}]]}, {"text": "ok"}],
    },
    "exit_tool_ends_the_run": {
        "schema": NOTES,
        "tools": ["note", "finish"],
        "exit_conditions": ["text", "finish"],
        "replies": [{"text": "", "calls": [["note", {"text": "a"}], ["finish", {"answer": "42"}]]}, {"text": "x"}],
    },
    "failing_exit_tool_cancels_the_exit": {
        "schema": {"last": {"type": "float | None"}},
        "tools": ["divide", "finish"],
        "exit_conditions": ["divide", "finish"],
        "replies": [
            {
                "text": "",
                "calls": [["divide", {"a": 1, "b": 0}], ["finish", {"answer": "x"}], ["divide", {"a": 6, "b": 3}]],
            },
            {"text": "recovered"},
        ],
    },
    "unknown_tool_result_comes_first": {
        "schema": NOTES,
        "tools": ["note", "list_notes"],
        "replies": [
            {"text": "", "calls": [["note", {"text": "a"}], ["teleport", {"to": "mars"}], ["list_notes", {}]]},
            {"text": "done"},
        ],
    },
    "bad_arguments_are_a_tool_error": {
        "schema": NOTES,
        "tools": ["note"],
        "replies": [{"text": "", "calls": [["note", {"body": "a"}]]}, {"text": "done"}],
    },
    "max_agent_steps_stops_the_run": {
        "schema": NOTES,
        "tools": ["note"],
        "max_agent_steps": 2,
        "replies": [
            {"text": "", "calls": [["note", {"text": "a"}]]},
            {"text": "", "calls": [["note", {"text": "b"}]]},
            {"text": "never"},
        ],
    },
    "state_inputs_are_stored_as_given": {
        "schema": {
            "visits": {"type": "int", "handler": "add_numbers"},
            "notes": {"type": "list[str]"},
            "tags": {"type": "list[str]", "handler": "dedup_append"},
        },
        "tools": ["note"],
        "state_inputs": {"visits": 5, "notes": ["x"], "tags": None},
        "replies": [{"text": "", "calls": [["note", {"text": "a"}]]}, {"text": "done"}],
    },
    "empty_source_merges_the_whole_result": {
        "schema": {"results": {"type": "list[dict]"}},
        "tools": [{"name": "note", "outputs_to_state": {"results": {"source": ""}}}],
        "replies": [{"text": "", "calls": [["note", {"text": "a"}]]}, {"text": "done"}],
    },
    "missing_source_is_skipped": {
        "schema": NOTES,
        "tools": [{"name": "note", "outputs_to_state": {"notes": {"source": "nothing"}}}],
        "replies": [{"text": "", "calls": [["note", {"text": "a"}]]}, {"text": "done"}],
    },
    "custom_handler_on_an_output": {
        "schema": NOTES,
        "tools": [{"name": "note", "outputs_to_state": {"notes": {"source": "note", "handler": "dedup_append"}}}],
        "replies": [{"text": "", "calls": [["note", {"text": "a"}], ["note", {"text": "a"}]]}, {"text": "done"}],
    },
    "a_tool_that_reads_and_writes_one_key_twice": {
        "schema": {"visits": {"type": "int"}},
        "tools": ["visit"],
        "state_inputs": {"visits": 1},
        "replies": [{"text": "", "calls": [["visit", {}], ["visit", {}]]}, {"text": "done"}],
    },
    "parameter_named_like_a_state_key": {
        "schema": {"user": {"type": "str"}, "greetings": {"type": "list[str]"}},
        "tools": ["greet"],
        "state_inputs": {"user": "dana"},
        "replies": [{"text": "", "calls": [["greet", {}]]}, {"text": "done"}],
    },
    "explicit_empty_inputs_from_state_turns_off_name_matching": {
        "schema": {"user": {"type": "str"}, "greetings": {"type": "list[str]"}},
        "tools": [{"name": "greet", "inputs_from_state": {}}],
        "state_inputs": {"user": "dana"},
        "replies": [{"text": "", "calls": [["greet", {}]]}, {"text": "done"}],
    },
    "reserved_run_metadata_key": {
        "schema": {"step_count": {"type": "int"}},
        "tools": ["note"],
        "replies": [{"text": "hi"}],
    },
    "reserved_token_usage_key": {
        "schema": {"token_usage": {"type": "dict"}},
        "tools": ["note"],
        "replies": [{"text": "hi"}],
    },
    "inputs_from_state_naming_a_missing_parameter": {
        "schema": NOTES,
        "tools": [{"name": "note", "inputs_from_state": {"notes": "missing"}}],
        "replies": [{"text": "hi"}],
    },
    "non_ascii_result_text": {
        "schema": NOTES,
        "tools": ["note", "finish"],
        "replies": [
            {"text": "", "calls": [["note", {"text": "café ☕"}], ["finish", {"answer": "ok"}]]},
            {"text": "done"},
        ],
    },
}
