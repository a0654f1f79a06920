"""Prompt assembly of the LLM node (spec/dify-memory.md §2.4–§2.7): template, history, query; completion mode."""

from __future__ import annotations

from typing import Any, Mapping, Sequence

from core.flow.graph import Flow
from core.flow.records import ConversationState
from core.flow.runtime import run_conversation, run_turn
from core.llm.client import LLMReply
from core.llm.errors import LLMError


class ScriptedClient:
    """An injected LLM client: replies from a script (or echoes), records every prompt it is sent."""

    def __init__(self, replies: Sequence[str] | Mapping[str, Sequence[str]] = (), fail: str | None = None):
        self.replies = replies
        self.fail = fail
        self.calls: list[tuple[str, list[dict]]] = []
        self._used: dict[str, int] = {}

    def complete(self, model: str, messages, max_tokens=None) -> LLMReply:
        self.calls.append((model, [dict(m) for m in messages]))
        if self.fail:
            raise LLMError(self.fail)
        key = messages[0]["content"] if isinstance(self.replies, Mapping) else ""
        script = self.replies.get(key, ()) if isinstance(self.replies, Mapping) else self.replies
        i = self._used.get(key, 0)
        self._used[key] = i + 1
        text = script[i] if i < len(script) else f"reply {len(self.calls)}"
        return LLMReply(text=text, prompt_tokens=1, completion_tokens=1, model=model or "memlens/demo")


def chat_flow(
    llm: dict,
    *,
    variables: Sequence[dict] = (),
    answer: str = "{{#llm.text#}}",
    start_variables: Sequence[dict] = (),
    mode: str = "advanced-chat",
) -> Flow:
    nodes = [
        {"id": "start", "type": "start", "variables": list(start_variables)},
        dict({"id": "llm", "type": "llm", "model": "memlens/demo"}, **llm),
    ]
    if mode == "advanced-chat":
        nodes.append({"id": "answer", "type": "answer", "answer": answer})
        edges = [["start", "llm"], ["llm", "answer"]]
    else:
        nodes.append({"id": "end", "type": "end", "outputs": [{"variable": "text", "value_selector": ["llm", "text"]}]})
        edges = [["start", "llm"], ["llm", "end"]]
    return Flow.from_dict(
        {
            "format": "memlens-flow",
            "version": 1,
            "name": "t",
            "mode": mode,
            "variables": list(variables),
            "nodes": nodes,
            "edges": edges,
        }
    )


def prompt_of(record, node="llm") -> list[tuple[str, str]]:
    return [(m.role, m.content) for m in record.node_run(node).prompt]


def origins_of(record, node="llm") -> list[str]:
    return [m.origin for m in record.node_run(node).prompt]


def test_chat_order_is_template_then_history_then_the_query():
    flow = chat_flow(
        {
            "prompt_template": [
                {"role": "system", "text": "Be brief."},
                {"role": "user", "text": "Example question"},
                {"role": "assistant", "text": "Example answer"},
            ],
            "memory": {"window": 5},
        }
    )
    client = ScriptedClient(["first answer", "second answer"])
    _, (r1, r2) = run_conversation(flow, ["first question", "second question"], llm=client)
    assert prompt_of(r2) == [
        ("system", "Be brief."),
        ("user", "Example question"),
        ("assistant", "Example answer"),
        ("user", "first question"),
        ("assistant", "first answer"),
        ("user", "second question"),
    ]
    assert origins_of(r2) == ["system", "template", "template", "memory history", "memory history", "current query"]
    assert client.calls[1][1] == [{"role": r, "content": c} for r, c in prompt_of(r2)]


def test_query_appears_twice_when_the_template_also_holds_sys_query_and_memory_is_on():
    flow = chat_flow(
        {
            "prompt_template": [
                {"role": "system", "text": "Sys"},
                {"role": "user", "text": "Question: {{#sys.query#}}"},
            ],
            "memory": {"window": 5},
        }
    )
    _, (r1, r2) = run_conversation(flow, ["hello", "again"], llm=ScriptedClient(["a1", "a2"]))
    assert prompt_of(r1) == [("system", "Sys"), ("user", "Question: hello"), ("user", "hello")]
    assert prompt_of(r2) == [
        ("system", "Sys"),
        ("user", "Question: again"),
        ("user", "hello"),
        ("assistant", "a1"),
        ("user", "again"),
    ]


def test_without_a_memory_block_no_query_message_is_added_and_no_history_is_sent():
    flow = chat_flow({"prompt_template": [{"role": "system", "text": "Sys"}]})
    _, (r1, r2) = run_conversation(flow, ["hello", "again"], llm=ScriptedClient())
    assert prompt_of(r2) == [("system", "Sys")]
    assert [e.reason for e in r2.node_run("llm").ledger.entries] == ["memory_off", "memory_off"]


def test_an_empty_query_template_sends_the_raw_query_rendered_as_a_template():
    flow = chat_flow(
        {
            "prompt_template": [{"role": "system", "text": "Sys"}],
            "memory": {"window": {"enabled": True, "size": 3}, "query_prompt_template": ""},
        }
    )
    _, (r1,) = run_conversation(flow, ["count {{#sys.dialogue_count#}} {{#context#}}end"], llm=ScriptedClient())
    # Dify renders the user's raw text as a template: selectors resolve, the context placeholder goes.
    assert prompt_of(r1)[-1] == ("user", "count 1 end")


def test_the_ui_default_query_template_keeps_its_trailing_newlines():
    flow = chat_flow(
        {
            "prompt_template": [{"role": "system", "text": "Sys"}],
            "memory": {
                "window": {"enabled": False, "size": 50},
                "query_prompt_template": "{{#sys.query#}}\n\n{{#sys.files#}}",
            },
        }
    )
    _, (r1,) = run_conversation(flow, ["hello"], llm=ScriptedClient())
    assert prompt_of(r1)[-1] == ("user", "hello\n\n")


def test_empty_messages_are_dropped_including_a_failed_turns_empty_answer():
    flow = chat_flow(
        {
            "prompt_template": [{"role": "system", "text": "{{#conversation.note#}}"}, {"role": "user", "text": ""}],
            "memory": {"window": 5},
        },
        variables=[{"name": "note", "type": "string", "default": ""}],
    )
    state = ConversationState.new(flow)
    failed = run_turn(flow, state, "first", llm=ScriptedClient(fail="provider down"))
    assert failed.status == "failed"
    state = state.apply(failed)
    r2 = run_turn(flow, state, "second", llm=ScriptedClient(["ok"]))
    # Two user messages in a row: the failed turn's empty answer is not sent (§2.7).
    assert prompt_of(r2) == [("user", "first"), ("user", "second")]
    assert [(e.role, e.reason) for e in r2.node_run("llm").ledger.entries] == [("user", "kept"), ("assistant", "empty")]


def test_missing_selectors_render_as_their_text_and_histories_without_a_dot_stay():
    flow = chat_flow(
        {
            "prompt_template": [
                {"role": "system", "text": "A {{#ghost.text#}} B {{#histories#}}"},
                {"role": "user", "text": "{{#sys.query#}}"},
            ]
        }
    )
    _, (r1,) = run_conversation(flow, ["hi"], llm=ScriptedClient())
    assert prompt_of(r1)[0] == ("system", "A ghost.text B {{#histories#}}")


def test_template_origins_mark_conversation_variables_and_context():
    flow = chat_flow(
        {
            "prompt_template": [
                {"role": "system", "text": "Known: {{#conversation.name#}}"},
                {"role": "system", "text": "Docs: {{#context#}}"},
                {"role": "user", "text": "{{#sys.query#}} (turn {{#sys.dialogue_count#}})"},
            ],
            "context": {"enabled": True, "variable_selector": ["start", "docs"]},
        },
        variables=[{"name": "name", "type": "string", "default": "Dana"}],
        start_variables=[{"variable": "docs", "label": "Docs", "type": "paragraph", "required": False}],
    )
    _, (r1,) = run_conversation(flow, [{"query": "hi", "inputs": {"docs": "the manual"}}], llm=ScriptedClient())
    assert prompt_of(r1) == [("system", "Known: Dana"), ("system", "Docs: the manual"), ("user", "hi (turn 1)")]
    assert origins_of(r1) == ["conversation variable", "context", "template"]


def test_prompt_message_tokens_add_up_to_the_ledgers_prompt_tokens():
    flow = chat_flow({"prompt_template": [{"role": "system", "text": "You are helpful."}], "memory": {"window": 5}})
    _, records = run_conversation(flow, ["one", "two", "three"], llm=ScriptedClient())
    run = records[-1].node_run("llm")
    assert run.ledger.prompt_tokens == 3 + sum(m.tokens for m in run.prompt)
    assert run.ledger.history_tokens == sum(m.tokens for m in run.prompt if m.origin == "memory history")


def test_jinja2_edition_renders_with_its_variables():
    flow = chat_flow(
        {
            "prompt_template": [
                {"role": "system", "edition_type": "jinja2", "text": "", "jinja2_text": "Hello {{ who|upper }}"},
                {"role": "user", "text": "{{#sys.query#}}"},
            ],
            "prompt_config": {"jinja2_variables": [{"variable": "who", "value_selector": ["sys", "query"]}]},
        }
    )
    _, (r1,) = run_conversation(flow, ["dana"], llm=ScriptedClient())
    assert prompt_of(r1)[0] == ("system", "Hello DANA")


def test_no_prompt_at_all_fails_the_node_with_difys_message():
    flow = chat_flow({"prompt_template": [{"role": "system", "text": ""}]})
    _, (r1,) = run_conversation(flow, ["hi"], llm=ScriptedClient())
    assert r1.status == "failed"
    assert r1.error.startswith("No prompt found in the LLM configuration.")


# -- completion-mode models (§2.6) ------------------------------------------------------------------


def completion_flow(text: str, memory: dict | None) -> Flow:
    llm: dict[str, Any] = {
        "model": {
            "provider": "openai",
            "name": "gpt-3.5-turbo-instruct",
            "mode": "completion",
            "completion_params": {},
        },
        "prompt_template": {"text": text},
    }
    if memory is not None:
        llm["memory"] = memory
    return chat_flow(llm)


def test_completion_mode_replaces_histories_and_prepends_the_query():
    flow = completion_flow(
        "Prompt header\n#histories#",
        {"window": {"enabled": True, "size": 5}, "role_prefix": {"user": "Human", "assistant": "Assistant"}},
    )
    _, (r1, r2) = run_conversation(
        flow, ["previous question", "latest question"], llm=ScriptedClient(["previous answer", "x"])
    )
    assert prompt_of(r2) == [
        ("user", "latest question\nPrompt header\nHuman: previous question\nAssistant: previous answer")
    ]


def test_completion_mode_without_histories_prepends_history_text_and_uses_the_unrendered_query_template():
    flow = completion_flow(
        "Answer well.",
        {
            "window": {"enabled": True, "size": 5},
            "query_prompt_template": "Q: {{#sys.query#}}",
            "role_prefix": {"user": "User", "assistant": "Bot"},
        },
    )
    _, (r1, r2) = run_conversation(flow, ["first", "second"], llm=ScriptedClient(["one", "two"]))
    assert prompt_of(r1) == [("user", "Q: {{#sys.query#}}\n\nAnswer well.")]
    assert prompt_of(r2) == [("user", "Q: {{#sys.query#}}\nUser: first\nBot: one\nAnswer well.")]


class FailsOn:
    """Replies like :class:`ScriptedClient`, but fails the call whose last message starts with ``word``
    (the turn's query: a chat prompt's last message, the start of a completion prompt's text)."""

    def __init__(self, word: str, replies: Sequence[str]):
        self.word, self.scripted = word, ScriptedClient(replies)

    def complete(self, model, messages, max_tokens=None):
        if str(messages[-1]["content"]).startswith(self.word):
            raise LLMError("the provider is down")
        return self.scripted.complete(model, messages, max_tokens)


def test_completion_mode_sends_a_failed_turns_empty_answer_as_an_empty_line():
    """The history's text form keeps every message (§1.7): the empty answer of a failed turn is an
    ``Assistant: `` line, which Dify sends, where a chat prompt's filter drops the empty message."""
    flow = completion_flow(
        "Header\n#histories#",
        {"window": {"enabled": True, "size": 5}, "role_prefix": {"user": "Human", "assistant": "Assistant"}},
    )
    _, (r1, r2, r3) = run_conversation(flow, ["one", "two boom", "three"], llm=FailsOn("two", ["A1", "A3"]))
    assert (r2.status, r2.answer) == ("failed", "")
    assert prompt_of(r3) == [("user", "three\nHeader\nHuman: one\nAssistant: A1\nHuman: two boom\nAssistant: ")]
    ledger = r3.node_run("llm").ledger
    assert [(e.turn, e.role, e.reason) for e in ledger.entries] == [
        (1, "user", "kept"),
        (1, "assistant", "kept"),
        (2, "user", "kept"),
        (2, "assistant", "kept"),
    ]
    assert r3.node_run("llm").memory["history_as_text"] is True
    chat = chat_flow({"prompt_template": [{"role": "system", "text": "Header"}], "memory": {"window": 5}})
    _, (_, _, c3) = run_conversation(chat, ["one", "two boom", "three"], llm=FailsOn("two", ["A1", "A3"]))
    assert [e.reason for e in c3.node_run("llm").ledger.entries] == ["kept", "kept", "kept", "empty"]
    assert "history_as_text" not in c3.node_run("llm").memory  # the chat layout, stored as before


def test_completion_mode_with_memory_but_no_role_prefix_fails_with_difys_error():
    flow = completion_flow("Prompt", {"window": {"enabled": True, "size": 5}})
    _, (r1,) = run_conversation(flow, ["hi"], llm=ScriptedClient())
    assert r1.status == "failed"
    assert r1.error == "Memory role prefix is required for completion model."
    assert r1.answer == ""


def test_completion_mode_without_memory_still_merges_the_empty_history_with_its_newline():
    # Dify merges the history text whatever it is: with memory off it is "", so "" + "\n" + template.
    flow = completion_flow("Say {{#sys.query#}}", None)
    client = ScriptedClient()
    _, (r1, r2) = run_conversation(flow, ["a", "b"], llm=client)
    assert prompt_of(r2) == [("user", "\nSay b")]
    assert client.calls[-1][1] == [{"role": "user", "content": "\nSay b"}]
    marked = completion_flow("Start #histories# end {{#sys.query#}}", None)
    _, (r3,) = run_conversation(marked, ["c"], llm=ScriptedClient())
    assert prompt_of(r3) == [("user", "Start  end c")]


def test_completion_and_chat_assemble_the_same_history_differently():
    prefix = {"user": "Human", "assistant": "Assistant"}
    completion = completion_flow("Header", {"window": {"enabled": True, "size": 3}, "role_prefix": prefix})
    chat = chat_flow({"prompt_template": [{"role": "system", "text": "Header"}], "memory": {"window": 3}})
    queries = ["one", "two", "three"]
    _, c_records = run_conversation(completion, queries, llm=ScriptedClient(["A1", "A2", "A3"]))
    _, h_records = run_conversation(chat, queries, llm=ScriptedClient(["A1", "A2", "A3"]))
    # Dify 1.x: a window of 3 rows is the current turn plus the 2 before it.
    assert prompt_of(c_records[-1]) == [("user", "three\nHuman: one\nAssistant: A1\nHuman: two\nAssistant: A2\nHeader")]
    assert prompt_of(h_records[-1]) == [
        ("system", "Header"),
        ("user", "one"),
        ("assistant", "A1"),
        ("user", "two"),
        ("assistant", "A2"),
        ("user", "three"),
    ]


# -- what-if prompts: the run's builder with another history ------------------------------------------


def what_if(flow: Flow, state, records, override, node="llm"):
    from core.flow.what_if import what_if_ledger, what_if_prompt

    position = len(records) - 1
    recorded = [m.to_dict() for m in records[-1].node_run(node).prompt]
    ledger = what_if_ledger(flow, state.conversation, position, node, override, record=records[-1])
    return recorded, what_if_prompt(flow, state.conversation, position, node, recorded, ledger)


def test_a_completion_prompts_history_lines_count_as_memory_history_on_its_receipt():
    """The history sits inside the one completion text: the message records how many of its tokens
    the lines add, and the receipt counts those as memory history, the rest as template (the budget
    line is drawn after the prompt without its history)."""
    from core.analysis.debug_view import receipt
    from core.model.tokens import counter_for

    flow = completion_flow(
        "Header\n#histories#\nFooter",
        {"window": {"enabled": True, "size": 5}, "role_prefix": {"user": "Human", "assistant": "Assistant"}},
    )
    _, (r1, r2) = run_conversation(flow, ["one", "two"], llm=ScriptedClient(["A1", "A2"]))
    counter = counter_for("gpt-3.5-turbo-instruct")
    (sent,) = r2.node_run("llm").prompt
    assert sent.content == "two\nHeader\nHuman: one\nAssistant: A1\nFooter"
    without = counter.chat("user", "two\nHeader\n\nFooter")
    assert sent.history_tokens == sent.tokens - without > 0
    assert sent.to_dict()["history_tokens"] == sent.history_tokens
    assert type(sent).from_dict(sent.to_dict()).history_tokens == sent.history_tokens

    def run_of(record):  # a stored run's shape, as the Debugger hands it to the receipt
        nr = record.node_run("llm")
        return {"node_id": "llm", "prompt": [m.to_dict() for m in nr.prompt], "ledger": nr.ledger}

    r = receipt(run_of(r2), "LLM", exact=True, encoding="cl100k_base")
    assert r.used_by_origin == {"template": without, "memory history": sent.history_tokens}
    assert r.rows[0].history_tokens == sent.history_tokens
    # The first turn has no history: its message has no share and the receipt no memory history.
    (first,) = r1.node_run("llm").prompt
    assert first.history_tokens == 0 and "history_tokens" not in first.to_dict()
    assert type(first).from_dict(first.to_dict()).history_tokens == 0
    assert "memory history" not in receipt(run_of(r1), "LLM", exact=True, encoding="cl100k_base").used_by_origin


PREFIX = {"user": "Human", "assistant": "Assistant"}


def test_a_completion_what_if_puts_the_new_history_into_the_one_completion_text():
    flow = completion_flow(
        "Header\n#histories#\nFooter", {"window": {"enabled": True, "size": 5}, "role_prefix": PREFIX}
    )
    state, records = run_conversation(flow, ["one", "two", "three"], llm=ScriptedClient(["A1", "A2", "A3"]))
    recorded, unchanged = what_if(flow, state, records, None)
    assert unchanged == recorded
    _, narrower = what_if(flow, state, records, {"window": 2})
    # One message, as a completion model gets it: the window of 2 rows keeps only the turn before.
    assert [(m["role"], m["origin"], m["content"]) for m in narrower] == [
        ("user", "template", "three\nHeader\nHuman: two\nAssistant: A2\nFooter")
    ]
    assert narrower[0]["tokens"] < recorded[0]["tokens"]


def test_a_completion_what_if_without_the_histories_marker_puts_the_history_first():
    flow = completion_flow(
        "Answer well.",
        {"window": {"enabled": True, "size": 5}, "query_prompt_template": "Q: {{#sys.query#}}", "role_prefix": PREFIX},
    )
    state, records = run_conversation(flow, ["first", "second"], llm=ScriptedClient(["one", "two"]))
    recorded, unchanged = what_if(flow, state, records, None)
    assert unchanged == recorded
    _, off = what_if(flow, state, records, {"strategy": "off"})
    # Memory off: no query template in front and an empty history merged with its newline, as a run sends it.
    assert [m["content"] for m in off] == ["\nAnswer well."]
    _, on = what_if(flow, state, records, {"window": 1})
    assert [m["content"] for m in on] == ["Q: {{#sys.query#}}\n\nAnswer well."]


def test_a_completion_what_if_turns_memory_on_as_a_run_with_memory_would_send_it():
    flow = completion_flow("Header #histories# end", None)
    state, records = run_conversation(flow, ["one", "two"], llm=ScriptedClient(["A1", "A2"]))
    recorded, _ = what_if(flow, state, records, None)
    assert [m["content"] for m in recorded] == ["Header  end"]
    data = flow.to_dict()
    for node in data["nodes"]:
        if node["id"] == "llm":
            node["memory"] = {"window": {"enabled": True, "size": 5}, "role_prefix": PREFIX}
    remembering = Flow.from_dict(data)
    _, with_memory = what_if(remembering, state, records, {"strategy": "dify", "window": 5})
    _, ran = run_conversation(remembering, ["one", "two"], llm=ScriptedClient(["A1", "A2"]))
    assert (
        [m["content"] for m in with_memory]
        == [m.content for m in ran[-1].node_run("llm").prompt]
        == ["two\nHeader Human: one\nAssistant: A1 end"]
    )


def test_a_completion_prompt_recorded_without_its_template_is_rebuilt_from_the_nodes_template():
    flow = completion_flow("Header\n#histories#", {"window": {"enabled": True, "size": 5}, "role_prefix": PREFIX})
    state, records = run_conversation(flow, ["one", "two"], llm=ScriptedClient(["A1", "A2"]))
    from core.flow.what_if import what_if_ledger, what_if_prompt

    older = [{k: v for k, v in m.to_dict().items() if k != "template"} for m in records[-1].node_run("llm").prompt]
    ledger = what_if_ledger(flow, state.conversation, 1, "llm", {"window": 1}, record=records[-1])
    assert [m["content"] for m in what_if_prompt(flow, state.conversation, 1, "llm", older, ledger)] == [
        "two\nHeader\n"
    ]


def test_a_chat_what_if_keeps_the_template_and_query_around_the_new_history():
    flow = chat_flow({"prompt_template": [{"role": "system", "text": "Be brief."}], "memory": {"window": 5}})
    state, records = run_conversation(flow, ["one", "two", "three"], llm=ScriptedClient(["A1", "A2", "A3"]))
    recorded, unchanged = what_if(flow, state, records, None)
    assert unchanged == recorded
    _, narrower = what_if(flow, state, records, {"window": 2})
    assert [(m["origin"], m["content"]) for m in narrower] == [
        ("system", "Be brief."),
        ("memory history", "two"),
        ("memory history", "A2"),
        ("current query", "three"),
    ]


def test_a_chat_what_if_that_switches_memory_on_or_off_adds_or_drops_the_query_message_as_a_run_would():
    forgetful = chat_flow({"prompt_template": [{"role": "system", "text": "Be brief."}]})
    state, records = run_conversation(forgetful, ["one", "two"], llm=ScriptedClient(["A1", "A2"]))
    _, turned_on = what_if(forgetful, state, records, {"strategy": "dify", "window": 5})
    remembering = chat_flow({"prompt_template": [{"role": "system", "text": "Be brief."}], "memory": {"window": 5}})
    _, ran = run_conversation(remembering, ["one", "two"], llm=ScriptedClient(["A1", "A2"]))
    assert turned_on == [m.to_dict() for m in ran[-1].node_run("llm").prompt]
    assert [m["origin"] for m in turned_on] == ["system", "memory history", "memory history", "current query"]
    state, records = run_conversation(remembering, ["one", "two"], llm=ScriptedClient(["A1", "A2"]))
    _, turned_off = what_if(remembering, state, records, {"strategy": "off"})
    assert [(m["origin"], m["content"]) for m in turned_off] == [("system", "Be brief.")]
