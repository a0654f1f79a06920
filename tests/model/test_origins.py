"""Prompt origins have one home (core/model/origins.py): every origin a run, a replayed receipt or a
captured payload writes has a place in the receipt's order, a colour and a label there, and the store's
codec gives back every one of them as it was recorded."""

import json

from core.analysis.debug_view import receipt, replayed_run
from core.capture.observed import ORIGINS as CAPTURED
from core.flow.graph import flow_from_data
from core.flow.runtime import run_conversation
from core.llm.client import DemoClient
from core.memory.config import MemoryConfig
from core.memory.long_term import LongTermMemory
from core.memory.replay import Replay
from core.model import origins
from core.model.origins import (
    HISTORY,
    ORIGIN_ORDER,
    ORIGINS,
    OTHER_COLOUR,
    RUN_ORIGINS,
    SUMMARY,
    origin_colour,
    origin_label,
    origin_rank,
)
from core.model.tokens import counter_for
from core.store.ledger_codec import pack_prompt, unpack_prompt
from tests.builders import linear

#: One LLM node whose prompt holds every origin a run writes: a system line, a template line, a conversation
#: variable, the context, a long-term memory, the memory's history and the current query.
EVERY_ORIGIN = {
    "format": "memlens-flow",
    "version": 1,
    "name": "origins",
    "mode": "advanced-chat",
    "variables": [{"name": "name", "type": "string", "default": "Dana"}],
    "nodes": [
        {
            "id": "start",
            "type": "start",
            "variables": [{"variable": "docs", "label": "Docs", "type": "paragraph", "required": False}],
        },
        {"id": "recall", "type": "memory-retrieve", "query": "{{#sys.query#}}", "user": "{{#sys.user_id#}}"},
        {
            "id": "llm",
            "type": "llm",
            "model": "memlens/demo",
            "memory": {"window": 5},
            "context": {"enabled": True, "variable_selector": ["start", "docs"]},
            "prompt_template": [
                {"role": "system", "text": "Be brief."},
                {"role": "assistant", "text": "Known: {{#conversation.name#}}"},
                {"role": "assistant", "text": "Docs: {{#context#}}"},
                {"role": "assistant", "text": "Remembered: {{#recall.text#}}"},
                {"role": "assistant", "text": "Answer in English."},
            ],
        },
        {"id": "remember", "type": "memory-store", "user": "{{#sys.user_id#}}", "query": "{{#sys.query#}}"},
        {"id": "answer", "type": "answer", "answer": "{{#llm.text#}}"},
    ],
    "edges": [["start", "recall"], ["recall", "llm"], ["llm", "remember"], ["remember", "answer"]],
}


def _run_every_origin():
    flow = flow_from_data(EVERY_ORIGIN, "origins.yml")
    queries = [{"query": q, "inputs": {"docs": "the manual"}} for q in ("My order number is 4411.", "And my order?")]
    return run_conversation(flow, queries, llm=DemoClient(), long_term=LongTermMemory())


def test_every_origin_a_run_writes_is_one_the_run_names_and_has_an_order_colour_and_label():
    _, records = _run_every_origin()
    written = {m.origin for m in records[-1].node_run("llm").prompt}
    assert written == set(RUN_ORIGINS)
    for name in RUN_ORIGINS:
        assert name in ORIGIN_ORDER and origin_rank(name) < len(ORIGIN_ORDER)
        assert origin_colour(name) != OTHER_COLOUR and origin_label(name)


def test_replayed_and_captured_receipts_name_only_listed_origins():
    conv = linear(8, answer=lambda i: f"answer number {i} " + "with quite a few words " * 20)
    ledger = Replay(conv, MemoryConfig(strategy="summary_buffer", max_history_tokens=120)).ledger_at(7)
    run = replayed_run(conv, 7, "summary", ledger, counter_for("gpt-4o-mini"))
    assert SUMMARY in {m["origin"] for m in run["prompt"]}
    assert {m["origin"] for m in run["prompt"]} <= set(ORIGIN_ORDER)
    assert set(CAPTURED.values()) <= set(ORIGIN_ORDER)


def test_the_table_lists_each_origin_once_with_a_colour_and_label():
    assert len(set(ORIGIN_ORDER)) == len(ORIGINS) and all(o.colour.startswith("#") and o.label for o in ORIGINS)
    assert ORIGIN_ORDER.index(HISTORY) < ORIGIN_ORDER.index(origins.CURRENT_QUERY)
    assert origin_rank("an origin nobody wrote") == len(ORIGIN_ORDER)
    assert origin_label("an origin nobody wrote") == "an origin nobody wrote"


def test_the_store_codec_gives_back_every_origin_of_a_recorded_prompt():
    state, records = _run_every_origin()
    run = records[-1].node_run("llm")
    prompt = [m.to_dict() for m in run.prompt]
    packed = json.loads(json.dumps(pack_prompt(prompt, run.ledger)))
    assert any(m.get("from_ledger") for m in packed)  # the history's texts are left to the ledger
    assert unpack_prompt(packed, run.ledger, state.conversation) == prompt


def test_a_receipt_stacks_its_origins_in_the_one_order():
    _, records = _run_every_origin()
    run = records[-1].node_run("llm")
    stacked = receipt(
        {"node_id": "llm", "ledger": run.ledger, "prompt": [m.to_dict() for m in run.prompt]},
        "LLM",
        exact=True,
        encoding="cl100k_base",
    ).used_by_origin
    assert list(stacked) == sorted(stacked, key=ORIGIN_ORDER.index) and set(stacked) == set(RUN_ORIGINS)
