"""Naming the rule behind a node's calls: the candidates whose replay gives every observed kept set, the
simplest first, its equivalents, the first call a rule does not explain, and where a named platform's
emulation differs. The bots here choose their history by rules written in the test (not MemLens's
strategies), so a recovered rule is a finding, not an echo."""

from __future__ import annotations

import json

from core.capture.inference import ObservedCall, infer_node, node_replay, roundest, rule_args
from core.capture.threader import Threader
from core.memory.config import MemoryConfig
from core.proxy.recorder import save_threads
from core.store.db import Database
from tests.capture.test_threader import Bot


def calls_of(thread) -> list[ObservedCall]:
    return [ObservedCall(p.node, p.number, p.position, frozenset(p.kept)) for p in thread.calls]


def inferred(bot: Bot):
    [thread] = bot.threader.threads
    node = thread.nodes["node-1"]
    return infer_node(thread.conversation(), node, calls_of(thread))


def chat(window, turns: int = 9, **kwargs) -> Bot:
    bot = Bot(Threader(), window=window, **kwargs)
    for k in range(turns):
        bot.ask(f"question {k} " + "with more words " * (k % 3), f"answer {k}" + " and a longer tail" * (k % 4))
    return bot


def labels(result) -> list[str]:
    return [result.best.rule.full] + [e.rule.full for e in result.equivalent]


def test_on_a_plain_alternating_conversation_last_6_messages_3_pairs_and_dify_window_4_are_one_rule():
    result = inferred(chat(lambda h: h[-6:]))
    assert result.best.explains == 9 and result.best.first_unexplained(result.calls) is None
    assert result.best.rule.settings() == {"memory": "window", "window": 6, "model": "gpt-4o-mini"}
    equal = {e.rule.family: e.rule.settings() for e in result.equivalent}
    assert equal["dify_documented"] == {"memory": "dify", "window": 3, "fidelity": "documented", "model": "gpt-4o-mini"}
    assert equal["dify_code"] == {"memory": "dify", "window": 4, "model": "gpt-4o-mini"}
    assert result.fit() == "explained by: last 6 messages (the Window Memory node, window 6), 9/9 calls"
    assert result.to_json()["rule"] == {"memory": "window", "window": 6, "model": "gpt-4o-mini"}


def test_everything_and_nothing_are_the_simplest_rules():
    assert inferred(chat(lambda h: h)).best.rule.settings() == {"memory": "buffer", "model": "gpt-4o-mini"}
    # A bot that sends no history is one conversation only when something pins its calls together.
    off = chat(lambda h: [], pin="x-memlens:one")
    assert inferred(off).best.rule.settings() == {"memory": "off", "model": "gpt-4o-mini"}


def test_a_window_that_changes_midway_is_explained_up_to_the_change_and_the_first_unexplained_call_named():
    bot = Bot(Threader(), window=lambda h: h[-4:])
    for k in range(6):
        bot.ask(f"q{k}")
    bot.window = lambda h: h[-2:]
    for k in range(6, 9):
        bot.ask(f"q{k}")
    result = inferred(bot)
    assert result.best.explains == 6 and result.best.first_unexplained(result.calls) == 7
    assert result.best.rule.settings()["window"] == 4
    assert result.to_json()["first_unexplained"] == 7 and result.to_json()["explains"] == 6


def test_a_token_budget_is_recovered_as_the_range_of_budgets_that_keep_the_same_sets():
    from core.model.tokens import chat_model_message_tokens, counter_for

    counter = counter_for("gpt-4o-mini")

    def within(history, budget=60):  # the newest messages whose chat-model count (+3 for the list) fits
        kept, used = [], 3
        for m in reversed(history):
            used += chat_model_message_tokens(counter, m)
            if used > budget:
                break
            kept.insert(0, m)
        return kept

    result = inferred(chat(within, turns=10))
    trim = [
        e.rule
        for e in [result.best, *result.alike]
        if e.rule.family == "trim_tokens"
        and not e.rule.config.settings.include_system
        and e.rule.config.settings.start_on is None
        and e.rule.config.granularity == "query_answer"
    ]
    assert trim and trim[0].span[0] <= 60 <= trim[0].span[1]
    assert result.best.explains == 10


def test_where_dify_as_shipped_differs_from_what_was_observed_the_message_and_why_are_named():
    bot = chat(lambda h: h[-6:], turns=4)
    bot.ask("question 3", "regenerated", keep=False)  # a regenerate: Dify's rows would count its sibling
    for k in range(4, 7):
        bot.ask(f"question {k}")
    result = inferred(bot)
    assert result.best.rule.settings()["memory"] == "window"
    [dify] = [d for d in result.differences if d.platform == "Dify as shipped"]
    assert dify.messages[0].startswith("observed: turn ") and (
        "would drop it" in dify.messages[0] or "would keep it" in dify.messages[0]
    )
    assert dify.sentence().startswith("Dify as shipped, window ") and ": differs at call " in dify.sentence()


def test_nothing_explains_calls_no_rule_makes():
    bot = Bot(Threader(), window=lambda h: h[::2])  # every other message: no memory MemLens emulates
    for k in range(6):
        bot.ask(f"q{k}")
    result = inferred(bot)
    assert result.best is None or result.best.explains < 6
    assert result.to_json()["first_unexplained"] is not None


def test_roundest_is_the_number_a_person_most_likely_set():
    assert (roundest(973, 1024), roundest(41, 47), roundest(0, 9), roundest(1201, 1204)) == (1000, 45, 0, 1201)


def test_a_rules_settings_are_the_options_replay_takes():
    assert rule_args(
        {
            "memory": "trim",
            "max_history_tokens": 120,
            "include_system": True,
            "start_on": "human",
            "model": "gpt-4o-mini",
        }
    ) == [
        "--memory",
        "trim",
        "--max-history-tokens",
        "120",
        "--include-system",
        "--start-on",
        "human",
        "--model",
        "gpt-4o-mini",
    ]


def test_infer_prints_the_json_shape_and_replay_reproduces_the_rule(tmp_path, capsys):
    from core.cli.app import main

    bot = chat(lambda h: h[-4:], turns=6)
    db = Database(f"sqlite:///{tmp_path / 'c.db'}")
    [conversation_id] = save_threads(db, bot.threader.threads)
    assert main(["infer", "--conversation", conversation_id, "--db", db.url, "--format", "json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert list(doc) == ["nodes"] and len(doc["nodes"]) == 1
    node = doc["nodes"][0]
    assert list(node) == ["node", "calls", "rule", "explains", "first_unexplained", "equivalent"]
    assert (node["node"], node["calls"], node["explains"], node["first_unexplained"]) == ("node-1", 6, 6, None)
    assert node["rule"] == {"memory": "window", "window": 4, "model": "gpt-4o-mini"}
    assert {"memory": "dify", "window": 3, "model": "gpt-4o-mini"} in node["equivalent"]
    assert (
        main(
            [
                "replay",
                "--conversation",
                conversation_id,
                "--node",
                "node-1",
                *rule_args(node["rule"]),
                "--db",
                db.url,
                "--format",
                "json",
            ]
        )
        == 0
    )
    turns = json.loads(capsys.readouterr().out)["turns"]
    assert [sum(e["kept"] for e in t["ledger"]) for t in turns] == [p.kept and len(p.kept) or 0 for p in bot.placed]
    assert main(["infer", "--conversation", conversation_id, "--db", db.url]) == 0
    text = capsys.readouterr().out
    assert "explained by: last 4 messages (the Window Memory node, window 4), 6/6 calls" in text
    assert f"replay: memlens replay --conversation {conversation_id} --node node-1 --memory window" in text


def test_infer_refuses_a_conversation_that_holds_no_captured_calls_in_one_line(tmp_path, capsys):
    from core.cli.app import main
    from core.service.transfer import store_conversations
    from tests.builders import linear

    db = Database(f"sqlite:///{tmp_path / 'c.db'}")
    [conversation_id] = store_conversations(db, [linear(3)])
    assert main(["infer", "--conversation", conversation_id, "--db", db.url]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "holds no captured calls" in err


def test_a_node_replays_with_its_own_prompt_size_where_it_called():
    bot = chat(lambda h: h, turns=3)
    [thread] = bot.threader.threads
    from core.capture.stored import as_conversation

    conversation = as_conversation(thread, source_format="capture")
    replay = node_replay(conversation, thread.nodes["node-1"], MemoryConfig(window=2, fidelity="documented"))
    rows = conversation.turns[2].meta["prompt_tokens"]["node-1"]
    assert replay.fixed_prompt_tokens(2) == rows and rows > 3
