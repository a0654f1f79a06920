"""The capture proxy: model calls recorded as they are sent.

* ``server`` — the OpenAI- and Anthropic-compatible proxy (``python -m core proxy``): forwards each call
  unchanged (or answers with the demo model: ``demo``; upstream connections: ``upstream``) and hands it
  to the recorder;
* ``exchange`` — one call as the proxy saw it, and the call it stands for (the three APIs' shapes),
  its messages read by the importer's own readers;
* ``recorder`` — threading each call and writing it to the store, off the request path.

It sits above the importer (:mod:`core.io`) and the observed-memory core (:mod:`core.capture`), which
threads calls into conversations for it and for imported traces alike; it never imports Streamlit.

Where each rule lives:

* The capture proxy: its routes, forwarding the body unchanged with the caller's own key, streams piece by
  piece, the Host and body-size refusals, what an upstream timeout, a refused upstream or a client that leaves
  mid-stream leaves, which headers are recorded (`public_headers`): `core/proxy/server.py`; the upstream
  connection (HTTP/1.1 on asyncio streams, httpx behind an HTTP proxy) in `core/proxy/upstream.py`; the demo
  model's answers in each API's shape in `core/proxy/demo.py`; `python -m core proxy` in
  `core/cli/commands/proxy.py`.
* One model call as the proxy saw it and the call it stands for: the three APIs' requests and replies (a
  stream put together), usage, pins (`X-MemLens-Conversation`, `metadata`), the user:
  `core/proxy/exchange.py`.
"""

from core import public_api

__all__, __getattr__ = public_api(
    __name__,
    {
        "exchange": ("Exchange", "call_of"),
        "recorder": ("Recorder", "load_threader", "save_threads"),
        "server": ("CaptureProxy",),
    },
)
