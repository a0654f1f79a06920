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

Where each rule lives:

* Threading calls into conversations: the conversation a call's history repeats, its turn (a branch for a
  regenerated answer or an edited question, a step for an agent's next request, a retry), its node (system
  prompt and tools), and the thread messages its payload held: `core/capture/threader.py` (`Threader.place`,
  `thread_calls`); the same for a proxy's calls and an imported trace's (`read_calls` in
  `core/io/readers/calls.py`, used by Langfuse, LangSmith, Dify node runs and OpenAI request files).
* The observed ledger (what a payload held, in the shared reasons; `not_sent` for a gap no window leaves) and
  the payload as a receipt: `core/capture/observed.py`; the reason and its words in `core/model/ledger.py`
  (`NOT_SENT`, `OBSERVED`, `_explain_observed`).
* A captured conversation in the store (each call a node run, `emulated: false`; its nodes in the
  conversation's `meta["capture"]`), written in batches off the request path (a recorder process) and read
  back when the proxy restarts: `core/capture/stored.py`, `core/proxy/recorder.py`.
* The rule behind a node's calls: the candidates, judged by their replay (`node_replay`, which `replay
  --conversation --node` uses too), the simplest first, the equivalents, where a named platform differs;
  `python -m core infer`: `core/capture/inference.py`, `core/cli/commands/infer.py`.
* What the Debugger shows of a captured conversation (observed lenses, the explaining rule's reasons, inferred
  lenses): `core/capture/view.py`, drawn by `ui/observed_view.py` in the replay view.
"""

from core import public_api

__all__, __getattr__ = public_api(
    __name__,
    {
        "errors": ("CaptureError",),
        "inference": ("Explanation", "NodeInference", "infer_conversation", "infer_stored", "node_replay", "rule_args"),
        "observed": ("observed_ledger", "payload_rows"),
        "stored": ("as_conversation", "nodes_of"),
        "calls": ("Call", "message_key"),
        "threader": ("Threader", "thread_calls"),
        "view": ("NodeView", "captured_view", "observed_run"),
    },
)
