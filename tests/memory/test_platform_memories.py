"""MemLens's platform memory systems against the platforms' own code, case by case.

Every generated case (tests/reference/platform_cases.py) is replayed by MemLens as the CLI replays a
file (``python -m core replay FILE --memory n8n_window --set k=5``) and, at every turn, the history
MemLens sends must be what the platform's code sent, as recorded in tests/fixtures/reference/ (the
recording is checked against the live code by tests/memory/test_js_reference.py and
tests/memory/test_python_reference.py). n8n's and Flowise's cases are the OpenAI messages of the
generated conversation; the OpenAI Agents SDK's, LlamaIndex's and LangGraph's are the conversation as
the platform stored it (``stored``), read by MemLens's importer of that storage (``openai-agents``,
``llamaindex-chat-store``, ``langgraph-checkpoint``).

The memory systems are not written yet: until a system is registered, its cases are expected to
fail with :class:`MissingSystem` (``xfail(strict=True)``), and any other failure is a real one. When a
system lands its cases pass, the strict xfail turns that into a failure, and the marker comes off
(:data:`PENDING`).

What a system must do to pass, in the terms of :func:`memlens_turns`:

* read the case's settings through the replay command's options (:func:`memlens_config`:
  ``--memory NAME`` and one ``--set name=value`` per setting of :func:`memlens_settings`);
* at each turn with a question, give a ledger whose ``Replay.history_messages`` are, in order, the
  messages the platform sent before the question: role, text, tool calls (id, name, arguments as JSON),
  tool call id and whether it is reasoning, exactly (n8n's stored shapes included: a call per assistant
  message, empty call text, ``id`` in the arguments, the ``[Used tools: …]`` prefix, a partial message's
  last lines; an Agents SDK function call is an assistant message of one call and empty text);
* send a summary as one synthetic message (origin ``summary``) before the rest, with the messages
  it folded marked ``summarized`` in the ledger; when it folds the current question too, the
  summary ``covers`` the current turn and the question is not sent (Agentflow's summary buffer,
  langmem's summary).
"""

from __future__ import annotations

import json

import pytest

from core.io import import_text
from core.memory.replay import Replay
from core.model.conversation import REASONING
from core.model.ledger import SUMMARIZED, SUMMARY
from tests.reference.platform_cases import cases, conversations, openai_messages
from tests.reference.platform_outcomes import recorded
from tests.reference.python.recording import resolve

#: The memory system each driver mode is compared with.
SYSTEMS = {
    "window": "n8n_window",
    "agent": "n8n_agent",
    "buffer_window": "flowise_window",
    "agentflow": "flowise_agentflow",
    "session": "openai_agents",
    "buffer": "llamaindex_buffer",
    "memory": "llamaindex_memory",
    "summary": "langmem_summary",
    "trim": "langgraph_trim",
}
#: The systems not written yet: their cases are strict xfails (take a name out when its module lands).
PENDING: set[str] = set()
#: Where each platform's cases come from, and the issue that asks for its systems.
PLATFORMS = {"n8n": 54, "flowise": 54, "openai_agents": 53, "llamaindex": 53, "langgraph": 53}
#: The format MemLens imports a Python platform's stored conversation with.
STORAGE_FORMATS = {
    "openai_agents": "openai-agents",
    "llamaindex": "llamaindex-chat-store",
    "langgraph": "langgraph-checkpoint",
}
#: LlamaIndex's context window for a model that does not say (``DEFAULT_CONTEXT_WINDOW``: the mock model's).
LLAMAINDEX_CONTEXT_WINDOW = 3900


#: A platform setting's name in MemLens where it is a setting every config has under that name.
_OWN_NAMES = {"max_tokens": "max_history_tokens"}


class MissingSystem(LookupError):
    """The memory system a case needs is not registered."""


def memlens_settings(case: dict) -> dict[str, str]:
    """A case's platform settings as the memory system's ``--set`` values."""
    s = case["settings"]
    mode = case["mode"]
    if mode in ("window", "agent"):
        out = {"k": _number(s["k"])}
        if mode == "window":
            unwindowed = (s["memory"] == "postgres" and s["node_version"] < 1.1) or (
                s["memory"] == "redis" and s["node_version"] < 1.3
            )
            out["windowed"] = "false" if unwindowed else "true"
            out["storage"] = {"3.1": "four_messages", "3@2.2.0": "used_tools", "2": "input_output"}[s["agent"]]
        else:
            if s.get("max_tokens_from_memory") is not None:
                out["max_tokens_from_memory"] = str(s["max_tokens_from_memory"])
            out["counter"] = _counter(case)
        return out
    if mode == "buffer_window":
        out = {"k": s["k"]}
        if s.get("history"):
            out["prepend"] = json.dumps(s["history"], ensure_ascii=False)
        return out
    if mode == "session":
        out = {} if s["limit"] is None else {"limit": str(s["limit"])}
        if s.get("input_callback"):
            out["input_callback"] = "true"
        return out
    if mode == "buffer":
        return (
            {"context_window": str(LLAMAINDEX_CONTEXT_WINDOW)}
            if s["token_limit"] is None
            else {"token_limit": str(s["token_limit"])}
        )
    if mode == "memory":
        return {name: _number(s[name]) for name in ("token_limit", "chat_history_token_ratio", "token_flush_size")}
    # (A platform's max_tokens is max_history_tokens: max_tokens is every config's, what the reply may take.)
    if mode == "summary":
        return {
            _OWN_NAMES.get(name, name): str(s[name])
            for name in ("max_tokens", "max_tokens_before_summary", "max_summary_tokens")
            if s[name] is not None
        }
    if mode == "trim":
        return {"max_history_tokens": str(s["max_tokens"])}
    out = {"memory_type": s["memory_type"]}
    if "window_size" in s:
        out["window_size"] = _number(s["window_size"])
    if "max_token_limit" in s:
        out["max_token_limit"] = _number(s["max_token_limit"])
        out["counter"] = _counter(case)
    if s.get("system_message"):
        out["system_message"] = s["system_message"]
    return out


def _number(value) -> str:
    return str(int(value)) if float(value) == int(value) else str(value)


def _counter(case: dict) -> str:
    """GPT-2's vocabulary when the platform could download it, characters / 4 when it could not."""
    return "gpt2" if case["counter"] == "download" else "chars4"


def memlens_config(system: str, settings: dict[str, str], conversation):
    """The memory config ``python -m core replay FILE --memory SYSTEM --set k=v …`` replays with."""
    from core.cli.app import build_parser, config_from_args
    from core.memory.strategies import STRATEGIES

    if system not in STRATEGIES:
        raise MissingSystem(f"the {system} memory system is not registered in core/memory/strategies/")
    argv = ["replay", "case.json", "--memory", system]
    for name, value in settings.items():
        argv += ["--set", f"{name}={value}"]
    return config_from_args(build_parser().parse_args(argv), conversation)


def plain(message) -> dict:
    """A message MemLens sends, in the shape the drivers record it."""
    out: dict = {"role": message.role, "text": message.content}
    if message.tool_calls:
        out["calls"] = [
            {"id": c.id, "name": c.name, "args": json.loads(c.arguments or "{}")} for c in message.tool_calls
        ]
    if message.role == "tool":
        out["call_id"] = message.tool_call_id
    if message.kind == REASONING:
        out["reasoning"] = True
    return out


def memlens_turns(system: str, settings: dict[str, str], messages: list[dict]) -> list[dict]:
    """Per answered turn, what MemLens sends: ``{"history": [...], "query_sent": bool}``; a summary is
    ``{"role", "summary_of": n}`` (the messages it folded, the question included when it folded it)."""
    return replay_turns(system, settings, json.dumps(messages, ensure_ascii=False), "openai")


def replay_turns(system: str, settings: dict[str, str], text: str, fmt: str) -> list[dict]:
    """:func:`memlens_turns` for a conversation file of format ``fmt``."""
    conversation = import_text(text, name="case.json", fmt=fmt).conversations[0]
    replay = Replay(conversation, memlens_config(system, settings, conversation))
    out = []
    for position in conversation.answered_turns():
        ledger = replay.ledger(replay.numbers[position])
        summaries = [s for s in ledger.synthetic if s.origin == SUMMARY]
        swallowed = any(ledger.turn in s.covers for s in summaries)
        folded = sum(1 for e in ledger.entries if e.reason == SUMMARIZED) + swallowed
        history = [
            {"role": m.role, "summary_of": folded} if m.ref == SUMMARY else plain(m)
            for m in replay.history_messages(ledger)
        ]
        out.append({"history": history, "query_sent": not swallowed})
    return out


def platform_turns(case: dict, outcome: dict) -> list[dict]:
    """Per turn, what the platform sent, in the shape of :func:`memlens_turns`: an Agentflow node's
    memory holds the current input too, which is split off here (and so is the question every Python
    platform sends last, and the system prompt LlamaIndex's agent and langmem send first)."""
    if case["mode"] == "session":
        return [
            _split_question([_agents_item(i) for i in resolve(t["sent"], outcome["stored"])], turn)
            for turn, t in zip(case["turns"], outcome["turns"])
        ]
    if case["mode"] in ("buffer", "memory"):
        store = outcome["stored"]["store"]["conversation"]
        return [
            _split_question([_llamaindex_message(m) for m in resolve(t["sent"], store)][1:], turn)
            for turn, t in zip(case["turns"], outcome["turns"])
        ]
    if case["mode"] in ("summary", "trim"):
        return [_langgraph_turn(outcome, t["calls"][0], turn) for turn, t in zip(case["turns"], outcome["turns"])]
    out = []
    for turn, recorded_turn in zip(case["turns"], outcome["turns"]):
        history = [
            {"role": m["role"], "summary_of": m["summary_of"]} if "summary_of" in m else m
            for m in recorded_turn["sent"]
        ]
        query_sent = True
        if case["mode"] == "agentflow":
            last = history[-1] if history else None
            query_sent = bool(last and "summary_of" not in last and last == {"role": "user", "text": turn["input"]})
            history = history[:-1] if query_sent else history
            if case["settings"]["memory_type"] == "conversationSummary" and len(history) == 1:
                # One summary of every message, the question included, which is then sent again: the driver's
                # "summary i of N messages" folded the N - 1 earlier ones (the question, sent, is not counted).
                history = [{"role": history[0]["role"], "summary_of": _summary_size(history[0]["text"]) - 1}]
        out.append({"history": history, "query_sent": query_sent})
    return out


def _summary_size(text: str) -> int:
    """How many messages the Flowise driver's summary ``"summary i of N messages"`` folded."""
    return int(text.rsplit(" of ", 1)[1].split()[0])


def _split_question(history: list[dict], turn: dict) -> dict:
    query_sent = bool(history) and history[-1] == {"role": "user", "text": turn["input"]}
    return {"history": history[:-1] if query_sent else history, "query_sent": query_sent}


def _text(content) -> str:
    """A Responses message's text: a string, or its text parts joined as MemLens's reader joins them."""
    if isinstance(content, str):
        return content
    return "\n".join(p.get("text", "") for p in content if isinstance(p, dict) and "text" in p)


def _agents_item(item: dict) -> dict:
    """An Agents SDK item as the message it stands for."""
    kind = item.get("type")
    if kind == "function_call":
        return {
            "role": "assistant",
            "text": "",
            "calls": [{"id": item["call_id"], "name": item["name"], "args": json.loads(item["arguments"] or "{}")}],
        }
    if kind == "function_call_output":
        return {"role": "tool", "text": item["output"], "call_id": item["call_id"]}
    if kind == "reasoning":
        return {"role": "assistant", "text": "\n\n".join(s["text"] for s in item.get("summary", [])), "reasoning": True}
    return {"role": item["role"], "text": _text(item["content"])}


def _llamaindex_message(message: dict) -> dict:
    """A LlamaIndex message (its JSON) as the message it sends: its text blocks, its tool calls."""
    blocks = message["blocks"]
    out: dict = {"role": message["role"], "text": "\n".join(b["text"] for b in blocks if b["block_type"] == "text")}
    calls = [
        {"id": b["tool_call_id"], "name": b["tool_name"], "args": b["tool_kwargs"]}
        for b in blocks
        if b["block_type"] == "tool_call"
    ]
    if calls:
        out["calls"] = calls
    if message["role"] == "tool":
        out["call_id"] = message["additional_kwargs"].get("tool_call_id")
    return out


_LANGCHAIN_ROLES = {"human": "user", "ai": "assistant", "tool": "tool", "system": "system"}
_LANGMEM_SUMMARY = "Summary of the conversation so far: "


def _langgraph_turn(outcome: dict, call: list, turn: dict) -> dict:
    """A turn's first model call: the stored system message set aside, langmem's summary counted by the
    stored messages before the first one kept (the question too when nothing after the summary is)."""
    stored = outcome["stored"]["values"]["messages"]
    offset = 1 if stored and stored[0]["type"] == "system" else 0
    question = next(i for i, m in enumerate(stored) if m["type"] == "human" and m["content"] == turn["input"])
    sent = resolve(call, stored)
    history: list[dict] = []
    for position, m in zip(call, sent):
        if isinstance(position, int) and position < offset:
            continue
        if not isinstance(position, int) and m["type"] == "system" and m["content"].startswith(_LANGMEM_SUMMARY):
            first_kept = next((p for p in call if isinstance(p, int) and p >= offset), question + 1)
            history.append({"role": "system", "summary_of": first_kept - offset})
            continue
        out: dict = {"role": _LANGCHAIN_ROLES[m["type"]], "text": m["content"]}
        if m.get("tool_calls"):
            out["calls"] = [{"id": c["id"], "name": c["name"], "args": c["args"]} for c in m["tool_calls"]]
        if m["type"] == "tool":
            out["call_id"] = m["tool_call_id"]
        history.append(out)
    return _split_question(history, turn)


def _stored_conversation(platform: str, outcome: dict) -> str:
    return json.dumps(outcome["stored"], ensure_ascii=False)


def _groups():
    """The cases by memory system and conversation, one test each (a system's cases fail or pass together)."""
    groups: dict[tuple[str, str], list[tuple[str, str]]] = {}
    for platform in PLATFORMS:
        for name, case in cases(platform).items():
            if case["mode"] in SYSTEMS:  # (Simple Memory's lifetime over the clock is no replay setting)
                groups.setdefault((SYSTEMS[case["mode"]], case["conversation"]), []).append((platform, name))
    for (system, conversation), named in groups.items():
        issue = PLATFORMS[named[0][0]]
        marks = (
            [
                pytest.mark.xfail(
                    raises=MissingSystem,
                    strict=True,
                    reason=f"the {system} memory system is not written yet (issue {issue})",
                )
            ]
            if system in PENDING
            else []
        )
        yield pytest.param(named, id=f"{system}-{conversation}", marks=marks)


@pytest.fixture(scope="module")
def recordings():
    return {platform: recorded(platform)["outcomes"] for platform in PLATFORMS}


@pytest.mark.parametrize("named", list(_groups()))
def test_memlens_sends_what_the_platform_sent(recordings, named):
    every = {platform: cases(platform) for platform in {p for p, _ in named}}
    differ = []
    for platform, name in named:
        case = every[platform][name]
        if platform in STORAGE_FORMATS:
            ours = replay_turns(
                SYSTEMS[case["mode"]],
                memlens_settings(case),
                _stored_conversation(platform, recordings[platform][name]),
                STORAGE_FORMATS[platform],
            )
        else:
            ours = memlens_turns(
                SYSTEMS[case["mode"]], memlens_settings(case), openai_messages(conversations()[case["conversation"]])
            )
        theirs = platform_turns(case, recordings[platform][name])
        if len(ours) != len(theirs):
            differ.append(f"{name}: {len(ours)} turns, the platform's {len(theirs)}")
            continue
        for number, (mine, platform_turn) in enumerate(zip(ours, theirs), 1):
            if mine != platform_turn:
                differ.append(f"{name}, turn {number}: MemLens {mine} / {platform} {platform_turn}")
                break
    assert not differ, f"{len(differ)} of {len(named)} cases differ:\n" + "\n".join(differ[:5])


# -- the adapter itself, on what exists today ---------------------------------------------------------


def test_the_platform_side_splits_off_the_agentflow_input_and_keeps_a_summary_s_count(recordings):
    case = cases("flowise")["agentflow-plain-window1"]
    turns = platform_turns(case, recordings["flowise"]["agentflow-plain-window1"])
    plain_turns = conversations()["plain"]
    assert turns[2] == {"history": [{"role": "assistant", "text": plain_turns[1]["output"]}], "query_sent": True}
    swallowed = platform_turns(
        cases("flowise")["agentflow-plain-summary1-download"],
        recordings["flowise"]["agentflow-plain-summary1-download"],
    )
    assert swallowed[1] == {"history": [{"role": "system", "summary_of": 3}], "query_sent": False}


def test_the_memlens_side_reads_a_replay_as_the_platform_side_is_read():
    """With a memory that exists today (everything on the thread), the adapter gives each turn's earlier
    messages as the OpenAI conversation holds them."""
    from core.memory.config import MemoryConfig

    turns = conversations()["single_tools"]
    messages = openai_messages(turns)
    conversation = import_text(json.dumps(messages), name="case.json", fmt="openai").conversations[0]
    replay = Replay(conversation, MemoryConfig(strategy="buffer", granularity="all_messages"))
    ledger = replay.ledger(replay.numbers[conversation.answered_turns()[1]])
    history = [plain(m) for m in replay.history_messages(ledger)]
    assert history == [
        {"role": "user", "text": turns[0]["input"]},
        {
            "role": "assistant",
            "text": "",
            "calls": [{"id": "call_1_0_0", "name": "weather", "args": {"city": "Lisbon", "day": 1}}],
        },
        {"role": "tool", "text": turns[0]["rounds"][0][0]["result"], "call_id": "call_1_0_0"},
        {"role": "assistant", "text": turns[0]["output"]},
    ]


def test_a_missing_system_is_the_one_expected_failure():
    with pytest.raises(MissingSystem, match="no_such_system"):
        memlens_config("no_such_system", {"k": "5"}, None)


def test_every_case_names_a_system_and_its_settings():
    for platform in PLATFORMS:
        for case in cases(platform).values():
            if case["mode"] not in SYSTEMS:
                continue
            settings = memlens_settings(case)
            default = case["mode"] == "session" and case["settings"]["limit"] is None  # (the SDK's default: none)
            assert (
                SYSTEMS[case["mode"]] and (settings or default) and all(isinstance(v, str) for v in settings.values())
            )


def test_the_platform_side_reads_agents_sdk_items_as_the_messages_they_stand_for(recordings):
    case = cases("openai_agents")["session-parallel_calls-limit4"]
    turns = platform_turns(case, recordings["openai_agents"]["session-parallel_calls-limit4"])
    parallel = conversations()["parallel_calls"]
    assert turns[2] == {
        "history": [
            {
                "role": "assistant",
                "text": "",
                "calls": [{"id": "call_2_0_1", "name": "weather", "args": {"city": "Braga", "day": 1}}],
            },
            {"role": "tool", "text": parallel[1]["rounds"][0][1]["result"], "call_id": "call_2_0_1"},
            {"role": "assistant", "text": parallel[1]["output"]},
        ],
        "query_sent": True,
    }
    reasoning = platform_turns(
        cases("openai_agents")["session-reasoning-limit4"], recordings["openai_agents"]["session-reasoning-limit4"]
    )
    assert reasoning[1]["history"][0] == {
        "role": "assistant",
        "text": "round 1 of question 1: look it up",
        "reasoning": True,
    }


def test_the_platform_side_reads_llamaindex_messages_without_the_agent_s_system_prompt(recordings):
    name = "buffer-single_tools-limitNone"
    turns = platform_turns(cases("llamaindex")[name], recordings["llamaindex"][name])
    first = conversations()["single_tools"][0]
    assert turns[1] == {
        "history": [
            {"role": "user", "text": first["input"]},
            {
                "role": "assistant",
                "text": "",
                "calls": [{"id": "call_1_0_0", "name": "weather", "args": {"city": "Lisbon", "day": 1}}],
            },
            {"role": "tool", "text": first["rounds"][0][0]["result"], "call_id": "call_1_0_0"},
            {"role": "assistant", "text": first["output"]},
        ],
        "query_sent": True,
    }


def test_the_platform_side_counts_what_langmem_folded_and_a_swallowed_question(recordings):
    name = "summary-single_tools-max120-beforeNone-summary40-system"
    turns = platform_turns(cases("langgraph")[name], recordings["langgraph"][name])
    # Turn 4 keeps turn 3's answer: the 9 messages before it (turns 1 and 2, question 3 and its tool step) are folded.
    assert turns[3] == {
        "history": [
            {"role": "system", "summary_of": 9},
            {"role": "assistant", "text": conversations()["single_tools"][2]["output"]},
        ],
        "query_sent": True,
    }
    swallowed = platform_turns(
        cases("langgraph")["summary-long_human-system-exact"],
        recordings["langgraph"]["summary-long_human-system-exact"],
    )
    assert swallowed[0] == {"history": [{"role": "system", "summary_of": 1}], "query_sent": False}


@pytest.mark.parametrize(
    "platform, name",
    [
        ("openai_agents", "session-reasoning-limitNone"),
        ("openai_agents", "session-parallel_calls-limit-1"),
        ("llamaindex", "buffer-mixed-limitNone"),
        ("llamaindex", "memory-several_rounds-limit30000-ratio0.7-flush3000"),
        ("langgraph", "summary-mixed-max2000-beforeNone-summary256-system"),
        ("langgraph", "trim-plain-max300"),
    ],
)
def test_the_memlens_side_reads_an_imported_store_as_the_platform_side_is_read(recordings, platform, name):
    """Where the platform sent every earlier message, a memory that sends everything (what exists today)
    gives, turn by turn, what the platform side reads from the recording: the importers and the two
    sides of the adapter agree, so a difference left is the memory system's."""
    from core.memory.config import MemoryConfig

    case = cases(platform)[name]
    outcome = recordings[platform][name]
    conversation = import_text(
        _stored_conversation(platform, outcome), name="case.json", fmt=STORAGE_FORMATS[platform]
    ).conversations[0]
    # (Every message, empty answers too: these platforms send an empty answer as an empty message.)
    replay = Replay(conversation, MemoryConfig(strategy="buffer", granularity="all_messages", sends_empty=True))
    ours = [
        {"history": [plain(m) for m in replay.history_messages(replay.ledger(replay.numbers[p]))], "query_sent": True}
        for p in conversation.answered_turns()
    ]
    assert ours == platform_turns(case, outcome)
