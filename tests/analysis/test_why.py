"""“Where did X go?”: the turn that said it, and per node or config the first turn without it, and why."""

import json
import subprocess
import sys

import pytest

from core.analysis.errors import WhyError
from core.analysis.why import Subject, where_did_it_go
from core.memory.config import MemoryConfig
from core.memory.replay import Replay
from core.model.conversation import turn_label
from tests.builders import dify, linear, record
from tests.conftest import ROOT
from tests.rendered import shown

NAME = lambda i: "Hi, I'm Dana." if i == 1 else f"question number {i}"  # noqa: E731


def subject(conv, **config):
    cfg = MemoryConfig(**config)
    return Subject(cfg.label(), Replay(conv, cfg))


def test_a_window_of_three_turns_loses_the_name_at_turn_five_and_says_why():
    conv = linear(8, query=NAME)
    answer = where_did_it_go(conv, "dana", [subject(conv, window=3, fidelity="documented")])
    assert [(m.turn, m.role) for m in answer.mentions] == [("turn 1", "user")]
    (loss,) = answer.losses
    assert (loss.last_kept_turn, loss.lost_turn, loss.reason) == ("turn 4", "turn 5", "outside_window")
    assert loss.why == "outside window of 3 turns"
    assert answer.sentences()[1] == (
        "dify window 3 (docs): had it through turn 4; gone from turn 5 — outside window of 3 turns."
    )


def test_dify_as_shipped_loses_it_one_turn_earlier_than_the_docs():
    conv = linear(8, query=NAME)
    docs, code = where_did_it_go(
        conv, "Dana", [subject(conv, window=3, fidelity="documented"), subject(conv, window=3, fidelity="code")]
    ).losses
    assert (docs.lost_turn, code.lost_turn) == ("turn 5", "turn 4")
    assert code.reason == "outside_window"


def test_a_node_with_memory_off_never_had_it_and_a_buffer_keeps_it():
    conv = linear(5, query=NAME)
    off, buffer = where_did_it_go(
        conv, "Dana", [subject(conv, strategy="off"), subject(conv, strategy="buffer")]
    ).losses
    assert off.never_had_it and off.lost_turn == "turn 2" and off.reason == "memory_off"
    assert buffer.lost_position is None and buffer.last_kept_turn == "turn 5"
    assert "still has it at turn 5" in buffer.sentence("turn 5")


def test_a_restatement_keeps_it_in_memory_until_the_restatement_leaves():
    conv = linear(9, query=lambda i: "I'm Dana" if i in (1, 4) else f"question number {i}")
    (loss,) = where_did_it_go(conv, "dana", [subject(conv, window=2, fidelity="documented")]).losses
    assert loss.lost_turn == "turn 7"  # turn 4's restatement is within 2 turns through turn 6


def test_said_again_after_it_left_it_comes_back_and_the_answer_says_where_it_left_last():
    # Window 2 (docs): turn 1's name is gone at turn 4; turn 6 says it again (its own question), so
    # turns 6-8 have it; it leaves again at turn 9 and the newest turn, 12, is without it.
    conv = linear(12, query=lambda i: "I'm Dana" if i in (1, 6) else f"question number {i}")
    answer = where_did_it_go(conv, "dana", [subject(conv, window=2, fidelity="documented")])
    (loss,) = answer.losses
    assert (loss.last_kept_turn, loss.lost_turn, loss.reason) == ("turn 3", "turn 4", "outside_window")
    back = loss.comeback
    assert (back.returns, back.back_turn, back.gone_position, back.gone_turn) == (1, "turn 6", 8, "turn 9")
    assert back.reason == "outside_window" and back.why == "outside window of 2 turns"
    assert not loss.has_it_now
    assert answer.sentences()[1] == (
        "dify window 2 (docs): had it through turn 3; gone from turn 4 — outside window "
        "of 2 turns. It came back at turn 6 (said again) and is gone again from turn 9 — "
        "outside window of 2 turns."
    )


def test_back_several_times_and_still_there_at_the_newest_turn():
    conv = linear(12, query=lambda i: "I'm Dana" if i in (1, 5, 9) else f"question number {i}")
    (loss,) = where_did_it_go(conv, "dana", [subject(conv, window=2, fidelity="documented")]).losses
    back = loss.comeback
    assert (loss.lost_turn, back.returns, back.back_turn) == ("turn 4", 2, "turn 5")
    assert back.gone_turn == "turn 12" and loss.has_it_now is False  # turn 9 is outside turn 12's two turns
    conv = linear(10, query=lambda i: "I'm Dana" if i in (1, 5, 9) else f"question number {i}")
    (loss,) = where_did_it_go(conv, "dana", [subject(conv, window=2, fidelity="documented")]).losses
    assert (loss.comeback.returns, loss.comeback.gone_position, loss.has_it_now) == (2, None, True)
    assert loss.sentence("turn 10").endswith(
        "It came back at turn 5 (said again; back 2 times in all) and is still there at turn 10, the newest turn."
    )


def test_never_lost_has_no_comeback():
    conv = linear(6, query=lambda i: "I'm Dana" if i in (1, 3) else f"question number {i}")
    (loss,) = where_did_it_go(conv, "dana", [subject(conv, strategy="buffer")]).losses
    assert loss.lost_position is None and loss.comeback is None and loss.has_it_now
    assert loss.to_json()["comeback"] is None and loss.to_json()["has_it_now"] is True


def test_a_budget_prune_is_named_as_the_reason():
    conv = linear(6, query=lambda i: ("I'm Dana. " if i == 1 else "") + "word " * 40)
    (loss,) = where_did_it_go(conv, "Dana", [subject(conv, context_size=130, fidelity="documented")]).losses
    assert loss.reason == "over_budget" and "token budget" in loss.why


def test_a_phrase_said_only_on_another_branch_is_not_on_this_thread():
    conv = dify(
        [
            record("1", None, "hello"),
            record("2", "1", "I'm Dana"),
            record("3", "1", "I'm Bob"),
            record("4", "3", "and now?"),
        ]
    )
    answer = where_did_it_go(conv, "Dana", [subject(conv)])  # thread of the newest turn: 1, 3, 4
    assert answer.mentions == [] and [m.turn for m in answer.elsewhere] == ["turn 2 · 1/2"]
    assert "only on another branch (turn 2 · 1/2)" in answer.sentences()[0]


def test_turn_labels_count_the_thread_and_name_the_sibling_not_the_creation_order():
    conv = dify([record("1", None), record("2", "1"), record("3", "2"), record("4", "1"), record("5", "4")])
    assert [turn_label(conv, p) for p in range(5)] == ["turn 1", "turn 2 · 1/2", "turn 3", "turn 2 · 2/2", "turn 3"]


@pytest.mark.parametrize("phrase, message", [("   ", "nothing to look for"), ("x" * 201, "at most 200")])
def test_an_empty_or_huge_phrase_is_refused(phrase, message):
    conv = linear(2)
    with pytest.raises(WhyError, match=message):
        where_did_it_go(conv, phrase, [subject(conv)])


def run(*args):
    proc = subprocess.run(
        [sys.executable, "-m", "core", "why", *map(str, args)], cwd=ROOT, capture_output=True, text=True, timeout=120
    )
    return proc.returncode, proc.stdout, proc.stderr


def test_the_cli_answers_in_words_and_in_json():
    sample = ROOT / "sample_data" / "conversations" / "lisbon-trip.json"
    code, out, err = run(sample, "Dana", "--window", "3", "--fidelity", "documented")
    assert code == 0, err
    # Dana is said again in the newest turn's own question, so it is back there.
    assert out.splitlines()[1] == (
        "dify window 3 (docs): had it through turn 4; gone from turn 5 — outside window "
        "of 3 turns. It is back at turn 12, the newest turn (said again)."
    )
    code, out, err = run(sample, "Dana", "--window", "3", "--fidelity", "documented", "--format", "json")
    doc = json.loads(out)
    assert doc["losses"][0]["lost_turn"] == "turn 5" and doc["losses"][0]["reason"] == "outside_window"
    assert doc["losses"][0]["has_it_now"] is True
    assert doc["losses"][0]["comeback"] == {
        "returns": 1,
        "back_turn": "turn 12",
        "gone_position": None,
        "gone_turn": None,
        "reason": None,
        "why": None,
    }
    assert doc["mentions"][0]["turn"] == "turn 1"


def test_the_cli_refuses_bad_input_in_one_line():
    code, out, err = run(ROOT / "sample_data" / "conversations" / "lisbon-trip.json", " ")
    assert code == 2 and err.count("\n") == 1 and "nothing to look for" in err
    code, out, err = run("Dana")
    assert code == 2 and "give a conversation FILE or --conversation ID" in err


def test_the_cli_answers_per_node_for_a_stored_conversation(tmp_path):
    from core.service.samples import seed_demo
    from core.service.sessions import ConversationService
    from core.store import repo
    from core.store.db import Database

    url = f"sqlite:///{tmp_path / 'm.db'}"
    svc = ConversationService(Database(url))
    seed_demo(svc)
    demo = next(c for c in repo.list_conversations(svc.db) if "support-bot" in c.name)
    code, out, err = run("--conversation", demo.id, "Dana", "--db", url, "--format", "json")
    assert code == 0, err
    losses = {x["node_id"]: x for x in json.loads(out)["losses"]}
    assert losses["classifier"]["reason"] == "memory_off" and losses["classifier"]["last_kept_turn"] is None
    assert losses["responder"]["reason"] == "outside_window" and losses["responder"]["last_kept_turn"] is not None


def test_the_debugger_answers_where_the_name_went_and_jumps_to_that_turn(tmp_path, monkeypatch):
    from streamlit.testing.v1 import AppTest

    monkeypatch.setenv("MEMLENS_DATABASE_URL", f"sqlite:///{tmp_path / 'memlens.db'}")
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=60).run()
    box = next(t for t in at.text_input if t.label == "Where did it go?")
    box.set_value("Dana").run()
    assert not at.exception, at.exception
    said = shown("".join(md.value for md in at.markdown))
    assert "was first said at turn 1" in said
    assert "Classifier: never had it" in said and "(memory off)" in said
    assert "Responder: had it through turn" in said and "outside window of" in said
    jump = next(b for b in at.button if b.label.startswith("Inspect turn"))
    assert shown(jump.label).endswith(")")  # it names the node that lost it there: "Inspect turn 5 (Responder)"
    target = shown(jump.label).removeprefix("Inspect ").split(" (")[0]
    jump.click().run()
    assert not at.exception, at.exception
    assert f"<b>{target.capitalize()}</b>" in shown(
        "".join(md.value for md in at.markdown)
    ) or f"**{target.capitalize()}**" in shown("".join(md.value for md in at.markdown))


def _why_panel_script():
    import streamlit as st

    from core.analysis.why import Subject, where_did_it_go
    from core.memory.config import MemoryConfig
    from core.memory.replay import Replay
    from tests.builders import linear
    from ui.why_panel import render_why

    conv = linear(12, query=lambda i: "I'm Dana" if i in (1, 6) else f"question number {i}")
    config = MemoryConfig(window=2, fidelity="documented")
    answer = where_did_it_go(conv, "dana", [Subject(config.label(), Replay(conv, config))])
    render_why(answer, on_jump=lambda p: st.session_state.update(jumped=p), key="w")


def test_the_panel_offers_the_turn_it_left_first_and_the_turn_it_left_last():
    from streamlit.testing.v1 import AppTest

    at = AppTest.from_function(_why_panel_script, default_timeout=30).run()
    assert not at.exception, at.exception
    assert [shown(b.label) for b in at.button] == [
        "Inspect turn 4 (dify window 2 (docs))",
        "Inspect turn 9 (dify window 2 (docs))",
    ]
    at.button[1].click().run()
    assert at.session_state["jumped"] == 8


def _template_why(queries):
    from core.analysis.why import node_subjects
    from core.flow.graph import load_flow
    from core.flow.runtime import run_conversation
    from core.llm.client import DemoClient
    from tests.conftest import FIXTURES

    flow = load_flow(FIXTURES / "dify_dsl" / "dify-templates__Question_Classifier_Knowledge_Chatbot.yml")
    state, _ = run_conversation(flow, queries, llm=DemoClient())
    answer = where_did_it_go(state.conversation, "Dana", node_subjects(flow, state.conversation))
    return {flow.node_names[x.node_id]: x for x in answer.losses}


AFTER_SALES, PRODUCTS = "Question related to after sales: refund?", "Questions about how to use products: descaling?"
# The chatbot of the "how to use products" branch: the template titles its two chatbots "LLM" and "LLM ".
HOW_TO_BOT = "LLM (1711528815414)"


def test_a_node_that_never_ran_after_the_phrase_was_said_is_said_to_have_never_run():
    """Dify's template sorts each question into a branch, so a branch's LLM node runs at some turns only:
    "where did it go?" asks a node's memory only where it ran, and says so of one that never did."""
    losses = _template_why([f"Hi, I'm Dana. {AFTER_SALES}", AFTER_SALES, AFTER_SALES])
    assert losses[HOW_TO_BOT].never_ran
    assert losses[HOW_TO_BOT].sentence("turn 3") == (
        f"{HOW_TO_BOT}: never ran after it was said, so its memory never had to hold it."
    )
    assert not losses["Question Classifier"].never_ran


def test_a_node_that_stopped_running_says_the_newest_turn_it_ran_not_the_threads():
    losses = _template_why([f"Hi, I'm Dana. {AFTER_SALES}", PRODUCTS, AFTER_SALES])
    assert losses[HOW_TO_BOT].sentence("turn 3") == f"{HOW_TO_BOT}: still had it at turn 2, the newest turn it ran."
