"""Agent runs for the differential compaction tests: long tool runs, parallel tool calls, reloads
across many turns, usage reported or not, budgets on both sides of the target.

Each builder returns a fixture in the shape :mod:`tests.memory.harness_reference` documents; the
contents are synthetic (numbered rows and items), written for these tests.
"""

from __future__ import annotations

import json


def target(fixture: dict) -> int:
    """The compaction target Dify derives from the fixture's window and max_tokens."""
    context, max_tokens = fixture["context_window"], fixture.get("max_tokens", 0)
    value = context * 4 // 5
    return min(value, context - max_tokens) if max_tokens > 0 else value


def summary_text(k: int, chars: int) -> str:
    """The text both sides' test summarisers answer with at the k-th summary (1-based)."""
    base = f"Summary {k}. "
    return (base * (chars // len(base) + 1))[:chars].strip()


def provider_input_tokens(messages: list[dict], instructions: str) -> int:
    """What the fixtures' pretend provider reports as input tokens (``usage: "auto"``): a denser
    count than chars/4 (3 characters a token), so the anchored estimate and chars/4 disagree."""
    chars = len(instructions) + sum(len(x) for m in messages for p in m["parts"] for x in p[1:])
    return chars // 3


def reply_tokens(reply: dict) -> int:
    chars = len(reply.get("text", "")) + sum(len(c["name"]) + len(c["args"]) for c in reply.get("calls", []))
    return chars // 3 + 1


def _result(tag: str, size: int) -> str:
    row = f"{tag} row; "
    return (row * (size // len(row) + 1))[:size]


def _call(cid: str, key: str, size: int, name: str = "lookup") -> dict:
    return {"id": cid, "name": name, "args": json.dumps({"key": key}), "result": _result(cid, size)}


def long_tool_run(calls: int = 30, size: int = 400, context: int = 2500, usage="auto") -> dict:
    """One turn whose agent calls a tool many times in a row, saying why each time: compaction fires
    inside the tool loop, clearing first, then summarising."""
    steps = [
        {
            "text": f"Item {k} next: " + "checking the shelf count again. " * 5,
            "calls": [_call(f"t1_{k}", f"item {k}", size)],
            "usage": usage,
        }
        for k in range(calls)
    ]
    steps.append({"text": "All items checked.", "usage": usage})
    return {
        "context_window": context,
        "max_tokens": 0,
        "instructions": "You are a stock-checking agent.",
        "summary_chars": 160,
        "turns": [{"prompt": "Please check every item in the catalogue.", "steps": steps}],
    }


def parallel_tools(
    turns: int = 5, width: int = 3, rounds: int = 2, size: int = 300, context: int = 1500, usage="auto"
) -> dict:
    """Several calls per reply (their results come back together): one pydantic-ai message each."""
    out = []
    for t in range(1, turns + 1):
        steps = [
            {
                "text": f"Round {r} of batch {t}: " + "asking for stock and price. " * 4,
                "calls": [
                    _call(f"t{t}_{r}_{k}", f"item {t}.{r}.{k}", size, name=("lookup", "price")[k % 2])
                    for k in range(width)
                ],
                "usage": usage,
            }
            for r in range(rounds)
        ]
        steps.append({"text": f"Turn {t}: everything is in stock.", "usage": usage})
        out.append({"prompt": f"Check batch {t}, please.", "steps": steps})
    return {
        "context_window": context,
        "max_tokens": 0,
        "instructions": "You check stock in parallel.",
        "summary_chars": 200,
        "turns": out,
    }


def reloads(
    turns: int = 14,
    tools: int = 1,
    size: int = 250,
    answer: int = 300,
    context: int = 1500,
    max_tokens: int = 0,
    usage="auto",
) -> dict:
    """Many short turns: each run starts from the history the previous one stored, so summaries are
    made again and again (and the earlier ones ride along with the first user message)."""
    out = []
    for t in range(1, turns + 1):
        steps = [{"calls": [_call(f"t{t}_{k}", f"order {t}{k}", size)], "usage": usage} for k in range(tools)]
        steps.append({"text": f"Order {t} is on its way. " + "Details follow. " * (answer // 16), "usage": usage})
        prompt = "Hi, I'm Dana and my account is AB12. Where is order 1?" if t == 1 else f"And order {t}?"
        out.append({"prompt": prompt, "steps": steps})
    return {
        "context_window": context,
        "max_tokens": max_tokens,
        "instructions": "You are a support agent.",
        "summary_chars": 240,
        "turns": out,
    }


def under_the_target() -> dict:
    """The same run as :func:`reloads` with a window large enough: nothing is ever compacted."""
    return reloads(turns=6, context=200_000)


def clearing_is_enough() -> dict:
    """Big tool results, short text: clearing old results alone brings the estimate under the target."""
    return reloads(turns=8, tools=2, size=900, answer=20, context=4000)


FIXTURES = {
    "long_tool_run": long_tool_run,
    "long_tool_run_without_usage": lambda: long_tool_run(usage=None),
    # The provider's number says "over" while the characters say "under": the anchor decides.
    # (Kept short: the harness counts its summariser calls against pydantic-ai's 50-request limit.)
    "long_tool_run_reported_usage_fixed": lambda: long_tool_run(calls=12, usage=[2100, 20]),
    "parallel_tools": parallel_tools,
    "parallel_tools_wide": lambda: parallel_tools(turns=4, width=5, rounds=3, size=200, context=4000),
    "reloads": reloads,
    "reloads_without_usage": lambda: reloads(context=1200, usage=None),
    "reloads_max_tokens": lambda: reloads(context=2400, max_tokens=1000),
    "reloads_with_tools": lambda: reloads(turns=12, tools=3, size=300, answer=120, context=1800),
    "under_the_target": under_the_target,
    "clearing_is_enough": clearing_is_enough,
}
