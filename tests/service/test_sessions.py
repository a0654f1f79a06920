"""Conversations that survive restarts: branches, flow versions, variables, export/import (SQLite and PostgreSQL)."""

import json

import pytest

from core.flow.errors import TypeMismatchError
from core.flow.graph import load_flow
from core.llm.client import DemoClient
from core.model.ledger import KEPT, OTHER_BRANCH
from core.service.errors import SessionChangedError
from core.service.sessions import SESSION_CHANGED, ConversationService
from core.service.transfer import export_conversation
from core.store import repo
from core.store.db import Database
from core.store.errors import StoreError
from tests.conftest import ROOT

FLOWS = ROOT / "sample_data" / "flows"


@pytest.fixture
def service(db):
    return ConversationService(db, llm=DemoClient())


@pytest.fixture
def chat(service):
    version = service.import_flow(FLOWS / "support-bot.yml")
    info = service.start(version.flow_id, user_id="dana")
    return service, info.id, version


def responder(record):
    return record.node_run("responder")


def kept_queries(record, node="responder"):
    ledger = record.node_run(node).ledger
    return [e.ref for e in ledger.entries if e.kept and str(e.ref).endswith(":query")]


def test_turns_survive_a_restart(db_url):
    first = ConversationService(Database(db_url), llm=DemoClient())
    version = first.import_flow(FLOWS / "support-bot.yml")
    conv = first.start(version.flow_id).id
    r1 = first.send(conv, "Hi, I'm Dana.")
    first.db.dispose()
    second = ConversationService(Database(db_url), llm=DemoClient())
    r2 = second.send(conv, "What's my name?")
    assert kept_queries(r2) == [f"{r1.id}:query"]
    assert "Dana" in r2.answer
    stored = repo.load_turn_rows(second.db, conv, with_node_runs=True)
    assert [t["id"] for t in stored] == [r1.id, r2.id]
    runs = {r["node_id"]: r for r in second.node_runs(second.conversation(conv), r2.id)}
    assert runs["responder"]["ledger"].entries[0].ref == f"{r1.id}:query"
    second.db.dispose()


def test_regenerate_creates_a_sibling_and_the_next_turn_follows_it(chat):
    service, conv, _ = chat
    a = service.send(conv, "Hi, I'm Dana.")
    b = service.send(conv, "My order number is 4411.")
    b2 = service.regenerate(conv, b.id)
    assert b2.parent_id == b.parent_id == a.id and b2.query == b.query
    c = service.send(conv, "What's my order number?")
    assert c.parent_id == b2.id
    reasons = {e.ref: e.reason for e in responder(c).ledger.entries}
    assert reasons[f"{b.id}:query"] == OTHER_BRANCH and reasons[f"{b2.id}:query"] == KEPT
    tree = service.conversation(conv)
    assert service.siblings(tree, b2.id).index == 2 and service.siblings(tree, b2.id).count == 2
    assert service.active_thread(conv) == [a.id, b2.id, c.id]


def test_edit_creates_a_sibling_of_the_edited_turn(chat):
    service, conv, _ = chat
    a = service.send(conv, "Hi, I'm Dana.")
    service.send(conv, "I'm vegetarian.")
    edited = service.edit(conv, a.id, "Hi, I'm Alex.")
    assert edited.parent_id is None and edited.dialogue_count == 1
    nxt = service.send(conv, "What's my name?")
    assert "Alex" in nxt.answer and "Dana" not in nxt.answer
    assert nxt.dialogue_count == 2
    assert {e.reason for e in responder(nxt).ledger.entries if e.turn in (1, 2)} == {OTHER_BRANCH}


def test_switching_branch_moves_memory_and_dialogue_count_to_that_branch(chat):
    service, conv, _ = chat
    a = service.send(conv, "Hi, I'm Dana.")
    b = service.send(conv, "My order number is 4411.")
    service.regenerate(conv, b.id)
    leaf = service.switch(conv, b.id)
    assert leaf == b.id and service.active_thread(conv) == [a.id, b.id]
    c = service.send(conv, "What's my order number?")
    assert c.parent_id == b.id and c.dialogue_count == 3
    assert f"{b.id}:query" in kept_queries(c)
    assert "4411" in c.answer


def test_flow_edit_makes_a_new_version_and_conversations_stay_pinned(chat):
    service, conv, v1 = chat
    service.send(conv, "Hi, I'm Dana.")
    flow = load_flow(FLOWS / "support-bot.yml")
    flow.node("responder").data["memory"]["window"] = {"enabled": True, "size": 1}
    v2 = service.update_flow(v1.flow_id, flow, "window 1")
    assert v2.version == 2 and v2.structure == v1.structure
    r = service.send(conv, "What's my name?")
    assert r.node_run("responder").memory["window"] == 4  # still on v1
    continued = service.continue_on_latest(conv)
    assert continued.node_run("responder").memory["window"] == 1
    assert service.info(conv).flow_version_id == v2.id
    # The old branch is intact: the re-run is a sibling of the last turn.
    assert continued.parent_id == r.parent_id


def test_a_structural_change_is_refused_with_difys_session_message(chat):
    service, conv, v1 = chat
    service.send(conv, "Hi")
    flow = load_flow(FLOWS / "support-bot.yml")
    flow.nodes.insert(2, flow.nodes.pop(1))  # reorder two nodes
    service.update_flow(v1.flow_id, flow, "reordered")
    with pytest.raises(SessionChangedError) as err:
        service.continue_on_latest(conv)
    assert SESSION_CHANGED in str(err.value) and "start a new conversation" in str(err.value)
    assert err.value.code == "agent_session_configuration_changed" and err.value.status == 409
    assert service.info(conv).flow_version_id == v1.id


def test_variable_edits_are_type_checked_recorded_and_revertible(chat):
    service, conv, _ = chat
    service.send(conv, "Hi")
    with pytest.raises(
        TypeMismatchError, match="Type mismatch: variable 'turn_count' expects number, but got string type"
    ):
        service.edit_variable(conv, "turn_count", "many")
    before = {v.name: v.value for v in repo.get_variables(service.db, conv)}
    assert before["turn_count"] == 1
    change = service.edit_variable(conv, "turn_count", 10)
    assert change.by_user and change.old == 1 and change.new == 10
    history = repo.variable_history(service.db, conv)
    assert history[-1]["node_id"] == "user" and history[-1]["new"] == 10
    service.send(conv, "Next")
    assert {v.name: v.value for v in repo.get_variables(service.db, conv)}["turn_count"] == 11
    service.revert_variable(conv, "turn_count")  # undoes the user edit: back to the value it replaced (1)
    assert {v.name: v.value for v in repo.get_variables(service.db, conv)}["turn_count"] == 1
    service.reset_variables(conv)
    assert {v.name: v.value for v in repo.get_variables(service.db, conv)} == {
        "turn_count": 0,
        "topics": [],
        "last_topic": "",
    }


def test_variables_as_they_were_after_each_turn(chat):
    service, conv, _ = chat
    a = service.send(conv, "Where is my order?")
    b = service.send(conv, "I need a refund on my bill.")
    assert service.variables_at(conv, a.id)["turn_count"] == 1
    assert service.variables_at(conv, b.id)["turn_count"] == 2
    assert service.variables_at(conv, None)["turn_count"] == 0
    # A user's edit after turn 2 is the value turn 3 reads, not what turn 2 left.
    service.edit_variable(conv, "turn_count", 3.5)
    assert service.variables_at(conv, b.id)["turn_count"] == 2
    history = repo.variable_history(service.db, conv)
    assert (
        service.variables_at(
            conv, b.id, history=history, conversation=service.conversation(conv), flow=service.state(conv)[0]
        )["turn_count"]
        == 2
    )
    c = service.send(conv, "And one more thing.")
    assert service.variables_at(conv, c.id)["turn_count"] == 4.5  # turn 3 counted on from the edit
    assert service.variables_at(conv, b.id)["turn_count"] == 2


def test_export_then_import_is_lossless(db, tmp_path):
    service = ConversationService(db, llm=DemoClient())
    version = service.import_flow(FLOWS / "support-bot.yml")
    conv = service.start(version.flow_id, user_id="dana", name="trip").id
    a = service.send(conv, "Hi, I'm Dana.")
    service.send(conv, "My order number is 4411.")
    service.regenerate(conv, a.id)
    service.edit_variable(conv, "last_topic", "manual")
    bundle = service.export(conv)
    text = json.dumps(bundle, sort_keys=True)

    other = Database(f"sqlite:///{tmp_path / 'other.db'}")
    imported = ConversationService(other).import_(json.loads(text))
    assert imported == conv
    assert json.dumps(export_conversation(other, conv), sort_keys=True) == text
    other.dispose()


@pytest.mark.parametrize(
    "mutate,message",
    [
        (lambda b: b.update(format="something-else"), "'format' must be"),
        (lambda b: b["turns"][0].pop("id"), "turn 0 has a missing or repeated 'id'"),
        (lambda b: b["turns"][1].update(query=5), "turn 1: 'query' and 'answer' must be strings"),
        (lambda b: b["variables"].append({"name": "x"}), "variable 3 needs"),
        (lambda b: b.update(version=99), "unsupported version 99"),
        (lambda b: b["flow"].update(definition={"format": "memlens-flow", "nodes": "bad"}), "its flow is invalid"),
    ],
)
def test_a_corrupted_import_is_rejected_and_writes_nothing(db, tmp_path, mutate, message):
    service = ConversationService(db, llm=DemoClient())
    version = service.import_flow(FLOWS / "support-bot.yml")
    conv = service.start(version.flow_id).id
    service.send(conv, "Hi")
    service.send(conv, "Again")
    bundle = service.export(conv)
    mutate(bundle)
    target = Database(f"sqlite:///{tmp_path / 'target.db'}")
    with pytest.raises(StoreError, match=message):
        ConversationService(target).import_(bundle)
    assert repo.list_conversations(target) == [] and repo.list_flows(target) == []
    target.dispose()


def test_importing_over_an_existing_conversation_is_refused(chat):
    service, conv, _ = chat
    service.send(conv, "Hi")
    bundle = service.export(conv)
    with pytest.raises(StoreError, match="already exists"):
        service.import_(bundle)


def test_stored_ledgers_are_compact_and_read_back_exactly(chat):
    service, conv, _ = chat
    records = [
        service.send(conv, q)
        for q in ["Hi, I'm Dana.", "My order number is 4411.", "I'm vegetarian.", "Where is it?", "What's my name?"]
    ]
    tree = service.conversation(conv)
    last = records[-1]
    stored = repo.load_node_runs(service.db, last.id)
    packed = next(r for r in stored if r["node_id"] == "responder")
    assert packed["ledger"]["runs"] == [["outside_window", 2], ["kept", 6]]
    assert "entries" not in packed["ledger"]
    assert all(m["content"] is None for m in packed["prompt"] if m["origin"] == "memory history")
    for run in service.node_runs(tree, last.id):
        original = last.node_run(run["node_id"])
        assert run["ledger"] == original.ledger
        if original.prompt is not None:
            assert run["prompt"] == [m.to_dict() for m in original.prompt]


def test_a_conversation_started_without_a_name_is_named_by_its_first_message(service):
    version = service.import_flow(FLOWS / "support-bot.yml")
    unnamed = service.start(version.flow_id)
    assert service.info(unnamed.id).name == ""
    service.send(unnamed.id, "Hi, I'm Dana. My order number is 4411 and it has not arrived yet.")
    service.send(unnamed.id, "What's my name?")
    assert service.info(unnamed.id).name == "Hi, I'm Dana. My order number is 4411 and it…"
    named = service.start(version.flow_id, name="Support, Monday")
    service.send(named.id, "Hello")
    assert service.info(named.id).name == "Support, Monday"
