"""MemLens's n8n and Flowise memory systems against the JavaScript those platforms run, case by case.

Every generated case (tests/reference/platform_cases.py) is replayed by MemLens as the CLI replays a
file (``python -m core replay FILE --memory n8n_window --set k=5``) and, at every turn, the history
MemLens sends must be what the platform's code sent, as recorded in tests/fixtures/reference/ (the
recording is checked against the live JavaScript by tests/memory/test_js_reference.py).

The four memory systems are not written yet: until a system is registered, its cases are expected to
fail with :class:`MissingSystem` (``xfail(strict=True)``), and any other failure is a real one. When a
system lands its cases pass, the strict xfail turns that into a failure, and the marker comes off
(:data:`PENDING`).

What a system must do to pass, in the terms of :func:`memlens_turns`:

* read the case's settings through the replay command's options (:func:`memlens_config`:
  ``--memory NAME`` and one ``--set name=value`` per setting of :func:`memlens_settings`);
* at each answered turn, give a ledger whose ``Replay.history_messages`` are, in order, the messages
  the platform sent: role, text, tool calls (id, name, arguments as JSON) and tool call id, exactly
  (n8n's stored shapes included: a call per assistant message, empty call text, ``id`` in the
  arguments, the ``[Used tools: …]`` prefix, a partial message's last lines);
* send a summary as one synthetic message (origin ``summary``) before the rest, with the messages
  it folded marked ``summarized`` in the ledger; when it folds the current question too, the
  summary ``covers`` the current turn and the question is not sent (Agentflow's summary buffer).
"""

from __future__ import annotations

import json
import pytest

from core.io import import_text
from core.memory.replay import Replay
from core.model.ledger import SUMMARIZED, SUMMARY
from tests.reference.platform_cases import cases, conversations, openai_messages
from tests.reference.platform_outcomes import recorded

#: The memory system each driver mode is compared with.
SYSTEMS = {"window": "n8n_window", "agent": "n8n_agent", "buffer_window": "flowise_window",
           "agentflow": "flowise_agentflow"}
#: The systems not written yet: their cases are strict xfails (take a name out when its module lands).
PENDING = {"n8n_window", "n8n_agent", "flowise_window", "flowise_agentflow"}


class MissingSystem(LookupError):
    """The memory system a case needs is not registered."""


def memlens_settings(case: dict) -> dict[str, str]:
    """A case's platform settings as the memory system's ``--set`` values."""
    s = case["settings"]
    mode = case["mode"]
    if mode in ("window", "agent"):
        out = {"k": _number(s["k"])}
        if mode == "window":
            unwindowed = (s["memory"] == "postgres" and s["node_version"] < 1.1) or \
                (s["memory"] == "redis" and s["node_version"] < 1.3)
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
        out["calls"] = [{"id": c.id, "name": c.name, "args": json.loads(c.arguments or "{}")}
                        for c in message.tool_calls]
    if message.role == "tool":
        out["call_id"] = message.tool_call_id
    return out


def memlens_turns(system: str, settings: dict[str, str], messages: list[dict]) -> list[dict]:
    """Per answered turn, what MemLens sends: ``{"history": [...], "query_sent": bool}``; a summary is
    ``{"role", "summary_of": n}`` (the messages it folded, the question included when it folded it)."""
    conversation = import_text(json.dumps(messages, ensure_ascii=False), name="case.json", fmt="openai").conversations[0]
    replay = Replay(conversation, memlens_config(system, settings, conversation))
    out = []
    for position in conversation.answered_turns():
        ledger = replay.ledger(replay.numbers[position])
        summaries = [s for s in ledger.synthetic if s.origin == SUMMARY]
        swallowed = any(ledger.turn in s.covers for s in summaries)
        folded = sum(1 for e in ledger.entries if e.reason == SUMMARIZED) + swallowed
        history = [{"role": m.role, "summary_of": folded} if m.ref == SUMMARY else plain(m)
                   for m in replay.history_messages(ledger)]
        out.append({"history": history, "query_sent": not swallowed})
    return out


def platform_turns(case: dict, outcome: dict) -> list[dict]:
    """Per turn, what the platform sent, in the shape of :func:`memlens_turns`: an Agentflow node's
    memory holds the current input too, which is split off here."""
    out = []
    for turn, recorded_turn in zip(case["turns"], outcome["turns"]):
        history = [{"role": m["role"], "summary_of": m["summary_of"]} if "summary_of" in m else m
                   for m in recorded_turn["sent"]]
        query_sent = True
        if case["mode"] == "agentflow":
            last = history[-1] if history else None
            query_sent = bool(last and "summary_of" not in last and last == {"role": "user", "text": turn["input"]})
            history = history[:-1] if query_sent else history
        out.append({"history": history, "query_sent": query_sent})
    return out


def _groups():
    """The cases by memory system and conversation, one test each (a system's cases fail or pass together)."""
    groups: dict[tuple[str, str], list[tuple[str, str]]] = {}
    for platform in ("n8n", "flowise"):
        for name, case in cases(platform).items():
            if case["mode"] in SYSTEMS:  # (Simple Memory's lifetime over the clock is no replay setting)
                groups.setdefault((SYSTEMS[case["mode"]], case["conversation"]), []).append((platform, name))
    for (system, conversation), named in groups.items():
        marks = [pytest.mark.xfail(raises=MissingSystem, strict=True, reason=f"the {system} memory system is not "
                                   "written yet (issue 54)")] if system in PENDING else []
        yield pytest.param(named, id=f"{system}-{conversation}", marks=marks)


@pytest.fixture(scope="module")
def recordings():
    return {platform: recorded(platform)["outcomes"] for platform in ("n8n", "flowise")}


@pytest.mark.parametrize("named", list(_groups()))
def test_memlens_sends_what_the_platform_sent(recordings, named):
    every = {platform: cases(platform) for platform in {p for p, _ in named}}
    differ = []
    for platform, name in named:
        case = every[platform][name]
        ours = memlens_turns(SYSTEMS[case["mode"]], memlens_settings(case),
                             openai_messages(conversations()[case["conversation"]]))
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
    swallowed = platform_turns(cases("flowise")["agentflow-plain-summary1-download"],
                               recordings["flowise"]["agentflow-plain-summary1-download"])
    assert swallowed[1] == {"history": [{"role": "system", "summary_of": 3}], "query_sent": False}


def test_the_memlens_side_reads_a_replay_as_the_platform_side_is_read():
    """With a memory that exists today (everything on the thread), the adapter gives each turn's earlier
    messages as the OpenAI conversation holds them."""
    from core.memory.replay import MemoryConfig

    turns = conversations()["single_tools"]
    messages = openai_messages(turns)
    conversation = import_text(json.dumps(messages), name="case.json", fmt="openai").conversations[0]
    replay = Replay(conversation, MemoryConfig(strategy="buffer", granularity="all_messages"))
    ledger = replay.ledger(replay.numbers[conversation.answered_turns()[1]])
    history = [plain(m) for m in replay.history_messages(ledger)]
    assert history == [{"role": "user", "text": turns[0]["input"]},
                       {"role": "assistant", "text": "", "calls": [{"id": "call_1_0_0", "name": "weather",
                                                                     "args": {"city": "Lisbon", "day": 1}}]},
                       {"role": "tool", "text": turns[0]["rounds"][0][0]["result"], "call_id": "call_1_0_0"},
                       {"role": "assistant", "text": turns[0]["output"]}]


def test_a_missing_system_is_the_one_expected_failure():
    with pytest.raises(MissingSystem, match="no_such_system"):
        memlens_config("no_such_system", {"k": "5"}, None)


def test_every_case_names_a_system_and_its_settings():
    for platform in ("n8n", "flowise"):
        for case in cases(platform).values():
            if case["mode"] not in SYSTEMS:
                continue
            settings = memlens_settings(case)
            assert SYSTEMS[case["mode"]] and settings and all(isinstance(v, str) for v in settings.values())
