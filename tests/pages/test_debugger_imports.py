"""Imported conversations open in the debugger (replay view): the real transcripts and a ChatGPT
export, stored as the Import page stores them, show markers and a receipt for every turn, with
branches, lenses, the switchboard what-if and the offer to attach a flow."""

from __future__ import annotations

import json
import re

import pytest
from streamlit.testing.v1 import AppTest

from core.analysis.debug_view import default_lens, lens_ledgers, receipt, replayed_run, transcript
from core.io import import_bytes
from core.memory.config import MemoryConfig
from core.memory.replay import Replay
from core.model.conversation import turn_label
from core.model.tokens import counter_for
from core.service.sessions import ConversationService
from core.service.transfer import store_conversations
from core.store import repo
from core.store.db import Database
from tests.conftest import FIXTURES, ROOT
from tests.rendered import shown
from ui.replay_view import PRESETS

T = FIXTURES / "transcripts"
FILES = {
    "openai": T / "taubench__gpt-4o-airline.sample.jsonl",
    "sharegpt": T / "llamafactory__glaive_toolcall_en_demo.subset.json",
    "oasst": T / "oasst__en_100_tree.subset.jsonl",
    "dify-web": T / "dify-web__realWorldMessages.json",
    "chatgpt": FIXTURES / "exports" / "chatgpt__conversations.json",
    "claude": FIXTURES / "exports" / "claude__conversations.json",
}


def _dify_messages() -> tuple[str, bytes]:
    doc = json.loads((T / "dify-docs__messages_api_examples.json").read_text())
    body = doc["GET /messages"]["response_example"]["conversationHistory"]["value"]
    return "dify-messages.json", json.dumps(body).encode()


def _files():
    from tests.io.test_dify_node_runs import llm_run
    from tests.io.test_langfuse import trace as langfuse_trace
    from tests.io.test_langsmith import chat_model_run, openai_run
    from tests.io.test_librechat import export as librechat_export

    for fmt, path in FILES.items():
        yield fmt, path.name, path.read_bytes()
    yield ("dify-messages", *_dify_messages())
    yield "librechat", "librechat.json", json.dumps(librechat_export(recursive=True)).encode()
    yield "langsmith", "runs.jsonl", "\n".join(json.dumps(r) for r in (chat_model_run(), openai_run())).encode()
    yield "langfuse", "trace.json", json.dumps(langfuse_trace()).encode()
    yield "dify-node-runs", "node-executions.json", json.dumps({"data": [llm_run()]}).encode()


def _store(db) -> dict[str, list[str]]:
    out = {}
    for fmt, name, data in _files():
        result = import_bytes(data, name)
        assert result.format == fmt
        out[fmt] = store_conversations(db, result.conversations, source="import")
    return out


def test_every_turn_of_every_imported_conversation_has_markers_and_a_receipt(tmp_path):
    db = Database(f"sqlite:///{tmp_path / 'x.db'}")
    stored = _store(db)
    service = ConversationService(db)
    lens = default_lens()
    checked = 0
    for fmt, ids in stored.items():
        for conv_id in ids:
            conv = service.conversation(conv_id)
            replays = {lens.id: Replay(conv, lens.config, system_prompt=conv.system_prompt)}
            counter = counter_for(lens.config.model)
            for p in conv.answered_turns():
                ledgers = lens_ledgers(replays, p)
                run = replayed_run(conv, p, lens.id, ledgers[lens.id], counter)
                r = receipt(run, lens.title, exact=counter.exact, encoding=counter.encoding_name)
                assert r.rows[-1].origin == "current query" and r.rows[-1].content == conv.turns[p].query
                kept = [e for e in ledgers[lens.id].entries if e.kept]
                assert len([x for x in r.rows if x.origin == "memory history"]) == len(kept)
                items = transcript(conv, conv.tree.thread(p), p, ledgers, {lens.id: lens.title})
                earlier = [i for i in items if i.position != p]
                assert all(i.markers for i in earlier if ledgers[lens.id].entries), (fmt, conv_id, p)
                checked += 1
    assert checked > 100
    db.dispose()


def test_the_receipt_sends_the_kept_history_in_order_after_the_system_prompt():
    conv = import_bytes((FIXTURES / "exports" / "chatgpt__conversations.json").read_bytes(), "c.json").conversations[0]
    lens = default_lens(2)  # Dify 1.x: 2 rows are the current turn's and the one before it
    replays = {lens.id: Replay(conv, lens.config, system_prompt=conv.system_prompt)}
    p = conv.index_of("a3")
    run = replayed_run(conv, p, lens.id, lens_ledgers(replays, p)[lens.id], counter_for("gpt-4o-mini"))
    assert [(m["origin"], m["content"]) for m in run["prompt"]] == [
        ("system", "I live in Porto.\n\nAnswer briefly."),
        ("memory history", "Add a day trip to Cascais instead."),
        ("memory history", "Day 3: train along the coast to Cascais, back by sunset."),
        ("current query", "Which day is the museum one?"),
    ]


# -- the page -------------------------------------------------------------------------------------


@pytest.fixture
def page(tmp_path, monkeypatch):
    url = f"sqlite:///{tmp_path / 'memlens.db'}"
    monkeypatch.setenv("MEMLENS_DATABASE_URL", url)
    db = Database(url)
    stored = _store(db)
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=120)
    at.run()
    assert not at.exception, at.exception
    at.db, at.stored = db, stored
    yield at
    db.dispose()


def _markers(at) -> list[tuple[str, str]]:
    html = "".join(md.value for m in at.chat_message for md in m.markdown)
    return [
        (shown(node), shown(reason)) for node, reason in re.findall(r'data-node="([^"]+)" data-reason="([^"]+)"', html)
    ]


def _receipt_captions(at) -> list[str]:
    return [c.value for c in at.caption if "prompt tokens" in c.value]


def test_each_imported_conversation_opens_with_markers_and_a_receipt(page):
    for fmt, ids in page.stored.items():
        for conv_id in ids[:2]:
            page.session_state["conv_id"] = conv_id
            page.session_state["selected_turn"] = None
            page.run()
            assert not page.exception, (fmt, page.exception)
            conv = repo.load_conversation(page.db, conv_id)
            assert shown(page.title[0].value) == (repo.get_conversation(page.db, conv_id).name or "Conversation")
            assert _receipt_captions(page), fmt
            thread = ConversationService(page.db).active_thread(conv_id)
            if len([t for t in thread if conv.turns[conv.index_of(t)].query_index is not None]) > 1:
                # A trace's calls are threaded: its nodes' observed markers and inferred rules beside the default.
                calls = (
                    {"observed-node-1", "inferred-node-1"}
                    if fmt in ("langsmith", "langfuse", "dify-node-runs")
                    else set()
                )
                assert _markers(page) and {node for node, _ in _markers(page)} == {"lens-default"} | calls, fmt


def test_the_conversation_list_shows_every_source_and_filters_by_source(page):
    options = page.selectbox(key="conv_source").options
    assert "flow" in options and "import: chatgpt" in options and "import: oasst" in options
    page.selectbox(key="conv_source").set_value("import: chatgpt").run()
    opened = page.selectbox(key="conv_id")
    assert sorted(opened.options) == [
        "Lisbon trip · 3 turns (5 with branches) · import: chatgpt",
        "Powers of two · 2 turns · import: chatgpt",
    ]
    assert shown(page.title[0].value) in ("Lisbon trip", "Powers of two")
    page.selectbox(key="conv_source").set_value("all").run()
    labels = page.selectbox(key="conv_id").options
    assert any(label.endswith("· flow") for label in labels) and any("import: claude" in x for x in labels)


def test_every_turn_of_a_branched_export_can_be_inspected_in_the_page(page):
    conv_id = page.stored["chatgpt"][0]
    page.session_state["conv_id"] = conv_id
    page.run()
    conv = repo.load_conversation(page.db, conv_id)
    for turn_id in ConversationService(page.db).active_thread(conv_id):
        page.session_state["selected_turn"] = turn_id
        page.run()
        assert not page.exception, page.exception
        assert _receipt_captions(page), turn_id
        label = turn_label(conv, conv.index_of(turn_id)).capitalize()
        assert any(shown(m.value).startswith(f"**{label}** — ") for m in page.markdown), label
    assert len(conv.turns) == 5


def test_lenses_switchboard_and_regenerate_say_what_they_do_without_a_flow(page):
    conv_id = page.stored["chatgpt"][0]
    page.session_state["conv_id"] = conv_id
    page.run()
    page.multiselect(key=f"lenses-{conv_id}").set_value(["Window Memory node, 10 messages"]).run()
    assert not page.exception, page.exception
    assert {node for node, _ in _markers(page)} == {"lens-default", "lens-3"}
    page.toggle(key=f"rsb-{conv_id}-lens-default_window_on").set_value(True).run()
    page.number_input(key=f"rsb-{conv_id}-lens-default_window_turns").set_value(1).run()
    assert not page.exception, page.exception
    assert any("What-if" in shown(w.value) for w in page.warning)
    # A window of one turn keeps no history: the later turns on the page might now answer differently.
    assert "replies might now differ" in shown("".join(md.value for m in page.chat_message for md in m.markdown))
    # Regenerate and Edit cannot run without a flow: shown disabled, saying what would let them.
    from ui.replay_view import NEEDS_FLOW

    regenerate = [b for b in page.button if b.key and b.key.endswith("-regen")]
    assert regenerate and all(b.disabled and b.help == NEEDS_FLOW for b in regenerate)
    assert any("Attach one" in shown(i.value) for i in page.info)


def test_attaching_a_flow_rescores_under_its_nodes_or_replays_the_queries(page):
    conv_id = page.stored["chatgpt"][0]
    page.session_state["conv_id"] = conv_id
    page.run()
    page.button(key=f"attach-rescore-{conv_id}").click().run()
    assert not page.exception, page.exception
    assert any(node.startswith("flow-") for node, _ in _markers(page))
    before = {c.id for c in repo.list_conversations(page.db)}
    page.button(key=f"attach-replay-{conv_id}").click().run()
    assert not page.exception, page.exception
    (new,) = [c for c in repo.list_conversations(page.db) if c.id not in before]
    assert new.flow_version_id is not None and new.turn_count == 3  # the active thread's three queries
    assert page.session_state["conv_id"] == new.id


def test_a_rating_sent_through_the_api_shows_on_its_turn(page):
    demo = page.session_state["conv_id"]  # the page opens on the seeded demo (a flow conversation)
    service = ConversationService(page.db)
    last = service.active_thread(demo)[-1]
    repo.set_feedback(page.db, last, "dana", "dislike", "forgot my name")
    page.run()
    assert any(shown(c.value) == "Rated dislike by dana: forgot my name" for c in page.caption)
    conv_id = page.stored["chatgpt"][0]
    turn = service.active_thread(conv_id)[-1]
    repo.set_feedback(page.db, turn, "sam", "like")
    page.session_state["conv_id"] = conv_id
    page.run()
    assert any(shown(c.value) == "Rated like by sam" for c in page.caption)


def test_the_ledger_explorer_opens_a_stored_imported_conversation(page):
    page.switch_page("pages/ledger.py").run()
    page.radio(key="ledger_from").set_value("stored").run()
    conv_id = page.stored["chatgpt"][0]
    page.selectbox(key="ledger_stored").set_value(conv_id).run()
    assert not page.exception, page.exception
    conv = repo.load_conversation(page.db, conv_id)
    fidelity = page.radio(key="ledger_fidelity").value
    replay = Replay(conv, MemoryConfig(window=3, fidelity=fidelity), system_prompt=conv.system_prompt)
    last = replay.ledger(replay.numbers[-1])
    assert [m.value for m in page.metric][:2] == [str(len(last.kept)), str(last.dropped_count())]
    # A branched export: the other branches' messages are not eligible, said apart from what was dropped.
    others = last.not_eligible_count()
    assert others > 0 and any(c.value.startswith(f"◌ {others:,} earlier messages not eligible") for c in page.caption)
    # The turn is named by its place on its thread, as everywhere else (a branched export).
    label = turn_label(conv, replay.position_of(replay.numbers[-1])).capitalize()
    assert any(shown(m.value).startswith(f"**{label}**") for m in page.markdown), label


def test_a_dify_dsl_file_can_be_attached_from_the_replay_view(page):
    conv_id = page.stored["chatgpt"][0]
    page.session_state["conv_id"] = conv_id
    page.run()
    flows_before = len(repo.list_flows(page.db))
    page.file_uploader(key=f"attach-dsl-{conv_id}").set_value(("broken.yml", b"app: [unclosed", "text/yaml")).run()
    page.button(key=f"attach-dsl-go-{conv_id}").click().run()
    assert any("broken.yml is not valid YAML" in shown(e.value) for e in page.error)
    assert len(repo.list_flows(page.db)) == flows_before
    dsl = FIXTURES / "dify_dsl" / "svcvit__Artifact.yml"
    page.file_uploader(key=f"attach-dsl-{conv_id}").set_value((dsl.name, dsl.read_bytes(), "text/yaml")).run()
    page.button(key=f"attach-dsl-go-{conv_id}").click().run()
    assert not page.exception, page.exception
    flows = repo.list_flows(page.db)
    assert len(flows) == flows_before + 1
    new = next(f for f in flows if f.definition.get("source", {}).get("file") == dsl.name)
    assert page.selectbox(key=f"attach-flow-{conv_id}").value == new.id
    page.button(key=f"attach-rescore-{conv_id}").click().run()
    assert any(node.startswith("flow-") for node, _ in _markers(page))


def test_where_did_it_go_answers_per_lens_on_an_imported_conversation_and_jumps_to_the_turn(page):
    from core.analysis.why import Subject, where_did_it_go

    conv_id = page.stored["openai"][0]
    page.session_state["conv_id"] = conv_id
    page.run()
    page.multiselect(key=f"lenses-{conv_id}").set_value(["Dify, window 10 turns"]).run()
    page.text_input(key=f"rwhy-{conv_id}").input("user ID").run()
    assert not page.exception, page.exception
    # The same answer as the core gives for the two lenses the page shows (the switchboard unchanged).
    conv = repo.load_conversation(page.db, conv_id)
    thread = [conv.index_of(t) for t in ConversationService(page.db).active_thread(conv_id)]
    configs = {"Default · dify no window": MemoryConfig(), "Dify, window 10 turns": MemoryConfig(window=10)}
    answer = where_did_it_go(
        conv,
        "user ID",
        [Subject(label, Replay(conv, c, system_prompt=conv.system_prompt)) for label, c in configs.items()],
        thread=thread,
    )
    texts = [shown(m.value) for m in page.markdown]
    for sentence in answer.sentences():
        assert any(sentence in t for t in texts), sentence
    default, window10 = answer.losses
    assert default.has_it_now and not window10.has_it_now  # no window keeps it; ten turns let it go
    left = window10.comeback.gone_position if window10.comeback else window10.lost_position
    jump = next(b for b in page.button if b.key == f"rwhy-{conv_id}-jump-{left}")
    jump.click().run()
    assert not page.exception, page.exception
    assert page.session_state["selected_turn"] == conv.turns[left].id


def test_an_agent_apps_log_opens_under_the_agent_apps_history(tmp_path, monkeypatch):
    """A Dify Agent app's log (its messages carry agent thoughts) opens under the history its agent
    runner sends: tool calls and results are sent, and the empty answer of a run that failed before
    its first step is left out, as Dify leaves it out."""
    from tests.service.test_agent_import import LOG

    url = f"sqlite:///{tmp_path / 'memlens.db'}"
    monkeypatch.setenv("MEMLENS_DATABASE_URL", url)
    db = Database(url)
    [conv_id] = store_conversations(db, import_bytes(json.dumps(LOG).encode(), "log.json").conversations)
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=120)
    at.run()
    at.session_state["conv_id"] = conv_id
    at.run()
    assert not at.exception, at.exception
    assert "Default · dify agent app" in [shown(t.label) for t in at.tabs]
    assert _markers(at) == [("lens-default", "kept")] * 8 + [("lens-default", "empty")]
    assert any(
        shown(c.value).endswith(
            "Budget: plugin token counting is off (Dify ships it off), so the agent's history is never pruned by tokens"
        )
        for c in at.caption
    )
    # Under ReAct (a model without tool calls) each earlier run is one scratchpad: the first step and the
    # last tool result are rewritten into it, the other result and the final answer left out.
    react = "Dify Agent app, ReAct (no tool calls)"
    at.multiselect(key=f"lenses-{conv_id}").set_value([react]).run()
    assert not at.exception, at.exception
    lens = f"lens-{list(PRESETS).index(react)}"
    assert [reason for node, reason in _markers(at) if node == lens] == [
        "kept",
        "rewritten",
        "omitted",
        "rewritten",
        "omitted",
        "kept",
        "rewritten",
        "kept",
        "empty",
    ]
    # The app's own export attached: its agent replays the log with the app's model and runner.
    dsl = ROOT / "sample_data" / "flows" / "agent-app.yml"
    at.file_uploader(key=f"attach-dsl-{conv_id}").set_value((dsl.name, dsl.read_bytes(), "text/yaml")).run()
    at.button(key=f"attach-dsl-go-{conv_id}").click().run()
    at.button(key=f"attach-rescore-{conv_id}").click().run()
    assert not at.exception, at.exception
    assert "Order agent · Agent" in [shown(t.label) for t in at.tabs]
    assert [reason for node, reason in _markers(at) if node == "flow-agent"] == ["kept"] * 8 + ["empty"]
    db.dispose()


def test_a_tool_result_and_reasoning_are_told_apart_from_the_assistants_reply(page):
    """A tool's output and a model's thinking are steps of the turn, not the assistant talking."""
    conv_id = page.stored["librechat"][0]
    page.session_state["conv_id"] = conv_id
    page.session_state["selected_turn"] = None
    page.run()
    assert not page.exception, page.exception
    looks = {}
    for message in page.chat_message:
        text = "".join(md.value for md in message.markdown)
        for needle in ("3 flights", "The user wants flights.", "Found 3 flights to Lisbon.", "Book Lisbon."):
            if needle in shown(text) and needle not in looks:
                looks[needle] = (message.name, message.avatar, "tool result" in shown(text), "reasoning" in shown(text))
    assert looks["3 flights"] == ("tool", ":material/build:", True, False)
    assert looks["The user wants flights."] == ("assistant", ":material/psychology:", False, True)
    assert looks["Found 3 flights to Lisbon."][:2] == ("assistant", "assistant")  # the role's own avatar
    assert looks["Book Lisbon."][:2] == ("user", "user")


# -- the address names what is open -------------------------------------------------------------------


def test_the_address_names_the_open_conversation_and_turn_and_a_reload_opens_them_again(page):
    conv_id = page.stored["chatgpt"][0]
    first = ConversationService(page.db).active_thread(conv_id)[0]
    page.session_state["conv_id"] = conv_id
    page.session_state["selected_turn"] = first
    page.run()
    assert dict(page.query_params) == {"conversation": conv_id, "turn": first}

    # A reload: a new session on the same address opens that conversation at that turn.
    again = AppTest.from_file(str(ROOT / "app.py"), default_timeout=120)
    again.query_params.update(page.query_params)
    again.run()
    assert not again.exception, again.exception
    assert shown(again.title[0].value) == "Lisbon trip"
    assert again.session_state["selected_turn"] == first and _receipt_captions(again)
    assert again.selectbox(key="conv_source").value == "all"

    # Another pick on the page moves the address with it.
    flow_id = next(c.id for c in ConversationService(page.db).conversations() if c.flow_version_id)
    again.selectbox(key="conv_id").set_value(flow_id).run()
    assert again.query_params["conversation"] == flow_id
    assert again.query_params["turn"] == ConversationService(page.db).active_thread(flow_id)[-1]


@pytest.mark.parametrize(
    "linked",
    [
        {"conversation": "no-such-conversation", "turn": "a1"},
        {"conversation": "", "turn": ""},
        {"turn": "a1"},
        {"conversation": "<b>x</b>"},
    ],
)
def test_an_address_naming_no_stored_conversation_opens_the_first_one_as_without_a_link(page, linked):
    first = page.session_state["conv_id"]
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=120)
    at.query_params.update(linked)
    at.run()
    assert not at.exception, at.exception
    assert at.session_state["conv_id"] == first
    assert at.query_params["conversation"] == first and at.query_params["turn"] != "a1"


def test_an_address_naming_a_turn_not_on_the_thread_opens_the_conversations_newest_turn(page):
    conv_id = page.stored["chatgpt"][0]
    thread = ConversationService(page.db).active_thread(conv_id)
    elsewhere = next(t.id for t in repo.load_conversation(page.db, conv_id).turns if t.id not in thread)
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=120)
    at.query_params.update({"conversation": conv_id, "turn": elsewhere})  # on another branch
    at.run()
    assert not at.exception, at.exception
    assert at.session_state["conv_id"] == conv_id and at.session_state["selected_turn"] == thread[-1]
    assert at.query_params["turn"] == thread[-1]


def test_flipping_to_another_version_of_a_turn_inspects_that_version(page):
    conv_id = page.stored["chatgpt"][0]
    svc = ConversationService(page.db)
    conv = repo.load_conversation(page.db, conv_id)
    by_answer = {t.answer: t.id for t in conv.turns}
    sintra = by_answer["Swap day 3 for Sintra: Pena Palace and Quinta da Regaleira."]
    cascais = by_answer["Day 3: train along the coast to Cascais, back by sunset."]  # the version turn 3 follows
    svc.switch(conv_id, sintra)
    page.session_state["conv_id"] = conv_id
    page.session_state["selected_turn"] = sintra
    page.run()
    page.button(key=f"rtx-{conv_id}-{sintra}-0-next").click().run()
    middle = page.session_state["selected_turn"]
    page.button(key=f"rtx-{conv_id}-{middle}-0-next").click().run()
    assert not page.exception, page.exception
    # The version flipped to is the one inspected, not the newest turn of its line.
    assert page.session_state["selected_turn"] == cascais
    assert svc.active_thread(conv_id)[-1] != cascais  # its line goes on past it
    assert page.query_params["turn"] == cascais


def test_a_turn_that_recorded_no_reply_says_so_under_reply(page):
    from ui.receipt_view import NO_REPLY

    found = None
    for conv_id in page.stored["openai"]:
        conv = repo.load_conversation(page.db, conv_id)
        thread = ConversationService(page.db).active_thread(conv_id)
        empty = [
            t
            for t in thread
            if conv.turns[conv.index_of(t)].query_index is not None and not conv.turns[conv.index_of(t)].answer
        ]
        if empty:
            found = conv_id, empty[0]
            break
    assert found is not None  # τ-bench ends some conversations on a user message no one answered
    page.session_state["conv_id"], page.session_state["selected_turn"] = found
    page.run()
    assert not page.exception, page.exception
    assert NO_REPLY in [c.value for c in page.caption]


def test_the_ledger_explorer_and_compare_count_a_branched_conversation_as_the_debugger_does(page):
    conv_id = page.stored["chatgpt"][0]
    page.switch_page("pages/ledger.py").run()
    page.radio(key="ledger_from").set_value("stored").run()
    labels = page.selectbox(key="ledger_stored").options
    assert any(label.startswith("Lisbon trip · 3 turns (5 with branches)") for label in labels), labels
    page.session_state["open_in_compare"] = conv_id
    page.switch_page("pages/compare.py").run()
    assert not page.exception, page.exception
    captions = [shown(c.value) for c in page.sidebar.caption]
    assert any("3 turns (5 with branches)" in c for c in captions), captions


def test_compare_names_a_branched_conversations_turns_as_the_debugger_does(page):
    import json as _json

    conv_id = page.stored["chatgpt"][0]
    page.session_state["open_in_compare"] = conv_id
    page.switch_page("pages/compare.py").run()
    assert not page.exception, page.exception
    slider = page.select_slider(key="cmp_turn")
    assert slider.options == ["turn 1", "turn 2 · 1/3", "turn 2 · 2/3", "turn 2 · 3/3", "turn 3"]
    assert slider.value == 5  # creation order underneath: the newest turn
    assert "Turn 3 against turn 2 · 3/3 of its thread." in [shown(c.value) for c in page.caption]
    traces = [_json.loads(e.proto.spec)["data"][0] for e in page.get("plotly_chart")]
    rows = [t["y"] for t in traces if t.get("type") == "heatmap"]
    assert rows and all(r == slider.options for r in rows)


def test_heatmap_rows_that_would_read_alike_add_their_number():
    from ui.heatmap import row_labels

    names = {1: "turn 1", 2: "turn 2 · 1/2", 3: "turn 2 · 2/2", 4: "turn 3", 5: "turn 3"}
    assert row_labels([1, 2, 3, 4, 5], names.get) == [
        "turn 1",
        "turn 2 · 1/2",
        "turn 2 · 2/2",
        "turn 3 (#4)",
        "turn 3 (#5)",
    ]
    assert row_labels([1, 2]) == ["turn 1", "turn 2"]


def _copy_reasons(at) -> list[str]:
    """The reason of every row of the page's ledger tables that names another branch's copy."""
    return [r for df in at.dataframe for r in df.value.get("reason", []) if r.startswith("same as ")]


def test_the_debugger_and_the_ledger_explorer_say_whose_a_regenerated_replys_question_is(page):
    """ChatGPT's Lisbon trip: turn 2 · 2/3's question is the regenerated turn 2 · 3/3's too (one
    node of the export); turn 3's table says so, where it said "never sent"."""
    conv_id = page.stored["chatgpt"][0]
    conv = repo.load_conversation(page.db, conv_id)
    page.session_state["conv_id"] = conv_id
    page.run()
    last = ConversationService(page.db).active_thread(conv_id)[-1]
    page.session_state["selected_turn"] = last
    page.run()
    page.toggle(key="rlt-on-lens-default").set_value(True).run()
    assert not page.exception, page.exception
    holder = turn_label(conv, 3)
    assert holder == "turn 2 · 3/3"
    assert _copy_reasons(page) == [f"same as {holder} (on another branch)"]
    page.switch_page("pages/ledger.py").run()
    page.radio(key="ledger_from").set_value("stored").run()
    page.selectbox(key="ledger_stored").set_value(conv_id).run()
    assert not page.exception, page.exception
    assert _copy_reasons(page) == [f"same as {holder} (on another branch)"]
