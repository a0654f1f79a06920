"""The offline demo model ``memlens/demo``: deterministic, instant, and honest about its context.

It exists so that memory behaviour is visible with no key and no network: it answers *only* from
the messages it is given, so when a window is too small it visibly forgets.

What it does with a prompt (the last user message is the question, everything before it is context; a
prompt with no user message — a node whose template is all system prompt, the question written into
it — is asked by its last message with text):

1. **Facts** — it reads the facts users state (``core.model.facts``: "I'm Dana", "I'm vegetarian", "my order
   is 4411", "remember that …") in every user message of the prompt, and the facts it restated
   itself in earlier answers ("Your name is Dana."), later statements winning. A fact is known
   exactly while a message stating it is in the prompt.
2. **Statements** — a question that states facts is acknowledged: "Noted. Your name is Dana."
3. **Questions about facts** — "what's my name?" is answered from the known facts ("Your name is
   Dana.") or, plainly, "I don't know your name — it is not in what I was given." Facts and these
   questions are read in the languages :mod:`core.model.facts` reads (English, Chinese, German,
   Spanish, French, Portuguese, Italian); when the prompt holds text in a script it does not read, it
   says it cannot tell rather than that the fact is not there.
4. **"How many messages do you see?"** — it counts the earlier (non-system) messages in its prompt;
   "what do you know about me?" lists the facts it knows.
5. **Labels** — when a system message says "Reply with one of: a, b, c", it answers with the first
   option named in the question, else the last option (a deterministic labeller). When the
   message also lists ``Categories: [{"category_id": …, "category_name": …}, …]`` (a Question
   Classifier's prompt), it sorts by shared words: the category the question names, else the one whose name, and the lines of the
   sorting instructions that name it, share the most words with the question (Chinese: pairs of
   characters), the first of those tied; when none shares a word, the first category (as Dify takes
   the first class for a reply that names none). The answer is that category as JSON:
   ``{"category_id": …, "category_name": …}``, and the reply's note says which and why.
6. **Parameters** — when a system message gives ``Parameters as a JSON schema: {…}`` (a Parameter
   Extractor's prompt), the answer is a JSON object with a value for every parameter: a fact the
   prompt states (its history's ``Human:`` lines and the question) whose key is a word of the
   parameter's name or description, else a number or option named in the question, else the
   type's empty value.
7. Anything else gets a short receipt that quotes the question and says how many earlier messages
   it can see.

``max_tokens`` is not applied: replies are a sentence or two. Usage figures are real token counts
of the prompt and the reply (o200k_base, OpenAI's chat overhead rule; see :mod:`core.model.tokens`).

Registered with litellm as a custom provider (:func:`register`), so ``litellm.completion(model=
"memlens/demo", …)`` runs it through the same code path as a real model.
"""

from __future__ import annotations

import json
import re
import time
from dataclasses import dataclass
from typing import Any, Iterable, Mapping, Sequence

from core.model.facts import Fact, asked_keys, extract_facts, unread_script
from core.model.tokens import DEMO_MODEL, REPLY_PRIMING, counter_for

PROVIDER = "memlens"

_COUNT_QUESTION = re.compile(r"\bhow many (?:earlier |previous |past |prior |old )?messages\b", re.I)
_ABOUT_ME = re.compile(r"\bwhat do you (?:know|remember) about me\b", re.I)
_CATEGORIES = re.compile(r"^Categories: (\[.*\])$", re.M)
_SCHEMA = re.compile(r"^Parameters as a JSON schema: (\{.*\})$", re.M)
_HISTORY_LINE = re.compile(r"^(Human|Assistant): (.*)$", re.M)
_NUMBER = re.compile(r"-?\d+(?:\.\d+)?")
_WORD = re.compile(r"[a-z]+")
_ONE_OF = re.compile(r"\b(?:reply|answer|respond) with (?:exactly )?one of[:\s]+([^\n]+)", re.I)
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+")
_QUOTED = re.compile(r"\u201c[^\u201d]*\u201d")
#: Second-person sentences the demo model writes (core.model.facts ``Fact.text``) → first person, to re-read them.
_RESTATED = [
    (re.compile(r"^You asked me to remember:\s*"), "Remember: "),
    (re.compile(r"^Your\s"), "My "),
    (re.compile(r"^You are\s"), "I am "),
    (re.compile(r"^You don't\s"), "I don't "),
    (re.compile(r"^You\s"), "I "),
]
_PHRASES = {
    "name": "your name",
    "diet": "your diet",
    "allergy": "your allergies",
    "home": "where you live",
    "job": "your job",
    "like": "what you like",
    "dislike": "what you dislike",
    "remember": "what you asked me to remember",
}
_ID_KEYS = (
    "order",
    "booking",
    "reservation",
    "ticket",
    "account",
    "customer",
    "invoice",
    "case",
    "tracking",
    "confirmation",
)


def message_text(content: Any) -> str:
    """The text of a message's content (a string, or a list of parts whose text parts are joined)."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = []
        for part in content:
            if isinstance(part, Mapping) and part.get("type") in ("text", "input_text"):
                parts.append(str(part.get("text") or ""))
            elif isinstance(part, str):
                parts.append(part)
        return "\n".join(parts)
    return str(content)


def _restated_facts(text: str) -> list[Fact]:
    """Facts the model itself stated in an earlier answer ("Your name is Dana.")."""
    found: list[Fact] = []
    text = _QUOTED.sub("", text)  # a quoted question is the user's words, not the model's statement
    for sentence in _SENTENCE_END.split(text.strip()):
        for pattern, first_person in _RESTATED:
            if pattern.match(sentence):
                found.extend(extract_facts(pattern.sub(first_person, sentence, count=1)))
                break
    return found


def known_facts(messages: Sequence[Mapping[str, Any]]) -> dict[str, Fact]:
    """Fact key → the latest fact stated in the prompt (user statements and the model's own restatements)."""
    facts: dict[str, Fact] = {}
    for m in messages:
        role = m.get("role")
        text = message_text(m.get("content"))
        if role == "user":
            found = extract_facts(text)
        elif role == "assistant":
            found = _restated_facts(text)
        else:
            continue
        for f in found:
            facts[f.key] = f
    return facts


def _phrase(key: str) -> str:
    if key in _PHRASES:
        return _PHRASES[key]
    if key in _ID_KEYS:
        return f"your {key} number"
    return f"your {key}"


def _split_options(text: str) -> list[str]:
    text = text.strip().rstrip(".")
    parts = re.split(r",|\||\bor\b", text)
    return [p.strip().strip("'\"`") for p in parts if p.strip().strip("'\"`")]


def _label(options: list[str], question: str) -> tuple[str, str]:
    """The option a "Reply with one of" prompt gets, and a note when none is named in the question."""
    for option in options:
        if re.search(r"\b" + re.escape(option) + r"\b", question, re.I):
            return option, ""
    return options[-1], f"no option is named in the question: the demo model answered the last, “{options[-1]}”"


_LETTERS = re.compile(r"[^\W\d_]+")
_HAN = re.compile(r"[\u4e00-\u9fff]+")
#: Words too common to sort by (a class is often "Questions about …", "Other questions").
_COMMON = frozenset(
    """a an and any are about as at be by can could do does for from have how i if in is it me my
of on or other others please question questions query related regarding should so that the this to us we what
when where which who why will with would you your""".split()
)
_INSTRUCTIONS = re.compile(r"^Instructions for sorting:\n(.*?)\n(?:Reply|Answer|Respond) with", re.M | re.S)


def _stem(word: str) -> str:
    for end, keep in (("ies", "y"), ("ing", ""), ("ed", ""), ("es", ""), ("s", "")):
        if word.endswith(end) and len(word) - len(end) >= 3:
            return word[: len(word) - len(end)] + keep
    return word


def sort_terms(text: str) -> set[str]:
    """What the demo's classifier compares: words (lower case, plurals and -ing/-ed cut, common words left
    out) and, in Chinese, each pair of neighbouring characters."""
    out = {run[i : i + 2] for run in _HAN.findall(text) for i in range(max(len(run) - 1, 1))}
    words = _LETTERS.findall(_HAN.sub(" ", text).lower())
    return out | {_stem(w) for w in words if len(w) > 1 and w not in _COMMON}


def _classify(names: list[str], question: str, system: str) -> tuple[int, str]:
    """The category a Question Classifier's prompt gets (its index) and the note that says why."""
    listed = _INSTRUCTIONS.search(system)
    lines = listed.group(1).splitlines() if listed else []
    for k, name in enumerate(names):  # a category named in the question is the one it asks for
        if re.search(r"(?<!\w)" + re.escape(name) + r"(?!\w)", question, re.I):
            return k, f"the demo model sorts by shared words: the question names “{name}”"
    asked = sort_terms(question)
    shared = []
    for name in names:
        described = " ".join(line for line in lines if name.casefold() in line.casefold())
        shared.append(asked & sort_terms(f"{name} {described}"))
    best = max(range(len(names)), key=lambda k: (len(shared[k]), -k))
    if shared[best]:
        words = ", ".join(sorted(shared[best])[:4])
        return best, f"the demo model sorts by shared words: “{names[best]}” shares {words} with the question"
    return 0, (
        f"no category shares a word with the question, so the demo model took the first, “{names[0]}”, as Dify "
        "does with a reply that names none; a real model sorts by meaning"
    )


def _categories(system: str) -> dict[str, Any]:
    """The categories a Question Classifier's prompt lists, name → id (``{}`` when it lists none)."""
    listed = _CATEGORIES.search(system)
    try:
        found = json.loads(listed.group(1)) if listed else []
    except ValueError:
        return {}
    return {
        str(c["category_name"]): c.get("category_id")
        for c in found
        if isinstance(found, list) and isinstance(c, dict) and c.get("category_name")
    }


def _schema(system: str) -> dict[str, Any] | None:
    """The parameters a Parameter Extractor's prompt asks for, name → JSON schema (``None``: it asks for none)."""
    listed = _SCHEMA.search(system)
    try:
        found = json.loads(listed.group(1)) if listed else None
    except ValueError:
        return None
    properties = found.get("properties") if isinstance(found, dict) else None
    return {str(k): v for k, v in properties.items() if isinstance(v, dict)} if isinstance(properties, dict) else None


def _typed(kind: str, item: str, text: str) -> Any:
    """``text`` as a value of JSON-schema type ``kind`` (arrays of ``item``), or None when it is not one."""
    if kind == "array":
        one = _typed(item, "", text)
        return None if one is None else [one]
    if kind == "number":
        found = _NUMBER.findall(text)
        return (float(found[-1]) if "." in found[-1] else int(found[-1])) if found else None
    if kind == "boolean":
        return True
    return text if kind == "string" else None


def _extract(properties: dict[str, Any], system: str, question: str) -> str:
    """The demo model's reply to a Parameter Extractor's prompt: a JSON object, a value per parameter."""
    said = [
        {"role": "user" if who == "Human" else "assistant", "content": text}
        for who, text in _HISTORY_LINE.findall(system)
    ]
    facts = known_facts([*said, {"role": "user", "content": question}])
    out: dict[str, Any] = {}
    for name, spec in properties.items():
        kind = str(spec.get("type") or "string")
        items = spec.get("items")
        item = str(items.get("type") or "string") if isinstance(items, dict) else "string"
        words = set(_WORD.findall(f"{name} {spec.get('description') or ''}".lower().replace("_", " ")))
        value = next(
            (
                v
                for key, f in facts.items()
                if set(key.split()) & words and (v := _typed(kind, item, f.value)) is not None
            ),
            None,
        )
        options = [str(o) for o in spec.get("enum") or []]
        if value is None and options:
            named = [o for o in options if re.search(r"\b" + re.escape(o) + r"\b", question, re.I)]
            value = named[0] if named else ""
        if value is None and (kind == "number" or (kind == "array" and item == "number")):
            value = _typed(kind, item, question)
        if options and value not in options:
            value = ""
        if value is None:
            value = {"number": 0, "boolean": False, "array": []}.get(kind, "")
        out[name] = value
    return json.dumps(out, ensure_ascii=False)


def _short(text: str, width: int = 80) -> str:
    text = " ".join(text.split())
    return text if len(text) <= width else text[: width - 1] + "…"


@dataclass(frozen=True)
class DemoAnswer:
    """The demo model's reply, and a note for the receipt when it chose something a person should know
    about (which category it sorted into, and why)."""

    text: str
    note: str = ""


def demo_reply(messages: Sequence[Mapping[str, Any]]) -> str:
    """The demo model's reply to a prompt (OpenAI-style messages). Pure and deterministic."""
    return demo_answer(messages).text


def demo_answer(messages: Sequence[Mapping[str, Any]]) -> DemoAnswer:
    """:func:`demo_reply` with its note."""
    last_user = max((i for i, m in enumerate(messages) if m.get("role") == "user"), default=None)
    if last_user is None:  # a prompt that is all instructions: its last message with text asks
        last_user = max((i for i, m in enumerate(messages) if message_text(m.get("content")).strip()), default=None)
        if last_user is None:
            return DemoAnswer("I was given no question.")
    question = message_text(messages[last_user].get("content"))
    earlier = [m for i, m in enumerate(messages) if i != last_user and m.get("role") in ("user", "assistant", "tool")]
    for m in messages:
        if m.get("role") == "system":
            text = message_text(m.get("content"))
            properties = _schema(text)
            if properties is not None:
                return DemoAnswer(_extract(properties, text, question))
            match = _ONE_OF.search(text)
            if match:
                categories = _categories(text)
                if categories:
                    names = list(categories)
                    index, note = _classify(names, question, text)
                    return DemoAnswer(
                        json.dumps(
                            {"category_id": categories[names[index]], "category_name": names[index]}, ensure_ascii=False
                        ),
                        note,
                    )
                options = _split_options(match.group(1))
                if options:
                    return DemoAnswer(*_label(options, question))
    return DemoAnswer(_answer(messages, question, earlier))


def _answer(messages: Sequence[Mapping[str, Any]], question: str, earlier: list) -> str:
    """The reply to a question that is not a labelling or extraction prompt: facts, counts, a receipt."""
    stated = extract_facts(question)
    facts = {**known_facts(messages), **{f.key: f for f in stated}}  # the question's own, whatever its role
    asked = asked_keys(question)
    parts: list[str] = []
    unread = next(filter(None, (unread_script(message_text(m.get("content"))) for m in messages)), None)
    if stated:
        parts.append("Noted. " + " ".join(f.text for f in stated))
    for key in asked:
        fact = facts.get(key)
        if fact is not None:
            if not any(f.key == key for f in stated):
                parts.append(fact.text)
        elif unread:
            parts.append(
                f"I can't tell {_phrase(key)}: part of what I was given is in {unread}, which I do not "
                "read — a real model would."
            )
        else:
            parts.append(f"I don't know {_phrase(key)} — it is not in what I was given.")
    if _ABOUT_ME.search(question):
        if facts:
            parts.append("Here is what I know about you. " + " ".join(f.text for f in facts.values()))
        else:
            parts.append("I know nothing about you — nothing in what I was given says.")
    n = len(earlier)
    if _COUNT_QUESTION.search(question):
        users = sum(1 for m in earlier if m.get("role") == "user")
        parts.append(
            f"I can see {n} earlier message{'s' if n != 1 else ''} in my context "
            f"({users} from you, {n - users} from me or tools)."
        )
    if not parts:
        parts.append(
            f"Got your message (\u201c{_short(question)}\u201d). "
            f"I can see {n} earlier message{'s' if n != 1 else ''} in my context."
        )
    return " ".join(parts)


def demo_usage(messages: Sequence[Mapping[str, Any]], reply: str) -> dict[str, int]:
    """Real token counts: the prompt by OpenAI's chat rule, the reply's text tokens."""
    counter = counter_for(DEMO_MODEL)
    prompt = REPLY_PRIMING + sum(
        counter.chat(str(m.get("role") or "user"), message_text(m.get("content")), m.get("name")) for m in messages
    )
    completion = counter.text(reply)
    return {"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion}


def demo_complete(messages: Sequence[Mapping[str, Any]]) -> tuple[str, dict[str, int]]:
    reply = demo_reply(messages)
    return reply, demo_usage(messages, reply)


def demo_note(messages: Sequence[Mapping[str, Any]]) -> str:
    """The note of the demo model's reply to ``messages`` (:class:`DemoAnswer`), "" when it has none."""
    return demo_answer(messages).note


# -- litellm registration ---------------------------------------------------------------------------

_handler = None


def _make_handler():
    from litellm import CustomLLM, ModelResponse

    def respond(messages: Iterable[Mapping[str, Any]]):
        messages = list(messages)
        reply, usage = demo_complete(messages)
        return ModelResponse(
            model=DEMO_MODEL,
            created=int(time.time()),
            choices=[{"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": reply}}],
            usage=usage,
        )

    class DemoLLM(CustomLLM):
        """litellm's view of the demo model: ``completion``/``acompletion`` for ``memlens/demo``."""

        def completion(self, model, messages, *args, **kwargs):
            return respond(messages)

        async def acompletion(self, model, messages, *args, **kwargs):
            return respond(messages)

    return DemoLLM()


def register() -> None:
    """Register ``memlens/demo`` with litellm (idempotent; keeps other custom providers)."""
    global _handler
    import litellm

    if _handler is None:
        _handler = _make_handler()
    elif any(p.get("custom_handler") is _handler for p in (litellm.custom_provider_map or [])):
        return
    current = [p for p in (litellm.custom_provider_map or []) if p.get("provider") != PROVIDER]
    litellm.custom_provider_map = current + [{"provider": PROVIDER, "custom_handler": _handler}]
    # litellm reads the map into its provider tables on setup; re-run it so the change takes effect.
    try:
        from litellm.utils import custom_llm_setup

        custom_llm_setup()
    except ImportError:  # older/newer litellm: the map is read at call time
        pass


__all__ = [
    "PROVIDER",
    "DemoAnswer",
    "demo_answer",
    "demo_note",
    "demo_reply",
    "demo_usage",
    "demo_complete",
    "known_facts",
    "message_text",
    "register",
]
