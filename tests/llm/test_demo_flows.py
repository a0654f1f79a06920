"""The demo model on people's own flows: its classifier sorts by shared words and says which and why, and
it reads names and numbers in the languages the samples and Dify's templates use — so it is never a dead
end, and its reply never contradicts what the receipt shows it was sent."""

from __future__ import annotations

import json

import pytest

from core.flow.graph import load_flow
from core.flow.runtime import run_conversation
from core.llm.client import DemoClient, LiteLLMClient
from core.llm.demo_model import demo_answer, sort_terms
from tests.conftest import FIXTURES, ROOT

TEMPLATE = FIXTURES / "dify_dsl" / "dify-templates__Question_Classifier_Knowledge_Chatbot.yml"
INTENT = FIXTURES / "dify_dsl" / "svcvit__根据用户的意图进行回复.yml"
MEMORY_TEST = FIXTURES / "dify_dsl" / "svcvit__记忆测试.yml"


def _run(path, queries, client=None):
    flow = load_flow(path)
    _, records = run_conversation(flow, queries, llm=client or DemoClient())
    return flow, records


def _classifier_runs(records):
    return [r for record in records for r in record.node_runs if r.type == "question-classifier"]


def test_the_templates_classifier_sorts_by_shared_words_and_the_knowledge_chatbot_answers():
    """Dify's Question Classifier + Knowledge + Chatbot template: the refusal class ("Other questions") is
    no longer where every question goes, so its LLM nodes run and there is memory to inspect."""
    flow, records = _run(TEMPLATE, ["How do I use the product?", "Hi, I'm Dana.", "What's my name?"])
    picked = [r.outputs["class_name"] for r in _classifier_runs(records)]
    assert picked[0] == "Questions about how to use products"
    assert "Other questions" not in picked
    notes = [r.notes for r in _classifier_runs(records)]
    assert any(
        "the demo model sorts by shared words: “Questions about how to use products” shares product, use" in n
        for n in notes[0]
    )
    # Nothing shared ("Hi, I'm Dana."): the first class, said so in the note, never silently the last.
    assert picked[1] == "Question related to after sales"
    assert any("no category shares a word with the question, so the demo model took the first" in n for n in notes[1])
    llm_runs = [r for record in records for r in record.node_runs if r.type == "llm"]
    assert len(llm_runs) == 3  # one chatbot answered each turn
    assert records[2].answer == "Your name is Dana."


def test_the_chinese_intent_flow_sorts_by_its_instructions_descriptions():
    """svcvit's intent flow: two classes named only "健康咨询" and "使用帮助", described in the sorting
    instruction's lines (sleep and diet are health, the app and the wristband are usage help)."""
    _, records = _run(INTENT, ["我最近睡眠不好", "这个运动腕带怎么连接App？"])
    picked = [r.outputs["class_name"] for r in _classifier_runs(records)]
    assert picked == ["健康咨询", "使用帮助"]
    assert any("“健康咨询” shares 睡眠" in n for n in _classifier_runs(records)[0].notes)


def test_sort_terms_cut_plurals_and_common_words_and_pair_chinese_characters():
    assert sort_terms("Questions about how to use products") == {"use", "product"}
    assert sort_terms("睡眠不好") == {"睡眠", "眠不", "不好"}


@pytest.mark.parametrize(
    "said,asked,answer",
    [
        ("你好，我叫Dana，我的订单号是4411。", "我叫什么名字？", "Your name is Dana."),
        ("你好，我叫Dana，我的订单号是4411。", "我的订单号是多少？", "Your order is 4411."),
        ("Hallo, ich heiße Dana. Meine Bestellnummer ist 4411.", "Wie heiße ich?", "Your name is Dana."),
        (
            "Hallo, ich heiße Dana. Meine Bestellnummer ist 4411.",
            "Wie lautet meine Bestellnummer?",
            "Your order is 4411.",
        ),
        ("Hola, me llamo Dana y mi número de pedido es 4411.", "¿Cómo me llamo?", "Your name is Dana."),
        ("Hola, me llamo Dana y mi número de pedido es 4411.", "¿Cuál es mi número de pedido?", "Your order is 4411."),
        ("Je m'appelle Dana.", "Quel est mon nom ?", "Your name is Dana."),
    ],
)
def test_the_chinese_memory_flow_knows_a_name_and_an_order_in_each_language_while_it_is_sent(said, asked, answer):
    """svcvit's 记忆测试 (a window of 10 on its chat node): what the receipt shows sent is what it answers from."""
    _, records = _run(MEMORY_TEST, [said, asked])
    assert records[1].answer == answer
    sent = [m.content for r in records[1].node_runs if r.prompt for m in r.prompt]
    assert any(said in text for text in sent)  # the statement is in what was sent, and the reply agrees


def test_a_fact_asked_for_without_its_statement_is_plainly_unknown_in_any_language():
    _, records = _run(MEMORY_TEST, ["我叫什么名字？"])
    assert records[0].answer == "I don't know your name — it is not in what I was given."


def test_text_in_a_script_it_does_not_read_makes_it_say_it_cannot_tell():
    prompt = [
        {"role": "user", "content": "Привет, меня зовут Дана."},
        {"role": "assistant", "content": "Привет!"},
        {"role": "user", "content": "What's my name?"},
    ]
    reply = demo_answer(prompt).text
    assert reply.startswith("I can't tell your name: part of what I was given is in Cyrillic")
    assert "I don't know" not in reply


def test_every_sample_flow_with_queries_runs_on_the_demo_model_and_answers_every_turn():
    for queries_file in sorted((ROOT / "sample_data" / "flows").glob("*.queries.json")):
        flow_file = queries_file.with_name(queries_file.name.replace(".queries.json", ".yml"))
        queries = json.loads(queries_file.read_text(encoding="utf-8"))
        _, records = _run(flow_file, queries, LiteLLMClient(demo_only=True))
        assert all(r.status == "succeeded" for r in records), flow_file.name
        assert all(r.answer for r in records), flow_file.name
        for run in _classifier_runs(records):  # every classification says which and why
            assert any("demo model" in n for n in run.notes), (flow_file.name, run.notes)
