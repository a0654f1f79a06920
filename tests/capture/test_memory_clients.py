"""Real memory implementations drive their own history through the proxy, and inference recovers the rule and
the settings each was configured with: LangChain's ``trim_messages`` in a chat loop (a token budget under the
model's encoding, the system message counted, starting on a human message), Haystack's Agent carrying its
messages from run to run (everything, every tool step), and a Dify-shaped client (a Chatflow LLM node with
window N as Dify 1.x ships it, regenerated answers and a failed turn included; a Question Classifier before
it whose history goes in as ``Human:``/``Assistant:`` text lines). ``infer``'s rule replays through
``replay --conversation`` to the same kept and dropped sets."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from core.capture.inference import infer_stored, rule_args
from core.model.ledger import NOT_ELIGIBLE
from core.store import repo
from tests.capture.conftest import KEY
from tests.capture.dify_client import DifyChatflow
from tests.conftest import ROOT

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")

QUESTIONS = [
    "Hi, I'm Dana and I live in Lisbon with two cats.",
    "My order is 4411.",
    "Thanks!",
    "Could you remind me, in detail, which order number I gave you a little while ago please?",
    "Where do I live?",
    "ok",
    "And how many cats do I have, if you still know it?",
    "Bye.",
]


def the_conversation(db):
    [info] = repo.list_conversations(db, source="capture")
    return info


def replayed_sets(db, conversation_id: str, node: str, settings: dict) -> dict[int, tuple[list, list]]:
    """Per turn number, ``python -m core replay``'s (kept refs, dropped refs) for a rule."""
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "core",
            "replay",
            "--conversation",
            conversation_id,
            "--node",
            node,
            *rule_args(settings),
            "--db",
            db.url,
            "--format",
            "json",
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert out.returncode == 0, out.stderr
    turns = json.loads(out.stdout)["turns"]
    return {
        t["turn"]: (
            [e["ref"] for e in t["ledger"] if e["kept"]],
            [e["ref"] for e in t["ledger"] if not e["kept"] and e["reason"] not in NOT_ELIGIBLE],
        )
        for t in turns
    }


def assert_rule_replays_to_the_observed_sets(db, conversation_id: str, node_inference) -> None:
    from core.store.ledger_codec import unpack_ledger

    conversation = repo.load_conversation(db, conversation_id)
    rows = repo.load_turn_rows(db, conversation_id, with_node_runs=True)
    replayed = replayed_sets(db, conversation_id, node_inference.node.id, node_inference.best.rule.settings())
    checked = 0
    for position, row in enumerate(rows):
        for run in row["node_runs"]:
            if run["node_id"] != node_inference.node.id or run["status"] != "succeeded":
                continue
            ledger = unpack_ledger(run["ledger"], conversation, position)
            observed = (
                [e.ref for e in ledger.entries if e.kept],
                [e.ref for e in ledger.entries if not e.kept and e.reason not in NOT_ELIGIBLE],
            )
            assert replayed[ledger.turn] == observed, (ledger.turn, observed, replayed[ledger.turn])
            checked += 1
    assert checked >= 3


def test_langchain_trim_messages_in_a_loop_is_recovered_as_its_token_budget(proxy, capture_db):
    from langchain_core.messages import HumanMessage, SystemMessage, trim_messages
    from langchain_openai import ChatOpenAI

    from core.model.tokens import counter_for

    counter_for("gpt-4o-mini")  # tiktoken's encodings, offline
    url, recorder = proxy
    model = ChatOpenAI(model="gpt-4o-mini", base_url=url, api_key=KEY, max_retries=0)
    system, budget, history = SystemMessage("You are a concise support assistant."), 120, []
    for question in QUESTIONS:
        kept = trim_messages(
            [system, *history],
            max_tokens=budget,
            token_counter=model,
            strategy="last",
            start_on="human",
            include_system=True,
        )
        reply = model.invoke([*kept, HumanMessage(question)])
        history += [HumanMessage(question), reply]
    assert recorder.wait()
    info = the_conversation(capture_db)
    [node] = infer_stored(capture_db, info.id).nodes
    assert node.best.explains == len(QUESTIONS)
    recovered = [
        e.rule
        for e in [node.best, *node.alike]
        if e.rule.family == "trim_tokens"
        and e.rule.config.settings.include_system
        and e.rule.config.settings.start_on == "human"
    ]
    assert any(r.span[0] <= budget <= r.span[1] for r in recovered), [r.span for r in recovered]
    # The budget trims by tokens, not by a number of messages: no message window explains the calls.
    assert all(e.rule.family not in ("window", "dify_documented", "dify_code") for e in [node.best, *node.alike])
    assert_rule_replays_to_the_observed_sets(capture_db, info.id, node)


def test_haystack_agent_carrying_its_messages_is_recovered_as_everything_with_its_tool_steps(proxy, capture_db):
    from haystack.components.agents import Agent
    from haystack.components.generators.chat import OpenAIChatGenerator
    from haystack.dataclasses import ChatMessage
    from haystack.tools import Tool
    from haystack.utils import Secret

    url, recorder = proxy
    lookup = Tool(
        name="lookup",
        description="Look an order up.",
        function=lambda query: f"found: {query}",
        parameters={"type": "object", "properties": {"query": {"type": "string"}}, "required": ["query"]},
    )
    agent = Agent(
        chat_generator=OpenAIChatGenerator(model="gpt-4o-mini", api_base_url=url, api_key=Secret.from_token(KEY)),
        tools=[lookup],
        system_prompt="You look orders up.",
    )
    messages: list = []
    for question in ["Where is order 4411?", "And order 7?", "Which did I ask about first?"]:
        messages = agent.run(messages=[*messages, ChatMessage.from_user(question)])["messages"]
    assert recorder.wait()
    info = the_conversation(capture_db)
    turns = repo.load_turn_rows(capture_db, info.id, with_node_runs=True)
    assert [t["query"] for t in turns] == ["Where is order 4411?", "And order 7?", "Which did I ask about first?"]
    assert [len(t["node_runs"]) for t in turns] == [2, 2, 2]  # the tool round: a second request each turn
    assert [r["step"] for r in turns[2]["node_runs"]] == [1, 2]
    [node] = infer_stored(capture_db, info.id).nodes
    assert node.best.explains == 6 and node.best.rule.settings() == {
        "memory": "buffer",
        "granularity": "all_messages",
        "model": "gpt-4o-mini",
    }
    assert_rule_replays_to_the_observed_sets(capture_db, info.id, node)


def test_a_dify_chatflow_llm_node_with_window_4_is_recovered_as_dify_as_shipped_window_4(proxy, capture_db):
    url, recorder = proxy
    bot = DifyChatflow(url, KEY, window=4, system="You are the order desk of Acme.")
    for k, question in enumerate(QUESTIONS[:5]):
        bot.ask(question)
        if k == 2:
            bot.regenerate(2)  # a regenerated answer: its row takes a window slot on another branch
    bot.ask("Is anything wrong?", fail=True)  # a failed turn: its row stays, its answer empty
    for question in QUESTIONS[5:]:
        bot.ask(question)
    bot.regenerate(len(bot.rows) - 1)
    assert recorder.wait()
    info = the_conversation(capture_db)
    [node] = infer_stored(capture_db, info.id).nodes
    calls = len(bot.sent)
    assert len(node.calls) == calls and node.best.explains == calls
    assert node.best.rule.settings() == {"memory": "dify", "window": 4, "model": "gpt-4o-mini"}
    # Rows of other branches take window slots in Dify as shipped: "the last 6 messages" does not explain it,
    # and the platforms whose emulation differs say at which call and which message.
    assert not any(e.rule.family == "window" for e in node.alike)
    assert any(d.platform == "the Window Memory node" for d in node.differences)
    assert_rule_replays_to_the_observed_sets(capture_db, info.id, node)


def test_a_dify_classifier_with_text_history_and_an_llm_node_share_a_conversation_each_with_its_window(
    proxy, capture_db
):
    from core.capture.inference import stored_calls
    from core.capture.view import captured_view, observed_run
    from core.store.ledger_codec import unpack_ledger

    url, recorder = proxy
    bot = DifyChatflow(url, KEY, window=4, system="You are the order desk of Acme.", classifier_window=3)
    for k, question in enumerate(QUESTIONS[:6]):
        bot.ask(question)
        if k == 2:
            bot.regenerate(2)  # the whole flow runs again: the classifier and the LLM node, on a branch
    assert recorder.wait() and not recorder.lines
    info = the_conversation(capture_db)  # one conversation holds both nodes' calls
    conversation, nodes, _, _ = stored_calls(capture_db, info.id)
    rows = repo.load_turn_rows(capture_db, info.id, with_node_runs=True)
    assert [r["query"] for r in rows] == [*QUESTIONS[:3], QUESTIONS[2], *QUESTIONS[3:6]]
    by_node = {n.text_prefixes is not None: n.id for n in nodes.values()}
    assert len(nodes) == 2 and set(by_node) == {True, False}
    classifier, llm = by_node[True], by_node[False]
    assert [[run["node_id"] for run in r["node_runs"]] for r in rows] == [[classifier, llm]] * len(rows)
    # Each node's own observed ledger holds what that node's payload held: the classifier's text lines (Dify's row
    # window 3, the turn's own row one of the rows), the LLM node's history messages (window 4).
    lines = [m[0]["content"].split("<histories>")[-1].split("</histories>")[0].strip() for m in bot.classified]
    expected = [
        ([q for q in text.split("\n") if q], [f"{m['role']}: {m['content']}" for m in sent[1:-1]])
        for text, sent in zip(lines, bot.sent)
    ]
    observed = []
    for position, row in enumerate(rows):
        kept = {
            run["node_id"]: [
                f"{e.role}: {conversation.turns[e.position].messages[e.index].content}"
                for e in unpack_ledger(run["ledger"], conversation, position).kept
            ]
            for run in row["node_runs"]
        }
        observed.append(
            (
                [line.replace("user: ", "Human: ").replace("assistant: ", "Assistant: ") for line in kept[classifier]],
                kept[llm],
            )
        )
    assert observed == expected
    assert [len(c) for c, _ in observed] == [0, 2, 4, 2, 2, 4, 4]  # a window, the regenerated row taking a slot
    # The receipt is the payload exactly as sent; the history's tokens are its lines' share of the system message.
    sent = rows[4]["node_runs"][0]["prompt"]
    assert [(r["role"], r["content"]) for r in sent] == [(m["role"], m["content"]) for m in bot.classified[4]]
    assert 0 < sent[0]["history_tokens"] < sent[0]["tokens"]
    inference = {n.node.id: n for n in infer_stored(capture_db, info.id).nodes}
    assert inference[classifier].best.rule.settings() == {"memory": "dify", "window": 3, "model": "gpt-4o-mini"}
    assert inference[classifier].best.explains == len(bot.classified)
    assert "window 3, over Human:/Assistant: text lines" in inference[classifier].fit()
    assert inference[classifier].to_json()["history"] == "text"
    assert inference[llm].best.rule.settings() == {"memory": "dify", "window": 4, "model": "gpt-4o-mini"}
    assert inference[llm].best.explains == len(bot.sent)
    for node_id in (classifier, llm):
        assert_rule_replays_to_the_observed_sets(capture_db, info.id, inference[node_id])
    out = subprocess.run(
        [sys.executable, "-m", "core", "infer", "--conversation", info.id, "--db", capture_db.url],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert out.returncode == 0, out.stderr
    assert (
        f"explained by: Dify as shipped, window 3, over Human:/Assistant: text lines, {len(rows)}/{len(rows)} "
        "calls" in out.stdout
    )
    assert f"explained by: Dify as shipped, window 4, {len(rows)}/{len(rows)} calls" in out.stdout
    # The Debugger's receipt of the classifier's call: the payload as sent.
    runs = {
        p: [dict(run, ledger=unpack_ledger(run["ledger"], conversation, p)) for run in r["node_runs"]]
        for p, r in enumerate(rows)
    }
    view = next(v for v in captured_view(conversation, info.meta, runs) if v.node.id == classifier)
    receipt = observed_run(conversation, view, 4)
    assert [r["content"] for r in receipt["prompt"]] == [m["content"] for m in bot.classified[4]]
