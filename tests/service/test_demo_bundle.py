"""The demo's prepared bundle (sample_data/demo/seed.json) is what playing the demo gives now, so a fresh
install that loads it (in a fraction of a second) shows what one that played the flows would.

When this fails, the sample flows, the demo model or what a turn records changed: refresh the bundle
with ``.venv/bin/python scripts/demo_bundle.py``."""

from __future__ import annotations

import json
import re

from core.service.samples import DEMO_BUNDLE, DEMO_NAME, demo_bundle, load_demo_bundle, play_demo, seed_demo
from core.service.sessions import ConversationService
from core.store import repo
from core.store.db import Database

_UUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")
#: What differs between two plays of the same demo: when things happened and how long they took.
_CLOCK = {"created_at", "updated_at", "latency_ms", "elapsed_time"}


def _same_shape(doc) -> object:
    """``doc`` with every id numbered in order of appearance and every time set to 0."""
    seen: dict[str, str] = {}
    text = _UUID.sub(lambda m: seen.setdefault(m.group(), f"<id {len(seen)}>"), json.dumps(doc, sort_keys=True))

    def clear(value):
        if isinstance(value, dict):
            return {k: 0 if k in _CLOCK and isinstance(v, (int, float)) else clear(v) for k, v in value.items()}
        if isinstance(value, list):
            return [clear(v) for v in value]
        return value

    return clear(json.loads(text))


def test_the_prepared_bundle_is_what_playing_the_demo_gives_now(tmp_path):
    played = ConversationService(Database(f"sqlite:///{tmp_path / 'played.db'}"))
    play_demo(played)
    prepared = json.loads(DEMO_BUNDLE.read_text(encoding="utf-8"))
    assert _same_shape(demo_bundle(played)) == _same_shape(prepared), (
        "the demo plays differently now: refresh the bundle with .venv/bin/python scripts/demo_bundle.py"
    )


def test_every_conversation_in_the_bundle_passes_the_imports_whole_check():
    """A fresh install stores the bundle's conversations without reading every ledger back (shipped=True):
    this is that check, made here instead."""
    from core.io.bundle import validate_bundle

    for doc in json.loads(DEMO_BUNDLE.read_text(encoding="utf-8"))["conversations"]:
        validate_bundle(doc)


def test_a_fresh_store_is_seeded_from_the_bundle_with_everything_the_demo_holds(tmp_path):
    service = ConversationService(Database(f"sqlite:///{tmp_path / 'fresh.db'}"))
    conv_id = seed_demo(service)
    assert service.info(conv_id).name == DEMO_NAME and service.info(conv_id).turn_count == 8
    assert seed_demo(service) is None  # once
    prepared = json.loads(DEMO_BUNDLE.read_text(encoding="utf-8"))
    assert demo_bundle(service) == prepared  # every flow, conversation and memory, ids and all
    names = {v.flow_name for v in service.flows()}
    assert {"support-bot", "long-term-memory", "order-desk", "window-memory"} <= names
    week_later = next(c for c in repo.list_conversations(service.db) if c.name.endswith("a week later"))
    answer = service.conversation(week_later.id).turns[0].answer
    assert "Dana" in answer and "Porto" in answer  # recalled from the first visit's long-term memories


def test_the_loaded_demo_runs_on_like_a_played_one(tmp_path):
    service = ConversationService(Database(f"sqlite:///{tmp_path / 'fresh.db'}"))
    conv_id = load_demo_bundle(service, json.loads(DEMO_BUNDLE.read_text(encoding="utf-8")))
    from core.llm.client import DemoClient

    record = service.send(conv_id, "What is my order number?", llm=DemoClient())
    assert record.turn == 9 and record.answer.startswith("Your order is 4411.")  # turn 7's answer is in its window
