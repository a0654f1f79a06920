"""A captured conversation in the Debugger's replay view: one observed lens per node (its markers are what
each call's payload held, its receipt the payload exactly as sent), the rule inferred for each node and its
fit ("explained by: last 6 messages, 41/41 calls"), and that rule as a lens the switchboard's what-ifs start
from. The logic is :mod:`core.capture.view`; this draws it."""

from __future__ import annotations

import json

import streamlit as st

from core.analysis import Lens, node_receipt
from core.capture import NodeView, captured_view, observed_run
from core.model import Conversation, Ledger
from ui import data
from ui.html import plain
from ui.ledger_table import render_ledger_table
from ui.receipt_view import render_receipt

OBSERVED, INFERRED = "observed-", "inferred-"


@st.cache_resource(show_spinner="Finding the memory rule behind each node…", max_entries=16)
def _views(url: str, conversation_id: str, version: tuple, capture: str) -> list[NodeView] | None:
    conv = data.conversation(url, conversation_id, version)
    runs = {p: data.node_runs(url, conversation_id, version, t.id) for p, t in enumerate(conv.turns)}
    return captured_view(conv, {"capture": json.loads(capture)}, runs)


class ObservedLenses:
    """The observed and inferred lenses of a captured conversation."""

    def __init__(self, views: list[NodeView]):
        self.views = {OBSERVED + v.node.id: v for v in views}
        self.titles = {lens_id: f"Observed · {v.node.title}" for lens_id, v in self.views.items()}
        self.inferred = [
            Lens(INFERRED + v.node.id, f"Inferred · {v.rule_label}", v.rule) for v in views if v.rule is not None
        ]

    def caption(self) -> str:
        return (
            "Captured calls: the “Observed” markers say what each call's payload really held (● in it · ○ left "
            "out · ◌ another branch); the “Inferred” lenses replay the rule that explains them, for what-ifs."
        )

    def fits(self) -> list[str]:
        """Per node, its inferred rule and fit, in words."""
        return [f"{v.node.title}: {v.fit}" for v in self.views.values()]

    def runs_at(self, conversation: Conversation, position: int) -> dict[str, dict]:
        """Each node's call at a turn, as the receipt reads it (nodes that made none there are left out)."""
        out = {}
        for lens_id, view in self.views.items():
            run = observed_run(conversation, view, position)
            if run is not None:
                out[lens_id] = run
        return out

    def ledgers_at(self, conversation: Conversation, position: int) -> dict[str, Ledger]:
        return {lens_id: run["ledger"] for lens_id, run in self.runs_at(conversation, position).items()}

    def render_receipt(self, conversation: Conversation, position: int, lens_id: str, *, key: str) -> None:
        run = observed_run(conversation, self.views[lens_id], position)
        if run is None:
            st.info("This node made no call in this turn.")
            return
        st.caption(plain(self.views[lens_id].fit))
        r = node_receipt(run, self.titles[lens_id], model=run.get("model"))
        render_receipt(r, run["ledger"], key=f"orc-{key}")
        ledger = run["ledger"]
        if ledger.entries and st.toggle(
            f"Show every earlier message ({len(ledger.entries):,}), in the payload or not", key=f"olt-on-{key}"
        ):
            render_ledger_table(ledger, conversation, key=f"olt-{key}", node=self.titles[lens_id], position=position)


def observed_lenses(url: str, info, conversation_id: str, version: tuple) -> ObservedLenses | None:
    """The lenses of a conversation the capture proxy recorded (or a trace's calls threaded); ``None`` for
    any other."""
    capture = info.meta.get("capture") if isinstance(info.meta, dict) else None
    if not isinstance(capture, dict) or not capture.get("nodes"):
        return None
    views = _views(url, conversation_id, version, json.dumps(capture, sort_keys=True))
    return ObservedLenses(views) if views else None
