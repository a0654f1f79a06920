"""n8n's and Flowise's chat memory as their JavaScript runs it: the recording is the real code's, and says what it says.

The pinned packages (tests/reference/js/, installed by ``./scripts/setup.sh --test``) run live and
must still give the outcomes recorded in tests/fixtures/reference/ by
scripts/refresh_js_reference_outcomes.py; the memory systems are compared with the recording
(tests/memory/test_platform_memories.py). The rest of this file reads the recording and pins what
it shows, the behaviours the n8n and Flowise memory systems reproduce.
"""

from __future__ import annotations

import json
import math

import pytest
import tiktoken

from core.model.tokens import counter_for
from tests.reference import js_packages, platform_outcomes
from tests.reference.platform_cases import cases, conversations, fingerprint

PLATFORMS = ("n8n", "flowise")


@pytest.fixture(scope="module")
def n8n():
    return platform_outcomes.recorded("n8n")["outcomes"]


@pytest.fixture(scope="module")
def flowise():
    return platform_outcomes.recorded("flowise")["outcomes"]


def sent(outcome, turn):
    """The messages sent at a turn (numbered from 1), as ``(role, text)``."""
    return [(m["role"], m["text"]) for m in outcome["turns"][turn - 1]["sent"]]


def questions(turns):
    return [t["input"] for t in turns]


# -- the recording is what the pinned JavaScript gives ---------------------------------------------


def test_the_pins_are_the_releases_the_issue_names():
    n8n_pins = js_packages.pinned("n8n")
    flowise_pins = js_packages.pinned("flowise")
    assert {k: n8n_pins["packages"][k] for k in ("@langchain/classic", "@langchain/core")} == {
        "@langchain/classic": "1.0.27",
        "@langchain/core": "1.2.8",
    }
    assert {k: flowise_pins["packages"][k] for k in ("@langchain/classic", "@langchain/core")} == {
        "@langchain/classic": "1.0.15",
        "@langchain/core": "1.1.20",
    }
    assert "@n8n/n8n-nodes-langchain@2.41.1" in n8n_pins["sources"]
    assert "flowise-components@3.1.4" in flowise_pins["sources"]


@pytest.mark.parametrize("platform", PLATFORMS)
def test_every_case_is_recorded_for_the_inputs_it_has_now(platform):
    data = platform_outcomes.recorded(platform)
    assert {k: data[k] for k in ("packages", "sources")} == js_packages.pinned(platform), (
        "the pins changed: run scripts/refresh_js_reference_outcomes.py"
    )
    current = {name: fingerprint(case) for name, case in cases(platform).items()}
    assert {name: o["case"] for name, o in data["outcomes"].items()} == current, (
        "the cases changed: run scripts/refresh_js_reference_outcomes.py"
    )


@pytest.mark.parametrize("platform", PLATFORMS)
def test_the_pinned_javascript_still_gives_the_recorded_outcomes(platform):
    live = platform_outcomes.live(platform)
    recorded = platform_outcomes.recorded(platform)
    assert {k: v for k, v in live["versions"].items() if k != "node"} == {
        k: v for k, v in recorded["versions"].items() if k != "node"
    }
    changed = [name for name in recorded["outcomes"] if live["outcomes"].get(name) != recorded["outcomes"][name]]
    assert not changed, f"{len(changed)} outcomes differ, e.g. {changed[:3]}"


# -- n8n: the window (BufferWindowMemory, k = Context Window Length) -----------------------------------


def test_n8n_k_5_keeps_the_last_10_messages_so_tool_rounds_leave_two_exchanges(n8n):
    turn5 = sent(n8n["window-parallel_calls-simple-k5"], 5)
    assert len(turn5) == 10
    assert [text for role, text in turn5 if role == "user"] == questions(conversations()["parallel_calls"])[2:4]


def test_n8n_window_can_start_on_a_tool_result_whose_call_it_cut(n8n):
    first = n8n["window-single_tools-simple-k5"]["turns"][4]["sent"][0]
    assert first["role"] == "tool" and first["call_id"] == "call_1_0_0"


@pytest.mark.parametrize("k, kept", [(0, None), (1, 2), (2.5, 5), (-1, -2)])
def test_n8n_window_is_slice_minus_2k(n8n, k, kept):
    """k = 0 is everything (slice(-0)); a fraction counts half exchanges; a negative k drops the oldest."""
    outcome = n8n[f"window-plain-simple-k{k}"]
    for turn in range(2, 8):
        stored = [
            ("user", t["input"]) if i % 2 == 0 else ("assistant", t["output"])
            for t in conversations()["plain"][: turn - 1]
            for i in range(2)
        ]
        want = stored if kept is None else stored[-kept:] if kept > 0 else stored[-kept:]
        assert sent(outcome, turn) == want


@pytest.mark.parametrize("store", ["postgres1.0", "redis1.2"])
def test_n8n_postgres_v1_0_and_redis_before_1_3_have_no_window(n8n, store):
    unwindowed, windowed = n8n[f"window-several_rounds-{store}-k3"], n8n["window-several_rounds-simple-k3"]
    assert len(sent(unwindowed, 6)) == len(unwindowed["stored"]) - 2 > 6 == len(sent(windowed, 6))


def test_n8n_postgres_and_redis_keep_what_simple_memory_keeps(n8n):
    for conv in conversations():
        assert (
            n8n[f"window-{conv}-postgres1.3-k3"]["turns"]
            == n8n[f"window-{conv}-redis1.5-k3"]["turns"]
            == n8n[f"window-{conv}-simple-k3"]["turns"]
        )


def test_n8n_simple_memory_drops_a_session_idle_for_more_than_an_hour(n8n):
    """Turns at minutes 0, 10, 20, 81, 90, 150, 211: 61 minutes idle clear it, exactly 60 do not."""
    outcome = n8n["lifetime-idle-hour"]
    assert [len(t["sent"]) for t in outcome["turns"]] == [0, 2, 4, 0, 2, 4, 0]


def test_n8n_simple_memory_keeps_the_window_it_was_created_with(n8n):
    """k goes from 1 to 5 at turn 4; the buffer keeps k = 1 until an idle hour drops it (turn 6)."""
    outcome = n8n["lifetime-k-changed"]
    assert [len(t["sent"]) for t in outcome["turns"]] == [0, 2, 2, 2, 2, 0, 2, 4, 6]


# -- n8n: what the agent saves ------------------------------------------------------------------------


def test_n8n_agent_saves_only_the_last_tool_round_of_a_turn(n8n):
    stored = n8n["window-several_rounds-simple-k0"]["stored"]
    calls = [c["id"] for m in stored for c in m.get("calls", [])]
    assert calls == ["call_1_1_0", "call_3_2_0", "call_3_2_1", "call_5_1_0"]


def test_n8n_parallel_calls_are_stored_as_one_assistant_message_per_call(n8n):
    stored = n8n["window-parallel_calls-simple-k0"]["stored"]
    turn2 = stored[2:8]
    assert [m["role"] for m in turn2] == ["user", "assistant", "tool", "assistant", "tool", "assistant"]
    assert [[c["id"] for c in m["calls"]] for m in turn2 if m.get("calls")] == [["call_2_0_0"], ["call_2_0_1"]]
    # What the model wrote beside its calls is not kept; the call's arguments gain the call id.
    assert all(m["text"] == "" for m in stored if m.get("calls"))
    assert turn2[1]["calls"][0]["args"] == {"city": "Faro", "day": 1, "id": "call_2_0_0"}


def test_n8n_agent_saves_nothing_for_an_empty_output_not_even_the_question(n8n):
    turns = conversations()["empty_outputs"]
    stored_questions = [m["text"] for m in n8n["window-empty_outputs-simple-k0"]["stored"] if m["role"] == "user"]
    assert stored_questions == [t["input"] for t in turns if t["output"]]
    # A V1/V2 agent (an AgentExecutor) saves the question and the empty answer.
    older = n8n["window-empty_outputs-agent2-k5"]["stored"]
    assert [m["text"] for m in older if m["role"] == "user"] == questions(turns)


def test_n8n_2_2_stored_every_tool_round_as_a_used_tools_prefix(n8n):
    stored = n8n["window-several_rounds-agent3@2.2.0-k5"]["stored"]
    assert [m["role"] for m in stored] == ["user", "assistant"] * 6
    first = stored[1]["text"]
    assert first.startswith("[Used tools: Tool: weather, Input: {}, Result: ") and first.endswith(
        "] done with Lisbon (2 rounds)"
    )
    assert first.count("Tool: ") == 2


# -- n8n: the agent's load (orphan clean-up, maxTokensFromMemory) ------------------------------------


def test_n8n_agent_drops_the_leading_orphan_tool_result_the_window_cut(n8n):
    """The window starts on the result of the first of three parallel calls; the agent drops it and
    starts on the second call, whose result follows it: the question stays cut off."""
    window = n8n["window-parallel_calls-simple-k5"]["turns"][5]["sent"]
    agent = n8n["agent-parallel_calls-k5-maxNone-download"]["turns"][5]["sent"]
    assert window[0]["role"] == "tool" and agent == window[1:]
    assert agent[0]["calls"][0]["id"] == agent[1]["call_id"] == "call_4_0_2"


def test_n8n_trim_counts_content_only_and_a_tool_call_as_zero(n8n):
    for name, outcome in n8n.items():
        if name.startswith("agent-"):
            for turn in outcome["turns"]:
                for m, tokens in zip(turn["sent"], turn["tokens"]):
                    if m.get("calls"):
                        assert tokens == 0


def test_n8n_counts_with_gpt2_s_vocabulary_when_it_can_download_it(n8n):
    """GPT-2's ranks are p50k_base's without its tokens for runs of spaces, which these texts do not have."""
    counter_for("gpt-4o-mini")  # points tiktoken at the encodings bundled with litellm (offline)
    gpt2_like, o200k = tiktoken.get_encoding("p50k_base"), tiktoken.get_encoding("o200k_base")
    differs = 0
    for name, outcome in n8n.items():
        if name.startswith("agent-") and name.endswith("-download"):
            for turn in outcome["turns"]:
                for m, tokens in zip(turn["sent"], turn["tokens"]):
                    assert "  " not in m["text"] and tokens == len(gpt2_like.encode(m["text"]))
                    differs += tokens != len(o200k.encode(m["text"]))
    assert differs  # not the model's own vocabulary


def test_n8n_counts_characters_over_4_when_the_download_fails(n8n):
    for name, outcome in n8n.items():
        if name.endswith("-unreachable"):
            for turn in outcome["turns"]:
                assert turn["tokens"] == [math.ceil(len(m["text"]) / 4) for m in turn["sent"]]


def test_n8n_allow_partial_sends_the_last_lines_of_a_message_cut_at_a_line(n8n):
    outcome = n8n["agent-long_human-k5-max25-download"]
    first = outcome["turns"][2]["sent"][0]
    whole = conversations()["long_human"][1]["input"]
    assert first["role"] == "user" and first["text"] != whole and whole.endswith("\n" + first["text"])


def test_n8n_one_human_message_too_big_to_fit_means_no_history(n8n):
    """startOn 'human': the newest answer fits, its question does not (one line, no partial cut), so nothing is sent."""
    outcome = n8n["agent-mixed-k5-max6-unreachable"]
    answers = conversations()["mixed"]
    for turn, previous in zip(outcome["turns"][1:], answers):
        if math.ceil(len(previous["output"]) / 4) <= 6 < math.ceil(len(previous["input"].split("\n")[-1]) / 4):
            assert turn["sent"] == []
            break
    else:
        pytest.fail("no turn whose answer fits and whose question does not")


def test_n8n_trimmed_history_always_starts_on_a_question(n8n):
    for name, outcome in n8n.items():
        if name.startswith("agent-") and "maxNone" not in name:
            for turn in outcome["turns"]:
                assert not turn["sent"] or turn["sent"][0]["role"] == "user"


# -- Flowise ----------------------------------------------------------------------------------------


@pytest.mark.parametrize("k, kept", [("0", 0), ("-1", 0), ("1", 2), ("2.5", 4), ("4", 8), ("", None)])
def test_flowise_buffer_window_keeps_the_last_2k_rows(flowise, k, kept):
    """Size is read with parseInt: "0" or below keeps nothing; an empty field (NaN) keeps everything."""
    turns = conversations()["plain"]
    outcome = flowise[f"buffer-plain-k{k or 'empty'}"]
    for turn in range(1, 8):
        rows = [
            ("user", t["input"]) if i == 0 else ("assistant", t["output"]) for t in turns[: turn - 1] for i in range(2)
        ]
        assert sent(outcome, turn) == (rows if kept is None else rows[-kept:] if kept else [])


def test_flowise_prepends_the_request_history_after_the_window(flowise):
    outcome = flowise["buffer-plain-k2-history"]
    history = [("user", "I am Dana, from the earlier chat."), ("assistant", "Hello again, Dana.")]
    assert sent(outcome, 1) == history
    assert sent(outcome, 6)[:2] == history and len(sent(outcome, 6)) == 6


def test_flowise_sends_an_empty_answer_as_an_empty_message(flowise):
    assert ("assistant", "") in sent(flowise["buffer-empty_outputs-k4"], 4)


def test_agentflow_window_slices_after_the_input_is_appended(flowise):
    turns = conversations()["plain"]
    outcome = flowise["agentflow-plain-window1"]
    assert sent(outcome, 3) == [("assistant", turns[1]["output"]), ("user", turns[2]["input"])]
    assert sent(flowise["agentflow-plain-window0"], 4)[0] == ("user", turns[0]["input"])  # 0: everything
    assert len(sent(flowise["agentflow-plain-window0"], 4)) == 7


def test_agentflow_summary_buffer_summarises_again_every_turn_once_over_its_limit(flowise):
    outcome = flowise["agentflow-plain-summary40-download"]
    over = [t for t in outcome["turns"] if t["summaries"]]
    assert len(over) >= 3 and all(len(t["summaries"]) == 1 for t in over)
    assert [t["summaries"][0] for t in over] == sorted(t["summaries"][0] for t in over)
    summary = over[-1]["sent"][0]
    assert summary["role"] == "system" and summary["text"].startswith("Previous conversation summary: ")
    system = flowise["agentflow-plain-summary40-system-download"]["turns"][-1]["sent"][0]
    assert system["role"] == "user"  # the node has a system message of its own


def test_agentflow_summary_buffer_can_swallow_the_question(flowise):
    outcome = flowise["agentflow-plain-summary1-download"]
    assert all(len(t["sent"]) == 1 and "summary_of" in t["sent"][0] for t in outcome["turns"])
    assert [t["summaries"] for t in outcome["turns"]][:3] == [[1], [3], [5]]


def test_every_recorded_message_is_plain_json(n8n, flowise):
    for outcome in list(n8n.values()) + list(flowise.values()):
        for turn in outcome["turns"]:
            for m in turn["sent"]:
                assert m["role"] in ("user", "assistant", "tool", "system") and isinstance(m["text"], str)
                json.dumps(m)
