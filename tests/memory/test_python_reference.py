"""The OpenAI Agents SDK's, LlamaIndex's and LangGraph/langmem's memory as their own code runs it.

The pinned packages (LlamaIndex and LangGraph in the test environment, the Agents SDK in its own:
tests/reference/python_packages.py) run live and must still give the outcomes recorded in
tests/fixtures/reference/ by scripts/refresh_python_reference_outcomes.py; the memory systems are
compared with the recording (tests/memory/test_platform_memories.py). The rest of this file reads the
recording, and calls the libraries where a rule is theirs alone, to pin the behaviours the
``openai_agents``, ``llamaindex_buffer``, ``llamaindex_memory``, ``langmem_summary`` and ``langgraph_trim``
systems reproduce (tests/reference/python/README.md says each in words).
"""

from __future__ import annotations

import pytest

from tests.reference import platform_outcomes, python_packages
from tests.reference.platform_cases import AGENTS_LIMITS, agents_conversations, cases, conversations, fingerprint
from tests.reference.python.recording import resolve

PLATFORMS = python_packages.PLATFORMS


@pytest.fixture(scope="module")
def agents():
    return platform_outcomes.recorded("openai_agents")["outcomes"]


@pytest.fixture(scope="module")
def llamaindex():
    return platform_outcomes.recorded("llamaindex")["outcomes"]


@pytest.fixture(scope="module")
def langgraph():
    return platform_outcomes.recorded("langgraph")["outcomes"]


# -- the recording is what the pinned packages give ---------------------------------------------------


def test_the_pins_are_the_releases_the_issue_names():
    assert python_packages.pinned("openai_agents") == {"openai-agents": "0.24.0"}
    assert python_packages.pinned("llamaindex") == {"llama-index-core": "0.14.25"}
    assert python_packages.pinned("langgraph") == {
        "langchain-core": "1.8.3",
        "langgraph": "1.2.24",
        "langgraph-prebuilt": "1.1.3",
        "langmem": "0.0.30",
    }


@pytest.mark.parametrize("platform", PLATFORMS)
def test_every_case_is_recorded_for_the_inputs_it_has_now(platform):
    data = platform_outcomes.recorded(platform)
    assert data["packages"] == python_packages.pinned(platform), (
        "the pins changed: run scripts/refresh_python_reference_outcomes.py"
    )
    current = {name: fingerprint(case) for name, case in cases(platform).items()}
    assert {name: o["case"] for name, o in data["outcomes"].items()} == current, (
        "the cases changed: run scripts/refresh_python_reference_outcomes.py"
    )


@pytest.mark.parametrize("platform", PLATFORMS)
def test_the_pinned_package_still_gives_the_recorded_outcomes(platform):
    live = platform_outcomes.live(platform)
    recorded = platform_outcomes.recorded(platform)
    assert live["versions"] == recorded["versions"]
    changed = [name for name in recorded["outcomes"] if live["outcomes"].get(name) != recorded["outcomes"][name]]
    assert not changed, f"{len(changed)} outcomes differ, e.g. {changed[:3]}"


# -- the OpenAI Agents SDK: a session's limit counts items ------------------------------------------


def items_sent(outcome, turn):
    """The history items the model received at a turn (numbered from 1), the turn's question split off."""
    sent = resolve(outcome["turns"][turn - 1]["sent"], outcome["stored"])
    assert sent[-1] == {"content": agents_conversations()[outcome_conv(outcome)][turn - 1]["input"], "role": "user"}
    return sent[:-1]


def outcome_conv(outcome):
    return next(c["conversation"] for n, c in cases("openai_agents").items() if fingerprint(c) == outcome["case"])


def kind(item):
    return item.get("type") or ("message" if item.get("role") == "assistant" else item.get("role"))


def test_agents_sdk_stores_a_tool_turn_as_its_items_calls_before_results(agents):
    stored = agents["session-parallel_calls-limitNone"]["stored"]
    assert [kind(i) for i in stored[2:8]] == [
        "user",
        "function_call",
        "function_call",
        "function_call_output",
        "function_call_output",
        "message",
    ]
    reasoning = agents["session-reasoning-limitNone"]["stored"]
    assert [kind(i) for i in reasoning[:5]] == ["user", "reasoning", "function_call", "function_call_output", "message"]


def test_agents_sdk_stores_an_empty_answer_as_a_message_with_empty_text(agents):
    stored = agents["session-empty_outputs-limitNone"]["stored"]
    empty = [i for i in stored if kind(i) == "message" and i["content"][0]["text"] == ""]
    assert [i["id"] for i in empty] == ["msg_2", "msg_3", "msg_6"]
    assert empty[0]["content"] == [{"annotations": [], "logprobs": [], "text": "", "type": "output_text"}]


@pytest.mark.parametrize("limit", [None, -1])
def test_agents_sdk_without_a_limit_or_with_a_negative_one_sends_every_item(agents, limit):
    outcome = agents[f"session-plain-limit{limit}"]
    for turn in range(1, 8):
        assert items_sent(outcome, turn) == outcome["stored"][: 2 * (turn - 1)]


def test_agents_sdk_limit_0_sends_the_question_alone(agents):
    outcome = agents["session-mixed-limit0"]
    assert all(items_sent(outcome, turn) == [] for turn in range(1, 9))


@pytest.mark.parametrize("limit", [n for n in AGENTS_LIMITS if n and n > 0])
def test_agents_sdk_limit_n_sends_the_newest_n_items_oldest_first(agents, limit):
    outcome = agents[f"session-plain-limit{limit}"]
    for turn in range(2, 8):
        assert items_sent(outcome, turn) == outcome["stored"][: 2 * (turn - 1)][-limit:]


def test_agents_sdk_drops_a_result_whose_call_the_limit_cut_so_fewer_than_limit_items_go(agents):
    outcome = agents["session-parallel_calls-limit4"]
    stored = outcome["stored"]
    # Before turn 3: … call_2_0_0, call_2_0_1, out_2_0_0, out_2_0_1, answer 2. The newest 4 start at the second
    # call; the first result lost its call and is dropped.
    assert [kind(i) for i in items_sent(outcome, 3)] == ["function_call", "function_call_output", "message"]
    assert [i.get("call_id") for i in items_sent(outcome, 3)] == ["call_2_0_1", "call_2_0_1", None]
    assert stored[5]["call_id"] == "call_2_0_0" and stored[5] not in items_sent(outcome, 3)


def test_agents_sdk_keeps_such_a_result_when_an_input_callback_is_set(agents):
    cut = items_sent(agents["session-parallel_calls-limit3"], 3)
    kept = items_sent(agents["session-parallel_calls-limit3-callback"], 3)
    # The newest 3 items are both results and the answer: the SDK sends the answer alone, or all three.
    assert [kind(i) for i in cut] == ["message"]
    assert [kind(i) for i in kept] == ["function_call_output", "function_call_output", "message"]


def test_agents_sdk_drops_a_call_without_result_with_its_reasoning_limit_or_not(agents):
    """An approval left pending stores the question and the call, nothing more; later turns leave the call out."""
    outcome = agents["session-pending_results-limitNone"]
    assert outcome["turns"][1].get("stopped") and outcome["turns"][6].get("stopped")
    stored = outcome["stored"]
    assert [kind(i) for i in stored[2:5]] == ["user", "function_call", "user"]
    assert all(i.get("call_id") != "call_2_0_0" for i in items_sent(outcome, 3))
    assert all(i.get("call_id") not in ("call_7_0_0", "call_7_0_1") for i in items_sent(outcome, 9))


def test_agents_sdk_keeps_a_call_whose_result_came_a_turn_late(agents):
    """Approved after turn 5 ran: the call sits before question 5, its result and answer after answer 5."""
    outcome = agents["session-pending_results-limitNone"]
    stored = outcome["stored"]
    late = [i for i, item in enumerate(stored) if item.get("call_id") == "call_4_0_0"]
    question5 = stored.index({"content": agents_conversations()["pending_results"][4]["input"], "role": "user"})
    assert late[0] < question5 < late[1]
    assert [i.get("call_id") for i in items_sent(outcome, 6)].count("call_4_0_0") == 2
    # With limit 3 the call is cut and its result goes with it.
    assert all(i.get("call_id") != "call_4_0_0" for i in items_sent(agents["session-pending_results-limit3"], 6))


# -- LlamaIndex: ChatMemoryBuffer as the agent workflow uses it ---------------------------------------


def li_sent(outcome, turn):
    """The messages the model received at a turn, as LlamaIndex reads them: ``(role, content)``."""
    from llama_index.core.base.llms.types import ChatMessage

    store = outcome["stored"]["store"]["conversation"]
    return [
        (m.role.value, m.content)
        for m in (ChatMessage.model_validate(d) for d in resolve(outcome["turns"][turn - 1]["sent"], store))
    ]


def test_llamaindex_workflow_default_limit_is_three_quarters_of_the_context_and_3000_without_a_model(llamaindex):
    from llama_index.core.memory import ChatMemoryBuffer

    assert llamaindex["buffer-plain-limitNone"]["settings"] == {"token_limit": int(3900 * 0.75)}
    assert ChatMemoryBuffer.from_defaults().token_limit == 3000


def test_llamaindex_buffer_counts_content_only_and_a_tool_call_only_reply_as_none():
    from llama_index.core.base.llms.types import ChatMessage, ToolCallBlock
    from llama_index.core.memory import ChatMemoryBuffer
    from llama_index.core.utils import get_tokenizer

    calls = ChatMessage(
        role="assistant",
        blocks=[ToolCallBlock(tool_call_id="c1", tool_name="weather", tool_kwargs={"city": "Porto" * 40})],
    )
    assert calls.content is None
    buffer = ChatMemoryBuffer.from_defaults(token_limit=1000)
    tokens = get_tokenizer()
    assert buffer._token_count_for_messages([calls]) == len(tokens("None")) == 1
    pair = [
        ChatMessage(role="user", content="hi there"),
        ChatMessage(role="tool", content="sunny", additional_kwargs={"tool_call_id": "c1"}),
    ]
    assert buffer._token_count_for_messages(pair) == len(tokens("hi there sunny"))


def test_llamaindex_counts_with_gpt_3_5_s_tokenizer_whatever_the_model():
    import tiktoken
    from llama_index.core.utils import get_tokenizer

    from core.model.tokens import counter_for

    counter_for("gpt-4o")  # points tiktoken at the encodings bundled with litellm (offline)
    text = "question 4: what about Coimbra? 🚆"
    assert len(get_tokenizer()(text)) == len(tiktoken.get_encoding("cl100k_base").encode(text))
    assert len(get_tokenizer()(text)) != len(tiktoken.get_encoding("o200k_base").encode(text))


def test_llamaindex_buffer_counts_the_new_question_and_never_starts_on_an_answer_or_a_result(llamaindex):
    for name, outcome in llamaindex.items():
        if not name.startswith("buffer-"):
            continue
        for turn in range(1, len(outcome["turns"]) + 1):
            history = li_sent(outcome, turn)[1:]  # (the agent's system prompt first)
            assert history[-1][0] == "user"
            assert len(history) == 1 or history[0][0] == "user", (name, turn)


def test_llamaindex_buffer_cuts_a_tool_round_with_its_question(llamaindex):
    turns = conversations()["single_tools"]
    assert li_sent(llamaindex["buffer-single_tools-limit40"], 3)[1:] == [
        ("user", turns[1]["input"]),
        ("assistant", turns[1]["output"]),
        ("user", turns[2]["input"]),
    ]


def test_llamaindex_buffer_sends_the_newest_message_alone_when_it_is_over_the_limit(llamaindex):
    outcome = llamaindex["buffer-long_human-limit12"]
    for turn, t in enumerate(conversations()["long_human"], 1):
        assert li_sent(outcome, turn)[1:] == [("user", t["input"])]


# -- LlamaIndex: Memory flushes at write time -----------------------------------------------------------


def test_llamaindex_memory_resolves_an_oversized_flush_to_seven_tenths_of_the_limit(llamaindex):
    assert llamaindex["memory-plain-limit150-ratio0.7-flush400"]["settings"] == {
        "token_limit": 150,
        "chat_history_token_ratio": 0.7,
        "token_flush_size": 105,
    }


def test_llamaindex_memory_flushes_whole_turns_so_a_question_leads(llamaindex):
    outcome = llamaindex["memory-single_tools-limit100-ratio0.7-flush10"]
    assert [t["archived_after"] for t in outcome["turns"]] == [0, 0, 4, 6, 10, 12, 16]
    for turn in range(1, 8):
        history = li_sent(outcome, turn)[1:]
        assert history[0][0] == "user"


def test_llamaindex_memory_keeps_everything_below_its_limit(llamaindex):
    outcome = llamaindex["memory-mixed-limit30000-ratio0.7-flush3000"]
    assert all(t["archived_after"] == 0 for t in outcome["turns"])
    store = outcome["stored"]["store"]["conversation"]
    # The system prompt, then every stored message but the last turn's answer (its question is sent last).
    assert len(li_sent(outcome, 8)) == 1 + len(store) - 1


def test_llamaindex_simple_chat_store_cannot_persist_under_the_app_s_pydantic():
    """SimpleChatStore.persist fails under pydantic 2.14 (its message serialiser's handler call); the drivers
    write what it writes under pydantic 2.13 instead."""
    import pydantic
    from llama_index.core.llms import ChatMessage
    from llama_index.core.storage.chat_store import SimpleChatStore
    from pydantic_core import PydanticSerializationError

    assert pydantic.VERSION.startswith("2.14")
    with pytest.raises(PydanticSerializationError, match="index_key"):
        SimpleChatStore(store={"k": [ChatMessage(role="user", content="hi")]}).model_dump_json()


# -- langmem: summarize_messages before every model call ----------------------------------------------


def lg_calls(outcome, turn):
    messages = outcome["stored"]["values"]["messages"]
    return [
        [(m["type"], m["content"]) for m in resolve(call, messages)] for call in outcome["turns"][turn - 1]["calls"]
    ]


def test_langmem_summarises_before_every_call_and_can_swallow_the_question(langgraph):
    """max_tokens 120, summary 40, with a system message: at turn 3's second call the whole history, the
    question and its tool call included, folds into the summary; the model gets the system message and it."""
    outcome = langgraph["summary-single_tools-max120-beforeNone-summary40-system"]
    first, second = lg_calls(outcome, 3)
    assert first[-1] == ("human", conversations()["single_tools"][2]["input"])
    assert second == [
        ("system", "You are a travel assistant."),
        ("system", "Summary of the conversation so far: summary 1"),
    ]
    # The next turn starts from the running summary: what was folded stays folded.
    assert lg_calls(outcome, 4)[0][:2] == second


def test_langmem_summarises_the_latest_question_when_the_system_message_leaves_no_budget(langgraph):
    outcome = langgraph["summary-long_human-system-exact"]
    for turn in range(1, 8):
        assert all([kind for kind, _ in call] == ["system", "system"] for call in lg_calls(outcome, turn))


def test_langmem_never_summarises_when_the_system_message_leaves_less_than_none(langgraph):
    """The history then grows without bound: max_tokens is enforced only when a summary is made."""
    outcome = langgraph["summary-long_human-system-over"]
    sizes = [len(lg_calls(outcome, turn)[0]) for turn in range(1, 8)]
    assert sizes == [2, 4, 6, 8, 10, 14, 16]
    assert all(not content.startswith("Summary") for call in lg_calls(outcome, 7) for _, content in call)


def test_langgraph_trim_sends_the_whole_history_when_the_trim_is_empty(langgraph):
    """trim_messages(start_on="human") over a tool step finds no question within 40 tokens: [], and
    create_react_agent reads an empty llm_input_messages as absent (``or``): every message goes."""
    outcome = langgraph["trim-single_tools-max40"]
    first, second = lg_calls(outcome, 3)
    stored = outcome["stored"]["values"]["messages"]
    assert len(first) == 3
    assert len(second) == stored.index(next(m for m in stored if m["id"] == "tool_call_3_0_0")) + 1
