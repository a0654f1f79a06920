"""Generated conversations and memory settings for n8n's and Flowise's chat memory.

Plain Python only (no MemLens import), so the refresh script runs it anywhere. A conversation is a
list of turns ``{"input", "rounds", "output"}``: ``rounds`` are the model replies of the turn that
called tools, each the list of its calls ``{"id", "name", "args", "result", "text"}`` (parallel calls
share a round; ``text`` is what the model wrote beside its calls, in the round's first call), and
``output`` the final answer ("" when the agent answered nothing). :func:`openai_messages` writes a
conversation as the OpenAI chat messages MemLens reads; the drivers under ``tests/reference/js/``
take the turns themselves.

A tool's ``result`` is what the model read back, written as n8n hands it over: the JSON of the tool
node's output items (``[{"response": …}]``, compact, as ``JSON.stringify`` writes it).

:func:`cases` gives every case of a platform, named; ``"mode"`` says which memory the case runs:
n8n's ``window`` (what the memory node's window loads, before any agent reads it) and ``agent``
(what the Tools Agent sends after its own clean-up and ``maxTokensFromMemory`` trim) and ``lifetime``
(Simple Memory's own buffers over time: a turn's ``minute`` and the node's ``k`` then), Flowise's
``buffer_window`` (the Buffer Window Memory node) and ``agentflow`` (an Agentflow v2 Agent node's
memory). Cases are grouped by ``counter`` (whether the tokenizer download succeeds), which is one
setting per driver run.
"""

from __future__ import annotations

import hashlib
import json

_CITIES = ["Porto", "Lisbon", "Faro", "Braga", "Coimbra", "Evora", "Aveiro", "Sintra", "Nazare", "Tavira"]


def result(text: str) -> str:
    return json.dumps([{"response": text}], ensure_ascii=False, separators=(",", ":"))


def call(cid: str, name: str, args: dict, answer: str, text: str = "") -> dict:
    out = {"id": cid, "name": name, "args": args, "result": result(answer)}
    if text:
        out["text"] = text
    return out


def ask(i: int, extra: str = "") -> str:
    return f"question {i}: what about {_CITIES[i % len(_CITIES)]}?{extra}"


def plain_turn(i: int, output: str | None = None) -> dict:
    return {
        "input": ask(i),
        "rounds": [],
        "output": f"answer {i} about {_CITIES[i % len(_CITIES)]}" if output is None else output,
    }


def tool_turn(i: int, rounds: int = 1, parallel: int = 1, output: str | None = None, text: str = "") -> dict:
    city = _CITIES[i % len(_CITIES)]
    turn_rounds = []
    for r in range(rounds):
        calls = [
            call(
                f"call_{i}_{r}_{p}",
                "weather" if r == 0 else "book",
                {"city": _CITIES[(i + p) % len(_CITIES)], "day": r + 1},
                f"{'sunny' if p % 2 == 0 else 'rain'} in {_CITIES[(i + p) % len(_CITIES)]}, day {r + 1}",
                text if p == 0 else "",
            )
            for p in range(parallel)
        ]
        turn_rounds.append(calls)
    return {
        "input": ask(i),
        "rounds": turn_rounds,
        "output": f"done with {city} ({rounds} round{'s' if rounds != 1 else ''})" if output is None else output,
    }


def long_turn(i: int, lines: int) -> dict:
    body = "\n".join(f"note {i}.{k}: keep {_CITIES[(i + k) % len(_CITIES)]} in mind" for k in range(1, lines + 1))
    return {"input": f"{ask(i)}\n{body}", "rounds": [], "output": f"noted {lines} lines"}


def conversations() -> dict[str, list[dict]]:
    """The generated conversations, by name."""
    return {
        "plain": [plain_turn(i) for i in range(1, 8)],
        "single_tools": [
            tool_turn(1),
            plain_turn(2),
            tool_turn(3, text="Let me check."),
            plain_turn(4),
            tool_turn(5),
            plain_turn(6),
            plain_turn(7),
        ],
        "parallel_calls": [
            plain_turn(1),
            tool_turn(2, parallel=2),
            plain_turn(3),
            tool_turn(4, parallel=3),
            tool_turn(5, parallel=2, text="Checking both."),
            plain_turn(6),
        ],
        "several_rounds": [
            tool_turn(1, rounds=2),
            plain_turn(2),
            tool_turn(3, rounds=3, parallel=2),
            plain_turn(4),
            tool_turn(5, rounds=2),
            plain_turn(6),
        ],
        "empty_outputs": [
            plain_turn(1),
            plain_turn(2, output=""),
            tool_turn(3, output=""),
            plain_turn(4),
            tool_turn(5),
            plain_turn(6, output=""),
            plain_turn(7),
        ],
        "long_human": [
            plain_turn(1),
            long_turn(2, 6),
            plain_turn(3),
            long_turn(4, 12),
            tool_turn(5),
            long_turn(6, 3),
            plain_turn(7),
        ],
        "mixed": [
            long_turn(1, 4),
            tool_turn(2, parallel=2),
            plain_turn(3, output=""),
            tool_turn(4, rounds=2),
            plain_turn(5),
            tool_turn(6, output=""),
            long_turn(7, 8),
            plain_turn(8),
        ],
    }


def openai_messages(turns: list[dict]) -> list[dict]:
    """The conversation as OpenAI chat messages: each turn's question, each round's assistant message
    with its calls and their results, and the final answer ("" when the agent answered nothing)."""
    out: list[dict] = []
    for turn in turns:
        out.append({"role": "user", "content": turn["input"]})
        for calls in turn["rounds"]:
            out.append(
                {
                    "role": "assistant",
                    "content": calls[0].get("text", ""),
                    "tool_calls": [
                        {
                            "id": c["id"],
                            "type": "function",
                            "function": {"name": c["name"], "arguments": json.dumps(c["args"])},
                        }
                        for c in calls
                    ],
                }
            )
            out.extend({"role": "tool", "tool_call_id": c["id"], "content": c["result"]} for c in calls)
        out.append({"role": "assistant", "content": turn["output"]})
    return out


def text_turns(turns: list[dict]) -> list[dict]:
    """The turns as Flowise keeps them: the question and the final answer (tool calls are not messages)."""
    return [{"input": t["input"], "output": t["output"]} for t in turns]


# n8n's Context Window Length at every boundary: 0 (no window at all), 1, the default 5, windows
# that end inside a tool round, a fraction (a number field: 2.5 gives the last 5 messages) and a
# negative value (slice(2): all but the first two).
N8N_K = (0, 1, 2, 3, 4, 5, 6, 2.5, -1)
#: The memory node behind the window: Simple Memory (every version windowed), Postgres (v1.0 not
#: windowed) and Redis (before v1.3 not windowed); each with the agent release that writes to it.
N8N_STORES = (("simple", 1.3), ("postgres", 1.0), ("postgres", 1.3), ("redis", 1.2), ("redis", 1.5))
#: The agent writing the memory: the Tools Agent V3 of 2.41.1 (tool rounds as messages), of 2.2.0
#: (the "[Used tools: …]" prefix) and a V1/V2 agent (an AgentExecutor: input and output only).
N8N_AGENTS = ("3.1", "3@2.2.0", "2")
N8N_MAX_TOKENS = (None, 1, 6, 12, 25, 40, 70, 120)


def _n8n_cases() -> dict[str, dict]:
    convs = conversations()
    out: dict[str, dict] = {}

    def add(name: str, mode: str, settings: dict, conv: str, counter: str = "download") -> None:
        out[name] = {"mode": mode, "settings": settings, "conversation": conv, "counter": counter, "turns": convs[conv]}

    for conv in convs:
        for k in N8N_K:
            add(
                f"window-{conv}-simple-k{k}",
                "window",
                {"memory": "simple", "node_version": 1.3, "k": k, "agent": "3.1"},
                conv,
            )
        for memory, version in N8N_STORES[1:]:
            add(
                f"window-{conv}-{memory}{version}-k3",
                "window",
                {"memory": memory, "node_version": version, "k": 3, "agent": "3.1"},
                conv,
            )
        for agent in N8N_AGENTS[1:]:
            for k in (2, 5):
                add(
                    f"window-{conv}-agent{agent}-k{k}",
                    "window",
                    {"memory": "simple", "node_version": 1.3, "k": k, "agent": agent},
                    conv,
                )
    # Simple Memory's lifetime: a buffer idle for more than an hour is dropped (exactly an hour is not),
    # and the window is the Context Window Length the buffer was created with.
    plain = [{"input": t["input"], "output": t["output"]} for t in convs["plain"]]
    out["lifetime-idle-hour"] = {
        "mode": "lifetime",
        "settings": {"node_version": 1.3},
        "conversation": "plain",
        "counter": "download",
        "turns": [{**t, "minute": m, "k": 5} for t, m in zip(plain, (0, 10, 20, 81, 90, 150, 211))],
    }
    out["lifetime-k-changed"] = {
        "mode": "lifetime",
        "settings": {"node_version": 1.3},
        "conversation": "plain",
        "counter": "download",
        "turns": [
            {**t, "minute": m, "k": k}
            for t, (m, k) in zip(
                plain * 2, [(0, 1), (1, 1), (2, 1), (3, 5), (4, 5), (70, 5), (71, 5), (72, 5), (73, 5)]
            )
        ],
    }
    for conv in ("parallel_calls", "several_rounds", "long_human", "mixed"):
        for k in (5, 0):
            for limit in N8N_MAX_TOKENS:
                counters = ("download", "unreachable") if conv in ("long_human", "mixed") else ("download",)
                for counter in counters:
                    add(
                        f"agent-{conv}-k{k}-max{limit}-{counter}",
                        "agent",
                        {
                            "memory": "simple",
                            "node_version": 1.3,
                            "k": k,
                            "agent": "3.1",
                            "max_tokens_from_memory": limit,
                            "model": "gpt-4o-mini",
                        },
                        conv,
                        counter,
                    )
    return out


# Flowise's Size as the node reads it (parseInt(k, 10)): every boundary, the default "4", "0" and a
# negative number (nothing), an empty field (NaN: everything) and a fraction ("2.5" is 2).
FLOWISE_K = ("0", "1", "2", "3", "4", "6", "", "2.5", "-1")
FLOWISE_HISTORY = [
    {"role": "userMessage", "content": "I am Dana, from the earlier chat."},
    {"role": "apiMessage", "content": "Hello again, Dana."},
]
AGENTFLOW_WINDOW = (1, 2, 3, 20, 0)
AGENTFLOW_LIMITS = (1, 15, 40, 80, 150, 0)


def _flowise_cases() -> dict[str, dict]:
    convs = conversations()
    out: dict[str, dict] = {}

    def add(name: str, mode: str, settings: dict, conv: str, counter: str = "download") -> None:
        out[name] = {
            "mode": mode,
            "settings": settings,
            "conversation": conv,
            "counter": counter,
            "turns": text_turns(convs[conv]),
        }

    for conv in convs:
        for k in FLOWISE_K:
            add(f"buffer-{conv}-k{k or 'empty'}", "buffer_window", {"k": k}, conv)
        add(f"buffer-{conv}-k2-history", "buffer_window", {"k": "2", "history": FLOWISE_HISTORY}, conv)
        add(f"agentflow-{conv}-all", "agentflow", {"memory_type": "allMessages"}, conv)
        for n in AGENTFLOW_WINDOW:
            add(f"agentflow-{conv}-window{n}", "agentflow", {"memory_type": "windowSize", "window_size": n}, conv)
    for conv in ("plain", "empty_outputs", "long_human", "mixed"):
        for limit in AGENTFLOW_LIMITS:
            for system in ("", "You are a travel assistant."):
                for counter in ("download", "unreachable"):
                    add(
                        f"agentflow-{conv}-summary{limit}{'-system' if system else ''}-{counter}",
                        "agentflow",
                        {
                            "memory_type": "conversationSummaryBuffer",
                            "max_token_limit": limit,
                            "system_message": system,
                            "model": "gpt-4o-mini",
                        },
                        conv,
                        counter,
                    )
    add("agentflow-plain-summary-all", "agentflow", {"memory_type": "conversationSummary"}, "plain")
    return out


def approval_turn(i: int, approval: str, parallel: int = 1) -> dict:
    """A tool turn whose calls wait for a person's approval (the Agents SDK's ``needs_approval``): ``never``
    leaves the calls unanswered (the run stops at them; the next question starts a new run), ``after_next``
    approves them once the next turn has run, so their results and this turn's answer are stored after it."""
    turn = tool_turn(i, parallel=parallel)
    for c in turn["rounds"][0]:
        c["approval"] = approval
    return turn


def reasoning_turn(i: int, rounds: int = 1, parallel: int = 1) -> dict:
    """A tool turn whose model reasons before each round (a Responses ``reasoning`` item, its summary text)."""
    turn = tool_turn(i, rounds=rounds, parallel=parallel)
    for r, calls in enumerate(turn["rounds"]):
        calls[0]["reasoning"] = f"round {r + 1} of question {i}: look it up"
    return turn


def agents_conversations() -> dict[str, list[dict]]:
    """The generated conversations, and two the Agents SDK alone can write: results that never came (an
    approval left pending) or came after the next turn (approved late), and reasoning before each call."""
    return {
        **conversations(),
        "pending_results": [
            plain_turn(1),
            approval_turn(2, "never"),
            plain_turn(3),
            approval_turn(4, "after_next"),
            plain_turn(5),
            tool_turn(6, parallel=2),
            approval_turn(7, "never", parallel=2),
            plain_turn(8),
            plain_turn(9),
        ],
        "reasoning": [
            reasoning_turn(1),
            plain_turn(2),
            reasoning_turn(3, rounds=2, parallel=2),
            plain_turn(4),
            reasoning_turn(5),
            plain_turn(6),
        ],
    }


# An Agents SDK session's limit counts items, at every boundary: None (everything, the default), 0
# (nothing: SQLite's LIMIT 0), a negative number (SQLite's LIMIT -1: everything) and 1 to 12 items, which
# end inside tool rounds of every size.
AGENTS_LIMITS = (None, 0, -1, 1, 2, 3, 4, 5, 6, 7, 8, 10, 12)


def _openai_agents_cases() -> dict[str, dict]:
    convs = agents_conversations()
    out: dict[str, dict] = {}
    for conv in convs:
        for limit in AGENTS_LIMITS:
            out[f"session-{conv}-limit{limit}"] = {
                "mode": "session",
                "settings": {"limit": limit},
                "conversation": conv,
                "counter": "items",
                "turns": convs[conv],
            }
    # A session_input_callback (here one that keeps what it is given) turns off the output half of the
    # orphan pass: a result whose call the limit cut is sent.
    for conv in ("parallel_calls", "pending_results", "reasoning"):
        for limit in (None, 3, 5):
            out[f"session-{conv}-limit{limit}-callback"] = {
                "mode": "session",
                "settings": {"limit": limit, "input_callback": "keep"},
                "conversation": conv,
                "counter": "items",
                "turns": convs[conv],
            }
    return out


# ChatMemoryBuffer's token_limit: the default (0.75 of the model's context window; a mock model's is
# 3,900) and limits that cut every kind of message, down to one below the newest question alone.
LLAMAINDEX_BUFFER_LIMITS = (None, 1, 12, 25, 40, 60, 90, 130, 200, 400)
# Memory: token_limit x chat_history_token_ratio is what the chat history may hold; token_flush_size how
# much is flushed at a time (an over-large one is 10% of token_limit).
LLAMAINDEX_MEMORY = (
    (30000, 0.7, 3000),
    (100, 0.7, 10),
    (100, 0.7, 30),
    (100, 0.5, 5),
    (60, 0.7, 20),
    (200, 0.3, 15),
    (40, 1.0, 1),
    (150, 0.7, 400),
    (20, 0.7, 5),
)
LLAMAINDEX_SYSTEM = "You are a travel assistant."


def _llamaindex_cases() -> dict[str, dict]:
    convs = conversations()
    out: dict[str, dict] = {}
    for conv in convs:
        for limit in LLAMAINDEX_BUFFER_LIMITS:
            out[f"buffer-{conv}-limit{limit}"] = {
                "mode": "buffer",
                "settings": {"token_limit": limit},
                "conversation": conv,
                "counter": "cl100k",
                "turns": convs[conv],
            }
        for limit, ratio, flush in LLAMAINDEX_MEMORY:
            out[f"memory-{conv}-limit{limit}-ratio{ratio}-flush{flush}"] = {
                "mode": "memory",
                "settings": {"token_limit": limit, "chat_history_token_ratio": ratio, "token_flush_size": flush},
                "conversation": conv,
                "counter": "cl100k",
                "turns": convs[conv],
            }
    return out


# langmem's SummarizationNode before every model call: (max_tokens, max_tokens_before_summary,
# max_summary_tokens), counted approximately (count_tokens_approximately); with a system message whose
# tokens come off the budget, one that leaves exactly none (the latest question is summarised too) and
# one that leaves less than none (nothing is ever summarised).
LANGMEM_LIMITS = (
    (2000, None, 256),
    (120, None, 40),
    (120, 60, 40),
    (200, 100, 60),
    (80, None, 20),
    (80, 40, 20),
    (300, 150, 100),
    (60, 30, 10),
    (40, None, 10),
)
LANGGRAPH_SYSTEM = "You are a travel assistant."
# The pre_model_hook trim of LangGraph's documentation: trim_messages(strategy="last", start_on="human",
# end_on=("human", "tool"), token_counter=count_tokens_approximately) at these max_tokens; an empty trim
# sends every message instead.
LANGGRAPH_TRIM = (1, 8, 20, 40, 70, 100, 150, 300)


def _langgraph_cases() -> dict[str, dict]:
    convs = conversations()
    out: dict[str, dict] = {}
    for conv in convs:
        for max_tokens, before, summary in LANGMEM_LIMITS:
            for system in ("", LANGGRAPH_SYSTEM):
                out[f"summary-{conv}-max{max_tokens}-before{before}-summary{summary}{'-system' if system else ''}"] = {
                    "mode": "summary",
                    "settings": {
                        "max_tokens": max_tokens,
                        "max_tokens_before_summary": before,
                        "max_summary_tokens": summary,
                        "system": system,
                    },
                    "conversation": conv,
                    "counter": "approximate",
                    "turns": convs[conv],
                }
        for max_tokens in LANGGRAPH_TRIM:
            out[f"trim-{conv}-max{max_tokens}"] = {
                "mode": "trim",
                "settings": {"max_tokens": max_tokens},
                "conversation": conv,
                "counter": "approximate",
                "turns": convs[conv],
            }
    # The system message takes the whole budget: max_tokens - max_summary_tokens is its own count (the
    # latest question is summarised with the rest), or one less (nothing is ever summarised).
    for name, max_tokens in (("exact", 42), ("over", 41)):
        out[f"summary-long_human-system-{name}"] = {
            "mode": "summary",
            "settings": {
                "max_tokens": max_tokens,
                "max_tokens_before_summary": 1,
                "max_summary_tokens": 10,
                "system": LANGGRAPH_SYSTEM * 4,
            },
            "conversation": "long_human",
            "counter": "approximate",
            "turns": convs["long_human"],
        }
    return out


def cases(platform: str) -> dict[str, dict]:
    """Every case of a platform (``n8n``, ``flowise``, ``openai_agents``, ``llamaindex`` or ``langgraph``), by name."""
    return {
        "n8n": _n8n_cases,
        "flowise": _flowise_cases,
        "openai_agents": _openai_agents_cases,
        "llamaindex": _llamaindex_cases,
        "langgraph": _langgraph_cases,
    }[platform]()


def fingerprint(case: dict) -> str:
    """A short hash of what a case feeds the driver, so a recorded outcome is known to be for this case."""
    fed = {key: case[key] for key in ("mode", "settings", "counter", "turns")}
    return hashlib.sha256(json.dumps(fed, sort_keys=True).encode()).hexdigest()[:16]
