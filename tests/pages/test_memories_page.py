"""The long-term memory page: browse a user's memories, search, edit, delete, and see each one's history (AppTest)."""

from __future__ import annotations

import pytest
from streamlit.testing.v1 import AppTest

from core.memory.long_term import Source
from core.store.db import Database
from core.store.memories import long_term_store
from tests.conftest import ROOT
from tests.rendered import shown


@pytest.fixture
def seeded(tmp_path, monkeypatch):
    """A store with memories for two users, and the app pointed at it."""
    url = f"sqlite:///{tmp_path / 'memories.db'}"
    monkeypatch.setenv("MEMLENS_DATABASE_URL", url)
    db = Database(url)
    store = long_term_store(db)
    store.store(
        "dana",
        "My name is Dana. My order number is 4411. I like green tea.",
        source=Source("conv-1", "turn-1", "long-term-memory", 1),
    )
    store.store("eve", "My name is Eve. I live in Oslo.")
    yield store
    db.dispose()


def open_page() -> AppTest:
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=30)
    at.run()
    return at.switch_page("pages/memories.py").run()


MEMORY_COLUMNS = ["memory", "key", "updated", "created", "source", "id"]
HISTORY_COLUMNS = ["when", "event", "old", "new", "by", "source", "turn id"]
RECALL_COLUMNS = ["memory", "score", "key", "from"]
UNRANKED_COLUMNS = ["memory", "key", "from"]


def frames(at: AppTest, columns: list[str]) -> list:
    return [d.value for d in at.dataframe if list(d.value.columns) == columns]


def table(at: AppTest):
    [frame] = frames(at, MEMORY_COLUMNS)
    return frame


def history_of(at: AppTest, first_text: str):
    """The history table whose first row added ``first_text``."""
    [frame] = [f for f in frames(at, HISTORY_COLUMNS) if f["new"][0] == first_text]
    return frame


def test_the_page_lists_the_chosen_users_memories_and_only_theirs(seeded):
    at = open_page()
    assert not at.exception
    assert at.title[0].value == "Long-term memory"
    # "demo" is the seeded demo's user (the app plays a long-term memory demo on first open).
    # Memories stored without a namespace come first; the demo's are in its app's namespace.
    assert at.selectbox(key="mem_namespace").value == ""
    assert at.selectbox(key="mem_user").options == ["dana", "eve"]
    assert set(table(at)["memory"]) == {"Your name is Dana.", "Your order is 4411.", "You like green tea."}
    assert set(table(at)["source"]) == {"long-term-memory · turn 1 · conversation conv-1"}
    at.selectbox(key="mem_user").set_value("eve").run()
    assert set(table(at)["memory"]) == {"Your name is Eve.", "You live in Oslo."}
    [app] = [u.namespace for u in seeded.users() if u.user_id == "demo"]
    assert app.startswith("app:") and "app long-term-memory" in at.selectbox(key="mem_namespace").options
    at.selectbox(key="mem_namespace").set_value(app).run()
    assert at.selectbox(key="mem_user").options == ["demo"]


def test_search_keeps_the_memories_containing_the_text(seeded):
    at = open_page()
    at.text_input(key="mem_search").set_value("ORDER").run()
    assert list(table(at)["memory"]) == ["Your order is 4411."]
    at.text_input(key="mem_search").set_value("nothing like this").run()
    assert frames(at, MEMORY_COLUMNS) == []
    assert any("No memory of this user contains that text." in i.value for i in at.info)


def test_editing_a_memory_rewrites_it_and_its_history_shows_the_update(seeded):
    [order] = [m for m in seeded.memories("dana") if m.key == "order"]
    at = open_page()
    at.text_area(key=f"mem_text_{order.id}").set_value("Your order is 5120.").run()
    at.button(key=f"mem_save_{order.id}").click().run()
    assert not at.exception
    assert seeded.get(order.id).memory == "Your order is 5120."
    assert [shown(s.value) for s in at.success] == ["Memory updated."]
    assert "Your order is 5120." in set(table(at)["memory"])
    history = history_of(at, "Your order is 4411.")
    assert list(history["event"]) == ["ADD", "UPDATE"]
    assert list(history["new"]) == ["Your order is 4411.", "Your order is 5120."]
    assert list(history["by"]) == ["extractor:offline", "user"]
    assert history["turn id"][0] == "turn-1"


def test_deleting_a_memory_removes_it_and_keeps_its_history(seeded):
    [tea] = [m for m in seeded.memories("dana") if m.key == "like"]
    at = open_page()
    at.button(key=f"mem_delete_{tea.id}").click().run()
    assert not at.exception
    assert seeded.find(tea.id) is None
    assert "You like green tea." not in set(table(at)["memory"])
    history = history_of(at, "You like green tea.")
    assert list(history["event"]) == ["ADD", "DELETE"]
    assert [m.memory for m in seeded.memories("eve")] != []  # another user's memories are untouched


def test_an_empty_edit_is_refused_and_changes_nothing(seeded):
    [name] = [m for m in seeded.memories("dana") if m.key == "name"]
    at = open_page()
    at.text_area(key=f"mem_text_{name.id}").set_value("   ").run()
    at.button(key=f"mem_save_{name.id}").click().run()
    assert "delete it instead of emptying it" in at.error[0].value
    assert seeded.get(name.id).memory == "Your name is Dana."
    assert len(seeded.history(name.id)) == 1


def test_memories_can_be_added_by_hand_and_the_recall_preview_ranks_them(seeded):
    at = open_page()
    at.text_input(key="mem_new").set_value("Your seat is by the window.").run()
    at.button(key="mem_add").click().run()
    assert "Your seat is by the window." in set(table(at)["memory"])
    # Before a query nothing is ranked: the preview has no score column to fill with "None".
    [recent] = frames(at, UNRANKED_COLUMNS)
    assert len(recent) == 4 and not frames(at, RECALL_COLUMNS)
    at.text_input(key="mem_query").set_value("which seat do I like?").run()
    [recall] = frames(at, RECALL_COLUMNS)
    assert recall["memory"][0] == "Your seat is by the window." and recall["score"][0] > 0
    assert len(recall) == 4


def test_a_store_without_memories_says_so(tmp_path, monkeypatch):
    url = f"sqlite:///{tmp_path / 'empty.db'}"
    monkeypatch.setenv("MEMLENS_DATABASE_URL", url)
    from core.store import repo

    repo.set_setting(Database(url), "demo.seeded", True)  # a store that was seeded once and then emptied
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=30)
    at.switch_page("pages/memories.py").run()
    assert not at.exception
    assert "No long-term memories yet" in at.info[0].value


def test_the_first_open_shows_the_demo_users_memories(tmp_path, monkeypatch):
    monkeypatch.setenv("MEMLENS_DATABASE_URL", f"sqlite:///{tmp_path / 'fresh.db'}")
    at = open_page()
    assert at.selectbox(key="mem_user").value == "demo"
    assert {"Your name is Dana.", "You live in Porto.", "You are vegetarian."} <= set(table(at)["memory"])


def test_a_memory_names_the_conversation_it_came_from(tmp_path, monkeypatch):
    monkeypatch.setenv("MEMLENS_DATABASE_URL", f"sqlite:///{tmp_path / 'fresh.db'}")
    at = open_page()
    sources = set(table(at)["source"])
    assert any("conversation Demo: long-term memory, first visit" in s for s in sources), sources


def test_a_source_is_named_by_its_conversation_when_the_name_is_known():
    source = Source("4213c07a-0000-4000-8000-000000000000", "t", "long-term-memory", 2)
    assert source.label() == "long-term-memory · turn 2 · conversation 4213c07a"
    assert (
        source.label({source.conversation_id: "Trip planning"})
        == "long-term-memory · turn 2 · conversation Trip planning"
    )
    assert source.label({"another": "x"}) == source.label() and Source().label() == "edited by hand"
