"""The sample conversations that ship with MemLens (``sample_data/``)."""

from __future__ import annotations

from pathlib import Path

from .conversation import Conversation
from .readers import read_conversations

SAMPLE_DIR = Path(__file__).resolve().parent.parent / "sample_data"


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
