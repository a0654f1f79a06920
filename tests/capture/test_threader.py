"""Threading calls into conversations: the rules of core/capture/threader.py, one behaviour each, on calls
built by hand (what a bot's payloads look like), and the observed ledger each call gets."""

from __future__ import annotations

from core.capture.calls import FAILED, Call
from core.capture.observed import observed_ledger, payload_rows
from core.capture.threader import Threader, thread_calls
from core.memory.words import explain
from core.model.conversation import Message, ToolCall
from core.model.ledger import GRANULARITY, KEPT, NOT_SENT, OTHER_BRANCH, OUTSIDE_WINDOW


def u(text):
    return Message("user", text, "", 0)


def a(text, *calls):
    return Message("assistant", text, "", 0, tool_calls=tuple(calls))


def s(text):
    return Message("system", text, "", 0)


def tool(text, call_id="c1"):
    return Message("tool", text, "", 0, tool_call_id=call_id)


class Bot:
    """A chatbot whose memory sends ``window(history)``; it places each call in ``threader`` as it goes."""

    def __init__(self, threader, system="You help.", window=lambda h: h, **call):
        self.threader, self.system, self.window, self.call = threader, system, window, call
        self.history: list[Message] = []
        self.clock = 0.0
        self.placed = []

    def ask(self, question, answer=None, *, keep=True):
        self.clock += 1
        answer = answer or f"answer to {question}"
        payload = (s(self.system), *self.window(self.history), u(question))
        thread, placed = self.threader.place(
            Call(f"c{self.clock}", payload, a(answer), model="gpt-4o-mini", started_at=self.clock, **self.call)
        )
        if keep:
            self.history += [u(question), a(answer)]
        self.placed.append(placed)
        return thread, placed


def test_a_bot_that_resends_its_history_makes_one_conversation_whose_calls_keep_it_all():
    bot = Bot(Threader())
    for q in ["one", "two", "three"]:
        thread, placed = bot.ask(q)
    assert len(bot.threader.threads) == 1
    conv = thread.conversation()
    assert [(t.query, t.answer) for t in conv.turns] == [
        ("one", "answer to one"),
        ("two", "answer to two"),
        ("three", "answer to three"),
    ]
    assert [p.kept for p in bot.placed] == [(), ((0, 0), (0, 1)), ((0, 0), (0, 1), (1, 0), (1, 1))]
    assert [p.number for p in bot.placed] == [1, 2, 3] and {p.node for p in bot.placed} == {"node-1"}


def test_two_bots_asking_at_once_stay_two_conversations():
    threader = Threader()
    dana, lee = Bot(threader), Bot(threader)
    for k in range(3):
        dana.ask(f"dana {k}")
        lee.ask(f"lee {k}")
    assert len(threader.threads) == 2
    assert sorted(len(t.turns) for t in threader.threads) == [3, 3]


def test_a_window_keeps_what_the_payload_held_and_the_ledger_says_the_rest_is_older_than_the_window():
    bot = Bot(Threader(), window=lambda h: h[-2:])
    for q in ["one", "two", "three", "four"]:
        thread, placed = bot.ask(q)
    conv = thread.conversation()
    rows = payload_rows(placed.call.messages, placed.roles, "gpt-4o-mini")
    ledger = observed_ledger(conv, placed.position, placed.kept, rows=rows, model="gpt-4o-mini")
    assert [e.reason for e in ledger.entries] == [OUTSIDE_WINDOW] * 4 + [KEPT] * 2
    assert [r["origin"] for r in rows] == ["system", "memory history", "memory history", "current query"]
    assert explain(ledger.entries[0], ledger.config).startswith("observed:")
    assert ledger.prompt_tokens == sum(r["tokens"] for r in rows) + 3


def test_history_the_capture_never_saw_becomes_turns_of_the_thread():
    threader = Threader()
    payload = (s("You help."), u("one"), a("first"), u("two"), a("second"), u("three"))
    thread, placed = threader.place(Call("c1", payload, a("third"), started_at=1))
    assert [(t.query, t.answer) for t in thread.conversation().turns] == [
        ("one", "first"),
        ("two", "second"),
        ("three", "third"),
    ]
    assert placed.position == 2 and placed.kept == ((0, 0), (0, 1), (1, 0), (1, 1))
    assert [c for t in thread.turns for c in t.calls] == [placed]  # the first two turns have no call


def test_calls_of_one_turn_with_other_system_prompts_are_other_nodes_of_that_turn():
    threader = Threader()
    bot = Bot(threader, system="Answer the customer.")
    bot.ask("Hi, I'm Dana.")
    classifier = threader.place(
        Call(
            "k", (s("Reply with one of: billing, other"), *bot.history, u("Refund please")), a("billing"), started_at=10
        )
    )[1]
    thread, llm = bot.ask("Refund please")
    assert len(threader.threads) == 1 and classifier.position == llm.position == 1
    assert (classifier.node, llm.node) == ("node-2", "node-1")
    assert thread.conversation().turns[1].answer == "answer to Refund please"  # the last node's reply


def test_a_node_whose_prompt_carries_a_changing_value_stays_one_node():
    threader = Threader()
    bot = Bot(threader)
    for day in range(1, 4):
        bot.system = f"You help. Today is 2025-03-0{day}; the customer is on the gold plan."
        bot.ask(f"day {day}")
    assert {p.node for p in bot.placed} == {"node-1"}


def test_a_regenerated_answer_and_an_edited_question_are_branches():
    bot = Bot(Threader())
    bot.ask("one")
    bot.ask("two", "first try", keep=False)
    thread, again = bot.ask("two", "second try")  # the same history and query again: regenerated
    _, edited = bot.threader.place(
        Call("e", (s("You help."), u("one"), a("answer to one"), u("TWO?")), a("edited"), started_at=9)
    )
    conv = thread.conversation()
    assert [(t.query, t.answer) for t in conv.turns[1:]] == [
        ("two", "first try"),
        ("two", "second try"),
        ("TWO?", "edited"),
    ]
    assert conv.tree.siblings(1) == [1, 2, 3]
    # The next turn follows the branch its history repeats; the sibling it left is on another branch.
    _, next_turn = bot.ask("three")
    ledger = observed_ledger(thread.conversation(), next_turn.position, next_turn.kept, rows=[], model="gpt-4o-mini")
    assert [e.reason for e in ledger.entries if e.position == 1] == [OTHER_BRANCH, OTHER_BRANCH]
    assert next_turn.kept == ((0, 0), (0, 1), (2, 0), (2, 1))


def test_a_pin_keeps_calls_without_history_in_one_conversation():
    threader = Threader()
    off = Bot(threader, window=lambda h: [], pin="x-memlens:support-7")
    for q in ["one", "two", "three"]:
        thread, _ = off.ask(q)
    unpinned = Bot(threader, window=lambda h: [])
    unpinned.ask("one")
    assert len(threader.threads) == 2
    assert [t.query for t in thread.conversation().turns] == ["one", "two", "three"]
    assert thread.conversation().one_thread()


def test_the_user_field_continues_that_users_conversation():
    threader = Threader()
    for k in range(3):
        Bot(threader, window=lambda h: [], user="end-user-1").ask(f"q{k}")
    Bot(threader, window=lambda h: [], user="end-user-2").ask("q0")
    assert sorted(len(t.turns) for t in threader.threads) == [1, 3]


def test_an_agents_tool_round_is_one_turn_its_requests_steps_of_it():
    threader = Threader()
    lookup = ToolCall("c1", "lookup", '{"order": 4411}')
    first = Call("1", (s("Agent"), u("Where is 4411?")), a("", lookup), tools=("lookup",), started_at=1)
    second = Call(
        "2",
        (s("Agent"), u("Where is 4411?"), a("", ToolCall("c1", "lookup", '{ "order":4411 }')), tool("shipped")),
        a("It has shipped."),
        tools=("lookup",),
        started_at=2,
    )
    thread, one = threader.place(first)
    _, two = threader.place(second)
    assert (one.position, one.step, two.position, two.step) == (0, 1, 0, 2)
    [turn] = thread.conversation().turns
    assert [m.kind for m in turn.messages] == ["query", "tool_call", "tool_result", "answer"]
    # The next question's payload leaves the tool round out: its ledger says those were intermediate.
    third = Call(
        "3",
        (s("Agent"), u("Where is 4411?"), a("It has shipped."), u("Thanks")),
        a("np"),
        tools=("lookup",),
        started_at=3,
    )
    _, three = threader.place(third)
    ledger = observed_ledger(thread.conversation(), three.position, three.kept, rows=[], model="gpt-4o-mini")
    assert [e.reason for e in ledger.entries] == [KEPT, GRANULARITY, GRANULARITY, KEPT]


def test_the_answer_the_app_kept_replaces_the_models_reply_as_the_turns_answer():
    threader = Threader()
    threader.place(Call("1", (s("x"), u("one")), a("raw reply"), started_at=1))
    thread, placed = threader.place(
        Call("2", (s("x"), u("one"), a("Answer: raw reply"), u("two")), a("r2"), started_at=2)
    )
    assert thread.conversation().turns[0].answer == "Answer: raw reply"
    assert placed.kept == ((0, 0), (0, 1)) and len(threader.threads) == 1


def test_a_failed_call_and_its_retry_are_one_turn():
    threader = Threader()
    failed = Call("1", (s("x"), u("one")), None, started_at=1, status=FAILED, error="upstream answered 500")
    thread, first = threader.place(failed)
    assert thread.turns[0].status == FAILED and thread.turns[0].error == "upstream answered 500"
    _, retry = threader.place(Call("2", (s("x"), u("one")), a("fine"), started_at=2))
    assert first.position == retry.position == 0 and retry.step == 2
    assert thread.turns[0].status == "succeeded" and thread.conversation().turns[0].answer == "fine"


def test_a_message_no_turn_holds_is_sent_but_not_from_the_thread_and_a_gap_is_not_sent():
    bot = Bot(Threader())
    for q in ["one", "two", "three"]:
        bot.ask(q)
    summary = Message("system", "Summary: the user counted.", "", 0)
    thread, placed = bot.threader.place(
        Call(
            "s",
            (s("You help."), summary, u("one"), a("answer to one"), u("three"), a("answer to three"), u("four")),
            a("4"),
            started_at=99,
        )
    )
    rows = payload_rows(placed.call.messages, placed.roles, "gpt-4o-mini")
    ledger = observed_ledger(thread.conversation(), placed.position, placed.kept, rows=rows, model="gpt-4o-mini")
    assert [r["origin"] for r in rows][:2] == ["system", "not from the thread"]
    assert [s.content for s in ledger.synthetic] == ["Summary: the user counted."]
    assert [e.reason for e in ledger.entries] == [KEPT, KEPT, NOT_SENT, NOT_SENT, KEPT, KEPT]


def test_a_responses_chain_is_threaded_by_its_previous_response_id():
    threader = Threader()
    thread, first = threader.place(
        Call("1", (u("Hi, I'm Ana."),), a("Hello Ana"), api="responses", started_at=1, response_id="resp_1")
    )
    _, second = threader.place(
        Call(
            "2",
            (u("Who am I?"),),
            a("Ana"),
            api="responses",
            started_at=2,
            previous_response="resp_1",
            response_id="resp_2",
        )
    )
    assert len(threader.threads) == 1 and second.position == 1 and second.kept == ((0, 0), (0, 1))


def test_a_trace_of_calls_is_threaded_in_time_order():
    calls = [
        Call("2", (s("x"), u("one"), a("1"), u("two")), a("2"), started_at=2),
        Call("1", (s("x"), u("one")), a("1"), started_at=1),
    ]
    [thread] = thread_calls(calls)
    assert [t.query.content for t in thread.turns] == ["one", "two"]
