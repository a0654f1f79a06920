"""The inspector's context receipt tab: for the inspected turn, one tab per node that called a model, opened
on the node whose memory changed most, each with its receipt (under the switchboard's what-if when the node
was changed), its recalled memories and its whole ledger on demand; an agent's tab adds its tool steps."""

from __future__ import annotations

import json
from dataclasses import dataclass, field

import streamlit as st

from core.analysis import focus_node, node_receipt
from core.analysis.findings import quoted
from core.flow import what_if_prompt
from core.memory import MemoryConfig
from core.memory.strategies import strategy_of
from core.model import Ledger
from ui import data, html
from ui import state as keys
from ui.debug_context import DebugContext
from ui.ledger_table import render_ledger_table
from ui.memories_panel import render_agent_run, render_recalled
from ui.receipt_view import render_receipt


@dataclass
class Inspected:
    """The active thread and its inspected turn, with what each node ran with there.

    ``baselines`` are the settings the inspected turn ran with (recorded with each node run; the flow's for a
    node that did not run); ``overrides`` each node the switchboard changed, as a whole config; ``ledgers``
    each node's ledger at the turn — the what-if ledger where it was changed."""

    thread_ids: list[str]
    thread: list[int]
    selected_id: str | None
    selected: int | None
    runs: dict[str, dict]
    for_new_turns: dict[str, MemoryConfig]
    baselines: dict[str, MemoryConfig]
    overrides: dict[str, dict] = field(default_factory=dict)
    ledgers: dict[str, Ledger] = field(default_factory=dict)

    @classmethod
    def of(cls, ctx: DebugContext, thread_ids: list[str]) -> "Inspected":
        """The inspected turn is the session's pick when it is on the active thread, else the thread's newest."""
        tree = ctx.conversation.tree
        selected_id = st.session_state.get(keys.SELECTED_TURN)
        if selected_id not in thread_ids:
            selected_id = thread_ids[-1] if thread_ids else None
            st.session_state[keys.SELECTED_TURN] = selected_id
        runs = ctx.node_runs(selected_id) if selected_id else {}
        for_new_turns = ctx.for_new_turns()
        baselines = {
            n.id: data.recorded_config(runs[n.id]) if (runs.get(n.id) or {}).get("memory") else for_new_turns[n.id]
            for n in ctx.memory_nodes
        }
        return cls(
            thread_ids=thread_ids,
            thread=[tree.position[t] for t in thread_ids],
            selected_id=selected_id,
            selected=tree.position[selected_id] if selected_id else None,
            runs=runs,
            for_new_turns=for_new_turns,
            baselines=baselines,
        )

    def what_if(self, ctx: DebugContext, overrides: dict[str, dict]) -> None:
        """Take the switchboard's changes: each changed node's ledger becomes its what-if ledger."""
        self.overrides = overrides
        self.ledgers = {nid: r["ledger"] for nid, r in self.runs.items() if r.get("ledger") is not None}
        if overrides and self.selected_id:
            self.ledgers.update(
                data.what_if_ledgers(
                    ctx.url,
                    ctx.conversation_id,
                    ctx.stamp,
                    ctx.info.flow_version_id,
                    self.selected_id,
                    json.dumps(overrides, sort_keys=True),
                    ctx.fidelity,
                    ctx.counting,
                )
            )


def render_node_receipts(ctx: DebugContext, at: Inspected) -> None:
    """The receipt tab of the inspected turn (``at.selected_id`` is set)."""
    for rating in ctx.svc.feedbacks(ctx.conversation_id).get(at.selected_id) or []:
        st.caption(
            html.plain(
                f"Rated {rating['rating']} by {rating['user_id']}"
                + (f": {rating['content']}" if rating["content"] else "")
            )
        )
    ran = [n for n in ctx.model_nodes if n.id in at.runs]
    agents = [r for r in at.runs.values() if r.get("type") == "tool-agent"]
    passed = [r for r in at.runs.values() if r.get("emulated") is False]
    if passed:  # what they would have written is unknown here: an empty answer may come from one
        st.caption(
            html.plain(
                "Ran as pass-throughs, their outputs empty (MemLens does not emulate them): "
                + ", ".join(f"{quoted(r.get('title') or r['node_id'])} ({r.get('type')})" for r in passed)
            )
        )
    if not ran and not agents:
        st.info("No node that calls a model ran in this turn.")
        return
    titles = ctx.titles
    labels = [html.plain(titles[n.id]) for n in ran] + [
        html.plain(ctx.node_names.get(r["node_id"], r["node_id"])) for r in agents
    ]
    focus = focus_node(at.ledgers, _ledgers_before(ctx, at), [n.id for n in ran])
    default_tab = labels[[n.id for n in ran].index(focus)] if focus is not None else None
    node_tabs = st.tabs(labels, default=default_tab)
    for run, tab in zip(agents, node_tabs[len(ran) :]):
        with tab:
            agent_id = run["node_id"]
            if at.ledgers.get(agent_id) is not None:  # the agent's first model request, or its what-if
                _receipt(ctx, at, run, ctx.node_titles[agent_id])
            render_agent_run(run, key=f"agent-{at.selected_id}-{agent_id}")
    for node, tab in zip(ran, node_tabs):
        with tab:
            run = at.runs[node.id]
            ledger = at.ledgers.get(node.id)
            other = (
                data.other_profile_ledger(
                    ctx.url,
                    ctx.conversation_id,
                    ctx.stamp,
                    ctx.info.flow_version_id,
                    at.selected_id,
                    node.id,
                    json.dumps(at.overrides.get(node.id) or ctx.stored_overrides.get(node.id) or {}, sort_keys=True),
                    ctx.fidelity,
                    ctx.counting,
                )
                if ledger is not None and strategy_of(ledger.config).has_profiles
                else None
            )
            _receipt(ctx, at, run, titles[node.id], other=other)
            if run.get("recalled"):
                render_recalled(run.get("recalled"), key=f"recalled-{at.selected_id}-{node.id}")
            if (
                ledger is not None
                and ledger.entry_count()
                and st.toggle(
                    f"Show every earlier message ({ledger.entry_count():,}), kept or not", key=f"lt-on-{node.id}"
                )
            ):
                render_ledger_table(
                    ledger,
                    ctx.conversation,
                    key=f"lt-{at.selected_id}-{node.id}",
                    node=titles[node.id],
                    position=at.selected,
                    narrow=True,
                )


def _receipt(ctx: DebugContext, at: Inspected, run: dict, title: str, *, other: Ledger | None = None) -> None:
    """One node's receipt as recorded, or as the switchboard's what-if would send it."""
    node_id = run["node_id"]
    ledger = at.ledgers.get(node_id)
    is_what_if = node_id in at.overrides and ledger is not None
    prompt = (
        what_if_prompt(ctx.flow, ctx.conversation, at.selected, node_id, run.get("prompt") or [], ledger)
        if is_what_if
        else None
    )
    r = node_receipt(
        run, title, ledger=ledger if is_what_if else None, prompt=prompt, other=other, position=at.selected
    )
    render_receipt(r, ledger, key=f"rc-{at.selected_id}-{node_id}", what_if=node_id in at.overrides)


def _ledgers_before(ctx: DebugContext, at: Inspected) -> dict[str, Ledger]:
    """Each node's ledger at the thread's turn before the inspected one (its what-if when changed): the
    receipt opens on the node whose memory changed most since."""
    position = at.thread.index(at.selected) if at.selected in at.thread else 0
    if position == 0:
        return {}
    previous_id = ctx.conversation.turns[at.thread[position - 1]].id
    before = {nid: r["ledger"] for nid, r in ctx.node_runs(previous_id).items() if r.get("ledger") is not None}
    if at.overrides:
        before.update(
            data.what_if_ledgers(
                ctx.url,
                ctx.conversation_id,
                ctx.stamp,
                ctx.info.flow_version_id,
                previous_id,
                json.dumps(at.overrides, sort_keys=True),
                ctx.fidelity,
            )
        )
    return before
