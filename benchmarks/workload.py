"""The synthetic conversations the benchmarks measure, and the floor they are measured against.

Messages of varied lengths (log-normal word counts), every text distinct, a tool round every
seventh turn; optionally a stated fact every 40 turns, so fact tracking has something to track.
"""

from __future__ import annotations

import random
import time

from core.model.conversation import ANSWER, QUERY, TOOL_CALL, TOOL_RESULT, Conversation, Message, ToolCall, Turn
from core.model.tokens import TokenCounter, _encoding

WORDS = (
    "memory window token budget turn branch answer query model context node ledger history kept dropped "
    "reason tool result summary thread user assistant system prompt Lisbon Dana order vegetarian booking "
    "number 4411 7730 train palace sea coast evening morning ticket reference colour green window"
).split()


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
        # The parent's id is its very string, as the readers make it (conversation.with_shared_ids).
        out.append(
            Turn(
                id=mid,
                parent_id=out[-1].id if i else None,
                messages=tuple(msgs),
                query_index=0,
                answer_index=len(msgs) - 1,
            )
        )
    return Conversation(id="bench", turns=out, system_prompt="You are a helpful assistant.")


def floor_seconds(conv: Conversation, model: str) -> float:
    """tiktoken encoding every message's text once: what a replay cannot go below."""
    encode = _encoding(TokenCounter(model).encoding_name).encode_ordinary
    texts = [m.content for t in conv.turns for m in t.messages]
    start = time.perf_counter()
    for t in texts:
        encode(t)
    return time.perf_counter() - start


# -- a long recorded conversation in the store, for the page benchmarks and their tests --------------------

SUPPORT_QUERIES = (
    "Hi, I'm Dana.",
    "My order number is 4411.",
    "I'm vegetarian.",
    "Where is my parcel?",
    "What's my name?",
    "Can you change the delivery address?",
    "What is my order number?",
)
RECORDED = 8  # turns run for real: the support bot's window and answer footer are steady from turn 6


def seed_support_conversation(db, turns: int, *, name: str | None = None) -> str:
    """Store a ``turns``-long support-bot conversation in ``db``; returns its id.

    Running 10,000 turns through the runtime takes hours (each turn's ledger covers every earlier
    message), so only the first :data:`RECORDED` turns run for real, with the demo model. Every
    later turn is the last recorded turn's stored form restamped for its position: new ids and
    texts, and its packed ledgers stretched to the longer history (the leading run of reasons —
    outside the window, memory off — absorbs the new messages; the newest ones stay as recorded).
    Rows go through the store API (in batches), so the pages read exactly the shape a recorded run writes.
    Variable history: the turn counter and last topic per turn; the topics list is written once,
    at the end, because each of its appends would store the whole list again.
    """
    import json
    import uuid
    from pathlib import Path

    from core.flow.graph import load_flow
    from core.flow.records import ConversationState
    from core.flow.runtime import run_turn
    from core.llm.client import DemoClient
    from core.service.sessions import ConversationService
    from core.service.turn_rows import turn_from_record
    from core.store import repo

    flow_path = Path(__file__).resolve().parent.parent / "sample_data" / "flows" / "support-bot.yml"
    flow = load_flow(flow_path)
    service = ConversationService(db)
    version = service.import_flow(flow_path, name="support-bot")
    conv = service.start(version.flow_id, name=name or f"{turns:,}-turn support conversation")
    state = ConversationState.new(flow)
    template, refs = None, []
    for i in range(min(turns, RECORDED)):
        record = run_turn(flow, state, f"{SUPPORT_QUERIES[i % len(SUPPORT_QUERIES)]} (message {i})", llm=DemoClient())
        state = state.apply(record)
        template = turn_from_record(record, version.id)
        repo.save_turn(db, conv.id, template)
        refs.append(template["id"])
    parent, start = template["id"], template["created_at"]
    old_query, old_count = template["query"], 2 * (RECORDED - 1)
    batch, changes = [], []
    stamp = json.dumps(template)
    for i in range(RECORDED, turns):
        n = i + 1
        query = f"{SUPPORT_QUERIES[i % len(SUPPORT_QUERIES)]} (message {i})"
        turn = json.loads(stamp)  # a fresh copy, faster than deepcopy
        turn_id = str(uuid.uuid4())
        turn.update(
            id=turn_id,
            parent_id=parent,
            turn=n,
            dialogue_count=n,
            query=query,
            created_at=start + i,
            answer=template["answer"].replace(old_query, query).replace(f"(Turn {RECORDED} ", f"(Turn {n} "),
        )
        for run in turn["node_runs"]:
            for m in run.get("prompt") or []:
                if m.get("content") == old_query:
                    m["content"] = query
            ledger = run.get("ledger")
            if ledger:
                count = 2 * i  # a query and an answer per earlier turn
                ledger["runs"][0][1] += count - old_count
                ledger.update(turn=n, count=count, first_ref=f"{refs[0]}:query", last_ref=f"{parent}:answer")
            if run.get("outputs", {}).get("answer"):
                run["outputs"]["answer"] = turn["answer"]
        batch.append(turn)
        changes.append(
            [
                {"name": "turn_count", "old": n - 1, "new": n, "operation": "+=", "node_id": "log"},
                {"name": "last_topic", "old": "other", "new": "other", "operation": "over-write", "node_id": "log"},
            ]
        )
        if len(batch) == 1000 or n == turns:
            repo.save_turns(db, conv.id, batch, changes)
            batch, changes = [], []
        parent = turn_id
    if turns > RECORDED:
        topics = state.variables.get("topics", []) + ["other"] * (turns - RECORDED)
        repo.write_variable_changes(
            db,
            conv.id,
            [{"name": "topics", "old": None, "new": topics, "operation": "over-write", "node_id": "log"}],
            turn_id=parent,
            turn_seq=turns,
        )
    return conv.id
