"""Long-term memory: keyed by user id, top-k retrieval with scores, every change in the history, in flows."""

from __future__ import annotations

import random

import pytest

from core.flow.graph import Flow, load_flow
from core.flow.runtime import run_conversation
from core.llm.client import DemoClient, LLMReply
from core.memory.errors import LongTermMemoryError, MemoryNotFound
from core.memory.long_term import (
    ADD,
    DEFAULT_TOP_K,
    DELETE,
    UPDATE,
    EmbeddingRetriever,
    LLMExtractor,
    LongTermMemory,
    Source,
    memory_hash,
    recall_preview,
)
from core.service.sessions import ConversationService
from core.store.db import Database
from core.store.memories import long_term_store
from core.store.migrate import head_revision
from tests.conftest import ROOT

FLOW = ROOT / "sample_data" / "flows" / "long-term-memory.yml"
NAMES = ["Alba", "Bruno", "Carmen", "Dario", "Elena", "Fabio", "Greta", "Hugo"]
CITIES = ["Porto", "Lisbon", "Braga", "Faro", "Evora", "Coimbra", "Aveiro", "Viseu"]


@pytest.fixture(params=["memory", "sqlite", "postgresql"])
def store(request, tmp_path):
    """The same long-term memory in a dict, in SQLite and in PostgreSQL."""
    if request.param == "memory":
        yield LongTermMemory()
        return
    url = (
        f"sqlite:///{tmp_path / 'memlens.db'}"
        if request.param == "sqlite"
        else request.getfixturevalue("postgres").create_database()
    )
    db = Database(url)
    yield long_term_store(db)
    db.dispose()


# -- keyed by user ----------------------------------------------------------------------------------


def test_the_same_fact_from_two_users_is_two_memories_and_each_sees_only_their_own(store):
    store.store("ana", "I live in Porto.")
    store.store("ben", "I live in Porto.")
    ana, ben = store.memories("ana"), store.memories("ben")
    assert [m.memory for m in ana] == [m.memory for m in ben] == ["You live in Porto."]
    assert ana[0].id != ben[0].id
    assert [r.id for r in store.retrieve("ana", "where do I live")] == [ana[0].id]
    assert [r.id for r in store.retrieve("ben", "where do I live")] == [ben[0].id]
    assert store.retrieve("carl", "where do I live") == []


def test_randomised_users_never_get_each_others_memories_through_the_api(store):
    rnd = random.Random(7)
    owner: dict[str, str] = {}
    users = [f"user-{i}" for i in range(8)]
    for step in range(120):
        user = rnd.choice(users)
        i = users.index(user)
        statement = rnd.choice(
            [
                f"My name is {NAMES[i]}.",
                f"I live in {CITIES[i]}.",
                f"My order number is {4000 + i * 10 + rnd.randrange(3)}.",
                f"I like {rnd.choice(['tea', 'jazz', 'chess'])} number {i}.",
                f"I don't like {rnd.choice(['tea', 'jazz', 'chess'])} number {i}.",
            ]
        )
        result = store.store(user, statement, source=Source(conversation_id=f"c{step}"))
        for e in result.events:
            owner.setdefault(e.memory_id, user)
            assert owner[e.memory_id] == user
        if step % 10 == 0 and store.memories(user):
            victim = rnd.choice(store.memories(user))
            store.delete(victim.id)
    for user in users:
        for query in ("what is my name", "where do I live", "my order number", "what do I like", "tea jazz chess"):
            for r in store.retrieve(user, query, k=50):
                assert owner[r.id] == user and r.item.user_id == user
        assert all(owner[m.id] == user for m in store.memories(user))


def _in_namespace(flow: Flow, namespace: str, name: str) -> Flow:
    data = flow.to_dict()
    data["nodes"] = [
        {**n, "namespace": namespace} if n.get("type") in ("memory-retrieve", "memory-store") else n
        for n in data["nodes"]
    ]
    return Flow.from_dict({**data, "name": name})


def test_flows_naming_one_namespace_share_a_users_memories_and_no_other_user_sees_them(tmp_path):
    """Many users, two flows sharing a namespace, several conversations each, in random order, on one store."""
    db = Database(f"sqlite:///{tmp_path / 'memlens.db'}")
    service = ConversationService(db, llm=DemoClient())
    base = _in_namespace(load_flow(FLOW), "support-team", "long-term-memory")
    variant = _in_namespace(load_flow(FLOW), "support-team", "long-term-memory-b")
    flows = [service.import_flow(base, name="a").flow_id, service.import_flow(variant, name="b").flow_id]
    rnd = random.Random(11)
    users = {f"u{i}": (NAMES[i], CITIES[i]) for i in range(6)}
    plan = [(u, f) for u in users for f in flows for _ in range(2)]
    rnd.shuffle(plan)
    told: dict[str, bool] = {u: False for u in users}
    for user, flow_id in plan:
        name, city = users[user]
        conv = service.start(flow_id, user_id=user)
        for query in ("What's my name? Do you know where I live?", f"I am {name} and I live in {city}."):
            record = service.send(conv.id, query)
            recalled = record.node_run("recall").outputs["memories"]
            for row in recalled:
                assert service.long_term.get(row["id"]).user_id == user
                assert all(
                    other[0] not in row["memory"] and other[1] not in row["memory"]
                    for u, other in users.items()
                    if u != user
                )
            reply = record.node_run("responder").reply
            if query.startswith("What") and told[user]:
                assert f"Your name is {name}." in reply  # remembered from an earlier conversation or flow
            elif query.startswith("What"):
                assert "I don't know your name" in reply
        told[user] = True
    shared = service.long_term.in_namespace("support-team")
    for user, (name, city) in users.items():
        texts = {m.memory for m in shared.memories(user)}
        assert texts == {f"Your name is {name}.", f"You live in {city}."}
        assert service.long_term.memories(user) == []  # nothing leaked into the shared default
    db.dispose()


@pytest.mark.parametrize("backend", ["sqlite", "postgresql"])
def test_by_default_each_app_keeps_its_own_memories_of_a_user(backend, tmp_path, request):
    url = (
        f"sqlite:///{tmp_path / 'memlens.db'}"
        if backend == "sqlite"
        else request.getfixturevalue("postgres").create_database()
    )
    db = Database(url)
    service = ConversationService(db, llm=DemoClient())
    app_a = service.import_flow(load_flow(FLOW), name="shop").flow_id
    app_b = service.import_flow(load_flow(FLOW), name="bank").flow_id
    first = service.start(app_a, user_id="dana")
    service.send(first.id, "My order number is 4411.")
    again = service.send(service.start(app_a, user_id="dana").id, "What is my order number?")
    assert again.answer == "Your order is 4411."
    assert again.node_run("recall").outputs["namespace"] == f"app:{app_a}"
    other_app = service.send(service.start(app_b, user_id="dana").id, "What is my order number?")
    assert other_app.node_run("recall").outputs["memories"] == []
    assert "I don't know your order number" in other_app.answer
    db.dispose()


def test_a_memory_written_through_one_app_key_is_not_recalled_through_another(tmp_path):
    import httpx

    from core.api.app import create_app
    from core.store import keys as app_keys
    from tests.api.test_api import ThreadServer

    db = Database(f"sqlite:///{tmp_path / 'memlens.db'}")
    service = ConversationService(db, llm=DemoClient())
    apps = [service.import_flow(load_flow(FLOW), name=n).flow_id for n in ("shop", "bank")]
    keys = [app_keys.create_key(db, a)[1] for a in apps]
    server = ThreadServer(create_app(db, llm=DemoClient()))
    try:
        with httpx.Client(base_url=server.base_url, timeout=60) as http:

            def ask(key, query):
                r = http.post(
                    "/chat-messages",
                    headers={"Authorization": f"Bearer {key}"},
                    json={"inputs": {}, "query": query, "user": "dana", "response_mode": "blocking"},
                )
                assert r.status_code == 200, r.text
                return r.json()["answer"]

            ask(keys[0], "My order number is 4411.")
            assert ask(keys[0], "What is my order number?") == "Your order is 4411."
            assert "I don't know your order number" in ask(keys[1], "What is my order number?")
    finally:
        server.stop()
        db.dispose()


def test_a_memory_node_refuses_an_empty_namespace_when_the_flow_loads():
    from core.flow.errors import FlowError

    with pytest.raises(FlowError, match="namespace"):
        _in_namespace(load_flow(FLOW), "  ", "blank")


def test_store_and_retrieve_refuse_a_missing_user_id_and_malformed_messages(store):
    for bad in ("", "   ", None, 42):
        with pytest.raises(LongTermMemoryError, match="user id"):
            store.store(bad, "I live in Porto.")
        with pytest.raises(LongTermMemoryError, match="user id"):
            store.retrieve(bad, "Porto")
    with pytest.raises(LongTermMemoryError, match="string, a {role, content} mapping or a list"):
        store.store("u", 123)
    with pytest.raises(LongTermMemoryError, match="role"):
        store.store("u", [{"role": "robot", "content": "I live in Porto."}])
    assert store.memories("u") == []


# -- retrieval --------------------------------------------------------------------------------------


def seed_memories(store: LongTermMemory, user: str = "dana") -> None:
    for text in [
        "My name is Dana.",
        "I live in Porto.",
        "I work as a nurse.",
        "My order number is 4411.",
        "I'm allergic to peanuts.",
        "I like green tea.",
        "My favourite colour is green.",
        "My booking reference is AB1234.",
    ]:
        store.store(user, text)


def test_retrieve_returns_five_by_default_best_first_with_scores(store):
    seed_memories(store)
    results = store.retrieve("dana", "what is my order number?")
    assert DEFAULT_TOP_K == 5 and len(results) == 5
    assert results[0].memory == "Your order is 4411."
    scores = [r.score for r in results]
    assert scores == sorted(scores, reverse=True) and scores[0] > 0
    assert all(isinstance(r.to_dict()["score"], float) for r in results)


def test_top_k_is_a_prefix_of_the_full_ranking_and_ties_are_newest_first(store):
    seed_memories(store)
    full = store.retrieve("dana", "green", k=50)
    assert len(full) == 8
    assert {full[0].memory, full[1].memory} == {"You like green tea.", "Your favourite colour is green."}
    for k in (1, 2, 3, 7):
        assert [r.id for r in store.retrieve("dana", "green", k=k)] == [r.id for r in full[:k]]
    unrelated = [r for r in full if r.score == 0]
    assert [r.item.updated_at for r in unrelated] == sorted((r.item.updated_at for r in unrelated), reverse=True)
    assert store.retrieve("dana", "green", k=0) == []
    with pytest.raises(LongTermMemoryError, match="k must be"):
        store.retrieve("dana", "green", k=-1)


def test_a_threshold_drops_memories_scoring_below_it(store):
    seed_memories(store)
    results = store.retrieve("dana", "peanuts allergy", k=50, threshold=0.01)
    assert [r.memory for r in results] == ["You are allergic to peanuts."]


def test_an_embedding_backend_plugs_in_behind_the_same_interface():
    class Letters:
        """A toy embedding: letter counts (a real backend would be a model)."""

        name = "letters"

        def embed(self, texts):
            return [[t.lower().count(c) for c in "abcdefghijklmnopqrstuvwxyz"] for t in texts]

    store = LongTermMemory(retriever=EmbeddingRetriever(Letters()))
    store.store("u", "I live in Porto. I like jazz.")
    results = store.retrieve("u", "Porto")
    assert [r.memory for r in results][0] == "You live in Porto."
    assert results[0].score > results[1].score


def test_recall_preview_shows_what_a_new_conversation_would_get(store):
    seed_memories(store)
    preview = recall_preview("dana", "remind me of my booking reference", store=store)
    assert preview.total == 8 and preview.results[0].memory == "Your booking is AB1234."
    assert preview.text.splitlines()[0] == "Your booking is AB1234."
    assert [r.id for r in preview.results] == [r.id for r in store.retrieve("dana", preview.query)]
    no_query = recall_preview("dana", None, store=store, k=3)
    assert len(no_query.results) == 3 and all(r.score is None for r in no_query.results)
    assert recall_preview("nobody", "anything", store=store).results == []


# -- changes and their history ----------------------------------------------------------------------


def test_a_new_value_of_a_single_valued_fact_updates_the_memory_and_its_history_names_the_turn(store):
    first = store.store("dana", "My order number is 4411.", source=Source("conv-1", "turn-1", "support", 1))
    [added] = first.events
    assert added.event == ADD and added.old_memory is None
    second = store.store("dana", "Sorry, my order number is 5120.", source=Source("conv-2", "turn-7", "support", 3))
    [updated] = second.events
    assert updated.event == UPDATE and updated.memory_id == added.memory_id
    item = store.get(added.memory_id)
    assert item.memory == "Your order is 5120." and item.hash == memory_hash("Your order is 5120.")
    assert item.created_at == added.created_at and item.updated_at > added.created_at
    history = store.history(added.memory_id)
    assert [(h.event, h.old_memory, h.new_memory) for h in history] == [
        (ADD, None, "Your order is 4411."),
        (UPDATE, "Your order is 4411.", "Your order is 5120."),
    ]
    assert [(h.source.conversation_id, h.source.turn_id, h.source.turn) for h in history] == [
        ("conv-1", "turn-1", 1),
        ("conv-2", "turn-7", 3),
    ]
    assert [h.actor for h in history] == ["extractor:offline"] * 2
    assert len(store.memories("dana")) == 1


def test_a_fact_already_remembered_changes_nothing_and_adds_no_history(store):
    store.store("dana", "I like green tea.")
    again = store.store("dana", "i like GREEN tea!!")
    assert again.events == [] and again.unchanged == ["You like GREEN tea."]
    [memory] = store.memories("dana")
    assert len(store.history(memory.id)) == 1


def test_multi_valued_facts_accumulate_and_a_contradiction_deletes_the_old_one(store):
    store.store("dana", "I like green tea. I like jazz.")
    assert len(store.memories("dana")) == 2
    result = store.store("dana", "I don't like jazz.", source=Source("c", "t9", turn=9))
    assert [e.event for e in result.events] == [DELETE, ADD]
    gone = result.events[0]
    assert gone.old_memory == "You like jazz." and gone.new_memory is None and gone.is_deleted
    with pytest.raises(MemoryNotFound):
        store.get(gone.memory_id)
    assert store.find(gone.memory_id) is None
    assert store.history(gone.memory_id)[-1].event == DELETE
    assert store.history(gone.memory_id)[-1].source.turn_id == "t9"
    assert sorted(m.memory for m in store.memories("dana")) == ["You don't like jazz.", "You like green tea."]
    assert [e.memory_id for e in store.deleted("dana")] == [gone.memory_id]


def test_edits_and_deletes_by_hand_are_recorded_as_the_users(store):
    store.store("dana", "I live in Porto.")
    [m] = store.memories("dana")
    store.update(m.id, "You live in Porto, near the river.")
    assert store.get(m.id).memory == "You live in Porto, near the river."
    store.delete(m.id)
    history = store.history(m.id)
    assert [(h.event, h.actor) for h in history] == [(ADD, "extractor:offline"), (UPDATE, "user"), (DELETE, "user")]
    with pytest.raises(MemoryNotFound):
        store.delete(m.id)
    with pytest.raises(LongTermMemoryError, match="needs some text"):
        store.add("dana", "  ")


def test_memories_survive_reopening_the_database(tmp_path):
    url = f"sqlite:///{tmp_path / 'memlens.db'}"
    db = Database(url)
    long_term_store(db).store("dana", "My name is Dana.")
    db.dispose()
    db = Database(url)
    store = long_term_store(db)
    [m] = store.memories("dana")
    assert m.memory == "Your name is Dana." and [h.event for h in store.history(m.id)] == [ADD]
    assert [(u.user_id, u.memories) for u in store.users()] == [("dana", 1)]
    db.dispose()


def test_the_long_term_memory_migration_follows_the_app_keys_one():
    from importlib import import_module

    migration = import_module("core.store.migrations.versions.0003_long_term_memory")
    assert migration.revision == "0003" and migration.down_revision == "0002"
    assert head_revision() >= "0003"
    namespaces = import_module("core.store.migrations.versions.0006_memory_namespaces")
    assert namespaces.revision == "0006" and namespaces.down_revision == "0005"


# -- an LLM extractor -------------------------------------------------------------------------------


class Scripted:
    def __init__(self, text: str):
        self.text = text
        self.calls = []

    def complete(self, model, messages, max_tokens=None):
        self.calls.append(messages)
        return LLMReply(self.text, 10, 5, model)


def test_an_llm_extractor_stores_the_facts_the_model_returns_and_nothing_for_a_bad_reply():
    client = Scripted('```json\n{"facts": [{"key": "home", "text": "You live in Oslo."}, "You have a cat."]}\n```')
    store = LongTermMemory()
    result = store.store(
        "u",
        [{"role": "user", "content": "I moved to Oslo with my cat."}],
        extractor=LLMExtractor(client, "openai/gpt-4o-mini"),
    )
    assert [e.new_memory for e in result.events] == ["You live in Oslo.", "You have a cat."]
    assert (
        "Oslo" in client.calls[0][1]["content"]
        and store.history(result.events[0].memory_id)[0].actor == "extractor:llm"
    )
    store.store("u", "I live in Bergen now.")  # the offline extractor's home fact updates the model's one
    assert {m.memory for m in store.memories("u")} == {"You live in Bergen.", "You have a cat."}
    nothing = store.store("u", "whatever", extractor=LLMExtractor(Scripted("sorry, I cannot"), "m"))
    assert nothing.events == [] and nothing.facts == []


# -- in a flow --------------------------------------------------------------------------------------


def test_a_second_conversation_recalls_a_fact_from_the_first_and_another_user_does_not(tmp_path):
    db = Database(f"sqlite:///{tmp_path / 'memlens.db'}")
    service = ConversationService(db, llm=DemoClient())
    flow_id = service.import_flow(FLOW).flow_id
    first = service.start(flow_id, user_id="dana")
    service.send(first.id, "Hi, I'm Dana.")
    stored = service.send(first.id, "My order number is 4411.")
    assert stored.node_run("remember").outputs["added"] == 1

    second = service.start(flow_id, user_id="dana")
    record = service.send(second.id, "What is my order number?")
    assert record.answer == "Your order is 4411."
    retrieve = record.node_run("recall")
    assert retrieve.outputs["memories"][0]["memory"] == "Your order is 4411." and retrieve.outputs["count"] == 2
    responder = record.node_run("responder")
    recalled = [m for m in responder.prompt if m.origin == "long-term memory"]
    assert len(recalled) == 1 and "Your order is 4411." in recalled[0].content
    assert [r["memory"] for r in responder.recalled] == ["Your order is 4411.", "Your name is Dana."]
    assert responder.recalled[0]["score"] > responder.recalled[1]["score"] == 0
    assert all(r["tokens"] > 0 and r["node_id"] == "recall" for r in responder.recalled)
    assert responder.ledger.entries == []  # the window has nothing: this is a new conversation

    other = service.start(flow_id, user_id="eve")
    record = service.send(other.id, "What is my order number?")
    assert record.node_run("recall").outputs["memories"] == []
    assert "I don't know your order number" in record.answer
    assert not [m for m in record.node_run("responder").prompt if m.origin == "long-term memory"]

    # The record survives a restart with its recalled memories and scores.
    reloaded = service.node_runs(service.conversation(second.id), service.info(second.id).active_turn_id)
    responder_row = next(r for r in reloaded if r["node_id"] == "responder")
    assert [r["memory"] for r in responder_row["recalled"]] == ["Your order is 4411.", "Your name is Dana."]
    db.dispose()


@pytest.mark.parametrize("fill", ["template", "none"])
def test_an_agent_whose_instruction_reads_recall_records_the_memories_only_when_it_renders_them(tmp_path, fill):
    data = load_flow(FLOW).to_dict()
    data["nodes"] = [n for n in data["nodes"] if n["id"] != "responder"] + [
        {
            "id": "responder",
            "type": "tool-agent",
            "title": "Responder",
            "tools": [],
            "memory": {"strategy": "off"},
            "system_prompt": "You remember: {{#recall.text#}}",
            "system_prompt_fill": fill,
        }
    ]
    db = Database(f"sqlite:///{tmp_path / 'memlens.db'}")
    service = ConversationService(db, llm=DemoClient())
    flow_id = service.import_flow(Flow.from_dict(data)).flow_id
    service.send(service.start(flow_id, user_id="dana").id, "My order number is 4411.")
    record = service.send(service.start(flow_id, user_id="dana").id, "What is my order number?")
    system = record.node_run("responder").prompt[0]
    if fill == "template":  # the memories are in the instruction, and the run lists them
        assert system.origin == "long-term memory" and "Your order is 4411." in system.content
        assert [r["memory"] for r in record.node_run("responder").recalled] == ["Your order is 4411."]
    else:  # sent as written: nothing is recalled into it
        assert (system.origin, system.content) == ("system", "You remember: {{#recall.text#}}")
        assert not record.node_run("responder").recalled
    db.dispose()


def test_without_a_store_the_memory_nodes_say_so_and_the_turn_still_runs():
    from core.flow.records import ConversationState
    from core.flow.runtime import run_turn

    flow = load_flow(FLOW)
    record = run_turn(flow, ConversationState.new(flow), "I'm Dana.", llm=DemoClient())
    assert record.succeeded
    assert "no long-term memory store" in record.node_run("recall").notes[0]
    assert "no long-term memory store" in record.node_run("remember").notes[0]


def test_run_conversation_gives_a_flow_with_memory_nodes_one_store_for_the_run():
    flow = load_flow(FLOW)
    _, records = run_conversation(flow, ["I'm Dana.", "a", "b", "c", "What's my name?"], llm=DemoClient())
    # The 2-turn window lost turn 1, the long-term memory did not.
    assert records[-1].node_run("responder").ledger.entries[0].reason == "outside_window"
    assert records[-1].answer == "Your name is Dana."


def llm_extracting_flow() -> Flow:
    data = load_flow(FLOW).to_dict()
    for node in data["nodes"]:
        if node["id"] == "remember":
            node.update(extractor="llm", model="openai/gpt-4o-mini")
    return Flow.from_dict(data)


def test_a_store_step_configured_with_a_model_extracts_with_it_and_falls_back_offline_on_the_demo():
    from core.flow.records import ConversationState
    from core.flow.runtime import run_turn

    class RealModel(Scripted):
        def route(self, model):
            return model, ""

    flow = llm_extracting_flow()
    client = RealModel('{"facts": [{"key": "pet", "text": "You have a cat named Miso."}]}')
    store = LongTermMemory()
    record = run_turn(
        flow, ConversationState.new(flow), "My cat Miso says hi.", llm=client, long_term=store, user_id="dana"
    )
    assert record.node_run("remember").outputs["added"] == 1
    assert [m.memory for m in store.memories("dana")] == ["You have a cat named Miso."]
    assert store.history(store.memories("dana")[0].id)[0].actor == "extractor:llm"

    offline = LongTermMemory()
    record = run_turn(
        flow, ConversationState.new(flow), "I'm Dana.", llm=DemoClient(), long_term=offline, user_id="dana"
    )
    assert "facts extracted offline" in record.node_run("remember").notes[0]
    assert [m.memory for m in offline.memories("dana")] == ["Your name is Dana."]


def test_a_memory_node_with_bad_settings_is_refused_when_the_flow_loads():
    from core.flow.errors import FlowError

    data = load_flow(FLOW).to_dict()
    for node in data["nodes"]:
        if node["id"] == "recall":
            node["top_k"] = 0
    with pytest.raises(FlowError, match="top_k 0 must be a whole number of memories, 1 or more"):
        Flow.from_dict(data)
    data = load_flow(FLOW).to_dict()
    for node in data["nodes"]:
        if node["id"] == "remember":
            node["extractor"] = "llm"
    with pytest.raises(FlowError, match="extractor llm needs a 'model'"):
        Flow.from_dict(data)
