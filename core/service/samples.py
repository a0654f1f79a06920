"""The sample conversations that ship with MemLens (``sample_data/``)."""

from __future__ import annotations

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


def seed_demo(service) -> str | None:
    """On a store that has never been seeded: import the sample flows and play the default demo.

    The demo conversation runs support-bot's sample queries with the offline demo model, long
    enough that the Responder's window (4 rows: the last 3 turns under Dify 1.x) drops the message
    where the user gave their name.
    Returns the demo conversation's id (``None`` when the store was seeded before).
    """
    import json

    from core.llm.client import DemoClient
    from core.store import repo

    db = service.db
    if repo.get_setting(db, _SEEDED):
        return None
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
    repo.set_setting(db, _SEEDED, True)
    return conv.id
