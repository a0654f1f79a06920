"""Replaying a conversation from turn 1 with the switchboard's settings gives what its what-if previewed."""

from __future__ import annotations

import pytest

from core.flow.what_if import what_if_ledger
from core.llm.client import DemoClient
from core.service.errors import ReplayError
from core.service.replays import BRANCH, NEW, replay_thread
from core.service.samples import seed_demo
from core.service.sessions import ConversationService
from core.store.db import Database

WINDOW_6 = {"responder": {"strategy": "dify", "window": 6}}


@pytest.fixture
def demo(tmp_path):
    service = ConversationService(Database(f"sqlite:///{tmp_path / 'm.db'}"), llm=DemoClient())
    return service, seed_demo(service)


def _kept_queries(service, conv_id, turn_id, node="responder"):
    conv = service.conversation(conv_id)
    run = next(r for r in service.node_runs(conv, turn_id) if r["node_id"] == node)
    return [conv.turns[e.position].query for e in run["ledger"].kept if e.role == "user"]


def test_a_replay_as_a_new_conversation_keeps_at_each_turn_what_the_preview_showed(demo):
    service, conv_id = demo
    original = service.conversation(conv_id)
    flow = service.flow(service.info(conv_id).flow_version_id)
    preview = what_if_ledger(flow, original, 5, "responder", WINDOW_6["responder"])  # turn 6 under window 6
    result = replay_thread(service, conv_id, WINDOW_6, mode=NEW, name="replayed")
    assert result.conversation_id != conv_id and len(result.records) == 8
    replayed = service.conversation(result.conversation_id)
    assert [t.query for t in replayed.turns] == [t.query for t in original.turns]
    assert _kept_queries(service, result.conversation_id, result.records[5].id) == [
        original.turns[e.position].query for e in preview.kept if e.role == "user"
    ]
    assert result.records[5].answer.startswith("Your name is Dana.")  # turn 6 asks the name: now it is known
    info = service.info(result.conversation_id)
    assert info.name == "replayed" and info.meta["memory_overrides"]["responder"]["window"] == 6
    assert service.info(conv_id).turn_count == 8  # the original is untouched


def test_a_replay_as_a_branch_starts_beside_turn_one_and_becomes_the_active_thread(demo):
    service, conv_id = demo
    result = replay_thread(service, conv_id, WINDOW_6, mode=BRANCH)
    assert result.conversation_id == conv_id and service.info(conv_id).turn_count == 16
    conv = service.conversation(conv_id)
    first = conv.turns[conv.tree.position[result.records[0].id]]
    assert first.parent_id == conv.turns[0].parent_id  # a sibling of turn 1
    assert service.active_thread(conv_id, conv)[-1] == result.records[-1].id
    assert result.records[5].answer.startswith("Your name is Dana.")


def test_a_replay_on_another_model_answers_every_node_with_it(demo):
    service, conv_id = demo
    result = replay_thread(service, conv_id, WINDOW_6, mode=NEW, model="memlens/demo")
    runs = [r for r in result.records[0].node_runs if r.ledger is not None]
    assert runs and all(r.model_called == "memlens/demo" for r in runs)


def test_a_conversation_without_a_question_or_a_flow_is_refused_in_one_line(demo, tmp_path):
    service, conv_id = demo
    empty = service.start(service.flow_version(service.info(conv_id).flow_version_id).flow_id, name="empty")
    with pytest.raises(ReplayError, match="no question to replay"):
        replay_thread(service, empty.id, WINDOW_6)
    with pytest.raises(ReplayError, match="replay mode 'sideways' is unknown"):
        replay_thread(service, conv_id, WINDOW_6, mode="sideways")
