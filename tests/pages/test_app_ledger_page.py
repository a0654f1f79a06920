"""The first page: a sample conversation's ledger for a chosen turn and memory config (AppTest)."""

from streamlit.testing.v1 import AppTest

from tests.conftest import ROOT


def new_app() -> AppTest:
    """The app opened on the ledger explorer (run once on the default page, then switch)."""
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=60)
    at.run()
    at.session_state["debugged"] = None  # as opened by its address: no conversation being debugged to show
    return at.switch_page("pages/ledger.py")


def test_app_starts_on_the_ledger_page_with_a_sample_and_its_ledger():
    at = new_app().run()
    assert not at.exception
    assert at.title[0].value == "Ledger explorer"
    frame = at.dataframe[0].value
    assert {"kept", "turn", "role", "tokens", "reason", "why"} <= set(frame.columns)
    # Default sample (lisbon-trip) with a window of 3: Dify 1.x fetches 3 rows, turn 12's own among
    # them, so turn 12 keeps turns 10–11 and drops the rest.
    kept = frame[frame["kept"] == "yes"]
    assert sorted(set(kept["turn"]), key=int) == ["10", "11"]  # turns as labelled on the thread
    assert set(frame[frame["kept"] == "no"]["reason"]) == {"outside window"}
    assert "outside window of 3 rows: the conversation's newest on any branch, the current turn's one of them" in set(
        frame["why"]
    )


def test_the_table_leads_with_the_turn_the_reason_and_the_message_and_hides_no_column():
    # In the Debugger's side column only the first columns show before the table scrolls sideways:
    # which turn, why, and which message (at 1,400 px the reason and the message were off to the side).
    at = new_app().run()
    table = at.dataframe[0]
    assert list(table.proto.column_order)[:3] == ["turn", "reason", "message"]
    assert sorted(table.proto.column_order) == sorted(table.value.columns)


def test_switching_memory_off_marks_every_message_memory_off():
    at = new_app().run()
    at.selectbox(key="ledger_strategy").set_value("off").run()
    frame = at.dataframe[0].value
    assert set(frame["reason"]) == {"memory off"}
    assert at.metric[0].value == "0"
    # Memory off sends nothing and drops nothing: every earlier message is not eligible, said once.
    assert at.metric[1].label == "Dropped" and at.metric[1].value == "0"
    assert any(c.value.startswith(f"◌ {len(frame)} earlier messages not eligible") for c in at.caption)


def test_a_window_drops_the_older_messages_and_none_is_not_eligible():
    at = new_app().run()
    frame = at.dataframe[0].value
    assert at.metric[1].value == str(int((frame["kept"] == "no").sum())) != "0"
    assert not any("not eligible" in c.value for c in at.caption)


def test_choosing_an_earlier_turn_shows_that_turns_ledger():
    at = new_app().run()
    at.select_slider(key="ledger_turn").set_value(2).run()
    frame = at.dataframe[0].value
    assert list(frame["turn"]) == ["1", "1"] and set(frame["kept"]) == {"yes"}


def test_the_summary_buffer_strategy_shows_its_summary_and_folded_messages():
    at = new_app().run()
    at.selectbox(key="ledger_strategy").set_value("summary_buffer").run()
    at.number_input(key="ledger_history_limit").set_value(120).run()
    assert not at.exception
    frame = at.dataframe[0].value
    assert "summarized" in set(frame["reason"])
    summary = frame[frame["kind"] == "summary"]
    assert len(summary) == 1 and "Your name is Dana." in summary["message"].iloc[0]


def test_picking_another_conversation_opens_its_newest_turn():
    at = new_app().run()
    at.select_slider(key="ledger_turn").set_value(2).run()  # the sample's turn 2
    at.radio(key="ledger_from").set_value("stored").run()  # the store: the demo conversations
    stored = at.selectbox(key="ledger_stored")
    assert stored.value is not None and " · 8 turns · " in stored.format_func(stored.value)
    assert at.markdown[0].value == "**Turn 8** — the user asks:"
    assert at.select_slider(key="ledger_turn").value == 8
    at.select_slider(key="ledger_turn").set_value(3).run()  # a turn chosen on this conversation stays
    assert at.markdown[0].value == "**Turn 3** — the user asks:"
    at.radio(key="ledger_from").set_value("sample").run()
    assert at.markdown[0].value == "**Turn 12** — the user asks:"


def test_a_long_conversation_picks_its_turn_by_number_not_from_a_slider_of_every_turn(tmp_path, monkeypatch):
    from benchmarks.workload import seed_support_conversation
    from core.store import repo
    from core.store.db import Database

    url = f"sqlite:///{tmp_path / 'long.db'}"
    monkeypatch.setenv("MEMLENS_DATABASE_URL", url)
    db = Database(url)
    conv_id = seed_support_conversation(db, 300)
    repo.set_setting(db, "demo.seeded", True)
    at = new_app().run()
    at.radio(key="ledger_from").set_value("stored").run()
    at.selectbox(key="ledger_stored").set_value(conv_id).run()
    assert not at.exception, at.exception
    assert not at.select_slider  # a slider would send all 300 turns' labels to the browser
    assert at.number_input(key="ledger_turn").value == 300
    assert at.markdown[0].value == "**Turn 300** — the user asks:"
    at.number_input(key="ledger_turn").set_value(150).run()
    assert at.markdown[0].value == "**Turn 150** — the user asks:"
    assert set(at.dataframe[0].value["turn"]) <= {str(n) for n in range(1, 150)}  # turn 150's ledger
    at.radio(key="ledger_from").set_value("sample").run()
    assert at.select_slider(key="ledger_turn").value == 12  # a short conversation keeps its slider
