"""The capture proxy: model calls recorded as they are sent.

* ``server`` — the OpenAI- and Anthropic-compatible proxy (``python -m core proxy``): forwards each call
  unchanged (or answers with the demo model: ``demo``; upstream connections: ``upstream``) and hands it
  to the recorder;
* ``exchange`` — one call as the proxy saw it, and the call it stands for (the three APIs' shapes),
  its messages read by the importer's own readers;
* ``recorder`` — threading each call and writing it to the store, off the request path.

It sits above the importer (:mod:`core.io`) and the observed-memory core (:mod:`core.capture`), which
threads calls into conversations for it and for imported traces alike; it never imports Streamlit.
"""

from core import public_api

__all__, __getattr__ = public_api(__name__, {
    "exchange": ("Exchange", "call_of"),
    "recorder": ("Recorder", "load_threader", "save_threads"),
    "server": ("CaptureProxy",),
})
