"""Picking the conversation to compare or present: a sample, a stored conversation, or a file.

A file may be any transcript MemLens imports, a MemLens conversation export, or a report bundle
(which brings back its configs, facts and view). Loaded sources are cached by what identifies
them — the sample's name, the stored conversation's id and write stamp, the upload's digest — so
a rerun never reads or parses twice.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

import streamlit as st

from core.analysis import Source, source_of
from core.errors import MemLensError
from core.service import load_sample, load_stored, read_sources, sample_files
from core.store import resolve_url
from core.words import conversation_length, conversation_turns, distinct
from ui.html import plain
from ui.links import follow_debugged

SAMPLE, STORED, FILE = "Sample", "Stored", "File"


@dataclass(frozen=True)
class Picked:
    source: Source
    key: str  # identifies the conversation for caches (changes when it changes)
    #: The turn to open on: the Debugger's inspected turn, on the run that opened its conversation here.
    turn_id: str | None = None


@st.cache_resource(show_spinner=False, max_entries=16)
def _sample(name: str) -> list[Source]:
    return [source_of(c, f"sample {name}") for c in load_sample(name)]


@st.cache_resource(show_spinner=False, max_entries=16)
def _stored(url: str, conversation_id: str, stamp: tuple) -> Source:
    return load_stored(database(), conversation_id)


@st.cache_resource(show_spinner=False, max_entries=8)
def _uploaded(digest: str, name: str, _data: bytes) -> list[Source]:
    return read_sources(_data, name)


def database():
    """The configured store (MEMLENS_DATABASE_URL or data/memlens.db), the same one every page uses
    (seeded with the demo conversation on first use)."""
    from ui.data import service

    return service().db


def pick_source(prefix: str, *, default: str = "lisbon-trip.json") -> Picked | None:
    """The source chooser; ``prefix`` namespaces the widget keys (one chooser per page)."""
    kind = st.radio("Conversation from", [SAMPLE, STORED, FILE], key=f"{prefix}_from", horizontal=True)
    if kind == SAMPLE:
        names = [p.name for p in sample_files()]
        if st.session_state.get(f"{prefix}_sample") not in names:
            st.session_state[f"{prefix}_sample"] = default if default in names else names[0]
        name = st.selectbox("Sample", names, key=f"{prefix}_sample")
        sources = _sample(name)
        index = _index(prefix, sources)
        return Picked(sources[index], f"sample:{name}:{index}")
    if kind == STORED:
        from ui.data import service

        rows = service().conversations()
        if not rows:
            st.info("No stored conversation yet: import a file on the Import page, or chat on the Debugger page.")
            return None
        names = distinct({c.id: f"{c.name or 'Untitled'} · {conversation_length(c)} · {c.source}" for c in rows})
        ids = list(names)
        if st.session_state.get(f"{prefix}_stored") not in ids:
            st.session_state[f"{prefix}_stored"] = ids[0]
        conv_id = st.selectbox("Stored conversation", ids, key=f"{prefix}_stored", format_func=names.get)
        info = next(c for c in rows if c.id == conv_id)
        stamp = (info.updated_at, info.turn_count, info.active_turn_id)
        try:
            source = _stored(resolve_url(), conv_id, stamp)
        except MemLensError as e:
            st.error(plain(e))
            return None
        return Picked(source, f"stored:{conv_id}:{stamp}")
    upload = st.file_uploader(
        "Conversation file (any supported transcript, an export or a report bundle)",
        type=["json", "jsonl", "csv"],
        key=f"{prefix}_upload",
    )
    if upload is None:
        st.info(
            "Upload a file: OpenAI JSON/JSONL, ShareGPT, OpenAssistant, Dify messages or web items, BFCL, a "
            "MemLens export, or a MemLens report bundle (which brings back its configs)."
        )
        return None
    data = upload.getvalue()
    digest = hashlib.sha256(data).hexdigest()
    try:
        sources = _uploaded(digest, upload.name, data)
    except MemLensError as e:
        st.error(plain(e))
        return None
    index = _index(prefix, sources)
    return Picked(sources[index], f"upload:{digest}:{index}")


def _index(prefix: str, sources: list[Source]) -> int:
    if len(sources) <= 1:
        return 0
    labels = {
        i: f"{i}: {s.conversation.name or s.conversation.id} · {conversation_turns(s.conversation)}"
        for i, s in enumerate(sources)
    }
    if st.session_state.get(f"{prefix}_index") not in labels:
        st.session_state[f"{prefix}_index"] = 0
    return st.selectbox("Conversation in the file", list(labels), key=f"{prefix}_index", format_func=labels.get)


def pick_answered_source(prefix: str, *, purpose: str, hand_off: str | None = None) -> Picked:
    """The chooser in the sidebar; stops the page while nothing is picked, or when the conversation
    has no user turn to ``purpose`` (compare, present). ``hand_off`` names the session key another
    page sets to a stored conversation's id to open it here (read and cleared)."""
    opened = st.session_state.pop(hand_off, None) if hand_off else None
    # Opened from the menu: the conversation being debugged, at its inspected turn, until another is picked.
    followed = follow_debugged(prefix, fresh=f"{prefix}_from" not in st.session_state)
    turn_id = None
    if followed and not opened:
        opened, turn_id = followed
    if opened:
        st.session_state[f"{prefix}_from"], st.session_state[f"{prefix}_stored"] = STORED, opened
    with st.sidebar:
        st.subheader("Conversation")
        picked = pick_source(prefix)
    if picked is None:
        st.stop()
    if turn_id is not None and picked.key.startswith(f"stored:{opened}:"):
        picked = Picked(picked.source, picked.key, turn_id)
    if not picked.source.conversation.answered_turns():
        st.warning(f"This conversation has no user turn to {purpose}.")
        st.stop()
    return picked
