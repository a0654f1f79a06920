"""History sent as text lines inside one prompt message (core/capture/text_history.py) and how the threader
places such calls; and nodes the builder names (X-MemLens-Node). Calls are built by hand, as a Dify
classifier, a completion-style prompt or a home-made bot sends them."""

from __future__ import annotations

import pytest

from core.capture.calls import Call, split_payload
from core.capture.observed import HISTORY_TOKENS, fixed_tokens, observed_ledger, payload_rows
from core.capture.text_history import read_text_history
from core.capture.threader import Threader
from core.model.ledger import KEPT, OUTSIDE_WINDOW
from core.model.tokens import counter_for
from tests.capture.test_threader import Bot, a, s, u


def read(*messages):
    sent = split_payload(messages)
    query = sent.system_count + len(sent.history) if sent.query is not None else None
    return read_text_history(messages, system_count=sent.system_count, query=query, history_sent=bool(sent.history))


def said(text):
    return None if text is None else [(m.role, m.content) for m in text.messages]


# -- reading ------------------------------------------------------------------------------------------


def test_human_and_assistant_lines_in_the_system_message_are_its_history_and_the_rest_its_prompt():
    system = s(
        "Earlier conversation:\nHuman: Hi, I'm Dana.\nAssistant: Hello Dana!\nHuman: Two lines\nplease\n"
        "Assistant: ok\n\nSort the question into: orders, other."
    )
    text = read(system, u("Where is my order?"))
    assert said(text) == [
        ("user", "Hi, I'm Dana."),
        ("assistant", "Hello Dana!"),
        ("user", "Two lines\nplease"),
        ("assistant", "ok"),
    ]
    assert (text.index, text.user, text.assistant) == (0, "Human", "Assistant")
    assert text.without(system.content) == "Earlier conversation:\n\n\nSort the question into: orders, other."


def test_other_prefixes_are_read_when_they_alternate():
    assert said(read(u("User: hi\nAI: hello\nUser: and you?\nAI: fine"))) == [
        ("user", "hi"),
        ("assistant", "hello"),
        ("user", "and you?"),
        ("assistant", "fine"),
    ]
    # Names MemLens does not know are a history once they hold two exchanges.
    assert said(read(u("Dana: hi\nBot: hey\nDana: bye\nBot: bye!"))) is not None
    assert read(u("Dana: hi\nConcierge: hey")) is None


@pytest.mark.parametrize(
    "text",
    [
        "You are kind. Human: please be brief.",  # "Human:" once, inside prose
        "Human: the first line alone\n\nThen prose.",  # one prefixed line
        "Note: keep it short\nWarning: no links",  # two labels that are no roles
        "Human: one\nHuman: two",  # no alternation
    ],
)
def test_ordinary_text_is_not_a_history(text):
    assert read(s(text), u("q")) is None


def test_lines_in_a_payload_that_sends_its_history_as_messages_are_text_of_that_message():
    pasted = u("Summarise this chat:\nHuman: hi\nAssistant: hello")
    assert read(s("You help."), u("earlier"), a("reply"), pasted) is None
    assert read(s("You help."), pasted) is not None  # alone, the same lines read as a history


def test_a_histories_block_is_the_history_whatever_its_prefixes_and_an_empty_one_is_none_held():
    prose = "The chat so far is inside <histories></histories> tags.\n"
    system = s(prose + "<histories>\n    Me: hi\nYou: hello\n</histories>\nClassify.")
    text = read(system, u("q"), a("example"), u('{"input_text": ["q"]}'))
    assert said(text) == [("user", "hi"), ("assistant", "hello")] and (text.user, text.assistant) == ("Me", "You")
    assert text.without(system.content) == prose + "<histories></histories>\nClassify."
    empty = read(s(prose + "<histories>\n    \n</histories>"), u("q"))
    assert empty is not None and empty.messages == ()


# -- threading ----------------------------------------------------------------------------------------

CLASSIFY = "Sort the question into: orders, other."


def classifier_call(bot, window_turns, query, number, prefixes=("Human", "Assistant")):
    """A classifier whose history is the last ``window_turns`` turns of ``bot``'s, as text lines."""
    history = bot.history[-2 * window_turns :] if window_turns else []
    lines = "\n".join(f"{prefixes[0] if m.role == 'user' else prefixes[1]}: {m.content}" for m in history)
    payload = (s(f"Earlier conversation:\n{lines}\n\n{CLASSIFY}"), u(query))
    return Call(
        f"k{number}", payload, a("orders"), model="gpt-4o-mini", started_at=bot.clock + 0.5, user=bot.call.get("user")
    )


def test_a_classifier_with_text_history_and_an_llm_node_are_two_nodes_of_one_conversation_with_their_ledgers():
    threader = Threader()
    bot = Bot(threader, system="Answer the customer.", window=lambda h: h[-4:], user="end-user-1")
    classified = []
    for k, q in enumerate(["Hi, I'm Dana.", "My order is 4411.", "Thanks!", "Where is it?"]):
        classified.append(threader.place(classifier_call(bot, 1, q, k))[1])
        thread, _ = bot.ask(q)
    assert len(threader.threads) == 1
    assert [t.query for t in thread.conversation().turns] == [
        "Hi, I'm Dana.",
        "My order is 4411.",
        "Thanks!",
        "Where is it?",
    ]
    assert {c.node for c in classified} == {"node-1"} and {p.node for p in bot.placed} == {"node-2"}
    assert [c.position for c in classified] == [p.position for p in bot.placed] == [0, 1, 2, 3]
    # The classifier held one earlier turn, the LLM node two: each call's own observed set.
    assert [c.kept for c in classified] == [(), ((0, 0), (0, 1)), ((1, 0), (1, 1)), ((2, 0), (2, 1))]
    assert bot.placed[3].kept == ((1, 0), (1, 1), (2, 0), (2, 1))
    assert thread.nodes["node-1"].system == f"Earlier conversation:\n\n\n{CLASSIFY}"
    assert (
        thread.nodes["node-1"].text_prefixes == ("Human", "Assistant") and thread.nodes["node-2"].text_prefixes is None
    )
    # The turn's answer is the LLM node's, not the classifier's verdict.
    assert thread.conversation().turns[3].answer == "answer to Where is it?"


def test_a_text_history_call_counts_its_history_as_the_text_it_was_sent_as_and_its_receipt_is_the_payload():
    threader = Threader()
    bot = Bot(threader, system="Answer the customer.")
    for k, q in enumerate(["Hi, I'm Dana.", "My order is 4411.", "Thanks!"]):
        bot.ask(q)
    call = classifier_call(bot, 2, "Where is it?", 9)
    thread, placed = threader.place(call)
    rows = payload_rows(call.messages, placed.roles, "gpt-4o-mini", placed.text)
    assert [(r["role"], r["content"]) for r in rows] == [(m.role, m.content) for m in call.messages]
    counter = counter_for("gpt-4o-mini")
    bare = s(f"Earlier conversation:\n\n\n{CLASSIFY}")
    assert rows[0][HISTORY_TOKENS] == counter.message(call.messages[0]) - counter.message(bare) > 0
    ledger = observed_ledger(
        thread.conversation(), placed.position, placed.kept, rows=rows, model="gpt-4o-mini", text=placed.text
    )
    assert [e.reason for e in ledger.entries] == [OUTSIDE_WINDOW] * 2 + [KEPT] * 4
    assert ledger.history_tokens == rows[0][HISTORY_TOKENS]
    assert ledger.entries[2].tokens == counter.text("Human: My order is 4411.")
    assert fixed_tokens(rows) == counter.message(bare) + counter.message(call.messages[1]) + 3


def test_a_dify_classifier_whose_query_wraps_the_question_joins_the_turn_the_llm_node_asks_it_in():
    threader = Threader()
    bot = Bot(threader, system="Answer the customer.", user="end-user-1")
    for k, q in enumerate(["Hi, I'm Dana.", "Where is my order?"]):
        history = "\n".join(f"{'Human' if m.role == 'user' else 'Assistant'}: {m.content}" for m in bot.history)
        wrapped = u('{"input_text": ["%s"], "categories": ["orders", "other"]}' % q)
        _, verdict = threader.place(
            Call(
                f"k{k}",
                (s(f"Sort it.\n<histories>\n{history}\n</histories>"), u("example"), a("example verdict"), wrapped),
                a("orders"),
                started_at=bot.clock + 0.5,
                user="end-user-1",
            )
        )
        thread, llm = bot.ask(q)  # the LLM node asks the plain question after the classifier
        assert verdict.position == llm.position
    assert len(threader.threads) == 1
    assert [t.query for t in thread.conversation().turns] == ["Hi, I'm Dana.", "Where is my order?"]
    assert verdict.kept == ((0, 0), (0, 1)) and verdict.roles == ("system", "template", "template", "query")


def test_text_lines_that_match_no_turn_are_sent_but_not_from_the_thread():
    threader = Threader()
    bot = Bot(threader)
    bot.ask("one")
    call = Call(
        "k", (s("Human: (summary) Dana said hello\nAssistant: answer to one\n\nSort."), u("two")), a("x"), started_at=5
    )
    thread, placed = threader.place(call)
    assert [line["place"] for line in placed.text["lines"]] == [None, [0, 1]]
    rows = payload_rows(call.messages, placed.roles, "gpt-4o-mini", placed.text)
    ledger = observed_ledger(
        thread.conversation(), placed.position, placed.kept, rows=rows, model="gpt-4o-mini", text=placed.text
    )
    assert [m.content for m in ledger.synthetic] == ["(summary) Dana said hello"]


# -- named nodes --------------------------------------------------------------------------------------


def test_calls_naming_different_nodes_are_different_nodes_even_with_identical_prompts():
    threader = Threader()
    drafter = Bot(threader, system="You help.", node_name="drafter", user="u1")
    reviewer = Bot(threader, system="You help.", node_name="reviewer", user="u1")
    for q in ["one", "two"]:
        drafter.ask(q, keep=False)
        thread, _ = reviewer.ask(q)
        drafter.history = list(reviewer.history)
    assert len(threader.threads) == 1
    assert {p.node for p in drafter.placed} == {"node-1"} and {p.node for p in reviewer.placed} == {"node-2"}
    assert [n.title for n in thread.nodes.values()] == ["drafter", "reviewer"]
    assert [p.position for p in drafter.placed] == [p.position for p in reviewer.placed]
    # Without names, the same calls are one node (nothing in the payload tells them apart).
    plain = Threader()
    first, second = Bot(plain, system="You help.", user="u1"), Bot(plain, system="You help.", user="u1")
    first.ask("one", keep=False)
    second.ask("one")
    assert {p.node for p in first.placed + second.placed} == {"node-1"}


def test_a_restarted_proxy_keeps_a_text_history_nodes_prefixes_its_named_nodes_and_a_wrapped_turn(tmp_path):
    from core.proxy.recorder import load_threader, save_threads
    from core.store.db import Database

    db = Database(f"sqlite:///{tmp_path / 'capture.db'}")
    try:
        threader = Threader()
        bot = Bot(threader, system="Answer.", user="u1", node_name="answerer")
        bot.ask("Hi, I'm Dana.")
        wrapped = u('{"input_text": ["Where is my order?"]}')
        threader.place(
            Call(
                "k1",
                (
                    s("Sort.\n<histories>\nHuman: Hi, I'm Dana.\nAssistant: answer to Hi, I'm Dana.\n</histories>"),
                    wrapped,
                ),
                a("orders"),
                started_at=1.5,
                user="u1",
            )
        )
        save_threads(db, threader.threads)
        again = load_threader(db)  # the proxy restarted between the classifier's call and the LLM node's
        [thread] = again.threads
        assert [(n.name, n.text_prefixes) for n in thread.nodes.values()] == [
            ("answerer", None),
            ("", ("Human", "Assistant")),
        ]
        assert thread.turns[1].query_wrapped and thread.calls[1].text["lines"][1]["place"] == [0, 1]
        bot.threader = again
        _, llm = bot.ask("Where is my order?")
        assert llm.position == 1 and thread.turns[1].query.content == "Where is my order?"
        assert llm.node == "node-1" and len(again.threads) == 1
    finally:
        db.dispose()


def test_a_node_name_is_one_line_cut_at_the_limit_and_blank_or_odd_values_name_nothing():
    from core.capture.threader import node_name
    from core.limits import CAPTURE_NAME_CHARS

    assert node_name("  drafter\n node ") == "drafter node" and node_name(7) == "7"
    assert node_name("x" * (CAPTURE_NAME_CHARS + 5)) == "x" * CAPTURE_NAME_CHARS
    assert [node_name(v) for v in ("  ", None, True, ["a"], {"a": 1})] == [None] * 5


def test_a_prompts_question_and_answer_examples_are_not_a_history():
    assert (
        read(
            s("You answer for Acme.\nQ: What are your hours?\nA: Nine to five.\nQ: Do you ship abroad?\nA: Yes."),
            u("hi"),
        )
        is None
    )


def test_prose_naming_the_histories_tags_in_a_chat_nodes_prompt_leaves_its_message_history_alone():
    system = s("Quote earlier turns inside <histories></histories> tags when you need them.")
    assert read(system, u("one"), a("first"), u("two")) is None
    threader = Threader()
    bot = Bot(threader, system=system.content)
    for q in ["one", "two", "three"]:
        _, placed = bot.ask(q)
    assert placed.text is None and placed.kept == ((0, 0), (0, 1), (1, 0), (1, 1))
    # A first turn's rendered block (whitespace inside) is an empty history even beside worked examples.
    first = read(s("Sort.\n<histories>\n    \n</histories>"), u("example"), a("verdict"), u("q"))
    assert first is not None and first.messages == ()
