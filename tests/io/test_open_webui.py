"""Open WebUI chat exports (a list of ``{id, title, chat: {history: {messages, currentId}, params}}``)
read with every branch of the message tree, the current message's thread active, the system prompt
and the files; a malformed chat is refused naming the message."""

from __future__ import annotations

import json

import pytest

from core.io import FormatError, detect_format, import_text
from core.memory.config import MemoryConfig
from core.memory.replay import Replay
from core.model.conversation import active_thread
from core.model.ledger import KEPT, OTHER_BRANCH


def message(mid, parent, role, content, ts, children=(), **extra):
    return mid, {
        "id": mid,
        "parentId": parent,
        "childrenIds": list(children),
        "role": role,
        "content": content,
        "timestamp": ts,
        **extra,
    }


def export(current="a2b", **chat):
    msgs = dict(
        [
            message(
                "u1",
                None,
                "user",
                "Hi, I'm Dana.",
                1,
                ["a1"],
                files=[{"type": "image", "url": "/api/v1/files/f1/content", "id": "f1", "name": "me.png"}],
            ),
            message("a1", "u1", "assistant", "Hello Dana!", 2, ["u2"], model="llama3.1"),
            message("u2", "a1", "user", "What's my name?", 3, ["a2", "a2b"]),
            message("a2", "u2", "assistant", "I don't know.", 4),
            message("a2b", "u2", "assistant", "Dana.", 5),  # regenerated
        ]
    )
    return [
        {
            "id": "chat-1",
            "title": "Names",
            "chat": {
                "title": "Names",
                "models": ["llama3.1"],
                "params": {"system": "Be kind."},
                "history": {"messages": msgs, "currentId": current},
                **chat,
            },
        }
    ]


def test_an_export_reads_every_branch_with_the_current_message_s_thread_active():
    text = json.dumps(export())
    assert detect_format(json.loads(text)) == "open-webui"
    conv = import_text(text, name="owui.json").conversations[0]
    assert (conv.name, conv.system_prompt, conv.source_format) == ("Names", "Be kind.", "open-webui")
    assert [(t.query, t.answer) for t in conv.turns] == [
        ("Hi, I'm Dana.", "Hello Dana!"),
        ("What's my name?", "I don't know."),
        ("What's my name?", "Dana."),
    ]
    assert [conv.turns[i].answer for i in active_thread(conv)] == ["Hello Dana!", "Dana."]
    assert conv.turns[0].query_message.files[0].name == "me.png"
    ledger = Replay(conv, MemoryConfig(window=10)).ledger_at(2)
    assert [e.reason for e in ledger.entries] == [KEPT, KEPT, OTHER_BRANCH, OTHER_BRANCH]


def test_an_open_webui_chat_opens_under_what_open_webui_sends_the_whole_branch():
    from core.analysis.debug_view import fitting_config

    conv = import_text(json.dumps(export()), name="owui.json").conversations[0]
    config = fitting_config(conv)
    assert config.model == "llama3.1"  # the one model the chat names: counted for it
    assert (config.strategy, config.granularity) == ("buffer", "all_messages")


def test_the_current_message_on_an_older_branch_keeps_that_branch_active():
    conv = import_text(json.dumps(export(current="a2")), name="owui.json").conversations[0]
    assert [conv.turns[i].answer for i in active_thread(conv)] == ["Hello Dana!", "I don't know."]


@pytest.mark.parametrize(
    "change,needle",
    [
        (lambda m: m["a1"].update(role="wizard"), "message 'a1' has an unknown role 'wizard'"),
        (lambda m: m["u2"].update(content=None), "message 'u2' has no 'content' text"),
        (lambda m: m["u1"].update(parentId="a2"), "the 'parent' links form a cycle"),
    ],
)
def test_a_malformed_chat_is_refused_naming_the_message(change, needle):
    doc = export()
    change(doc[0]["chat"]["history"]["messages"])
    with pytest.raises(FormatError, match=needle):
        import_text(json.dumps(doc), name="owui.json")
