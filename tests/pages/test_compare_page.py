"""The compare page (AppTest): three configs on a sample, heatmaps equal to the ledgers, facts lost
at the right turns, findings that jump to their turn, saved config sets, replies, turn diff, the
report bundle loading back into the same view, and a stored flow conversation's node findings."""

import json
import re

import pytest
from streamlit.testing.v1 import AppTest

from core.analysis.compare import NamedConfig, compare
from core.analysis.findings import config_findings
from core.analysis.source import Source
from core.io import parse_conversations
from core.llm.client import DemoClient
from core.memory.config import MemoryConfig
from core.memory.replay import Replay
from core.report.build import build_report
from core.report.bundle import bundle_json
from core.report.html import REASON_ORDER
from core.service.config_sets import CONFIG_SETS_KEY
from core.service.samples import load_sample
from core.service.sessions import ConversationService
from core.store import repo
from core.store.db import Database
from tests.builders import linear
from tests.conftest import ROOT
from tests.rendered import shown, table_columns

DEFAULT = [MemoryConfig(window=3), MemoryConfig(window=10), MemoryConfig(strategy="window", window=6)]


@pytest.fixture
def page(tmp_path, monkeypatch):
    url = f"sqlite:///{tmp_path / 'memlens.db'}"
    monkeypatch.setenv("MEMLENS_DATABASE_URL", url)
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=60)
    at.run()
    # As on a first visit by the page's address: no conversation being debugged to open on (that is
    # tests/pages/test_follow_debugged.py's subject).
    at.session_state["debugged"] = None
    at.switch_page("pages/compare.py").run()
    assert not at.exception, at.exception
    at.db_url = url
    return at


def figures(at):
    return [json.loads(chart.proto.spec) for chart in at.get("plotly_chart")]


def heatmaps(at):
    return [f for f in figures(at) if f["data"] and f["data"][0]["type"] == "heatmap"]


def decoded(fig):
    reasons = fig["layout"]["meta"]["reasons"]
    return [[reasons[int(z)] if z is not None else None for z in row] for row in fig["data"][0]["z"]]


def table(at, *columns):
    """The first data frame on the page that has these columns."""
    for frame in at.dataframe:
        value = frame.value
        if set(columns) <= set(value.columns):
            return value
    raise AssertionError(f"no table with columns {columns}")


def page_html(at):
    return shown("".join(m.value for m in at.markdown))


def test_three_configs_on_a_sample_draw_one_heatmap_each_on_the_same_axes(page):
    assert page.title[0].value == "Compare memory configs"
    maps = heatmaps(page)
    assert [f["layout"]["meta"]["label"] for f in maps] == ["dify window 3", "dify window 10", "window 6 msgs"]
    assert len({json.dumps(f["data"][0]["x"]) for f in maps}) == 1  # same columns
    assert len({json.dumps(f["data"][0]["y"]) for f in maps}) == 1  # same rows
    assert maps[0]["data"][0]["y"] == [f"turn {n}" for n in range(1, 13)]
    assert len(figures(page)) == 3 + 3  # three heatmaps, three line charts


def test_heatmap_figures_hold_exactly_the_core_ledgers(page):
    conv = load_sample("lisbon-trip.json")[0]
    for fig, config in zip(heatmaps(page), DEFAULT):
        replay = Replay(conv, config)
        cells = decoded(fig)
        for r, p in enumerate(conv.answered_turns()):
            reasons = [e.reason for e in replay.ledger_at(p).entries]
            assert cells[r][: len(reasons)] == reasons
            assert all(x is None for x in cells[r][len(reasons) :])
        hover = fig["data"][0]["customdata"]
        r, c = 4, 0  # turn 5, turn 1's query
        assert cells[r][c] == (
            "outside_window" if config.strategy == "dify" and config.settings.window == 3 else cells[r][c]
        )
        entry = replay.ledger_at(4).entries[0]
        assert hover[r][c].startswith(f"{entry.tokens:,} tokens — ")
    assert set(REASON_ORDER) >= {x for f in heatmaps(page) for row in decoded(f) for x in row if x}


def test_changing_a_config_redraws_its_heatmap(page):
    page.selectbox(key="cmp_c1_strategy").set_value("off").run()
    maps = heatmaps(page)
    assert maps[1]["layout"]["meta"]["label"] == "memory off"
    assert {x for row in decoded(maps[1]) for x in row if x} == {"memory_off"}


def facts_table(at):
    return table_columns("".join(m.value for m in at.markdown), "ml-facts")


def test_facts_are_reported_lost_at_the_turns_the_core_computes(page):
    frame = facts_table(page)
    conv = load_sample("lisbon-trip.json")[0]
    result = compare(conv, DEFAULT)
    assert (
        list(frame["fact"])
        == [f.label for f in result.facts]
        == ["the user's name", "the user's diet", "the user's booking number"]
    )
    # Dify 1.x: a window of N rows holds the N − 1 turns before the current one.
    assert list(frame["dify window 3"]) == [
        "lost at turn 4 (outside window)",
        "lost at turn 5 (outside window)",
        "lost at turn 6 (outside window)",
    ]
    assert list(frame["dify window 10"]) == [
        "lost at turn 11 (outside window)",
        "lost at turn 12 (outside window)",
        "kept",
    ]
    for f, fates in enumerate(result.fates):
        for fate in fates:
            cell = frame[fate.label][f]
            assert cell == "kept" if fate.lost_turn is None else cell.startswith(f"lost at turn {fate.lost_turn} ")
    assert "the user's name is lost at turn 4 with dify window 3" in page_html(page)


def test_the_facts_table_colours_a_fact_back_in_memory_apart_from_one_lost():
    from ui.compare_facts import facts_table_html

    def table(restated_at: int):
        conv = linear(12, query=lambda i: "my name is Dana" if i in (1, restated_at) else f"question number {i}")
        html = facts_table_html(
            compare(
                conv, [NamedConfig("w3", MemoryConfig(window=3)), NamedConfig("all", MemoryConfig(strategy="buffer"))]
            )
        )
        return table_columns(html, "ml-facts"), re.findall(r'<td class="(\w+)" data-config', html)

    frame, classes = table(6)
    assert frame["w3"] == ["lost at turn 4 (outside window); back at turn 6, gone again from turn 9 (outside window)"]
    assert classes == ["lost", "kept"]
    frame, classes = table(12)
    assert frame["w3"] == ["lost at turn 4 (outside window); back at turn 12, still there at the newest turn"]
    assert classes == ["back", "kept"]


def mark(at, turn: int, key: str) -> None:
    """Mark a message with the picker: its turn, then the message, then *Mark it*."""
    at.number_input(key="cmp_marks_turn").set_value(turn).run()
    at.selectbox(key=f"cmp_marks_pick-{key.split(':')[0]}").set_value(key).run()
    at.button(key="cmp_marks_add").click().run()
    assert not at.exception, at.exception


def test_facts_marked_by_hand_are_followed_instead(page):
    page.radio(key="cmp_facts").set_value("marked").run()
    assert page.multiselect(key="cmp_marks").options == []
    mark(page, 5, "4:0")  # turn 5's question about tram 28
    assert page.multiselect(key="cmp_marks").value == ["4:0"]
    assert page.button(key="cmp_marks_add").disabled  # marked already
    frame = facts_table(page)
    assert list(frame["fact"]) == ["Is the tram 28 worth it?"]
    assert list(frame["stated at"]) == ["turn 5"]
    assert list(frame["dify window 3"]) == ["lost at turn 8 (outside window)"]
    assert list(frame["dify window 10"]) == ["kept"]
    page.multiselect(key="cmp_marks").set_value([]).run()  # removed from the list: followed no more
    assert page.multiselect(key="cmp_marks").options == [] and "Is the tram 28" not in page_html(page)


def test_the_mark_picker_holds_one_turns_messages_whatever_the_conversations_length(tmp_path, monkeypatch):
    from benchmarks.workload import seed_support_conversation

    url = f"sqlite:///{tmp_path / 'long.db'}"
    monkeypatch.setenv("MEMLENS_DATABASE_URL", url)
    db = Database(url)
    conv_id = seed_support_conversation(db, 300)
    repo.set_setting(db, "demo.seeded", True)
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=120)
    at.run()
    at.session_state["open_in_compare"] = conv_id
    at.switch_page("pages/compare.py").run()
    at.radio(key="cmp_facts").set_value("marked").run()
    mark(at, 250, "249:0")
    mark(at, 3, "2:1")
    picker = at.selectbox(key="cmp_marks_pick-2")
    assert len(picker.options) == 2  # turn 3's query and answer, of 600 messages
    assert at.multiselect(key="cmp_marks").value == ["249:0", "2:1"]
    assert len(at.multiselect(key="cmp_marks").options) == 2
    assert sum(len(w.options) for w in [*at.sidebar.selectbox, *at.sidebar.multiselect]) < 20
    at.button(key="cmp_whole").click().run()  # a long conversation is compared when asked
    assert sorted(facts_table(at)["stated at"]) == ["turn 250", "turn 3"]


def test_findings_are_shown_and_jump_to_their_turn(page):
    html = page_html(page)
    assert 'data-kind="fact_not_seen"' in html
    assert "At turn 11 the question is about the user's name, but “dify window 3” no longer has turn 1" in html
    assert 'data-kind="docs_vs_code"' in html
    assert (
        "At turn 4, “dify window 3”: Dify&#x27;s docs say the window holds 3 turns" in html
        or "At turn 4, “dify window 3”: Dify's docs say the window holds 3 turns" in html
    )
    assert page.select_slider(key="cmp_turn").value == 12
    first = config_findings(
        load_sample("lisbon-trip.json")[0], DEFAULT, comparison=compare(load_sample("lisbon-trip.json")[0], DEFAULT)
    )[0]
    page.button(key="cmp-finding-0").click().run()
    assert page.select_slider(key="cmp_turn").value == first.turn
    shapes = heatmaps(page)[0]["layout"]["shapes"]
    assert shapes and shapes[0]["y0"] == first.turn - 1 - 0.5  # the finding's row framed
    assert page.metric[0].label == "Entered"


def test_a_budget_config_shows_its_silent_pruning_finding(page):
    page.number_input(key="cmp_c1_context").set_value(300).run()
    assert 'data-kind="silent_pruning"' not in page_html(page)  # Dify 1.x does not count tokens…
    page.toggle(key="cmp_c1_counting").set_value(True).run()  # …unless plugin token counting is on
    assert 'data-kind="silent_pruning"' in page_html(page)


def test_turn_diff_shows_what_entered_and_left(page):
    page.select_slider(key="cmp_turn").set_value(6).run()
    entered = table(page, "turn", "role", "tokens", "message")
    left = table(page, "turn", "why", "message")
    assert list(entered["turn"]) == [5, 5] and list(left["turn"]) == [3, 3]  # Dify 1.x: turns 4–5 at turn 6
    assert set(left["why"]) == {"outside window"}
    replay = Replay(load_sample("lisbon-trip.json")[0], MemoryConfig(window=3))
    delta = replay.ledger(6).history_tokens - replay.ledger(5).history_tokens
    assert page.metric[3].value == f"{delta:+,}"


def replies(page) -> dict[tuple[int, str], str]:
    """(turn, config) → reply text of every reply card on the page."""
    import html as _html

    out = {}
    for m in page.markdown:
        found = re.match(
            r'<div class="ml-reply" data-turn="(\d+)" data-config="([^"]*)"[^>]*><div[^>]*>.*?</div>(.*)</div>$',
            m.value,
            re.S,
        )
        if found:
            out[(int(found[1]), _html.unescape(found[2]))] = _html.unescape(shown(found[3]))
    return out


def test_replies_grid_re_asks_each_query_side_by_side_and_filters_rows_that_differ(page):
    page.toggle(key="cmp_replies").set_value(True).run()
    grid = replies(page)
    assert sorted({t for t, _ in grid}) == list(range(1, 11))  # the first page: ten queries
    assert "I don't know your name" not in grid[(1, "dify window 3")]
    page.number_input(key="cmp-replies-page").set_value(2).run()
    grid = replies(page)
    # Dify 1.x at turn 11: window 3 holds turns 9–10, window 10 holds turns 2–10 (the booking, not the name).
    assert "I don't know your booking number" in grid[(11, "dify window 3")]
    wide = grid[(11, "dify window 10")]
    assert "Your booking is 4411" in wide and "I don't know your name" in wide
    page.toggle(key="cmp_only_differ").set_value(True).run()
    differ = replies(page)
    assert 1 not in {t for t, _ in differ} and 11 in {t for t, _ in differ}
    assert all(len({text for (t2, _), text in differ.items() if t2 == t}) > 1 for t, _ in differ)


def test_configs_are_saved_to_the_store_and_loaded_back(page):
    page.number_input(key="cmp_c0_window_turns").set_value(2).run()
    page.text_input(key="cmp_set_name").set_value("tight").run()
    page.button(key="cmp_set_save").click().run()
    db = Database(page.db_url)
    saved = repo.get_setting(db, CONFIG_SETS_KEY)
    assert [c["window"] for c in saved["tight"]] == [2, 10, 6]
    page.number_input(key="cmp_c0_window_turns").set_value(7).run()
    page.selectbox(key="cmp_set").set_value("tight")
    page.button(key="cmp_set_load").click().run()
    assert page.number_input(key="cmp_c0_window_turns").value == 2
    assert heatmaps(page)[0]["layout"]["meta"]["label"] == "dify window 2"


def test_a_report_bundle_loads_back_into_the_same_view(page):
    conv = load_sample("order-support.json")[0]
    configs = [
        NamedConfig("tools too", MemoryConfig(granularity="all_messages", window=2)),
        NamedConfig("answers only", MemoryConfig(window=2)),
    ]
    report = build_report(Source(conv), configs, selected_turn=4)
    page.radio(key="cmp_from").set_value("File").run()
    page.file_uploader(key="cmp_upload").set_value(
        ("order.report.json", bundle_json(report).encode(), "application/json")
    ).run()
    assert not page.exception, page.exception
    assert [f["layout"]["meta"]["label"] for f in heatmaps(page)] == ["tools too", "answers only"]
    assert page.select_slider(key="cmp_turn").value == 4
    assert decoded(heatmaps(page)[0]) == report.comparison.matrices[0].cells


def test_a_stored_flow_conversation_shows_its_node_findings(page):
    db = Database(page.db_url)
    service = ConversationService(db, llm=DemoClient())
    version = service.import_flow(ROOT / "sample_data" / "flows" / "support-bot.yml")
    conv = service.start(version.flow_id, name="support").id
    for q in json.loads((ROOT / "sample_data" / "flows" / "support-bot.queries.json").read_text()):
        service.send(conv, q)
    page.radio(key="cmp_from").set_value("Stored").run()
    assert not page.exception, page.exception
    html = page_html(page)
    assert "At turn 6 the question is about the user's name, but “Responder” no longer has turn 1" in html


def test_a_malformed_upload_says_what_is_wrong(page):
    page.radio(key="cmp_from").set_value("File").run()
    page.file_uploader(key="cmp_upload").set_value(
        ("bad.json", b'{"conversations": [{"from": "robot"}]}', "application/json")
    ).run()
    assert not page.exception
    assert page.error and "bad.json" in shown(page.error[0].value)


def test_the_report_can_be_prepared_for_download(page):
    page.button(key="cmp_export").click().run()
    key, html, bundle = page.session_state["cmp_report"]
    assert html.startswith("<!DOCTYPE html>") and "dify window 10" in html
    assert json.loads(bundle)["format"] == "memlens-report"
    assert len(page.get("download_button")) == 2


def test_a_long_conversation_shows_a_movable_window_of_the_heatmap(page):
    messages = []
    for i in range(1, 61):
        messages += [{"role": "user", "content": f"question {i}"}, {"role": "assistant", "content": f"answer {i}"}]
    page.radio(key="cmp_from").set_value("File").run()
    page.file_uploader(key="cmp_upload").set_value(
        ("long.json", json.dumps(messages).encode(), "application/json")
    ).run()
    assert not page.exception, page.exception
    fig = heatmaps(page)[0]
    assert fig["layout"]["meta"]["rows"] == list(range(31, 61))  # the last 30 turns
    page.select_slider(key="cmp_last").set_value(30).run()
    fig = heatmaps(page)[0]
    rows = fig["layout"]["meta"]["rows"]
    assert rows == list(range(1, 31))
    replay = Replay(parse_conversations(json.dumps(messages), "long.json")[0], MemoryConfig(window=3))
    cells = decoded(fig)
    for r, turn in enumerate(rows):
        reasons = [e.reason for e in replay.ledger(turn).entries]
        assert cells[r][: len(reasons)] == reasons


def test_on_a_regenerated_branch_findings_and_their_buttons_name_turns_by_their_thread_labels(page):
    db = Database(page.db_url)
    service = ConversationService(db, llm=DemoClient())
    conv = service.start(service.import_flow(ROOT / "sample_data" / "flows" / "support-bot.yml").flow_id).id
    sent = [
        service.send(conv, q)
        for q in json.loads((ROOT / "sample_data" / "flows" / "support-bot.queries.json").read_text())[:5]
    ]
    service.regenerate(conv, sent[4].id)  # turn 5 · 2/2, created 6th
    service.send(conv, "What's my name?")  # turn 6 on that branch, created 7th
    db.dispose()
    page.radio(key="cmp_from").set_value("Stored").run()
    assert not page.exception, page.exception
    assert "At turn 6 the question is about the user's name, but “Responder” no longer has turn 1" in page_html(page)
    buttons = {b.label for b in page.button if (b.key or "").startswith("cmp-finding-")}
    assert {"Turn 6", "Turn 5 · 2/2"} <= buttons and "Turn 7" not in buttons


def _upload_turns(at, prefix, turns):
    messages = [{"role": "user", "content": "Hi, my name is Dana."}, {"role": "assistant", "content": "Hello Dana."}]
    for i in range(2, turns + 1):
        messages += [{"role": "user", "content": f"question {i}"}, {"role": "assistant", "content": f"answer {i}"}]
    at.radio(key=f"{prefix}_from").set_value("File").run()
    at.file_uploader(key=f"{prefix}_upload").set_value(
        (f"long-{turns}.json", json.dumps(messages).encode(), "application/json")
    ).run()
    assert not at.exception, at.exception
    return parse_conversations(json.dumps(messages), f"long-{turns}.json")[0]


def _asks(at, key):
    return [b for b in at.button if b.key == key]


def test_a_conversation_over_200_turns_is_compared_when_asked_and_then_opens_compared(page):
    from ui.on_request import LONG_CONVERSATION

    turns = LONG_CONVERSATION + 1
    _upload_turns(page, "cmp", turns)
    assert heatmaps(page) == [] and not page.get("metric")  # nothing replayed yet
    assert any(f"{turns:,} turns" in i.value for i in page.info)
    page.button(key="cmp_whole").click().run()
    assert not page.exception, page.exception
    assert len(heatmaps(page)) == 3 and not _asks(page, "cmp_whole")
    assert heatmaps(page)[0]["layout"]["meta"]["rows"] == list(range(turns - 29, turns + 1))  # the last 30
    # Another visitor opening the same conversation with the same configs gets the comparison at once.
    again = AppTest.from_file(str(ROOT / "app.py"), default_timeout=60)
    again.run()
    again.switch_page("pages/compare.py").run()
    _upload_turns(again, "cmp", turns)
    assert len(heatmaps(again)) == 3 and not _asks(again, "cmp_whole")


def test_200_turns_or_fewer_are_compared_on_open(page):
    from ui.on_request import LONG_CONVERSATION

    _upload_turns(page, "cmp", LONG_CONVERSATION)
    assert len(heatmaps(page)) == 3 and not _asks(page, "cmp_whole")


def test_picking_another_conversation_opens_its_newest_turn(page):
    newest = page.select_slider(key="cmp_turn").value
    page.select_slider(key="cmp_turn").set_value(2).run()
    assert page.select_slider(key="cmp_turn").value == 2
    page.radio(key="cmp_from").set_value("Stored").run()  # the store: the demo conversations
    assert not page.exception, page.exception
    stored_turns = page.select_slider(key="cmp_turn").options
    assert (
        page.select_slider(key="cmp_turn").value == 8 and stored_turns[-1] == "turn 8"
    )  # named as the Debugger names it
    page.select_slider(key="cmp_turn").set_value(3).run()  # a turn chosen on this conversation stays
    page.run()
    assert page.select_slider(key="cmp_turn").value == 3
    page.radio(key="cmp_from").set_value("Sample").run()
    assert page.select_slider(key="cmp_turn").value == newest


def test_edited_configs_are_still_there_after_a_visit_to_another_page(page):
    page.number_input(key="cmp_n").set_value(2).run()
    page.number_input(key="cmp_c0_window_turns").set_value(5).run()
    assert not page.exception
    for other in ("pages/present.py", "pages/debugger.py", "pages/ledger.py"):
        page.switch_page(other).run()
        assert not page.exception, (other, page.exception)
        page.switch_page("pages/compare.py").run()
        assert not page.exception, page.exception
        assert page.number_input(key="cmp_n").value == 2, other
        assert page.number_input(key="cmp_c0_window_turns").value == 5, other
        assert page.number_input(key="cmp_c1_window_turns").value == 10, other


def test_the_configs_fold_away_and_are_named_under_their_fold(page):
    # The page opens on the results; the configs' forms are one click away, their names in view.
    (fold,) = [e for e in page.expander if e.label == "Memory configs"]
    assert fold.proto.expanded is False
    assert "Comparing “dify window 3” · “dify window 10” · “window 6 msgs” (open Memory configs to change them)." in [
        shown(c.value) for c in page.caption
    ]
    page.number_input(key="cmp_c0_window_turns").set_value(5).run()
    assert any("Comparing “dify window 5”" in shown(c.value) for c in page.caption)  # as they stand now
