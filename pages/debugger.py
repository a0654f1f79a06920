"""The debugger: chat with a flow and see, per LLM node, which earlier messages its memory kept."""

from __future__ import annotations

import json

import streamlit as st

from core.analysis.debug_view import damage_note, focus_node, models_note, receipt, transcript, why_settings_note
from core.analysis.findings import quoted
from core.analysis.left_out import left_out
from core.analysis.why import MAX_PHRASE
from core.errors import MemLensError
from core.flow.graph import parse_flow_upload
from core.flow.runtime import what_if_prompt
from core.memory.config import MemoryConfig
from core.memory.strategies import strategy_of
from core.memory.strategies.dify import DEFAULT_FIDELITY
from core.model.conversation import turn_label
from core.model.tokens import counter_for
from core.service.replays import NEW, replay_thread, replayed_name
from core.store.db import resolve_url
from core.words import conversation_length, distinct
from ui import data, html
from ui.fix_path import render_fix_path
from ui.flow_notes import render_flow_notes
from ui.glance import render_left_out
from ui import state as keys
from ui.chat_view import TRANSCRIPT_HEIGHT, TurnActions, render_transcript, thread_page, turn_problem
from ui.entry import through_app
from ui.ledger_table import render_ledger_table
from ui.links import link_to, open_linked
from ui.memories_panel import render_agent_run, render_recall_preview, render_recalled
from ui.receipt_view import render_receipt
from ui.replay_view import render_replay
from ui.start_form import start_form
from ui.switchboard import render_switchboard
from ui.tree_view import render_branches
from ui.variables_panel import render_variables
from ui.why_panel import WHY_HELP, WHY_PLACEHOLDER, render_why

through_app()  # before anything is shown or read: the login is in app.py

AS_CONFIGURED = "as configured in the flow"
MARKERS_LEGEND = ("Each node's memory at the inspected turn: ● kept · ○ dropped · ◌ not eligible — hover a marker "
                  "for why.")
MODEL_CHOICES = [AS_CONFIGURED, "memlens/demo", "gpt-4o-mini", "gpt-4o", "anthropic/claude-sonnet-4-5",
                 "ollama/llama3.1", "other…"]

html.inject_css()
svc = data.service()
url = resolve_url()

# -- conversations (sidebar) ---------------------------------------------------------------------------
conversations = svc.conversations()
flows = svc.flows()


def _source(c) -> str:
    """Where a conversation comes from: a flow (chat, API, CLI), an import format, a Dify pull."""
    if c.flow_version_id:
        return "flow"
    if c.source in ("dify-pull", "capture"):  # a Dify pull; the capture proxy's recordings
        return c.source
    return f"import: {c.meta.get('source_format') or c.source}"


sources = sorted({_source(c) for c in conversations})
opened = st.session_state.pop(keys.OPEN_IN_DEBUGGER, None)  # set by a view that made a new conversation
picked_flow = st.session_state.pop(keys.NEW_PICK, None)  # a flow just imported from the user's file
if picked_flow is not None:  # the popover offers it as a stored flow from now on
    st.session_state[keys.NEW_SOURCE] = "flow"
    st.session_state[keys.NEW_FLOW] = picked_flow
open_linked({c.id for c in conversations})  # a reload or a link opens what the address names
if opened:
    st.session_state[keys.CONVERSATION] = opened
    st.session_state[keys.NEW_POPOVER] = False  # started from it: closed, off the new conversation
    st.session_state[keys.CONVERSATION_SOURCE] = "all"
with st.sidebar:
    st.subheader("Conversations")
    source_filter = st.selectbox("Source", ["all"] + sources, key=keys.CONVERSATION_SOURCE,
                                 format_func=lambda s: "every source" if s == "all" else s)
listed = [c for c in conversations if source_filter in ("all", _source(c))]
# Flow conversations first, so the page opens on one that can be continued.
listed.sort(key=lambda c: c.flow_version_id is None)
ids = [c.id for c in listed]
names = distinct({c.id: f"{c.name or 'New conversation'} · {conversation_length(c)} · {_source(c)}" for c in listed})
if st.session_state.get(keys.CONVERSATION) not in ids:
    st.session_state[keys.CONVERSATION] = ids[0] if ids else None
else:
    # Set again so the picker shows its choice's label as it is now ("3 turns" after a turn): the
    # browser otherwise keeps showing the label it was picked under.
    st.session_state[keys.CONVERSATION] = st.session_state[keys.CONVERSATION]

with st.sidebar:
    if ids:
        st.selectbox("Open", ids, key=keys.CONVERSATION, format_func=lambda i: names.get(i, i),
                     label_visibility="collapsed")
    with st.popover("New conversation", icon=":material/add:", width="stretch", key=keys.NEW_POPOVER,
                    on_change="rerun"):
        source = st.radio("Start on", ["flow", "file"], key=keys.NEW_SOURCE, horizontal=True,
                          format_func={"flow": "a stored flow", "file": "your own file"}.get)
        chosen, own = None, None
        if source == "flow":
            flow_names = distinct({f.flow_id: f"{f.flow_name} (v{f.version})" for f in flows})
            chosen = st.selectbox("Flow", list(flow_names), format_func=flow_names.get, key=keys.NEW_FLOW)
        else:
            own = st.file_uploader("A Dify DSL export or a MemLens flow file", type=["yml", "yaml", "json"],
                                   key=f"{keys.NEW_FLOW_FILE}-{st.session_state.get(keys.NEW_FLOW_FILE_ROUND, 0)}",
                                   help="Export it from Dify (app menu → Export DSL). It is stored as a flow, "
                                        "each of its nodes that calls a model answered by the model chosen "
                                        "under *Model for new turns*.")
            # Start is offered once the file has reached the app: a click while it is still on its way
            # would otherwise start on no file at all.
            st.caption(f"Start uses {html.plain(own.name)}." if own is not None else
                       "Start waits for the file to arrive.")
        new_name = st.text_input("Name", key=keys.NEW_NAME)
        # The flow's start form, filled in before the first message (as Dify's web app asks for it).
        # The user's file is read once: its start form is drawn from it, and Start stores it.
        form_flow, problem = None, None
        if chosen is not None:
            latest = max((f for f in flows if f.flow_id == chosen), key=lambda f: f.version)
            form_flow = data.flow(url, latest.id)
        elif own is not None:
            try:
                form_flow = parse_flow_upload(own.getvalue(), own.name)
            except MemLensError as e:
                problem = str(e)  # said when Start is clicked
        start_inputs, missing = start_form(form_flow, keys.NEW_INPUTS) if form_flow is not None else ({}, [])
        if missing:
            st.caption(html.plain("Start needs: " + ", ".join(missing)))
        if st.button("Start", key=keys.NEW_START, disabled=(chosen is None and own is None) or bool(missing)):
            flow_id = chosen
            if own is not None:
                flow_id = None
                if problem is not None:
                    st.error(html.plain(problem))
                else:
                    try:
                        flow_id = svc.import_flow(form_flow).flow_id
                    except MemLensError as e:
                        st.error(html.plain(str(e)))
            if flow_id is not None:
                # Without a name it is named by its first message (ConversationService.send).
                info = svc.start(flow_id, name=new_name.strip(), inputs=start_inputs)
                # Opened on the next run, before the conversation picker exists: a widget's key
                # cannot be set once the widget is drawn.
                st.session_state[keys.OPEN_IN_DEBUGGER] = info.id
                st.session_state.pop(keys.SELECTED_TURN, None)
                if own is not None:  # an empty uploader for the next one, the imported flow picked
                    st.session_state[keys.NEW_FLOW_FILE_ROUND] = st.session_state.get(keys.NEW_FLOW_FILE_ROUND, 0) + 1
                    st.session_state[keys.NEW_PICK] = flow_id
                st.rerun()

conv_id = st.session_state.get(keys.CONVERSATION)


def conv_key(name: str) -> str:
    """A widget key kept per open conversation."""
    return keys.of_conversation(name, conv_id)


if conv_id is None:
    link_to(None, None)
    st.title("MemLens debugger")
    st.info("No conversation yet: start one from the sidebar.")
    st.stop()


def _hand_off(key: str, conversation_id: str) -> None:
    st.session_state[key] = conversation_id  # the other page opens it (it owns its widgets)


with st.sidebar:
    compare_col, present_col = st.columns(2)
    if compare_col.button("Compare", key=keys.TO_COMPARE, icon=":material/compare:", width="stretch",
                          on_click=_hand_off, args=(keys.OPEN_IN_COMPARE, conv_id),
                          help="Opens this conversation on the Compare page: 2–6 memory configs side by side"):
        st.switch_page("pages/compare.py")
    if present_col.button("Present", key=keys.TO_PRESENT, icon=":material/slideshow:", width="stretch",
                          on_click=_hand_off, args=(keys.OPEN_IN_PRESENT, conv_id),
                          help="Opens this conversation on the Present page: step through it turn by turn"):
        st.switch_page("pages/present.py")

info = svc.info(conv_id)
if info.flow_version_id is None:  # imported or pulled: no flow to run, a replay view instead
    with st.sidebar:
        conversation_only = st.toggle("Conversation only", key=keys.CONVERSATION_ONLY,
                                      help="Hide every debugging detail: a clean chat for demos")
    render_replay(svc, info, conv_id, conversation_only=conversation_only)
    data.warm_up_models()
    st.stop()
stamp = data.stamp(info)
conv = data.conversation(url, conv_id, stamp)
flow = data.flow(url, info.flow_version_id)
version = svc.flow_version(info.flow_version_id)
latest = svc.latest_version(version.flow_id)
fidelity = info.meta.get("fidelity", DEFAULT_FIDELITY)
counting = bool(info.meta.get("plugin_token_counting"))
stored_overrides = info.meta.get("memory_overrides") or {}
# LLM, Question Classifier, Parameter Extractor and Agent nodes: each run records its ledger and prompt.
llm_nodes = flow.model_nodes
memory_nodes = flow.memory_nodes  # those and agent nodes: what the switchboard can change, one by one
node_names = flow.node_names  # a title with its id when two nodes' titles read alike
titles = {n.id: node_names[n.id] for n in llm_nodes}
node_titles = {n.id: node_names[n.id] for n in memory_nodes}

with st.sidebar:
    st.caption(f"Flow **{html.plain(version.flow_name)}** · version {version.version}"
               + (" (pinned; newest is v%d)" % latest.version if latest.id != version.id else " (newest)"))
    render_flow_notes(flow)  # what the import said: what MemLens runs differently or not at all
    if latest.id != version.id and st.button(f"Continue on v{latest.version} as a new branch",
                                             key=keys.CONTINUE_LATEST):
        try:
            rec = svc.continue_on_latest(conv_id)
            if rec is not None:
                st.session_state[keys.SELECTED_TURN] = rec.id
            st.rerun()
        except MemLensError as e:
            st.error(html.plain(e))
    with st.popover("Rename or delete", icon=":material/edit:", width="stretch"):
        new = st.text_input("Name", info.name, key=conv_key(keys.RENAME))
        if st.button("Rename", key=keys.RENAME_GO):
            svc.rename(conv_id, new.strip() or info.name)
            st.rerun()
        st.divider()
        confirm = st.checkbox("Delete this conversation and everything recorded in it", key=keys.DELETE_CONFIRM)
        if st.button("Delete", key=keys.DELETE_GO, disabled=not confirm, type="primary"):
            svc.delete(conv_id)
            st.session_state.pop(keys.CONVERSATION, None)
            st.session_state.pop(keys.SELECTED_TURN, None)
            st.rerun()
    model_choice = st.selectbox(
        "Model for new turns", MODEL_CHOICES, key=keys.MODEL_CHOICE,
        help="The demo model answers offline. A real model needs its provider's key in the environment "
             "(e.g. OPENAI_API_KEY); without it the demo model stands in and the receipt says so.")
    if model_choice == "other…":
        model_choice = st.text_input("Model name (litellm)", key=keys.MODEL_OTHER, placeholder="ollama/llama3.1")
    st.divider()
    conversation_only = st.toggle("Conversation only", key=keys.CONVERSATION_ONLY,
                                  help="Hide every debugging detail: a clean chat for demos")
    node_options = ["all"] + [n.id for n in llm_nodes]
    node_labels = distinct({"all": "every node that calls a model", **titles})  # two nodes may share a title
    node_filter = st.selectbox("Show memory of", node_options, key=keys.NODE_FILTER,
                               format_func=node_labels.__getitem__, disabled=conversation_only)

st.title(html.plain(info.name or "New conversation"))
if not conversation_only:
    st.caption(MARKERS_LEGEND)


@st.fragment
def _workspace() -> None:
    """The transcript and the inspector: a fragment, so inspecting a turn, a switchboard change or a what-if
    reruns them alone, not the sidebar; a turn run, a branch switch or a setting kept reruns the whole page."""
    # -- the active thread and the selected turn ------------------------------------------------------------
    tree = conv.tree
    thread_ids = svc.active_thread(conv_id, conv) if conv.turns else []
    thread = [tree.position[t] for t in thread_ids]
    selected_id = st.session_state.get(keys.SELECTED_TURN)
    if selected_id not in thread_ids:
        selected_id = thread_ids[-1] if thread_ids else None
        st.session_state[keys.SELECTED_TURN] = selected_id
    selected = tree.position[selected_id] if selected_id else None
    link_to(conv_id, selected_id)

    damage_slot = st.empty()  # filled once the selected turn's node runs are read

    def _run(label: str, fn):
        """Run a turn-producing action with visible progress; select the new turn and refresh."""
        with st.status(label, expanded=True) as status:
            def on_event(ev: dict) -> None:
                if ev.get("event") == "node_started":
                    status.write(html.plain(f"▶ {ev['data'].get('title') or ev['data'].get('node_id')}"))
                elif ev.get("event") == "node_finished" and ev["data"].get("status") == "failed":
                    status.write(html.plain(f"✗ {ev['data'].get('title')}: {ev['data'].get('error')}"))
            try:
                record = fn(on_event)
            except MemLensError as e:
                status.update(label=html.plain(e), state="error")
                return
            status.update(label="Done", state="complete")
        st.session_state[keys.SELECTED_TURN] = record.id
        st.rerun()

    def _inspect(turn_id: str) -> None:
        st.session_state[keys.SELECTED_TURN] = turn_id

    def _select(turn_id: str) -> None:
        _inspect(turn_id)
        st.rerun()

    def _switch(turn_id: str) -> None:
        svc.switch(conv_id, turn_id)  # its line becomes the active thread
        st.session_state[keys.SELECTED_TURN] = turn_id  # the version flipped to is the one looked at
        st.rerun()

    def _replay_from_start(mode: str, model: str | None, overrides: dict, inspected: int | None) -> None:
        """Ask the thread's questions again from turn 1 with the switchboard's settings; open the result on the
        replayed counterpart of the inspected turn."""
        labels = [f"{node_titles[n]}: {MemoryConfig.from_dict(c).label()}" for n, c in overrides.items()]
        with st.status("Replaying from turn 1…", expanded=True) as status:
            try:
                result = replay_thread(svc, conv_id, overrides, mode=mode, model=model,
                                       name=replayed_name(info.name, labels),
                                       on_turn=lambda n, total: status.update(label=f"Replaying question {n} of {total}…"))
            except MemLensError as e:
                status.update(label=html.plain(e), state="error")
                return
            status.update(label="Done", state="complete")
        turn = result.records[inspected if inspected is not None else -1].id
        if mode == NEW:
            st.session_state[keys.OPEN_IN_DEBUGGER] = result.conversation_id
        st.session_state[keys.SELECTED_TURN] = turn
        st.rerun()

    actions = TurnActions(
        on_select=_inspect,
        on_regenerate=lambda tid: _run("Regenerating…", lambda ev: svc.regenerate(conv_id, tid, on_event=ev)),
        on_edit=lambda tid, text: _run("Running the edited message…", lambda ev: svc.edit(conv_id, tid, text, on_event=ev)),
        on_switch=_switch,
    )

    # -- layout --------------------------------------------------------------------------------------------
    if conversation_only:
        chat_col, side_col = st.container(), None
    else:
        chat_col, side_col = st.columns(2, gap="medium")

    # The switchboard starts from the settings the inspected turn ran with (recorded with each node run),
    # never from the conversation's current ones: what it shows and what the markers show are one config.
    runs = {r["node_id"]: r for r in data.node_runs(url, conv_id, stamp, selected_id)} if selected_id else {}
    damage = damage_note(info.damaged, conv, list(runs.values()), titles)
    if damage:
        damage_slot.warning(html.plain(damage))
    for_new_turns = {n.id: data.memory_config(flow, n.id, fidelity, stored_overrides.get(n.id), counting)
                     for n in memory_nodes}
    baselines = {n.id: data.recorded_config(runs[n.id]) if (runs.get(n.id) or {}).get("memory") else for_new_turns[n.id]
                 for n in memory_nodes}
    overrides: dict[str, dict] = {}
    receipt_tab = switch_tab = vars_tab = tree_tab = glance_box = None
    if side_col is not None:
        with side_col, st.container(key=keys.SIDE):
            if selected is not None:
                st.markdown(f"**{turn_label(conv, selected).capitalize()}** — "
                            + html.muted(conv.turns[selected].query[:80]), unsafe_allow_html=True)
            glance_box = st.container()  # what each node left out, once the ledgers are known
            why_box = st.container()
            receipt_tab, switch_tab, vars_tab, tree_tab = st.tabs(["Context receipt", "Switchboard", "Variables",
                                                                    "Branches"])
        with switch_tab:
            if selected is not None:
                st.caption(f"Settings {turn_label(conv, selected)} ran with; a change here is a what-if until you "
                           "re-run or keep it.")
            for n in memory_nodes:
                if for_new_turns[n.id] != baselines[n.id]:
                    st.caption(html.plain(f"{node_titles[n.id]}: new turns use {for_new_turns[n.id].label()} "
                                     f"(this turn ran with {baselines[n.id].label()})."))
            actions_box = st.container()  # above the editors: what a change can become
            # The turn whose settings the widgets hold: inspecting another (or flipping back) starts from its own.
            fresh = st.session_state.get(conv_key(keys.SWITCHBOARD)) != selected_id
            st.session_state[conv_key(keys.SWITCHBOARD)] = selected_id
            changed = render_switchboard(memory_nodes, baselines, key=conv_key(keys.SWITCHBOARD) + f"-{selected_id}",
                                         fresh=fresh)
            # Whole configs (the inspected turn's settings with the changes on top), for what-if ledgers and re-runs.
            overrides = {nid: {**baselines[nid].to_dict(), **c} for nid, c in changed.items()}
            if changed and selected_id:
                with actions_box:
                    label = turn_label(conv, selected)
                    overrides_json = json.dumps(overrides, sort_keys=True)
                    note = data.rerun_note(url, conv_id, stamp, info.flow_version_id, selected_id, overrides_json,
                                           fidelity, counting)
                    asked = [p for p in thread if conv.turns[p].query_index is not None]
                    render_fix_path(
                        turn=label, questions=len(asked), rerun_note=note, key=conv_key(keys.FIX),
                        other_model=model_choice if model_choice != AS_CONFIGURED else None,
                        on_rerun=lambda: _run("Re-running…", lambda ev: svc.rerun_from(
                            conv_id, selected_id, {**stored_overrides, **overrides}, on_event=ev)),
                        on_replay=lambda mode, model: _replay_from_start(mode, model, overrides, asked.index(selected)
                                                                         if selected in asked else None),
                        on_keep=lambda: (svc.set_memory_overrides(conv_id, {**stored_overrides, **overrides}), st.rerun()))
            else:
                st.caption("No change: ledgers are as recorded.")

    # -- where did X go? --------------------------------------------------------------------------------------
    if side_col is not None and thread:
        with why_box:
            phrase = st.text_input("Where did it go?", key=conv_key(keys.WHY), max_chars=MAX_PHRASE,
                                   placeholder=WHY_PLACEHOLDER, help=WHY_HELP, label_visibility="collapsed")
            if phrase.strip():
                try:
                    shown = {nid: {**config.to_dict(), **overrides.get(nid, {})} for nid, config in baselines.items()}
                    answer = data.why(url, conv_id, stamp, info.flow_version_id, phrase.strip(), thread_ids[-1],
                                      json.dumps(shown, sort_keys=True), fidelity)
                    render_why(answer, on_jump=lambda p: _select(conv.turns[p].id), key=conv_key(keys.WHY))
                    # One config per node over the whole thread: say which, since earlier turns may have run with others.
                    settings = "; ".join(f"{node_titles[nid]}: {MemoryConfig.from_dict(cfg).label()}"
                                         for nid, cfg in shown.items() if nid in node_titles)
                    if selected is not None and settings:
                        st.caption(html.plain(why_settings_note(turn_label(conv, selected), settings)))
                except MemLensError as e:
                    st.error(html.plain(e))

    # -- ledgers of the selected turn ------------------------------------------------------------------------
    ledgers = {nid: r["ledger"] for nid, r in runs.items() if r.get("ledger") is not None}
    if overrides and selected_id:
        ledgers.update(data.what_if_ledgers(url, conv_id, stamp, info.flow_version_id, selected_id,
                                            json.dumps(overrides, sort_keys=True), fidelity, counting))
    if glance_box is not None and selected is not None:
        with glance_box:  # the answer first: what each node that ran left out, and why
            render_left_out([left_out(conv, ledgers[n.id], node_titles.get(n.id, n.id), n.id)
                             for n in memory_nodes if n.id in ledgers and n.id in runs])

    # -- the transcript --------------------------------------------------------------------------------------
    # The transcript scrolls in its own box, so the page opens at the top (title, receipt in view) and the
    # box shows the newest turn; the inspector column stays in view beside it (html.CSS: .st-key-ml-side).
    with chat_col:
        transcript_box = st.container(height=TRANSCRIPT_HEIGHT, key=keys.TRANSCRIPT) if side_col is not None \
            else st.container()
    with transcript_box:
        # On a flow's first use: who answers (its nodes' models, or the demo model in their place) and how to
        # use a real one.
        first_use = models_note({node_titles[n.id]: for_new_turns[n.id].model for n in memory_nodes},
                                list(runs.values())) if len(conv.turns) <= 1 and model_choice == AS_CONFIGURED else None
        if first_use:
            st.info(html.plain(first_use), icon=":material/smart_toy:")
        if not thread:
            st.info("No message yet. Say something below — the demo model answers offline.")
        else:
            visible = thread_page(thread, selected, key=conv_key(keys.SHOWN), on_newest=lambda: _select(thread_ids[-1]))
            # "Replies might now differ" for the turns on this page only: a page costs the same at any length.
            differs: dict[str, list[str]] = {}
            for nid, ov in overrides.items():
                wi = data.what_if_turns(url, conv_id, stamp, info.flow_version_id, nid,
                                        json.dumps(baselines[nid].to_dict(), sort_keys=True),
                                        json.dumps(ov, sort_keys=True), fidelity, counting, tuple(visible))
                for p in wi.differs:
                    differs.setdefault(conv.turns[p].id, []).append(node_titles[nid])
            items = transcript(conv, visible, selected, ledgers, titles,
                               node_filter=None if node_filter == "all" else node_filter)
            siblings = {}
            for p in visible:
                sib = svc.siblings(conv, conv.turns[p].id)
                siblings[conv.turns[p].id] = (sib.index, sib.count, sib.ids)
            failed = {conv.turns[p].id: turn_problem(conv.turns[p]) for p in visible if turn_problem(conv.turns[p])}
            render_transcript(items, siblings=siblings, failed=failed, differs=differs,
                              actions=actions, conversation_only=conversation_only, key=conv_key(keys.TRANSCRIPT_TURNS))

    # Inside the chat column, under the transcript box: a chat input at the page's root would pin itself to
    # the bottom and scroll the whole page down on every load, away from the title and the receipt.
    with chat_col:
        query = st.chat_input("Message the bot…", key=keys.CHAT_INPUT)
    if query:
        send_overrides = None
        if model_choice and model_choice != AS_CONFIGURED:
            send_overrides = {n.id: {**stored_overrides.get(n.id, {}), "model": model_choice.strip()} for n in llm_nodes}
        _run("Running the turn…", lambda ev: svc.send(conv_id, query, overrides=send_overrides, on_event=ev))

    # -- the inspector ---------------------------------------------------------------------------------------
    if side_col is not None:
        with receipt_tab:
            if selected_id is None:
                st.info("Send a message: the context receipt of each node that calls a model appears here.")
                render_recall_preview(svc.memory_of(info.flow_version_id), info.user_id, None, key=conv_key(keys.RECALL),
                                      names={c.id: c.name for c in conversations if c.name})
            else:
                for rating in svc.feedbacks(conv_id).get(selected_id) or []:
                    st.caption(html.plain(f"Rated {rating['rating']} by {rating['user_id']}"
                                          + (f": {rating['content']}" if rating["content"] else "")))
                ran = [n for n in llm_nodes if n.id in runs]
                agents = [r for r in runs.values() if r.get("type") == "tool-agent"]
                passed = [r for r in runs.values() if r.get("emulated") is False]
                if passed:  # what they would have written is unknown here: an empty answer may come from one
                    st.caption(html.plain("Ran as pass-throughs, their outputs empty (MemLens does not emulate them): "
                                          + ", ".join(f"{quoted(r.get('title') or r['node_id'])} ({r.get('type')})"
                                                      for r in passed)))
                if not ran and not agents:
                    st.info("No node that calls a model ran in this turn.")
                else:
                    labels = [html.plain(titles[n.id]) for n in ran] + [html.plain(node_names.get(r["node_id"], r["node_id"]))
                                                                          for r in agents]
                    # Open on the node whose memory changed most at this turn, not simply the first one.
                    position_in_thread = thread.index(selected) if selected in thread else 0
                    previous_id = conv.turns[thread[position_in_thread - 1]].id if position_in_thread > 0 else None
                    before = {}
                    if previous_id is not None:
                        before = {r["node_id"]: r["ledger"] for r in data.node_runs(url, conv_id, stamp, previous_id)
                                  if r.get("ledger") is not None}
                        if overrides:
                            before.update(data.what_if_ledgers(url, conv_id, stamp, info.flow_version_id, previous_id,
                                                               json.dumps(overrides, sort_keys=True), fidelity))
                    focus = focus_node(ledgers, before, [n.id for n in ran])
                    default_tab = labels[[n.id for n in ran].index(focus)] if focus is not None else None
                    node_tabs = st.tabs(labels, default=default_tab)
                    for run, tab in zip(agents, node_tabs[len(ran):]):
                        with tab:
                            agent_id = run["node_id"]
                            ledger = ledgers.get(agent_id)
                            if ledger is not None:
                                # What the agent's first model request held — or, under the switchboard's
                                # what-if, would have held.
                                is_what_if = agent_id in overrides
                                counter = counter_for(ledger.config.get("model") or "gpt-4o-mini")
                                shown = dict(run, ledger=ledger)
                                if is_what_if:
                                    shown["prompt"] = what_if_prompt(flow, conv, selected, agent_id,
                                                                     run.get("prompt") or [], ledger)
                                r = receipt(shown, node_titles[agent_id], exact=counter.exact,
                                            encoding=counter.encoding_name, position=selected)
                                render_receipt(r, ledger, key=f"rc-{selected_id}-{agent_id}", what_if=is_what_if)
                            render_agent_run(run, key=f"agent-{selected_id}-{agent_id}")
                    for node, tab in zip(ran, node_tabs):
                        with tab:
                            run = dict(runs[node.id])
                            ledger = ledgers.get(node.id)
                            is_what_if = node.id in overrides
                            model = (ledger.config.get("model") if ledger else None) or "gpt-4o-mini"
                            counter = counter_for(model)
                            if is_what_if and ledger is not None:
                                run["ledger"] = ledger
                                run["prompt"] = what_if_prompt(flow, conv, selected, node.id, run.get("prompt") or [],
                                                               ledger)
                            other = data.other_profile_ledger(url, conv_id, stamp, info.flow_version_id, selected_id,
                                                              node.id, json.dumps(overrides.get(node.id) or
                                                                                  stored_overrides.get(node.id) or {},
                                                                                  sort_keys=True), fidelity, counting) \
                                if ledger is not None and strategy_of(ledger.config).has_profiles else None
                            r = receipt(run, titles[node.id], exact=counter.exact, encoding=counter.encoding_name,
                                        other=other, position=selected)
                            render_receipt(r, ledger, key=f"rc-{selected_id}-{node.id}", what_if=is_what_if)
                            if run.get("recalled"):
                                render_recalled(run.get("recalled"), key=f"recalled-{selected_id}-{node.id}")
                            if ledger is not None and ledger.entry_count() and st.toggle(
                                    f"Show every earlier message ({ledger.entry_count():,}), kept or not",
                                    key=f"lt-on-{node.id}"):
                                render_ledger_table(ledger, conv, key=f"lt-{selected_id}-{node.id}", node=titles[node.id],
                                                    position=selected, narrow=True)
        with vars_tab:
            declared = [v.name for v in flow.variables]
            variables = sorted(svc.variables(conv_id),
                               key=lambda v: declared.index(v.name) if v.name in declared else len(declared))
            history = data.variable_history(url, conv_id, stamp)
            at = data.variables_at(url, conv_id, stamp, info.flow_version_id, selected_id) if selected_id else None
            label = f"after {turn_label(conv, selected)}" if selected is not None else ""
            render_variables(svc, conv_id, variables, at, label, history,
                             # a change's turn as labelled on its thread, named only for the page of changes shown
                             lambda t: turn_label(conv, tree.position[t]).removeprefix("turn ") if t in tree.position
                             else "—", key=conv_key(keys.VARIABLES), branched=len(thread) < len(conv.turns),
                             node_names=node_names)
        with tree_tab:
            render_branches(conv, thread, on_switch=_switch, keys=("tree", f"branch-{conv_id}", "switch_branch"),
                            figure=data.branch_figure(url, conv_id, stamp, thread_ids[-1]) if thread_ids else None)

    data.warm_up_models()  # from the session's second drawing on: litellm loads for the first turn meanwhile


_workspace()
