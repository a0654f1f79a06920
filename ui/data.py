"""Cached access to the store for the pages: one service per database, data keyed by its inputs.

Streamlit reruns the whole page on every click, so everything here is cached by what it depends
on: a conversation by its id and a stamp that changes whenever it is written (updated time and
turn count), a turn's node runs by the turn id, what-if ledgers by the settings that produced
them. Cached objects are shared and treated as read-only.
"""

from __future__ import annotations

import json
import threading

import streamlit as st

from core.analysis import WhatIf, what_if
from core.flow import Flow, node_history_inputs, node_memory_config, what_if_ledger
from core.llm import warm_up
from core.memory import MemoryConfig
from core.model import Conversation, Ledger
from core.service import ConversationService, seed_demo
from core.store import Database, resolve_url
from core.store.repo import ConversationInfo
from ui import state as keys

_services: dict[str, ConversationService] = {}
_services_lock = threading.Lock()


def service_for(url: str) -> ConversationService:
    """The service for ``url``, made (and the demo seeded) once per process, whichever thread asks first:
    :mod:`ui.serve` asks before the first visit."""
    with _services_lock:
        if url not in _services:
            service = ConversationService(Database(url))
            seed_demo(service)  # from the prepared bundle
            _services[url] = service
        return _services[url]


@st.cache_resource(show_spinner="Preparing the demo conversations (first start only)…")
def _service(url: str) -> ConversationService:
    return service_for(url)


def warm_up_models() -> None:
    """Load litellm in the background once a person acts on the page they opened (the session's second
    drawing of the transcript and inspector: an Inspect, a tab, a setting), so the first turn they run
    does not wait for it — and their first page, drawn and sent while nothing else runs, does not share
    the interpreter with its import."""
    runs = st.session_state.get(keys.WORKSPACE_RUNS, 0) + 1
    st.session_state[keys.WORKSPACE_RUNS] = runs
    if runs > 1:
        warm_up()


def service() -> ConversationService:
    """The service for the configured database (MEMLENS_DATABASE_URL or data/memlens.db)."""
    return _service(resolve_url())


def stamp(info: ConversationInfo) -> tuple:
    return (info.updated_at, info.turn_count, info.active_turn_id, info.flow_version_id)


@st.cache_resource(show_spinner=False, max_entries=16)
def conversation(url: str, conversation_id: str, version: tuple) -> Conversation:
    return _service(url).conversation(conversation_id)


@st.cache_resource(show_spinner=False, max_entries=64)
def flow(url: str, version_id: str) -> Flow:
    return _service(url).flow(version_id)


@st.cache_resource(show_spinner=False, max_entries=512)
def node_runs(url: str, conversation_id: str, version: tuple, turn_id: str) -> list[dict]:
    svc = _service(url)
    return svc.node_runs(conversation(url, conversation_id, version), turn_id)


@st.cache_resource(show_spinner=False, max_entries=16)
def variable_history(url: str, conversation_id: str, version: tuple) -> list[dict]:
    """Every recorded variable change; a variable edit updates the conversation, so the stamp changes."""
    return _service(url).variable_history(conversation_id)


@st.cache_resource(show_spinner=False, max_entries=64)
def variables_at(url: str, conversation_id: str, version: tuple, version_id: str, turn_id: str) -> dict:
    """The variables as they were right after ``turn_id``."""
    return _service(url).variables_at(
        conversation_id,
        turn_id,
        conversation=conversation(url, conversation_id, version),
        flow=flow(url, version_id),
        history=variable_history(url, conversation_id, version),
    )


@st.cache_resource(show_spinner=False, max_entries=256)
def what_if_ledgers(
    url: str,
    conversation_id: str,
    version: tuple,
    version_id: str,
    turn_id: str,
    overrides_json: str,
    fidelity: str,
    counting: bool = False,
) -> dict[str, Ledger]:
    """Each overridden node's ledger at ``turn_id`` under its new settings (no model call); every
    earlier message is listed when a view first reads them (the receipt does, the choice of tab does not)."""
    conv = conversation(url, conversation_id, version)
    f = flow(url, version_id)
    position = conv.tree.position[turn_id]
    out = {}
    for node_id, override in json.loads(overrides_json).items():
        out[node_id] = what_if_ledger(
            f, conv, position, node_id, override, fidelity=fidelity, plugin_token_counting=counting, lazy=True
        )
    return out


@st.cache_resource(show_spinner=False, max_entries=32)
def rerun_note(
    url: str,
    conversation_id: str,
    version: tuple,
    version_id: str,
    turn_id: str,
    overrides_json: str,
    fidelity: str,
    counting: bool = False,
) -> str | None:
    """What re-running ``turn_id`` as a branch under the switchboard's settings keeps, when that differs from
    the what-if the page shows (:func:`core.analysis.rerun.rerun_note`)."""
    from core.analysis import rerun_ledgers
    from core.analysis import rerun_note as note

    conv = conversation(url, conversation_id, version)
    f = flow(url, version_id)
    position = conv.tree.position[turn_id]
    previews = what_if_ledgers(url, conversation_id, version, version_id, turn_id, overrides_json, fidelity, counting)
    reruns = rerun_ledgers(
        f, conv, position, json.loads(overrides_json), fidelity=fidelity, plugin_token_counting=counting
    )
    return note(conv, position, previews, reruns, f.node_names)


@st.cache_resource(show_spinner=False, max_entries=64)
def what_if_turns(
    url: str,
    conversation_id: str,
    version: tuple,
    version_id: str,
    node_id: str,
    base_json: str,
    override_json: str,
    fidelity: str,
    counting: bool = False,
    positions: tuple[int, ...] = (),
) -> WhatIf:
    """Where one node's kept set changes under its new settings, among the turns at ``positions``
    (the transcript's page: the cost does not grow with the conversation)."""
    conv = conversation(url, conversation_id, version)
    f = flow(url, version_id)
    base = node_memory_config(
        f, node_id, fidelity=fidelity, plugin_token_counting=counting, override=json.loads(base_json) or None
    )
    new = node_memory_config(
        f, node_id, fidelity=fidelity, plugin_token_counting=counting, override=json.loads(override_json) or None
    )
    return what_if(
        conv,
        node_id,
        base,
        new,
        has_thread=f.is_chat,
        history_inputs=node_history_inputs(f, conv, node_id),
        positions=positions,
    )


@st.cache_resource(show_spinner=False, max_entries=16)
def branch_figure(url: str, conversation_id: str, version: tuple, leaf_id: str):
    """The Branches tab's tree (:func:`ui.tree_view.branch_figure`) with the thread ending at ``leaf_id`` as
    the active one: drawn once per version of the conversation, not on every inspect (keyed by the leaf: a
    key of the thread's every turn would cost its hashing on every run)."""
    from ui.tree_view import branch_figure as draw

    conv = conversation(url, conversation_id, version)
    return draw(conv, conv.tree.path(conv.tree.position[leaf_id]))


def recorded_config(run: dict) -> MemoryConfig:
    """The memory settings a node run was recorded with."""
    return MemoryConfig.from_dict(run["memory"])


@st.cache_resource(show_spinner=False, max_entries=256)
def other_profile_ledger(
    url: str,
    conversation_id: str,
    version: tuple,
    version_id: str,
    turn_id: str,
    node_id: str,
    override_json: str,
    fidelity: str,
    counting: bool = False,
) -> Ledger:
    """A node's ledger at ``turn_id`` under the other Dify profile (docs ↔ shipped code), for the
    receipt's docs-vs-code finding (no model call)."""
    conv = conversation(url, conversation_id, version)
    f = flow(url, version_id)
    override = dict(json.loads(override_json) or {})
    current = override.get("fidelity", fidelity)
    override["fidelity"] = "documented" if current == "code" else "code"
    return what_if_ledger(
        f,
        conv,
        conv.tree.position[turn_id],
        node_id,
        override,
        fidelity=fidelity,
        plugin_token_counting=counting,
        lazy=True,
    )


def memory_config(f: Flow, node_id: str, fidelity: str, override: dict | None, counting: bool = False) -> MemoryConfig:
    return node_memory_config(f, node_id, fidelity=fidelity, plugin_token_counting=counting, override=override or None)


def clear_conversation_caches() -> None:
    """After a write the stamp changes anyway; this also frees memory held by older stamps."""
    conversation.clear()
    node_runs.clear()
    variable_history.clear()
    variables_at.clear()


@st.cache_resource(show_spinner=False, max_entries=32)
def why(
    url: str,
    conversation_id: str,
    version: tuple,
    version_id: str,
    phrase: str,
    leaf_id: str,
    overrides_json: str,
    fidelity: str,
):
    """Where ``phrase`` went on the thread ending at ``leaf_id``, per LLM node, under the settings the page shows."""
    from core.analysis import node_subjects, where_did_it_go

    conv = conversation(url, conversation_id, version)
    subjects = node_subjects(flow(url, version_id), conv, fidelity=fidelity, overrides=json.loads(overrides_json))
    return where_did_it_go(conv, phrase, subjects, thread=conv.tree.path(conv.tree.position[leaf_id]))
