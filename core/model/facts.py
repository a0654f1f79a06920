"""Facts a user states about themselves, recognised deterministically and offline.

The demo model answers from the facts it finds in its prompt, the offline summariser keeps
them, the long-term memory store extracts them, and the compare page tracks when each one
leaves memory — all through this one module, so "what counts as a fact" is defined once.

Recognised statements (case-insensitive, in user messages):

* name — "I'm Dana", "I am Dana", "my name is Dana", "call me Dana"
* diet — "I'm vegetarian / vegan / pescatarian", "I don't eat meat"
* allergy — "I'm allergic to peanuts"
* home — "I live in Porto", "I'm from Porto"
* job — "I work as a nurse", "I'm a nurse" (after the words above fail)
* number-like ids — "my order (number/id) is 4411", "booking reference is AB12", "account 7730"
* likes / dislikes — "I like / love / prefer X", "I don't like / hate X"
* "remember (that) X" — anything the user explicitly asks to be remembered
* "my <thing> is <value>" — a generic fallback ("my favourite colour is green")
"""

from __future__ import annotations

import re
from dataclasses import dataclass

_NAME_STOP = {"a", "an", "the", "not", "just", "so", "very", "really", "planning", "looking", "going", "trying",
              "here", "back", "fine", "good", "ok", "okay", "sorry", "sure", "glad", "happy", "vegetarian",
              "vegan", "pescatarian", "allergic", "from", "in", "at", "on", "interested", "new", "still", "also",
              "afraid", "done", "ready", "hungry", "tired", "curious", "wondering", "thinking", "working",
              "travelling", "traveling", "calling", "writing", "asking", "having", "getting", "staying", "using"}
_FOODS = ("meat", "fish", "pork", "dairy", "eggs")  # "I don't eat …"
_DIETS = ("vegetarian", "vegan", "pescatarian", "gluten-free", "lactose intolerant", "halal", "kosher")
_ID_WORDS = r"(?:order|booking|reservation|ticket|account|customer|invoice|case|tracking|confirmation)"

_PATTERNS: list[tuple[str, re.Pattern]] = [
    ("name", re.compile(r"\b(?i:my name is|call me)\s+([A-Z][\w'-]+(?:\s+[A-Z][\w'-]+)?)")),
    ("name", re.compile(r"\b(?i:i'm|i am|this is)\s+([A-Z][a-z][\w'-]*(?:\s+[A-Z][a-z][\w'-]*)?)(?=[\s,.!?;]|$)")),
    ("diet", re.compile(r"\b(?:i'm|i am)\s+(?:a\s+)?(" + "|".join(_DIETS) + r")\b", re.I)),
    ("diet", re.compile(r"\bi (?:don't|do not|never) eat (" + "|".join(_FOODS) + r")\b", re.I)),
    ("allergy", re.compile(r"\b(?:i'm|i am) allergic to ([\w\s-]+?)(?=[,.!?;]|$)", re.I)),
    ("home", re.compile(r"\b(?i:i (?:live|stay) in) ([A-Z][\w'-]+(?:\s+[A-Z][\w'-]+)?)")),
    ("home", re.compile(r"\b(?i:i'm|i am) from ([A-Z][\w'-]+(?:\s+[A-Z][\w'-]+)?)")),
    ("job", re.compile(r"\bi work as (?:a |an )?([\w\s-]+?)(?=[,.!?;]|$)", re.I)),
    ("id", re.compile(r"\b(?:my\s+)?(" + _ID_WORDS + r")\s*(?:number|no\.?|id|reference|ref|code|#)?\s*"
                      r"(?:is|:|=|#)?\s*#?([A-Z]{0,4}-?\d[\w-]{1,})", re.I)),
    ("like", re.compile(r"\bi (?:really )?(?:like|love|prefer|enjoy) ([\w\s'-]+?)(?=[,.!?;]|$)", re.I)),
    ("dislike", re.compile(r"\bi (?:don't|do not|really don't) like ([\w\s'-]+?)(?=[,.!?;]|$)", re.I)),
    ("dislike", re.compile(r"\bi hate ([\w\s'-]+?)(?=[,.!?;]|$)", re.I)),
    ("remember", re.compile(r"\bremember(?: that)?[:,]?\s+(.+?)(?=[.!?]|$)", re.I)),
    ("my", re.compile(r"\bmy ([a-z][\w\s'-]{1,30}?) is ([\w'-][\w\s'.,-]{0,40}?)(?=[.!?;]|,\s|$)", re.I)),
]


@dataclass(frozen=True)
class Fact:
    """One stated fact: ``key`` names it (``name``, ``diet``, ``order``, ``my favourite colour``…)."""

    key: str
    value: str
    text: str  # the fact as a sentence about the user, e.g. "Your name is Dana."

    @property
    def topic(self) -> str:
        return self.key


#: What a fact says back to the user, by key (``{}`` is the value); any other key is "Your <key> is <value>.".
_SAYINGS = {
    "name": "Your name is {}.",
    "allergy": "You are allergic to {}.",
    "home": "You live in {}.",
    "job": "You work as {}.",
    "like": "You like {}.",
    "dislike": "You don't like {}.",
    "remember": "You asked me to remember: {}.",
}


def fact_text(key: str, value: str) -> str:
    """The fact ``key`` = ``value`` as a sentence about the user (what :attr:`Fact.text` holds)."""
    if key == "diet":
        diet = value.lower()
        return f"You don't eat {diet}." if diet in _FOODS else f"You are {diet}."
    saying = _SAYINGS.get(key)
    return saying.format(value) if saying else f"Your {key} is {value}."


def extract_facts(text: str) -> list[Fact]:
    """Facts stated in one user message, in order of appearance, without duplicates."""
    found: list[tuple[int, Fact]] = []
    taken: list[tuple[int, int]] = []
    for kind, pattern in _PATTERNS:
        for m in pattern.finditer(text):
            span = m.span()
            if any(a < span[1] and span[0] < b for a, b in taken):
                continue  # an earlier, more specific pattern already explained this text
            if kind == "name":
                value = m.group(1).strip()
                if value.split()[0].lower() in _NAME_STOP:
                    continue
                key = "name"
            elif kind == "id":
                key, value = m.group(1).lower(), m.group(2)
            elif kind == "my":
                key, value = m.group(1).strip().lower(), m.group(2).strip().rstrip(",")
                if key in ("name",):
                    continue
            else:
                key, value = kind, m.group(1).strip()
            if not value:
                continue
            found.append((span[0], Fact(key=key, value=value, text=fact_text(key, value))))
            taken.append(span)
    found.sort(key=lambda x: x[0])
    out: list[Fact] = []
    seen = set()
    for _, f in found:
        if (f.key, f.value.lower()) not in seen:
            seen.add((f.key, f.value.lower()))
            out.append(f)
    return out


_QUESTION_KEYS = [
    ("name", re.compile(r"\b(what'?s|what is|do you know|remember) my name\b|\bwho am i\b", re.I)),
    ("diet", re.compile(r"\b(what|which) (kind of |sort of )?(food|diet)\b.*\b(i|me)\b|\bmy diet\b|\bwhat do i eat\b", re.I)),
    ("allergy", re.compile(r"\b(what am i|am i) allergic\b|\bmy allerg", re.I)),
    ("home", re.compile(r"\bwhere (do i live|am i from)\b", re.I)),
    ("job", re.compile(r"\bwhat (do i do|is my job)\b", re.I)),
    ("like", re.compile(r"\bwhat do i (like|love|prefer|enjoy)\b", re.I)),
    ("remember", re.compile(r"\bwhat did i ask you to remember\b", re.I)),
]
_ID_QUESTION = re.compile(r"\b(?:what(?:'s| is| was)?|remind me(?: of)?|do you (?:know|remember))\b.*?\bmy "
                          + _ID_WORDS, re.I)
_MY_QUESTION = re.compile(r"\bwhat(?:'s| is| was)\s+my ([a-z][\w\s'-]{1,30}?)(?:\s+again)?\s*\?", re.I)


def asked_keys(question: str) -> list[str]:
    """Which fact keys a user question asks about ("what's my name?" → ``["name"]``)."""
    keys: list[str] = []
    for key, pattern in _QUESTION_KEYS:
        if pattern.search(question):
            keys.append(key)
    for m in re.finditer(_ID_WORDS, question, re.I):
        if _ID_QUESTION.search(question):
            keys.append(m.group(0).lower())
    m = _MY_QUESTION.search(question) if not keys else None
    if m and " and " not in m.group(1):
        key = m.group(1).strip().lower()
        for word in (" number", " reference", " id"):
            if key.endswith(word) and key[: -len(word)] in _ID_WORDS:
                key = key[: -len(word)]
        if key not in keys:
            keys.append(key)
    out = []
    for k in keys:
        if k not in out:
            out.append(k)
    return out
