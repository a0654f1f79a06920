"""MemLens's agent against Haystack's own Agent, case by case (tests/reference/haystack_cases.py).

haystack-ai 3.4.1 is a test dependency and runs live; 2.x releases cannot share the environment,
so their outcomes are recorded in tests/fixtures/reference/ by scripts/refresh_reference_outcomes.py.
``haystack_version: 2`` follows the newest 2.x (2.31.0); the cases where releases up to 2.26
differ are listed, with what 2.20.0 did, and checked to still differ.
"""

from __future__ import annotations

import json
import logging
import typing
from importlib.metadata import version
from pathlib import Path

import pytest

from core.flow.errors import StateError
from core.flow.nodes.agent_state import State
from tests.reference import haystack_runner, memlens_runner
from tests.reference.haystack_cases import CASES

REFERENCE = Path(__file__).parent.parent / "fixtures" / "reference"
METADATA = ("step_count", "token_usage", "tool_call_counts", "exit_reason")

#: What haystack-ai 2.20.0 (and every release up to 2.26) did differently from 2.31.0.
BEFORE_2_27 = {
    "empty_reply_goes_round_again": "any reply without tool calls ended the run, even an empty one",
    "exit_tool_ends_the_run": "only a message's first tool call was checked against exit_conditions",
    "missing_source_is_skipped": "a source key missing from the result merged None into the state",
    "inputs_from_state_naming_a_missing_parameter": "the mapping was not checked when the tool was built",
}


@pytest.fixture(autouse=True)
def quiet_haystack():
    logging.disable(logging.CRITICAL)  # Haystack logs every tool error it reports to the model
    yield
    logging.disable(logging.NOTSET)


def same(reference: dict, ours: dict) -> bool:
    if "refused" in reference or "refused" in ours:
        return reference.get("refused") == ours.get("refused")
    return reference == ours


def recorded(release: str) -> dict:
    data = json.loads((REFERENCE / f"haystack-{release}.json").read_text(encoding="utf-8"))
    assert data["library"] == "haystack-ai" and data["version"] == release
    return data["outcomes"]


def test_the_live_reference_is_the_release_the_readme_names():
    assert version("haystack-ai") == "3.4.1"


@pytest.mark.parametrize("name", list(CASES))
def test_haystack_3_runs_the_case_as_memlens_does(name):
    reference = haystack_runner.outcome(CASES[name])
    assert same(reference, memlens_runner.outcome(CASES[name], 3)), reference


@pytest.mark.parametrize("name", list(CASES))
def test_haystack_2_31_ran_the_case_as_memlens_2x_does(name):
    ours = memlens_runner.outcome(CASES[name], 2)
    assert not set(METADATA) & set(ours)  # 2.x outputs the state alone
    reference = recorded("2.31.0")[name]
    assert same(reference, ours), reference


@pytest.mark.parametrize("name", list(CASES))
def test_haystack_2_20_differs_only_where_releases_before_2_27_are_known_to(name):
    reference = recorded("2.20.0")[name]
    assert same(reference, memlens_runner.outcome(CASES[name], 2)) is (name not in BEFORE_2_27), BEFORE_2_27.get(
        name, reference
    )


# -- the behaviours the comparison pins, spelled out --------------------------------------------------


def tool_texts(outcome: dict) -> list[tuple[str, str]]:
    return [(m["tool"], m["text"]) for m in outcome["messages"] if m["role"] == "tool"]


def test_a_writer_runs_before_a_reader_of_its_key_in_3x_but_not_in_2x():
    case = CASES["writer_before_reader"]
    assert tool_texts(memlens_runner.outcome(case, 3)) == [
        ("list_notes", '{"notes": ["a"], "count": 1}'),
        ("note", '{"note": "a", "saved": true}'),
    ]
    assert tool_texts(memlens_runner.outcome(case, 2)) == [
        ("list_notes", "{'notes': [], 'count': 0}"),
        ("note", "{'note': 'a', 'saved': True}"),
    ]


def test_a_text_reply_ends_the_run_even_when_only_tools_are_exit_conditions():
    out = memlens_runner.outcome(CASES["text_reply_ends_the_run_when_only_tools_are_exit_conditions"], 3)
    assert out["exit_reason"] == "text" and out["step_count"] == 1
    assert out["tool_call_counts"] == {"note": 0, "finish": 0}


def test_an_exit_tool_that_fails_in_the_same_reply_cancels_the_exit():
    out = memlens_runner.outcome(CASES["failing_exit_tool_cancels_the_exit"], 3)
    assert out["exit_reason"] == "text" and out["messages"][-1]["text"] == "recovered"
    assert [m["error"] for m in out["messages"] if m["role"] == "tool"] == [True, False, False]


def test_an_unknown_tool_is_answered_first_and_counted():
    out = memlens_runner.outcome(CASES["unknown_tool_result_comes_first"], 3)
    assert tool_texts(out)[0] == ("teleport", "Tool 'teleport' not found. Available tools: note, list_notes")
    assert out["tool_call_counts"] == {"note": 1, "list_notes": 1, "teleport": 1}


def test_state_inputs_are_stored_without_their_handlers_and_none_is_kept():
    out = memlens_runner.outcome(CASES["state_inputs_are_stored_as_given"], 3)
    assert out["state"] == {"visits": 5, "notes": ["x", "a"], "tags": None}


# -- State ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "t",
    [
        typing.List,
        typing.Literal["a", "b"],
        typing.Annotated[str, "note"],
        typing.Callable[[int], int],
        typing.Union,
        3,
        "str",
    ],
    ids=repr,
)
def test_a_type_haystack_refuses_is_refused(t):
    from haystack.components.agents.state import State as HaystackState

    with pytest.raises(ValueError):
        HaystackState({"k": {"type": t}})
    with pytest.raises(StateError):
        State({"k": {"type": t}})


@pytest.mark.parametrize(
    "t",
    [
        typing.List[str],
        list[str],
        dict[str, int],
        typing.Optional[int],
        int | None,
        typing.Any,
        set,
        typing.Tuple[int, str],
    ],
    ids=repr,
)
def test_a_type_haystack_accepts_is_accepted(t):
    from haystack.components.agents.state import State as HaystackState

    HaystackState({"k": {"type": t}})
    State({"k": {"type": t}})


def test_to_dict_keeps_sets_tuples_and_nesting_and_from_dict_gives_the_state_back():
    from haystack.components.agents.state import State as HaystackState

    schema = {
        "tags": {"type": set},
        "pair": {"type": tuple},
        "frozen": {"type": frozenset},
        "deep": {"type": dict},
        "odd": {"type": object},
        "plain": {"type": list[str]},
    }
    data = {
        "tags": {"b", "a"},
        "pair": (1, "x"),
        "frozen": frozenset({3}),
        "deep": {"$set": [1], "n": {"s": {2}}},
        "odd": object(),
        "plain": ["p"],
    }
    theirs = HaystackState.from_dict(HaystackState(schema, dict(data)).to_dict())
    ours = State.from_dict(json.loads(json.dumps(State(schema, dict(data)).to_dict())))
    kept = {k: v for k, v in data.items() if k != "odd"}  # an object without a serialised form is dropped
    assert {k: v for k, v in theirs.data.items() if k != "messages"} == kept
    assert ours.data == kept
    assert ours.schema["tags"]["type"] is set and ours.schema["plain"]["type"] == list[str]


@pytest.mark.parametrize("given", [{"notes": ["x"]}, {}], ids=["with data", "empty"])
def test_state_keeps_the_callers_dict_as_haystack_does(given):
    """Haystack's State holds the dict it is given (``data or {}``): a set shows in the caller's dict and the
    caller's change shows in the state; an empty dict is replaced by a new one. Run side by side."""
    from haystack.components.agents.state import State as HaystackState

    schema = {"notes": {"type": list[str]}, "seen": {"type": int}}
    outcomes = []
    for make in (HaystackState, State):
        data = dict(given)
        state = make(schema, data)
        state.set("notes", ["a"])
        data["seen"] = 3  # the caller's change, after the state was made
        outcomes.append(
            (
                state.data is data,
                dict(data),
                {k: v for k, v in state.data.items() if k != "messages"},
                state.has("seen"),
            )
        )
    assert outcomes[0] == outcomes[1]
    assert outcomes[1][0] is bool(given)
