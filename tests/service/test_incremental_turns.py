"""Recording a turn keeps the conversation's working state instead of replaying it, and the
ledgers it records are the ones a replay from scratch gives.

Each sample flow records a branched conversation of 300 turns through one service (regenerated
answers, edited queries, continuations from older turns, turns written by a second service on
the same database in between). For every turn and every LLM node the recorded ledger — as the
run returned it and as the store gives it back — equals the ledger replayed from the stored
conversation from scratch, and, for the strategies that cut the thread, a per-message reference
classification written out in this file.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from core.llm.client import DemoClient
from core.memory.config import MemoryConfig
from core.memory.replay import Replay
from core.model.ledger import (
    EMPTY,
    GRANULARITY,
    KEPT,
    OTHER_BRANCH,
    OUTSIDE_WINDOW,
    OVER_BUDGET,
    TRIMMED_EARLIER,
    Ledger,
    RunLedger,
)
from core.service.sessions import ConversationService
from core.store import repo
from core.store.db import Database

ROOT = Path(__file__).resolve().parent.parent.parent
FLOWS = sorted((ROOT / "sample_data" / "flows").glob("*.yml"))
TURNS = 300
QUERIES = [
    "Hi, I'm Dana and my order number is 4411.",
    "Where is my parcel?",
    "What's my name?",
    "I was charged twice for order 4411.",
    "Remember that I prefer email.",
    "Can you reset my password?",
    "What did I say about email?",
]


def reference_reasons(replay: Replay, position: int) -> list[str]:
    """Every earlier message's reason, one message at a time, straight from the removal
    pipeline's order (core/model/ledger.py): the definition the recorded runs must agree with."""
    view, d = replay.view_for(position)
    seq = {(p, m): i for i, (p, m) in enumerate(zip(view.seq_pos, view.seq_msg))}
    on_thread = set(view.positions)
    out = []
    for p in range(position):
        for m, msg in enumerate(replay.conversation.turns[p].messages):
            i = seq.get((p, m))
            if d.blocked:
                out.append(d.blocked)
            elif p not in on_thread:
                out.append(OTHER_BRANCH)
            elif i is None:
                out.append(GRANULARITY)
            elif i < d.trimmed_before:
                out.append(TRIMMED_EARLIER)
            elif i < d.window_start:
                out.append(OUTSIDE_WINDOW)
            elif i < d.budget_cut:
                out.append(OVER_BUDGET)
            else:
                out.append(EMPTY if msg.is_empty else KEPT)
    return out


def record_branched(service: ConversationService, other: ConversationService, conv_id: str, turns: int):
    """``turns`` turns on one conversation, branched every way the app branches, some of them
    written by ``other`` (another process on the same database); returns the records ``service`` made."""
    records = {}
    for i in range(turns):
        query = f"{QUERIES[i % len(QUERIES)]} (message {i})"
        if i % 29 == 11:  # a turn written by someone else: this service must notice and catch up
            other.send(conv_id, query)
            continue
        if i % 17 == 5:
            record = service.regenerate(conv_id, service.active_thread(conv_id)[-1])
        elif i % 23 == 7:
            record = service.edit(conv_id, service.active_thread(conv_id)[-3], query)
        elif i % 31 == 13:
            service.switch(conv_id, service.active_thread(conv_id)[-6])  # its newest descendant: itself
            record = service.send(conv_id, query, parent_id=service.active_thread(conv_id)[-4])
        else:
            record = service.send(conv_id, query)
        records[record.id] = record
    return records


def check_ledgers(service: ConversationService, conv_id: str, records: dict) -> int:
    flow = service.flow(service.info(conv_id).flow_version_id)
    conversation = service.conversation(conv_id)
    checked = 0
    for position, turn in enumerate(conversation.turns):
        stored = {r["node_id"]: r for r in service.node_runs(conversation, turn.id)}
        record = records.get(turn.id)
        for node_id, run in stored.items():
            ledger = run["ledger"]
            if ledger is None:
                continue
            assert not run.get("damaged"), (position, node_id)
            fixed = ledger.prompt_tokens - ledger.history_tokens + sum(s.tokens for s in ledger.synthetic)
            config = MemoryConfig.from_dict({k: v for k, v in ledger.config.items() if k != "budget"})
            replay = Replay(
                conversation,
                config,
                system_prompt="",
                has_thread=flow.is_chat,
                prompt_tokens=lambda _position, fixed=fixed: fixed,
            )
            assert replay.ledger_at(position) == ledger, f"turn {position}, node {node_id}: stored vs replayed"
            if not replay.strategy.plans:
                assert [e.reason for e in ledger.entries] == reference_reasons(replay, position), (position, node_id)
            if record is not None and record.ran(node_id):
                recorded = record.node_run(node_id).ledger
                assert type(recorded) in (Ledger, RunLedger)
                assert recorded == ledger, f"turn {position}, node {node_id}: as run vs as stored"
            checked += 1
    return checked


@pytest.mark.parametrize("path", FLOWS, ids=lambda p: p.stem)
def test_ledgers_of_a_branched_300_turn_conversation_equal_a_replay_from_scratch(path, tmp_path):
    db = Database(f"sqlite:///{tmp_path / 'incremental.db'}")
    try:
        service, other = ConversationService(db, DemoClient()), ConversationService(db, DemoClient())
        conv = service.start(service.import_flow(path).flow_id)
        records = record_branched(service, other, conv.id, TURNS)
        conversation = service.conversation(conv.id)
        assert len(conversation.turns) == TURNS
        assert len({t.parent_id for t in conversation.turns}) < TURNS  # branched: siblings share parents
        assert check_ledgers(service, conv.id, records) >= TURNS - 20
    finally:
        db.dispose()


def test_a_turn_after_another_writer_continues_from_the_turns_it_wrote(tmp_path):
    db = Database(f"sqlite:///{tmp_path / 'two.db'}")
    try:
        first, second = ConversationService(db, DemoClient()), ConversationService(db, DemoClient())
        conv = first.start(first.import_flow(ROOT / "sample_data" / "flows" / "minimal-chat.yml").flow_id)
        for i in range(3):
            first.send(conv.id, f"first {i}")
        for i in range(2):
            second.send(conv.id, f"second {i}")
        record = first.send(conv.id, "first again")
        ledger = (
            record.node_run("chat").ledger
            if record.ran("chat")
            else next(r.ledger for r in record.node_runs if r.ledger is not None)
        )
        # every earlier turn, the other service's included, is history for this one
        assert ledger.turn == 6 and len(ledger.entries) == 10
        assert [e.turn for e in ledger.kept] == [1, 1, 2, 2, 3, 3, 4, 4, 5, 5]
        assert [t.query for t in first._working[conv.id].conversation.turns][-2:] == ["second 1", "first again"]
    finally:
        db.dispose()


def test_a_conversation_replaced_in_the_store_is_reloaded_not_continued_from_memory(tmp_path):
    db = Database(f"sqlite:///{tmp_path / 'replaced.db'}")
    try:
        service = ConversationService(db, DemoClient())
        conv = service.start(service.import_flow(ROOT / "sample_data" / "flows" / "minimal-chat.yml").flow_id)
        for i in range(3):
            service.send(conv.id, f"turn {i}")
        bundle = service.export(conv.id)
        for i in range(2):
            service.send(conv.id, f"later {i}")
        # Someone else deletes the conversation and imports its earlier export under the same id.
        other = ConversationService(db, DemoClient())
        other.delete(conv.id)
        other.import_(bundle)
        record = service.send(conv.id, "after the import")
        ledger = next(r.ledger for r in record.node_runs if r.ledger is not None)
        assert ledger.turn == 4 and [e.turn for e in ledger.kept] == [1, 1, 2, 2, 3, 3]
        assert [t.query for t in service._working[conv.id].conversation.turns] == [
            "turn 0",
            "turn 1",
            "turn 2",
            "after the import",
        ]
    finally:
        db.dispose()


def test_recording_a_turn_packs_the_ledger_without_listing_every_earlier_message(tmp_path):
    db = Database(f"sqlite:///{tmp_path / 'lazy.db'}")
    try:
        service = ConversationService(db, DemoClient())
        conv = service.start(service.import_flow(ROOT / "sample_data" / "flows" / "minimal-chat.yml").flow_id)
        for i in range(30):
            record = service.send(conv.id, f"turn {i}")
        ledger = next(r.ledger for r in record.node_runs if r.ledger is not None)
        assert isinstance(ledger, RunLedger) and ledger._entries is None  # stored and sent without its entries
        assert ledger.runs == [[OUTSIDE_WINDOW, 40], [KEPT, 18]]
        assert len(ledger.entries) == 58 and [e.reason for e in ledger.entries][39:41] == [OUTSIDE_WINDOW, KEPT]
        stored = repo.load_node_runs(db, record.id)
        packed = next(r["ledger"] for r in stored if r["ledger"])
        assert packed["runs"] == ledger.runs and packed["count"] == 58
        assert json.loads(json.dumps(packed)) == packed
    finally:
        db.dispose()


def test_reopening_a_conversation_takes_the_token_counts_stored_with_its_turns(tmp_path, monkeypatch):
    from core.model import tokens

    db = Database(f"sqlite:///{tmp_path / 'counts.db'}")
    try:
        service = ConversationService(db, DemoClient())
        conv = service.start(service.import_flow(ROOT / "sample_data" / "flows" / "minimal-chat.yml").flow_id)
        for i in range(4):
            record = service.send(conv.id, f"a question that is only asked here, number {i}")
        stored = repo.load_turn_rows(db, conv.id)[-1][repo.TOKEN_COUNTS]
        assert list(stored) == ["o200k_base"]
        encoding = tokens._encoding("o200k_base")
        assert stored["o200k_base"] == [len(encoding.encode_ordinary(t)) for t in (record.query, record.answer)]
        ledger_of = lambda runs: next(r["ledger"] for r in runs if r["ledger"] is not None)  # noqa: E731
        expected = [e.tokens for e in ledger_of(service.node_runs(service.conversation(conv.id), record.id)).entries]
        assert len(expected) == 6

        assert repo.load_turn_rows(db, conv.id)[-1][repo.TEXT_COUNTS] == {
            "o200k_base": {role: len(encoding.encode_ordinary(role)) for role in ("user", "assistant")}
        }

        # A new process: nothing counted yet, not even the roles; loading or using the encoding fails.
        monkeypatch.setattr(tokens, "_caches", {})
        tokens._counter.cache_clear()
        monkeypatch.setattr(tokens, "_encoding", lambda name: (_ for _ in ()).throw(AssertionError("recounted")))
        reopened = ConversationService(db, DemoClient())
        runs = reopened.node_runs(reopened.conversation(conv.id), record.id)
        assert [e.tokens for e in ledger_of(runs).entries] == expected
    finally:
        tokens._counter.cache_clear()
        db.dispose()


def test_reading_a_conversation_after_its_turn_takes_the_working_state_until_someone_writes(tmp_path):
    db = Database(f"sqlite:///{tmp_path / 'read.db'}")
    try:
        service, other = ConversationService(db, DemoClient()), ConversationService(db, DemoClient())
        conv = service.start(service.import_flow(ROOT / "sample_data" / "flows" / "support-bot.yml").flow_id)
        for i in range(4):
            service.send(conv.id, f"turn {i}")
        read = service.conversation(conv.id)
        assert read is service._working[conv.id].conversation  # no reload after its own turn
        assert [t.answer for t in read.turns] == [t.answer for t in repo.load_conversation(db, conv.id).turns]
        other.send(conv.id, "written elsewhere")
        assert [t.query for t in service.conversation(conv.id).turns][-1] == "written elsewhere"
        first = service.active_thread(conv.id)[0]
        # the variables after a turn, read without the whole history, as with it
        history = repo.variable_history(db, conv.id)
        for turn_id in service.active_thread(conv.id):
            assert service.variables_at(conv.id, turn_id) == service.variables_at(
                conv.id,
                turn_id,
                conversation=service.conversation(conv.id),
                flow=service.flow(service.info(conv.id).flow_version_id),
                history=history,
            )
        assert service.variables_at(conv.id, first)["turn_count"] == 1
        assert len(service.variables_at(conv.id, service.active_thread(conv.id)[-1])["topics"]) == 5
    finally:
        db.dispose()
