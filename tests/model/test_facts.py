"""Deterministic fact recognition shared by the demo model, summaries and long-term memory."""

import pytest

from core.model.facts import asked_keys, extract_facts, fact_text


@pytest.mark.parametrize("text,expected", [
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
])
def test_statements_yield_their_facts(text, expected):
    assert [(f.key, f.value) for f in extract_facts(text)] == expected


def test_fact_sentences_speak_to_the_user():
    assert [f.text for f in extract_facts("I'm Dana. I'm vegetarian. My order number is 4411.")] == [
        "Your name is Dana.", "You are vegetarian.", "Your order is 4411."]


@pytest.mark.parametrize("text,sentence", [
    ("I don't eat Pork.", "You don't eat pork."),
    ("I'm Vegan.", "You are vegan."),
    ("I'm allergic to peanuts.", "You are allergic to peanuts."),
    ("I live in Porto.", "You live in Porto."),
    ("I work as a nurse.", "You work as nurse."),
    ("I love green tea.", "You like green tea."),
    ("I hate rain.", "You don't like rain."),
    ("Remember that the gate code is {4411}.", "You asked me to remember: the gate code is {4411}."),
    ("My favourite colour is green.", "Your favourite colour is green."),
])
def test_each_kind_of_fact_has_its_own_sentence(text, sentence):
    [fact] = extract_facts(text)
    assert fact.text == sentence == fact_text(fact.key, fact.value)


@pytest.mark.parametrize("question,keys", [
    ("Remind me, what's my name and my booking reference?", ["name", "booking"]),
    ("And what kind of food do I eat?", ["diet"]),
    ("What was my order number again?", ["order"]),
    ("What is my favourite colour?", ["favourite colour"]),
    ("Who am I?", ["name"]),
    ("How is the weather?", []),
])
def test_questions_name_the_facts_they_ask_about(question, keys):
    assert asked_keys(question) == keys
