"""The debugger for a conversation without a flow (an import, a Dify pull): a replay view.

The transcript shows the active thread with its branches; each "memory lens" is a memory config
replayed over the conversation as if an LLM node had it (default: Dify's LLM-node memory with the
project's default settings), and gives the same markers, receipts (the history as it would be
sent), switchboard what-if, tree and findings as a flow's LLM node. What needs a flow — re-running
a turn, variables — says so where it is asked for and offers to attach one: replay the queries
through an imported flow as a new conversation, or re-score these answers under its LLM nodes'
memory settings.
"""

from __future__ import annotations

import dataclasses
import json

import streamlit as st

from core.analysis import (
    MAX_PHRASE,
    Lens,
    Subject,
    default_lens,
    lens_ledgers,
    node_receipt,
    replayed_run,
    transcript,
    what_if,
    where_did_it_go,
)
from core.analysis.compare import NamedConfig
from core.analysis.findings import findings_for, turn_namer
from core.errors import MemLensError
from core.flow import node_memory_config, parse_flow_upload
from core.limits import REPLAY_TURNS
from core.memory import DEFAULT_FIDELITY, MemoryConfig, Replay, turn_numbers
from core.memory.strategies import STRATEGIES
from core.model import counter_for, turn_label
from core.store import resolve_url
from core.words import distinct
from ui import data, html
from ui import state as keys
from ui.chat_view import TRANSCRIPT_HEIGHT, TurnActions, render_transcript, thread_page
from ui.compare_findings import render_findings
from ui.html import plain
from ui.ledger_table import render_ledger_table
from ui.links import link_to
from ui.observed_view import observed_lenses
from ui.receipt_view import render_receipt
from ui.switchboard import render_switchboard
from ui.tree_view import render_branches
from ui.why_panel import WHY_HELP, render_why

NEEDS_FLOW = (
    "Regenerating or editing a turn needs a flow: this conversation was imported without one. Attach a "
    "flow in the “Needs a flow” tab to replay its queries through it."
)

#: Memory configs a lens can be, besides the default one: each memory system's own (its ``lenses``).
PRESETS = {
    label: MemoryConfig(name, **settings) for name, system in STRATEGIES.items() for label, settings in system.lenses
}


@st.cache_resource(show_spinner=False, max_entries=32)
def _replay(url: str, conversation_id: str, version: tuple, config: MemoryConfig) -> Replay:
    conv = data.conversation(url, conversation_id, version)
    return Replay(conv, config, system_prompt=conv.system_prompt)


def _lenses_json(titles: dict[str, str], configs: dict[str, MemoryConfig]) -> str:
    """The lenses as the page shows them (switchboard changes included), as a cache key."""
    return json.dumps([NamedConfig(titles[lid], cfg).to_dict() for lid, cfg in configs.items()], sort_keys=True)


def _named(lenses_json: str) -> list[NamedConfig]:
    return [NamedConfig.from_dict(d) for d in json.loads(lenses_json)]


@st.cache_resource(show_spinner=False, max_entries=16)
def _findings(url: str, conversation_id: str, version: tuple, lenses_json: str):
    conv = data.conversation(url, conversation_id, version)
    return findings_for(conv, _named(lenses_json), system_prompt=conv.system_prompt)


@st.cache_resource(show_spinner=False, max_entries=16)
def _why(url: str, conversation_id: str, version: tuple, lenses_json: str, phrase: str, thread: tuple[int, ...]):
    """Where ``phrase`` went on ``thread``, per lens, under the configs the page shows."""
    subjects = [Subject(n.label, _replay(url, conversation_id, version, n.config)) for n in _named(lenses_json)]
    return where_did_it_go(data.conversation(url, conversation_id, version), phrase, subjects, thread=list(thread))


def _flow_lenses(version_id: str, fidelity: str) -> list[Lens]:
    flow = data.flow(resolve_url(), version_id)
    return [
        Lens(
            f"flow-{n.id}", f"{flow.name} · {flow.node_names[n.id]}", node_memory_config(flow, n.id, fidelity=fidelity)
        )
        for n in flow.memory_nodes
    ]  # an agent's too: an Agent app's export replays its log as its runner


def _lenses(svc, info, conv_id: str, conv) -> list[Lens]:
    window = info.meta.get("window") if isinstance(info.meta.get("window"), int) else None
    base = default_lens(window, conversation=conv)
    with st.sidebar:
        st.subheader("Memory lenses")
        st.caption("Each lens replays this conversation under one memory config, as if an LLM node had it.")
        picked = st.multiselect(
            "Also replay under",
            list(PRESETS),
            key=f"lenses-{conv_id}",
            label_visibility="collapsed",
            placeholder="Add a lens…",
        )
    lenses = [base] + [Lens(f"lens-{i}", name, PRESETS[name]) for i, name in enumerate(PRESETS) if name in picked]
    attached = st.session_state.get(keys.of_conversation(keys.RESCORE_FLOW, conv_id))
    if attached:
        try:
            lenses += _flow_lenses(attached, DEFAULT_FIDELITY)
        except MemLensError:
            st.session_state.pop(keys.of_conversation(keys.RESCORE_FLOW, conv_id), None)
    return lenses


def _attach_flow(svc, conv_id: str, conv, thread: list[int]) -> None:
    st.info("Re-running a turn and conversation variables need a flow: this conversation has none. Attach one.")
    dsl = st.file_uploader(
        "Import a Dify DSL export or a MemLens flow file", type=["yml", "yaml", "json"], key=f"attach-dsl-{conv_id}"
    )
    if dsl is not None and st.button("Import this flow", key=f"attach-dsl-go-{conv_id}"):
        try:
            version = svc.import_flow(parse_flow_upload(dsl.getvalue(), dsl.name))
        except MemLensError as e:
            st.error(plain(str(e)))
        else:
            st.session_state[keys.of_conversation(keys.ATTACH_FLOW, conv_id)] = version.id
            st.rerun()
    flows = svc.flows()
    if not flows:
        st.caption(
            "No flow yet: import a Dify DSL export or a MemLens flow file first (`python -m core flows import`)."
        )
        return
    labels = distinct({f.id: f"{f.flow_name} (v{f.version})" for f in flows})
    chosen = st.selectbox(
        "Flow", list(labels), format_func=labels.get, key=keys.of_conversation(keys.ATTACH_FLOW, conv_id)
    )
    if st.button(
        "Re-score these answers under the memory of its nodes that call a model",
        key=f"attach-rescore-{conv_id}",
        help="Adds one lens per node of the flow that calls a model; nothing is called or stored",
    ):
        st.session_state[keys.of_conversation(keys.RESCORE_FLOW, conv_id)] = chosen
        st.rerun()
    queries = [conv.turns[p] for p in thread if conv.turns[p].query_index is not None][:REPLAY_TURNS]
    if st.button(
        f"Replay the {len(queries)} queries through it as a new conversation",
        key=f"attach-replay-{conv_id}",
        disabled=not queries,
        help="Each query of the active thread is sent to the flow in order; its models answer",
    ):
        version = next(f for f in flows if f.id == chosen)
        try:
            with st.status("Replaying…", expanded=False) as status:
                new = svc.start(version.flow_id, name=f"{conv.name or 'Imported'} · through {version.flow_name}"[:255])
                for n, turn in enumerate(queries, start=1):
                    status.update(label=f"Replaying query {n} of {len(queries)}…")
                    svc.send(new.id, turn.query)
                status.update(label="Done", state="complete")
        except MemLensError as e:
            st.error(plain(str(e)))
            return
        st.session_state[keys.OPEN_IN_DEBUGGER] = new.id
        st.session_state.pop(keys.SELECTED_TURN, None)
        st.rerun()


def render_replay(svc, info, conv_id: str, *, conversation_only: bool) -> None:
    url = resolve_url()
    stamp = data.stamp(info)
    conv = data.conversation(url, conv_id, stamp)
    lenses = _lenses(svc, info, conv_id, conv)
    observed = observed_lenses(url, info, conv_id, stamp)  # a captured conversation's nodes (None otherwise)
    if observed is not None:
        lenses = observed.inferred + lenses
    titles = {lens.id: lens.title for lens in lenses} | (observed.titles if observed is not None else {})
    baselines = {lens.id: lens.config for lens in lenses}

    tree = conv.tree
    thread_ids = svc.active_thread(conv_id, conv) if conv.turns else []
    thread = [tree.position[t] for t in thread_ids]
    numbers = turn_numbers(conv) if conv.turns else []
    selected_id = st.session_state.get(keys.SELECTED_TURN)
    if selected_id not in thread_ids:
        answered = [t for t in thread_ids if conv.turns[tree.position[t]].query_index is not None]
        selected_id = (answered or thread_ids or [None])[-1]
        st.session_state[keys.SELECTED_TURN] = selected_id
    selected = tree.position[selected_id] if selected_id else None
    link_to(conv_id, selected_id)

    source = info.meta.get("source_format") or info.source
    st.title(plain(info.name or "Conversation"))
    if observed is not None:
        st.caption(plain(observed.caption()))
        with st.sidebar:
            for fit in observed.fits():
                st.caption(plain(fit))
    else:
        st.caption(
            plain(
                f"Imported ({source}) without a flow: markers and receipts replay it under the memory "
                "lenses in the sidebar. ● kept · ○ dropped · ◌ not eligible."
            )
        )

    def select(turn_id: str) -> None:  # an on_click callback (TurnActions.on_select): state only
        st.session_state[keys.SELECTED_TURN] = turn_id

    def switch(turn_id: str) -> None:
        svc.switch(conv_id, turn_id)  # its line becomes the active thread
        st.session_state[keys.SELECTED_TURN] = turn_id  # the version flipped to is the one looked at
        st.rerun()

    actions = TurnActions(on_select=select, on_switch=switch, cannot_run=NEEDS_FLOW)  # no Regenerate, no Edit
    if conversation_only:
        chat_col, side_col = st.container(), None
    else:
        chat_col, side_col = st.columns([3, 2], gap="large")

    configs = dict(baselines)
    differs: dict[str, list[str]] = {}
    tabs = why_box = None
    if side_col is not None:
        with side_col, st.container(key=keys.SIDE):  # kept in view beside the transcript (html.CSS)
            why_box = st.container()
            tabs = st.tabs(["Context receipt", "Switchboard", "Findings", "Branches", "Needs a flow"])
        with tabs[1]:
            changed = render_switchboard(lenses, baselines, key=f"rsb-{conv_id}")
            for lens_id, change in changed.items():
                try:
                    configs[lens_id] = dataclasses.replace(baselines[lens_id], **change).validate()
                except MemLensError as e:
                    st.error(plain(str(e)))
                    continue
            if not changed:
                st.caption("No change: each lens as picked.")

    replays = {lid: _replay(url, conv_id, stamp, cfg) for lid, cfg in configs.items()}
    ledgers = lens_ledgers(replays, selected) if selected is not None else {}
    if observed is not None and selected is not None:
        ledgers = observed.ledgers_at(conv, selected) | ledgers
    lenses_json = _lenses_json(titles, configs)

    if why_box is not None and thread:
        with why_box:
            phrase = st.text_input(
                "Where did it go?",
                key=f"rwhy-{conv_id}",
                max_chars=MAX_PHRASE,
                placeholder="Type a name, a number, a phrase… and press Enter",
                help=WHY_HELP,
            )
            if phrase.strip():
                try:
                    answer = _why(url, conv_id, stamp, lenses_json, phrase.strip(), tuple(thread))
                except MemLensError as e:
                    st.error(plain(str(e)))
                else:
                    render_why(answer, on_jump=lambda p: (select(conv.turns[p].id), st.rerun()), key=f"rwhy-{conv_id}")

    # The transcript scrolls in its own box, as the Debugger's does: the page opens at the top with the
    # inspected turn's receipt in view, and never grows with the conversation.
    with chat_col:
        transcript_box = (
            st.container(height=TRANSCRIPT_HEIGHT, key=keys.TRANSCRIPT) if side_col is not None else st.container()
        )
    with transcript_box:
        if not thread:
            st.info("This conversation has no turn.")
        else:
            visible = thread_page(
                thread, selected, key=f"shown-{conv_id}", on_newest=lambda: (select(thread_ids[-1]), st.rerun())
            )
            # "Replies might now differ" for the turns on this page only: a page costs the same at any length.
            for lens_id, config in configs.items():
                if config != baselines[lens_id]:
                    for p in what_if(conv, lens_id, baselines[lens_id], config, positions=visible).differs:
                        differs.setdefault(conv.turns[p].id, []).append(titles[lens_id])
            items = transcript(conv, visible, selected, ledgers, titles)
            siblings = {}
            for p in visible:
                sib = svc.siblings(conv, conv.turns[p].id)
                siblings[conv.turns[p].id] = (sib.index, sib.count, sib.ids)
            failed = {
                conv.turns[p].id: conv.turns[p].error or conv.turns[p].status
                for p in visible
                if conv.turns[p].status in ("failed", "error")
            }
            render_transcript(
                items,
                siblings=siblings,
                failed=failed,
                differs=differs,
                actions=actions,
                conversation_only=conversation_only,
                key=f"rtx-{conv_id}",
            )

    if tabs is None:
        return
    with tabs[0]:
        if selected is None or not ledgers:
            st.info("No turn with a query to inspect yet.")
        else:
            st.markdown(
                f"**{turn_label(conv, selected).capitalize()}** — " + html.muted(conv.turns[selected].query[:80]),
                unsafe_allow_html=True,
            )
            ratings = svc.feedbacks(conv_id).get(selected_id) or []
            for f in ratings:
                st.caption(
                    plain(f"Rated {f['rating']} by {f['user_id']}" + (f": {f['content']}" if f["content"] else ""))
                )
            shown_lenses = [lens for lens in lenses if lens.id in ledgers]
            seen = [lens_id for lens_id in (observed.titles if observed is not None else {}) if lens_id in ledgers]
            tabs_shown = st.tabs(
                [plain(titles[lens_id]) for lens_id in seen] + [plain(lens.title) for lens in shown_lenses]
            )
            for lens_id, tab in zip(seen, tabs_shown):
                with tab:
                    observed.render_receipt(conv, selected, lens_id, key=f"{selected_id}-{lens_id}")
            for lens, tab in zip(shown_lenses, tabs_shown[len(seen) :]):
                with tab:
                    ledger = ledgers[lens.id]
                    run = replayed_run(conv, selected, lens.id, ledger, counter_for(configs[lens.id].model))
                    r = node_receipt(run, lens.title, model=configs[lens.id].model)
                    render_receipt(r, ledger, key=f"rrc-{selected_id}-{lens.id}", what_if=lens.id in changed)
                    if ledger.entry_count() and st.toggle(
                        f"Show every earlier message ({ledger.entry_count():,}), kept or not", key=f"rlt-on-{lens.id}"
                    ):
                        render_ledger_table(
                            ledger, conv, key=f"rlt-{selected_id}-{lens.id}", node=lens.title, position=selected
                        )
    with tabs[2]:
        by_number = {numbers[p]: conv.turns[p].id for p in thread}
        render_findings(
            _findings(url, conv_id, stamp, lenses_json),
            key=f"rfind-{conv_id}",
            on_turn=lambda n: st.session_state.update({keys.SELECTED_TURN: by_number.get(n, selected_id)}),
            name=turn_namer(conv),
            narrow=True,
            jump_help="Inspect this turn",
            empty="No findings: nothing surprising in how these lenses remember this conversation.",
        )
    with tabs[3]:
        render_branches(conv, thread, on_switch=switch, keys=("rtree", f"rbranch-{conv_id}", "rswitch_branch"))
    with tabs[4]:
        _attach_flow(svc, conv_id, conv, thread)
