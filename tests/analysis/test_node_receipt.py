"""One receipt for every view: a recorded LLM-node run, the switchboard's what-if of it, a replayed lens and an
observed call all go through :func:`core.analysis.debug_view.node_receipt`."""

from core.analysis.debug_view import node_receipt
from core.flow.what_if import what_if_ledger, what_if_prompt
from core.model.tokens import counter_for
from tests.flow.test_basic_chat import ask, chatbot, read

QUERIES = ["Hi, I'm Dana.", "I'm going to Lisbon in May.", "We like quiet hotels.", "What's my name?"]


def _recorded():
    flow = read(chatbot())
    state, records = ask(flow, QUERIES)
    run = records[-1].node_run("llm")
    stored = {
        "node_id": "llm",
        "prompt": [m.to_dict() for m in run.prompt],
        "ledger": run.ledger,
        "model": run.model,
        "model_called": run.model_called,
        "reply": run.reply,
    }
    return flow, state.conversation, run, stored


def test_a_recorded_run_reads_as_it_was_sent_counted_with_its_model():
    _, _, run, stored = _recorded()
    r = node_receipt(stored, "LLM")
    assert [row.content for row in r.rows] == [m.content for m in run.prompt]
    assert r.encoding == counter_for(run.ledger.config["model"]).encoding_name
    assert r.prompt_tokens == run.ledger.prompt_tokens and r.reply == run.reply


def test_a_what_if_reads_the_ledger_and_prompt_it_would_send_not_the_recorded_ones():
    flow, conv, run, stored = _recorded()
    narrow = what_if_ledger(flow, conv, 3, "llm", {"window": 2})  # the current turn and one before it
    prompt = what_if_prompt(flow, conv, 3, "llm", stored["prompt"], narrow)
    r = node_receipt(stored, "LLM", ledger=narrow, prompt=prompt)
    sent = [row.content for row in r.rows if row.origin == "memory history"]
    assert len(sent) == 2 and "Hi, I'm Dana." not in sent  # one earlier exchange, the first one gone
    assert len(sent) < sum(1 for m in run.prompt if m.origin == "memory history")
    assert r.dropped_tokens > 0 and r.prompt_tokens == narrow.prompt_tokens


def test_a_call_without_a_ledger_model_is_counted_for_the_model_it_names():
    _, _, run, stored = _recorded()
    observed = {**stored, "ledger": None, "model": "gpt-4"}
    assert (
        node_receipt(observed, "LLM").encoding
        == counter_for("gpt-4").encoding_name
        != counter_for("gpt-4o-mini").encoding_name
    )
    assert node_receipt(observed, "LLM", model="gpt-4o").encoding == counter_for("gpt-4o").encoding_name
