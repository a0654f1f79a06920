"""The offline demo model: deterministic, answers only from its prompt, and forgets with the window."""

from __future__ import annotations

import pytest

from core.flow.graph import Flow
from core.flow.records import ConversationState
from core.flow.runtime import run_turn
from core.llm.client import DemoClient, LiteLLMClient
from core.llm.demo_model import demo_reply, demo_usage
from core.llm.errors import LLMError
from core.model.tokens import DEMO_MODEL, counter_for, model_facts


def user(text):
    return {"role": "user", "content": text}


def assistant(text):
    return {"role": "assistant", "content": text}


def test_it_picks_up_a_stated_fact_and_answers_from_it():
    assert (
        demo_reply([user("Hi, I'm Dana. My order number is 4411.")]) == "Noted. Your name is Dana. Your order is 4411."
    )
    prompt = [user("I'm vegetarian."), assistant("Noted. You are vegetarian."), user("What is my diet?")]
    assert demo_reply(prompt) == "You are vegetarian."


def test_it_says_plainly_when_a_fact_is_not_in_its_context():
    assert demo_reply([user("What's my name?")]) == "I don't know your name — it is not in what I was given."
    assert (
        demo_reply([user("What is my order number?")])
        == "I don't know your order number — it is not in what I was given."
    )


def test_it_reads_only_its_prompt_not_a_system_prompt_claim_or_anything_else():
    assert "I don't know your name" in demo_reply(
        [{"role": "system", "content": "The user is Dana."}, user("What's my name?")]
    )


def test_a_prompt_that_is_all_system_prompt_is_asked_by_its_last_message():
    """A Dify LLM node whose template is only a system prompt, with the question written into it (a
    summarising node of a chain): the demo answers that question from that text, as a real model would."""
    system = {"role": "system", "content": '## Question\n"""What is my name?"""\n## Task\nAnswer briefly.'}
    assert demo_reply([system]) == "I don't know your name — it is not in what I was given."
    told = {"role": "system", "content": "The user wrote: I'm Dana. Question: what is my name?"}
    assert demo_reply([{"role": "system", "content": "Be brief."}, told]) == "Noted. Your name is Dana."
    assert demo_reply([system, assistant("  ")]) == demo_reply([system])  # an empty message asks nothing
    assert demo_reply([]) == "I was given no question."
    assert demo_reply([{"role": "system", "content": " "}]) == "I was given no question."


def test_it_remembers_what_it_restated_in_an_earlier_answer():
    prompt = [assistant("Your name is Dana."), user("What's my name?")]
    assert demo_reply(prompt) == "Your name is Dana."
    quoted = [assistant("Got your message (\u201cYou are vegan\u201d)."), user("What is my diet?")]
    assert "I don't know your diet" in demo_reply(quoted)


def test_it_reports_how_many_earlier_messages_it_sees():
    prompt = [
        {"role": "system", "content": "S"},
        user("a"),
        assistant("b"),
        user("c"),
        assistant("d"),
        user("How many earlier messages can you see?"),
    ]
    assert demo_reply(prompt) == "I can see 4 earlier messages in my context (2 from you, 2 from me or tools)."


def test_it_lists_what_it_knows_about_the_user():
    prompt = [user("I'm Dana and I live in Porto."), user("What do you know about me?")]
    assert demo_reply(prompt) == "Here is what I know about you. Your name is Dana. You live in Porto."
    assert (
        demo_reply([user("What do you know about me?")])
        == "I know nothing about you — nothing in what I was given says."
    )


def test_it_labels_with_the_first_named_option_else_the_last_and_says_so():
    from core.llm.demo_model import DemoAnswer, demo_answer

    system = {"role": "system", "content": "Reply with one of: billing, delivery, other."}
    assert demo_answer([system, user("My delivery is late")]) == DemoAnswer("delivery", "")
    assert demo_answer([system, user("Hello")]).text == "other"
    assert (
        demo_answer([system, user("Hello")]).note
        == "no option is named in the question: the demo model answered the last, “other”"
    )


def test_a_classifier_prompt_listing_categories_gets_the_category_as_json():
    listed = (
        'Categories: [{"category_id": "7", "category_name": "Orders or returns"}, '
        '{"category_id": "9", "category_name": "Other"}]'
    )
    system = {"role": "system", "content": f"{listed}\nReply with one of: Orders or returns, Other"}
    # A name with "or" in it stays one option: the listed names are the options.
    assert (
        demo_reply([system, user("Orders or returns: my parcel")])
        == '{"category_id": "7", "category_name": "Orders or returns"}'
    )
    # Nothing shared: the first category, as Dify takes the first class for a reply that names none.
    assert demo_reply([system, user("Hello")]) == '{"category_id": "7", "category_name": "Orders or returns"}'
    broken = {"role": "system", "content": "Categories: [not json\nReply with one of: a, b"}
    assert demo_reply([broken, user("b please")]) == "b"


def test_it_is_deterministic_and_otherwise_gives_a_receipt():
    prompt = [user("a"), assistant("b"), user("Tell me a joke")]
    assert demo_reply(prompt) == demo_reply(list(prompt))
    assert (
        demo_reply(prompt)
        == "Got your message (\u201cTell me a joke\u201d). I can see 2 earlier messages in my context."
    )


def test_usage_is_the_real_token_count_of_prompt_and_reply():
    prompt = [{"role": "system", "content": "You are helpful."}, user("Hi, I'm Dana.")]
    reply = demo_reply(prompt)
    counter = counter_for(DEMO_MODEL)
    usage = demo_usage(prompt, reply)
    assert usage["prompt_tokens"] == 3 + sum(counter.chat(m["role"], m["content"]) for m in prompt)
    assert usage["completion_tokens"] == counter.text(reply) > 0
    assert usage["total_tokens"] == usage["prompt_tokens"] + usage["completion_tokens"]
    assert model_facts(DEMO_MODEL).context_size == 16384


def test_it_is_a_litellm_custom_provider_and_litellm_keeps_its_usage():
    import litellm

    prompt = [user("Hi, I'm Dana."), assistant("Noted. Your name is Dana."), user("What's my name?")]
    reply = LiteLLMClient(demo_only=True).complete(DEMO_MODEL, prompt)
    assert (reply.text, reply.model) == ("Your name is Dana.", DEMO_MODEL)
    direct = DemoClient().complete(DEMO_MODEL, prompt)
    assert (reply.prompt_tokens, reply.completion_tokens) == (direct.prompt_tokens, direct.completion_tokens)
    response = litellm.completion(model=DEMO_MODEL, messages=prompt)  # registered like any provider
    assert response.choices[0].message.content == "Your name is Dana."
    assert response.usage.prompt_tokens == direct.prompt_tokens


def test_a_missing_key_is_a_one_line_error_when_the_demo_fallback_is_off(monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    with pytest.raises(LLMError) as err:
        LiteLLMClient(fallback_to_demo=False).complete("openai/gpt-4o-mini", [user("hi")])
    assert str(err.value) == (
        "openai/gpt-4o-mini: OPENAI_API_KEY is not set; set it in the environment, or run the node on memlens/demo"
    )
    fallback = LiteLLMClient().complete("openai/gpt-4o-mini", [user("hi")])
    assert fallback.model == DEMO_MODEL and "OPENAI_API_KEY is not set" in fallback.note


def test_an_unreachable_provider_fails_the_turn_with_a_one_line_error_not_a_crash(monkeypatch):
    monkeypatch.setenv("OLLAMA_API_BASE", "http://127.0.0.1:9")  # nothing listens on the discard port
    flow = window_flow(3, model="ollama/llama3")
    record = run_turn(flow, ConversationState.new(flow), "hi", llm=LiteLLMClient(fallback_to_demo=False, timeout=5))
    assert record.status == "failed" and record.answer == ""
    assert record.error.startswith("ollama/llama3: cannot reach the provider")
    assert "\n" not in record.error


# -- forgetting with the window ---------------------------------------------------------------------


def window_flow(window: int, model: str = DEMO_MODEL) -> Flow:
    return Flow.from_dict(
        {
            "format": "memlens-flow",
            "version": 1,
            "name": "w",
            "nodes": [
                {"id": "start", "type": "start"},
                {
                    "id": "llm",
                    "type": "llm",
                    "model": model,
                    "prompt_template": [{"role": "system", "text": "You are helpful."}],
                    "memory": {"window": window},
                },
                {"id": "answer", "type": "answer", "answer": "{{#llm.text#}}"},
            ],
            "edges": [["start", "llm"], ["llm", "answer"]],
        }
    )


FILLERS = [
    "The weather is nice today.",
    "Tell me about shipping times.",
    "Do you sell gift cards?",
    "Is the store open on Sunday?",
    "Thanks for the help so far.",
]


@pytest.mark.parametrize(
    "fidelity,window,last_turn_that_knows",
    [("documented", 3, 4), ("documented", 2, 3), ("code", 3, 3), ("documented", 1, 2)],
)
def test_the_demo_model_forgets_the_name_exactly_when_the_message_stating_it_leaves_the_window(
    fidelity, window, last_turn_that_knows
):
    flow = window_flow(window)
    client = LiteLLMClient(demo_only=True)
    state = ConversationState.new(flow)
    first = run_turn(flow, state, "Hi, I'm Dana.", llm=client, fidelity=fidelity)
    state = state.apply(first)
    for filler in FILLERS:
        # Ask on a side branch after each filler turn, so the answer never restates the name on the main line.
        ask = run_turn(flow, state, "What's my name?", llm=client, fidelity=fidelity)
        entries = {e.ref: e for e in ask.node_run("llm").ledger.entries}
        stated_kept = entries[f"{first.id}:query"].kept
        knows = ask.answer == "Your name is Dana."
        assert knows == stated_kept, (ask.dialogue_count, ask.answer)
        assert knows == (ask.dialogue_count <= last_turn_that_knows), (ask.dialogue_count, ask.answer)
        if not knows:
            assert ask.answer == "I don't know your name — it is not in what I was given."
            assert entries[f"{first.id}:query"].reason == "outside_window"
        filler_turn = run_turn(flow, state, filler, llm=client, fidelity=fidelity)
        assert "Dana" not in filler_turn.answer
        state = state.apply(filler_turn)


def test_the_support_bot_sample_forgets_the_name_at_turn_six():
    import json

    from core.flow.graph import load_flow
    from core.flow.runtime import run_conversation
    from tests.conftest import ROOT

    flow = load_flow(ROOT / "sample_data" / "flows" / "support-bot.yml")
    queries = json.loads((ROOT / "sample_data" / "flows" / "support-bot.queries.json").read_text(encoding="utf-8"))
    _, records = run_conversation(flow, queries, llm=DemoClient())
    assert records[0].answer.startswith("Noted. Your name is Dana.")
    assert records[5].query == "What's my name?"
    assert records[5].answer.startswith("I don't know your name — it is not in what I was given.")
    assert records[5].node_run("responder").ledger.entries[0].reason == "outside_window"
    assert records[3].answer == "Your order is 4411."
    assert all(r.node_run("classifier").ledger.history_tokens == 0 for r in records)
    assert records[-1].variables["turn_count"] == 8


def extractor_prompt(properties: dict, history: str, question: str) -> list[dict]:
    from core.flow.nodes.parameter_extractor import extractor_frame

    schema = {"type": "object", "properties": properties, "required": []}
    frame = extractor_frame(schema, "", question, counter_for(DEMO_MODEL), mode="chat", with_history=True)
    return (
        [m.wire() for m in frame.build([])]
        if not history
        else [{"role": "system", "content": frame.template.replace("#histories#", history)}, user(question)]
    )


def test_it_answers_a_parameter_extractor_with_a_value_for_every_parameter():
    import json

    properties = {
        "order_number": {"type": "number", "description": "the order"},
        "customer": {"type": "string", "description": "the customer's name"},
        "tier": {"type": "string", "description": "", "enum": ["gold", "basic"]},
        "urgent": {"type": "boolean", "description": ""},
        "tags": {"type": "array", "items": {"type": "string"}, "description": ""},
        "amounts": {"type": "array", "items": {"type": "number"}, "description": "amounts"},
    }
    # Facts from the history's Human lines, matched by a word of the name or description; a number or
    # option named in the question; else the type's empty value.
    reply = demo_reply(
        extractor_prompt(
            properties,
            "Human: Hi, I'm Dana.\nAssistant: Hello!\nHuman: My order number is 4411.",
            "gold, 12 and 30 please",
        )
    )
    assert json.loads(reply) == {
        "order_number": 4411,
        "customer": "Dana",
        "tier": "gold",
        "urgent": False,
        "tags": [],
        "amounts": [30],
    }
    # Without the history: the order the question states, the question's last number for a number
    # no fact names, and no name.
    alone = json.loads(demo_reply(extractor_prompt(properties, "", "order 7730, 2.5 kg")))
    assert (alone["order_number"], alone["customer"], alone["tier"], alone["amounts"]) == (7730, "", "", [2.5])
    assert json.loads(demo_reply(extractor_prompt({"n": {"type": "number"}}, "", "about 3 or 4")))["n"] == 4
    # A fact that is not of the parameter's type or options is passed over.
    named = json.loads(
        demo_reply(
            extractor_prompt(
                {"name": {"type": "number", "description": ""}, "diet": {"type": "string", "enum": ["vegan"]}},
                "Human: I'm Dana. I'm vegetarian.",
                "hi",
            )
        )
    )
    assert named == {"name": 0, "diet": ""}
