"""Reusable Streamlit pieces. Pages stay thin: read state, call core, render with these.

Where each rule lives:

* Escaping user text for markdown and HTML: `ui/html.py` (`plain`, `safe_text`).
* A flow's import notes (what MemLens runs differently from Dify, or not at all) on the Debugger, Compare and
  Present: `ui/flow_notes.py` (`render_flow_notes`); the notes themselves come from the readers
  (`Flow.warnings`).
* A memory config's widgets (switchboard, Compare, Ledger explorer): `ui/config_editor.py`, which draws the
  common settings' and the chosen system's declared widgets (`Widget`); validation: `MemoryConfig.validate`.
* A flow's start form, filled in before a conversation starts (the Debugger's New conversation):
  `ui/start_form.py` (`start_form`); the form's fields in `Flow.start_fields` (`core/flow/graph.py`), also
  what the API's `user_input_form` lists; the values checked and converted when a turn runs, in
  `_check_inputs` (`core/flow/runtime.py`).
* Every session key, and how one page hands something to another: `ui/state.py`.
* The Debugger's address: the open conversation and inspected turn it names, opened on a session's first
  visit: `ui/links.py` (`open_linked`, `link_to`; used by `pages/debugger.py` and `ui/replay_view.py`).
"""
