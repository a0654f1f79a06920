"""Counting words: "1 turn", and a conversation's length as its active thread plus its branches."""

from core.service.sessions import ConversationService
from core.store import repo
from core.store.db import Database
from core.words import conversation_length, conversation_turns, file_stem, plural, turns_summary
from tests.conftest import ROOT


def test_plural_uses_the_singular_for_one_and_a_given_plural():
    assert (plural(1, "turn"), plural(0, "turn"), plural(2, "branch", "branches"), plural(1200, "turn")) == (
        "1 turn",
        "0 turns",
        "2 branches",
        "1,200 turns",
    )


def test_a_conversation_is_as_long_as_its_active_thread_with_the_branches_counted_apart():
    assert turns_summary(7, 7) == "7 turns"
    assert turns_summary(7, 12) == "7 turns (12 with branches)"


def test_a_regenerated_answer_makes_a_branch_not_a_longer_conversation(tmp_path):
    svc = ConversationService(Database(f"sqlite:///{tmp_path / 'm.db'}"))
    flow = svc.import_flow(ROOT / "sample_data" / "flows" / "support-bot.yml")
    info = svc.start(flow.flow_id, name="c")
    first = svc.send(info.id, "Hi, I'm Dana.")
    svc.send(info.id, "What's my name?")
    svc.regenerate(info.id, first.id)  # a sibling of turn 1: the active thread is now 1 turn long
    listed = next(c for c in repo.list_conversations(svc.db) if c.id == info.id)
    assert (listed.turn_count, listed.thread_turns) == (3, 1)
    assert conversation_length(listed) == "1 turn (3 with branches)"
    assert conversation_length(svc.info(info.id)) == "1 turn (3 with branches)"


def test_report_file_names_have_no_stray_dashes():
    assert file_stem("Demo: support-bot forgets a name") == "Demo-support-bot-forgets-a-name"
    assert file_stem("  ¿Qué tal? — día 1 ") == "Qué-tal-día-1"
    assert file_stem("???") == "report" and file_stem("a" * 80) == "a" * 60


def test_a_conversation_in_hand_counts_the_thread_it_shows_and_its_branches_apart():
    from core.io import read_conversations
    from tests.builders import linear
    from tests.conftest import FIXTURES

    lisbon = read_conversations(FIXTURES / "exports" / "chatgpt__conversations.json")[0]  # a3 on a2c
    assert conversation_turns(lisbon) == "3 turns (5 with branches)"
    assert conversation_turns(linear(4)) == "4 turns"
    from dataclasses import replace

    assert conversation_turns(replace(linear(4), turns=[])) == "0 turns"
