"""Observed memory: model calls (captured by :mod:`core.proxy` or read from a trace) threaded into
conversations and explained.

* ``threader`` — which conversation, turn and node a call belongs to, and which earlier messages its
  payload held (the proxy's calls and an imported trace's alike);
* ``text_history`` — a history sent as ``Human: …`` / ``Assistant: …`` lines inside one message, read
  as the call's history;
* ``observed`` — those sets as a ledger (the shared reason vocabulary) and the payload as a receipt;
* ``stored`` — a captured conversation as the store keeps it, and back;
* ``inference`` — the memory rules MemLens emulates whose replay gives the observed sets
  (``python -m core infer``), and where a named platform's emulation differs;
* ``view`` — what the Debugger shows of a captured conversation: each node's observed markers, its
  payload as the receipt, its inferred rule and fit.

It sits below the importer, the proxy and the service layer and above the memory core: it reads and
writes the store, replays through :class:`core.memory.replay.Replay`, and never imports Streamlit.
"""

from core import public_api

__all__, __getattr__ = public_api(__name__, {
    "errors": ("CaptureError",),
    "inference": ("Explanation", "NodeInference", "infer_conversation", "infer_stored", "node_replay", "rule_args"),
    "observed": ("observed_ledger", "payload_rows"),
    "stored": ("as_conversation", "nodes_of"),
    "threader": ("Call", "Threader", "message_key", "thread_calls"),
    "view": ("NodeView", "captured_view", "observed_run"),
})
