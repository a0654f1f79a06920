"""The debugger's workspace for a flow conversation: the transcript with its markers and chat input, and
beside it the inspector (what each node left out, "Where did it go?", the context receipt, the switchboard,
the variables and the branches) for the inspected turn.

The page runs it as a fragment, so inspecting a turn, a switchboard change, a what-if or another tab reruns
it alone, not the sidebar; a turn run, a branch switch or a setting kept reruns the whole page. Of the
inspector's tabs only the open one is drawn, and the switchboard always, since its widgets hold the
what-if that the markers, the glance and the receipt show."""

from __future__ import annotations

import json
from dataclasses import dataclass, field

import streamlit as st

from core.analysis import MAX_PHRASE, damage_note, left_out, models_note, transcript, why_settings_note
from core.errors import MemLensError
from core.memory import MemoryConfig
from core.model import turn_label
from core.service import NEW, replay_thread, replayed_name
from ui import data, html
from ui import state as keys
from ui.chat_view import TRANSCRIPT_HEIGHT, TurnActions, render_transcript, thread_page, turn_problem
from ui.debug_context import AS_CONFIGURED, DebugContext, PageSettings
from ui.fix_path import render_fix_path
from ui.glance import render_left_out
from ui.inspector import Inspected, render_node_receipts
from ui.links import link_to
from ui.memories_panel import render_recall_preview
from ui.switchboard import render_switchboard
from ui.tree_view import render_branches
from ui.variables_panel import render_variables
from ui.why_panel import WHY_HELP, WHY_PLACEHOLDER, render_why

INSPECTOR_TABS = ("Context receipt", "Switchboard", "Variables", "Branches")
OPENING = "Opening…"


@dataclass
class _Layout:
    """Where each part of the workspace is drawn; the inspector's boxes are ``None`` in conversation-only."""

    chat: object
    side: object | None = None
    glance: object | None = None
    why: object | None = None
    tabs: list = field(default_factory=list)


def render_workspace(ctx: DebugContext, settings: PageSettings, conversations: list) -> None:
    """Draw the transcript and the inspector for the inspected turn of the active thread."""
    svc, conv = ctx.svc, ctx.conversation
    thread_ids = svc.active_thread(ctx.conversation_id, conv) if conv.turns else []
    at = Inspected.of(ctx, thread_ids)
    link_to(ctx.conversation_id, at.selected_id)
    damage_slot = st.empty()  # filled once the selected turn's node runs are read
    actions = _Actions(ctx, settings, at)
    layout = _layout(ctx, settings, at)
    # The switchboard starts from the settings the inspected turn ran with (recorded with each node run),
    # never from the conversation's current ones: what it shows and what the markers show are one config.
    damage = damage_note(ctx.info.damaged, conv, list(at.runs.values()), ctx.titles)
    if damage:
        damage_slot.warning(html.plain(damage))
    overrides: dict[str, dict] = {}
    if layout.side is not None:
        with layout.tabs[1]:
            overrides = _switchboard(ctx, settings, at, actions)
        if at.thread:
            with layout.why:
                _where_did_it_go(ctx, at, overrides, actions)
    at.what_if(ctx, overrides)
    if layout.glance is not None and at.selected is not None:
        with layout.glance:  # the answer first: what each node that ran left out, and why
            render_left_out(
                [
                    left_out(conv, at.ledgers[n.id], ctx.node_titles.get(n.id, n.id), n.id)
                    for n in ctx.memory_nodes
                    if n.id in at.ledgers and n.id in at.runs
                ]
            )
    _transcript(ctx, settings, at, layout, actions)
    # Inside the chat column, under the transcript box: a chat input at the page's root would pin itself to
    # the bottom and scroll the whole page down on every load, away from the title and the receipt.
    with layout.chat:
        query = st.chat_input("Message the bot…", key=keys.CHAT_INPUT)
    if query:
        send_overrides = None
        if settings.other_model:
            send_overrides = {
                n.id: {**ctx.stored_overrides.get(n.id, {}), "model": settings.other_model} for n in ctx.model_nodes
            }
        actions.run(
            "Running the turn…", lambda ev: svc.send(ctx.conversation_id, query, overrides=send_overrides, on_event=ev)
        )
    if layout.side is None:
        return
    receipt, _, variables, branches = layout.tabs
    for tab in (receipt, variables, branches):
        if not tab.open:  # shown the moment it is clicked, until the rerun that click starts draws the tab
            tab.caption(OPENING)
    if receipt.open and at.selected_id is None:
        with receipt:
            st.info("Send a message: the context receipt of each node that calls a model appears here.")
            render_recall_preview(
                svc.memory_of(ctx.info.flow_version_id),
                ctx.info.user_id,
                None,
                key=ctx.key(keys.RECALL),
                names={c.id: c.name for c in conversations if c.name},
            )
    elif receipt.open:
        with receipt:
            render_node_receipts(ctx, at)
    if variables.open:
        with variables:
            _variables(ctx, at)
    if branches.open:
        with branches:
            render_branches(
                conv,
                at.thread,
                on_switch=actions.switch,
                keys=("tree", f"branch-{ctx.conversation_id}", "switch_branch"),
                figure=data.branch_figure(ctx.url, ctx.conversation_id, ctx.stamp, thread_ids[-1])
                if thread_ids
                else None,
            )


class _Actions:
    """What a click in the workspace does: run a turn, inspect or switch to one, replay from turn 1."""

    def __init__(self, ctx: DebugContext, settings: PageSettings, at: Inspected):
        self.ctx, self.settings, self.at = ctx, settings, at
        svc, cid = ctx.svc, ctx.conversation_id
        self.turn = TurnActions(
            on_select=self.inspect,
            on_regenerate=lambda tid: self.run("Regenerating…", lambda ev: svc.regenerate(cid, tid, on_event=ev)),
            on_edit=lambda tid, text: self.run(
                "Running the edited message…", lambda ev: svc.edit(cid, tid, text, on_event=ev)
            ),
            on_switch=self.switch,
        )

    def run(self, label: str, fn) -> None:
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

    @staticmethod
    def inspect(turn_id: str) -> None:
        st.session_state[keys.SELECTED_TURN] = turn_id

    def select(self, turn_id: str) -> None:
        self.inspect(turn_id)
        st.rerun()

    def switch(self, turn_id: str) -> None:
        self.ctx.svc.switch(self.ctx.conversation_id, turn_id)  # its line becomes the active thread
        st.session_state[keys.SELECTED_TURN] = turn_id  # the version flipped to is the one looked at
        st.rerun()

    def replay_from_start(self, mode: str, model: str | None, overrides: dict, inspected: int | None) -> None:
        """Ask the thread's questions again from turn 1 with the switchboard's settings; open the result on the
        replayed counterpart of the inspected turn."""
        ctx = self.ctx
        labels = [f"{ctx.node_titles[n]}: {MemoryConfig.from_dict(c).label()}" for n, c in overrides.items()]
        with st.status("Replaying from turn 1…", expanded=True) as status:
            try:
                result = replay_thread(
                    ctx.svc,
                    ctx.conversation_id,
                    overrides,
                    mode=mode,
                    model=model,
                    name=replayed_name(ctx.info.name, labels),
                    on_turn=lambda n, total: status.update(label=f"Replaying question {n} of {total}…"),
                )
            except MemLensError as e:
                status.update(label=html.plain(e), state="error")
                return
            status.update(label="Done", state="complete")
        turn = result.records[inspected if inspected is not None else -1].id
        if mode == NEW:
            st.session_state[keys.OPEN_IN_DEBUGGER] = result.conversation_id
        st.session_state[keys.SELECTED_TURN] = turn
        st.rerun()


def _layout(ctx: DebugContext, settings: PageSettings, at: Inspected) -> _Layout:
    if settings.conversation_only:
        return _Layout(chat=st.container())
    chat_col, side_col = st.columns(2, gap="medium")
    layout = _Layout(chat=chat_col, side=side_col)
    with side_col, st.container(key=keys.SIDE):
        if at.selected is not None:
            st.markdown(
                f"**{turn_label(ctx.conversation, at.selected).capitalize()}** — "
                + html.muted(ctx.conversation.turns[at.selected].query[:80]),
                unsafe_allow_html=True,
            )
        layout.glance = st.container()  # what each node left out, once the ledgers are known
        layout.why = st.container()
        # Only the open tab is drawn, and the switchboard always: its widgets hold the what-if every part shows.
        layout.tabs = st.tabs(INSPECTOR_TABS, key=keys.INSPECTOR_TAB, on_change="rerun")
    return layout


def _switchboard(ctx: DebugContext, settings: PageSettings, at: Inspected, actions: _Actions) -> dict[str, dict]:
    """The switchboard tab: each memory node's settings for the inspected turn; returns each changed node's
    whole config (the turn's settings with the changes on top), for what-if ledgers and re-runs."""
    conv, selected, selected_id = ctx.conversation, at.selected, at.selected_id
    if selected is not None:
        st.caption(
            f"Settings {turn_label(conv, selected)} ran with; a change here is a what-if until you re-run or keep it."
        )
    for n in ctx.memory_nodes:
        if at.for_new_turns[n.id] != at.baselines[n.id]:
            st.caption(
                html.plain(
                    f"{ctx.node_titles[n.id]}: new turns use {at.for_new_turns[n.id].label()} "
                    f"(this turn ran with {at.baselines[n.id].label()})."
                )
            )
    actions_box = st.container()  # above the editors: what a change can become
    # The turn whose settings the widgets hold: inspecting another (or flipping back) starts from its own.
    fresh = st.session_state.get(ctx.key(keys.SWITCHBOARD)) != selected_id
    st.session_state[ctx.key(keys.SWITCHBOARD)] = selected_id
    if fresh:  # the widgets of turns inspected before: every rerun's widgets search the whole state
        earlier, own = ctx.key(keys.SWITCHBOARD) + "-", ctx.key(keys.SWITCHBOARD) + f"-{selected_id}-"
        for stale in [
            k for k in st.session_state if isinstance(k, str) and k.startswith(earlier) and not k.startswith(own)
        ]:
            del st.session_state[stale]
    changed = render_switchboard(
        ctx.memory_nodes, at.baselines, key=ctx.key(keys.SWITCHBOARD) + f"-{selected_id}", fresh=fresh
    )
    overrides = {nid: {**at.baselines[nid].to_dict(), **c} for nid, c in changed.items()}
    if not (changed and selected_id):
        st.caption("No change: ledgers are as recorded.")
        return overrides
    with actions_box:
        overrides_json = json.dumps(overrides, sort_keys=True)
        note = data.rerun_note(
            ctx.url,
            ctx.conversation_id,
            ctx.stamp,
            ctx.info.flow_version_id,
            selected_id,
            overrides_json,
            ctx.fidelity,
            ctx.counting,
        )
        asked = [p for p in at.thread if conv.turns[p].query_index is not None]
        kept_and_changed = {**ctx.stored_overrides, **overrides}
        render_fix_path(
            turn=turn_label(conv, selected),
            questions=len(asked),
            rerun_note=note,
            key=ctx.key(keys.FIX),
            other_model=settings.other_model,
            on_rerun=lambda: actions.run(
                "Re-running…",
                lambda ev: ctx.svc.rerun_from(ctx.conversation_id, selected_id, kept_and_changed, on_event=ev),
            ),
            on_replay=lambda mode, model: actions.replay_from_start(
                mode, model, overrides, asked.index(selected) if selected in asked else None
            ),
            on_keep=lambda: (ctx.svc.set_memory_overrides(ctx.conversation_id, kept_and_changed), st.rerun()),
        )
    return overrides


def _where_did_it_go(ctx: DebugContext, at: Inspected, overrides: dict[str, dict], actions: _Actions) -> None:
    phrase = st.text_input(
        "Where did it go?",
        key=ctx.key(keys.WHY),
        max_chars=MAX_PHRASE,
        placeholder=WHY_PLACEHOLDER,
        help=WHY_HELP,
        label_visibility="collapsed",
    )
    if not phrase.strip():
        return
    try:
        shown = {nid: {**config.to_dict(), **overrides.get(nid, {})} for nid, config in at.baselines.items()}
        answer = data.why(
            ctx.url,
            ctx.conversation_id,
            ctx.stamp,
            ctx.info.flow_version_id,
            phrase.strip(),
            at.thread_ids[-1],
            json.dumps(shown, sort_keys=True),
            ctx.fidelity,
        )
        render_why(answer, on_jump=lambda p: actions.select(ctx.conversation.turns[p].id), key=ctx.key(keys.WHY))
        # One config per node over the whole thread: say which, since earlier turns may have run with others.
        settings = "; ".join(
            f"{ctx.node_titles[nid]}: {MemoryConfig.from_dict(cfg).label()}"
            for nid, cfg in shown.items()
            if nid in ctx.node_titles
        )
        if at.selected is not None and settings:
            st.caption(html.plain(why_settings_note(turn_label(ctx.conversation, at.selected), settings)))
    except MemLensError as e:
        st.error(html.plain(e))


def _transcript(ctx: DebugContext, settings: PageSettings, at: Inspected, layout: _Layout, actions: _Actions) -> None:
    """The active thread, a page of it at a time, scrolling in its own box so the page opens at the top
    (title, receipt in view) with the newest turn shown; the inspector stays in view beside it
    (html.CSS: .st-key-ml-side)."""
    conv = ctx.conversation
    with layout.chat:
        box = st.container(height=TRANSCRIPT_HEIGHT, key=keys.TRANSCRIPT) if layout.side is not None else st.container()
    with box:
        # On a flow's first use: who answers (its nodes' models, or the demo model in their place) and how to
        # use a real one.
        first_use = (
            models_note(
                {ctx.node_titles[n.id]: at.for_new_turns[n.id].model for n in ctx.memory_nodes}, list(at.runs.values())
            )
            if len(conv.turns) <= 1 and settings.model_choice == AS_CONFIGURED
            else None
        )
        if first_use:
            st.info(html.plain(first_use), icon=":material/smart_toy:")
        if not at.thread:
            st.info("No message yet. Say something below — the demo model answers offline.")
            return
        visible = thread_page(
            at.thread, at.selected, key=ctx.key(keys.SHOWN), on_newest=lambda: actions.select(at.thread_ids[-1])
        )
        # "Replies might now differ" for the turns on this page only: a page costs the same at any length.
        differs: dict[str, list[str]] = {}
        for nid, ov in at.overrides.items():
            wi = data.what_if_turns(
                ctx.url,
                ctx.conversation_id,
                ctx.stamp,
                ctx.info.flow_version_id,
                nid,
                json.dumps(at.baselines[nid].to_dict(), sort_keys=True),
                json.dumps(ov, sort_keys=True),
                ctx.fidelity,
                ctx.counting,
                tuple(visible),
            )
            for p in wi.differs:
                differs.setdefault(conv.turns[p].id, []).append(ctx.node_titles[nid])
        items = transcript(
            conv,
            visible,
            at.selected,
            at.ledgers,
            ctx.titles,
            node_filter=None if settings.node_filter == "all" else settings.node_filter,
        )
        siblings = {}
        for p in visible:
            sib = ctx.svc.siblings(conv, conv.turns[p].id)
            siblings[conv.turns[p].id] = (sib.index, sib.count, sib.ids)
        failed = {conv.turns[p].id: turn_problem(conv.turns[p]) for p in visible if turn_problem(conv.turns[p])}
        render_transcript(
            items,
            siblings=siblings,
            failed=failed,
            differs=differs,
            actions=actions.turn,
            conversation_only=settings.conversation_only,
            key=ctx.key(keys.TRANSCRIPT_TURNS),
        )


def _variables(ctx: DebugContext, at: Inspected) -> None:
    conv, tree = ctx.conversation, ctx.conversation.tree
    declared = [v.name for v in ctx.flow.variables]
    variables = sorted(
        ctx.svc.variables(ctx.conversation_id),
        key=lambda v: declared.index(v.name) if v.name in declared else len(declared),
    )
    history = data.variable_history(ctx.url, ctx.conversation_id, ctx.stamp)
    values = (
        data.variables_at(ctx.url, ctx.conversation_id, ctx.stamp, ctx.info.flow_version_id, at.selected_id)
        if at.selected_id
        else None
    )
    label = f"after {turn_label(conv, at.selected)}" if at.selected is not None else ""
    render_variables(
        ctx.svc,
        ctx.conversation_id,
        variables,
        values,
        label,
        history,
        # a change's turn as labelled on its thread, named only for the page of changes shown
        lambda t: turn_label(conv, tree.position[t]).removeprefix("turn ") if t in tree.position else "—",
        key=ctx.key(keys.VARIABLES),
        branched=len(at.thread) < len(conv.turns),
        node_names=ctx.node_names,
    )
