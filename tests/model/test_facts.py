"""Deterministic fact recognition shared by the demo model, summaries and long-term memory."""

import pytest

from core.model.facts import asked_keys, extract_facts, fact_text


@pytest.mark.parametrize(
    "text,expected",
    [
        ("Hi! I'm Dana and I'm planning a trip to Lisbon in May.", [("name", "Dana")]),
        ("My name is Dana Reyes and I like tea.", [("name", "Dana Reyes"), ("like", "tea")]),
        ("Also, I'm vegetarian, so keep that in mind.", [("diet", "vegetarian")]),
        ("My booking reference is 4411, in case you need it later.", [("booking", "4411")]),
        ("my order is 4411", [("order", "4411")]),
        ("Remember that my sister arrives on Friday.", [("remember", "my sister arrives on Friday")]),
        ("I live in Porto and I work as a nurse.", [("home", "Porto"), ("job", "nurse")]),
        ("My favourite colour is green.", [("favourite colour", "green")]),
        ("I'm allergic to peanuts", [("allergy", "peanuts")]),
        ("I love jazz, but I hate crowds.", [("like", "jazz"), ("dislike", "crowds")]),
        ("I'm planning a trip to Rome.", []),
        ("I'm Not sure about that", []),
        ("It's 7730.", []),
    ],
)
def test_statements_yield_their_facts(text, expected):
    assert [(f.key, f.value) for f in extract_facts(text)] == expected


def test_fact_sentences_speak_to_the_user():
    assert [f.text for f in extract_facts("I'm Dana. I'm vegetarian. My order number is 4411.")] == [
        "Your name is Dana.",
        "You are vegetarian.",
        "Your order is 4411.",
    ]


@pytest.mark.parametrize(
    "text,sentence",
    [
        ("I don't eat Pork.", "You don't eat pork."),
        ("I'm Vegan.", "You are vegan."),
        ("I'm allergic to peanuts.", "You are allergic to peanuts."),
        ("I live in Porto.", "You live in Porto."),
        ("I work as a nurse.", "You work as nurse."),
        ("I love green tea.", "You like green tea."),
        ("I hate rain.", "You don't like rain."),
        ("Remember that the gate code is {4411}.", "You asked me to remember: the gate code is {4411}."),
        ("My favourite colour is green.", "Your favourite colour is green."),
    ],
)
def test_each_kind_of_fact_has_its_own_sentence(text, sentence):
    [fact] = extract_facts(text)
    assert fact.text == sentence == fact_text(fact.key, fact.value)


@pytest.mark.parametrize(
    "question,keys",
    [
        ("Remind me, what's my name and my booking reference?", ["name", "booking"]),
        ("And what kind of food do I eat?", ["diet"]),
        ("What was my order number again?", ["order"]),
        ("What is my favourite colour?", ["favourite colour"]),
        ("Who am I?", ["name"]),
        ("How is the weather?", []),
    ],
)
def test_questions_name_the_facts_they_ask_about(question, keys):
    assert asked_keys(question) == keys


@pytest.mark.parametrize(
    "text,expected",
    [
        ("你好，我叫Dana，我的订单号是4411。", [("name", "Dana"), ("order", "4411")]),
        ("我叫小明。", [("name", "小明")]),
        ("我叫什么名字？", []),
        ("Hallo, ich heiße Dana. Meine Bestellnummer ist 4411.", [("name", "Dana"), ("order", "4411")]),
        ("Mein Name ist Dana Reyes, Kundennummer 7730.", [("name", "Dana Reyes"), ("customer", "7730")]),
        ("Hola, me llamo Dana y mi número de pedido es 4411.", [("name", "Dana"), ("order", "4411")]),
        ("Soy Dana, mi reserva es AB123.", [("name", "Dana"), ("booking", "AB123")]),
        ("Je m'appelle Dana.", [("name", "Dana")]),
    ],
)
def test_names_and_ids_are_read_in_chinese_german_spanish_and_french(text, expected):
    assert [(f.key, f.value) for f in extract_facts(text)] == expected


@pytest.mark.parametrize(
    "question,keys",
    [
        ("我叫什么名字？", ["name"]),
        ("你还记得我叫什么吗？", ["name"]),
        ("我的订单号是多少？", ["order"]),
        ("Wie heiße ich?", ["name"]),
        ("Wie lautet meine Bestellnummer?", ["order"]),
        ("¿Cómo me llamo?", ["name"]),
        ("¿Cuál es mi número de pedido?", ["order"]),
        ("Quel est mon nom ?", ["name"]),
    ],
)
def test_questions_for_a_name_or_an_id_are_read_in_those_languages(question, keys):
    assert asked_keys(question) == keys


def test_a_script_the_patterns_do_not_read_is_named():
    from core.model.facts import unread_script

    assert unread_script("меня зовут Дана") == "Cyrillic"
    assert unread_script("我叫Dana, ich heiße Dana") is None
