"""LangSmith runs (``{id, name, run_type, inputs, outputs, extra, …}``): each LLM run is one model call,
read as the prompt it was sent and its reply — LangChain's stored messages or OpenAI messages — one
conversation per call; a trace's other runs are left out with a note, and a file with no model call is
refused in one line."""

from __future__ import annotations

import json

import pytest

from core.io import FormatError, detect_format, import_text
from core.model.conversation import TOOL_CALL, TOOL_RESULT


def lc(kind: str, content: str, **kwargs) -> dict:
    """A message as LangChain's tracer stores it (``dumpd``)."""
    cls = {"system": "SystemMessage", "human": "HumanMessage", "ai": "AIMessage", "tool": "ToolMessage"}[kind]
    return {
        "lc": 1,
        "type": "constructor",
        "id": ["langchain", "schema", "messages", cls],
        "kwargs": {"content": content, "type": kind, **kwargs},
    }


def chat_model_run(run_id="run-2", reply="Your name is Dana.", **extra) -> dict:
    """A LangGraph chat model call: the thread so far, the reply in its generations."""
    return {
        "id": run_id,
        "name": "ChatOpenAI",
        "run_type": "llm",
        "start_time": "2025-03-01T10:00:02.000000",
        "trace_id": "trace-1",
        "extra": {
            "metadata": {"thread_id": "thread-7", "ls_model_name": "gpt-4o-mini"},
            "invocation_params": {"model": "gpt-4o-mini"},
        },
        "inputs": {
            "messages": [
                [
                    lc("system", "You are a travel agent."),
                    lc("human", "Hi, I'm Dana."),
                    lc("ai", "Hello Dana!"),
                    lc("human", "What's my name?"),
                ]
            ]
        },
        "outputs": {"generations": [[{"text": reply, "type": "ChatGeneration", "message": lc("ai", reply)}]]},
        **extra,
    }


def openai_run() -> dict:
    """A call traced around an OpenAI client: its request's messages, the completion's first choice."""
    call = {"id": "call_1", "type": "function", "function": {"name": "find_order", "arguments": '{"id": 4411}'}}
    return {
        "id": "run-3",
        "name": "ChatOpenAI",
        "run_type": "llm",
        "start_time": "2025-03-01T10:00:05",
        "inputs": {
            "model": "gpt-4o",
            "messages": [
                {"role": "user", "content": "Where is order 4411?"},
                {"role": "assistant", "content": None, "tool_calls": [call]},
                {"role": "tool", "tool_call_id": "call_1", "content": "shipped"},
            ],
        },
        "outputs": {"choices": [{"index": 0, "message": {"role": "assistant", "content": "It has shipped."}}]},
    }


def read(runs, **kw):
    return import_text("\n".join(json.dumps(r) for r in runs), name="runs.jsonl", **kw)


def test_a_chat_model_run_is_the_prompt_it_was_sent_and_its_reply():
    result = read([chat_model_run()])
    assert result.format == "langsmith" and detect_format(chat_model_run()) == "langsmith"
    conv = result.conversations[0]
    assert (conv.id, conv.name, conv.system_prompt, conv.source_format) == (
        "run-2",
        "ChatOpenAI · 2025-03-01 10:00:02",
        "You are a travel agent.",
        "langsmith",
    )
    assert [(t.query, t.answer) for t in conv.turns] == [
        ("Hi, I'm Dana.", "Hello Dana!"),
        ("What's my name?", "Your name is Dana."),
    ]
    assert (conv.meta["thread_id"], conv.meta["model"], conv.meta["trace_id"]) == ("thread-7", "gpt-4o-mini", "trace-1")


def test_a_run_traced_around_an_openai_client_keeps_its_tool_round():
    conv = read([openai_run()]).conversations[0]
    turn = conv.turns[0]
    assert [(m.role, m.kind) for m in turn.messages] == [
        ("user", "query"),
        ("assistant", TOOL_CALL),
        ("tool", TOOL_RESULT),
        ("assistant", "answer"),
    ]
    assert turn.answer == "It has shipped." and turn.messages[1].tool_calls[0].name == "find_order"
    assert conv.meta["model"] == "gpt-4o"


def test_a_traces_other_runs_are_left_out_with_a_note_and_each_model_call_is_a_conversation():
    chain = {"id": "run-1", "name": "LangGraph", "run_type": "chain", "inputs": {"messages": []}, "outputs": {}}
    tool = {"id": "run-4", "name": "find_order", "run_type": "tool", "inputs": {"input": "4411"}, "outputs": {}}
    result = read([chain, chat_model_run(), tool, openai_run()])
    assert [c.id for c in result.conversations] == ["run-2", "run-3"]
    assert result.notes == [
        "left out the runs that are not model calls (1 chain, 1 tool): only an LLM run holds a prompt"
    ]


def test_a_file_without_a_model_call_is_refused_in_one_line():
    chain = {"id": "run-1", "name": "LangGraph", "run_type": "chain", "inputs": {}, "outputs": {}}
    with pytest.raises(FormatError, match=r"holds no LLM run \(run_type 'llm'\), only 1 chain runs") as e:
        read([chain])
    assert "\n" not in str(e.value)


def test_a_failed_call_has_no_reply_and_keeps_its_error():
    run = chat_model_run(outputs=None, error="RateLimitError: slow down")
    conv = read([run]).conversations[0]
    assert conv.turns[-1].query == "What's my name?" and conv.turns[-1].answer_index is None
    assert conv.meta["error"] == "RateLimitError: slow down"


def test_a_model_call_opens_under_everything_it_was_sent():
    from core.analysis.debug_view import fitting_config

    config = fitting_config(read([chat_model_run()]).conversations[0])
    assert (config.strategy, config.granularity) == ("buffer", "all_messages")


@pytest.mark.parametrize(
    "inputs,problem",
    [
        ({"question": "hi"}, "'inputs' has no 'messages' (nor 'prompts')"),
        ("hi", "has no 'inputs' object"),
        ({"messages": [[{"role": "robot", "content": "x"}]]}, "unknown role 'robot'"),
    ],
)
def test_a_malformed_run_is_refused_naming_what_is_wrong(inputs, problem):
    with pytest.raises(FormatError, match=problem.replace("(", r"\(").replace(")", r"\)")):
        read([chat_model_run(inputs=inputs)])


def test_a_call_is_counted_for_the_model_that_answered_also_once_stored_and_from_the_cli(db):
    from core.analysis.debug_view import fitting_config
    from core.cli.app import build_parser, config_from_args
    from core.memory.config import MemoryConfig
    from core.service.transfer import store_conversations
    from core.store import repo

    conv = read([openai_run()]).conversations[0]
    whole = MemoryConfig(strategy="buffer", granularity="all_messages", model="gpt-4o")
    assert fitting_config(conv) == whole
    [conv_id] = store_conversations(db, [conv])
    assert fitting_config(repo.load_conversation(db, conv_id)) == whole  # the Debugger's reopened conversation
    assert config_from_args(build_parser().parse_args(["replay", "runs.jsonl"]), conv).model == "gpt-4o"
    assert (
        config_from_args(build_parser().parse_args(["replay", "runs.jsonl", "--model", "gpt-4.1"]), conv).model
        == "gpt-4.1"
    )  # the option still decides
    unnamed = openai_run()
    del unnamed["inputs"]["model"]
    assert fitting_config(read([unnamed]).conversations[0]).model == MemoryConfig().model  # the project's default


def test_a_calls_name_is_its_recorded_name_and_start_to_the_second_in_utc():
    from core.io.readers.calls import call_name

    assert call_name("ChatOpenAI", "2025-03-01T10:00:02.123456") == "ChatOpenAI · 2025-03-01 10:00:02"
    assert call_name("LLM", "2025-03-01T12:00:02+02:00") == "LLM · 2025-03-01 10:00:02"
    assert call_name("LLM", "yesterday") == "LLM · yesterday"  # not ISO 8601: as written
    assert call_name(None, "2025-03-01T10:00:02Z") == "2025-03-01 10:00:02" and call_name("LLM", None) == "LLM"


def test_the_receipt_of_a_turn_with_its_own_tool_round_says_those_steps_come_after_its_first_request():
    from core.analysis.debug_view import default_lens, receipt, replayed_run
    from core.memory.replay import Replay
    from core.model.tokens import counter_for

    conv = read([openai_run()]).conversations[0]  # one turn: the question, a call, its result, the reply
    lens = default_lens(conversation=conv)
    ledger = Replay(conv, lens.config).ledger_at(0)
    counter = counter_for(lens.config.model)
    r = receipt(
        replayed_run(conv, 0, lens.id, ledger, counter), lens.title, exact=counter.exact, encoding=counter.encoding_name
    )
    assert [row.origin for row in r.rows] == ["current query"]
    assert r.notes == [
        "This is the turn's first request. Its own 2 steps (tool calls, tool results, thinking) "
        "follow the query in the requests after it."
    ]
    plain_turn = read([chat_model_run()]).conversations[0]  # question and reply only: nothing to say
    run = replayed_run(plain_turn, 1, lens.id, Replay(plain_turn, lens.config).ledger_at(1), counter)
    assert run["notes"] == []


def test_a_run_as_langchains_own_langsmith_tracer_records_it_reads_as_the_messages_sent():
    """Differential: a chat model call traced by langchain-core's LangSmith tracer (its runs kept here
    instead of being posted) and exported as JSON reads as the messages the model was given, its reply
    the last answer."""
    from langchain_core.language_models.fake_chat_models import FakeListChatModel
    from langchain_core.messages import AIMessage, HumanMessage, SystemMessage
    from langchain_core.tracers.langchain import LangChainTracer

    finished = []

    class Kept(LangChainTracer):  # the tracer as LangSmith runs it, minus the network
        def _persist_run_single(self, run):
            pass

        def _update_run_single(self, run):
            finished.append(run)

    sent = [
        SystemMessage("You are a travel agent."),
        HumanMessage("Hi, I'm Dana."),
        AIMessage("Hello Dana!"),
        HumanMessage("What's my name?"),
    ]
    FakeListChatModel(responses=["Your name is Dana."]).invoke(
        sent, config={"callbacks": [Kept(client=object(), project_name="memlens")]}
    )
    [run] = finished
    conv = read([run.model_dump(mode="json")]).conversations[0]
    assert conv.system_prompt == "You are a travel agent."
    assert [(t.query, t.answer) for t in conv.turns] == [
        ("Hi, I'm Dana.", "Hello Dana!"),
        ("What's my name?", "Your name is Dana."),
    ]
