"""The synthetic conversations the benchmarks measure, and the floor they are measured against.

Messages of varied lengths (log-normal word counts), every text distinct, a tool round every
seventh turn; optionally a stated fact every 40 turns, so fact tracking has something to track.
"""

from __future__ import annotations

import random
import time

from core.conversation import ANSWER, QUERY, TOOL_CALL, TOOL_RESULT, Conversation, Message, ToolCall, Turn
from core.tokens import TokenCounter, _encoding

WORDS = ("memory window token budget turn branch answer query model context node ledger history kept dropped "
         "reason tool result summary thread user assistant system prompt Lisbon Dana order vegetarian booking "
         "number 4411 7730 train palace sea coast evening morning ticket reference colour green window").split()


def build_conversation(turns: int, seed: int = 7, facts: tuple[str, ...] = ()) -> Conversation:
    rng = random.Random(seed)

    def text(lo: int, hi: int) -> str:
        n = int(rng.lognormvariate(0, 1) * lo) % hi + 1
        return " ".join(rng.choice(WORDS) for _ in range(n)) + f" #{rng.random():.6f}"

    out = []
    for i in range(turns):
        mid = f"m{i}"
        query = text(12, 120)
        if facts and i % 40 == 0:
            query = f"{facts[(i // 40) % len(facts)]} {query}"
        msgs = [Message("user", query, QUERY, f"{mid}:query")]
        if i % 7 == 3:
            call = ToolCall(f"c{i}", "lookup_order", f'{{"order_id": "{rng.randint(1000, 9999)}"}}')
            msgs.append(Message("assistant", "", TOOL_CALL, f"{mid}:call", tool_calls=(call,)))
            msgs.append(Message("tool", text(30, 300), TOOL_RESULT, f"{mid}:result", tool_call_id=call.id))
        msgs.append(Message("assistant", text(25, 400), ANSWER, f"{mid}:answer"))
        out.append(Turn(id=mid, parent_id=f"m{i - 1}" if i else None, messages=tuple(msgs), query_index=0,
                        answer_index=len(msgs) - 1))
    return Conversation(id="bench", turns=out, system_prompt="You are a helpful assistant.")


def floor_seconds(conv: Conversation, model: str) -> float:
    """tiktoken encoding every message's text once: what a replay cannot go below."""
    encode = _encoding(TokenCounter(model).encoding_name).encode_ordinary
    texts = [m.content for t in conv.turns for m in t.messages]
    start = time.perf_counter()
    for t in texts:
        encode(t)
    return time.perf_counter() - start
