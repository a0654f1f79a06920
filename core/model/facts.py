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

A name and a number-like id are also read in Chinese, German, Spanish, French, Portuguese and Italian
("我叫Dana", "我的订单号是4411", "Ich heiße Dana", "meine Bestellnummer ist 4411", "Me llamo Dana",
"mi número de pedido es 4411", "Je m'appelle Dana"…), and so are the questions that ask for them
("我叫什么名字？", "Wie heiße ich?", "¿Cómo me llamo?"). A fact is said back in English, keyed as the
English statement keys it (``name``, ``order``…), so a name stated in one language is known when asked
in another. Text in a script none of these patterns reads is what :func:`unread_script` names.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

_NAME_STOP = {
    "a",
    "an",
    "the",
    "not",
    "just",
    "so",
    "very",
    "really",
    "planning",
    "looking",
    "going",
    "trying",
    "here",
    "back",
    "fine",
    "good",
    "ok",
    "okay",
    "sorry",
    "sure",
    "glad",
    "happy",
    "vegetarian",
    "vegan",
    "pescatarian",
    "allergic",
    "from",
    "in",
    "at",
    "on",
    "interested",
    "new",
    "still",
    "also",
    "afraid",
    "done",
    "ready",
    "hungry",
    "tired",
    "curious",
    "wondering",
    "thinking",
    "working",
    "travelling",
    "traveling",
    "calling",
    "writing",
    "asking",
    "having",
    "getting",
    "staying",
    "using",
}
_FOODS = ("meat", "fish", "pork", "dairy", "eggs")  # "I don't eat …"
_DIETS = ("vegetarian", "vegan", "pescatarian", "gluten-free", "lactose intolerant", "halal", "kosher")
_ID_WORDS = r"(?:order|booking|reservation|ticket|account|customer|invoice|case|tracking|confirmation)"

# Other languages: a name after "my name is" (Latin letters, or one to three Han characters in Chinese), and
# an id after the local word for an order, a booking… (its English key in _LOCAL_IDS).
_LATIN_NAME = r"([A-ZÀ-Ý][A-Za-zÀ-ÿ'-]+(?:\s+[A-ZÀ-Ý][A-Za-zÀ-ÿ'-]+)?)"
_HAN_NAME = r"((?!什么|啥|谁)[\u4e00-\u9fff]{1,3})(?=[，。！？,.!?\s]|$)"
_ID_VALUE = r"#?([A-Z]{0,4}-?\d[A-Za-z0-9-]{1,})"
_LOCAL_IDS = {
    "订单": "order",
    "预订": "booking",
    "预约": "booking",
    "账号": "account",
    "账户": "account",
    "工单": "ticket",
    "发票": "invoice",
    "客户": "customer",
    "bestell": "order",
    "bestellung": "order",
    "auftrags": "order",
    "auftrag": "order",
    "kunden": "customer",
    "buchungs": "booking",
    "buchung": "booking",
    "rechnungs": "invoice",
    "rechnung": "invoice",
    "ticket": "ticket",
    "sendungs": "tracking",
    "pedido": "order",
    "orden": "order",
    "reserva": "booking",
    "cuenta": "account",
    "factura": "invoice",
    "cliente": "customer",
    "commande": "order",
    "réservation": "booking",
    "compte": "account",
    "encomenda": "order",
    "ordine": "order",
    "prenotazione": "booking",
}
_HAN_IDS = "|".join(w for w in _LOCAL_IDS if "\u4e00" <= w[0] <= "\u9fff")
_GERMAN_IDS = r"(bestell|kunden|buchungs|rechnungs|ticket|auftrags|sendungs)(?:nummer|nr\.?)|(bestellung|buchung|rechnung|auftrag)"
_ROMANCE_IDS = (
    r"(pedido|orden|reserva|cuenta|factura|cliente|commande|réservation|compte|encomenda|ordine|prenotazione)"
)

_PATTERNS: list[tuple[str, re.Pattern]] = [
    ("name", re.compile(r"\b(?i:my name is|call me)\s+([A-Z][\w'-]+(?:\s+[A-Z][\w'-]+)?)")),
    ("name", re.compile(r"\b(?i:i'm|i am|this is)\s+([A-Z][a-z][\w'-]*(?:\s+[A-Z][a-z][\w'-]*)?)(?=[\s,.!?;]|$)")),
    (
        "name",
        re.compile(
            r"(?:我叫|我的名字是|我的名字叫|本人叫)\s*(?:([A-Za-z][A-Za-z'-]*(?:\s[A-Z][A-Za-z'-]*)?)|"
            + _HAN_NAME
            + ")"
        ),
    ),
    (
        "name",
        re.compile(
            r"\b(?i:ich hei(?:ß|ss)e|mein name ist|nenn(?:en sie)? mich|me llamo|mi nombre es|ll[aá]mame|"
            r"je m['’]appelle|mon nom est|appelle-moi|meu nome é|me chamo|chamo-me|mi chiamo|"
            r"il mio nome è)\s+" + _LATIN_NAME
        ),
    ),
    ("name", re.compile(r"\b(?i:soy|hola,? soy)\s+([A-ZÁÉÍÓÚÑ][a-záéíóúñ][\w'-]*)(?=[\s,.!?;]|$)")),
    ("local_id", re.compile(r"(" + _HAN_IDS + r")(?:号码|编号|号|ID|id)?\s*(?:是|为|:|：)?\s*" + _ID_VALUE)),
    ("local_id", re.compile(r"\b(?i:(?:meine?\s+)?(?:" + _GERMAN_IDS + r"))\s*(?i:ist|lautet|:|#)?\s*" + _ID_VALUE)),
    (
        "local_id",
        re.compile(
            r"\b(?i:(?:mi|mon|ma|meu|minha|il mio)\s+)?(?i:(?:n[uú]mero|num[eé]ro|numero)\s+(?:de|du|da|di)\s+"
            r"(?:la\s+|l['’])?)?(?i:" + _ROMANCE_IDS + r")\s*(?i:es|est|é|è|:|#)?\s*" + _ID_VALUE
        ),
    ),
    ("diet", re.compile(r"\b(?:i'm|i am)\s+(?:a\s+)?(" + "|".join(_DIETS) + r")\b", re.I)),
    ("diet", re.compile(r"\bi (?:don't|do not|never) eat (" + "|".join(_FOODS) + r")\b", re.I)),
    ("allergy", re.compile(r"\b(?:i'm|i am) allergic to ([\w\s-]+?)(?=[,.!?;]|$)", re.I)),
    ("home", re.compile(r"\b(?i:i (?:live|stay) in) ([A-Z][\w'-]+(?:\s+[A-Z][\w'-]+)?)")),
    ("home", re.compile(r"\b(?i:i'm|i am) from ([A-Z][\w'-]+(?:\s+[A-Z][\w'-]+)?)")),
    ("job", re.compile(r"\bi work as (?:a |an )?([\w\s-]+?)(?=[,.!?;]|$)", re.I)),
    (
        "id",
        re.compile(
            r"\b(?:my\s+)?(" + _ID_WORDS + r")\s*(?:number|no\.?|id|reference|ref|code|#)?\s*"
            r"(?:is|:|=|#)?\s*#?([A-Z]{0,4}-?\d[\w-]{1,})",
            re.I,
        ),
    ),
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
                value = next(g for g in m.groups() if g).strip()
                if value.split()[0].lower() in _NAME_STOP:
                    continue
                key = "name"
            elif kind == "local_id":
                local = next(g for g in m.groups()[:-1] if g)
                key, value = _LOCAL_IDS[local.lower()], m.group(m.lastindex or 0)
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
    (
        "diet",
        re.compile(r"\b(what|which) (kind of |sort of )?(food|diet)\b.*\b(i|me)\b|\bmy diet\b|\bwhat do i eat\b", re.I),
    ),
    ("allergy", re.compile(r"\b(what am i|am i) allergic\b|\bmy allerg", re.I)),
    ("home", re.compile(r"\bwhere (do i live|am i from)\b", re.I)),
    ("job", re.compile(r"\bwhat (do i do|is my job)\b", re.I)),
    ("like", re.compile(r"\bwhat do i (like|love|prefer|enjoy)\b", re.I)),
    ("remember", re.compile(r"\bwhat did i ask you to remember\b", re.I)),
    ("name", re.compile(r"我叫什么|我的名字(?:是什么|叫什么)|你(?:还)?(?:知道|记得)我(?:的名字|叫什么)|我是谁")),
    (
        "name",
        re.compile(
            r"(?i)\bwie hei(?:ß|ss)e ich\b|\bwie ist mein name\b|\b(?:weißt|weisst|kennst) du (?:noch )?"
            r"meinen namen\b|\bwer bin ich\b|c[oó]mo me llamo|\bcu[aá]l es mi nombre\b|"
            r"\b(?:sabes|recuerdas) (?:cu[aá]l es )?mi nombre\b|\bqui[eé]n soy\b|comment je m['’]appelle|"
            r"\bquel est mon nom\b|\bqual [ée] o meu nome\b|\bcomo me chamo\b|\bcome mi chiamo\b|"
            r"\bqual è il mio nome\b"
        ),
    ),
]
#: A question about an id in another language: the local word (its key in _LOCAL_IDS) is the first group.
_LOCAL_ID_QUESTIONS = [
    re.compile(r"(" + _HAN_IDS + r")(?:号码|编号|号)?[^。！？?]{0,6}(?:多少|什么|几号|[?？])"),
    re.compile(r"(?i)\b(?:wie|was) (?:lautet|ist|war) (?:meine?|die) (?:" + _GERMAN_IDS + r")\b"),
    re.compile(
        r"(?i)\b(?:cu[aá]l|quel|qual) (?:es|est|é|è) (?:mi|mon|ma|o meu|a minha|il mio) "
        r"(?:(?:n[uú]mero|num[eé]ro|numero) (?:de|du|da|di) (?:la |l['’])?)?" + _ROMANCE_IDS + r"\b"
    ),
]
_ID_QUESTION = re.compile(
    r"\b(?:what(?:'s| is| was)?|remind me(?: of)?|do you (?:know|remember))\b.*?\bmy " + _ID_WORDS, re.I
)
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
    for pattern in _LOCAL_ID_QUESTIONS:
        for found in pattern.finditer(question):
            local = next(g for g in found.groups() if g)
            keys.append(_LOCAL_IDS[local.lower()])
    mine = _MY_QUESTION.search(question) if not keys else None
    if mine and " and " not in mine.group(1):
        key = mine.group(1).strip().lower()
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


# Scripts the patterns above read: Latin (with its accents) and Han; anything else in a prompt is text whose
# facts the demo model cannot see (it then says so rather than "I don't know").
_OTHER_SCRIPTS = (
    ("Cyrillic", "\u0400", "\u04ff"),
    ("Greek", "\u0370", "\u03ff"),
    ("Arabic", "\u0600", "\u06ff"),
    ("Hebrew", "\u0590", "\u05ff"),
    ("Devanagari", "\u0900", "\u097f"),
    ("Thai", "\u0e00", "\u0e7f"),
    ("Japanese kana", "\u3040", "\u30ff"),
    ("Hangul", "\uac00", "\ud7af"),
)


def unread_script(text: str) -> str | None:
    """The name of a script in ``text`` whose facts are not read here (``"Cyrillic"``), or ``None``."""
    for name, low, high in _OTHER_SCRIPTS:
        if any(low <= c <= high for c in text):
            return name
    return None
