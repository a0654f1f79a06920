"""An Agent app's log stored and opened again replays as it did before it was stored."""

from __future__ import annotations

import json

from core.io import parse_conversations
from core.memory.config import MemoryConfig
from core.memory.replay import Replay
from core.memory.strategies import agent_app
from core.service.transfer import store_conversations
from core.store import repo

LOG = {
    "data": [
        {
            "id": "a1",
            "conversation_id": "c1",
            "parent_message_id": None,
            "query": "Where is order 4411?",
            "answer": "Let me check.\nIt ships today.",
            "created_at": 1_700_000_001,
            "agent_thoughts": [
                {
                    "id": "t1",
                    "position": 1,
                    "thought": "Let me check.",
                    "tool": "orders;weather",
                    "tool_input": json.dumps({"orders": {"id": "4411"}}),
                    "observation": json.dumps({"orders": "shipped"}),
                },
                {"id": "t2", "position": 2, "thought": "It ships today.", "tool": ""},
            ],
        },
        {
            "id": "a2",
            "conversation_id": "c1",
            "parent_message_id": "a1",
            "query": "Thanks",
            "answer": "",
            "created_at": 1_700_000_002,
            "agent_thoughts": [{"id": "t3", "position": 1, "thought": "", "tool": ""}],
        },
        {
            "id": "a3",
            "conversation_id": "c1",
            "parent_message_id": "a2",
            "query": "And the other one?",
            "answer": "",
            "created_at": 1_700_000_003,
            "agent_thoughts": [],
            "status": "error",
            "error": "model timed out",
        },
        {
            "id": "a4",
            "conversation_id": "c1",
            "parent_message_id": "a3",
            "query": "Hello?",
            "answer": "Hi.",
            "created_at": 1_700_000_004,
            "agent_thoughts": [{"id": "t4", "position": 1, "thought": "Hi.", "tool": ""}],
        },
    ]
}


def test_a_stored_agent_log_keeps_its_thoughts_its_shown_answers_and_its_ledgers(db):
    conv = parse_conversations(json.dumps(LOG), name="log.json")[0]
    [conv_id] = store_conversations(db, [conv])
    stored = repo.load_conversation(db, conv_id)
    assert agent_app(stored)
    assert [t.meta.get("agent_thoughts") for t in stored.turns] == [2, 1, None, 1]
    assert [t.shown_answer for t in stored.turns] == ["Let me check.\nIt ships today.", "", "", "Hi."]
    assert [row["answer"] for row in repo.load_turn_rows(db, conv_id)] == [t.shown_answer for t in stored.turns]
    for config in (
        MemoryConfig(strategy="dify_agent"),
        MemoryConfig(strategy="dify_agent", plugin_token_counting=True, context_size=90),
    ):
        before, after = Replay(conv, config).ledger(4), Replay(stored, config).ledger(4)
        assert [(e.role, e.tokens, e.reason) for e in after.entries] == [
            (e.role, e.tokens, e.reason) for e in before.entries
        ]
    reasons = [e.reason for e in Replay(stored, MemoryConfig(strategy="dify_agent")).ledger(4).entries]
    # a1: query, the call with two tools, two results, the final thought; a2: the empty final thought is
    # sent; a3 failed before any thought, so its empty answer is left out.
    assert reasons == ["kept"] * 8 + ["empty"]


def test_an_agent_log_exported_and_imported_again_is_still_an_agent_apps_log(db, tmp_path):
    from core.service.sessions import ConversationService
    from core.store.db import Database

    [conv_id] = store_conversations(db, parse_conversations(json.dumps(LOG), name="log.json"))
    bundle = json.loads(json.dumps(ConversationService(db).export(conv_id)))
    other = Database(f"sqlite:///{tmp_path / 'other.db'}")
    again = repo.load_conversation(other, ConversationService(other).import_(bundle))
    assert agent_app(again)
    assert [t.shown_answer for t in again.turns] == ["Let me check.\nIt ships today.", "", "", "Hi."]
    config = MemoryConfig(strategy="dify_agent")
    assert [e.reason for e in Replay(again, config).ledger(4).entries] == [
        e.reason for e in Replay(repo.load_conversation(db, conv_id), config).ledger(4).entries
    ]
    other.dispose()


def test_a_served_agent_app_s_failed_turn_keeps_its_thought_when_the_conversation_is_reopened(db):
    """A turn MemLens ran on an Agent app is stored with its thought, so a fresh process reopening the
    conversation sends the failed turn's empty thought as the running one did."""
    from core.service.sessions import ConversationService
    from tests.conftest import ROOT
    from tests.flow.test_runtime_prompt import FailsOn

    service = ConversationService(db, FailsOn("boom", ["Fine.", "Sure."]))
    conv = service.start(service.import_flow(ROOT / "sample_data" / "flows" / "agent-app.yml").flow_id)
    failed = service.send(conv.id, "boom, where is 4411?")
    assert failed.status == "failed"
    running = service.send(conv.id, "Hello?")
    stored = repo.load_conversation(db, conv.id)
    assert agent_app(stored) and [t.meta.get("agent_thoughts") for t in stored.turns] == [1, 1]
    reopened = ConversationService(db, FailsOn("boom", ["Again."])).send(conv.id, "Still there?")
    for record in (running, reopened):
        sent = [(m.role, m.to_dict()["content"]) for m in record.node_run("agent").prompt]
        assert ("assistant", "") in sent and sent[1:3] == [("user", "boom, where is 4411?"), ("assistant", "")]
