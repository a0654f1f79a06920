"""The sample conversations that ship with MemLens (``sample_data/``)."""

from __future__ import annotations

import json
from pathlib import Path

from core.io.readers.registry import read_conversations
from core.model.conversation import Conversation

SAMPLE_DIR = Path(__file__).resolve().parent.parent.parent / "sample_data"


def sample_files() -> list[Path]:
    """Conversation files, the project's own first, then the real transcripts."""
    own = sorted((SAMPLE_DIR / "conversations").glob("*.json"))
    real = sorted(p for p in (SAMPLE_DIR / "transcripts").glob("*.json*"))
    return own + real


def load_sample(name: str) -> list[Conversation]:
    for path in sample_files():
        if path.name == name:
            return read_conversations(path)
    raise FileNotFoundError(f"no sample named {name!r}")


DEMO_FLOW = "support-bot"
DEMO_NAME = "Demo: support-bot forgets a name"
_SEEDED = "demo.seeded"
MEMORY_FLOW = "long-term-memory"
MEMORY_DEMO = (
    ("Demo: long-term memory, first visit", ["Hi, I'm Dana. I live in Porto.", "I'm vegetarian, by the way."]),
    ("Demo: long-term memory, a week later", ["Hello again! What's my name, and where do I live?"]),
)


def flow_files() -> list[Path]:
    return sorted((SAMPLE_DIR / "flows").glob("*.yml"))


#: The demo, played once and stored as it came out (scripts/demo_bundle.py writes it): a fresh install
#: loads it in a fraction of a second instead of running the flows; tests/service/test_demo_bundle.py holds
#: it equal to what playing the demo gives now.
DEMO_BUNDLE = SAMPLE_DIR / "demo" / "seed.json"
BUNDLE_FORMAT, BUNDLE_VERSION = "memlens-demo", 1


def seed_demo(service) -> str | None:
    """On a store that has never been seeded: the sample flows and the demo conversations, from the
    prepared bundle (:data:`DEMO_BUNDLE`) when it is there, else played (:func:`play_demo`).
    Returns the demo conversation's id (``None`` when the store was seeded before)."""
    from core.store import repo

    db = service.db
    if repo.get_setting(db, _SEEDED):
        return None
    if DEMO_BUNDLE.is_file():
        conv_id = load_demo_bundle(service, json.loads(DEMO_BUNDLE.read_text(encoding="utf-8")))
    else:
        conv_id = play_demo(service)
    repo.set_setting(db, _SEEDED, True)
    return conv_id


def play_demo(service) -> str:
    """Import the sample flows and play the demo conversations with the offline demo model.

    The support-bot demo runs its sample queries, long enough that the Responder's window (4 rows: the
    last 3 turns under Dify 1.x) drops the message where the user gave their name; the long-term memory
    demo states facts in a first visit and recalls them a week later. Returns the support-bot demo's id."""
    from core.llm.client import DemoClient
    from core.store import repo

    db = service.db
    versions = {}
    for path in flow_files():
        if repo.find_flow_by_name(db, path.stem) is None:
            versions[path.stem] = service.import_flow(path, name=path.stem)
    # Long-term memory: a first visit states facts, a later conversation of the same user recalls them.
    memory = versions.get(MEMORY_FLOW) or repo.find_flow_by_name(db, MEMORY_FLOW)
    if memory is not None:
        for name, queries in MEMORY_DEMO:
            first = service.start(memory.flow_id, name=name, user_id="demo")
            for q in queries:
                service.send(first.id, q, llm=DemoClient())
    # The support-bot demo goes last: the debugger opens the most recently updated conversation.
    demo = versions.get(DEMO_FLOW) or repo.find_flow_by_name(db, DEMO_FLOW)
    conv = service.start(demo.flow_id, name=DEMO_NAME, user_id="demo")
    queries = json.loads((SAMPLE_DIR / "flows" / f"{DEMO_FLOW}.queries.json").read_text(encoding="utf-8"))
    for q in queries:
        service.send(conv.id, q, llm=DemoClient())
    return conv.id


def demo_bundle(service) -> dict:
    """Everything the demo put in ``service``'s store, as one document :func:`load_demo_bundle` reads:
    every flow (by name, with its definition), every conversation (MemLens exports, oldest first) and the
    long-term memories with their history."""
    from dataclasses import asdict

    from core.service.transfer import export_conversation
    from core.store import repo
    from core.store.memories import SqlMemoryBackend

    db = service.db
    backend = SqlMemoryBackend(db)
    users = backend.users()
    conversations = sorted(repo.list_conversations(db), key=lambda c: c.updated_at)
    return {
        "format": BUNDLE_FORMAT,
        "version": BUNDLE_VERSION,
        "flows": [
            {"name": v.flow_name, "definition": repo.get_flow_version(db, v.id).definition}
            for v in sorted(service.flows(), key=lambda v: v.flow_name)
        ],
        "conversations": [export_conversation(db, c.id) for c in conversations],
        "memories": [asdict(m) for u in users for m in backend.memories(u.user_id, u.namespace)],
        "memory_history": [asdict(e) for u in users for e in backend.user_history(u.user_id, u.namespace)],
    }


def load_demo_bundle(service, bundle: dict) -> str:
    """Store what :func:`demo_bundle` wrote; returns the support-bot demo's id."""
    from core.flow.graph import Flow
    from core.memory.long_term import MemoryEvent, MemoryItem, Source
    from core.service.transfer import import_conversation
    from core.store import repo
    from core.store.memories import SqlMemoryBackend

    if bundle.get("format") != BUNDLE_FORMAT or bundle.get("version") != BUNDLE_VERSION:
        raise ValueError(f"{DEMO_BUNDLE.name} is not a version {BUNDLE_VERSION} {BUNDLE_FORMAT} document")
    db = service.db
    ids = [import_conversation(db, doc, shipped=True) for doc in bundle["conversations"]]  # each brings its flow
    for flow in bundle["flows"]:
        if repo.find_flow_by_name(db, flow["name"]) is None:
            service.import_flow(Flow.from_dict(flow["definition"]), name=flow["name"])
    items = [MemoryItem(**{**m, "source": Source.from_dict(m["source"])}) for m in bundle["memories"]]
    events = [
        MemoryEvent(**{**e, "source": Source.from_dict(e["source"]), "id": None}) for e in bundle["memory_history"]
    ]
    SqlMemoryBackend(db).write(items, [], events)
    return next(i for i, doc in zip(ids, bundle["conversations"]) if doc["conversation"]["name"] == DEMO_NAME)
